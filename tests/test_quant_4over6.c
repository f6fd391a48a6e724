/* Four Over Six (adaptive=4over6, quant.h) against a quantizer written here from the paper's rule
 * (Cook et al., arXiv 2512.02010; the reference code mit-han-lab/fouroversix,
 * src/fouroversix/quantize/reference.py), sharing no code with block_quant.c: its own E2M1 and
 * E4M3 rounding by enumeration, its own scale rules, its own error sums in the order quant.h
 * specifies. Then hand-made blocks whose choice is known, the tie rule, the NVFP4 tensor scale
 * (256 instead of 448), the AVX2 kernel against the scalar reference bit for bit, the formats that
 * are refused, and the recipe keys and presets (parse / print round trip). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/measures.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/rht.h"

#include "core/cpu.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { /* splitmix64, top half */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static float unif(void) { return (float)(rnd() >> 8) * 0x1p-24f; }
static float gauss(void) {
  float u1 = ((float)(rnd() >> 8) + 1.0f) * 0x1p-24f, u2 = unif();
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* ---- the independent reference ---- */

static const float LV[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* E2M1 round to nearest, ties to the even index (mantissa 0), saturating at 6. */
static float e2m1_rne(float t) {
  float a = fabsf(t), best = 0.0f;
  int bi = 0;
  for (int i = 0; i < 8; i++) {
    float d = fabsf(a - LV[i]), db = fabsf(a - best);
    if (d < db || (d == db && (i % 2 == 0) && i != bi)) {
      best = LV[i];
      bi = i;
    }
  }
  return copysignf(best, t);
}

/* E4M3 (OCP, no Inf) by enumeration of the 126 positive finite codes; ties to the even code;
 * values above 448 saturate. */
static float e4m3_value(int code) {
  int e = code >> 3, m = code & 7;
  return e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
}
static float e4m3_rne(float x) {
  if (x >= 448.0f) return 448.0f;
  int best = 0;
  for (int c = 1; c <= 0x7E; c++) {
    double d = fabs((double)x - e4m3_value(c)), db = fabs((double)x - e4m3_value(best));
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return e4m3_value(best);
}

/* The smallest power of two >= v (v > 0, normal). */
static float pow2_ceil(float v) {
  int e;
  float m = frexpf(v, &e); /* v = m 2^e, m in [0.5, 1) */
  return m == 0.5f ? ldexpf(1.0f, e - 1) : ldexpf(1.0f, e);
}

typedef struct {
  float scale, enc; /* dequantization factor; encode factor (0: divide by scale) */
} cand;

/* The candidate that maps amax to target (6 or 4) under scale kind k (s_enc for NVFP4). */
static cand make_cand(ufp4_scale_kind k, float amax, float target, float s_enc) {
  cand c = {0.0f, 0.0f};
  if (k == UFP4_SCALE_FP32) {
    c.scale = amax / target;
  } else if (k == UFP4_SCALE_NVFP4) {
    c.scale = e4m3_rne(amax * s_enc / target) / s_enc;
    c.enc = 1.0f / c.scale;
  } else { /* E8M0 RCEIL */
    c.scale = pow2_ceil(amax * (1.0f / target));
    c.enc = 1.0f / c.scale; /* exact for a power of two */
  }
  return c;
}

static float cand_y(cand c, float x) { return e2m1_rne(c.enc != 0.0f ? x * c.enc : x / c.scale) * c.scale; }

/* quant.h's error: 8 fp32 partial sums, element i into sum i mod 8, combined pairwise. */
static float cand_err(cand c, const float *x, int n, ufp4_adaptive_metric m) {
  float l[8] = {0};
  for (int i = 0; i < n; i++) {
    float e = cand_y(c, x[i]) - x[i];
    float v = m == UFP4_METRIC_MSE ? e * e : fabsf(e);
    l[i % 8] = m == UFP4_METRIC_MAXABS ? (v > l[i % 8] ? v : l[i % 8]) : l[i % 8] + v;
  }
  float a[4];
  for (int i = 0; i < 4; i++) {
    float p = l[2 * i], q = l[2 * i + 1];
    a[i] = m == UFP4_METRIC_MAXABS ? fmaxf(p, q) : p + q;
  }
  if (m == UFP4_METRIC_MAXABS) return fmaxf(fmaxf(a[0], a[1]), fmaxf(a[2], a[3]));
  return (a[0] + a[1]) + (a[2] + a[3]);
}

/* The same error in double, for the check that the chosen candidate is not worse. */
static double err_double(cand c, const float *x, int n, ufp4_adaptive_metric m) {
  double s = 0.0;
  for (int i = 0; i < n; i++) {
    double e = fabs((double)cand_y(c, x[i]) - (double)x[i]);
    double v = m == UFP4_METRIC_MSE ? e * e : e;
    s = m == UFP4_METRIC_MAXABS ? fmax(s, v) : s + v;
  }
  return s;
}

/* Fake-quantizes rows x cols in 1xB blocks (B divides cols) by the paper's rule; returns the
 * number of blocks that chose 4. */
static size_t ref_4over6(ufp4_scale_kind k, ufp4_adaptive_metric m, const float *x, float *y, size_t rows,
                         size_t cols, int B, float *scales) {
  float tamax = 0.0f;
  for (size_t i = 0; i < rows * cols; i++) tamax = fmaxf(tamax, fabsf(x[i]));
  const float s_enc = 256.0f * 6.0f / tamax;
  size_t fours = 0, nb = 0;
  for (size_t b = 0; b < rows * cols; b += (size_t)B, nb++) {
    const float *p = x + b;
    float amax = 0.0f;
    for (int i = 0; i < B; i++) amax = fmaxf(amax, fabsf(p[i]));
    cand c6 = make_cand(k, amax, 6.0f, s_enc), c4 = make_cand(k, amax, 4.0f, s_enc);
    int four = cand_err(c4, p, B, m) < cand_err(c6, p, B, m);
    cand c = four ? c4 : c6;
    fours += (size_t)four;
    for (int i = 0; i < B; i++) y[b + (size_t)i] = cand_y(c, p[i]);
    if (scales) scales[nb] = c.scale;
    /* The choice minimizes the error up to the fp32 rounding of the sums. */
    double e4 = err_double(c4, p, B, m), e6 = err_double(c6, p, B, m);
    double chosen = four ? e4 : e6, other = four ? e6 : e4;
    if (!(chosen <= other * (1.0 + 1e-5) + 1e-30)) fail_msg("block %zu: chose %g over %g", nb, chosen, other);
  }
  return fours;
}

static ufp4_qformat fmt_of(ufp4_scale_kind k, ufp4_adaptive_metric m, int block) {
  ufp4_qformat f = ufp4_qformat_default();
  f.scale = k;
  f.block = block;
  f.adaptive = UFP4_ADAPTIVE_4OVER6;
  f.metric = m;
  return f;
}

static const ufp4_scale_kind KINDS[3] = {UFP4_SCALE_FP32, UFP4_SCALE_NVFP4, UFP4_SCALE_E8M0_RCEIL};

/* Random blocks (Gaussian, Laplace-like, and blocks of few distinct magnitudes near 4 and 5 of
 * amax), every scale kind and metric, 1x16 and 1x32: the library's scalar reference and its
 * dispatched path equal the rule written here bit for bit, scales and share of 4s included. */
static void test_random_blocks_match_paper_rule(void **state) {
  (void)state;
  enum { R = 24, C = 64 };
  float x[R * C], yref[R * C], ylib[R * C], sref[R * C];
  for (int rep = 0; rep < 6; rep++) {
    for (int i = 0; i < R * C; i++) {
      float g = gauss();
      x[i] = rep % 3 == 0 ? g : rep % 3 == 1 ? g * g * g : (float)((int)(unif() * 13.0f) - 6) * (1.0f + 0.02f * g);
      x[i] *= ldexpf(1.0f, (int)(rnd() % 7) - 3);
    }
    for (int ki = 0; ki < 3; ki++)
      for (int m = 0; m < UFP4_METRIC_COUNT; m++)
        for (int B = 16; B <= 32; B *= 2) {
          ufp4_qformat f = fmt_of(KINDS[ki], (ufp4_adaptive_metric)m, B);
          size_t fours = ref_4over6(KINDS[ki], (ufp4_adaptive_metric)m, x, yref, R, C, B, sref);
          for (int path = 0; path < 2; path++) {
            ufp4_qtensor q;
            int rc = path ? ufp4_quantize(&f, x, R, C, &q) : ufp4_quantize_reference(&f, x, R, C, &q);
            assert_int_equal(rc, 0);
            ufp4_dequantize(&q, ylib);
            if (memcmp(yref, ylib, sizeof ylib) != 0)
              fail_msg("scale %s metric %s block %d path %d: values differ", ufp4_scale_name(f.scale),
                       ufp4_metric_name(f.metric), B, path);
            assert_memory_equal(sref, q.scales, ufp4_scale_count(&f, R, C) * sizeof(float));
            assert_int_equal(q.blocks_four, fours);
            ufp4_qtensor_free(&q);
            rc = path ? ufp4_fake_quant(&f, x, ylib, R, C) : ufp4_fake_quant_reference(&f, x, ylib, R, C);
            assert_int_equal(rc, 0);
            assert_memory_equal(yref, ylib, sizeof ylib);
          }
          /* FP32 and NVFP4 choose both ways on these tensors. Under E8M0 the 4-candidate's scale
           * is the 6-candidate's or twice it, and the doubled grid is a subset of the other on
           * [0, amax]: under nearest rounding it never errs less, so 4 is never chosen. */
          int e8 = KINDS[ki] == UFP4_SCALE_E8M0_RCEIL;
          if (e8 ? fours != 0 : (B == 16 && !(fours > 0 && fours < (size_t)(R * C / B))))
            fail_msg("scale %s metric %s: %zu of %d blocks chose 4", ufp4_scale_name(f.scale),
                     ufp4_metric_name(f.metric), fours, R * C / B);
        }
  }
}

/* One 1x16 block quantized alone under FP32 scales; returns whether it kept the 4-candidate. */
static int choose_four(const float *x, ufp4_adaptive_metric m, float *y) {
  ufp4_qformat f = fmt_of(UFP4_SCALE_FP32, m, 16);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, 1, 16, &q), 0);
  ufp4_dequantize(&q, y);
  int four = (int)q.blocks_four;
  ufp4_qtensor_free(&q);
  return four;
}

static void test_hand_made_blocks(void **state) {
  (void)state;
  float x[16], y[16];
  /* Values on the 4-grid {0..4} * 0.75: exact with s = amax / 4, not with amax / 6 (3 * 0.75 * 1.5
   * = 4.5 is not an E2M1 value): picks 4 and reproduces the block exactly. */
  static const float on4[16] = {4, 3, 2, 1.5f, 1, 0.5f, 0, -4, -3, -2, -1.5f, -1, -0.5f, 3, 2, 1};
  for (int m = 0; m < UFP4_METRIC_COUNT; m++) {
    for (int i = 0; i < 16; i++) x[i] = on4[i] * 0.75f;
    assert_int_equal(choose_four(x, (ufp4_adaptive_metric)m, y), 1);
    assert_memory_equal(x, y, sizeof x);
  }
  /* Values on the 6-grid with 6 and 4 present: exact with s = amax / 6 = 1; under amax / 4
   * (s = 1.5) 4 -> 2.67 -> 3 -> 4.5 is not: picks 6. */
  static const float on6[16] = {6, 4, 3, 2, 1.5f, 1, 0.5f, 0, -6, -4, -3, -2, -1.5f, -1, -0.5f, 4};
  for (int m = 0; m < UFP4_METRIC_COUNT; m++) {
    for (int i = 0; i < 16; i++) x[i] = on6[i];
    assert_int_equal(choose_four(x, (ufp4_adaptive_metric)m, y), 0);
    assert_memory_equal(x, y, sizeof x);
  }
  /* amax 6 and many values at 5, the midpoint of the 4-to-6 gap: under 6 they round to 4 (error
   * 1 each); under 4 (s = 1.5) 5 -> 3.33 -> 3 * 1.5 = 4.5 (error 0.5), 6 -> 4 exact. Picks 4. */
  for (int i = 0; i < 16; i++) x[i] = i == 0 ? 6.0f : 5.0f;
  for (int m = 0; m < UFP4_METRIC_COUNT; m++) {
    assert_int_equal(choose_four(x, (ufp4_adaptive_metric)m, y), 1);
    assert_true(y[1] == 4.5f && y[0] == 6.0f);
  }
  /* Tie: magnitudes all 3 are exact under both (s6 = 0.5, t = 6; s4 = 0.75, t = 4): equal error
   * keeps 6, whose scale is amax / 6. */
  for (int i = 0; i < 16; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * 3.0f;
  for (int m = 0; m < UFP4_METRIC_COUNT; m++) {
    assert_int_equal(choose_four(x, (ufp4_adaptive_metric)m, y), 0);
    assert_memory_equal(x, y, sizeof x);
  }
  ufp4_qformat f = fmt_of(UFP4_SCALE_FP32, UFP4_METRIC_MSE, 16);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, 1, 16, &q), 0);
  assert_true(q.scales[0] == 0.5f);
  ufp4_qtensor_free(&q);
  /* The metrics disagree: 6, one 5 and fourteen 4s. Under 6 (s = 1) only 5 -> 4 errs (1): sum of
   * squares 1, sum 1, max 1. Under 4 (s = 1.5) 6 is exact but 5 -> 4.5 and every 4 -> 2.67 -> 3
   * -> 4.5 err 0.5: sum of squares 3.75, sum 7.5, max 0.5. MSE and MAE keep 6, max-abs takes 4. */
  for (int i = 0; i < 16; i++) x[i] = i == 0 ? 6.0f : i == 1 ? 5.0f : 4.0f;
  assert_int_equal(choose_four(x, UFP4_METRIC_MSE, y), 0);
  assert_int_equal(choose_four(x, UFP4_METRIC_MAE, y), 0);
  assert_int_equal(choose_four(x, UFP4_METRIC_MAXABS, y), 1);
  assert_true(y[0] == 6.0f && y[1] == 4.5f && y[2] == 4.5f);
}

