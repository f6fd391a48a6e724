/* E4M3, bfloat16 and E8M0 against independent references: E4M3 decode by formula on all 256 codes
 * and encode of every float32 in [0, 512] (both signs) by nearest search over the decoded values;
 * bf16 by nearest search between the two bf16 neighbours in double; E8M0 on hand-computed cases. */
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
#include "ufp4/minifloat.h"

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

/* OCP E4M3: (-1)^s * 2^(e-7) * (1 + m/8), subnormals 2^-6 * m/8, S.1111.111 = NaN. */
static double e4m3_ref_value(int code) {
  int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e == 0 ? pow(2.0, -6) * m / 8.0 : pow(2.0, e - 7) * (1.0 + m / 8.0);
  return s ? -v : v;
}

static void test_e4m3_decode(void **state) {
  (void)state;
  for (int c = 0; c < 256; c++) {
    double want = e4m3_ref_value(c);
    float got = ufp4_e4m3_to_f32((uint8_t)c);
    if (isnan(want)) {
      assert_true(isnan(got));
    } else {
      assert_true((double)got == want);
      assert_int_equal(!!signbit(got), c >> 7);
    }
  }
  assert_true(ufp4_e4m3_to_f32(0x7E) == 448.0f);
  assert_true(ufp4_e4m3_to_f32(0x01) == 0x1p-9f);
  assert_true(ufp4_e4m3_to_f32(0x08) == 0x1p-6f);
}

/* vals[c] = value of code c for c = 0..0x7E, ascending in c. */
static double VALS[127];

/* Reference: nearest representable, ties to the even code (even mantissa), saturate at 448. */
static uint8_t e4m3_ref_encode(double a, int *j) {
  if (a >= 448.0) return 0x7E;
  while (*j < 0x7E && VALS[*j + 1] <= a) (*j)++;
  while (*j > 0 && VALS[*j] > a) (*j)--;
  int lo = *j;
  if (VALS[lo] == a) return (uint8_t)lo;
  double dl = a - VALS[lo], dh = VALS[lo + 1] - a;
  if (dl < dh) return (uint8_t)lo;
  if (dh < dl) return (uint8_t)(lo + 1);
  return (uint8_t)((lo & 1) ? lo + 1 : lo);
}

static void test_e4m3_encode_exhaustive(void **state) {
  (void)state;
  for (int c = 0; c <= 0x7E; c++) VALS[c] = e4m3_ref_value(c);
  const int64_t top = f2u(512.0f);
  const int64_t chunk = 1 << 20;
  long errors = 0;
  char first[200] = "";
#pragma omp parallel for schedule(dynamic) reduction(+ : errors)
  for (int64_t base = 0; base <= top; base += chunk) {
    int j = 0;
    int64_t end = base + chunk - 1 < top ? base + chunk - 1 : top;
    for (int64_t u = base; u <= end; u++) {
      float x = u2f((uint32_t)u);
      uint8_t want = e4m3_ref_encode((double)x, &j);
      uint8_t gp = ufp4_f32_to_e4m3(x), gn = ufp4_f32_to_e4m3(-x);
      if (gp != want || gn != (want | 0x80)) {
        errors++;
#pragma omp critical
        if (!first[0])
          snprintf(first, sizeof first, "x=%a: want %#x, got %#x / -x %#x", (double)x, want, gp, gn);
      }
    }
  }
  if (errors) fprintf(stderr, "%ld mismatches; first: %s\n", errors, first);
  assert_int_equal(errors, 0);
}

