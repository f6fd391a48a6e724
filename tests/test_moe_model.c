/* MoE inside the model: E = 1, k = 1 equals the dense model bit for bit; finite differences of
 * CE + MoE objective through router and experts; config validation and tensor table; checkpoints
 * in Qwen2-MoE form (names, config.json keys, round trip, zero biases). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/model.h"
#include "ufp4/philox.h"
#include "ufp4/safetensors.h"

static void batch(int32_t *tok, int32_t *tgt, int n, int V, uint64_t seed) {
  for (int i = 0; i < n; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(seed, 1, (uint64_t)i) % (uint32_t)V);
    tgt[i] = (int32_t)(ufp4_philox_u32(seed, 2, (uint64_t)i) % (uint32_t)V);
  }
  tgt[3] = -1;
}

static int find_tensor(const ufp4_model_config *c, const char *name, ufp4_tensor_info *out) {
  int nt = ufp4_model_tensor_count(c);
  for (int i = 0; i < nt; i++) {
    ufp4_model_tensor(c, i, out);
    if (!strcmp(out->name, name)) return i;
  }
  return -1;
}

/* The dense name an E = 1 tensor corresponds to ("mlp.experts.0.up_proj" -> "mlp.up_proj"), or ""
 * for the router. */
static void dense_name(const char *moe, char *out, size_t size) {
  const char *e0 = strstr(moe, "mlp.experts.0.");
  if (strstr(moe, "mlp.gate.weight")) out[0] = 0;
  else if (e0) snprintf(out, size, "%.*smlp.%s", (int)(e0 - moe), moe, e0 + strlen("mlp.experts.0."));
  else snprintf(out, size, "%s", moe);
}

/* ---------------------------------------------------------------- E = 1 equals dense */

enum { EB = 2, ET = 16 }; /* 32 tokens: a multiple of 16, so no padding rows */

static void e1_equals_dense(const char *spec) {
  ufp4_model_config d = ufp4_model_config_default();
  d.n_layers = 2;
  d.d_model = 32;
  d.n_heads = 4;
  d.ffn_dim = 48;
  d.seq_len = ET;
  d.vocab = 37;
  d.init_std = 0.2f;
  ufp4_model_config_resolve(&d);
  ufp4_model_config e = d;
  e.moe_experts = 1;
  e.moe_top_k = 1;
  e.moe_ffn = d.ffn_dim;
  e.moe_shared_ffn = 0;
  e.moe_aux_coef = 0.01f; /* with one expert aux is the constant 1: value 0.01, gradient exactly 0 */
  e.moe_z_coef = 0;
  ufp4_model *md, *me;
  assert_int_equal(ufp4_model_create(&md, &d, EB), 0);
  assert_int_equal(ufp4_model_create(&me, &e, EB), 0);
  ufp4_model_init(md, 7);
  ufp4_model_init(me, 8); /* router: whatever init gives; every other tensor copied below */
  const float *pd = ufp4_model_params(md);
  float *pe = ufp4_model_params(me);
  int nt = ufp4_model_tensor_count(&e), mapped = 0;
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t, td;
    char dn[UFP4_TENSOR_NAME_MAX];
    ufp4_model_tensor(&e, i, &t);
    dense_name(t.name, dn, sizeof dn);
    if (!dn[0]) continue;
    assert_true(find_tensor(&d, dn, &td) >= 0);
    assert_int_equal(td.count, t.count);
    memcpy(pe + t.offset, pd + td.offset, t.count * sizeof(float));
    mapped++;
  }
  assert_int_equal(mapped, ufp4_model_tensor_count(&d));
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
  ufp4_model_set_recipe(md, &r, 11);
  ufp4_model_set_recipe(me, &r, 11);
  ufp4_model_set_step(md, 5, 0);
  ufp4_model_set_step(me, 5, 0);
  int32_t tok[EB * ET], tgt[EB * ET];
  batch(tok, tgt, EB * ET, d.vocab, 4);
  double ld, le;
  ufp4_model_zero_grads(md);
  ufp4_model_zero_grads(me);
  assert_int_equal(ufp4_model_forward(md, tok, tgt, EB, ET, &ld), 0);
  assert_int_equal(ufp4_model_forward(me, tok, tgt, EB, ET, &le), 0);
  if (memcmp(&ld, &le, sizeof ld)) fail_msg("%s: loss dense %.17g, E=1 MoE %.17g", spec, ld, le);
  assert_memory_equal(ufp4_model_logits(md), ufp4_model_logits(me), sizeof(float) * EB * ET * (size_t)d.vocab);
  assert_true(ufp4_model_aux_loss(md) == 0.0);
  assert_true(fabs(ufp4_model_aux_loss(me) - 2 * (double)0.01f) < 1e-12); /* 2 MoE layers, aux = 1 each */
  assert_int_equal(ufp4_model_backward(md, 1.0f), 0);
  assert_int_equal(ufp4_model_backward(me, 1.0f), 0);
  const float *gd = ufp4_model_grads(md), *ge = ufp4_model_grads(me);
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t, td;
    char dn[UFP4_TENSOR_NAME_MAX];
    ufp4_model_tensor(&e, i, &t);
    dense_name(t.name, dn, sizeof dn);
    if (!dn[0]) {
      /* d(gate)/d(router) and d(aux)/d(router) are exactly 0 with one expert (p = 1). */
      for (size_t k = 0; k < t.count; k++)
        if (ge[t.offset + k] != 0) fail_msg("%s: %s[%zu] = %g, expected 0", spec, t.name, k, (double)ge[t.offset + k]);
      continue;
    }
    find_tensor(&d, dn, &td);
    if (memcmp(gd + td.offset, ge + t.offset, t.count * sizeof(float)))
      fail_msg("%s: gradient of %s differs from dense %s", spec, t.name, dn);
  }
  ufp4_moe_stats st;
  assert_int_equal(ufp4_model_moe_stats(me, 0, &st), 0);
  assert_int_equal(st.padded_rows, 0);
  assert_int_equal(st.dropped, 0);
  assert_true(ufp4_model_moe_stats(md, 0, &st) < 0);
  ufp4_model_free(md);
  ufp4_model_free(me);
}

