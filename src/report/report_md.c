/* report.md */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report/report_load.h"
#include "report/report_text.h"

/* Table cells cannot hold '|'. */
static void md_cell(ufp4_strbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '|') ufp4_strbuf_puts(b, "\\|");
    else {
      char one[2] = {*s, 0};
      ufp4_strbuf_puts(b, one);
    }
  }
}

static void md_verdict_line(void *ctx, const char *sentence, int strong) {
  ufp4_strbuf *b = ctx;
  ufp4_strbuf_puts(b, strong ? "- **" : "- ");
  md_cell(b, sentence);
  ufp4_strbuf_puts(b, strong ? "**\n" : "\n");
}

/* The matrix of metric: rows minus columns, one cell per ordered pair. */
static void matrix_md(ufp4_strbuf *b, const ufp4_report *r, int metric) {
  char head[512];
  rpt_matrix_heading(r, metric, head, sizeof head);
  ufp4_strbuf_printf(b, "\n### %s\n\n%s.\n\n| row − column |", metric ? "Signed gap" : "Relative error", head);
  for (size_t j = 0; j < r->n_recipes; j++) {
    if (!rpt_in_matrix(r, j)) continue;
    ufp4_strbuf_puts(b, " `");
    md_cell(b, r->recipes[j].recipe);
    ufp4_strbuf_puts(b, "` |");
  }
  ufp4_strbuf_puts(b, "\n|---|");
  for (size_t j = 0; j < r->n_recipes; j++)
    if (rpt_in_matrix(r, j)) ufp4_strbuf_puts(b, "---|");
  for (size_t i = 0; i < r->n_recipes; i++) {
    if (!rpt_in_matrix(r, i)) continue;
    ufp4_strbuf_puts(b, "\n| `");
    md_cell(b, r->recipes[i].recipe);
    ufp4_strbuf_puts(b, "` |");
    for (size_t j = 0; j < r->n_recipes; j++) {
      if (!rpt_in_matrix(r, j)) continue;
      const ufp4_report_pair *p = ufp4_report_find_pair(r, (int)i, (int)j, metric);
      if (!p) {
        ufp4_strbuf_puts(b, " — |");
        continue;
      }
      rpt_pair_cells c;
      rpt_pair_cells_fill(r, p, &c);
      const char *em = p->significant ? "**" : "";
      ufp4_strbuf_printf(b, " %s%s%s %s", em, c.diff, em, c.ci);
      if (c.p[0]) ufp4_strbuf_printf(b, "; %s; %s", c.p, c.mdd);
      if (c.need[0]) ufp4_strbuf_printf(b, "; %s", c.need);
      ufp4_strbuf_puts(b, " |");
    }
  }
  ufp4_strbuf_puts(b, "\n");
}

/* The report's opening: the verdict, the two matrices and the paired-gap plot. */
static void verdict_md(ufp4_strbuf *b, const ufp4_report *r, const rpt_plot *plots, size_t n_plots) {
  ufp4_strbuf_printf(b, "## Verdict (paired across seeds, two-sided, significant at p < %.2g)\n\n", UFP4_REPORT_ALPHA);
  rpt_verdict(r, md_verdict_line, b);
  if (r->n_pairs) {
    ufp4_strbuf_puts(b, "\nSignificant cells are in bold. MDD: the smallest true difference this run had an 80% chance "
                        "to find significant, given the spread of the paired differences over its seeds.\n");
    matrix_md(b, r, 0);
    matrix_md(b, r, 1);
  }
  int lead = 0;
  for (size_t i = 0; i < n_plots; i++)
    if (plots[i].lead) {
      ufp4_strbuf_printf(b, "\n### %s\n\n![%s](plots/%s.svg)\n", plots[i].caption, plots[i].caption, plots[i].name);
      lead = 1;
    }
  if (!lead) {
    char why[768];
    rpt_no_lead_plot(r, why, sizeof why);
    ufp4_strbuf_printf(b, "\n%s\n", why);
  }
  ufp4_strbuf_puts(b, "\n");
}

