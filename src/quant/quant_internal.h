/* Internals shared by the scalar reference quantizer (block_quant.c), its AVX2 version
 * (x86/quant_avx2.c) and the file that picks between them (dispatch.c). Not part of the public
 * API.
 *
 * The scalar code is the specification; every SIMD routine must give the same bytes. Both paths
 * share ufp4_q_block_scale() below, with one exception: the AVX2 1x16 kernel computes the NVFP4
 * and E8M0 scales of 8 blocks at once on their bit patterns (scales_mx in x86/quant_avx2.c), as
 * calling the scalar rule per block made it about 2x slower. That second implementation is held
 * to the first by enumeration: tests/test_quant_scales_enum.c runs both on every amax of a dense
 * sweep of the float range (all mantissas of every exponent where a scale rule changes, a fixed
 * stride elsewhere) for every scale kind and grid, and test_quant_simd on whole tensors. */
#ifndef UFP4_QUANT_INTERNAL_H
#define UFP4_QUANT_INTERNAL_H

/* Elements per band of 1-D blocks (block_quant.c's run_job): bands hold whole rows, one row when a
 * row alone holds this many. */
#define UFP4_Q_BAND_ELEMS 2048

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

typedef struct ufp4_q_kernels ufp4_q_kernels;
/* Fills out[i] with the 32 random bits of element idx0 + i, i < n. */
typedef void (*ufp4_q_fill_rbits_fn)(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out);

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
  const ufp4_q_kernels *k; /* the kernel family running the job */
  const ufp4_grid *g4;     /* 4/6: the grid whose g_max (4) the 4-candidate's scale rule uses;
                              NULL without adaptive scaling */
  uint8_t *four;           /* 4/6: per scale index, 1 when the block kept the 4-candidate; may
                              be NULL */
} ufp4_qjob;

/* The steps of a quantization that a kernel family implements. Each must give the bytes of the
 * scalar reference's step (block_quant.c); the job's order of steps is the reference's. */
struct ufp4_q_kernels {
  /* Largest finite |p[i]| of n floats (0 if none). */
  float (*amax_finite)(const float *p, size_t n);
  /* The same over the RHT-16 rotation of p (n a multiple of 16; signs NULL = all +1); NULL when
   * the family rotates a copy and calls amax_finite. */
  float (*amax_finite_rht16)(const float *p, size_t n, const float *signs);
  /* out[i] = ufp4_philox_u32(seed, stream, idx0 + i) for i < n. */
  ufp4_q_fill_rbits_fn fill_rbits;
  /* Quantizes the band of h rows starting at row r0 (band index bi). src is the band's first
   * element with row stride cols: the rotated copy, or, when fused_rht16, the raw input (the
   * kernel then applies the 16-point RHT itself). rb: the band's random bits (row stride cols)
   * or NULL. With 2D tiles a band is one row of tiles (h = tile2d rows but the last); with 1-D
   * blocks it is h whole rows of blocks, row r0 + i's blocks having scale indices
   * (r0 + i) * blocks_per_row + b. */
  void (*band)(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t h,
               size_t bi, int fused_rht16);
  /* 1 when band can fuse the 16-point RHT of 1x16 blocks without tiles. */
  int fuses_rht16;
  /* ufp4_fake_quant_t without a transposed copy (NULL: the copy): quantizes the 8 columns of x
   * (row stride ld, `rows` rows, a multiple of 16) as 8 rows of 1x16 blocks of the transpose,
   * into y (same layout); rb: column b's random bits at rb + b * rows, or NULL. The 16-point RHT
   * is fused when fused_rht16. Fake quantization only: no codes, scales or 4/6. */
  void (*cols_band)(const ufp4_qjob *j, const float *x, size_t ld, size_t rows, const uint32_t *rb,
                    float *y, int fused_rht16);
  /* The rounding modes cols_band takes, as a bit mask (1 << mode); others use the copy. */
  unsigned cols_rounds;
  /* amax_finite_rht16 over the columns' blocks: 8 columns of x, `rows` rows (a multiple of 16). */
  float (*amax_cols_rht16)(const float *x, size_t ld, size_t rows, const float *signs);
  /* The kernel choice handed to the RHT (ufp4_rht_rows_serial's simd). */
  int rht_simd;
};

/* The scalar reference family (block_quant.c) and the one dispatch.c picks for this process. */
extern const ufp4_q_kernels ufp4_q_reference_kernels;
const ufp4_q_kernels *ufp4_q_kernels_pick(void);
/* FOR TESTS ONLY, never a user option: from now on ufp4_quantize and ufp4_fake_quant draw their
 * stochastic-rounding bits from `fill` instead of Philox (NULL restores Philox). It exists so that
 * the tests of the health guards (tests/test_guard.c) can run a broken SR stream -- one that
 * always rounds down, say -- through the real quantizer. Not thread-safe: set it while no
 * quantization runs. Costs one branch per quantize call when unset. */
