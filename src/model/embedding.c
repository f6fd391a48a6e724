/* Token embedding lookup and its deterministic gradient. */
#include <omp.h>
#include <string.h>

#include "model/layer_check.h"
#include "ufp4/layers.h"

/* The unit of dwte's columns shared out over the threads (16: one cache line when the rows are
 * aligned), and the size below which the backward pass runs on one thread. It is a scatter-add of
 * one row per token, bound by memory latency: at the study's sizes (1024 tokens of d = 64 or 128)
 * two threads gained nothing (1 thread / 2 threads 0.53-1.20 over four measurements: `ufp4 bench
 * kernels`, docs/PERFORMANCE.md). */
#define EMB_COL_BLOCK 16
#define EMB_PARALLEL_MIN ((size_t)1 << 20)

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
  const int nblocks = (C + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
  /* Each thread owns a contiguous run of column blocks and adds the rows into it in order
   * 0..BT-1, one pass over the rows: repeated tokens accumulate in the same order whatever the
   * thread count. */
#pragma omp parallel if ((size_t)BT * (size_t)C >= EMB_PARALLEL_MIN)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int c0 = (int)((long)nblocks * t / nt) * EMB_COL_BLOCK;
    const int c1e = (int)((long)nblocks * (t + 1) / nt) * EMB_COL_BLOCK, c1 = c1e < C ? c1e : C;
    for (int i = 0; c0 < c1 && i < BT; i++) {
      float *dst = dwte + (size_t)tokens[i] * C;
      const float *src = dout + (size_t)i * C;
      for (int c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
  return 0;
}
