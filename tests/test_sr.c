/* Stochastic rounding: unbiasedness of exact SR, the bounded negative bias of 8-bit SR, the exact
 * up/down thresholds, the two-outcome property, fixed points and saturation.
 *
 * With t between neighbours g_a < g_b, step h = g_b - g_a and p = (t - g_a)/h, one SR sample is
 * g_a + h*B with B ~ Bernoulli(p): the mean of n samples has standard error se = h sqrt(p(1-p)/n).
 * Exact SR's P(up) is ceil(p 2^32)/2^32 (off by < 2^-32); SR8's is floor(256 p)/256, in
 * (p - 1/256, p]. Random bits come from Philox with a fixed seed, so every run is the same. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ufp4/grid.h"
#include "ufp4/philox.h"

#define SEED 0x5EEDull

static const double FRACS[] = {0.01, 0.1, 0.3, 0.5, 0.77, 0.999};
#define NFRACS ((int)(sizeof FRACS / sizeof FRACS[0]))

/* Mean of n SR samples of t (value of the decoded code), checking every sample lies on g_a or
 * g_b (ia = index of g_a) with the sign of t. */
static double sr_mean(const ufp4_grid *g, float t, ufp4_round_mode m, int ia, int n, uint64_t stream,
                      int *outside) {
  double sum = 0;
  const float lo = g->levels[ia], hi = g->levels[ia + 1];
  for (int i = 0; i < n; i++) {
    uint32_t r = ufp4_philox_u32(SEED, stream, (uint64_t)i);
    float v = ufp4_decode(g, ufp4_encode(g, t, m, r));
    int k = ufp4_round_index(g, t, m, r);
    float mag = fabsf(v);
    if ((mag != lo && mag != hi) || (k != ia && k != ia + 1) || g->levels[k] != mag ||
        (mag != 0 && (v < 0) != (t < 0)))
      (*outside)++;
    sum += v;
  }
  return sum / n;
}

static void test_convergence(void **state) {
  (void)state;
  const int n = 40000;
  uint64_t stream = 1;
  int fails = 0, outside = 0;
  for (int gi = 0; gi < UFP4_GRID_COUNT; gi++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)gi);
    for (int ia = 0; ia + 1 < g->n_levels; ia++) {
      const double a = g->levels[ia], h = g->levels[ia + 1] - a;
      for (int f = 0; f < NFRACS; f++) {
        for (int s = 0; s < 2; s++) {
          float t = (float)(a + FRACS[f] * h);
          double p = ((double)t - a) / h; /* the float's own fraction */
          double se = h * sqrt(p * (1 - p) / n);
          float ts = s ? -t : t;
          double want = s ? -(double)t : (double)t;
          double m_sr = sr_mean(g, ts, UFP4_ROUND_SR, ia, n, stream++, &outside);
          double m_8 = sr_mean(g, ts, UFP4_ROUND_SR8, ia, n, stream++, &outside);
          /* SR8 moves the mean toward zero by at most h/256 */
          double d8 = s ? -(m_8 - want) : (m_8 - want);
          int ok = fabs(m_sr - want) <= 5 * se + h * 0x1p-32 && d8 <= 5 * se &&
                   d8 >= -h / 256 - 5 * se;
          if (!ok) {
            fprintf(stderr, "%s t=%g: SR mean %.7f SR8 mean %.7f (se %.2g)\n", g->name,
                    (double)ts, m_sr, m_8, se);
            fails++;
          }
        }
      }
    }
  }
  assert_int_equal(outside, 0);
  assert_int_equal(fails, 0);
}

/* Across the whole range: t drawn uniformly in (-1.1 g_max, 1.1 g_max); beyond g_max SR saturates
 * to g_max, so the reference there is +-g_max. The summed error has variance sum h_i^2 p_i(1-p_i). */
static void test_whole_range(void **state) {
  (void)state;
  const int n = 400000;
  for (int gi = 0; gi < UFP4_GRID_COUNT; gi++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)gi);
    double err = 0, var = 0;
    for (int i = 0; i < n; i++) {
      float t = (float)((2.0 * ufp4_philox_uniform(SEED, 100 + (uint64_t)gi, (uint64_t)i) - 1.0) *
                        1.1 * g->g_max);
      uint32_t r = ufp4_philox_u32(SEED, 200 + (uint64_t)gi, (uint64_t)i);
      double v = ufp4_decode(g, ufp4_encode(g, t, UFP4_ROUND_SR, r));
      double a = fabs((double)t);
      double ref = a >= g->g_max ? g->g_max : a;
      if (a < g->g_max) {
        int k = 0;
        while (g->levels[k + 1] <= a) k++;
        double h = g->levels[k + 1] - g->levels[k], p = (a - g->levels[k]) / h;
        var += h * h * p * (1 - p);
      }
      err += fabs(v) - ref;
      assert_true(v == 0 || (v < 0) == (t < 0));
    }
    double se = sqrt(var) / n;
    fprintf(stderr, "%s: mean |SR(t)| - |t| = %.3g (se %.2g)\n", g->name, err / n, se);
    assert_true(fabs(err / n) <= 5 * se + 1e-9);
  }
}

