/* Measures: building blocks on hand cases, ufp4_measure_tensor against an independent recomputation
 * in plain loops, bucket entropy extremes, underflow, the E2M1 shrinkage bias on crafted uniform
 * data (expectations derived below), thread independence, and the GEMM chain at K = 1 against a
 * direct computation. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/measures.h"
#include "ufp4/parallel.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"
#include "ufp4/synth.h"

static int close_rel(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b)));
}
#define ASSERT_CLOSE(a, b, tol)                                                                   \
  do {                                                                                            \
    double a_ = (a), b_ = (b);                                                                    \
    if (!close_rel(a_, b_, (tol))) fail_msg("%s = %.12g, expected %.12g", #a, a_, b_);            \
  } while (0)

static void test_blocks_hand(void **state) {
  (void)state;
  const float a[4] = {1, 2, 3, 4}, q[4] = {1, 2, 2, 4};
  /* <q,a> = 1+4+6+16 = 27, ||a||^2 = 30, ||q-a||^2 = 1, ||q||^2 = 25. */
  ASSERT_CLOSE(ufp4_dot(a, q, 4), 27.0, 0);
  ASSERT_CLOSE(ufp4_norm2(a, 4), 30.0, 0);
  ASSERT_CLOSE(ufp4_alpha(a, q, 4), 0.9, 1e-15);
  ASSERT_CLOSE(ufp4_nmse(a, q, 4), 1.0 / 30.0, 1e-15);
  ASSERT_CLOSE(ufp4_sqnr_db(1.0 / 30.0), 14.771212547196624, 1e-12); /* 10 log10 30 */
  ASSERT_CLOSE(ufp4_cosine(a, q, 4), 27.0 / sqrt(750.0), 1e-15);
  ASSERT_CLOSE(ufp4_delta_sqnr_db(0.1, 0.01), 10.0, 1e-12);
  ASSERT_CLOSE(ufp4_delta_sqnr_db(0.01, 0.1), -10.0, 1e-12);
  /* Scaling q by 1/2 halves alpha and keeps the cosine. */
  const float h[4] = {0.5f, 1, 1, 2};
  ASSERT_CLOSE(ufp4_alpha(a, h, 4), 0.45, 1e-15);
  ASSERT_CLOSE(ufp4_cosine(a, h, 4), 27.0 / sqrt(750.0), 1e-15);
  /* Zero-signal conventions (measures.c): exact zero is alpha 1, nmse 0; cosine with 0 is NaN. */
  const float z[4] = {0};
  ASSERT_CLOSE(ufp4_alpha(z, z, 4), 1.0, 0);
  ASSERT_CLOSE(ufp4_nmse(z, z, 4), 0.0, 0);
  assert_true(isinf(ufp4_nmse(z, a, 4)));
  assert_true(isnan(ufp4_cosine(z, a, 4)));
  ASSERT_CLOSE(ufp4_dot(a, q, 0), 0.0, 0);
}

static void test_blocks_long(void **state) {
  (void)state;
  const size_t n = 1000003; /* many chunks, and a ragged last one */
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  for (size_t i = 0; i < n; ++i) {
    a[i] = ufp4_philox_normal(3, 1, i);
    b[i] = ufp4_philox_normal(3, 2, i);
  }
  long double d = 0, na = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (long double)a[i] * b[i];
    na += (long double)a[i] * a[i];
  }
  ASSERT_CLOSE(ufp4_dot(a, b, n), (double)d, 1e-12);
  ASSERT_CLOSE(ufp4_norm2(a, n), (double)na, 1e-12);
  ufp4_set_threads(1);
  double d1 = ufp4_dot(a, b, n), c1 = ufp4_cosine(a, b, n);
  ufp4_set_threads(2);
  assert_true(d1 == ufp4_dot(a, b, n));
  assert_true(c1 == ufp4_cosine(a, b, n));
  free(a);
  free(b);
}

/* Independent recomputation of every measure from ufp4_quantize's codes and scales, in one plain
 * loop per quantity. */
