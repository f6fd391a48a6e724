#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/model.h"

ufp4_model_config ufp4_model_config_default(void) {
  ufp4_model_config c = {.n_layers = 4,
                         .d_model = 256,
                         .n_heads = 4,
                         .n_kv_heads = 0,
                         .ffn_dim = 768,
                         .seq_len = 256,
                         .vocab = 4096,
                         .rms_eps = 1e-5f,
                         .rope_theta = 10000.0,
                         .init_std = 0.02f,
                         .tie_embeddings = 0,
                         .moe_experts = 0,
                         .moe_top_k = 2,
                         .moe_ffn = 0,
                         .moe_shared_ffn = 0,
                         .moe_every = 1,
                         .moe_capacity = 0.0f,
                         .moe_aux_coef = 0.01f,
                         .moe_z_coef = 0.0f};
  return c;
}

void ufp4_model_config_resolve(ufp4_model_config *c) {
  if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
  if (c->moe_experts > 0 && c->moe_ffn == 0) c->moe_ffn = c->ffn_dim;
}

int ufp4_model_layer_is_moe(const ufp4_model_config *c, int l) {
  return c->moe_experts > 0 && c->moe_every >= 1 && (l + 1) % c->moe_every == 0;
}

int ufp4_model_moe_layers(const ufp4_model_config *c) {
  int n = 0;
  for (int l = 0; l < c->n_layers; l++) n += ufp4_model_layer_is_moe(c, l);
  return n;
}

static int check_moe(const ufp4_model_config *c) {
  if (c->moe_every < 1) return ufp4_fail(UFP4_EINVAL, "model: moe_every %d must be >= 1", c->moe_every);
  if (!(c->moe_capacity >= 0) || !isfinite(c->moe_capacity))
    return ufp4_fail(UFP4_EINVAL, "model: moe_capacity %g must be >= 0 (0 = dropless)", (double)c->moe_capacity);
  if (!(c->moe_aux_coef >= 0) || !isfinite(c->moe_aux_coef) || !(c->moe_z_coef >= 0) || !isfinite(c->moe_z_coef))
    return ufp4_fail(UFP4_EINVAL, "model: moe_aux_coef and moe_z_coef must be finite and >= 0");
  if (c->moe_experts == 0) return 0;
  if (c->moe_experts < 0 || c->moe_experts > UFP4_MOE_MAX_EXPERTS)
    return ufp4_fail(UFP4_EINVAL, "model: moe_experts %d not in [0, %d]", c->moe_experts, UFP4_MOE_MAX_EXPERTS);
  if (c->moe_top_k < 1 || c->moe_top_k > 2 || c->moe_top_k > c->moe_experts)
    return ufp4_fail(UFP4_EINVAL, "model: moe_top_k %d must be 1 or 2 and <= moe_experts %d", c->moe_top_k,
                     c->moe_experts);
  if (c->moe_ffn < 1)
    return ufp4_fail(UFP4_EINVAL, "model: moe_ffn %d must be positive when moe_experts > 0 (resolve turns 0 into ffn_dim)",
                     c->moe_ffn);
  if (c->moe_shared_ffn < 0)
    return ufp4_fail(UFP4_EINVAL, "model: moe_shared_ffn %d must be >= 0 (0 = no shared expert)", c->moe_shared_ffn);
  if (c->moe_every > c->n_layers)
    return ufp4_fail(UFP4_EINVAL, "model: moe_every %d > n_layers %d leaves no MoE layer", c->moe_every, c->n_layers);
  return 0;
}

