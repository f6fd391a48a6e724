/* End to end: `ufp4 drift --mode forward|backward|both` on a checkpoint and a shard written here:
 * what each mode writes, the JSON's intervals against the textbook t interval of its own per-batch
 * values, and the errors for a bad mode, a missing checkpoint and a bad recipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "json_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_test_util.h"
#include "cli_fixture.h"

enum { T = 16, L = 3, VOCAB = 256, N_WINDOWS = 8 };
/* t_{0.975, 2}, the interval of 3 batches (tables print 4.303). */
#define T975_DF2 4.302652729911275

static char work[] = "/tmp/ufp4_cli_drift_XXXXXX";
static const char *cli;
static char out[1 << 18];

#define run(...) cli_run(out, sizeof out, __VA_ARGS__)

/* A checkpoint of an initialized 3-block model and a bytes val.tok of N_WINDOWS windows. */
static int setup(void **state) {
  (void)state;
  cli = getenv("UFP4_CLI");
  if (!cli) {
    fprintf(stderr, "skipped: needs UFP4_CLI (run under ctest)\n");
    exit(77);
  }
  if (!mkdtemp(work)) return -1;
  ufp4_model_config c = ckpt_tiny_config(L, 32, T, VOCAB);
  return ckpt_write_tiny(work, &c, 3, N_WINDOWS);
}

static int teardown(void **state) {
  (void)state;
  ufp4_remove_tree(work);
  return 0;
}

static int exists(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s/%s", work, dir, name);
  return stat(path, &st) == 0;
}

static const cJSON *get(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) fail_msg("no \"%s\" in the JSON", key);
  return v;
}

/* {"mean","ci_low","ci_high","n","values"} is the textbook interval of its 3 values. */
static void check_ci(const cJSON *ci) {
  const cJSON *values = get(ci, "values");
  assert_int_equal(cJSON_GetArraySize(values), 3);
  assert_int_equal(get(ci, "n")->valueint, 3);
  double x[3], mean = 0, ss = 0;
  for (int i = 0; i < 3; i++) mean += (x[i] = cJSON_GetArrayItem(values, i)->valuedouble) / 3;
  for (int i = 0; i < 3; i++) ss += (x[i] - mean) * (x[i] - mean);
  /* The JSON holds 9 significant digits: the values' rounding moves the half width by up to
   * about T975_DF2 x 1e-9 |x|. */
  const double half = T975_DF2 * sqrt(ss / 2) / sqrt(3.0), tol = 1e-8 * (5 * fabs(mean) + half);
  assert_true(fabs(get(ci, "mean")->valuedouble - mean) <= tol);
  assert_true(fabs(get(ci, "ci_low")->valuedouble - (mean - half)) <= tol);
  assert_true(fabs(get(ci, "ci_high")->valuedouble - (mean + half)) <= tol);
}

/* A list of points: count, and each one's two intervals. */
static void check_points(const cJSON *points, int n) {
  assert_int_equal(cJSON_GetArraySize(points), n);
  const cJSON *p;
  cJSON_ArrayForEach(p, points) {
    check_ci(get(p, "norm_ratio_ci"));
    check_ci(get(p, "cosine_ci"));
    assert_true(get(p, "norm_ratio")->valuedouble == get(get(p, "norm_ratio_ci"), "mean")->valuedouble);
  }
}

