/* Synthetic tensors: moments against the distributions' known values with tolerances from n,
 * outlier fraction, determinism across calls and thread counts, rejection of bad specs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/parallel.h"
#include "ufp4/philox.h"
#include "ufp4/synth.h"

#define N ((size_t)1 << 20)
#define PI_D 3.14159265358979323846

typedef struct {
  double mean, var, m4, abs_mean;
} moments;

static moments sample_moments(const float *x, size_t n) {
  moments m = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) m.mean += x[i];
  m.mean /= (double)n;
  for (size_t i = 0; i < n; ++i) {
    double d = x[i] - m.mean;
    m.var += d * d;
    m.m4 += d * d * d * d;
    m.abs_mean += fabs((double)x[i]);
  }
  m.var /= (double)n;
  m.m4 /= (double)n;
  m.abs_mean /= (double)n;
  return m;
}

static float *fill(ufp4_synth_spec s, size_t n) {
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  assert_int_equal(ufp4_synth_fill(&s, x, n), 0);
  return x;
}

/* Tolerances are 5 standard errors: se(mean) = sqrt(var/n), se(var) = sqrt((m4 - var^2)/n),
 * se(E|x|) <= sqrt(var/n). */
static void check_moments(const char *what, const float *x, size_t n, double var, double m4,
                          double abs_mean) {
  moments m = sample_moments(x, n);
  double se_mean = sqrt(var / n), se_var = sqrt((m4 - var * var) / n);
  if (fabs(m.mean) > 5 * se_mean) fail_msg("%s: mean %.5f (se %.5f)", what, m.mean, se_mean);
  if (fabs(m.var - var) > 5 * se_var) fail_msg("%s: var %.5f want %.5f (se %.5f)", what, m.var, var, se_var);
  if (fabs(m.abs_mean - abs_mean) > 5 * se_mean)
    fail_msg("%s: E|x| %.5f want %.5f", what, m.abs_mean, abs_mean);
}

static void test_gaussian(void **state) {
  (void)state;
  float *x = fill(ufp4_synth_default(UFP4_DIST_GAUSSIAN, 11), N);
  /* N(0,1): var 1, E x^4 = 3, E|x| = sqrt(2/pi). */
  check_moments("gaussian", x, N, 1.0, 3.0, sqrt(2.0 / PI_D));
  /* Kurtosis: the sample 4th moment has sd sqrt((E x^8 - 9)/n) = sqrt(96/n). */
  moments m = sample_moments(x, N);
  assert_true(fabs(m.m4 - 3.0) < 5 * sqrt(96.0 / N));
  free(x);
}

static void test_laplace(void **state) {
  (void)state;
  float *x = fill(ufp4_synth_default(UFP4_DIST_LAPLACE, 12), N);
  /* Laplace(b = 1/sqrt2): var 2b^2 = 1, E x^4 = 24 b^4 = 6, E|x| = b. */
  check_moments("laplace", x, N, 1.0, 6.0, 1.0 / sqrt(2.0));
  /* Median of |x| is b ln 2; the fraction below it is 1/2 within 5 sd of a binomial. */
  size_t below = 0;
  for (size_t i = 0; i < N; ++i) below += fabs((double)x[i]) < log(2.0) / sqrt(2.0);
  assert_true(fabs((double)below / N - 0.5) < 5 * 0.5 / sqrt((double)N));
  free(x);
}

static void test_student(void **state) {
  (void)state;
  ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_STUDENT_T, 13);
  assert_true(s.dof == 3.0);
  s.dof = 10;
  float *x = fill(s, N);
  /* t(10): var = 10/8 = 1.25; E x^4 = 3 nu^2 / ((nu-2)(nu-4)) = 300/48 = 6.25;
   * E|x| = 2 sqrt(nu) Gamma((nu+1)/2) / (sqrt(pi) (nu-1) Gamma(nu/2)). */
  double nu = 10.0;
  double abs_mean = 2.0 * sqrt(nu) * exp(lgamma((nu + 1) / 2) - lgamma(nu / 2)) / (sqrt(PI_D) * (nu - 1));
  check_moments("student-t(10)", x, N, 1.25, 6.25, abs_mean);
  free(x);
  /* dof 1 is Cauchy: P(|x| > 1) = 1/2. */
  s.dof = 1;
  x = fill(s, N);
  size_t above = 0;
  for (size_t i = 0; i < N; ++i) {
    assert_true(isfinite(x[i]));
    above += fabs((double)x[i]) > 1.0;
  }
  assert_true(fabs((double)above / N - 0.5) < 5 * 0.5 / sqrt((double)N));
  free(x);
}

