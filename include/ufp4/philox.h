/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
 * counter-based generator of Random123, cuRAND and Transformer Engine.
 *
 * ufp4 derives every random number from (seed, stream, index) alone, so a result never depends on
 * which thread computed which element or in what order:
 *   key     = { seed lo32, seed hi32 }
 *   counter = { (index/4) lo32, (index/4) hi32, stream lo32, stream hi32 }
 *   value   = output word (index % 4) of one Philox4x32-10 call. */
#ifndef UFP4_PHILOX_H
#define UFP4_PHILOX_H

#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* One Philox4x32-10 block: 10 rounds over `ctr` with key `key`. */
void ufp4_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* The 32 random bits for element `index` of stream `stream` under `seed`. */
uint32_t ufp4_philox_u32(uint64_t seed, uint64_t stream, uint64_t index);
/* Four consecutive values, elements 4*quad .. 4*quad+3, in one call. */
void ufp4_philox_quad(uint64_t seed, uint64_t stream, uint64_t quad, uint32_t out[4]);
/* Uniform in [0, 1) with 24 bits, and a standard normal (Box-Muller on two 32-bit draws), for
 * synthetic data. */
float ufp4_philox_uniform(uint64_t seed, uint64_t stream, uint64_t index);
float ufp4_philox_normal(uint64_t seed, uint64_t stream, uint64_t index);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
