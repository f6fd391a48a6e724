/* The depth study's analysis (ufp4/study.h) on compare folders whose figures are known exactly.
 *
 * Depths 2, 4, 8, 16 (x = log2 L = 1..4), seeds 1-3 finished, seed 4 still running at depth 4.
 * The losses differ by seed and depth, so a wrong pairing or denominator changes the figures:
 *   L_bf16(s, x) = 4 + 0.1 s + 0.05 (x - 1)
 *   L_ufp4       = L_bf16 + 0.02 s + 0.01 x
 *   L_e2m1       = L_ufp4 + D(s, x) L_bf16 / 100,  D(s, x) = A(x) + (s - 2) V(x)
 *   A = 1, 2, 2.5, 4.5 (not a line);  V = -0.15, 0.25, 0.65, 1.05 (mean 0.45, slope 0.4)
 * Over seeds (s - 2 = -1, 0, 1), a mean is A's and an sd is V's, so
 *   H1: d(s) = mean_x D: mean 2.5, sd 0.45      H2: least-squares slope on x = 1..4: mean 1.1
 *       (Sxy / Sxx = 5.5 / 5; the end points alone would give 1.1667), sd 0.4
 *   per depth: mean A(x), sd |V(x)|
 * The p-values come from the closed-form CDF of 2 degrees of freedom, P(|T| > t) =
 * 1 - t / sqrt(2 + t^2), the intervals from the printed t_{0.975, 2}.
 * H3 (drift of the 16-block checkpoints, 2 batches): e2m1's forward slopes -0.02 + 0.001 (s - 2)... see
 * write_drift. p(H3) < p(H1) < p(H2), the reverse of the order the family is given in, so Holm
 * must sort: H3 at 0.05/3, H1 at 0.05/2, H2 at 0.05, all rejected.
 * Settledness: at depth 4, quarters 1-3 of L_e2m1 - L_ufp4 are 0.05 + 0.001 s nats lower than the
 * final gap (not settled); the other depths are flat (settled). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "report/study_internal.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/study.h"

static char root[] = "/tmp/ufp4_test_study_XXXXXX";
#define T975_DF2 4.302652729749464 /* t_{0.975, 2}, from a printed table */
#define S_LAST 400
#define N_DEPTHS 4
#define DL 16 /* blocks of the drift checkpoints: the deepest depth */
#define NB 2 /* batches of a drift measurement */

static const int DEPTH[N_DEPTHS] = {2, 4, 8, 16};
static const double A[N_DEPTHS] = {1, 2, 2.5, 4.5}, V[N_DEPTHS] = {-0.15, 0.25, 0.65, 1.05};

static double p_df2(double t) { return 1 - fabs(t) / sqrt(2 + t * t); }

static double bf16_loss(int s, int x) { return 4 + 0.1 * s + 0.05 * (x - 1); }
static double ufp4_loss(int s, int x) { return bf16_loss(s, x) + 0.02 * s + 0.01 * x; }
static double d_pp(int s, int x) { return A[x - 1] + (s - 2) * V[x - 1]; }
static double gap_nats(int s, int x) { return d_pp(s, x) * bf16_loss(s, x) / 100; }

static void write_text(const char *path, const char *text) {
  assert_int_equal(ufp4_write_file_atomic(path, text, strlen(text)), 0);
}

typedef struct {
  int x, seed;
  const char *recipe;
} vctx;

static double val_of(int step, const vctx *v) {
  const int s = v->seed, x = v->x;
  const double b = bf16_loss(s, x);
  if (!strcmp(v->recipe, "bf16")) return b;
  if (!strcmp(v->recipe, "ufp4")) return ufp4_loss(s, x);
  if (!strcmp(v->recipe, "fp32")) return b * (1 + 0.001 + 0.0001 * (s - 2)); /* 0.1 + 0.01 (s - 2) pp */
  double gap = gap_nats(s, x);
  if (x == 2 && step <= 300) gap -= 0.05 + 0.001 * s;
  const double e2m1 = ufp4_loss(s, x) + gap;
  if (!strcmp(v->recipe, "nvfp4")) return e2m1 + 0.001 * s * b; /* nvfp4 - e2m1 = 0.1 s pp */
  return e2m1;
}

/* A run with val losses at steps 50..last (every 50), one train line and its run.json. */
static void write_run(const char *folder, const vctx *v, int last, const char *state, const char *commit) {
  char dir[1024], path[1100], buf[8192];
  snprintf(dir, sizeof dir, "%s/runs/%s/seed%d", folder, v->recipe, v->seed);
  assert_int_equal(ufp4_mkdirs(dir), 0);
  size_t n = (size_t)snprintf(buf, sizeof buf, "{\"step\":1,\"loss\":7.5}\n");
  for (int s = 50; s <= last; s += 50)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"step\":%d,\"val_loss\":%.17g}\n", s, val_of(s, v));
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  write_text(path, buf);
  snprintf(path, sizeof path, "%s/run.json", dir);
  snprintf(buf, sizeof buf, "{\"commit\":\"%s\",\"state\":\"%s\",\"steps_done\":%d,\"skipped_steps\":0}", commit, state,
           last);
  write_text(path, buf);
}

static void depth_dir(char *out, size_t n, int x) { snprintf(out, n, "%s/L%d", root, DEPTH[x - 1]); }

static void make_depth(int x) {
  char folder[1024];
  depth_dir(folder, sizeof folder, x);
  static const char *const recipes[] = {"bf16", "ufp4", "fp32", "e2m1", "nvfp4"};
  for (int s = 1; s <= 4; s++)
    for (int k = 0; k < 5; k++) {
      const vctx v = {x, s, recipes[k]};
      const int running = s == 4 && x == 2 && k == 3; /* seed 4's e2m1 at depth 4: at step 200 */
      /* one run resumed by a second binary: the list of binaries names both */
      const char *commit = s == 1 && x == 1 && k == 3 ? "def+abc" : "abc";
      write_run(folder, &v, running ? 200 : S_LAST, running ? "running" : "finished", commit);
    }
}

/* ---- drift.json: every measure's per-batch values are exp(g x + off_b), so ln of them has slope g
 * on the x the registration gives it exactly, in every batch. Point 0 of the forward is the exact
 * embedding (1), which a slope over l = 1..L leaves out, and off_b != 0 makes that matter. */