static void test_e1_dense_fp32(void **s) { (void)s; e1_equals_dense("fp32"); }
static void test_e1_dense_e2m1(void **s) { (void)s; e1_equals_dense("e2m1"); }
static void test_e1_dense_ufp4(void **s) { (void)s; e1_equals_dense("ufp4"); }

/* ---------------------------------------------------------------- finite differences */

enum { FB = 2, FT = 8 };

static double objective(ufp4_model *m, const int32_t *tok, const int32_t *tgt) {
  double loss;
  assert_int_equal(ufp4_model_forward(m, tok, tgt, FB, FT, &loss), 0);
  return loss + ufp4_model_aux_loss(m);
}

/* Routing fingerprint of every MoE layer: loads before capacity and admitted rows after. */
static void routing(ufp4_model *m, const ufp4_model_config *c, double *out) {
  int n = 0;
  for (int l = 0; l < c->n_layers; l++) {
    ufp4_moe_stats st;
    if (ufp4_model_moe_stats(m, l, &st)) continue;
    for (int e = 0; e < st.n_experts; e++) {
      out[n++] = st.load[e];
      out[n++] = (double)st.admitted[e];
    }
  }
}

static void gradcheck(int top_k, int shared, float capacity, int every) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 16;
  c.n_heads = 4;
  c.ffn_dim = 24;
  c.seq_len = FT;
  c.vocab = 11;
  c.init_std = 0.3f;
  c.moe_experts = 4;
  c.moe_top_k = top_k;
  c.moe_ffn = 12;
  c.moe_shared_ffn = shared;
  c.moe_every = every;
  c.moe_capacity = capacity;
  c.moe_aux_coef = 0.3f; /* large coefficients make the objective's gradient visible next to CE's */
  c.moe_z_coef = 0.05f;
  ufp4_model_config_resolve(&c);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, FB), 0);
  ufp4_model_init(m, 5);
  int32_t tok[FB * FT], tgt[FB * FT];
  batch(tok, tgt, FB * FT, c.vocab, 3);
  ufp4_model_zero_grads(m);
  objective(m, tok, tgt);
  assert_true(ufp4_model_aux_loss(m) > 0);
  double r0[2 * 2 * 4] = {0}, r1[2 * 2 * 4] = {0}; /* 2 layers x 4 experts x (load, admitted) */
  routing(m, &c, r0);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  float *p = ufp4_model_params(m);
  const float *g = ufp4_model_grads(m);
  int nt = ufp4_model_tensor_count(&c), checked = 0, skipped = 0, router_checked = 0;
  for (int ti = 0; ti < nt; ti++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, ti, &t);
    for (int k = 0; k < 4; k++) {
      size_t i = t.offset + ufp4_philox_u32(9, (uint64_t)ti, (uint64_t)k) % t.count;
      const float saved = p[i];
      /* Smaller than test_model's 1e-2: a step that large can move two positions of one token id
       * across routing boundaries in opposite directions, which the load fingerprint cannot see. */
      const float eps = 3e-3f;
      p[i] = saved + eps;
      double lp = objective(m, tok, tgt);
      routing(m, &c, r1);
      int same = !memcmp(r0, r1, sizeof r0);
      p[i] = saved - eps;
      double lm = objective(m, tok, tgt);
      routing(m, &c, r1);
      same = same && !memcmp(r0, r1, sizeof r0);
      p[i] = saved;
      if (!same) { /* a perturbation that changes routing makes the objective jump: not differentiable */
        skipped++;
        continue;
      }
      double fd = (lp - lm) / (2.0 * eps);
      /* Same scale as test_model's gradcheck: central differences in an fp32 forward are good to
       * about 3% plus 2e-3 absolute (loss rounding ~3e-7 / 6e-3 = 5e-5 here); a missing term
       * (aux, z, a gate's renormalization) moves a gradient by far more. */
      double err = fabs(fd - g[i]) / (0.03 * fabs(fd) + 2e-3);
      if (err > 1) fail_msg("%s[%zu]: analytic %.6g, finite difference %.6g", t.name, i - t.offset, g[i], fd);
      checked++;
      if (strstr(t.name, "mlp.gate.weight") || strstr(t.name, "shared_expert_gate")) router_checked++;
    }
  }
  /* Most coordinates keep their routing; the router itself must have been checked. */
  assert_true(checked >= 3 * nt);
  assert_true(router_checked >= 2);
  print_message("k=%d shared=%d capacity=%g: %d coordinates checked, %d skipped (routing changed)\n", top_k, shared,
                (double)capacity, checked, skipped);
  ufp4_model_free(m);
}

