/* Sentences, cells and rows shared by report.md, report.html and the printed table, so they say
 * the same thing. */
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

const ufp4_report_pair *rpt_control_test(const ufp4_report *r, int recipe, int metric) {
  return r->control_idx < 0 ? NULL : ufp4_report_find_pair(r, recipe, r->control_idx, metric);
}

const char *rpt_metric_unit(int metric) { return metric ? "nats" : "percentage points"; }

int rpt_in_matrix(const ufp4_report *r, size_t i) { return (int)i != r->baseline_idx; }

/* Display scale and number format of a metric: rel_err (a fraction) in percentage points. */
static double metric_scale(int metric) { return metric ? 1 : 100; }
static const char *metric_fmt(int metric) { return metric ? "%+.5f" : "%+.4f"; }

void rpt_matrix_heading(const ufp4_report *r, int metric, char *out, size_t size) {
  char name[600];
  if (metric) snprintf(name, sizeof name, "Signed gap L - L_%s", r->baseline);
  else snprintf(name, sizeof name, "Relative error");
  snprintf(out, size,
           "%s, row minus column (%s): mean paired difference over seeds [%.0f%% CI], two-sided "
           "paired-t p, and the MDD (the difference detectable at %.0f%% power, alpha %.2g)%s",
           name, rpt_metric_unit(metric),
           UFP4_REPORT_LEVEL * 100, UFP4_REPORT_POWER * 100, UFP4_REPORT_ALPHA,
           r->target_effect > 0 && !metric ? ", and the seeds the target effect needs" : "");
}

void rpt_pair_cells_fill(const ufp4_report *r, const ufp4_report_pair *p, rpt_pair_cells *c) {
  memset(c, 0, sizeof *c);
  const double k = metric_scale(p->metric);
  const char *f = metric_fmt(p->metric);
  rpt_fmt(c->diff, sizeof c->diff, p->mean * k, f);
  if (!p->valid) {
    if (p->n < 2)
      snprintf(c->ci, sizeof c->ci, "no CI: %zu common seed%s", p->n, p->n == 1 ? "" : "s");
    else
      snprintf(c->ci, sizeof c->ci, "no CI: non-finite differences");
    return;
  }
  snprintf(c->lo, sizeof c->lo, f, p->s.lo * k);
  snprintf(c->hi, sizeof c->hi, f, p->s.hi * k);
  snprintf(c->ci, sizeof c->ci, "[%s, %s]", c->lo, c->hi);
  snprintf(c->p, sizeof c->p, "p = %.3g", p->s.p);
  if (p->s.sd == 0) snprintf(c->mdd, sizeof c->mdd, "MDD 0 (no spread)");
  else {
    char m[32];
    rpt_fmt(m, sizeof m, p->s.mdd * k, p->metric ? "%.5f" : "%.4f");
    snprintf(c->mdd, sizeof c->mdd, "MDD %s", m);
  }
  if (p->need == UFP4_REPORT_NEED_OK)
    snprintf(c->need, sizeof c->need, "%zu seeds for %g pp", p->seeds_needed, r->target_effect);
  else if (p->need == UFP4_REPORT_NEED_TOO_MANY)
    snprintf(c->need, sizeof c->need, "> %d seeds for %g pp", UFP4_REPORT_MAX_SEEDS,
             r->target_effect);
  else if (p->need == UFP4_REPORT_NEED_NO_SPREAD)
    snprintf(c->need, sizeof c->need, "no spread: no seed count");
}

/* Smallest and largest of the values seen (NaN ones left out). */
typedef struct {
  double lo, hi;
  int any;
} range;
static void range_add(range *g, double v) {
  if (isnan(v)) return;
  if (!g->any || v < g->lo) g->lo = v;
  if (!g->any || v > g->hi) g->hi = v;
  g->any = 1;
}
static void range_text(const range *g, double scale, const char *fmt, char *out, size_t size) {
  char a[32], b[32];
  snprintf(a, sizeof a, fmt, g->lo * scale);
  snprintf(b, sizeof b, fmt, g->hi * scale);
  if (!strcmp(a, b)) snprintf(out, size, "%s", a);
  else snprintf(out, size, "%s to %s", a, b);
}

static void significant_sentence(const ufp4_report *r, const ufp4_report_pair *p, char *out,
                                 size_t size) {
  if (p->mean < 0) p = ufp4_report_find_pair(r, p->b, p->a, p->metric); /* say it as a > b */
  rpt_pair_cells c;
  rpt_pair_cells_fill(r, p, &c);
  snprintf(out, size, "%s has a %s than %s: %s %s [%.0f%% CI %s, %s], %s, %zu seeds.",
           r->recipes[p->a].recipe,
           p->metric ? "higher loss (signed gap to the baseline)" : "larger relative error",
           r->recipes[p->b].recipe, c.diff, p->metric ? "nats" : "pp", UFP4_REPORT_LEVEL * 100,
           c.lo, c.hi, c.p, p->n);
}

