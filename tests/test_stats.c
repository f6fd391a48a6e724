/* Statistics: mean/std, the regularized incomplete beta, the Student-t CDF and p-value (checked
 * against closed forms, published table values and an independent Simpson integration of the t
 * density), the paired t-test by hand, and recovery of a known power law. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ufp4/stats.h"

#define PI 3.14159265358979323846

static void assert_close(double got, double want, double tol, const char *what) {
  if (!(fabs(got - want) <= tol)) {
    fprintf(stderr, "%s: got %.15g want %.15g (tol %g)\n", what, got, want, tol);
    fail();
  }
}

static void test_mean_std(void **state) {
  (void)state;
  const double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
  /* sum 40 -> mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32; sample var 32/7 */
  assert_close(ufp4_mean(x, 8), 5, 1e-15, "mean");
  assert_close(ufp4_std(x, 8), sqrt(32.0 / 7.0), 1e-15, "std");
  assert_true(isnan(ufp4_mean(x, 0)));
  assert_true(isnan(ufp4_std(x, 1)));
  /* a large common offset must not destroy the spread (two-pass) */
  const double y[] = {1e9 + 1, 1e9 + 2, 1e9 + 3};
  assert_close(ufp4_std(y, 3), 1, 1e-6, "std offset");
}

static void test_betainc_closed_forms(void **state) {
  (void)state;
  for (int i = 0; i <= 20; i++) {
    const double x = i / 20.0;
    assert_close(ufp4_betainc(1, 1, x), x, 1e-14, "I_x(1,1)");
    assert_close(ufp4_betainc(3.5, 1, x), pow(x, 3.5), 1e-13, "I_x(a,1)");
    assert_close(ufp4_betainc(1, 2.5, x), 1 - pow(1 - x, 2.5), 1e-13, "I_x(1,b)");
    /* I_x(2,2) = 3x^2 - 2x^3 */
    assert_close(ufp4_betainc(2, 2, x), 3 * x * x - 2 * x * x * x, 1e-13, "I_x(2,2)");
    /* I_x(1/2,1/2) = (2/pi) asin(sqrt x) */
    assert_close(ufp4_betainc(0.5, 0.5, x), 2 / PI * asin(sqrt(x)), 1e-12, "I_x(.5,.5)");
    /* symmetry I_x(a,b) = 1 - I_{1-x}(b,a) for a lopsided pair */
    assert_close(ufp4_betainc(7.3, 0.8, x), 1 - ufp4_betainc(0.8, 7.3, 1 - x), 1e-12, "symmetry");
  }
  assert_true(isnan(ufp4_betainc(0, 1, 0.5)));
  assert_true(isnan(ufp4_betainc(1, 1, 1.5)));
  assert_true(isnan(ufp4_betainc(1, 1, NAN)));
}

/* Independent reference: P(|T| >= t) = 1 - 2 * int_0^t f(x) dx, composite Simpson with 20000
 * panels on the t density f(x) = G((v+1)/2) / (sqrt(v pi) G(v/2)) (1 + x^2/v)^(-(v+1)/2). */
static double p_simpson(double t, double v) {
  const double k = exp(lgamma((v + 1) / 2) - lgamma(v / 2)) / sqrt(v * PI);
  const int n = 20000;
  const double h = fabs(t) / n;
  double s = 0;
  for (int i = 0; i <= n; i++) {
    const double x = i * h, f = k * pow(1 + x * x / v, -(v + 1) / 2);
    s += f * (i == 0 || i == n ? 1 : (i % 2 ? 4 : 2));
  }
  return 1 - 2 * s * h / 3;
}

