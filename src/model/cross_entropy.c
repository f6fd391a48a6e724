/* Fused softmax + cross-entropy over the vocabulary, with an ignore index. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/cpu.h"
#include "model/layer_check.h"
#include "model/vexp_internal.h"
#include "ufp4/layers.h"

/* exp over a 50257-word vocabulary is a good share of a training step, so the rows use a 4-lane
 * SSE2 exp (SSE2 is part of x86-64: the same instructions run everywhere, so the bits never depend
 * on the machine's SIMD level or the thread count; where AVX2 is there, the same operations run on
 * 8 lanes, vexp_internal.h, with the same bits). Cephes's expf scheme: x = n ln2 + r
 * with n rounded to nearest (by the 1.5 * 2^23 trick) and ln2 split in two so that n * C1 is exact,
 * then a degree-5 polynomial in r and 2^n put in the exponent bits; no FMA, so every lane and every
 * position in a row gets the same bits for the same input. Within 1 ulp of the correctly rounded exp
 * on [-87, 88] (measured on every 37th float there)
 * (test_layer_gradcheck and test_model_torch hold it to the reference); lanes outside that range,
 * NaN included, take libm's expf, which keeps IEEE's overflow, underflow and NaN results.
 * A build for another architecture (no __SSE2__) runs exp_lane, the same steps on one float. */
#ifdef __SSE2__
static __m128 exp4(__m128 x) {
  const __m128 log2e = _mm_set1_ps(1.44269504088896341f), magic = _mm_set1_ps(12582912.0f);
  const __m128 c1 = _mm_set1_ps(0.693359375f), c2 = _mm_set1_ps(-2.12194440e-4f);
  const __m128 lo = _mm_set1_ps(-87.0f), hi = _mm_set1_ps(88.0f);
  __m128 xc = _mm_max_ps(_mm_min_ps(x, hi), lo); /* any NaN becomes a bound here, then libm below */
  __m128 n = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(xc, log2e), magic), magic);
  __m128 r = _mm_sub_ps(_mm_sub_ps(xc, _mm_mul_ps(n, c1)), _mm_mul_ps(n, c2));
  __m128 p = _mm_set1_ps(1.9875691500e-4f);
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.3981999507e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(8.3334519073e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(4.1665795894e-2f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.6666665459e-1f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(5.0000001201e-1f));
  p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(p, r), r), r), _mm_set1_ps(1.0f));
  __m128i e = _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127)), 23);
  __m128 y = _mm_mul_ps(p, _mm_castsi128_ps(e));
  /* Lanes not strictly inside (-87, 88), or NaN: the comparisons are false for NaN. */
  __m128 inside = _mm_and_ps(_mm_cmpgt_ps(x, lo), _mm_cmplt_ps(x, hi));
  if (_mm_movemask_ps(inside) != 0xf) {
    float xs[4], ys[4];
    _mm_storeu_ps(xs, x);
    _mm_storeu_ps(ys, y);
    int in = _mm_movemask_ps(inside);
    for (int l = 0; l < 4; l++)
      if (!(in >> l & 1)) ys[l] = expf(xs[l]);
    y = _mm_loadu_ps(ys);
  }
  return y;
}

/* out[j] = exp(in[j] - sub) for j < n; the tail goes through the same 4-lane code. */
static void exp_shifted(float *out, const float *in, float sub, int n) {
  const __m128 s = _mm_set1_ps(sub);
  int j = 0;
  for (; j + 4 <= n; j += 4) _mm_storeu_ps(out + j, exp4(_mm_sub_ps(_mm_loadu_ps(in + j), s)));
  if (j < n) {
    float t[4] = {0, 0, 0, 0};
    for (int l = 0; l < n - j; l++) t[l] = in[j + l];
    _mm_storeu_ps(t, exp4(_mm_sub_ps(_mm_loadu_ps(t), s)));
    for (int l = 0; l < n - j; l++) out[j + l] = t[l];
  }
}

static float exp1(float x) {
  float t[4] = {x, x, x, x};
  _mm_storeu_ps(t, exp4(_mm_loadu_ps(t)));
  return t[0];
}

#else
static float exp_lane(float x) {
  if (!(x > -87.0f && x < 88.0f)) return expf(x);
  const float magic = 12582912.0f;
  float n = (x * 1.44269504088896341f + magic) - magic;
  float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  uint32_t e = (uint32_t)((int32_t)n + 127) << 23;
  float two_n;
  memcpy(&two_n, &e, sizeof two_n);
  return p * two_n;
}