/* NVFP4 under 4/6 maps the tensor amax to 256 in E4M3 (S_enc = 256 * 6 / amax), plain NVFP4 to
 * 448; the 4-candidate's E4M3 scale of the largest block is then 384 and fits. */
static void test_nvfp4_tensor_scale(void **state) {
  (void)state;
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = gauss();
  x[5] = 10.0f; /* the tensor amax */
  for (int i = 6; i < 16; i++) x[i] = 8.4f; /* near 5/6 of it: this block wants 4 */
  ufp4_qformat f = fmt_of(UFP4_SCALE_NVFP4, UFP4_METRIC_MSE, 16);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, 1, 64, &q), 0);
  assert_true(q.tensor_scale == 256.0f * 6.0f / 10.0f);
  assert_int_equal(q.scale_bits[0], 0x7C); /* E4M3 0x7C = 384 = 256 * 6/4 */
  ufp4_qtensor_free(&q);
  f.adaptive = UFP4_ADAPTIVE_NONE;
  assert_int_equal(ufp4_quantize(&f, x, 1, 64, &q), 0);
  assert_true(q.tensor_scale == 448.0f * 6.0f / 10.0f);
  assert_int_equal(q.blocks_four, 0);
  ufp4_qtensor_free(&q);
}

/* The AVX2 kernel equals the scalar reference bit for bit: every scale kind and metric, nearest
 * and stochastic rounding, 1x16 (the 8-block kernel, with and without the fused RHT16), 1x32, 1x8,
 * 16x16 tiles, and a row length with a short last block. */