static double off(int b) { return 0.001 * (b + 1); }

/* The secondary measure m's slope (0 forward cosine, 1 dX cosine, 2/3 q_proj ratio/cosine, 4/5
 * down_proj ratio/cosine) of recipe role (0 e2m1, 1 ufp4) at seed s. */
static double sec_sd(int m) { return 0.001 * (m + 1) * (1 + 0.5 * (m % 3)); } /* t = 17.3, 11.5, 8.7, ... */
static double sec_slope(int role, int s, int m) {
  const double a = -0.01 * (m + 1) - sec_sd(m) * (s - 2);
  if (role == 0) return a;
  return m == 1 ? a / 2 : 0.0002 * (m + 1) * (s - 2); /* ufp4: near 0, but half of e2m1's for the dX cosine */
}
/* The primary slopes (drift's own log_ratio_slope means): e2m1 forward t = 34.6, dX t = 21.7 (the
 * IUT's p); ufp4 0 -+ a little. */
static double prim_slope(int role, int s, int dx) {
  if (role == 0) return dx ? -0.01 + 0.0008 * (s - 2) : -0.02 + 0.001 * (s - 2);
  return (dx ? 0.0005 : 0.001) * (s - 2);
}

static cJSON *ci(double mean, const double *values) {
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "mean", mean);
  cJSON_AddItemToObject(c, "values", cJSON_CreateDoubleArray(values, NB));
  return c;
}

static cJSON *slope_ci(double mean) {
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "mean", mean);
  cJSON_AddNumberToObject(c, "ci_low", mean - 0.001);
  cJSON_AddNumberToObject(c, "ci_high", mean + 0.001);
  return c;
}

/* A point {"layer", "norm_ratio_ci", "cosine_ci"} or {"name", ...}; the cosine follows g on x. */
static cJSON *point(const char *name, int layer, double ratio_mean, double ratio_g, double cos_g, double x, int exact) {
  cJSON *p = cJSON_CreateObject();
  if (name) cJSON_AddStringToObject(p, "name", name);
  else cJSON_AddNumberToObject(p, "layer", layer);
  double r[NB], c[NB];
  for (int b = 0; b < NB; b++) {
    r[b] = exact ? 1 : exp(ratio_g * x + off(b));
    c[b] = exact ? 1 : exp(cos_g * x + off(b));
  }
  cJSON_AddItemToObject(p, "norm_ratio_ci", ci(ratio_mean, r));
  cJSON_AddItemToObject(p, "cosine_ci", ci(c[0], c));
  return p;
}

typedef struct {
  const char *mode;
  int seed_dir;   /* the seed named in the checkpoint path */
  int batches;    /* the "batches" field */
  int backward;   /* 0: the backward object left out */
  int no_down;    /* 1: no down_proj weights */
  int blocks;     /* the model's blocks */
  int bad_q_cos;  /* 1: e2m1's q_proj cosine of block 0 is -0.5 in batch 1 */
  int null_slope; /* 1: e2m1's forward log_ratio_slope mean is null (undefined) */
} drift_shape;

static void write_drift_shape(int seed, drift_shape sh) {
  cJSON *j = cJSON_CreateObject();
  char ck[256];
  snprintf(ck, sizeof ck, "reports/study/L16/runs/bf16/seed%d/ckpt/step_00002000", sh.seed_dir);
  cJSON_AddStringToObject(j, "checkpoint", ck);
  cJSON_AddNumberToObject(j, "batches", sh.batches);
  cJSON_AddNumberToObject(j, "batch", 4);
  cJSON_AddStringToObject(j, "mode", sh.mode);
  cJSON *recipes = cJSON_AddArrayToObject(j, "recipes");
  for (int role = 0; role < 2; role++) {
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "recipe", role ? "ufp4" : "e2m1");
    const int L = sh.blocks;
    cJSON *fl = cJSON_AddArrayToObject(it, "layers");
    for (int p = 0; p <= L; p++) /* forward ratio mean 1 - 0.01 p s for e2m1: the curve */
      cJSON_AddItemToArray(fl, point(NULL, p, role ? 1 : 1 - 0.01 * p * seed, 0.1, sec_slope(role, seed, 0), p, p == 0));
    cJSON *fs = slope_ci(prim_slope(role, seed, 0));
    if (sh.null_slope && !role) cJSON_ReplaceItemInObject(fs, "mean", cJSON_CreateNull());
    cJSON_AddItemToObject(it, "log_ratio_slope", fs);
    if (sh.backward) {
      cJSON *bw = cJSON_AddObjectToObject(it, "backward");
      cJSON *bl = cJSON_AddArrayToObject(bw, "layers");
      for (int p = 0; p <= L; p++) /* dX ratio mean 1 + 0.01 p s for e2m1: the curve */
        cJSON_AddItemToArray(bl, point(NULL, p, role ? 1 : 1 + 0.01 * p * seed, 0.1, sec_slope(role, seed, 1), L - p, 0));
      cJSON_AddItemToObject(bw, "log_ratio_slope", slope_ci(prim_slope(role, seed, 1)));
      cJSON *w = cJSON_AddArrayToObject(bw, "weights");
      cJSON_AddItemToArray(w, point("model.embed_tokens.weight", 0, 1, 5, 5, 1, 0));
      for (int i = 0; i < L; i++) {
        char name[128];
        const double x = L - 1 - i;
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i); /* not a projection */
        cJSON_AddItemToArray(w, point(name, 0, 1, 3 * i, -2 * i, 1, 0));
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", i);
        cJSON *q = point(name, 0, 1, sec_slope(role, seed, 2), sec_slope(role, seed, 3), x, 0);
        if (sh.bad_q_cos && !role && i == 0)
          cJSON_ReplaceItemInArray(cJSON_GetObjectItem(cJSON_GetObjectItem(q, "cosine_ci"), "values"), 1,
                                   cJSON_CreateNumber(-0.5));
        cJSON_AddItemToArray(w, q);
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", i);
        if (!sh.no_down)
          cJSON_AddItemToArray(w, point(name, 0, 1, sec_slope(role, seed, 4), sec_slope(role, seed, 5), x, 0));
      }
      cJSON_AddItemToArray(w, point("lm_head.weight", 0, 1, 7, 7, 1, 0));
    }
    cJSON_AddItemToArray(recipes, it);
  }
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/drift/seed%d", root, seed);
  assert_int_equal(ufp4_mkdirs(dir), 0);
  snprintf(path, sizeof path, "%s/drift.json", dir);
  char *text = cJSON_PrintUnformatted(j);
  write_text(path, text);
  free(text);
  cJSON_Delete(j);
}

