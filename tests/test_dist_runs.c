/* compare and sweep under mpirun share their runs out over the ranks (src/report/run_share.h): the
 * report and the sweep tables of an np=2 launch equal those of a one-process launch; a run that
 * fails on rank 1 fails the command on every rank with that rank's message; and the commands that
 * do not share their work refuse a multi-rank launch instead of writing the same files twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test_util.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

static char work[] = "/tmp/ufp4_distruns_XXXXXX";
static const char *cli;
static char np2[512];
static char out[1 << 17];

static const char *tiny = "--layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 4 --lr 3e-3 --warmup 2 "
                          "--threads 1 --no-progress";

static int setup(void **state) {
  if (dist_fixture_setup(state, work, &cli)) return -1;
  dist_launcher(np2, sizeof np2, 2);
  return 0;
}

/* WORK/DIR/FILE parsed, with the keys that name the output folder removed (they differ between the
 * two launches by construction: a report's command and runs[].dir, a run config's out_dir), printed
 * back: the rest must match byte for byte. */
static char *canonical_json(const char *dir, const char *file) {
  char path[PATH_MAX], *text;
  size_t len;
  snprintf(path, sizeof path, "%s/%s/%s", work, dir, file);
  if (ufp4_read_file(path, 1 << 24, &text, &len)) fail_msg("%s", ufp4_last_error());
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  if (!j) fail_msg("%s: not JSON", path);
  cJSON_DeleteItemFromObject(j, "command");
  cJSON_DeleteItemFromObject(j, "out_dir");
  cJSON *run;
  cJSON_ArrayForEach(run, cJSON_GetObjectItem(j, "runs")) cJSON_DeleteItemFromObject(run, "dir");
  char *s = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  return s;
}

static void assert_same_json(const char *a, const char *b, const char *file) {
  char *x = canonical_json(a, file), *y = canonical_json(b, file);
  if (strcmp(x, y)) fail_msg("%s differs between %s and %s:\n%s\n%s", file, a, b, x, y);
  free(x);
  free(y);
}

/* `ufp4 CMD FLAGS` into WORK/<prefix>1 in one process, then into WORK/<prefix>2 at np=2 (its output
 * left in `out`). */
static void run_np1_np2(const char *cmd, const char *prefix, const char *flags) {
  if (cli_run(out, sizeof out, "%s %s --data %s/data --out %s/%s1 %s %s", cli, cmd, work, work, prefix, flags, tiny))
    fail_msg("np=1: %s", out);
  if (cli_run(out, sizeof out, "%s %s %s --data %s/data --out %s/%s2 %s %s", np2, cli, cmd, work, work, prefix, flags,
              tiny))
    fail_msg("np=2: %s", out);
}

static void test_compare_two_ranks_equals_one_process(void **state) {
  (void)state;
  const char *flags = "--recipes e2m1 --seeds 2 --steps 8 --final-steps 4 --eval-batches 2";
  run_np1_np2("compare", "c", flags);
  if (!strstr(out, "shared out over the ranks")) fail_msg("np=2 did not share the runs: %s", out);
  /* One banner and one table: rank 1 stays quiet. */
  const char *first = strstr(out, "ufp4 compare: 3 recipes x 2 seeds");
  assert_non_null(first);
  assert_null(strstr(first + 1, "ufp4 compare: 3 recipes x 2 seeds"));
  char *x = canonical_json("c1", "report.json");
  /* The report holds real numbers: six runs, e2m1 with a relative error. */
  assert_non_null(strstr(x, "\"recipe\":\"e2m1\""));
  free(x);
  assert_same_json("c1", "c2", "report.json");
  /* Each run folder was written by whichever rank ran it, as a one-process run (world 1) that
   * resolved the same config. */
  static const char *const runs[] = {"bf16", "fp32", "e2m1"};
  for (int r = 0; r < 3; r++)
    for (int s = 1; s <= 2; s++) {
      char a[64], b[64];
      snprintf(a, sizeof a, "c1/runs/%s/seed%d", runs[r], s);
      snprintf(b, sizeof b, "c2/runs/%s/seed%d", runs[r], s);
      assert_same_json(a, b, "config.json");
      char *c = canonical_json(b, "config.json");
      assert_non_null(strstr(c, "\"world\":1,"));
      free(c);
    }
}

static void test_sweep_two_ranks_equals_one_process(void **state) {
  (void)state;
  const char *flags = "--sizes 1x32,1x64 --recipes bf16,e2m1 --seeds 2 --steps 6 --eval-batches 2";
  run_np1_np2("sweep", "s", flags);
  char *x = canonical_json("s1", "sweep.json");
  assert_non_null(strstr(x, "\"e2m1\":"));
  /* Every loss present and positive: none left at the gather's zero. */
  cJSON *j = cJSON_Parse(x), *size;
  int n = 0;
  cJSON_ArrayForEach(size, cJSON_GetObjectItem(j, "sizes")) {
    cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(size, "loss")) {
      assert_true(cJSON_IsNumber(l) && l->valuedouble > 0.5);
      n++;
    }
  }
  assert_int_equal(n, 4);
  cJSON_Delete(j);
  free(x);
  assert_same_json("s1", "s2", "sweep.json");
}

static void test_failing_run_on_rank1_fails_all(void **state) {
  (void)state;
  /* Runs in order: bf16 seed 1 (rank 0), fp32 seed 1 (rank 1), ... A regular file where rank 1's
   * run folder must go makes that run fail on rank 1 alone. */
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cf/runs", work);
  assert_int_equal(ufp4_mkdirs(path), 0);
  snprintf(path, sizeof path, "%s/cf/runs/fp32", work);
  assert_int_equal(ufp4_write_file_atomic(path, "x", 1), 0);
  int rc = cli_run(out, sizeof out, "%s %s compare --data %s/data --out %s/cf --recipes e2m1 --seeds 1 --steps 4 %s",
                   np2, cli, work, work, tiny);
  assert_int_not_equal(rc, 0);
  if (!strstr(out, "rank 1 failed") || !strstr(out, "runs/fp32")) fail_msg("no message from rank 1: %s", out);
  /* No report was written from an incomplete set of runs. */
  snprintf(path, sizeof path, "%s/cf/report.json", work);
  assert_int_not_equal(access(path, F_OK), 0);
}

static void test_other_commands_refuse_ranks(void **state) {
  (void)state;
  int rc = cli_run(out, sizeof out, "%s %s formats", np2, cli);
  assert_int_equal(rc, 2);
  if (!strstr(out, "ufp4 formats: launched as one of 2 ranks") || !strstr(out, "without mpirun"))
    fail_msg("formats under np=2: %s", out);
}

int main(void) {
  dist_require_mpi("test_dist_runs");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_two_ranks_equals_one_process),
      cmocka_unit_test(test_sweep_two_ranks_equals_one_process),
      cmocka_unit_test(test_failing_run_on_rank1_fails_all),
      cmocka_unit_test(test_other_commands_refuse_ranks),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
