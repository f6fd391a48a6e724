/* Exact resume under the paper's UFP4 recipe (E1M2 grid, RHT on all three GEMMs, stochastic
 * rounding of dY) with gradient accumulation: a run stopped at a checkpoint and resumed ends with
 * the same bits -- parameters and AdamW state -- as the run that never stopped. Small enough to
 * run under valgrind (scripts/valgrind.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_test_util.h"
#include "ufp4/error.h"
#include "ufp4/recipe.h"

static const train_synth synth = {.batch = 2, .seq = 16, .vocab = 32, .seed = 7, .mul = 3, .add = 1};

static ufp4_train_config tiny(const char *dir, int steps) {
  ufp4_train_config c = train_tiny_config(dir, "ufp4", &synth, steps);
  c.grad_accum = 2;
  c.optim.lr = 1e-2;
  c.optim.warmup_steps = 2;
  c.optim.total_steps = 8;
  c.eval_batches = 1;
  return c;
}

/* The recipe under test really has what this file claims, so the test cannot silently weaken. */
static void test_recipe_is_rht_everywhere_with_sr(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  char buf[512];
  ufp4_recipe_format(&r, buf, sizeof buf);
  assert_non_null(strstr(buf, "grid=e1m2"));
  assert_non_null(strstr(buf, "sr=dgrad.dy+wgrad.dy"));
  assert_non_null(strstr(buf, "rht=fprop+dgrad+wgrad"));
}

static void test_resume_ufp4_bit_exact(void **state) {
  (void)state;
  char a[] = "/tmp/ufp4_relA_XXXXXX", b[] = "/tmp/ufp4_relB_XXXXXX";
  assert_non_null(mkdtemp(a));
  assert_non_null(mkdtemp(b));
  ufp4_data_source src = {train_synth_batch, (void *)&synth, train_synth_batch, (void *)&synth};
  ufp4_train_result ra, rb;
  ufp4_train_config ca = tiny(a, 8);
  assert_int_equal(ufp4_train(&ca, &src, 0, &ra), 0);
  ufp4_train_config cb = tiny(b, 3); /* a checkpoint that is not a multiple of anything */
  assert_int_equal(ufp4_train(&cb, &src, 0, &rb), 0);
  cb.steps = 8;
  assert_int_equal(ufp4_train(&cb, &src, 1, &rb), 0);
  assert_int_equal(rb.steps_done, 8);
  assert_memory_equal(&ra.final_val_loss, &rb.final_val_loss, sizeof(double));
  const char *files[] = {"model.safetensors", "optimizer.safetensors"};
  for (int i = 0; i < 2; i++) {
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/ckpt/step_00000008/%s", a, files[i]);
    snprintf(pb, sizeof pb, "%s/ckpt/step_00000008/%s", b, files[i]);
    train_files_equal(pa, pb);
  }
  ufp4_remove_tree(a);
  ufp4_remove_tree(b);
}

/* A resume with nothing to resume from says so and names the run folder. */
static void test_resume_without_checkpoint(void **state) {
  (void)state;
  char a[] = "/tmp/ufp4_relC_XXXXXX";
  assert_non_null(mkdtemp(a));
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result r;
  ufp4_train_config c = tiny(a, 2);
  assert_int_not_equal(ufp4_train(&c, &src, 1, &r), 0);
  assert_non_null(strstr(ufp4_last_error(), a));
  assert_non_null(strstr(ufp4_last_error(), "no complete checkpoint"));
  ufp4_remove_tree(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recipe_is_rht_everywhere_with_sr),
      cmocka_unit_test(test_resume_ufp4_bit_exact),
      cmocka_unit_test(test_resume_without_checkpoint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
