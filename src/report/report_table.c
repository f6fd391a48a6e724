/* What `ufp4 compare` and `ufp4 report` print (see ufp4/report.h): the summary table, the verdict
 * and the two pair matrices, compactly. */
#include <stdio.h>
#include <string.h>

#include "report/report_text.h"

static void summary(const ufp4_report *r, FILE *f) {
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
    const ufp4_report_pair *t = rpt_control_test(r, (int)i, 0);
    if (q->is_baseline)
      snprintf(sig, sizeof sig, "baseline");
    else if (q->is_control)
      snprintf(sig, sizeof sig, "control");
    else if (!t)
      snprintf(sig, sizeof sig, "no control");
    else if (!t->valid)
      snprintf(sig, sizeof sig, "no test (%zu common seed%s)", t->n, t->n == 1 ? "" : "s");
    else
      snprintf(sig, sizeof sig, "p=%.3g %s", t->s.p,
               t->significant ? "significant" : "not significant");
    fprintf(f, "%-24s %5d %10s %10s %24s %22s %20s  %s\n", q->recipe, q->n_seeds, tr, va,
            q->is_baseline ? "-" : re, q->is_baseline ? "-" : gap, floor_s, sig);
  }
}

/* One compact cell: "+d±h p=P mdd=M[ n=N]" (h the CI half-width), or "+d (1 seed)". */
static void cell(const ufp4_report *r, const ufp4_report_pair *p, char *out, size_t size) {
  if (!p) {
    snprintf(out, size, ".");
    return;
  }
  const double k = p->metric ? 1 : 100;
  const char *f = p->metric ? "%.5f" : "%.4f";
  rpt_pair_cells c;
  rpt_pair_cells_fill(r, p, &c);
  if (!p->valid) {
    snprintf(out, size, "%s (%zu seed%s)", c.diff, p->n, p->n == 1 ? "" : "s");
    return;
  }
  char half[32], mdd[32], need[48] = "";
  rpt_fmt(half, sizeof half, (p->s.hi - p->s.lo) / 2 * k, f);
  rpt_fmt(mdd, sizeof mdd, p->s.mdd * k, f);
  if (p->need == UFP4_REPORT_NEED_OK) snprintf(need, sizeof need, " n=%zu", p->seeds_needed);
  else if (p->need == UFP4_REPORT_NEED_TOO_MANY) snprintf(need, sizeof need, " n>%d", UFP4_REPORT_MAX_SEEDS);
  snprintf(out, size, "%s±%s p=%.2g mdd=%s%s", c.diff, half, p->s.p, mdd, need);
}

/* Columns on screen: UTF-8 continuation bytes (of the "±") take none. */
static size_t width(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void padded(FILE *f, const char *s, size_t w) {
  fprintf(f, "  %s%*s", s, (int)(w - width(s)), "");
}

static void matrix(const ufp4_report *r, int metric, FILE *f) {
  char head[512], s[160];
  rpt_matrix_heading(r, metric, head, sizeof head);
  fprintf(f, "\n%s%s:\n", head, r->target_effect > 0 && !metric ? " (n=)" : "");
  size_t w = 4, name_w = 4;
  for (size_t i = 0; i < r->n_recipes; i++) {
    if (!rpt_in_matrix(r, i)) continue;
    const size_t len = strlen(r->recipes[i].recipe);
    if (len > name_w) name_w = len < 40 ? len : 40;
    for (size_t j = 0; j < r->n_recipes; j++) {
      cell(r, ufp4_report_find_pair(r, (int)i, (int)j, metric), s, sizeof s);
      if (width(s) > w) w = width(s);
    }
  }
  fprintf(f, "%*s", (int)name_w + 6, "");
  for (size_t j = 0; j < r->n_recipes; j++) {
    if (!rpt_in_matrix(r, j)) continue;
    snprintf(s, sizeof s, "[%zu]", j);
    padded(f, s, w);
  }
  fputc('\n', f);
  for (size_t i = 0; i < r->n_recipes; i++) {
    if (!rpt_in_matrix(r, i)) continue;
    snprintf(s, sizeof s, "[%zu]", i);
    fprintf(f, "%-5s %-*.*s", s, (int)name_w, (int)name_w, r->recipes[i].recipe);
    for (size_t j = 0; j < r->n_recipes; j++) {
      if (!rpt_in_matrix(r, j)) continue;
      cell(r, ufp4_report_find_pair(r, (int)i, (int)j, metric), s, sizeof s);
      padded(f, s, w);
    }
    fputc('\n', f);
  }
}

static void emit_line(void *ctx, const char *sentence, int strong) {
  fprintf((FILE *)ctx, "%s %s\n", strong ? "  *" : "   ", sentence);
}

void ufp4_report_print_table(const ufp4_report *r, FILE *f) {
  summary(r, f);
  fprintf(f, "\nVerdict (paired across seeds, two-sided, significant at p < %.2g):\n",
          UFP4_REPORT_ALPHA);
  rpt_verdict(r, emit_line, f);
  if (!r->n_pairs) return;
  matrix(r, 0, f);
  matrix(r, 1, f);
}
