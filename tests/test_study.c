/* The depth study's analysis (ufp4/study.h) on compare folders whose figures are known exactly.
 *
 * Depths 2 and 4, seeds 1-3 finished, seed 4 unfinished at depth 4. bf16 and ufp4 hold 4.0 at
 * every evaluation, so D = 100 (L_e2m1 - 4) / 4 = 25 gap. The final D is
 *   depth 2: 1.9, 2.0, 2.1      depth 4: 3.8, 4.0, 4.2
 * so H1's d(s) = 2.85, 3.0, 3.15 (mean 3, sd 0.15, t = 20 sqrt 3) and H2's slopes per doubling
 * are 1.9, 2.0, 2.1 (mean 2, sd 0.1, t = 20 sqrt 3). The p-values come from the closed-form CDF of
 * 2 degrees of freedom, P(|T| > t) = 1 - t / sqrt(2 + t^2), and the intervals from the printed
 * t_{0.975, 2}. H3's drift slopes: e2m1 forward -0.02, -0.03, -0.04 (t = -3 sqrt 3), backward
 * -0.01, -0.02, -0.03 (t = -2 sqrt 3, p = 0.0742: the intersection-union p), ufp4 within the
 * margin. Holm over (H1, H2, H3): H1 and H2 reject at 0.05/3 and 0.05/2, H3 fails at 0.05.
 * The gap at depth 2 is flat over training (settled); at depth 4 quarter 3 is 0.05 + 0.001 s
 * below quarter 4 (not settled). */
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

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/study.h"

static char root[] = "/tmp/ufp4_test_study_XXXXXX";
#define T975_DF2 4.302652729749464 /* t_{0.975, 2}, from a printed table */
#define S_LAST 400

static double p_df2(double t) { return 1 - fabs(t) / sqrt(2 + t * t); }

static const double D_FINAL[2][3] = {{1.9, 2.0, 2.1}, {3.8, 4.0, 4.2}};

static void write_text(const char *path, const char *text) {
  assert_int_equal(ufp4_write_file_atomic(path, text, strlen(text)), 0);
}

/* A run whose val loss is val(step) at steps 50..last (every 50), and one train line. */
static void write_run(const char *folder, const char *recipe, long long seed, int last, double (*val)(int, void *),
                      void *ctx) {
  char dir[1024], path[1100], buf[8192];
  snprintf(dir, sizeof dir, "%s/runs/%s/seed%lld", folder, recipe, seed);
  assert_int_equal(ufp4_mkdirs(dir), 0);
  size_t n = (size_t)snprintf(buf, sizeof buf, "{\"step\":1,\"loss\":7.5}\n");
  for (int s = 50; s <= last; s += 50)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"step\":%d,\"val_loss\":%.17g}\n", s, val(s, ctx));
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  write_text(path, buf);
}

typedef struct {
  int depth_i, seed;
  double offset;
} vctx;

static double flat4(int step, void *c) {
  (void)step, (void)c;
  return 4.0;
}
static double fp32_val(int step, void *c) {
  (void)step, (void)c;
  return 4.004; /* 0.1 pp above bf16 */
}
/* e2m1: 4 + gap; depth 4 is 0.05 + 0.001 s lower up to step 300 (quarters 1-3). */
static double e2m1_val(int step, void *c) {
  const vctx *v = c;
  double gap = D_FINAL[v->depth_i][v->seed - 1] / 25;
  if (v->depth_i == 1 && step <= 300) gap -= 0.05 + 0.001 * v->seed;
  return 4.0 + gap + v->offset;
}

static void make_depth(const char *folder, int depth_i) {
  for (int s = 1; s <= 4; s++) {
    vctx v = {depth_i, s < 4 ? s : 2, 0};
    write_run(folder, "bf16", s, S_LAST, flat4, NULL);
    write_run(folder, "ufp4", s, S_LAST, flat4, NULL);
    write_run(folder, "fp32", s, S_LAST, fp32_val, NULL);
    /* seed 4 at depth 4 has e2m1 only up to step 200: still running */
    write_run(folder, "e2m1", s, s == 4 && depth_i == 1 ? 200 : S_LAST, e2m1_val, &v);
    vctx w = v;
    w.offset = 0.004 * s; /* nvfp4 - e2m1 = 0.1 s pp at every depth */
    write_run(folder, "nvfp4", s, S_LAST, e2m1_val, &w);
  }
}