static void reference_measures(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                               ufp4_qmeasures *m) {
  const ufp4_grid *g = ufp4_grid_get(f->grid);
  size_t n = rows * cols;
  float *a = malloc(n * sizeof *a), *qa = malloc(n * sizeof *a);
  memcpy(a, x, n * sizeof *a);
  ufp4_qformat f0 = *f;
  if (f->rht) {
    assert_int_equal(ufp4_rht_rows(a, rows, cols, f->rht, f->rht_signs), 0);
    f0.rht = 0;
  }
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f0, a, rows, cols, &q), 0);
  ufp4_dequantize(&q, qa);
  size_t bw = f->tile2d ? 16 : (size_t)f->block;
  size_t per_row = (cols + bw - 1) / bw;
  double sqa = 0, saa = 0, sqq = 0, see = 0, bias = 0, rel = 0;
  size_t kept = 0, nz = 0, uf = 0, clip = 0, skip = 0, bucket[8] = {0};
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      size_t i = r * cols + c;
      size_t si = f->tile2d ? (r / 16) * per_row + c / 16 : r * per_row + c / bw;
      double s = q.scales[si];
      if (!isfinite(a[i]) || !isfinite(s)) {
        skip++;
        continue;
      }
      double rho = fabs((double)ufp4_decode(g, q.codes[i]));
      double t = s > 0 ? fabs((double)a[i]) / s : 0.0;
      if (s == 0) rho = 0;
      int idx = 0;
      while (idx < g->n_levels - 1 && (double)g->levels[idx] != rho) idx++;
      assert_true((double)g->levels[idx] == rho);
      kept++;
      bucket[idx]++;
      sqa += (double)qa[i] * a[i];
      saa += (double)a[i] * a[i];
      sqq += (double)qa[i] * qa[i];
      see += ((double)qa[i] - a[i]) * ((double)qa[i] - a[i]);
      bias += rho - t;
      if (t > g->g_max * (1.0 + 0x1p-20)) clip++;
      if (a[i] != 0) {
        nz++;
        rel += rho - t;
        uf += rho == 0;
      }
    }
  memset(m, 0, sizeof *m);
  m->n = n;
  m->n_nonfinite = skip;
  m->alpha = sqa / saa;
  m->nmse = see / saa;
  m->sqnr_db = -10 * log10(m->nmse);
  m->shrink_bias = bias / kept;
  m->mean_rel_err = rel / nz;
  double e = 0;
  for (int i = 0; i < g->n_levels; ++i) {
    m->bucket_p[i] = (double)bucket[i] / kept;
    e -= m->bucket_p[i] * log(m->bucket_p[i] + 1e-12);
  }
  m->bucket_entropy = e;
  m->b_eff = exp(e) / g->n_levels;
  m->underflow = (double)uf / nz;
  m->clipped = (double)clip / kept;
  ufp4_qtensor_free(&q);
  free(a);
  free(qa);
}

