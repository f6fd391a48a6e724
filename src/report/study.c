/* The depth study's analysis (see ufp4/study.h for the contract, docs/STUDY.md for the design). */
#include "ufp4/study.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/report_load.h"
#include "report/study_internal.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/stats.h"
#include "ufp4/train.h"

#define LEVEL 0.95
#define SETTLE_FLOOR 0.002 /* nats: a quarter-to-quarter change below this counts as settled */

/* Roles of the recipes: the pair, the baseline, the control, the secondary recipes, then each
 * secondary recipe's reference (a recipe in two roles is read for each: a few kilobytes). */
enum { R_A, R_B, R_BASE, R_CONTROL, R_SECONDARY, R_REF = R_SECONDARY + UFP4_STUDY_MAX_SECONDARY };
#define N_ROLES (R_REF + UFP4_STUDY_MAX_SECONDARY)

typedef struct {
  int d, role;      /* depth index, role */
  long long seed;
  int last_step;    /* of the last evaluation; -1 when there is none */
  int finished;     /* its run.json says finished */
  double final;     /* its val_loss */
  char commit[256]; /* the binary that trained it (run.json), "" when unknown */
  ufp4_series val;
} cell;

typedef struct {
  const ufp4_study_options *o;
  const char *names[N_ROLES]; /* NULL: role unused */
  int n_roles;
  cell *cells;
  size_t n_cells, cap;
  int last[UFP4_STUDY_MAX_DEPTHS]; /* S_L: the latest evaluation step at each depth */
  char unreadable[600];             /* the last metrics.jsonl that could not be read, "" if none */
  int found[N_ROLES];               /* the role's runs/<name> folder exists in some depth folder */
} study;

ufp4_study_options ufp4_study_options_default(void) {
  ufp4_study_options o;
  memset(&o, 0, sizeof o);
  o.a = "e2m1";
  o.b = "ufp4";
  o.baseline = "bf16";
  o.control = "fp32";
  o.alpha = 0.05;
  o.power = 0.8;
  o.margin = 0.25;
  o.target_nats = 0.005;
  o.n_min = 12;
  o.n_cap = 24;
  return o;
}

static const cell *find(const study *st, int d, int role, long long seed) {
  for (size_t i = 0; i < st->n_cells; i++) {
    const cell *c = &st->cells[i];
    if (c->d == d && c->role == role && c->seed == seed) return c;
  }
  return NULL;
}

/* A finished run of (d, role, seed): its run.json says finished, and its last evaluation is at
 * the depth's last step. */
static const cell *done(const study *st, int d, int role, long long seed) {
  const cell *c = st->names[role] ? find(st, d, role, seed) : NULL;
  return c && c->finished && c->last_step >= 0 && c->last_step == st->last[d] ? c : NULL;
}

static int is_seed_dir(const char *name, long long *seed) {
  if (strncmp(name, "seed", 4) || !name[4] || strspn(name + 4, "0123456789") != strlen(name + 4) ||
      strlen(name + 4) > 15)
    return 0;
  *seed = atoll(name + 4);
  return 1;
}

