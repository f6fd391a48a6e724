/* compare, sweep and report as library calls (compare.h, sweep.h, report.h), without the CLI:
 * tiny models on synthetic byte shards. The figures are checked against the run folders the
 * calls wrote (read here with cJSON, not through the report's reader), the sweep fit against its
 * own losses, the files for being complete (no temporary left behind), and the error paths for
 * clear messages that name the culprit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "json_test_util.h"
#include "grid_test_util.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ufp4/compare.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/sweep.h"

static char *const work = grid_work, *const data = grid_data;

/* The losses of the last two train lines of RUN/metrics.jsonl (last first), and their steps. */
static void last_two_losses(const char *run, double loss[2], int step[2]) {
  char path[1024], *text;
  size_t n;
  snprintf(path, sizeof path, "%s/metrics.jsonl", run);
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &n), 0);
  loss[0] = loss[1] = NAN;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *j = cJSON_Parse(line);
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(j, "loss");
    if (cJSON_IsNumber(l)) {
      loss[1] = loss[0], step[1] = step[0];
      loss[0] = l->valuedouble;
      step[0] = cJSON_GetObjectItemCaseSensitive(j, "step")->valueint;
    }
    cJSON_Delete(j);
  }
  free(text);
}

/* Atomic writes leave no "<name>.tmp.XXXXXX" behind. */
static void assert_no_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (strstr(e->d_name, ".tmp.")) fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
    assert_null(strstr(e->d_name, ".tmp."));
  }
  closedir(d);
}

static const cJSON *by_recipe(const cJSON *arr, const char *name) {
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "recipe");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return it;
  }
  return NULL;
}

/* A quiet compare of the tiny model on the synthetic shards into WORK/sub (written to out). */
static ufp4_compare_options compare_options(const char *sub, char *out, size_t size) {
  snprintf(out, size, "%s/%s", work, sub);
  ufp4_compare_options o = ufp4_compare_options_default();
  o.data_dir = data;
  o.out_dir = out;
  o.log = NULL;
  o.train = grid_test_tiny(o.train);
  return o;
}

static void test_compare(void **state) {
  (void)state;
  char out[700];
  ufp4_compare_options o = compare_options("cmp", out, sizeof out);
  o.recipes = "e2m1";
  o.seeds = 2;
  o.command = "compare as a library";
  ufp4_compare_result res;
  assert_ok(ufp4_compare_run(&o, &res));
  assert_int_equal(res.n_recipes, 3); /* bf16, the fp32 control, e2m1 */
  assert_int_equal(res.n_runs, 6);
  assert_int_equal(res.rank, 0);
  assert_non_null(res.report);
  assert_int_equal(res.report->final_steps, 2); /* steps / 5 */
  ufp4_compare_result_free(&res);
  assert_null(res.report);

  cJSON *j = load_json("%s/report.json", out);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "command")->valuestring,
                      "compare as a library");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "control")->valuestring, "fp32");
  const cJSON *recipes = cJSON_GetObjectItemCaseSensitive(j, "recipes");
  assert_int_equal(cJSON_GetArraySize(recipes), 3);
  assert_string_equal(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(recipes, 0), "recipe")->valuestring,
      "bf16");
  assert_string_equal(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(recipes, 1), "recipe")->valuestring,
      "fp32");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(by_recipe(recipes, "e2m1"), "seeds")->valueint,
                   2);
  /* Seed 2's e2m1 figures from the run folders themselves: the last two logged steps (log_every
   * 1) against the bf16 run of the same seed. */
  const cJSON *runs = cJSON_GetObjectItemCaseSensitive(j, "runs"), *it, *x = NULL;
  assert_int_equal(cJSON_GetArraySize(runs), 6);
  cJSON_ArrayForEach(it, runs) {
    if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "recipe")->valuestring, "e2m1") &&
        cJSON_GetObjectItemCaseSensitive(it, "seed")->valueint == 2)
      x = it;
  }
  assert_non_null(x);
  char run[1024], base[1024];
  snprintf(run, sizeof run, "%s/runs/e2m1/seed2", out);
  snprintf(base, sizeof base, "%s/runs/bf16/seed2", out);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(x, "dir")->valuestring, run);
  double L[2], B[2];
  int step[2], base_step[2];
  last_two_losses(run, L, step);
  last_two_losses(base, B, base_step);
  assert_int_equal(step[0], 10);
  assert_int_equal(step[1], 9);
  assert_int_equal(base_step[0], 10);
  assert_int_equal(base_step[1], 9);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(x, "rel_window")->valueint, 2);
  const double rel = (fabs(L[0] - B[0]) / B[0] + fabs(L[1] - B[1]) / B[1]) / 2;
  const double gap = ((L[0] - B[0]) + (L[1] - B[1])) / 2;
  assert_true(rel > 0);
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(x, "rel_err")->valuedouble - rel) <=
              1e-12 * rel);
  assert_true(fabs(cJSON_GetObjectItemCaseSensitive(x, "signed_gap")->valuedouble - gap) <=
              1e-12 * fabs(gap));
  cJSON_Delete(j);
  assert_no_temporaries(out);
}

