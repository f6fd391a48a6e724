/* Causal softmax attention core with grouped-query attention (HF eager attention, no dropout). */
#include <float.h>
#include <math.h>

#include "core/cpu.h"
#include "model/layer_check.h"
#include "model/vexp_internal.h"
#include "ufp4/gemm.h"
#include "ufp4/layers.h"

static int attn_check(const char *what, int B, int T, int H, int KVH, int D) {
  size_t n;
  int rc;
  if ((rc = layer_count(&n, what, B, T, H, D)) < 0) return rc;
  if ((rc = layer_count(&n, what, B, H, T, T)) < 0) return rc;
  if (KVH <= 0 || H % KVH)
    return ufp4_fail(UFP4_EINVAL, "%s: %d query heads are not a multiple of %d kv heads", what, H,
                     KVH);
  return 0;
}

/* The attention products run through gemm.h's deterministic grid, one (b, head) per OpenMP task:
 * inside the task's parallel region each product runs serially, and its bits depend only on its
 * shape and operands, so the result does not depend on the thread count. Rows go in blocks of
 * ROWS_FWD (forward) or at most SCORE_FLOATS / T (backward), and a block of rows [i0, i1) only
 * needs keys 0 .. i1-1: the products skip the masked upper triangle except inside a block, where
 * masked probabilities and score gradients are exact zeros and add nothing. The block boundaries
 * depend on T only. */

#define ROWS_FWD 64
#define SCORE_FLOATS 16384 /* per-thread stack block of score gradients (64 KiB) */

int ufp4_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int KVH, int D) {
  const char *what = "ufp4_attention_forward";
  LAYER_NONNULL(what, out);
  LAYER_NONNULL(what, att);
  LAYER_NONNULL(what, q);
  LAYER_NONNULL(what, k);
  LAYER_NONNULL(what, v);
  int rc = attn_check(what, B, T, H, KVH, D);
  if (rc < 0) return rc;
  const int group = H / KVH;
  const float scale = (float)(1.0 / sqrt((double)D));
  const int qstride = H * D, kvstride = KVH * D;
  const int tasks = B * H;
#ifdef UFP4_HAVE_X86
  const int simd = ufp4_simd_enabled();
#endif
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < tasks; task++) {
    const int b = task / H, h = task % H, kvh = h / group;
    const float *qb = q + (size_t)b * T * qstride + (size_t)h * D;
    const float *kb = k + (size_t)b * T * kvstride + (size_t)kvh * D;
    const float *vb = v + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *ob = out + (size_t)b * T * qstride + (size_t)h * D;
    float *pb = att + (size_t)task * T * T;
    for (int i0 = 0; i0 < T; i0 += ROWS_FWD) {
      const int i1 = i0 + ROWS_FWD < T ? i0 + ROWS_FWD : T, rows = i1 - i0;
      float *p0 = pb + (size_t)i0 * T;
      /* Scores s = (q . k) * scale: alpha scales the finished dot product, as the old loop did. */
      ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_T, rows, i1, D, scale, qb + (size_t)i0 * qstride, qstride,
                 kb, kvstride, 0.0f, p0, T);
      int t = i0;
#ifdef UFP4_HAVE_X86
      if (simd) /* the same bits (vexp_internal.h), four rows at a time */
        for (; t + 4 <= i1; t += 4) ufp4_m_softmax_rows4_avx2(pb + (size_t)t * T, (size_t)T, t + 1, T);
#endif
      for (; t < i1; t++) {
        float *p = pb + (size_t)t * T;
#ifdef UFP4_HAVE_X86
        if (simd) {
          ufp4_m_softmax_row_avx2(p, t + 1, T);
          continue;
        }
#endif
        float mx = -FLT_MAX;
        for (int j = 0; j <= t; j++)
          if (p[j] > mx) mx = p[j];
        double sum = 0.0;
        for (int j = 0; j <= t; j++) {
          p[j] = expf(p[j] - mx);
          sum += p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j <= t; j++) p[j] *= inv;
        for (int j = t + 1; j < T; j++) p[j] = 0.0f;
      }
      ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_N, rows, D, i1, 1.0f, p0, T, vb, kvstride, 0.0f,
                 ob + (size_t)i0 * qstride, qstride);
    }
  }
  return 0;
}

