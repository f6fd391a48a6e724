/* CPU features: which kernel family may run on this machine. Internal to the library.
 *
 * Kernels of an instruction set live in an x86/ (or later arm/) subfolder of their layer and are
 * compiled only when the build targets that architecture (UFP4_HAVE_X86, cmake/layers.cmake).
 * The scalar code next to them is the specification they must match bit for bit. */
#ifndef UFP4_CORE_CPU_H
#define UFP4_CORE_CPU_H

/* 1 when the x86 AVX2 kernels may run: they were compiled in, the CPU has AVX2 and FMA, and the
 * environment variable UFP4_NO_SIMD is unset, empty or "0". Read once per process; 0 on a build
 * without the x86 kernels. */
int ufp4_simd_enabled(void);

#endif
