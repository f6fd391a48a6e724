/* AVX2 kernels of the block quantizer, bit-identical to the scalar reference in block_quant.c.
 *
 * How the bits stay the same:
 *   - Every value the reference computes with one IEEE operation (x / s, x * enc, amax / g_max,
 *     code * scale, the RHT's a + b, a - b and * scale) is computed here with the same operation
 *     on the same operands, lane by lane. The file is compiled for AVX2 without FMA, so nothing
 *     can be contracted into a fused multiply-add.
 *   - amax: for non-negative floats the integer order of the bit patterns is the float order, and
 *     NaN/Inf patterns are above every finite one, so one integer max gives both the block's amax
 *     and whether it holds a NaN/Inf.
 *   - Nearest rounding counts the edges below |t| with the comparison the tie rule asks for,
 *     exactly like grid.c's nearest_index.
 *   - Stochastic rounding: the reference tests (double)r < p * 2^32 with p = (a - lo) / step. Every
 *     grid step is a power of two and a - lo is exact (Sterbenz), so T = (a - lo) * (2^32 / step)
 *     is exact in float and T = p * 2^32. For an integer r, r < T iff r < ceil(T); ceil(T) <
 *     2^32 is compared as an unsigned integer. SR8 compares r >> 24 with floor((a - lo) * 256/step)
 *     the same way.
 *   - Block scales other than FP32 (E4M3, E8M0) come from the shared scalar ufp4_q_block_scale,
 *     except in the 1x16 group kernel, whose scales_mx computes 8 at once on the bit patterns
 *     (per-block scalar calls there measured about 2x slower; quant_internal.h), held to the
 *     scalar rule by tests/test_quant_scales_enum.c.
 *   - 4/6 (adaptive scaling): both candidates' errors are summed in the order of the reference's
 *     8 partial sums (element i into sum i mod 8, then ufp4_q_err_reduce's pairing): in block_vec
 *     one block at a time, its vector lanes being the partial sums; in the 1x16 group kernel 8
 *     blocks at a time, lane = block, the partial sums built element by element (choose4_group).
 *   - Blocks the kernels do not vectorize (NaN/Inf or all-zero blocks, blocks whose width is not
 *     a multiple of 8) go to the scalar ufp4_q_do_block.
 *
 * Layout: 1x16 blocks are done 8 at a time (128 consecutive floats of a row), transposed so that
 * register k holds element k of the 8 blocks. The block amax, the scales and the 16-point RHT
 * (fused when the format asks for rht 16) are then plain vertical operations across registers. */
#include "quant/quant_internal.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/philox.h"
#include "ufp4/rht.h"

#define AVX2 __attribute__((target("avx2")))
#define INL static inline __attribute__((always_inline, target("avx2")))

/* Per-grid constants, broadcast once per band. */
typedef struct {
  __m256 edge[7];   /* nearest modes: the grid's edges, +Inf past its top */
  __m256 lvl[7];    /* SR: levels[1..7], +Inf past the top, to count the levels <= |t| */
  __m256 levels;    /* levels[0..7] for lane permutes (indices past the top never occur) */
  __m256 inv32;     /* SR: 2^32 / (levels[i+1] - levels[i]) in lane i (0 at the top) */
  __m256 inv8;      /* SR8: 256 / (levels[i+1] - levels[i]) */
  __m256 gmax;
  __m256 cmin;      /* RNE shortcut: 1.5 * 2^23 * levels[1] (see rne_mag) */
  __m256i nmax;     /* n_levels - 1 */
} qk;

/* Grid classes, a compile-time parameter of the kernels. */
enum { GC_E2M1 = 0, /* E2M1 and its range-restricted variants */
       GC_E1M2 = 1, /* uniform, sign-magnitude */
       GC_INT4 = 2  /* uniform, two's complement: no -0 */ };

INL void qk_init(qk *k, const ufp4_grid *g) {
  float lv[8] = {0}, i32[8] = {0}, i8[8] = {0};
  for (int i = 0; i < 7; i++) {
    k->edge[i] = _mm256_set1_ps(i < g->n_levels - 1 ? g->edges[i] : INFINITY);
    k->lvl[i] = _mm256_set1_ps(i + 1 < g->n_levels ? g->levels[i + 1] : INFINITY);
  }
  for (int i = 0; i < g->n_levels; i++) {
    lv[i] = g->levels[i];
    if (i + 1 < g->n_levels) {
      float step = g->levels[i + 1] - g->levels[i];
      i32[i] = 4294967296.0f / step;
      i8[i] = 256.0f / step;
    }
  }
  k->levels = _mm256_loadu_ps(lv);
  k->inv32 = _mm256_loadu_ps(i32);
  k->inv8 = _mm256_loadu_ps(i8);
  k->gmax = _mm256_set1_ps(g->g_max);
  k->cmin = _mm256_set1_ps(1.5f * 8388608.0f * g->levels[1]);
  k->nmax = _mm256_set1_epi32(g->n_levels - 1);
}

#define SIGN_BIT _mm256_set1_ps(-0.0f)