static drift_shape good_shape(int seed) { return (drift_shape){"both", seed, NB, 1, 0, DL, 0, 0}; }
static void write_drift(int seed) { write_drift_shape(seed, good_shape(seed)); }

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(root)) return -1;
  for (int x = 1; x <= N_DEPTHS; x++) make_depth(x);
  for (int s = 1; s <= 3; s++) write_drift(s);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static ufp4_study_folder folders[N_DEPTHS];
static char folder_names[N_DEPTHS][1024];

static ufp4_study_folder *all_folders(void) {
  for (int i = 0; i < N_DEPTHS; i++) { /* given in another order than the depths': it must not matter */
    const int x = 1 + (i + 2) % N_DEPTHS;
    depth_dir(folder_names[i], sizeof folder_names[i], x);
    folders[i] = (ufp4_study_folder){DEPTH[x - 1], folder_names[i]};
  }
  return folders;
}

static ufp4_study_result *analyze(const ufp4_study_options *o, int sd_only) {
  ufp4_study_result *r = NULL;
  const int rc = ufp4_study_analyze(all_folders(), N_DEPTHS, o, sd_only, &r);
  if (rc) fail_msg("%s", ufp4_last_error());
  return r;
}

static ufp4_study_options options(void) {
  static char drift[1024];
  snprintf(drift, sizeof drift, "%s/drift", root);
  ufp4_study_options o = ufp4_study_options_default();
  o.drift_dir = drift;
  o.secondary[0] = "nvfp4";
  o.n_secondary = 1;
  return o;
}

static void check_test(const ufp4_study_test *t, size_t n, double mean, double sd) {
  assert_true(t->valid);
  assert_int_equal(t->s.n, n);
  if (fabs(t->s.mean - mean) > 1e-9 || fabs(t->s.sd - sd) > 1e-9)
    fail_msg("mean %.12g sd %.12g, expected %.12g and %.12g", t->s.mean, t->s.sd, mean, sd);
  const double tt = mean / (sd / sqrt((double)n));
  assert_true(fabs(t->s.t - tt) < 1e-6 * fabs(tt) + 1e-6);
  assert_true(fabs(t->s.p - p_df2(tt)) < 1e-9);
  const double half = T975_DF2 * sd / sqrt((double)n);
  assert_true(fabs(t->s.lo - (mean - half)) < 1e-9 && fabs(t->s.hi - (mean + half)) < 1e-9);
}