/* The per-projection tables of the recipes that have one (overrides or a schedule). */
static void projections_md(ufp4_strbuf *b, const ufp4_report *r) {
  int head = 0;
  for (size_t i = 0; i < r->n_recipes; i++) {
    char *t = rpt_recipe_projection_table(r, i);
    if (!t) continue;
    if (!head++) ufp4_strbuf_puts(b, "\n## Recipes by projection (overrides and schedules)\n");
    ufp4_strbuf_puts(b, "\n`");
    md_cell(b, r->recipes[i].recipe);
    ufp4_strbuf_printf(b, "`:\n\n```\n%s```\n", t);
    free(t);
  }
}

int rpt_write_md(const ufp4_report *r, const char *path, const rpt_plot *plots, size_t n_plots) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_printf(&b, "# %s\n\n", r->title);
  verdict_md(&b, r, plots, n_plots);
  if (r->command[0]) ufp4_strbuf_printf(&b, "Command:\n\n```\n%s\n```\n\n", r->command);
  if (r->commit[0]) ufp4_strbuf_printf(&b, "Binary: `%s` (git commit of every run)\n\n", r->commit);
  ufp4_strbuf_printf(&b,
             "Metric: BF16-relative loss error = mean over the last %d logged steps of |L - L_%s| / L_%s, with "
             "L_%s the %s run of the same seed. Signed gap = mean of (L - L_%s) over the same window. The control "
             "recipe `%s` against `%s` is the noise floor.\n\n",
             r->final_steps, r->baseline, r->baseline, r->baseline, r->baseline, r->baseline,
             r->control ? r->control : "(none)", r->baseline);
  ufp4_strbuf_puts(&b, "## Summary (mean ± sample std over seeds)\n\n"
               "| recipe | seeds | final train | final val | rel. err | signed gap | rel. signed gap | noise floor | "
               "vs noise floor (rel. err) |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    rpt_cells c;
    rpt_recipe_cells(r, i, &c);
    ufp4_strbuf_puts(&b, "| `");
    md_cell(&b, r->recipes[i].recipe);
    ufp4_strbuf_printf(&b, "` | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.seeds, c.train, c.val, c.rel, c.gap, c.relgap,
               c.floor, c.sig);
  }
  projections_md(&b, r);
  ufp4_strbuf_puts(&b, "\n## Runs\n\n| recipe | seed | steps logged | window | final train | final val | rel. err | signed gap "
               "| diagnostics | folder |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (size_t i = 0; i < r->n_runs; i++) {
    const ufp4_report_run_result *x = &r->runs[i];
    rpt_run_cells c;
    rpt_run_cells_fill(x, &c);
    ufp4_strbuf_puts(&b, "| `");
    md_cell(&b, x->recipe);
    ufp4_strbuf_printf(&b, "` | %lld | %zu | %d | %s | %s | %s | %s | %s | ", x->seed, x->train.n, x->window, c.train, c.val, c.rel, c.gap,
               x->diag ? "yes" : "no");
    md_cell(&b, x->dir);
    ufp4_strbuf_puts(&b, " |\n");
  }
  if (r->n_notes) {
    ufp4_strbuf_puts(&b, "\n## Notes\n\n");
    for (size_t i = 0; i < r->n_notes; i++) ufp4_strbuf_printf(&b, "- %s\n", r->notes[i]);
  }
  ufp4_strbuf_printf(&b, "\n## Plots\n\n%s.\n\n", r->plot_note);
  for (size_t i = 0; i < n_plots; i++)
    if (!plots[i].lead)
      ufp4_strbuf_printf(&b, "### %s\n\n![%s](plots/%s.svg)\n\n", plots[i].caption, plots[i].caption, plots[i].name);
  return ufp4_strbuf_write(&b, path);
}
