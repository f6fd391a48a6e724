/* The library behind `ufp4 eval`, `sample` and `drift`, called directly: ufp4_drift_measure's
 * forward (drift.h) against a hand loop over ufp4_forward_drift, and model_io.h's checkpoint functions on a
 * checkpoint and a validation shard written here, against the lower-level calls they wrap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_test_util.h"
#include "train_test_util.h"
#include "ufp4/checkpoint.h"
#include "ufp4/diagnostics.h"
#include "ufp4/drift.h"
#include "ufp4/error.h"
#include "ufp4/model_io.h"
#include "ufp4/recipe.h"
#include "ufp4/shard.h"
#include "ufp4/tokenizer.h"

enum { B = 2, T = 16, L = 2, VOCAB = 256, N_WINDOWS = 12 };

static char work[] = "/tmp/ufp4_model_io_XXXXXX";
static char ckpt[256], shard[256];

static ufp4_model *tiny_model(int batch) {
  ufp4_model_config c = ckpt_tiny_config(L, 16, T, VOCAB);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, batch), 0);
  ufp4_model_init(m, 7);
  return m;
}

/* A checkpoint of an initialized model and a bytes-tokenizer val.tok of N_WINDOWS windows. */
static int setup(void **state) {
  (void)state;
  if (!mkdtemp(work)) return -1;
  snprintf(ckpt, sizeof ckpt, "%s/ckpt", work);
  snprintf(shard, sizeof shard, "%s/val.tok", work);
  ufp4_model_config c = ckpt_tiny_config(L, 16, T, VOCAB);
  return ckpt_write_tiny(work, &c, 7, N_WINDOWS);
}

static int teardown(void **state) {
  (void)state;
  ufp4_remove_tree(work);
  return 0;
}

static const train_synth synth = {
    .batch = B, .seq = T, .vocab = VOCAB, .seed = 3, .mul = 5, .add = 1};

/* The per-batch values by hand: one forward drift per recipe and batch, with the recipe set as
 * drift.h says (seed 1, step = batch). */
static void drift_by_hand(ufp4_model *m, const char *recipe, long batches, double *ratio,
                          double *cosine) {
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(recipe, &r), 0);
  ufp4_model_set_recipe(m, &r, 1);
  int32_t tokens[B * (T + 1)], inp[B * T];
  ufp4_drift_point pts[L + 1];
  for (long b = 0; b < batches; b++) {
    ufp4_model_set_step(m, (uint64_t)b, 0);
    train_synth_batch((void *)&synth, (uint64_t)b, tokens);
    for (int s = 0; s < B; s++) memcpy(inp + s * T, tokens + s * (T + 1), sizeof(int32_t) * T);
    assert_int_equal(ufp4_forward_drift(m, inp, B, T, pts), 0);
    for (int l = 0; l <= L; l++) {
      ratio[l * batches + b] = pts[l].norm_ratio;
      cosine[l * batches + b] = pts[l].cosine;
    }
  }
}