static void test_primary(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  assert_int_equal(r->n_depths, 4);
  for (int d = 0; d < 4; d++) assert_int_equal(r->depth[d], DEPTH[d]);
  for (int d = 0; d < 4; d++) assert_int_equal(r->last_step[d], S_LAST);
  assert_int_equal(r->n_seeds, 3);
  assert_non_null(strstr(r->excluded, "seed 4 (L=4: e2m1 not finished)"));
  assert_string_equal(r->binaries, "def+abc, abc"); /* "abc" is not taken for the one in "def+abc" */
  double base = 0;
  for (int s = 1; s <= 3; s++)
    for (int x = 1; x <= 4; x++) base += bf16_loss(s, x);
  assert_true(fabs(r->mean_base - base / 12) < 1e-12);
  check_test(&r->h1, 3, 2.5, 0.45);
  check_test(&r->h2, 3, 1.1, 0.4);
  for (int d = 0; d < 4; d++) check_test(&r->per_depth[d], 3, A[d], fabs(V[d]));
  /* H3: e2m1 forward and backward, ufp4 inside +-25% of |e2m1| */
  check_test(&r->h3_a[0], 3, -0.02, 0.001);
  check_test(&r->h3_a[1], 3, -0.01, 0.0008);
  check_test(&r->h3_b[0], 3, 0, 0.001);
  assert_true(r->h3_equivalent[0] && r->h3_equivalent[1]);
  assert_true(fabs(r->h3_p - p_df2(-0.01 * sqrt(3) / 0.0008)) < 1e-9); /* the larger p of the two */
  /* Holm sorts: p(H3) < p(H1) < p(H2) */
  assert_true(r->h3_p < r->h1.s.p && r->h1.s.p < r->h2.s.p && r->h2.s.p < 0.05 && r->h2.s.p > 0.025);
  assert_true(fabs(r->h3.p_holm - 0.05 / 3) < 1e-15);
  assert_true(fabs(r->h1.p_holm - 0.05 / 2) < 1e-15);
  assert_true(fabs(r->h2.p_holm - 0.05) < 1e-15);
  assert_true(r->h1.rejected && r->h2.rejected && r->h3.rejected);
  assert_true(r->h1_supported && r->h2_supported && r->h3_supported);
  /* each H3 arm is compared with H3's level and has its own MDD there (their sd differ) */
  for (int k = 0; k < 2; k++)
    assert_true(r->h3_a[k].p_holm == r->h3.p_holm &&
                r->h3_a[k].mdd_holm == ufp4_paired_mdd(r->h3_a[k].s.sd, 3, 0.05 / 3, 0.8));
  assert_true(r->h3_a[0].mdd_holm != r->h3_a[1].mdd_holm);
  /* per depth, Holm over four at 0.05: every one rejects, levels by the order of p */
  double levels = 0;
  for (int d = 0; d < 4; d++) assert_true(r->per_depth[d].rejected), levels += r->per_depth[d].p_holm;
  assert_true(fabs(levels - (0.05 / 4 + 0.05 / 3 + 0.05 / 2 + 0.05)) < 1e-15);
  assert_true(fabs(r->per_depth[1].p_holm - 0.05 / 4) < 1e-15); /* depth 4 has the largest t */
  /* the control: 0.1 + 0.01 (s - 2) pp at every depth; H1's 2.5 pp is above it */
  check_test(&r->control, 3, 0.1, 0.01);
  for (int d = 0; d < 4; d++) check_test(&r->control_depth[d], 3, 0.1, 0.01);
  assert_true(fabs(r->noise_floor - 0.1) < 1e-9);
  assert_false(r->h1_below_noise);
  /* the secondary nvfp4 - e2m1: 0.1 s pp, t = 2 sqrt 3, p 0.074: not rejected at 0.05 */
  check_test(&r->secondary[0], 3, 0.2, 0.1);
  assert_false(r->secondary[0].rejected);
  /* the depth series: a, b, the control, the secondary recipe (its reference e2m1 is listed once) */
  assert_int_equal(r->n_recipes, 4);
  static const char *const series_names[4] = {"e2m1", "ufp4", "fp32", "nvfp4"};
  for (int m = 0; m < 4; m++) assert_string_equal(r->recipe[m], series_names[m]);
  for (int x = 1; x <= 4; x++) {
    double u = 0, e = 0;
    for (int sd = 1; sd <= 3; sd++) {
      u += 100 * (ufp4_loss(sd, x) - bf16_loss(sd, x)) / bf16_loss(sd, x) / 3;
      e += (100 * (ufp4_loss(sd, x) - bf16_loss(sd, x)) / bf16_loss(sd, x) + d_pp(sd, x)) / 3;
    }
    assert_true(fabs(r->rel_err[1][x - 1].s.mean - u) < 1e-9 && fabs(r->rel_err[0][x - 1].s.mean - e) < 1e-9);
    check_test(&r->rel_err[2][x - 1], 3, 0.1, 0.01);
    assert_int_equal(r->rel_err[3][x - 1].s.n, 3);
  }
  ufp4_study_free(r);
  o.secondary_ref = "e2m1"; /* naming the a recipe as the reference gives the same comparison */
  r = analyze(&o, 0);
  check_test(&r->secondary[0], 3, 0.2, 0.1);
  ufp4_study_free(r);
  /* a second secondary recipe with its own reference: nvfp4 - ufp4 = d(s) + 0.1 s = 2.15, 2.7, 3.25
   * (t 8.5, p 0.014); Holm over the two: it rejects at 0.025, then nvfp4 - e2m1 (p 0.074) fails */
  o.secondary[1] = "nvfp4";
  o.secondary_refs[1] = "ufp4";
  o.n_secondary = 2;
  r = analyze(&o, 0);
  check_test(&r->secondary[0], 3, 0.2, 0.1);
  check_test(&r->secondary[1], 3, 2.7, 0.55);
  assert_string_equal(r->secondary_ref[0], "e2m1");
  assert_string_equal(r->secondary_ref[1], "ufp4");
  assert_true(r->secondary[1].rejected && fabs(r->secondary[1].p_holm - 0.025) < 1e-15);
  assert_true(!r->secondary[0].rejected && fabs(r->secondary[0].p_holm - 0.05) < 1e-15);
  /* each test's MDD at its Holm level: the second step's level is the summary's alpha */
  assert_true(r->secondary[1].mdd_holm == ufp4_paired_mdd(r->secondary[1].s.sd, 3, 0.025, 0.8));
  assert_true(r->secondary[1].mdd_holm > r->secondary[1].s.mdd);
  assert_true(r->secondary[0].mdd_holm == r->secondary[0].s.mdd);
  ufp4_study_free(r);
  o = options();
  o.margin = 0.01; /* ufp4's intervals are no longer inside the margin: H3 rejects but is not supported */
  r = analyze(&o, 0);
  assert_true(r->h3.rejected && !r->h3_equivalent[0] && !r->h3_equivalent[1] && !r->h3_supported);
  ufp4_study_free(r);
  o = options();
  o.control = "nvfp4"; /* a "control" 20 pp off: H1's effect is below that floor, whatever its p */
  r = analyze(&o, 0);
  assert_true(r->h1_below_noise && r->h1.rejected);
  ufp4_study_free(r);
}

static void test_h3_secondary(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  assert_int_equal(r->h3_layers, DL);
  assert_int_equal(r->h3_batches, NB);
  assert_int_equal(r->n_h3_secondary, 6);
  static const char *const names[6] = {"forward cosine",           "dX cosine",           "dW ratio self_attn.q_proj",
                                       "dW cosine self_attn.q_proj", "dW ratio mlp.down_proj", "dW cosine mlp.down_proj"};
  for (int m = 0; m < 6; m++) {
    const ufp4_study_h3_measure *x = &r->h3_secondary[m];
    assert_string_equal(x->name, names[m]);
    check_test(&x->a, 3, -0.01 * (m + 1), sec_sd(m));
    if (m == 1) check_test(&x->b, 3, -0.01, sec_sd(1) / 2); /* half of e2m1's */
    else check_test(&x->b, 3, 0, 0.0002 * (m + 1));
    assert_int_equal(x->b_equivalent, m != 1);
    assert_true(x->a.rejected);
  }
  /* Holm over six, sorted by p: m = 0, 3 (t 17.3) at 0.05/6, 0.05/5; m = 1, 4 (t 11.5) at 0.05/4,
   * 0.05/3; m = 2, 5 (t 8.7, p 0.013) at 0.05/2 and 0.05 (in the given order, m = 2 would fail at 0.05/4) */
  for (int m = 0; m < 3; m++) { /* m and m + 3 tie in t (up to rounding): either may come first */
    static const double lo[3] = {0.05 / 6, 0.05 / 4, 0.05 / 2}, hi[3] = {0.05 / 5, 0.05 / 3, 0.05};
    const double x = r->h3_secondary[m].a.p_holm, y = r->h3_secondary[m + 3].a.p_holm;
    assert_true(fabs(fmin(x, y) - lo[m]) < 1e-15 && fabs(fmax(x, y) - hi[m]) < 1e-15);
  }
  /* each checkpoint's own batch-level slope: seed 1's e2m1 forward -0.021 [-0.022, -0.020] */
  assert_true(fabs(r->h3_seed_slopes[0] + 0.021) < 1e-12 && fabs(r->h3_seed_slopes[1] + 0.022) < 1e-12 &&
              fabs(r->h3_seed_slopes[2] + 0.020) < 1e-12);
  assert_true(fabs(r->h3_seed_slopes[12 * 2 + 6] - 0.001) < 1e-12); /* seed 3's ufp4 forward */
  /* the curves: e2m1's forward ratio at block 2 is 1 - 0.02 s over seeds: mean 0.96, sd 0.02 */
  const double *c = r->h3_curves + (0 * (DL + 1) + 2) * 3;
  const double half = T975_DF2 * 0.02 / sqrt(3);
  assert_true(fabs(c[0] - 0.96) < 1e-12 && fabs(c[1] - (0.96 - half)) < 1e-9 && fabs(c[2] - (0.96 + half)) < 1e-9);
  /* ...and its dX ratio at block 1 is 1 + 0.01 s: mean 1.02, sd 0.01 (curve 2, after both recipes' curves 0, 1) */
  c = r->h3_curves + ((2 * 2 + 0) * (DL + 1) + 1) * 3;
  assert_true(fabs(c[0] - 1.02) < 1e-12 && fabs(c[2] - c[0] - T975_DF2 * 0.01 / sqrt(3)) < 1e-9);
  ufp4_study_free(r);
  /* an undefined value leaves that seed out of that test only */
  drift_shape sh = good_shape(2);
  sh.bad_q_cos = 1;
  sh.null_slope = 1;
  write_drift_shape(2, sh);
  r = analyze(&o, 0);
  for (int m = 0; m < 6; m++) {
    assert_int_equal(r->h3_secondary[m].a.s.n, m == 3 ? 2 : 3);
    assert_int_equal(r->h3_secondary[m].diff.s.n, m == 3 ? 2 : 3);
    assert_int_equal(r->h3_secondary[m].b.s.n, 3);
  }
  assert_int_equal(r->h3_a[0].s.n, 2); /* the null forward slope */
  assert_int_equal(r->h3_a[1].s.n, 3);
  assert_true(r->has_h3);
  ufp4_study_free(r);
  write_drift(2);
}

