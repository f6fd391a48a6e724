/* Causal softmax attention core with grouped-query attention (HF eager attention, no dropout). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "model/layer_check.h"
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

static float dot(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

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
  const size_t qstride = (size_t)H * D, kvstride = (size_t)KVH * D;
  const long rows = (long)B * H * T;
  /* Row (b, h, t) is independent of every other row; dynamic chunks balance the causal triangle. */
#pragma omp parallel for schedule(dynamic, 16)
  for (long r = 0; r < rows; r++) {
    int t = (int)(r % T);
    int h = (int)((r / T) % H);
    int b = (int)(r / ((long)T * H));
    int kvh = h / group;
    const float *qt = q + ((size_t)b * T + t) * qstride + (size_t)h * D;
    const float *kb = k + (size_t)b * T * kvstride + (size_t)kvh * D;
    const float *vb = v + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *p = att + (size_t)r * T;
    float mx = -FLT_MAX;
    for (int j = 0; j <= t; j++) {
      p[j] = dot(qt, kb + (size_t)j * kvstride, D) * scale;
      if (p[j] > mx) mx = p[j];
    }
    double sum = 0.0;
    for (int j = 0; j <= t; j++) {
      p[j] = expf(p[j] - mx);
      sum += p[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j <= t; j++) p[j] *= inv;
    for (int j = t + 1; j < T; j++) p[j] = 0.0f;
    float *ot = out + ((size_t)b * T + t) * qstride + (size_t)h * D;
    memset(ot, 0, (size_t)D * sizeof(float));
    for (int j = 0; j <= t; j++) {
      const float *vj = vb + (size_t)j * kvstride;
      float pj = p[j];
      for (int d = 0; d < D; d++) ot[d] += pj * vj[d];
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
  const size_t qstride = (size_t)H * D, kvstride = (size_t)KVH * D;
  const int tasks = B * KVH;
  /* One task per (b, kv head): dk and dv of that head are written by this task only, with the
   * query heads of the group and their rows in a fixed order. */
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < tasks; task++) {
    int b = task / KVH, kvh = task % KVH;
    float *ds = scratch + (size_t)task * T;
    const float *kb = k + (size_t)b * T * kvstride + (size_t)kvh * D;
    const float *vb = v + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *dkb = dk + (size_t)b * T * kvstride + (size_t)kvh * D;
    float *dvb = dv + (size_t)b * T * kvstride + (size_t)kvh * D;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
      for (int t = 0; t < T; t++) {
        size_t qoff = ((size_t)b * T + t) * qstride + (size_t)h * D;
        const float *qt = q + qoff, *gt = dout + qoff;
        float *dqt = dq + qoff;
        const float *p = att + (((size_t)b * H + h) * T + t) * T;
        double pdp = 0.0;
        for (int j = 0; j <= t; j++) {
          ds[j] = dot(gt, vb + (size_t)j * kvstride, D);
          pdp += (double)p[j] * ds[j];
        }
        float c = (float)pdp;
        for (int j = 0; j <= t; j++) ds[j] = p[j] * (ds[j] - c) * scale;
        for (int j = 0; j <= t; j++) {
          const float *kj = kb + (size_t)j * kvstride;
          float *dkj = dkb + (size_t)j * kvstride, *dvj = dvb + (size_t)j * kvstride;
          float sj = ds[j], pj = p[j];
          for (int d = 0; d < D; d++) {
            dqt[d] += sj * kj[d];
            dkj[d] += sj * qt[d];
            dvj[d] += pj * gt[d];
          }
        }
      }
    }
  }
  return 0;
}
