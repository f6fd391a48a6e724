/* Power of the paired comparison: what n paired differences d_i = a_i - b_i (two recipes on the
 * same seed) can resolve, and how many pairs a chosen effect needs.
 *
 * Distributions (df > 0 may be real; tests/test_power_scipy.py checks them against SciPy over
 * df in [1, 1000], |ncp| <= 40, |t| <= 50):
 * - ufp4_t_quantile(p, df): the x with P(T <= x) = p for Student's t. df = 1 and 2 use their
 *   closed forms; otherwise a safeguarded (bracketed, so it cannot diverge) Newton iteration on
 *   the log of the tail or, for p within 1/4 of 1/2, of the central mass, both from ufp4_betainc
 *   (ufp4/stats.h). Relative error (against a 30-digit mpmath integration of the density, p from
 *   1e-20 to 0.49): < 3e-15 for df <= 40, < 1e-12 for df <= 1e4, ~1e-10 at df = 1e5 (the
 *   log-gamma differences inside the incomplete beta lose digits as df grows). Tails down to
 *   p = 1e-300 round-trip through ufp4_t_cdf. A quantile beyond DBL_MAX (tiny p at df < 1) is
 *   -+Inf, as are p = 0 / 1. p outside [0, 1], NaN p or df <= 0 gives NaN.
 * - ufp4_nct_cdf(t, df, ncp): P(T <= t) for the noncentral t with noncentrality ncp, by the
 *   Poisson-mixture series of Lenth (1989, AS 243),
 *     P(T <= t) = Phi(-ncp) + 1/2 sum_j [P_j I_x(j + 1/2, df/2) + ncp/sqrt(2) Q_j I_x(j + 1, df/2)]
 *   with x = t^2 / (t^2 + df), P_j = e^-L L^j / j!, Q_j = e^-L L^j / Gamma(j + 3/2), L = ncp^2/2,
 *   for t >= 0 (t < 0 by P(T <= t; ncp) = 1 - P(T <= -t; -ncp)). As Benton and Krishnamoorthy
 *   (2003) advise, the sum starts at the largest Poisson weight j = floor(L) and runs both ways,
 *   with rigorous truncation bounds, so no weight underflows for large ncp (AS 243 starts at
 *   j = 0, whose weight e^-L underflows for ncp > 37). Absolute error (against SciPy) < 2e-13
 *   for |ncp| <= 20 and < 2e-12 up to |ncp| = 40 (the log-gamma terms grow as ncp^2); t < 0 is a
 *   difference from 1, so tiny left-tail values have no relative accuracy.
 *   ncp = 0 is ufp4_t_cdf. NaN input or df <= 0 gives NaN.
 *
 * Power (two-sided level-alpha t test; as G*Power and R's power.t.test(type = "paired",
 * strict = TRUE)):
 * - ufp4_t_test_power(df, ncp, alpha) = P(|T| > t_{1-alpha/2, df}) for T ~ t(df, ncp): both tails
 *   count, so ncp = 0 gives alpha exactly (R's default strict = FALSE drops the far tail: 2.3e-7
 *   of power in its example n = 20, delta = 1).
 * - ufp4_paired_power(effect, sd, n, alpha): n pairs whose differences have mean `effect` and
 *   standard deviation sd: df = n - 1, ncp = sqrt(n) effect / sd.
 * - ufp4_paired_n: the smallest n >= 2 whose paired power reaches `power` (power is increasing
 *   in n); UFP4_EINVAL when an argument is out of range or n would exceed n_max.
 * - ufp4_paired_mdd(sd, n, alpha, power): the minimum detectable difference, the effect > 0 whose
 *   paired power with n pairs is exactly `power` (bisection on ncp to relative 1e-12); NaN for
 *   invalid arguments, n < 2 or power <= alpha.
 * Arguments: 0 < alpha < 1, alpha < power < 1, sd > 0, effect != 0 where a sample size is asked.
 *
 * Summary of n paired differences (ufp4_paired_summarize): mean, sample sd (divisor n - 1),
 * se = sd / sqrt(n), the two-sided t test of mean 0 (t, df = n - 1, p; as ufp4_paired_ttest in
 * ufp4/stats.h, sd = 0 gives t = 0, p = 1 when the mean is 0 and t = +-Inf, p = 0 otherwise), the
 * level confidence interval mean -+ t_{(1+level)/2, n-1} se, and the MDD at (alpha, power) for the
 * observed sd. n < 2, a non-finite d_i, level outside (0, 1) or invalid (alpha, power) is
 * UFP4_EINVAL. */
#ifndef UFP4_POWER_H
#define UFP4_POWER_H

#include <stddef.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

double ufp4_t_quantile(double p, double df);
double ufp4_nct_cdf(double t, double df, double ncp);

double ufp4_t_test_power(double df, double ncp, double alpha);
double ufp4_paired_power(double effect, double sd, size_t n, double alpha);
int ufp4_paired_n(double effect, double sd, double alpha, double power, size_t n_max, size_t *n);
double ufp4_paired_mdd(double sd, size_t n, double alpha, double power);

typedef struct {
  size_t n;                /* pairs */
  double mean, sd, se;     /* of the differences */
  double t, df, p;         /* two-sided test of mean 0 */
  double level, lo, hi;    /* confidence interval for the mean */
  double alpha, power;     /* the settings of the MDD */
  double mdd;              /* minimum detectable difference with this n and sd */
} ufp4_paired_summary;

int ufp4_paired_summarize(const double *d, size_t n, double level, double alpha, double power,
                          ufp4_paired_summary *out);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
