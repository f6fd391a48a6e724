/* Forward drift through depth under several recipes: how a recipe's rounding error compounds with
 * depth, measured on a model's own forward (diagnostics.h's ufp4_forward_drift, averaged over
 * batches). `ufp4 drift` prints and plots it; model_io.h's ufp4_drift_checkpoint feeds it a
 * checkpoint and a validation shard. */
#ifndef UFP4_DRIFT_H
#define UFP4_DRIFT_H

#include <stdint.h>
#include "ufp4/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Batch `index` as B rows of T + 1 tokens (the trainer's ufp4_batch_fn has this signature). */
typedef int (*ufp4_token_batch_fn)(void *ctx, uint64_t index, int32_t *tokens);

typedef struct {
  const char *const *recipes; /* recipe.h specs, one column group each */
  int n_recipes;
  long batches; /* batches 0..batches-1 of batch_fn are averaged */
  int batch;    /* B: the model must have been created for at least B sequences */
  ufp4_token_batch_fn batch_fn;
  void *ctx;
} ufp4_drift_spec;

typedef struct {
  int n_recipes, n_layers; /* n_layers + 1 points per recipe: index 0 = the embeddings */
  double *ratio;           /* [n_recipes][n_layers + 1]: mean over batches of ||h_q|| / ||h|| */
  double *cosine;          /* [n_recipes][n_layers + 1]: mean over batches of cos(h_q, h) */
} ufp4_drift_table;

/* For each recipe in turn, sets it on m (leaving the last one set) and runs ufp4_forward_drift on
 * the first T tokens of each row of every batch; the means are sums of value / batches in batch
 * order. *out is allocated (free it with ufp4_drift_table_free, also after a failure). */
int ufp4_drift_measure(ufp4_model *m, const ufp4_drift_spec *s, ufp4_drift_table *out);
void ufp4_drift_table_free(ufp4_drift_table *t);

#ifdef __cplusplus
}
#endif
#endif
