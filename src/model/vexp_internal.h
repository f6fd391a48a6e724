/* Vector exponentials of the model layer (x86/vexp_avx2.c), and the rule that lets them replace
 * scalar code without changing a bit. Not part of the public API.
 *
 * The contract: every routine here gives, element by element, exactly the bits of the scalar loop
 * it replaces, so a run's results do not depend on whether it runs.
 *
 *   - ufp4_m_expf_sub_avx2 is the C library's expf. On x86-64 with AVX2 and FMA (the only machines
 *     that run it: ufp4_simd_enabled), glibc 2.27 and later compute expf as
 *       z = x * 32/ln2;  k = round-to-nearest-even(z);  r = z - k   (both through fused
 *                                                                   multiply-adds on x * 32/ln2)
 *       2^(k/32) from a 32-entry table of 2^(i/32) with k / 32 added to the exponent field,
 *       y = 2^(k/32) * (1 + c2 r + (c1 + c0 r) r^2),  rounded once to float,
 *     all in double (the algorithm of Szabolcs Nagy's ARM optimized-routines expf, which glibc
 *     adopted). This file does the same operations, four lanes of double at a time, and sends
 *     |x| >= 88 and NaN lanes to libm's expf itself (overflow, underflow, errno). tests/test_vexp.c
 *     compares it with the C library's expf on every one of the 2^32 float inputs. This is an
 *     assumption about the platform: with another C library (musl) or a glibc whose expf
 *     changes, test_vexp fails there, and the vector path must be turned off (UFP4_NO_SIMD) to
 *     keep the scalar code's bits.
 *   - ufp4_m_swiglu_*_avx2 are the loops of swiglu.c with that expf: the same IEEE operations in
 *     the same order on every element (this file, like the whole build, never contracts a multiply
 *     and an add; the only fused multiply-adds are the explicit ones of expf above).
 *   - ufp4_m_exp_cephes_sub_avx2 is cross_entropy.c's 4-lane SSE2 exp on 8 lanes: the same
 *     operations per lane, so the same bits.
 *
 * A machine without AVX2 and FMA, or UFP4_NO_SIMD=1, runs the scalar loops and libm. */
#ifndef UFP4_MODEL_VEXP_INTERNAL_H
#define UFP4_MODEL_VEXP_INTERNAL_H

#include <stddef.h>

#ifdef UFP4_HAVE_X86
/* out[j] = expf(in[j] - sub) for j < n (out may be in). */
void ufp4_m_expf_sub_avx2(float *out, const float *in, float sub, size_t n);

/* out[i] = gate[i] / (1 + expf(-gate[i])) * up[i] for i < n. */
void ufp4_m_swiglu_forward_avx2(float *out, const float *gate, const float *up, size_t n);

/* With sg = 1 / (1 + expf(-g)):  dgate[i] += d * up * sg * (1 + g * (1 - sg)),  dup[i] += d * g * sg. */
void ufp4_m_swiglu_backward_avx2(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, size_t n);

/* One row of attention.c's causal softmax: over p[0..n), mx = the largest p[j] (scanned as the
 * scalar loop does), p[j] = expf(p[j] - mx), sum in double in index order, p[j] *= (float)(1 / sum);
 * then p[n..T) = 0. The same bits as the scalar loop: the maximum is the same value (a +0/-0 tie
 * may pick the other zero, and p[j] - mx, hence expf, is the same for either), the rest is the same
 * operations in the same order. */
void ufp4_m_softmax_row_avx2(float *p, int n, int T);

/* ufp4_m_softmax_row_avx2 on four consecutive rows (row stride ld) of n0, n0 + 1, n0 + 2, n0 + 3
 * entries: each row's double sum still in index order, the four side by side in the lanes of a
 * vector of doubles. */
void ufp4_m_softmax_rows4_avx2(float *p, size_t ld, int n0, int T);

/* attention.c's score gradients for four consecutive rows of n0 .. n0 + 3 keys: per row,
 * c = (float)(sum over j of (double)p[j] * ds[j], in index order; the four rows in the lanes of a
 * double vector), ds[j] = p[j] * (ds[j] - c) * scale for j < n, 0 for n <= j < width. ds rows are
 * ldd apart, p rows ldp apart. */
void ufp4_m_attn_ds_rows4_avx2(float *ds, size_t ldd, const float *p, size_t ldp, int n0, int width,
                               float scale);

/* cross_entropy.c's exp_shifted on 8 lanes: out[j] = exp_cephes(in[j] - sub) for j < n. */
void ufp4_m_exp_cephes_sub_avx2(float *out, const float *in, float sub, int n);
#endif

#endif
