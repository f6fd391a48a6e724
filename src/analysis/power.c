/* The t quantile, the noncentral t CDF and the power of the paired t test (see ufp4/power.h). */
#include "ufp4/power.h"

#include <float.h>
#include <math.h>

#include "ufp4/error.h"
#include "ufp4/stats.h"

#define PI 3.14159265358979323846

/* ---- Student t quantile ---------------------------------------------------------------------- */

/* With w = sqrt(df) / u (u > 0), kept apart from s = 1 / w because for df < 1 the quantiles of
 * tiny p lie far beyond 1e154, where u^2 and even u / sqrt(df) overflow. */

/* Density of Student's t at u > 0: log(1 + u^2 / df) = log1p(1 / w^2), or for w < 1 without the
 * overflowing 1 / w^2. */
static double t_pdf(double u, double df) {
  const double lnorm = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * PI);
  const double w = sqrt(df) / u;
  const double l1s2 = w < 1 ? log1p(w * w) - 2 * log(w) : log1p(1 / w / w);
  return exp(lnorm - (df + 1) / 2 * l1s2);
}

/* The two masses the quantile search matches, each where it has relative accuracy:
 *   tail    P(T > u) = ufp4_t_cdf(-u, df), which forms 1 - x exactly; beyond u = 1e150 (only
 *           reached for df < 1), where its u^2 overflows, the leading term of I_x(df/2, 1/2) / 2
 *           with x = df / (df + u^2) ~ w^2, x^a / (a B(a, b)) (1 + O(x)), in logs;
 *   center  P(0 < T < u) = I_y(1/2, df/2) / 2, y = u^2 / (df + u^2) = 1 / (1 + w^2).
 * (tail = 1/2 - center; the subtraction would lose the small one's digits.) */
static double t_mass(double u, double df, int center) {
  const double w = sqrt(df) / u, a = df / 2;
  if (center) {
    const double y = w < 1 ? 1 / (1 + w * w) : 1 / w / w / (1 + 1 / w / w);
    return 0.5 * ufp4_betainc(0.5, a, y);
  }
  if (u <= 1e150) return ufp4_t_cdf(-u, df);
  const double lw = 0.5 * log(df) - log(u);
  return 0.5 * exp(2 * a * lw - log(a) - lgamma(a) - lgamma(0.5) + lgamma(a + 0.5));
}

/* A rough start for the upper-tail quantile u > 0 with P(T > u) = q <= 1/2: the normal quantile
 * by Abramowitz and Stegun 26.2.23 (error < 4.5e-4) and the Cornish-Fisher terms of 26.7.5. Only
 * a starting point: the bracketed iteration below does not depend on its accuracy. */
static double t_quantile_guess(double q, double df) {
  const double s = sqrt(-2 * log(q));
  const double z = s - (2.515517 + s * (0.802853 + s * 0.010328)) /
                           (1 + s * (1.432788 + s * (0.189269 + s * 0.001308)));
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df * df);
}

/* u > 0 with P(T > u) = q for 0 < q < 1/2. For q < 1/4 the root of g(u) = log q - log tail(u),
 * else of g(u) = log center(u) - log(1/2 - q) (1/2 - q is exact there, by Sterbenz): both g
 * increase in u, with g' = pdf / mass. Newton steps inside a bracket [lo, hi] that every
 * evaluation narrows; a step leaving the bracket is replaced by bisection (geometric once lo > 0),
 * so the iteration cannot diverge. */
static double t_upper_quantile(double q, double df) {
  const int center = q >= 0.25;
  const double ltarget = log(center ? 0.5 - q : q), sgn = center ? 1 : -1;
  double lo = 0, hi = fmax(1, t_quantile_guess(q, df));
  while (sgn * (log(t_mass(hi, df, center)) - ltarget) <= 0) { /* g(hi) must be positive */
    lo = hi;
    hi *= 2;
    if (isinf(hi)) return INFINITY;
  }
  double u = t_quantile_guess(q, df);
  if (!(u > lo && u < hi)) u = lo > 0 ? sqrt(lo) * sqrt(hi) : hi / 2;
  for (int it = 0; it < 300; it++) {
    const double mass = t_mass(u, df, center), g = sgn * (log(mass) - ltarget);
    if (g == 0) return u;
    if (g < 0) lo = u; else hi = u;
    double next = u - g * mass / t_pdf(u, df);
    if (!(next > lo && next < hi)) next = lo > 0 ? sqrt(lo) * sqrt(hi) : hi / 2;
    if (fabs(next - u) <= 4 * DBL_EPSILON * u || hi - lo <= 4 * DBL_EPSILON * hi) return next;
    u = next;
  }
  return u;
}

