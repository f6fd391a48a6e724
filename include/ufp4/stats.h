/* Small statistics for comparing training runs: mean and spread over seeds, a paired t-test
 * across seeds, and the power-law fit L(C) = a * C^(-b) + c used by `ufp4 sweep`.
 *
 * Policies:
 * - Empty input: ufp4_mean of n = 0 is NaN; ufp4_std (sample std, divisor n - 1) of n < 2 is NaN.
 *   NaN inputs are not skipped: they propagate (callers filter first).
 * - ufp4_betainc(a, b, x) is the regularized incomplete beta I_x(a, b) for a, b > 0, x in [0, 1],
 *   evaluated by its continued fraction (modified Lentz), on whichever of I_x(a, b) and
 *   1 - I_{1-x}(b, a) converges faster; invalid arguments give NaN. Relative accuracy ~1e-13.
 * - Student-t: ufp4_t_cdf(t, df) = P(T <= t) for df > 0 (real df allowed); t = +-Inf gives 1 / 0;
 *   NaN t or df <= 0 gives NaN. Above df = 1e7 the normal distribution is used (|error| < 1e-7).
 *   ufp4_t_pvalue is the two-sided P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2), computed without
 *   forming 1 - p so small p-values keep their relative accuracy.
 * - Paired t-test of a against b: d_i = a_i - b_i, t = mean(d) / (sd(d) / sqrt(n)), df = n - 1.
 *   n < 2 is UFP4_EINVAL (no test is possible). When every d_i is equal (sd = 0): d = 0 gives t = 0,
 *   p = 1; otherwise t = +-Inf, p = 0 (a difference with no spread at all).
 * - Power-law fit: minimizes sum_i (L_i - a C_i^-b - c)^2 over a, c (any sign) and b in
 *   [b_min, b_max] (defaults 1e-4 and 4). For fixed b the best (a, c) is a linear least-squares
 *   solve, so the fit scans the profile SSE(b) on a grid and refines the best cell by golden-section
 *   search. C is divided by its geometric mean C0 internally so that C^-b stays in range; the
 *   returned a is in the caller's units (a = a0 * C0^b). Needs n >= 3 finite points with C > 0 and
 *   at least two distinct C values. A best b on the boundary of [b_min, b_max] is reported with
 *   at_bound = 1 (the data do not pin the exponent down).
 * - Seed summaries (ufp4_msd_finite): mean and sample std of the non-NaN values only, bit for bit
 *   what ufp4_mean and ufp4_std give on the NaN-free list; n counts the values used.
 * - Series gap (ufp4_series_gap_tail): a loss series x against a baseline series b, both sorted
 *   by step, over the last `window` steps that BOTH hold (steps only one of them logged are
 *   passed over): the means of |x - b| / b (rel_err), x - b (signed_gap) and (x - b) / b
 *   (rel_gap). No common step: n = 0 and the three are NaN. */
#ifndef UFP4_STATS_H
#define UFP4_STATS_H

#include <stddef.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

double ufp4_mean(const double *x, size_t n);
double ufp4_std(const double *x, size_t n);

double ufp4_betainc(double a, double b, double x);
double ufp4_t_cdf(double t, double df);
double ufp4_t_pvalue(double t, double df);

typedef struct {
  size_t n;         /* pairs */
  double mean_diff; /* mean of a_i - b_i */
  double sd_diff;   /* sample std of a_i - b_i */
  double t, df, p;  /* two-sided p */
} ufp4_ttest;

int ufp4_paired_ttest(const double *a, const double *b, size_t n, ufp4_ttest *out);

typedef struct {
  double a, b, c;
  double sse;   /* residual sum of squares */
  double rmse;  /* sqrt(sse / n) */
  double r2;    /* 1 - sse / sum (L - mean L)^2; NaN when all L are equal */
  int at_bound; /* b ended on b_min or b_max */
} ufp4_power_fit;

/* b_min = b_max = 0 selects the default range. */
int ufp4_fit_power_law(const double *C, const double *L, size_t n, double b_min, double b_max, ufp4_power_fit *out);
double ufp4_power_law_eval(const ufp4_power_fit *f, double C);

typedef struct {
  double mean, std;
  int n;
} ufp4_msd;

ufp4_msd ufp4_msd_finite(const double *x, size_t n);

/* A logged quantity against the step it was logged at. */
typedef struct {
  int *step;
  double *value;
  size_t n;
} ufp4_series;

typedef struct {
  int n; /* common steps averaged */
  double rel_err, signed_gap, rel_gap;
} ufp4_series_gap;

ufp4_series_gap ufp4_series_gap_tail(const ufp4_series *x, const ufp4_series *base, int window);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
