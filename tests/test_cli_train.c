/* End to end on real text: prepare SOTU as bytes, train a tiny model under every recipe through
 * the CLI, then eval and sample its checkpoint. Needs the fetched corpus (make test fetches it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_fixture.h"
#include "json_test_util.h"
#include "train_test_util.h"
#include "ufp4/fileio.h"

static char work[] = "/tmp/ufp4_clitrain_XXXXXX";
static const char *cli;

#define run cli_run

static int setup(void **state) { return cli_fixture_setup(state, work, &cli); }

static const char *model_flags =
    "--steps 200 --layers 2 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 8 --lr 3e-3 --warmup 10 "
    "--eval-every 0 --eval-batches 8 --no-progress";

static void test_every_recipe_learns_text(void **state) {
  (void)state;
  const char *recipes[] = {"fp32", "bf16", "e2m1", "ufp4", "nvfp4", "mxfp4,rht_n=32"};
  static char out[1 << 16];
  for (size_t i = 0; i < sizeof recipes / sizeof *recipes; i++) {
    int rc = run(out, sizeof out, "%s train --data %s/data --out %s/run%zu --recipe %s %s", cli, work, work, i,
                 recipes[i], model_flags);
    if (rc) fail_msg("train %s failed (%d): %s", recipes[i], rc, out);
    /* The resolved recipe is printed before training starts. */
    assert_non_null(strstr(out, "ufp4 train: recipe "));
    const char *v = strstr(out, "val loss ");
    assert_non_null(v);
    double val = atof(v + 9);
    /* Uniform over 256 bytes is ln 256 = 5.55 nats; 200 steps of a tiny model must get far below. */
    if (!(val < 0.6 * log(256.0))) fail_msg("%s: validation loss %.3f is not well below ln 256", recipes[i], val);
  }
}

/* An RHT that does not divide the axis it rotates is refused before any step, naming the projection,
 * the GEMM and the axis (the quantizer's own message named none of them): Wgrad along the 48 tokens
 * of a micro-batch, Dgrad along k_proj's 16 outputs (1 kv head of 16), Fprop along 32 inputs. */
