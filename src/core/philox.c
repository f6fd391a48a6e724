/* Philox4x32-10 and the (seed, stream, index) mapping of include/ufp4/philox.h.
 *
 * A normal draw for `index` uses the two words 2*(index%2), 2*(index%2)+1 of the Philox block
 * whose counter holds index/2 (the block of stream elements 2*index and 2*index+1), so it shares
 * its random bits with those u32 elements; synthetic data uses separate streams. */
#include "ufp4/philox.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define TWO_PI 6.283185307179586476925286766559

void ufp4_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = (uint32_t)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void ufp4_philox_quad(uint64_t seed, uint64_t stream, uint64_t quad, uint32_t out[4]) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t ctr[4] = {(uint32_t)quad, (uint32_t)(quad >> 32), (uint32_t)stream,
                           (uint32_t)(stream >> 32)};
  ufp4_philox4x32_10(ctr, key, out);
}

uint32_t ufp4_philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t w[4];
  ufp4_philox_quad(seed, stream, index >> 2, w);
  return w[index & 3];
}

float ufp4_philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  /* 24 bits so that every value is an exact float and 1.0 is never reached. */
  return (float)(ufp4_philox_u32(seed, stream, index) >> 8) * 0x1p-24f;
}

float ufp4_philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t w[4];
  ufp4_philox_quad(seed, stream, index >> 1, w);
  int j = (int)(index & 1) * 2;
  /* u1 in (0, 1], so log(u1) is finite; u2 in [0, 1). */
  double u1 = ((double)w[j] + 1.0) * 0x1p-32;
  double u2 = (double)w[j + 1] * 0x1p-32;
  return (float)(sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2));
}