static int add_cell(study *st, int d, int role, long long seed, const char *run) {
  if (find(st, d, role, seed))
    return ufp4_fail(UFP4_EINVAL, "%s: recipe %s, seed %lld: another folder of the same depth has this run too",
                     run, st->names[role], seed);
  if (st->n_cells == st->cap) {
    size_t nc = st->cap ? 2 * st->cap : 64;
    cell *n = realloc(st->cells, nc * sizeof *n);
    if (!n) return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
    st->cells = n;
    st->cap = nc;
  }
  cell *c = &st->cells[st->n_cells];
  memset(c, 0, sizeof *c);
  c->d = d;
  c->role = role;
  c->seed = seed;
  c->last_step = -1;
  c->final = NAN;
  char path[4700];
  struct stat sb;
  snprintf(path, sizeof path, "%s/metrics.jsonl", run);
  /* run.json says finished only after the last metrics line is written, so it is read first: a
   * finished run whose metrics are missing or cannot be read is damaged, or holds a non-number (a
   * diverged evaluation), and leaving its seed out would bias the tests, so the analysis stops and
   * names it. Any other run that cannot be read is one being written: unfinished. */
  ufp4_run_record rec;
  const int finished = !ufp4_run_record_read(run, &rec) && rec.state == UFP4_RUN_FINISHED;
  c->finished = finished;
  if (finished) snprintf(c->commit, sizeof c->commit, "%s", rec.commit);
  if (stat(path, &sb)) { /* a run not started yet: present, unfinished */
    if (finished)
      return ufp4_fail(UFP4_EFORMAT, "%s: missing in a finished run (by its run.json): its seed cannot be analysed",
                       path);
    st->n_cells++;
    return 0;
  }
  ufp4_series train = {0};
  int skipped = 0;
  int rc = rpt_load_metrics(run, &train, &c->val, &skipped);
  free(train.step);
  free(train.value);
  if (rc) {
    char why[sizeof st->unreadable];
    snprintf(why, sizeof why, "%s", ufp4_last_error());
    free(c->val.step);
    free(c->val.value);
    memset(&c->val, 0, sizeof c->val);
    if (finished) return ufp4_fail(UFP4_EFORMAT, "%s (a finished run, by its run.json): its seed cannot be analysed", why);
    snprintf(st->unreadable, sizeof st->unreadable, "%s", why);
    st->n_cells++;
    return 0;
  }
  if (c->val.n) {
    c->last_step = c->val.step[c->val.n - 1];
    c->final = c->val.value[c->val.n - 1];
  }
  st->n_cells++;
  return 0;
}

static int load_folder(study *st, int d, const char *dir) {
  for (int role = 0; role < st->n_roles; role++) {
    if (!st->names[role]) continue;
    char rdir[4200], name[512];
    rpt_recipe_dir_name(st->names[role], name, sizeof name);
    snprintf(rdir, sizeof rdir, "%s/runs/%s", dir, name);
    DIR *dp = opendir(rdir);
    if (!dp) continue; /* this folder has no run of the recipe */
    st->found[role] = 1;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(dp))) {
      long long seed;
      if (!is_seed_dir(e->d_name, &seed)) continue;
      char run[4500];
      snprintf(run, sizeof run, "%s/%s", rdir, e->d_name);
      rc = add_cell(st, d, role, seed, run);
    }
    closedir(dp);
    if (rc) return rc;
  }
  return 0;
}

static int cmp_ll(const void *x, const void *y) {
  const long long a = *(const long long *)x, b = *(const long long *)y;
  return (a > b) - (a < b);
}

static int cmp_int(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

/* The included seeds (a, b, baseline done at every depth), ascending; the others named in
 * r->excluded. below > 0: only the seeds 1..below are looked at (the stage-1 look with --seeds). */
static int pick_seeds(const study *st, ufp4_study_result *r, long long below) {
  long long *all = malloc((st->n_cells + 1) * sizeof *all);
  r->seeds = malloc((st->n_cells + 1) * sizeof *r->seeds);
  if (!all || !r->seeds) {
    free(all);
    return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  }
  size_t n = 0;
  for (size_t i = 0; i < st->n_cells; i++) all[n++] = st->cells[i].seed;
  qsort(all, n, sizeof *all, cmp_ll);
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    if ((i && all[i] == all[i - 1]) || (below > 0 && all[i] > below)) continue;
    const char *why = NULL;
    int at = 0;
    for (int d = 0; d < r->n_depths && !why; d++)
      for (int role = R_A; role <= R_BASE && !why; role++)
        if (!done(st, d, role, all[i])) why = st->names[role], at = r->depth[d];
    if (!why) r->seeds[r->n_seeds++] = all[i];
    else if (len + 80 < sizeof r->excluded)
      len += (size_t)snprintf(r->excluded + len, sizeof r->excluded - len, "%sseed %lld (L=%d: %s not finished)",
                              len ? "; " : "", all[i], at, why);
  }
  free(all);
  return 0;
}

/* With o->seeds = N the included seeds must be exactly 1..N (the registered n): an analysis over
 * another set, e.g. a stage 2 stopped early, is an error, not a smaller result. */
