/* The NaN policy through the CLI: a checkpoint whose final norm weights are NaN makes every
 * resumed step non-finite. --nan-policy stop ends the run with a message and a failing exit code
 * and keeps the last good checkpoint; --nan-policy skip drops the updates, finishes, and marks the
 * steps in metrics.jsonl. And a run folder path too long for the config is refused. Needs the
 * SOTU corpus (make test fetches it); skipped without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_fixture.h"
#include "ufp4/checkpoint.h"
#include "ufp4/fileio.h"
#include "ufp4/safetensors.h"

static char work[] = "/tmp/ufp4_relcli_XXXXXX";
static const char *cli;

static int setup(void **state) { return cli_fixture_setup(state, work, &cli); }

/* Overwrites tensor `name` of a safetensors file with NaN, in place (the file's own layout). */
static void poison(const char *path, const char *name) {
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(path, &st), 0);
  const ufp4_st_info *t = ufp4_st_find(st, name);
  assert_non_null(t);
  assert_int_equal(t->dtype, UFP4_ST_F32);
  size_t begin = t->begin, count = t->count;
  ufp4_st_close(st);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  uint8_t n8[8];
  assert_int_equal(pread(fd, n8, 8, 0), 8);
  uint64_t hdr = 0;
  for (int i = 0; i < 8; i++) hdr |= (uint64_t)n8[i] << (8 * i);
  float *nan = malloc(count * sizeof *nan);
  assert_non_null(nan);
  for (size_t i = 0; i < count; i++) nan[i] = NAN;
  assert_int_equal(pwrite(fd, nan, count * sizeof *nan, (off_t)(8 + hdr + begin)), (ssize_t)(count * sizeof *nan));
  close(fd);
  free(nan);
}

static const char *small = "--layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 4 --eval-every 0 "
                           "--eval-batches 1 --no-progress --recipe fp32";

static void test_nan_policy_stop_and_skip(void **state) {
  (void)state;
  static char out[1 << 16];
  char p[8192];
  assert_int_equal(cli_run(out, sizeof out, "%s train --data %s/data --out %s/run --steps 2 --ckpt-every 1 %s", cli, work,
                           work, small),
                   0);
  snprintf(p, sizeof p, "%s/run/ckpt/step_00000002/model.safetensors", work);
  poison(p, "model.norm.weight");

  int rc = cli_run(out, sizeof out, "%s train --out %s/run --resume --steps 4 --nan-policy stop", cli, work);
  if (rc == 0) fail_msg("--nan-policy stop exited 0: %s", out);
  if (!strstr(out, "not finite") || !strstr(out, "step 3")) fail_msg("unclear message: %s", out);
  snprintf(p, sizeof p, "%s/run/ckpt/step_00000002", work);
  ufp4_model_config mc;
  assert_int_equal(ufp4_checkpoint_config(p, &mc), 0);
  snprintf(p, sizeof p, "%s/run/ckpt/step_00000003", work);
  struct stat st;
  assert_int_not_equal(stat(p, &st), 0);

  rc = cli_run(out, sizeof out, "%s train --out %s/run --resume --steps 4 --nan-policy skip", cli, work);
  if (rc != 0) fail_msg("--nan-policy skip failed: %s", out);
  snprintf(p, sizeof p, "%s/run/metrics.jsonl", work);
  char *text;
  size_t n;
  assert_int_equal(ufp4_read_file(p, 1 << 20, &text, &n), 0);
  int skipped = 0;
  for (char *s = text; (s = strstr(s, "\"skipped\":true")); s++) skipped++;
  assert_int_equal(skipped, 2); /* steps 3 and 4; steps 1 and 2 were fine */
  assert_non_null(strstr(text, "{\"step\":3,\"loss\":null"));
  free(text);
}

/* An --out longer than the config holds is refused before anything is written; it used to be cut
 * to its first 1023 bytes, and the run went into that other folder without a word. */
static void test_overlong_out_refused(void **state) {
  (void)state;
  static char out[1 << 16];
  char run[1500], top[256];
  int len = snprintf(run, sizeof run, "%s/long", work);
  while (len < 1200) len += snprintf(run + len, sizeof run - (size_t)len, "/%0200d", 0);
  snprintf(top, sizeof top, "%s/long", work);
  int rc = cli_run(out, sizeof out, "%s train --data %s/data --out %s --steps 1 %s", cli, work, run, small);
  if (rc == 0) fail_msg("an --out of %d bytes was accepted: %s", len, out);
  if (!strstr(out, "--out") || !strstr(out, "too long")) fail_msg("unclear message: %s", out);
  struct stat st;
  if (stat(top, &st) == 0) fail_msg("%s was created for a refused --out", top);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nan_policy_stop_and_skip),
      cmocka_unit_test(test_overlong_out_refused),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
