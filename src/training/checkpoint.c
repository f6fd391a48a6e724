#include "ufp4/checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_file.h"
#include "training/ckpt_internal.h"
#include "training/path.h"
#include "ufp4/error.h"
#include "ufp4/export_hf.h"
#include "ufp4/fileio.h"
#include "ufp4/safetensors.h"
#include "ufp4/train.h"

/* Prefixes the recorded error with path; the message is copied first because ufp4_fail writes the
 * buffer ufp4_last_error() points into. */
static int with_path(int rc, const char *path) {
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", ufp4_last_error());
  return ufp4_fail(rc, "%s: %s", path, saved);
}

/* Qwen2-MoE's own keys (transformers' Qwen2MoeConfig); the ufp4_* ones are ours, which transformers
 * keeps as plain attributes and otherwise ignores. */
static void add_moe_keys(cJSON *j, const ufp4_model_config *c) {
  cJSON_AddNumberToObject(j, "num_experts", c->moe_experts);
  cJSON_AddNumberToObject(j, "num_experts_per_tok", c->moe_top_k);
  cJSON_AddNumberToObject(j, "moe_intermediate_size", c->moe_ffn);
  cJSON_AddNumberToObject(j, "shared_expert_intermediate_size", c->moe_shared_ffn);
  cJSON_AddBoolToObject(j, "norm_topk_prob", 1);
  cJSON_AddNumberToObject(j, "decoder_sparse_step", c->moe_every);
  cJSON_AddArrayToObject(j, "mlp_only_layers");
  cJSON_AddNumberToObject(j, "router_aux_loss_coef", c->moe_aux_coef);
  cJSON_AddBoolToObject(j, "output_router_logits", 0);
  cJSON_AddBoolToObject(j, "use_sliding_window", 0);
  cJSON_AddNumberToObject(j, "sliding_window", c->seq_len);
  cJSON_AddNumberToObject(j, "max_window_layers", c->n_layers);
  cJSON_AddNumberToObject(j, "ufp4_moe_capacity_factor", c->moe_capacity);
  cJSON_AddNumberToObject(j, "ufp4_moe_z_loss_coef", c->moe_z_coef);
}

cJSON *ckpt_config_json(const ufp4_model_config *c) {
  const int moe = c->moe_experts > 0;
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString(moe ? "Qwen2MoeForCausalLM" : "LlamaForCausalLM"));
  cJSON_AddStringToObject(j, "model_type", moe ? "qwen2_moe" : "llama");
  cJSON_AddNumberToObject(j, "vocab_size", c->vocab);
  cJSON_AddNumberToObject(j, "hidden_size", c->d_model);
  cJSON_AddNumberToObject(j, "intermediate_size", c->ffn_dim);
  cJSON_AddNumberToObject(j, "num_hidden_layers", c->n_layers);
  cJSON_AddNumberToObject(j, "num_attention_heads", c->n_heads);
  cJSON_AddNumberToObject(j, "num_key_value_heads", c->n_kv_heads);
  cJSON_AddNumberToObject(j, "head_dim", c->d_model / c->n_heads);
  cJSON_AddNumberToObject(j, "max_position_embeddings", c->seq_len);
  cJSON_AddNumberToObject(j, "rms_norm_eps", c->rms_eps);
  cJSON_AddNumberToObject(j, "rope_theta", c->rope_theta);
  cJSON_AddNullToObject(j, "rope_scaling");
  cJSON_AddNumberToObject(j, "initializer_range", c->init_std);
  cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tie_embeddings);
  cJSON_AddStringToObject(j, "hidden_act", "silu");
  if (moe) {
    add_moe_keys(j, c);
  } else {
    cJSON_AddBoolToObject(j, "attention_bias", 0);
    cJSON_AddBoolToObject(j, "mlp_bias", 0);
  }
  cJSON_AddNumberToObject(j, "attention_dropout", 0);
  if (!moe) cJSON_AddNumberToObject(j, "pretraining_tp", 1);
  cJSON_AddBoolToObject(j, "use_cache", 1);
  cJSON_AddStringToObject(j, "torch_dtype", "float32");
  return j;
}