/* Magnitude index of a = |t| (finite or +Inf, never NaN), as ufp4_round_index. */
INL __m256i round_idx(const qk *k, __m256 a, __m256i rb, const int mode) {
  __m256i c;
  if (mode == UFP4_ROUND_RNE || mode == UFP4_ROUND_RNA || mode == UFP4_ROUND_RNZ) {
    /* Edge e counts when a is above it, or on it when the tie goes up: RNA always, RNZ never,
     * RNE when level e+1 is even (e odd). */
    /* The predicate of _mm256_cmp_ps must be a literal for clang, so each choice is spelled out;
     * mode is a constant at every inlined call site and the untaken compare folds away. */
#define CMP(e, GE)                                                                  \
  ((GE) ? _mm256_castps_si256(_mm256_cmp_ps(a, k->edge[e], _CMP_GE_OQ))             \
        : _mm256_castps_si256(_mm256_cmp_ps(a, k->edge[e], _CMP_GT_OQ)))
#define EV (mode == UFP4_ROUND_RNA)
#define OD (mode != UFP4_ROUND_RNZ)
    __m256i s0 = _mm256_add_epi32(CMP(0, EV), CMP(1, OD));
    __m256i s1 = _mm256_add_epi32(CMP(2, EV), CMP(3, OD));
    __m256i s2 = _mm256_add_epi32(CMP(4, EV), CMP(5, OD));
    __m256i s3 = CMP(6, EV);
#undef CMP
#undef EV
#undef OD
    c = _mm256_sub_epi32(_mm256_setzero_si256(),
                         _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
    /* Inf and saturated values may count +Inf pads under RNA: clamp to the top level. */
    return _mm256_min_epi32(c, k->nmax);
  }
  /* Stochastic: i = number of levels <= a (the level below), then up or not. */
#define LE(e) _mm256_castps_si256(_mm256_cmp_ps(k->lvl[e], a, _CMP_LE_OQ))
  __m256i s0 = _mm256_add_epi32(LE(0), LE(1));
  __m256i s1 = _mm256_add_epi32(LE(2), LE(3));
  __m256i s2 = _mm256_add_epi32(LE(4), LE(5));
  __m256i s3 = LE(6);
#undef LE
  c = _mm256_sub_epi32(_mm256_setzero_si256(),
                       _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
  __m256i sat = _mm256_castps_si256(_mm256_cmp_ps(a, k->gmax, _CMP_GE_OQ));
  __m256 lo = _mm256_permutevar8x32_ps(k->levels, c);
  __m256 d = _mm256_sub_ps(a, lo);
  __m256i up;
  if (mode == UFP4_ROUND_SR) {
    __m256 u = _mm256_round_ps(_mm256_mul_ps(d, _mm256_permutevar8x32_ps(k->inv32, c)),
                               _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    /* u is an integer in [0, 2^32): compare r < u as unsigned, via both biased by -2^31. */
    const __m256 two31 = _mm256_set1_ps(2147483648.0f);
    const __m256i bias = _mm256_set1_epi32((int)0x80000000u);
    __m256i big = _mm256_castps_si256(_mm256_cmp_ps(u, two31, _CMP_GE_OQ));
    __m256i ub = _mm256_cvttps_epi32(_mm256_sub_ps(u, two31));
    __m256i us = _mm256_xor_si256(_mm256_cvttps_epi32(u), bias);
    __m256i ubias = _mm256_blendv_epi8(us, ub, big);
    up = _mm256_cmpgt_epi32(ubias, _mm256_xor_si256(rb, bias));
  } else {
    __m256 fl = _mm256_round_ps(_mm256_mul_ps(d, _mm256_permutevar8x32_ps(k->inv8, c)),
                                _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m256 r8 = _mm256_cvtepi32_ps(_mm256_srli_epi32(rb, 24));
    up = _mm256_castps_si256(_mm256_cmp_ps(r8, fl, _CMP_LT_OQ));
  }
  c = _mm256_sub_epi32(c, up);
  return _mm256_blendv_epi8(c, k->nmax, sat);
}

/* The RNE-rounded magnitude (the level itself, not its index) of a = |t|, for y only. Adding
 * c = 1.5 * 2^23 * q rounds a to a multiple of q with the hardware's ties-to-even, exactly
 * (one rounding of an exact sum), and subtracting c is exact. q is the level spacing at a:
 * the grid's step for uniform grids; for E2M1 max(0.5, 2^(floor(log2 a) - 1)), which the
 * integer max builds from a's exponent field. An even multiple of q is an even magnitude index
 * in every E2M1 binade (indices 2m, 2 + m, 4 + m for multiples m of 0.5, 1, 2), so the tie rule
 * is the reference's. Clamping to g_max first gives its saturation. */
INL __m256 rne_mag(const qk *k, __m256 a, const int gc) {
  a = _mm256_min_ps(a, k->gmax);
  __m256 c = k->cmin;
  if (gc == GC_E2M1) {
    __m256i e = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7F800000));
    e = _mm256_add_epi32(e, _mm256_set1_epi32((22 << 23) | 0x400000)); /* 2^e -> 1.5 * 2^(e+22) */
    c = _mm256_castsi256_ps(_mm256_max_epi32(e, _mm256_castps_si256(c)));
  }
  return _mm256_sub_ps(_mm256_add_ps(a, c), c);
}

/* dequant(dec[code], scale) from the level magnitude m and the sign of t. */
INL __m256 y_from_mag(__m256 m, __m256 sgn, __m256 scale, int clamp, const int gc) {
  __m256 v = _mm256_mul_ps(_mm256_or_ps(m, sgn), scale);
  if (gc == GC_INT4) v = _mm256_add_ps(v, _mm256_setzero_ps()); /* INT4 has no -0: -0 + 0 = +0 */
  if (clamp) {
    v = _mm256_max_ps(v, _mm256_set1_ps(-FLT_MAX));
    v = _mm256_min_ps(v, _mm256_set1_ps(FLT_MAX));
  }
  return v;
}

/* dequant(dec[code], scale) for the code of (sign of t, idx); saturated to +-FLT_MAX. */
INL __m256 y_of(const qk *k, __m256 sgn, __m256i idx, __m256 scale, int clamp, const int gc) {
  return y_from_mag(_mm256_permutevar8x32_ps(k->levels, idx), sgn, scale, clamp, gc);
}

/* y for one vector of t: the RNE shortcut, or the index path. */
INL __m256 y_of_t(const qk *k, __m256 t, __m256i rb, __m256 scale, int clamp, const int mode, const int gc) {
  __m256 sgn = _mm256_and_ps(t, SIGN_BIT), a = _mm256_andnot_ps(SIGN_BIT, t);
  if (mode == UFP4_ROUND_RNE) return y_from_mag(rne_mag(k, a, gc), sgn, scale, clamp, gc);
  return y_of(k, sgn, round_idx(k, a, rb, mode), scale, clamp, gc);
}

/* The 4-bit code, as ufp4_encode: sign-magnitude, or two's complement for INT4. */
INL __m256i code_of(__m256 sgn, __m256i idx, const int gc) {
  __m256i neg = _mm256_srai_epi32(_mm256_castps_si256(sgn), 31);
  if (gc == GC_INT4) return _mm256_and_si256(_mm256_sub_epi32(_mm256_xor_si256(idx, neg), neg), _mm256_set1_epi32(15));
  return _mm256_or_si256(idx, _mm256_and_si256(neg, _mm256_set1_epi32(8)));
}

/* 8 int32 codes (0..15) to 8 bytes. */
INL void store_codes8(uint8_t *dst, __m256i c) {
  __m256i p = _mm256_packus_epi32(c, c);  /* 16-bit: c0..3 c0..3 | c4..7 c4..7 */
  p = _mm256_packus_epi16(p, p);          /* bytes: c0..3 x4 | c4..7 x4 */
  __m256i q = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
  _mm_storel_epi64((__m128i *)dst, _mm256_castsi256_si128(q));
}

INL uint32_t hmax_epi32(__m256i m) {
  __m128i v = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return (uint32_t)_mm_cvtsi128_si32(v);
}

INL float bits2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Whether code * scale may exceed FLT_MAX, so y needs the saturation (scales below 2^100 never
 * reach it: |code| <= 7). */
INL int need_clamp(__m256 scales) {
  return _mm256_movemask_ps(_mm256_cmp_ps(scales, _mm256_set1_ps(0x1p100f), _CMP_GE_OQ)) != 0;
}

/* 4/6's error of one block (w a multiple of 8) quantized with the ordinary scale s, as the
 * reference's candidate_error: vector lane l holds partial sum l, since element i of the block
 * lands in lane i mod 8 when w is a multiple of 8. */
INL float cand_err_vec(const ufp4_qjob *j, const qk *k, const float *src, size_t sstride,
                       const uint32_t *rb, size_t h, size_t w, blk_scale s, const int mode,
                       const int gc) {
  const ufp4_adaptive_metric m = j->f->metric;
  const __m256 sc = _mm256_set1_ps(s.scale), en = _mm256_set1_ps(s.enc);
  const int mul = s.mode == BLK_MUL, clamp = need_clamp(sc);
  __m256 acc = _mm256_setzero_ps();
  for (size_t i = 0; i < h; i++) {
    const float *p = src + i * sstride;
    const uint32_t *rr = rb ? rb + i * j->cols : NULL;
    for (size_t c = 0; c < w; c += 8) {
      __m256 x = _mm256_loadu_ps(p + c);
      __m256 t = mul ? _mm256_mul_ps(x, en) : _mm256_div_ps(x, sc);
      __m256i rbits = rr ? _mm256_loadu_si256((const __m256i *)(rr + c)) : _mm256_setzero_si256();
      __m256 e = _mm256_sub_ps(y_of_t(k, t, rbits, sc, clamp, mode, gc), x);
      __m256 v = m == UFP4_METRIC_MSE ? _mm256_mul_ps(e, e) : _mm256_andnot_ps(SIGN_BIT, e);
      acc = m == UFP4_METRIC_MAXABS ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
    }
  }
  float l[8];
  _mm256_storeu_ps(l, acc);
  return ufp4_q_err_reduce(l, m);
}

/* One block of h rows x w cols (w a multiple of 8); src row stride sstride, rb row stride cols.
 * NaN/Inf and zero blocks go to the scalar reference (src must then have stride cols or h = 1). */
INL void block_vec(const ufp4_qjob *j, const qk *k, const float *src, size_t sstride,
                   const uint32_t *rb, size_t r0, size_t c0, size_t h, size_t w, size_t sidx,
                   const int mode, const int gc) {
  const size_t cols = j->cols;
  const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m = _mm256_setzero_si256();
  for (size_t i = 0; i < h; i++)
    for (size_t c = 0; c < w; c += 8)
      m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + i * sstride + c)), absm));
  uint32_t ab = hmax_epi32(m);
  blk_scale s = ufp4_q_block_scale(j, bits2f(ab), ab > 0x7F7FFFFFu);
  if (s.mode != BLK_DIV && s.mode != BLK_MUL) {
    ufp4_q_do_block(j, src, rb, r0, c0, h, w, sidx);
    return;
  }
  if (j->g4) {
    blk_scale s4 = ufp4_q_block_scale_to(j, bits2f(ab), 0, j->g4);
    int four = ufp4_q_adaptive_applies(j, s, s4) &&
               cand_err_vec(j, k, src, sstride, rb, h, w, s4, mode, gc) <
                   cand_err_vec(j, k, src, sstride, rb, h, w, s, mode, gc);
    if (four) s = s4;
    if (j->four) j->four[sidx] = (uint8_t)four;
  }
  if (j->scales) j->scales[sidx] = s.scale;
  if (j->scale_bits) j->scale_bits[sidx] = s.bits;
  const __m256 sc = _mm256_set1_ps(s.scale), en = _mm256_set1_ps(s.enc);
  const int mul = s.mode == BLK_MUL, clamp = need_clamp(sc);
  for (size_t i = 0; i < h; i++) {
    const float *p = src + i * sstride;
    const uint32_t *rr = rb ? rb + i * cols : NULL;
    size_t o = (r0 + i) * cols + c0;
    for (size_t c = 0; c < w; c += 8) {
      __m256 x = _mm256_loadu_ps(p + c);
      __m256 t = mul ? _mm256_mul_ps(x, en) : _mm256_div_ps(x, sc);
      __m256i rbits = rr ? _mm256_loadu_si256((const __m256i *)(rr + c)) : _mm256_setzero_si256();
      if (j->y) _mm256_storeu_ps(j->y + o + c, y_of_t(k, t, rbits, sc, clamp, mode, gc));
      if (j->codes) {
        __m256 sgn = _mm256_and_ps(t, SIGN_BIT), a = _mm256_andnot_ps(SIGN_BIT, t);
        store_codes8(j->codes + o + c, code_of(sgn, round_idx(k, a, rbits, mode), gc));
      }
    }
  }
}