static void test_gradcheck_k2_shared(void **s) { (void)s; gradcheck(2, 8, 0.0f, 1); }
static void test_gradcheck_k1_capacity(void **s) { (void)s; gradcheck(1, 0, 1.0f, 1); }
static void test_gradcheck_k2_capacity_every2(void **s) { (void)s; gradcheck(2, 0, 1.0f, 2); }

/* ---------------------------------------------------------------- config and table */

static ufp4_model_config moe_config(int shared) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 3;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.seq_len = 8;
  c.vocab = 13;
  c.moe_experts = 3;
  c.moe_top_k = 2;
  c.moe_ffn = 10;
  c.moe_shared_ffn = shared;
  c.moe_every = 2; /* layer 1 is MoE; layers 0 and 2 dense */
  c.moe_capacity = 1.5f;
  c.moe_aux_coef = 0.02f;
  c.moe_z_coef = 0.001f;
  return c;
}

static void test_config_checks(void **state) {
  (void)state;
  ufp4_model_config c = moe_config(6);
  assert_int_equal(ufp4_model_config_check(&c), 0);
  ufp4_model_config b = c;
  b.moe_top_k = 3;
  assert_true(ufp4_model_config_check(&b) < 0);
  assert_non_null(strstr(ufp4_last_error(), "moe_top_k"));
  b = c;
  b.moe_experts = 1; /* top_k 2 > 1 expert */
  assert_true(ufp4_model_config_check(&b) < 0);
  b = c;
  b.moe_ffn = 0;
  assert_true(ufp4_model_config_check(&b) < 0);
  ufp4_model_config_resolve(&b);
  assert_int_equal(b.moe_ffn, b.ffn_dim);
  b = c;
  b.moe_every = 0;
  assert_true(ufp4_model_config_check(&b) < 0);
  b = c;
  b.moe_every = 4; /* > n_layers: no MoE layer at all */
  assert_true(ufp4_model_config_check(&b) < 0);
  b = c;
  b.moe_capacity = -1;
  assert_true(ufp4_model_config_check(&b) < 0);
  b = c;
  b.moe_shared_ffn = -1;
  assert_true(ufp4_model_config_check(&b) < 0);
  b = c;
  b.moe_aux_coef = NAN;
  assert_true(ufp4_model_config_check(&b) < 0);
  /* A dense model ignores the widths and top_k. */
  b = c;
  b.moe_experts = 0;
  b.moe_top_k = 7;
  b.moe_ffn = 0;
  assert_int_equal(ufp4_model_config_check(&b), 0);
}

