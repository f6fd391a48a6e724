/* Health guards through the ufp4 command (docs/TRAINING.md, Health guards): --guard and
 * --guard-policy, the same keys in a --config file, the exit status and messages of a stopped run,
 * the lines of a warned one. The guard's unreachable SQNR floor is the broken configuration here
 * (the SR hook of tests/test_guard.c exists only inside a test process). Needs the SOTU corpus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fixture.h"
#include "ufp4/fileio.h"

static char work[] = "/tmp/ufp4_guardcli_XXXXXX";
static const char *cli;

static int setup(void **state) { return cli_fixture_setup(state, work, &cli); }

static const char *small = "--steps 4 --layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 16 --batch 4 "
                           "--eval-every 0 --eval-batches 0 --no-progress --recipe e2m1 --diag-every 2";

static char out[1 << 16];

static char *read_run_file(const char *run, const char *name) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s/%s", work, run, name);
  char *t;
  size_t n;
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &t, &n), 0);
  return t;
}

static void must_say(const char *what) {
  if (!strstr(out, what)) fail_msg("the output does not say '%s': %s", what, out);
}

static void test_stop_exits_nonzero(void **state) {
  (void)state;
  const int rc = cli_run(out, sizeof out, "%s train --data %s/data --out %s/stop %s --guard 'sqnr>40' --guard-policy stop",
                         cli, work, work, small);
  assert_int_equal(rc, 1);
  must_say("ufp4 train: health guard sqnr>40 every 2 steps, policy stop");
  must_say("health guard breached: step 0, model.layers.0.self_attn.q_proj, fprop operand X (fprop.x): sqnr ");
  must_say("(must stay above 40); stopping (--guard-policy stop;");
  char *m = read_run_file("stop", "metrics.jsonl"), *cfg = read_run_file("stop", "config.json");
  assert_non_null(strstr(m, "{\"step\":0,\"guard\":{\"proj\":\"model.layers.0.self_attn.q_proj\""));
  assert_null(strstr(m, "\"loss\"")); /* it stopped before the first update */
  assert_non_null(strstr(cfg, "\"guard\":\t\"sqnr>40\""));
  free(m);
  free(cfg);
}

static void test_warn_continues(void **state) {
  (void)state;
  const int rc = cli_run(out, sizeof out, "%s train --data %s/data --out %s/warn %s --guard 'sqnr>40'", cli, work,
                         work, small);
  if (rc) fail_msg("exit %d: %s", rc, out);
  must_say("ufp4 train: health guard breached (warn): step 0, model.layers.0.self_attn.q_proj");
  must_say("more breaches at step 2 (all in metrics.jsonl)");
  char *m = read_run_file("warn", "metrics.jsonl");
  assert_non_null(strstr(m, "{\"step\":2,\"guard\":"));
  assert_non_null(strstr(m, "{\"step\":4,\"loss\":"));
  free(m);
}

/* The same guard from a JSON config; flags still override it. */
static void test_json_config(void **state) {
  (void)state;
  char path[8192];
  snprintf(path, sizeof path, "%s/guard.json", work);
  const char *json = "{\"guard\": \"fprop.x.sqnr>40\", \"guard_policy\": \"stop\", \"diag_every\": 2}\n";
  assert_int_equal(ufp4_write_file_atomic(path, json, strlen(json)), 0);
  int rc = cli_run(out, sizeof out, "%s train --data %s/data --out %s/json %s --config %s", cli, work, work, small, path);
  assert_int_equal(rc, 1);
  must_say("fprop operand X (fprop.x): sqnr ");
  rc = cli_run(out, sizeof out, "%s train --data %s/data --out %s/json2 %s --config %s --guard-policy warn", cli, work,
               work, small, path);
  if (rc) fail_msg("exit %d: %s", rc, out);
  char *cfg = read_run_file("json2", "config.json");
  assert_non_null(strstr(cfg, "\"guard_policy\":\t\"warn\""));
  free(cfg);
}

static void test_bad_guards_refused(void **state) {
  (void)state;
  assert_int_equal(cli_run(out, sizeof out, "%s train --data %s/data --out %s/bad1 %s --guard 'sqnr<10'", cli, work,
                           work, small),
                   1);
  must_say("guard: rule 'sqnr<10': sqnr is a floor, write sqnr>VALUE");
  assert_int_equal(cli_run(out, sizeof out, "%s train --data %s/data --out %s/bad2 %s --guard 'sqnr>10' --diag-every 0",
                           cli, work, work, small),
                   1);
  must_say("set --diag-every N");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_exits_nonzero),
      cmocka_unit_test(test_warn_continues),
      cmocka_unit_test(test_json_config),
      cmocka_unit_test(test_bad_guards_refused),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
