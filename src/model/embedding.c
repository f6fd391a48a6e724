/* Token embedding lookup and its deterministic gradient. */
#include <string.h>

#include "model/layer_check.h"
#include "ufp4/layers.h"

/* Columns of dwte one thread owns at a time: wide enough to stream rows, small enough to balance. */
#define EMB_COL_BLOCK 64

static int check_tokens(const int32_t *tokens, int BT, int V, const char *what) {
  for (int i = 0; i < BT; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return ufp4_fail(UFP4_EINVAL, "%s: token %d at row %d is outside [0, %d)", what,
                       (int)tokens[i], i, V);
  return 0;
}

int ufp4_embedding_forward(float *out, const int32_t *tokens, const float *wte, int BT, int V,
                           int C) {
  const char *what = "ufp4_embedding_forward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, out);
  LAYER_NONNULL(what, tokens);
  LAYER_NONNULL(what, wte);
  if ((rc = layer_count(&n, what, BT, V, C, 1)) < 0) return rc;
  if ((rc = check_tokens(tokens, BT, V, what)) < 0) return rc;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < BT; i++)
    memcpy(out + (size_t)i * C, wte + (size_t)tokens[i] * C, (size_t)C * sizeof(float));
  return 0;
}

int ufp4_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int BT, int V,
                            int C) {
  const char *what = "ufp4_embedding_backward";
  size_t n;
  int rc;
  LAYER_NONNULL(what, dwte);
  LAYER_NONNULL(what, dout);
  LAYER_NONNULL(what, tokens);
  if ((rc = layer_count(&n, what, BT, V, C, 1)) < 0) return rc;
  if ((rc = check_tokens(tokens, BT, V, what)) < 0) return rc;
  int nblocks = (C + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
  /* Each column block belongs to one thread, which adds the rows in order 0..BT-1: repeated tokens
   * accumulate in the same order whatever the thread count. */
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * EMB_COL_BLOCK;
    int c1 = c0 + EMB_COL_BLOCK < C ? c0 + EMB_COL_BLOCK : C;
    for (int i = 0; i < BT; i++) {
      float *dst = dwte + (size_t)tokens[i] * C;
      const float *src = dout + (size_t)i * C;
      for (int c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
  return 0;
}