static void test_simd_equals_scalar(void **state) {
  (void)state;
  if (!ufp4_simd_enabled()) skip();
  static const size_t shapes[][2] = {{40, 256}, {19, 100}};
  static const int blk[][3] = {{16, 0, 0}, {16, 0, 16}, {32, 0, 32}, {8, 0, 0}, {16, 16, 0}, {16, 0, 64}};
  static const ufp4_round_mode modes[] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_SR};
  float signs[UFP4_RHT_MAX];
  ufp4_rht_signs_random(signs, UFP4_RHT_MAX, 7);
  for (size_t si = 0; si < 2; si++) {
    size_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
    float *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yb = malloc(n * sizeof *yb);
    assert_true(x && ya && yb);
    for (size_t i = 0; i < n; i++) x[i] = gauss() * (i % 97 == 0 ? 30.0f : 1.0f) * ldexpf(1.0f, (int)(i / 512) % 5);
    for (size_t i = 0; i < 16 && i < n; i++) x[i] = 0.0f; /* an all-zero block */
    for (int ki = 0; ki < 3; ki++)
      for (int m = 0; m < UFP4_METRIC_COUNT; m++)
        for (size_t b = 0; b < sizeof blk / sizeof blk[0]; b++)
          for (size_t r = 0; r < sizeof modes / sizeof modes[0]; r++) {
            ufp4_qformat f = fmt_of(KINDS[ki], (ufp4_adaptive_metric)m, blk[b][0]);
            f.tile2d = blk[b][1];
            f.rht = blk[b][2];
            f.rht_signs = signs;
            f.round = modes[r];
            f.seed = 11;
            if (f.rht && cols % (size_t)f.rht) continue;
            ufp4_qtensor qa, qb;
            assert_int_equal(ufp4_quantize_reference(&f, x, rows, cols, &qa), 0);
            assert_int_equal(ufp4_quantize(&f, x, rows, cols, &qb), 0);
            size_t ns = ufp4_scale_count(&f, rows, cols);
            if (memcmp(qa.codes, qb.codes, n) || memcmp(qa.scales, qb.scales, ns * sizeof(float)) ||
                (qa.scale_bits && memcmp(qa.scale_bits, qb.scale_bits, ns)) || qa.blocks_four != qb.blocks_four)
              fail_msg("scale %s metric %s block %d tile %d rht %d round %s %zux%zu: quantize differs",
                       ufp4_scale_name(f.scale), ufp4_metric_name(f.metric), f.block, f.tile2d, f.rht,
                       ufp4_round_name(f.round), rows, cols);
            ufp4_qtensor_free(&qa);
            ufp4_qtensor_free(&qb);
            assert_int_equal(ufp4_fake_quant_reference(&f, x, ya, rows, cols), 0);
            assert_int_equal(ufp4_fake_quant(&f, x, yb, rows, cols), 0);
            if (memcmp(ya, yb, n * sizeof *ya))
              fail_msg("scale %s metric %s block %d tile %d rht %d round %s: fake_quant differs",
                       ufp4_scale_name(f.scale), ufp4_metric_name(f.metric), f.block, f.tile2d, f.rht,
                       ufp4_round_name(f.round));
          }
    free(x);
    free(ya);
    free(yb);
  }
}

