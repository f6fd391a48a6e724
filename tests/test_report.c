/* Report on synthetic run folders with known losses: every figure in report.json is recomputed
 * here from the loss formulas (independent scalar code), the paired t statistic is checked by
 * hand, and the outputs (md, self-contained html, plots when gnuplot exists) are checked. */
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
#include <sys/stat.h>
#include <unistd.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/recipe.h"
#include "ufp4/report.h"

static char root[256];
enum { N_SEEDS = 3, FINAL = 5 };
static const char *recipes[] = {"bf16", "fp32", "e2m1", "ufp4"};

/* Baseline loss and each recipe's relative deviation e: L = Lb (1 + e). */
static double lb(int seed, int step) { return 3 + 0.1 * seed + 100.0 / step; }
static double dev(int r, int seed) {
  switch (r) {
  case 1: return seed % 2 ? 0.001 : -0.001;
  case 2: return 0.01 + 0.001 * seed;
  case 3: return -(0.009 + 0.0005 * seed * seed);
  default: return 0;
  }
}
static double loss(int r, int seed, int step) { return lb(seed, step) * (1 + dev(r, seed)); }

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void make_run(const char *dir, int r, int seed, int extra) {
  char path[1024];
  assert_int_equal(ufp4_mkdirs(dir), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  /* config.json holds the canonical spec, as `ufp4 train` writes it ("bf16,keep_first=0,..."); the
   * report names the run by its preset, so the default baseline "bf16" finds it. */
  char cfg[2048], spec[1024];
  ufp4_recipe rec;
  assert_int_equal(ufp4_recipe_parse(recipes[r], &rec), 0);
  ufp4_recipe_format(&rec, spec, sizeof spec);
  assert_true(strcmp(spec, recipes[r]) != 0);
  snprintf(cfg, sizeof cfg, "{\"model\":{\"dim\":64},\"recipe\":\"%s\",\"seed\":%d,\"steps\":200}\n", spec, seed);
  write_text(path, cfg);
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int step = 10; step <= 200; step += 10) {
    fprintf(f, "{\"step\":%d,\"loss\":%.17g,\"lr\":0.001,\"grad_norm\":1,\"tokens_per_s\":1000,\"ms_per_step\":5}\n", step,
            loss(r, seed, step));
    if (step % 100 == 0) fprintf(f, "{\"step\":%d,\"val_loss\":%.17g,\"val_ppl\":1}\n", step, loss(r, seed, step) + 0.05);
    if (extra && step == 190) fprintf(f, "{\"step\":195,\"loss\":nan,\"lr\":0.001,\"grad_norm\":nan,\"skipped\":true}\n");
  }
  /* a step the baseline does not have: in final_train, not in the relative-error window */
  if (extra) fprintf(f, "{\"step\":210,\"loss\":%.17g}\n", 2.5);
  fclose(f);
}

static void make_diag(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
  FILE *f = fopen(path, "w");
  static const char *ops[] = {"fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"};
  for (int step = 100; step <= 200; step += 100)
    for (int l = 0; l < 3; l++) {
      for (int o = 0; o < 6; o++)
        fprintf(f, "{\"step\":%d,\"layer\":%d,\"proj\":\"q\",\"operand\":\"%s\",\"alpha\":%g,\"sqnr_db\":%g,\"b_eff\":0.5}\n",
                step, l, ops[o], 0.97 - 0.01 * l, 20.0 - l);
      fprintf(f, "{\"step\":%d,\"layer\":%d,\"proj\":\"q\",\"gemm\":\"fprop\",\"out_sqnr_db\":%g}\n", step, l, 18.0 - l);
    }
  fprintf(f, "{\"step\":200,\"drift\":[{\"layer\":0,\"norm_ratio\":0.99,\"cosine\":0.999},{\"layer\":1,\"norm_ratio\":0.98,"
             "\"cosine\":0.998},{\"layer\":2,\"norm_ratio\":0.97,\"cosine\":0.997}]}\n");
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/ufp4_test_report_XXXXXX");
  if (!mkdtemp(root)) return -1;
  for (int r = 0; r < 4; r++)
    for (int s = 1; s <= N_SEEDS; s++) {
      char dir[512];
      snprintf(dir, sizeof dir, "%s/runs/%s_s%d", root, recipes[r], s);
      make_run(dir, r, s, r == 2 && s == 2);
      if (r == 2 && s == 1) make_diag(dir);
    }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (!getenv("UFP4_KEEP_TMP")) ufp4_remove_tree(root); /* set it to inspect the outputs */
  else fprintf(stderr, "kept %s\n", root);
  return 0;
}