static void test_compare_errors(void **state) {
  (void)state;
  char out[700];
  ufp4_compare_options o = compare_options("bad", out, sizeof out);
  o.ablation = "colour";
  ufp4_compare_result res;
  assert_int_equal(ufp4_compare_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "colour"));
  assert_int_equal(ufp4_compare_run(&o, &res), UFP4_EINVAL);
  struct stat st;
  assert_int_not_equal(stat(out, &st), 0); /* refused before anything was made */
  o.ablation = NULL;
  o.seeds = UFP4_MAX_GRID_SEEDS + 1;
  assert_int_equal(ufp4_compare_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "seeds"));
  o.seeds = 1;
  /* a schedule for the whole grid: each run's is its entry's, so it is refused, not dropped */
  snprintf(o.train.schedule, sizeof o.train.schedule, "e2m1@0,bf16@4");
  assert_int_equal(ufp4_compare_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "\"e2m1@0,bf16@4\" is set"));
  o.train.schedule[0] = '\0';
  o.recipes = "e2m1,nosuchformat";
  assert_true(ufp4_compare_check(&o) < 0);
  assert_non_null(strstr(ufp4_last_error(), "nosuchformat"));
  /* A run that fails (no shards) fails the call, and no report is written. */
  o.recipes = "e2m1";
  o.seeds = 1;
  o.data_dir = out;
  assert_true(ufp4_compare_run(&o, &res) < 0);
  assert_null(res.report);
  if (!strstr(ufp4_last_error(), out)) fprintf(stderr, "message: %s\n", ufp4_last_error());
  assert_non_null(strstr(ufp4_last_error(), out));
  char path[800];
  snprintf(path, sizeof path, "%s/report.json", out);
  assert_int_not_equal(stat(path, &st), 0);
}

