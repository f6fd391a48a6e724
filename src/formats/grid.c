/* The six element grids and element-level rounding (see include/ufp4/grid.h).
 *
 * Layout notes beyond the header:
 * - Slots of `edges` past n_levels-2 hold +Inf so the nearest-mode search can always run the same
 *   seven compares (the quantizer's inner loop); slots of `levels` past n_levels-1 are 0 and unused.
 * - Codes of a range-restricted E2M1 grid are E2M1 bit patterns, so decode reads an index past the
 *   grid's top (never produced by encode) as the E2M1 value of that pattern, as hardware would.
 * - ufp4_code_index of INT4 code 0x8 (-8, never produced by encode) returns 7 so that callers
 *   indexing 8 magnitude buckets stay in bounds.
 * - SR: every step between neighbours is a power of two, so p = (t - g_a)/(g_b - g_a) is exact in
 *   double. Exact SR rounds up iff rbits < p * 2^32, i.e. P(up) = ceil(p 2^32) / 2^32, within 2^-32
 *   of p. SR8 rounds up iff (rbits >> 24) < floor(256 p), P(up) = floor(256 p)/256 <= p. */
#include "ufp4/grid.h"

#include <math.h>
#include <string.h>

#include "ufp4/error.h"

#define PAD INFINITY

static const ufp4_grid GRIDS[UFP4_GRID_COUNT] = {
    [UFP4_GRID_E2M1] = {UFP4_GRID_E2M1, "e2m1", 8,
                        {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f},
                        {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f},
                        6.0f, 2, 1},
    [UFP4_GRID_E1M2] = {UFP4_GRID_E1M2, "e1m2", 8,
                        {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f},
                        {0.125f, 0.375f, 0.625f, 0.875f, 1.125f, 1.375f, 1.625f},
                        1.75f, 0, 2},
    [UFP4_GRID_INT4] = {UFP4_GRID_INT4, "int4", 8,
                        {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f},
                        {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f},
                        7.0f, 2, 2},
    [UFP4_GRID_E2M1_MAX2] = {UFP4_GRID_E2M1_MAX2, "e2m1-max2", 5,
                             {0.0f, 0.5f, 1.0f, 1.5f, 2.0f},
                             {0.25f, 0.75f, 1.25f, 1.75f, PAD, PAD, PAD},
                             2.0f, 1, 1},
    [UFP4_GRID_E2M1_MAX3] = {UFP4_GRID_E2M1_MAX3, "e2m1-max3", 6,
                             {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f},
                             {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, PAD, PAD},
                             3.0f, 1, 1},
    [UFP4_GRID_E2M1_MAX4] = {UFP4_GRID_E2M1_MAX4, "e2m1-max4", 7,
                             {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f},
                             {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, PAD},
                             4.0f, 2, 1},
};

