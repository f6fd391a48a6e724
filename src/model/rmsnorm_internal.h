/* RMSNorm's AVX2 kernels (x86/rmsnorm_avx2.c). Not part of the public API.
 *
 * The contract: the bits of rmsnorm.c's scalar loops. Those sum each row in double, one element
 * after the other, a chain of dependent adds that a row cannot split without changing the sum.
 * These kernels keep every row's order and run four rows at once instead, one per lane of a
 * vector of doubles (four rows' columns j .. j+3 transposed into four vectors); the per-element
 * work is the same IEEE operations in the same order, 8 floats at a time (no multiply-add is ever
 * contracted: the build forbids it). tests/test_layer_simd.c compares them with the scalar loops. */
#ifndef UFP4_MODEL_RMSNORM_INTERNAL_H
#define UFP4_MODEL_RMSNORM_INTERNAL_H

#ifdef UFP4_HAVE_X86
/* Rows 0..3 of x (row stride C, a multiple of 4): rstd[0..3] and out rows 0..3. */
void ufp4_m_rmsnorm_forward4_avx2(float *out, float *rstd, const float *x, const float *w, int C, float eps);
/* Rows 0..3: dx rows += r g w - x k, with k from the row's double sum of g w x (C a multiple of 4). */
void ufp4_m_rmsnorm_backward_dx4_avx2(float *dx, const float *dout, const float *x, const float *w,
                                      const float *rstd, int C);
/* acc[j - c0] += (double)g[i][j] * x[i][j] * rstd[i] over rows i = 0..N-1 in order, j in [c0, c1). */
void ufp4_m_rmsnorm_dw_avx2(double *acc, const float *dout, const float *x, const float *rstd, int N, int C,
                            int c0, int c1);
#endif

#endif