static void test_rht_axes_checked_first(void **state) {
  (void)state;
  static char out[1 << 16];
  const struct {
    const char *flags, *who, *what;
  } bad[] = {
      {"--recipe mxfp4,rht_n=32 --seq-len 24 --batch 2", "model.layers.0.self_attn.q_proj under recipe mxfp4,",
       ": its Wgrad RHT of 32 rotates along the micro-batch's tokens (--batch x --seq-len), 48"},
      {"--recipe 'ufp4,rht_n=32' --kv-heads 1", "model.layers.0.self_attn.k_proj under recipe ufp4,",
       ": its Dgrad RHT of 32 rotates along its outputs, 16"},
      {"--recipe 'ufp4,rht_n=64'", "model.layers.0.self_attn.q_proj under recipe ufp4,",
       ": its Fprop RHT of 64 rotates along its inputs, 32"},
      /* the projection's own recipe is named, not the run's: nvfp4 has no Fprop RHT */
      {"--recipe nvfp4 --override 'model.layers.1.mlp.up_proj=ufp4,rht_n=64'",
       "model.layers.1.mlp.up_proj under recipe ufp4,", ": its Fprop RHT of 64 rotates along its inputs, 32"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc = run(out, sizeof out, "%s train --data %s/data --out %s/rht%zu --steps 2 --layers 2 --d-model 32 --heads 2 "
                 "--ffn 64 --seq-len 32 --batch 2 --eval-every 0 --eval-batches 1 --no-progress %s",
                 cli, work, work, i, bad[i].flags);
    if (rc != 1 || !strstr(out, bad[i].who) || !strstr(out, bad[i].what) || !strstr(out, "rht_n="))
      fail_msg("%s: exit %d, output:\n%s", bad[i].flags, rc, out);
    assert_null(strstr(out, "step 1/")); /* refused before training */
  }
}

static void write_work_file(const char *name, const char *text, char *path, size_t size);

/* Under --schedule the start line names the first phase and the schedule, not --recipe's default
 * (it said "recipe fp32"), and a --recipe other than the first phase, which the run would ignore, is
 * refused before training; one that is the first phase, however spelled, is taken. */
static void test_schedule_start_line(void **state) {
  (void)state;
  static char out[1 << 16];
  const char *fmt = "%s train --data %s/data --out %s/sched%d --steps 4 --layers 1 --d-model 32 --heads 2 --ffn 64 "
                    "--seq-len 32 --batch 2 --eval-every 0 --eval-batches 1 --no-progress %s";
  int rc = run(out, sizeof out, fmt, cli, work, work, 0, "--schedule 'e2m1@0,bf16@3'");
  if (rc || !strstr(out, "ufp4 train: recipe e2m1,grid=e2m1,") ||
      !strstr(out, "(the first phase of --schedule 'e2m1@0,bf16@3')"))
    fail_msg("exit %d:\n%s", rc, out);
  rc = run(out, sizeof out, fmt, cli, work, work, 1, "--recipe ufp4 --schedule 'e2m1@0,bf16@3'");
  char dir[8300];
  struct stat st;
  snprintf(dir, sizeof dir, "%s/sched1", work);
  if (rc != 2 || !strstr(out, "is not the first phase of the schedule 'e2m1@0,bf16@3'") || stat(dir, &st) == 0)
    fail_msg("exit %d (%s written?):\n%s", rc, dir, out);
  /* the same from a --config file */
  char cfg[8300], flags[8400];
  write_work_file("sched_cfg.json", "{\"recipe\": \"ufp4\", \"schedule\": \"e2m1@0,bf16@3\"}", cfg, sizeof cfg);
  snprintf(flags, sizeof flags, "--config %s", cfg);
  rc = run(out, sizeof out, fmt, cli, work, work, 3, flags);
  if (rc != 2 || !strstr(out, "the recipe ufp4,") || !strstr(out, "is not the first phase"))
    fail_msg("--config: exit %d:\n%s", rc, out);
  rc = run(out, sizeof out, fmt, cli, work, work, 2, "--recipe=e2m1,rht=wgrad --schedule 'e2m1@0,bf16@3'");
  if (rc || !strstr(out, "(the first phase of --schedule"))
    fail_msg("the first phase respelled: exit %d:\n%s", rc, out);
}

/* The number after the first "key": in the JSON file dir/name. */
static double json_number(const char *dir, const char *name, const char *key) {
  char path[8300], *text, quoted[128];
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(quoted, sizeof quoted, "\"%s\":", key);
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &n), 0);
  const char *at = strstr(text, quoted);
  if (!at) fail_msg("%s: no %s", path, quoted);
  const double v = atof(at + strlen(quoted));
  free(text);
  return v;
}

/* The val_loss a run wrote in its run.json, as metrics.jsonl prints it (%.9g). */
static void own_val_loss(const char *run_dir, char *buf, size_t size) {
  snprintf(buf, size, "%.9g", json_number(run_dir, "run.json", "final_val_loss"));
}