/* Whether `want` is on the line of `text` that contains `row`. */
static int in_row(const char *text, const char *row, const char *want) {
  char *copy = strdup(text), *save = NULL;
  int found = 0;
  for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
    if (strstr(line, row)) {
      found = strstr(line, want) != NULL;
      break;
    }
  free(copy);
  return found;
}

static void test_holm(void **state) {
  (void)state;
  ufp4_study_test t[4];
  ufp4_study_test *fam[4] = {&t[0], &t[1], &t[2], &t[3]};
  const double p[4] = {0.03, 0.001, 0.5, 0.02};
  for (int i = 0; i < 4; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].valid = 1;
    t[i].s.p = p[i];
    t[i].s.sd = 1 + i; /* t[1] has sd 2, t[3] sd 4 */
    t[i].s.n = 7;
  }
  t[2].valid = 0; /* counts as p = 1: last */
  study_holm(fam, 4, 0.05, 0.8);
  /* sorted: 0.001 (0.0125: yes), 0.02 (0.05/3: no) -> the rest not reached */
  assert_true(t[1].rejected && fabs(t[1].p_holm - 0.0125) < 1e-15);
  assert_true(!t[3].rejected && fabs(t[3].p_holm - 0.05 / 3) < 1e-15);
  assert_true(!t[0].rejected && isnan(t[0].p_holm) && !t[2].rejected && isnan(t[2].p_holm));
  /* the MDD at each test's own level, n = 7, power 0.8; SciPy (noncentral t, df 6, brentq on the
   * two-sided power) gives 1.722689409856 sd at 0.0125 and 1.623679999100 sd at 0.05/3 */
  assert_true(fabs(t[1].mdd_holm - 2 * 1.722689409856) < 1e-6);
  assert_true(fabs(t[3].mdd_holm - 4 * 1.623679999100) < 1e-6);
  assert_true(isnan(t[0].mdd_holm) && isnan(t[2].mdd_holm));
  t[1].s.sd = 0; /* all seeds equal: nothing is too small to detect, as ufp4_paired_summarize says */
  study_holm(fam, 4, 0.05, 0.8);
  assert_true(t[1].rejected && t[1].mdd_holm == 0);
  t[1].s.sd = 2;
  /* the first step fails: nothing is rejected (t[1]'s earlier rejection is not kept), and only
   * that step has a level */
  t[1].s.p = 0.02;
  study_holm(fam, 4, 0.05, 0.8);
  assert_true(!t[1].rejected && fabs(t[1].p_holm - 0.0125) < 1e-15); /* first of the two ties */
  for (int i = 0; i < 4; i++)
    if (i != 1) assert_true(!t[i].rejected && isnan(t[i].p_holm));
}

static void test_settledness(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  for (int d = 0; d < 4; d++) {
    double g4 = 0;
    for (int s = 1; s <= 3; s++) g4 += gap_nats(s, d + 1) / 3;
    assert_true(fabs(r->g_mean[d][3] - g4) < 1e-9);
    if (d != 1) assert_true(r->settled[d] && fabs(r->g_mean[d][0] - g4) < 1e-9);
  }
  /* depth 4: quarters 1-3 at gap - 0.05 - 0.001 s, quarter 4 at the final gap */
  assert_false(r->settled[1]);
  check_test(&r->settle[1], 3, 0.052, 0.001);
  ufp4_study_free(r);
}

