/* Block scales of quant.h: hand-computed cases for every scale kind, tails and 2D tiles, and a
 * bit-exact comparison of ufp4_fake_quant with an independent per-element reference. */
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
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static ufp4_qformat fmt(ufp4_grid_id g, ufp4_scale_kind s, int block) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = g;
  f.scale = s;
  f.block = block;
  return f;
}

static void fq(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols) {
  int rc = ufp4_fake_quant(f, x, y, rows, cols);
  if (rc) fail_msg("fake_quant: %s", ufp4_last_error());
}

/* ---- Independent reference ---------------------------------------------------------------- */

/* Nearest level of |t| by exhaustive distance search (exact in double); ties broken by mode. */
static int ref_nearest(const ufp4_grid *g, float t, ufp4_round_mode mode) {
  double a = fabs((double)t);
  if (a >= g->g_max) return g->n_levels - 1;
  int best = 0;
  double bd = INFINITY;
  for (int i = 0; i < g->n_levels; i++) {
    double d = fabs(a - (double)g->levels[i]);
    if (d < bd) {
      bd = d;
      best = i;
    } else if (d == bd) { /* tie between best (lower) and i (upper) */
      if (mode == UFP4_ROUND_RNA) best = i;
      else if (mode == UFP4_ROUND_RNE) best = (i % 2 == 0) ? i : best;
      /* RNZ keeps the lower one */
    }
  }
  return best;
}

static uint8_t ref_code(const ufp4_grid *g, float t, ufp4_round_mode mode) {
  int idx = ref_nearest(g, t, mode);
  int neg = signbit(t) != 0;
  if (g->id == UFP4_GRID_INT4) return (uint8_t)((neg ? -idx : idx) & 0xF);
  return (uint8_t)((neg << 3) | idx);
}

/* E8M0 unbiased exponent, written from the rule definitions with frexpf. */
static int ref_e8m0_code(float amax, const ufp4_grid *g, ufp4_scale_kind k) {
  if (amax == 0.0f) return 0;
  int e, ex;
  float m;
  switch (k) {
  case UFP4_SCALE_E8M0_FLOOR:
    frexpf(amax, &ex); /* amax = m 2^ex, m in [0.5, 1): floor(log2 amax) = ex - 1 */
    e = ex - 1 - g->emax;
    break;
  case UFP4_SCALE_E8M0_CEIL:
    m = frexpf(amax, &ex);
    e = (m == 0.5f ? ex - 1 : ex) - g->emax;
    break;
  case UFP4_SCALE_E8M0_EVEN: {
    /* mantissa rounded half-up to mbits bits (a carry bumps the exponent), then floor */
    uint32_t b = (f2u(amax) + (1u << (23 - g->mbits - 1))) & 0x7F800000u;
    frexpf(u2f(b), &ex);
    e = ex - 1 - g->emax;
    break;
  }
  default: /* RCEIL */
    m = frexpf(amax * (1.0f / g->g_max), &ex);
    e = m == 0.5f ? ex - 1 : ex;
    break;
  }
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return e + 127;
}

