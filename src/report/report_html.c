/* report.html: one self-contained file (inline CSS, the SVG plots inlined, nothing fetched). */
#include <stdlib.h>
#include <string.h>

#include "report/report_load.h"
#include "report/report_text.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

void rpt_html_escape(ufp4_strbuf *b, const char *s) {
  char one[2] = {0, 0};
  for (; *s; s++) {
    switch (*s) {
    case '<': ufp4_strbuf_puts(b, "&lt;"); break;
    case '>': ufp4_strbuf_puts(b, "&gt;"); break;
    case '&': ufp4_strbuf_puts(b, "&amp;"); break;
    case '"': ufp4_strbuf_puts(b, "&quot;"); break;
    case '\'': ufp4_strbuf_puts(b, "&#39;"); break;
    default: one[0] = *s; ufp4_strbuf_puts(b, one);
    }
  }
}


static const char *css =
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:.92em}"
    "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f3f3f3}"
    "td.l,th.l{text-align:left}code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.6em;overflow-x:auto}"
    ".sig{color:#a00;font-weight:bold}.ns{color:#555}.plot{margin:1.5em 0}.plot svg{max-width:100%;height:auto}"
    ".note{color:#854}.verdict li{margin:.3em 0}td.cell{text-align:left;white-space:nowrap;font-size:.95em}"
    "td.cell.sig{background:#fbeaea}td.diag{text-align:center;color:#999}.small{color:#555;font-size:.9em}";

/* Inlines a gnuplot SVG: drops the XML prolog and the namespace declarations (an HTML parser
 * supplies them, and they are the only URLs in the file), and prefixes ids so that several plots
 * in one page do not share ids. */
static void inline_svg(ufp4_strbuf *b, const char *svg, size_t idx) {
  const char *p = strstr(svg, "<svg");
  if (!p) return;
  char pre[32];
  snprintf(pre, sizeof pre, "p%zu_", idx);
  static const char *const id_marks[] = {"id='", "id=\"", "href='#", "href=\"#", "url(#"};
  while (*p) {
    if (!strncmp(p, " xmlns", 6)) { /* skip ` xmlns[:x]="..."` */
      const char *q = p + 6;
      while (*q && *q != '=' && *q != '>') q++;
      if (*q == '=' && (q[1] == '"' || q[1] == '\'')) {
        const char *end = strchr(q + 2, q[1]);
        if (end) {
          p = end + 1;
          continue;
        }
      }
    }
    if (*p == '\n' && p[1] == 'x' && !strncmp(p + 1, "xmlns", 5)) { /* gnuplot puts them on their own line */
      p++;
      const char *q = strchr(p, '=');
      if (q && (q[1] == '"' || q[1] == '\'')) {
        const char *end = strchr(q + 2, q[1]);
        if (end) {
          p = end + 1;
          continue;
        }
      }
    }
    int hit = 0;
    for (size_t m = 0; m < sizeof id_marks / sizeof id_marks[0]; m++) {
      const size_t len = strlen(id_marks[m]);
      if (!strncmp(p, id_marks[m], len)) {
        char mark[16];
        snprintf(mark, sizeof mark, "%s", id_marks[m]);
        ufp4_strbuf_puts(b, mark);
        ufp4_strbuf_puts(b, pre);
        p += len;
        hit = 1;
        break;
      }
    }
    if (hit) continue;
    const char *next = p + 1;
    while (*next && *next != ' ' && *next != '\n' && *next != 'i' && *next != 'h' && *next != 'u') next++;
    ufp4_strbuf_printf(b, "%.*s", (int)(next - p), p);
    p = next;
  }
}

static void html_verdict_line(void *ctx, const char *sentence, int strong) {
  ufp4_strbuf *b = ctx;
  ufp4_strbuf_printf(b, "<li class=%s>", strong ? "sig" : "ns");
  rpt_html_escape(b, sentence);
  ufp4_strbuf_puts(b, "</li>\n");
}

