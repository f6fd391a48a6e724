/* The input tensors of the parity kit. Random parts come from Philox under fixed seeds (one
 * seed per input), the rest are constants, so the bytes never change between builds or machines.
 * The hard inputs are built so that each special case lands on a whole block: a 1x16 block is
 * columns 16b..16b+15 of one row, a 1x32 block two of them, a 16x16 tile rows 16t..16t+15. */
#include "parity/golden_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "ufp4/grid.h"
#include "ufp4/minifloat.h"
#include "ufp4/philox.h"

static float normal(uint64_t seed, size_t i) { return ufp4_philox_normal(seed, 0, i); }

/* Uniform in (-1, 1), for the filler elements of a block below its amax. */
static float signed_unit(uint64_t seed, size_t i) { return 2.0f * ufp4_philox_uniform(seed, 1, i) - 1.0f; }

static void fill_gauss(float *x, size_t rows, size_t cols) {
  for (size_t i = 0; i < rows * cols; i++) x[i] = normal(101, i);
}

/* Rows at eight magnitudes 2^-4..2^3, with about one element in 29 multiplied by 40: blocks that
 * clip under FLOOR-like scales and push small elements to zero. */
static void fill_outliers(float *x, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      size_t i = r * cols + c;
      float v = ldexpf(normal(102, i), (int)(r % 8) - 4);
      x[i] = ufp4_philox_u32(102, 2, i) % 29 == 0 ? 40.0f * v : v;
    }
}

/* Every 16-block holds +-g_max and both signs of each of the grid's seven bin edges (the exact
 * midpoints between levels), times 2^-(r/2) for row r: under FP32, NVFP4 (tensor amax = g_max)
 * and E8M0 FLOOR scales the scale is that power of two, so every element is an exact tie. The
 * blocks of a row are rotated differently and odd rows negated, so ties meet every position and
 * both signs. */
static void fill_ties(float *x, size_t rows, size_t cols, ufp4_grid_id id) {
  const ufp4_grid *g = ufp4_grid_get(id);
  float base[16];
  base[0] = g->g_max;
  for (int e = 0; e < 7; e++) {
    base[1 + 2 * e] = g->edges[e];
    base[2 + 2 * e] = -g->edges[e];
  }
  base[15] = -g->g_max;
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      size_t b = c / 16, k = c % 16;
      float v = base[(k + b * 5 + r) % 16];
      x[r * cols + c] = ldexpf(r % 2 ? -v : v, -(int)(r / 2));
    }
}
static void fill_ties_e2m1(float *x, size_t rows, size_t cols) { fill_ties(x, rows, cols, UFP4_GRID_E2M1); }
static void fill_ties_e1m2(float *x, size_t rows, size_t cols) { fill_ties(x, rows, cols, UFP4_GRID_E1M2); }
static void fill_ties_int4(float *x, size_t rows, size_t cols) { fill_ties(x, rows, cols, UFP4_GRID_INT4); }

/* An amax for which NVFP4's block-scale argument amax * S_enc / g_max, with S_enc = 448 (tensor
 * amax 6, E2M1), is exactly the E4M3 midpoint m, computed as block_quant.c does; the float nearest
 * 3m/224 when no float within 64 ulps hits m (tests/test_parity_kit.py checks that every m used
 * below is hit). */
static float e4m3_tie_amax(float m) {
  float a = (float)(3.0 * m / 224.0);
  for (int k = 0; k < 64; k++)
    for (int s = -1; s <= 1; s += 2) {
      float t = a;
      for (int u = 0; u < k; u++) t = nextafterf(t, s > 0 ? INFINITY : 0.0f);
      volatile float p = t * 448.0f;
      if (p / 6.0f == m) return t;
    }
  return a;
}

/* Block amaxes on the scale boundaries, one per even 16-block (the odd 16-block after it holds
 * the same pattern halved, so a 1x32 block has the same amax). The tensor amax is 6, so NVFP4's
 * S_enc is 448 exactly. */
static void boundary_amaxes(float a[32]) {
  const float list[32] = {
      6.0f, 4.0f, 2.0f, 1.0f, 0.5f, 0x1p-10f, 0x1p-126f, 0x1p-130f,  /* powers of two, E2M1 g_max */
      3.0f, 0.375f, 0x1.8p-18f, 0.0f, 0.0f, 0.0f, 1.25f, 0.15625f,  /* 6*2^-k; EVEN ties (1 bit) */
      1.75f, 0.4375f, 1.125f, 1.875f, 3.5f, 0.875f, 4.5f, 2.25f,    /* EVEN ties; E4M3 ties to even */
      0.5625f, 0x1.2p-4f, 0.0f, 0.0f, 0.0f, 0x1p-149f, 5.0f, 1e-3f, /* E4M3 ties up; min denormal */
  };
  memcpy(a, list, sizeof list);
  a[11] = nextafterf(3.0f, 4.0f); /* just above a power-of-two scale (RCEIL, CEIL move up) */
  a[12] = nextafterf(4.0f, 0.0f); /* just below a power of two (FLOOR, CEIL move down) */
  a[13] = nextafterf(1.0f, 0.0f);
  a[26] = e4m3_tie_amax(304.0f); /* 288 (mantissa 001) | 320 (010): RNE rounds up */
  a[27] = e4m3_tie_amax(19.0f);  /* 18 | 20 */
  a[28] = e4m3_tie_amax(184.0f); /* 176 (011) | 192 (100) */
}