static void test_tensor_table(void **state) {
  (void)state;
  ufp4_model_config c = moe_config(6);
  const size_t C = 16, KV = 8, F = 24, Fe = 10, Fs = 6, E = 3, V = 13;
  assert_int_equal(ufp4_model_moe_layers(&c), 1);
  assert_false(ufp4_model_layer_is_moe(&c, 0));
  assert_true(ufp4_model_layer_is_moe(&c, 1));
  assert_false(ufp4_model_layer_is_moe(&c, 2));
  /* embed + 2 dense layers x 9 + MoE layer (6 + router + 3 x 3 experts + 4 shared) + norm + head */
  assert_int_equal(ufp4_model_tensor_count(&c), 1 + 18 + 6 + 1 + 9 + 4 + 1 + 1);
  const size_t attn = C + C * C + 2 * KV * C + C * C + C;
  const size_t dense = attn + 3 * F * C, moe = attn + E * C + E * 3 * Fe * C + 3 * Fs * C + C;
  assert_int_equal(ufp4_model_param_count(&c), 2 * V * C + 2 * dense + moe + C);
  assert_int_equal(ufp4_model_active_param_count(&c), ufp4_model_param_count(&c) - (E - 2) * 3 * Fe * C);
  /* Offsets are contiguous in table order, and the names are Qwen2-MoE's. */
  size_t off = 0;
  int nt = ufp4_model_tensor_count(&c);
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, i, &t);
    assert_int_equal(t.offset, off);
    off += t.count;
  }
  ufp4_tensor_info t;
  const int ln2 = find_tensor(&c, "model.layers.1.post_attention_layernorm.weight", &t);
  assert_int_equal(ln2 + 1, find_tensor(&c, "model.layers.1.mlp.gate.weight", &t));
  assert_true(t.shape[0] == E && t.shape[1] == C);
  assert_true(find_tensor(&c, "model.layers.1.mlp.experts.2.down_proj.weight", &t) > 0);
  assert_true(t.shape[0] == C && t.shape[1] == Fe);
  assert_true(find_tensor(&c, "model.layers.1.mlp.experts.0.gate_proj.weight", &t) > 0);
  assert_true(t.shape[0] == Fe && t.shape[1] == C);
  assert_true(find_tensor(&c, "model.layers.1.mlp.shared_expert.down_proj.weight", &t) > 0);
  assert_true(t.shape[0] == C && t.shape[1] == Fs);
  assert_true(find_tensor(&c, "model.layers.1.mlp.shared_expert_gate.weight", &t) > 0);
  assert_true(t.shape[0] == 1 && t.shape[1] == C && t.ndim == 2);
  assert_true(find_tensor(&c, "model.layers.2.mlp.up_proj.weight", &t) > 0);
  assert_true(find_tensor(&c, "model.layers.1.mlp.up_proj.weight", &t) < 0);
  /* A dense config's table is the Llama one: the same as the MoE-free config of old. */
  ufp4_model_config d = c;
  d.moe_experts = 0;
  assert_int_equal(ufp4_model_tensor_count(&d), 1 + 27 + 2);
  assert_int_equal(ufp4_model_param_count(&d), 2 * V * C + 3 * dense + C);
  assert_int_equal(ufp4_model_active_param_count(&d), ufp4_model_param_count(&d));
}

/* ---------------------------------------------------------------- checkpoints */