static void test_drift_measure_matches_the_loop(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(B);
  const char *recipes[] = {"fp32", "e2m1", "nvfp4"};
  ufp4_drift_spec s = {.recipes = recipes,
                       .n_recipes = 3,
                       .batches = 3,
                       .batch = B,
                       .batch_fn = train_synth_batch,
                       .ctx = (void *)&synth};
  ufp4_drift_table t;
  assert_int_equal(ufp4_drift_measure(m, &s, &t), 0);
  assert_int_equal(t.n_recipes, 3);
  assert_int_equal(t.n_layers, L);
  assert_int_equal(t.n_batches, 3);
  assert_int_equal(t.fwd_ratio.n_points, L + 1);
  for (int k = 0; k < 3; k++) {
    double ratio[(L + 1) * 3], cosine[(L + 1) * 3];
    drift_by_hand(m, recipes[k], 3, ratio, cosine);
    assert_memory_equal(ratio, t.fwd_ratio.values + k * (L + 1) * 3, sizeof ratio);
    assert_memory_equal(cosine, t.fwd_cosine.values + k * (L + 1) * 3, sizeof cosine);
    for (int l = 0; l <= L; l++) {
      const double mean = (ratio[l * 3] + ratio[l * 3 + 1] + ratio[l * 3 + 2]) / 3;
      assert_true(ufp4_drift_at(&t.fwd_ratio, k, l)->mean == mean);
    }
  }
  /* fp32 against itself, and the embeddings under any recipe, do not drift. */
  for (int l = 0; l <= L; l++)
    assert_true(ufp4_drift_at(&t.fwd_ratio, 0, l)->mean == 1.0 &&
                ufp4_drift_at(&t.fwd_cosine, 0, l)->mean > 0.9999999);
  assert_true(ufp4_drift_at(&t.fwd_ratio, 1, 0)->mean == 1.0);
  /* Rounding does move the last block. */
  assert_true(ufp4_drift_at(&t.fwd_cosine, 1, L)->mean < 1.0);
  /* Without the backward there are no backward series. */
  assert_int_equal(t.backward, 0);
  assert_null(t.dx_ratio.values);
  assert_null(t.dw_ratio.values);
  ufp4_drift_table_free(&t);
  ufp4_model_free(m);
}

static void test_drift_measure_bad_recipe(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(B);
  const char *recipes[] = {"e2m1", "nonsense"};
  ufp4_drift_spec s = {.recipes = recipes,
                       .n_recipes = 2,
                       .batches = 1,
                       .batch = B,
                       .batch_fn = train_synth_batch,
                       .ctx = (void *)&synth};
  ufp4_drift_table t;
  assert_int_not_equal(ufp4_drift_measure(m, &s, &t), 0);
  assert_non_null(strstr(ufp4_last_error(), "nonsense"));
  ufp4_drift_table_free(&t);
  ufp4_drift_table_free(&t); /* freeing twice is harmless: the table is zeroed */
  ufp4_model_free(m);
}

static void test_model_load_and_val_source(void **state) {
  (void)state;
  ufp4_model *m;
  assert_int_equal(ufp4_model_load(ckpt, "e2m1", B, &m), 0);
  assert_int_equal(ufp4_model_get_config(m)->n_layers, L);
  ufp4_model_free(m);
  assert_int_not_equal(ufp4_model_load(ckpt, "nonsense", B, &m), 0);
  assert_null(m);
  assert_int_not_equal(ufp4_model_load("/nonexistent/ckpt", "fp32", B, &m), 0);
  assert_null(m);
  /* A folder means its val.tok; a .tok path is taken as it is. */
  ufp4_shard_source src;
  char path[4200];
  assert_int_equal(ufp4_val_source_open(work, B, T, &src, path, sizeof path), 0);
  assert_string_equal(path, shard);
  assert_int_equal(src.n, B * (T + 1));
  assert_int_equal(ufp4_loader_batches_per_epoch(src.loader), N_WINDOWS / B);
  ufp4_val_source_close(&src);
  assert_int_equal(ufp4_val_source_open(shard, B, T, &src, path, sizeof path), 0);
  assert_string_equal(path, shard);
  ufp4_val_source_close(&src);
  assert_int_not_equal(ufp4_val_source_open(ckpt, B, T, &src, path, sizeof path), 0);
  assert_non_null(strstr(ufp4_last_error(), "ckpt/val.tok"));
  ufp4_val_source_close(&src);
}