static void compare_measures(const char *what, const ufp4_qmeasures *m, const ufp4_qmeasures *r) {
  const double tol = 1e-10;
#define CMP(field)                                                                                \
  if (!close_rel(m->field, r->field, tol))                                                        \
    fail_msg("%s: " #field " %.12g vs reference %.12g", what, (double)m->field, (double)r->field)
  CMP(alpha); CMP(nmse); CMP(sqnr_db); CMP(shrink_bias); CMP(mean_rel_err);
  CMP(bucket_entropy); CMP(b_eff); CMP(underflow); CMP(clipped);
  for (int i = 0; i < UFP4_GRID_MAX_LEVELS; ++i) CMP(bucket_p[i]);
#undef CMP
  assert_int_equal(m->n, r->n);
  assert_int_equal(m->n_nonfinite, r->n_nonfinite);
}

static void test_tensor_vs_reference(void **state) {
  (void)state;
  const size_t rows = 96, cols = 256;
  float *x = malloc(rows * cols * sizeof *x);
  ufp4_synth_spec sp = ufp4_synth_default(UFP4_DIST_OUTLIERS, 5);
  assert_int_equal(ufp4_synth_fill(&sp, x, rows * cols), 0);
  /* Some exact zeros, an all-zero block, tiny values that underflow, and a NaN block. */
  for (size_t i = 0; i < rows * cols; i += 37) x[i] = 0.0f;
  for (size_t c = 32; c < 48; ++c) x[3 * cols + c] = 0.0f;
  for (size_t c = 64; c < 80; ++c) x[5 * cols + c] *= 1e-3f;
  x[5 * cols + 64] = 10.0f;
  x[7 * cols + 3] = NAN;
  struct {
    const char *name;
    ufp4_grid_id grid;
    ufp4_scale_kind scale;
    ufp4_round_mode round;
    int block, tile2d, rht;
    const float *signs;
  } cases[] = {
      {"e2m1 fp32", UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 0, NULL},
      {"e1m2 fp32", UFP4_GRID_E1M2, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 0, NULL},
      {"int4 fp32", UFP4_GRID_INT4, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 0, NULL},
      {"e2m1 nvfp4", UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, UFP4_ROUND_RNE, 16, 0, 0, NULL},
      {"e2m1 e8m0 floor 32", UFP4_GRID_E2M1, UFP4_SCALE_E8M0_FLOOR, UFP4_ROUND_RNE, 32, 0, 0, NULL},
      {"e2m1 2d", UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 16, 0, NULL},
      {"e2m1 sr", UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 0, NULL},
      {"e2m1-max3", UFP4_GRID_E2M1_MAX3, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 0, NULL},
      {"e2m1 rht16 nvidia", UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 16,
       ufp4_rht_signs_nvidia16},
      {"e1m2 rht16 plain", UFP4_GRID_E1M2, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 16, NULL},
      {"e1m2 rht64 nvfp4", UFP4_GRID_E1M2, UFP4_SCALE_NVFP4, UFP4_ROUND_RNE, 16, 0, 64, NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    ufp4_qformat f = ufp4_qformat_default();
    f.grid = cases[k].grid;
    f.scale = cases[k].scale;
    f.round = cases[k].round;
    f.block = cases[k].block;
    f.tile2d = cases[k].tile2d;
    f.rht = cases[k].rht;
    f.rht_signs = cases[k].signs;
    f.seed = 9;
    ufp4_qmeasures m, r;
    if (ufp4_measure_tensor(&f, x, rows, cols, &m) != 0) fail_msg("%s: %s", cases[k].name, ufp4_last_error());
    reference_measures(&f, x, rows, cols, &r);
    compare_measures(cases[k].name, &m, &r);
    /* The NaN poisons its block: 16 (or a 16x16 tile's 256) elements skipped. */
    assert_int_equal(m.n_nonfinite, cases[k].tile2d ? 256 : (size_t)(cases[k].rht > 16 ? cases[k].rht : cases[k].block));
    assert_true(m.underflow > 0);
    if (cases[k].scale == UFP4_SCALE_FP32) assert_true(m.clipped == 0);
    /* The quantizer's own RHT gives the same result as rotating first: alpha from a fused
     * quantize+dequantize matches the measured one. */
    if (cases[k].rht) {
      size_t n = rows * cols;
      float *rot = malloc(n * sizeof *rot), *y = malloc(n * sizeof *y);
      memcpy(rot, x, n * sizeof *rot);
      rot[7 * cols + 3] = 0; /* keep NaN out of this check */
      assert_int_equal(ufp4_rht_rows(rot, rows, cols, f.rht, f.rht_signs), 0);
      float *x2 = malloc(n * sizeof *x2);
      memcpy(x2, x, n * sizeof *x2);
      x2[7 * cols + 3] = 0;
      assert_int_equal(ufp4_fake_quant(&f, x2, y, rows, cols), 0);
      ufp4_qmeasures m2;
      assert_int_equal(ufp4_measure_tensor(&f, x2, rows, cols, &m2), 0);
      ASSERT_CLOSE(ufp4_alpha(rot, y, n), m2.alpha, 1e-12);
      ASSERT_CLOSE(ufp4_nmse(rot, y, n), m2.nmse, 1e-12);
      free(rot);
      free(y);
      free(x2);
    }
  }
  free(x);
}

/* One row of 16 elements per block, scale exactly 1 (block max 6 for E2M1), so t = |x|. */
static void test_bucket_extremes(void **state) {
  (void)state;
  ufp4_qformat f = ufp4_qformat_default();
  const float lv[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  float x[4 * 16];
  for (int i = 0; i < 64; ++i) x[i] = (i & 1 ? -1.0f : 1.0f) * lv[(i / 2) % 8] + 0.0f;
  /* Index 14 and 15 of each block are +-6 (level 7), so every block has s = 1. */
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(&f, x, 4, 16, &m), 0);
  for (int i = 0; i < 8; ++i) ASSERT_CLOSE(m.bucket_p[i], 0.125, 0);
  ASSERT_CLOSE(m.bucket_entropy, log(8.0), 1e-10);
  ASSERT_CLOSE(m.b_eff, 1.0, 1e-10);
  ASSERT_CLOSE(m.shrink_bias, 0.0, 0);
  ASSERT_CLOSE(m.alpha, 1.0, 0);
  ASSERT_CLOSE(m.nmse, 0.0, 0);
  /* One bucket: every element is the block max -> all in level 6. */
  for (int i = 0; i < 64; ++i) x[i] = (i & 1) ? -2.5f : 2.5f;
  assert_int_equal(ufp4_measure_tensor(&f, x, 4, 16, &m), 0);
  ASSERT_CLOSE(m.bucket_p[7], 1.0, 0);
  ASSERT_CLOSE(m.b_eff, 0.125, 1e-10);
  /* Restricted grid: n_levels = 6 for max3 (0 .. 3), B_eff normalized by 6. */
  f.grid = UFP4_GRID_E2M1_MAX3;
  const float l6[6] = {0, 0.5f, 1, 1.5f, 2, 3};
  float y[6 * 16];
  for (int i = 0; i < 96; ++i) y[i] = l6[i % 6];
  /* 16 > 6, so every block holds a 3 and s = 1; each level appears 16 times. */
  assert_int_equal(ufp4_measure_tensor(&f, y, 6, 16, &m), 0);
  ASSERT_CLOSE(m.b_eff, 1.0, 1e-10);
  ASSERT_CLOSE(m.bucket_p[6] + m.bucket_p[7], 0.0, 0);
}

static void test_underflow_crafted(void **state) {
  (void)state;
  ufp4_qformat f = ufp4_qformat_default();
  /* Block 0: max 6 so s = 1; 0.2 and -0.1 round to 0 (t <= 0.25), 0.3 to 0.5, 0 is not counted.
   * Nonzero inputs: 15 of block 0 + 0 of block 1 (all zero) = 15; underflow 2/15. */
  float x[32] = {6, 0.2f, -0.1f, 0, 0.3f, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(&f, x, 1, 32, &m), 0);
  ASSERT_CLOSE(m.underflow, 2.0 / 15.0, 1e-15);
  /* Bias: 0.2 -> -0.2, 0.1 -> -0.1, 0.3 -> +0.2, others exact; the zero block adds 0 over 16.
   * shrink_bias = -0.1/32; mean_rel_err = -0.1/15 (in float, 0.2f etc. are not exact). */
  double eb = (0.0 - (double)0.2f) + (0.0 - (double)0.1f) + (0.5 - (double)0.3f);
  ASSERT_CLOSE(m.shrink_bias, eb / 32, 1e-15);
  ASSERT_CLOSE(m.mean_rel_err, eb / 15, 1e-15);
  ASSERT_CLOSE(m.bucket_p[0], (3.0 + 16.0) / 32, 0);
  assert_int_equal(m.n_nonfinite, 0);
}

/* Blocks of 16 with element 0 = 6 (s = 1 exactly, t = |x|) and 15 elements t ~ U[lo, hi]. */
static float *uniform_blocks(size_t rows, float lo, float hi, float top, uint64_t seed) {
  float *x = malloc(rows * 16 * sizeof *x);
  for (size_t i = 0; i < rows * 16; ++i) {
    float u = ufp4_philox_uniform(seed, 1, i);
    float v = lo + (hi - lo) * u;
    x[i] = (ufp4_philox_u32(seed, 2, i) & 1) ? -v : v;
    if (i % 16 == 0) x[i] = top;
  }
  return x;
}

static void test_shrink_bias_geometry(void **state) {
  (void)state;
  const size_t rows = 1 << 15; /* 491520 uniform elements */
  ufp4_qformat f = ufp4_qformat_default();
  ufp4_qmeasures m;
  /* (a) t ~ U[1.75, 2.5], the whole RNE bin of E2M1 level 2 (t in [1.75, 2.5] -> 2). Its half-widths
   * are l = (2 - 1.5)/2 = 0.25 and r = (3 - 2)/2 = 0.5, so E[rho - t] = (l - r)/2 = -0.125: the
   * mean of 2 - t over U[1.75, 2.5] is 2 - 2.125. With one exact element per block, the expectation
   * is 15/16 * -0.125. sd of rho - t is 0.75/sqrt(12) = 0.2165, se = 0.2165/sqrt(15 rows). */
  float *x = uniform_blocks(rows, 1.75f, 2.5f, 6.0f, 1);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, 16, &m), 0);
  double se = 0.75 / sqrt(12.0) / sqrt(15.0 * rows);
  if (fabs(m.shrink_bias - 15.0 / 16 * -0.125) > 5 * se) fail_msg("level-2 bin bias %.6f", m.shrink_bias);
  /* No zero inputs here, so the nonzero-only mean is the same mean. */
  ASSERT_CLOSE(m.mean_rel_err, m.shrink_bias, 1e-12);
  ASSERT_CLOSE(m.bucket_p[4], 15.0 / 16, 0);
  free(x);
  /* (b) t ~ U[1.5, 3] (density 2/3): integrals of rho - t per bin,
   *   [1.5, 1.75) -> 1.5: -(0.25^2)/2 = -0.03125
   *   [1.75, 2.5] -> 2:   -(0.5^2 - 0.25^2)/2 = -0.09375 (= -0.125 * 0.75, level 2's contribution)
   *   (2.5, 3]    -> 3:   +(0.5^2)/2 = +0.125
   * sum 0, so E = 0 here: level 3's lower half-bin cancels level 2's shrinkage. Level 2 holds half of
   * the mass, and conditioned on it the bias is -0.125 (checked in (a)). Bucket fractions: 1/6, 1/2,
   * 1/3 (times 15/16). sd of rho - t is at most 0.5/sqrt(3). */
  x = uniform_blocks(rows, 1.5f, 3.0f, 6.0f, 2);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, 16, &m), 0);
  se = 0.5 / sqrt(3.0) / sqrt(15.0 * rows);
  if (fabs(m.shrink_bias) > 5 * se) fail_msg("U[1.5,3] bias %.6f", m.shrink_bias);
  double sb = sqrt(0.25 / (15.0 * rows)) * 15 / 16; /* binomial se of a fraction */
  assert_true(fabs(m.bucket_p[3] - 15.0 / 16 / 6) < 5 * sb);
  assert_true(fabs(m.bucket_p[4] - 15.0 / 16 / 2) < 5 * sb);
  assert_true(fabs(m.bucket_p[5] - 15.0 / 16 / 3) < 5 * sb);
  free(x);
  /* (c) E2M1 on t ~ U[2, 3.5): bins [2, 2.5] -> 2 (-(0.5^2)/2 = -0.125) and (2.5, 3.5) -> 3 (0):
   * E = -0.125/1.5 = -1/12 (times 15/16): shrinkage without a compensating upper half-bin. */
  x = uniform_blocks(rows, 2.0f, 3.5f, 6.0f, 3);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, 16, &m), 0);
  se = 1.5 / sqrt(12.0) / sqrt(15.0 * rows);
  if (fabs(m.shrink_bias - 15.0 / 16 * (-1.0 / 12)) > 5 * se) fail_msg("U[2,3.5] bias %.6f", m.shrink_bias);
  free(x);
  /* (d) E1M2 on t ~ U[0, 1.75] (block max 1.75, s = 1): every interior bin is symmetric (0
   * bias); the zero bin [0, 0.125] gives -(0.125^2)/2 and the top bin [1.625, 1.75] gives
   * +(0.125^2)/2, which cancel: E = 0. */
  f.grid = UFP4_GRID_E1M2;
  x = uniform_blocks(rows, 0.0f, 1.75f, 1.75f, 4);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, 16, &m), 0);
  se = 0.25 / sqrt(12.0) / sqrt(15.0 * rows);
  if (fabs(m.shrink_bias) > 5 * se) fail_msg("E1M2 uniform bias %.6f (se %.2g)", m.shrink_bias, se);
  free(x);
}

