/* Exhaustive check of element rounding, encode and decode against a plain scalar reference.
 *
 * Float32 bit patterns x in [0, 2*g_max] and their negations (coverage in test_exhaustive's
 * comment) go through the library and through a reference that picks the nearest level by
 * |x - level| computed in double (exact wherever two distances are close enough to tie, since the
 * operands are then within a factor 2 of each other) and breaks equal distances by the rule's own
 * definition. Specials (Inf, NaN payloads, huge values), the code layout and decode are checked
 * apart. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "ufp4/grid.h"

/* Hand-written levels, independent of the library's tables. */
static const struct {
  ufp4_grid_id id;
  int n;
  float lv[8];
  int twos_complement;
} REF[] = {
    {UFP4_GRID_E2M1, 8, {0, 0.5f, 1, 1.5f, 2, 3, 4, 6}, 0},
    {UFP4_GRID_E1M2, 8, {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f}, 0},
    {UFP4_GRID_INT4, 8, {0, 1, 2, 3, 4, 5, 6, 7}, 1},
    {UFP4_GRID_E2M1_MAX2, 5, {0, 0.5f, 1, 1.5f, 2}, 0},
    {UFP4_GRID_E2M1_MAX3, 6, {0, 0.5f, 1, 1.5f, 2, 3}, 0},
    {UFP4_GRID_E2M1_MAX4, 7, {0, 0.5f, 1, 1.5f, 2, 3, 4}, 0},
};
#define NREF ((int)(sizeof REF / sizeof REF[0]))

static const ufp4_round_mode MODES[3] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_RNZ};

static uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static float u2f(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* out[0..2] = index under RNE, RNA, RNZ for magnitude a (finite, >= 0). */
static void ref_round(int r, float a, int out[3]) {
  const int n = REF[r].n;
  const float *lv = REF[r].lv;
  if (a >= lv[n - 1]) {
    out[0] = out[1] = out[2] = n - 1;
    return;
  }
  int best = 0, tie = -1;
  double bd = fabs((double)a - lv[0]);
  for (int k = 1; k < n; k++) {
    double d = fabs((double)a - lv[k]);
    if (d < bd) {
      best = k, bd = d, tie = -1;
    } else if (d == bd) {
      tie = k;
    } else {
      break; /* levels ascend, so distances only grow from here */
    }
  }
  if (tie < 0) {
    out[0] = out[1] = out[2] = best;
    return;
  }
  /* tie between best (smaller magnitude) and tie (larger) */
  out[0] = (best % 2 == 0) ? best : tie;
  out[1] = tie;
  out[2] = best;
}

static uint8_t ref_code(int r, int idx, int neg) {
  if (REF[r].twos_complement) return (uint8_t)((neg ? 16 - idx : idx) & 0xF);
  return (uint8_t)((neg ? 8 : 0) | idx);
}

static void test_tables(void **state) {
  (void)state;
  for (int r = 0; r < NREF; r++) {
    const ufp4_grid *g = ufp4_grid_get(REF[r].id);
    assert_non_null(g);
    assert_int_equal(g->n_levels, REF[r].n);
    for (int k = 0; k < REF[r].n; k++) assert_true(g->levels[k] == REF[r].lv[k]);
    for (int k = 0; k + 1 < REF[r].n; k++)
      assert_true(g->edges[k] == (REF[r].lv[k] + REF[r].lv[k + 1]) / 2);
    assert_true(g->g_max == REF[r].lv[REF[r].n - 1]);
    assert_int_equal(g->emax, (int)floor(log2(g->g_max)));
    ufp4_grid_id id;
    assert_int_equal(ufp4_grid_parse(g->name, &id), 0);
    assert_int_equal(id, REF[r].id);
  }
  ufp4_grid_id id;
  assert_true(ufp4_grid_parse("e3m0", &id) < 0);
  assert_true(ufp4_grid_parse(NULL, &id) < 0);
  assert_null(ufp4_grid_get(UFP4_GRID_COUNT));
  assert_int_equal(ufp4_grid_get(UFP4_GRID_E2M1)->mbits, 1);
  assert_int_equal(ufp4_grid_get(UFP4_GRID_E1M2)->mbits, 2);
  assert_int_equal(ufp4_grid_get(UFP4_GRID_INT4)->mbits, 2);
  for (int m = 0; m < UFP4_ROUND_COUNT; m++) {
    ufp4_round_mode mm;
    assert_int_equal(ufp4_round_parse(ufp4_round_name((ufp4_round_mode)m), &mm), 0);
    assert_int_equal(mm, m);
  }
  ufp4_round_mode mm;
  assert_true(ufp4_round_parse("nearest", &mm) < 0);
}

/* Checks one pattern under mode m against the reference index w; returns 0 on a mismatch. encode is
 * round_index plus the sign, so its two codes check the rounding of x and of -x; `full` adds a
 * direct round_index call on both signs. decode is checked code by code in test_decode_table. */
static int check_one(int r, const ufp4_grid *g, float x, int m, int w, int full) {
  int ok = ufp4_encode(g, x, MODES[m], 0) == ref_code(r, w, 0) &&
           ufp4_encode(g, -x, MODES[m], 0xFFFFFFFFu) == ref_code(r, w, 1);
  if (full)
    ok = ok && ufp4_round_index(g, x, MODES[m], 0) == w && ufp4_round_index(g, -x, MODES[m], 1) == w;
  return ok;
}

/* Scans bit patterns [lo, hi]: RNE encode of both signs on every pattern; all three modes, with
 * round_index too, on every reference tie and every tie_stride-th pattern (all when it is 1).
 * A pattern is visited when a multiplicative hash of it is <= keep (UINT32_MAX: every pattern). */
static long scan(int r, int64_t lo, int64_t hi, int tie_stride, uint32_t keep, char *first,
                 size_t first_len) {
  const ufp4_grid *g = ufp4_grid_get(REF[r].id);
  long errors = 0;
#pragma omp parallel for schedule(dynamic, 1 << 18) reduction(+ : errors)
  for (int64_t u = lo; u <= hi; u++) {
    if ((uint32_t)((uint32_t)u * 2246822519u) > keep) continue;
    float x = u2f((uint32_t)u);
    int want[3];
    ref_round(r, x, want);
    int is_tie = want[1] != want[2];
    int full = is_tie || tie_stride == 1 ||
               (uint32_t)((uint32_t)u * 2654435761u) < UINT32_MAX / (uint32_t)tie_stride;
    for (int m = 0; m < 3; m++) {
      if (m > 0 && !full) break;
      if (!check_one(r, g, x, m, want[m], full)) {
        errors++;
#pragma omp critical
        if (!first[0])
          snprintf(first, first_len, "%s %s x=%a: want idx %d, got %d codes %#x/%#x", g->name,
                   ufp4_round_name(MODES[m]), (double)x, want[m],
                   ufp4_round_index(g, x, MODES[m], 0), ufp4_encode(g, x, MODES[m], 0),
                   ufp4_encode(g, -x, MODES[m], 0));
      }
    }
  }
  return errors;
}

/* Coverage, chosen to keep the program near 20 s on two loaded cores (about 9 ns per pattern):
 * - E2M1 (the paper's grid): every pattern in [0, 2*g_max] under RNE, both signs.
 * - The other grids: every pattern in [2^-8, 2*g_max] (all their edges lie at 0.125 or above), and
 *   one in 8 of the patterns below 2^-8 (hash-sampled, so every binade and the float denormals are
 *   hit); those all round to zero through the same compares E2M1 runs exhaustively.
 * - The tie modes differ from RNE only on exact ties, so RNA and RNZ run on every tie the
 *   reference finds, on every pattern within 2^16 ulps of each edge, and on one pattern in 61
 *   elsewhere. */
static void test_exhaustive(void **state) {
  (void)state;
  char first[256] = "";
  long errors = 0;
  const int64_t small = f2u(0x1p-8f);
  for (int r = 0; r < NREF; r++) {
    const int64_t top = f2u(2.0f * REF[r].lv[REF[r].n - 1]);
    if (REF[r].id == UFP4_GRID_E2M1) {
      errors += scan(r, 0, top, 61, UINT32_MAX, first, sizeof first);
    } else {
      errors += scan(r, 0, small - 1, 61, UINT32_MAX / 8, first, sizeof first);
      errors += scan(r, small, top, 61, UINT32_MAX, first, sizeof first);
    }
    for (int k = 0; k + 1 < REF[r].n; k++) {
      int64_t e = f2u((REF[r].lv[k] + REF[r].lv[k + 1]) / 2);
      errors += scan(r, e - 65536, e + 65536, 1, UINT32_MAX, first, sizeof first);
    }
  }
  if (errors) fprintf(stderr, "%ld mismatches; first: %s\n", errors, first);
  assert_int_equal(errors, 0);
}

/* decode and code_index for all 16 codes of every grid, from the code layout rules. */
static void test_decode_table(void **state) {
  (void)state;
  static const float E2M1_PATTERNS[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int r = 0; r < NREF; r++) {
    const ufp4_grid *g = ufp4_grid_get(REF[r].id);
    for (int c = 0; c < 16; c++) {
      float want;
      int widx;
      if (REF[r].twos_complement) {
        int v = c < 8 ? c : c - 16;
        want = (float)v;
        widx = v < 0 ? (v == -8 ? 7 : -v) : v;
      } else {
        int i = c & 7;
        float m = i < REF[r].n ? REF[r].lv[i] : E2M1_PATTERNS[i];
        want = (c & 8) ? -m : m;
        widx = i;
      }
      float got = ufp4_decode(g, (uint8_t)c);
      assert_true(got == want);
      assert_int_equal(!!signbit(got), !!signbit(want));
      assert_int_equal(ufp4_code_index(g, (uint8_t)c), widx);
      assert_true(ufp4_decode(g, (uint8_t)(c | 0xA0)) == want);
    }
  }
}

static void test_specials(void **state) {
  (void)state;
  const float big[] = {INFINITY, FLT_MAX, 1e30f, 65536.0f, 1e10f};
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FBFFFFFu};
  for (int r = 0; r < NREF; r++) {
    const ufp4_grid *g = ufp4_grid_get(REF[r].id);
    const int top = REF[r].n - 1;
    for (int m = 0; m < UFP4_ROUND_COUNT; m++) {
      for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        for (uint32_t rb = 0; rb < 3; rb++) {
          uint32_t bits = rb * 0x7FFFFFFFu;
          assert_int_equal(ufp4_round_index(g, big[i], (ufp4_round_mode)m, bits), top);
          assert_int_equal(ufp4_round_index(g, -big[i], (ufp4_round_mode)m, bits), top);
          assert_int_equal(ufp4_encode(g, big[i], (ufp4_round_mode)m, bits), ref_code(r, top, 0));
          assert_int_equal(ufp4_encode(g, -big[i], (ufp4_round_mode)m, bits), ref_code(r, top, 1));
        }
      }
      for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float x = u2f(nans[i]);
        assert_int_equal(ufp4_round_index(g, x, (ufp4_round_mode)m, 12345), 0);
        assert_int_equal(ufp4_encode(g, x, (ufp4_round_mode)m, 12345), 0); /* NaN -> +0 code */
      }
    }
  }
}