static int check_seeds(const ufp4_study_options *o, const ufp4_study_result *r) {
  int ok = r->n_seeds == (size_t)o->seeds;
  for (size_t s = 0; ok && s < r->n_seeds; s++) ok = r->seeds[s] == (long long)s + 1;
  if (ok) return 0;
  char got[300] = "";
  size_t len = 0;
  for (size_t s = 0; s < r->n_seeds && len + 24 < sizeof got; s++)
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld", s ? " " : "", r->seeds[s]);
  return ufp4_fail(UFP4_EINVAL, "study: --seeds %d: the seeds finished at every depth are not 1..%d but {%s}%s%s",
                   o->seeds, o->seeds, got, r->excluded[0] ? "; left out: " : "", r->excluded);
}

/* Relative difference in pp of roles x - y against the baseline, averaged over depths; NaN when
 * a run is missing. */
static double rel_pp(const study *st, const ufp4_study_result *r, int x, int y, long long seed, int d) {
  const cell *cx = done(st, d, x, seed), *cy = done(st, d, y, seed), *cb = done(st, d, R_BASE, seed);
  if (!cx || !cy || !cb) return NAN;
  (void)r;
  return 100.0 * (cx->final - cy->final) / cb->final;
}

static double depth_mean_pp(const study *st, const ufp4_study_result *r, int x, int y, long long seed) {
  double s = 0;
  for (int d = 0; d < r->n_depths; d++) s += rel_pp(st, r, x, y, seed, d);
  return s / r->n_depths;
}

void study_test_none(ufp4_study_test *t) {
  memset(t, 0, sizeof *t);
  t->p_holm = t->mdd_holm = NAN;
  t->s.mean = t->s.sd = t->s.se = t->s.t = t->s.p = t->s.lo = t->s.hi = t->s.mdd = t->s.alpha = NAN;
}

void study_summarize(const double *v, size_t n, double alpha, double power, ufp4_study_test *t) {
  double *f = malloc((n + 1) * sizeof *f);
  size_t m = 0;
  for (size_t i = 0; f && i < n; i++)
    if (isfinite(v[i])) f[m++] = v[i];
  memset(t, 0, sizeof *t);
  t->p_holm = t->mdd_holm = NAN;
  t->valid = f && m >= 2 && !ufp4_paired_summarize(f, m, LEVEL, alpha, power, &t->s);
  if (!t->valid) {
    study_test_none(t);
    t->s.n = m;
  }
  free(f);
}

double study_mdd_at(const ufp4_study_test *t, double level, double power) {
  if (!t->valid || !isfinite(level)) return NAN;
  return t->s.sd == 0 ? 0 : ufp4_paired_mdd(t->s.sd, t->s.n, level, power);
}

void study_holm(ufp4_study_test **tests, int n, double alpha, double power) {
  int order[64];
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort by p, ties in the given order */
    for (int j = i; j > 0; j--) {
      const double pa = tests[order[j - 1]]->valid ? tests[order[j - 1]]->s.p : 1;
      const double pb = tests[order[j]]->valid ? tests[order[j]]->s.p : 1;
      if (pb >= pa) break;
      const int tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  for (int i = 0; i < n; i++) /* not reached */
    tests[i]->p_holm = tests[i]->mdd_holm = NAN, tests[i]->rejected = 0;
  for (int i = 0; i < n; i++) {
    ufp4_study_test *t = tests[order[i]];
    t->p_holm = alpha / (n - i);
    t->mdd_holm = study_mdd_at(t, t->p_holm, power);
    t->rejected = t->valid && t->s.p <= t->p_holm;
    if (!t->rejected) break;
  }
}

double study_ls_slope(const double *x, const double *y, int n) {
  double mx = 0, my = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) mx += x[i], my += y[i];
  mx /= n;
  my /= n;
  for (int i = 0; i < n; i++) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  return sxx > 0 && isfinite(sxy) ? sxy / sxx : NAN;
}

static double slope_log2(const ufp4_study_result *r, const double *y) {
  double x[UFP4_STUDY_MAX_DEPTHS];
  for (int d = 0; d < r->n_depths; d++) x[d] = log2(r->depth[d]);
  return study_ls_slope(x, y, r->n_depths);
}

