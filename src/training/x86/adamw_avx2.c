/* AdamW on AVX2, 8 parameters at a time: adamw_internal.h. target("avx2") without "fma", so the
 * compiler cannot contract a multiply and an add into one rounding: the bits are the reference's. */
#include <immintrin.h>

#include "training/adamw_internal.h"

__attribute__((target("avx2"))) void ufp4_adamw_span_avx2(float *p, const float *g, float *m, float *v, size_t n,
                                                          const ufp4_adamw_consts *k, float wd) {
  const __m256 b1 = _mm256_set1_ps(k->b1), c1 = _mm256_set1_ps(1.0f - k->b1);
  const __m256 b2 = _mm256_set1_ps(k->b2), c2 = _mm256_set1_ps(1.0f - k->b2);
  const __m256 bc1 = _mm256_set1_ps(k->bc1), bc2 = _mm256_set1_ps(k->bc2), eps = _mm256_set1_ps(k->eps);
  const __m256 lr = _mm256_set1_ps(k->lr), gs = _mm256_set1_ps(k->gscale), wdv = _mm256_set1_ps(wd);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    __m256 mhat = _mm256_div_ps(mi, bc1), vhat = _mm256_div_ps(vi, bc2);
    __m256 pi = _mm256_loadu_ps(p + i);
    __m256 upd = _mm256_add_ps(_mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps)), _mm256_mul_ps(wdv, pi));
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(lr, upd)));
  }
  if (i < n) ufp4_adamw_span_ref(p + i, g + i, m + i, v + i, n - i, k, wd);
}
