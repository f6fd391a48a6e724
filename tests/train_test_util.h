/* Shared by the tests that train in-process (test_train, test_reliability_*): a synthetic,
 * learnable token source, a tiny training config, and byte equality of two files. */
#ifndef UFP4_TESTS_TRAIN_TEST_UTIL_H
#define UFP4_TESTS_TRAIN_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/fileio.h"
#include "ufp4/philox.h"
#include "ufp4/train.h"

/* A deterministic "language": each row starts at a Philox draw of (seed, batch index, row) mod
 * vocab, then x_{t+1} = (mul x_t + add) mod vocab; a model that learns it gets far below ln vocab. */
typedef struct {
  int batch, seq, vocab;
  uint32_t seed;
  int32_t mul, add;
} train_synth;

/* A ufp4_data_source batch callback; ctx is a const train_synth *. */
static inline int train_synth_batch(void *ctx, uint64_t index, int32_t *tokens) {
  const train_synth *s = ctx;
  for (int b = 0; b < s->batch; b++) {
    int32_t x = (int32_t)(ufp4_philox_u32(s->seed, index, (uint64_t)b) % (uint32_t)s->vocab);
    for (int t = 0; t <= s->seq; t++) {
      tokens[b * (s->seq + 1) + t] = x;
      x = (s->mul * x + s->add) % s->vocab;
    }
  }
  return 0;
}

/* One layer, d_model 32, 2 heads, ffn 64 over s's batch, seq_len and vocab; no evaluation, no
 * progress line. Callers change what their test needs on top. */
static inline ufp4_train_config train_tiny_config(const char *dir, const char *recipe, const train_synth *s,
                                                  int steps) {
  ufp4_train_config c = ufp4_train_config_default();
  c.model.n_layers = 1;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_kv_heads = 2;
  c.model.ffn_dim = 64;
  c.model.seq_len = s->seq;
  c.model.vocab = s->vocab;
  c.batch = s->batch;
  c.steps = steps;
  c.eval_every = 0;
  c.eval_batches = 0;
  c.progress = 0;
  snprintf(c.recipe, sizeof c.recipe, "%s", recipe);
  snprintf(c.out_dir, sizeof c.out_dir, "%s", dir);
  return c;
}

/* Fails unless the two files hold the same bytes. Include after cmocka.h. */
static inline void train_files_equal(const char *a, const char *b) {
  char *da, *db;
  size_t na, nb;
  assert_int_equal(ufp4_read_file(a, SIZE_MAX, &da, &na), 0);
  assert_int_equal(ufp4_read_file(b, SIZE_MAX, &db, &nb), 0);
  assert_int_equal(na, nb);
  assert_memory_equal(da, db, na);
  free(da);
  free(db);
}

#endif
