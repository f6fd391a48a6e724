#include "ufp4/data_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ufp4/dist.h"
#include "ufp4/error.h"

static int open_one(ufp4_shard_source *s, const char *path, int B, int T, uint64_t seed, int rank, int world,
                    int shuffle) {
  ufp4_loader_config c = {.batch = (size_t)B, .seq_len = (size_t)T, .seed = seed, .rank = (uint32_t)rank,
                          .world = (uint32_t)world, .shuffle = shuffle};
  int rc = ufp4_loader_open(path, &c, &s->loader);
  if (rc) return rc;
  s->n = (size_t)B * (size_t)(T + 1);
  s->buf = malloc(s->n * sizeof(uint32_t));
  if (!s->buf) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  return 0;
}

int ufp4_shard_data_open(ufp4_shard_data *d, const char *dir, int B, int T, uint64_t seed, int rank, int world) {
  memset(d, 0, sizeof *d);
  char path[4200];
  snprintf(path, sizeof path, "%s/train.tok", dir);
  int rc = open_one(&d->train, path, B, T, seed, rank, world, 1);
  if (rc) {
    ufp4_shard_data_close(d);
    return rc;
  }
  const ufp4_shard_info *ti = &ufp4_loader_shard(d->train.loader)->info;
  d->vocab = ti->vocab_size;
  d->tokenizer_id = ti->tokenizer_id;
  snprintf(path, sizeof path, "%s/val.tok", dir);
  if (access(path, F_OK) == 0) {
    if ((rc = open_one(&d->val, path, B, T, seed, rank, world, 0)) ||
        (rc = ufp4_shard_expect(ufp4_loader_shard(d->val.loader), ti->tokenizer_id, ti->vocab_size, ti->tokenizer_hash))) {
      ufp4_shard_data_close(d);
      return rc;
    }
  }
  return 0;
}

void ufp4_shard_data_close(ufp4_shard_data *d) {
  ufp4_loader_free(d->train.loader);
  ufp4_loader_free(d->val.loader);
  free(d->train.buf);
  free(d->val.buf);
  memset(d, 0, sizeof *d);
}

int ufp4_shard_source_batch(void *ctx, uint64_t index, int32_t *tokens) {
  ufp4_shard_source *s = ctx;
  int rc = ufp4_loader_batch(s->loader, index, s->buf);
  if (rc) return rc;
  for (size_t i = 0; i < s->n; i++) tokens[i] = (int32_t)s->buf[i];
  return 0;
}

uint64_t ufp4_shard_source_batches(const ufp4_shard_source *s) {
  return s->loader ? ufp4_loader_batches_per_epoch(s->loader) : 0;
}

/* What ufp4_train_shards changes in cfg, given the opened shards. */
static void resolve(ufp4_train_config *cfg, const char *dir, const ufp4_shard_data *data) {
  cfg->model.vocab = (int)data->vocab;
  ufp4_train_config_resolve(cfg);
  if (cfg->data_desc != dir) snprintf(cfg->data_desc, sizeof cfg->data_desc, "%s", dir);
  uint64_t vb = ufp4_shard_source_batches(&data->val);
  if ((uint64_t)cfg->eval_batches > vb) cfg->eval_batches = (int)vb;
}

int ufp4_train_shards_resolve(ufp4_train_config *cfg, const char *dir) {
  ufp4_shard_data data;
  int rc = ufp4_shard_data_open(&data, dir, cfg->batch, cfg->model.seq_len, cfg->seed, cfg->rank, cfg->world);
  if (rc) return rc;
  resolve(cfg, dir, &data);
  ufp4_shard_data_close(&data);
  return 0;
}

int ufp4_train_shards(ufp4_train_config *cfg, const char *dir, int resume, ufp4_train_result *res) {
  ufp4_shard_data data;
  int rc = ufp4_shard_data_open(&data, dir, cfg->batch, cfg->model.seq_len, cfg->seed, cfg->rank, cfg->world);
  if (cfg->world > 1) {
    /* A rank that cannot read its shards stops all of them, rather than leaving them waiting. */
    ufp4_dist *comm;
    int agreed = ufp4_dist_init(&comm);
    if (!agreed) agreed = ufp4_dist_agree(comm, rc);
    if (agreed && !rc) ufp4_shard_data_close(&data);
    rc = agreed;
  }
  if (rc) return rc;
  if (resume && cfg->model.vocab != (int)data.vocab) {
    rc = ufp4_fail(UFP4_EINVAL, "%s/train.tok has vocabulary %u but the run's model has %d", dir, data.vocab,
                   cfg->model.vocab);
  } else {
    resolve(cfg, dir, &data);
    ufp4_data_source src = {ufp4_shard_source_batch, &data.train, data.val.loader ? ufp4_shard_source_batch : NULL,
                            &data.val};
    rc = ufp4_train(cfg, &src, resume, res);
  }
  ufp4_shard_data_close(&data);
  return rc;
}
