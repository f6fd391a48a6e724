/* Pins OpenBLAS's kernel set on every x86-64 CPU with AVX2 and FMA (docs/PERFORMANCE.md, "BLAS
 * kernels").
 *
 * OpenBLAS as Debian builds it (DYNAMIC_ARCH) picks its kernel set once, when it loads, from the
 * CPU's vendor, family and model numbers; the environment variable OPENBLAS_CORETYPE overrides the
 * choice. A CPU missing from its table, as virtual machines that call themselves "Intel(R) Xeon(R)
 * Processor" are to OpenBLAS 0.3.21, falls back to the SSE3 "Prescott" kernels although it has AVX2
 * and FMA: on such a 2-core machine a 1024 x 768 x 3072 SGEMM ran at 37 GFLOP/s against 122 with the
 * Haswell kernels. The kernel set also fixes each product's summation order, and so the bits of
 * every training run: pinned to one set on every CPU with AVX2 and FMA, a seed gives the same bits
 * on each of them. Haswell's kernels are the ones OpenBLAS itself runs on Intel CPUs from Haswell on
 * without AVX-512 and, under the name "Zen" (same kernels and bits, test_train's fingerprints), on
 * AMD Zen.
 *
 * Rule: on x86-64 with AVX2 and FMA, when OPENBLAS_CORETYPE is unset and UFP4_BLAS_CORE is not
 * "native", OPENBLAS_CORETYPE becomes UFP4_BLAS_PINNED_CORE. An explicit OPENBLAS_CORETYPE wins;
 * UFP4_BLAS_CORE=native leaves the choice to OpenBLAS (on AVX-512 CPUs faster, with other bits).
 * The tests get the same pin from ctest's environment (CMakeLists.txt). */
#ifndef UFP4_CLI_BLAS_PIN_H
#define UFP4_CLI_BLAS_PIN_H

#define UFP4_BLAS_PINNED_CORE "Haswell"

/* 1 when the rule asks for the pinned set and OpenBLAS loaded another. */
int cli_blas_pin_wanted(void);

/* When cli_blas_pin_wanted(), sets OPENBLAS_CORETYPE and re-executes this program with the same
 * arguments (/proc/self/exe), so that OpenBLAS loads again and reads it; returns only when nothing
 * was to be done or the exec failed. Call first thing in main, before any thread or MPI starts. */
void cli_pin_blas_core(char **argv);

#endif
