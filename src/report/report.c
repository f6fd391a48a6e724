/* Report figures: per-run losses and BF16-relative errors, per-recipe seed statistics, paired
 * tests; plus the text table and the orchestration of the writers (see ufp4/report.h). */
#include "ufp4/report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_internal.h"
#include "report/report_load.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

ufp4_report_options ufp4_report_options_default(void) {
  return (ufp4_report_options){.final_steps = 100,
                               .baseline = "bf16",
                               .control = "fp32",
                               .title = "ufp4 recipe comparison",
                               .command = NULL,
                               .plots = 1};
}

/* ---- text helpers shared by the writers ---- */

void rpt_puts(rpt_buf *b, const char *s) {
  const size_t len = strlen(s);
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + len + 1) nc *= 2;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  memcpy(b->s + b->n, s, len + 1);
  b->n += len;
}

void rpt_printf(rpt_buf *b, const char *fmt, ...) {
  char small[1024];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (len < 0) return;
  if ((size_t)len < sizeof small) {
    rpt_puts(b, small);
    return;
  }
  char *big = malloc((size_t)len + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)len + 1, fmt, ap);
  va_end(ap);
  rpt_puts(b, big);
  free(big);
}

void rpt_html_escape(rpt_buf *b, const char *s) {
  char one[2] = {0, 0};
  for (; *s; s++) {
    switch (*s) {
    case '<': rpt_puts(b, "&lt;"); break;
    case '>': rpt_puts(b, "&gt;"); break;
    case '&': rpt_puts(b, "&amp;"); break;
    case '"': rpt_puts(b, "&quot;"); break;
    case '\'': rpt_puts(b, "&#39;"); break;
    default: one[0] = *s; rpt_puts(b, one);
    }
  }
}

int rpt_buf_write(rpt_buf *b, const char *path) {
  int rc = b->oom ? ufp4_fail(UFP4_ENOMEM, "%s: out of memory while composing", path)
                  : ufp4_write_file_atomic(path, b->s ? b->s : "", b->n);
  free(b->s);
  *b = (rpt_buf){0};
  return rc;
}

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

/* ---- figures ---- */

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

static ufp4_msd msd_of(const double *v, size_t n) {
  double tmp[n ? n : 1];
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!isnan(v[i])) tmp[k++] = v[i];
  return (ufp4_msd){ufp4_mean(tmp, k), ufp4_std(tmp, k), (int)k};
}

static int find_recipe(const ufp4_report *r, const char *name) {
  for (size_t i = 0; i < r->n_recipes; i++)
    if (!strcmp(r->recipes[i].recipe, name)) return (int)i;
  return -1;
}

static const ufp4_report_run_result *find_run(const ufp4_report *r, const char *recipe, long long seed) {
  for (size_t i = 0; i < r->n_runs; i++)
    if (r->runs[i].seed == seed && !strcmp(r->runs[i].recipe, recipe)) return &r->runs[i];
  return NULL;
}

/* The relative-error window of run x against baseline run b: the last N steps both logged. */
static void relative_figures(ufp4_report_run_result *x, const ufp4_report_run_result *b, int N) {
  size_t i = x->train.n, j = b->train.n;
  double se = 0, sg = 0, sr = 0;
  int k = 0;
  while (i > 0 && j > 0 && k < N) { /* walk both sorted series backwards */
    const int si = x->train.step[i - 1], sj = b->train.step[j - 1];
    if (si > sj) i--;
    else if (sj > si) j--;
    else {
      const double L = x->train.value[i - 1], Lb = b->train.value[j - 1];
      se += fabs(L - Lb) / Lb;
      sg += L - Lb;
      sr += (L - Lb) / Lb;
      k++;
      i--, j--;
    }
  }
  x->rel_window = k;
  x->rel_err = k ? se / k : NAN;
  x->signed_gap = k ? sg / k : NAN;
  x->rel_gap = k ? sr / k : NAN;
}

static double metric_of(const ufp4_report_run_result *x, int metric) { return metric ? x->signed_gap : x->rel_err; }

