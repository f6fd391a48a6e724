/* Shared by the tests of the commands that read a checkpoint and a validation shard (model_io,
 * drift): a tiny decoder's configuration, and a checkpoint of it with a byte-level val.tok beside. */
#ifndef UFP4_TESTS_CKPT_TEST_UTIL_H
#define UFP4_TESTS_CKPT_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "ufp4/checkpoint.h"
#include "ufp4/model.h"
#include "ufp4/shard.h"
#include "ufp4/tokenizer.h"

/* `layers` blocks of width d (2 heads, MLP 2d) over sequences of T tokens of a `vocab` vocabulary. */
static inline ufp4_model_config ckpt_tiny_config(int layers, int d, int T, int vocab) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = layers;
  c.d_model = d;
  c.n_heads = 2;
  c.ffn_dim = 2 * d;
  c.seq_len = T;
  c.vocab = vocab;
  ufp4_model_config_resolve(&c);
  return c;
}

/* DIR/ckpt: the model of c initialized from `seed`; DIR/val.tok: `windows` windows of T + 1
 * byte-tokenizer ids (i * 37 + 11) mod vocab. Returns 0 or -1. */
static inline int ckpt_write_tiny(const char *dir, const ufp4_model_config *c, uint64_t seed,
                                  size_t windows) {
  char path[4096];
  ufp4_model *m;
  if (ufp4_model_create(&m, c, 1)) return -1;
  ufp4_model_init(m, seed);
  snprintf(path, sizeof path, "%s/ckpt", dir);
  int rc = ufp4_checkpoint_save(path, m, NULL, NULL, NULL);
  ufp4_model_free(m);
  ufp4_shard_info info = {.tokenizer_id = UFP4_TOK_BYTES, .vocab_size = (uint32_t)c->vocab};
  ufp4_shard_writer *w;
  snprintf(path, sizeof path, "%s/val.tok", dir);
  if (rc || ufp4_shard_writer_open(path, &info, &w)) return -1;
  const size_t n = windows * (size_t)(c->seq_len + 1);
  for (size_t i = 0; i < n; i++) {
    uint32_t id = (uint32_t)((i * 37 + 11) % (size_t)c->vocab);
    if (ufp4_shard_writer_append(w, &id, 1)) return -1;
  }
  return ufp4_shard_writer_commit(w, 1) ? -1 : 0;
}

#endif