static void fill_boundary(float *x, size_t rows, size_t cols) {
  float amax[32];
  boundary_amaxes(amax);
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      size_t i = r * cols + c, b = c / 16, k = c % 16;
      float a = amax[(r * 2 + b / 2) % 32];
      float v = k == (r * 3 + b / 2) % 16 ? ((r + b / 2) % 2 ? -a : a) : a * signed_unit(103, i);
      x[i] = b % 2 ? 0.5f * v : v;
    }
}

/* Rows 0-15 (tile row 0) are finite: zeros, denormals, huge values, a wide range inside a block;
 * rows 16-31 put NaN and Inf in columns 0-31 only, so that the other tiles and blocks stay
 * finite and NVFP4's tensor amax is that of the finite elements. */
static float special_value(size_t r, size_t c, size_t i) {
  size_t b = c / 16, k = c % 16;
  float n = normal(104, i);
  switch (r) {
  case 0: /* +0; -0; +-0 mixed; zeros but one min denormal */
    return b == 0 ? 0.0f : b == 1 ? -0.0f : b == 2 ? (k % 2 ? -0.0f : 0.0f) : (k == 7 ? 0x1p-149f : 0.0f);
  case 1: /* k * 2^-149; normal * 2^-140; smallest normal among denormals; one 1.0 among denormals */
    return b == 0 ? ldexpf((float)(k + 1), -149) : b == 1 ? ldexpf(n, -140)
           : b == 2 ? (k == 3 ? 0x1p-126f : ldexpf(n, -130)) : (k == 9 ? 1.0f : ldexpf(n, -145));
  case 2: /* +-FLT_MAX with large values; 2^127; all +-3e38; normal * 1e37 */
    return b == 0 ? (k == 0 ? FLT_MAX : k == 1 ? -FLT_MAX : n * 1e30f)
           : b == 1 ? (k == 4 ? 0x1p127f : n * 1e36f) : b == 2 ? (k % 2 ? -3e38f : 3e38f) : n * 1e37f;
  case 3: /* 1 and 1e-8 in one block: the small ones underflow */
    return k % 4 == 0 ? n : n * 1e-8f;
  case 16: /* one NaN; all NaN */
    return b == 0 ? (k == 5 ? NAN : n) : b == 1 ? NAN : n;
  case 17: /* one +Inf; a -Inf and a NaN */
    return b == 0 ? (k == 2 ? INFINITY : n) : b == 1 ? (k == 0 ? -INFINITY : k == 15 ? NAN : n) : n;
  case 18: /* +Inf and -Inf; Inf next to FLT_MAX */
    return b == 0 ? (k == 1 ? INFINITY : k == 14 ? -INFINITY : n) : b == 1 ? (k == 8 ? INFINITY : k == 9 ? FLT_MAX : n) : n;
  case 19: /* NaN last; NaN first */
    return b == 0 ? (k == 15 ? NAN : n) : b == 1 ? (k == 0 ? NAN : n) : n;
  default:
    return ldexpf(n, (int)(r % 16) - 10);
  }
}

static void fill_special(float *x, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) x[r * cols + c] = special_value(r, c, r * cols + c);
}

/* Row r at magnitude 1e-35 * 2^-2r: NVFP4's S_enc is finite but many block scales d / S_enc are
 * fp32 denormals (the divide path of block_quant.c), and the last rows are all denormal. */
static void fill_tiny(float *x, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) x[r * cols + c] = ldexpf(normal(105, r * cols + c) * 1e-35f, -2 * (int)r);
}

static const golden_input inputs[] = {
    {"gauss", "standard normal, Philox seed 101", 32, 64, fill_gauss},
    {"outliers", "normal at row magnitudes 2^-4..2^3, about 1 in 29 elements x40 (Philox seed 102)", 32, 64,
     fill_outliers},
    {"ties-e2m1", "E2M1 bin edges and +-6 in every block, times 2^-(row/2): exact ties", 16, 64, fill_ties_e2m1},
    {"ties-e1m2", "E1M2 bin edges and +-1.75 in every block, times 2^-(row/2): exact ties", 16, 64,
     fill_ties_e1m2},
    {"ties-int4", "INT4 bin edges and +-7 in every block, times 2^-(row/2): exact ties", 16, 64, fill_ties_int4},
    {"boundary", "block amax on E8M0/E4M3/FP32 scale boundaries and scale-rounding ties (tensor amax 6)", 16, 64,
     fill_boundary},
    {"special", "zeros, -0, denormals, +-FLT_MAX, 3e38, NaN and +-Inf blocks (rows 16-19, cols 0-31)", 32, 64,
     fill_special},
    {"tiny", "normal * 1e-35 * 2^-2r: denormal NVFP4 block scales, all-denormal rows", 16, 64, fill_tiny},
};

const golden_input *golden_inputs(size_t *n) {
  *n = sizeof inputs / sizeof inputs[0];
  return inputs;
}