static void fill_runs(ufp4_report_run *runs, int n_seeds) {
  int k = 0;
  for (int r = 0; r < 4; r++)
    for (int s = 1; s <= n_seeds; s++) {
      memset(&runs[k], 0, sizeof runs[k]);
      runs[k].seed = -1;
      snprintf(runs[k].dir, sizeof runs[k].dir, "%s/runs/%s_s%d", root, recipes[r], s);
      k++;
    }
}

static cJSON *load_json(const char *path) {
  char *text;
  size_t size;
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &text, &size), 0);
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  return j;
}

static double jnum(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *find_by(const cJSON *arr, const char *k1, const char *v1, const char *k2, const char *v2) {
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(it, k1), *b = k2 ? cJSON_GetObjectItemCaseSensitive(it, k2) : NULL;
    if (cJSON_IsString(a) && !strcmp(a->valuestring, v1) && (!k2 || (cJSON_IsString(b) && !strcmp(b->valuestring, v2))))
      return it;
  }
  return NULL;
}

static void close_to(double got, double want, double tol, const char *what) {
  if (!(fabs(got - want) <= tol)) {
    fprintf(stderr, "%s: got %.15g want %.15g\n", what, got, want);
    fail();
  }
}

/* Independent figures of run (r, seed) straight from the formulas. */
static void expected(int r, int seed, double *ftrain, double *rel, double *gap) {
  double st = 0, se = 0, sg = 0;
  for (int step = 200; step > 200 - 10 * FINAL; step -= 10) {
    const double L = loss(r, seed, step), B = lb(seed, step);
    se += fabs(L - B) / B;
    sg += L - B;
    st += L;
  }
  *rel = se / FINAL;
  *gap = sg / FINAL;
  *ftrain = st / FINAL;
  if (r == 2 && seed == 2) *ftrain = (st - loss(r, seed, 160) + 2.5) / FINAL; /* window 170..200 + 210 */
}

static int have_gnuplot(void) { return system("gnuplot --version >/dev/null 2>&1") == 0; }

