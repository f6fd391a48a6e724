/* Shared by the report writers (report*.c, plots.c); not a public API. */
#ifndef UFP4_REPORT_INTERNAL_H
#define UFP4_REPORT_INTERNAL_H

#include <stddef.h>

#include "core/strbuf.h"
#include "ufp4/report.h"

enum { RPT_N_OPERANDS = 6, RPT_N_GEMMS = 3 };
extern const char *const rpt_operands[RPT_N_OPERANDS]; /* "fprop.x" ... "wgrad.x" */
extern const char *const rpt_gemms[RPT_N_GEMMS];       /* "fprop", "dgrad", "wgrad" */

typedef struct {
  int layer, kind; /* kind: operand or GEMM index; unused for drift */
  double v1, v2;   /* operand: alpha, sqnr_db; GEMM: out_sqnr_db; drift: norm_ratio, cosine */
} rpt_diag_point;

typedef struct {
  int step; /* only the points of the last step seen are kept */
  rpt_diag_point *p;
  size_t n, cap;
} rpt_diag_set;

struct ufp4_report_diag {
  rpt_diag_set op, gemm, drift;
  int max_layer;
};

/* Parses RUN/diagnostics.jsonl into *out (NULL when the file does not exist). */
int rpt_diag_load(const char *dir, struct ufp4_report_diag **out);
void rpt_diag_free(struct ufp4_report_diag *d);

/* HTML-escapes s (< > & " ') into b. */
void rpt_html_escape(ufp4_strbuf *b, const char *s);

/* Number formatting shared by md, html and the table ("n/a" for NaN). */
void rpt_fmt(char *out, size_t size, double v, const char *fmt);
void rpt_fmt_msd(char *out, size_t size, ufp4_msd m, double scale, const char *fmt);
const char *rpt_metric_name(int metric);

/* Seed-mean curves of recipe r: train loss, val loss, relative error vs the baseline (percent),
 * and the paired gap L - L_base (each seed's gap to the baseline run of its seed at the steps
 * both logged, smoothed per seed by rpt_smooth over max(1, n/20) of its n points; v the mean
 * over the seeds that have the step, lo..hi their min..max). Arrays are malloc'ed; n = 0 when
 * there is nothing; lo and hi are NULL but for the gap. */
typedef struct {
  int *step;
  double *v, *lo, *hi;
  size_t n;
} rpt_curve;
int rpt_curve_train(const ufp4_report *r, size_t recipe, rpt_curve *c);
int rpt_curve_val(const ufp4_report *r, size_t recipe, rpt_curve *c);
int rpt_curve_relerr(const ufp4_report *r, size_t recipe, rpt_curve *c);
int rpt_curve_gap(const ufp4_report *r, size_t recipe, rpt_curve *c);
void rpt_curve_free(rpt_curve *c);
/* Trailing moving average over w points. */
void rpt_smooth(const double *v, size_t n, size_t w, double *out);

/* Plots: writes plots/ and fills r->plotted, r->plot_note. names receives the plot base names
 * that exist (svg and png), in display order. A lead plot (the paired gap) is shown with the
 * verdict, the others under Plots. */
typedef struct {
  char name[64];
  char caption[256];
  int lead;
} rpt_plot;
int rpt_make_plots(ufp4_report *r, const char *out_dir, rpt_plot *plots, size_t max, size_t *n_plots);

int rpt_write_json(const ufp4_report *r, const char *path);
int rpt_write_md(const ufp4_report *r, const char *path, const rpt_plot *plots, size_t n_plots);
int rpt_write_html(const ufp4_report *r, const char *path, const char *plot_dir, const rpt_plot *plots, size_t n_plots);

#endif
