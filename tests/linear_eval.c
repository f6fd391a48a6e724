/* The C engine's side of tests/test_python_torch.py: runs ufp4_linear_forward and
 * ufp4_linear_backward on .npy operands, with the layer context built here as the model builds it
 * (src/model/llama.c: signs from the recipe and the seed, the stream from the fields), not through
 * the Python package's path (src/analysis/capi.c), so that a mistake there shows as a difference.
 *
 *   linear_eval RECIPE SEED STEP LAYER PROJ X.npy W.npy dY.npy Y.npy dX.npy dW.npy
 * X [n, in], W [out, in], dY [n, out]; writes Y = X W^T, dX = dY W, dW = dY^T X (from zero). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/linear.h"
#include "ufp4/npy.h"
#include "ufp4/rht.h"

static int fail(const char *what) {
  fprintf(stderr, "linear_eval: %s: %s\n", what, ufp4_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 12) {
    fprintf(stderr, "usage: linear_eval RECIPE SEED STEP LAYER PROJ X W dY Y dX dW (.npy)\n");
    return 2;
  }
  ufp4_recipe r;
  if (ufp4_recipe_parse(argv[1], &r)) return fail(argv[1]);
  const uint64_t seed = strtoull(argv[2], NULL, 0);
  float signs[UFP4_RHT_MAX];
  if (r.rht_signs == UFP4_SIGNS_NVIDIA)
    memcpy(signs, ufp4_rht_signs_nvidia16, sizeof ufp4_rht_signs_nvidia16);
  else
    ufp4_rht_signs_random(signs, r.rht_n, seed);
  ufp4_linear_ctx ctx = {.recipe = &r,
                         .stream = {.seed = seed,
                                    .step = strtoull(argv[3], NULL, 0),
                                    .layer = (uint32_t)strtoul(argv[4], NULL, 0),
                                    .proj = (uint32_t)strtoul(argv[5], NULL, 0)},
                         .rht_signs = signs};
  ufp4_npy X, W, dY;
  if (ufp4_npy_read(argv[6], &X) || ufp4_npy_read(argv[7], &W) || ufp4_npy_read(argv[8], &dY)) return fail("read");
  const size_t n = X.shape[0], in = X.shape[1], out = W.shape[0];
  if (X.ndim != 2 || W.ndim != 2 || dY.ndim != 2 || W.shape[1] != in || dY.shape[0] != n || dY.shape[1] != out) {
    fprintf(stderr, "linear_eval: shapes do not agree\n");
    return 1;
  }
  float *Y = calloc(n * out, sizeof *Y), *dX = calloc(n * in, sizeof *dX), *dW = calloc(out * in, sizeof *dW);
  float *scratch = malloc(ufp4_linear_scratch_floats(n, in, out) * sizeof *scratch + 1);
  if (!Y || !dX || !dW || !scratch) return fail("memory");
  if (ufp4_linear_forward(&ctx, X.data, W.data, Y, n, in, out, scratch)) return fail("forward");
  if (ufp4_linear_backward(&ctx, dY.data, X.data, W.data, dX, dW, n, in, out, scratch)) return fail("backward");
  const size_t sy[2] = {n, out}, sx[2] = {n, in}, sw[2] = {out, in};
  if (ufp4_npy_write(argv[9], Y, sy, 2) || ufp4_npy_write(argv[10], dX, sx, 2) || ufp4_npy_write(argv[11], dW, sw, 2))
    return fail("write");
  free(Y), free(dX), free(dW), free(scratch);
  ufp4_npy_free(&X), ufp4_npy_free(&W), ufp4_npy_free(&dY);
  return 0;
}
