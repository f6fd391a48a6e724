/* Power of the paired comparison (ufp4/power.h) against references that do not share its code:
 * published t-table quantiles and closed forms, the noncentral t by direct numerical integration
 * of its definition, power values printed by R's power.t.test and G*Power, a paired summary
 * worked by hand, and the argument checks. tests/test_power_scipy.py adds thousands of random
 * cases against SciPy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/power.h"
#include "ufp4/stats.h"

#define PI 3.14159265358979323846

static void assert_close(double got, double want, double tol, const char *what) {
  if (!(fabs(got - want) <= tol)) {
    fprintf(stderr, "%s: got %.15g want %.15g (tol %g)\n", what, got, want, tol);
    fail();
  }
}

/* Two-sided 95% and other quantiles, as printed (7 decimals) in standard t tables. */
static void test_t_quantile_table(void **state) {
  (void)state;
  const struct { double p, df, t; } table[] = {
    {0.975, 1, 12.7062047}, {0.975, 2, 4.3026527}, {0.975, 3, 3.1824463}, {0.975, 4, 2.7764451},
    {0.975, 5, 2.5705818},  {0.975, 10, 2.2281389}, {0.975, 30, 2.0422725}, {0.975, 100, 1.9839715},
    {0.995, 10, 3.1692727}, {0.95, 2, 2.9199856},  {0.9, 20, 1.3253407},   {0.999, 5, 5.8934295},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "t(%g, %g)", table[i].p, table[i].df);
    assert_close(ufp4_t_quantile(table[i].p, table[i].df), table[i].t, 5e-8, what);
    assert_close(ufp4_t_quantile(1 - table[i].p, table[i].df), -table[i].t, 5e-8, what);
  }
}

/* Closed forms (Cauchy for df = 1, df = 2) and the edges. */
static void test_t_quantile_closed_forms(void **state) {
  (void)state;
  for (double p = 0.01; p < 1; p += 0.07) {
    const double t1 = tan(PI * (p - 0.5));
    assert_close(ufp4_t_quantile(p, 1), t1, 1e-12 * fmax(1, fabs(t1)), "cauchy");
    const double t2 = (2 * p - 1) / sqrt(2 * p * (1 - p));
    assert_close(ufp4_t_quantile(p, 2), t2, 1e-13 * fmax(1, fabs(t2)), "df 2");
  }
  assert_true(ufp4_t_quantile(0.5, 7) == 0);
  assert_true(ufp4_t_quantile(0, 7) == -INFINITY);
  assert_true(ufp4_t_quantile(1, 7) == INFINITY);
  assert_true(isnan(ufp4_t_quantile(1.5, 7)));
  assert_true(isnan(ufp4_t_quantile(0.5, 0)));
  assert_true(isnan(ufp4_t_quantile(NAN, 3)));
}

/* The quantile inverts ufp4_t_cdf in the far tails too, at real df: the tail at the quantile
 * matches to 1e-13 relative (that of ufp4_betainc), times 1 + k, k = x pdf(x) / tail the condition
 * number of the tail in x (a last-bit change of x moves a steep tail by k ulps). */
static void test_t_quantile_round_trip(void **state) {
  (void)state;
  const double dfs[] = {0.5, 1.5, 3, 7.25, 40, 300, 1000};
  const double ps[] = {1e-300, 1e-100, 1e-20, 1e-8, 1e-3, 0.04, 0.3, 0.49, 0.51, 0.9, 0.999999};
  for (size_t i = 0; i < sizeof dfs / sizeof dfs[0]; i++)
    for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
      const double df = dfs[i], x = ufp4_t_quantile(ps[j], df);
      if (fabs(x) > 1e150) continue; /* beyond the range of ufp4_t_cdf; see the next test */
      const double back = ufp4_t_cdf(-fabs(x), df); /* the smaller tail, exactly as given */
      const double want = x < 0 ? ps[j] : 1 - ps[j];
      const double lpdf = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * PI) -
                          (df + 1) / 2 * log1p(x * x / df);
      const double k = exp(log(fabs(x)) + lpdf - log(want)); /* in logs: pdf may underflow */
      char what[64];
      snprintf(what, sizeof what, "cdf(quantile(%g, df %g))", ps[j], df);
      assert_close(back / want, 1, 1e-13 * (1 + k), what);
    }
}