static void exp_shifted(float *out, const float *in, float sub, int n) {
  for (int j = 0; j < n; j++) out[j] = exp_lane(in[j] - sub);
}

static float exp1(float x) { return exp_lane(x); }
#endif

/* exp_shifted, on 8 lanes where the machine has AVX2 and FMA: the same bits either way. */
static void exp_rows(float *out, const float *in, float sub, int n, int simd) {
#ifdef UFP4_HAVE_X86
  if (simd) {
    ufp4_m_exp_cephes_sub_avx2(out, in, sub, n);
    return;
  }
#endif
  (void)simd;
  exp_shifted(out, in, sub, n);
}

static int ce_check(const char *what, const int32_t *targets, int BT, int V, int *n_valid) {
  size_t n;
  int rc = layer_count(&n, what, BT, V, 1, 1);
  if (rc < 0) return rc;
  int cnt = 0;
  for (int i = 0; i < BT; i++) {
    if (targets[i] == UFP4_IGNORE_INDEX) continue;
    if (targets[i] < 0 || targets[i] >= V)
      return ufp4_fail(UFP4_EINVAL, "%s: target %d at row %d is outside [0, %d) and not %d", what,
                       (int)targets[i], i, V, UFP4_IGNORE_INDEX);
    cnt++;
  }
  *n_valid = cnt;
  return 0;
}

int ufp4_cross_entropy_forward(float *losses, float *lse, double *mean_loss, int *n_valid,
                               const float *logits, const int32_t *targets, int BT, int V) {
  const char *what = "ufp4_cross_entropy_forward";
  LAYER_NONNULL(what, losses);
  LAYER_NONNULL(what, lse);
  LAYER_NONNULL(what, mean_loss);
  LAYER_NONNULL(what, logits);
  LAYER_NONNULL(what, targets);
  int cnt;
  int rc = ce_check(what, targets, BT, V, &cnt);
  if (rc < 0) return rc;
  const int simd = ufp4_simd_enabled();
#pragma omp parallel for schedule(static)
  for (int i = 0; i < BT; i++) {
    const float *li = logits + (size_t)i * V;
    float mx = -FLT_MAX;
    for (int j = 0; j < V; j++)
      if (li[j] > mx) mx = li[j];
    double sum = 0.0;
    float e[256];
    for (int j0 = 0; j0 < V; j0 += 256) {
      int nj = V - j0 < 256 ? V - j0 : 256;
      exp_rows(e, li + j0, mx, nj, simd);
      for (int j = 0; j < nj; j++) sum += e[j];
    }
    double l = (double)mx + log(sum);
    lse[i] = (float)l;
    /* The loss uses the double lse, so a near-certain prediction keeps its small loss digits. */
    losses[i] = targets[i] == UFP4_IGNORE_INDEX ? 0.0f : (float)(l - li[targets[i]]);
  }
  double total = 0.0;
  for (int i = 0; i < BT; i++)
    if (targets[i] != UFP4_IGNORE_INDEX) total += losses[i];
  *mean_loss = cnt ? total / cnt : 0.0;
  if (n_valid) *n_valid = cnt;
  return 0;
}

int ufp4_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                const int32_t *targets, float dloss, int BT, int V) {
  const char *what = "ufp4_cross_entropy_backward";
  LAYER_NONNULL(what, dlogits);
  LAYER_NONNULL(what, logits);
  LAYER_NONNULL(what, lse);
  LAYER_NONNULL(what, targets);
  int cnt;
  int rc = ce_check(what, targets, BT, V, &cnt);
  if (rc < 0) return rc;
  const float scale = cnt ? dloss / (float)cnt : 0.0f;
  const int simd = ufp4_simd_enabled();
#pragma omp parallel for schedule(static)
  for (int i = 0; i < BT; i++) {
    const float *li = logits + (size_t)i * V;
    float *di = dlogits + (size_t)i * V;
    int tgt = targets[i];
    if (tgt == UFP4_IGNORE_INDEX) {
      for (int j = 0; j < V; j++) di[j] = 0.0f;
      continue;
    }
    float m = lse[i];
    const float et = exp1(li[tgt] - m);
    /* Element j is read before it is written, so dlogits == logits is safe; (e - 0) * scale is
     * e * scale, and the target's (e - 1) * scale is written last from its saved logit. */
    exp_rows(di, li, m, V, simd);
    for (int j = 0; j < V; j++) di[j] *= scale;
    di[tgt] = (et - 1.0f) * scale;
  }
  return 0;
}