static void test_stage2(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 1);
  assert_false(r->h1.valid); /* the internal pilot computes no test */
  assert_true(isnan(r->h1.s.mean) && isnan(r->h3_p) && isnan(r->noise_floor));
  assert_true(fabs(r->sd_pp - 0.45) < 1e-9);
  assert_true(fabs(r->target_pp - 0.5 / r->mean_base) < 1e-12); /* 100 x 0.005 / mean L_bf16 */
  assert_true(r->capped && r->n_needed == 24); /* sd 0.45 against 0.117 pp: the cap binds */
  assert_true(fabs(ufp4_paired_power(r->mdd_at_cap, 0.45, 24, 0.05 / 3) - 0.8) < 1e-6);
  ufp4_study_free(r);
  o.target_nats = 0.016; /* 0.374 pp: n between the floor and the cap */
  r = analyze(&o, 1);
  assert_true(!r->capped && r->n_needed > 12 && r->n_needed < 24);
  assert_true(ufp4_paired_power(r->target_pp, 0.45, r->n_needed, 0.05 / 3) >= 0.8);
  assert_true(ufp4_paired_power(r->target_pp, 0.45, r->n_needed - 1, 0.05 / 3) < 0.8);
  ufp4_study_free(r);
  o.target_nats = 0.1; /* 2.3 pp: a handful of seeds would do, the floor of 12 holds */
  r = analyze(&o, 1);
  assert_true(!r->capped && r->n_needed == 12);
  assert_true(ufp4_paired_power(r->target_pp, 0.45, 5, 0.05 / 3) >= 0.8);
  ufp4_study_free(r);
  /* the stage-1 look with --seeds N looks at seeds 1..N only: seed 3 left aside, seed 4 must be done */
  o.target_nats = 0.005;
  o.seeds = 2;
  r = analyze(&o, 1);
  assert_int_equal(r->n_seeds, 2);
  assert_true(fabs(r->sd_pp - 0.45 / sqrt(2)) < 1e-9); /* d(s) = 2.5 + 0.45 (s - 2) over seeds 1-2 */
  ufp4_study_free(r);
  o.seeds = 4;
  ufp4_study_result *bad = (ufp4_study_result *)1;
  assert_int_not_equal(ufp4_study_analyze(all_folders(), N_DEPTHS, &o, 1, &bad), 0);
  assert_non_null(strstr(ufp4_last_error(), "are not 1..4 but {1 2 3}"));
  /* the final analysis does not decide n again */
  o = options();
  r = analyze(&o, 0);
  assert_true(r->n_needed == 0 && !r->capped && isnan(r->mdd_at_cap));
  ufp4_study_free(r);
}

static char *read_out(const char *dir, const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text;
  size_t size;
  assert_int_equal(ufp4_read_file(path, 1 << 22, &text, &size), 0);
  return text;
}

static void test_write(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  char out[1024];
  snprintf(out, sizeof out, "%s/out", root);
  assert_int_equal(ufp4_study_write(r, &o, 0, "ufp4 study ...", "abc123", out), 0);
  char *text = read_out(out, "analysis.json");
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  const cJSON *h1 = cJSON_GetObjectItemCaseSensitive(j, "h1");
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(h1, "mean")->valuedouble - 2.5) < 1e-9);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "supported"), "h3")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "commit")->valuestring, "abc123");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "binaries")->valuestring, "def+abc, abc");
  assert_null(cJSON_GetObjectItemCaseSensitive(j, "stage2")); /* n is decided in stage2.json only */
  /* the per-seed values behind the tests: d(s), and D(s, L) at L = 16 */
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "per_seed");
  for (int sd = 1; sd <= 3; sd++) {
    const double d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ps, "h1_d"), sd - 1)->valuedouble;
    const double d16 =
        cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ps, "per_depth_D"), 3), sd - 1)->valuedouble;
    assert_true(fabs(d - (2.5 + 0.45 * (sd - 2))) < 1e-9 && fabs(d16 - d_pp(sd, 4)) < 1e-9);
  }
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ps, "secondary")), 1);
  const cJSON *pw = cJSON_GetObjectItemCaseSensitive(j, "power");
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(pw, "h1_mdd_pp")->valuedouble - r->h1.s.mdd) < 1e-12);
  const cJSON *h3 = cJSON_GetObjectItemCaseSensitive(j, "h3_detail");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h3, "secondary")), 6);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h3, "seed_slopes")), 3);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h3, "curves")), 8);
  cJSON_Delete(j);
  text = read_out(out, "analysis.md");
  assert_non_null(strstr(text, "**supported**"));
  assert_non_null(strstr(text, "| dW cosine mlp.down_proj, e2m1 |"));
  const char *arm[2] = {"| H3(a): e2m1 slope, forward ratio |", "| H3(a): e2m1 slope, dX ratio |"};
  for (int k = 0; k < 2; k++) { /* each arm's row: its own MDD at H3's level */
    char want[64];
    snprintf(want, sizeof want, "rejected at level 0.01667 (MDD %.4g) |", r->h3_a[k].mdd_holm);
    assert_true(in_row(text, arm[k], want));
  }
  assert_null(strstr(text, "nan")); /* no NaN printed as a number */
  free(text);
  text = read_out(out, "depth_series.dat");
  assert_non_null(strstr(text, "\n16 4.000000 ")); /* the deepest depth's row */
  free(text);
  text = read_out(out, "analysis.md");
  assert_non_null(strstr(text, "| recipe | L = 2 | L = 4 | L = 8 | L = 16 |"));
  assert_non_null(strstr(text, "| fp32 | +0.100 [+0.075, +0.125] (3) |"));
  free(text);
  text = read_out(out, "h3_curves.dat");
  assert_non_null(strstr(text, "\n2 0.96 ")); /* block 2: e2m1's forward ratio first */
  free(text);
  ufp4_study_free(r);
  /* Holm stops at H3 (alpha 0.001): the others are "not reached", not "at level nan" */
  o.alpha = 0.001;
  r = analyze(&o, 0);
  assert_true(!r->h3.rejected && !r->h1.rejected && isnan(r->h1.p_holm));
  assert_int_equal(ufp4_study_write(r, &o, 0, "ufp4 study ...", "abc123", out), 0);
  text = read_out(out, "analysis.md");
  assert_non_null(strstr(text, "not reached"));
  assert_null(strstr(text, "nan"));
  free(text);
  ufp4_study_free(r);
  /* without --drift: no H3, and analysis.json has null, not 0, where H3 would be */
  o = options();
  o.drift_dir = NULL;
  r = analyze(&o, 0);
  assert_false(r->has_h3);
  assert_int_equal(ufp4_study_write(r, &o, 0, NULL, NULL, out), 0);
  text = read_out(out, "analysis.json");
  j = cJSON_Parse(text);
  free(text);
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "h3"), "p")));
  assert_null(cJSON_GetObjectItemCaseSensitive(j, "h3_detail"));
  cJSON_Delete(j);
  ufp4_study_free(r);
  /* stage2.json keeps the decision */
  r = analyze(&o, 1);
  assert_int_equal(ufp4_study_write(r, &o, 1, NULL, NULL, out), 0);
  text = read_out(out, "stage2.json");
  j = cJSON_Parse(text);
  free(text);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "stage2"), "n_needed")->valueint,
                   24);
  cJSON_Delete(j);
  ufp4_study_free(r);
}