/* Fake-quantizes rows x cols (1xN blocks, RNE/RNA/RNZ, finite inputs) the plain way. */
static void ref_fake_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows,
                           size_t cols) {
  const ufp4_grid *g = ufp4_grid_get(f->grid);
  float s_enc = 1.0f;
  if (f->scale == UFP4_SCALE_NVFP4) {
    float at = 0.0f;
    for (size_t i = 0; i < rows * cols; i++) at = fmaxf(at, fabsf(x[i]));
    if (at > 0.0f && isfinite(448.0f * g->g_max / at)) s_enc = 448.0f * g->g_max / at;
  }
  for (size_t r = 0; r < rows; r++) {
    for (size_t c0 = 0; c0 < cols; c0 += (size_t)f->block) {
      size_t c1 = c0 + (size_t)f->block < cols ? c0 + (size_t)f->block : cols;
      const float *p = x + r * cols;
      float amax = 0.0f;
      for (size_t c = c0; c < c1; c++) amax = fmaxf(amax, fabsf(p[c]));
      float s, enc = 0.0f;
      int use_div = 0;
      if (f->scale == UFP4_SCALE_FP32) {
        s = amax / g->g_max;
        use_div = 1;
      } else if (f->scale == UFP4_SCALE_NVFP4) {
        s = ufp4_e4m3_to_f32(ufp4_f32_to_e4m3(amax * s_enc / g->g_max)) / s_enc;
        enc = 1.0f / s;
      } else {
        int code = ref_e8m0_code(amax, g, f->scale);
        s = ldexpf(1.0f, code - 127);
        enc = ldexpf(1.0f, 127 - code);
      }
      for (size_t c = c0; c < c1; c++) {
        if (amax == 0.0f || s == 0.0f) {
          y[r * cols + c] = 0.0f;
          continue;
        }
        float t = use_div ? p[c] / s : p[c] * enc;
        y[r * cols + c] = ufp4_decode(g, ref_code(g, t, f->round)) * s;
      }
    }
  }
}

/* Normal values spread over 2^-8 .. 2^8 so that block maxima and E4M3/E8M0 scales vary. Every
 * other group of 16 is grid-aligned instead: multiples of 2^(e-3) led by g_max * 2^e, so that
 * with s = 2^e many t land exactly on the tie points where RNE, RNA and RNZ differ. */
static void random_tensor_g(float *x, size_t n, uint64_t seed, float g_max) {
  for (size_t i = 0; i < n; i++) {
    float z = ufp4_philox_normal(seed, 1, i);
    int e = (int)(ufp4_philox_u32(seed, 2, i / 16) % 17) - 8;
    if ((i / 16) % 2 == 0) {
      x[i] = ldexpf(z, e);
    } else {
      float v = i % 16 == 0 ? g_max : fminf(roundf(fabsf(z) * 8.0f) / 8.0f, g_max);
      x[i] = ldexpf(z < 0 ? -v : v, e);
    }
  }
}
static void random_tensor(float *x, size_t n, uint64_t seed) { random_tensor_g(x, n, seed, 6.0f); }

static void assert_bits_equal(const float *a, const float *b, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (f2u(a[i]) != f2u(b[i]))
      fail_msg("%s: element %zu: %.9g (0x%08x) != %.9g (0x%08x)", what, i, (double)a[i],
               f2u(a[i]), (double)b[i], f2u(b[i]));
}

/* ---- Hand-computed cases ------------------------------------------------------------------ */

static void test_fp32_amax6(void **state) {
  (void)state;
  /* amax = 6 -> s = 6/6 = 1 and t = x: the output is RNE_E2M1(x). Ties go to the even index
   * (levels 0 .5 1 1.5 2 3 4 6 have indices 0..7): 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
   * 2.5 -> 2, 3.5 -> 4, 5 -> 4. */
  const float x[16] = {6, -0.3f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,
                       5, -5.5f, 0.1f, -2.4f, 4.4f, 0.74f, -1.3f, 2.6f};
  const float want[16] = {6, -0.5f, 0, 1, 1, 2, 2, 4, 4, -6, 0, -2, 4, 0.5f, -1.5f, 3};
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 16);
  float y[16];
  fq(&f, x, y, 1, 16);
  assert_bits_equal(y, want, 16, "amax 6");
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, 1, 16, &q), 0);
  assert_true(q.scales[0] == 1.0f);
  assert_null(q.scale_bits);
  assert_int_equal(q.codes[0], 0x7);  /* +6 */
  assert_int_equal(q.codes[9], 0xF);  /* -6 */
  assert_int_equal(q.codes[14], 0xB); /* -1.5 */
  ufp4_qtensor_free(&q);
}

