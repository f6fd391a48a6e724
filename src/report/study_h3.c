/* The depth study's H3 (ufp4/study.h): each seed's drift.json, measured by `ufp4 drift --mode both`
 * on the baseline's final checkpoint, gives the primary slopes (the drift's own log_ratio_slope
 * means) and, from its per-batch values, the secondary measures and the per-block curves. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_file.h"
#include "report/study_internal.h"
#include "ufp4/error.h"

#define N_CURVES 4 /* forward ratio, forward cosine, dX ratio, dX cosine */
#define MAX_BLOCKS 4096

/* The layout every drift file must share, fixed by the first one read. */
typedef struct {
  int L;        /* blocks; -1 until the first file */
  long batches;
  int n_kinds;  /* projection kinds, in the order of the first file's weights */
  char kind[UFP4_STUDY_MAX_PROJ_KINDS][64];
} layout;

/* What one seed's drift.json gives for recipes a (0) and b (1). */
typedef struct {
  double prim[2][2][3];                       /* [recipe][forward, dX][mean, ci_lo, ci_hi] */
  double sec[2][UFP4_STUDY_MAX_H3_SECONDARY]; /* [recipe][measure]: mean over batches of the slope */
  double *curve;                              /* [N_CURVES][2][L + 1]: the point means */
} seed_drift;

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static double num_or_nan(const cJSON *x) { return cJSON_IsNumber(x) ? x->valuedouble : NAN; }

/* ci.values: exactly nb numbers (null, a NaN the drift wrote, becomes NaN) into out. */
static int batch_values(const cJSON *ci, long nb, double *out, const char *path, const char *what) {
  const cJSON *v = get(ci, "values");
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != nb)
    return ufp4_fail(UFP4_EFORMAT, "%s: %s: \"values\" is not a list of the %ld batches", path, what, nb);
  long i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, v) {
    if (!cJSON_IsNumber(x) && !cJSON_IsNull(x))
      return ufp4_fail(UFP4_EFORMAT, "%s: %s: a batch value is not a number", path, what);
    out[i++] = num_or_nan(x);
  }
  return 0;
}

/* The mean over batches of the least-squares slope of ln vals[p][b] against x[p], p < P. A
 * non-positive or non-finite value makes its batch's slope, and so the mean, NaN. */
static double mean_log_slope(const double *x, const double *vals, int P, long nb, double *y) {
  double sum = 0;
  for (long b = 0; b < nb; b++) {
    for (int p = 0; p < P; p++) {
      const double v = vals[(long)p * nb + b];
      y[p] = v > 0 && isfinite(v) ? log(v) : NAN;
    }
    sum += study_ls_slope(x, y, P);
  }
  return sum / (double)nb;
}

/* Scratch for one measure: P points of nb batches, their x and one batch's y. */
typedef struct {
  double *vals, *x, *y;
} scratch;

/* The slope measure over points[first..L] of ci_key, x = p (forward) or L - p (reverse). */
static int points_slope(const cJSON *points, const char *ci_key, int first, int reverse, const layout *ly,
                        scratch *w, double *out, const char *path) {
  int P = 0;
  for (int p = first; p <= ly->L; p++) {
    char what[96];
    snprintf(what, sizeof what, "point %d, %s", p, ci_key);
    int rc = batch_values(get(cJSON_GetArrayItem(points, p), ci_key), ly->batches, w->vals + (long)P * ly->batches,
                          path, what);
    if (rc) return rc;
    w->x[P++] = reverse ? ly->L - p : p;
  }
  *out = mean_log_slope(w->x, w->vals, P, ly->batches, w->y);
  return 0;
}

/* "model.layers.<i>.<rest>" with <rest> ending in "_proj.weight": 1 with i and rest. */
static int proj_name(const char *name, int *block, const char **rest) {
  static const char pre[] = "model.layers.", suf[] = "_proj.weight";
  if (strncmp(name, pre, sizeof pre - 1)) return 0;
  char *end;
  const long i = strtol(name + sizeof pre - 1, &end, 10);
  if (end == name + sizeof pre - 1 || *end != '.' || i < 0 || i >= MAX_BLOCKS) return 0;
  const size_t n = strlen(end + 1);
  if (n < sizeof suf - 1 || strcmp(end + 1 + n - (sizeof suf - 1), suf)) return 0;
  *block = (int)i;
  *rest = end + 1;
  return 1;
}