static void test_t_known_values(void **state) {
  (void)state;
  /* Published table values (4 digits). */
  assert_close(ufp4_t_pvalue(2.0, 5), 0.1019, 5e-5, "t=2 df=5");
  assert_close(ufp4_t_pvalue(2.228, 10), 0.05, 1e-4, "t=2.228 df=10");
  assert_close(ufp4_t_pvalue(12.706, 1), 0.05, 1e-4, "t=12.706 df=1");
  assert_close(ufp4_t_pvalue(2.776, 4), 0.05, 1e-4, "t=2.776 df=4");
  assert_close(ufp4_t_pvalue(4.303, 2), 0.05, 1e-4, "t=4.303 df=2");
  assert_close(ufp4_t_pvalue(1.0, 1), 0.5, 1e-14, "t=1 df=1");
  /* Closed forms: df=1 (Cauchy) p = 1 - (2/pi) atan|t|; df=2 p = 1 - |t|/sqrt(2+t^2). */
  const double ts[] = {0, 1e-8, 0.3, 1, 2.5, 10, 100, 1e4};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
    const double t = ts[i];
    assert_close(ufp4_t_pvalue(t, 1), 1 - 2 / PI * atan(t), 1e-13, "cauchy");
    assert_close(ufp4_t_pvalue(-t, 1), 1 - 2 / PI * atan(t), 1e-13, "cauchy sym");
    assert_close(ufp4_t_pvalue(t, 2), 1 - t / sqrt(2 + t * t), 1e-13, "df2");
    assert_close(ufp4_t_cdf(t, 2), 0.5 + t / (2 * sqrt(2 + t * t)), 1e-13, "cdf df2");
  }
  /* Tiny p keeps relative accuracy: df=1, t=1e6: p = 1 - (2/pi) atan(t) ~ 2/(pi t). */
  assert_close(ufp4_t_pvalue(1e6, 1) / (2 / (PI * 1e6)), 1, 1e-6, "tiny p relative");
  /* Simpson reference across df, including non-integer df. */
  const double dfs[] = {1, 2, 3, 4.5, 7, 10, 29, 100};
  const double tt[] = {0.1, 0.7, 1.5, 2.0, 3.2, 5.0};
  for (size_t i = 0; i < sizeof dfs / sizeof dfs[0]; i++)
    for (size_t j = 0; j < sizeof tt / sizeof tt[0]; j++) {
      char what[64];
      snprintf(what, sizeof what, "simpson t=%g df=%g", tt[j], dfs[i]);
      assert_close(ufp4_t_pvalue(tt[j], dfs[i]), p_simpson(tt[j], dfs[i]), 1e-9, what);
      assert_close(ufp4_t_cdf(-tt[j], dfs[i]), p_simpson(tt[j], dfs[i]) / 2, 1e-9, what);
    }
  /* Limits and symmetry. */
  assert_close(ufp4_t_pvalue(0, 3), 1, 1e-15, "t=0");
  assert_close(ufp4_t_cdf(0, 3), 0.5, 1e-15, "cdf 0");
  assert_close(ufp4_t_cdf(1.3, 6) + ufp4_t_cdf(-1.3, 6), 1, 1e-14, "cdf symmetry");
  assert_close(ufp4_t_pvalue(INFINITY, 3), 0, 0, "inf");
  assert_close(ufp4_t_cdf(INFINITY, 3), 1, 0, "cdf inf");
  assert_close(ufp4_t_cdf(-INFINITY, 3), 0, 0, "cdf -inf");
  /* df -> infinity: normal, p(1.96) = erfc(1.96/sqrt 2) = 0.0499958 */
  assert_close(ufp4_t_pvalue(1.96, 1e9), erfc(1.96 / sqrt(2.0)), 1e-9, "normal limit");
  assert_close(ufp4_t_pvalue(1.96, 1e6), erfc(1.96 / sqrt(2.0)), 1e-6, "large df");
  /* p decreases with df at fixed t (heavier tails for small df) */
  assert_true(ufp4_t_pvalue(2.0, 3) > ufp4_t_pvalue(2.0, 30));
  assert_true(isnan(ufp4_t_pvalue(1, 0)));
  assert_true(isnan(ufp4_t_cdf(NAN, 3)));
}