static void test_outliers(void **state) {
  (void)state;
  ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_OUTLIERS, 14);
  assert_true(s.outlier_frac == 0.01 && s.outlier_scale == 20.0);
  float *x = fill(s, N);
  float *g = fill(ufp4_synth_default(UFP4_DIST_GAUSSIAN, 14), N);
  /* Each entry is the seed's gaussian entry, either as is or times 20 exactly. */
  size_t scaled = 0;
  for (size_t i = 0; i < N; ++i) {
    if (x[i] == g[i] && g[i] != 0.0f) continue;
    assert_true(x[i] == g[i] * 20.0f);
    scaled++;
  }
  double p = 0.01, se = sqrt(p * (1 - p) / N);
  assert_true(fabs((double)scaled / N - p) < 5 * se);
  /* Variance: 0.99 + 0.01 * 400 = 4.99; E x^4 = 3 (0.99 + 0.01 * 20^4) = 4802.97. */
  check_moments("outliers", x, N, 4.99, 4802.97, sqrt(2 / PI_D) * (0.99 + 0.01 * 20));
  free(x);
  free(g);
  s.outlier_frac = 0.25;
  s.outlier_scale = -3;
  x = fill(s, N);
  g = fill(ufp4_synth_default(UFP4_DIST_GAUSSIAN, 14), N);
  scaled = 0;
  for (size_t i = 0; i < N; ++i) scaled += x[i] != g[i];
  se = sqrt(0.25 * 0.75 / N);
  assert_true(fabs((double)scaled / N - 0.25) < 5 * se);
  free(x);
  free(g);
}

static void test_determinism(void **state) {
  (void)state;
  const size_t n = 100003;
  for (int d = 0; d < UFP4_DIST_COUNT; ++d) {
    ufp4_synth_spec s = ufp4_synth_default((ufp4_synth_dist)d, 77);
    ufp4_set_threads(1);
    float *a = fill(s, n);
    ufp4_set_threads(2);
    float *b = fill(s, n);
    assert_memory_equal(a, b, n * sizeof *a);
    /* Element i depends on i only: a prefix fill equals the prefix of the long fill. */
    float *c = fill(s, 1000);
    assert_memory_equal(a, c, 1000 * sizeof *a);
    s.seed = 78;
    float *e = fill(s, n);
    assert_memory_not_equal(a, e, n * sizeof *a);
    free(a);
    free(b);
    free(c);
    free(e);
  }
}

static void test_names_and_errors(void **state) {
  (void)state;
  const char *names[] = {"gaussian", "laplace", "student-t", "outliers"};
  for (int d = 0; d < UFP4_DIST_COUNT; ++d) {
    ufp4_synth_dist out;
    assert_string_equal(ufp4_synth_dist_name((ufp4_synth_dist)d), names[d]);
    assert_int_equal(ufp4_synth_dist_parse(names[d], &out), 0);
    assert_int_equal(out, d);
  }
  ufp4_synth_dist out;
  assert_int_equal(ufp4_synth_dist_parse("normal", &out), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "normal"));
  assert_int_equal(ufp4_synth_dist_parse("", &out), UFP4_EINVAL);
  assert_int_equal(ufp4_synth_dist_parse(NULL, &out), UFP4_EINVAL);

  float x[8];
  ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_STUDENT_T, 1);
  const double bad_dof[] = {2.5, 0.0, -3.0, 65.0, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_dof / sizeof bad_dof[0]; ++i) {
    s.dof = bad_dof[i];
    assert_int_equal(ufp4_synth_fill(&s, x, 8), UFP4_EINVAL);
  }
  s.dof = 64;
  assert_int_equal(ufp4_synth_fill(&s, x, 8), 0);
  s = ufp4_synth_default(UFP4_DIST_OUTLIERS, 1);
  s.outlier_frac = 1.5;
  assert_int_equal(ufp4_synth_fill(&s, x, 8), UFP4_EINVAL);
  s.outlier_frac = -0.1;
  assert_int_equal(ufp4_synth_fill(&s, x, 8), UFP4_EINVAL);
  s.outlier_frac = 0.1;
  s.outlier_scale = NAN;
  assert_int_equal(ufp4_synth_fill(&s, x, 8), UFP4_EINVAL);
  s = ufp4_synth_default((ufp4_synth_dist)UFP4_DIST_COUNT, 1);
  assert_int_equal(ufp4_synth_fill(&s, x, 8), UFP4_EINVAL);
  s = ufp4_synth_default(UFP4_DIST_GAUSSIAN, 1);
  assert_int_equal(ufp4_synth_fill(&s, NULL, 8), UFP4_EINVAL);
  assert_int_equal(ufp4_synth_fill(NULL, x, 8), UFP4_EINVAL);
  assert_int_equal(ufp4_synth_fill(&s, NULL, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gaussian),    cmocka_unit_test(test_laplace),
      cmocka_unit_test(test_student),     cmocka_unit_test(test_outliers),
      cmocka_unit_test(test_determinism), cmocka_unit_test(test_names_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
