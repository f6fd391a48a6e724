/* Report figures: per-run losses and BF16-relative errors, per-recipe seed statistics, the matrix
 * of paired differences across seeds; and ufp4_report_write, which runs the writers (see
 * ufp4/report.h). */
#include "ufp4/report.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_internal.h"
#include "report/report_load.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/recipe.h"
#include "ufp4/train.h"

ufp4_report_options ufp4_report_options_default(void) {
  return (ufp4_report_options){.final_steps = 100,
                               .baseline = "bf16",
                               .control = "fp32",
                               .title = "ufp4 recipe comparison",
                               .command = NULL,
                               .plots = 1,
                               .target_effect = 0};
}

static char *dupstr(const char *s) {
  if (!s) return NULL;
  char *d = malloc(strlen(s) + 1);
  if (d) strcpy(d, s);
  return d;
}

static int add_note(ufp4_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_note(ufp4_report *r, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char **nn = realloc(r->notes, (r->n_notes + 1) * sizeof *nn);
  if (!nn) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  r->notes = nn;
  if (!(nn[r->n_notes] = dupstr(buf))) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  r->n_notes++;
  return 0;
}

static int find_recipe(const ufp4_report *r, const char *name) {
  for (size_t i = 0; i < r->n_recipes; i++)
    if (!strcmp(r->recipes[i].recipe, name)) return (int)i;
  return -1;
}

static const ufp4_report_run_result *find_run(const ufp4_report *r, const char *recipe,
                                              long long seed) {
  for (size_t i = 0; i < r->n_runs; i++)
    if (r->runs[i].seed == seed && !strcmp(r->runs[i].recipe, recipe)) return &r->runs[i];
  return NULL;
}

static double metric_of(const ufp4_report_run_result *x, int metric) {
  return metric ? x->signed_gap : x->rel_err;
}

/* The metric of recipe ia's runs (a) and of recipe ib's run of the same seed (b), for the seeds
 * where both are defined. Returns how many pairs. */
static size_t seed_pairs(const ufp4_report *r, size_t ia, size_t ib, int metric, double *a,
                         double *b) {
  size_t n = 0;
  for (size_t k = 0; k < r->n_runs; k++) {
    const ufp4_report_run_result *x = &r->runs[k];
    if (strcmp(x->recipe, r->recipes[ia].recipe)) continue;
    const ufp4_report_run_result *y = find_run(r, r->recipes[ib].recipe, x->seed);
    if (!y || isnan(metric_of(x, metric)) || isnan(metric_of(y, metric))) continue;
    a[n] = metric_of(x, metric);
    b[n++] = metric_of(y, metric);
  }
  return n;
}

/* The seeds the pair's observed sd needs to detect the target effect (rel_err pairs only). */
static void seeds_needed(const ufp4_report *r, ufp4_report_pair *p) {
  p->need = UFP4_REPORT_NEED_NONE;
  if (!(r->target_effect > 0) || p->metric != 0 || !p->valid) return;
  if (!(p->s.sd > 0)) {
    p->need = UFP4_REPORT_NEED_NO_SPREAD;
    return;
  }
  size_t n;
  /* A failure here is only "more than the limit": the arguments were checked above. */
  if (ufp4_paired_n(r->target_effect / 100, p->s.sd, UFP4_REPORT_ALPHA, UFP4_REPORT_POWER,
                    UFP4_REPORT_MAX_SEEDS, &n)) {
    p->need = UFP4_REPORT_NEED_TOO_MANY;
    return;
  }
  p->need = UFP4_REPORT_NEED_OK;
  p->seeds_needed = n;
}

/* Row ia minus column ib on metric, over the seeds both have. */
static void add_pair(ufp4_report *r, size_t ia, size_t ib, int metric, double *a, double *b) {
  const size_t n = seed_pairs(r, ia, ib, metric, a, b);
  ufp4_report_pair *p = &r->pairs[r->n_pairs++];
  p->a = (int)ia;
  p->b = (int)ib;
  p->metric = metric;
  p->n = n;
  for (size_t k = 0; k < n; k++) a[k] -= b[k];
  p->mean = n ? ufp4_mean(a, n) : NAN;
  const double nan = NAN;
  p->s = (ufp4_paired_summary){.n = n, .mean = p->mean, .sd = nan, .se = nan, .t = nan, .df = nan,
                               .p = nan, .level = UFP4_REPORT_LEVEL, .lo = nan, .hi = nan,
                               .alpha = UFP4_REPORT_ALPHA, .power = UFP4_REPORT_POWER, .mdd = nan};
  if (n >= 2 && ufp4_paired_summarize(a, n, UFP4_REPORT_LEVEL, UFP4_REPORT_ALPHA,
                                      UFP4_REPORT_POWER, &p->s) == 0) {
    p->valid = 1;
    p->significant = p->s.p < UFP4_REPORT_ALPHA;
  }
  seeds_needed(r, p);
}

static int is_baseline(const ufp4_report *r, size_t i) { return (int)i == r->baseline_idx; }

static int compute_pairs(ufp4_report *r) {
  const size_t R = r->n_recipes;
  r->pairs = calloc(R * R * 2 + 1, sizeof *r->pairs);
  double *a = malloc((r->n_runs + 1) * sizeof *a), *b = malloc((r->n_runs + 1) * sizeof *b);
  if (!r->pairs || !a || !b) {
    free(a);
    free(b);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  for (size_t i = 0; i < R; i++)
    for (size_t j = 0; j < R; j++)
      if (i != j && !is_baseline(r, i) && !is_baseline(r, j))
        for (int metric = 0; metric < 2; metric++) add_pair(r, i, j, metric, a, b);
  free(a);
  free(b);
  return 0;
}

const ufp4_report_pair *ufp4_report_find_pair(const ufp4_report *r, int a, int b, int metric) {
  for (size_t i = 0; i < r->n_pairs; i++) {
    const ufp4_report_pair *p = &r->pairs[i];
    if (p->a == a && p->b == b && p->metric == metric) return p;
  }
  return NULL;
}

static int add_recipe(ufp4_report *r, const char *name) {
  int i = find_recipe(r, name);
  if (i >= 0) return i;
  ufp4_report_recipe *x = &r->recipes[r->n_recipes];
  memset(x, 0, sizeof *x);
  snprintf(x->recipe, sizeof x->recipe, "%s", name);
  return (int)r->n_recipes++;
}

/* A run's name from its config.json recipe: the preset it is, when its canonical spec is a
 * preset's (config.json holds "bf16,keep_first=0,keep_last=0" for a run of --recipe bf16, and
 * --baseline bf16 names it so); else the spec as written (a schedule, a modified preset). */
static void recipe_name(const char *spec, char *name, size_t size) {
  snprintf(name, size, "%s", spec);
  ufp4_recipe r, p;
  char canon[1024], preset[1024];
  if (ufp4_recipe_parse(spec, &r)) return;
  ufp4_recipe_format(&r, canon, sizeof canon);
  for (int i = 0; ufp4_recipe_presets[i]; i++) {
    if (ufp4_recipe_parse(ufp4_recipe_presets[i], &p)) continue;
    ufp4_recipe_format(&p, preset, sizeof preset);
    if (!strcmp(canon, preset)) {
      snprintf(name, size, "%s", ufp4_recipe_presets[i]);
      return;
    }
  }
}

/* Reads run i's folder and its own figures (those that need no other run). */
static int load_run(ufp4_report *r, const ufp4_report_run *in, size_t i) {
  ufp4_report_run_result *x = &r->runs[i];
  int rc;
  snprintf(x->dir, sizeof x->dir, "%s", in->dir);
  char *overrides = malloc(UFP4_OVERRIDES_MAX);
  if (!overrides) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  rc = rpt_load_config(x->dir, x->config_recipe, sizeof x->config_recipe, &x->seed, overrides, UFP4_OVERRIDES_MAX);
  if (rc) {
    free(overrides);
    return rc;
  }
  if (in->seed >= 0) x->seed = in->seed;
  if (in->recipe[0]) {
    snprintf(x->recipe, sizeof x->recipe, "%s", in->recipe);
  } else {
    /* Overrides make it another recipe than its "recipe": named by both, never the preset alone. */
    recipe_name(x->config_recipe, x->recipe, sizeof x->recipe);
    const size_t len = strlen(x->recipe);
    if (overrides[0] && (size_t)snprintf(x->recipe + len, sizeof x->recipe - len, " +overrides %s", overrides) >=
                            sizeof x->recipe - len)
      rc = ufp4_fail(UFP4_EINVAL, "report: %s: its recipe with its overrides is too long for a name; name the run "
                     "(NAME=DIR, or runs.json)", x->dir);
  }
  free(overrides);
  if (rc) return rc;
  r->n_runs = i + 1; /* from here on free() must release this run's series */
  if ((rc = rpt_load_metrics(x->dir, &x->train, &x->val, &x->skipped))) return rc;
  if ((rc = rpt_diag_load(x->dir, &x->diag))) return rc;
  for (size_t k = 0; k < i; k++)
    if (r->runs[k].seed == x->seed && !strcmp(r->runs[k].recipe, x->recipe))
      return ufp4_fail(UFP4_EINVAL, "report: recipe '%s' seed %lld appears twice (%s and %s)",
                       x->recipe, x->seed, r->runs[k].dir, x->dir);
  const size_t N = (size_t)r->final_steps;
  x->window = (int)(x->train.n < N ? x->train.n : N);
  x->final_train = ufp4_mean(x->train.value + x->train.n - x->window, (size_t)x->window);
  x->final_val = x->val.n ? x->val.value[x->val.n - 1] : NAN;
  x->rel_err = x->signed_gap = x->rel_gap = NAN;
  if (!x->skipped) return 0;
  return add_note(r,
                  "%s (seed %lld): %d logged step(s) were skipped (non-finite loss) and left out",
                  x->recipe, x->seed, x->skipped);
}

/* Recipe order: baseline, control, then first appearance. */
static int order_recipes(ufp4_report *r) {
  const size_t n = r->n_runs;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(r->runs[i].recipe, r->baseline)) add_recipe(r, r->baseline);
  for (size_t i = 0; i < n && r->control; i++)
    if (!strcmp(r->runs[i].recipe, r->control)) add_recipe(r, r->control);
  for (size_t i = 0; i < n; i++) add_recipe(r, r->runs[i].recipe);
  r->baseline_idx = find_recipe(r, r->baseline);
  r->control_idx = r->control ? find_recipe(r, r->control) : -1;
  if (r->baseline_idx < 0)
    return ufp4_fail(UFP4_EINVAL,
                     "report: no run of the baseline recipe '%s' (recipes are named by runs.json, "
                     "NAME=DIR, or config.json's \"recipe\")",
                     r->baseline);
  r->recipes[r->baseline_idx].is_baseline = 1;
  if (r->control_idx >= 0)
    r->recipes[r->control_idx].is_control = 1;
  else if (r->control)
    return add_note(r, "no run of the control recipe '%s': no noise floor", r->control);
  return 0;
}

/* Each non-baseline run against the baseline run of its seed (ufp4_series_gap_tail). */
static int relative_figures(ufp4_report *r) {
  for (size_t i = 0; i < r->n_runs; i++) {
    ufp4_report_run_result *x = &r->runs[i];
    if (!strcmp(x->recipe, r->baseline)) continue;
    const ufp4_report_run_result *b = find_run(r, r->baseline, x->seed);
    int rc = 0;
    if (!b) {
      rc = add_note(r, "%s (seed %lld): no %s run of seed %lld, so no relative error", x->recipe,
                    x->seed, r->baseline, x->seed);
    } else {
      const ufp4_series_gap g = ufp4_series_gap_tail(&x->train, &b->train, r->final_steps);
      x->rel_window = g.n;
      x->rel_err = g.rel_err;
      x->signed_gap = g.signed_gap;
      x->rel_gap = g.rel_gap;
      if (!g.n)
        rc = add_note(r, "%s (seed %lld): no logged step in common with %s", x->recipe, x->seed,
                      r->baseline);
    }
    if (rc) return rc;
  }
  return 0;
}

/* Mean and std over the seeds of `recipe` of the run figure at byte offset `field`. */
static ufp4_msd seed_msd(const ufp4_report *r, const char *recipe, size_t field, double *v) {
  size_t m = 0;
  for (size_t i = 0; i < r->n_runs; i++)
    if (!strcmp(r->runs[i].recipe, recipe))
      v[m++] = *(const double *)((const char *)&r->runs[i] + field);
  return ufp4_msd_finite(v, m);
}

static int summarize_recipes(ufp4_report *r) {
  double *v = malloc(r->n_runs * sizeof *v);
  if (!v) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  for (size_t k = 0; k < r->n_recipes; k++) {
    ufp4_report_recipe *q = &r->recipes[k];
    q->n_seeds = 0;
    for (size_t i = 0; i < r->n_runs; i++) q->n_seeds += !strcmp(r->runs[i].recipe, q->recipe);
    q->final_train = seed_msd(r, q->recipe, offsetof(ufp4_report_run_result, final_train), v);
    q->final_val = seed_msd(r, q->recipe, offsetof(ufp4_report_run_result, final_val), v);
    q->rel_err = seed_msd(r, q->recipe, offsetof(ufp4_report_run_result, rel_err), v);
    q->signed_gap = seed_msd(r, q->recipe, offsetof(ufp4_report_run_result, signed_gap), v);
    q->rel_gap = seed_msd(r, q->recipe, offsetof(ufp4_report_run_result, rel_gap), v);
  }
  free(v);
  return 0;
}

static int build(ufp4_report *r, const ufp4_report_run *in, size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) rc = load_run(r, &in[i], i);
  if (!rc) rc = order_recipes(r);
  if (!rc) rc = relative_figures(r);
  if (!rc) rc = summarize_recipes(r);
  return rc ? rc : compute_pairs(r);
}