static void test_e4m3_specials(void **state) {
  (void)state;
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu};
  for (size_t i = 0; i < 4; i++) assert_int_equal(ufp4_f32_to_e4m3(u2f(nans[i])), 0x7F);
  assert_int_equal(ufp4_f32_to_e4m3(INFINITY), 0x7E);
  assert_int_equal(ufp4_f32_to_e4m3(-INFINITY), 0xFE);
  assert_int_equal(ufp4_f32_to_e4m3(FLT_MAX), 0x7E);
  assert_int_equal(ufp4_f32_to_e4m3(-FLT_MAX), 0xFE);
  assert_int_equal(ufp4_f32_to_e4m3(1e6f), 0x7E);
  /* 464 is the midpoint of 448 and the (NaN) 480 pattern: still saturates */
  assert_int_equal(ufp4_f32_to_e4m3(464.0f), 0x7E);
  assert_int_equal(ufp4_f32_to_e4m3(-0.0f), 0x80);
  /* 2^-10 is half the smallest subnormal 2^-9: tie to the even code 0; just above goes to 0x01 */
  assert_int_equal(ufp4_f32_to_e4m3(0x1p-10f), 0x00);
  assert_int_equal(ufp4_f32_to_e4m3(nextafterf(0x1p-10f, 1.0f)), 0x01);
  /* 3 * 2^-10 is between codes 1 and 2: tie to even code 2 */
  assert_int_equal(ufp4_f32_to_e4m3(3 * 0x1p-10f), 0x02);
  /* 15 * 2^-10 = 7.5 * 2^-9: tie between subnormal 7 and the smallest normal 8 (code 0x08) */
  assert_int_equal(ufp4_f32_to_e4m3(15 * 0x1p-10f), 0x08);
  assert_int_equal(ufp4_f32_to_e4m3(FLT_TRUE_MIN), 0x00);
  assert_int_equal(ufp4_f32_to_e4m3(1.0f), 0x38);
}

/* bf16 value of a 16-bit pattern, the all-ones exponent read as 2^128 (IEEE rounds as if the
 * exponent range continued, then overflows). */
static double bf16_ref_value(uint32_t h) {
  int e = (h >> 7) & 0xFF, m = h & 0x7F;
  double v = e == 0 ? ldexp(m / 128.0, -126) : ldexp(1.0 + m / 128.0, e - 127);
  return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_ref(float x) {
  uint32_t u = f2u(x);
  uint32_t lo = u >> 16; /* truncation toward zero */
  if ((u & 0xFFFF) == 0) return (uint16_t)lo;
  double a = fabs((double)x);
  double dl = a - fabs(bf16_ref_value(lo)), dh = fabs(bf16_ref_value(lo + 1)) - a;
  if (dl < dh || (dl == dh && !(lo & 1))) return (uint16_t)lo;
  return (uint16_t)(lo + 1);
}

static void test_bf16(void **state) {
  (void)state;
  static const uint32_t lows[] = {0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
  long errors = 0;
#pragma omp parallel for reduction(+ : errors)
  for (uint32_t hi = 0; hi < 65536; hi++) {
    for (int k = 0; k < 8 + 64; k++) {
      uint32_t low = k < 8 ? lows[k] : ((uint32_t)k * 2654435761u ^ hi * 40503u) & 0xFFFF;
      uint32_t u = hi << 16 | low;
      float x = u2f(u);
      uint16_t got = ufp4_f32_to_bf16_bits(x);
      float r = ufp4_round_bf16(x);
      if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        /* NaN stays NaN, keeps its sign, and is quiet */
        if (!isnan(r) || (got & 0x7F80) != 0x7F80 || !(got & 0x40) || (got >> 15) != (u >> 31))
          errors++;
        continue;
      }
      uint16_t want = bf16_ref(x);
      if (got != want || f2u(r) != (uint32_t)want << 16) {
        if (errors == 0) fprintf(stderr, "bf16 x=%a (%#x): want %#x got %#x\n", (double)x, u, want, got);
        errors++;
      }
    }
  }
  assert_int_equal(errors, 0);
  /* largest finite rounds up to Inf only from its upper half-ulp on */
  assert_int_equal(ufp4_f32_to_bf16_bits(FLT_MAX), 0x7F80);
  assert_int_equal(ufp4_f32_to_bf16_bits(u2f(0x7F7F7FFFu)), 0x7F7F);
  assert_int_equal(ufp4_f32_to_bf16_bits(u2f(0x7F7F8000u)), 0x7F80); /* tie, 0x7F7F odd -> up */
  assert_int_equal(ufp4_f32_to_bf16_bits(u2f(0x3F808000u)), 0x3F80); /* tie, 0x3F80 even -> stays */
  assert_int_equal(ufp4_f32_to_bf16_bits(INFINITY), 0x7F80);
}

/* binary16: every code decodes to its IEEE value (sign, 5-bit exponent bias 15, 10-bit mantissa)
 * and encodes back to itself; the rounding edges of the encoder. Every float's encoding is checked
 * against a reference through the safetensors writer (test_safetensors). */
static void test_f16(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    const int e = (int)(h >> 10) & 0x1F, m = (int)h & 0x3FF;
    const float x = ufp4_f16_bits_to_f32((uint16_t)h);
    if (e == 0x1F && m) {
      assert_true(isnan(x));
      continue;
    }
    double v = e == 0x1F ? INFINITY : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    if (h & 0x8000) v = -v;
    assert_true((double)x == v && !signbit(x) == !signbit(v));
    assert_int_equal(ufp4_f32_to_f16_bits(x), h);
  }
  assert_int_equal(ufp4_f32_to_f16_bits(nextafterf(65520.0f, 0)), 0x7BFF); /* 65504 */
  assert_int_equal(ufp4_f32_to_f16_bits(65520.0f), 0x7C00);                /* tie -> Inf */
  assert_int_equal(ufp4_f32_to_f16_bits(0x1p-25f), 0x0000);                /* tie -> even 0 */
  assert_int_equal(ufp4_f32_to_f16_bits(nextafterf(0x1p-25f, 1)), 0x0001);
  assert_int_equal(ufp4_f32_to_f16_bits(0x1.ffcp-15f), 0x0400); /* subnormal rounds up to normal */
  assert_int_equal(ufp4_f32_to_f16_bits(-NAN) & 0xFE00, 0xFE00); /* quiet, sign kept */
}