int ckpt_write_json(const char *path, const cJSON *j) {
  char *text = j ? cJSON_Print(j) : NULL;
  if (!text) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  int rc = ufp4_write_file_atomic(path, text, strlen(text));
  free(text);
  return rc;
}

int ufp4_hf_config_write(const char *path, const ufp4_model_config *c) {
  cJSON *j = ckpt_config_json(c);
  int rc = ckpt_write_json(path, j);
  cJSON_Delete(j);
  return rc;
}

/* An integer in [min, 1e9] (min is 0 or 1); missing or null: a format error when required, else
 * fallback. */
static int get_integer(const cJSON *j, const char *path, const char *key, int required, int min, int fallback,
                       int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!v || cJSON_IsNull(v)) {
    if (required) return ufp4_fail(UFP4_EFORMAT, "%s: missing \"%s\"", path, key);
    *out = fallback;
    return 0;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min || v->valuedouble > 1e9)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a %s integer", path, key, min > 0 ? "positive" : "non-negative");
  *out = (int)v->valuedouble;
  return 0;
}

static int get_int(const cJSON *j, const char *path, const char *key, int required, int fallback, int *out) {
  return get_integer(j, path, key, required, 1, fallback, out);
}

static int get_float(const cJSON *j, const char *path, const char *key, float fallback, float *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!v || cJSON_IsNull(v)) {
    *out = fallback;
    return 0;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a finite number >= 0", path, key);
  *out = (float)v->valuedouble;
  return 0;
}

/* Qwen2-MoE keys; a missing key takes transformers' Qwen2MoeConfig default, so a config.json from
 * elsewhere means what transformers would make of it (and is refused where ufp4 cannot follow). */
static int read_moe_keys(const cJSON *j, const char *path, ufp4_model_config *c) {
  int rc;
  if ((rc = get_int(j, path, "num_experts", 0, 60, &c->moe_experts)) ||
      (rc = get_int(j, path, "num_experts_per_tok", 0, 4, &c->moe_top_k)) ||
      (rc = get_int(j, path, "moe_intermediate_size", 0, 1408, &c->moe_ffn)) ||
      (rc = get_integer(j, path, "shared_expert_intermediate_size", 0, 0, 5632, &c->moe_shared_ffn)) ||
      (rc = get_int(j, path, "decoder_sparse_step", 0, 1, &c->moe_every)) ||
      (rc = get_float(j, path, "router_aux_loss_coef", 0.001f, &c->moe_aux_coef)) ||
      (rc = get_float(j, path, "ufp4_moe_capacity_factor", 0.0f, &c->moe_capacity)) ||
      (rc = get_float(j, path, "ufp4_moe_z_loss_coef", 0.0f, &c->moe_z_coef)))
    return rc;
  const cJSON *norm = cJSON_GetObjectItemCaseSensitive(j, "norm_topk_prob");
  if (!cJSON_IsTrue(norm))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"norm_topk_prob\" must be true (ufp4 renormalizes the top-k gates)", path);
  const cJSON *only = cJSON_GetObjectItemCaseSensitive(j, "mlp_only_layers");
  if (only && !cJSON_IsNull(only) && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) != 0))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"mlp_only_layers\" must be empty (ufp4 chooses MoE layers by decoder_sparse_step only)",
                     path);
  const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "use_sliding_window");
  if (sw && !cJSON_IsFalse(sw) && !cJSON_IsNull(sw))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"use_sliding_window\" is not supported", path);
  return 0;
}

static int get_bool_false(const cJSON *j, const char *path, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (v && !cJSON_IsFalse(v) && !cJSON_IsNull(v))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" is not supported (ufp4's Llama has none)", path, key);
  return 0;
}

