/* RMSNorm on AVX2, bit for bit rmsnorm.c's loops (the contract is in model/rmsnorm_internal.h). */
#include <immintrin.h>
#include <math.h>

#include "model/rmsnorm_internal.h"

#define AVX2 __attribute__((target("avx2")))
#define INL static inline __attribute__((always_inline, target("avx2")))

/* Columns j .. j+3 of rows p[0..3] as four vectors, column c of the four rows in v[c]. */
INL void load4x4(const float *const p[4], int j, __m128 v[4]) {
  v[0] = _mm_loadu_ps(p[0] + j);
  v[1] = _mm_loadu_ps(p[1] + j);
  v[2] = _mm_loadu_ps(p[2] + j);
  v[3] = _mm_loadu_ps(p[3] + j);
  _MM_TRANSPOSE4_PS(v[0], v[1], v[2], v[3]);
}

AVX2 void ufp4_m_rmsnorm_forward4_avx2(float *out, float *rstd, const float *x, const float *w, int C, float eps) {
  const float *rows[4] = {x, x + C, x + 2 * (size_t)C, x + 3 * (size_t)C};
  __m256d ss = _mm256_setzero_pd(); /* lane l: row l's sum of squares, in index order */
  for (int j = 0; j < C; j += 4) {
    __m128 v[4];
    load4x4(rows, j, v);
    for (int c = 0; c < 4; c++) {
      __m256d d = _mm256_cvtps_pd(v[c]);
      ss = _mm256_add_pd(ss, _mm256_mul_pd(d, d));
    }
  }
  double s[4];
  _mm256_storeu_pd(s, ss);
  for (int l = 0; l < 4; l++) {
    const float r = (float)(1.0 / sqrt(s[l] / C + (double)eps));
    rstd[l] = r;
    const __m256 rv = _mm256_set1_ps(r);
    const float *xi = rows[l];
    float *oi = out + (size_t)l * C;
    int j = 0;
    for (; j + 8 <= C; j += 8)
      _mm256_storeu_ps(oi + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xi + j), rv), _mm256_loadu_ps(w + j)));
    for (; j < C; j++) oi[j] = (xi[j] * r) * w[j];
  }
}

AVX2 void ufp4_m_rmsnorm_backward_dx4_avx2(float *dx, const float *dout, const float *x, const float *w,
                                           const float *rstd, int C) {
  const float *xr[4] = {x, x + C, x + 2 * (size_t)C, x + 3 * (size_t)C};
  const float *gr[4] = {dout, dout + C, dout + 2 * (size_t)C, dout + 3 * (size_t)C};
  __m256d acc = _mm256_setzero_pd(); /* lane l: sum of g w x over row l, in index order */
  for (int j = 0; j < C; j += 4) {
    __m128 g[4], xv[4];
    load4x4(gr, j, g);
    load4x4(xr, j, xv);
    for (int c = 0; c < 4; c++) {
      __m256d t = _mm256_mul_pd(_mm256_cvtps_pd(g[c]), _mm256_set1_pd((double)w[j + c]));
      acc = _mm256_add_pd(acc, _mm256_mul_pd(t, _mm256_cvtps_pd(xv[c])));
    }
  }
  double s[4];
  _mm256_storeu_pd(s, acc);
  for (int l = 0; l < 4; l++) {
    const float r = rstd[l];
    const float k = (float)((double)r * r * r * s[l] / C);
    const __m256 rv = _mm256_set1_ps(r), kv = _mm256_set1_ps(k);
    const float *xi = xr[l], *gi = gr[l];
    float *dxi = dx + (size_t)l * C;
    int j = 0;
    for (; j + 8 <= C; j += 8) {
      __m256 t = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(rv, _mm256_loadu_ps(gi + j)), _mm256_loadu_ps(w + j)),
                               _mm256_mul_ps(_mm256_loadu_ps(xi + j), kv));
      _mm256_storeu_ps(dxi + j, _mm256_add_ps(_mm256_loadu_ps(dxi + j), t));
    }
    for (; j < C; j++) dxi[j] += r * gi[j] * w[j] - xi[j] * k;
  }
}

AVX2 void ufp4_m_rmsnorm_dw_avx2(double *acc, const float *dout, const float *x, const float *rstd, int N, int C,
                                 int c0, int c1) {
  for (int i = 0; i < N; i++) {
    const float *xi = x + (size_t)i * C, *gi = dout + (size_t)i * C;
    const __m256d r = _mm256_set1_pd((double)rstd[i]);
    int j = c0;
    for (; j + 4 <= c1; j += 4) {
      __m256d t = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(gi + j)), _mm256_cvtps_pd(_mm_loadu_ps(xi + j)));
      _mm256_storeu_pd(acc + (j - c0), _mm256_add_pd(_mm256_loadu_pd(acc + (j - c0)), _mm256_mul_pd(t, r)));
    }
    for (; j < c1; j++) acc[j - c0] += (double)gi[j] * xi[j] * (double)rstd[i];
  }
}