static cJSON *read_json(const char *path) {
  char *text;
  size_t len;
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &len), 0);
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  assert_non_null(j);
  return j;
}

static double jnum(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!cJSON_IsNumber(v)) fail_msg("config.json: \"%s\" missing or not a number", key);
  return v->valuedouble;
}

static void checkpoint_round_trip(int shared) {
  char dir[] = "/tmp/ufp4_moeckpt_XXXXXX", ck[4200], path[4300];
  assert_non_null(mkdtemp(dir));
  snprintf(ck, sizeof ck, "%s/ck", dir);
  ufp4_model_config c = moe_config(shared);
  ufp4_model_config_resolve(&c);
  ufp4_model *m, *m2;
  assert_int_equal(ufp4_model_create(&m, &c, 1), 0);
  ufp4_model_init(m, 3);
  assert_int_equal(ufp4_checkpoint_save(ck, m, NULL, NULL, NULL), 0);

  snprintf(path, sizeof path, "%s/config.json", ck);
  cJSON *j = read_json(path);
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "architectures");
  assert_string_equal(cJSON_GetArrayItem(arch, 0)->valuestring, "Qwen2MoeForCausalLM");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "model_type")->valuestring, "qwen2_moe");
  assert_int_equal((int)jnum(j, "hidden_size"), 16);
  assert_int_equal((int)jnum(j, "intermediate_size"), 24);
  assert_int_equal((int)jnum(j, "moe_intermediate_size"), 10);
  assert_int_equal((int)jnum(j, "shared_expert_intermediate_size"), shared);
  assert_int_equal((int)jnum(j, "num_experts"), 3);
  assert_int_equal((int)jnum(j, "num_experts_per_tok"), 2);
  assert_int_equal((int)jnum(j, "decoder_sparse_step"), 2);
  assert_int_equal((int)jnum(j, "num_hidden_layers"), 3);
  assert_int_equal((int)jnum(j, "num_key_value_heads"), 2);
  assert_true(fabs(jnum(j, "router_aux_loss_coef") - 0.02) < 1e-7);
  assert_true(fabs(jnum(j, "ufp4_moe_capacity_factor") - 1.5) < 1e-7);
  assert_true(fabs(jnum(j, "ufp4_moe_z_loss_coef") - 0.001) < 1e-9);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "norm_topk_prob")));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "output_router_logits")));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "use_sliding_window")));
  const cJSON *only = cJSON_GetObjectItemCaseSensitive(j, "mlp_only_layers");
  assert_true(cJSON_IsArray(only) && cJSON_GetArraySize(only) == 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "hidden_act")->valuestring, "silu");
  cJSON_Delete(j);

  /* The file holds the table plus zero q/k/v biases, and a zero-width shared expert when none. */
  snprintf(path, sizeof path, "%s/model.safetensors", ck);
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(path, &st), 0);
  const ufp4_st_info *bias = ufp4_st_find(st, "model.layers.0.self_attn.k_proj.bias");
  assert_non_null(bias);
  assert_true(bias->ndim == 1 && bias->shape[0] == 8);
  for (size_t k = 0; k < bias->count; k++) assert_true(((const float *)bias->data)[k] == 0.0f);
  assert_non_null(ufp4_st_find(st, "model.layers.2.self_attn.q_proj.bias"));
  const ufp4_st_info *sg = ufp4_st_find(st, "model.layers.1.mlp.shared_expert.gate_proj.weight");
  assert_non_null(sg);
  assert_int_equal(sg->shape[0], (size_t)shared);
  const ufp4_st_info *sd = ufp4_st_find(st, "model.layers.1.mlp.shared_expert.down_proj.weight");
  assert_true(sd && sd->shape[0] == 16 && sd->shape[1] == (size_t)shared);
  assert_non_null(ufp4_st_find(st, "model.layers.1.mlp.shared_expert_gate.weight"));
  assert_null(ufp4_st_find(st, "model.layers.0.mlp.shared_expert_gate.weight"));
  const size_t n_expected = (size_t)ufp4_model_tensor_count(&c) + 9 + (shared ? 0 : 4);
  assert_int_equal(ufp4_st_count(st), n_expected);
  ufp4_st_close(st);

  ufp4_model_config r;
  assert_int_equal(ufp4_checkpoint_config(ck, &r), 0);
  assert_int_equal(r.moe_experts, c.moe_experts);
  assert_int_equal(r.moe_top_k, c.moe_top_k);
  assert_int_equal(r.moe_ffn, c.moe_ffn);
  assert_int_equal(r.moe_shared_ffn, c.moe_shared_ffn);
  assert_int_equal(r.moe_every, c.moe_every);
  assert_true(r.moe_capacity == c.moe_capacity);
  assert_true(r.moe_aux_coef == c.moe_aux_coef);
  assert_true(r.moe_z_coef == c.moe_z_coef);
  assert_int_equal(r.tie_embeddings, c.tie_embeddings);
  assert_int_equal(r.n_kv_heads, c.n_kv_heads);
  assert_int_equal(ufp4_model_param_count(&r), ufp4_model_param_count(&c));
  assert_int_equal(ufp4_model_create(&m2, &r, 1), 0);
  assert_int_equal(ufp4_checkpoint_load_params(ck, m2), 0);
  assert_memory_equal(ufp4_model_params(m), ufp4_model_params(m2), ufp4_model_num_params(m) * sizeof(float));
  ufp4_model_free(m2);
  ufp4_model_free(m);
  ufp4_remove_tree(dir);
}