/* The matrix of metric: rows minus columns, one cell per ordered pair. */
static void matrix_html(ufp4_strbuf *b, const ufp4_report *r, int metric) {
  char head[512];
  rpt_matrix_heading(r, metric, head, sizeof head);
  ufp4_strbuf_printf(b, "<h3>%s</h3>\n<p class=small>", metric ? "Signed gap" : "Relative error");
  rpt_html_escape(b, head);
  ufp4_strbuf_puts(b, ".</p>\n<table><tr><th class=l>row &minus; column</th>");
  for (size_t j = 0; j < r->n_recipes; j++) {
    if (!rpt_in_matrix(r, j)) continue;
    ufp4_strbuf_puts(b, "<th class=l><code>");
    rpt_html_escape(b, r->recipes[j].recipe);
    ufp4_strbuf_puts(b, "</code></th>");
  }
  ufp4_strbuf_puts(b, "</tr>\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    if (!rpt_in_matrix(r, i)) continue;
    ufp4_strbuf_puts(b, "<tr><th class=l><code>");
    rpt_html_escape(b, r->recipes[i].recipe);
    ufp4_strbuf_puts(b, "</code></th>");
    for (size_t j = 0; j < r->n_recipes; j++) {
      if (!rpt_in_matrix(r, j)) continue;
      const ufp4_report_pair *p = ufp4_report_find_pair(r, (int)i, (int)j, metric);
      if (!p) {
        ufp4_strbuf_puts(b, "<td class=diag>&mdash;</td>");
        continue;
      }
      rpt_pair_cells c;
      rpt_pair_cells_fill(r, p, &c);
      ufp4_strbuf_printf(b, "<td class=\"cell%s\"><b>%s</b> %s", p->significant ? " sig" : "", c.diff, c.ci);
      if (c.p[0]) ufp4_strbuf_printf(b, "<br>%s<br>%s", c.p, c.mdd);
      if (c.need[0]) ufp4_strbuf_printf(b, "<br>%s", c.need);
      ufp4_strbuf_puts(b, "</td>");
    }
    ufp4_strbuf_puts(b, "</tr>\n");
  }
  ufp4_strbuf_puts(b, "</table>\n");
}

/* Plot i inlined with its caption as a heading. */
static int plot_html(ufp4_strbuf *b, const char *plot_dir, const rpt_plot *plot, size_t i) {
  char svg_path[4400];
  snprintf(svg_path, sizeof svg_path, "%s/%s.svg", plot_dir, plot->name);
  char *svg;
  size_t size;
  int rc = ufp4_read_file(svg_path, 64u << 20, &svg, &size);
  if (rc) return rc;
  ufp4_strbuf_puts(b, "<div class=plot><h3>");
  rpt_html_escape(b, plot->caption);
  ufp4_strbuf_puts(b, "</h3>\n");
  inline_svg(b, svg, i);
  ufp4_strbuf_puts(b, "</div>\n");
  free(svg);
  return 0;
}

/* The report's opening: the verdict, the two matrices and the paired-gap plot. */
static int verdict_html(ufp4_strbuf *b, const ufp4_report *r, const char *plot_dir, const rpt_plot *plots,
                        size_t n_plots) {
  ufp4_strbuf_printf(b, "<h2>Verdict (paired across seeds, two-sided, significant at p &lt; %.2g)</h2>\n<ul class=verdict>\n",
                     UFP4_REPORT_ALPHA);
  rpt_verdict(r, html_verdict_line, b);
  ufp4_strbuf_puts(b, "</ul>\n");
  if (r->n_pairs) {
    ufp4_strbuf_puts(b, "<p class=small>Shaded cells are significant. MDD: the smallest true difference this run had an "
                        "80% chance to find significant, given the spread of the paired differences over its seeds.</p>\n");
    matrix_html(b, r, 0);
    matrix_html(b, r, 1);
  }
  int rc = 0, lead = 0;
  for (size_t i = 0; i < n_plots && !rc; i++)
    if (plots[i].lead) {
      rc = plot_html(b, plot_dir, &plots[i], i);
      lead = 1;
    }
  if (!lead) {
    char why[768];
    rpt_no_lead_plot(r, why, sizeof why);
    ufp4_strbuf_puts(b, "<p class=note>");
    rpt_html_escape(b, why);
    ufp4_strbuf_puts(b, "</p>\n");
  }
  return rc;
}

/* The per-projection tables of the recipes that have one (overrides or a schedule). */
static void projections_html(ufp4_strbuf *b, const ufp4_report *r) {
  int head = 0;
  for (size_t i = 0; i < r->n_recipes; i++) {
    char *t = rpt_recipe_projection_table(r, i);
    if (!t) continue;
    if (!head++) ufp4_strbuf_puts(b, "<h2>Recipes by projection (overrides and schedules)</h2>\n");
    ufp4_strbuf_puts(b, "<h3><code>");
    rpt_html_escape(b, r->recipes[i].recipe);
    ufp4_strbuf_puts(b, "</code></h3>\n<pre>");
    rpt_html_escape(b, t);
    ufp4_strbuf_puts(b, "</pre>\n");
    free(t);
  }
}