static void test_eval_checkpoint(void **state) {
  (void)state;
  ufp4_eval_result res;
  assert_int_equal(ufp4_eval_checkpoint(ckpt, work, "nvfp4", NULL, 100, B, &res), 0);
  assert_int_equal(res.batches, N_WINDOWS / B); /* capped at one pass */
  assert_int_equal(res.seq_len, T);
  assert_string_equal(res.path, shard);
  /* The same figure from the calls it wraps. */
  ufp4_model *m;
  ufp4_shard_source src;
  char path[4200];
  double loss;
  assert_int_equal(ufp4_model_load(ckpt, "nvfp4", B, &m), 0);
  assert_int_equal(ufp4_val_source_open(shard, B, T, &src, path, sizeof path), 0);
  assert_int_equal(ufp4_evaluate(m, ufp4_shard_source_batch, &src, N_WINDOWS / B, B, T, &loss), 0);
  assert_memory_equal(&loss, &res.loss, sizeof loss);
  ufp4_val_source_close(&src);
  ufp4_model_free(m);
  assert_int_equal(ufp4_eval_checkpoint(ckpt, shard, "fp32", NULL, 2, B, &res), 0);
  assert_int_equal(res.batches, 2);
}

/* The loss of m on the whole val shard. */
static double shard_loss(ufp4_model *m) {
  ufp4_shard_source src;
  char path[4200];
  double loss;
  assert_int_equal(ufp4_val_source_open(shard, B, T, &src, path, sizeof path), 0);
  assert_int_equal(ufp4_evaluate(m, ufp4_shard_source_batch, &src, N_WINDOWS / B, B, T, &loss), 0);
  ufp4_val_source_close(&src);
  return loss;
}

/* A checkpoint with an optimizer state records its run's seed; ufp4_model_load draws a recipe's
 * RHT signs from it, as training did: under ufp4 (fprop rotated) the loaded model computes what a
 * model given seed 3 computes, not seed 0's. A trainer record without a seed is an error naming
 * the file. */
static void test_model_load_uses_the_run_seed(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(B), *loaded;
  const size_t n = ufp4_model_param_count(ufp4_model_get_config(m));
  float *mv = calloc(n, sizeof *mv), *vv = calloc(n, sizeof *vv);
  assert_non_null(mv);
  assert_non_null(vv);
  char dir[300], nos[300];
  snprintf(dir, sizeof dir, "%s/seeded", work);
  snprintf(nos, sizeof nos, "%s/noseed", work);
  assert_int_equal(ufp4_checkpoint_save(dir, m, mv, vv, "{\"step\":1,\"seed\":3,\"world\":1}"), 0);
  assert_int_equal(ufp4_checkpoint_save(nos, m, mv, vv, "{\"step\":1,\"world\":1}"), 0);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  ufp4_model_set_recipe(m, &r, 3);
  const double want = shard_loss(m);
  ufp4_model_set_recipe(m, &r, 0);
  const double seed0 = shard_loss(m);
  assert_true(want != seed0); /* the signs matter here, so the check below can fail */
  assert_int_equal(ufp4_model_load(dir, "ufp4", B, &loaded), 0);
  const double got = shard_loss(loaded);
  assert_memory_equal(&got, &want, sizeof got);
  ufp4_model_free(loaded);
  assert_int_not_equal(ufp4_model_load(nos, "ufp4", B, &loaded), 0);
  assert_null(loaded);
  assert_non_null(strstr(ufp4_last_error(), "noseed/optimizer.safetensors"));
  assert_non_null(strstr(ufp4_last_error(), "no seed"));
  ufp4_model_free(m);
  free(mv);
  free(vv);
}