int ufp4_report_build(const ufp4_report_run *runs, size_t n, const ufp4_report_options *opt,
                      ufp4_report **out) {
  *out = NULL;
  ufp4_report_options o = opt ? *opt : ufp4_report_options_default();
  if (!runs || !n) return ufp4_fail(UFP4_EINVAL, "report: no runs given");
  if (o.final_steps < 1)
    return ufp4_fail(UFP4_EINVAL, "report: final_steps must be >= 1 (got %d)", o.final_steps);
  if (!o.baseline || !o.baseline[0]) o.baseline = "bf16";
  if (o.control && !o.control[0]) o.control = NULL;
  /* Named as runs are: a spec that is a preset's canonical one is that preset. */
  char baseline[512], control[512];
  recipe_name(o.baseline, baseline, sizeof baseline);
  o.baseline = baseline;
  if (o.control) recipe_name(o.control, control, sizeof control), o.control = control;
  if (!(o.target_effect >= 0) || !isfinite(o.target_effect))
    return ufp4_fail(UFP4_EINVAL, "report: the target effect must be a finite number >= 0 (got %g)",
                     o.target_effect);
  if (o.control && !strcmp(o.control, o.baseline))
    return ufp4_fail(UFP4_EINVAL, "report: control and baseline are both '%s'", o.baseline);
  ufp4_report *r = calloc(1, sizeof *r);
  if (!r) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  r->final_steps = o.final_steps;
  r->plots = o.plots;
  r->target_effect = o.target_effect;
  r->baseline = dupstr(o.baseline);
  r->control = dupstr(o.control);
  r->title = dupstr(o.title ? o.title : "ufp4 recipe comparison");
  r->command = dupstr(o.command ? o.command : "");
  r->commit = dupstr(o.commit ? o.commit : "");
  r->runs = calloc(n, sizeof *r->runs);
  r->recipes = calloc(n, sizeof *r->recipes);
  int rc = (!r->baseline || (o.control && !r->control) || !r->title || !r->command || !r->commit || !r->runs ||
            !r->recipes)
               ? ufp4_fail(UFP4_ENOMEM, "report: out of memory")
               : build(r, runs, n);
  if (rc) {
    ufp4_report_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

void ufp4_report_free(ufp4_report *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_runs; i++) {
    free(r->runs[i].train.step);
    free(r->runs[i].train.value);
    free(r->runs[i].val.step);
    free(r->runs[i].val.value);
    rpt_diag_free(r->runs[i].diag);
  }
  for (size_t i = 0; i < r->n_notes; i++) free(r->notes[i]);
  free(r->notes);
  free(r->runs);
  free(r->recipes);
  free(r->pairs);
  free(r->baseline);
  free(r->control);
  free(r->title);
  free(r->command);
  free(r->commit);
  free(r);
}

int ufp4_report_write(ufp4_report *r, const char *out_dir) {
  int rc = ufp4_mkdirs(out_dir);
  if (rc) return rc;
  rpt_plot plots[32];
  size_t n_plots = 0;
  char path[4200], plot_dir[4200];
  snprintf(plot_dir, sizeof plot_dir, "%s/plots", out_dir);
  if ((rc = rpt_make_plots(r, out_dir, plots, sizeof plots / sizeof plots[0], &n_plots))) return rc;
  snprintf(path, sizeof path, "%s/report.json", out_dir);
  if ((rc = rpt_write_json(r, path))) return rc;
  snprintf(path, sizeof path, "%s/report.md", out_dir);
  if ((rc = rpt_write_md(r, path, plots, n_plots))) return rc;
  snprintf(path, sizeof path, "%s/report.html", out_dir);
  return rpt_write_html(r, path, plot_dir, plots, n_plots);
}

int ufp4_report_make(const ufp4_report_run *runs, size_t n, const ufp4_report_options *opt,
                     const char *out_dir, ufp4_report **out) {
  int rc = ufp4_report_build(runs, n, opt, out);
  if (!rc && (rc = ufp4_report_write(*out, out_dir))) {
    ufp4_report_free(*out);
    *out = NULL;
  }
  return rc;
}
