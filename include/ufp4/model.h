/* A Llama-style decoder (Hugging Face LlamaForCausalLM architecture) with every linear projection
 * of the transformer blocks running under a recipe (recipe.h, linear.h).
 *
 *   tokens -> embed_tokens -> L x block -> norm -> lm_head -> logits
 *   block: h += o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))   n1 = rmsnorm(h)
 *          h += down_proj(silu(gate_proj(n2)) * up_proj(n2))                   n2 = rmsnorm(h)
 *
 * Embeddings, lm_head, norms, the attention core and the loss stay fp32; blocks listed by the
 * recipe's keep_first / keep_last run their projections in fp32 too. No biases.
 *
 * Parameters, gradients and the two AdamW moments each live in one allocation, as a sequence of
 * tensors in the order of ufp4_model_tensor(); tensor names are Hugging Face's, so a safetensors
 * file of the parameters loads in transformers as LlamaForCausalLM. */
#ifndef UFP4_MODEL_H
#define UFP4_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/linear.h"
#include "ufp4/recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int n_layers;
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
} ufp4_model_config;

ufp4_model_config ufp4_model_config_default(void);
/* Fills the fields whose default depends on others (n_kv_heads 0 -> n_heads). */
void ufp4_model_config_resolve(ufp4_model_config *c);
int ufp4_model_config_check(const ufp4_model_config *c);
/* Number of parameters. */
size_t ufp4_model_param_count(const ufp4_model_config *c);

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

/* Sets the recipe (copied) used by the block projections; rht signs come from seed. */
int ufp4_model_set_recipe(ufp4_model *m, const ufp4_recipe *r, uint64_t seed);
/* 1: every projection runs in fp32 whatever the recipe (the reference forward of drift analysis). */
void ufp4_model_set_high_precision(ufp4_model *m, int on);
/* Diagnostics hook passed to every block projection (linear.h); NULL removes it. */
void ufp4_model_set_probe(ufp4_model *m, const ufp4_linear_probe *probe);
/* The stochastic-rounding stream of this step (combined with layer and projection inside). */
void ufp4_model_set_step(ufp4_model *m, uint64_t step, int rank);

/* Forward over tokens [B, T] (T <= seq_len). With targets (may be NULL) computes the mean
 * cross-entropy into *loss (ignore index -1 counts nothing). Keeps activations for backward. */
int ufp4_model_forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                       double *loss);
/* Backward of the last forward (which must have had targets): ACCUMULATES into the gradients,
 * scaled by dloss (1 for a plain mean, 1/accum for gradient accumulation). */
int ufp4_model_backward(ufp4_model *m, float dloss);
void ufp4_model_zero_grads(ufp4_model *m);
/* Logits of the last forward, [B*T, vocab]; only valid before backward (which reuses them). */
const float *ufp4_model_logits(const ufp4_model *m);

/* Residual stream after each block of the last forward: [n_layers + 1][B*T*d_model], index 0 the
 * embeddings (for drift analysis). */
const float *ufp4_model_residual(const ufp4_model *m, int layer);

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

#ifdef __cplusplus
}
#endif
#endif