/* In-place 8x8 transpose of r[0..7]. */
INL void tr8(__m256 *r) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* 8 blocks of 16 whose starts are `stride` floats apart to v[k] = element k of blocks 0..7. */
INL void load_soa_strided(const float *p, size_t stride, __m256 *v) {
  __m256 lo[8], hi[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) {
    lo[b] = _mm256_loadu_ps(p + b * stride);
    hi[b] = _mm256_loadu_ps(p + b * stride + 8);
  }
  tr8(lo);
  tr8(hi);
#pragma GCC unroll 8
  for (int e = 0; e < 8; e++) {
    v[e] = lo[e];
    v[e + 8] = hi[e];
  }
}

/* One half of load_soa_strided: v[e] = element 8 half + e of blocks 0..7. */
INL void load_half_strided(const float *p, size_t stride, int half, __m256 *v) {
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) v[b] = _mm256_loadu_ps(p + b * stride + 8 * half);
  tr8(v);
}

/* 8 blocks of 16 (128 floats at p) to v[k] = element k of blocks 0..7, and back. */
INL void load_soa(const float *p, __m256 *v) { load_soa_strided(p, 16, v); }

/* One half of store_soa: element 8 half + e of blocks 0..7 from v[e] (v is transposed in place). */
INL void store_half(float *p, __m256 *v, int half) {
  tr8(v);
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) _mm256_storeu_ps(p + 16 * b + 8 * half, v[b]);
}

INL void store_soa(float *p, const __m256 *v) {
  __m256 lo[8], hi[8];
#pragma GCC unroll 8
  for (int e = 0; e < 8; e++) {
    lo[e] = v[e];
    hi[e] = v[e + 8];
  }
  tr8(lo);
  tr8(hi);
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) {
    _mm256_storeu_ps(p + 16 * b, lo[b]);
    _mm256_storeu_ps(p + 16 * b + 8, hi[b]);
  }
}

/* x <- x S H on 16-point chunks held as v[k] = element k: the reference's signs (one multiply
 * each), its butterflies in order (x[j] = a + b, x[j+h] = a - b); the multiply by 1/sqrt(16)
 * is left to the caller. */
INL void rht8_levels(__m256 *v, const __m256 *signs) {
  if (signs) {
#pragma GCC unroll 8
    for (int e = 0; e < 8; e++) v[e] = _mm256_mul_ps(v[e], signs[e]);
  }
#pragma GCC unroll 3
  for (int h = 1; h < 8; h <<= 1)
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += h << 1)
#pragma GCC unroll 4
      for (int e = i; e < i + h; e++) {
        __m256 a = v[e], b = v[e + h];
        v[e] = _mm256_add_ps(a, b);
        v[e + h] = _mm256_sub_ps(a, b);
      }
}

