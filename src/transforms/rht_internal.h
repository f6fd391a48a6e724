/* Internals of the RHT (rht.c), shared with the quantizer's fused kernels. Not public API. */
#ifndef UFP4_RHT_INTERNAL_H
#define UFP4_RHT_INTERNAL_H

#include <stddef.h>

/* ufp4_rht_rows with the choice of kernel made by the caller (simd 0: scalar FWHT). */
int ufp4_rht_rows_impl(float *x, size_t rows, size_t cols, int n, const float *signs, int simd);
/* The same with no OpenMP region and no checks, for callers inside one (n and cols valid). */
void ufp4_rht_rows_serial(float *x, size_t rows, size_t cols, int n, const float *signs, int simd);

#ifdef UFP4_HAVE_X86
/* x86/rht_avx2.c: signs (optional; applied first when signs_first, else after), butterflies and
 * scale of one chunk of n floats, n a power of two >= 8. */
void ufp4_rht_chunk_avx2(float *x, int n, const float *signs, int signs_first, float scale);
#endif

#endif
