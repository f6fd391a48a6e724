/* report.md */
#include <math.h>
#include <stdio.h>

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

static void tests_md(ufp4_strbuf *b, const ufp4_report *r) {
  ufp4_strbuf_puts(b, "\n## Significance (paired t-test across seeds, two-sided, significant only at p < 0.05)\n\n");
  if (rpt_max_seeds(r) < 2) {
    ufp4_strbuf_puts(b, "Only one seed per recipe: **no significance test is possible**, so none of the differences "
                "above can be told apart from seed noise.\n");
    return;
  }
  if (!r->n_tests) {
    ufp4_strbuf_puts(b, "There is no pair of non-baseline recipes to test.\n");
    return;
  }
  char s[1024];
  static const char *const head[] = {"Significant", "Not significant", "No test possible"};
  for (int g = 0; g < 3; g++) {
    int any = 0;
    for (size_t i = 0; i < r->n_tests; i++) {
      const ufp4_report_test *t = &r->tests[i];
      const int group = !t->valid ? 2 : t->significant ? 0 : 1;
      if (group != g) continue;
      if (!any) ufp4_strbuf_printf(b, "**%s:**\n\n", head[g]);
      any = 1;
      rpt_test_sentence(r, t, s, sizeof s);
      ufp4_strbuf_printf(b, "- %s\n", s);
    }
    if (!any) ufp4_strbuf_printf(b, "**%s:** none.\n", head[g]);
    ufp4_strbuf_puts(b, "\n");
  }
}

int rpt_write_md(const ufp4_report *r, const char *path, const rpt_plot *plots, size_t n_plots) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_printf(&b, "# %s\n\n", r->title);
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
  tests_md(&b, r);
  ufp4_strbuf_puts(&b, "## Runs\n\n| recipe | seed | steps logged | window | final train | final val | rel. err | signed gap "
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
    ufp4_strbuf_printf(&b, "### %s\n\n![%s](plots/%s.svg)\n\n", plots[i].caption, plots[i].caption, plots[i].name);
  return ufp4_strbuf_write(&b, path);
}
