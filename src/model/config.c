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
                         .tie_embeddings = 0};
  return c;
}

void ufp4_model_config_resolve(ufp4_model_config *c) {
  if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
}

int ufp4_model_config_check(const ufp4_model_config *c) {
  if (c->n_layers < 1 || c->n_layers > 4096) return ufp4_fail(UFP4_EINVAL, "model: n_layers %d not in [1, 4096]", c->n_layers);
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
  return 0;
}

/* Per block: input_layernorm, q, k, v, o, post_attention_layernorm, gate, up, down. */
enum { PER_LAYER = 9 };

int ufp4_model_tensor_count(const ufp4_model_config *c) {
  return 1 + PER_LAYER * c->n_layers + 1 + (c->tie_embeddings ? 0 : 1);
}

static void set(ufp4_tensor_info *t, const char *name, size_t rows, size_t cols) {
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = cols ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols;
  t->count = cols ? rows * cols : rows;
}

/* Writes tensor i's name and shape (offset left 0). */
static void describe(const ufp4_model_config *c, int i, ufp4_tensor_info *t) {
  const size_t C = (size_t)c->d_model, V = (size_t)c->vocab, F = (size_t)c->ffn_dim;
  const size_t D = C / (size_t)c->n_heads, KV = D * (size_t)c->n_kv_heads;
  char name[UFP4_TENSOR_NAME_MAX];
  if (i == 0) return set(t, "model.embed_tokens.weight", V, C);
  i--;
  if (i < PER_LAYER * c->n_layers) {
    int l = i / PER_LAYER, k = i % PER_LAYER;
    static const char *const names[PER_LAYER] = {
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const size_t rows[PER_LAYER] = {C, C, KV, KV, C, C, F, F, C};
    const size_t cols[PER_LAYER] = {0, C, C, C, C, 0, C, C, F};
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, names[k]);
    return set(t, name, rows[k], cols[k]);
  }
  i -= PER_LAYER * c->n_layers;
  if (i == 0) return set(t, "model.norm.weight", C, 0);
  set(t, "lm_head.weight", V, C);
}

void ufp4_model_tensor(const ufp4_model_config *c, int i, ufp4_tensor_info *out) {
  size_t offset = 0;
  for (int j = 0; j <= i; j++) {
    describe(c, j, out);
    out->offset = offset;
    offset += out->count;
  }
}

size_t ufp4_model_param_count(const ufp4_model_config *c) {
  ufp4_tensor_info t;
  ufp4_model_tensor(c, ufp4_model_tensor_count(c) - 1, &t);
  return t.offset + t.count;
}
