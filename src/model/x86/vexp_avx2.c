/* AVX2 exponentials of the model layer, bit for bit the scalar code they replace: the contract and
 * the algorithm are in model/vexp_internal.h. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "model/vexp_internal.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline, target("avx2,fma")))

/* 2^(i/32) rounded to the nearest double, less i << 47 (so that adding k << 47 for k = 32 q + i
 * gives 2^(i/32) * 2^q directly in the bit pattern). */
static const uint64_t EXP2_32[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

/* The polynomial of 2^(r/32) - 1 on |r| <= 1/2 (the coefficients of 2^u, scaled by 1/32^k). */
#define EXP_C0 (0x1.c6af84b912394p-5 / 32 / 32 / 32)
#define EXP_C1 (0x1.ebfce50fac4f3p-3 / 32 / 32)
#define EXP_C2 (0x1.62e42ff0c52d6p-1 / 32)
#define EXP_INVLN2_32 (0x1.71547652b82fep+0 * 32)
#define EXP_SHIFT 0x1.8p+52 /* adding it rounds a double below 2^51 to an integer, ties to even */

/* expf of 4 floats whose magnitudes are below 88 (the caller sends the others to libm). */
INL __m128 expf4_core(__m128 x) {
  const __m256d shift = _mm256_set1_pd(EXP_SHIFT), inv = _mm256_set1_pd(EXP_INVLN2_32);
  __m256d xd = _mm256_cvtps_pd(x);
  __m256d kds = _mm256_fmadd_pd(inv, xd, shift); /* k + SHIFT: k's bits in the low mantissa */
  __m256d kd = _mm256_sub_pd(kds, shift);
  __m256d r = _mm256_fmsub_pd(inv, xd, kd);
  __m256i ki = _mm256_castpd_si256(kds);
  __m256i t = _mm256_i64gather_epi64((const long long *)EXP2_32,
                                     _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
  __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
  __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(EXP_C0), r, _mm256_set1_pd(EXP_C1));
  __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(EXP_C2), r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(p, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/* expf of 8 floats; lanes with |x| >= 88 or NaN take libm's expf. */
INL __m256 expf8(__m256 x) {
  __m256 y = _mm256_set_m128(expf4_core(_mm256_extractf128_ps(x, 1)), expf4_core(_mm256_castps256_ps128(x)));
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int inside = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(x, absmask), _mm256_set1_ps(88.0f), _CMP_LT_OQ));
  if (inside != 0xff) {
    float xs[8], ys[8];
    _mm256_storeu_ps(xs, x);
    _mm256_storeu_ps(ys, y);
    for (int l = 0; l < 8; l++)
      if (!(inside >> l & 1)) ys[l] = expf(xs[l]);
    y = _mm256_loadu_ps(ys);
  }
  return y;
}

AVX2 void ufp4_m_expf_sub_avx2(float *out, const float *in, float sub, size_t n) {
  const __m256 s = _mm256_set1_ps(sub);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, expf8(_mm256_sub_ps(_mm256_loadu_ps(in + j), s)));
  for (; j < n; j++) out[j] = expf(in[j] - sub);
}

AVX2 void ufp4_m_swiglu_forward_avx2(float *out, const float *gate, const float *up, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 e = expf8(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; i++) {
    float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

AVX2 void ufp4_m_swiglu_backward_avx2(float *dgate, float *dup, const float *dout, const float *gate,
                                      const float *up, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i), d = _mm256_loadu_ps(dout + i);
    __m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, expf8(_mm256_xor_ps(g, sign))));
    __m256 dg = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(up + i)), sg),
                              _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, sg))));
    _mm256_storeu_ps(dgate + i, _mm256_add_ps(_mm256_loadu_ps(dgate + i), dg));
    _mm256_storeu_ps(dup + i, _mm256_add_ps(_mm256_loadu_ps(dup + i), _mm256_mul_ps(_mm256_mul_ps(d, g), sg)));
  }
  for (; i < n; i++) {
    float g = gate[i];
    float sg = 1.0f / (1.0f + expf(-g));
    float d = dout[i];
    dgate[i] += d * up[i] * sg * (1.0f + g * (1.0f - sg));
    dup[i] += d * g * sg;
  }
}

/* cross_entropy.c's exp4, line for line, on 8 lanes. */
INL __m256 exp8_cephes(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f), magic = _mm256_set1_ps(12582912.0f);
  const __m256 c1 = _mm256_set1_ps(0.693359375f), c2 = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f);
  __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, log2e), magic), magic);
  __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(n, c1)), _mm256_mul_ps(n, c2));
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  __m256 inside = _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_GT_OQ), _mm256_cmp_ps(x, hi, _CMP_LT_OQ));
  int in = _mm256_movemask_ps(inside);
  if (in != 0xff) {
    float xs[8], ys[8];
    _mm256_storeu_ps(xs, x);
    _mm256_storeu_ps(ys, y);
    for (int l = 0; l < 8; l++)
      if (!(in >> l & 1)) ys[l] = expf(xs[l]);
    y = _mm256_loadu_ps(ys);
  }
  return y;
}

AVX2 void ufp4_m_exp_cephes_sub_avx2(float *out, const float *in, float sub, int n) {
  const __m256 s = _mm256_set1_ps(sub);
  int j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, exp8_cephes(_mm256_sub_ps(_mm256_loadu_ps(in + j), s)));
  if (j < n) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int l = 0; l < n - j; l++) t[l] = in[j + l];
    _mm256_storeu_ps(t, exp8_cephes(_mm256_sub_ps(_mm256_loadu_ps(t), s)));
    for (int l = 0; l < n - j; l++) out[j + l] = t[l];
  }
}