/* load_soa with the RHT's per-half levels done as soon as each half is transposed. */
INL void load_soa_rht16(const float *p, __m256 *v, const __m256 *signs) {
  __m256 t[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) t[b] = _mm256_loadu_ps(p + 16 * b);
  tr8(t);
  rht8_levels(t, signs);
#pragma GCC unroll 8
  for (int e = 0; e < 8; e++) v[e] = t[e];
#pragma GCC unroll 8
  for (int b = 0; b < 8; b++) t[b] = _mm256_loadu_ps(p + 16 * b + 8);
  tr8(t);
  rht8_levels(t, signs ? signs + 8 : NULL);
#pragma GCC unroll 8
  for (int e = 0; e < 8; e++) {
    __m256 a = v[e], b = t[e];
    v[e] = _mm256_add_ps(a, b);
    v[e + 8] = _mm256_sub_ps(a, b);
  }
}

/* Column layout (ufp4_fake_quant_t): v[e] = row e of a 16 x 8 strip with row stride ld, which is
 * element e of the strip's 8 column blocks, the layout load_soa builds; with the RHT the same
 * per-half levels and combination as load_soa_rht16, on the same values. */
INL void load_cols(const float *p, size_t ld, __m256 *v, const __m256 *signs, int rotate) {
#pragma GCC unroll 16
  for (int e = 0; e < 16; e++) v[e] = _mm256_loadu_ps(p + (size_t)e * ld);
  if (!rotate) return;
  rht8_levels(v, signs);
  rht8_levels(v + 8, signs ? signs + 8 : NULL);
#pragma GCC unroll 8
  for (int e = 0; e < 8; e++) {
    __m256 a = v[e], b = v[e + 8];
    v[e] = _mm256_add_ps(a, b);
    v[e + 8] = _mm256_sub_ps(a, b);
  }
}

INL void scale_all(__m256 *v, __m256 q) {
#pragma GCC unroll 16
  for (int e = 0; e < 16; e++) v[e] = _mm256_mul_ps(v[e], q);
}

/* NVFP4 and E8M0 scales of 8 blocks from their amax, as ufp4_q_block_scale computes them (and
 * minifloat.c's ufp4_f32_to_e4m3, ufp4_e4m3_to_f32, ufp4_e8m0_scale, on the bit patterns).
 * Returns 0 when some block is not an ordinary BLK_MUL block (NaN/Inf, zero, or an NVFP4 encode
 * factor that overflows); the caller then takes the scalar route for the group. */
INL int scales_mx(const ufp4_qjob *j, const ufp4_grid *g, __m256 amax, __m256i bad, __m256 *sc, __m256 *en,
                  uint8_t bits[8]) {
  const ufp4_scale_kind kind = j->f->scale;
  const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  __m256i code;
  __m256i okm = _mm256_xor_si256(bad, _mm256_set1_epi32(-1));
  okm = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_EQ_OQ)), okm);
  if (kind == UFP4_SCALE_NVFP4) {
    const __m256 senc = _mm256_set1_ps(j->s_enc);
    __m256 v = _mm256_div_ps(_mm256_mul_ps(amax, senc), _mm256_set1_ps(g->g_max));
    __m256i a = _mm256_castps_si256(v); /* v >= 0 and finite in the lanes that matter */
    /* E4M3 normal: keep 3 mantissa bits, round half to even on the bit pattern. */
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, 20), one);
    __m256i cn = _mm256_sub_epi32(
        _mm256_srli_epi32(_mm256_add_epi32(a, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), odd)), 20),
        _mm256_set1_epi32((127 - 7) << 3));
    /* E4M3 subnormal (v < 2^-6): m = RNE(v * 2^9), exact scaling; 8 is the smallest normal. */
    __m256i cs = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(512.0f)),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    code = _mm256_blendv_epi8(cn, cs, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3C800000), a));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7E), _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x43DFFFFF)));
    /* Decode: (8 + m) 2^(e-10) is the float with exponent e + 120 and mantissa m; m 2^-9 below. */
    __m256 dn = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(code, 20), _mm256_set1_epi32(0x3C000000)));
    __m256 ds = _mm256_mul_ps(_mm256_cvtepi32_ps(code), _mm256_set1_ps(0x1p-9f));
    __m256 d = _mm256_blendv_ps(dn, ds, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), code)));
    okm = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ)), okm);
    *sc = _mm256_div_ps(d, senc);
    *en = _mm256_div_ps(_mm256_set1_ps(1.0f), *sc);
    okm = _mm256_and_si256(okm, _mm256_castps_si256(_mm256_cmp_ps(*en, _mm256_set1_ps(INFINITY), _CMP_LT_OQ)));
  } else {
    __m256i u = _mm256_castps_si256(amax), ub;
    const __m256i off = _mm256_set1_epi32(127 + g->emax);
    switch (kind) {
      case UFP4_SCALE_E8M0_CEIL: {
        __m256i mz = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFF)), zero);
        ub = _mm256_sub_epi32(_mm256_add_epi32(_mm256_srli_epi32(u, 23), _mm256_andnot_si256(mz, one)), off);
        break;
      }
      case UFP4_SCALE_E8M0_EVEN: {
        __m256i r = _mm256_add_epi32(u, _mm256_set1_epi32(1 << (23 - g->mbits - 1)));
        r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xFF800000u));
        ub = _mm256_sub_epi32(_mm256_srli_epi32(r, 23), off);
        break;
      }
      case UFP4_SCALE_E8M0_RCEIL: {
        __m256i d = _mm256_castps_si256(_mm256_mul_ps(amax, _mm256_set1_ps(1.0f / g->g_max)));
        __m256i de = _mm256_srli_epi32(d, 23), dm = _mm256_and_si256(d, _mm256_set1_epi32(0x7FFFFF));
        __m256i dmnz = _mm256_andnot_si256(_mm256_cmpeq_epi32(dm, zero), one);
        __m256i above = _mm256_and_si256(_mm256_cmpgt_epi32(dm, _mm256_set1_epi32(0x400000)), one);
        __m256i biased = _mm256_blendv_epi8(_mm256_add_epi32(de, dmnz), above, _mm256_cmpeq_epi32(de, zero));
        ub = _mm256_sub_epi32(biased, _mm256_set1_epi32(127));
        break;
      }
      default: /* FLOOR */
        ub = _mm256_sub_epi32(_mm256_srli_epi32(u, 23), off);
    }
    ub = _mm256_min_epi32(_mm256_max_epi32(ub, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
    code = _mm256_add_epi32(ub, _mm256_set1_epi32(127));
    /* 2^(code-127) and 2^(127-code) as bit patterns; 2^-127 is the denormal 0x00400000. */
    const __m256i tiny = _mm256_set1_epi32(0x00400000);
    __m256i sb = _mm256_blendv_epi8(_mm256_slli_epi32(code, 23), tiny, _mm256_cmpeq_epi32(code, zero));
    __m256i eb = _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), code), 23), tiny,
                                    _mm256_cmpgt_epi32(code, _mm256_set1_epi32(253)));
    *sc = _mm256_castsi256_ps(sb);
    *en = _mm256_castsi256_ps(eb);
  }
  store_codes8(bits, code);
  return _mm256_movemask_ps(_mm256_castsi256_ps(okm)) == 0xFF;
}