int rpt_write_html(const ufp4_report *r, const char *path, const char *plot_dir, const rpt_plot *plots, size_t n_plots) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
  rpt_html_escape(&b, r->title);
  ufp4_strbuf_printf(&b, "</title><style>%s</style></head><body>\n<h1>", css);
  rpt_html_escape(&b, r->title);
  ufp4_strbuf_puts(&b, "</h1>\n");
  int rc = verdict_html(&b, r, plot_dir, plots, n_plots);
  if (r->command[0]) {
    ufp4_strbuf_puts(&b, "<p>Command:</p><pre>");
    rpt_html_escape(&b, r->command);
    ufp4_strbuf_puts(&b, "</pre>\n");
  }
  if (r->commit[0]) {
    ufp4_strbuf_puts(&b, "<p>Binary: <code>");
    rpt_html_escape(&b, r->commit);
    ufp4_strbuf_puts(&b, "</code> (git commit of every run)</p>\n");
  }
  ufp4_strbuf_printf(&b, "<p>Metric: BF16-relative loss error = mean over the last %d logged steps of |L &minus; L<sub>", r->final_steps);
  rpt_html_escape(&b, r->baseline);
  ufp4_strbuf_puts(&b, "</sub>| / L<sub>");
  rpt_html_escape(&b, r->baseline);
  ufp4_strbuf_puts(&b, "</sub>, against the baseline run of the same seed. Signed gap = mean of (L &minus; L<sub>");
  rpt_html_escape(&b, r->baseline);
  ufp4_strbuf_puts(&b, "</sub>) over the same window. The control recipe <code>");
  rpt_html_escape(&b, r->control ? r->control : "(none)");
  ufp4_strbuf_puts(&b, "</code> is the noise floor.</p>\n<h2>Summary (mean &plusmn; sample std over seeds)</h2>\n<table><tr>"
               "<th class=l>recipe</th><th>seeds</th><th>final train</th><th>final val</th><th>rel. err</th>"
               "<th>signed gap</th><th>rel. signed gap</th><th>noise floor</th><th class=l>vs noise floor (rel. err)"
               "</th></tr>\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    rpt_cells c;
    rpt_recipe_cells(r, i, &c);
    ufp4_strbuf_puts(&b, "<tr><td class=l><code>");
    rpt_html_escape(&b, r->recipes[i].recipe);
    ufp4_strbuf_printf(&b, "</code></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td class=l>%s</td></tr>\n",
               c.seeds, c.train, c.val, c.rel, c.gap, c.relgap, c.floor, c.sig);
  }
  ufp4_strbuf_puts(&b, "</table>\n");
  projections_html(&b, r);
  ufp4_strbuf_puts(&b, "<h2>Runs</h2>\n<table><tr><th class=l>recipe</th><th>seed</th><th>steps logged</th><th>window</th>"
               "<th>final train</th><th>final val</th><th>rel. err</th><th>signed gap</th><th>diagnostics</th>"
               "<th class=l>folder</th></tr>\n");
  for (size_t i = 0; i < r->n_runs; i++) {
    const ufp4_report_run_result *x = &r->runs[i];
    rpt_run_cells c;
    rpt_run_cells_fill(x, &c);
    ufp4_strbuf_puts(&b, "<tr><td class=l><code>");
    rpt_html_escape(&b, x->recipe);
    ufp4_strbuf_printf(&b, "</code></td><td>%lld</td><td>%zu</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td>%s</td><td class=l>",
               x->seed, x->train.n, x->window, c.train, c.val, c.rel, c.gap, x->diag ? "yes" : "no");
    rpt_html_escape(&b, x->dir);
    ufp4_strbuf_puts(&b, "</td></tr>\n");
  }
  ufp4_strbuf_puts(&b, "</table>\n");
  if (r->n_notes) {
    ufp4_strbuf_puts(&b, "<h2>Notes</h2>\n<ul>\n");
    for (size_t i = 0; i < r->n_notes; i++) {
      ufp4_strbuf_puts(&b, "<li class=note>");
      rpt_html_escape(&b, r->notes[i]);
      ufp4_strbuf_puts(&b, "</li>\n");
    }
    ufp4_strbuf_puts(&b, "</ul>\n");
  }
  ufp4_strbuf_puts(&b, "<h2>Plots</h2>\n<p>");
  rpt_html_escape(&b, r->plot_note);
  ufp4_strbuf_puts(&b, ".</p>\n");
  for (size_t i = 0; i < n_plots && !rc; i++)
    if (!plots[i].lead) rc = plot_html(&b, plot_dir, &plots[i], i);
  ufp4_strbuf_puts(&b, "</body></html>\n");
  if (rc) {
    free(b.s);
    return rc;
  }
  return ufp4_strbuf_write(&b, path);
}