static void test_fp32_amax3(void **state) {
  (void)state;
  /* amax = 3 -> s = 0.5, t = 2x:
   *   3 -> 6 -> 6*0.5 = 3;  1 -> 2 -> 1;  0.2 -> 0.4 -> 0.5 -> 0.25;  -0.6 -> -1.2 -> -1 -> -0.5
   *   1.1 -> 2.2 -> 2 -> 1;  2.4 -> 4.8 -> 4 -> 2;  0.125 -> 0.25 (tie, even 0) -> 0;
   *   1.3 -> 2.6 -> 3 -> 1.5 */
  const float x[8] = {3, 1, 0.2f, -0.6f, 1.1f, 2.4f, 0.125f, 1.3f};
  const float want[8] = {3, 1, 0.25f, -0.5f, 1, 2, 0, 1.5f};
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 8);
  float y[8];
  fq(&f, x, y, 1, 8);
  assert_bits_equal(y, want, 8, "amax 3");
}

static void test_fp32_divides(void **state) {
  (void)state;
  /* t is x / s, not x * (1/s): with amax = 0x1.f35196p+0, s = amax/6, the two elements below
   * give x/s = 0.75 and 3.5 exactly (ties: RNE -> 1 and 4), while x * fl(1/s) is 0.74999994 and
   * 3.4999998 (-> 0.5 and 3). Values found by a float32 search in numpy. */
  const float amax = 0x1.f35196p+0f;
  const float x[4] = {amax, 0x1.f35194p-3f, 0x1.2344ecp+0f, 0};
  const float s = amax / 6.0f;
  assert_true(x[1] / s == 0.75f && x[2] / s == 3.5f);
  const float want[4] = {6 * s, 1 * s, 4 * s, 0};
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 4);
  float y[4];
  fq(&f, x, y, 1, 4);
  assert_bits_equal(y, want, 4, "fp32 divides");
}

static void test_e1m2_equals_int4(void **state) {
  (void)state;
  /* s_int4 = amax/7 = (amax/1.75)/4 exactly, so t_int4 = 4 t_e1m2 and code*s agree. INT4 has no
   * -0, so the sign of zero may differ: compare with == there, bits elsewhere. */
  enum { R = 9, C = 77 };
  float *x = malloc(sizeof(float) * R * C), *a = malloc(sizeof(float) * R * C),
        *b = malloc(sizeof(float) * R * C);
  random_tensor(x, R * C, 11);
  const ufp4_round_mode modes[] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_RNZ, UFP4_ROUND_SR,
                                   UFP4_ROUND_SR8};
  const int blocks[] = {16, 32};
  for (int m = 0; m < 5; m++)
    for (int bi = 0; bi < 2; bi++) {
      ufp4_qformat f = fmt(UFP4_GRID_E1M2, UFP4_SCALE_FP32, blocks[bi]);
      f.round = modes[m];
      f.seed = 5;
      fq(&f, x, a, R, C);
      f.grid = UFP4_GRID_INT4;
      fq(&f, x, b, R, C);
      for (size_t i = 0; i < (size_t)R * C; i++) {
        if (a[i] == 0.0f) assert_true(b[i] == 0.0f);
        else if (f2u(a[i]) != f2u(b[i]))
          fail_msg("mode %d block %d elt %zu: e1m2 %.9g int4 %.9g", m, blocks[bi], i,
                   (double)a[i], (double)b[i]);
      }
    }
  free(x);
  free(a);
  free(b);
}

