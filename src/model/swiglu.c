/* SwiGLU gate of the Llama MLP: silu(gate) * up. */
#include <math.h>

#include "core/cpu.h"
#include "model/layer_check.h"
#include "model/vexp_internal.h"
#include "ufp4/layers.h"

/* Elements per OpenMP task of the AVX2 loops: each element is computed alone, so how the loop is
 * cut changes no bit. */
#define SWIGLU_CHUNK ((size_t)4096)

int ufp4_swiglu_forward(float *out, const float *gate, const float *up, int N, int F) {
  const char *what = "ufp4_swiglu_forward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, out);
  LAYER_NONNULL(what, gate);
  LAYER_NONNULL(what, up);
  if ((rc = layer_count(&n, what, N, F, 1, 1)) < 0) return rc;
#ifdef UFP4_HAVE_X86
  if (ufp4_simd_enabled()) { /* the same bits (vexp_internal.h), in chunks of whole vectors */
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n; c += SWIGLU_CHUNK)
      ufp4_m_swiglu_forward_avx2(out + c, gate + c, up + c, n - c < SWIGLU_CHUNK ? n - c : SWIGLU_CHUNK);
    return 0;
  }
#endif
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = gate[i];
    /* expf(-g) overflows to +inf for very negative g, giving silu = -0: the correct limit. */
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
  return 0;
}

int ufp4_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, int N, int F) {
  const char *what = "ufp4_swiglu_backward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, dgate);
  LAYER_NONNULL(what, dup);
  LAYER_NONNULL(what, dout);
  LAYER_NONNULL(what, gate);
  LAYER_NONNULL(what, up);
  if ((rc = layer_count(&n, what, N, F, 1, 1)) < 0) return rc;
#ifdef UFP4_HAVE_X86
  if (ufp4_simd_enabled()) {
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n; c += SWIGLU_CHUNK)
      ufp4_m_swiglu_backward_avx2(dgate + c, dup + c, dout + c, gate + c, up + c,
                                  n - c < SWIGLU_CHUNK ? n - c : SWIGLU_CHUNK);
    return 0;
  }
#endif
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = gate[i];
    float sg = 1.0f / (1.0f + expf(-g));
    float d = dout[i];
    dgate[i] += d * up[i] * sg * (1.0f + g * (1.0f - sg));
    dup[i] += d * g * sg;
  }
  return 0;
}