static const float E2M1_PATTERN_VALUE[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static const char *const ROUND_NAMES[UFP4_ROUND_COUNT] = {"rne", "rna", "rnz", "sr", "sr8"};

const ufp4_grid *ufp4_grid_get(ufp4_grid_id id) {
  if ((int)id < 0 || id >= UFP4_GRID_COUNT) return NULL;
  return &GRIDS[id];
}

int ufp4_grid_parse(const char *name, ufp4_grid_id *out) {
  if (!name || !out) return ufp4_fail(UFP4_EINVAL, "grid: missing grid name");
  for (int i = 0; i < UFP4_GRID_COUNT; i++) {
    if (strcmp(name, GRIDS[i].name) == 0) {
      *out = (ufp4_grid_id)i;
      return UFP4_OK;
    }
  }
  return ufp4_fail(UFP4_EINVAL,
                   "grid: unknown grid '%s' (expected e2m1, e1m2, int4, e2m1-max2, e2m1-max3, "
                   "e2m1-max4)",
                   name);
}

const char *ufp4_round_name(ufp4_round_mode mode) {
  if ((int)mode < 0 || mode >= UFP4_ROUND_COUNT) return "unknown";
  return ROUND_NAMES[mode];
}

int ufp4_round_parse(const char *name, ufp4_round_mode *out) {
  if (!name || !out) return ufp4_fail(UFP4_EINVAL, "round: missing rounding mode name");
  for (int i = 0; i < UFP4_ROUND_COUNT; i++) {
    if (strcmp(name, ROUND_NAMES[i]) == 0) {
      *out = (ufp4_round_mode)i;
      return UFP4_OK;
    }
  }
  return ufp4_fail(UFP4_EINVAL, "round: unknown rounding mode '%s' (expected rne, rna, rnz, sr, sr8)",
                   name);
}

/* Edge k separates levels k and k+1. Counting the edges that a lies above gives the nearest index;
 * whether an edge counts when a sits exactly on it is the tie rule, so no separate tie test is
 * needed. RNE goes up on edge k iff k+1 is even, i.e. k is odd. */
_Static_assert(UFP4_GRID_MAX_LEVELS == 8, "nearest_index unrolls seven edges");
static inline int nearest_index(const float *e, float a, ufp4_round_mode mode) {
  switch (mode) {
    case UFP4_ROUND_RNA:
      return (a >= e[0]) + (a >= e[1]) + (a >= e[2]) + (a >= e[3]) + (a >= e[4]) + (a >= e[5]) +
             (a >= e[6]);
    case UFP4_ROUND_RNZ:
      return (a > e[0]) + (a > e[1]) + (a > e[2]) + (a > e[3]) + (a > e[4]) + (a > e[5]) + (a > e[6]);
    default:
      return (a > e[0]) + (a >= e[1]) + (a > e[2]) + (a >= e[3]) + (a > e[4]) + (a >= e[5]) +
             (a > e[6]);
  }
}

int ufp4_round_index(const ufp4_grid *g, float t, ufp4_round_mode mode, uint32_t rbits) {
  if (!g) return 0;
  float a = fabsf(t);
  if (!(a < g->g_max)) return a != a ? 0 : g->n_levels - 1; /* NaN -> 0; Inf and overflow saturate */
  if (mode == UFP4_ROUND_SR || mode == UFP4_ROUND_SR8) {
    int i = nearest_index(g->edges, a, UFP4_ROUND_RNZ);
    if (a < g->levels[i]) i--;
    float lo = g->levels[i];
    if (a == lo) return i;
    double p = ((double)a - (double)lo) / ((double)g->levels[i + 1] - (double)lo);
    int up;
    if (mode == UFP4_ROUND_SR)
      up = (double)rbits < p * 4294967296.0;
    else
      up = (double)(rbits >> 24) < floor(p * 256.0);
    return i + up;
  }
  return nearest_index(g->edges, a, mode);
}

uint8_t ufp4_encode(const ufp4_grid *g, float t, ufp4_round_mode mode, uint32_t rbits) {
  if (!g || t != t) return 0;
  int idx = ufp4_round_index(g, t, mode, rbits);
  int neg = signbit(t) != 0;
  if (g->id == UFP4_GRID_INT4) return (uint8_t)((neg ? -idx : idx) & 0xF);
  return (uint8_t)((neg << 3) | idx);
}

float ufp4_decode(const ufp4_grid *g, uint8_t code) {
  if (!g) return NAN;
  code &= 0xF;
  if (g->id == UFP4_GRID_INT4) return (float)(code >= 8 ? (int)code - 16 : (int)code);
  int idx = code & 7;
  float m = idx < g->n_levels ? g->levels[idx] : E2M1_PATTERN_VALUE[idx];
  return (code & 8) ? -m : m;
}

int ufp4_code_index(const ufp4_grid *g, uint8_t code) {
  if (!g) return 0;
  code &= 0xF;
  if (g->id == UFP4_GRID_INT4) {
    int v = code >= 8 ? 16 - (int)code : (int)code;
    return v > 7 ? 7 : v;
  }
  return code & 7;
}

double ufp4_bin_bias(const ufp4_grid *g, int level, int *interior) {
  if (!g || level < 1 || level > g->n_levels - 2) {
    if (interior) *interior = 0;
    return NAN;
  }
  if (interior) *interior = 1;
  double l = ((double)g->levels[level] - g->levels[level - 1]) / 2.0;
  double r = ((double)g->levels[level + 1] - g->levels[level]) / 2.0;
  return (l - r) / 2.0;
}
