/* A mixture-of-experts block (Qwen2-MoE / Switch semantics) that replaces a dense SwiGLU MLP.
 *
 * ufp4_moe_stats ends with the routing of the last forward (admitted, n_tokens, top_k, slot_expert,
 * slot_gate, slot_row), for diagnostics and tests; docs/MOE.md describes the block in full.
 *
 * Shapes: N tokens, x [N, C], E experts of width Fe (expert_ffn), optional shared expert of width Fs.
 *
 * Router (never quantized, always fp32):
 *   z = x Wr^T                       [N, E], ufp4_sgemm_abt (deterministic at any thread count)
 *   p_t = softmax(z_t)               computed in double from the float logits (max subtracted, sum in
 *                                    expert order), each p rounded to float once and stored
 * Top-k (k = 1 or 2): the k largest p_t, ties broken toward the LOWER expert index, listed in
 *   descending order of p (slot 0 = largest).
 * Gates: g_tj = p_tj / sum_{top-k} p_t, in double from the float p, rounded to float once; k = 1
 *   gives exactly 1.0f.
 * Capacity (dropped-token policy): capacity_factor 0 = dropless. Otherwise each expert keeps at most
 *   cap = ceil(capacity_factor * k * N / E) assignments (computed in double; cap >= 1), admitted in
 *   token order (t ascending, slot order within a token). An assignment beyond its expert's cap is
 *   DROPPED: it contributes nothing to out, its gate is NOT renormalized over the remaining slots,
 *   and the token keeps only its residual (plus the shared expert, when there is one). The router
 *   gradient of a dropped slot is zero through the combine but the aux and z losses still see it.
 * Grouping: expert e's admitted rows are gathered, in admission order, into one contiguous grouped
 *   buffer; group e starts at a row that is a multiple of A and is padded with ZERO rows up to the
 *   next multiple of A (an empty group takes no rows). A is UFP4_MOE_GROUP_ALIGN (16: 1x16 blocks,
 *   16x16 tiles, RHT16), or the RHT size of a 4-bit recipe that rotates Wgrad when it is larger
 *   (mxfp4: 64), since Wgrad's operands are rotated along the tokens and rht_n must divide the
 *   group's rows. So no quantization block, 16x16 tile or RHT block along tokens straddles two
 *   experts. (A forward that needs a larger A than any before reallocates the block's buffers.) Each expert's three GEMMs are ufp4_linear calls on its own group only: on the
 *   padded rows when the layer runs 4-bit operands (recipe precision fp4 and not high_precision),
 *   on the admitted rows alone under fp32/bf16, which have no blocks to keep apart (and where
 *   OpenBLAS may order a longer reduction differently even when the extra terms are zeros).
 *   What the padding does to statistics: a zero row never changes a block's amax, quantizes to
 *   exactly 0 (any grid, any rounding, SR included), and adds exactly 0 to every product; under RHT
 *   along tokens the zero rows are mixed into the rotated block, but the same rotation is applied
 *   to both Wgrad operands and cancels in the product. Quantizer diagnostics (probe) do see the
 *   zero rows (they lower the fraction of nonzero elements); stats.padded_rows counts the zero rows
 *   the GEMMs saw (0 under fp32/bf16).
 * Expert e: y = down( silu(gate(x)) * up(x) ) on its grouped rows (ufp4_linear_forward x3 and
 *   ufp4_swiglu_forward).
 * Combine: out[t] = sum over the admitted slots j of t, in slot order, of g_tj * y_{e_tj}[row],
 *   in float, per token; the first term is stored rather than added to 0 (k = 1 then gives the
 *   dense output's bits), and a token with no term (all slots dropped, no shared expert) gets 0.
 * Shared expert (shared_ffn > 0, Qwen2-MoE): out[t] = s_t * shared(x_t) + routed terms, the shared
 *   term first, with s_t = sigmoid(a_t), a_t = x_t . w_sg summed in double and rounded to float,
 *   the sigmoid in double rounded to float; w_sg [1, C] is fp32, never quantized. shared(x) is a
 *   SwiGLU MLP of width shared_ffn on all N tokens in order (one group; padded with zero rows to a
 *   multiple of A under 4-bit operands like the experts' groups, since RHT along tokens needs
 *   whole blocks) whose 3 GEMMs go through the recipe.
 * Aux loss (Switch Transformer, Fedus et al. 2021; HF load_balancing_loss_func, per layer):
 *   f_e = (top-k assignments to e, counted BEFORE capacity) / N   (sums to k)
 *   P_e = mean_t p_te,   aux = E * sum_e f_e P_e     (= k when perfectly balanced)
 *   f_e is a count and carries no gradient; d aux / d p_te = E f_e / N.
 * z-loss (ST-MoE, Zoph et al. 2022): zl = mean_t (logsumexp_e z_te)^2.
 * Objective term of the block: aux_coef * aux + z_coef * zl (doubles). It is NOT part of out; the
 *   caller adds it to its objective and backward adds its gradient scaled by dloss.
 * Stochastic-rounding streams / probe ids: ctx is the TEMPLATE (the dense gate projection's ctx of
 *   this layer, proj 4). Expert e, GEMM kind k (0 gate, 1 up, 2 down) runs with a copy of it whose
 *   stream has proj = template.stream.proj + k and expert = e (stream.h), and whose probe id is
 *   proj = UFP4_PROJ_EXPERT(e, k);
 *   the shared expert uses e = E. Expert 0 therefore uses exactly the dense gate/up/down streams:
 *   E = 1, k = 1, no shared expert equals the dense MLP bit for bit under every recipe when N is a
 *   multiple of A, and under fp32/bf16 at any N. (With 4-bit operands and N not a multiple of A
 *   the dense layer ends in a short token block, or refuses the RHT, where the group is padded.)
 * Determinism: experts run one after another, each linear internally parallel; gather, combine and
 *   scatter run per token (one thread owns one token row, slots in order); router reductions run in
 *   a fixed order. Results are bit-identical at any thread count.
 * Backward: dx and every gradient in g ACCUMULATE (+=). Per expert in order: dy_row = g_tj *
 *   dout[t]; down, swiglu, gate and up backward on the group (gate's Dgrad first, then up's, into a
 *   zeroed grouped dx). Then dx receives, in this order: the shared expert's Dgrads (gate, then up;
 *   through a zeroed padded buffer when its rows are padded), its sigmoid gate's term
 *   (da_t = (dout_t . shared(x_t)) s_t (1 - s_t) in double; dx_t += float(da_t) w_sg; dw_sg +=
 *   sum_t da_t x_t in double, token order), per token the grouped dx rows of its admitted slots in
 *   slot order, and last the router's dz Wr (fp32 GEMM; dWr += dz^T x likewise). The router
 *   gradient flows through the gates (g = p / S, S the top-k sum, dropped slots included in S), the
 *   aux loss and the z-loss, then the softmax, all in double per token; with k = 1 the gate is the
 *   constant 1 and passes no gradient.
 * g must hold a gradient tensor for every tensor w holds. Bad input (NULL pointers, N = 0 or above
 *   max_tokens, backward before forward) returns a negative ufp4_status; non-finite values are not
 *   checked and propagate (a NaN logit routes deterministically, never out of bounds). */