/* G_q(s) of one depth: quarter means of L_a - L_b over the evaluations both runs made. */
static void quarters(const study *st, int d, long long seed, double g[4]) {
  const cell *ca = done(st, d, R_A, seed), *cb = done(st, d, R_B, seed);
  double sum[4] = {0}, cnt[4] = {0};
  const long S = st->last[d];
  for (size_t i = 0; ca && cb && i < ca->val.n; i++)
    for (size_t j = 0; j < cb->val.n; j++)
      if (cb->val.step[j] == ca->val.step[i] && ca->val.step[i] > 0) {
        const int q = (int)((4L * ca->val.step[i] + S - 1) / S) - 1; /* step in ((q)S/4, (q+1)S/4] */
        if (q >= 0 && q < 4) sum[q] += ca->val.value[i] - cb->val.value[j], cnt[q]++;
      }
  for (int q = 0; q < 4; q++) g[q] = cnt[q] ? sum[q] / cnt[q] : NAN;
}

static void settledness(const study *st, ufp4_study_result *r, double alpha, double power) {
  const size_t n = r->n_seeds;
  double *diff = malloc((n + 1) * sizeof *diff), *gq = malloc((4 * n + 1) * sizeof *gq);
  for (int d = 0; d < r->n_depths && diff && gq; d++) {
    for (size_t s = 0; s < n; s++) {
      quarters(st, d, r->seeds[s], gq + 4 * s);
      diff[s] = gq[4 * s + 3] - gq[4 * s + 2];
    }
    for (int q = 0; q < 4; q++) {
      double m = 0;
      for (size_t s = 0; s < n; s++) m += gq[4 * s + q];
      r->g_mean[d][q] = n ? m / (double)n : NAN;
    }
    study_summarize(diff, n, alpha, power, &r->settle[d]);
    const ufp4_paired_summary *x = &r->settle[d].s;
    const double bound = fmax(fabs(r->g_mean[d][3]) / 4, SETTLE_FLOOR);
    r->settled[d] = r->settle[d].valid && x->lo <= 0 && x->hi >= 0 && fabs(x->mean) < bound;
  }
  free(diff);
  free(gq);
}

/* The sd of d(s) and the target in pp; with decide (the stage-1 look), the seeds needed. */
static void stage2(const ufp4_study_options *o, ufp4_study_result *r, const double *d1, int decide) {
  const size_t n = r->n_seeds;
  r->sd_pp = n >= 2 ? ufp4_std(d1, n) : NAN;
  r->target_pp = 100.0 * o->target_nats / r->mean_base;
  r->mdd_at_cap = NAN;
  if (!decide) return;
  r->n_needed = (size_t)o->n_min;
  if (!(r->sd_pp > 0)) return;
  size_t need = 0;
  const double a3 = o->alpha / 3;
  /* The search's own limit is far above the cap: it doubles its bracket up to n_max / 2. */
  if (ufp4_paired_n(r->target_pp, r->sd_pp, a3, o->power, 1000000, &need) || need > (size_t)o->n_cap) {
    r->capped = 1;
    r->n_needed = (size_t)o->n_cap;
    r->mdd_at_cap = ufp4_paired_mdd(r->sd_pp, (size_t)o->n_cap, a3, o->power);
  } else if (need > r->n_needed) {
    r->n_needed = need;
  }
}