int ufp4_hf_config_read(const char *path, ufp4_model_config *c) {
  cJSON *j;
  int rc = ufp4_json_read_object(path, 1 << 20, NULL, NULL, &j);
  if (rc) return rc;
  *c = ufp4_model_config_default();
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_act");
  const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(j, "rms_norm_eps");
  const cJSON *theta = cJSON_GetObjectItemCaseSensitive(j, "rope_theta");
  const cJSON *init = cJSON_GetObjectItemCaseSensitive(j, "initializer_range");
  const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
  const int moe = cJSON_IsString(mt) && !strcmp(mt->valuestring, "qwen2_moe");
  if (!cJSON_IsString(mt) || (strcmp(mt->valuestring, "llama") && !moe))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"model_type\" must be \"llama\" or \"qwen2_moe\"", path);
  else if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"hidden_act\" must be \"silu\"", path);
  else if (scaling && !cJSON_IsNull(scaling))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"rope_scaling\" is not supported", path);
  else if ((rc = get_int(j, path, "vocab_size", 1, 0, &c->vocab)) || (rc = get_int(j, path, "hidden_size", 1, 0, &c->d_model)) ||
           (rc = get_int(j, path, "intermediate_size", 1, 0, &c->ffn_dim)) ||
           (rc = get_int(j, path, "num_hidden_layers", 1, 0, &c->n_layers)) ||
           (rc = get_int(j, path, "num_attention_heads", 1, 0, &c->n_heads)) ||
           (rc = get_int(j, path, "num_key_value_heads", 0, c->n_heads, &c->n_kv_heads)) ||
           (rc = get_int(j, path, "max_position_embeddings", 1, 0, &c->seq_len)) ||
           (!moe && ((rc = get_bool_false(j, path, "attention_bias")) || (rc = get_bool_false(j, path, "mlp_bias")))) ||
           (moe && (rc = read_moe_keys(j, path, c)))) {
  } else {
    int head_dim;
    if ((rc = get_int(j, path, "head_dim", 0, c->d_model / c->n_heads, &head_dim)) == 0 &&
        (long long)head_dim * c->n_heads != c->d_model)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: head_dim %d x heads %d != hidden_size %d", path, head_dim, c->n_heads, c->d_model);
  }
  if (!rc) {
    if (eps) c->rms_eps = cJSON_IsNumber(eps) ? (float)eps->valuedouble : -1.0f;
    if (theta) c->rope_theta = cJSON_IsNumber(theta) ? theta->valuedouble : -1.0;
    if (init) c->init_std = cJSON_IsNumber(init) ? (float)init->valuedouble : -1.0f;
    /* Missing: false, the default of transformers' LlamaConfig and Qwen2MoeConfig alike, so a
     * foreign config means here what it means there (ufp4 always writes the key). */
    c->tie_embeddings = tie ? cJSON_IsTrue(tie) : 0;
    if ((rc = ufp4_model_config_check(c)))
      rc = with_path(UFP4_EFORMAT, path);
  }
  cJSON_Delete(j);
  return rc;
}

/* Tensors an MoE checkpoint adds beyond the parameter table so that Qwen2MoeForCausalLM loads it:
 * zero q/k/v biases in every layer (Qwen2 attention always has them), and in MoE layers without a
 * shared expert a zero-width shared expert ([0, C], [0, C], [C, 0]) with a zero shared_expert_gate,
 * since Qwen2-MoE always builds one: its output is then exactly 0, as ufp4 computes. */
static int n_extra(const ufp4_model_config *c) {
  if (c->moe_experts <= 0) return 0;
  return 3 * c->n_layers + (c->moe_shared_ffn > 0 ? 0 : 4 * ufp4_model_moe_layers(c));
}

static void extra(const ufp4_model_config *c, int i, ufp4_tensor_info *t) {
  const size_t C = (size_t)c->d_model, KV = C / (size_t)c->n_heads * (size_t)c->n_kv_heads;
  memset(t, 0, sizeof *t);
  t->ndim = 1;
  if (i < 3 * c->n_layers) {
    static const char *const qkv[3] = {"q", "k", "v"};
    snprintf(t->name, sizeof t->name, "model.layers.%d.self_attn.%s_proj.bias", i / 3, qkv[i % 3]);
    t->shape[0] = t->count = i % 3 ? KV : C;
    return;
  }
  i -= 3 * c->n_layers;
  int l = 0, want = i / 4; /* the want-th MoE layer */
  for (;; l++)
    if (ufp4_model_layer_is_moe(c, l) && want-- == 0) break;
  static const char *const shared[4] = {"shared_expert.gate_proj", "shared_expert.up_proj", "shared_expert.down_proj",
                                        "shared_expert_gate"};
  const int k = i % 4;
  snprintf(t->name, sizeof t->name, "model.layers.%d.mlp.%s.weight", l, shared[k]);
  t->ndim = 2;
  t->shape[0] = k == 0 || k == 1 ? 0 : k == 2 ? C : 1;
  t->shape[1] = k == 2 ? 0 : C;
  t->count = t->shape[0] * t->shape[1];
}

