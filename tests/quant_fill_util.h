/* Random and adversarial tensors for the quantizer tests (test_quant_simd, test_quant_cols):
 * a splitmix64 stream, and fill(), which writes 16-float segments of one random kind each. */
#ifndef UFP4_TESTS_QUANT_FILL_UTIL_H
#define UFP4_TESTS_QUANT_FILL_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ufp4/grid.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { /* splitmix64, top half */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static float gauss(void) {
  float u1 = ((float)(rnd() >> 8) + 1.0f) * 0x1p-24f, u2 = (float)(rnd() >> 8) * 0x1p-24f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}
static float sgn(void) { return (rnd() & 1) ? -1.0f : 1.0f; }

/* Fills x[rows][cols] segment by segment (16 floats) with a random kind of data, grid g's
 * edges and levels supplying exact ties. Rows r % 3 == 0 stay plain so that whole 8-block groups
 * take the vector fast path; the others mix special blocks into the groups. */
static void fill(float *x, size_t rows, size_t cols, const ufp4_grid *g) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c0 = 0; c0 < cols; c0 += 16) {
      size_t w = cols - c0 < 16 ? cols - c0 : 16;
      float *p = x + r * cols + c0;
      int kind = (r % 3 == 0) ? 0 : (int)(rnd() % 10);
      float mag = ldexpf(1.0f, (int)(rnd() % 41) - 20);
      for (size_t k = 0; k < w; k++) {
        float v;
        switch (kind) {
          case 1: /* ties and levels: x/s lands exactly on edges/levels when s = mag */
            v = sgn() * mag * ((rnd() & 1) ? g->edges[rnd() % (uint32_t)(g->n_levels - 1)]
                                           : g->levels[rnd() % (uint32_t)g->n_levels]);
            if (k == 0) v = sgn() * mag * g->g_max;
            break;
          case 2: /* float denormals, some with a normal tiny amax */
            v = sgn() * u2f(rnd() & 0x007FFFFFu);
            if (k == 0 && (rnd() & 1)) v = 1e-38f;
            break;
          case 3: /* huge, near FLT_MAX, mixed with ordinary values */
            v = (rnd() & 1) ? sgn() * u2f(0x7F000000u | (rnd() & 0x7FFFFFu)) : gauss();
            break;
          case 4: /* signed zeros, sometimes one tiny value */
            v = sgn() * 0.0f;
            if (k == 3 && (rnd() & 1)) v = sgn() * 1e-45f;
            break;
          case 5: /* one NaN or Inf */
            v = gauss();
            if (k == 5) v = (rnd() % 3 == 0) ? NAN : sgn() * INFINITY;
            break;
          case 6: { /* any bit pattern: NaN/Inf rarely, all binades */
            uint32_t u = rnd();
            if (((u >> 23) & 0xFF) == 0xFF && (rnd() % 8)) u &= 0xBFFFFFFFu;
            v = u2f(u);
            break;
          }
          case 7: /* powers of two times levels: E8M0 and E4M3 boundaries */
            v = sgn() * ldexpf(g->levels[rnd() % (uint32_t)g->n_levels], (int)(rnd() % 9) - 4);
            break;
          default:
            v = gauss() * mag;
        }
        p[k] = v;
      }
    }
}

#endif
