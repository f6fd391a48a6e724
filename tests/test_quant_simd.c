/* The AVX2 quantizer and RHT give the same bytes as the scalar reference (the specification):
 * ufp4_quantize / ufp4_fake_quant vs ufp4_quantize_reference / ufp4_fake_quant_reference for
 * every grid x scale x rounding x block shape (1x4, 1x8, 1x16, 1x32, 1x64, 16x16 tiles) x RHT
 * (0, 16, 32, 64, 256), on random and adversarial tensors; SIMD at 1 and 2 threads alike; the
 * fast FWHT against an FWHT written here; and a hand-written E2M1 RNE quantizer on plain data.
 * Exits 77 (skip) on a CPU without AVX2/FMA or with UFP4_NO_SIMD set. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"
#include "ufp4/error.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

#include "quant_fill_util.h"

static void require_simd(void) {
  if (!ufp4_simd_enabled()) {
    fprintf(stderr, "test_quant_simd: no AVX2/FMA or UFP4_NO_SIMD set; nothing to compare\n");
    exit(77);
  }
}

static int same_bytes(const void *a, const void *b, size_t n) { return n == 0 || memcmp(a, b, n) == 0; }

static size_t first_diff(const void *a, const void *b, size_t n) {
  const unsigned char *p = a, *q = b;
  for (size_t i = 0; i < n; i++)
    if (p[i] != q[i]) return i;
  return n;
}

/* One format on one tensor: quantize and fake_quant, SIMD (1 and 2 threads) vs reference. */
static void check_format(const ufp4_qformat *f, const float *x, size_t rows, size_t cols, const char *what) {
  const size_t n = rows * cols;
  float *yr = malloc(n * sizeof *yr), *ys = malloc(n * sizeof *ys);
  assert_non_null(yr);
  assert_non_null(ys);
  char desc[160];
  snprintf(desc, sizeof desc, "%s: grid %s scale %s round %s block %d tile %d rht %d (%zux%zu)", what,
           ufp4_grid_get(f->grid)->name, ufp4_scale_name(f->scale), ufp4_round_name(f->round), f->block,
           f->tile2d, f->rht, rows, cols);
  if (ufp4_fake_quant_reference(f, x, yr, rows, cols)) fail_msg("%s: reference: %s", desc, ufp4_last_error());
  for (int t = 1; t <= 2; t++) {
    omp_set_num_threads(t);
    if (ufp4_fake_quant(f, x, ys, rows, cols)) fail_msg("%s: simd: %s", desc, ufp4_last_error());
    if (!same_bytes(yr, ys, n * sizeof *yr)) {
      size_t i = first_diff(yr, ys, n * sizeof *yr) / sizeof(float);
      fail_msg("%s, %d thread(s): fake_quant element %zu (row %zu col %zu, x = %a): ref %a simd %a", desc, t, i,
               i / cols, i % cols, (double)x[i], (double)yr[i], (double)ys[i]);
    }
  }
  ufp4_qtensor qr, qs;
  if (ufp4_quantize_reference(f, x, rows, cols, &qr)) fail_msg("%s: reference: %s", desc, ufp4_last_error());
  omp_set_num_threads(2);
  if (ufp4_quantize(f, x, rows, cols, &qs)) fail_msg("%s: simd: %s", desc, ufp4_last_error());
  size_t ns = ufp4_scale_count(f, rows, cols);
  if (!same_bytes(qr.codes, qs.codes, n)) {
    size_t i = first_diff(qr.codes, qs.codes, n);
    fail_msg("%s: code %zu: ref %d simd %d", desc, i, qr.codes[i], qs.codes[i]);
  }
  if (!same_bytes(qr.scales, qs.scales, ns * sizeof(float))) fail_msg("%s: scales differ", desc);
  if (qr.scale_bits && !same_bytes(qr.scale_bits, qs.scale_bits, ns)) fail_msg("%s: scale bits differ", desc);
  if (memcmp(&qr.tensor_scale, &qs.tensor_scale, sizeof(float)) != 0) fail_msg("%s: tensor scale differs", desc);
  ufp4_qtensor_free(&qr);
  ufp4_qtensor_free(&qs);
  free(yr);
  free(ys);
}

static const int blocks[][2] = {{16, 0}, {0, 16}, {32, 0}, {8, 0}, {64, 0}, {4, 0}}; /* block, tile */

/* Every grid x scale x rounding x block shape x RHT, on two shapes: cols with a tail that is not
 * a whole 8-block group (and, without RHT, not even a whole block), and rows not a multiple of
 * 16 so that the last band of tiles is short. */