static void test_nvfp4_hand(void **state) {
  (void)state;
  /* One row, two blocks of 16. amax_tensor = 12 -> S_enc = 448*6/12 = 224.
   * Block 0: amax 12 -> d = 12*224/6 = 448 (E4M3 0x7E: exponent 8+7=15, mantissa 6/8), scale =
   *   448/224 = 2, e = 0.5: 12 -> 6 -> 12; 5 -> 2.5 -> 2 (tie, even) -> 4; -3 -> -1.5 -> -3;
   *   1 -> 0.5 -> 1.
   * Block 1: amax 5 -> d = 5*224/6 = 186.67, which E4M3 (step 16 in [128, 256)) rounds to 192
   *   (0x74: exponent 7+7=14, mantissa 4/8); scale = 192/224 = 6/7, e = 7/6:
   *   5 -> 5.83 -> 6; 2 -> 2.33 -> 2; -1 -> -1.17 -> -1; 0.3 -> 0.35 -> 0.5. */
  float x[32] = {0};
  x[0] = 12, x[1] = 5, x[2] = -3, x[3] = 1;
  x[16] = 5, x[17] = 2, x[18] = -1, x[19] = 0.3f;
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, 16);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, 1, 32, &q), 0);
  assert_true(q.tensor_scale == 224.0f);
  assert_int_equal(q.scale_bits[0], 0x7E);
  assert_int_equal(q.scale_bits[1], 0x74);
  assert_true(q.scales[0] == 2.0f);
  const float s1 = 192.0f / 224.0f;
  assert_true(q.scales[1] == s1);
  float y[32], want[32] = {0};
  want[0] = 12, want[1] = 4, want[2] = -3, want[3] = 1;
  want[16] = 6 * s1, want[17] = 2 * s1, want[18] = -1 * s1, want[19] = 0.5f * s1;
  ufp4_dequantize(&q, y);
  for (int i = 0; i < 32; i++)
    if (x[i] == 0.0f) want[i] = 0.0f; /* zeros stay +0 */
  assert_bits_equal(y, want, 32, "nvfp4 dequantize");
  float y2[32];
  fq(&f, x, y2, 1, 32);
  assert_bits_equal(y2, want, 32, "nvfp4 fake_quant");
  ufp4_qtensor_free(&q);

  /* Tensor amax 0: S_enc = 1 by the rule, d = E4M3(0) = 0, codes +0, output +0. */
  float z[16] = {0};
  assert_int_equal(ufp4_quantize(&f, z, 1, 16, &q), 0);
  assert_true(q.tensor_scale == 1.0f);
  assert_int_equal(q.scale_bits[0], 0);
  assert_true(q.scales[0] == 0.0f);
  for (int i = 0; i < 16; i++) assert_int_equal(q.codes[i], 0);
  ufp4_qtensor_free(&q);
}