int ufp4_model_config_check(const ufp4_model_config *c) {
  if (c->n_layers < 1 || c->n_layers > UFP4_MODEL_MAX_LAYERS)
    return ufp4_fail(UFP4_EINVAL, "model: n_layers %d not in [1, %d]", c->n_layers, UFP4_MODEL_MAX_LAYERS);
  if (c->d_model < 2 || c->n_heads < 1 || c->d_model % c->n_heads)
    return ufp4_fail(UFP4_EINVAL, "model: d_model %d must be a positive multiple of n_heads %d", c->d_model, c->n_heads);
  if ((c->d_model / c->n_heads) % 2)
    return ufp4_fail(UFP4_EINVAL, "model: head dim %d must be even for RoPE", c->d_model / c->n_heads);
  if (c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads)
    return ufp4_fail(UFP4_EINVAL, "model: n_heads %d must be a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
  if (c->ffn_dim < 1) return ufp4_fail(UFP4_EINVAL, "model: ffn_dim %d must be positive", c->ffn_dim);
  if (c->seq_len < 1) return ufp4_fail(UFP4_EINVAL, "model: seq_len %d must be positive", c->seq_len);
  if (c->vocab < 2) return ufp4_fail(UFP4_EINVAL, "model: vocab %d must be at least 2", c->vocab);
  if (!(c->rms_eps > 0)) return ufp4_fail(UFP4_EINVAL, "model: rms_eps must be positive");
  if (!(c->rope_theta > 1)) return ufp4_fail(UFP4_EINVAL, "model: rope_theta must be > 1");
  if (!(c->init_std > 0)) return ufp4_fail(UFP4_EINVAL, "model: init_std must be positive");
  return check_moe(c);
}

/* Per dense block: input_layernorm, q, k, v, o, post_attention_layernorm, gate, up, down. An MoE
 * block keeps the first six (ATTN) and then has its MLP tensors (moe_tensors). */
enum { PER_LAYER = 9, ATTN = 6 };

static int moe_tensors(const ufp4_model_config *c) {
  return 1 + 3 * c->moe_experts + (c->moe_shared_ffn > 0 ? 4 : 0);
}

static int layer_tensors(const ufp4_model_config *c, int l) {
  return ufp4_model_layer_is_moe(c, l) ? ATTN + moe_tensors(c) : PER_LAYER;
}

static size_t attn_floats(const ufp4_model_config *c) {
  const size_t C = (size_t)c->d_model, D = C / (size_t)c->n_heads, KV = D * (size_t)c->n_kv_heads;
  return C + C * C + 2 * KV * C + C * C + C;
}

static size_t moe_mlp_floats(const ufp4_model_config *c) {
  const size_t C = (size_t)c->d_model, Fe = (size_t)c->moe_ffn, Fs = (size_t)c->moe_shared_ffn;
  return (size_t)c->moe_experts * C + (size_t)c->moe_experts * 3 * Fe * C + (Fs ? 3 * Fs * C + C : 0);
}

static size_t layer_floats(const ufp4_model_config *c, int l) {
  return attn_floats(c) + (ufp4_model_layer_is_moe(c, l) ? moe_mlp_floats(c) : 3 * (size_t)c->ffn_dim * c->d_model);
}

int ufp4_model_tensor_count(const ufp4_model_config *c) {
  int n = 1 + 1 + (c->tie_embeddings ? 0 : 1);
  for (int l = 0; l < c->n_layers; l++) n += layer_tensors(c, l);
  return n;
}

static void set(ufp4_tensor_info *t, const char *name, size_t rows, size_t cols) {
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = cols ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols;
  t->count = cols ? rows * cols : rows;
}

/* Tensor k of the MLP of MoE layer l; returns the floats before it within that MLP. */
static size_t describe_moe(const ufp4_model_config *c, int l, int k, ufp4_tensor_info *t) {
  const size_t C = (size_t)c->d_model, Fe = (size_t)c->moe_ffn, Fs = (size_t)c->moe_shared_ffn;
  const size_t E = (size_t)c->moe_experts;
  static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
  char name[UFP4_TENSOR_NAME_MAX];
  if (k == 0) {
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate.weight", l);
    set(t, name, E, C);
    return 0;
  }
  k--;
  if ((size_t)k < 3 * E) {
    int e = k / 3, j = k % 3;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, proj[j]);
    set(t, name, j == 2 ? C : Fe, j == 2 ? Fe : C);
    return E * C + (size_t)k * Fe * C;
  }
  k -= 3 * (int)E;
  const size_t before = E * C + 3 * E * Fe * C + (size_t)k * Fs * C;
  if (k < 3) {
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.%s.weight", l, proj[k]);
    set(t, name, k == 2 ? C : Fs, k == 2 ? Fs : C);
  } else {
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", l);
    set(t, name, 1, C);
  }
  return before;
}

/* Writes tensor i's name, shape and offset. */
static void describe(const ufp4_model_config *c, int i, ufp4_tensor_info *t) {
  const size_t C = (size_t)c->d_model, V = (size_t)c->vocab, F = (size_t)c->ffn_dim;
  const size_t D = C / (size_t)c->n_heads, KV = D * (size_t)c->n_kv_heads;
  char name[UFP4_TENSOR_NAME_MAX];
  if (i == 0) {
    set(t, "model.embed_tokens.weight", V, C);
    t->offset = 0;
    return;
  }
  i--;
  size_t off = V * C;
  for (int l = 0; l < c->n_layers; l++) {
    const int n = layer_tensors(c, l);
    if (i >= n) {
      i -= n;
      off += layer_floats(c, l);
      continue;
    }
    if (i >= ATTN && ufp4_model_layer_is_moe(c, l)) {
      t->offset = off + attn_floats(c) + describe_moe(c, l, i - ATTN, t);
      return;
    }
    static const char *const names[PER_LAYER] = {
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const size_t rows[PER_LAYER] = {C, C, KV, KV, C, C, F, F, C};
    const size_t cols[PER_LAYER] = {0, C, C, C, C, 0, C, C, F};
    for (int k = 0; k < i; k++) off += cols[k] ? rows[k] * cols[k] : rows[k];
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, names[i]);
    set(t, name, rows[i], cols[i]);
    t->offset = off;
    return;
  }
  if (i == 0) {
    set(t, "model.norm.weight", C, 0);
    t->offset = off;
    return;
  }
  set(t, "lm_head.weight", V, C);
  t->offset = off + C;
}

void ufp4_model_tensor(const ufp4_model_config *c, int i, ufp4_tensor_info *out) { describe(c, i, out); }

size_t ufp4_model_param_count(const ufp4_model_config *c) {
  ufp4_tensor_info t;
  ufp4_model_tensor(c, ufp4_model_tensor_count(c) - 1, &t);
  return t.offset + t.count;
}

size_t ufp4_model_active_param_count(const ufp4_model_config *c) {
  size_t n = ufp4_model_param_count(c);
  if (c->moe_experts > c->moe_top_k && c->moe_top_k > 0) {
    const size_t skipped = (size_t)(c->moe_experts - c->moe_top_k) * 3 * (size_t)c->moe_ffn * (size_t)c->d_model;
    n -= skipped * (size_t)ufp4_model_moe_layers(c);
  }
  return n;
}
