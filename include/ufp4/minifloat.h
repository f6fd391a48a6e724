/* Scalar conversions for the scale and baseline formats: E4M3 (NVFP4 block scale), E8M0 (MX
 * shared exponent), bfloat16 and IEEE binary16 (safetensors F16). One function per conversion,
 * each tested exhaustively. */
#ifndef UFP4_MINIFLOAT_H
#define UFP4_MINIFLOAT_H

#include <stdint.h>
#include "ufp4/grid.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* OCP FP8 E4M3 ("e4m3fn"): bias 7, max 448, no Inf, NaN = S.1111.111. Round to nearest even,
 * saturating finite overflow to +-448 (cvt.rn.satfinite); NaN -> 0x7F. */
uint8_t ufp4_f32_to_e4m3(float x);
float ufp4_e4m3_to_f32(uint8_t code);
/* The largest finite E4M3 value, ufp4_e4m3_to_f32(0x7E). */
#define UFP4_E4M3_MAX 448.0f

/* bfloat16 by round to nearest even on the top 16 bits; NaN stays a (quiet) NaN. */
float ufp4_round_bf16(float x);
uint16_t ufp4_f32_to_bf16_bits(float x);

/* IEEE 754 binary16 by round to nearest even, with subnormals, overflow to +-Inf (from 65520 =
 * 65504 + half an ulp up) and NaN kept quiet with its top payload bits; decoding is exact. */
uint16_t ufp4_f32_to_f16_bits(float x);
float ufp4_f16_bits_to_f32(uint16_t h);

/* E8M0 (OCP MX v1.0): value 2^(code - 127), code 255 = NaN, no zero. */
float ufp4_e8m0_to_f32(uint8_t code);

/* MX shared-scale rules for a block maximum `amax` (>= 0, may be NaN/Inf) and element grid g.
 * Definitions follow torchao's ScaleCalculationMode (pytorch/ao, torchao/prototype/mx_formats):
 *   FLOOR  2^(floor(log2 amax) - emax)                  the OCP v1.0 example; may clip up to 25%
 *   CEIL   2^(ceil(log2 amax) - emax)                   never clips
 *   EVEN   amax's mantissa first rounded to g->mbits bits (half up), then FLOOR
 *   RCEIL  amax * (1/g_max) in fp32, rounded up to a power of two (NVIDIA cvt.rp.ue8m0)
 * The unbiased exponent is clamped to [-127, 127]; a non-finite amax gives 255 (NaN); amax = 0
 * gives code 0 (2^-127). */
typedef enum {
  UFP4_E8M0_FLOOR = 0,
  UFP4_E8M0_CEIL,
  UFP4_E8M0_EVEN,
  UFP4_E8M0_RCEIL,
} ufp4_e8m0_rule;
uint8_t ufp4_e8m0_scale(float amax, const ufp4_grid *g, ufp4_e8m0_rule rule);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