void ufp4_q_test_set_rbits_hook(ufp4_q_fill_rbits_fn fill);
/* ufp4_quantize / ufp4_fake_quant run by the kernel family k (block_quant.c). */
int ufp4_q_quantize(const ufp4_qformat *f, const float *x, size_t rows, size_t cols, ufp4_qtensor *q,
                    const ufp4_q_kernels *k);
int ufp4_q_fake_quant_t(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols,
                        const ufp4_q_kernels *k);
int ufp4_q_fake_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols,
                      const ufp4_q_kernels *k);

/* Dequantized value, saturated to +-FLT_MAX (block_quant.c explains why). */
static inline float ufp4_q_dequant_value(float code_value, float scale) {
  float v = code_value * scale;
  if (isinf(v)) v = copysignf(FLT_MAX, v);
  return v;
}

/* The scale of a block from its amax and whether it holds a NaN/Inf (block_quant.c). */
blk_scale ufp4_q_block_scale(const ufp4_qjob *j, float amax, int bad);
/* The same rule with amax mapped to gt->g_max instead of j->g's (4/6's 4-candidate: gt = j->g4). */
blk_scale ufp4_q_block_scale_to(const ufp4_qjob *j, float amax, int bad, const ufp4_grid *gt);

/* 4/6's error (quant.h): the term of one element's error e = y - x, and the combination of the 8
 * partial sums, shared by the scalar reference and the AVX2 kernel so that the order is one. */
static inline float ufp4_q_err_term(float e, ufp4_adaptive_metric m) {
  return m == UFP4_METRIC_MSE ? e * e : fabsf(e);
}
static inline float ufp4_q_err_add(float acc, float v, ufp4_adaptive_metric m) {
  return m == UFP4_METRIC_MAXABS ? (v > acc ? v : acc) : acc + v;
}
static inline float ufp4_q_err_reduce(const float l[8], ufp4_adaptive_metric m) {
  float a = ufp4_q_err_add(l[0], l[1], m), b = ufp4_q_err_add(l[2], l[3], m);
  float c = ufp4_q_err_add(l[4], l[5], m), d = ufp4_q_err_add(l[6], l[7], m);
  return ufp4_q_err_add(ufp4_q_err_add(a, b, m), ufp4_q_err_add(c, d, m), m);
}
/* Whether a block with the ordinary scale s6 may try the 4-candidate s4 (both ordinary). */
static inline int ufp4_q_adaptive_applies(const ufp4_qjob *j, blk_scale s6, blk_scale s4) {
  return j->g4 && (s6.mode == BLK_DIV || s6.mode == BLK_MUL) && (s4.mode == BLK_DIV || s4.mode == BLK_MUL);
}
/* The scalar reference for one block of h rows x w cols; src/rb are band-local with row stride
 * cols, starting at the block's first element; r0, c0 its global position; sidx its scale index. */
void ufp4_q_do_block(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t c0,
                     size_t h, size_t w, size_t sidx);

#ifdef UFP4_HAVE_X86
/* AVX2 kernels (x86/quant_avx2.c), the members of dispatch.c's AVX2 family; they may run only
 * when ufp4_simd_enabled(). Contracts: those of ufp4_q_kernels. */
void ufp4_q_band_avx2(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t h,
                      size_t bi, int fused_rht16);
void ufp4_q_fill_rbits_avx2(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out);
float ufp4_q_amax_finite_avx2(const float *p, size_t n);
float ufp4_q_amax_finite_rht16_avx2(const float *p, size_t n, const float *signs);
void ufp4_q_cols_band_avx2(const ufp4_qjob *j, const float *x, size_t ld, size_t rows, const uint32_t *rb,
                           float *y, int fused_rht16);
float ufp4_q_amax_cols_rht16_avx2(const float *x, size_t ld, size_t rows, const float *signs);
/* The NVFP4 / E8M0 scales of 8 finite blocks from their amax by the AVX2 rule (scales_mx), for
 * tests: scale, encode factor and stored bits per block; returns 1 when every block is an ordinary
 * multiply-encoded block, 0 when the kernel would hand the group to the scalar route. */
int ufp4_q_scales8_avx2(const ufp4_qjob *j, const float amax[8], float sc[8], float en[8],
                        uint8_t bits[8]);
#endif

#endif