static void test_checkpoint_shared(void **s) { (void)s; checkpoint_round_trip(6); }
static void test_checkpoint_no_shared(void **s) { (void)s; checkpoint_round_trip(0); }

/* A Qwen2-MoE file with a non-zero attention bias is refused, naming the tensor. */
static void test_checkpoint_nonzero_bias(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_moebias_XXXXXX", ck[4200], path[4300];
  assert_non_null(mkdtemp(dir));
  snprintf(ck, sizeof ck, "%s/ck", dir);
  ufp4_model_config c = moe_config(6);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, 1), 0);
  ufp4_model_init(m, 3);
  assert_int_equal(ufp4_checkpoint_save(ck, m, NULL, NULL, NULL), 0);
  /* Rewrite model.safetensors: the table tensors plus one biased v_proj. */
  int nt = ufp4_model_tensor_count(&c);
  ufp4_st_tensor *ts = calloc((size_t)nt + 1, sizeof *ts);
  ufp4_tensor_info *info = calloc((size_t)nt, sizeof *info);
  for (int i = 0; i < nt; i++) {
    ufp4_model_tensor(&c, i, &info[i]);
    ts[i] = (ufp4_st_tensor){.name = info[i].name, .dtype = UFP4_ST_F32, .src = UFP4_ST_SRC_F32, .ndim = info[i].ndim,
                             .shape = {info[i].shape[0], info[i].shape[1]}, .data = ufp4_model_params(m) + info[i].offset};
  }
  float b[8] = {0, 0, 0, 0, 0, 0.5f, 0, 0};
  ts[nt] = (ufp4_st_tensor){.name = "model.layers.2.self_attn.v_proj.bias", .dtype = UFP4_ST_F32,
                            .src = UFP4_ST_SRC_F32, .ndim = 1, .shape = {8}, .data = b};
  snprintf(path, sizeof path, "%s/model.safetensors", ck);
  assert_int_equal(ufp4_st_write(path, ts, (size_t)nt + 1, NULL, 0), 0);
  int rc = ufp4_checkpoint_load_params(ck, m);
  assert_true(rc < 0);
  assert_non_null(strstr(ufp4_last_error(), "model.layers.2.self_attn.v_proj.bias"));
  assert_non_null(strstr(ufp4_last_error(), "bias"));
  /* The same file with a zero bias loads. */
  b[5] = 0;
  assert_int_equal(ufp4_st_write(path, ts, (size_t)nt + 1, NULL, 0), 0);
  assert_int_equal(ufp4_checkpoint_load_params(ck, m), 0);
  free(ts);
  free(info);
  ufp4_model_free(m);
  ufp4_remove_tree(dir);
}

/* Qwen2-MoE configs ufp4 cannot follow are refused with the key named; missing keys take
 * transformers' defaults. */