static void test_report_from_runs(void **state) {
  (void)state;
  /* The runs of test_compare, named on a "command line" as NAME=DIR. */
  char a[4][1024];
  const char *args[4] = {a[0], a[1], a[2], a[3]};
  snprintf(a[0], sizeof a[0], "bf16=%s/cmp/runs/bf16/seed1", work);
  snprintf(a[1], sizeof a[1], "bf16=%s/cmp/runs/bf16/seed2", work);
  snprintf(a[2], sizeof a[2], "mine=%s/cmp/runs/e2m1/seed1", work);
  snprintf(a[3], sizeof a[3], "mine=%s/cmp/runs/e2m1/seed2", work);
  ufp4_report_run *runs;
  size_t n;
  assert_ok(ufp4_report_runs_parse(args, 4, &runs, &n));
  assert_int_equal(n, 4);
  assert_string_equal(runs[0].recipe, "bf16");
  assert_string_equal(runs[2].recipe, "mine");
  assert_true(runs[3].seed == -1); /* config.json's */
  ufp4_report_options opt = ufp4_report_options_default();
  opt.final_steps = 2;
  opt.plots = 0;
  char out[700];
  snprintf(out, sizeof out, "%s/rep", work);
  ufp4_report *rep;
  assert_ok(ufp4_report_make(runs, n, &opt, out, &rep));
  assert_int_equal(rep->n_recipes, 2);
  assert_int_equal(rep->control_idx, -1); /* no fp32 run given */
  ufp4_report_free(rep);
  cJSON *j = load_json("%s/report.json", out);
  const cJSON *mine = by_recipe(cJSON_GetObjectItemCaseSensitive(j, "recipes"), "mine");
  assert_non_null(mine);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(mine, "seeds")->valueint, 2);
  /* Same runs, same window: the figures of test_compare's e2m1. */
  cJSON *c = load_json("%s/cmp/report.json", work);
  const cJSON *e2m1 = by_recipe(cJSON_GetObjectItemCaseSensitive(c, "recipes"), "e2m1");
  const cJSON *m1 = cJSON_GetObjectItemCaseSensitive(mine, "rel_err");
  const cJSON *m2 = cJSON_GetObjectItemCaseSensitive(e2m1, "rel_err");
  assert_true(cJSON_GetObjectItemCaseSensitive(m1, "mean")->valuedouble ==
              cJSON_GetObjectItemCaseSensitive(m2, "mean")->valuedouble);
  cJSON_Delete(c);
  cJSON_Delete(j);
  assert_no_temporaries(out);
  /* A report into a folder that cannot be made fails, names it, and hands back nothing. */
  char bad[800];
  snprintf(bad, sizeof bad, "%s/report.json/sub", out);
  rep = (ufp4_report *)1;
  assert_true(ufp4_report_make(runs, n, &opt, bad, &rep) < 0);
  assert_null(rep);
  assert_non_null(strstr(ufp4_last_error(), "report.json"));
  free(runs);
  /* A plain folder names no recipe: the report takes config.json's. */
  const char *plain[1] = {a[3] + 5};
  assert_ok(ufp4_report_runs_parse(plain, 1, &runs, &n));
  assert_string_equal(runs[0].recipe, "");
  assert_string_equal(runs[0].dir, a[3] + 5);
  free(runs);
  /* An over-long recipe name is refused with the argument named. */
  char longname[700];
  memset(longname, 'x', 600);
  snprintf(longname + 600, 100, "=%s", work);
  const char *one[1] = {longname};
  assert_int_equal(ufp4_report_runs_parse(one, 1, &runs, &n), UFP4_EINVAL);
  assert_null(runs);
  assert_non_null(strstr(ufp4_last_error(), "too long"));
}