/* Far beyond 1e154, where df < 1 puts the quantiles of tiny p, the tail is its leading term
 * P(T <= -u) = c df^((df-2)/2) u^-df (1 + O(u^-2)), c = Gamma((df+1)/2) / (sqrt(pi) Gamma(df/2)),
 * from integrating the density's tail c df^((df+1)/2) / sqrt(df) u^-(df+1) from u to infinity. */
static void test_t_quantile_far_tail(void **state) {
  (void)state;
  const double dfs[] = {0.5, 0.25};
  const double ps[] = {1e-100, 1e-300};
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < 2; j++) {
      const double df = dfs[i];
      const double lc = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(PI);
      const double lu = (lc + (df - 2) / 2 * log(df) - log(ps[j])) / df;
      const double x = ufp4_t_quantile(ps[j], df);
      if (lu > log(DBL_MAX)) {
        assert_true(x == -INFINITY);
      } else {
        assert_close(log(-x), lu, 1e-12 * lu, "far tail");
      }
    }
}

/* P(T <= t) = E[Phi(t S - ncp)] with S = sqrt(chi2_df / df), whose density is
 * 2 (df/2)^(df/2) / Gamma(df/2) s^(df-1) exp(-df s^2 / 2): the definition, integrated by
 * Simpson's rule on a fine grid that covers S (df >= 1, so the density is bounded at 0). */
static double nct_by_quadrature(double t, double df, double ncp) {
  const int m = 200000;
  const double smax = 1 + 40 / sqrt(df), h = smax / m;
  const double lc = log(2.0) + df / 2 * log(df / 2) - lgamma(df / 2);
  double sum = 0;
  for (int i = 0; i <= m; i++) {
    const double s = i * h, w = (i == 0 || i == m) ? 1 : (i % 2 ? 4 : 2);
    const double dens =
        s > 0 ? exp(lc + (df - 1) * log(s) - df * s * s / 2) : (df == 1 ? exp(lc) : 0);
    sum += w * dens * 0.5 * erfc(-(t * s - ncp) / sqrt(2.0));
  }
  return sum * h / 3;
}