static void write_drift(int seed, int backward) {
  const double af = -0.01 - 0.01 * seed, ab = -0.01 * seed;
  const double bf[3] = {0.001, -0.001, 0}, bb[3] = {0.002, -0.002, 0};
  char dir[1024], path[1100], buf[2048];
  snprintf(dir, sizeof dir, "%s/drift/seed%d", root, seed);
  assert_int_equal(ufp4_mkdirs(dir), 0);
  if (backward)
    snprintf(buf, sizeof buf,
             "{\"recipes\":[{\"recipe\":\"e2m1\",\"log_ratio_slope\":{\"mean\":%.17g},\"backward\":{\"log_ratio_slope\":"
             "{\"mean\":%.17g}}},{\"recipe\":\"ufp4\",\"log_ratio_slope\":{\"mean\":%.17g},\"backward\":{"
             "\"log_ratio_slope\":{\"mean\":%.17g}}}]}",
             af, ab, bf[seed - 1], bb[seed - 1]);
  else
    snprintf(buf, sizeof buf, "{\"recipes\":[{\"recipe\":\"e2m1\",\"log_ratio_slope\":{\"mean\":%.17g}}]}", af);
  snprintf(path, sizeof path, "%s/drift.json", dir);
  write_text(path, buf);
}

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(root)) return -1;
  char f[1024];
  snprintf(f, sizeof f, "%s/L2", root);
  make_depth(f, 0);
  snprintf(f, sizeof f, "%s/L4", root);
  make_depth(f, 1);
  for (int s = 1; s <= 3; s++) write_drift(s, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static ufp4_study_result *analyze(const ufp4_study_options *o, int sd_only) {
  char l2[1024], l4[1024];
  snprintf(l2, sizeof l2, "%s/L2", root);
  snprintf(l4, sizeof l4, "%s/L4", root);
  ufp4_study_folder f[2] = {{4, l4}, {2, l2}}; /* order of the folders does not matter */
  ufp4_study_result *r = NULL;
  const int rc = ufp4_study_analyze(f, 2, o, sd_only, &r);
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
  assert_true(fabs(t->s.mean - mean) < 1e-9);
  assert_true(fabs(t->s.sd - sd) < 1e-9);
  const double tt = mean / (sd / sqrt((double)n));
  assert_true(fabs(t->s.t - tt) < 1e-6 * fabs(tt));
  assert_true(fabs(t->s.p - p_df2(tt)) < 1e-9);
  const double half = T975_DF2 * sd / sqrt((double)n);
  assert_true(fabs(t->s.lo - (mean - half)) < 1e-9 && fabs(t->s.hi - (mean + half)) < 1e-9);
}

static void test_primary(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  assert_int_equal(r->n_depths, 2);
  assert_int_equal(r->depth[0], 2);
  assert_int_equal(r->depth[1], 4);
  assert_int_equal(r->n_seeds, 3);
  assert_non_null(strstr(r->excluded, "seed 4 (L=4: e2m1 not finished)"));
  assert_true(fabs(r->mean_base - 4.0) < 1e-12);
  check_test(&r->h1, 3, 3.0, 0.15);
  check_test(&r->h2, 3, 2.0, 0.1);
  check_test(&r->per_depth[0], 3, 2.0, 0.1);
  check_test(&r->per_depth[1], 3, 4.0, 0.2);
  /* H3: e2m1 forward and backward, ufp4 inside +-25% of |e2m1| */
  check_test(&r->h3_a[0], 3, -0.03, 0.01);
  check_test(&r->h3_a[1], 3, -0.02, 0.01);
  assert_true(r->h3_equivalent[0] && r->h3_equivalent[1]);
  assert_true(fabs(r->h3_p - p_df2(-2 * sqrt(3))) < 1e-9); /* the larger p of the two */
  /* Holm: H1 and H2 (equal t, so either first) at 0.05/3 and 0.05/2, then H3 fails at 0.05 */
  assert_true(r->h1.rejected && r->h2.rejected && !r->h3.rejected);
  assert_true(fabs(r->h1.p_holm + r->h2.p_holm - (0.05 / 3 + 0.05 / 2)) < 1e-15);
  assert_true(fabs(fmin(r->h1.p_holm, r->h2.p_holm) - 0.05 / 3) < 1e-15);
  assert_true(fabs(r->h3.p_holm - 0.05) < 1e-15);
  assert_true(r->h1_supported && r->h2_supported && !r->h3_supported);
  /* the control: 0.1 pp at every seed and depth; H1's 3 pp is above it */
  assert_true(fabs(r->noise_floor - 0.1) < 1e-9);
  assert_false(r->h1_below_noise);
  /* the secondary nvfp4 - e2m1: 0.1 s pp, t = 2 sqrt 3, p 0.074: not rejected at 0.05 */
  check_test(&r->secondary[0], 3, 0.2, 0.1);
  assert_false(r->secondary[0].rejected);
  ufp4_study_free(r);
  o.secondary_ref = "e2m1"; /* naming the a recipe as the reference gives the same comparison */
  r = analyze(&o, 0);
  check_test(&r->secondary[0], 3, 0.2, 0.1);
  ufp4_study_free(r);
}

static void test_settledness(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  /* depth 2: flat gap, G4 - G3 = 0 for every seed */
  assert_true(r->settled[0]);
  assert_true(fabs(r->g_mean[0][3] - 2.0 / 25) < 1e-9 && fabs(r->g_mean[0][0] - 2.0 / 25) < 1e-9);
  /* depth 4: quarters 1-3 at gap - 0.05 - 0.001 s, quarter 4 at the final gap */
  assert_false(r->settled[1]);
  assert_true(fabs(r->g_mean[1][3] - 4.0 / 25) < 1e-9);
  assert_true(fabs(r->g_mean[1][2] - (4.0 / 25 - 0.052)) < 1e-9);
  check_test(&r->settle[1], 3, 0.052, 0.001);
  ufp4_study_free(r);
}

static void test_stage2(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 1);
  assert_false(r->h1.valid); /* the internal pilot computes no test */
  assert_true(fabs(r->sd_pp - 0.15) < 1e-9);
  assert_true(fabs(r->target_pp - 0.125) < 1e-12); /* 100 x 0.005 / 4 */
  /* n is the smallest with power >= 0.8 at alpha 0.05/3, and at least 12 */
  assert_true(r->n_needed == 19 && !r->capped); /* printf 'n 0.125 0.15 0.016667 0.8' | power_eval */
  assert_true(ufp4_paired_power(0.125, 0.15, r->n_needed, 0.05 / 3) >= 0.8);
  if (r->n_needed > 12) assert_true(ufp4_paired_power(0.125, 0.15, r->n_needed - 1, 0.05 / 3) < 0.8);
  ufp4_study_free(r);
  o.target_nats = 0.0005; /* ten times smaller: the cap binds */
  r = analyze(&o, 1);
  assert_true(r->capped && r->n_needed == 24);
  assert_true(fabs(ufp4_paired_power(r->mdd_at_cap, 0.15, 24, 0.05 / 3) - 0.8) < 1e-6);
  ufp4_study_free(r);
}