double ufp4_t_quantile(double p, double df) {
  if (isnan(p) || !(df > 0) || p < 0 || p > 1) return NAN;
  if (p == 0) return -INFINITY;
  if (p == 1) return INFINITY;
  if (p == 0.5) return 0;
  /* q = the smaller tail, exact in floating point for p >= 1/2 (Sterbenz). */
  const double q = p < 0.5 ? p : 1 - p, sign = p < 0.5 ? -1 : 1;
  if (df == 1) return sign / tan(PI * q);                           /* Cauchy */
  if (df == 2) return sign * (1 - 2 * q) / sqrt(2 * q * (1 - q));   /* closed form for df = 2 */
  return sign * t_upper_quantile(q, df);
}

/* ---- noncentral t CDF ----------------------------------------------------------------------- */

/* log of x^a (1-x)^b / (a B(a, b)), the step I_x(a, b) - I_x(a + 1, b). */
static double log_beta_step(double a, double b, double lx, double l1x) {
  return a * lx + b * l1x + lgamma(a + b) - lgamma(a + 1) - lgamma(b);
}

/* The Poisson-mixture sum of ufp4/power.h for t > 0 (so 0 < x < 1), without the factor 1/2. */
static double nct_series(double x, double df, double ncp) {
  const double b = df / 2, lam = ncp * ncp / 2, lx = log(x), l1x = log1p(-x);
  const double rlam = fabs(ncp) / sqrt(2.0), sgn = ncp < 0 ? -1 : 1, tol = 1e-17;
  const double k = floor(lam), llam = log(lam);
  /* At the mode: P_k, Q_k (with ncp / sqrt(2) folded in), I_x(k + 1/2, b) and I_x(k + 1, b). */
  const double p_k = exp(-lam + k * llam - lgamma(k + 1));
  const double q_k = sgn * rlam * exp(-lam + k * llam - lgamma(k + 1.5));
  const double ip_k = ufp4_betainc(k + 0.5, b, x), iq_k = ufp4_betainc(k + 1, b, x);
  double sum = p_k * ip_k + q_k * iq_k;

  /* Downwards, j = k-1 ... 0: I_x(a - 1, b) = I_x(a, b) + step(a - 1). Past j the weights fall by
   * at least r = j / lam each, and each term is at most P_i (1 + rlam 2/sqrt(pi)). */
  double pw = p_k, qw = q_k, ip = ip_k, iq = iq_k;
  for (double j = k - 1; j >= 0; j--) {
    pw *= (j + 1) / lam;
    qw *= (j + 1.5) / lam;
    ip += exp(log_beta_step(j + 0.5, b, lx, l1x));
    iq += exp(log_beta_step(j + 1, b, lx, l1x));
    sum += pw * fmin(ip, 1) + qw * fmin(iq, 1);
    const double r = j / lam;
    if (r < 1 && pw * (1 + 1.2 * rlam) * r / (1 - r) < tol) break;
  }

  /* Upwards, j = k+1, ...: I_x(a + 1, b) = I_x(a, b) - step(a). For j > lam the weights fall by
   * r = lam / (j + 1) < 1 each and rlam |Q_j| <= P_j (Gautschi's inequality), so the rest is at
   * most P_j r / (1 - r) (I_x(j + 1/2, b) + I_x(j + 1, b)). */
  pw = p_k, qw = q_k, ip = ip_k, iq = iq_k;
  const double jmax = k + 1000 + 40 * sqrt(lam);
  for (double j = k + 1; j <= jmax; j++) {
    pw *= lam / j;
    qw *= lam / (j + 0.5);
    ip = fmax(ip - exp(log_beta_step(j - 0.5, b, lx, l1x)), 0);
    iq = fmax(iq - exp(log_beta_step(j, b, lx, l1x)), 0);
    sum += pw * ip + qw * iq;
    const double r = lam / (j + 1);
    if (pw * r / (1 - r) * (ip + iq) < tol) break;
  }
  return sum;
}

/* P(T <= t) for t >= 0. */
static double nct_cdf_upper(double t, double df, double ncp) {
  const double phi = 0.5 * erfc(ncp / sqrt(2.0)); /* Phi(-ncp) = P(T <= 0) */
  if (t == 0) return phi;
  if (isinf(t)) return 1;
  const double x = 1 / (1 + df / t / t); /* t^2 / (t^2 + df) without overflowing t^2 */
  return fmin(fmax(phi + 0.5 * nct_series(x, df, ncp), 0), 1);
}

double ufp4_nct_cdf(double t, double df, double ncp) {
  if (isnan(t) || isnan(ncp) || !(df > 0) || isinf(ncp)) return NAN;
  if (ncp == 0) return ufp4_t_cdf(t, df);
  return t >= 0 ? nct_cdf_upper(t, df, ncp) : 1 - nct_cdf_upper(-t, df, -ncp);
}

/* ---- power and sample size ------------------------------------------------------------------ */

static int valid_levels(double alpha, double power) {
  return alpha > 0 && alpha < 1 && power > alpha && power < 1;
}

