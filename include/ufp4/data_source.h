/* Token shards as the trainer's batch source (train.h): a loader over DIR/train.tok (shuffled,
 * seeded) and one over DIR/val.tok (shard order), the layout `ufp4 prepare` writes. */
#ifndef UFP4_DATA_SOURCE_H
#define UFP4_DATA_SOURCE_H

#include <stdint.h>
#include "ufp4/loader.h"
#include "ufp4/train.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  ufp4_loader *loader;
  uint32_t *buf; /* B x (T + 1) */
  size_t n;
} ufp4_shard_source;

typedef struct {
  ufp4_shard_source train, val; /* val.loader is NULL when DIR has no val.tok */
  uint32_t vocab;               /* from the shard header */
  uint32_t tokenizer_id;
} ufp4_shard_data;

/* Opens DIR/train.tok and, when present, DIR/val.tok for batches of B x (T + 1) at `seed`, as rank
 * `rank` of `world`. Both shards must come from the same tokenizer. */
int ufp4_shard_data_open(ufp4_shard_data *d, const char *dir, int B, int T, uint64_t seed, int rank, int world);
void ufp4_shard_data_close(ufp4_shard_data *d);
/* The batch function for ufp4_data_source; ctx is a ufp4_shard_source. */
int ufp4_shard_source_batch(void *ctx, uint64_t index, int32_t *tokens);
/* Trains cfg on DIR's shards: the model's vocabulary comes from the shard (on resume it must
 * match), n_kv_heads is resolved, eval_batches is capped at one validation pass, and the data
 * folder is recorded in config.json. */
int ufp4_train_shards(ufp4_train_config *cfg, const char *dir, int resume, ufp4_train_result *res);
/* cfg as ufp4_train_shards would train it on DIR's shards and record it in config.json
 * (ufp4_train_config_resolve included), without training: what a run folder made from cfg must
 * hold. */
int ufp4_train_shards_resolve(ufp4_train_config *cfg, const char *dir);
/* Validation batches available (one pass). */
uint64_t ufp4_shard_source_batches(const ufp4_shard_source *s);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