static void test_threads(void **state) {
  (void)state;
  const size_t rows = 512, cols = 1024;
  float *x = malloc(rows * cols * sizeof *x);
  ufp4_synth_spec sp = ufp4_synth_default(UFP4_DIST_LAPLACE, 8);
  assert_int_equal(ufp4_synth_fill(&sp, x, rows * cols), 0);
  ufp4_qformat f = ufp4_qformat_default();
  f.rht = 16;
  f.rht_signs = ufp4_rht_signs_nvidia16;
  ufp4_qmeasures a, b;
  ufp4_set_threads(1);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, cols, &a), 0);
  ufp4_set_threads(2);
  assert_int_equal(ufp4_measure_tensor(&f, x, rows, cols, &b), 0);
  assert_memory_equal(&a, &b, sizeof a);
  free(x);
}

static void test_bad_args(void **state) {
  (void)state;
  ufp4_qformat f = ufp4_qformat_default();
  float x[32] = {0};
  ufp4_qmeasures m;
  assert_true(ufp4_measure_tensor(&f, NULL, 1, 32, &m) < 0);
  assert_true(ufp4_measure_tensor(&f, x, 1, 32, NULL) < 0);
  f.rht = 16;
  assert_true(ufp4_measure_tensor(&f, x, 1, 24, &m) < 0);
  f.rht = 0;
  f.block = 3;
  assert_true(ufp4_measure_tensor(&f, x, 1, 32, &m) < 0);
}

