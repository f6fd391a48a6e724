/* A Llama-style decoder (Hugging Face LlamaForCausalLM architecture) with every linear projection
 * of the transformer blocks running under a recipe (recipe.h, linear.h).
 *
 *   tokens -> embed_tokens -> L x block -> norm -> lm_head -> logits
 *   block: h += o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))   n1 = rmsnorm(h)
 *          h += down_proj(silu(gate_proj(n2)) * up_proj(n2))                   n2 = rmsnorm(h)
 *
 * Embeddings, norms, the attention core and the loss stay fp32; blocks listed by the recipe's
 * keep_first / keep_last run their projections in fp32 too, and so does lm_head unless a projection
 * override names it (ufp4_model_set_recipes). No biases.
 *
 * Mixture of experts (moe_experts > 0, moe.h): layer l is an MoE layer when (l + 1) % moe_every == 0
 * (Qwen2-MoE's decoder_sparse_step); its MLP is replaced by an MoE block (router, moe_experts SwiGLU
 * experts of width moe_ffn, top-k routing, optional shared expert of width moe_shared_ffn) whose
 * objective term (aux_coef * aux + z_coef * z-loss) is summed over MoE layers: it is NOT part of the
 * cross-entropy returned as the loss (ufp4_model_aux_loss reports it) but backward adds its
 * gradient, scaled by dloss. Other layers keep the dense MLP of ffn_dim.
 *
 * Parameters, gradients and the two AdamW moments each live in one allocation, as a sequence of
 * tensors in the order of ufp4_model_tensor(); tensor names are Hugging Face's, so a safetensors
 * file of the parameters loads in transformers as LlamaForCausalLM (dense) or, with the zero q/k/v
 * biases the checkpoint adds, as Qwen2MoeForCausalLM (MoE). A dense model's table (moe_experts 0) is
 * exactly the Llama one. An MoE layer's tensors, in order:
 *   input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
 *   mlp.gate [E, C] (router), then for e = 0..E-1 mlp.experts.{e}.{gate,up,down}_proj,
 *   then, when moe_shared_ffn > 0, mlp.shared_expert.{gate,up,down}_proj and
 *   mlp.shared_expert_gate [1, C]. */
#ifndef UFP4_MODEL_H
#define UFP4_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/linear.h"
#include "ufp4/moe.h"
#include "ufp4/recipe.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Most transformer blocks a model may have: a layer's stochastic-rounding streams carry its index
 * in a field of UFP4_STREAM_LAYER_BITS bits (stream.h), so more layers would share streams. The
 * experts limit is UFP4_MOE_MAX_EXPERTS (moe.h). */
#define UFP4_MODEL_MAX_LAYERS (1 << UFP4_STREAM_LAYER_BITS)

/* The projections of a block, as the stream's and the probe's proj (MoE experts: moe.h). */
typedef enum {
  UFP4_PROJ_Q = 0,
  UFP4_PROJ_K,
  UFP4_PROJ_V,
  UFP4_PROJ_O,
  UFP4_PROJ_GATE,
  UFP4_PROJ_UP,
  UFP4_PROJ_DOWN,
  UFP4_N_PROJ
} ufp4_proj;

typedef struct {
  int n_layers;       /* 1..UFP4_MODEL_MAX_LAYERS */
  int d_model;
  int n_heads;
  int n_kv_heads;     /* grouped-query attention when < n_heads; 0 = n_heads (see resolve) */
  int ffn_dim;
  int seq_len;        /* the longest sequence (rope tables, activations) */
  int vocab;
  float rms_eps;
  double rope_theta;
  float init_std;
  int tie_embeddings; /* lm_head shares embed_tokens */
  /* Mixture of experts (moe.h); the widths and top_k are checked only when moe_experts > 0. */
  int moe_experts;    /* routed experts per MoE layer, <= UFP4_MOE_MAX_EXPERTS; 0 = dense (default) */
  int moe_top_k;      /* experts per token, 1 or 2, <= moe_experts (default 2) */
  int moe_ffn;        /* width of each routed expert; 0 = ffn_dim (see resolve) */
  int moe_shared_ffn; /* width of the shared expert; 0 = none (default) */
  int moe_every;      /* layer l is MoE when (l + 1) % moe_every == 0 (default 1: every layer) */
  float moe_capacity; /* capacity factor; 0 = dropless (default) */
  float moe_aux_coef; /* load-balancing loss coefficient (default 0.01) */
  float moe_z_coef;   /* router z-loss coefficient (default 0) */
} ufp4_model_config;

ufp4_model_config ufp4_model_config_default(void);
/* Fills the fields whose default depends on others (n_kv_heads 0 -> n_heads; with moe_experts > 0,
 * moe_ffn 0 -> ffn_dim). */
void ufp4_model_config_resolve(ufp4_model_config *c);
int ufp4_model_config_check(const ufp4_model_config *c);
/* Number of parameters. */
size_t ufp4_model_param_count(const ufp4_model_config *c);
/* Parameters one token touches: all of them, less the (moe_experts - moe_top_k) routed experts it
 * skips in each MoE layer (embedding and head counted whole). Equals param_count for a dense model. */