#ifndef UFP4_MOE_H
#define UFP4_MOE_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/linear.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Probe id of expert e's GEMM kind k (0 gate, 1 up, 2 down); shared expert: e = n_experts.
 * Dense projections keep 0..6. */
#define UFP4_PROJ_EXPERT(e, k) (8 + 3 * (e) + (k))
/* Most experts a block may have: with the shared expert (e = E) it stays within the stream's
 * expert field (stream.h, UFP4_STREAM_EXPERT_BITS). */
#define UFP4_MOE_MAX_EXPERTS 1024
/* Rows of every group are padded to a multiple of this, or of a longer Wgrad RHT (Grouping above). */
#define UFP4_MOE_GROUP_ALIGN 16

typedef struct {
  int n_experts;          /* 1 <= E <= UFP4_MOE_MAX_EXPERTS */
  int top_k;              /* 1 or 2, <= E */
  int expert_ffn;         /* width of each routed expert */
  int shared_ffn;         /* 0 = no shared expert */
  float capacity_factor;  /* 0 = dropless */
  float aux_coef, z_coef; /* objective coefficients (0 = off) */
} ufp4_moe_config;

typedef struct {          /* per expert e: pointers into the model's parameter (or gradient) block */
  float *router;          /* [E, C] */
  float **gate, **up;     /* E pointers to [Fe, C] */
  float **down;           /* E pointers to [C, Fe] */
  float *shared_gate, *shared_up, *shared_down, *shared_router; /* [Fs,C],[Fs,C],[C,Fs],[1,C]; NULL if none */
} ufp4_moe_tensors;

