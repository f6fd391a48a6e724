/* Sentences and rows shared by report.md and report.html, so the two say the same thing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report_text.h"

void rpt_fmt(char *out, size_t size, double v, const char *fmt) {
  if (isnan(v)) snprintf(out, size, "n/a");
  else snprintf(out, size, fmt, v);
}

void rpt_fmt_msd(char *out, size_t size, ufp4_msd m, double scale, const char *fmt) {
  char a[64], s[64];
  rpt_fmt(a, sizeof a, m.mean * scale, fmt);
  if (isnan(m.std)) snprintf(out, size, "%s", a);
  else {
    snprintf(s, sizeof s, fmt, m.std * scale);
    snprintf(out, size, "%s ± %s", a, s[0] == '+' ? s + 1 : s);
  }
}

const char *rpt_metric_name(int metric) { return metric ? "signed gap" : "relative error"; }

const ufp4_report_test *rpt_control_test(const ufp4_report *r, int recipe, int metric) {
  const ufp4_report_test *found = NULL;
  for (size_t i = 0; i < r->n_tests; i++) {
    const ufp4_report_test *t = &r->tests[i];
    if (t->metric == metric && t->a == recipe && t->b == r->control_idx) found = t;
  }
  return found;
}

void rpt_test_sentence(const ufp4_report *r, const ufp4_report_test *t, char *out, size_t size) {
  const char *a = r->recipes[t->a].recipe, *b = r->recipes[t->b].recipe;
  const double scale = t->metric ? 1 : 100;
  const char *unit = t->metric ? "" : " percentage points";
  if (!t->valid) {
    snprintf(out, size, "%s vs %s (%s): no test possible (%zu common seed%s; a paired test needs 2)", a, b,
             rpt_metric_name(t->metric), t->t.n, t->t.n == 1 ? "" : "s");
    return;
  }
  char tt[32];
  if (isinf(t->t.t)) snprintf(tt, sizeof tt, "%s", t->t.t > 0 ? "+inf (no spread)" : "-inf (no spread)");
  else snprintf(tt, sizeof tt, "%.3f", t->t.t);
  snprintf(out, size, "%s vs %s (%s): mean difference %+.5g%s (%s minus %s), t = %s, df = %.0f, p = %.4g: %s", a, b,
           rpt_metric_name(t->metric), t->t.mean_diff * scale, unit, a, b, tt, t->t.df, t->t.p,
           t->significant ? "SIGNIFICANT (p < 0.05)" : "not significant (p >= 0.05)");
}

void rpt_recipe_cells(const ufp4_report *r, size_t i, rpt_cells *c) {
  const ufp4_report_recipe *q = &r->recipes[i];
  memset(c, 0, sizeof *c);
  snprintf(c->seeds, sizeof c->seeds, "%d", q->n_seeds);
  rpt_fmt_msd(c->train, sizeof c->train, q->final_train, 1, "%.5f");
  rpt_fmt_msd(c->val, sizeof c->val, q->final_val, 1, "%.5f");
  if (q->is_baseline) {
    snprintf(c->rel, sizeof c->rel, "(baseline)");
    snprintf(c->gap, sizeof c->gap, "-");
    snprintf(c->relgap, sizeof c->relgap, "-");
  } else {
    rpt_fmt_msd(c->rel, sizeof c->rel, q->rel_err, 100, "%.4f%%");
    rpt_fmt_msd(c->gap, sizeof c->gap, q->signed_gap, 1, "%+.5f");
    rpt_fmt_msd(c->relgap, sizeof c->relgap, q->rel_gap, 100, "%+.4f%%");
  }
  if (r->control_idx >= 0) rpt_fmt_msd(c->floor, sizeof c->floor, r->recipes[r->control_idx].rel_err, 100, "%.4f%%");
  else snprintf(c->floor, sizeof c->floor, "n/a");
  const ufp4_report_test *t = rpt_control_test(r, (int)i, 0);
  if (q->is_baseline) snprintf(c->sig, sizeof c->sig, "baseline");
  else if (q->is_control) snprintf(c->sig, sizeof c->sig, "control (noise floor)");
  else if (!t) snprintf(c->sig, sizeof c->sig, "no control run");
  else if (!t->valid) snprintf(c->sig, sizeof c->sig, "no test (%zu seed%s)", t->t.n, t->t.n == 1 ? "" : "s");
  else
    snprintf(c->sig, sizeof c->sig, "p = %.3g, %s", t->t.p,
             t->significant ? (t->t.mean_diff > 0 ? "above the floor" : "below the floor") : "not significant");
}

int rpt_max_seeds(const ufp4_report *r) {
  int m = 0;
  for (size_t i = 0; i < r->n_recipes; i++)
    if (r->recipes[i].n_seeds > m) m = r->recipes[i].n_seeds;
  return m;
}

void rpt_run_cells_fill(const ufp4_report_run_result *x, rpt_run_cells *c) {
  rpt_fmt(c->train, sizeof c->train, x->final_train, "%.5f");
  rpt_fmt(c->val, sizeof c->val, x->final_val, "%.5f");
  rpt_fmt(c->rel, sizeof c->rel, x->rel_err * 100, "%.4f%%");
  rpt_fmt(c->gap, sizeof c->gap, x->signed_gap, "%+.5f");
}