/* The largest of m's lanes by the same rule as the scalar scan (a lane replaces the running value
 * only when it is greater; NaN never is). */
INL float hmax_gt(__m256 m, float start) {
  float l[8], mx = start;
  _mm256_storeu_ps(l, m);
  for (int i = 0; i < 8; i++)
    if (l[i] > mx) mx = l[i];
  return mx;
}

AVX2 void ufp4_m_softmax_row_avx2(float *p, int n, int T) {
  float mx = -FLT_MAX;
  int j = 0;
  if (n >= 8) {
    __m256 m = _mm256_set1_ps(-FLT_MAX);
    for (; j + 8 <= n; j += 8) {
      __m256 x = _mm256_loadu_ps(p + j);
      m = _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ));
    }
    mx = hmax_gt(m, mx);
  }
  for (; j < n; j++)
    if (p[j] > mx) mx = p[j];
  ufp4_m_expf_sub_avx2(p, p, mx, (size_t)n);
  double sum = 0.0;
  for (j = 0; j < n; j++) sum += p[j]; /* in order, in double: the scalar loop's rounding */
  const float inv = (float)(1.0 / sum);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), vinv));
  for (; j < n; j++) p[j] *= inv;
  for (j = n; j < T; j++) p[j] = 0.0f;
}

/* Columns j .. j+3 of rows r[0..3] as v[c] = column j + c of the four rows (as doubles, low and
 * high pairs: d[c]). */
INL void cols4_pd(const float *const r[4], int j, __m256d d[4]) {
  __m128 v0 = _mm_loadu_ps(r[0] + j), v1 = _mm_loadu_ps(r[1] + j);
  __m128 v2 = _mm_loadu_ps(r[2] + j), v3 = _mm_loadu_ps(r[3] + j);
  _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
  d[0] = _mm256_cvtps_pd(v0);
  d[1] = _mm256_cvtps_pd(v1);
  d[2] = _mm256_cvtps_pd(v2);
  d[3] = _mm256_cvtps_pd(v3);
}

/* Each row's max scan and expf as ufp4_m_softmax_row_avx2, then the four double sums side by side. */
AVX2 void ufp4_m_softmax_rows4_avx2(float *p, size_t ld, int n0, int T) {
  float *r[4] = {p, p + ld, p + 2 * ld, p + 3 * ld};
  for (int l = 0; l < 4; l++) {
    const int n = n0 + l;
    float mx = -FLT_MAX;
    int j = 0;
    if (n >= 8) {
      __m256 m = _mm256_set1_ps(-FLT_MAX);
      for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(r[l] + j);
        m = _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ));
      }
      mx = hmax_gt(m, mx);
    }
    for (; j < n; j++)
      if (r[l][j] > mx) mx = r[l][j];
    ufp4_m_expf_sub_avx2(r[l], r[l], mx, (size_t)n);
  }
  __m256d acc = _mm256_setzero_pd(); /* lane l: row l's sum, in index order */
  int j = 0;
  for (; j + 4 <= n0; j += 4) {
    const float *rc[4] = {r[0], r[1], r[2], r[3]};
    __m256d d[4];
    cols4_pd(rc, j, d);
    for (int c = 0; c < 4; c++) acc = _mm256_add_pd(acc, d[c]);
  }
  double sum[4];
  _mm256_storeu_pd(sum, acc);
  for (int l = 0; l < 4; l++) {
    const int n = n0 + l;
    for (int k = j; k < n; k++) sum[l] += r[l][k];
    const float inv = (float)(1.0 / sum[l]);
    const __m256 vinv = _mm256_set1_ps(inv);
    int k = 0;
    for (; k + 8 <= n; k += 8) _mm256_storeu_ps(r[l] + k, _mm256_mul_ps(_mm256_loadu_ps(r[l] + k), vinv));
    for (; k < n; k++) r[l][k] *= inv;
    for (k = n; k < T; k++) r[l][k] = 0.0f;
  }
}

AVX2 void ufp4_m_attn_ds_rows4_avx2(float *ds, size_t ldd, const float *p, size_t ldp, int n0, int width,
                                    float scale) {
  float *d[4] = {ds, ds + ldd, ds + 2 * ldd, ds + 3 * ldd};
  const float *pr[4] = {p, p + ldp, p + 2 * ldp, p + 3 * ldp};
  __m256d acc = _mm256_setzero_pd(); /* lane l: row l's sum of p dp, in index order */
  int j = 0;
  for (; j + 4 <= n0; j += 4) {
    const float *dr[4] = {d[0], d[1], d[2], d[3]};
    __m256d a[4], b[4];
    cols4_pd(pr, j, a);
    cols4_pd(dr, j, b);
    for (int c = 0; c < 4; c++) acc = _mm256_add_pd(acc, _mm256_mul_pd(a[c], b[c]));
  }
  double pdp[4];
  _mm256_storeu_pd(pdp, acc);
  const __m256 vs = _mm256_set1_ps(scale);
  for (int l = 0; l < 4; l++) {
    const int n = n0 + l;
    for (int k = j; k < n; k++) pdp[l] += (double)pr[l][k] * d[l][k];
    const float c = (float)pdp[l];
    const __m256 vc = _mm256_set1_ps(c);
    int k = 0;
    for (; k + 8 <= n; k += 8) {
      __m256 x = _mm256_mul_ps(_mm256_loadu_ps(pr[l] + k), _mm256_sub_ps(_mm256_loadu_ps(d[l] + k), vc));
      _mm256_storeu_ps(d[l] + k, _mm256_mul_ps(x, vs));
    }
    for (; k < n; k++) d[l][k] = pr[l][k] * (d[l][k] - c) * scale;
    for (k = n; k < width; k++) d[l][k] = 0.0f;
  }
}