static void test_full_report(void **state) {
  (void)state;
  ufp4_report_run runs[12];
  fill_runs(runs, N_SEEDS);
  ufp4_report_options o = ufp4_report_options_default();
  o.final_steps = FINAL;
  o.command = "ufp4 report --out X runs";
  ufp4_report *rep;
  assert_int_equal(ufp4_report_build(runs, 12, &o, &rep), 0);
  char out[512], path[600];
  snprintf(out, sizeof out, "%s/out", root);
  assert_int_equal(ufp4_report_write(rep, out), 0);
  FILE *devnull = fopen("/dev/null", "w");
  ufp4_report_print_table(rep, devnull);
  fclose(devnull);
  ufp4_report_print_table(rep, stdout);
  ufp4_report_free(rep);

  snprintf(path, sizeof path, "%s/report.json", out);
  cJSON *j = load_json(path);
  const cJSON *jr = cJSON_GetObjectItemCaseSensitive(j, "runs");
  assert_int_equal(cJSON_GetArraySize(jr), 12);
  double rel[4][N_SEEDS + 1], gap[4][N_SEEDS + 1], ft[4][N_SEEDS + 1];
  for (int r = 0; r < 4; r++)
    for (int s = 1; s <= N_SEEDS; s++) {
      expected(r, s, &ft[r][s], &rel[r][s], &gap[r][s]);
      const cJSON *it, *x = NULL;
      cJSON_ArrayForEach(it, jr) {
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "recipe")->valuestring, recipes[r]) && jnum(it, "seed") == s) x = it;
      }
      assert_non_null(x);
      close_to(jnum(x, "final_train"), ft[r][s], 1e-12, "final_train");
      close_to(jnum(x, "final_val"), loss(r, s, 200) + 0.05, 1e-12, "final_val");
      if (r == 0) {
        assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(x, "rel_err")));
        continue;
      }
      close_to(jnum(x, "rel_err"), rel[r][s], 1e-12, "rel_err");
      close_to(jnum(x, "signed_gap"), gap[r][s], 1e-12, "signed_gap");
      close_to(jnum(x, "rel_window"), FINAL, 0, "rel_window");
      if (r == 2 && s == 2) close_to(jnum(x, "skipped"), 1, 0, "skipped");
    }
  /* hand check: e2m1 seed 3 has e = 0.013 exactly at every step, so rel_err = 0.013 */
  close_to(rel[2][3], 0.013, 1e-12, "hand rel");

  const cJSON *jrec = cJSON_GetObjectItemCaseSensitive(j, "recipes");
  for (int r = 1; r < 4; r++) {
    const cJSON *q = find_by(jrec, "recipe", recipes[r], NULL, NULL);
    assert_non_null(q);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "rel_err");
    double mean = (rel[r][1] + rel[r][2] + rel[r][3]) / 3, var = 0;
    for (int s = 1; s <= 3; s++) var += (rel[r][s] - mean) * (rel[r][s] - mean);
    close_to(jnum(m, "mean"), mean, 1e-12, "recipe mean");
    close_to(jnum(m, "std"), sqrt(var / 2), 1e-12, "recipe std");
    close_to(jnum(q, "seeds"), 3, 0, "seeds");
  }
  /* noise floor = fp32's mean rel err = 0.001 (|e| = 0.001 at every step of every seed) */
  close_to(jnum(j, "noise_floor"), 0.001, 1e-12, "noise floor");

  /* e2m1 vs ufp4 on rel err: d = {0.011-0.0095, 0.012-0.011, 0.013-0.0135} = {0.0015, 0.001, -0.0005};
   * mean 0.00066667, sd = sqrt(((0.00083333)^2 + (0.00033333)^2 + (0.00116667)^2) / 2) = 0.00104083,
   * t = 0.00066667 / (0.00104083 / sqrt 3) = 1.1094, df = 2 -> not significant. */
  const cJSON *jt = cJSON_GetObjectItemCaseSensitive(j, "pairs");
  const cJSON *t = find_by(jt, "a", "e2m1", "b", "ufp4");
  const cJSON *tm = t;
  if (t && strcmp(cJSON_GetObjectItemCaseSensitive(t, "metric")->valuestring, "rel_err")) t = NULL;
  if (!t) { /* the first match may be the signed-gap test */
    const cJSON *it;
    cJSON_ArrayForEach(it, jt) {
      if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "a")->valuestring, "e2m1") &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(it, "b")->valuestring, "ufp4") &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(it, "metric")->valuestring, "rel_err"))
        t = it;
    }
  }
  (void)tm;
  assert_non_null(t);
  double d[3], dm = 0, ss = 0;
  for (int s = 1; s <= 3; s++) dm += (d[s - 1] = rel[2][s] - rel[3][s]) / 3;
  for (int s = 0; s < 3; s++) ss += (d[s] - dm) * (d[s] - dm);
  const double t_want = dm / (sqrt(ss / 2) / sqrt(3.0));
  close_to(t_want, 1.1094, 1e-3, "hand t");
  close_to(jnum(t, "t"), t_want, 1e-9, "t");
  close_to(jnum(t, "df"), 2, 0, "df");
  /* df = 2 closed form: p = 1 - |t| / sqrt(2 + t^2) */
  close_to(jnum(t, "p"), 1 - t_want / sqrt(2 + t_want * t_want), 1e-9, "p");
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(t, "significant")));
  /* every pair: significant exactly when p < 0.05; baseline never in a pair; a != b */
  const cJSON *it;
  int n_tests = 0;
  cJSON_ArrayForEach(it, jt) {
    n_tests++;
    const char *a = cJSON_GetObjectItemCaseSensitive(it, "a")->valuestring;
    const char *b = cJSON_GetObjectItemCaseSensitive(it, "b")->valuestring;
    assert_true(strcmp(a, "bf16") && strcmp(b, "bf16"));
    assert_true(strcmp(a, b));
    assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "significant")), jnum(it, "p") < 0.05);
  }
  assert_int_equal(n_tests, 3 * 2 * 2); /* ordered pairs of {fp32, e2m1, ufp4}, two metrics */
  /* e2m1 - fp32 on signed gap: gap(e2m1,s) - gap(fp32,s) computed from the formulas */
  cJSON_ArrayForEach(it, jt) {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "a")->valuestring, "e2m1") ||
        strcmp(cJSON_GetObjectItemCaseSensitive(it, "b")->valuestring, "fp32") ||
        strcmp(cJSON_GetObjectItemCaseSensitive(it, "metric")->valuestring, "signed_gap"))
      continue;
    double g[3], gm = 0, gs = 0;
    for (int s = 1; s <= 3; s++) gm += (g[s - 1] = gap[2][s] - gap[1][s]) / 3;
    for (int s = 0; s < 3; s++) gs += (g[s] - gm) * (g[s] - gm);
    close_to(jnum(it, "t"), gm / (sqrt(gs / 2) / sqrt(3.0)), 1e-9, "gap t");
  }
  cJSON_Delete(j);

  /* files */
  struct stat st;
  snprintf(path, sizeof path, "%s/report.md", out);
  assert_int_equal(stat(path, &st), 0);
  char *html;
  size_t size;
  snprintf(path, sizeof path, "%s/report.html", out);
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &html, &size), 0);
  assert_null(strstr(html, "http"));
  assert_null(strstr(html, "src="));
  assert_non_null(strstr(html, "e2m1"));
  if (have_gnuplot()) {
    static const char *names[] = {"gap",       "loss_train", "loss_smoothed", "loss_val",
                                  "rel_err",   "diag_alpha", "diag_sqnr",     "diag_out_sqnr",
                                  "diag_drift"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      snprintf(path, sizeof path, "%s/plots/%s.svg", out, names[i]);
      if (stat(path, &st) != 0) fprintf(stderr, "missing %s\n", path);
      assert_int_equal(stat(path, &st), 0);
      snprintf(path, sizeof path, "%s/plots/%s.png", out, names[i]);
      assert_int_equal(stat(path, &st), 0);
      snprintf(path, sizeof path, "%s/plots/%s.gp", out, names[i]);
      assert_int_equal(stat(path, &st), 0);
    }
    assert_non_null(strstr(html, "<svg"));
  } else {
    fprintf(stderr, "gnuplot not installed: plot file checks skipped\n");
  }
  free(html);
}

