/* The summary table printed by `ufp4 compare` and `ufp4 report` (see ufp4/report.h). */
#include <stdio.h>

#include "report/report_text.h"

void ufp4_report_print_table(const ufp4_report *r, FILE *f) {
  char floor_s[64] = "n/a";
  if (r->control_idx >= 0)
    rpt_fmt_msd(floor_s, sizeof floor_s, r->recipes[r->control_idx].rel_err, 100, "%.4f%%");
  fprintf(f, "%s  (window: last %d logged steps; baseline %s; noise floor = %s rel. err)\n",
          r->title, r->final_steps, r->baseline, r->control ? r->control : "none");
  fprintf(f, "%-24s %5s %10s %10s %24s %22s %20s  %s\n", "recipe", "seeds", "final train",
          "final val", "rel. err (mean ± std)", "signed gap", "noise floor",
          "vs noise floor (rel. err)");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const ufp4_report_recipe *q = &r->recipes[i];
    char tr[32], va[32], re[64], gap[64], sig[128];
    rpt_fmt(tr, sizeof tr, q->final_train.mean, "%.5f");
    rpt_fmt(va, sizeof va, q->final_val.mean, "%.5f");
    rpt_fmt_msd(re, sizeof re, q->rel_err, 100, "%.4f%%");
    rpt_fmt_msd(gap, sizeof gap, q->signed_gap, 1, "%+.5f");
    const ufp4_report_test *t = rpt_control_test(r, (int)i, 0);
    if (q->is_baseline)
      snprintf(sig, sizeof sig, "baseline");
    else if (q->is_control)
      snprintf(sig, sizeof sig, "control");
    else if (!t)
      snprintf(sig, sizeof sig, "no control");
    else if (!t->valid)
      snprintf(sig, sizeof sig, "no test (%zu common seed%s)", t->t.n, t->t.n == 1 ? "" : "s");
    else
      snprintf(sig, sizeof sig, "p=%.3g %s", t->t.p,
               t->significant ? "significant" : "not significant");
    fprintf(f, "%-24s %5d %10s %10s %24s %22s %20s  %s\n", q->recipe, q->n_seeds, tr, va,
            q->is_baseline ? "-" : re, q->is_baseline ? "-" : gap, floor_s, sig);
  }
}