static void run_matrix(int rht, size_t rows, size_t cols) {
  float *x = malloc(rows * cols * sizeof *x);
  assert_non_null(x);
  float signs[UFP4_RHT_MAX];
  for (int g = 0; g < UFP4_GRID_COUNT; g++) {
    fill(x, rows, cols, ufp4_grid_get((ufp4_grid_id)g));
    for (int s = 0; s < UFP4_SCALE_COUNT; s++)
      for (int m = 0; m < UFP4_ROUND_COUNT; m++)
        for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
          ufp4_qformat f = ufp4_qformat_default();
          f.grid = (ufp4_grid_id)g;
          f.scale = (ufp4_scale_kind)s;
          f.round = (ufp4_round_mode)m;
          f.block = blocks[b][0] ? blocks[b][0] : 16;
          f.tile2d = blocks[b][1];
          f.rht = rht;
          f.seed = rnd() | ((uint64_t)rnd() << 32);
          f.stream = rnd() % 5;
          if (rht) {
            if (rht == 16 && (m & 1)) {
              f.rht_signs = ufp4_rht_signs_nvidia16;
            } else if (m != 2) {
              ufp4_rht_signs_random(signs, rht, f.seed);
              f.rht_signs = signs;
            }
          }
          check_format(&f, x, rows, cols, "matrix");
        }
  }
  free(x);
}

static void test_no_rht(void **state) {
  (void)state;
  require_simd();
  run_matrix(0, 37, 208 + 128);  /* 21 blocks of 16 per row: 2 groups + 5 blocks */
  run_matrix(0, 19, 203);        /* a partial last block of 11 */
}

static void test_rht16(void **state) {
  (void)state;
  require_simd();
  run_matrix(16, 37, 336); /* fused 1x16 path, 2 groups + a 5-block tail */
}

static void test_rht_large(void **state) {
  (void)state;
  require_simd();
  run_matrix(32, 18, 352);
  run_matrix(64, 17, 320);
  run_matrix(256, 9, 512);
}

/* A big plain tensor at the bench shape class, many groups, all rounding modes. */
static void test_gaussian_big(void **state) {
  (void)state;
  require_simd();
  const size_t rows = 64, cols = 1024;
  float *x = malloc(rows * cols * sizeof *x);
  for (size_t i = 0; i < rows * cols; i++) x[i] = gauss() * (1.0f + (float)(i % 97));
  for (int g = 0; g < UFP4_GRID_COUNT; g++)
    for (int s = 0; s < UFP4_SCALE_COUNT; s++)
      for (int m = 0; m < UFP4_ROUND_COUNT; m++)
        for (int rht = 0; rht <= 16; rht += 16) {
          ufp4_qformat f = ufp4_qformat_default();
          f.grid = (ufp4_grid_id)g;
          f.scale = (ufp4_scale_kind)s;
          f.round = (ufp4_round_mode)m;
          f.rht = rht;
          f.rht_signs = rht ? ufp4_rht_signs_nvidia16 : NULL;
          f.seed = 77 + (uint64_t)m;
          f.stream = (uint64_t)g;
          check_format(&f, x, rows, cols, "gaussian");
        }
  free(x);
}

/* Independent check of the fast path itself: E2M1, RNE, FP32 1x16 written out here. Edges 0.25,
 * 0.75, ..., 5: a tie goes to the even index (up at 0.75, 1.75, 3.5; down at 0.25, 1.25, 2.5, 5). */