static void test_hf_config_refusals(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_moecfg_XXXXXX", path[4200];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/config.json", dir);
  static const char *const base =
      "{\"model_type\":\"qwen2_moe\",\"vocab_size\":13,\"hidden_size\":16,\"intermediate_size\":24,"
      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":8,\"num_experts\":4,"
      "\"num_experts_per_tok\":%d,\"moe_intermediate_size\":8,\"shared_expert_intermediate_size\":0,"
      "\"norm_topk_prob\":%s,\"mlp_only_layers\":%s}";
  const struct {
    int k;
    const char *norm, *only, *needle;
  } cases[] = {{2, "true", "[]", NULL},
               {2, "false", "[]", "norm_topk_prob"},
               {2, "true", "[1]", "mlp_only_layers"},
               {4, "true", "[]", "moe_top_k"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[1024];
    snprintf(text, sizeof text, base, cases[i].k, cases[i].norm, cases[i].only);
    assert_int_equal(ufp4_write_file_atomic(path, text, strlen(text)), 0);
    ufp4_model_config c;
    int rc = ufp4_hf_config_read(path, &c);
    if (!cases[i].needle) {
      assert_int_equal(rc, 0);
      assert_int_equal(c.moe_experts, 4);
      assert_int_equal(c.moe_shared_ffn, 0);
      assert_int_equal(c.tie_embeddings, 0); /* Qwen2MoeConfig's default */
      assert_true(c.moe_aux_coef == 0.001f); /* Qwen2MoeConfig's default */
      continue;
    }
    assert_true(rc < 0);
    if (!strstr(ufp4_last_error(), cases[i].needle)) fail_msg("case %zu: '%s' lacks '%s'", i, ufp4_last_error(), cases[i].needle);
  }
  /* A Llama config without tie_word_embeddings is untied, as LlamaConfig's default says; with the key
   * it is what the key says. */
  static const char *const llama =
      "{\"model_type\":\"llama\",\"vocab_size\":13,\"hidden_size\":16,\"intermediate_size\":24,"
      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":8%s}";
  const char *const tie_keys[] = {"", ",\"tie_word_embeddings\":true", ",\"tie_word_embeddings\":false"};
  const int tie_want[] = {0, 1, 0};
  for (int i = 0; i < 3; i++) {
    char text[1024];
    snprintf(text, sizeof text, llama, tie_keys[i]);
    assert_int_equal(ufp4_write_file_atomic(path, text, strlen(text)), 0);
    ufp4_model_config c;
    assert_int_equal(ufp4_hf_config_read(path, &c), 0);
    assert_int_equal(c.tie_embeddings, tie_want[i]);
    assert_int_equal(c.moe_experts, 0);
  }
  /* head_dim x heads is checked without int overflow (found by fuzz_hf_config under UBSan): here
   * (2^29 + 2) x 8 wraps in 32 bits to exactly hidden_size 16, so a wrapped check would accept it. */
  const char *const big = "{\"model_type\":\"llama\",\"vocab_size\":13,\"hidden_size\":16,\"intermediate_size\":24,"
                          "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"max_position_embeddings\":8,"
                          "\"head_dim\":536870914}";
  assert_int_equal(ufp4_write_file_atomic(path, big, strlen(big)), 0);
  ufp4_model_config cb;
  assert_true(ufp4_hf_config_read(path, &cb) < 0);
  if (!strstr(ufp4_last_error(), "head_dim")) fail_msg("'%s' lacks 'head_dim'", ufp4_last_error());
  ufp4_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_checks),          cmocka_unit_test(test_tensor_table),
      cmocka_unit_test(test_e1_dense_fp32),          cmocka_unit_test(test_e1_dense_e2m1),
      cmocka_unit_test(test_e1_dense_ufp4),          cmocka_unit_test(test_gradcheck_k2_shared),
      cmocka_unit_test(test_gradcheck_k1_capacity),  cmocka_unit_test(test_gradcheck_k2_capacity_every2),
      cmocka_unit_test(test_checkpoint_shared),      cmocka_unit_test(test_checkpoint_no_shared),
      cmocka_unit_test(test_checkpoint_nonzero_bias), cmocka_unit_test(test_hf_config_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
