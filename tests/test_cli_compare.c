/* End to end: compare (with an ablation), report, drift and sweep on tiny models over real text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "json_test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli_fixture.h"
#include "ufp4/fileio.h"

static char work[] = "/tmp/ufp4_clicmp_XXXXXX";
static const char *cli;
static char out[1 << 18];

#define run(...) cli_run(out, sizeof out, __VA_ARGS__)

static int exists(const char *fmt, const char *arg) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, fmt, arg);
  return stat(path, &st) == 0;
}

static int setup(void **state) { return cli_fixture_setup(state, work, &cli); }

#define TINY "--layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 4 --lr 3e-3 --warmup 2 --eval-batches 2 --no-progress"

static const cJSON *recipe_entry(const cJSON *report, const char *name) {
  const cJSON *recipes = cJSON_GetObjectItemCaseSensitive(report, "recipes"), *r;
  cJSON_ArrayForEach(r, recipes) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "recipe");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return r;
  }
  return NULL;
}

static void test_compare_and_report(void **state) {
  (void)state;
  assert_int_equal(run("%s compare --data %s/data --out %s/cmp --recipes e2m1,ufp4 --seeds 2 --steps 12 "
                       "--final-steps 4 --target-effect 0.25 " TINY,
                       cli, work, work),
                   0);
  /* The table is printed, and the report folder holds md, html, json and per-run folders. */
  assert_non_null(strstr(out, "rel. err"));
  assert_non_null(strstr(out, "report.html"));
  assert_true(exists("%s/cmp/report.md", work));
  assert_true(exists("%s/cmp/report.html", work));
  assert_true(exists("%s/cmp/runs/ufp4/seed2/metrics.jsonl", work));
  assert_true(exists("%s/cmp/runs/ufp4/seed1/diagnostics.jsonl", work));
  cJSON *j = load_json("%s/cmp/report.json", work);
  /* bf16 baseline, fp32 control, and the two recipes, each over two seeds. */
  const char *names[] = {"bf16", "fp32", "e2m1", "ufp4"};
  for (int i = 0; i < 4; i++) assert_non_null(recipe_entry(j, names[i]));
  /* --target-effect reaches the report; the matrix is printed */
  const cJSON *pw = cJSON_GetObjectItemCaseSensitive(j, "power");
  assert_true(cJSON_GetObjectItemCaseSensitive(pw, "target_effect_pp")->valuedouble == 0.25);
  assert_non_null(strstr(out, "Relative error, row minus column"));
  cJSON_Delete(j);
  /* report rebuilds the same comparison from the run folders. */
  assert_int_equal(run("%s report --out %s/rep bf16=%s/cmp/runs/bf16/seed1 bf16=%s/cmp/runs/bf16/seed2 "
                       "e2m1=%s/cmp/runs/e2m1/seed1 e2m1=%s/cmp/runs/e2m1/seed2 --final-steps 4",
                       cli, work, work, work, work, work),
                   0);
  assert_true(exists("%s/rep/report.json", work));
  /* Seeds share the data order: two bf16 runs of one seed are identical, so a rerun is exact. */
  assert_int_equal(run("%s compare --data %s/data --out %s/cmp2 --recipes e2m1 --seeds 1 --no-control --steps 12 "
                       "--final-steps 4 " TINY,
                       cli, work, work),
                   0);
  char a[4096], b[4096], *ta, *tb;
  size_t na, nb;
  snprintf(a, sizeof a, "%s/cmp/runs/e2m1/seed1/ckpt/step_00000012/model.safetensors", work);
  snprintf(b, sizeof b, "%s/cmp2/runs/e2m1/seed1/ckpt/step_00000012/model.safetensors", work);
  assert_int_equal(ufp4_read_file(a, 1 << 26, &ta, &na), 0);
  assert_int_equal(ufp4_read_file(b, 1 << 26, &tb, &nb), 0);
  assert_int_equal(na, nb);
  assert_memory_equal(ta, tb, na);
  free(ta);
  free(tb);
}

