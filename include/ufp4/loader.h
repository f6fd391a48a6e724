/* Data loader over one memory-mapped token shard (ufp4/shard.h).
 *
 * The shard is cut into windows of T+1 tokens starting at multiples of T (window w covers
 * tokens [w*T, w*T + T]; consecutive windows share one token so every token is a target once):
 * n_windows = (token_count - 1) / T. A batch is B windows, row-major, B x (T+1) uint32:
 * inputs row[0..T), targets row[1..T].
 *
 * Training (shuffle = 1): epoch e visits the windows in the order of a Fisher-Yates permutation
 * drawn from Philox (seed, stream = e): for i = n-1..1, j = floor(u32(seed, e, i) * (i+1) / 2^32)
 * (the multiply-shift map; its bias, below (i+1)/2^32, is irrelevant at these sizes), swap i, j.
 * Data parallelism: rank r of W takes the permuted windows r, r+W, r+2W, ...; every rank gets
 * floor(n_windows / W) windows per epoch (the tail is dropped so that all ranks step together)
 * and floor(that / B) batches, so ranks read disjoint windows within an epoch. Batch k of epoch e
 * for rank r holds permuted windows (k*B + b)*W + r, b = 0..B-1. Everything is a function of
 * (seed, step, rank, world): batches can be fetched at random, e.g. to resume.
 *
 * Validation (shuffle = 0): the same windows and rank striding in shard order, one pass:
 * ufp4_loader_next returns 1 (no data) after the last batch and starts over. */
#ifndef UFP4_LOADER_H
#define UFP4_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "ufp4/shard.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  size_t batch;   /* B */
  size_t seq_len; /* T */
  uint64_t seed;
  uint32_t rank, world; /* world 0 is taken as 1 */
  int shuffle;          /* 1 training, 0 validation */
} ufp4_loader_config;

typedef struct ufp4_loader ufp4_loader;

/* Fails (naming the file) when the shard is invalid or holds fewer windows than one batch per rank. */
int ufp4_loader_open(const char *shard_path, const ufp4_loader_config *cfg, ufp4_loader **out);
void ufp4_loader_free(ufp4_loader *l);
const ufp4_shard *ufp4_loader_shard(const ufp4_loader *l);
uint64_t ufp4_loader_batches_per_epoch(const ufp4_loader *l);
/* Batch number `step` (epoch = step / batches_per_epoch) into out[B*(T+1)]. */
int ufp4_loader_batch(ufp4_loader *l, uint64_t step, uint32_t *out);
/* The next batch in sequence: returns 0, or 1 at the end of a validation pass (out untouched). */
int ufp4_loader_next(ufp4_loader *l, uint32_t *out);
/* The epoch of the batch the next call to ufp4_loader_next returns. */
uint64_t ufp4_loader_epoch(const ufp4_loader *l);
/* The shard window index of row b of batch `step` (for tests and diagnostics). */
uint64_t ufp4_loader_window(ufp4_loader *l, uint64_t step, size_t b);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