static void test_write(void **state) {
  (void)state;
  ufp4_study_options o = options();
  ufp4_study_result *r = analyze(&o, 0);
  char out[1024], path[1100];
  snprintf(out, sizeof out, "%s/out", root);
  assert_int_equal(ufp4_study_write(r, &o, 0, "ufp4 study ...", "abc123", out), 0);
  snprintf(path, sizeof path, "%s/analysis.json", out);
  char *text;
  size_t size;
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &size), 0);
  cJSON *j = cJSON_ParseWithLength(text, size);
  free(text);
  assert_non_null(j);
  const cJSON *h1 = cJSON_GetObjectItemCaseSensitive(j, "h1");
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(h1, "mean")->valuedouble - 3.0) < 1e-9);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "supported"), "h2")));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "supported"), "h3")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "commit")->valuestring, "abc123");
  cJSON_Delete(j);
  snprintf(path, sizeof path, "%s/analysis.md", out);
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &size), 0);
  assert_non_null(strstr(text, "**supported**"));
  assert_null(strstr(text, "nan")); /* no NaN printed as a number */
  free(text);
  ufp4_study_free(r);
}

static void expect_error(ufp4_study_folder *f, size_t n, const ufp4_study_options *o, const char *needle) {
  ufp4_study_result *r = (ufp4_study_result *)1;
  assert_int_not_equal(ufp4_study_analyze(f, n, o, 0, &r), 0);
  assert_null(r);
  if (!strstr(ufp4_last_error(), needle)) fail_msg("error '%s' lacks '%s'", ufp4_last_error(), needle);
}

