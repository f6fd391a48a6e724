/* Training recipes: how each of a linear layer's three GEMMs treats its two operands.
 *
 * A linear layer with X [tokens, in], W [out, in] and dY [tokens, out] runs
 *   Fprop  Y  = X  W^T   reduction over in      operands (A, B) = (X,  W)
 *   Dgrad  dX = dY W     reduction over out     operands (A, B) = (dY, W)
 *   Wgrad  dW = dY^T X   reduction over tokens  operands (A, B) = (dY, X)
 * and every operand is quantized along its GEMM's reduction dimension (docs/NUMERICS.md).
 *
 * Named presets (the papers' definitions):
 *   fp32   no quantization
 *   bf16   operands rounded to bfloat16 (RNE), fp32 accumulation: the paper's baseline
 *   e2m1   the paper's E2M1 reference: E2M1, 1x16 FP32 scales, RHT16 on Wgrad, SR on dY
 *   ufp4   the paper's UFP4: E1M2, 1x16 FP32 scales, RHT16 on all three GEMMs, SR on dY
 *   nvfp4  NVIDIA: E2M1, 1x16 E4M3 + FP32 tensor scale, 16x16 weight tiles, RHT16 on Wgrad
 *          with NVIDIA's fixed signs, SR on the gradient operands (dY)
 *   mxfp4  Tseng et al.: E2M1, 1x32 E8M0 (floor), RHT64 on the backward GEMMs, SR on every
 *          backward operand with the 3/4 prescale that keeps SR from clipping
 *   e2m1-4over6, nvfp4-4over6
 *          e2m1 / nvfp4 with Four Over Six (Cook et al.) on every quantized operand:
 *          adaptive=4over6, adaptive_metric=mse (quant.h; the reference code's training configs
 *          use one rule for all operands, SR gradients included)
 * A spec string is a preset followed by comma-separated key=value overrides, for example
 * "ufp4,rht=wgrad" or "e2m1,block=32,scale=e8m0-rceil". Keys:
 *   grid=e2m1|e1m2|int4|e2m1-max2|...   scale=fp32|nvfp4|e8m0-floor|...   block=N
 *   round=rne|rna|rnz                    (the rounding of operands not under SR)
 *   sr=none|all|dy|OPERANDS              OPERANDS: '+'-joined fprop.x fprop.w dgrad.dy dgrad.w
 *                                        wgrad.dy wgrad.x (dy = dgrad.dy+wgrad.dy)
 *   sr_bits=32|8                         exact SR or the 8-bit hardware variant
 *   sr_prescale=F                        operands under SR are multiplied by F before quantizing
 *                                        and divided after (mxfp4 uses 0.75)
 *   rht=none|all|GEMMS                   GEMMS: '+'-joined fprop, dgrad, wgrad
 *   rht_n=N                              RHT block size (power of two, 2..256)
 *   rht_signs=random|nvidia              random: drawn once from the run seed, shared by all
 *                                        layers and steps (the paper does not say how often
 *                                        UFP4 redraws; NVIDIA uses one fixed vector)
 *   tile2d=0|1                           16x16 weight tiles (W operands only)
 *   keep_first=N, keep_last=N            transformer blocks kept in high precision (fp32): sugar
 *                                        for per-projection overrides to fp32 of those blocks
 *                                        (model.h's ufp4_model_resolve_recipes), applied first
 *   fprop=P, dgrad=P, wgrad=P            P = fp32|bf16|fp4|recipe: that one GEMM's precision (both
 *                                        its operands); fp4 is the 4-bit format the other keys
 *                                        describe, recipe (the default) the preset's precision.
 *                                        "ufp4,fprop=bf16" quantizes only the backward GEMMs.
 *   adaptive=none|4over6                 Four Over Six block scaling (E2M1 with fp32, nvfp4 or
 *                                        e8m0-rceil scales; quant.h)
 *   adaptive_metric=mse|mae|maxabs       4/6's selection error
 * The canonical spec names adaptive= and adaptive_metric= only when they differ from plain
 * (none, mse) or from the preset, and the per-GEMM keys only when set, so the specs of the recipes
 * that existed before them stay as they were.
 * A partial spec (ufp4_recipe_apply) is the same list of key=value pairs without the preset: it
 * changes only the keys it names, on top of a recipe. */
#ifndef UFP4_RECIPE_H
#define UFP4_RECIPE_H

#include <stddef.h>
#include "ufp4/grid.h"
#include "ufp4/quant.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum { UFP4_FPROP = 0, UFP4_DGRAD, UFP4_WGRAD, UFP4_N_GEMMS } ufp4_gemm_kind;