/* A float32 safetensors entry of shape t holding data. */
static void f32_tensor(ufp4_st_tensor *out, const ufp4_tensor_info *t, const float *data) {
  out->name = t->name;
  out->dtype = UFP4_ST_F32;
  out->src = UFP4_ST_SRC_F32;
  out->ndim = t->ndim;
  out->shape[0] = t->shape[0];
  out->shape[1] = t->shape[1];
  out->data = data;
}

/* The recipes the weights were trained under at this step, per projection (ufp4_model_recipe_table),
 * for the "ufp4_recipes" metadata. */
static char *recipe_table(const ufp4_model *m) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  const int n = ufp4_model_projection_count(c);
  ufp4_recipe *per = malloc(sizeof *per * (size_t)n);
  if (!per) return NULL;
  for (int i = 0; i < n; i++) per[i] = *ufp4_model_projection_recipe(m, i);
  char *table = ufp4_model_recipe_table(c, per);
  free(per);
  return table;
}

int ckpt_write_params(const char *path, ufp4_model *m, ckpt_replace_fn fn, void *ud) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  const int nt = ufp4_model_tensor_count(c), nx = n_extra(c);
  const size_t cap = (size_t)nt * CKPT_MAX_REPLACE + (size_t)nx;
  ufp4_st_tensor *ts = calloc(cap, sizeof *ts);
  ufp4_tensor_info *info = calloc((size_t)(nt + nx), sizeof *info);
  float *zeros = nx ? calloc((size_t)c->d_model, sizeof(float)) : NULL;
  if (!ts || !info || (nx && !zeros)) {
    free(ts);
    free(info);
    free(zeros);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  }
  const float *p = ufp4_model_params(m);
  size_t n = 0;
  int rc = 0;
  for (int i = 0; i < nt && !rc; i++) {
    ufp4_model_tensor(c, i, &info[i]);
    int k = 0;
    if (fn) rc = fn(ud, &info[i], p + info[i].offset, ts + n, &k);
    if (!k) {
      f32_tensor(&ts[n], &info[i], p + info[i].offset);
      k = 1;
    }
    n += (size_t)k;
  }
  for (int i = nt; i < nt + nx; i++) {
    extra(c, i - nt, &info[i]);
    f32_tensor(&ts[n++], &info[i], info[i].count ? zeros : NULL); /* every extra holds at most C floats */
  }
  char *recipes = rc ? NULL : recipe_table(m);
  const ufp4_st_meta meta[] = {{"format", "pt"}, {"producer", "ufp4"}, {"ufp4_recipes", recipes}};
  if (!rc) rc = recipes ? ufp4_st_write(path, ts, n, meta, 3)
                        : ufp4_fail(UFP4_ENOMEM, "%s: out of memory for the recipe table", path);
  free(recipes);
  free(ts);
  free(info);
  free(zeros);
  return rc;
}

static int write_optimizer(const char *path, size_t n, const float *ms, const float *vs, const char *trainer_json) {
  ufp4_st_tensor ts[2] = {
      {.name = "adamw.m", .dtype = UFP4_ST_F32, .src = UFP4_ST_SRC_F32, .ndim = 1, .shape = {n}, .data = ms},
      {.name = "adamw.v", .dtype = UFP4_ST_F32, .src = UFP4_ST_SRC_F32, .ndim = 1, .shape = {n}, .data = vs},
  };
  const ufp4_st_meta meta[] = {{"format", "ufp4-adamw"}, {"trainer", trainer_json ? trainer_json : "{}"}};
  return ufp4_st_write(path, ts, 2, meta, 2);
}