/* The dW measures of every projection kind: sec[2 + 2k] ratio, sec[3 + 2k] cosine. */
static int weight_slopes(const cJSON *weights, layout *ly, int first_file, scratch *w, double *sec,
                         const char *path) {
  const long nb = ly->batches;
  int *seen = calloc((size_t)UFP4_STUDY_MAX_PROJ_KINDS * (size_t)ly->L, sizeof *seen);
  if (!seen) return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  /* vals holds, per kind, [ratio, cosine][block][batch]: 2 L nb doubles at kind * 2 L nb */
  int rc = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, weights) {
    const cJSON *nm = get(it, "name");
    int blk, k = 0;
    const char *rest;
    if (!cJSON_IsString(nm) || !proj_name(nm->valuestring, &blk, &rest)) continue;
    if (blk >= ly->L) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: weight %s: block %d of a %d-block model", path, nm->valuestring, blk, ly->L);
      break;
    }
    while (k < ly->n_kinds && strcmp(ly->kind[k], rest)) k++;
    if (k == ly->n_kinds) {
      if (!first_file) {
        rc = ufp4_fail(UFP4_EFORMAT, "%s: weight %s: a projection the first drift file does not have", path,
                       nm->valuestring);
        break;
      }
      if (ly->n_kinds == UFP4_STUDY_MAX_PROJ_KINDS || strlen(rest) >= sizeof ly->kind[0]) {
        rc = ufp4_fail(UFP4_EFORMAT, "%s: more than %d projection kinds per block, or a name too long (%s)", path,
                       UFP4_STUDY_MAX_PROJ_KINDS, nm->valuestring);
        break;
      }
      snprintf(ly->kind[ly->n_kinds++], sizeof ly->kind[0], "%s", rest);
    }
    if (seen[k * ly->L + blk]++) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: weight %s listed twice", path, nm->valuestring);
      break;
    }
    double *base = w->vals + (long)k * 2 * ly->L * nb;
    rc = batch_values(get(it, "norm_ratio_ci"), nb, base + (long)blk * nb, path, nm->valuestring);
    if (!rc) rc = batch_values(get(it, "cosine_ci"), nb, base + (long)(ly->L + blk) * nb, path, nm->valuestring);
    if (rc) break;
  }
  if (!rc && !ly->n_kinds) rc = ufp4_fail(UFP4_EFORMAT, "%s: no dW of a projection (model.layers.<i>.*_proj.weight)", path);
  for (int k = 0; !rc && k < ly->n_kinds; k++)
    for (int b = 0; b < ly->L; b++)
      if (!seen[k * ly->L + b]) {
        rc = ufp4_fail(UFP4_EFORMAT, "%s: no dW of model.layers.%d.%s", path, b, ly->kind[k]);
        break;
      }
  free(seen);
  if (rc) return rc;
  for (int b = 0; b < ly->L; b++) w->x[b] = ly->L - 1 - b;
  for (int k = 0; k < ly->n_kinds; k++)
    for (int c = 0; c < 2; c++)
      sec[2 + 2 * k + c] = mean_log_slope(w->x, w->vals + (long)(2 * k + c) * ly->L * nb, ly->L, nb, w->y);
  return 0;
}