static void test_sweep(void **state) {
  (void)state;
  char out[700];
  snprintf(out, sizeof out, "%s/sweep", work);
  ufp4_sweep_options o = ufp4_sweep_options_default();
  o.data_dir = data;
  o.out_dir = out;
  o.sizes = "1x32,1x64,2x64";
  o.recipes = "bf16,ufp4";
  o.train = grid_test_tiny(o.train);
  o.train.steps = 8;
  ufp4_sweep_result res;
  setenv("UFP4_GNUPLOT", "/nonexistent/gnuplot", 1);
  const int rc = ufp4_sweep_run(&o, &res);
  unsetenv("UFP4_GNUPLOT");
  assert_ok(rc);
  assert_int_equal(res.plotted, 0);
  assert_int_equal(res.n_sizes, 3);
  assert_int_equal(res.n_recipes, 2);
  assert_int_equal(res.bf16, 0);
  /* C = 6 N D with D = 8 steps x 4 x 32 tokens. */
  for (int si = 0; si < 3; si++)
    assert_true(res.size[si].flops == 6.0 * res.size[si].params * 8 * 4 * 32);
  assert_true(res.size[0].flops < res.size[1].flops && res.size[1].flops < res.size[2].flops);
  cJSON *j = load_json("%s/sweep.json", out);
  const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(j, "sizes");
  const cJSON *fits = cJSON_GetObjectItemCaseSensitive(j, "fits");
  assert_int_equal(cJSON_GetArraySize(sizes), 3);
  for (int k = 0; k < 2; k++) {
    /* Each loss is the final val loss the run logged (one seed: no mean to take). */
    for (int si = 0; si < 3; si++) {
      char run[1024];
      snprintf(run, sizeof run, "%s/runs/%dx%d/%s/seed1/metrics.jsonl", out, res.size[si].layers,
               res.size[si].width, res.recipe[k]);
      cJSON *last = NULL;
      char *text;
      size_t n;
      assert_int_equal(ufp4_read_file(run, 1 << 26, &text, &n), 0);
      for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *l = cJSON_Parse(line);
        if (cJSON_GetObjectItemCaseSensitive(l, "val_loss"))
          cJSON_Delete(last), last = l;
        else
          cJSON_Delete(l);
      }
      free(text);
      assert_non_null(last);
      const double logged = cJSON_GetObjectItemCaseSensitive(last, "val_loss")->valuedouble;
      cJSON_Delete(last);
      assert_true(fabs(res.size[si].loss[k] - logged) <= 1e-8 * logged);
      const cJSON *jl = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sizes, si), "loss");
      assert_true(fabs(cJSON_GetObjectItemCaseSensitive(jl, res.recipe[k])->valuedouble - logged) <=
                  1e-8 * logged);
    }
    /* The fit is the power-law fit of these three points, as sweep.json records it. */
    assert_true(res.fitted[k]);
    double C[3], L[3];
    for (int si = 0; si < 3; si++) C[si] = res.size[si].flops, L[si] = res.size[si].loss[k];
    ufp4_power_fit f;
    assert_int_equal(ufp4_fit_power_law(C, L, 3, 0, 0, &f), 0);
    assert_true(f.a == res.fit[k].a && f.b == res.fit[k].b && f.c == res.fit[k].c);
    if (!f.at_bound) /* three points, three parameters: the curve goes through them */
      for (int si = 0; si < 3; si++)
        assert_true(fabs(ufp4_power_law_eval(&f, C[si]) - L[si]) < 1e-6);
    const cJSON *jf = by_recipe(fits, res.recipe[k]);
    assert_true(fabs(cJSON_GetObjectItemCaseSensitive(jf, "b")->valuedouble - f.b) <=
                1e-8 * fabs(f.b));
  }
  cJSON_Delete(j);
  struct stat st;
  char path[800];
  snprintf(path, sizeof path, "%s/sweep.md", out);
  assert_int_equal(stat(path, &st), 0);
  snprintf(path, sizeof path, "%s/sweep.dat", out);
  assert_int_equal(stat(path, &st), 0);
  assert_no_temporaries(out);
  /* sweep.md is what ufp4_sweep_print prints. */
  char *md, *printed;
  size_t n_md, n_printed;
  snprintf(path, sizeof path, "%s/sweep.md", out);
  assert_int_equal(ufp4_read_file(path, 1 << 20, &md, &n_md), 0);
  FILE *f = open_memstream(&printed, &n_printed);
  ufp4_sweep_print(&res, f);
  fclose(f);
  assert_int_equal(n_md, n_printed);
  assert_memory_equal(md, printed, n_md);
  assert_non_null(strstr(md, "| 2x64 |"));
  free(md);
  free(printed);
}

static void test_sweep_errors(void **state) {
  (void)state;
  ufp4_sweep_options o = ufp4_sweep_options_default();
  o.data_dir = data;
  o.out_dir = work;
  o.recipes = "e2m1,ufp4";
  assert_int_equal(ufp4_sweep_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "bf16"));
  o.recipes = "bf16";
  o.sizes = "2x64,3x30";
  ufp4_sweep_result res;
  assert_int_equal(ufp4_sweep_run(&o, &res), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "'3x30'"));
  o.sizes = "1x32";
  o.seeds = UFP4_MAX_GRID_SEEDS + 1;
  assert_int_equal(ufp4_sweep_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "seeds"));
  o.seeds = 1;
  /* a schedule would be trained by every run, the bf16 reference too: refused */
  snprintf(o.train.schedule, sizeof o.train.schedule, "e2m1@0,bf16@4");
  assert_int_equal(ufp4_sweep_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "without a schedule"));
  o.train.schedule[0] = '\0';
  /* A run folder that would not fit a run config is refused, not cut (two runs in one folder). */
  char long_out[1100];
  memset(long_out, 'a', sizeof long_out - 1);
  long_out[0] = '/';
  long_out[sizeof long_out - 1] = '\0';
  o.out_dir = long_out;
  assert_int_equal(ufp4_sweep_check(&o), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "longer than"));
  o.out_dir = NULL;
  assert_int_equal(ufp4_sweep_check(&o), UFP4_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare),          cmocka_unit_test(test_compare_errors),
      cmocka_unit_test(test_report_from_runs), cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_sweep_errors),
  };
  return cmocka_run_group_tests(tests, grid_test_setup, grid_test_teardown);
}
