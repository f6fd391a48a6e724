/* The training loop on a synthetic, learnable token source: the loss falls, a seed reproduces the
 * run, resume continues it bit for bit, and the run folder holds what it promises. */
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

#include "train_test_util.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

enum { V = 32 };

/* x_{t+1} = (5 x_t + 3) mod V from a random start. */
static const train_synth synth = {.batch = 4, .seq = 16, .vocab = V, .seed = 99, .mul = 5, .add = 3};
static const ufp4_data_source synth_src = {train_synth_batch, (void *)&synth, train_synth_batch, (void *)&synth};

static ufp4_train_config tiny(const char *dir, const char *recipe, int steps) {
  ufp4_train_config c = train_tiny_config(dir, recipe, &synth, steps);
  c.model.n_layers = 2;
  c.optim.lr = 1e-2;
  c.optim.min_lr = 1e-3;
  c.optim.warmup_steps = 5;
  c.optim.total_steps = 60;
  c.eval_every = 20;
  c.eval_batches = 2;
  return c;
}

static char *read_text(const char *path) {
  char *t;
  size_t n;
  assert_int_equal(ufp4_read_file(path, 1 << 24, &t, &n), 0);
  return t;
}

static void test_loss_falls_for_every_recipe(void **state) {
  (void)state;
  const char *recipes[] = {"fp32", "bf16", "e2m1", "ufp4", "nvfp4", "mxfp4,rht_n=16"};
  for (size_t i = 0; i < sizeof recipes / sizeof *recipes; i++) {
    char dir[] = "/tmp/ufp4_train_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ufp4_train_config c = tiny(dir, recipes[i], 60);
    ufp4_data_source src = synth_src;
    ufp4_train_result r;
    assert_int_equal(ufp4_train(&c, &src, 0, &r), 0);
    assert_int_equal(r.steps_done, 60);
    /* ln 32 = 3.47; the sequence is deterministic after its first token, so a model that learns it
     * gets far below the uniform loss. */
    if (!(r.final_val_loss < 0.5 * log(V))) fail_msg("%s: val loss %.3f after 60 steps", recipes[i], r.final_val_loss);
    /* The exact doubles, so that a refactoring can show that training did not change by one bit. */
    print_message("loss %s final=%a val=%a\n", recipes[i], r.final_loss, r.final_val_loss);
    ufp4_remove_tree(dir);
  }
}

static void test_resume_is_bit_exact(void **state) {
  (void)state;
  char a[] = "/tmp/ufp4_trainA_XXXXXX", b[] = "/tmp/ufp4_trainB_XXXXXX";
  assert_non_null(mkdtemp(a));
  assert_non_null(mkdtemp(b));
  ufp4_data_source src = synth_src;
  ufp4_train_result r, ra;
  /* Stochastic rounding on every operand: the streams must continue exactly too. */
  ufp4_train_config ca = tiny(a, "e2m1,sr=all", 30);
  ca.ckpt_every = 10;
  assert_int_equal(ufp4_train(&ca, &src, 0, &ra), 0);
  ufp4_train_config cb = tiny(b, "e2m1,sr=all", 10);
  cb.ckpt_every = 10;
  assert_int_equal(ufp4_train(&cb, &src, 0, &r), 0);
  cb.steps = 30;
  assert_int_equal(ufp4_train(&cb, &src, 1, &r), 0);
  assert_memory_equal(&r.final_val_loss, &ra.final_val_loss, sizeof(double));
  char pa[256], pb[256];
  snprintf(pa, sizeof pa, "%s/metrics.jsonl", a);
  snprintf(pb, sizeof pb, "%s/metrics.jsonl", b);
  char *ta = read_text(pa), *tb = read_text(pb);
  /* Compare the training lines' loss and grad-norm fields (timings differ; the first leg of B
   * also evaluated at its own end, step 10, which A did not). */
  char *sa = NULL, *sb = NULL;
  char *la = strtok_r(ta, "\n", &sa), *lb = strtok_r(tb, "\n", &sb);
  int lines = 0;
  while (la && lb) {
    if (strstr(la, "val_loss")) {
      la = strtok_r(NULL, "\n", &sa);
      continue;
    }
    if (strstr(lb, "val_loss")) {
      lb = strtok_r(NULL, "\n", &sb);
      continue;
    }
    char *ea = strstr(la, ",\"tokens_per_s\""), *eb = strstr(lb, ",\"tokens_per_s\"");
    if (ea) *ea = 0;
    if (eb) *eb = 0;
    assert_string_equal(la, lb);
    la = strtok_r(NULL, "\n", &sa);
    lb = strtok_r(NULL, "\n", &sb);
    lines++;
  }
  assert_int_equal(lines, 30);
  free(ta);
  free(tb);
  /* And the final weights are identical. */
  char ka[256], kb[256];
  snprintf(ka, sizeof ka, "%s/ckpt/step_00000030/model.safetensors", a);
  snprintf(kb, sizeof kb, "%s/ckpt/step_00000030/model.safetensors", b);
  train_files_equal(ka, kb);
  ufp4_remove_tree(a);
  ufp4_remove_tree(b);
}