size_t ufp4_model_active_param_count(const ufp4_model_config *c);
/* 1 when layer l is an MoE layer under c. */
int ufp4_model_layer_is_moe(const ufp4_model_config *c, int l);
/* Number of MoE layers. */
int ufp4_model_moe_layers(const ufp4_model_config *c);

#define UFP4_TENSOR_NAME_MAX 96
typedef struct {
  char name[UFP4_TENSOR_NAME_MAX];
  int ndim;
  size_t shape[2];
  size_t offset; /* in floats from the start of the parameter block */
  size_t count;
} ufp4_tensor_info;

/* Number of parameter tensors, and the i-th (name, shape, offset). */
int ufp4_model_tensor_count(const ufp4_model_config *c);
void ufp4_model_tensor(const ufp4_model_config *c, int i, ufp4_tensor_info *out);

typedef struct ufp4_model ufp4_model;

/* Allocates a model for batches of up to B sequences of up to c->seq_len tokens. */
int ufp4_model_create(ufp4_model **out, const ufp4_model_config *c, int B);
void ufp4_model_free(ufp4_model *m);
const ufp4_model_config *ufp4_model_get_config(const ufp4_model *m);
float *ufp4_model_params(ufp4_model *m);
float *ufp4_model_grads(ufp4_model *m);
size_t ufp4_model_num_params(const ufp4_model *m);

/* Initializes the weights from `seed`: linear and embedding weights N(0, init_std) (Philox,
 * one stream per tensor), norm weights 1. */
void ufp4_model_init(ufp4_model *m, uint64_t seed);

/* Projections: the linear layers that run through a recipe, each named by its Hugging Face module
 * name, which is its weight tensor's name (ufp4_model_tensor, the one source of names) without
 * ".weight": model.layers.L.self_attn.{q,k,v,o}_proj, model.layers.L.mlp.{gate,up,down}_proj, in
 * an MoE layer model.layers.L.mlp.experts.E.{gate,up,down}_proj and
 * model.layers.L.mlp.shared_expert.{gate,up,down}_proj, and lm_head last (also when it is tied to
 * the embedding). The MoE router (mlp.gate) and the shared expert's sigmoid gate are not
 * projections: moe.h keeps them fp32 always. */
#define UFP4_PROJ_HEAD UFP4_N_PROJ /* lm_head's projection id (stream and probe) */
typedef struct {
  char name[UFP4_TENSOR_NAME_MAX];
  int layer;  /* transformer block; -1 for lm_head */
  int proj;   /* ufp4_proj (an expert's: GATE, UP or DOWN), or UFP4_PROJ_HEAD */
  int expert; /* MoE expert, n_experts for the shared expert; -1 outside MoE MLPs */
} ufp4_projection_info;

/* Number of projections of a model of config c. */
int ufp4_model_projection_count(const ufp4_model_config *c);
/* Fills out[0 .. count-1], in the tensor table's order, lm_head last. */
void ufp4_model_projections(const ufp4_model_config *c, ufp4_projection_info *out);

/* Most overrides one run may list. */
#define UFP4_MAX_OVERRIDES 64
/* The recipe of every projection (out[count]) under `base` and the overrides: first base, with
 * the blocks of base's keep_first / keep_last in fp32 (the same as the overrides
 * "model.layers.L.*=fp32" for those L) and lm_head in fp32; then each override of `overrides`, a
 * ';'-separated list of PATTERN=SPEC items (NULL or "" for none), in order, so the last match
 * wins: PATTERN is an fnmatch glob on the projection names ('*' also crosses dots), SPEC a recipe
 * spec applied to each matching projection's recipe (ufp4_recipe_apply: a full spec replaces it, a
 * partial one like "rht=none" or "fprop=bf16" changes those keys). The resolved recipes carry
 * keep_first = keep_last = 0. UFP4_EINVAL naming the item when one is not PATTERN=SPEC, its
 * pattern matches no projection (a typo would otherwise change nothing), its spec does not parse,
 * or it sets keep_first / keep_last (a run-level key). */
int ufp4_model_resolve_recipes(const ufp4_model_config *c, const ufp4_recipe *base,
                               const char *overrides, ufp4_recipe *out);
/* The resolved table in compact form (malloc'ed, NULL when out of memory): one line per distinct
 * recipe, in order of first use, "SPEC: NAMES\n", SPEC canonical (ufp4_recipe_format) and NAMES the
 * projections under it, space-separated, with each name's layer index folded over the layers that
 * share it: model.layers.*.self_attn.q_proj (every layer that has the projection), or
 * model.layers.{0-2,5}.mlp.down_proj. */
char *ufp4_model_recipe_table(const ufp4_model_config *c, const ufp4_recipe *per_proj);

/* Sets the recipe (copied) used by the projections, with no overrides; rht signs come from seed. */
int ufp4_model_set_recipe(ufp4_model *m, const ufp4_recipe *r, uint64_t seed);
/* Sets base and the projection overrides (ufp4_model_resolve_recipes); each distinct recipe draws
 * its RHT signs from seed as ufp4_model_set_recipe does, so a run without overrides keeps its
 * bits. On error the model keeps its recipes. */
