#include <math.h>
#include <stdlib.h>

#include "training/split_batch.h"
#include "ufp4/error.h"
#include "ufp4/train.h"

int ufp4_evaluate(ufp4_model *m, ufp4_batch_fn val_batch, void *ctx, int n, int B, int T,
                  double *loss) {
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
  int32_t *inp = malloc(sizeof(int32_t) * (size_t)B * T),
          *tgt = malloc(sizeof(int32_t) * (size_t)B * T);
  int rc = (!tokens || !inp || !tgt) ? ufp4_fail(UFP4_ENOMEM, "evaluate: out of memory") : 0;
  double total = 0;
  for (int i = 0; i < n && !rc; i++) {
    double l;
    if (!(rc = val_batch(ctx, (uint64_t)i, tokens))) {
      train_split_batch(tokens, inp, tgt, B, T);
      rc = ufp4_model_forward(m, inp, tgt, B, T, &l);
      total += l;
    }
  }
  free(tokens);
  free(inp);
  free(tgt);
  if (!rc) *loss = n > 0 ? total / n : NAN;
  return rc;
}