static void test_run_folder(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_trainC_XXXXXX";
  assert_non_null(mkdtemp(dir));
  ufp4_train_config c = tiny(dir, "ufp4,rht=wgrad", 12);
  c.ckpt_every = 4;
  c.keep_ckpts = 2;
  ufp4_data_source src = synth_src;
  ufp4_train_result r;
  assert_int_equal(ufp4_train(&c, &src, 0, &r), 0);
  char p[512];
  struct stat st;
  /* Only the two newest checkpoints remain, each loadable as a Hugging Face folder. */
  snprintf(p, sizeof p, "%s/ckpt/step_00000004", dir);
  assert_int_not_equal(stat(p, &st), 0);
  snprintf(p, sizeof p, "%s/ckpt/step_00000012", dir);
  ufp4_model_config mc;
  assert_int_equal(ufp4_checkpoint_config(p, &mc), 0);
  assert_int_equal(mc.d_model, 32);
  assert_int_equal(mc.vocab, V);
  snprintf(p, sizeof p, "%s/ckpt/step_00000008/model.safetensors", dir);
  assert_int_equal(stat(p, &st), 0);
  /* config.json records the resolved recipe and reloads to the same settings. */
  snprintf(p, sizeof p, "%s/config.json", dir);
  char *text = read_text(p);
  assert_non_null(strstr(text, "\"recipe\":\t\"ufp4,grid=e1m2,scale=fp32,block=16,round=rne,sr=dgrad.dy+wgrad.dy"));
  assert_non_null(strstr(text, "rht=wgrad"));
  free(text);
  ufp4_train_config back = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load(p, &back), 0);
  assert_int_equal(back.model.d_model, c.model.d_model);
  assert_int_equal(back.steps, c.steps);
  assert_int_equal(back.ckpt_every, 4);
  assert_true(back.optim.lr == c.optim.lr);
  ufp4_recipe r1, r2;
  assert_int_equal(ufp4_recipe_parse(back.recipe, &r1), 0);
  assert_int_equal(ufp4_recipe_parse(c.recipe, &r2), 0);
  assert_int_equal(r1.rht_mask, r2.rht_mask);
  assert_int_equal(r1.grid, r2.grid);
  /* metrics.jsonl: one line per step plus the evaluations. */
  snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
  text = read_text(p);
  int steps = 0, evals = 0;
  for (char *s = text; (s = strstr(s, "{\"step\":")); s++) {
    if (strstr(s, "val_loss") && strstr(s, "val_loss") < strchr(s, '\n')) evals++;
    else steps++;
  }
  assert_int_equal(steps, 12);
  assert_int_equal(evals, 1);
  free(text);
  ufp4_remove_tree(dir);
}