static int compute_tests(ufp4_report *r) {
  const size_t R = r->n_recipes;
  r->tests = calloc(R * R * 2 + 1, sizeof *r->tests);
  if (!r->tests) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  double *a = malloc((r->n_runs + 1) * sizeof *a), *b = malloc((r->n_runs + 1) * sizeof *b);
  if (!a || !b) {
    free(a);
    free(b);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  for (size_t i = 0; i < R; i++)
    for (size_t j = i + 1; j < R; j++) {
      if ((int)i == r->baseline_idx || (int)j == r->baseline_idx) continue;
      for (int metric = 0; metric < 2; metric++) {
        /* The control goes second so that d = recipe - control reads as "above the noise floor". */
        size_t ia = i, ib = j;
        if ((int)i == r->control_idx) ia = j, ib = i;
        size_t n = 0;
        for (size_t k = 0; k < r->n_runs; k++) {
          const ufp4_report_run_result *x = &r->runs[k];
          if (strcmp(x->recipe, r->recipes[ia].recipe)) continue;
          const ufp4_report_run_result *y = find_run(r, r->recipes[ib].recipe, x->seed);
          if (!y || isnan(metric_of(x, metric)) || isnan(metric_of(y, metric))) continue;
          a[n] = metric_of(x, metric);
          b[n++] = metric_of(y, metric);
        }
        ufp4_report_test *t = &r->tests[r->n_tests++];
        t->a = (int)ia;
        t->b = (int)ib;
        t->metric = metric;
        t->t.n = n;
        t->t.t = t->t.p = t->t.df = t->t.mean_diff = t->t.sd_diff = NAN;
        if (n >= 2 && ufp4_paired_ttest(a, b, n, &t->t) == 0) {
          t->valid = 1;
          t->significant = t->t.p < 0.05;
        } else if (n >= 1) {
          t->t.mean_diff = ufp4_mean(a, n) - ufp4_mean(b, n);
        }
      }
    }
  free(a);
  free(b);
  return 0;
}

static int add_recipe(ufp4_report *r, const char *name) {
  int i = find_recipe(r, name);
  if (i >= 0) return i;
  ufp4_report_recipe *x = &r->recipes[r->n_recipes];
  memset(x, 0, sizeof *x);
  snprintf(x->recipe, sizeof x->recipe, "%s", name);
  return (int)r->n_recipes++;
}

static int build(ufp4_report *r, const ufp4_report_run *in, size_t n) {
  int rc;
  const int N = r->final_steps;
  for (size_t i = 0; i < n; i++) {
    ufp4_report_run_result *x = &r->runs[i];
    snprintf(x->dir, sizeof x->dir, "%s", in[i].dir);
    if ((rc = rpt_load_config(x->dir, x->config_recipe, sizeof x->config_recipe, &x->seed))) return rc;
    if (in[i].seed >= 0) x->seed = in[i].seed;
    snprintf(x->recipe, sizeof x->recipe, "%s", in[i].recipe[0] ? in[i].recipe : x->config_recipe);
    r->n_runs = i + 1; /* from here on free() must release this run's series */
    if ((rc = rpt_load_metrics(x->dir, &x->train, &x->val, &x->skipped))) return rc;
    if ((rc = rpt_diag_load(x->dir, &x->diag))) return rc;
    for (size_t k = 0; k < i; k++)
      if (r->runs[k].seed == x->seed && !strcmp(r->runs[k].recipe, x->recipe))
        return ufp4_fail(UFP4_EINVAL, "report: recipe '%s' seed %lld appears twice (%s and %s)", x->recipe, x->seed,
                         r->runs[k].dir, x->dir);
    x->window = (int)(x->train.n < (size_t)N ? x->train.n : (size_t)N);
    x->final_train = ufp4_mean(x->train.value + x->train.n - x->window, (size_t)x->window);
    x->final_val = x->val.n ? x->val.value[x->val.n - 1] : NAN;
    x->rel_err = x->signed_gap = x->rel_gap = NAN;
    if (x->skipped && (rc = add_note(r, "%s (seed %lld): %d logged step(s) were skipped (non-finite loss) and left out",
                                     x->recipe, x->seed, x->skipped)))
      return rc;
  }
  /* Recipe order: baseline, control, then first appearance. */
  for (size_t i = 0; i < n; i++)
    if (!strcmp(r->runs[i].recipe, r->baseline)) add_recipe(r, r->baseline);
  for (size_t i = 0; i < n && r->control; i++)
    if (!strcmp(r->runs[i].recipe, r->control)) add_recipe(r, r->control);
  for (size_t i = 0; i < n; i++) add_recipe(r, r->runs[i].recipe);
  r->baseline_idx = find_recipe(r, r->baseline);
  r->control_idx = r->control ? find_recipe(r, r->control) : -1;
  if (r->baseline_idx < 0)
    return ufp4_fail(UFP4_EINVAL, "report: no run of the baseline recipe '%s' (recipes are named by runs.json, "
                                  "NAME=DIR, or config.json's \"recipe\")", r->baseline);
  r->recipes[r->baseline_idx].is_baseline = 1;
  if (r->control_idx >= 0) r->recipes[r->control_idx].is_control = 1;
  else if (r->control && (rc = add_note(r, "no run of the control recipe '%s': no noise floor", r->control)))
    return rc;

  for (size_t i = 0; i < n; i++) {
    ufp4_report_run_result *x = &r->runs[i];
    if (!strcmp(x->recipe, r->baseline)) continue;
    const ufp4_report_run_result *b = find_run(r, r->baseline, x->seed);
    if (!b) {
      if ((rc = add_note(r, "%s (seed %lld): no %s run of seed %lld, so no relative error", x->recipe, x->seed,
                         r->baseline, x->seed)))
        return rc;
      continue;
    }
    relative_figures(x, b, N);
    if (!x->rel_window && (rc = add_note(r, "%s (seed %lld): no logged step in common with %s", x->recipe, x->seed,
                                         r->baseline)))
      return rc;
  }
  double *v = malloc(n * sizeof *v);
  if (!v) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  for (size_t k = 0; k < r->n_recipes; k++) {
    ufp4_report_recipe *q = &r->recipes[k];
    size_t m = 0;
#define COLLECT(field, dst)                                      \
  m = 0;                                                         \
  for (size_t i = 0; i < n; i++)                                 \
    if (!strcmp(r->runs[i].recipe, q->recipe)) v[m++] = r->runs[i].field; \
  q->dst = msd_of(v, m);
    COLLECT(final_train, final_train)
    q->n_seeds = (int)m;
    COLLECT(final_val, final_val)
    COLLECT(rel_err, rel_err)
    COLLECT(signed_gap, signed_gap)
    COLLECT(rel_gap, rel_gap)
#undef COLLECT
  }
  free(v);
  return compute_tests(r);
}

int ufp4_report_build(const ufp4_report_run *runs, size_t n, const ufp4_report_options *opt, ufp4_report **out) {
  *out = NULL;
  ufp4_report_options o = opt ? *opt : ufp4_report_options_default();
  if (!runs || !n) return ufp4_fail(UFP4_EINVAL, "report: no runs given");
  if (o.final_steps < 1) return ufp4_fail(UFP4_EINVAL, "report: final_steps must be >= 1 (got %d)", o.final_steps);
  if (!o.baseline || !o.baseline[0]) o.baseline = "bf16";
  if (o.control && !o.control[0]) o.control = NULL;
  if (o.control && !strcmp(o.control, o.baseline))
    return ufp4_fail(UFP4_EINVAL, "report: control and baseline are both '%s'", o.baseline);
  ufp4_report *r = calloc(1, sizeof *r);
  if (!r) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  r->final_steps = o.final_steps;
  r->plots = o.plots;
  r->baseline = dupstr(o.baseline);
  r->control = dupstr(o.control);
  r->title = dupstr(o.title ? o.title : "ufp4 recipe comparison");
  r->command = dupstr(o.command ? o.command : "");
  r->runs = calloc(n, sizeof *r->runs);
  r->recipes = calloc(n, sizeof *r->recipes);
  int rc = (!r->baseline || (o.control && !r->control) || !r->title || !r->command || !r->runs || !r->recipes)
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
  free(r->tests);
  free(r->baseline);
  free(r->control);
  free(r->title);
  free(r->command);
  free(r);
}

/* ---- runs.json ---- */

int ufp4_report_runs_load(const char *path, ufp4_report_run **runs, size_t *n) {
  *runs = NULL;
  *n = 0;
  char *text;
  size_t size;
  int rc = rpt_read_file(path, 64u << 20, "the run list", &text, &size);
  if (rc) return rc;
  cJSON *j = cJSON_ParseWithLength(text, size);
  free(text);
  const cJSON *arr = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "runs") : j;
  if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr)) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_EFORMAT, "%s: expected a non-empty array of {\"recipe\", \"seed\", \"dir\"} (or {\"runs\": [...]})",
                     path);
  }
  const size_t m = (size_t)cJSON_GetArraySize(arr);
  ufp4_report_run *out = calloc(m, sizeof *out);
  if (!out) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  char base[4096];
  snprintf(base, sizeof base, "%s", path);
  char *slash = strrchr(base, '/');
  if (slash) slash[1] = 0;
  else base[0] = 0;
  size_t k = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(it, "recipe");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(it, "seed");
    const cJSON *dir = cJSON_GetObjectItemCaseSensitive(it, "dir");
    if (!cJSON_IsString(dir) || !dir->valuestring[0]) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu has no \"dir\" string", path, k);
      break;
    }
    if (rec && (!cJSON_IsString(rec) || strlen(rec->valuestring) >= sizeof out->recipe)) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu: \"recipe\" must be a string of < 512 bytes", path, k);
      break;
    }
    if (seed && (!cJSON_IsNumber(seed) || seed->valuedouble < 0 || seed->valuedouble != floor(seed->valuedouble))) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu: \"seed\" must be a non-negative integer", path, k);
      break;
    }
    snprintf(out[k].recipe, sizeof out[k].recipe, "%s", rec ? rec->valuestring : "");
    out[k].seed = seed ? (long long)seed->valuedouble : -1;
    if (dir->valuestring[0] == '/') snprintf(out[k].dir, sizeof out[k].dir, "%s", dir->valuestring);
    else snprintf(out[k].dir, sizeof out[k].dir, "%s%s", base, dir->valuestring);
    k++;
  }
  cJSON_Delete(j);
  if (rc) {
    free(out);
    return rc;
  }
  *runs = out;
  *n = k;
  return 0;
}