/* ---------------------------------------------------------------- chain */

static void direct_layer1(const ufp4_qformat *f, const float *x, size_t T, size_t d, uint64_t seed,
                          double *ratio, double *cosv, double *eta) {
  float *w = malloc(d * d * sizeof *w), *xq = malloc(T * d * sizeof *xq), *wq = malloc(d * d * sizeof *wq);
  float *xr = malloc(T * d * sizeof *xr), *wr = malloc(d * d * sizeof *wr);
  const float sd = (float)(1.0 / sqrt((double)d));
  for (size_t i = 0; i < d * d; ++i) w[i] = ufp4_philox_normal(seed, 1, i) * sd;
  ufp4_qformat fa = *f, fb = *f;
  fa.stream = f->stream;
  fb.stream = f->stream + 1;
  assert_int_equal(ufp4_fake_quant(&fa, x, xq, T, d), 0);
  assert_int_equal(ufp4_fake_quant(&fb, w, wq, d, d), 0);
  memcpy(xr, x, T * d * sizeof *xr);
  memcpy(wr, w, d * d * sizeof *wr);
  if (f->rht) {
    ufp4_rht_rows(xr, T, d, f->rht, f->rht_signs);
    ufp4_rht_rows(wr, d, d, f->rht, f->rht_signs);
  }
  double ya = 0, yb = 0, yab = 0, qa = 0, aa = 0, qb = 0, bb = 0;
  for (size_t i = 0; i < T * d; ++i) { qa += (double)xq[i] * xr[i]; aa += (double)xr[i] * xr[i]; }
  for (size_t i = 0; i < d * d; ++i) { qb += (double)wq[i] * wr[i]; bb += (double)wr[i] * wr[i]; }
  for (size_t t = 0; t < T; ++t)
    for (size_t o = 0; o < d; ++o) {
      double r = 0, q = 0;
      for (size_t k = 0; k < d; ++k) {
        r += (double)x[t * d + k] * w[o * d + k];
        q += (double)xq[t * d + k] * wq[o * d + k];
      }
      ya += r * r;
      yb += q * q;
      yab += r * q;
    }
  *ratio = sqrt(yb / ya);
  *cosv = yab / sqrt(ya * yb);
  *eta = (qa / aa) * (qb / bb);
  free(w); free(xq); free(wq); free(xr); free(wr);
}

