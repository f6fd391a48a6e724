/* Training diagnostics: what the recipe does to each operand and GEMM, and how the error compounds
 * through depth (the paper's "layer over layer").
 *
 * ufp4_diagnostics_run writes JSON lines for one batch:
 *   per 4-bit operand  {"step","layer","proj","operand","alpha","sqnr_db","b_eff","underflow",
 *                       "mean_rel_err","shrink_bias","clipped"}   (measures.h, on the tensor the
 *                       quantizer sees, with its own RHT and rounding)
 *   per rounded GEMM   {"step","layer","proj","gemm","out_sqnr_db"}: the rounded product against
 *                       the exact product of the same (unrounded) operands
 *   MoE projections    as above with "proj" naming the expert GEMM: "expert3.gate", "shared.up"
 *                       (moe.h's UFP4_PROJ_EXPERT ids); after the batch, per (layer, kind) over the
 *                       routed experts, the same records with "proj":"experts.gate" (etc.) and
 *                       "n_experts": alpha and sqnr_db (operand) and out_sqnr_db (GEMM) are those
 *                       of the experts' tensors taken together (energy-weighted), the other
 *                       operand measures element-weighted means of the per-expert ones
 *   per MoE layer      {"step","layer","moe":{"load":[f_e...],"router_entropy","aux","z",
 *                       "objective","dropped","padded_rows","tokens"}} of the recipe forward
 *   forward drift      {"step","drift":[{"layer","norm_ratio","cosine"},...]}: the residual stream
 *                       after each block under the recipe against the fp32 forward with the same
 *                       weights and batch (layer 0 is the embedding, identical by construction)
 * It runs a forward and backward of its own: call it before a step zeroes the gradients. It changes
 * no weight and no random stream, so training with diagnostics gives the same bits as without. */
#ifndef UFP4_DIAGNOSTICS_H
#define UFP4_DIAGNOSTICS_H

#include <stdint.h>
#include <stdio.h>
#include "ufp4/guard.h"
#include "ufp4/model.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  int layer;
  double norm_ratio; /* ||h_q|| / ||h|| */
  double cosine;
} ufp4_drift_point;

/* The measure of every drift point, a recipe's tensor q against the exact one r (n floats):
 * norm_ratio ||q|| / ||r|| (NaN when r is zero) and cosine (measures.h's ufp4_cosine); layer 0. */
ufp4_drift_point ufp4_drift_compare(const float *q, const float *r, size_t n);
/* Forward drift of one batch: out[0..n_layers] (index 0 = embeddings). */
int ufp4_forward_drift(ufp4_model *m, const int32_t *tokens, int B, int T, ufp4_drift_point *out);
/* All diagnostics of one batch (tokens/targets [B, T]) as JSON lines into `out`. */
int ufp4_diagnostics_run(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, int step,
                         FILE *out);

/* Health guards on the same pass (guard.h): the measures of every 4-bit operand the run above
 * takes are checked against `guard`, and each breach goes to `breach`, with step, layer, proj and
 * proj_name filled in, in the order the operands are measured. The guard adds no pass and no
 * measurement of its own: the checks read the measures the diagnostics compute anyway. */
typedef struct {
  const ufp4_guard *guard;
  void (*breach)(void *ud, const ufp4_guard_breach *b);
  void *ud;
} ufp4_diag_guard;
/* ufp4_diagnostics_run with guards; guard NULL is ufp4_diagnostics_run. */
int ufp4_diagnostics_run_guarded(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                                 int step, FILE *out, const ufp4_diag_guard *guard);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
