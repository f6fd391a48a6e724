/* Stream ids: the packing and its range check; see include/ufp4/stream.h for the layout. */
#include "ufp4/stream.h"

#include "ufp4/error.h"

#define SHIFT_PROJ UFP4_STREAM_OPERAND_BITS
#define SHIFT_LAYER (SHIFT_PROJ + UFP4_STREAM_PROJ_BITS)
#define SHIFT_RANK (SHIFT_LAYER + UFP4_STREAM_LAYER_BITS)

/* Bits of the micro-batch index: the word above rank up to bit 61, or only the part below the
 * expert when a run uses experts other than 0. A dense run's stream values stay below 2^62: the
 * tagged streams that share the run's seed (weight init "INIT" << 32 in llama.c, RHT signs
 * "RHTSIGNS" in rht.c) start with an ASCII capital, so at 2^62 or above, and a 36-bit index would
 * have reached the init streams at micro-batch ~1.97e10. */
#define BATCH_BITS_DENSE (62 - UFP4_STREAM_BATCH_SHIFT)
#define BATCH_BITS_EXPERTS (UFP4_STREAM_EXPERT_SHIFT - UFP4_STREAM_BATCH_SHIFT)

static uint32_t micro_steps(const ufp4_stream_id *id) { return id->micro_steps ? id->micro_steps : 1; }

uint64_t ufp4_stream_batch(const ufp4_stream_id *id) {
  return id->step * micro_steps(id) + id->micro;
}

uint64_t ufp4_stream_value(const ufp4_stream_id *id) {
  return (uint64_t)id->operand + ((uint64_t)id->proj << SHIFT_PROJ) +
         ((uint64_t)id->layer << SHIFT_LAYER) + ((uint64_t)id->rank << SHIFT_RANK) +
         (ufp4_stream_batch(id) << UFP4_STREAM_BATCH_SHIFT) +
         ((uint64_t)id->expert << UFP4_STREAM_EXPERT_SHIFT);
}

/* A field of `bits` bits holding values 0 .. value; `what` says whose streams a larger one takes. */
static int fits(const char *field, uint64_t value, int bits, const char *what) {
  const uint64_t last = (UINT64_C(1) << bits) - 1;
  if (value <= last) return 0;
  return ufp4_fail(UFP4_EINVAL,
                   "stream: %s %llu does not fit the stochastic-rounding stream's %d %s bits (0..%llu); "
                   "it would reuse %s",
                   field, (unsigned long long)value, bits, field, (unsigned long long)last, what);
}

/* The micro-batch index of max, checked for overflow and against its field. */
static int batch_fits(const ufp4_stream_id *max) {
  const int bits = max->expert ? BATCH_BITS_EXPERTS : BATCH_BITS_DENSE;
  const uint64_t last = (UINT64_C(1) << bits) - 1, ms = micro_steps(max);
  if (max->micro >= ms)
    return ufp4_fail(UFP4_EINVAL, "stream: micro-batch %u is not below the %llu micro-batches of a step",
                     max->micro, (unsigned long long)ms);
  if (max->step <= (last - max->micro) / ms) return 0;
  return ufp4_fail(UFP4_EINVAL,
                   "stream: step %llu with %llu micro-batches per step does not fit the "
                   "stochastic-rounding stream's %d micro-batch bits%s; it would reuse the streams "
                   "of an earlier micro-batch%s",
                   (unsigned long long)max->step, (unsigned long long)ms, bits,
                   max->expert ? " left by the expert field" : "",
                   max->expert ? " of another expert" : "");
}

int ufp4_stream_check(const ufp4_stream_id *max) {
  if (!max) return ufp4_fail(UFP4_EINVAL, "stream: NULL id");
  int rc;
  if ((rc = fits("operand", max->operand, UFP4_STREAM_OPERAND_BITS, "another projection's bits")) ||
      (rc = fits("proj", max->proj, UFP4_STREAM_PROJ_BITS, "another layer's bits")) ||
      (rc = fits("layer", max->layer, UFP4_STREAM_LAYER_BITS, "another rank's bits")) ||
      (rc = fits("rank", max->rank, UFP4_STREAM_RANK_BITS,
                 "a lower rank's bits in a later micro-batch (rank 1024 draws rank 0's)")) ||
      (rc = fits("expert", max->expert, UFP4_STREAM_EXPERT_BITS, "a lower expert's bits")))
    return rc;
  return batch_fits(max);
}