static void test_e8m0_rules(void **state) {
  (void)state;
  /* Three blocks of 32 (E2M1, emax = 2), non-zero values only in the first four of each:
   *   A = {7, -2.6, 0.3, 5.2}  amax 7 = 1.75*2^2
   *     FLOOR 2^(2-2) = 1 (127): 7 -> 6 (clipped), -2.6 -> -3, 0.3 -> 0.5, 5.2 -> 6
   *     CEIL  2^(3-2) = 2 (128): t = 3.5 -> 4 -> 8, -1.3 -> -1.5 -> -3, 0.15 -> 0, 2.6 -> 3 -> 6
   *     EVEN  1.75 rounds (1 mantissa bit, half up) to 2.0 -> 8 -> 2^(3-2) = 2 (128), as CEIL
   *     RCEIL 7/6 = 1.17 -> 2 (128), as CEIL
   *   B = {5, 1.2, -0.7, 2.2}  amax 5 = 1.25*2^2
   *     FLOOR 1 (127): 5 -> 4, 1.2 -> 1, -0.7 -> -0.5, 2.2 -> 2
   *     CEIL  2 (128): 2.5 -> 2 -> 4, 0.6 -> 0.5 -> 1, -0.35 -> -0.5 -> -1, 1.1 -> 1 -> 2
   *     EVEN  1.25 -> 1.5 (tie, half up) = 6 -> floor log2 = 2 -> 1 (127), as FLOOR
   *     RCEIL 5/6 = 0.83 -> 1 (127), as FLOOR
   *   C = {3, -1.1, 0.2, 0.9}  amax 3 = 1.5*2^1
   *     FLOOR 2^(1-2) = 0.5 (126): t = 2x: 6 -> 3, -2.2 -> -2 -> -1, 0.4 -> 0.5 -> 0.25, 1.8 -> 2 -> 1
   *     CEIL  2^(2-2) = 1 (127): 3, -1, 0.2 -> 0, 0.9 -> 1
   *     EVEN  1.5 needs no rounding -> 0.5 (126), as FLOOR
   *     RCEIL 3 * fl(1/6) = 0.5 exactly in fp32 -> 0.5 (126), as FLOOR */
  float x[96] = {0};
  const float A[4] = {7, -2.6f, 0.3f, 5.2f}, B[4] = {5, 1.2f, -0.7f, 2.2f},
              C[4] = {3, -1.1f, 0.2f, 0.9f};
  memcpy(x, A, sizeof A);
  memcpy(x + 32, B, sizeof B);
  memcpy(x + 64, C, sizeof C);
  const float lowA[4] = {6, -3, 0.5f, 6}, highA[4] = {8, -3, 0, 6};
  const float lowB[4] = {4, 1, -0.5f, 2}, highB[4] = {4, 1, -1, 2};
  const float lowC[4] = {3, -1, 0.25f, 1}, highC[4] = {3, -1, 0, 1};
  struct {
    ufp4_scale_kind k;
    uint8_t bits[3];
    const float *a, *b, *c;
  } cases[4] = {
      {UFP4_SCALE_E8M0_FLOOR, {127, 127, 126}, lowA, lowB, lowC},
      {UFP4_SCALE_E8M0_CEIL, {128, 128, 127}, highA, highB, highC},
      {UFP4_SCALE_E8M0_EVEN, {128, 127, 126}, highA, lowB, lowC},
      {UFP4_SCALE_E8M0_RCEIL, {128, 127, 126}, highA, lowB, lowC},
  };
  for (int k = 0; k < 4; k++) {
    ufp4_qformat f = fmt(UFP4_GRID_E2M1, cases[k].k, 32);
    ufp4_qtensor q;
    assert_int_equal(ufp4_quantize(&f, x, 1, 96, &q), 0);
    float want[96] = {0}, y[96];
    memcpy(want, cases[k].a, 4 * sizeof(float));
    memcpy(want + 32, cases[k].b, 4 * sizeof(float));
    memcpy(want + 64, cases[k].c, 4 * sizeof(float));
    for (int b = 0; b < 3; b++) {
      if (q.scale_bits[b] != cases[k].bits[b])
        fail_msg("%s block %d: scale code %d, want %d", ufp4_scale_name(cases[k].k), b,
                 q.scale_bits[b], cases[k].bits[b]);
      assert_true(q.scales[b] == ldexpf(1.0f, cases[k].bits[b] - 127));
    }
    ufp4_dequantize(&q, y);
    assert_bits_equal(y, want, 96, ufp4_scale_name(cases[k].k));
    ufp4_qtensor_free(&q);
  }
}

static void test_2d_tiles(void **state) {
  (void)state;
  /* 20 x 20 with 16x16 tiles: 2 x 2 scales; tile (0,0) is 16x16, (0,1) 16x4, (1,0) 4x16, (1,1)
   * 4x4. Background 0.1; one peak per tile: 6 at (5,3), 3 at (15,17), 12 at (19,0), 1.5 at
   * (16,19). Scales (FP32) = peak/6 = 1, 0.5, 2, 0.25. Row 0 holds no peak, so a 1x16 scale
   * would differ: 0.1 in tile (0,0) -> t = 0.1 -> 0, but 1x16 would give it back exactly. */
  enum { N = 20 };
  float x[N * N], y[N * N];
  for (int i = 0; i < N * N; i++) x[i] = 0.1f;
  x[5 * N + 3] = 6, x[15 * N + 17] = 3, x[19 * N + 0] = 12, x[16 * N + 19] = 1.5f;
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 16);
  f.tile2d = 16;
  assert_int_equal(ufp4_scale_count(&f, N, N), 4);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, N, N, &q), 0);
  const float ws[4] = {1, 0.5f, 2, 0.25f};
  for (int i = 0; i < 4; i++) assert_true(q.scales[i] == ws[i]);
  ufp4_dequantize(&q, y);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < N; c++) {
      float s = ws[(r / 16) * 2 + c / 16];
      /* 0.1/s: 0.1 -> 0 (tile 0,0), 0.2 -> 0 (0,1), 0.05 -> 0 (1,0), 0.4 -> 0.5 (1,1) */
      float want = x[r * N + c] != 0.1f ? x[r * N + c] : (s == 0.25f ? 0.125f : 0.0f);
      if (y[r * N + c] != want)
        fail_msg("tile (%d,%d) elt (%d,%d): %g want %g", r / 16, c / 16, r, c,
                 (double)y[r * N + c], (double)want);
    }
  ufp4_qtensor_free(&q);
}