/* scales_mx on 8 finite blocks, for test_quant_scales_enum (quant_internal.h). */
AVX2 int ufp4_q_scales8_avx2(const ufp4_qjob *j, const float amax[8], float sc[8], float en[8],
                             uint8_t bits[8]) {
  qk k;
  qk_init(&k, j->g);
  __m256 s, e;
  const int ok = scales_mx(j, j->g, _mm256_loadu_ps(amax), _mm256_setzero_si256(), &s, &e, bits);
  _mm256_storeu_ps(sc, s);
  _mm256_storeu_ps(en, e);
  return ok;
}

/* Per-band RHT16 constants: the sign vector broadcast per element, or NULL for all +1. */
typedef struct {
  __m256 s[16];
  const __m256 *signs;
} rht16c;

/* 4/6's error of 8 blocks held as v[e] = element e of each (lane = block), quantized with scales
 * sc (encoding by dividing by sc, or with mul by multiplying by en): element e of a block goes to
 * partial sum e mod 8, i.e. P[l] = (0 + T[l]) + T[l + 8], combined as the reference's
 * ufp4_q_err_reduce, all lane by lane. */
INL __m256 err_add8(__m256 acc, __m256 t, ufp4_adaptive_metric m) {
  return m == UFP4_METRIC_MAXABS ? _mm256_max_ps(t, acc) : _mm256_add_ps(acc, t);
}
INL __m256 group_err(const qk *k, const __m256 *v, const __m256 *rbv, __m256 sc, __m256 en, int mul,
                     ufp4_adaptive_metric m, const int mode, const int gc) {
  const int clamp = need_clamp(sc);
  __m256 T[16], P[8];
  for (int e = 0; e < 16; e++) {
    __m256 t = mul ? _mm256_mul_ps(v[e], en) : _mm256_div_ps(v[e], sc);
    __m256 d = _mm256_sub_ps(y_of_t(k, t, _mm256_castps_si256(rbv[e]), sc, clamp, mode, gc), v[e]);
    T[e] = m == UFP4_METRIC_MSE ? _mm256_mul_ps(d, d) : _mm256_andnot_ps(SIGN_BIT, d);
  }
  for (int l = 0; l < 8; l++) P[l] = err_add8(err_add8(_mm256_setzero_ps(), T[l], m), T[l + 8], m);
  __m256 a = err_add8(P[0], P[1], m), b = err_add8(P[2], P[3], m);
  __m256 c = err_add8(P[4], P[5], m), d = err_add8(P[6], P[7], m);
  return err_add8(err_add8(a, b, m), err_add8(c, d, m), m);
}

/* 4/6 for 8 ordinary 1x16 blocks (v unfolded) whose 6-candidate is sc / en / bits: replaces them
 * by the 4-candidate where it errs less and records the choice. FP32 scales encode by dividing, the
 * others by multiplying (mul), as the reference. Returns 0 when some 4-candidate is not an
 * ordinary block, for the per-block route. */
INL int choose4_group(const ufp4_qjob *j, const qk *k, const __m256 *v, const __m256 *rbv, __m256 amax,
                      size_t sidx, __m256 *sc, __m256 *en, uint8_t bits[8], int mul, const int mode,
                      const int gc) {
  __m256 sc4, en4 = _mm256_setzero_ps();
  uint8_t bits4[8] = {0};
  if (!mul) /* amax / 4 >= amax / 6, which is not 0 here */
    sc4 = _mm256_div_ps(amax, _mm256_set1_ps(j->g4->g_max));
  else if (!scales_mx(j, j->g4, amax, _mm256_setzero_si256(), &sc4, &en4, bits4))
    return 0;
  const ufp4_adaptive_metric m = j->f->metric;
  __m256 e6 = group_err(k, v, rbv, *sc, *en, mul, m, mode, gc);
  __m256 e4 = group_err(k, v, rbv, sc4, en4, mul, m, mode, gc);
  __m256 four = _mm256_cmp_ps(e4, e6, _CMP_LT_OQ);
  int mask = _mm256_movemask_ps(four);
  *sc = _mm256_blendv_ps(*sc, sc4, four);
  *en = _mm256_blendv_ps(*en, en4, four);
  for (int b = 0; b < 8; b++) {
    if (mask >> b & 1) bits[b] = bits4[b];
    if (j->four) j->four[sidx + (size_t)b] = (uint8_t)(mask >> b & 1);
  }
  return 1;
}

/* 8 consecutive 1x16 blocks of row r starting at column c0 (scale index sidx). src: the 128
 * input floats (raw when rc, which rotates them here); rb: their random bits or NULL. */
/* The column layout of a group (ufp4_fake_quant_t): src and y are the strip's first element, with
 * row stride ld; the random bits of column b start at rb + b * rb_stride. */
typedef struct {
  size_t ld, rb_stride;
  float *y;
} qcols;