static void test_layout(void **state) {
  (void)state;
  const ufp4_grid *e = ufp4_grid_get(UFP4_GRID_E2M1);
  assert_true(ufp4_decode(e, 0x7) == 6.0f);
  assert_true(ufp4_decode(e, 0xF) == -6.0f);
  assert_true(ufp4_decode(e, 0x8) == 0.0f && signbit(ufp4_decode(e, 0x8)));
  assert_true(ufp4_decode(e, 0x0) == 0.0f && !signbit(ufp4_decode(e, 0x0)));
  assert_int_equal(ufp4_encode(e, -0.0f, UFP4_ROUND_RNE, 0), 0x8);
  assert_int_equal(ufp4_encode(e, -0.1f, UFP4_ROUND_RNE, 0), 0x8);
  assert_int_equal(ufp4_encode(e, 6.0f, UFP4_ROUND_RNE, 0), 0x7);
  assert_int_equal(ufp4_encode(e, -6.0f, UFP4_ROUND_RNE, 0), 0xF);
  /* only the low 4 bits are read */
  assert_true(ufp4_decode(e, 0xF7) == 6.0f);
  /* E2M1 codes are exponent-mantissa patterns with bias 1: 0b0101 = 2^(2-1) * 1.5 = 3 */
  assert_true(ufp4_decode(e, 0x5) == 3.0f);
  const ufp4_grid *q = ufp4_grid_get(UFP4_GRID_INT4);
  assert_int_equal(ufp4_encode(q, -7.0f, UFP4_ROUND_RNE, 0), 0x9);
  assert_int_equal(ufp4_encode(q, -100.0f, UFP4_ROUND_RNE, 0), 0x9);
  assert_int_equal(ufp4_encode(q, -0.0f, UFP4_ROUND_RNE, 0), 0x0);
  assert_int_equal(ufp4_encode(q, -1.0f, UFP4_ROUND_RNE, 0), 0xF);
  assert_true(ufp4_decode(q, 0x8) == -8.0f);
  assert_true(ufp4_decode(q, 0xF) == -1.0f);
  assert_int_equal(ufp4_code_index(q, 0x9), 7);
  assert_int_equal(ufp4_code_index(q, 0x8), 7);
  /* A restricted grid's codes are E2M1 patterns; patterns above its top decode as E2M1. */
  const ufp4_grid *m2 = ufp4_grid_get(UFP4_GRID_E2M1_MAX2);
  assert_true(ufp4_decode(m2, 0x4) == 2.0f);
  assert_true(ufp4_decode(m2, 0x7) == 6.0f);
  assert_true(ufp4_decode(m2, 0xD) == -3.0f);
  /* decode(encode(level)) == level for every level, sign and mode */
  for (int r = 0; r < NREF; r++) {
    const ufp4_grid *g = ufp4_grid_get(REF[r].id);
    for (int k = 0; k < REF[r].n; k++) {
      for (int s = 0; s < 2; s++) {
        float v = s ? -REF[r].lv[k] : REF[r].lv[k];
        for (int m = 0; m < UFP4_ROUND_COUNT; m++) {
          uint8_t c = ufp4_encode(g, v, (ufp4_round_mode)m, 0xDEADBEEFu);
          assert_int_equal(c, ref_code(r, k, s));
          float d = ufp4_decode(g, c);
          assert_true(d == v);
          if (!REF[r].twos_complement) assert_int_equal(!!signbit(d), s);
        }
      }
    }
  }
}