static void expect_refused(ufp4_grid_id g, ufp4_scale_kind k, const char *needle) {
  ufp4_qformat f = fmt_of(k, UFP4_METRIC_MSE, 16);
  f.grid = g;
  assert_int_equal(ufp4_qformat_check(&f, 4, 16), UFP4_EINVAL);
  if (!strstr(ufp4_last_error(), needle)) fail_msg("message '%s' lacks '%s'", ufp4_last_error(), needle);
}

static void test_refused_formats(void **state) {
  (void)state;
  expect_refused(UFP4_GRID_E1M2, UFP4_SCALE_FP32, "needs grid e2m1");
  expect_refused(UFP4_GRID_INT4, UFP4_SCALE_NVFP4, "needs grid e2m1");
  expect_refused(UFP4_GRID_E2M1_MAX4, UFP4_SCALE_FP32, "needs grid e2m1");
  expect_refused(UFP4_GRID_E2M1, UFP4_SCALE_E8M0_FLOOR, "e8m0-rceil");
  expect_refused(UFP4_GRID_E2M1, UFP4_SCALE_E8M0_CEIL, "e8m0-rceil");
  expect_refused(UFP4_GRID_E2M1, UFP4_SCALE_E8M0_EVEN, "e8m0-rceil");
  ufp4_qformat f = fmt_of(UFP4_SCALE_E8M0_RCEIL, UFP4_METRIC_MAE, 16);
  assert_int_equal(ufp4_qformat_check(&f, 4, 16), 0);
  f.metric = (ufp4_adaptive_metric)7;
  assert_int_equal(ufp4_qformat_check(&f, 4, 16), UFP4_EINVAL);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4,adaptive=4over6", &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "needs grid e2m1"));
  assert_int_equal(ufp4_recipe_parse("mxfp4,adaptive=4over6", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("e2m1,adaptive=4over7", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("e2m1,adaptive_metric=l2", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("mxfp4,scale=e8m0-rceil,adaptive=4over6", &r), 0);
  /* High-precision recipes carry no quantizer: the key is accepted and ignored there. */
  assert_int_equal(ufp4_recipe_parse("bf16,adaptive=4over6", &r), 0);
}

/* Presets and keys: parse -> format -> parse gives the same recipe and the same string; the
 * recipes that predate 4/6 print no adaptive key. */
static void test_recipe_round_trip(void **state) {
  (void)state;
  static const char *specs[] = {"e2m1-4over6", "nvfp4-4over6", "nvfp4-4over6,adaptive=none",
                                "e2m1,adaptive=4over6,adaptive_metric=maxabs", "nvfp4-4over6,adaptive_metric=mae",
                                "e2m1,scale=e8m0-rceil,adaptive=4over6", "e2m1", "nvfp4", "ufp4", "mxfp4"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ufp4_recipe a, b;
    char s1[512], s2[512];
    assert_int_equal(ufp4_recipe_parse(specs[i], &a), 0);
    ufp4_recipe_format(&a, s1, sizeof s1);
    if (ufp4_recipe_parse(s1, &b)) fail_msg("%s -> '%s' does not parse: %s", specs[i], s1, ufp4_last_error());
    ufp4_recipe_format(&b, s2, sizeof s2);
    assert_string_equal(s1, s2);
    assert_int_equal(a.adaptive, b.adaptive);
    assert_int_equal(a.metric, b.metric);
    assert_int_equal(a.scale, b.scale);
    int old = i >= 6;
    assert_int_equal(strstr(s1, "adaptive") == NULL, old);
  }
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("nvfp4-4over6", &r), 0);
  assert_int_equal(r.adaptive, UFP4_ADAPTIVE_4OVER6);
  assert_int_equal(r.metric, UFP4_METRIC_MSE);
  assert_int_equal(r.scale, UFP4_SCALE_NVFP4);
  assert_int_equal(r.tile2d, 1);
  for (int op = 0; op < UFP4_N_OPERANDS; op++) {
    ufp4_qformat f = ufp4_recipe_operand_format(&r, (ufp4_operand)op);
    assert_int_equal(f.adaptive, UFP4_ADAPTIVE_4OVER6);
  }
  assert_int_equal(ufp4_recipe_parse("nvfp4-4over6,adaptive=none", &r), 0);
  assert_int_equal(ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_X).adaptive, UFP4_ADAPTIVE_NONE);
  assert_int_equal(ufp4_recipe_parse("e2m1-4over6", &r), 0);
  assert_int_equal(r.scale, UFP4_SCALE_FP32);
  assert_string_equal(r.name, "e2m1-4over6");
}

/* The measures' 4/6 diagnostic and per-bin bias (measures.h): three hand-made blocks of which two
 * keep 4 give four_share 2/3; on random data the per-level mean of rho(t) - t equals a
 * recomputation here from the paper's rule (t = |x| / s with the chosen block's own s). */
static void test_measures_four_share_and_bins(void **state) {
  (void)state;
  static const float on4[16] = {4, 3, 2, 1.5f, 1, 0.5f, 0, -4, -3, -2, -1.5f, -1, -0.5f, 3, 2, 1};
  static const float on6[16] = {6, 4, 3, 2, 1.5f, 1, 0.5f, 0, -6, -4, -3, -2, -1.5f, -1, -0.5f, 4};
  float x[48];
  for (int i = 0; i < 16; i++) {
    x[i] = on4[i];
    x[16 + i] = on6[i];
    x[32 + i] = i == 0 ? 6.0f : 5.0f;
  }
  ufp4_qformat f = fmt_of(UFP4_SCALE_FP32, UFP4_METRIC_MSE, 16);
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(&f, x, 1, 48, &m), 0);
  assert_true(fabs(m.four_share - 2.0 / 3.0) < 1e-12);
  f.adaptive = UFP4_ADAPTIVE_NONE;
  assert_int_equal(ufp4_measure_tensor(&f, x, 1, 48, &m), 0);
  assert_true(m.four_share == 0.0);

  enum { R = 32, C = 64 };
  static float y[R * C], q[R * C], sc[R * C / 16];
  for (int i = 0; i < R * C; i++) y[i] = gauss();
  f.adaptive = UFP4_ADAPTIVE_4OVER6;
  size_t fours = ref_4over6(UFP4_SCALE_FP32, UFP4_METRIC_MSE, y, q, R, C, 16, sc);
  double sum[8] = {0}, cnt[8] = {0};
  for (int i = 0; i < R * C; i++) {
    float s = sc[i / 16];
    double t = fabs((double)y[i]) / (double)s, r = fabs((double)q[i]) / (double)s;
    int lvl = 0; /* q = level * s in fp32: r is the level to a relative 1e-7 */
    for (int k = 0; k < 8; k++)
      if (fabs(r - LV[k]) < 1e-5) lvl = k;
    sum[lvl] += (double)LV[lvl] - t;
    cnt[lvl] += 1;
  }
  assert_int_equal(ufp4_measure_tensor(&f, y, R, C, &m), 0);
  assert_true(fabs(m.four_share - (double)fours / (R * C / 16)) < 1e-12);
  for (int k = 0; k < 8; k++) {
    double want = cnt[k] ? sum[k] / cnt[k] : 0.0;
    if (fabs(m.bucket_bias[k] - want) > 1e-9) fail_msg("bin %d: measured %g, recomputed %g", k, m.bucket_bias[k], want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_blocks_match_paper_rule), cmocka_unit_test(test_hand_made_blocks),
      cmocka_unit_test(test_nvfp4_tensor_scale),             cmocka_unit_test(test_simd_equals_scalar),
      cmocka_unit_test(test_refused_formats),                cmocka_unit_test(test_recipe_round_trip),
      cmocka_unit_test(test_measures_four_share_and_bins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