static void test_eval_and_sample_checkpoint(void **state) {
  (void)state;
  static char out[1 << 16], out2[1 << 16];
  char ckpt[8192];
  snprintf(ckpt, sizeof ckpt, "%s/run0/ckpt/step_00000200", work);
  assert_int_equal(run(out, sizeof out, "%s eval --checkpoint %s --data %s/data --batches 8 --batch 8", cli, ckpt, work), 0);
  const char *l = strstr(out, "loss ");
  assert_non_null(l);
  assert_true(atof(l + 5) < 0.6 * log(256.0));
  /* Under its own recipe a checkpoint gives the run's own validation loss: the same batches, and
   * the RHT signs of the run's seed (1 here; ufp4 rotates fprop, so signs drawn from another seed
   * would give another loss; e2m1 and nvfp4 have no fprop RHT and check the batches alone). */
  for (int i = 2; i <= 4; i++) {
    const char *recipe[] = {"", "", "e2m1", "ufp4", "nvfp4"};
    char dir[8192], mine[64], theirs[64];
    snprintf(dir, sizeof dir, "%s/run%d", work, i);
    own_val_loss(dir, mine, sizeof mine);
    assert_int_equal(run(out, sizeof out, "%s eval --checkpoint %s/run%d/ckpt/step_00000200 --data %s/data --batches 8 --batch 8 --recipe %s",
                         cli, work, i, work, recipe[i]), 0);
    l = strstr(out, "loss ");
    assert_non_null(l);
    /* The same number to the printed digits: eval prints %.9g, as metrics.jsonl does. */
    assert_int_equal(sscanf(l + 5, "%63s", theirs), 1);
    if (strcmp(mine, theirs)) fail_msg("%s: eval gives %s, the run %s", recipe[i], theirs, mine);
  }
  /* The same seed gives the same text, which continues the prompt. */
  const char *fmt = "%s sample --checkpoint %s --tokenizer bytes --prompt 'Fellow citizens' --tokens 40 --seed 7";
  assert_int_equal(run(out, sizeof out, fmt, cli, ckpt), 0);
  assert_int_equal(run(out2, sizeof out2, fmt, cli, ckpt), 0);
  assert_string_equal(out, out2);
  assert_true(strncmp(out, "Fellow citizens", 15) == 0);
  assert_true(strlen(out) >= 15 + 40);
  /* Bad input: a missing checkpoint names the file; an unknown flag is a usage error. */
  assert_int_equal(run(out, sizeof out, "%s eval --checkpoint %s/nope --data %s/data", cli, work, work), 1);
  assert_non_null(strstr(out, "nope"));
  /* the run folder instead of a checkpoint: said so, with the latest checkpoint to pass */
  assert_int_equal(run(out, sizeof out, "%s sample --checkpoint %s/run0 --tokenizer bytes --prompt a --tokens 2", cli, work), 1);
  if (!strstr(out, "run0 is a run folder (ufp4 train --out), not a checkpoint") || !strstr(out, "run0/ckpt/step_00000200"))
    fail_msg("%s", out);
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/x --colour blue", cli, work, work), 2);
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/x --recipe e3m0", cli, work, work), 2);
  assert_non_null(strstr(out, "e3m0"));
}

/* eval --override: a run trained with overrides (block 0 in bf16, lm_head in nvfp4, the rest ufp4
 * with its fprop RHT signs from the run's seed) gives its own validation loss under its recipe and
 * the same overrides, and another without them; a pattern that matches nothing is an error naming
 * it, and a flag value without '=' a usage error. */
static void test_eval_override(void **state) {
  (void)state;
  static char out[1 << 16];
  const char *ovr = "--override 'model.layers.0.*=bf16' --override 'lm_head=nvfp4'";
  int rc = run(out, sizeof out, "%s train --data %s/data --out %s/ovr --steps 20 --layers 2 --d-model 32 --heads 2 "
               "--ffn 64 --seq-len 32 --batch 4 --eval-every 0 --eval-batches 2 --no-progress --recipe ufp4 %s",
               cli, work, work, ovr);
  if (rc) fail_msg("train failed (%d): %s", rc, out);
  char own[64], dir[8192], theirs[64];
  snprintf(dir, sizeof dir, "%s/ovr", work);
  own_val_loss(dir, own, sizeof own);
  const char *eval = "%s eval --checkpoint %s/ckpt/step_00000020 --data %s/data --batches 2 --batch 4 --recipe ufp4 %s";
  assert_int_equal(run(out, sizeof out, eval, cli, dir, work, ovr), 0);
  const char *l = strstr(out, "loss ");
  assert_non_null(l);
  assert_int_equal(sscanf(l + 5, "%63s", theirs), 1);
  if (strcmp(own, theirs)) fail_msg("eval with the run's overrides gives %s, the run %s", theirs, own);
  assert_int_equal(run(out, sizeof out, eval, cli, dir, work, ""), 0);
  assert_non_null(l = strstr(out, "loss "));
  assert_int_equal(sscanf(l + 5, "%63s", theirs), 1);
  if (!strcmp(own, theirs)) fail_msg("eval without the overrides gives the run's own loss %s", own);
  assert_int_equal(run(out, sizeof out, eval, cli, dir, work, "--override 'model.layers.9.*=bf16'"), 1);
  if (!strstr(out, "model.layers.9.*")) fail_msg("%s", out);
  assert_int_equal(run(out, sizeof out, eval, cli, dir, work, "--override bf16"), 2);
  if (!strstr(out, "expected PATTERN=SPEC")) fail_msg("%s", out);
}

