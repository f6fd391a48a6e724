#include "ufp4/loader.h"

#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/philox.h"

struct ufp4_loader {
  ufp4_loader_config cfg;
  ufp4_shard shard;
  uint64_t n_windows, per_rank, batches;
  uint64_t *perm, perm_epoch; /* permutation of the epoch perm_epoch (UINT64_MAX: none yet) */
  uint64_t next_step;
};

int ufp4_loader_open(const char *path, const ufp4_loader_config *cfg, ufp4_loader **out) {
  *out = NULL;
  ufp4_loader_config c = *cfg;
  if (!c.world) c.world = 1;
  if (!c.batch || !c.seq_len || c.rank >= c.world)
    return ufp4_fail(UFP4_EINVAL, "%s: loader needs batch > 0, seq_len > 0 and rank < world (got %zu, %zu, %u/%u)",
                     path, c.batch, c.seq_len, c.rank, c.world);
  ufp4_loader *l = calloc(1, sizeof *l);
  if (!l) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  int rc = ufp4_shard_open(path, &l->shard);
  if (rc) {
    free(l);
    return rc;
  }
  l->cfg = c;
  uint64_t n = l->shard.info.token_count;
  l->n_windows = n > 1 ? (n - 1) / c.seq_len : 0;
  l->per_rank = l->n_windows / c.world;
  l->batches = l->per_rank / c.batch;
  if (!l->batches) {
    rc = ufp4_fail(UFP4_EINVAL, "%s: %llu tokens make %llu windows of %zu+1, fewer than one batch of %zu for each of %u ranks",
                   path, (unsigned long long)n, (unsigned long long)l->n_windows, c.seq_len, c.batch, c.world);
    ufp4_loader_free(l);
    return rc;
  }
  if (c.shuffle && !(l->perm = malloc(l->n_windows * sizeof *l->perm))) {
    ufp4_loader_free(l);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  }
  l->perm_epoch = UINT64_MAX;
  *out = l;
  return 0;
}

void ufp4_loader_free(ufp4_loader *l) {
  if (!l) return;
  ufp4_shard_close(&l->shard);
  free(l->perm);
  free(l);
}

const ufp4_shard *ufp4_loader_shard(const ufp4_loader *l) { return &l->shard; }
uint64_t ufp4_loader_batches_per_epoch(const ufp4_loader *l) { return l->batches; }

static void make_perm(ufp4_loader *l, uint64_t epoch) {
  if (l->perm_epoch == epoch) return;
  uint64_t n = l->n_windows;
  for (uint64_t i = 0; i < n; i++) l->perm[i] = i;
  for (uint64_t i = n - 1; i > 0; i--) {
    uint64_t j = ((uint64_t)ufp4_philox_u32(l->cfg.seed, epoch, i) * (i + 1)) >> 32;
    uint64_t t = l->perm[i];
    l->perm[i] = l->perm[j];
    l->perm[j] = t;
  }
  l->perm_epoch = epoch;
}

uint64_t ufp4_loader_window(ufp4_loader *l, uint64_t step, size_t b) {
  uint64_t epoch = step / l->batches, k = step % l->batches;
  uint64_t pos = (k * l->cfg.batch + b) * l->cfg.world + l->cfg.rank;
  if (!l->cfg.shuffle) return pos;
  make_perm(l, epoch);
  return l->perm[pos];
}

int ufp4_loader_batch(ufp4_loader *l, uint64_t step, uint32_t *out) {
  size_t T = l->cfg.seq_len;
  for (size_t b = 0; b < l->cfg.batch; b++) {
    uint64_t w = ufp4_loader_window(l, step, b);
    int rc = ufp4_shard_read(&l->shard, w * T, T + 1, out + b * (T + 1));
    if (rc) return rc;
  }
  return 0;
}

int ufp4_loader_next(ufp4_loader *l, uint32_t *out) {
  if (!l->cfg.shuffle && l->next_step == l->batches) {
    l->next_step = 0;
    return 1;
  }
  int rc = ufp4_loader_batch(l, l->next_step, out);
  if (!rc) l->next_step++;
  return rc;
}

uint64_t ufp4_loader_epoch(const ufp4_loader *l) { return l->next_step / l->batches; }