static void test_tail_blocks(void **state) {
  (void)state;
  /* cols = 37, block 16: blocks [0,16) [16,32) [32,37), the last scaled on its own 5 values.
   * Row r is x = (c+1) * 0.25 * (r+1): tail amax = 37*0.25*(r+1); scale = amax/6. */
  enum { R = 3, C = 37 };
  float x[R * C], y[R * C], ref[R * C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) x[r * C + c] = (float)(c + 1) * 0.25f * (float)(r + 1);
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 16);
  assert_int_equal(ufp4_scale_count(&f, R, C), 9);
  ufp4_qtensor q;
  assert_int_equal(ufp4_quantize(&f, x, R, C, &q), 0);
  for (int r = 0; r < R; r++) {
    assert_true(q.scales[r * 3 + 0] == x[r * C + 15] / 6.0f);
    assert_true(q.scales[r * 3 + 1] == x[r * C + 31] / 6.0f);
    assert_true(q.scales[r * 3 + 2] == x[r * C + 36] / 6.0f);
  }
  ufp4_dequantize(&q, y);
  ref_fake_quant(&f, x, ref, R, C);
  assert_bits_equal(y, ref, R * C, "tail blocks");
  /* Tail of row 0: amax 9.25, s = 9.25/6; 8.25 -> t = 5.35 -> 6 -> 9.25 (all five: 8.25, 8.5,
   * 8.75, 9, 9.25 have t >= 5.35 > 5, so all become the block max). */
  for (int c = 32; c < 37; c++) assert_true(y[c] == 6.0f * (9.25f / 6.0f));
  ufp4_qtensor_free(&q);
}

static void test_never_exceeds_or_clips(void **state) {
  (void)state;
  /* FP32: t <= g_max (up to one rounding), so |y| <= g_max * s ~ amax (1 + 2^-23).
   * CEIL/RCEIL: s >= amax / g_max, so t never passes g_max: no element clips and every error is
   * at most half the widest E2M1 gap (2/2 = 1) times s. (They may exceed amax: CEIL on amax 3.6
   * gives s = 1 and 3.6 -> 4; checked below.) */
  enum { R = 16, C = 96 };
  float *x = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C);
  random_tensor(x, R * C, 77);
  const ufp4_scale_kind kinds[3] = {UFP4_SCALE_FP32, UFP4_SCALE_E8M0_CEIL, UFP4_SCALE_E8M0_RCEIL};
  const ufp4_round_mode modes[3] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_SR};
  for (int k = 0; k < 3; k++)
    for (int m = 0; m < 3; m++) {
      ufp4_qformat f = fmt(UFP4_GRID_E2M1, kinds[k], 32);
      f.round = modes[m];
      ufp4_qtensor q;
      assert_int_equal(ufp4_quantize(&f, x, R, C, &q), 0);
      ufp4_dequantize(&q, y);
      for (int r = 0; r < R; r++)
        for (int b = 0; b < C / 32; b++) {
          float amax = 0, s = q.scales[r * (C / 32) + b];
          for (int c = b * 32; c < b * 32 + 32; c++) amax = fmaxf(amax, fabsf(x[r * C + c]));
          for (int c = b * 32; c < b * 32 + 32; c++) {
            float v = y[r * C + c], xv = x[r * C + c];
            if (kinds[k] == UFP4_SCALE_FP32) assert_true(fabsf(v) <= amax * (1.0f + 0x1p-22f));
            else {
              assert_true(fabsf(v) <= 6.0f * s);
              double lim = m == 2 ? 2.0 * s : 1.0 * s; /* SR: within one gap */
              if (fabs((double)v - xv) > lim)
                fail_msg("%s: |%g - %g| > %g", ufp4_scale_name(kinds[k]), (double)v, (double)xv,
                         lim);
            }
          }
        }
      ufp4_qtensor_free(&q);
    }
  float one[1] = {3.6f}, out[1];
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_E8M0_CEIL, 32);
  fq(&f, one, out, 1, 1);
  assert_true(out[0] == 4.0f);
  free(x);
  free(y);
}