/* ---- the text table ---- */

static const ufp4_report_test *control_test(const ufp4_report *r, int recipe, int metric) {
  for (size_t i = 0; i < r->n_tests; i++) {
    const ufp4_report_test *t = &r->tests[i];
    if (t->metric == metric && t->a == recipe && t->b == r->control_idx) return t;
  }
  return NULL;
}

void ufp4_report_print_table(const ufp4_report *r, FILE *f) {
  char floor_s[64] = "n/a";
  if (r->control_idx >= 0) rpt_fmt_msd(floor_s, sizeof floor_s, r->recipes[r->control_idx].rel_err, 100, "%.4f%%");
  fprintf(f, "%s  (window: last %d logged steps; baseline %s; noise floor = %s rel. err)\n", r->title,
          r->final_steps, r->baseline, r->control ? r->control : "none");
  fprintf(f, "%-24s %5s %10s %10s %24s %22s %20s  %s\n", "recipe", "seeds", "final train", "final val",
          "rel. err (mean ± std)", "signed gap", "noise floor", "vs noise floor (rel. err)");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const ufp4_report_recipe *q = &r->recipes[i];
    char tr[32], va[32], re[64], gap[64], sig[128];
    rpt_fmt(tr, sizeof tr, q->final_train.mean, "%.5f");
    rpt_fmt(va, sizeof va, q->final_val.mean, "%.5f");
    rpt_fmt_msd(re, sizeof re, q->rel_err, 100, "%.4f%%");
    rpt_fmt_msd(gap, sizeof gap, q->signed_gap, 1, "%+.5f");
    const ufp4_report_test *t = control_test(r, (int)i, 0);
    if (q->is_baseline) snprintf(sig, sizeof sig, "baseline");
    else if (q->is_control) snprintf(sig, sizeof sig, "control");
    else if (!t) snprintf(sig, sizeof sig, "no control");
    else if (!t->valid) snprintf(sig, sizeof sig, "no test (%zu common seed%s)", t->t.n, t->t.n == 1 ? "" : "s");
    else snprintf(sig, sizeof sig, "p=%.3g %s", t->t.p, t->significant ? "significant" : "not significant");
    fprintf(f, "%-24s %5d %10s %10s %24s %22s %20s  %s\n", q->recipe, q->n_seeds, tr, va, q->is_baseline ? "-" : re,
            q->is_baseline ? "-" : gap, floor_s, sig);
  }
}

/* ---- writing ---- */

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