static void test_nct_against_quadrature(void **state) {
  (void)state;
  const struct { double t, df, ncp; } cases[] = {
    {1, 10, 1},    {-3, 4, 2},     {2, 3, -1},    {0.5, 1, 0.7}, {5, 2, 3},     {-1, 25, -2},
    {12, 9, 10},   {3, 60, 2.5},   {-0.2, 6, 0.4}, {30, 5, 25},  {2.1, 200, 4}, {-8, 3, -6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char what[80];
    snprintf(what, sizeof what, "nct(t %g, df %g, ncp %g)", cases[i].t, cases[i].df, cases[i].ncp);
    assert_close(ufp4_nct_cdf(cases[i].t, cases[i].df, cases[i].ncp),
                 nct_by_quadrature(cases[i].t, cases[i].df, cases[i].ncp), 1e-10, what);
  }
}

/* ncp = 0 is the central t; P(T <= 0) = Phi(-ncp) exactly; the tails go to 0 and 1. */
static void test_nct_identities(void **state) {
  (void)state;
  for (double t = -6; t <= 6; t += 0.75)
    assert_close(ufp4_nct_cdf(t, 7, 0), ufp4_t_cdf(t, 7), 0, "ncp 0");
  for (double ncp = -30; ncp <= 30; ncp += 2.5)
    assert_close(ufp4_nct_cdf(0, 4, ncp), 0.5 * erfc(ncp / sqrt(2.0)), 1e-16, "t = 0");
  assert_true(ufp4_nct_cdf(INFINITY, 4, 3) == 1);
  assert_close(ufp4_nct_cdf(-INFINITY, 4, 3), 0, 0, "-inf");
  assert_close(ufp4_nct_cdf(1e6, 3, 2), 1, 1e-12, "far right");
  assert_close(ufp4_nct_cdf(1e200, 3, 2), 1, 1e-15, "t^2 overflows");
  assert_close(ufp4_nct_cdf(-1e200, 3, 2), 0, 1e-15, "t^2 overflows, left");
  /* large ncp: the series starts at its largest weight, so nothing underflows (AS 243 would) */
  assert_close(ufp4_nct_cdf(60, 50, 60), nct_by_quadrature(60, 50, 60), 1e-10, "ncp 60");
  assert_true(isnan(ufp4_nct_cdf(NAN, 4, 1)));
  assert_true(isnan(ufp4_nct_cdf(1, 0, 1)));
  assert_true(isnan(ufp4_nct_cdf(1, 4, NAN)));
}

/* Published power calculations:
 * - R, example(power.t.test): power.t.test(n = 20, delta = 1) prints power = 0.8689528 (two
 *   samples: df = 38, ncp = sqrt(20/2)); R drops the far tail (strict = FALSE), which holds
 *   2.3e-7 of it here, so the tolerance is 5e-7. power.t.test(power = .90, delta = 1) prints
 *   n = 22.02110 per group, i.e. power 0.9 at the real df 2n - 2.
 * - G*Power, one-sample / paired t, d = 0.5, alpha = 0.05 two-sided, power 0.8: N = 34 with
 *   actual power 0.8077775 (both tails, as here). */
static void test_power_published(void **state) {
  (void)state;
  assert_close(ufp4_t_test_power(38, sqrt(10.0), 0.05), 0.8689528, 5e-7, "R n=20 delta=1");
  const double n = 22.02110;
  assert_close(ufp4_t_test_power(2 * n - 2, sqrt(n / 2), 0.05), 0.9, 1e-6, "R n=22.0211");
  assert_close(ufp4_paired_power(0.5, 1, 34, 0.05), 0.8077775, 1e-7, "G*Power d=.5 N=34");
  size_t need = 0;
  assert_int_equal(ufp4_paired_n(0.5, 1, 0.05, 0.8, 1000, &need), 0);
  assert_int_equal(need, 34);
  assert_int_equal(ufp4_paired_n(-0.5, 1, 0.05, 0.8, 1000, &need), 0); /* sign does not matter */
  assert_int_equal(need, 34);
  /* no effect: the test rejects with probability alpha, both tails counted */
  assert_close(ufp4_t_test_power(9, 0, 0.05), 0.05, 1e-13, "power at ncp 0");
}

/* The MDD is the effect at which the power is exactly the one asked for, and it scales with sd. */
static void test_mdd(void **state) {
  (void)state;
  const size_t ns[] = {2, 3, 5, 10, 34, 200};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    const double mdd = ufp4_paired_mdd(1, ns[i], 0.05, 0.8);
    assert_close(ufp4_paired_power(mdd, 1, ns[i], 0.05), 0.8, 1e-10, "power at the mdd");
    assert_close(ufp4_paired_mdd(0.004, ns[i], 0.05, 0.8), 0.004 * mdd, 1e-12 * mdd, "sd scale");
  }
  /* with N = 34 pairs d = 0.5 has power 0.8078 > 0.8, so the MDD is a little under 0.5 sd */
  const double mdd34 = ufp4_paired_mdd(1, 34, 0.05, 0.8);
  assert_true(mdd34 < 0.5 && mdd34 > 0.48);
  assert_true(isnan(ufp4_paired_mdd(1, 1, 0.05, 0.8)));
  assert_true(isnan(ufp4_paired_mdd(1, 5, 0.05, 0.04))); /* power below alpha */
  assert_true(isnan(ufp4_paired_mdd(0, 5, 0.05, 0.8)));
}

