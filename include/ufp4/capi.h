/* A flat C surface for foreign-function callers (Python's ctypes, python/ufp4/): only strings,
 * integers and arrays cross it, never a struct, so a binding does not have to mirror struct layouts
 * that may change. Each function is a thin wrapper over the library calls named in its comment.
 *
 * Every function returns 0 or a negative ufp4_status and, on failure, leaves the message in
 * ufp4_last_error() (error.h; thread-local, so read it on the calling thread). Arrays are
 * row-major float32 [rows][cols] with blocks along cols, as in quant.h; outputs are allocated by
 * the caller.
 *
 * A format spec names one quantizer format (ufp4_qformat) by the flags of `ufp4 quantize`, without
 * their dashes, comma-separated: "grid=e1m2,block=32,scale=e8m0-rceil,round=sr,rht=16,
 * rht-signs=nvidia,seed=7,stream=3" or "tile2d" (also "tile2d=1"; "tile2d=0" is off). Keys:
 *   grid=NAME       grid.h names (default e2m1)
 *   block=N         1xN blocks, a power of two in 1..4096 (default 16)
 *   tile2d[=0|1]    16x16 tiles instead of 1xN blocks
 *   scale=KIND      quant.h names (default fp32)
 *   round=MODE      rne (default), rna, rnz, sr, sr8
 *   rht=N           0 (default) or a power of two in 2..256 dividing cols; results stay rotated
 *   rht-signs=S     random (default: Philox from seed, rht.h) or nvidia (needs rht=16)
 *   seed=S, stream=N  u64 (decimal or 0x hex): stochastic rounding, and the random signs
 *   adaptive=A      none (default) or 4over6: Four Over Six (quant.h; E2M1 with fp32, nvfp4 or
 *                   e8m0-rceil scales)
 *   adaptive-metric=M  4/6's selection error: mse (default), mae, maxabs
 * A key given twice is refused, as is an unknown one. The empty string is the default format. The same values given as CLI flags quantize to the same
 * bits (tests/test_python_numpy.py checks it against `ufp4 quantize`). */
#ifndef UFP4_CAPI_H
#define UFP4_CAPI_H

#include <stddef.h>
#include <stdint.h>

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Checks spec against a rows x cols tensor (ufp4_qformat_check) and gives what encode stores:
 * n_scales scales of scale_bytes bytes each (4: fp32 dequantization factors, little-endian; 1: the
 * E4M3 or E8M0 codes) and packed_bytes bytes of codes. Any output may be NULL. */
int ufp4_capi_format_check(const char *spec, size_t rows, size_t cols, size_t *n_scales, size_t *scale_bytes,
                           size_t *packed_bytes);

/* y = dequantize(quantize(x)) (ufp4_fake_quant); y may alias x. */
int ufp4_capi_quantize(const char *spec, const float *x, float *y, size_t rows, size_t cols);

/* ufp4_quantize, stored the way `ufp4 quantize --packed` stores it after its header: `scales` gets
 * n_scales * scale_bytes bytes (see ufp4_capi_format_check), `packed` the codes two per byte
 * (ufp4_pack_codes), *tensor_scale NVFP4's S_enc (1 otherwise). */
int ufp4_capi_encode(const char *spec, const float *x, size_t rows, size_t cols, uint8_t *packed, uint8_t *scales,
                     float *tensor_scale);
/* The inverse of encode: value = decode(code) * scale, the scale being the fp32 factor, or
 * e4m3(byte) / tensor_scale (NVFP4), or 2^(byte - 127) (E8M0); a NaN scale code gives NaN. */
int ufp4_capi_decode(const char *spec, const uint8_t *packed, const uint8_t *scales, float tensor_scale,
                     size_t rows, size_t cols, float *y);