/* One recipe's entry of a drift.json: its primary slopes, secondary measures and curves. */
static int recipe_entry(const cJSON *it, layout *ly, int first_file, int role, scratch *w, seed_drift *sd,
                        const char *path) {
  const cJSON *fwd = get(it, "layers"), *bw = get(it, "backward");
  const cJSON *bl = get(bw, "layers");
  const cJSON *slope[2] = {get(it, "log_ratio_slope"), get(bw, "log_ratio_slope")};
  for (int k = 0; k < 2; k++) {
    /* null is a slope the drift found undefined (a ratio not positive in some batch): NaN, so the
     * seed leaves that test and n shows it; a missing slope is a file of another mode */
    sd->prim[role][k][0] = num_or_nan(get(slope[k], "mean"));
    sd->prim[role][k][1] = num_or_nan(get(slope[k], "ci_low"));
    sd->prim[role][k][2] = num_or_nan(get(slope[k], "ci_high"));
    const cJSON *mean = get(slope[k], "mean");
    if (!cJSON_IsNumber(mean) && !cJSON_IsNull(mean))
      return ufp4_fail(UFP4_EFORMAT,
                       "%s: recipe %s lacks the forward or backward log_ratio_slope (run ufp4 drift --mode both)",
                       path, get(it, "recipe")->valuestring);
  }
  if (!cJSON_IsArray(fwd) || !cJSON_IsArray(bl) || cJSON_GetArraySize(fwd) != ly->L + 1 ||
      cJSON_GetArraySize(bl) != ly->L + 1 || !cJSON_IsArray(get(bw, "weights")))
    return ufp4_fail(UFP4_EFORMAT, "%s: recipe %s: the forward and backward \"layers\" are not %d points each, or "
                                   "there are no \"weights\"",
                     path, get(it, "recipe")->valuestring, ly->L + 1);
  int rc = points_slope(fwd, "cosine_ci", 1, 0, ly, w, &sd->sec[role][0], path);
  if (!rc) rc = points_slope(bl, "cosine_ci", 0, 1, ly, w, &sd->sec[role][1], path);
  if (!rc) rc = weight_slopes(get(bw, "weights"), ly, first_file && role == 0, w, sd->sec[role], path);
  const cJSON *pts[N_CURVES] = {fwd, fwd, bl, bl};
  static const char *const key[N_CURVES] = {"norm_ratio_ci", "cosine_ci", "norm_ratio_ci", "cosine_ci"};
  for (int c = 0; !rc && c < N_CURVES; c++)
    for (int p = 0; p <= ly->L; p++)
      sd->curve[((long)c * 2 + role) * (ly->L + 1) + p] = num_or_nan(get(get(cJSON_GetArrayItem(pts[c], p), key[c]), "mean"));
  return rc;
}

/* Whether `path` has a folder named exactly `name`. */
static int has_component(const char *path, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = path; (p = strstr(p, name)); p += n)
    if ((p == path || p[-1] == '/') && (p[n] == '/' || !p[n])) return 1;
  return 0;
}

/* The checks of a drift.json's head, and the layout it fixes (the first file) or must match. */
static int check_head(const cJSON *j, long long seed, int deepest, layout *ly, const char *path) {
  const cJSON *mode = get(j, "mode"), *ck = get(j, "checkpoint"), *nb = get(j, "batches");
  if (!cJSON_IsString(mode) || strcmp(mode->valuestring, "both"))
    return ufp4_fail(UFP4_EFORMAT, "%s: not measured with --mode both", path);
  char seed_dir[32];
  snprintf(seed_dir, sizeof seed_dir, "seed%lld", seed);
  if (!cJSON_IsString(ck) || !has_component(ck->valuestring, seed_dir))
    return ufp4_fail(UFP4_EFORMAT, "%s: its checkpoint (%s) is not in a %s folder: another seed's model?", path,
                     cJSON_IsString(ck) ? ck->valuestring : "none", seed_dir);
  if (!cJSON_IsNumber(nb) || nb->valuedouble < 2 || nb->valuedouble > 1e7)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"batches\" is not a count of at least 2", path);
  const cJSON *first = cJSON_GetArrayItem(get(j, "recipes"), 0);
  const int L = cJSON_GetArraySize(get(first, "layers")) - 1;
  if (L < 2 || L > MAX_BLOCKS) return ufp4_fail(UFP4_EFORMAT, "%s: the forward \"layers\" are not 3 or more points", path);
  if (L != deepest)
    return ufp4_fail(UFP4_EFORMAT, "%s: a %d-block checkpoint, where H3 measures the deepest depth's (%d blocks)", path, L,
                     deepest);
  if (ly->L < 0) {
    ly->L = L;
    ly->batches = (long)nb->valuedouble;
    return 0;
  }
  if (L != ly->L || (long)nb->valuedouble != ly->batches)
    return ufp4_fail(UFP4_EFORMAT, "%s: %d blocks and %ld batches, where the first drift file has %d and %ld", path, L,
                     (long)nb->valuedouble, ly->L, ly->batches);
  return 0;
}

