/* RMSNorm as HF LlamaRMSNorm computes it in float32. */
#include <math.h>

#include "core/cpu.h"
#include "model/layer_check.h"
#include "model/rmsnorm_internal.h"
#include "ufp4/layers.h"

/* Columns of dw one thread owns at a time; the double partial sums of a block live on the stack. */
#define RMS_COL_BLOCK 64

int ufp4_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                         float eps) {
  const char *what = "ufp4_rmsnorm_forward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, out);
  LAYER_NONNULL(what, rstd);
  LAYER_NONNULL(what, x);
  LAYER_NONNULL(what, w);
  if ((rc = layer_count(&n, what, N, C, 1, 1)) < 0) return rc;
  if (!(eps >= 0.0f)) return ufp4_fail(UFP4_EINVAL, "%s: eps must be >= 0 (got %g)", what, eps);
  int done = 0; /* rows done four at a time by the AVX2 kernel (rmsnorm_internal.h: the same bits) */
#ifdef UFP4_HAVE_X86
  if (ufp4_simd_enabled() && C % 4 == 0) {
    done = N / 4 * 4;
#pragma omp parallel for schedule(static)
    for (int q = 0; q < N / 4; q++)
      ufp4_m_rmsnorm_forward4_avx2(out + (size_t)4 * q * C, rstd + 4 * q, x + (size_t)4 * q * C, w, C, eps);
  }
#endif
#pragma omp parallel for schedule(static)
  for (int i = done; i < N; i++) {
    const float *xi = x + (size_t)i * C;
    float *oi = out + (size_t)i * C;
    double ss = 0.0;
    for (int j = 0; j < C; j++) ss += (double)xi[j] * xi[j];
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    rstd[i] = r;
    for (int j = 0; j < C; j++) oi[j] = (xi[j] * r) * w[j];
  }
  return 0;
}

int ufp4_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int N, int C) {
  const char *what = "ufp4_rmsnorm_backward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, dx);
  LAYER_NONNULL(what, dw);
  LAYER_NONNULL(what, dout);
  LAYER_NONNULL(what, x);
  LAYER_NONNULL(what, w);
  LAYER_NONNULL(what, rstd);
  if ((rc = layer_count(&n, what, N, C, 1, 1)) < 0) return rc;
  int done = 0, simd = 0;
  (void)simd; /* only the AVX2 build reads it */
#ifdef UFP4_HAVE_X86
  simd = ufp4_simd_enabled();
  if (simd && C % 4 == 0) {
    done = N / 4 * 4;
#pragma omp parallel for schedule(static)
    for (int q = 0; q < N / 4; q++)
      ufp4_m_rmsnorm_backward_dx4_avx2(dx + (size_t)4 * q * C, dout + (size_t)4 * q * C, x + (size_t)4 * q * C, w,
                                       rstd + 4 * q, C);
  }
#endif
#pragma omp parallel for schedule(static)
  for (int i = done; i < N; i++) {
    const float *xi = x + (size_t)i * C, *gi = dout + (size_t)i * C;
    float *dxi = dx + (size_t)i * C;
    double s = 0.0;
    for (int j = 0; j < C; j++) s += (double)gi[j] * w[j] * xi[j];
    float r = rstd[i];
    float k = (float)((double)r * r * r * s / C);
    for (int j = 0; j < C; j++) dxi[j] += r * gi[j] * w[j] - xi[j] * k;
  }
  /* dw reduces over rows: split by columns so each dw[j] is one thread's in-order sum. */
  int nblocks = (C + RMS_COL_BLOCK - 1) / RMS_COL_BLOCK;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * RMS_COL_BLOCK;
    int c1 = c0 + RMS_COL_BLOCK < C ? c0 + RMS_COL_BLOCK : C;
    double acc[RMS_COL_BLOCK] = {0};
#ifdef UFP4_HAVE_X86
    if (simd) {
      ufp4_m_rmsnorm_dw_avx2(acc, dout, x, rstd, N, C, c0, c1);
      for (int j = c0; j < c1; j++) dw[j] += (float)acc[j - c0];
      continue;
    }
#endif
    for (int i = 0; i < N; i++) {
      const float *xi = x + (size_t)i * C, *gi = dout + (size_t)i * C;
      double r = rstd[i];
      for (int j = c0; j < c1; j++) acc[j - c0] += (double)gi[j] * xi[j] * r;
    }
    for (int j = c0; j < c1; j++) dw[j] += (float)acc[j - c0];
  }
  return 0;
}