/* Diagnostics change nothing in training, and report what they promise. */
static void test_diagnostics(void **state) {
  (void)state;
  char a[] = "/tmp/ufp4_diagA_XXXXXX", b[] = "/tmp/ufp4_diagB_XXXXXX";
  assert_non_null(mkdtemp(a));
  assert_non_null(mkdtemp(b));
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result ra, rb;
  ufp4_train_config ca = tiny(a, "e2m1", 6), cb = tiny(b, "e2m1", 6);
  cb.diag_every = 3;
  assert_int_equal(ufp4_train(&ca, &src, 0, &ra), 0);
  assert_int_equal(ufp4_train(&cb, &src, 0, &rb), 0);
  assert_memory_equal(&ra.final_loss, &rb.final_loss, sizeof(double));
  char p[256];
  snprintf(p, sizeof p, "%s/diagnostics.jsonl", b);
  char *text = read_text(p);
  int drift = 0, operands = 0, gemms = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (strstr(line, "\"drift\"")) {
      drift++;
      /* Layer 0 is the embedding: identical in both forwards. */
      assert_non_null(strstr(line, "{\"layer\":0,\"norm_ratio\":1,\"cosine\":1}"));
    } else if (strstr(line, "\"operand\"")) {
      operands++;
      assert_non_null(strstr(line, "\"alpha\":"));
    } else if (strstr(line, "\"gemm\"")) {
      gemms++;
    }
  }
  /* Steps 0 and 3; 2 layers x 7 projections x 6 operands and x 3 GEMMs each. */
  assert_int_equal(drift, 2);
  assert_int_equal(operands, 2 * 2 * 7 * 6);
  assert_int_equal(gemms, 2 * 2 * 7 * 3);
  free(text);
  ufp4_remove_tree(a);
  ufp4_remove_tree(b);
}

/* A learning rate that overflows the weights makes the loss non-finite: the skip policy drops those
 * updates and finishes. A resume may not bring such a learning rate in (the stop policy on a
 * resume is tests/test_reliability_cli.c's). */
static void test_nan_policy(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_nan_XXXXXX";
  assert_non_null(mkdtemp(dir));
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result r;
  ufp4_train_config c = tiny(dir, "fp32", 12);
  c.optim.lr = 1e30;
  c.optim.min_lr = 1e30;
  c.optim.warmup_steps = 0;
  c.optim.grad_clip = 0;
  c.optim.weight_decay = 0;
  c.nan_policy = UFP4_NAN_SKIP;
  assert_int_equal(ufp4_train(&c, &src, 0, &r), 0);
  assert_int_equal(r.steps_done, 12);
  assert_true(r.skipped_steps > 0);
  char p[256];
  snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
  char *text = read_text(p);
  assert_non_null(strstr(text, "\"loss\":null")); /* JSON has no NaN: written as null */
  assert_non_null(strstr(text, "\"skipped\":true"));
  free(text);
  ufp4_remove_tree(dir);

  assert_non_null(mkdtemp(strcpy(dir, "/tmp/ufp4_nan_XXXXXX")));
  /* A resume that would blow the run up by its optimizer settings is refused before any step:
   * the configuration is the run's (the library's resume check; tests/test_reliability_cli.c
   * resumes a poisoned checkpoint under --nan-policy stop and skip, which a resume may change).
   * Checkpoint 2 stays. */
  c = tiny(dir, "fp32", 2);
  c.ckpt_every = 1;
  assert_int_equal(ufp4_train(&c, &src, 0, &r), 0);
  c.steps = 12;
  c.optim.lr = c.optim.min_lr = 5;
  c.nan_policy = UFP4_NAN_STOP;
  int rc = ufp4_train(&c, &src, 1, &r);
  if (rc != UFP4_EINVAL || !strstr(ufp4_last_error(), "changes \"optim.lr\"") || !strstr(ufp4_last_error(), dir))
    fail_msg("%d: %s", rc, ufp4_last_error());
  ufp4_model_config mc;
  snprintf(p, sizeof p, "%s/ckpt/step_00000002", dir);
  assert_int_equal(ufp4_checkpoint_config(p, &mc), 0);
  ufp4_remove_tree(dir);
}

static void test_bad_config_file(void **state) {
  (void)state;
  char path[] = "/tmp/ufp4_cfg_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *bad = "{\"model\": {\"d_model\": \"wide\"}}";
  assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
  close(fd);
  ufp4_train_config c = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load(path, &c), UFP4_EFORMAT);
  assert_non_null(strstr(ufp4_last_error(), path));
  assert_non_null(strstr(ufp4_last_error(), "d_model"));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loss_falls_for_every_recipe),
      cmocka_unit_test(test_resume_is_bit_exact),
      cmocka_unit_test(test_run_folder),
      cmocka_unit_test(test_diagnostics),
      cmocka_unit_test(test_nan_policy),
      cmocka_unit_test(test_bad_config_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
