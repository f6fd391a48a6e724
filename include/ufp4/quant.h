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
 * Adaptive block scaling, Four Over Six (adaptive = UFP4_ADAPTIVE_4OVER6; Cook et al., arXiv
 * 2512.02010, docs/NUMERICS.md). E2M1 only, with FP32, NVFP4 or E8M0-RCEIL scales (ufp4_adaptive_check
 * says why not the others). Every block is quantized twice, by the scale rule above with its amax
 * mapped to 6 (g_max) and to 4 (the rule run with E2M1-max4's g_max = 4: FP32 s = amax / 4; NVFP4
 * d = E4M3_RNE_sat(amax * S_enc / 4); E8M0-RCEIL 2^ceil(log2(amax * (1/4)))); elements of both
 * are encoded on the full E2M1 grid with the same random bits. Candidate 4 is kept iff
 * err4 < err6 (a tie keeps 6, as the reference code's strict `<`), where err is, over the
 * block's elements in row-major order with e = y - x in fp32 (y the dequantized value, x the value
 * the quantizer saw, i.e. rotated when rht > 0), e*e (MSE), |e| (MAE) or |e| (MAXABS) accumulated
 * in fp32 into 8 partial sums, element i into sum i mod 8 (a max for MAXABS), combined as
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) (max for MAXABS). The chosen block's scale is
 * stored as usual: the choice is carried by the scale itself, not by a flag (dequantization is
 * code * scale either way). Blocks that are all-zero or hold NaN/Inf are stored as candidate 6.
 *   NVFP4 under 4/6: S_enc = 256 * g_max / amax_tensor instead of 448 * g_max / amax_tensor, so
 *   that the 4-candidate's E4M3 scale (up to 256 * 6/4 = 384) still fits under 448.
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

/* Adaptive block scaling (see above) and its selection metric. */
typedef enum { UFP4_ADAPTIVE_NONE = 0, UFP4_ADAPTIVE_4OVER6, UFP4_ADAPTIVE_COUNT } ufp4_adaptive;
typedef enum { UFP4_METRIC_MSE = 0, UFP4_METRIC_MAE, UFP4_METRIC_MAXABS, UFP4_METRIC_COUNT } ufp4_adaptive_metric;
/* 4/6's E4M3 image of the NVFP4 tensor amax (the reference code's E4M3_MAX_FOUROVERSIX). */
#define UFP4_4OVER6_E4M3_TOP 256.0f
/* "none", "4over6"; "mse", "mae", "maxabs". Parsers return 0 or UFP4_EINVAL with a message. */
const char *ufp4_adaptive_name(ufp4_adaptive a);
int ufp4_adaptive_parse(const char *name, ufp4_adaptive *out);
const char *ufp4_metric_name(ufp4_adaptive_metric m);
int ufp4_metric_parse(const char *name, ufp4_adaptive_metric *out);
/* Whether adaptive scaling a fits grid g and scale kind s: 0, or UFP4_EINVAL with a message
 * saying why (4/6 needs E2M1, and under E8M0 the RCEIL rule). */
int ufp4_adaptive_check(ufp4_adaptive a, ufp4_grid_id g, ufp4_scale_kind s);

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
  ufp4_adaptive adaptive; /* UFP4_ADAPTIVE_NONE (default) or 4/6 */
  ufp4_adaptive_metric metric; /* 4/6's selection error (default MSE) */
} ufp4_qformat;

/* Defaults: E2M1, RNE, FP32 scale, 1x16, no RHT, seed 0, stream 0, no adaptive scaling. */
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
  size_t blocks_four;  /* 4/6: blocks that kept the 4-candidate (a diagnostic; 0 otherwise) */
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

/* fake_quant of x's transpose, written back in x's layout: x is rows x cols, its blocks run down
 * the columns (block, scales, RHT and, under stochastic rounding, random-bit positions those of
 * the cols x rows transpose), and y (which may alias x) receives transpose(fake_quant(x^T)). The
 * same bits as transposing, ufp4_fake_quant and transposing back; with AVX2 the 1x16 formats
 * without tiles or 4/6, under round-to-nearest-even or SR, are quantized straight from x's
 * columns, no transposed copy made (tests/test_quant_cols.c). The operands a GEMM reduces along their rows use it. */
int ufp4_fake_quant_t(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols);
/* Its specification: transpose, ufp4_fake_quant_reference, transpose back. */
int ufp4_fake_quant_t_reference(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols);

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