static void test_paired_ttest(void **state) {
  (void)state;
  /* d = a - b = {1, 2, 3, 2}: mean 2, deviations -1 0 1 0 -> var 2/3, sd 0.8165;
   * t = 2 / (0.8165 / 2) = 4.89898, df = 3. */
  const double a[] = {11, 12, 13, 12.5}, b[] = {10, 10, 10, 10.5};
  ufp4_ttest r;
  assert_int_equal(ufp4_paired_ttest(a, b, 4, &r), 0);
  assert_int_equal(r.n, 4);
  assert_close(r.mean_diff, 2, 1e-14, "mean diff");
  assert_close(r.sd_diff, sqrt(2.0 / 3.0), 1e-14, "sd diff");
  assert_close(r.t, 2 / (sqrt(2.0 / 3.0) / 2), 1e-12, "t");
  assert_close(r.df, 3, 0, "df");
  assert_close(r.p, p_simpson(r.t, 3), 1e-9, "p");
  /* swapping the arguments flips t, keeps p */
  ufp4_ttest s;
  assert_int_equal(ufp4_paired_ttest(b, a, 4, &s), 0);
  assert_close(s.t, -r.t, 1e-12, "swap t");
  assert_close(s.p, r.p, 1e-15, "swap p");
  /* no spread */
  const double c[] = {1, 2, 3}, d0[] = {0, 1, 2};
  assert_int_equal(ufp4_paired_ttest(c, d0, 3, &s), 0);
  assert_true(isinf(s.t) && s.t > 0);
  assert_close(s.p, 0, 0, "p no spread");
  assert_int_equal(ufp4_paired_ttest(c, c, 3, &s), 0);
  assert_close(s.t, 0, 0, "t equal");
  assert_close(s.p, 1, 0, "p equal");
  /* one pair: no test */
  assert_true(ufp4_paired_ttest(a, b, 1, &s) < 0);
}

static void fill_law(double *C, double *L, int n, double a, double b, double c, double noise) {
  for (int i = 0; i < n; i++) {
    C[i] = 1e15 * pow(10.0, 4.0 * i / (n - 1)); /* 1e15 .. 1e19 FLOPs */
    /* deterministic +-noise pattern, zero mean over pairs */
    L[i] = a * pow(C[i], -b) + c + noise * ((i * 7919) % 5 - 2) / 2.0;
  }
}

static void test_power_fit(void **state) {
  (void)state;
  double C[12], L[12];
  ufp4_power_fit f;
  /* exact data */
  fill_law(C, L, 9, 2000, 0.25, 1.7, 0);
  assert_int_equal(ufp4_fit_power_law(C, L, 9, 0, 0, &f), 0);
  assert_close(f.b, 0.25, 1e-6, "b exact");
  assert_close(f.a / 2000, 1, 1e-4, "a exact");
  assert_close(f.c, 1.7, 1e-6, "c exact");
  assert_true(f.sse < 1e-16);
  assert_false(f.at_bound);
  assert_close(ufp4_power_law_eval(&f, 3e16), 2000 * pow(3e16, -0.25) + 1.7, 1e-7, "eval");
  /* a steeper law on a different range */
  for (int i = 0; i < 6; i++) {
    C[i] = 10.0 * (i + 1);
    L[i] = 3.0 * pow(C[i], -1.1) + 0.5;
  }
  assert_int_equal(ufp4_fit_power_law(C, L, 6, 0, 0, &f), 0);
  assert_close(f.b, 1.1, 1e-6, "b steep");
  assert_close(f.a, 3.0, 1e-5, "a steep");
  assert_close(f.c, 0.5, 1e-7, "c steep");
  /* noisy data: the fit is a least-squares optimum, so it cannot be worse than the truth, and
   * the parameters stay near it (noise 0.002 on a signal span of ~0.33) */
  fill_law(C, L, 12, 2000, 0.25, 1.7, 0.002);
  assert_int_equal(ufp4_fit_power_law(C, L, 12, 0, 0, &f), 0);
  double sse_true = 0;
  for (int i = 0; i < 12; i++) {
    const double r = L[i] - (2000 * pow(C[i], -0.25) + 1.7);
    sse_true += r * r;
  }
  assert_true(f.sse <= sse_true * (1 + 1e-9));
  assert_close(f.b, 0.25, 0.05, "b noisy");
  assert_close(f.c, 1.7, 0.03, "c noisy");
  assert_true(f.r2 > 0.999);
  /* bad input */
  assert_true(ufp4_fit_power_law(C, L, 2, 0, 0, &f) < 0);
  C[0] = -1;
  assert_true(ufp4_fit_power_law(C, L, 12, 0, 0, &f) < 0);
  for (int i = 0; i < 4; i++) C[i] = 5;
  assert_true(ufp4_fit_power_law(C, L, 4, 0, 0, &f) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mean_std),     cmocka_unit_test(test_betainc_closed_forms),
      cmocka_unit_test(test_t_known_values), cmocka_unit_test(test_paired_ttest),
      cmocka_unit_test(test_power_fit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
