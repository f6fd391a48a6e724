/* Evaluator for tests/test_power_scipy.py: reads one call per line from stdin and prints its
 * result as %.17g (a sample size as an integer, -1 when it fails), so that Python can compare the
 * C functions of ufp4/power.h with scipy.stats without a shared library. Lines:
 *   tq P DF            ufp4_t_quantile        tcdf T DF          ufp4_t_cdf
 *   nct T DF NCP       ufp4_nct_cdf           power DF NCP A     ufp4_t_test_power
 *   n EFFECT SD A POW  ufp4_paired_n          mdd SD N A POW     ufp4_paired_mdd */
#include <stdio.h>
#include <string.h>

#include "ufp4/power.h"
#include "ufp4/stats.h"

int main(void) {
  char line[512], op[16];
  double a, b, c, e;
  while (fgets(line, sizeof line, stdin)) {
    const int got = sscanf(line, "%15s %lf %lf %lf %lf", op, &a, &b, &c, &e);
    if (got >= 3 && !strcmp(op, "tq")) {
      printf("%.17g\n", ufp4_t_quantile(a, b));
    } else if (got >= 3 && !strcmp(op, "tcdf")) {
      printf("%.17g\n", ufp4_t_cdf(a, b));
    } else if (got >= 4 && !strcmp(op, "nct")) {
      printf("%.17g\n", ufp4_nct_cdf(a, b, c));
    } else if (got >= 4 && !strcmp(op, "power")) {
      printf("%.17g\n", ufp4_t_test_power(a, b, c));
    } else if (got >= 5 && !strcmp(op, "n")) {
      size_t n = 0;
      const int st = ufp4_paired_n(a, b, c, e, 1000000, &n);
      printf("%lld\n", st ? -1LL : (long long)n);
    } else if (got >= 5 && !strcmp(op, "mdd")) {
      printf("%.17g\n", ufp4_paired_mdd(a, (size_t)b, c, e));
    } else {
      fprintf(stderr, "power_eval: cannot read the line '%s'\n", strtok(line, "\n"));
      return 2;
    }
  }
  return 0;
}