typedef struct ufp4_moe ufp4_moe;  /* routing, saved activations and scratch of ONE MoE block */

/* Allocates everything for up to max_tokens tokens (one allocation per kind of buffer; grouped rows
 * <= k*N + 16*(E+1)), for groups aligned to 16 rows; a forward under a recipe that needs a larger
 * alignment (Grouping above) reallocates them once, and may then fail with UFP4_ENOMEM. */
int ufp4_moe_create(ufp4_moe **out, const ufp4_moe_config *cfg, int C, size_t max_tokens);
void ufp4_moe_free(ufp4_moe *s);
/* Bytes of the saved activations and scratch held by s (at its current alignment: before the first
 * forward of a recipe that aligns groups to more than 16 rows, the 16-row sizing). */
size_t ufp4_moe_activation_bytes(const ufp4_moe *s);
/* out [N, C] is WRITTEN (N <= max_tokens). ctx: template (dense gate proj ctx of this layer).
 * x is copied (backward needs it), so the caller may reuse its buffer. */
int ufp4_moe_forward(ufp4_moe *s, const ufp4_moe_tensors *w, const ufp4_linear_ctx *ctx, const float *x,
                     float *out, size_t N);
/* After forward on the same s and w (with the same ctx): dx [N, C] and every gradient in g ACCUMULATE; the
 * objective term's gradient is scaled by dloss. dx may be NULL. */
int ufp4_moe_backward(ufp4_moe *s, const ufp4_moe_tensors *w, const ufp4_moe_tensors *g,
                      const ufp4_linear_ctx *ctx, const float *dout, float *dx, float dloss);
/* Per-expert recipes (projection overrides, model.h): expert e's GEMM k (0 gate, 1 up, 2 down; the
 * shared expert is e = n_experts) runs under recipes[3 e + k] with RHT signs signs[3 e + k]
 * instead of the template's recipe and signs; streams and probe ids stay as above. The groups are
 * padded when any expert GEMM has 4-bit operands. NULL arrays (the default) put every expert under
 * the template's recipe. The arrays are not copied: they must outlive the block's use of them. */
void ufp4_moe_set_expert_recipes(ufp4_moe *s, const ufp4_recipe *const *recipes, const float *const *signs);

typedef struct {
  double aux, z, objective;   /* aux and z of the last forward, objective = aux_coef*aux + z_coef*z */
  double router_entropy;      /* mean over tokens of -sum_e p log p (nats) */
  int n_experts;
  const double *load;         /* [E]: f_e, fraction of tokens routed to e (sums to k), before capacity */
  size_t dropped, padded_rows; /* assignments dropped by capacity; zero rows added by padding */
  /* appended (see top) */
  const size_t *admitted;     /* [E]: rows of expert e after capacity */
  size_t n_tokens;            /* N of the last forward */
  int top_k;
  const int *slot_expert;     /* [N * top_k]: expert of slot j of token t at t*top_k + j */
  const float *slot_gate;     /* [N * top_k]: its renormalized gate g_tj */
  const ptrdiff_t *slot_row;  /* [N * top_k]: its row in the grouped buffer, -1 when dropped */
} ufp4_moe_stats;
/* Pointers stay valid until the next forward or free; before the first successful forward every
 * field but n_experts and top_k is 0 or NULL. */
void ufp4_moe_get_stats(const ufp4_moe *s, ufp4_moe_stats *out);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
