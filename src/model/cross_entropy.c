/* Fused softmax + cross-entropy over the vocabulary, with an ignore index. */
#include <float.h>
#include <math.h>

#include "model/layer_check.h"
#include "ufp4/layers.h"

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
#pragma omp parallel for schedule(static)
  for (int i = 0; i < BT; i++) {
    const float *li = logits + (size_t)i * V;
    float mx = -FLT_MAX;
    for (int j = 0; j < V; j++)
      if (li[j] > mx) mx = li[j];
    double sum = 0.0;
    for (int j = 0; j < V; j++) sum += expf(li[j] - mx);
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
    /* Element j is read before it is written, so dlogits == logits is safe. */
    for (int j = 0; j < V; j++) di[j] = (expf(li[j] - m) - (j == tgt ? 1.0f : 0.0f)) * scale;
  }
  return 0;
}