size_t ufp4_attention_scratch_floats(int B, int T, int KVH) {
  if (B <= 0 || T <= 0 || KVH <= 0) return 0;
  return (size_t)B * KVH * T;
}

int ufp4_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v, int B,
                            int T, int H, int KVH, int D) {
  const char *what = "ufp4_attention_backward";
  LAYER_NONNULL(what, dq);
  LAYER_NONNULL(what, dk);
  LAYER_NONNULL(what, dv);
  LAYER_NONNULL(what, scratch);
  LAYER_NONNULL(what, dout);
  LAYER_NONNULL(what, att);
  LAYER_NONNULL(what, q);
  LAYER_NONNULL(what, k);
  LAYER_NONNULL(what, v);
  int rc = attn_check(what, B, T, H, KVH, D);
  if (rc < 0) return rc;
  const int group = H / KVH;
  const float scale = (float)(1.0 / sqrt((double)D));
  const int qstride = H * D, kvstride = KVH * D;
  const int tasks = B * KVH;
#ifdef UFP4_HAVE_X86
  const int simd = ufp4_simd_enabled();
#endif
  /* Rows per block: a block of score gradients fits the stack buffer; past SCORE_FLOATS keys the
   * caller's one-row scratch takes over. */
  const int bs = T <= SCORE_FLOATS ? (T < SCORE_FLOATS / T ? T : SCORE_FLOATS / T) : 1;
  /* One task per (b, kv head): dk and dv of that head are written by this task only, with the
   * query heads of the group and their row blocks in a fixed order. */
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < tasks; task++) {
    float stack_ds[SCORE_FLOATS];
    float *ds = T <= SCORE_FLOATS ? stack_ds : scratch + (size_t)task * T;
    const int b = task / KVH, kvh = task % KVH;
    const float *kb = k + (size_t)b * T * kvstride + (size_t)kvh * D;
    const float *vb = v + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *dkb = dk + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *dvb = dv + (size_t)b * T * kvstride + (size_t)kvh * D;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
      const size_t hoff = (size_t)b * T * qstride + (size_t)h * D;
      const float *pb = att + ((size_t)b * H + h) * T * T;
      for (int i0 = 0; i0 < T; i0 += bs) {
        const int i1 = i0 + bs < T ? i0 + bs : T, rows = i1 - i0;
        const float *g0 = dout + hoff + (size_t)i0 * qstride, *q0 = q + hoff + (size_t)i0 * qstride;
        const float *p0 = pb + (size_t)i0 * T;
        /* dp = dout v^T over keys 0 .. i1-1 */
        ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_T, rows, i1, D, 1.0f, g0, qstride, vb, kvstride, 0.0f,
                   ds, i1);
        int t = i0;
#ifdef UFP4_HAVE_X86
        if (simd) /* the same bits (vexp_internal.h), four rows at a time */
          for (; t + 4 <= i1; t += 4)
            ufp4_m_attn_ds_rows4_avx2(ds + (size_t)(t - i0) * i1, (size_t)i1, pb + (size_t)t * T, (size_t)T, t + 1,
                                      i1, scale);
#endif
        for (; t < i1; t++) {
          float *dst = ds + (size_t)(t - i0) * i1;
          const float *p = pb + (size_t)t * T;
          double pdp = 0.0;
          for (int j = 0; j <= t; j++) pdp += (double)p[j] * dst[j];
          float c = (float)pdp;
          for (int j = 0; j <= t; j++) dst[j] = p[j] * (dst[j] - c) * scale;
          for (int j = t + 1; j < i1; j++) dst[j] = 0.0f;
        }
        ufp4_sgemm(UFP4_GEMM_N, UFP4_GEMM_N, rows, D, i1, 1.0f, ds, i1, kb, kvstride, 1.0f,
                   dq + hoff + (size_t)i0 * qstride, qstride);
        ufp4_sgemm(UFP4_GEMM_T, UFP4_GEMM_N, i1, D, rows, 1.0f, ds, i1, q0, qstride, 1.0f, dkb,
                   kvstride);
        ufp4_sgemm(UFP4_GEMM_T, UFP4_GEMM_N, i1, D, rows, 1.0f, p0, T, g0, qstride, 1.0f, dvb,
                   kvstride);
      }
    }
  }
  return 0;
}