/* SR8's bias is visible where floor(256 p) < 256 p: p = 128.9/256 rounds up with probability
 * 128/256, so the mean sits 0.9/256 of a step below t; with n = 10^6 that is about 7 standard
 * errors. Exact SR at the same t stays within 5. */
static void test_sr8_bias(void **state) {
  (void)state;
  const ufp4_grid *g = ufp4_grid_get(UFP4_GRID_E2M1);
  const int n = 1000000;
  const float t = 4.0f + 2.0f * (128.9f / 256.0f); /* between 4 and 6, h = 2 */
  const double p = ((double)t - 4.0) / 2.0;
  const double se = 2.0 * sqrt(p * (1 - p) / n);
  int outside = 0;
  double m8 = sr_mean(g, t, UFP4_ROUND_SR8, 6, n, 9001, &outside);
  double m = sr_mean(g, t, UFP4_ROUND_SR, 6, n, 9002, &outside);
  fprintf(stderr, "t=%.6f SR8 mean %.6f SR mean %.6f se %.2g expected SR8 bias %.6f\n", (double)t,
          m8, m, se, -2.0 * (p - 128.0 / 256.0));
  assert_int_equal(outside, 0);
  assert_true(m8 - t < -3 * se);
  assert_true(fabs(m - t) < 5 * se);
}

/* The thresholds, without statistics: exact SR goes up iff rbits < p 2^32; SR8 iff
 * (rbits >> 24) < floor(256 p). */
static void test_thresholds(void **state) {
  (void)state;
  for (int gi = 0; gi < UFP4_GRID_COUNT; gi++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)gi);
    for (int ia = 0; ia + 1 < g->n_levels; ia++) {
      const double a = g->levels[ia], h = g->levels[ia + 1] - a;
      for (int f = 0; f < NFRACS; f++) {
        float t = (float)(a + FRACS[f] * h);
        double p = ((double)t - a) / h;
        double c = ceil(p * 4294967296.0); /* count of rbits values that go up */
        if (c >= 1) assert_int_equal(ufp4_round_index(g, t, UFP4_ROUND_SR, (uint32_t)(c - 1)), ia + 1);
        if (c <= 4294967295.0) assert_int_equal(ufp4_round_index(g, t, UFP4_ROUND_SR, (uint32_t)c), ia);
        uint32_t k = (uint32_t)floor(256.0 * p);
        if (k >= 1)
          assert_int_equal(ufp4_round_index(g, t, UFP4_ROUND_SR8, ((k - 1) << 24) | 0xFFFFFFu), ia + 1);
        if (k <= 255) assert_int_equal(ufp4_round_index(g, t, UFP4_ROUND_SR8, k << 24), ia);
        assert_int_equal(ufp4_round_index(g, -t, UFP4_ROUND_SR8, k << 24), ia);
      }
    }
  }
}

static void test_fixed_points_and_saturation(void **state) {
  (void)state;
  static const uint32_t rb[] = {0, 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu, 0x00FFFFFFu};
  for (int gi = 0; gi < UFP4_GRID_COUNT; gi++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)gi);
    for (int m = UFP4_ROUND_SR; m <= UFP4_ROUND_SR8; m++) {
      for (size_t j = 0; j < sizeof rb / sizeof rb[0]; j++) {
        for (int k = 0; k < g->n_levels; k++) {
          assert_int_equal(ufp4_round_index(g, g->levels[k], (ufp4_round_mode)m, rb[j]), k);
          assert_int_equal(ufp4_round_index(g, -g->levels[k], (ufp4_round_mode)m, rb[j]), k);
        }
        assert_int_equal(ufp4_round_index(g, g->g_max * 1.5f, (ufp4_round_mode)m, rb[j]),
                         g->n_levels - 1);
        assert_int_equal(ufp4_round_index(g, -g->g_max - 1.0f, (ufp4_round_mode)m, rb[j]),
                         g->n_levels - 1);
        assert_int_equal(ufp4_round_index(g, nextafterf(g->g_max, INFINITY), (ufp4_round_mode)m,
                                          rb[j]),
                         g->n_levels - 1);
      }
      for (int i = 0; i < 10000; i++) {
        uint32_t r = ufp4_philox_u32(SEED, 77, (uint64_t)i);
        for (int k = 0; k < g->n_levels; k++)
          assert_int_equal(ufp4_round_index(g, g->levels[k], (ufp4_round_mode)m, r), k);
      }
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thresholds),
      cmocka_unit_test(test_fixed_points_and_saturation),
      cmocka_unit_test(test_convergence),
      cmocka_unit_test(test_whole_range),
      cmocka_unit_test(test_sr8_bias),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