static void test_sample_checkpoint(void **state) {
  (void)state;
  int rc;
  ufp4_sample_opts o = {.temperature = 0.8, .top_k = 40, .seed = 5};
  char *text, *again;
  size_t len, len2;
  assert_int_equal(ufp4_sample_checkpoint(ckpt, "bytes", "fp32", "Fellow", 12, &o, &text, &len), 0);
  assert_true(len >= 6 && len <= 6 + 12);
  assert_memory_equal(text, "Fellow", 6);
  assert_int_equal(ufp4_sample_checkpoint(ckpt, "bytes", "fp32", "Fellow", 12, &o, &again, &len2),
                   0);
  assert_int_equal(len, len2);
  assert_memory_equal(text, again, len); /* the same seed gives the same text */
  free(text);
  free(again);
  assert_int_not_equal(ufp4_sample_checkpoint(ckpt, "bytes", "bogus", "x", 1, &o, &text, &len), 0);
  assert_null(text);
  /* A vocabulary padded past the tokenizer's (300 > 256): only ids it can decode are drawn, over
   * the whole distribution (top-k 0, temperature 1, where the 44 padded ids hold about 15% of each
   * draw: 40 draws without one would be luck); twice the tokenizer's (512) still samples, one more
   * is refused. */
  char dir[1024];
  ufp4_sample_opts all = {.temperature = 1.0, .top_k = 0, .seed = 9, .stop_token = -1};
  const int vocabs[] = {300, 512, 513};
  for (int k = 0; k < 3; k++) {
    const int vocab = vocabs[k];
    snprintf(dir, sizeof dir, "%s/pad%d", work, vocab);
    ufp4_model_config c = ckpt_tiny_config(L, 16, T, vocab);
    assert_int_equal(ckpt_write_tiny(dir, &c, 7, 2), 0);
    snprintf(dir, sizeof dir, "%s/pad%d/ckpt", work, vocab);
    rc = ufp4_sample_checkpoint(dir, "bytes", "fp32", "Fellow", 40, &all, &text, &len);
    if (vocab <= 512) {
      if (rc) fail_msg("a padded vocabulary: %s", ufp4_last_error());
      assert_true(len >= 6);
      free(text);
    } else {
      assert_int_not_equal(rc, 0);
      assert_non_null(strstr(ufp4_last_error(), "not the tokenizer"));
    }
  }
}

static void test_drift_checkpoint(void **state) {
  (void)state;
  const char *recipes[] = {"e2m1", "ufp4"};
  ufp4_drift_result res;
  assert_int_equal(ufp4_drift_checkpoint(ckpt, work, recipes, 2, 100, B, 1, &res), 0);
  assert_int_equal(res.batches, N_WINDOWS / B);
  assert_int_equal(res.seq_len, T);
  /* The same table from ufp4_drift_measure over the shard. */
  ufp4_model *m;
  ufp4_shard_source src;
  char path[4200];
  assert_int_equal(ufp4_model_load(ckpt, "fp32", B, &m), 0);
  assert_int_equal(ufp4_val_source_open(shard, B, T, &src, path, sizeof path), 0);
  ufp4_drift_spec s = {.recipes = recipes,
                       .n_recipes = 2,
                       .batches = N_WINDOWS / B,
                       .batch = B,
                       .batch_fn = ufp4_shard_source_batch,
                       .ctx = &src,
                       .backward = 1};
  ufp4_drift_table t;
  assert_int_equal(ufp4_drift_measure(m, &s, &t), 0);
  const size_t pts = sizeof(double) * 2 * (L + 1) * (N_WINDOWS / B);
  assert_memory_equal(t.fwd_ratio.values, res.table.fwd_ratio.values, pts);
  assert_memory_equal(t.fwd_cosine.values, res.table.fwd_cosine.values, pts);
  assert_memory_equal(t.dx_ratio.values, res.table.dx_ratio.values, pts);
  assert_memory_equal(t.dw_cosine.values, res.table.dw_cosine.values,
                      sizeof(double) * 2 * (size_t)t.n_tensors * (N_WINDOWS / B));
  assert_int_equal(res.config.n_layers, L);
  ufp4_drift_table_free(&t);
  ufp4_drift_table_free(&res.table);
  ufp4_val_source_close(&src);
  ufp4_model_free(m);
  assert_int_not_equal(ufp4_drift_checkpoint(ckpt, "/nonexistent", recipes, 2, 1, B, 0, &res), 0);
  ufp4_drift_table_free(&res.table);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_drift_measure_matches_the_loop),
      cmocka_unit_test(test_drift_measure_bad_recipe),
      cmocka_unit_test(test_model_load_and_val_source),
      cmocka_unit_test(test_eval_checkpoint),
      cmocka_unit_test(test_model_load_uses_the_run_seed),
      cmocka_unit_test(test_sample_checkpoint),
      cmocka_unit_test(test_drift_checkpoint),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
