/* Block-scaled 4-bit quantization: the scalar reference that is the specification.
 *
 * Tensors are row-major [rows][cols] float32, and blocks run along cols, which is the reduction
 * dimension of the GEMM the tensor feeds (quantize a transposed copy to block the other way).
 *
 * Blocks
 *   1xN: N consecutive elements of one row (N a power of two, 1..4096). A row whose length is not
 *        a multiple of N ends in a shorter block, scaled on its own.
 *   2D:  16x16 tiles (NVIDIA's weight recipe); one scale per tile, shorter tiles at the edges.
 *
 * Scales (s = the factor that multiplies a code's value to dequantize)
 *   FP32    s = amax_block / g_max in fp32; elements are t = x / s (the paper's Table 1).
 *   NVFP4   E4M3 block scale plus an FP32 tensor scale, NVIDIA's algorithm (docs/NUMERICS.md):
 *             S_enc = 448 * g_max / amax_tensor (1 if amax_tensor is 0 or S_enc is not finite)
 *             d     = E4M3_RNE_sat(amax_block * S_enc / g_max)
 *             t     = x * (1 / (float(d) / S_enc));   value = code * float(d) / S_enc
 *           tensor_scale stores S_enc. amax_tensor is over the whole tensor.
 *   E8M0    s = 2^(code - 127) by one of the four MX rules (minifloat.h); t = x * (1/s), exact.
 *
 * Special values (each tested)
 *   all-zero block  every code is +0, scale is 0 (FP32), d = 0 (NVFP4) or the rule's code for
 *                   amax = 0 (E8M0); dequantizes to exact zeros.
 *   denormals       quantized like any value, no flush to zero. If s underflows to 0 while
 *                   amax > 0 (FP32: amax < g_max * 2^-149) the block is stored as all-zero, and
 *                   ufp4_measure_tensor counts its non-zero inputs as underflow. NVFP4: when
 *                   d/S_enc is so small that its reciprocal overflows, t = x / (d/S_enc).
 *   huge values     finite values up to FLT_MAX never overflow: s is computed from amax, and
 *                   t saturates at g_max. A dequantized value that would exceed fp32 (E8M0
 *                   CEIL/EVEN/RCEIL on blocks with amax near 2^128) saturates to +-FLT_MAX.
 *   NaN / Inf       a block holding any NaN or Inf gets a NaN scale (FP32 NaN, E4M3 0x7F, E8M0
 *                   0xFF) and all-zero codes, so it dequantizes to NaN everywhere: the fault
 *                   surfaces instead of being clipped away. For NVFP4, non-finite elements are
 *                   left out of amax_tensor so that the other blocks keep a valid S_enc.
 *
 * Stochastic rounding reads ufp4_philox_u32(seed, stream, r * cols + c) for element (r, c), so
 * the bits are the same whatever the thread count or the block layout.
 *
 * Optional RHT (rht > 0): each row is first rotated in chunks of `rht` by x <- x S H (rht.h), and
 * the quantized result stays in the rotated basis; apply the same rotation to the other GEMM
 * operand (or ufp4_rht_rows_inverse to the result) to use it. */
#ifndef UFP4_QUANT_H
#define UFP4_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/grid.h"
#include "ufp4/minifloat.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_SCALE_FP32 = 0,
  UFP4_SCALE_NVFP4,       /* E4M3 block scale + FP32 tensor scale */
  UFP4_SCALE_E8M0_FLOOR,
  UFP4_SCALE_E8M0_CEIL,
  UFP4_SCALE_E8M0_EVEN,
  UFP4_SCALE_E8M0_RCEIL,
  UFP4_SCALE_COUNT
} ufp4_scale_kind;

/* "fp32", "nvfp4" (alias "e4m3"), "e8m0-floor" (alias "e8m0"), "e8m0-ceil", "e8m0-even",
 * "e8m0-rceil" */
const char *ufp4_scale_name(ufp4_scale_kind k);
int ufp4_scale_parse(const char *name, ufp4_scale_kind *out);
static inline int ufp4_scale_is_e8m0(ufp4_scale_kind k) {
  return k >= UFP4_SCALE_E8M0_FLOOR && k <= UFP4_SCALE_E8M0_RCEIL;
}

typedef struct {
  ufp4_grid_id grid;
  ufp4_round_mode round;
  ufp4_scale_kind scale;
  int block;              /* N of 1xN blocks; ignored when tile2d */
  int tile2d;             /* 0, or 16 for 16x16 tiles */
  int rht;                /* 0 (off) or the RHT block size, a power of two 2..256 */
  const float *rht_signs; /* rht entries of +-1; NULL means all +1 (plain Hadamard) */
  uint64_t seed;          /* stochastic rounding */
  uint64_t stream;
} ufp4_qformat;

/* Defaults: E2M1, RNE, FP32 scale, 1x16, no RHT, seed 0, stream 0. */
ufp4_qformat ufp4_qformat_default(void);
/* Checks the combination; returns 0 or UFP4_EINVAL with a message. */
int ufp4_qformat_check(const ufp4_qformat *f, size_t rows, size_t cols);

/* Number of scales for a rows x cols tensor: rows * ceil(cols/N), or
 * ceil(rows/16) * ceil(cols/16) for 2D tiles (row-major over blocks). */
size_t ufp4_scale_count(const ufp4_qformat *f, size_t rows, size_t cols);

typedef struct {
  size_t rows, cols;
  ufp4_qformat fmt;    /* rht_signs is not owned and may dangle after quantize returns */
  uint8_t *codes;      /* unpacked, one 4-bit code per byte, rows*cols */
  float *scales;       /* ufp4_scale_count() dequantization factors as float (all kinds) */
  uint8_t *scale_bits; /* the stored 8-bit scale codes (E4M3 / E8M0), NULL for FP32 */
  float tensor_scale;  /* S_enc for NVFP4, 1 otherwise */
} ufp4_qtensor;

/* Quantizes x into q (allocating its arrays; free with ufp4_qtensor_free). */
int ufp4_quantize(const ufp4_qformat *f, const float *x, size_t rows, size_t cols, ufp4_qtensor *q);
void ufp4_qtensor_free(ufp4_qtensor *q);
/* y[r*cols + c] = decode(code) * scale (NVFP4: scale = d / S_enc); NaN scale gives NaN. */
void ufp4_dequantize(const ufp4_qtensor *q, float *y);
/* Quantize then dequantize into y (may alias x), without keeping codes: the training path. */
int ufp4_fake_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols);

/* The scalar reference implementation of the two functions above (the specification). On CPUs
 * with AVX2 and FMA, ufp4_quantize and ufp4_fake_quant run vectorized kernels that give the same
 * bytes (tests/test_quant_simd.c checks it); setting the environment variable UFP4_NO_SIMD=1
 * makes them run this scalar path instead. */
int ufp4_quantize_reference(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                            ufp4_qtensor *q);
int ufp4_fake_quant_reference(const ufp4_qformat *f, const float *x, float *y, size_t rows,
                              size_t cols);

/* Packed storage: two codes per byte, element 2i in the low nibble and 2i+1 in the high nibble
 * (the OCP MX and NVIDIA FP4x2 order). An odd count leaves the last high nibble 0. */
size_t ufp4_packed_bytes(size_t n_codes);
void ufp4_pack_codes(const uint8_t *codes, size_t n, uint8_t *packed);
void ufp4_unpack_codes(const uint8_t *packed, size_t n, uint8_t *codes);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