/* ufp4_measure_tensor into out[UFP4_CAPI_N_MEASURES], in this order: */
enum {
  UFP4_CAPI_M_ALPHA = 0,
  UFP4_CAPI_M_NMSE,
  UFP4_CAPI_M_SQNR_DB,
  UFP4_CAPI_M_SHRINK_BIAS,
  UFP4_CAPI_M_MEAN_REL_ERR,
  UFP4_CAPI_M_BUCKET_ENTROPY,
  UFP4_CAPI_M_B_EFF,
  UFP4_CAPI_M_UNDERFLOW,
  UFP4_CAPI_M_CLIPPED,
  UFP4_CAPI_M_N,
  UFP4_CAPI_M_N_NONFINITE,
  UFP4_CAPI_M_FOUR_SHARE, /* Four Over Six: share of blocks that kept the 4 candidate */
  UFP4_CAPI_M_SR_N,       /* stochastic rounding's unbiasedness test (measures.h, sr_*) */
  UFP4_CAPI_M_SR_BIAS,
  UFP4_CAPI_M_SR_Z_MAG,
  UFP4_CAPI_M_SR_Z_VAL,
  UFP4_CAPI_M_BUCKET_P,                             /* 8 entries: fraction of elements per magnitude index */
  UFP4_CAPI_M_BUCKET_BIAS = UFP4_CAPI_M_BUCKET_P + 8, /* 8 entries: mean rho - t per magnitude index */
  UFP4_CAPI_N_MEASURES = UFP4_CAPI_M_BUCKET_BIAS + 8
};
int ufp4_capi_measures(const char *spec, const float *x, size_t rows, size_t cols, double *out);
/* UFP4_CAPI_N_MEASURES of the library, which a binding checks against its own count before it
 * sizes out[] (a binding of another version would overflow it). */
int ufp4_capi_n_measures(void);

/* In place, x <- x S H on every rht-chunk of every row (ufp4_rht_rows), or its inverse, with the
 * spec's rht size and signs (rht must be > 0). */
int ufp4_capi_rht(const char *spec, float *x, size_t rows, size_t cols, int inverse);
/* The spec's rht sign vector into signs[0..*n), *n its rht size; signs has room for UFP4_RHT_MAX
 * (256) entries. */
int ufp4_capi_rht_signs(const char *spec, float *signs, int *n);

/* Grid `name`: its ascending magnitudes levels[0..*n_levels) and ufp4_bin_bias of each level in
 * bias[] (NaN for the zero and top bins); both arrays have room for 8. */
int ufp4_capi_grid(const char *name, float *levels, double *bias, int *n_levels);

/* The canonical spec of a recipe (ufp4_recipe_parse then ufp4_recipe_format) into buf. */
int ufp4_capi_recipe_canonical(const char *recipe, char *buf, size_t size);

/* The layer's stream (stream.h) as UFP4_CAPI_STREAM_FIELDS integers, in this order: seed, step,
 * micro, micro_steps, rank, layer, expert, proj. seed is also the seed of the recipe's random RHT
 * signs, as in ufp4_model_set_recipe. */
#define UFP4_CAPI_STREAM_FIELDS 8
/* Whether a layer of n rows, in inputs and out outputs can run the recipe's forward, and its
 * backward's Dgrad (need_dx) and Wgrad (need_dw): 0, or UFP4_EINVAL naming the GEMM whose RHT
 * does not divide the axis it rotates (Fprop: in, Dgrad: out, Wgrad: n), so that a caller can
 * refuse in the forward what would fail in the backward. */
int ufp4_capi_linear_check(const char *recipe, size_t n, size_t in, size_t out, int need_dx, int need_dw);
/* ufp4_linear_forward of the recipe: Y [n, out] = X [n, in] W [out, in]^T (Y overwritten). */
int ufp4_capi_linear_forward(const char *recipe, const uint64_t *stream, const float *X, const float *W, float *Y,
                             size_t n, size_t in, size_t out);
/* ufp4_linear_backward: dX [n, in] += dY W (skipped when dX is NULL) and dW [out, in] += dY^T X
 * (skipped when dW is NULL). Both calls fail, naming the GEMM and the axis, when an RHT of a GEMM
 * they run does not divide the axis it rotates. */
int ufp4_capi_linear_backward(const char *recipe, const uint64_t *stream, const float *dY, const float *X,
                              const float *W, float *dX, float *dW, size_t n, size_t in, size_t out);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
