/* Drift through depth under several recipes, at fixed weights: how a recipe's rounding error
 * compounds with depth in the forward and in the backward, measured on a model's own passes
 * against the exact (fp32) passes with the same weights and tokens, over many batches, so that a
 * trend in depth is told from batch-to-batch noise by a confidence interval. `ufp4 drift` prints
 * and plots it; model_io.h's ufp4_drift_checkpoint feeds it a checkpoint and a validation shard.
 *
 * Per batch b (tokens from batch_fn; the inputs are the first T tokens of each row, the targets the
 * next T):
 *  1. the exact pass: every projection in fp32 (ufp4_model_set_high_precision), the forward with
 *     targets and, when spec->backward, the backward with dloss 1;
 *  2. for each recipe, the same passes under the recipe with its training numerics: all three
 *     GEMMs rounded as the recipe says, kept blocks in fp32, the recipe set with seed 1 (RHT signs
 *     and the stochastic-rounding key) and ufp4_model_set_step(m, b, 0), so stochastic rounding
 *     draws its own reproducible stream in every batch.
 * One exact pass serves every recipe of the batch.
 *
 * Points, with the exact pass as the reference (a recipe's tensor q against the exact r: norm ratio
 * ||q|| / ||r|| and cosine, diagnostics.h's ufp4_drift_compare), each a series over batches:
 *   forward  l = 0..L: the residual stream after block l; 0 is the embeddings, identical by
 *            construction (ratio 1).
 *   backward l = 0..L: dX, the gradient of the loss with respect to the residual stream at the
 *            input of block l (model.h's ufp4_model_set_resid_grad_hook); l = L is the gradient
 *            entering the last block from the head, which differs only through the forward drift.
 *            The backward runs from L down to 0, so its error compounds as l falls.
 *   weights  i = 0..n_tensors-1, in ufp4_model_tensor order (names there): dW, the gradient of
 *            tensor i (embeddings, norms and head included).
 *   slopes   one point per batch: the least-squares slope of ln(norm ratio) against the number of
 *            blocks the signal has crossed: l for the forward over l = 1..L (the embeddings are 1
 *            by construction and would make a one-time step at block 1 look like a trend), L - l
 *            for dX over l = L..0. A ratio that shrinks by a factor g per block gives slope ln g:
 *            negative is compounding shrinkage, 0 is none (a step at the first block is not a
 *            slope). NaN when a ratio is not positive and finite or there are under 2 points.
 *
 * Summaries (ufp4_drift_summarize), per recipe and point: the mean over the n batches (their sum in
 * batch order divided by n) and the 95% Student-t interval mean -+ t_{0.975, n-1} s / sqrt(n), s
 * the sample standard deviation (divisor n - 1): the batches are independent draws of the shard.
 * n < 2 leaves the interval NaN; NaN values propagate. */
#ifndef UFP4_DRIFT_H
#define UFP4_DRIFT_H

#include <stdint.h>
#include "ufp4/model.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Batch `index` as B rows of T + 1 tokens (the trainer's ufp4_batch_fn has this signature). */
typedef int (*ufp4_token_batch_fn)(void *ctx, uint64_t index, int32_t *tokens);

typedef struct {
  const char *const *recipes; /* recipe.h specs, one column group each */
  int n_recipes;
  long batches; /* batches 0..batches-1 of batch_fn */
  int batch;    /* B: the model must have been created for at least B sequences */
  ufp4_token_batch_fn batch_fn;
  void *ctx;
  int backward; /* 1: the backward points too (dX, dW, the dX slope); 0: the forward only */
} ufp4_drift_spec;

/* A mean over batches with its 95% t interval. */
typedef struct {
  double mean, ci_low, ci_high;
  long n; /* batches */
} ufp4_drift_ci;

/* The mean of x[0..n-1] (summed in order, divided by n) and its 95% t interval (NaN for n < 2). */
ufp4_drift_ci ufp4_drift_summarize(const double *x, long n);

/* One measure at n_points points per recipe. */
typedef struct {
  int n_points;
  double *values;    /* [n_recipes][n_points][n_batches]: the value of each batch, in batch order */
  ufp4_drift_ci *ci; /* [n_recipes][n_points]: their summary */
} ufp4_drift_series;

typedef struct {
  int n_recipes, n_layers; /* forward and backward: n_layers + 1 points per recipe */
  int n_tensors;           /* weight points per recipe (0 without the backward) */
  int backward;            /* the dx_* and dw_* series were measured */
  long n_batches;
  ufp4_drift_series fwd_ratio, fwd_cosine, fwd_slope; /* slope: 1 point */
  ufp4_drift_series dx_ratio, dx_cosine, dx_slope;    /* empty without the backward */
  ufp4_drift_series dw_ratio, dw_cosine;
} ufp4_drift_table;

/* The summary of recipe k at point p of series s. */
static inline const ufp4_drift_ci *ufp4_drift_at(const ufp4_drift_series *s, int k, int p) {
  return &s->ci[(long)k * s->n_points + p];
}

/* Measures the spec's recipes on m (see above). Leaves m with the last recipe set, step
 * batches - 1, fp32 off, no gradient hook and zeroed gradients (it uses the gradient buffer: call
 * it between training steps, not inside one). Fails naming a recipe that does not parse, before any
 * pass. *out is allocated (free it with ufp4_drift_table_free, also after a failure). */
int ufp4_drift_measure(ufp4_model *m, const ufp4_drift_spec *s, ufp4_drift_table *out);
void ufp4_drift_table_free(ufp4_drift_table *t);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
