/* Thread-count and layout independence of quant.h: the same bits at 1, 2 and 3 threads, and
 * stochastic rounding addressed by (seed, stream, r*cols + c) alone. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

enum { R = 67, C = 256 }; /* 67 rows: the last 16-row band of tiles is short */

static float *xin;

static int setup(void **state) {
  (void)state;
  xin = malloc(sizeof(float) * R * C);
  for (size_t i = 0; i < (size_t)R * C; i++) xin[i] = ufp4_philox_normal(42, 0, i) * 3.0f;
  xin[5 * C + 7] = 40.0f; /* one outlier, so RHT visibly spreads it */
  return 0;
}
static int teardown(void **state) {
  (void)state;
  free(xin);
  return 0;
}

static ufp4_qformat mk(ufp4_grid_id g, ufp4_scale_kind s, ufp4_round_mode m, int block, int rht,
                       int tile) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = g;
  f.scale = s;
  f.round = m;
  f.block = block;
  f.rht = rht;
  f.rht_signs = rht == 16 ? ufp4_rht_signs_nvidia16 : NULL;
  f.tile2d = tile;
  f.seed = 0x1234;
  f.stream = 7;
  return f;
}

static void fq(const ufp4_qformat *f, const float *x, float *y, size_t rows) {
  int rc = ufp4_fake_quant(f, x, y, rows, C);
  if (rc) fail_msg("fake_quant: %s", ufp4_last_error());
}

static void test_thread_count(void **state) {
  (void)state;
  const ufp4_qformat fs[] = {
      mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 0, 0),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 0),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_RNE, 16, 16, 0),
      mk(UFP4_GRID_E1M2, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 16, 0),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, UFP4_ROUND_SR, 16, 16, 0),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, UFP4_ROUND_SR, 16, 0, 16),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_E8M0_RCEIL, UFP4_ROUND_SR8, 32, 64, 0),
  };
  const int nf = (int)(sizeof fs / sizeof fs[0]);
  float *a = malloc(sizeof(float) * R * C), *b = malloc(sizeof(float) * R * C);
  float *inplace = malloc(sizeof(float) * R * C);
  for (int i = 0; i < nf; i++) {
    omp_set_num_threads(1);
    fq(&fs[i], xin, a, R);
    for (int t = 2; t <= 3; t++) {
      omp_set_num_threads(t);
      fq(&fs[i], xin, b, R);
      if (memcmp(a, b, sizeof(float) * R * C) != 0)
        fail_msg("format %d differs between 1 and %d threads", i, t);
    }
    /* y == x is allowed and gives the same result */
    memcpy(inplace, xin, sizeof(float) * R * C);
    fq(&fs[i], inplace, inplace, R);
    if (memcmp(a, inplace, sizeof(float) * R * C) != 0) fail_msg("format %d: in-place differs", i);
  }
  /* The caller's x is never modified (RHT rotates a copy). */
  for (size_t i = 0; i < (size_t)R * C; i++)
    assert_true(xin[i] == ufp4_philox_normal(42, 0, i) * 3.0f || i == 5 * C + 7);
  omp_set_num_threads(2);
  free(a);
  free(b);
  free(inplace);
}

static void test_sub_range(void **state) {
  (void)state;
  /* Rows 0..k-1 of a tensor have the same indices r*cols + c whether quantized alone or as part
   * of the whole, so the SR output must match (1xN: any k; tiles: k a multiple of 16). */
  float *whole = malloc(sizeof(float) * R * C), *part = malloc(sizeof(float) * R * C);
  const ufp4_qformat fs[] = {
      mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 0),
      mk(UFP4_GRID_E1M2, UFP4_SCALE_E8M0_CEIL, UFP4_ROUND_SR, 32, 16, 0),
      mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 16),
  };
  for (int i = 0; i < 3; i++) {
    size_t k = fs[i].tile2d ? 32 : 23;
    fq(&fs[i], xin, whole, R);
    fq(&fs[i], xin, part, k);
    if (memcmp(whole, part, sizeof(float) * k * C) != 0)
      fail_msg("format %d: first %zu rows differ from the whole tensor", i, k);
  }
  free(whole);
  free(part);

  /* Row 40 in the middle: every code equals encode(x/s, SR, philox_u32(seed, stream, r*C + c)). */
  ufp4_qformat f = mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 0);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, xin, R, C, &q), 0);
  const ufp4_grid *g = ufp4_grid_get(f.grid);
  for (int r = 38; r < 42; r++)
    for (int c = 0; c < C; c++) {
      float s = q.scales[r * (C / 16) + c / 16];
      uint32_t bits = ufp4_philox_u32(f.seed, f.stream, (uint64_t)r * C + (uint64_t)c);
      uint8_t want = ufp4_encode(g, xin[r * C + c] / s, UFP4_ROUND_SR, bits);
      if (q.codes[r * C + c] != want)
        fail_msg("(%d,%d): code %d, want %d", r, c, q.codes[r * C + c], want);
    }
  ufp4_qtensor_free(&q);
}

static size_t count_diff(const float *a, const float *b, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; i++) d += a[i] != b[i];
  return d;
}

static void test_seed_stream_differ(void **state) {
  (void)state;
  /* For an element strictly between two levels the up/down choice differs between independent
   * draws with probability 2p(1-p) (1/3 on average), so well over a tenth must differ. */
  const size_t n = (size_t)R * C;
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
  ufp4_qformat f = mk(UFP4_GRID_E2M1, UFP4_SCALE_FP32, UFP4_ROUND_SR, 16, 0, 0);
  fq(&f, xin, a, R);
  ufp4_qformat g = f;
  g.seed = f.seed + 1;
  fq(&g, xin, b, R);
  assert_true(count_diff(a, b, n) > n / 10);
  g = f;
  g.stream = f.stream + 1;
  fq(&g, xin, b, R);
  assert_true(count_diff(a, b, n) > n / 10);
  fq(&f, xin, b, R); /* same seed and stream: identical */
  assert_int_equal(count_diff(a, b, n), 0);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thread_count),
      cmocka_unit_test(test_sub_range),
      cmocka_unit_test(test_seed_stream_differ),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