static void test_no_gnuplot_and_one_seed(void **state) {
  (void)state;
  ufp4_report_run runs[4];
  fill_runs(runs, 1);
  ufp4_report_options o = ufp4_report_options_default();
  o.final_steps = FINAL;
  ufp4_report *rep;
  assert_int_equal(ufp4_report_build(runs, 4, &o, &rep), 0);
  assert_int_equal(rep->n_pairs, 3 * 2 * 2);
  for (size_t i = 0; i < rep->n_pairs; i++) {
    assert_false(rep->pairs[i].valid);
    assert_int_equal(rep->pairs[i].n, 1);
  }
  char out[512], path[600];
  snprintf(out, sizeof out, "%s/out1", root);
  setenv("UFP4_GNUPLOT", "/nonexistent/gnuplot", 1);
  int rc = ufp4_report_write(rep, out);
  unsetenv("UFP4_GNUPLOT");
  assert_int_equal(rc, 0);
  assert_int_equal(rep->plotted, 0);
  assert_non_null(strstr(rep->plot_note, "not found"));
  ufp4_report_free(rep);
  char *md;
  size_t size;
  snprintf(path, sizeof path, "%s/report.md", out);
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &md, &size), 0);
  assert_non_null(strstr(md, "no significance test is possible"));
  assert_non_null(strstr(md, "not found"));
  free(md);
  struct stat st;
  snprintf(path, sizeof path, "%s/plots/loss_train.gp", out);
  assert_int_equal(stat(path, &st), 0); /* scripts are written for later */
  snprintf(path, sizeof path, "%s/plots/loss_train.svg", out);
  assert_int_not_equal(stat(path, &st), 0);
}

