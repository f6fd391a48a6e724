/* Shared by the tests that run compare and sweep as library calls (test_report_lib,
 * test_compare_resume): a work folder with token shards of bytes, as `ufp4 prepare` would write
 * them, and a tiny model to train on them. Include after cmocka.h. */
#ifndef UFP4_TESTS_GRID_TEST_UTIL_H
#define UFP4_TESTS_GRID_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/shard.h"
#include "ufp4/train.h"

/* A ufp4 call that must succeed; on failure the library's message is shown. */
#define assert_ok(call)                                                      \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_) fprintf(stderr, "%s: %d: %s\n", #call, rc_, ufp4_last_error()); \
    assert_int_equal(rc_, 0);                                                \
  } while (0)

/* DIR/NAME: n bytes of sentences drawn from a few words by a fixed LCG from `seed` (vocabulary
 * 256): learnable, and the same every time. A ufp4 status. */
static inline int test_write_byte_shard(const char *dir, const char *name, size_t n, uint32_t seed) {
  static const char *words[] = {"the ", "state ",  "of ",  "union ",
                                "is ",  "strong ", "and ", "free. "};
  uint32_t *ids = malloc(n * sizeof *ids);
  if (!ids) return -1;
  for (size_t i = 0; i < n;) {
    seed = seed * 1664525u + 1013904223u;
    for (const char *w = words[seed >> 29]; *w && i < n; w++) ids[i++] = (uint8_t)*w;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ufp4_shard_info info = {.tokenizer_id = 0, .vocab_size = 256};
  ufp4_shard_writer *w;
  int rc = ufp4_shard_writer_open(path, &info, &w);
  if (!rc && (rc = ufp4_shard_writer_append(w, ids, n))) ufp4_shard_writer_abort(w);
  if (!rc) rc = ufp4_shard_writer_commit(w, 1);
  free(ids);
  return rc;
}

/* The test program's work folder and its shards (WORK/data), made by grid_test_setup. */
static char grid_work[] = "/tmp/ufp4_grid_XXXXXX";
static char grid_data[600];

/* cmocka group set-up: makes grid_work, and in grid_data train.tok (40000 bytes) and val.tok
 * (8000); -1 after saying why when it cannot. */
static int grid_test_setup(void **state) {
  (void)state;
  if (!mkdtemp(grid_work)) return -1;
  snprintf(grid_data, sizeof grid_data, "%s/data", grid_work);
  if (ufp4_mkdirs(grid_data) || test_write_byte_shard(grid_data, "train.tok", 40000, 1) ||
      test_write_byte_shard(grid_data, "val.tok", 8000, 2)) {
    fprintf(stderr, "cannot write the shards: %s\n", ufp4_last_error());
    return -1;
  }
  return 0;
}

/* cmocka group tear-down: removes grid_work. */
static int grid_test_teardown(void **state) {
  (void)state;
  ufp4_remove_tree(grid_work);
  return 0;
}

/* One block of width 32 (2 heads, ffn 64), T = 32, batch 4, 10 steps at lr 3e-3 after 2 of
 * warmup, 2 validation batches, no progress line: seconds per grid. */
static inline ufp4_train_config grid_test_tiny(ufp4_train_config c) {
  c.model.n_layers = 1;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.ffn_dim = 64;
  c.model.seq_len = 32;
  c.batch = 4;
  c.steps = 10;
  c.optim.lr = 3e-3;
  c.optim.warmup_steps = 2;
  c.eval_batches = 2;
  c.progress = 0;
  return c;
}

#endif