int ckpt_publish(const char *dir, int (*fill)(void *ud, const char *tmp), void *ud) {
  train_path tmp_dir, old_dir;
  int rc;
  if ((rc = train_path_fmt(&tmp_dir, "%s.tmp", dir)) ||
      (rc = train_path_fmt(&old_dir, "%s.old", dir)))
    return rc;
  const char *tmp = tmp_dir.s, *old = old_dir.s;
  if ((rc = ufp4_remove_tree(tmp)) || (rc = ufp4_mkdirs(tmp))) return rc;
  if ((rc = fill(ud, tmp))) goto fail;
  /* Swap in the complete folder: DIR -> DIR.old, DIR.tmp -> DIR, then drop DIR.old. */
  struct stat st;
  int had_old = stat(dir, &st) == 0;
  if (had_old) {
    if ((rc = ufp4_remove_tree(old))) goto fail;
    if (rename(dir, old)) {
      rc = ufp4_fail(UFP4_EIO, "%s: cannot move the previous checkpoint aside: %s", dir, strerror(errno));
      goto fail;
    }
  }
  if (rename(tmp, dir)) {
    rc = ufp4_fail(UFP4_EIO, "%s: cannot rename the new checkpoint into place: %s", dir, strerror(errno));
    if (had_old) rename(old, dir);
    goto fail;
  }
  /* The renames live in the parent folder: sync it, or a crash can bring back DIR.tmp. */
  if ((rc = ufp4_fsync_parent(dir))) return rc;
  if (had_old && (rc = ufp4_remove_tree(old))) return rc;
  return had_old ? ufp4_fsync_parent(dir) : 0;
fail:;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", ufp4_last_error());
  ufp4_remove_tree(tmp);
  return ufp4_fail(rc, "%s", saved);
}

typedef struct {
  ufp4_model *m;
  const float *m_state, *v_state;
  const char *trainer_json;
} save_job;

static int fill_checkpoint(void *ud, const char *tmp) {
  const save_job *j = ud;
  train_path path;
  int rc;
  if ((rc = train_path_fmt(&path, "%s/config.json", tmp)) ||
      (rc = ufp4_hf_config_write(path.s, ufp4_model_get_config(j->m))))
    return rc;
  if ((rc = train_path_fmt(&path, "%s/model.safetensors", tmp)) ||
      (rc = ckpt_write_params(path.s, j->m, NULL, NULL)))
    return rc;
  if (j->m_state && j->v_state &&
      ((rc = train_path_fmt(&path, "%s/optimizer.safetensors", tmp)) ||
       (rc = write_optimizer(path.s, ufp4_model_num_params(j->m), j->m_state, j->v_state, j->trainer_json))))
    return rc;
  return 0;
}

int ufp4_checkpoint_save(const char *dir, ufp4_model *m, const float *m_state, const float *v_state,
                         const char *trainer_json) {
  save_job j = {m, m_state, v_state, trainer_json};
  return ckpt_publish(dir, fill_checkpoint, &j);
}

/* A folder `ufp4 train --out` wrote (ckpt/ inside, no model.safetensors) is not a checkpoint: its
 * config.json is the run's, whose refusal ("model_type" must be ...) would not say what to pass. */
static int refuse_run_folder(const char *dir) {
  train_path ckpt, weights;
  struct stat st;
  if (train_path_fmt(&ckpt, "%s/ckpt", dir) || train_path_fmt(&weights, "%s/model.safetensors", dir) ||
      stat(ckpt.s, &st) || !S_ISDIR(st.st_mode) || !stat(weights.s, &st))
    return 0;
  const int latest = ufp4_train_latest_checkpoint(dir);
  if (latest < 0)
    return ufp4_fail(UFP4_EINVAL, "%s is a run folder (ufp4 train --out) with no complete checkpoint yet; "
                     "pass a checkpoint folder, DIR/ckpt/step_N", dir);
  return ufp4_fail(UFP4_EINVAL, "%s is a run folder (ufp4 train --out), not a checkpoint; pass one of its "
                   "checkpoints, e.g. the latest: %s/ckpt/step_%08d", dir, dir, latest);
}