static void test_e8m0_decode(void **state) {
  (void)state;
  for (int c = 0; c < 255; c++) assert_true(ufp4_e8m0_to_f32((uint8_t)c) == ldexpf(1.0f, c - 127));
  assert_true(isnan(ufp4_e8m0_to_f32(255)));
  assert_int_equal(f2u(ufp4_e8m0_to_f32(0)), 0x00400000u); /* 2^-127, a float denormal */
  assert_true(ufp4_e8m0_to_f32(127) == 1.0f);
}

typedef struct {
  ufp4_grid_id grid;
  float amax;
  uint8_t floor_, ceil_, even, rceil;
} e8m0_case;

/* Expected codes (code = unbiased + 127). E2M1: g_max 6, emax 2, mbits 1 (EVEN adds 1<<21 to the
 * bits); E1M2: g_max 1.75, emax 0, mbits 2 (adds 1<<20). RCEIL's descale is amax * fl(1/g_max)
 * rounded to fp32; fl(1/6) = 0.16666667163..., so 6 * fl(1/6) = 1.0000000298 -> 1.0f and
 * 3 * fl(1/6) -> 0.5f (both errors are below half an ulp). */
static const e8m0_case CASES[] = {
    /* 6 = 1.5*2^2. FLOOR 2-2=0 -> 127. CEIL mantissa set -> 3-2=1 -> 128. EVEN 1.5 keeps 1 bit
     * -> 127. RCEIL descale 1.0 -> 2^0 -> 127. */
    {UFP4_GRID_E2M1, 6.0f, 127, 128, 127, 127},
    /* 5 = 1.25*2^2. FLOOR 127. CEIL 128. EVEN 1.25 -> 1.5, exponent 2 -> 127. RCEIL 0.8333 ->
     * 2^0 -> 127. */
    {UFP4_GRID_E2M1, 5.0f, 127, 128, 127, 127},
    /* 7 = 1.75*2^2. FLOOR 127 (7 clips to 6: the 25% clip). CEIL 128. EVEN 1.75 -> 2.0,
     * exponent 3 -> 1 -> 128. RCEIL 7/6 = 1.1667 -> 2^1 -> 128. */
    {UFP4_GRID_E2M1, 7.0f, 127, 128, 128, 128},
    /* 3 = 1.5*2^1. FLOOR -1 -> 126. CEIL 2-2=0 -> 127. EVEN -1 -> 126. RCEIL 0.5 -> 2^-1 -> 126. */
    {UFP4_GRID_E2M1, 3.0f, 126, 127, 126, 126},
    /* 1.75 = 1.75*2^0. FLOOR 0-2 -> 125. CEIL 1-2 -> 126. EVEN 1.75 -> 2.0 -> 1-2 -> 126.
     * RCEIL 0.2917 in (2^-2, 2^-1] -> 126. */
    {UFP4_GRID_E2M1, 1.75f, 125, 126, 126, 126},
    /* 4 = 2^2 exactly: every rule gives 2^0. RCEIL 4*fl(1/6) = 0.6667 -> 2^0. */
    {UFP4_GRID_E2M1, 4.0f, 127, 127, 127, 127},
    /* amax 0 (and -0 below): code 0 by definition */
    {UFP4_GRID_E2M1, 0.0f, 0, 0, 0, 0},
    /* FLT_MAX: exponent field 254 (unbiased 127), full mantissa. FLOOR 127-2 = 125 -> 252.
     * CEIL 128-2 = 126 -> 253. EVEN carries into the Inf field 255 (128) -> 126 -> 253.
     * RCEIL FLT_MAX/6 ~ 2^125.4: field 252, mantissa set -> biased 253. */
    {UFP4_GRID_E2M1, FLT_MAX, 252, 253, 253, 253},
    /* E1M2 FLT_MAX: FLOOR 127 -> 254. CEIL 128 clamps to 127 -> 254. EVEN carries to 128 ->
     * 254. RCEIL FLT_MAX*fl(1/1.75) ~ 2^127.2: field 254 + 1 = 255 -> unbiased 128 -> 254. */
    {UFP4_GRID_E1M2, FLT_MAX, 254, 254, 254, 254},
    /* E1M2 1.875 = 1.111b: FLOOR 0 -> 127. CEIL 1 -> 128. EVEN 2 mantissa bits: 1.875 -> 2.0 ->
     * 128. RCEIL 1.875*fl(1/1.75) = 1.0714 -> 2^1 -> 128. */
    {UFP4_GRID_E1M2, 1.875f, 127, 128, 128, 128},
    /* E1M2 1.75 = 1.11b: EVEN keeps it (0x600000 + 0x100000 stays below the carry) -> 127.
     * RCEIL 1.75*fl(1/1.75) = 1.0 up to 1 ulp: fl(1/1.75) = 0.571428597 > 4/7, product
     * 1.00000004 -> 1.0f (error below half an ulp 5.96e-8) -> 127. */
    {UFP4_GRID_E1M2, 1.75f, 127, 128, 127, 127},
    /* Smallest denormal 2^-149 (bits 1), E2M1: FLOOR field 0 -> -127-2 = -129 clamps -> 0.
     * CEIL -127+1-2 = -128 clamps -> 0. EVEN 1 + 1<<21 keeps field 0 -> 0. RCEIL descale
     * 2^-149/6 rounds to +0 -> code 0. */
    {UFP4_GRID_E2M1, FLT_TRUE_MIN, 0, 0, 0, 0},
    /* E1M2 2^-127 (bits 0x400000, a denormal): FLOOR field 0 -> -127 -> 0. CEIL mantissa set ->
     * -126 -> 1. EVEN 0x400000 + 0x100000 stays a denormal -> 0. RCEIL 2^-127*0.5714 =
     * 0x248925-ish mantissa, below 0x400000 -> 0. */
    {UFP4_GRID_E1M2, 0x1p-127f, 0, 1, 0, 0},
    /* E1M2 2^-126 (min normal): FLOOR -126 -> 1. CEIL 1. EVEN 1. RCEIL 2^-126*0.5714 is a
     * denormal with mantissa 0x492492 > 0x400000 -> 1. */
    {UFP4_GRID_E1M2, 0x1p-126f, 1, 1, 1, 1},
    /* E2M1 amax = 6*2^-127 = 1.5*2^-125: FLOOR -125-2 = -127 -> 0. CEIL -124-2 = -126 -> 1.
     * EVEN -127 -> 0. RCEIL descale is exactly 2^-127 (the 2^-152 excess rounds away), mantissa
     * 0x400000, not above -> 0. */
    {UFP4_GRID_E2M1, 0x1.8p-125f, 0, 1, 0, 0},
    /* E2M1 amax = 7*2^-127: descale 7/6 * 2^-127, mantissa ~0x4AAAAB > 0x400000 -> 1.
     * FLOOR -127 -> 0, CEIL 1, EVEN 1.75 -> 2.0 carries: -124-2 = -126 -> 1. */
    {UFP4_GRID_E2M1, 0x1.cp-125f, 0, 1, 1, 1},
    /* E2M1 amax = 12*2^-127 = 1.5*2^-124: FLOOR -126 -> 1. CEIL -125 -> 2. EVEN 1. RCEIL descale
     * exactly 2^-126, a normal with zero mantissa -> 1. */
    {UFP4_GRID_E2M1, 0x1.8p-124f, 1, 2, 1, 1},
    /* INT4 (g_max 7, emax 2, mbits 2): amax 7 = 1.75*2^2. FLOOR 0 -> 127. CEIL 128. EVEN 1.75
     * with 2 bits stays -> 127. RCEIL 7*fl(1/7) -> 1.0f -> 127. */
    {UFP4_GRID_INT4, 7.0f, 127, 128, 127, 127},
};