double ufp4_t_test_power(double df, double ncp, double alpha) {
  if (!(df > 0) || !isfinite(ncp) || !(alpha > 0 && alpha < 1)) return NAN;
  const double crit = ufp4_t_quantile(1 - alpha / 2, df);
  /* P(T > crit) = P(-T < -crit) with -T ~ t(df, -ncp), plus the far tail P(T < -crit) */
  return ufp4_nct_cdf(-crit, df, -ncp) + ufp4_nct_cdf(-crit, df, ncp);
}

double ufp4_paired_power(double effect, double sd, size_t n, double alpha) {
  if (n < 2 || !(sd > 0) || !isfinite(effect)) return NAN;
  return ufp4_t_test_power((double)(n - 1), sqrt((double)n) * effect / sd, alpha);
}

int ufp4_paired_n(double effect, double sd, double alpha, double power, size_t n_max, size_t *n) {
  if (!n) return ufp4_fail(UFP4_EINVAL, "paired sample size: NULL argument");
  if (!valid_levels(alpha, power))
    return ufp4_fail(UFP4_EINVAL, "paired sample size: need 0 < alpha (%g) < power (%g) < 1",
                     alpha, power);
  if (!(sd > 0) || !isfinite(sd) || !isfinite(effect) || effect == 0)
    return ufp4_fail(UFP4_EINVAL, "paired sample size: need sd > 0 (%g) and a finite effect != 0 "
                     "(%g)", sd, effect);
  /* Doubling finds a bracket (lo fails, hi reaches the power), bisection the smallest hi. */
  size_t lo = 1, hi = 2;
  while (ufp4_paired_power(effect, sd, hi, alpha) < power) {
    lo = hi;
    if (hi > n_max / 2)
      return ufp4_fail(UFP4_EINVAL, "paired sample size: effect %g with sd %g needs more than %zu "
                       "pairs for power %g", effect, sd, n_max, power);
    hi *= 2;
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (ufp4_paired_power(effect, sd, mid, alpha) >= power) hi = mid; else lo = mid;
  }
  if (hi > n_max)
    return ufp4_fail(UFP4_EINVAL, "paired sample size: effect %g with sd %g needs %zu pairs for "
                     "power %g, more than the limit %zu", effect, sd, hi, power, n_max);
  *n = hi;
  return 0;
}

double ufp4_paired_mdd(double sd, size_t n, double alpha, double power) {
  if (n < 2 || !(sd > 0) || !isfinite(sd) || !valid_levels(alpha, power)) return NAN;
  const double df = (double)(n - 1);
  /* Power rises with ncp from alpha at 0; bracket the ncp that reaches `power`, then bisect. */
  double lo = 0, hi = 1;
  while (ufp4_t_test_power(df, hi, alpha) < power) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6) return NAN; /* power within rounding of 1: no finite answer */
  }
  while (hi - lo > 1e-12 * hi) {
    const double mid = (lo + hi) / 2;
    if (ufp4_t_test_power(df, mid, alpha) < power) lo = mid; else hi = mid;
  }
  return (lo + hi) / 2 * sd / sqrt((double)n);
}

/* ---- summary of paired differences ---------------------------------------------------------- */

int ufp4_paired_summarize(const double *d, size_t n, double level, double alpha, double power,
                          ufp4_paired_summary *out) {
  if (!d || !out) return ufp4_fail(UFP4_EINVAL, "paired summary: NULL argument");
  if (n < 2)
    return ufp4_fail(UFP4_EINVAL, "paired summary: %zu difference(s); at least 2 are needed", n);
  if (!(level > 0 && level < 1))
    return ufp4_fail(UFP4_EINVAL, "paired summary: confidence level %g is not in (0, 1)", level);
  if (!valid_levels(alpha, power))
    return ufp4_fail(UFP4_EINVAL, "paired summary: need 0 < alpha (%g) < power (%g) < 1", alpha,
                     power);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(d[i]))
      return ufp4_fail(UFP4_EINVAL, "paired summary: difference %zu is %g", i, d[i]);
  const double rn = sqrt((double)n);
  out->n = n;
  out->mean = ufp4_mean(d, n);
  out->sd = ufp4_std(d, n);
  out->se = out->sd / rn;
  out->df = (double)(n - 1);
  if (out->sd == 0) {
    out->t = out->mean == 0 ? 0 : copysign(INFINITY, out->mean);
    out->p = out->mean == 0 ? 1 : 0;
  } else {
    out->t = out->mean / out->se;
    out->p = ufp4_t_pvalue(out->t, out->df);
  }
  const double half = ufp4_t_quantile((1 + level) / 2, out->df) * out->se;
  out->level = level;
  out->lo = out->mean - half;
  out->hi = out->mean + half;
  out->alpha = alpha;
  out->power = power;
  out->mdd = out->sd > 0 ? ufp4_paired_mdd(out->sd, n, alpha, power) : 0;
  return 0;
}