static void test_bin_bias(void **state) {
  (void)state;
  const ufp4_grid *e = ufp4_grid_get(UFP4_GRID_E2M1);
  int in = -1;
  /* level 2 (index 4): l = (2-1.5)/2 = 0.25, r = (3-2)/2 = 0.5 -> (0.25-0.5)/2 = -0.125 */
  assert_true(ufp4_bin_bias(e, 4, &in) == -0.125 && in == 1);
  /* level 4 (index 6): l = 0.5, r = 1 -> -0.25 */
  assert_true(ufp4_bin_bias(e, 6, &in) == -0.25 && in == 1);
  assert_true(ufp4_bin_bias(e, 5, NULL) == 0.0); /* level 3: l = r = 0.5 */
  assert_true(ufp4_bin_bias(e, 1, NULL) == 0.0);
  assert_true(isnan(ufp4_bin_bias(e, 0, &in)) && in == 0);
  assert_true(isnan(ufp4_bin_bias(e, 7, &in)) && in == 0);
  assert_true(isnan(ufp4_bin_bias(e, 99, &in)) && in == 0);
  for (int k = 1; k < 7; k++) assert_true(ufp4_bin_bias(ufp4_grid_get(UFP4_GRID_E1M2), k, NULL) == 0.0);
  /* max4: top is 4, so index 5 (level 3) has l = 0.5, r = 0.5 -> 0, and 6 is the top bin */
  assert_true(ufp4_bin_bias(ufp4_grid_get(UFP4_GRID_E2M1_MAX4), 5, NULL) == 0.0);
  assert_true(isnan(ufp4_bin_bias(ufp4_grid_get(UFP4_GRID_E2M1_MAX4), 6, NULL)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tables),   cmocka_unit_test(test_layout),
      cmocka_unit_test(test_specials), cmocka_unit_test(test_bin_bias),
      cmocka_unit_test(test_decode_table),
      cmocka_unit_test(test_exhaustive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