static void test_e8m0_scale(void **state) {
  (void)state;
  static const ufp4_e8m0_rule rules[4] = {UFP4_E8M0_FLOOR, UFP4_E8M0_CEIL, UFP4_E8M0_EVEN,
                                          UFP4_E8M0_RCEIL};
  static const char *names[4] = {"floor", "ceil", "even", "rceil"};
  int bad = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const e8m0_case *c = &CASES[i];
    const uint8_t want[4] = {c->floor_, c->ceil_, c->even, c->rceil};
    for (int r = 0; r < 4; r++) {
      uint8_t got = ufp4_e8m0_scale(c->amax, ufp4_grid_get(c->grid), rules[r]);
      if (got != want[r]) {
        fprintf(stderr, "case %zu amax %a %s: want %d got %d\n", i, (double)c->amax, names[r],
                want[r], got);
        bad++;
      }
    }
  }
  assert_int_equal(bad, 0);
  const ufp4_grid *e = ufp4_grid_get(UFP4_GRID_E2M1);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(ufp4_e8m0_scale(NAN, e, rules[r]), 255);
    assert_int_equal(ufp4_e8m0_scale(-NAN, e, rules[r]), 255);
    assert_int_equal(ufp4_e8m0_scale(INFINITY, e, rules[r]), 255);
    assert_int_equal(ufp4_e8m0_scale(-0.0f, e, rules[r]), 0);
    assert_int_equal(ufp4_e8m0_scale(1.0f, NULL, rules[r]), 255);
  }
  /* Decoded scales: FLOOR of 7 is 2^0, so 7 / 1 = 7 exceeds g_max = 6 and clips; CEIL's 2^1
   * keeps 7/2 = 3.5 inside the grid. */
  assert_true(ufp4_e8m0_to_f32(ufp4_e8m0_scale(7.0f, e, UFP4_E8M0_FLOOR)) == 1.0f);
  assert_true(ufp4_e8m0_to_f32(ufp4_e8m0_scale(7.0f, e, UFP4_E8M0_CEIL)) == 2.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_e4m3_decode), cmocka_unit_test(test_e4m3_specials),
      cmocka_unit_test(test_e4m3_encode_exhaustive), cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_f16),
      cmocka_unit_test(test_e8m0_decode), cmocka_unit_test(test_e8m0_scale),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
