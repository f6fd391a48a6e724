/* Seed statistics, the Student-t distribution and the power-law fit (see ufp4/stats.h). */
#include "ufp4/stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "ufp4/error.h"

double ufp4_mean(const double *x, size_t n) {
  if (!n) return NAN;
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s / (double)n;
}

double ufp4_std(const double *x, size_t n) {
  if (n < 2) return NAN;
  const double m = ufp4_mean(x, n);
  double s = 0; /* two-pass: no cancellation when the spread is tiny next to the mean */
  for (size_t i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
  return sqrt(s / (double)(n - 1));
}

/* Continued fraction of I_x(a, b) / front factor, by the modified Lentz method. */
static double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 20000; m++) {
    const double m2 = 2.0 * m;
    /* even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)) */
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    c = 1 + num / c;
    if (fabs(d) < tiny) d = tiny;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    /* odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)) */
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    c = 1 + num / c;
    if (fabs(d) < tiny) d = tiny;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (fabs(delta - 1) < eps) break;
  }
  return h;
}

/* I_x(a, b) with y = 1 - x given exactly. */
static double betainc2(double a, double b, double x, double y) {
  if (x <= 0) return 0;
  if (y <= 0) return 1;
  const double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(y);
  /* The fraction converges quickly for x < (a + 1) / (a + b + 2); otherwise use the symmetry. */
  if (x < (a + 1) / (a + b + 2)) return exp(lfront) * beta_cf(a, b, x) / a;
  return 1 - exp(lfront) * beta_cf(b, a, y) / b;
}

double ufp4_betainc(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1) || isinf(a) || isinf(b)) return NAN;
  return betainc2(a, b, x, 1 - x);
}

/* Two-sided tail P(|T| >= |t|). */
static double t_two_sided(double t, double df) {
  const double t2 = t * t;
  if (isinf(t)) return 0;
  if (df > 1e7) return erfc(fabs(t) / sqrt(2.0));
  /* x = df / (df + t^2) and 1 - x = t^2 / (df + t^2), both formed without subtraction. */
  const double x = df / (df + t2), y = t2 / (df + t2);
  return betainc2(df / 2, 0.5, x, y);
}

double ufp4_t_cdf(double t, double df) {
  if (isnan(t) || !(df > 0)) return NAN;
  if (t == INFINITY) return 1;
  if (t == -INFINITY) return 0;
  const double tail = 0.5 * t_two_sided(t, df);
  return t > 0 ? 1 - tail : tail;
}

double ufp4_t_pvalue(double t, double df) {
  if (isnan(t) || !(df > 0)) return NAN;
  return t_two_sided(t, df);
}

int ufp4_paired_ttest(const double *a, const double *b, size_t n, ufp4_ttest *out) {
  if (!a || !b || !out) return ufp4_fail(UFP4_EINVAL, "paired t-test: NULL argument");
  if (n < 2) return ufp4_fail(UFP4_EINVAL, "paired t-test: %zu pair(s); at least 2 are needed", n);
  double s = 0;
  for (size_t i = 0; i < n; i++) s += a[i] - b[i];
  const double m = s / (double)n;
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (a[i] - b[i] - m) * (a[i] - b[i] - m);
  if (!isfinite(m) || !isfinite(ss)) return ufp4_fail(UFP4_EINVAL, "paired t-test: non-finite input");
  out->n = n;
  out->mean_diff = m;
  out->sd_diff = sqrt(ss / (double)(n - 1));
  out->df = (double)(n - 1);
  if (out->sd_diff == 0) {
    out->t = m == 0 ? 0 : copysign(INFINITY, m);
    out->p = m == 0 ? 1 : 0;
    return 0;
  }
  out->t = m / (out->sd_diff / sqrt((double)n));
  out->p = ufp4_t_pvalue(out->t, out->df);
  return 0;
}

/* Best (a0, c) for fixed b on normalized C (u_i = (C_i / C0)^-b); returns the SSE. */
static double profile(const double *lc, const double *L, size_t n, double b, double *a0, double *c) {
  double su = 0, suu = 0, sl = 0, sul = 0;
  for (size_t i = 0; i < n; i++) {
    const double u = exp(-b * lc[i]);
    su += u;
    suu += u * u;
    sl += L[i];
    sul += u * L[i];
  }
  const double dn = (double)n, det = dn * suu - su * su;
  if (!(fabs(det) > 1e-300)) { /* u constant (b ~ 0): only the sum a0 + c is determined */
    *a0 = 0;
    *c = sl / dn;
  } else {
    *a0 = (dn * sul - su * sl) / det;
    *c = (sl - *a0 * su) / dn;
  }
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    const double r = L[i] - *a0 * exp(-b * lc[i]) - *c;
    sse += r * r;
  }
  return sse;
}