static void test_backward_mode(void **state) {
  (void)state;
  assert_int_equal(run("%s drift --checkpoint %s/ckpt --data %s --out %s/bwd --mode backward --batches 3 "
                       "--batch 2 --recipes 'fp32;e2m1'",
                       cli, work, work, work),
                   0);
  assert_non_null(strstr(out, "dW of e2m1"));
  assert_non_null(strstr(out, "q_proj"));
  assert_null(strstr(out, "forward:"));
  assert_true(exists("bwd", "drift_backward.dat"));
  assert_false(exists("bwd", "drift.dat"));
  cJSON *j = load_json("%s/bwd/drift.json", work);
  assert_string_equal(get(j, "mode")->valuestring, "backward");
  const cJSON *recipes = get(j, "recipes");
  assert_int_equal(cJSON_GetArraySize(recipes), 2);
  for (int k = 0; k < 2; k++) {
    const cJSON *r = cJSON_GetArrayItem(recipes, k), *bw = get(r, "backward");
    assert_null(cJSON_GetObjectItemCaseSensitive(r, "layers"));
    check_points(get(bw, "layers"), L + 1);
    check_points(get(bw, "weights"), 2 + 9 * L + 1); /* embeddings, 9 per block, norm, head */
    check_ci(get(bw, "log_ratio_slope"));
    const cJSON *w0 = cJSON_GetArrayItem(get(bw, "weights"), 2);
    assert_string_equal(get(w0, "name")->valuestring, "model.layers.0.self_attn.q_proj.weight");
    /* fp32 is the exact backward; e2m1 is not. */
    const double c0 = get(cJSON_GetArrayItem(get(bw, "layers"), 0), "cosine")->valuedouble;
    if (k == 0) assert_true(get(cJSON_GetArrayItem(get(bw, "layers"), 0), "norm_ratio")->valuedouble == 1.0);
    else assert_true(c0 < 1.0 && c0 > 0.5);
  }
  cJSON_Delete(j);
}

static void test_forward_and_both(void **state) {
  (void)state;
  assert_int_equal(run("%s drift --checkpoint %s/ckpt --data %s/val.tok --out %s/fwd --mode forward --batches 3 "
                       "--batch 2 --recipes e2m1",
                       cli, work, work, work),
                   0);
  assert_true(exists("fwd", "drift.dat"));
  assert_false(exists("fwd", "drift_backward.dat"));
  cJSON *j = load_json("%s/fwd/drift.json", work);
  const cJSON *r = cJSON_GetArrayItem(get(j, "recipes"), 0);
  check_points(get(r, "layers"), L + 1);
  assert_null(cJSON_GetObjectItemCaseSensitive(r, "backward"));
  cJSON_Delete(j);
  /* The default mode is both; the forward figures are those of --mode forward. */
  char a[4096], b[4096], *ta, *tb;
  size_t na, nb;
  assert_int_equal(run("%s drift --checkpoint %s/ckpt --data %s --out %s/both --batches 3 --batch 2 --recipes e2m1",
                       cli, work, work, work),
                   0);
  assert_true(exists("both", "drift.dat") && exists("both", "drift_backward.dat"));
  snprintf(a, sizeof a, "%s/fwd/drift.dat", work);
  snprintf(b, sizeof b, "%s/both/drift.dat", work);
  assert_int_equal(ufp4_read_file(a, 1 << 20, &ta, &na), 0);
  assert_int_equal(ufp4_read_file(b, 1 << 20, &tb, &nb), 0);
  assert_int_equal(na, nb);
  assert_memory_equal(ta, tb, na);
  /* The columns: point, the means (as before the intervals), then the bounds. */
  assert_int_equal(strncmp(ta, "# point ratio[e2m1] cosine[e2m1] ratio_lo[e2m1]", 47), 0);
  free(ta);
  free(tb);
}

static void test_errors_are_named(void **state) {
  (void)state;
  assert_int_equal(run("%s drift --checkpoint %s/ckpt --data %s --out %s/x --mode sideways", cli, work, work, work),
                   2);
  assert_non_null(strstr(out, "sideways"));
  assert_int_equal(run("%s drift --checkpoint %s/no_such_ckpt --data %s --out %s/x", cli, work, work, work), 1);
  assert_non_null(strstr(out, "no_such_ckpt"));
  assert_int_equal(run("%s drift --checkpoint %s/ckpt --data %s --out %s/x --recipes e2m1,fp5", cli, work, work, work),
                   1);
  assert_non_null(strstr(out, "fp5"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward_mode),
      cmocka_unit_test(test_forward_and_both),
      cmocka_unit_test(test_errors_are_named),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
