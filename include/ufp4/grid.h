/* 4-bit element grids and element-level rounding.
 *
 * A grid is a set of non-negative magnitudes (levels) plus a sign bit. Codes are 4 bits:
 *   E2M1, E1M2 and range-restricted E2M1: bit 3 = sign, bits 0-2 = index of the magnitude in
 *     `levels` (sign-magnitude, so +0 = 0x0 and -0 = 0x8 both exist). For E2M1 and E1M2 the index
 *     is exactly the OCP/IEEE-style exponent-mantissa bit pattern (exponent bias 1).
 *   INT4: two's complement, levels -7..7; code 0x8 (-8) is never produced by encode, and decode
 *     maps it to -8 as hardware would.
 * "Even code" in the tie rule means an even magnitude index, which is the code's lowest bit for
 * every grid (for INT4 too: the index equals |value|).
 *
 * Element encode takes t = x / scale, already scaled. Out-of-range magnitudes and +-Inf saturate
 * to +-g_max (the PTX cvt.*.satfinite behaviour). NaN has no 4-bit encoding; encode maps it to +0
 * and the block quantizer (quant.h) carries the NaN in the block's scale instead, so it is never
 * silently lost. Float32 denormals are ordinary inputs: no flush to zero anywhere. */
#ifndef UFP4_GRID_H
#define UFP4_GRID_H

#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_GRID_E2M1 = 0,  /* 0 0.5 1 1.5 2 3 4 6 */
  UFP4_GRID_E1M2,      /* 0 0.25 ... 1.75, uniform step 0.25 */
  UFP4_GRID_INT4,      /* 0 1 ... 7, symmetric; same grid as E1M2 up to the factor 4 */
  UFP4_GRID_E2M1_MAX2, /* E2M1 levels <= 2 (paper's max_fpx ablation) */
  UFP4_GRID_E2M1_MAX3, /* E2M1 levels <= 3 */
  UFP4_GRID_E2M1_MAX4, /* E2M1 levels <= 4 */
  UFP4_GRID_COUNT
} ufp4_grid_id;

#define UFP4_GRID_MAX_LEVELS 8

typedef struct {
  ufp4_grid_id id;
  const char *name;     /* "e2m1", "e1m2", "int4", "e2m1-max2", "e2m1-max3", "e2m1-max4" */
  int n_levels;         /* number of magnitudes, including 0 */
  float levels[UFP4_GRID_MAX_LEVELS]; /* ascending magnitudes, levels[0] = 0 */
  float edges[UFP4_GRID_MAX_LEVELS - 1]; /* edges[i] = (levels[i] + levels[i+1]) / 2 */
  float g_max;          /* levels[n_levels - 1] */
  int emax;             /* floor(log2(g_max)): the MX "largest power of two" of the element */
  int mbits;            /* mantissa bits used by the MX EVEN scale rule (E2M1 1, E1M2 2, INT4 2) */
} ufp4_grid;

/* Rounding rules for the element. All nearest modes saturate at g_max. */
typedef enum {
  UFP4_ROUND_RNE = 0, /* nearest, ties to even code: hardware (PTX cvt.rn.satfinite), default */
  UFP4_ROUND_RNA,     /* nearest, ties away from zero: microxcaling */
  UFP4_ROUND_RNZ,     /* nearest, ties toward zero: ggml */
  UFP4_ROUND_SR,      /* stochastic, exact: P(up) = (t - g_a)/(g_b - g_a) from 32 random bits */
  UFP4_ROUND_SR8,     /* stochastic with 8 random bits (hardware cvt.rs): up iff r8 < floor(256 p),
                         biased toward zero by less than 1/256 of a step */
  UFP4_ROUND_COUNT
} ufp4_round_mode;

const ufp4_grid *ufp4_grid_get(ufp4_grid_id id);
/* Parses a grid name (as in ufp4_grid.name); returns 0 or UFP4_EINVAL. */
int ufp4_grid_parse(const char *name, ufp4_grid_id *out);
const char *ufp4_round_name(ufp4_round_mode mode); /* "rne", "rna", "rnz", "sr", "sr8" */
int ufp4_round_parse(const char *name, ufp4_round_mode *out);
static inline int ufp4_round_is_stochastic(ufp4_round_mode m) {
  return m == UFP4_ROUND_SR || m == UFP4_ROUND_SR8;
}

/* Index of the magnitude that |t| rounds to (0..n_levels-1). `rbits` are 32 random bits, read only
 * by the stochastic modes. */
int ufp4_round_index(const ufp4_grid *g, float t, ufp4_round_mode mode, uint32_t rbits);
/* The 4-bit code of t (see the file comment for the layout). */
uint8_t ufp4_encode(const ufp4_grid *g, float t, ufp4_round_mode mode, uint32_t rbits);
/* The value of a 4-bit code (only the low 4 bits are read). */
float ufp4_decode(const ufp4_grid *g, uint8_t code);
/* The magnitude index stored in a code (0..7); for INT4 the absolute value. */
int ufp4_code_index(const ufp4_grid *g, uint8_t code);

/* Geometric bias of level i under a locally uniform density (paper's Eq. 2): (l - r) / 2, with
 * l = (q_i - q_{i-1})/2 and r = (q_{i+1} - q_i)/2 the half-widths of its bin. Defined for the
 * interior levels 1..n_levels-2. The zero bin has no left half and the top bin saturates, so
 * for those the function returns NaN. `interior` (may be NULL) receives 1 or 0. */
double ufp4_bin_bias(const ufp4_grid *g, int level, int *interior);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
