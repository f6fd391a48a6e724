/* Stochastic-rounding stream ids: which Philox stream (philox.h) one quantized GEMM operand draws
 * its random bits from.
 *
 * A stream is keyed by the run's seed and named by the tuple
 *   (step, micro, rank, layer, expert, proj, operand)
 * which ufp4_stream_value packs into the 64-bit Philox stream word as bit fields, low to high:
 *
 *   operand  bits  0..2   ufp4_operand (6 used)
 *   proj     bits  3..5   projection of a block: q k v o gate up down (7 used)
 *   layer    bits  6..17  transformer block, < 4096
 *   rank     bits 18..27  data-parallel rank, < 1024
 *   batch    bits 28..63  the run's micro-batch index, step * micro_steps + micro
 *   expert   bits 53..63  added on top of batch: MoE expert, < 2048
 *
 * The expert field shares bits 53..63 with the top of batch: a model without experts (expert 0
 * everywhere) may count 2^34 micro-batches (its values stay below 2^62, where the ASCII-tagged
 * streams under the same seed begin: weight init, RHT signs), one with experts 2^25 (33.5
 * million). A model with 512 or more experts reaches the tagged range in its expert field; the
 * check does not cover that case (expert 586 meets the init streams after about 1.5e7
 * micro-batches). This is the
 * packing ufp4 has always used, so the streams and therefore training runs keep their bits; what
 * is new is that a tuple that does not fit is refused instead of silently wrapping onto another
 * tuple's stream (rank 1024 used to draw rank 0's bits one micro-batch later).
 *
 * Two ids whose fields all pass ufp4_stream_check against the same maxima (and share micro_steps)
 * get different stream values when their tuples differ. */
#ifndef UFP4_STREAM_H
#define UFP4_STREAM_H

#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Field widths of the packing above. */
#define UFP4_STREAM_OPERAND_BITS 3
#define UFP4_STREAM_PROJ_BITS 3
#define UFP4_STREAM_LAYER_BITS 12
#define UFP4_STREAM_RANK_BITS 10
#define UFP4_STREAM_EXPERT_BITS 11
/* Where the micro-batch index and the expert start. */
#define UFP4_STREAM_BATCH_SHIFT \
  (UFP4_STREAM_OPERAND_BITS + UFP4_STREAM_PROJ_BITS + UFP4_STREAM_LAYER_BITS + UFP4_STREAM_RANK_BITS)
#define UFP4_STREAM_EXPERT_SHIFT (64 - UFP4_STREAM_EXPERT_BITS)

typedef struct {
  uint64_t seed;        /* the run's seed: the Philox key, not part of the packed value */
  uint64_t step;        /* optimizer step */
  uint32_t micro;       /* micro-batch of the step (gradient accumulation), < micro_steps */
  uint32_t micro_steps; /* micro-batches per step; 0 counts as 1 */
  uint32_t rank;        /* data-parallel rank */
  uint32_t layer;       /* transformer block */
  uint32_t expert;      /* MoE expert (shared expert: n_experts); 0 for attention and dense MLPs */
  uint32_t proj;        /* projection within the block */
  uint32_t operand;     /* ufp4_operand of the GEMM */
} ufp4_stream_id;

/* The micro-batch index step * micro_steps + micro (wraps for ids that fail the check). */
uint64_t ufp4_stream_batch(const ufp4_stream_id *id);

/* The Philox stream word of id, packed as above. Pure; distinct for distinct checked ids. */
uint64_t ufp4_stream_value(const ufp4_stream_id *id);

/* 0 when every id whose fields are each at most max's gets its own stream value: max holds the
 * largest value each field takes in a run (its last step, last micro-batch, last rank, ...).
 * Otherwise UFP4_EINVAL, and ufp4_last_error() names the field, its value and its limit.
 * A single id checked against itself is checked for fitting its fields. */
int ufp4_stream_check(const ufp4_stream_id *max);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