static int tests(const study *st, const ufp4_study_options *o, ufp4_study_result *r, const double *d1) {
  const size_t n = r->n_seeds;
  double *v = malloc((n + 1) * sizeof *v), y[UFP4_STUDY_MAX_DEPTHS];
  r->per_seed = malloc(((size_t)(3 + r->n_depths + o->n_secondary) * n + 1) * sizeof *r->per_seed);
  if (!v || !r->per_seed) {
    free(v);
    return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  }
  double *const h1 = r->per_seed, *const h2 = h1 + n, *const ctl = h2 + n, *const per_depth = ctl + n,
                *const sec = per_depth + (size_t)r->n_depths * n;
  memcpy(h1, d1, n * sizeof *d1);
  study_summarize(h1, n, o->alpha / 3, o->power, &r->h1);
  for (size_t s = 0; s < n; s++) {
    for (int d = 0; d < r->n_depths; d++) y[d] = rel_pp(st, r, R_A, R_B, r->seeds[s], d);
    h2[s] = slope_log2(r, y);
  }
  study_summarize(h2, n, o->alpha / 3, o->power, &r->h2);
  ufp4_study_test *fam[UFP4_STUDY_MAX_SECONDARY + UFP4_STUDY_MAX_DEPTHS];
  for (int d = 0; d < r->n_depths; d++) {
    double *x = per_depth + (size_t)d * n;
    for (size_t s = 0; s < n; s++) x[s] = rel_pp(st, r, R_A, R_B, r->seeds[s], d);
    study_summarize(x, n, o->alpha, o->power, &r->per_depth[d]);
    fam[d] = &r->per_depth[d];
  }
  study_holm(fam, r->n_depths, o->alpha, o->power);
  r->has_control = o->control != NULL;
  r->noise_floor = NAN;
  for (size_t s = 0; s < n; s++) ctl[s] = NAN;
  if (r->has_control) {
    for (size_t s = 0; s < n; s++) ctl[s] = depth_mean_pp(st, r, R_CONTROL, R_BASE, r->seeds[s]);
    study_summarize(ctl, n, o->alpha, o->power, &r->control);
    r->noise_floor = fabs(r->control.s.mean);
    for (int d = 0; d < r->n_depths; d++) {
      for (size_t s = 0; s < n; s++) v[s] = rel_pp(st, r, R_CONTROL, R_BASE, r->seeds[s], d);
      study_summarize(v, n, o->alpha, o->power, &r->control_depth[d]);
    }
  }
  r->n_secondary = o->n_secondary;
  for (int k = 0; k < o->n_secondary; k++) {
    r->secondary_ref[k] = st->names[R_REF + k];
    double *x = sec + (size_t)k * n;
    for (size_t s = 0; s < n; s++) x[s] = depth_mean_pp(st, r, R_SECONDARY + k, R_REF + k, r->seeds[s]);
    study_summarize(x, n, o->alpha, o->power, &r->secondary[k]);
    fam[k] = &r->secondary[k];
  }
  study_holm(fam, o->n_secondary, o->alpha, o->power);
  free(v);
  return 0;
}

/* The depth series: each recipe's relative error at each depth. */
static void series(const study *st, const ufp4_study_options *o, ufp4_study_result *r) {
  const size_t n = r->n_seeds;
  double *v = malloc((n + 1) * sizeof *v);
  if (!v) return;
  int roles[UFP4_STUDY_MAX_RECIPES], k = 0;
  const int cand[] = {R_A, R_B, R_CONTROL};
  for (int i = 0; i < 3; i++) roles[k++] = cand[i];
  for (int i = 0; i < o->n_secondary; i++) roles[k++] = R_SECONDARY + i, roles[k++] = R_REF + i;
  r->n_recipes = 0;
  for (int i = 0; i < k; i++) {
    const char *name = st->names[roles[i]];
    int dup = !name || !strcmp(name, st->names[R_BASE]);
    for (int j = 0; j < r->n_recipes && !dup; j++) dup = !strcmp(r->recipe[j], name);
    if (dup) continue;
    const int m = r->n_recipes++;
    r->recipe[m] = name;
    for (int d = 0; d < r->n_depths; d++) {
      for (size_t s = 0; s < n; s++) v[s] = rel_pp(st, r, roles[i], R_BASE, r->seeds[s], d);
      study_summarize(v, n, o->alpha, o->power, &r->rel_err[m][d]);
    }
  }
  free(v);
}

static void primary_decisions(const ufp4_study_options *o, ufp4_study_result *r) {
  ufp4_study_test *fam[3] = {&r->h1, &r->h2, &r->h3};
  study_holm(fam, 3, o->alpha, o->power);
  for (int k = 0; k < 2; k++) { /* the IUT compares each arm with H3's level */
    r->h3_a[k].p_holm = r->h3.p_holm;
    r->h3_a[k].mdd_holm = study_mdd_at(&r->h3_a[k], r->h3.p_holm, o->power);
  }
  r->h1_supported = r->h1.rejected && r->h1.s.mean > 0;
  r->h2_supported = r->h2.rejected && r->h2.s.mean > 0;
  r->h3_supported = r->has_h3 && r->h3.rejected && r->h3_a[0].s.hi < 0 && r->h3_a[1].s.hi < 0 &&
                    r->h3_equivalent[0] && r->h3_equivalent[1];
  r->h1_below_noise = r->has_control && isfinite(r->noise_floor) && fabs(r->h1.s.mean) < r->noise_floor;
}

