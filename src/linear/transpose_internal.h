/* Operand copies of the linear layer with bf16 rounding fused in (transpose.c). Rounding is
 * elementwise, so rounding on the way gives the bits of ufp4_round_bf16 applied afterwards. */
#ifndef UFP4_GEMM_TRANSPOSE_INTERNAL_H
#define UFP4_GEMM_TRANSPOSE_INTERNAL_H

#include <stddef.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* dst[i] = ufp4_round_bf16(src[i]) for i < n. */
void ufp4_round_bf16_copy(const float *src, float *dst, size_t n);
/* dst [cols, rows] = ufp4_round_bf16(src [rows, cols])^T. */
void ufp4_transpose_round_bf16(const float *src, float *dst, size_t rows, size_t cols);

#ifdef __SSE2__
/* ufp4_round_bf16 on 4 lanes, the same integer steps: RNE on the top 16 bits (a carry may reach the
 * exponent, the largest finite may become Inf), a NaN keeps its top bits and is made quiet. */
static inline __m128 bf16x4(__m128 x) {
  const __m128i u = _mm_castps_si128(x), hi = _mm_set1_epi32((int)0xFFFF0000u);
  const __m128i odd = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
  const __m128i r = _mm_and_si128(_mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7FFF)), odd), hi);
  const __m128i q = _mm_and_si128(_mm_or_si128(u, _mm_set1_epi32(0x00400000)), hi);
  const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7FFFFFFF)), _mm_set1_epi32(0x7F800000));
  return _mm_castsi128_ps(_mm_or_si128(_mm_and_si128(nan, q), _mm_andnot_si128(nan, r)));
}

#endif

#endif