static void test_against_reference(void **state) {
  (void)state;
  enum { R = 7, C = 100 }; /* 100 = 6*16 + 4 = 3*32 + 4: every row ends in a tail block */
  float x[R * C], y[R * C], ref[R * C];
  const int blocks[2] = {16, 32};
  const ufp4_round_mode modes[3] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_RNZ};
  int n = 0;
  for (int g = 0; g < UFP4_GRID_COUNT; g++)
    for (int s = 0; s < UFP4_SCALE_COUNT; s++)
      for (int b = 0; b < 2; b++)
        for (int m = 0; m < 3; m++) {
          random_tensor_g(x, R * C, (uint64_t)(100 + n++), ufp4_grid_get((ufp4_grid_id)g)->g_max);
          ufp4_qformat f = fmt((ufp4_grid_id)g, (ufp4_scale_kind)s, blocks[b]);
          f.round = modes[m];
          fq(&f, x, y, R, C);
          ref_fake_quant(&f, x, ref, R, C);
          char what[96];
          snprintf(what, sizeof what, "%s/%s/1x%d/%s", ufp4_grid_get(f.grid)->name,
                   ufp4_scale_name(f.scale), f.block, ufp4_round_name(f.round));
          assert_bits_equal(y, ref, R * C, what);
        }
}

static void test_rht_is_prerotation(void **state) {
  (void)state;
  /* fmt.rht = n must equal rotating the rows first (ufp4_rht_rows on a copy) and quantizing
   * without RHT, for 1xN and tiles and for NVFP4, whose tensor amax is that of the rotated
   * tensor; the caller's x must be left as it was. 37 rows: a short last band of tiles. */
  enum { R = 37, C = 128 };
  float *x = malloc(sizeof(float) * R * C), *x0 = malloc(sizeof(float) * R * C),
        *rot = malloc(sizeof(float) * R * C), *a = malloc(sizeof(float) * R * C),
        *b = malloc(sizeof(float) * R * C);
  random_tensor(x, R * C, 5);
  memcpy(x0, x, sizeof(float) * R * C);
  const int ns[3] = {16, 64, 128};
  const ufp4_scale_kind ks[3] = {UFP4_SCALE_FP32, UFP4_SCALE_NVFP4, UFP4_SCALE_E8M0_EVEN};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++)
      for (int tile = 0; tile <= 16; tile += 16) {
        ufp4_qformat f = fmt(UFP4_GRID_E1M2, ks[k], 32);
        f.tile2d = tile;
        f.round = UFP4_ROUND_SR;
        f.rht = ns[i];
        f.rht_signs = ns[i] == 16 ? ufp4_rht_signs_nvidia16 : NULL;
        fq(&f, x, a, R, C);
        memcpy(rot, x, sizeof(float) * R * C);
        assert_int_equal(ufp4_rht_rows(rot, R, C, f.rht, f.rht_signs), 0);
        ufp4_qformat g = f;
        g.rht = 0;
        fq(&g, rot, b, R, C);
        assert_bits_equal(a, b, R * C, "rht vs pre-rotated");
        assert_memory_equal(x, x0, sizeof(float) * R * C);
      }
  free(x);
  free(x0);
  free(rot);
  free(a);
  free(b);
}