int ufp4_model_set_recipes(ufp4_model *m, const ufp4_recipe *base, const char *overrides, uint64_t seed);
/* The recipe projection i (ufp4_model_projections' order) runs under now. */
const ufp4_recipe *ufp4_model_projection_recipe(const ufp4_model *m, int i);
/* 1: every projection runs in fp32 whatever the recipe (the reference forward of drift analysis). */
void ufp4_model_set_high_precision(ufp4_model *m, int on);
/* Diagnostics hook passed to every block projection (linear.h); NULL removes it. */
void ufp4_model_set_probe(ufp4_model *m, const ufp4_linear_probe *probe);
/* The stochastic-rounding streams of the next forward and backward (stream.h): `step` is the run's
 * micro-batch index (optimizer step * micro-batches per step + micro-batch), `rank` the
 * data-parallel rank; each projection adds its layer, expert, projection and operand. A
 * quantized GEMM refuses a step or rank that does not fit its stream field. */
void ufp4_model_set_step(ufp4_model *m, uint64_t step, int rank);
/* 0 when a run of `steps` optimizer steps of `micro_steps` micro-batches on `world` ranks gives
 * every quantized operand of every projection (and expert) its own stochastic-rounding stream;
 * otherwise UFP4_EINVAL naming the field that does not fit (e.g. a world of more than 1024). */
int ufp4_model_check_streams(const ufp4_model_config *c, uint64_t steps, int micro_steps, int world);

/* Forward over tokens [B, T] (T <= seq_len). With targets (may be NULL) computes the mean
 * cross-entropy into *loss (ignore index -1 counts nothing). Keeps activations for backward. */
int ufp4_model_forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                       double *loss);
/* Backward of the last forward (which must have had targets): ACCUMULATES into the gradients,
 * scaled by dloss (1 for a plain mean, 1/accum for gradient accumulation). */
int ufp4_model_backward(ufp4_model *m, float dloss);
void ufp4_model_zero_grads(ufp4_model *m);
/* Sum over MoE layers of the objective term (aux_coef * aux + z_coef * z) of the last forward; 0 for
 * a dense model. Not included in the loss of ufp4_model_forward. */
double ufp4_model_aux_loss(const ufp4_model *m);
/* Routing statistics of MoE layer `layer` in the last forward (moe.h; pointers valid until the next
 * forward): 0, or UFP4_EINVAL when the layer is not an MoE layer. */
int ufp4_model_moe_stats(const ufp4_model *m, int layer, ufp4_moe_stats *out);
/* Logits of the last forward, [B*T, vocab]; only valid before backward (which reuses them). */
const float *ufp4_model_logits(const ufp4_model *m);

/* Residual stream after each block of the last forward: [n_layers + 1][B*T*d_model], index 0 the
 * embeddings (for drift analysis). */
const float *ufp4_model_residual(const ufp4_model *m, int layer);

/* Backward drift analysis: during ufp4_model_backward, fn(ud, layer, dx, n) is called with dx, the
 * gradient (scaled by dloss) of the objective with respect to the residual stream
 * ufp4_model_residual(m, layer): first for layer = n_layers (the input of the final norm), then,
 * after block l's backward, for layer = l (the input of block l; 0 the embeddings). dx holds
 * n = B*T*d_model floats of the last forward and is valid only during the call. NULL removes the
 * hook; it changes no result. */
typedef void (*ufp4_resid_grad_fn)(void *ud, int layer, const float *dx, size_t n);
void ufp4_model_set_resid_grad_hook(ufp4_model *m, ufp4_resid_grad_fn fn, void *ud);

/* Bytes of the activations kept by forward for backward (residual stream, per-layer buffers,
 * attention probabilities, final norm, logits, per-row loss terms) at the allocated batch: the
 * model's one activation allocation. Scratch (linear-layer operands, activation gradients) is
 * ufp4_model_scratch_bytes. */
size_t ufp4_model_activation_bytes(const ufp4_model *m);
size_t ufp4_model_scratch_bytes(const ufp4_model *m);

/* Phase timers for benchmarks, in seconds accumulated since the last reset. Off by default;
 * when on, the model reads CLOCK_MONOTONIC around its phases and changes no result.
 *   forward, backward        the whole ufp4_model_forward / ufp4_model_backward
 *   linear_prepare           block projections: operand copy/transpose, rounding, RHT, quantization
 *   linear_gemm              block projections: the SGEMMs
 *   attention                attention core, forward and backward
 *   head                     final norm, lm_head GEMMs and cross-entropy, forward and backward */
typedef struct {
  double forward, backward, linear_prepare, linear_gemm, attention, head;
} ufp4_model_times;
void ufp4_model_set_timing(ufp4_model *m, int on);
void ufp4_model_phase_times(const ufp4_model *m, ufp4_model_times *out);
void ufp4_model_reset_phase_times(ufp4_model *m);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