static void test_runs_json_and_bad_input(void **state) {
  (void)state;
  char path[1024], text[2048];
  snprintf(path, sizeof path, "%s/runs.json", root);
  snprintf(text, sizeof text,
           "{\"runs\":[{\"recipe\":\"bf16\",\"seed\":1,\"dir\":\"runs/bf16_s1\"},"
           "{\"recipe\":\"mine\",\"seed\":1,\"dir\":\"%s/runs/ufp4_s1\"}]}",
           root);
  write_text(path, text);
  ufp4_report_run *runs;
  size_t n;
  assert_int_equal(ufp4_report_runs_load(path, &runs, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(runs[1].recipe, "mine");
  ufp4_report *rep;
  ufp4_report_options o = ufp4_report_options_default();
  o.final_steps = FINAL;
  assert_int_equal(ufp4_report_build(runs, n, &o, &rep), 0);
  close_to(rep->runs[1].rel_err, fabs(dev(3, 1)), 1e-12, "runs.json rel err");
  assert_true(rep->control_idx < 0);
  ufp4_report_free(rep);

  /* no baseline */
  assert_true(ufp4_report_build(runs + 1, 1, &o, &rep) < 0);
  assert_non_null(strstr(ufp4_last_error(), "bf16"));
  /* duplicate (recipe, seed) */
  ufp4_report_run dup[2] = {runs[0], runs[0]};
  assert_true(ufp4_report_build(dup, 2, &o, &rep) < 0);
  free(runs);

  /* malformed metrics.jsonl, missing config.json, malformed runs.json: errors name the file */
  char dir[600];
  snprintf(dir, sizeof dir, "%s/bad", root);
  make_run(dir, 0, 1, 0);
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  write_text(path, "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":\n");
  ufp4_report_run bad = {.seed = -1};
  snprintf(bad.dir, sizeof bad.dir, "%s", dir);
  assert_int_equal(ufp4_report_build(&bad, 1, &o, &rep), UFP4_EFORMAT);
  assert_non_null(strstr(ufp4_last_error(), "metrics.jsonl:2"));
  write_text(path, "");
  assert_true(ufp4_report_build(&bad, 1, &o, &rep) < 0);
  assert_non_null(strstr(ufp4_last_error(), "metrics.jsonl"));
  snprintf(path, sizeof path, "%s/config.json", dir);
  unlink(path);
  assert_true(ufp4_report_build(&bad, 1, &o, &rep) < 0);
  assert_non_null(strstr(ufp4_last_error(), "config.json"));
  write_text(path, "{\"recipe\": 3}");
  assert_int_equal(ufp4_report_build(&bad, 1, &o, &rep), UFP4_EFORMAT);
  assert_non_null(strstr(ufp4_last_error(), "config.json"));
  snprintf(path, sizeof path, "%s/bad.json", root);
  write_text(path, "[{\"recipe\":\"x\"}]");
  assert_true(ufp4_report_runs_load(path, &runs, &n) < 0);
  assert_non_null(strstr(ufp4_last_error(), "bad.json"));
  /* cut short: a parse error with where, not "expected an array" */
  write_text(path, "[{\"recipe\":\"x\",\"seed\":1,\"dir\":\"a\"},{\"recipe\":\"y\",\"seed\":1,\"dir\":\"b\"}");
  assert_int_equal(ufp4_report_runs_load(path, &runs, &n), UFP4_EFORMAT);
  if (!strstr(ufp4_last_error(), "bad.json: not valid JSON (near byte")) fail_msg("%s", ufp4_last_error());
}

/* Runs named by their config.json: by the preset; a run with overrides by its recipe and its
 * overrides, never as the preset (it would have become the baseline); a --baseline written as
 * the canonical spec names the same runs as the preset does. */
static void test_names_from_config(void **state) {
  (void)state;
  ufp4_report_run runs[4];
  fill_runs(runs, 1); /* bf16, fp32, e2m1, ufp4 of seed 1, their recipes from config.json */
  char path[4200], spec[1024];
  snprintf(path, sizeof path, "%s/config.json", runs[3].dir);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  ufp4_recipe_format(&r, spec, sizeof spec);
  char cfg[2048];
  snprintf(cfg, sizeof cfg, "{\"recipe\":\"%s\",\"seed\":1,\"overrides\":[\"model.layers.0.*=bf16\",\"lm_head=nvfp4\"]}",
           spec);
  write_text(path, cfg);
  ufp4_report_options o = ufp4_report_options_default();
  o.final_steps = FINAL;
  assert_int_equal(ufp4_recipe_parse("bf16", &r), 0);
  ufp4_recipe_format(&r, spec, sizeof spec);
  o.baseline = spec;
  ufp4_report *rep;
  if (ufp4_report_build(runs, 4, &o, &rep)) fail_msg("%s", ufp4_last_error());
  assert_string_equal(rep->runs[0].recipe, "bf16");
  assert_string_equal(rep->recipes[rep->baseline_idx].recipe, "bf16");
  assert_string_equal(rep->runs[3].recipe, "ufp4 +overrides model.layers.0.*=bf16;lm_head=nvfp4");
  ufp4_report_free(rep);
  make_run(runs[3].dir, 3, 1, 0); /* as it was, for the other tests */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_report),
      cmocka_unit_test(test_no_gnuplot_and_one_seed),
      cmocka_unit_test(test_runs_json_and_bad_input),
      cmocka_unit_test(test_names_from_config),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
