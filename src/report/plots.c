/* Seed-mean curves and the gnuplot plots of the report: data (.dat) and scripts (.gp) always,
 * SVG and PNG when gnuplot runs. Each script renders the same body twice (svg, then pngcairo). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/report_internal.h"
#include "ufp4/plot.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

void rpt_curve_free(rpt_curve *c) {
  free(c->step);
  free(c->v);
  free(c->lo);
  free(c->hi);
  *c = (rpt_curve){0};
}

void rpt_smooth(const double *v, size_t n, size_t w, double *out) {
  if (w < 1) w = 1;
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    s += v[i];
    if (i >= w) s -= v[i - w];
    out[i] = s / (double)(i + 1 < w ? i + 1 : w);
  }
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Mean at each step over the series that have that step; with range, also their min and max. */
static int mean_curve(const ufp4_series *s, size_t ns, int range, rpt_curve *c) {
  *c = (rpt_curve){0};
  size_t total = 0;
  for (size_t i = 0; i < ns; i++) total += s[i].n;
  if (!total) return 0;
  c->step = malloc(total * sizeof *c->step);
  c->v = malloc(total * sizeof *c->v);
  if (range) {
    c->lo = malloc(total * sizeof *c->lo);
    c->hi = malloc(total * sizeof *c->hi);
  }
  if (!c->step || !c->v || (range && (!c->lo || !c->hi))) {
    rpt_curve_free(c);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  size_t k = 0;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < s[i].n; j++) c->step[k++] = s[i].step[j];
  qsort(c->step, total, sizeof *c->step, cmp_int);
  size_t u = 0;
  for (size_t i = 0; i < total; i++)
    if (!u || c->step[u - 1] != c->step[i]) c->step[u++] = c->step[i];
  c->n = u;
  for (size_t i = 0; i < u; i++) {
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    int cnt = 0;
    for (size_t q = 0; q < ns; q++) {
      const int *hit = bsearch(&c->step[i], s[q].step, s[q].n, sizeof(int), cmp_int);
      if (!hit) continue;
      const double v = s[q].value[hit - s[q].step];
      sum += v, cnt++;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    c->v[i] = sum / cnt;
    if (range) c->lo[i] = lo, c->hi[i] = hi;
  }
  return 0;
}

static int recipe_curve(const ufp4_report *r, size_t recipe, int val, rpt_curve *c) {
  ufp4_series s[r->n_runs ? r->n_runs : 1];
  size_t ns = 0;
  for (size_t i = 0; i < r->n_runs; i++)
    if (!strcmp(r->runs[i].recipe, r->recipes[recipe].recipe)) s[ns++] = val ? r->runs[i].val : r->runs[i].train;
  return mean_curve(s, ns, 0, c);
}

int rpt_curve_train(const ufp4_report *r, size_t recipe, rpt_curve *c) { return recipe_curve(r, recipe, 0, c); }
int rpt_curve_val(const ufp4_report *r, size_t recipe, rpt_curve *c) { return recipe_curve(r, recipe, 1, c); }

/* The run of the baseline recipe with x's seed, or NULL. */
static const ufp4_report_run_result *base_of(const ufp4_report *r, const ufp4_report_run_result *x) {
  for (size_t k = 0; k < r->n_runs; k++)
    if (r->runs[k].seed == x->seed && !strcmp(r->runs[k].recipe, r->baseline)) return &r->runs[k];
  return NULL;
}

/* x against b at the steps both logged: 100 |x - b| / b (gap = 0) or x - b (gap = 1), the latter
 * smoothed over max(1, n/20) points. o->step and o->value are malloc'ed. */
static int paired_series(const ufp4_series *x, const ufp4_series *b, int gap, ufp4_series *o) {
  o->step = malloc((x->n + 1) * sizeof *o->step);
  o->value = malloc((x->n + 1) * sizeof *o->value);
  if (!o->step || !o->value) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  for (size_t p = 0, q = 0; p < x->n && q < b->n;) {
    if (x->step[p] < b->step[q]) p++;
    else if (x->step[p] > b->step[q]) q++;
    else {
      const double d = x->value[p] - b->value[q];
      o->step[o->n] = x->step[p];
      o->value[o->n++] = gap ? d : 100 * fabs(d) / b->value[q];
      p++, q++;
    }
  }
  if (!gap || !o->n) return 0;
  double *sm = malloc(o->n * sizeof *sm);
  if (!sm) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  rpt_smooth(o->value, o->n, o->n / 20 > 1 ? o->n / 20 : 1, sm);
  memcpy(o->value, sm, o->n * sizeof *sm);
  free(sm);
  return 0;
}

/* Recipe's paired series over its seeds, then their mean (and, for the gap, min..max). */
static int paired_curve(const ufp4_report *r, size_t recipe, int gap, rpt_curve *c) {
  *c = (rpt_curve){0};
  const size_t R = r->n_runs;
  ufp4_series *s = calloc(R + 1, sizeof *s);
  if (!s) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  size_t ns = 0;
  int rc = 0;
  for (size_t i = 0; i < R && !rc; i++) {
    const ufp4_report_run_result *x = &r->runs[i], *b;
    if (strcmp(x->recipe, r->recipes[recipe].recipe) || !strcmp(x->recipe, r->baseline)) continue;
    if ((b = base_of(r, x))) rc = paired_series(&x->train, &b->train, gap, &s[ns++]);
  }
  if (!rc) rc = mean_curve(s, ns, gap, c);
  for (size_t i = 0; i < ns; i++) free(s[i].step), free(s[i].value);
  free(s);
  return rc;
}

int rpt_curve_relerr(const ufp4_report *r, size_t recipe, rpt_curve *c) { return paired_curve(r, recipe, 0, c); }
int rpt_curve_gap(const ufp4_report *r, size_t recipe, rpt_curve *c) { return paired_curve(r, recipe, 1, c); }

/* ---- gnuplot ---- */

static const char *gnuplot_bin(void) {
  const char *g = getenv("UFP4_GNUPLOT");
  return g && g[0] ? g : "gnuplot";
}

/* Runs `gnuplot arg` in dir with output appended to dir/gnuplot.log; returns its exit status
 * (127 when it cannot be started). */
static int run_gnuplot(const char *dir, const char *arg) {
  pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(127);
    int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execlp(gnuplot_bin(), gnuplot_bin(), arg, (char *)NULL);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void gp_quote(ufp4_strbuf *b, const char *s) {
  ufp4_strbuf_puts(b, "'");
  char one[2] = {0, 0};
  for (; *s; s++) {
    if (*s == '\'') ufp4_strbuf_puts(b, "''");
    else if (*s == '\n') ufp4_strbuf_puts(b, " ");
    else one[0] = *s, ufp4_strbuf_puts(b, one);
  }
  ufp4_strbuf_puts(b, "'");
}

static int write_script(const char *plot_dir, const char *name, const char *body, int w, int h) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_printf(&b, "# %s: `gnuplot %s.gp` in this folder writes %s.svg and %s.png\n", name, name, name, name);
  ufp4_strbuf_printf(&b, "set terminal svg size %d,%d noenhanced font 'sans,12' background rgb 'white'\nset output '%s.svg'\n",
             w, h, name);
  ufp4_strbuf_puts(&b, body);
  ufp4_strbuf_printf(&b, "set terminal pngcairo size %d,%d noenhanced font 'sans,10' background rgb 'white'\nset output '%s.png'\n",
             w, h, name);
  ufp4_strbuf_puts(&b, body);
  ufp4_strbuf_puts(&b, "set output\n");
  char path[4300];
  snprintf(path, sizeof path, "%s/%s.gp", plot_dir, name);
  return ufp4_strbuf_write(&b, path);
}

static const char *common_settings =
    "reset\nset datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset key outside right top\n"
    "set style data lines\n";

/* Curve data: step, value, smoothed value. */
static int write_curve(const char *plot_dir, const char *file, const rpt_curve *c) {
  ufp4_strbuf b = {0};
  double *sm = malloc((c->n + 1) * sizeof *sm);
  if (!sm) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  rpt_smooth(c->v, c->n, c->n / 20 > 1 ? c->n / 20 : 1, sm);
  ufp4_strbuf_printf(&b, "# step value smoothed(trailing mean of %zu points)\n", c->n / 20 > 1 ? c->n / 20 : (size_t)1);
  for (size_t i = 0; i < c->n; i++) ufp4_strbuf_printf(&b, "%d %.9g %.9g\n", c->step[i], c->v[i], sm[i]);
  free(sm);
  char path[4300];
  snprintf(path, sizeof path, "%s/%s", plot_dir, file);
  return ufp4_strbuf_write(&b, path);
}

static void add_plot(rpt_plot *plots, size_t max, size_t *n, const char *name, const char *caption) {
  if (*n >= max) return;
  snprintf(plots[*n].name, sizeof plots[*n].name, "%s", name);
  snprintf(plots[*n].caption, sizeof plots[*n].caption, "%s", caption);
  plots[*n].lead = 0;
  (*n)++;
}

/* Recipe k's gap curve into plots/gap_rK.dat: step, mean, min, max. *written = 0 when it has none. */
static int gap_data(const ufp4_report *r, const char *plot_dir, size_t k, int *written) {
  rpt_curve c;
  int rc = rpt_curve_gap(r, k, &c);
  *written = !rc && c.n;
  if (*written) {
    ufp4_strbuf d = {0};
    ufp4_strbuf_printf(&d, "# step, then L - L_%s of the seeds (each smoothed): mean min max\n", r->baseline);
    for (size_t i = 0; i < c.n; i++) ufp4_strbuf_printf(&d, "%d %.9g %.9g %.9g\n", c.step[i], c.v[i], c.lo[i], c.hi[i]);
    char path[4300];
    snprintf(path, sizeof path, "%s/gap_r%zu.dat", plot_dir, k);
    rc = ufp4_strbuf_write(&d, path);
  }
  rpt_curve_free(&c);
  return rc;
}

/* The paired gap L - L_base per recipe: the seed-mean line over a min..max band, one color per
 * recipe (linetype k + 1, the color recipe k has in the loss plots). The lead plot. */
static int gap_plot(ufp4_report *r, const char *plot_dir, rpt_plot *plots, size_t max, size_t *np) {
  char text[1024];
  ufp4_strbuf b = {0};
  ufp4_strbuf_puts(&b, common_settings);
  ufp4_strbuf_puts(&b, "set xlabel 'step'\nset xzeroaxis lt 1 lc rgb '#777777' lw 1\n"
                       "set style fill transparent solid 0.18 noborder\nset ylabel ");
  snprintf(text, sizeof text, "L - L_%s, same seed (nats, smoothed)", r->baseline);
  gp_quote(&b, text);
  ufp4_strbuf_puts(&b, "\nplot ");
  /* Every band first, then every line, so that no band hides a line. */
  ufp4_strbuf lines = {0};
  int rc = 0, first = 1;
  for (size_t k = 0; k < r->n_recipes && !rc; k++) {
    int written = 0;
    if ((int)k == r->baseline_idx || (rc = gap_data(r, plot_dir, k, &written)) || !written) continue;
    ufp4_strbuf_printf(&b, "%s'gap_r%zu.dat' using 1:3:4 with filledcurves lc %zu notitle", first ? "" : ", \\\n     ",
                       k, k + 1);
    ufp4_strbuf_printf(&lines, ", \\\n     'gap_r%zu.dat' using 1:2 with lines lw 2 lc %zu title ", k, k + 1);
    gp_quote(&lines, r->recipes[k].recipe);
    first = 0;
  }
  if (lines.s) ufp4_strbuf_puts(&b, lines.s);
  b.oom |= lines.oom;
  ufp4_strbuf_free(&lines);
  ufp4_strbuf_puts(&b, "\n");
  if (!rc && !first && !b.oom) rc = write_script(plot_dir, "gap", b.s, 900, 520);
  free(b.s);
  if (rc || first) return rc;
  snprintf(text, sizeof text,
           "Paired gap L - L_%s (same seed) vs step: line = mean over seeds, band = min..max over "
           "seeds (each seed's gap smoothed by a trailing mean over 1/20 of its points)",
           r->baseline);
  add_plot(plots, max, np, "gap", text);
  if (*np && !strcmp(plots[*np - 1].name, "gap")) plots[*np - 1].lead = 1;
  return 0;
}

/* One curve plot over recipes: which = 0 train raw, 1 train smoothed, 2 val, 3 rel err. */
static int curve_plots(ufp4_report *r, const char *plot_dir, rpt_plot *plots, size_t max, size_t *np) {
  static const char *prefix[] = {"loss", "val", "relerr"};
  int has[3] = {0, 0, 0}, rc = 0;
  for (size_t k = 0; k < r->n_recipes && !rc; k++)
    for (int w = 0; w < 3 && !rc; w++) {
      rpt_curve c;
      rc = w == 0 ? rpt_curve_train(r, k, &c) : w == 1 ? rpt_curve_val(r, k, &c) : rpt_curve_relerr(r, k, &c);
      if (rc) break;
      char file[64];
      snprintf(file, sizeof file, "%s_r%zu.dat", prefix[w], k);
      if (c.n) {
        has[w] = 1;
        rc = write_curve(plot_dir, file, &c);
      }
      rpt_curve_free(&c);
    }
  if (rc) return rc;
  static const struct {
    const char *name, *ylabel, *caption;
    int src, col, points;
  } P[] = {
      {"loss_train", "train loss (seed mean)", "Train loss, seed mean per recipe", 0, 2, 0},
      {"loss_smoothed", "train loss (seed mean, smoothed)", "Train loss, seed mean, trailing moving average", 0, 3, 0},
      {"loss_val", "validation loss (seed mean)", "Validation loss, seed mean per recipe", 1, 2, 1},
      {"rel_err", "|L - L_base| / L_base  (%, smoothed)",
       "BF16-relative loss error vs step (same-seed pairs, seed mean, trailing moving average)", 2, 3, 0},
  };
  for (size_t p = 0; p < sizeof P / sizeof P[0] && !rc; p++) {
    if (!has[P[p].src]) continue;
    ufp4_strbuf b = {0};
    ufp4_strbuf_puts(&b, common_settings);
    ufp4_strbuf_printf(&b, "set xlabel 'step'\nset ylabel ");
    gp_quote(&b, P[p].ylabel);
    ufp4_strbuf_puts(&b, "\nplot ");
    int first = 1;
    for (size_t k = 0; k < r->n_recipes; k++) {
      if (P[p].src == 2 && (int)k == r->baseline_idx) continue;
      char file[64], path[4300];
      snprintf(file, sizeof file, "%s_r%zu.dat", prefix[P[p].src], k);
      snprintf(path, sizeof path, "%s/%s", plot_dir, file);
      struct stat st;
      if (stat(path, &st) != 0) continue;
      ufp4_strbuf_printf(&b, "%s'%s' using 1:%d with %s lw 2 title ", first ? "" : ", \\\n     ", file, P[p].col,
                 P[p].points ? "linespoints" : "lines");
      gp_quote(&b, r->recipes[k].recipe);
      first = 0;
    }
    ufp4_strbuf_puts(&b, "\n");
    if (!first) {
      if (!b.oom) rc = write_script(plot_dir, P[p].name, b.s, 900, 520);
      add_plot(plots, max, np, P[p].name, P[p].caption);
    }
    free(b.s);
  }
  return rc;
}

/* Diagnostics: per recipe, per kind, per layer mean of the last-step points of every seed. */
static int diag_table(ufp4_report *r, int set, int value, int n_kinds, double **out, int *layers) {
  const size_t R = r->n_recipes;
  int L = 0;
  for (size_t i = 0; i < r->n_runs; i++)
    if (r->runs[i].diag && r->runs[i].diag->max_layer + 1 > L) L = r->runs[i].diag->max_layer + 1;
  *layers = L;
  *out = NULL;
  if (!L) return 0;
  const size_t cells = (size_t)L * (size_t)n_kinds * R;
  double *sum = calloc(cells, sizeof *sum), *cnt = calloc(cells, sizeof *cnt);
  if (!sum || !cnt) {
    free(sum);
    free(cnt);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  int any = 0;
  for (size_t i = 0; i < r->n_runs; i++) {
    const struct ufp4_report_diag *d = r->runs[i].diag;
    if (!d) continue;
    size_t k = 0;
    while (strcmp(r->recipes[k].recipe, r->runs[i].recipe)) k++;
    const rpt_diag_set *s = set == 0 ? &d->op : set == 1 ? &d->gemm : &d->drift;
    for (size_t p = 0; p < s->n; p++) {
      const int kind = set == 2 ? value : s->p[p].kind;
      const double v = value ? s->p[p].v2 : s->p[p].v1;
      if (!isfinite(v) || kind < 0 || kind >= n_kinds) continue;
      const size_t cell = ((size_t)s->p[p].layer * n_kinds + kind) * R + k;
      sum[cell] += v;
      cnt[cell] += 1;
      any = 1;
    }
  }
  for (size_t c = 0; c < cells; c++) sum[c] = cnt[c] ? sum[c] / cnt[c] : NAN;
  free(cnt);
  if (!any) {
    free(sum);
    return 0;
  }
  *out = sum;
  return 0;
}

static int diag_plot(ufp4_report *r, const char *plot_dir, const char *name, const char *caption, int set,
                     int value, int n_kinds, const char *const *kind_names, const char *ylabel, int rows, int cols,
                     rpt_plot *plots, size_t max, size_t *np) {
  double *t;
  int L;
  int rc = diag_table(r, set, set == 2 ? 0 : value, n_kinds, &t, &L);
  if (rc || !t) return rc;
  if (set == 2) { /* drift: both measures as two kinds */
    double *t2;
    if ((rc = diag_table(r, set, 1, n_kinds, &t2, &L))) {
      free(t);
      return rc;
    }
    const size_t R = r->n_recipes;
    for (int l = 0; l < L && t2; l++)
      for (size_t k = 0; k < R; k++) t[((size_t)l * n_kinds + 1) * R + k] = t2[((size_t)l * n_kinds + 1) * R + k];
    free(t2);
  }
  const size_t R = r->n_recipes;
  ufp4_strbuf d = {0};
  ufp4_strbuf_printf(&d, "# layer, then for each kind (");
  for (int q = 0; q < n_kinds; q++) ufp4_strbuf_printf(&d, "%s%s", q ? " " : "", kind_names[q]);
  ufp4_strbuf_printf(&d, ") one column per recipe (");
  for (size_t k = 0; k < R; k++) ufp4_strbuf_printf(&d, "%s%s", k ? " | " : "", r->recipes[k].recipe);
  ufp4_strbuf_puts(&d, ")\n");
  for (int l = 0; l < L; l++) {
    ufp4_strbuf_printf(&d, "%d", l);
    for (int q = 0; q < n_kinds; q++)
      for (size_t k = 0; k < R; k++) {
        const double v = t[((size_t)l * n_kinds + q) * R + k];
        if (isnan(v)) ufp4_strbuf_puts(&d, " NaN");
        else ufp4_strbuf_printf(&d, " %.9g", v);
      }
    ufp4_strbuf_puts(&d, "\n");
  }
  char path[4300];
  snprintf(path, sizeof path, "%s/%s.dat", plot_dir, name);
  if ((rc = ufp4_strbuf_write(&d, path))) {
    free(t);
    return rc;
  }
  ufp4_strbuf b = {0};
  ufp4_strbuf_puts(&b, common_settings);
  ufp4_strbuf_printf(&b, "set key bottom left font ',9'\nset xlabel 'layer'\nset multiplot layout %d,%d title ", rows, cols);
  gp_quote(&b, caption);
  ufp4_strbuf_puts(&b, "\n");
  for (int q = 0; q < n_kinds; q++) {
    ufp4_strbuf_puts(&b, "set title ");
    gp_quote(&b, kind_names[q]);
    ufp4_strbuf_puts(&b, "\nset ylabel ");
    gp_quote(&b, set == 2 ? kind_names[q] : ylabel);
    ufp4_strbuf_puts(&b, "\n");
    int first = 1;
    for (size_t k = 0; k < R; k++) {
      int has = 0;
      for (int l = 0; l < L; l++) has |= !isnan(t[((size_t)l * n_kinds + q) * R + k]);
      if (!has) continue;
      ufp4_strbuf_printf(&b, "%s'%s.dat' using 1:%zu with linespoints lw 2 title ", first ? "plot " : ", \\\n     ", name,
                 2 + (size_t)q * R + k);
      gp_quote(&b, r->recipes[k].recipe);
      first = 0;
    }
    ufp4_strbuf_puts(&b, first ? "set multiplot next\n" : "\n"); /* an empty panel keeps the grid aligned */
  }
  ufp4_strbuf_puts(&b, "unset multiplot\n");
  free(t);
  if (!b.oom) rc = write_script(plot_dir, name, b.s, cols * 420, rows * 340 + 40);
  free(b.s);
  if (!rc) add_plot(plots, max, np, name, caption);
  return rc;
}

int rpt_make_plots(ufp4_report *r, const char *out_dir, rpt_plot *plots, size_t max, size_t *n_plots) {
  *n_plots = 0;
  r->plotted = 0;
  char plot_dir[4200];
  snprintf(plot_dir, sizeof plot_dir, "%s/plots", out_dir);
  int rc = ufp4_mkdirs(plot_dir);
  if (rc) return rc;
  static const char *const drift_kinds[] = {"norm_ratio", "cosine"};
  if ((rc = gap_plot(r, plot_dir, plots, max, n_plots)) || (rc = curve_plots(r, plot_dir, plots, max, n_plots)) ||
      (rc = diag_plot(r, plot_dir, "diag_alpha", "Signal attenuation alpha per layer (last diagnostics step)", 0, 0,
                      RPT_N_OPERANDS, rpt_operands, "alpha", 2, 3, plots, max, n_plots)) ||
      (rc = diag_plot(r, plot_dir, "diag_sqnr", "Operand SQNR per layer (dB, last diagnostics step)", 0, 1,
                      RPT_N_OPERANDS, rpt_operands, "SQNR (dB)", 2, 3, plots, max, n_plots)) ||
      (rc = diag_plot(r, plot_dir, "diag_out_sqnr", "GEMM output SQNR per layer (dB, last diagnostics step)", 1, 0,
                      RPT_N_GEMMS, rpt_gemms, "output SQNR (dB)", 1, 3, plots, max, n_plots)) ||
      (rc = diag_plot(r, plot_dir, "diag_drift", "Forward drift vs the high-precision model, per layer", 2, 0, 2,
                      drift_kinds, "", 1, 2, plots, max, n_plots)))
    return rc;
  if (!r->plots) {
    snprintf(r->plot_note, sizeof r->plot_note,
             "plots were not drawn (disabled); data and gnuplot scripts are in plots/");
    *n_plots = 0;
    return 0;
  }
  if (run_gnuplot(plot_dir, "--version") != 0) {
    snprintf(r->plot_note, sizeof r->plot_note,
             "gnuplot (%s) was not found, so there are no plots; data and scripts are in plots/ "
             "(run `gnuplot NAME.gp` there)", gnuplot_bin());
    *n_plots = 0;
    return 0;
  }
  size_t k = 0;
  int failed = 0;
  for (size_t i = 0; i < *n_plots; i++) {
    char script[128], svg[4400];
    snprintf(script, sizeof script, "%s.gp", plots[i].name);
    snprintf(svg, sizeof svg, "%s/%s.svg", plot_dir, plots[i].name);
    struct stat st;
    if (run_gnuplot(plot_dir, script) == 0 && stat(svg, &st) == 0) plots[k++] = plots[i];
    else failed++;
  }
  *n_plots = k;
  r->plotted = k > 0;
  if (failed)
    snprintf(r->plot_note, sizeof r->plot_note, "gnuplot failed on %d plot(s); see plots/gnuplot.log", failed);
  else
    snprintf(r->plot_note, sizeof r->plot_note, "%zu plot(s) drawn with gnuplot (plots/*.svg, *.png)", k);
  return 0;
}

int ufp4_plot_gnuplot(const char *dir, const char *name, const char *body, int width, int height) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_puts(&b, common_settings);
  ufp4_strbuf_puts(&b, body);
  if (b.oom) {
    free(b.s);
    return ufp4_fail(UFP4_ENOMEM, "plot: out of memory");
  }
  int rc = write_script(dir, name, b.s, width, height);
  free(b.s);
  if (rc) return rc;
  char script[512];
  snprintf(script, sizeof script, "%s.gp", name);
  return run_gnuplot(dir, script) == 0 ? 0 : 1;
}