static void expect_error(const ufp4_study_folder *f, size_t n, const ufp4_study_options *o, const char *needle) {
  ufp4_study_result *r = (ufp4_study_result *)1;
  assert_int_not_equal(ufp4_study_analyze(f, n, o, 0, &r), 0);
  assert_null(r);
  if (!strstr(ufp4_last_error(), needle)) fail_msg("error '%s' lacks '%s'", ufp4_last_error(), needle);
}

static void test_drift_errors(void **state) {
  (void)state;
  ufp4_study_options o = options();
  const ufp4_study_folder *all = all_folders();
  drift_shape sh = good_shape(2);
  sh.mode = "forward";
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "seed2/drift.json: not measured with --mode both");
  sh = good_shape(2);
  sh.seed_dir = 3; /* seed 3's checkpoint measured into seed 2's folder */
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "(reports/study/L16/runs/bf16/seed3/ckpt/step_00002000) is not in a seed2 folder");
  sh = good_shape(2);
  sh.backward = 0;
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "seed2/drift.json: recipe e2m1 lacks the forward or backward log_ratio_slope");
  sh = good_shape(2);
  sh.no_down = 1;
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "seed2/drift.json: no dW of model.layers.0.mlp.down_proj.weight");
  sh = good_shape(2);
  sh.batches = 3; /* "batches" disagrees with the values (and with seed 1) */
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "seed2/drift.json: 16 blocks and 3 batches, where the first drift file has 16 and 2");
  sh = good_shape(2);
  sh.blocks = 8; /* the L = 8 model's checkpoint */
  write_drift_shape(2, sh);
  expect_error(all, 4, &o, "seed2/drift.json: a 8-block checkpoint, where H3 measures the deepest depth's (16 blocks)");
  write_drift(2);
  sh = good_shape(1);
  sh.seed_dir = 12; /* seed12 is not seed1 */
  write_drift_shape(1, sh);
  expect_error(all, 4, &o, "is not in a seed1 folder");
  write_drift(1);
  write_drift(2);
  ufp4_study_result *r = analyze(&o, 0); /* repaired */
  assert_true(r->has_h3);
  ufp4_study_free(r);
}

static void test_errors(void **state) {
  (void)state;
  ufp4_study_options o = options();
  char l2[1024], l4[1024], l8[1024], path[1200];
  depth_dir(l2, sizeof l2, 1);
  depth_dir(l4, sizeof l4, 2);
  depth_dir(l8, sizeof l8, 3);
  ufp4_study_folder twice[3] = {{2, l2}, {4, l4}, {2, l2}};
  expect_error(twice, 3, &o, "another folder of the same depth");
  /* one depth: H1 is that depth's D, H2 (a slope) is not computed, the secondary family is */
  ufp4_study_folder one[1] = {{2, l2}};
  ufp4_study_options o1 = options();
  o1.drift_dir = NULL;
  ufp4_study_result *r1 = NULL;
  assert_int_equal(ufp4_study_analyze(one, 1, &o1, 0, &r1), 0);
  assert_int_equal(r1->n_depths, 1);
  assert_int_equal(r1->n_seeds, 4); /* seed 4 is finished at depth 2 */
  assert_true(r1->h1.valid && fabs(r1->h1.s.mean - (A[0] + 0.5 * V[0])) < 1e-9); /* s - 2 = -1, 0, 1, 2 */
  assert_true(fabs(r1->h1.s.sd - fabs(V[0]) * sqrt(5.0 / 3)) < 1e-9);
  assert_false(r1->h2.valid);
  assert_true(fabs(r1->secondary[0].s.mean - 0.25) < 1e-9);
  ufp4_study_free(r1);
  expect_error(one, 0, &o, "no --depth folder");
  const ufp4_study_folder *all = all_folders();
  o.b = "nvfp4x"; /* a misspelled recipe is an error, not an empty comparison */
  expect_error(all, 4, &o, "recipe 'nvfp4x' has no runs/nvfp4x folder");
  o = options();
  o.secondary[0] = "e2m1,tile2d=2";
  expect_error(all, 4, &o, "recipe 'e2m1,tile2d=2' has no runs/e2m1_tile2d_2 folder");
  o = options();
  /* --seeds N: the included seeds must be 1..N (seed 4 is still running at L=4) */
  o.seeds = 4;
  expect_error(all, 4, &o, "are not 1..4 but {1 2 3}; left out: seed 4 (L=4: e2m1 not finished)");
  o.seeds = 3;
  ufp4_study_result *three = analyze(&o, 0);
  assert_int_equal(three->n_seeds, 3);
  ufp4_study_free(three);
  o = options();
  /* H3 over fewer seeds than H1 would be another analysis: a missing drift.json is an error */
  snprintf(path, sizeof path, "%s/drift/seed2/drift.json", root);
  assert_int_equal(unlink(path), 0);
  expect_error(all, 4, &o, "no seed<N>/drift.json for 1 of the 3 included seeds (seed 2)");
  write_drift(2);
  char nowhere[1100];
  snprintf(nowhere, sizeof nowhere, "%s/drfit", root);
  o.drift_dir = nowhere;
  expect_error(all, 4, &o, "drfit: not a folder");
  o = options();
  /* a control run missing for one seed: the control's comparison has 2 seeds, the analysis 3 */
  char from[1200], to[1200];
  snprintf(from, sizeof from, "%s/runs/fp32/seed3", l8);
  snprintf(to, sizeof to, "%s/runs/fp32/away3", l8);
  assert_int_equal(rename(from, to), 0);
  ufp4_study_result *r = analyze(&o, 0);
  assert_int_equal(r->n_seeds, 3);
  assert_int_equal(r->control.s.n, 2);
  assert_int_equal(r->control_depth[2].s.n, 2);
  assert_int_equal(r->control_depth[1].s.n, 3);
  ufp4_study_free(r);
  assert_int_equal(rename(to, from), 0);
  /* a run whose metrics are complete but whose run.json still says running is not finished */
  const vctx v3 = {1, 3, "ufp4"};
  write_run(l2, &v3, S_LAST, "running", "abc");
  r = analyze(&o, 0);
  assert_int_equal(r->n_seeds, 2);
  assert_non_null(strstr(r->excluded, "seed 3 (L=2: ufp4 not finished)"));
  ufp4_study_free(r);
  write_run(l2, &v3, S_LAST, "finished", "abc");
  snprintf(path, sizeof path, "%s/runs/ufp4/seed3/metrics.jsonl", l4);
  char rec[1200];
  snprintf(rec, sizeof rec, "%s/runs/ufp4/seed3/run.json", l4);
  assert_int_equal(unlink(rec), 0);
  write_text(path, "{\"step\":1,\"loss\":7.5}\n{\"step\":50,\"val_lo"); /* being written */
  ufp4_study_result *w = analyze(&o, 0);
  assert_int_equal(w->n_seeds, 2); /* seed 3 counts as unfinished, and the reason is kept */
  assert_non_null(strstr(w->excluded, "seed 3 (L=4: ufp4 not finished)"));
  assert_non_null(strstr(w->unreadable, "seed3/metrics.jsonl:2"));
  ufp4_study_free(w);
  /* The same file in a run whose run.json says finished is damaged, not being written: an error. */
  write_text(rec, "{\"commit\":\"x\",\"state\":\"finished\",\"steps_done\":400,\"skipped_steps\":0}");
  expect_error(all, 4, &o, "seed3/metrics.jsonl:2");
  expect_error(all, 4, &o, "(a finished run, by its run.json)");
  /* A diverged evaluation (NaN, which the trainer logs as null) in a finished run: an error too. */
  write_text(path, "{\"step\":1,\"loss\":7.5}\n{\"step\":50,\"val_loss\":4}\n{\"step\":100,\"val_loss\":null}\n");
  expect_error(all, 4, &o, "seed3/metrics.jsonl:3: \"val_loss\" is not a number (a finished run");
  /* ...and one whose metrics.jsonl is gone. */
  assert_int_equal(unlink(path), 0);
  expect_error(all, 4, &o, "seed3/metrics.jsonl: missing in a finished run");
  const vctx v4 = {2, 3, "ufp4"};
  write_run(l4, &v4, S_LAST, "finished", "abc");
  r = analyze(&o, 0); /* repaired: the analysis is back */
  assert_int_equal(r->n_seeds, 3);
  check_test(&r->h1, 3, 2.5, 0.45);
  ufp4_study_free(r);
}