/* Operand slots: UFP4_OPERANDS_PER_GEMM per GEMM, in the (A, B) order of the table above. */
#define UFP4_OPERANDS_PER_GEMM 2
typedef enum {
  UFP4_OP_FPROP_X = 0,
  UFP4_OP_FPROP_W,
  UFP4_OP_DGRAD_DY,
  UFP4_OP_DGRAD_W,
  UFP4_OP_WGRAD_DY,
  UFP4_OP_WGRAD_X,
  UFP4_N_OPERANDS
} ufp4_operand;

typedef enum {
  UFP4_PREC_FP32 = 0, /* operands used as they are */
  UFP4_PREC_BF16,     /* operands rounded to bfloat16 */
  UFP4_PREC_FP4,      /* operands block-quantized to 4 bits */
} ufp4_precision;

typedef enum { UFP4_SIGNS_RANDOM = 0, UFP4_SIGNS_NVIDIA } ufp4_sign_kind;

#define UFP4_RECIPE_NAME_MAX 32

typedef struct {
  char name[UFP4_RECIPE_NAME_MAX]; /* the preset it started from */
  ufp4_precision precision;
  ufp4_grid_id grid;
  ufp4_scale_kind scale;
  int block;
  ufp4_round_mode round;       /* nearest rule for operands not under SR */
  unsigned sr_mask;            /* bit (1 << ufp4_operand) set: that operand uses SR */
  int sr_bits;                 /* 32 (exact) or 8 */
  float sr_prescale;           /* 1 = none */
  unsigned rht_mask;           /* bit (1 << ufp4_gemm_kind) set: both operands of that GEMM rotated */
  int rht_n;
  ufp4_sign_kind rht_signs;
  int tile2d;                  /* 1: W operands use 16x16 tiles */
  int keep_first, keep_last;   /* blocks kept in fp32 */
  /* Per GEMM: 0 = `precision`, otherwise that GEMM's own precision + 1 (so that a zeroed recipe
   * means "as the preset"); read it through ufp4_recipe_gemm_precision. */
  unsigned char gemm_precision[UFP4_N_GEMMS];
  ufp4_adaptive adaptive;      /* 4/6 on every quantized operand */
  ufp4_adaptive_metric metric; /* its selection error */
} ufp4_recipe;

/* Parses a spec string into r; on error returns UFP4_EINVAL and ufp4_last_error() says which key
 * or value is wrong. */
int ufp4_recipe_parse(const char *spec, ufp4_recipe *r);
/* Applies spec on top of r: a full spec (starting with a preset) replaces r as ufp4_recipe_parse
 * does; a partial one ("rht=none,fprop=bf16") changes only the keys it names. On error r is left
 * unchanged. */
int ufp4_recipe_apply(const char *spec, ufp4_recipe *r);
/* The precision GEMM g runs in under r (its fprop=/dgrad=/wgrad= key, else r->precision). */
ufp4_precision ufp4_recipe_gemm_precision(const ufp4_recipe *r, ufp4_gemm_kind g);
/* 1 when some GEMM of r runs 4-bit operands. */
int ufp4_recipe_quantizes(const ufp4_recipe *r);
/* The first GEMM of r among gemm_mask (bit 1u << ufp4_gemm_kind) that runs in 4 bits under an RHT
 * that does not divide the axis it rotates in a linear layer of `tokens` rows, `in` inputs and
 * `out` outputs: Fprop's along the inputs, Dgrad's along the outputs, Wgrad's along the tokens.
 * Returns that GEMM, with the axis's length in *axis, or -1 when every RHT fits. */
int ufp4_recipe_rht_misfit(const ufp4_recipe *r, unsigned gemm_mask, size_t tokens, size_t in, size_t out,
                           size_t *axis);
/* "its inputs", "its outputs", "the tokens": the axis GEMM g's RHT rotates along. */
const char *ufp4_recipe_rht_axis_name(ufp4_gemm_kind g);
/* The canonical, fully resolved spec ("ufp4,grid=e1m2,scale=fp32,...") that parses back to r. */
void ufp4_recipe_format(const ufp4_recipe *r, char *buf, size_t size);
/* Names of the presets, NULL-terminated. */
extern const char *const ufp4_recipe_presets[];
const char *ufp4_operand_name(ufp4_operand op);  /* "fprop.x", ... */
const char *ufp4_gemm_name(ufp4_gemm_kind g);    /* "fprop", "dgrad", "wgrad" */
/* The GEMM whose operand slot op is (UFP4_OP_WGRAD_X -> UFP4_WGRAD). */
ufp4_gemm_kind ufp4_operand_gemm(ufp4_operand op);
/* The quantizer format an operand gets under r (grid, scale, block, tile2d for W operands,
 * rounding and rht; seed, stream and rht_signs are left for the caller). */
ufp4_qformat ufp4_recipe_operand_format(const ufp4_recipe *r, ufp4_operand op);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
