/* Philox4x32-10 against the Random123 known-answer vectors (kat_vectors, "philox4x32 10" lines),
 * the (seed, stream, index) -> (key, counter, word) mapping of philox.h, and the moments of the
 * uniform and normal draws within tolerances derived from the sample size. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ufp4/philox.h"

static void test_kat(void **state) {
  (void)state;
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
    uint32_t out[4];
    ufp4_philox4x32_10(kat[i].ctr, kat[i].key, out);
    for (int w = 0; w < 4; w++) assert_int_equal(out[w], kat[i].out[w]);
  }
}

static void test_mapping(void **state) {
  (void)state;
  static const uint64_t seeds[] = {0, 1, 0x123456789ABCDEF0ull, UINT64_MAX};
  static const uint64_t streams[] = {0, 7, 0xFFFFFFFF00000001ull};
  static const uint64_t idx[] = {0, 1, 2, 3, 4, 5, 1023, 0x3FFFFFFFFull, 0x400000000ull + 6,
                                 UINT64_MAX};
  for (size_t a = 0; a < 4; a++)
    for (size_t b = 0; b < 3; b++)
      for (size_t c = 0; c < sizeof idx / sizeof idx[0]; c++) {
        uint64_t seed = seeds[a], stream = streams[b], i = idx[c], q = i / 4;
        const uint32_t key[2] = {(uint32_t)(seed & 0xFFFFFFFFu), (uint32_t)(seed >> 32)};
        const uint32_t ctr[4] = {(uint32_t)(q & 0xFFFFFFFFu), (uint32_t)(q >> 32),
                                 (uint32_t)(stream & 0xFFFFFFFFu), (uint32_t)(stream >> 32)};
        uint32_t want[4], quad[4];
        ufp4_philox4x32_10(ctr, key, want);
        assert_int_equal(ufp4_philox_u32(seed, stream, i), want[i % 4]);
        ufp4_philox_quad(seed, stream, q, quad);
        for (int w = 0; w < 4; w++) assert_int_equal(quad[w], want[w]);
        /* uniform is the top 24 bits of the same word */
        float u = ufp4_philox_uniform(seed, stream, i);
        assert_true((double)u == (double)(want[i % 4] >> 8) / 16777216.0);
      }
  /* streams and seeds are separate sequences */
  assert_true(ufp4_philox_u32(1, 0, 0) != ufp4_philox_u32(1, 1, 0));
  assert_true(ufp4_philox_u32(1, 0, 0) != ufp4_philox_u32(2, 0, 0));
}

/* Sample moments: the standard error of the mean is sigma/sqrt(n); of the sample variance,
 * sqrt((mu4 - sigma^4)/n) (uniform: mu4 = 1/80, sigma^2 = 1/12; normal: mu4 = 3, sigma = 1). */
static void test_moments(void **state) {
  (void)state;
  const int n = 1000000;
  double su = 0, su2 = 0, sz = 0, sz2 = 0;
  long tails = 0;
  float umin = 1, umax = 0;
  for (int i = 0; i < n; i++) {
    float u = ufp4_philox_uniform(42, 3, (uint64_t)i);
    float z = ufp4_philox_normal(42, 4, (uint64_t)i);
    assert_true(u >= 0.0f && u < 1.0f);
    assert_true(isfinite(z));
    umin = fminf(umin, u), umax = fmaxf(umax, u);
    su += u, su2 += (double)u * u;
    sz += z, sz2 += (double)z * z;
    tails += fabsf(z) > 3.0f;
  }
  double mu = su / n, vu = su2 / n - mu * mu;
  double mz = sz / n, vz = sz2 / n - mz * mz;
  fprintf(stderr, "uniform mean %.6f var %.6f; normal mean %.6f var %.6f, |z|>3: %ld\n", mu, vu,
          mz, vz, tails);
  assert_true(fabs(mu - 0.5) < 5 * sqrt(1.0 / 12 / n));
  assert_true(fabs(vu - 1.0 / 12) < 5 * sqrt((1.0 / 80 - 1.0 / 144) / n));
  assert_true(fabs(mz) < 5 * sqrt(1.0 / n));
  assert_true(fabs(vz - 1.0) < 5 * sqrt(2.0 / n));
  /* P(|z| > 3) = 0.0026998; binomial standard error */
  double p3 = 0.0026998;
  assert_true(fabs((double)tails / n - p3) < 5 * sqrt(p3 * (1 - p3) / n));
  assert_true(umin < 1e-4f && umax > 1.0f - 1e-4f);
  /* reproducible: a pure function of its arguments */
  assert_true(ufp4_philox_normal(42, 4, 12345) == ufp4_philox_normal(42, 4, 12345));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kat),
      cmocka_unit_test(test_mapping),
      cmocka_unit_test(test_moments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