static void test_errors(void **state) {
  (void)state;
  ufp4_study_options o = options();
  char l2[1024], l4[1024], path[1200];
  snprintf(l2, sizeof l2, "%s/L2", root);
  snprintf(l4, sizeof l4, "%s/L4", root);
  ufp4_study_folder twice[3] = {{2, l2}, {4, l4}, {2, l2}};
  expect_error(twice, 3, &o, "another folder of the same depth");
  ufp4_study_folder one[1] = {{2, l2}};
  expect_error(one, 1, &o, "at least two depths");
  ufp4_study_folder both[2] = {{2, l2}, {4, l4}};
  o.b = "nvfp4x"; /* a misspelled recipe is an error, not an empty comparison */
  expect_error(both, 2, &o, "recipe 'nvfp4x' has no runs/nvfp4x folder");
  o = options();
  o.secondary[0] = "e2m1,tile2d=2";
  expect_error(both, 2, &o, "recipe 'e2m1,tile2d=2' has no runs/e2m1_tile2d_2 folder");
  o = options();
  /* --seeds N: the included seeds must be 1..N (seed 4 is still running at L=4) */
  o.seeds = 4;
  expect_error(both, 2, &o, "are not 1..4 but {1 2 3}; left out: seed 4 (L=4: e2m1 not finished)");
  o.seeds = 3;
  ufp4_study_result *three = analyze(&o, 0);
  assert_int_equal(three->n_seeds, 3);
  ufp4_study_free(three);
  o = options();
  /* H3 over fewer seeds than H1 would be another analysis: a missing drift.json is an error */
  snprintf(path, sizeof path, "%s/drift/seed2/drift.json", root);
  assert_int_equal(unlink(path), 0);
  expect_error(both, 2, &o, "no seed<N>/drift.json for 1 of the 3 included seeds (seed 2)");
  write_drift(2, 1);
  char nowhere[1100];
  snprintf(nowhere, sizeof nowhere, "%s/drfit", root);
  o.drift_dir = nowhere;
  expect_error(both, 2, &o, "drfit: not a folder");
  o = options();
  write_drift(2, 0); /* a drift.json made without --mode both */
  expect_error(both, 2, &o, "drift.json: recipe e2m1 lacks");
  write_drift(2, 1);
  snprintf(path, sizeof path, "%s/runs/ufp4/seed3/metrics.jsonl", l4);
  write_text(path, "{\"step\":1,\"loss\":7.5}\n{\"step\":50,\"val_lo"); /* being written */
  ufp4_study_result *w = analyze(&o, 0);
  assert_int_equal(w->n_seeds, 2); /* seed 3 counts as unfinished, and the reason is kept */
  assert_non_null(strstr(w->excluded, "seed 3 (L=4: ufp4 not finished)"));
  assert_non_null(strstr(w->unreadable, "seed3/metrics.jsonl:2"));
  ufp4_study_free(w);
  /* The same file in a run whose run.json says finished is damaged, not being written: an error. */
  char rec[1200];
  snprintf(rec, sizeof rec, "%s/runs/ufp4/seed3/run.json", l4);
  write_text(rec, "{\"commit\":\"x\",\"state\":\"finished\",\"steps_done\":400,\"skipped_steps\":0}");
  expect_error(both, 2, &o, "seed3/metrics.jsonl:2");
  expect_error(both, 2, &o, "(a finished run, by its run.json)");
  /* A diverged evaluation (NaN, which the trainer logs as null) in a finished run: an error too. */
  write_text(path, "{\"step\":1,\"loss\":7.5}\n{\"step\":50,\"val_loss\":4}\n{\"step\":100,\"val_loss\":null}\n");
  expect_error(both, 2, &o, "seed3/metrics.jsonl:3: \"val_loss\" is not a number (a finished run");
  /* ...and one whose metrics.jsonl is gone. */
  assert_int_equal(unlink(path), 0);
  expect_error(both, 2, &o, "seed3/metrics.jsonl: missing in a finished run");
  assert_int_equal(unlink(rec), 0);
  write_run(l4, "ufp4", 3, S_LAST, flat4, NULL);
  ufp4_study_result *r = analyze(&o, 0); /* repaired: the analysis is back */
  assert_int_equal(r->n_seeds, 3);
  ufp4_study_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_primary), cmocka_unit_test(test_settledness), cmocka_unit_test(test_stage2),
      cmocka_unit_test(test_write),   cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