static int setup(study *st, const ufp4_study_folder *f, size_t nf, const ufp4_study_options *o,
                 ufp4_study_result *r) {
  memset(st, 0, sizeof *st);
  st->o = o;
  st->names[R_A] = o->a;
  st->names[R_B] = o->b;
  st->names[R_BASE] = o->baseline;
  st->names[R_CONTROL] = o->control;
  if (!o->a || !o->b || !o->baseline || o->n_secondary < 0 || o->n_secondary > UFP4_STUDY_MAX_SECONDARY)
    return ufp4_fail(UFP4_EINVAL, "study: recipes a, b and the baseline are needed, at most %d secondary",
                     UFP4_STUDY_MAX_SECONDARY);
  for (int k = 0; k < o->n_secondary; k++) {
    st->names[R_SECONDARY + k] = o->secondary[k];
    st->names[R_REF + k] = o->secondary_refs[k] ? o->secondary_refs[k] : o->secondary_ref ? o->secondary_ref : o->a;
  }
  st->n_roles = N_ROLES;
  if (!(o->alpha > 0 && o->alpha < 1 && o->power > o->alpha && o->power < 1 && o->margin > 0 &&
        o->target_nats > 0 && o->n_min >= 2 && o->n_cap >= o->n_min))
    return ufp4_fail(UFP4_EINVAL, "study: alpha, power, margin, target or the seed bounds out of range");
  for (size_t i = 0; i < nf; i++) {
    int seen = 0;
    for (int d = 0; d < r->n_depths; d++) seen |= r->depth[d] == f[i].depth;
    if (f[i].depth < 1) return ufp4_fail(UFP4_EINVAL, "study: %s: depth %d is not positive", f[i].dir, f[i].depth);
    if (!seen && r->n_depths == UFP4_STUDY_MAX_DEPTHS)
      return ufp4_fail(UFP4_EINVAL, "study: more than %d depths", UFP4_STUDY_MAX_DEPTHS);
    if (!seen) r->depth[r->n_depths++] = f[i].depth;
  }
  if (r->n_depths < 1) return ufp4_fail(UFP4_EINVAL, "study: no --depth folder");
  qsort(r->depth, (size_t)r->n_depths, sizeof r->depth[0], cmp_int);
  for (size_t i = 0; i < nf; i++) {
    struct stat sb;
    if (stat(f[i].dir, &sb) || !S_ISDIR(sb.st_mode))
      return ufp4_fail(UFP4_EINVAL, "study: %s: not a folder", f[i].dir);
    int d = 0;
    while (r->depth[d] != f[i].depth) d++;
    int rc = load_folder(st, d, f[i].dir);
    if (rc) return rc;
  }
  /* A recipe named on the command line with no run anywhere is a misspelling, not a result. */
  for (int role = 0; role < st->n_roles; role++) {
    const char *name = st->names[role];
    if (!name || st->found[role]) continue;
    char dir_name[512];
    rpt_recipe_dir_name(name, dir_name, sizeof dir_name);
    return ufp4_fail(UFP4_EINVAL, "study: recipe '%s' has no runs/%s folder in any of the %zu --depth folders (%s%s)%s",
                     name, dir_name, nf, f[0].dir, nf > 1 ? ", ..." : "",
                     role == R_CONTROL ? "; --control none runs the analysis without a control" : "");
  }
  for (size_t i = 0; i < st->n_cells; i++)
    if (st->cells[i].last_step > st->last[st->cells[i].d]) st->last[st->cells[i].d] = st->cells[i].last_step;
  return 0;
}