/* d = 1..5: mean 3, sd sqrt(2.5), se sqrt(0.5), t = 3 / sqrt(0.5) = 4.2426407, df 4, two-sided
 * p = 0.0132356 and the 95% interval 3 -+ 2.7764451 sqrt(0.5) = [1.0367568, 4.9632432]. */
static void test_summary_by_hand(void **state) {
  (void)state;
  const double d[] = {1, 2, 3, 4, 5};
  ufp4_paired_summary s;
  assert_int_equal(ufp4_paired_summarize(d, 5, 0.95, 0.05, 0.8, &s), 0);
  assert_int_equal(s.n, 5);
  assert_close(s.mean, 3, 1e-15, "mean");
  assert_close(s.sd, sqrt(2.5), 1e-15, "sd");
  assert_close(s.se, sqrt(0.5), 1e-15, "se");
  assert_close(s.t, 4.2426407, 1e-7, "t");
  assert_close(s.df, 4, 0, "df");
  assert_close(s.p, 0.0132356, 1e-7, "p");
  assert_close(s.lo, 1.0367568, 1e-7, "ci lo");
  assert_close(s.hi, 4.9632432, 1e-7, "ci hi");
  assert_close(s.mdd, ufp4_paired_mdd(sqrt(2.5), 5, 0.05, 0.8), 0, "mdd");
  /* The paired t-test of ufp4/stats.h on a - b = d agrees. */
  const double a[] = {11, 12, 13, 14, 15}, b[] = {10, 10, 10, 10, 10};
  ufp4_ttest tt;
  assert_int_equal(ufp4_paired_ttest(a, b, 5, &tt), 0);
  assert_close(s.p, tt.p, 1e-15, "p as stats.h");
  /* equal differences: no spread, the interval is a point and the MDD is 0 */
  const double same[] = {0.01, 0.01, 0.01};
  assert_int_equal(ufp4_paired_summarize(same, 3, 0.9, 0.05, 0.8, &s), 0);
  assert_true(s.t == INFINITY && s.p == 0 && s.lo == s.hi && s.mdd == 0);
}

static void expect_error(int st, const char *needle) {
  assert_int_equal(st, UFP4_EINVAL);
  if (!strstr(ufp4_last_error(), needle)) {
    fprintf(stderr, "error '%s' does not say '%s'\n", ufp4_last_error(), needle);
    fail();
  }
}

static void test_errors(void **state) {
  (void)state;
  const double d[] = {1, 2, NAN};
  ufp4_paired_summary s;
  expect_error(ufp4_paired_summarize(d, 1, 0.95, 0.05, 0.8, &s), "at least 2");
  expect_error(ufp4_paired_summarize(d, 3, 0.95, 0.05, 0.8, &s), "difference 2");
  expect_error(ufp4_paired_summarize(d, 2, 1.0, 0.05, 0.8, &s), "confidence level");
  expect_error(ufp4_paired_summarize(d, 2, 0.95, 0.05, 1.0, &s), "power");
  size_t n;
  expect_error(ufp4_paired_n(0, 1, 0.05, 0.8, 1000, &n), "effect");
  expect_error(ufp4_paired_n(0.5, 0, 0.05, 0.8, 1000, &n), "sd");
  expect_error(ufp4_paired_n(0.5, 1, 0.05, 0.03, 1000, &n), "alpha");
  expect_error(ufp4_paired_n(0.001, 1, 0.05, 0.8, 1000, &n), "more than");
  assert_true(isnan(ufp4_paired_power(0.5, 1, 1, 0.05)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_t_quantile_table),
    cmocka_unit_test(test_t_quantile_closed_forms),
    cmocka_unit_test(test_t_quantile_round_trip),
    cmocka_unit_test(test_t_quantile_far_tail),
    cmocka_unit_test(test_nct_against_quadrature),
    cmocka_unit_test(test_nct_identities),
    cmocka_unit_test(test_power_published),
    cmocka_unit_test(test_mdd),
    cmocka_unit_test(test_summary_by_hand),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