static void test_names_and_checks(void **state) {
  (void)state;
  for (int k = 0; k < UFP4_SCALE_COUNT; k++) {
    ufp4_scale_kind out;
    assert_int_equal(ufp4_scale_parse(ufp4_scale_name((ufp4_scale_kind)k), &out), 0);
    assert_int_equal(out, k);
  }
  ufp4_scale_kind out;
  assert_int_equal(ufp4_scale_parse("e4m3", &out), 0);
  assert_int_equal(out, UFP4_SCALE_NVFP4);
  assert_int_equal(ufp4_scale_parse("e8m0", &out), 0);
  assert_int_equal(out, UFP4_SCALE_E8M0_FLOOR);
  assert_int_equal(ufp4_scale_parse("fp16", &out), UFP4_EINVAL);

  ufp4_qformat f = ufp4_qformat_default();
  assert_int_equal(f.grid, UFP4_GRID_E2M1);
  assert_int_equal(f.round, UFP4_ROUND_RNE);
  assert_int_equal(f.scale, UFP4_SCALE_FP32);
  assert_int_equal(f.block, 16);
  assert_int_equal(ufp4_qformat_check(&f, 4, 64), 0);
  const int bad_blocks[] = {0, 3, 24, 8192, -16};
  for (int i = 0; i < 5; i++) {
    ufp4_qformat b = f;
    b.block = bad_blocks[i];
    assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  }
  ufp4_qformat b = f;
  b.block = 1;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), 0);
  b.block = 4096;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), 0);
  b = f;
  b.tile2d = 8;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  b.tile2d = 16;
  b.block = 3; /* ignored with tiles */
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), 0);
  const int bad_rht[] = {1, 3, 512, -2};
  for (int i = 0; i < 4; i++) {
    b = f;
    b.rht = bad_rht[i];
    assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  }
  b = f;
  b.rht = 16;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), 0);
  assert_int_equal(ufp4_qformat_check(&b, 4, 40), UFP4_EINVAL); /* 40 % 16 != 0 */
  b = f;
  b.grid = UFP4_GRID_COUNT;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  b = f;
  b.round = UFP4_ROUND_COUNT;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  b = f;
  b.scale = UFP4_SCALE_COUNT;
  assert_int_equal(ufp4_qformat_check(&b, 4, 64), UFP4_EINVAL);
  assert_int_equal(ufp4_qformat_check(NULL, 4, 64), UFP4_EINVAL);

  /* A bad format is an error, not a crash, and leaves q empty. */
  float x[64] = {0};
  ufp4_qtensor q;
  b = f;
  b.block = 5;
  assert_int_equal(ufp4_quantize(&b, x, 1, 64, &q), UFP4_EINVAL);
  assert_null(q.codes);
  assert_int_equal(ufp4_fake_quant(&b, x, x, 1, 64), UFP4_EINVAL);
  assert_int_equal(ufp4_quantize(&f, NULL, 1, 64, &q), UFP4_EINVAL);
  assert_int_equal(ufp4_scale_count(&f, 3, 33), 9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_amax6),     cmocka_unit_test(test_fp32_amax3),
      cmocka_unit_test(test_fp32_divides),
      cmocka_unit_test(test_e1m2_equals_int4), cmocka_unit_test(test_nvfp4_hand),
      cmocka_unit_test(test_e8m0_rules),     cmocka_unit_test(test_2d_tiles),
      cmocka_unit_test(test_tail_blocks),    cmocka_unit_test(test_never_exceeds_or_clips),
      cmocka_unit_test(test_against_reference), cmocka_unit_test(test_rht_is_prerotation),
      cmocka_unit_test(test_names_and_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