INL void group16(const ufp4_qjob *j, const qk *k, const float *src, const uint32_t *rb, size_t r,
                 size_t c0, size_t sidx, const rht16c *rc, const qcols *cm, const int mode, const int gc) {
  __m256 v[16];
  if (cm)
    load_cols(src, cm->ld, v, rc ? rc->signs : NULL, rc != NULL);
  else if (rc)
    load_soa_rht16(src, v, rc->signs);
  else
    load_soa(src, v);

  const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int e = 0; e < 16; e += 2) {
    m0 = _mm256_max_epi32(m0, _mm256_and_si256(_mm256_castps_si256(v[e]), absm));
    m1 = _mm256_max_epi32(m1, _mm256_and_si256(_mm256_castps_si256(v[e + 1]), absm));
  }
  __m256i m = _mm256_max_epi32(m0, m1);
  __m256i bad = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(0x7F7FFFFF));
  __m256 amax = _mm256_castsi256_ps(m);
  /* With RHT the reference multiplies every rotated value by 1/4 before dividing by s. For
   * nearest rounding and FP32 scales that multiply is folded into the divisor: t = u / (4 s)
   * equals (u / 4) / s whenever u / 4 is exact, and when it is not (|u| < 2^-124) both |t| are
   * below 2^-27 once s >= 2^-99, so both round to 0 with u's sign. amax / 4 is exact for the
   * same reason (rounding is monotone: max(RN(u/4)) = RN(max(u)/4)). */
  int folded = 0;
  const __m256 quarter = _mm256_set1_ps(0.25f);
  if (rc) {
    amax = _mm256_mul_ps(amax, quarter);
    if (!ufp4_round_is_stochastic(mode) && j->f->scale == UFP4_SCALE_FP32) {
      __m256 lo = _mm256_cmp_ps(amax, _mm256_set1_ps(0x1p-96f), _CMP_GE_OQ);
      __m256 hi = _mm256_cmp_ps(amax, _mm256_set1_ps(0x1p118f), _CMP_LT_OQ);
      folded = _mm256_movemask_ps(_mm256_and_ps(lo, hi)) == 0xFF;
    }
    if (!folded) scale_all(v, quarter);
  }
  __m256 sc, en = _mm256_setzero_ps();
  int mul = 0, ok;
  uint8_t bits[8] = {0};
  if (j->f->scale == UFP4_SCALE_FP32) {
    sc = _mm256_div_ps(amax, k->gmax);
    __m256i zero = _mm256_castps_si256(_mm256_cmp_ps(sc, _mm256_setzero_ps(), _CMP_EQ_OQ));
    ok = _mm256_testz_si256(_mm256_or_si256(bad, zero), _mm256_or_si256(bad, zero));
  } else {
    ok = scales_mx(j, j->g, amax, bad, &sc, &en, bits);
    mul = 1;
  }
  /* The random bits in the same layout as v. When only the dequantized values need them (no 4/6,
   * no codes) they are loaded half by half where y is computed: 16 fewer live vectors in a kernel
   * that has only 16 registers (docs/PERFORMANCE.md, "The small-model targets"). */
  const int rb_by_half = rb && !j->g4 && !j->codes;
  const size_t rb_stride = cm ? cm->rb_stride : 16;
  __m256 rbv[16];
  if (rb && !rb_by_half)
    load_soa_strided((const float *)rb, rb_stride, rbv);
  else
    for (int e = 0; e < 16; e++) rbv[e] = _mm256_setzero_ps();
  if (ok && j->g4) { /* 4/6: the 8 blocks' two candidates at once; folding is not worth it here */
    if (folded) scale_all(v, quarter);
    folded = 0;
    ok = choose4_group(j, k, v, rbv, amax, sidx, &sc, &en, bits, mul, mode, gc);
  }
  if (!ok && cm) { /* some block is special: each of the 8 through block_vec, as its own row */
    float buf[128], yb[16];
    uint32_t rbuf[128];
    if (folded) scale_all(v, quarter);
    store_soa(buf, v);
    if (rb) /* block b's bits: store_soa of load_soa_strided's layout */
      for (int b = 0; b < 8; b++) memcpy(rbuf + 16 * b, rb + (size_t)b * rb_stride, 16 * sizeof *rbuf);
    ufp4_qjob one = *j; /* a job of one 16-element row, writing into yb */
    one.cols = 16;
    one.y = yb;
    for (int b = 0; b < 8; b++) {
      block_vec(&one, k, buf + 16 * b, 16, rb ? rbuf + 16 * b : NULL, 0, 0, 1, 16, 0, mode, gc);
      for (int e = 0; e < 16; e++) cm->y[(size_t)e * cm->ld + (size_t)b] = yb[e];
    }
    return;
  }
  if (!ok) { /* some block is special: do the 8 one by one */
    float buf[128];
    const float *p = src;
    size_t stride = j->cols;
    if (rc) {
      if (folded) scale_all(v, quarter);
      store_soa(buf, v);
      p = buf;
      stride = 16;
    }
    for (int b = 0; b < 8; b++)
      block_vec(j, k, p + 16 * b, stride, rb ? rb + 16 * b : NULL, r, c0 + 16 * (size_t)b, 1, 16,
                sidx + (size_t)b, mode, gc);
    return;
  }
  const __m256 div = folded ? _mm256_mul_ps(sc, _mm256_set1_ps(4.0f)) : sc;
  if (j->scales) _mm256_storeu_ps(j->scales + sidx, sc);
  if (j->scale_bits) memcpy(j->scale_bits + sidx, bits, 8);

  __m256 cv[16];
  const size_t o = r * j->cols + c0;
  if (j->y) { /* in two halves of 8 elements, each stored as soon as it is computed */
    const int clamp = need_clamp(sc);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256 rh[8], yh[8];
      if (rb_by_half) load_half_strided((const float *)rb, rb_stride, h, rh);
#pragma GCC unroll 8
      for (int e = 0; e < 8; e++) {
        const __m256 ve = v[8 * h + e];
        __m256 t = mul ? _mm256_mul_ps(ve, en) : _mm256_div_ps(ve, div);
        yh[e] = y_of_t(k, t, _mm256_castps_si256(rb_by_half ? rh[e] : rbv[8 * h + e]), sc, clamp, mode, gc);
      }
      if (cm) {
#pragma GCC unroll 8
        for (int e = 0; e < 8; e++) _mm256_storeu_ps(cm->y + (size_t)(8 * h + e) * cm->ld, yh[e]);
      } else {
        store_half(j->y + o, yh, h);
      }
    }
  }
  if (j->codes) {
#pragma GCC unroll 16
    for (int e = 0; e < 16; e++) {
      __m256 t = mul ? _mm256_mul_ps(v[e], en) : _mm256_div_ps(v[e], div);
      __m256 sgn = _mm256_and_ps(t, SIGN_BIT), a = _mm256_andnot_ps(SIGN_BIT, t);
      __m256i idx = round_idx(k, a, _mm256_castps_si256(rbv[e]), mode);
      cv[e] = _mm256_castsi256_ps(code_of(sgn, idx, gc));
    }
    float cbuf[128];
    store_soa(cbuf, cv);
    for (int i = 0; i < 128; i += 16) {
      __m256i c0v = _mm256_loadu_si256((const __m256i *)(cbuf + i));
      __m256i c1v = _mm256_loadu_si256((const __m256i *)(cbuf + i + 8));
      __m256i p16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(c0v, c1v), 0xD8);
      __m256i p8 = _mm256_permute4x64_epi64(_mm256_packus_epi16(p16, p16), 0x08);
      _mm_storeu_si128((__m128i *)(j->codes + o + i), _mm256_castsi256_si128(p8));
    }
  }
}

