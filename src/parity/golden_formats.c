/* The formats of the parity kit: every grid x scale x rounding x block x RHT x adaptive-scaling
 * combination that a recipe preset (linear/recipe.c) gives one of its operands, plus the E8M0
 * rules, nearest-tie rules and Four Over Six metrics and scales a spec string can select. `recipe` names the spec and operands that use each format;
 * tests/test_golden.c checks it against ufp4_recipe_operand_format, so the names cannot drift
 * from the recipes. */
#include "parity/golden_internal.h"

#include <stdio.h>

#include "ufp4/grid.h"
#include "ufp4/quant.h"

/* One seed and stream for every format: SR reads Philox(GOLDEN_SEED, GOLDEN_STREAM, r*cols + c),
 * and random RHT signs come from ufp4_rht_signs_random(GOLDEN_SEED). */
#define GOLDEN_SEED 2718u
#define GOLDEN_STREAM 3u

#define FA(name_, recipe_, grid_, scale_, block_, tile_, round_, rht_, signs_, adaptive_, metric_)     \
  {name_, recipe_,                                                                                 \
   {.grid = UFP4_GRID_##grid_, .round = UFP4_ROUND_##round_, .scale = UFP4_SCALE_##scale_,         \
    .block = block_, .tile2d = tile_, .rht = rht_, .rht_signs = NULL, .seed = GOLDEN_SEED,          \
    .stream = GOLDEN_STREAM, .adaptive = UFP4_ADAPTIVE_##adaptive_, .metric = UFP4_METRIC_##metric_}, \
   signs_}
#define F(name_, recipe_, grid_, scale_, block_, tile_, round_, rht_, signs_)                          \
  FA(name_, recipe_, grid_, scale_, block_, tile_, round_, rht_, signs_, NONE, MSE)
/* Four Over Six: the format of that name with adaptive=4over6 and the given selection metric. */
#define F46(name_, recipe_, scale_, block_, tile_, round_, rht_, signs_, metric_)                         \
  FA(name_, recipe_, E2M1, scale_, block_, tile_, round_, rht_, signs_, 4OVER6, metric_)

static const ufp4_golden_format formats[] = {
    F("e2m1-b16-fp32-rne", "e2m1: fprop.x fprop.w dgrad.w", E2M1, FP32, 16, 0, RNE, 0, 0),
    F("e2m1-b16-fp32-rna", "e2m1,round=rna: fprop.x fprop.w dgrad.w", E2M1, FP32, 16, 0, RNA, 0, 0),
    F("e2m1-b16-fp32-rnz", "e2m1,round=rnz: fprop.x fprop.w dgrad.w", E2M1, FP32, 16, 0, RNZ, 0, 0),
    F("e2m1-b16-fp32-rne-rht16", "e2m1: wgrad.x", E2M1, FP32, 16, 0, RNE, 16, 1),
    F("e2m1-b16-fp32-sr", "e2m1: dgrad.dy", E2M1, FP32, 16, 0, SR, 0, 0),
    F("e2m1-b16-fp32-sr-rht16", "e2m1: wgrad.dy", E2M1, FP32, 16, 0, SR, 16, 1),
    F("e2m1-b16-fp32-sr8", "e2m1,sr_bits=8: dgrad.dy", E2M1, FP32, 16, 0, SR8, 0, 0),
    F("e1m2-b16-fp32-rne", "ufp4,rht=none: fprop.x fprop.w dgrad.w wgrad.x", E1M2, FP32, 16, 0, RNE, 0, 0),
    F("e1m2-b16-fp32-rne-rht16", "ufp4: fprop.x fprop.w dgrad.w wgrad.x", E1M2, FP32, 16, 0, RNE, 16, 1),
    F("e1m2-b16-fp32-sr-rht16", "ufp4: dgrad.dy wgrad.dy", E1M2, FP32, 16, 0, SR, 16, 1),
    F("int4-b16-fp32-rne", "e2m1,grid=int4: fprop.x fprop.w dgrad.w", INT4, FP32, 16, 0, RNE, 0, 0),
    F("int4-b16-fp32-rne-rht16", "ufp4,grid=int4: fprop.x fprop.w dgrad.w wgrad.x", INT4, FP32, 16, 0, RNE,
      16, 1),
    F("nvfp4-b16-rne", "nvfp4: fprop.x", E2M1, NVFP4, 16, 0, RNE, 0, 0),
    F("nvfp4-t16-rne", "nvfp4: fprop.w dgrad.w", E2M1, NVFP4, 16, 16, RNE, 0, 0),
    F("nvfp4-b16-sr", "nvfp4: dgrad.dy", E2M1, NVFP4, 16, 0, SR, 0, 0),
    F("nvfp4-b16-rne-rht16nv", "nvfp4: wgrad.x", E2M1, NVFP4, 16, 0, RNE, 16, 2),
    F("nvfp4-b16-sr-rht16nv", "nvfp4: wgrad.dy", E2M1, NVFP4, 16, 0, SR, 16, 2),
    F("mxfp4-b32-floor-rne", "mxfp4: fprop.x fprop.w", E2M1, E8M0_FLOOR, 32, 0, RNE, 0, 0),
    F("mxfp4-b32-ceil-rne", "mxfp4,scale=e8m0-ceil: fprop.x fprop.w", E2M1, E8M0_CEIL, 32, 0, RNE, 0, 0),
    F("mxfp4-b32-even-rne", "mxfp4,scale=e8m0-even: fprop.x fprop.w", E2M1, E8M0_EVEN, 32, 0, RNE, 0, 0),
    F("mxfp4-b32-rceil-rne", "mxfp4,scale=e8m0-rceil: fprop.x fprop.w", E2M1, E8M0_RCEIL, 32, 0, RNE, 0, 0),
    F("mxfp4-b32-floor-sr-rht64", "mxfp4: dgrad.dy dgrad.w wgrad.dy wgrad.x", E2M1, E8M0_FLOOR, 32, 0, SR, 64,
      1),
    F46("e2m1-b16-fp32-rne-4over6", "e2m1-4over6: fprop.x fprop.w dgrad.w", FP32, 16, 0, RNE, 0, 0, MSE),
    F46("e2m1-b16-fp32-rne-rht16-4over6", "e2m1-4over6: wgrad.x", FP32, 16, 0, RNE, 16, 1, MSE),
    F46("e2m1-b16-fp32-sr-4over6", "e2m1-4over6: dgrad.dy", FP32, 16, 0, SR, 0, 0, MSE),
    F46("e2m1-b16-fp32-sr-rht16-4over6", "e2m1-4over6: wgrad.dy", FP32, 16, 0, SR, 16, 1, MSE),
    F46("e2m1-b16-fp32-rne-4over6-mae", "e2m1-4over6,adaptive_metric=mae: fprop.x fprop.w dgrad.w", FP32, 16, 0,
        RNE, 0, 0, MAE),
    F46("e2m1-b16-fp32-rne-4over6-maxabs", "e2m1-4over6,adaptive_metric=maxabs: fprop.x fprop.w dgrad.w", FP32,
        16, 0, RNE, 0, 0, MAXABS),
    F46("nvfp4-b16-rne-4over6", "nvfp4-4over6: fprop.x", NVFP4, 16, 0, RNE, 0, 0, MSE),
    F46("nvfp4-t16-rne-4over6", "nvfp4-4over6: fprop.w dgrad.w", NVFP4, 16, 16, RNE, 0, 0, MSE),
    F46("nvfp4-b16-sr-4over6", "nvfp4-4over6: dgrad.dy", NVFP4, 16, 0, SR, 0, 0, MSE),
    F46("nvfp4-b16-rne-rht16nv-4over6", "nvfp4-4over6: wgrad.x", NVFP4, 16, 0, RNE, 16, 2, MSE),
    F46("nvfp4-b16-sr-rht16nv-4over6", "nvfp4-4over6: wgrad.dy", NVFP4, 16, 0, SR, 16, 2, MSE),
    F46("mxfp4-b32-rceil-rne-4over6", "mxfp4,scale=e8m0-rceil,adaptive=4over6: fprop.x fprop.w", E8M0_RCEIL, 32, 0,
        RNE, 0, 0, MSE),
    F46("mxfp4-b32-rceil-sr-rht64-4over6", "mxfp4,scale=e8m0-rceil,adaptive=4over6: dgrad.dy dgrad.w wgrad.dy wgrad.x",
        E8M0_RCEIL, 32, 0, SR, 64, 1, MSE),
};
#undef F46
#undef F
#undef FA

const ufp4_golden_format *ufp4_golden_formats(size_t *n) {
  if (n) *n = sizeof formats / sizeof formats[0];
  return formats;
}

const char *golden_signs_name(int kind) {
  static const char *const names[] = {"none", "random", "nvidia"};
  return kind >= 0 && kind <= 2 ? names[kind] : "unknown";
}

void golden_quantize_args(const ufp4_golden_format *gf, char *buf, size_t size) {
  const ufp4_qformat *f = &gf->fmt;
  char blk[32];
  if (f->tile2d)
    snprintf(blk, sizeof blk, "--tile2d");
  else
    snprintf(blk, sizeof blk, "--block %d", f->block);
  char ada[64] = "";
  if (f->adaptive != UFP4_ADAPTIVE_NONE)
    snprintf(ada, sizeof ada, " --adaptive %s --adaptive-metric %s", ufp4_adaptive_name(f->adaptive),
             ufp4_metric_name(f->metric));
  snprintf(buf, size, "--grid %s %s --scale %s --round %s --rht %d%s%s%s --seed %llu --stream %llu",
           ufp4_grid_get(f->grid)->name, blk, ufp4_scale_name(f->scale), ufp4_round_name(f->round), f->rht,
           gf->rht_signs ? " --rht-signs " : "", gf->rht_signs ? golden_signs_name(gf->rht_signs) : "", ada,
           (unsigned long long)f->seed, (unsigned long long)f->stream);
}