int ufp4_checkpoint_config(const char *dir, ufp4_model_config *c) {
  train_path path;
  int rc = refuse_run_folder(dir);
  if (!rc) rc = train_path_fmt(&path, "%s/config.json", dir);
  return rc ? rc : ufp4_hf_config_read(path.s, c);
}

/* Qwen2's q/k/v biases, when present, must be zero: ufp4's attention has none. The zero-width shared
 * expert of a model without one is not read (its output is 0 whatever its gate). */
static int check_biases(const char *path, const ufp4_st *st, const ufp4_model_config *c) {
  float *buf = malloc(sizeof(float) * (size_t)c->d_model);
  if (!buf) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  int rc = 0;
  for (int i = 0; i < 3 * c->n_layers && !rc; i++) {
    ufp4_tensor_info t;
    extra(c, i, &t);
    if (!ufp4_st_find(st, t.name)) continue;
    if ((rc = ufp4_st_read_f32(st, t.name, buf, t.shape, 1))) {
      rc = with_path(rc, path);
      break;
    }
    for (size_t k = 0; k < t.count; k++)
      if (buf[k] != 0) {
        rc = ufp4_fail(UFP4_EFORMAT, "%s: %s[%zu] = %g: non-zero attention biases are not supported (ufp4's attention has no biases)",
                       path, t.name, k, (double)buf[k]);
        break;
      }
  }
  free(buf);
  return rc;
}

int ufp4_checkpoint_load_params(const char *dir, ufp4_model *m) {
  train_path file;
  int rc = train_path_fmt(&file, "%s/model.safetensors", dir);
  if (rc) return rc;
  const char *path = file.s;
  /* A folder exported in a 4-bit layout (export_hf.h) holds its 4-bit projections under other
   * names; they are dequantized here, the rest read as usual. */
  ufp4_hf_format qf;
  if ((rc = ufp4_hf_detect(dir, &qf))) return rc;
  ufp4_st *st;
  if ((rc = ufp4_st_open(path, &st))) return rc;
  const ufp4_model_config *c = ufp4_model_get_config(m);
  int nt = ufp4_model_tensor_count(c);
  float *p = ufp4_model_params(m);
  for (int i = 0; i < nt && !rc; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    const ufp4_st_info *e = ufp4_st_find(st, t.name);
    if (qf != UFP4_HF_NONE && t.ndim == 2 && (!e || e->dtype == UFP4_ST_U8)) { /* NVFP4 keeps the name, packed */
      rc = ufp4_hf_read_weight(st, path, qf, t.name, t.shape[0], t.shape[1], p + t.offset);
      continue;
    }
    rc = ufp4_st_read_f32(st, t.name, p + t.offset, t.shape, t.ndim);
    if (rc) rc = with_path(rc, path);
  }
  if (!rc && c->moe_experts > 0) rc = check_biases(path, st, c);
  ufp4_st_close(st);
  return rc;
}

int ufp4_checkpoint_load_optimizer(const char *dir, size_t n_params, float *m_state, float *v_state,
                                   char **trainer_json) {
  train_path file;
  if (trainer_json) *trainer_json = NULL;
  int rc = train_path_fmt(&file, "%s/optimizer.safetensors", dir);
  if (rc) return rc;
  const char *path = file.s;
  ufp4_st *st;
  if ((rc = ufp4_st_open(path, &st))) return rc;
  size_t shape[1] = {n_params};
  if ((rc = ufp4_st_read_f32(st, "adamw.m", m_state, shape, 1)) || (rc = ufp4_st_read_f32(st, "adamw.v", v_state, shape, 1)))
    rc = with_path(rc, path);
  const char *meta = ufp4_st_meta_get(st, "trainer");
  if (!rc && trainer_json && meta) {
    *trainer_json = strdup(meta);
    if (!*trainer_json) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  }
  ufp4_st_close(st);
  return rc;
}
