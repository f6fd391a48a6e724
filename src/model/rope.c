/* Rotary position embedding in HF's rotate-half layout (first half paired with second half). */
#include <math.h>

#include "model/layer_check.h"
#include "ufp4/layers.h"

int ufp4_rope_init(float *cos_tab, float *sin_tab, int T, int D, double theta) {
  const char *what = "ufp4_rope_init";
  size_t n;
  int rc;
  LAYER_NONNULL(what, cos_tab);
  LAYER_NONNULL(what, sin_tab);
  if ((rc = layer_count(&n, what, T, D, 1, 1)) < 0) return rc;
  if (D % 2) return ufp4_fail(UFP4_EINVAL, "%s: head dim %d must be even", what, D);
  if (!(theta > 1.0) || isinf(theta))
    return ufp4_fail(UFP4_EINVAL, "%s: theta must be finite and > 1 (got %g)", what, theta);
  int h = D / 2;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < h; i++) {
      double inv_freq = pow(theta, -2.0 * i / D);
      double angle = (double)t * inv_freq;
      cos_tab[(size_t)t * h + i] = (float)cos(angle);
      sin_tab[(size_t)t * h + i] = (float)sin(angle);
    }
  return 0;
}

static int rope_check(const char *what, const float *a, const float *b, const float *cos_tab,
                      const float *sin_tab, int B, int T, int NH, int D) {
  size_t n;
  int rc;
  LAYER_NONNULL(what, a);
  LAYER_NONNULL(what, b);
  LAYER_NONNULL(what, cos_tab);
  LAYER_NONNULL(what, sin_tab);
  if ((rc = layer_count(&n, what, B, T, NH, D)) < 0) return rc;
  if (D % 2) return ufp4_fail(UFP4_EINVAL, "%s: head dim %d must be even", what, D);
  return 0;
}

int ufp4_rope_forward(float *out, const float *x, const float *cos_tab, const float *sin_tab, int B,
                      int T, int NH, int D) {
  int rc = rope_check("ufp4_rope_forward", out, x, cos_tab, sin_tab, B, T, NH, D);
  if (rc < 0) return rc;
  int h = D / 2;
  size_t BT = (size_t)B * T;
#pragma omp parallel for schedule(static)
  for (size_t row = 0; row < BT; row++) {
    size_t t = row % (size_t)T;
    const float *c = cos_tab + t * h, *s = sin_tab + t * h;
    for (int hd = 0; hd < NH; hd++) {
      size_t base = (row * NH + hd) * D;
      for (int i = 0; i < h; i++) {
        /* Both inputs are read before either output is written, so out == x is safe. */
        float x1 = x[base + i], x2 = x[base + i + h];
        out[base + i] = x1 * c[i] - x2 * s[i];
        out[base + i + h] = x2 * c[i] + x1 * s[i];
      }
    }
  }
  return 0;
}

int ufp4_rope_backward(float *dx, const float *dout, const float *cos_tab, const float *sin_tab,
                       int B, int T, int NH, int D) {
  int rc = rope_check("ufp4_rope_backward", dx, dout, cos_tab, sin_tab, B, T, NH, D);
  if (rc < 0) return rc;
  int h = D / 2;
  size_t BT = (size_t)B * T;
#pragma omp parallel for schedule(static)
  for (size_t row = 0; row < BT; row++) {
    size_t t = row % (size_t)T;
    const float *c = cos_tab + t * h, *s = sin_tab + t * h;
    for (int hd = 0; hd < NH; hd++) {
      size_t base = (row * NH + hd) * D;
      for (int i = 0; i < h; i++) {
        float g1 = dout[base + i], g2 = dout[base + i + h];
        dx[base + i] += g1 * c[i] + g2 * s[i];
        dx[base + i + h] += g2 * c[i] - g1 * s[i];
      }
    }
  }
  return 0;
}