static void test_chain(void **state) {
  (void)state;
  const size_t T = 64, d = 128;
  float *x = malloc(T * d * sizeof *x);
  ufp4_synth_spec sp = ufp4_synth_default(UFP4_DIST_OUTLIERS, 21);
  assert_int_equal(ufp4_synth_fill(&sp, x, T * d), 0);
  ufp4_qformat fs[3];
  fs[0] = ufp4_qformat_default();
  fs[1] = fs[0];
  fs[1].grid = UFP4_GRID_E1M2;
  fs[1].rht = 16;
  fs[1].rht_signs = ufp4_rht_signs_nvidia16;
  fs[2] = fs[0];
  fs[2].round = UFP4_ROUND_SR;
  fs[2].seed = 5;
  fs[2].stream = 100;
  for (int k = 0; k < 3; ++k) {
    ufp4_chain_layer L[4];
    if (ufp4_chain_simulate(&fs[k], x, T, d, 4, 77, L) != 0) fail_msg("%s", ufp4_last_error());
    double ratio, cosv, eta;
    direct_layer1(&fs[k], x, T, d, 77, &ratio, &cosv, &eta);
    /* fp32 sgemm vs double: relative 1e-5 is far above fp32 rounding of 128-term sums. */
    ASSERT_CLOSE(L[0].signal_ratio, ratio, 1e-5);
    ASSERT_CLOSE(L[0].cosine, cosv, 1e-5);
    ASSERT_CLOSE(L[0].eta, eta, 1e-10);
    ASSERT_CLOSE(L[0].eta_cum, L[0].eta, 0);
    double cum = 1;
    for (int l = 0; l < 4; ++l) {
      cum *= L[l].eta;
      ASSERT_CLOSE(L[l].eta_cum, cum, 0);
      assert_true(L[l].eta > 0.8 && L[l].eta < 1.1);
      assert_true(L[l].cosine > 0.8 && L[l].cosine <= 1.0 + 1e-9);
    }
  }
  /* Bad arguments: d not a multiple of the block, K < 1. */
  ufp4_chain_layer L[1];
  ufp4_qformat f = ufp4_qformat_default();
  assert_true(ufp4_chain_simulate(&f, x, T, 24, 1, 1, L) < 0);
  assert_true(ufp4_chain_simulate(&f, x, T, d, 0, 1, L) < 0);
  f.rht = 256;
  assert_true(ufp4_chain_simulate(&f, x, T, d, 1, 1, L) < 0);
  free(x);
}