int ufp4_fit_power_law(const double *C, const double *L, size_t n, double b_min, double b_max, ufp4_power_fit *out) {
  if (!C || !L || !out) return ufp4_fail(UFP4_EINVAL, "power-law fit: NULL argument");
  if (b_min == 0 && b_max == 0) {
    b_min = 1e-4;
    b_max = 4;
  }
  if (!(b_min >= 0) || !(b_max > b_min) || !isfinite(b_max))
    return ufp4_fail(UFP4_EINVAL, "power-law fit: exponent range [%g, %g] is invalid", b_min, b_max);
  if (n < 3) return ufp4_fail(UFP4_EINVAL, "power-law fit: %zu point(s); at least 3 are needed", n);
  double lmean = 0, cmin = INFINITY, cmax = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    if (!(C[i] > 0) || !isfinite(C[i]) || !isfinite(L[i]))
      return ufp4_fail(UFP4_EINVAL, "power-law fit: point %zu (C=%g, L=%g) is not finite with C > 0", i, C[i], L[i]);
    lmean += log(C[i]);
    cmin = fmin(cmin, C[i]);
    cmax = fmax(cmax, C[i]);
  }
  if (cmin == cmax) return ufp4_fail(UFP4_EINVAL, "power-law fit: all C are equal; the exponent is undetermined");
  lmean /= (double)n;
  double *lc = malloc(n * sizeof *lc);
  if (!lc) return ufp4_fail(UFP4_ENOMEM, "power-law fit: out of memory");
  for (size_t i = 0; i < n; i++) lc[i] = log(C[i]) - lmean;

  enum { grid = 800 };
  int best = 0;
  double best_sse = INFINITY, a0, c;
  for (int k = 0; k <= grid; k++) {
    const double b = b_min + (b_max - b_min) * k / grid;
    const double s = profile(lc, L, n, b, &a0, &c);
    if (s < best_sse) best_sse = s, best = k;
  }
  /* Golden-section search on the bracket around the best grid cell (SSE(b) is smooth). */
  const double step = (b_max - b_min) / grid, g = (sqrt(5.0) - 1) / 2;
  double lo = fmax(b_min, b_min + (best - 1) * step), hi = fmin(b_max, b_min + (best + 1) * step);
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = profile(lc, L, n, x1, &a0, &c), f2 = profile(lc, L, n, x2, &a0, &c);
  for (int it = 0; it < 200 && hi - lo > 1e-13 * fmax(1, hi); it++) {
    if (f1 < f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo);
      f1 = profile(lc, L, n, x1, &a0, &c);
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo);
      f2 = profile(lc, L, n, x2, &a0, &c);
    }
  }
  double b = (lo + hi) / 2, sse = profile(lc, L, n, b, &a0, &c);
  const double b_grid = b_min + best * step;
  double a0g, cg;
  const double sse_grid = profile(lc, L, n, b_grid, &a0g, &cg);
  if (sse_grid < sse) b = b_grid, sse = sse_grid, a0 = a0g, c = cg;

  double lm = 0, st = 0;
  for (size_t i = 0; i < n; i++) lm += L[i];
  lm /= (double)n;
  for (size_t i = 0; i < n; i++) st += (L[i] - lm) * (L[i] - lm);
  free(lc);
  out->a = a0 * exp(b * lmean); /* undo the normalization: a0 (C/C0)^-b = a0 C0^b C^-b */
  out->b = b;
  out->c = c;
  out->sse = sse;
  out->rmse = sqrt(sse / (double)n);
  out->r2 = st > 0 ? 1 - sse / st : NAN;
  out->at_bound = b - b_min < 2 * step * 1e-6 || b_max - b < 2 * step * 1e-6;
  return 0;
}

double ufp4_power_law_eval(const ufp4_power_fit *f, double C) { return f->a * pow(C, -f->b) + f->c; }

/* NaNs are passed over in place, so the sums run over the same values in the same order as
 * ufp4_mean and ufp4_std on the filtered list: the same bits, with no copy. */
ufp4_msd ufp4_msd_finite(const double *x, size_t n) {
  double s = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!isnan(x[i])) s += x[i], k++;
  const double m = k ? s / (double)k : NAN;
  double ss = 0;
  for (size_t i = 0; i < n; i++)
    if (!isnan(x[i])) ss += (x[i] - m) * (x[i] - m);
  return (ufp4_msd){m, k >= 2 ? sqrt(ss / (double)(k - 1)) : NAN, (int)k};
}

ufp4_series_gap ufp4_series_gap_tail(const ufp4_series *x, const ufp4_series *base, int window) {
  size_t i = x->n, j = base->n;
  double se = 0, sg = 0, sr = 0;
  int k = 0;
  while (i > 0 && j > 0 && k < window) { /* walk both sorted series backwards */
    const int si = x->step[i - 1], sj = base->step[j - 1];
    if (si > sj) i--;
    else if (sj > si) j--;
    else {
      const double L = x->value[i - 1], Lb = base->value[j - 1];
      se += fabs(L - Lb) / Lb;
      sg += L - Lb;
      sr += (L - Lb) / Lb;
      k++;
      i--, j--;
    }
  }
  return (ufp4_series_gap){k, k ? se / k : NAN, k ? sg / k : NAN, k ? sr / k : NAN};
}
