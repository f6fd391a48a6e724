/* Residual add: the one join in the residual stream. */
#include "model/layer_check.h"
#include "ufp4/layers.h"

int ufp4_residual_forward(float *out, const float *a, const float *b, size_t n) {
  const char *what = "ufp4_residual_forward";
  LAYER_NONNULL(what, out);
  LAYER_NONNULL(what, a);
  LAYER_NONNULL(what, b);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
  return 0;
}

int ufp4_residual_backward(float *da, float *db, const float *dout, size_t n) {
  const char *what = "ufp4_residual_backward";
  LAYER_NONNULL(what, da);
  LAYER_NONNULL(what, db);
  LAYER_NONNULL(what, dout);
  /* No simd here: da may equal db, and the two += must then happen one after the other. */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
  return 0;
}