static int read_seed(const ufp4_study_options *o, long long seed, int deepest, layout *ly, int first_file,
                     seed_drift *sd, scratch *w, size_t *scratch_doubles) {
  char path[4200];
  snprintf(path, sizeof path, "%s/seed%lld/drift.json", o->drift_dir, seed);
  cJSON *j;
  int rc = ufp4_json_read_object(path, 256u << 20, "a drift measurement", NULL, &j);
  if (rc) return rc;
  rc = check_head(j, seed, deepest, ly, path);
  /* scratch: the dW of every kind, [kinds][2][L][batches], is the largest need */
  const size_t need = (size_t)UFP4_STUDY_MAX_PROJ_KINDS * 2 * (size_t)(ly->L + 1) * (size_t)ly->batches;
  if (!rc && need > *scratch_doubles) {
    double *v = realloc(w->vals, need * sizeof *v), *x = realloc(w->x, (size_t)(ly->L + 1) * sizeof *x);
    if (v) w->vals = v;
    if (x) w->x = x;
    double *y = x ? realloc(w->y, (size_t)(ly->L + 1) * sizeof *y) : NULL;
    if (y) w->y = y;
    if (!v || !x || !y) rc = ufp4_fail(UFP4_ENOMEM, "study: out of memory");
    else *scratch_doubles = need;
  }
  if (!rc && !(sd->curve = malloc((size_t)N_CURVES * 2 * (size_t)(ly->L + 1) * sizeof *sd->curve)))
    rc = ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  const char *name[2] = {o->a, o->b};
  for (int role = 0; role < 2 && !rc; role++) {
    const cJSON *it, *found = NULL;
    cJSON_ArrayForEach(it, get(j, "recipes")) {
      const cJSON *rn = get(it, "recipe");
      if (cJSON_IsString(rn) && !strcmp(rn->valuestring, name[role])) found = it;
    }
    if (!found) rc = ufp4_fail(UFP4_EFORMAT, "%s: no recipe \"%s\" in \"recipes\"", path, name[role]);
    else rc = recipe_entry(found, ly, first_file, role, w, sd, path);
  }
  cJSON_Delete(j);
  return rc;
}

/* Every included seed needs its drift.json: H3 over fewer seeds than H1 and H2 would be another
 * analysis than the registered one, so a missing file is an error naming the seeds. */
static int files_present(const ufp4_study_options *o, const ufp4_study_result *r) {
  struct stat sb;
  if (stat(o->drift_dir, &sb) || !S_ISDIR(sb.st_mode))
    return ufp4_fail(UFP4_EINVAL, "study: --drift %s: not a folder", o->drift_dir);
  char missing[400] = "";
  size_t len = 0, n_missing = 0;
  for (size_t s = 0; s < r->n_seeds; s++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/seed%lld/drift.json", o->drift_dir, r->seeds[s]);
    if (!stat(path, &sb)) continue;
    n_missing++;
    if (len + 24 < sizeof missing)
      len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%lld", len ? ", " : "", r->seeds[s]);
  }
  if (!n_missing) return 0;
  return ufp4_fail(UFP4_EINVAL,
                   "study: --drift %s: no seed<N>/drift.json for %zu of the %zu included seeds (seed %s); measure "
                   "them (ufp4 drift --mode both on each seed's final baseline checkpoint, as scripts/study.sh does)",
                   o->drift_dir, n_missing, r->n_seeds, missing);
}

/* a, b and a - b of one measure over the seeds (v: n values of a, then n of b, then n scratch). */
static void measure_tests(const ufp4_study_options *o, double alpha, size_t n, double *v, ufp4_study_test *a,
                          ufp4_study_test *b, ufp4_study_test *diff, int *equivalent) {
  for (size_t s = 0; s < n; s++) v[2 * n + s] = v[s] - v[n + s];
  study_summarize(v, n, alpha, o->power, a);
  study_summarize(v + n, n, alpha, o->power, b);
  study_summarize(v + 2 * n, n, alpha, o->power, diff);
  const double m = o->margin * fabs(a->s.mean);
  *equivalent = b->valid && b->s.lo > -m && b->s.hi < m;
}

