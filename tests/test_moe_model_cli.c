/* End to end: MoE models through the CLI (train with diagnostics and resume, compare, bad flags) on
 * the SOTU corpus as byte-level shards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fixture.h"
#include "ufp4/fileio.h"

static char work[] = "/tmp/ufp4_moecli_XXXXXX";
static const char *cli;
static char out[1 << 18];

#define run(...) cli_run(out, sizeof out, __VA_ARGS__)

#define TINY                                                                                                 \
  "--layers 2 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 4 --lr 3e-3 --warmup 2 --eval-batches 2 " \
  "--no-progress"
#define MOE "--moe-experts 4 --moe-top-k 2 --moe-ffn 32 --moe-shared-ffn 16 --moe-capacity 1.25 --moe-z-coef 0.001"

static cJSON *load_json(const char *path) {
  char *text;
  size_t n;
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &n), 0);
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  return j;
}

static int setup(void **state) { return cli_fixture_setup(state, work, &cli); }

/* Every MoE line of diagnostics.jsonl: loads sum to k; the per-expert and aggregated records exist. */
static void check_diagnostics(const char *path, int k) {
  char *text;
  size_t n;
  assert_int_equal(ufp4_read_file(path, 1 << 28, &text, &n), 0);
  int moe_lines = 0, expert = 0, shared = 0, agg = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *j = cJSON_Parse(line);
    assert_non_null(j);
    const cJSON *moe = cJSON_GetObjectItemCaseSensitive(j, "moe"), *proj = cJSON_GetObjectItemCaseSensitive(j, "proj");
    if (moe) {
      const cJSON *load = cJSON_GetObjectItemCaseSensitive(moe, "load"), *v;
      assert_int_equal(cJSON_GetArraySize(load), 4);
      double sum = 0;
      cJSON_ArrayForEach(v, load) sum += v->valuedouble;
      if (fabs(sum - k) > 1e-6) fail_msg("loads sum to %.9g, not %d", sum, k);
      assert_non_null(cJSON_GetObjectItemCaseSensitive(moe, "router_entropy"));
      assert_non_null(cJSON_GetObjectItemCaseSensitive(moe, "dropped"));
      moe_lines++;
    }
    if (cJSON_IsString(proj)) {
      expert += !strcmp(proj->valuestring, "expert3.down");
      shared += !strcmp(proj->valuestring, "shared.up");
      if (!strcmp(proj->valuestring, "experts.gate")) {
        agg++;
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_experts")->valueint > 0, 1);
      }
    }
    cJSON_Delete(j);
  }
  free(text);
  assert_true(moe_lines >= 2); /* 2 MoE layers per diagnosed step */
  assert_true(expert > 0);
  assert_true(shared > 0);
  assert_true(agg > 0);
}

static void test_train_moe(void **state) {
  (void)state;
  assert_int_equal(run("%s train --data %s/data --out %s/run --recipe ufp4 --steps 4 --diag-every 2 --ckpt-every 2 " MOE
                       " " TINY,
                       cli, work, work),
                   0);
  char path[4200];
  snprintf(path, sizeof path, "%s/run/ckpt/step_00000004/config.json", work);
  cJSON *j = load_json(path);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "model_type")->valuestring, "qwen2_moe");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "num_experts")->valueint, 4);
  cJSON_Delete(j);
  snprintf(path, sizeof path, "%s/run/config.json", work);
  j = load_json(path);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(m, "moe_experts")->valueint, 4);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(m, "moe_shared_ffn")->valueint, 16);
  assert_true(cJSON_GetObjectItemCaseSensitive(m, "n_active_params")->valuedouble <
              cJSON_GetObjectItemCaseSensitive(m, "n_params")->valuedouble);
  cJSON_Delete(j);
  snprintf(path, sizeof path, "%s/run/diagnostics.jsonl", work);
  check_diagnostics(path, 2);
  /* Every training line logs the auxiliary objective apart from the cross-entropy: with 4 experts,
   * top-2 and aux_coef 0.01 near balance it is about 0.01 * k = 0.02, never 0 nor O(1). */
  snprintf(path, sizeof path, "%s/run/metrics.jsonl", work);
  char *text;
  size_t len;
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &len), 0);
  int train_lines = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *l = cJSON_Parse(line);
    assert_non_null(l);
    if (cJSON_GetObjectItemCaseSensitive(l, "loss")) {
      const cJSON *aux = cJSON_GetObjectItemCaseSensitive(l, "aux_loss");
      assert_true(cJSON_IsNumber(aux));
      if (!(aux->valuedouble > 0.005 && aux->valuedouble < 0.2)) fail_msg("aux_loss %g", aux->valuedouble);
      train_lines++;
    }
    cJSON_Delete(l);
  }
  free(text);
  assert_int_equal(train_lines, 4);
  /* Resume reads the MoE config back from the run and the checkpoint. */
  assert_int_equal(run("%s train --out %s/run --resume --steps 6 --no-progress", cli, work), 0);
  /* eval loads the Qwen2-MoE checkpoint. */
  assert_int_equal(run("%s eval --checkpoint %s/run/ckpt/step_00000006 --data %s/data --batches 1 --batch 2", cli, work,
                       work),
                   0);
  assert_non_null(strstr(out, "perplexity"));
}

static void test_compare_moe(void **state) {
  (void)state;
  assert_int_equal(run("%s compare --data %s/data --out %s/cmp --recipes e2m1 --seeds 1 --no-control --steps 4 "
                       "--final-steps 2 --moe-experts 4 --moe-top-k 1 " TINY,
                       cli, work, work),
                   0);
  char path[4200];
  snprintf(path, sizeof path, "%s/cmp/runs/e2m1/seed1/config.json", work);
  cJSON *j = load_json(path);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(m, "moe_experts")->valueint, 4);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(m, "moe_top_k")->valueint, 1);
  cJSON_Delete(j);
}

static void test_bad_moe_flags(void **state) {
  (void)state;
  assert_int_equal(run("%s train --data %s/data --out %s/bad --moe-top-k 3 " TINY, cli, work, work), 2);
  assert_non_null(strstr(out, "--moe-top-k"));
  /* top_k 2 (the default) with one expert: the model config check names the field. */
  assert_true(run("%s train --data %s/data --out %s/bad --steps 1 --moe-experts 1 " TINY, cli, work, work) != 0);
  assert_non_null(strstr(out, "moe_top_k"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_train_moe), cmocka_unit_test(test_compare_moe),
                                     cmocka_unit_test(test_bad_moe_flags)};
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