/* `ufp4 study` (src/cli/cmd_study.c) over the same folders: the figures it prints, the files, and
 * its exit codes (2 for a bad flag, 1 for an analysis that cannot be made). Skipped without
 * UFP4_CLI (set by ctest). */
static void test_cli(void **state) {
  (void)state;
  const char *cli = getenv("UFP4_CLI");
  if (!cli || access(cli, X_OK)) skip();
  char cmd[8192], base[5200], out[1100];
  int n = snprintf(base, sizeof base, "'%s' study --drift '%s/drift' --secondary nvfp4 --secondary 'nvfp4 vs ufp4'", cli,
                   root);
  for (int x = 1; x <= N_DEPTHS; x++) n += snprintf(base + n, sizeof base - (size_t)n, " --depth %d='%s/L%d'", DEPTH[x - 1], root, DEPTH[x - 1]);
  snprintf(out, sizeof out, "%s/cli", root);
  snprintf(cmd, sizeof cmd, "%s --seeds 3 --out '%s' > '%s.log' 2>&1", base, out, out);
  assert_int_equal(system(cmd), 0);
  char *text = read_out(root, "cli.log");
  assert_non_null(strstr(text, "H1 mean +2.5000 pp"));
  assert_non_null(strstr(text, "H2 slope +1.1000 pp/doubling"));
  assert_non_null(strstr(text, "H3 supported"));
  free(text);
  text = read_out(out, "analysis.md");
  assert_non_null(strstr(text, "(the registered n, checked by --seeds)"));
  assert_non_null(strstr(text, "| nvfp4 - e2m1 | 3 | +0.2000 |"));
  assert_non_null(strstr(text, "| nvfp4 - ufp4 | 3 | +2.7000 |"));
  assert_non_null(strstr(text, "| rejected at level 0.025 (MDD ")); /* nvfp4 - ufp4, Holm's first */
  assert_non_null(strstr(text, "| not rejected at level 0.05 (MDD "));
  free(text);
  text = read_out(out, "analysis.json");
  assert_non_null(strstr(text, "\"holm_level\":0.025000000000000001,\"mdd_holm\":"));
  free(text);
  snprintf(cmd, sizeof cmd, "%s --seeds 4 --out '%s' > '%s.log' 2>&1", base, out, out);
  assert_int_equal(WEXITSTATUS(system(cmd)), 1);
  text = read_out(root, "cli.log");
  assert_non_null(strstr(text, "are not 1..4"));
  free(text);
  snprintf(cmd, sizeof cmd, "%s --sd-only --out '%s' > '%s.log' 2>&1", base, out, out);
  assert_int_equal(system(cmd), 0);
  text = read_out(root, "cli.log");
  assert_non_null(strstr(text, "sd of the H1 statistic 0.4500 pp"));
  assert_non_null(strstr(text, "24 seeds (cap)"));
  assert_null(strstr(text, "H1 mean")); /* the internal pilot prints no mean */
  free(text);
  snprintf(cmd, sizeof cmd, "%s --out '%s' --seeds x > /dev/null 2>&1", base, out);
  assert_int_equal(WEXITSTATUS(system(cmd)), 2);
  snprintf(cmd, sizeof cmd, "%s --out '%s' --secondary 'nvfp4 vs ' > /dev/null 2>&1", base, out);
  assert_int_equal(WEXITSTATUS(system(cmd)), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_primary),     cmocka_unit_test(test_h3_secondary), cmocka_unit_test(test_holm),
      cmocka_unit_test(test_settledness), cmocka_unit_test(test_stage2),       cmocka_unit_test(test_write),
      cmocka_unit_test(test_drift_errors), cmocka_unit_test(test_errors),     cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