/* The tests, from the seeds' drift. */
static int tests(const ufp4_study_options *o, ufp4_study_result *r, const layout *ly, const seed_drift *sd) {
  const size_t n = r->n_seeds;
  const int P = ly->L + 1;
  double *v = malloc((3 * n + 1) * sizeof *v);
  r->h3_seed_slopes = malloc(n * 12 * sizeof *r->h3_seed_slopes);
  r->h3_curves = malloc((size_t)N_CURVES * 2 * (size_t)P * 3 * sizeof *r->h3_curves);
  if (!v || !r->h3_seed_slopes || !r->h3_curves) {
    free(v);
    return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  }
  r->h3_layers = ly->L;
  r->h3_batches = ly->batches;
  r->h3_seeds = n;
  for (size_t s = 0; s < n; s++) memcpy(r->h3_seed_slopes + 12 * s, sd[s].prim, sizeof sd[s].prim);
  for (int k = 0; k < 2; k++) {
    for (size_t s = 0; s < n; s++) v[s] = sd[s].prim[0][k][0], v[n + s] = sd[s].prim[1][k][0];
    measure_tests(o, o->alpha / 3, n, v, &r->h3_a[k], &r->h3_b[k], &r->h3_diff[k], &r->h3_equivalent[k]);
  }
  r->has_h3 = r->h3_a[0].valid && r->h3_a[1].valid;
  r->h3 = r->h3_a[0].s.p >= r->h3_a[1].s.p ? r->h3_a[0] : r->h3_a[1]; /* the IUT: the larger p */
  r->h3.valid = r->has_h3;
  r->h3_p = r->has_h3 ? r->h3.s.p : NAN;
  /* the secondary family */
  r->n_h3_secondary = 2 + 2 * ly->n_kinds;
  ufp4_study_test *fam[UFP4_STUDY_MAX_H3_SECONDARY];
  for (int m = 0; m < r->n_h3_secondary; m++) {
    ufp4_study_h3_measure *x = &r->h3_secondary[m];
    if (m < 2) snprintf(x->name, sizeof x->name, "%s cosine", m ? "dX" : "forward");
    else
      snprintf(x->name, sizeof x->name, "dW %s %.*s", m % 2 ? "cosine" : "ratio",
               (int)(strlen(ly->kind[(m - 2) / 2]) - strlen(".weight")), ly->kind[(m - 2) / 2]);
    for (size_t s = 0; s < n; s++) v[s] = sd[s].sec[0][m], v[n + s] = sd[s].sec[1][m];
    measure_tests(o, o->alpha, n, v, &x->a, &x->b, &x->diff, &x->b_equivalent);
    fam[m] = &x->a;
  }
  study_holm(fam, r->n_h3_secondary, o->alpha, o->power);
  /* the curves: per block, the seeds' point means */
  for (int c = 0; c < N_CURVES; c++)
    for (int role = 0; role < 2; role++)
      for (int p = 0; p < P; p++) {
        for (size_t s = 0; s < n; s++) v[s] = sd[s].curve[((long)c * 2 + role) * P + p];
        ufp4_study_test t;
        study_summarize(v, n, o->alpha, o->power, &t);
        double *out = r->h3_curves + (((long)c * 2 + role) * P + p) * 3;
        out[0] = t.s.mean, out[1] = t.s.lo, out[2] = t.s.hi;
      }
  free(v);
  return 0;
}

int study_h3(const ufp4_study_options *o, ufp4_study_result *r) {
  int rc = files_present(o, r);
  if (rc) return rc;
  const size_t n = r->n_seeds;
  seed_drift *sd = calloc(n + 1, sizeof *sd);
  layout ly = {.L = -1};
  scratch w = {0};
  size_t have = 0;
  if (!sd) return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  for (size_t s = 0; s < n && !rc; s++) rc = read_seed(o, r->seeds[s], r->depth[r->n_depths - 1], &ly, s == 0, &sd[s], &w, &have);
  if (!rc) rc = tests(o, r, &ly, sd);
  for (size_t s = 0; s < n; s++) free(sd[s].curve);
  free(sd);
  free(w.vals), free(w.x), free(w.y);
  return rc;
}