static void target_sentence(const ufp4_report *r, void (*emit)(void *, const char *, int),
                            void *ctx) {
  range g = {0, 0, 0};
  size_t too_many = 0, no_spread = 0;
  for (size_t i = 0; i < r->n_pairs; i++) {
    const ufp4_report_pair *p = &r->pairs[i];
    if (p->a > p->b) continue;
    if (p->need == UFP4_REPORT_NEED_OK) range_add(&g, (double)p->seeds_needed);
    too_many += p->need == UFP4_REPORT_NEED_TOO_MANY;
    no_spread += p->need == UFP4_REPORT_NEED_NO_SPREAD;
  }
  char s[768], n[80] = "", more[160] = "", flat[96] = "";
  if (g.any) range_text(&g, 1, "%.0f", n, sizeof n);
  if (too_many) snprintf(more, sizeof more, "; %zu pair%s more than %d", too_many, too_many == 1 ? " needs" : "s need",
                         UFP4_REPORT_MAX_SEEDS);
  if (no_spread) snprintf(flat, sizeof flat, "; %zu pair%s no spread, so no count", no_spread, no_spread == 1 ? " has" : "s have");
  snprintf(s, sizeof s,
           "Target effect %g pp of relative error: at %.0f%% power and alpha %.2g, %s%s%s%s%s (per pair in "
           "the relative-error matrix).",
           r->target_effect, UFP4_REPORT_POWER * 100, UFP4_REPORT_ALPHA,
           g.any ? "the spread each pair showed needs " : "no pair gives a seed count", n, g.any ? " seeds" : "", more,
           flat);
  emit(ctx, s, 0);
}

size_t rpt_verdict(const ufp4_report *r, void (*emit)(void *ctx, const char *sentence, int strong),
                   void *ctx) {
  char s[2048]; /* two recipe names of up to 511 bytes and the figures */
  if (!r->n_pairs) {
    emit(ctx, "There is no pair of non-baseline recipes to compare.", 0);
    return 0;
  }
  size_t n_valid = 0, n_sig = 0;
  range seeds = {0, 0, 0}, mdd[2] = {{0, 0, 0}, {0, 0, 0}};
  for (int metric = 0; metric < 2; metric++)
    for (size_t i = 0; i < r->n_pairs; i++) {
      const ufp4_report_pair *p = &r->pairs[i];
      if (p->metric != metric || p->a > p->b || !p->valid) continue; /* each unordered pair once */
      n_valid++;
      range_add(&seeds, (double)p->n);
      range_add(&mdd[metric], p->s.mdd);
      if (!p->significant) continue;
      significant_sentence(r, p, s, sizeof s);
      emit(ctx, s, 1);
      n_sig++;
    }
  if (!n_valid) {
    emit(ctx,
         rpt_max_seeds(r) < 2
             ? "Only one seed per recipe: no significance test is possible, and no confidence "
               "interval or detectable difference can be given. Run at least 2 seeds."
             : "No pair of recipes has 2 seeds in common: no significance test is possible.",
         0);
    return 0;
  }
  char ns[80], m0[80] = "n/a", m1[80] = "n/a";
  range_text(&seeds, 1, "%.0f", ns, sizeof ns);
  if (mdd[0].any) range_text(&mdd[0], 100, "%.4f", m0, sizeof m0);
  if (mdd[1].any) range_text(&mdd[1], 1, "%.5f", m1, sizeof m1);
  if (!n_sig)
    snprintf(s, sizeof s,
             "No pair of recipes differs significantly (p < %.2g) on either metric, with %s seeds. "
             "At %.0f%% power this run could detect differences of %s pp of relative error and "
             "%s nats of signed gap (the MDD of each pair); smaller true differences are not "
             "resolved.",
             UFP4_REPORT_ALPHA, ns, UFP4_REPORT_POWER * 100, m0, m1);
  else
    snprintf(s, sizeof s,
             "%zu other comparison%s not significant (p >= %.2g); the MDDs in the matrices "
             "(%s pp of relative error, %s nats of signed gap) are the smallest differences this "
             "run could have detected at %.0f%% power.",
             n_valid - n_sig, n_valid - n_sig == 1 ? " is" : "s are", UFP4_REPORT_ALPHA, m0, m1,
             UFP4_REPORT_POWER * 100);
  if (!n_sig || n_valid > n_sig) emit(ctx, s, 0);
  if (r->target_effect > 0) target_sentence(r, emit, ctx);
  return n_sig;
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
  const ufp4_report_pair *t = rpt_control_test(r, (int)i, 0);
  if (q->is_baseline) snprintf(c->sig, sizeof c->sig, "baseline");
  else if (q->is_control) snprintf(c->sig, sizeof c->sig, "control (noise floor)");
  else if (!t) snprintf(c->sig, sizeof c->sig, "no control run");
  else if (!t->valid) snprintf(c->sig, sizeof c->sig, "no test (%zu seed%s)", t->n, t->n == 1 ? "" : "s");
  else
    snprintf(c->sig, sizeof c->sig, "p = %.3g, %s", t->s.p,
             t->significant ? (t->mean > 0 ? "above the floor" : "below the floor") : "not significant");
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

void rpt_no_lead_plot(const ufp4_report *r, char *out, size_t size) {
  if (!r->plotted)
    snprintf(out, size, "No paired-gap plot: %s.", r->plot_note);
  else
    snprintf(out, size, "No paired-gap plot: no run shares a logged step with the %s run of its "
             "seed, or gnuplot failed on it (see Plots).", r->baseline);
}