INL void band_impl(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t h,
                   size_t bi, int fused, const int mode, const int gc) {
  /* A local the stores cannot alias, so the constants may stay in registers. */
  qk kk;
  qk_init(&kk, j->g);
  const qk *k = &kk;
  const ufp4_qformat *f = j->f;
  const size_t cols = j->cols;
  if (!f->tile2d && f->block == 16) {
    const size_t nbc = (cols + 15) / 16;
    rht16c rcv;
    rcv.signs = NULL;
    if (fused && f->rht_signs) {
      for (int e = 0; e < 16; e++) rcv.s[e] = _mm256_set1_ps(f->rht_signs[e]);
      rcv.signs = rcv.s;
    }
    const rht16c *rcp = fused ? &rcv : NULL;
    /* With cols a multiple of 16 the band is a flat run of whole blocks (block q holds elements
     * 16q .. 16q + 15 of the band, scale index r0 * nbc + q), so groups of 8 blocks may span rows:
     * at cols = 64 a row alone has only 4. Otherwise row by row, a short last block per row. */
    const size_t run = cols % 16 == 0 ? h * cols : cols, nrun = cols % 16 == 0 ? 1 : h;
    for (size_t i = 0; i < nrun; i++) {
      const float *p0 = src + i * run;
      const uint32_t *rb0 = rb ? rb + i * run : NULL;
      const size_t e0 = (r0 + i) * cols; /* flat index of the run's first element */
      size_t c = 0;
      /* group16 and block_vec address the output as row * cols + col, so (row, col) may be
       * any pair with that flat value: (r0 + i, c) with c past the row's end is fine. */
      for (; c + 128 <= run; c += 128)
        group16(j, k, p0 + c, rb0 ? rb0 + c : NULL, r0 + i, c, ((e0 + c) / cols) * nbc + ((e0 + c) % cols) / 16,
                rcp, NULL, mode, gc);
      for (; c < run; c += 16) {
        const size_t w = run - c < 16 ? run - c : 16;
        const float *p = p0 + c;
        size_t stride = cols;
        float buf[16];
        if (fused) { /* cols is a multiple of 16 here */
          memcpy(buf, p, sizeof buf);
          if (f->rht_signs)
            for (int e = 0; e < 16; e++) buf[e] *= f->rht_signs[e];
          ufp4_fwht(buf, 16);
          p = buf;
          stride = 16;
        }
        const size_t fe = e0 + c, sidx = (fe / cols) * nbc + (fe % cols) / 16;
        if (w % 8 == 0)
          block_vec(j, k, p, stride, rb0 ? rb0 + c : NULL, fe / cols, fe % cols, 1, w, sidx, mode, gc);
        else
          ufp4_q_do_block(j, p, rb0 ? rb0 + c : NULL, fe / cols, fe % cols, 1, w, sidx);
      }
    }
    return;
  }
  /* Tiles: one row of h x bw tiles. Other 1-D blocks: h rows of 1 x bw blocks. */
  const size_t bw = f->tile2d ? (size_t)f->tile2d : (size_t)f->block;
  const size_t nbc = (cols + bw - 1) / bw;
  const size_t rows = f->tile2d ? 1 : h, bh = f->tile2d ? h : 1;
  for (size_t i = 0; i < rows; i++)
    for (size_t b = 0; b < nbc; b++) {
      const size_t c0 = b * bw, o = i * cols + c0;
      const size_t w = cols - c0 < bw ? cols - c0 : bw;
      const size_t sidx = f->tile2d ? bi * nbc + b : (r0 + i) * nbc + b;
      const uint32_t *rr = rb ? rb + o : NULL;
      if (w % 8 == 0)
        block_vec(j, k, src + o, cols, rr, r0 + i, c0, bh, w, sidx, mode, gc);
      else
        ufp4_q_do_block(j, src + o, rr, r0 + i, c0, bh, w, sidx);
    }
}

#define BAND(M, G)                                                                                \
  AVX2 static void band_##M##_##G(const ufp4_qjob *j, const float *src, const uint32_t *rb,       \
                                  size_t r0, size_t h, size_t bi, int fused) {                    \
    band_impl(j, src, rb, r0, h, bi, fused, UFP4_ROUND_##M, G);                                    \
  }
#define BAND3(M) BAND(M, GC_E2M1) BAND(M, GC_E1M2) BAND(M, GC_INT4)
BAND3(RNE)
BAND3(RNA)
BAND3(RNZ)
BAND3(SR)
BAND3(SR8)
#undef BAND3
#undef BAND

typedef void (*band_fn)(const ufp4_qjob *, const float *, const uint32_t *, size_t, size_t, size_t, int);
#define ROW(M) {band_##M##_GC_E2M1, band_##M##_GC_E1M2, band_##M##_GC_INT4}
static const band_fn BANDS[UFP4_ROUND_COUNT][3] = {ROW(RNE), ROW(RNA), ROW(RNZ), ROW(SR), ROW(SR8)};
#undef ROW

AVX2 void ufp4_q_band_avx2(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0,
                           size_t h, size_t bi, int fused_rht16) {
  int gc = j->g->id == UFP4_GRID_INT4 ? GC_INT4 : j->g->id == UFP4_GRID_E1M2 ? GC_E1M2 : GC_E2M1;
  BANDS[j->f->round][gc](j, src, rb, r0, h, bi, fused_rht16);
}

/* ufp4_fake_quant_t's band (quant_internal.h): 8 columns of x (row stride ld), all `rows` rows,
 * as 16 x 8 strips, each strip the group of 8 column blocks group16 quantizes in registers. */
INL void cols_band_impl(const ufp4_qjob *j, const float *x, size_t ld, size_t rows, const uint32_t *rb,
                        float *y, int fused, const int mode, const int gc) {
  qk kk;
  qk_init(&kk, j->g);
  rht16c rcv;
  rcv.signs = NULL;
  if (fused && j->f->rht_signs) {
    for (int e = 0; e < 16; e++) rcv.s[e] = _mm256_set1_ps(j->f->rht_signs[e]);
    rcv.signs = rcv.s;
  }
  for (size_t i0 = 0; i0 < rows; i0 += 16) {
    const qcols cm = {.ld = ld, .rb_stride = rows, .y = y + i0 * ld};
    group16(j, &kk, x + i0 * ld, rb ? rb + i0 : NULL, 0, 0, 0, fused ? &rcv : NULL, &cm, mode, gc);
  }
}

#define CBAND(M, G)                                                                               \
  AVX2 static void cband_##M##_##G(const ufp4_qjob *j, const float *x, size_t ld, size_t rows,    \
                                   const uint32_t *rb, float *y, int fused) {                     \
    cols_band_impl(j, x, ld, rows, rb, y, fused, UFP4_ROUND_##M, G);                               \
  }
/* Only the rounding modes training uses (UFP4_Q_COLS_ROUNDS): each instantiation of group16 is
 * large, and the others are served by the transposed copy. */
#define CBAND3(M) CBAND(M, GC_E2M1) CBAND(M, GC_E1M2) CBAND(M, GC_INT4)
CBAND3(RNE)
CBAND3(SR)
#undef CBAND3
#undef CBAND

typedef void (*cband_fn)(const ufp4_qjob *, const float *, size_t, size_t, const uint32_t *, float *, int);
#define ROW(M) {cband_##M##_GC_E2M1, cband_##M##_GC_E1M2, cband_##M##_GC_INT4}
static const cband_fn CBANDS[2][3] = {ROW(RNE), ROW(SR)};
#undef ROW

AVX2 void ufp4_q_cols_band_avx2(const ufp4_qjob *j, const float *x, size_t ld, size_t rows, const uint32_t *rb,
                                float *y, int fused_rht16) {
  int gc = j->g->id == UFP4_GRID_INT4 ? GC_INT4 : j->g->id == UFP4_GRID_E1M2 ? GC_E1M2 : GC_E2M1;
  CBANDS[j->f->round == UFP4_ROUND_SR][gc](j, x, ld, rows, rb, y, fused_rht16);
}

AVX2 float ufp4_q_amax_cols_rht16_avx2(const float *x, size_t ld, size_t rows, const float *signs) {
  const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  __m256 sv[16];
  for (int e = 0; e < 16; e++) sv[e] = _mm256_set1_ps(signs ? signs[e] : 1.0f);
  __m256i m = _mm256_setzero_si256();
  for (size_t i0 = 0; i0 < rows; i0 += 16) {
    __m256 v[16];
    load_cols(x + i0 * ld, ld, v, signs ? sv : NULL, 1);
#pragma GCC unroll 16
    for (int e = 0; e < 16; e++) {
      __m256i a = _mm256_and_si256(_mm256_castps_si256(v[e]), absm);
      m = _mm256_max_epi32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(inf, a)));
    }
  }
  return bits2f(hmax_epi32(m)) * 0.25f;
}

