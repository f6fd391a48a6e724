/* Forward/backward kernels of a Llama-style decoder (Hugging Face LlamaForCausalLM semantics),
 * everything except the linear projections.
 *
 * Conventions shared by every kernel:
 * - Plain row-major float arrays; activations are [B*T, ...] with the token index t of batch b at
 *   row b*T + t. Dimensions are ints (> 0); element counts are computed in size_t.
 * - Backward ACCUMULATES (+=) into every gradient buffer: the caller zeroes them once per step, so
 *   gradients flowing into one tensor from several uses (residual stream, tied weights) simply add.
 *   The one exception is cross-entropy, whose backward WRITES dlogits (see there).
 * - No kernel allocates; the one that needs scratch (attention backward) takes it from the caller.
 * - Determinism: every output element is computed by exactly one OpenMP thread, in an order that
 *   does not depend on the thread count, and reductions across rows (dwte, dw of RMSNorm, dk/dv
 *   shared by GQA heads) are partitioned over the reduced-into elements, never split across
 *   threads. Results are bit-identical for any thread count.
 * - Input buffers must not alias output buffers unless the function says so.
 * - Bad arguments (NULL pointers, non-positive or inconsistent sizes, out-of-range token ids) return
 *   UFP4_EINVAL via ufp4_fail before anything is written; a size whose element count overflows
 *   size_t returns UFP4_ENOMEM. Non-finite inputs are not checked: they propagate as IEEE says. */
#ifndef UFP4_LAYERS_H
#define UFP4_LAYERS_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* ---- token embedding ----------------------------------------------------------------------
 * out[BT,C] = wte[tokens[i], :] for each row i; wte is [V,C]; tokens[i] must be in [0, V).
 * Backward: dwte[tokens[i], :] += dout[i, :]. Threads own column blocks of dwte and walk the rows
 * in order 0..BT-1, so a token repeated in the batch accumulates in a fixed order (no racy
 * scatter-add). */
int ufp4_embedding_forward(float *out, const int32_t *tokens, const float *wte, int BT, int V, int C);
int ufp4_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int BT, int V,
                            int C);

/* ---- RMSNorm (HF LlamaRMSNorm) ---------------------------------------------------------------
 * rstd[i] = 1 / sqrt(mean_j x[i,j]^2 + eps), with the mean summed in double in index order and the
 * result rounded to float once; out[i,j] = (x[i,j] * rstd[i]) * w[j] in float, the order HF uses
 * (normalize, then scale). x, out: [N,C]; w: [C]; rstd: [N], saved for backward. out may equal x.
 * Backward (r = rstd[i], s = sum_j dout[i,j] w[j] x[i,j] in double):
 *   dx[i,j] += r * dout[i,j] * w[j] - x[i,j] * r^3 * s / C
 *   dw[j]   += sum_i dout[i,j] * x[i,j] * r        (double per column, rows in order) */
int ufp4_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                         float eps);
int ufp4_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int N, int C);

/* ---- rotary position embedding (HF apply_rotary_pos_emb, rotate-half convention) -------------
 * ufp4_rope_init fills cos_tab, sin_tab [T, D/2]: inv_freq[i] = theta^(-2i/D), angle =
 * t * inv_freq[i], both computed in double and rounded to float once. (HF computes inv_freq in
 * float32, so its tables may differ from these in the last bit.) D must be even, theta > 1.
 * Forward on x [B,T,NH,D] (q with NH = H, k with NH = KVH); token t of every batch uses position t.
 * With h = D/2, c = cos_tab[t,i], s = sin_tab[t,i], for i < h:
 *   out[i]   = x[i]   * c - x[i+h] * s
 *   out[i+h] = x[i+h] * c + x[i]   * s
 * i.e. x*cos + rotate_half(x)*sin with rotate_half(x) = (-x[h:], x[:h]). out may equal x (in place).
 * Backward is the rotation by -angle: dx[i] += dout[i]*c + dout[i+h]*s,
 * dx[i+h] += dout[i+h]*c - dout[i]*s. dx must not alias dout. */
