/* Internals shared by the scalar reference quantizer (block_quant.c) and its AVX2 version
 * (x86/quant_avx2.c). Not part of the public API.
 *
 * The scalar code is the specification; every SIMD routine must give the same bytes. Both paths
 * share block_scale() below, so a block's scale is computed by one piece of code only. */
#ifndef UFP4_QUANT_INTERNAL_H
#define UFP4_QUANT_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cpu.h"
#include "transforms/rht_internal.h"
#include "ufp4/quant.h"

typedef enum { BLK_ZERO, BLK_NAN, BLK_DIV, BLK_MUL } blk_mode;

typedef struct {
  blk_mode mode;
  float scale; /* dequantization factor */
  float enc;   /* encode factor for BLK_MUL */
  uint8_t bits;
} blk_scale;

typedef struct {
  const ufp4_qformat *f;
  const ufp4_grid *g;
  size_t rows, cols;
  float s_enc;
  float dec[16]; /* decoded value of every code */
  const float *x;
  uint8_t *codes;      /* may be NULL (fake quant) */
  float *scales;       /* may be NULL */
  uint8_t *scale_bits; /* may be NULL */
  float *y;            /* may be NULL (quantize only); may alias x */
  int simd;            /* 1: AVX2 kernels, 0: scalar reference only */
} ufp4_qjob;

/* Dequantized value, saturated to +-FLT_MAX (block_quant.c explains why). */
static inline float ufp4_q_dequant_value(float code_value, float scale) {
  float v = code_value * scale;
  if (isinf(v)) v = copysignf(FLT_MAX, v);
  return v;
}

/* The scale of a block from its amax and whether it holds a NaN/Inf (block_quant.c). */
blk_scale ufp4_q_block_scale(const ufp4_qjob *j, float amax, int bad);
/* The scalar reference for one block of h rows x w cols; src/rb are band-local with row stride
 * cols, starting at the block's first element; r0, c0 its global position; sidx its scale index. */
void ufp4_q_do_block(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t c0,
                     size_t h, size_t w, size_t sidx);

/* AVX2 kernels (quant_avx2.c); call only when ufp4_simd_enabled(). */
/* Quantizes the band of h rows starting at row r0 (band index bi). src is the band's first
 * element with row stride cols: the rotated copy, or, when fused_rht16, the raw input (the band
 * kernel then applies the 16-point RHT itself; needs block 16, no tiles, f->rht == 16). rb: the
 * band's random bits (row stride cols) or NULL. */
void ufp4_q_band_avx2(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t h,
                      size_t bi, int fused_rht16);
/* out[i] = ufp4_philox_u32(seed, stream, idx0 + i) for i < n. */
void ufp4_q_fill_rbits_avx2(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out);
/* Largest finite |p[i]| (0 if none), as the scalar `a <= FLT_MAX && a > m` loop gives. */
float ufp4_q_amax_finite_avx2(const float *p, size_t n);
/* The same over the RHT-16 rotation of p (n a multiple of 16; signs NULL = all +1). */
float ufp4_q_amax_finite_rht16_avx2(const float *p, size_t n, const float *signs);

#endif