/* Writes text to WORK/name; its path into path. */
static void write_work_file(const char *name, const char *text, char *path, size_t size) {
  snprintf(path, size, "%s/%s", work, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* train --config and the keys a run does not take from it: a run's own config.json gives no note;
 * a hand file's n_params is checked against the model the run builds once the data has set the
 * vocabulary and n_kv_heads is resolved (the number in the run's own config.json; it was compared
 * with the default vocabulary's model before), and "world" and "vocab" name what the run has. */
static void test_config_notes(void **state) {
  (void)state;
  static char out[1 << 16];
  const char *shape = "--steps 1 --eval-every 0 --eval-batches 1 --no-progress";
  int rc = run(out, sizeof out, "%s train --data %s/data --out %s/cfgA --layers 1 --d-model 32 --heads 2 --ffn 64 "
               "--seq-len 16 --batch 2 %s", cli, work, work, shape);
  if (rc) fail_msg("train failed (%d): %s", rc, out);
  char path[8300];
  snprintf(path, sizeof path, "%s/cfgA", work);
  const long n_params = (long)json_number(path, "config.json", "n_params");
  assert_true(n_params > 0);
  snprintf(path, sizeof path, "%s/cfgA/config.json", work);
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/cfgB --config %s %s", cli, work, work, path, shape), 0);
  if (strstr(out, "note:")) fail_msg("the run's own config.json gives a note:\n%s", out);

  write_work_file("hand.json", "{\"world\": 3, \"model\": {\"n_layers\": 1, \"d_model\": 32, \"n_heads\": 2, "
                  "\"ffn_dim\": 64, \"seq_len\": 16, \"vocab\": 4096, \"n_params\": 1}, \"batch\": 2}", path, sizeof path);
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/cfgC --config %s %s", cli, work, work, path, shape), 0);
  char want[8800];
  snprintf(want, sizeof want, "ufp4 train: note: %s: \"n_params\" is derived, not read: the file says 1, this run has %ld\n",
           path, n_params);
  if (!strstr(out, want)) fail_msg("no line\n%swithin\n%s", want, out);
  snprintf(want, sizeof want, "ufp4 train: note: %s: \"world\" is derived, not read: the file says 3, this run has 1\n", path);
  if (!strstr(out, want)) fail_msg("no line\n%swithin\n%s", want, out);
  snprintf(want, sizeof want, "ufp4 train: note: %s: \"vocab\" comes from the data: the file says 4096, this run has 256\n", path);
  if (!strstr(out, want)) fail_msg("no line\n%swithin\n%s", want, out);
}

static void test_resume_continues_run(void **state) {
  (void)state;
  static char out[1 << 16];
  const char *small = "--layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --batch 4 --eval-every 0 --eval-batches 2 --no-progress --recipe ufp4";
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/full --steps 20 --ckpt-every 10 %s", cli, work, work, small), 0);
  assert_int_equal(run(out, sizeof out, "%s train --data %s/data --out %s/part --steps 10 --total-steps 20 %s", cli, work, work, small), 0);
  /* A resume that would change what the run computes is refused, naming the run's config.json,
   * the key and both values, and leaves the folder as it was; the final comparison below shows
   * that the run still continues bit for bit afterwards. */
  char cj[4000];
  snprintf(cj, sizeof cj, "%s/part/config.json", work);
  char *before = NULL;
  size_t n_before = 0;
  assert_int_equal(ufp4_read_file(cj, SIZE_MAX, &before, &n_before), 0);
  const struct {
    const char *flags, *says;
  } changes[] = {
      {"--recipe e2m1", "changes \"recipe\" (the run: \"ufp4,"},
      {"--override 'model.layers.0.*=bf16'", "changes \"overrides\" (the run: absent; now: [\"model.layers.0.*=bf16\"])"},
      {"--schedule 'ufp4@0,bf16@15'", "changes \"schedule\""},
      {"--lr 5e-4", "changes \"optim.lr\" (the run: 0.001; now: 0.0005)"},
      {"--d-model 64", "changes \"model.d_model\" (the run: 32; now: 64)"},
      {"--seed 2", "changes \"seed\" (the run: 1; now: 2)"},
      {"--eval-batches 3", "changes \"eval_batches\""},
  };
  for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
    if (!run(out, sizeof out, "%s train --out %s/part --resume --steps 20 %s", cli, work, changes[i].flags))
      fail_msg("a resume with %s was not refused:\n%s", changes[i].flags, out);
    if (!strstr(out, cj) || !strstr(out, changes[i].says))
      fail_msg("a resume with %s: no \"%s\" naming %s in\n%s", changes[i].flags, changes[i].says, cj, out);
    char *after = NULL;
    size_t n_after = 0;
    assert_int_equal(ufp4_read_file(cj, SIZE_MAX, &after, &n_after), 0);
    if (n_after != n_before || memcmp(before, after, n_before)) fail_msg("a refused resume (%s) rewrote %s", changes[i].flags, cj);
    free(after);
  }
  free(before);
  /* A config.json of an older binary may spell the recipe otherwise (the resolved spec's format
   * has changed before): the resume compares the configuration the file holds, not its text,
   * and goes on. */
  cJSON *j = load_json("%s", cj);
  cJSON_ReplaceItemInObjectCaseSensitive(j, "recipe", cJSON_CreateString("ufp4"));
  char *text = cJSON_Print(j);
  assert_non_null(text);
  FILE *f = fopen(cj, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
  free(text);
  cJSON_Delete(j);
  /* The threads, the checkpoints and the diagnostics may change. */
  assert_int_equal(run(out, sizeof out, "%s train --out %s/part --resume --steps 20 --threads 1 --keep-ckpts 3 --diag-every 5",
                       cli, work), 0);
  char a[8192], b[8192];
  snprintf(a, sizeof a, "%s/full/ckpt/step_00000020/model.safetensors", work);
  snprintf(b, sizeof b, "%s/part/ckpt/step_00000020/model.safetensors", work);
  train_files_equal(a, b);
  /* Longer, with the cosine's horizon moved along (a key inside "optim"), on the same data. */
  assert_int_equal(run(out, sizeof out, "%s train --out %s/part --resume --steps 24 --total-steps 24 --data %s/./data", cli,
                       work, work), 0);
  snprintf(b, sizeof b, "%s/part/ckpt/step_00000024/model.safetensors", work);
  struct stat st;
  assert_int_equal(stat(b, &st), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_recipe_learns_text),
      cmocka_unit_test(test_rht_axes_checked_first),
      cmocka_unit_test(test_schedule_start_line),
      cmocka_unit_test(test_eval_and_sample_checkpoint),
      cmocka_unit_test(test_eval_override),
      cmocka_unit_test(test_config_notes),
      cmocka_unit_test(test_resume_continues_run),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