int ufp4_rope_init(float *cos_tab, float *sin_tab, int T, int D, double theta);
int ufp4_rope_forward(float *out, const float *x, const float *cos_tab, const float *sin_tab, int B,
                      int T, int NH, int D);
int ufp4_rope_backward(float *dx, const float *dout, const float *cos_tab, const float *sin_tab,
                       int B, int T, int NH, int D);

/* ---- causal self-attention core with grouped-query attention ----------------------------------
 * q, out: [B,T,H,D]; k, v: [B,T,KVH,D]; H % KVH == 0 and query head h reads kv head h / (H/KVH)
 * (HF repeat_kv). For each (b, h, t):
 *   s_j = (q_t . k_j) / sqrt(D) for j <= t;  p = softmax(s) (max subtracted, sum in double);
 *   out_t = sum_{j<=t} p_j v_j.
 * att [B,H,T,T] receives p (row t, column j), with zeros for the masked j > t; backward reads it.
 * OpenMP over (b, h) tasks; the products are single-threaded OpenBLAS GEMMs over row blocks that
 * skip the masked triangle.
 * Backward: with dp_j = dout_t . v_j and ds_j = p_j (dp_j - sum_i p_i dp_i) / sqrt(D):
 *   dq_t += sum_j ds_j k_j,  dk_j += sum_t ds_j q_t,  dv_j += sum_t p_j dout_t.
 * One thread owns one (b, kv head) and runs its H/KVH query heads in order, so the dk/dv sums over
 * the heads of a group are deterministic. scratch: ufp4_attention_scratch_floats(B, T, KVH) floats
 * (one score row per (b, kv head), used only when T > 16384; shorter rows use a stack block),
 * contents ignored and clobbered. */
int ufp4_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int KVH, int D);
size_t ufp4_attention_scratch_floats(int B, int T, int KVH);
int ufp4_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v, int B,
                            int T, int H, int KVH, int D);

/* ---- SwiGLU gate -----------------------------------------------------------------------------
 * out = silu(gate) * up elementwise over [N,F], silu(g) = g / (1 + exp(-g)) in float.
 * out may equal gate or up. Backward, with sg = 1/(1+exp(-g)):
 *   dgate += dout * up * sg * (1 + g * (1 - sg)),  dup += dout * g * sg. */
int ufp4_swiglu_forward(float *out, const float *gate, const float *up, int N, int F);
int ufp4_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, int N, int F);

/* ---- fused softmax + cross-entropy -------------------------------------------------------------
 * logits [BT,V], targets [BT] in [0, V) or UFP4_IGNORE_INDEX (any other value is EINVAL).
 * Per row: lse[i] = max + log(sum_j exp(logits[i,j] - max)) (sum in double, index order);
 * losses[i] = lse - logits[i, target], subtracted in double from the unrounded lse and then
 * rounded to float (keeps the digits of small losses); 0 for ignored rows.
 * *mean_loss = (sum of losses over non-ignored rows, in double, row order) / n_valid, as in HF's
 * CrossEntropyLoss(reduction="mean", ignore_index=...) -- the mean is over the rows that count, not
 * over BT; 0 when no row counts. *n_valid (may be NULL) receives that count. lse [BT] is saved for
 * backward so the probabilities are recomputed once, never stored.
 * Backward WRITES (does not accumulate) dlogits[i,j] = (exp(logits[i,j] - lse[i]) - [j == target])
 * * dloss / n_valid, and 0 for ignored rows. dlogits may equal logits (in place: the logits are
 * then destroyed), which is why this one kernel overwrites instead of accumulating. */
#define UFP4_IGNORE_INDEX (-1)
int ufp4_cross_entropy_forward(float *losses, float *lse, double *mean_loss, int *n_valid,
                               const float *logits, const int32_t *targets, int BT, int V);
int ufp4_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                const int32_t *targets, float dloss, int BT, int V);

/* ---- residual add ------------------------------------------------------------------------------
 * out = a + b over n floats (out may equal a or b); backward: da += dout, db += dout (da may equal
 * db, which then receives 2 * dout). */
int ufp4_residual_forward(float *out, const float *a, const float *b, size_t n);
int ufp4_residual_backward(float *da, float *db, const float *dout, size_t n);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