static void test_ablation_rows(void **state) {
  (void)state;
  assert_int_equal(run("%s compare --data %s/data --out %s/abl --recipes ufp4 --ablation sr-scope --seeds 1 "
                       "--no-control --steps 8 --final-steps 4 " TINY,
                       cli, work, work),
                   0);
  cJSON *j = load_json("%s/abl/report.json", work);
  assert_non_null(recipe_entry(j, "ufp4,sr=dy"));
  assert_non_null(recipe_entry(j, "ufp4,sr=none"));
  assert_null(recipe_entry(j, "fp32"));
  cJSON_Delete(j);
  assert_int_equal(run("%s compare --data %s/data --out %s/x --ablation colour", cli, work, work), 2);
  /* a schedule is one entry of --recipes, but an ablation varies one recipe: refused, named */
  assert_int_equal(run("%s compare --data %s/data --out %s/x --recipes 'nvfp4@0,bf16@4' --ablation rht-scope " TINY,
                       cli, work, work),
                   2);
  assert_non_null(strstr(out, "'nvfp4@0,bf16@4' is a schedule"));
  assert_int_equal(run("%s compare --data %s/data --out %s/x --target-effect 0", cli, work, work), 2);
  assert_non_null(strstr(out, "--target-effect"));
  /* --recipe and --schedule set one run's recipe; the grid sets each run's from --recipes, so they
   * are refused, not ignored, and its help does not offer them */
  assert_int_equal(run("%s compare --data %s/data --out %s/x --recipes e2m1 --recipe ufp4", cli, work, work), 2);
  assert_non_null(strstr(out, "compare: --recipe sets one run's recipe"));
  assert_int_equal(run("%s compare --data %s/data --out %s/x --schedule=e2m1@0,bf16@4", cli, work, work), 2);
  assert_non_null(strstr(out, "compare: --schedule sets one run's recipe"));
  assert_int_equal(run("%s compare --help", cli), 0);
  assert_null(strstr(out, "\n  --recipe "));
  assert_null(strstr(out, "\n  --schedule "));
  assert_non_null(strstr(out, "\n  --override ")); /* the other train flags stay */
}

static void test_drift(void **state) {
  (void)state;
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/cmp/runs/bf16/seed1/ckpt/step_00000012", work);
  assert_int_equal(run("%s drift --checkpoint %s --data %s/data --out %s/drift --batches 2 --recipes 'e2m1;ufp4'", cli,
                       ckpt, work, work),
                   0);
  cJSON *j = load_json("%s/drift/drift.json", work);
  const cJSON *recipes = cJSON_GetObjectItemCaseSensitive(j, "recipes"), *r;
  int n = 0;
  cJSON_ArrayForEach(r, recipes) {
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(r, "layers");
    assert_int_equal(cJSON_GetArraySize(layers), 2); /* embeddings + 1 block */
    const cJSON *l0 = cJSON_GetArrayItem(layers, 0), *l1 = cJSON_GetArrayItem(layers, 1);
    assert_true(cJSON_GetObjectItemCaseSensitive(l0, "norm_ratio")->valuedouble == 1.0);
    double cos1 = cJSON_GetObjectItemCaseSensitive(l1, "cosine")->valuedouble;
    assert_true(cos1 > 0.9 && cos1 < 1.0); /* 4-bit rounding moves the block output, a little */
    n++;
  }
  assert_int_equal(n, 2);
  cJSON_Delete(j);
}

static void test_sweep(void **state) {
  (void)state;
  assert_int_equal(run("%s sweep --data %s/data --out %s/sweep --sizes 1x32,1x64,2x64 --recipes bf16,ufp4 --steps 10 "
                       "--seq-len 32 --batch 4 --lr 3e-3 --warmup 2 --eval-batches 2 --no-progress",
                       cli, work, work),
                   0);
  cJSON *j = load_json("%s/sweep/sweep.json", work);
  const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(j, "sizes");
  assert_int_equal(cJSON_GetArraySize(sizes), 3);
  /* C = 6 N D grows with the size. */
  double c0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sizes, 0), "flops")->valuedouble;
  double c2 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sizes, 2), "flops")->valuedouble;
  assert_true(c2 > c0);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "fits")), 2);
  cJSON_Delete(j);
  assert_true(exists("%s/sweep/sweep.md", work));
  assert_int_equal(run("%s sweep --data %s/data --out %s/s2 --recipes e2m1", cli, work, work), 2);
  assert_non_null(strstr(out, "bf16"));
  /* sweep trains each recipe as listed: a schedule would be trained by every run, bf16 too */
  assert_int_equal(run("%s sweep --data %s/data --out %s/s2 --recipes bf16,e2m1 --schedule 'e2m1@0,bf16@4'", cli, work, work), 2);
  assert_non_null(strstr(out, "sweep: --schedule sets one run's recipe"));
  assert_int_equal(run("%s sweep --help", cli), 0);
  assert_null(strstr(out, "\n  --schedule "));
  assert_null(strstr(out, "\n  --recipe "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_and_report),
      cmocka_unit_test(test_ablation_rows),
      cmocka_unit_test(test_drift),
      cmocka_unit_test(test_sweep),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