/* Every figure NaN and every test invalid until computed. */
static void result_none(ufp4_study_result *r) {
  ufp4_study_test *all[] = {&r->h1, &r->h2, &r->control, &r->h3, &r->h3_a[0], &r->h3_a[1], &r->h3_b[0],
                            &r->h3_b[1], &r->h3_diff[0], &r->h3_diff[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) study_test_none(all[i]);
  for (int d = 0; d < UFP4_STUDY_MAX_DEPTHS; d++) {
    study_test_none(&r->per_depth[d]);
    study_test_none(&r->settle[d]);
    study_test_none(&r->control_depth[d]);
    for (int q = 0; q < 4; q++) r->g_mean[d][q] = NAN;
  }
  for (int k = 0; k < UFP4_STUDY_MAX_SECONDARY; k++) study_test_none(&r->secondary[k]);
  r->mean_base = r->noise_floor = r->h3_p = r->sd_pp = r->target_pp = r->mdd_at_cap = NAN;
}

/* The commits of the runs that enter the analysis (the included seeds' finished runs), distinct,
 * in the order met. */
static void binaries(const study *st, ufp4_study_result *r) {
  size_t len = 0;
  int full = 0;
  for (size_t s = 0; s < r->n_seeds; s++)
    for (int d = 0; d < r->n_depths; d++)
      for (int role = 0; role < st->n_roles; role++) {
        const cell *c = done(st, d, role, r->seeds[s]);
        const char *id = c && c->commit[0] ? c->commit : c ? "unknown" : NULL;
        if (!id) continue;
        const size_t n = strlen(id);
        int seen = 0;
        for (const char *p = r->binaries; !seen && (p = strstr(p, id)); p += n)
          seen = (p == r->binaries || p[-1] == ' ') && (p[n] == ',' || !p[n]);
        if (seen || full) continue;
        /* room is kept for ", ...", which says that more exist once the list is full */
        if (len + n + 2 + 6 < sizeof r->binaries)
          len += (size_t)snprintf(r->binaries + len, sizeof r->binaries - len, "%s%s", len ? ", " : "", id);
        else
          full = 1, snprintf(r->binaries + len, sizeof r->binaries - len, ", ...");
      }
}

int ufp4_study_analyze(const ufp4_study_folder *folders, size_t n_folders, const ufp4_study_options *o, int sd_only,
                       ufp4_study_result **out) {
  *out = NULL;
  ufp4_study_result *r = calloc(1, sizeof *r);
  if (!r) return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  result_none(r);
  study st;
  int rc = setup(&st, folders, n_folders, o, r);
  /* The stage-1 look with --seeds N looks at seeds 1..N only, so that it can be made again, with
   * the same result, after stage 2 has added seeds to the same folders. */
  if (!rc) rc = pick_seeds(&st, r, sd_only ? o->seeds : 0);
  if (!rc) snprintf(r->unreadable, sizeof r->unreadable, "%s", st.unreadable);
  if (!rc && r->n_seeds < 2)
    rc = ufp4_fail(UFP4_EINVAL, "study: %zu seed(s) finished at every depth; at least 2 are needed%s%s", r->n_seeds,
                   r->excluded[0] ? ": " : "", r->excluded);
  if (!rc && o->seeds > 0) rc = check_seeds(o, r);
  double *d1 = rc ? NULL : malloc(r->n_seeds * sizeof *d1);
  if (!rc && !d1) rc = ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  if (!rc) {
    double base = 0;
    for (size_t s = 0; s < r->n_seeds; s++) {
      d1[s] = depth_mean_pp(&st, r, R_A, R_B, r->seeds[s]);
      for (int d = 0; d < r->n_depths; d++) base += done(&st, d, R_BASE, r->seeds[s])->final;
    }
    r->mean_base = base / ((double)r->n_seeds * r->n_depths);
    for (int d = 0; d < r->n_depths; d++) r->last_step[d] = st.last[d];
    binaries(&st, r);
    stage2(o, r, d1, sd_only);
    if (!sd_only) {
      rc = tests(&st, o, r, d1);
      series(&st, o, r);
      settledness(&st, r, o->alpha, o->power);
      if (!rc && o->drift_dir) rc = study_h3(o, r);
      if (!rc) primary_decisions(o, r);
    }
  }
  free(d1);
  for (size_t i = 0; i < st.n_cells; i++) free(st.cells[i].val.step), free(st.cells[i].val.value);
  free(st.cells);
  if (rc) {
    ufp4_study_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

void ufp4_study_free(ufp4_study_result *r) {
  if (!r) return;
  free(r->seeds);
  free(r->h3_seed_slopes);
  free(r->h3_curves);
  free(r->per_seed);
  free(r);
}