/* A tensor with nothing to measure (every block holds a NaN or Inf, so every element is skipped)
 * gives NaN measures, not the perfect score (alpha 1, SQNR +inf) that empty sums would. */
static void test_nothing_kept(void **state) {
  (void)state;
  float x[2 * 32];
  for (int i = 0; i < 64; i++) x[i] = 0.37f * (float)(i % 7) - 1.1f; /* off the grid: a finite SQNR */
  x[5] = NAN, x[16 + 9] = INFINITY, x[32 + 1] = -INFINITY, x[48] = NAN;
  ufp4_qformat f = ufp4_qformat_default();
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(&f, x, 2, 32, &m), 0);
  assert_int_equal(m.n, 64);
  assert_int_equal(m.n_nonfinite, 64);
  assert_true(isnan(m.alpha) && isnan(m.nmse) && isnan(m.sqnr_db) && isnan(m.shrink_bias));
  assert_true(isnan(m.underflow) && isnan(m.clipped) && isnan(m.b_eff));
  x[48] = 1.0f; /* one block clean again: finite measures over its 16 elements */
  assert_int_equal(ufp4_measure_tensor(&f, x, 2, 32, &m), 0);
  assert_int_equal(m.n_nonfinite, 48);
  assert_true(isfinite(m.alpha) && isfinite(m.sqnr_db));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_blocks_hand),       cmocka_unit_test(test_blocks_long),
      cmocka_unit_test(test_tensor_vs_reference), cmocka_unit_test(test_bucket_extremes),
      cmocka_unit_test(test_underflow_crafted), cmocka_unit_test(test_shrink_bias_geometry),
      cmocka_unit_test(test_threads),           cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_chain),             cmocka_unit_test(test_nothing_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