/* The 64-bit products c * m of the 8 lanes, as low and high words: two widening multiplies (even
 * lanes, then odd lanes shifted down) instead of a mullo and an emulated mulhi. */
INL void mul_wide_epu32(__m256i c, __m256i m, __m256i *lo, __m256i *hi) {
  __m256i ev = _mm256_mul_epu32(c, m), od = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
  *lo = _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
}

/* Philox4x32-10 on PHILOX_GROUPS x 8 counters at once (philox.c is the reference): lane l of group
 * g runs quad q0 + 8 g + l, and out receives the 32 PHILOX_GROUPS words in element order. The groups
 * are independent chains of 10 rounds, interleaved so that one group's multiplies issue while
 * another's wait on theirs. */
#define PHILOX_GROUPS 2
AVX2 static void philox8(uint64_t seed, uint64_t stream, uint64_t q0, uint32_t *out) {
  __m256i c0[PHILOX_GROUPS], c1[PHILOX_GROUPS], c2[PHILOX_GROUPS], c3[PHILOX_GROUPS];
  for (int g = 0; g < PHILOX_GROUPS; g++) {
    uint32_t lo[8], hi[8];
    for (int l = 0; l < 8; l++) {
      const uint64_t q = q0 + (uint64_t)(8 * g + l);
      lo[l] = (uint32_t)q;
      hi[l] = (uint32_t)(q >> 32);
    }
    c0[g] = _mm256_loadu_si256((const __m256i *)lo);
    c1[g] = _mm256_loadu_si256((const __m256i *)hi);
    c2[g] = _mm256_set1_epi32((int)(uint32_t)stream);
    c3[g] = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
  }
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  for (int round = 0; round < 10; round++) {
    const __m256i kk0 = _mm256_set1_epi32((int)k0), kk1 = _mm256_set1_epi32((int)k1);
#pragma GCC unroll 4
    for (int g = 0; g < PHILOX_GROUPS; g++) {
      __m256i l0, h0, l1, h1;
      mul_wide_epu32(c0[g], m0, &l0, &h0);
      mul_wide_epu32(c2[g], m1, &l1, &h1);
      c0[g] = _mm256_xor_si256(_mm256_xor_si256(h1, c1[g]), kk0);
      c2[g] = _mm256_xor_si256(_mm256_xor_si256(h0, c3[g]), kk1);
      c1[g] = l1;
      c3[g] = l0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int g = 0; g < PHILOX_GROUPS; g++) {
    /* Lane l holds words 0..3 of its quad in c0..c3: interleave to element order. */
    uint32_t *o = out + 32 * g;
    __m256i a = _mm256_unpacklo_epi32(c0[g], c1[g]), b = _mm256_unpackhi_epi32(c0[g], c1[g]);
    __m256i c = _mm256_unpacklo_epi32(c2[g], c3[g]), d = _mm256_unpackhi_epi32(c2[g], c3[g]);
    __m256i q04 = _mm256_unpacklo_epi64(a, c), q15 = _mm256_unpackhi_epi64(a, c);
    __m256i q26 = _mm256_unpacklo_epi64(b, d), q37 = _mm256_unpackhi_epi64(b, d);
    _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(q04, q15, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 8), _mm256_permute2x128_si256(q26, q37, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 16), _mm256_permute2x128_si256(q04, q15, 0x31));
    _mm256_storeu_si256((__m256i *)(o + 24), _mm256_permute2x128_si256(q26, q37, 0x31));
  }
}

AVX2 void ufp4_q_fill_rbits_avx2(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out) {
  const size_t step = 32 * PHILOX_GROUPS;
  size_t i = 0;
  uint64_t idx = idx0;
  while (i < n && (idx & 3)) out[i++] = ufp4_philox_u32(seed, stream, idx++);
  for (; i + step <= n; i += step, idx += step) philox8(seed, stream, idx >> 2, out + i);
  while (i < n) out[i++] = ufp4_philox_u32(seed, stream, idx++);
}

AVX2 float ufp4_q_amax_finite_avx2(const float *p, size_t n) {
  const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  __m256i m = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + i)), absm);
    m = _mm256_max_epi32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(inf, a)));
  }
  float amax = bits2f(hmax_epi32(m));
  for (; i < n; i++) {
    float a = fabsf(p[i]);
    if (a <= FLT_MAX && a > amax) amax = a;
  }
  return amax;
}

/* The same over the rows' 16-point rotations x S H (NVFP4's tensor amax with RHT 16): the
 * butterflies in registers, and the final multiply by 1/4 applied once to the maximum, which is
 * exact as rounding is monotone (max RN(u/4) = RN(max u / 4); u finite iff u/4 finite). */
AVX2 float ufp4_q_amax_finite_rht16_avx2(const float *p, size_t n, const float *signs) {
  const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  __m256 sv[16];
  for (int e = 0; e < 16; e++) sv[e] = _mm256_set1_ps(signs ? signs[e] : 1.0f);
  __m256i m = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256 v[16];
    load_soa_rht16(p + i, v, signs ? sv : NULL);
#pragma GCC unroll 16
    for (int e = 0; e < 16; e++) {
      __m256i a = _mm256_and_si256(_mm256_castps_si256(v[e]), absm);
      m = _mm256_max_epi32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(inf, a)));
    }
  }
  float amax = bits2f(hmax_epi32(m)) * 0.25f;
  for (; i < n; i += 16) { /* n is a multiple of 16 */
    float buf[16];
    memcpy(buf, p + i, sizeof buf);
    if (signs)
      for (int e = 0; e < 16; e++) buf[e] *= signs[e];
    ufp4_fwht(buf, 16);
    float a = ufp4_q_amax_finite_avx2(buf, 16);
    if (a > amax) amax = a;
  }
  return amax;
}