static void test_independent_e2m1(void **state) {
  (void)state;
  require_simd();
  static const float lv[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  static const float ed[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5};
  const size_t rows = 8, cols = 256;
  float *x = malloc(rows * cols * sizeof *x), *y = malloc(rows * cols * sizeof *y);
  for (size_t i = 0; i < rows * cols; i++) x[i] = gauss();
  /* Block 1 of row 0 holds every edge exactly: amax 6 gives s = 1. */
  for (int k = 0; k < 7; k++) {
    x[16 + k] = ed[k];
    x[16 + 7 + k] = -ed[k];
  }
  x[16 + 14] = 6.0f;
  x[16 + 15] = -0.0f;
  ufp4_qformat f = ufp4_qformat_default();
  assert_int_equal(ufp4_fake_quant(&f, x, y, rows, cols), 0);
  for (size_t b = 0; b < rows * cols / 16; b++) {
    float amax = 0;
    for (int k = 0; k < 16; k++) amax = fmaxf(amax, fabsf(x[16 * b + k]));
    float s = amax / 6.0f;
    for (int k = 0; k < 16; k++) {
      float t = x[16 * b + k] / s, a = fabsf(t);
      int idx = 0;
      for (int e = 0; e < 7; e++) idx += (e & 1) ? a >= ed[e] : a > ed[e];
      float want = copysignf(lv[idx], t) * s;
      float got = y[16 * b + k];
      if (memcmp(&want, &got, sizeof want) != 0)
        fail_msg("block %zu elem %d: x %a want %a got %a", b, k, (double)x[16 * b + k], (double)want, (double)got);
    }
  }
  /* The tie block, spelled out: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4. */
  static const float tie_want[7] = {0, 1, 1, 2, 2, 4, 4};
  for (int k = 0; k < 7; k++) {
    assert_true(y[16 + k] == tie_want[k]);
    assert_true(y[16 + 7 + k] == -tie_want[k]);
  }
  assert_true(y[16 + 15] == 0.0f && signbit(y[16 + 15]));
  free(x);
  free(y);
}

/* FWHT as rht.h defines it: butterflies x[j] = a + b, x[j+h] = a - b for h = 1, 2, 4, ..., then
 * one multiply by (float)(1/sqrt(n)). */
static void my_fwht(float *x, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  float s = (float)(1.0 / sqrt((double)n));
  for (int i = 0; i < n; i++) x[i] *= s;
}

static void test_fwht(void **state) {
  (void)state;
  require_simd();
  const size_t rows = 5, cols = 1024;
  float *x = malloc(rows * cols * sizeof *x), *a = malloc(rows * cols * sizeof *a), *b = malloc(rows * cols * sizeof *b);
  for (size_t i = 0; i < rows * cols; i++) {
    x[i] = gauss() * ldexpf(1.0f, (int)(rnd() % 60) - 30);
    if (i % 37 == 0) x[i] = u2f(rnd() & 0x807FFFFFu); /* denormals */
    if (i % 101 == 0) x[i] = -0.0f;
  }
  float signs[UFP4_RHT_MAX];
  for (int n = 2; n <= UFP4_RHT_MAX; n *= 2) {
    ufp4_rht_signs_random(signs, n, (uint64_t)n);
    for (int inv = 0; inv < 2; inv++) {
      memcpy(a, x, rows * cols * sizeof *x);
      memcpy(b, x, rows * cols * sizeof *x);
      int rc = inv ? ufp4_rht_rows_inverse(a, rows, cols, n, signs) : ufp4_rht_rows(a, rows, cols, n, signs);
      assert_int_equal(rc, 0);
      for (size_t c = 0; c < rows * cols; c += (size_t)n) {
        if (!inv)
          for (int i = 0; i < n; i++) b[c + i] *= signs[i];
        my_fwht(b + c, n);
        if (inv)
          for (int i = 0; i < n; i++) b[c + i] *= signs[i];
      }
      if (memcmp(a, b, rows * cols * sizeof *a) != 0) fail_msg("rht n=%d inverse=%d differs", n, inv);
    }
    memcpy(a, x, (size_t)n * sizeof *x);
    memcpy(b, x, (size_t)n * sizeof *x);
    ufp4_fwht(a, n);
    my_fwht(b, n);
    if (memcmp(a, b, (size_t)n * sizeof *a) != 0) fail_msg("ufp4_fwht n=%d differs", n);
  }
  free(x);
  free(a);
  free(b);
}

/* SR bits: element (r, c) reads philox(seed, stream, r*cols + c) whatever the row alignment (odd
 * cols put row starts at every index mod 4); checked by codes against ufp4_encode. */
static void test_sr_bits(void **state) {
  (void)state;
  require_simd();
  const size_t rows = 7, cols = 203;
  float *x = malloc(rows * cols * sizeof *x);
  for (size_t i = 0; i < rows * cols; i++) x[i] = gauss();
  for (int m = UFP4_ROUND_SR; m <= UFP4_ROUND_SR8; m++) {
    ufp4_qformat f = ufp4_qformat_default();
    f.round = (ufp4_round_mode)m;
    f.block = 8;
    f.seed = 0xDEADBEEFCAFEull;
    f.stream = 3;
    ufp4_qtensor q;
    assert_int_equal(ufp4_quantize(&f, x, rows, cols, &q), 0);
    const ufp4_grid *g = ufp4_grid_get(f.grid);
    for (size_t r = 0; r < rows; r++)
      for (size_t c = 0; c < cols; c++) {
        float s = q.scales[r * ((cols + 7) / 8) + c / 8];
        uint32_t bits = ufp4_philox_u32(f.seed, f.stream, r * cols + c);
        uint8_t want = ufp4_encode(g, x[r * cols + c] / s, f.round, bits);
        if (q.codes[r * cols + c] != want)
          fail_msg("%s (%zu,%zu): code %d want %d", ufp4_round_name(f.round), r, c, q.codes[r * cols + c], want);
      }
    ufp4_qtensor_free(&q);
  }
  free(x);
}

/* SR decision boundaries. In the bottom bin (0 to step0 = levels[1]) with scale 1, the reference
 * rounds up iff r < T for SR, T = t * 2^32 / step0, and iff (r >> 24) < floor(T8) for SR8,
 * T8 = t * 256 / step0, r = philox(seed, stream, index). Each element's t is built from its
 * own r so that T sits on r, just above or below it, or (small r, where t can hold it) a
 * fraction away -- the cases a wrong rounding of T (nearest or floor instead of ceil) would
 * miss. Codes are checked against r < T written here, and fake_quant against the reference. */
static void test_sr_boundaries(void **state) {
  (void)state;
  require_simd();
  const size_t cols = 1 << 16;
  float *x = malloc(cols * sizeof *x), *yr = malloc(cols * sizeof *yr), *ys = malloc(cols * sizeof *ys);
  uint8_t *want = malloc(cols);
  static const ufp4_grid_id grids[] = {UFP4_GRID_E2M1, UFP4_GRID_E1M2, UFP4_GRID_INT4};
  static const float frac[] = {0.25f, 0.5f, 0.75f, -0.25f};
  for (int gi = 0; gi < 3; gi++)
    for (int m = UFP4_ROUND_SR; m <= UFP4_ROUND_SR8; m++) {
      const ufp4_grid *g = ufp4_grid_get(grids[gi]);
      const float step0 = g->levels[1];
      ufp4_qformat f = ufp4_qformat_default();
      f.grid = grids[gi];
      f.round = (ufp4_round_mode)m;
      f.seed = 0x5EED0000ull + (uint64_t)(gi * 2 + m);
      f.stream = 11;
      for (size_t i = 0; i < cols; i++) {
        uint32_t r = ufp4_philox_u32(f.seed, f.stream, i);
        if (i % 16 == 0) { /* amax = g_max makes the scale exactly 1 */
          x[i] = g->g_max;
          want[i] = (uint8_t)(g->n_levels - 1);
          continue;
        }
        int up;
        if (m == UFP4_ROUND_SR) {
          float T;
          if (r < (1u << 21))
            T = (float)r + frac[i % 4];
          else if (i % 3 == 0)
            T = (float)r;
          else
            T = nextafterf((float)r, (i % 3 == 1) ? 0.0f : INFINITY);
          if (T < 0) T = 0.25f;
          x[i] = ldexpf(T, -32) * step0; /* exact: a power-of-two scaling of a normal float */
          up = (double)r < (double)T;
        } else {
          float T8 = (float)(r >> 24) + frac[i % 4];
          if (T8 < 0) T8 = 0.75f;
          x[i] = T8 / 256.0f * step0;
          up = (r >> 24) < (uint32_t)floorf(T8);
        }
        if (i & 1) x[i] = -x[i];
        int idx = up ? 1 : 0;
        int neg = (i & 1) != 0;
        want[i] = g->id == UFP4_GRID_INT4 ? (uint8_t)((neg ? -idx : idx) & 15) : (uint8_t)((neg << 3) | idx);
      }
      ufp4_qtensor q;
      assert_int_equal(ufp4_quantize(&f, x, 1, cols, &q), 0);
      for (size_t i = 0; i < cols; i++)
        if (q.codes[i] != want[i])
          fail_msg("%s %s element %zu (x = %a): code %d want %d", g->name, ufp4_round_name(f.round), i, (double)x[i],
                   q.codes[i], want[i]);
      ufp4_qtensor_free(&q);
      assert_int_equal(ufp4_fake_quant_reference(&f, x, yr, 1, cols), 0);
      assert_int_equal(ufp4_fake_quant(&f, x, ys, 1, cols), 0);
      assert_memory_equal(yr, ys, cols * sizeof *yr);
    }
  free(x);
  free(yr);
  free(ys);
  free(want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_independent_e2m1), cmocka_unit_test(test_fwht),
      cmocka_unit_test(test_sr_bits),          cmocka_unit_test(test_no_rht),
      cmocka_unit_test(test_rht16),            cmocka_unit_test(test_rht_large),
      cmocka_unit_test(test_gaussian_big),     cmocka_unit_test(test_sr_boundaries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
