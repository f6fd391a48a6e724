/* The AVX2 fast Walsh-Hadamard transform of one chunk (rht_internal.h). It computes every output
 * of every butterfly level with the same single IEEE operation on the same operands as the scalar
 * reference in ../rht.c (x[j] = a + b, x[j+h] = a - b), then the same one multiply by the scale,
 * so it gives the same bits; it only reorders independent operations. It is compiled for AVX2
 * without FMA, so no multiply-add can be contracted. */
#include <immintrin.h>

#include "transforms/rht_internal.h"

/* Signs (optional), butterflies and scale of one chunk, n a power of two >= 8. Levels h = 1, 2, 4
 * stay inside one 8-float vector: a lane's partner is fetched by a permute, and the lane keeps
 * a + b when it is the lower element of its pair (it holds a) or partner - self = a - b when it
 * is the upper one (it holds b). Levels h >= 8 pair whole vectors. */
__attribute__((target("avx2"))) void ufp4_rht_chunk_avx2(float *x, int n, const float *signs,
                                                         int signs_first, float scale) {
  if (signs && signs_first)
    for (int i = 0; i < n; i += 8)
      _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(signs + i)));
  for (int i = 0; i < n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 p = _mm256_permute_ps(v, 0xB1); /* lanes 1 0 3 2 */
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
    p = _mm256_permute_ps(v, 0x4E); /* lanes 2 3 0 1 */
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
    p = _mm256_permute2f128_ps(v, v, 0x01); /* halves swapped */
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0);
    _mm256_storeu_ps(x + i, v);
  }
  for (int h = 8; h < n; h <<= 1)
    for (int i = 0; i < n; i += h << 1)
      for (int j = i; j < i + h; j += 8) {
        __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
        _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
      }
  const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if (signs && !signs_first) v = _mm256_mul_ps(v, _mm256_loadu_ps(signs + i));
    _mm256_storeu_ps(x + i, v);
  }
}

