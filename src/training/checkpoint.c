#include "ufp4/checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/safetensors.h"

#define PATH_MAX_LEN 4096

int ufp4_hf_config_write(const char *path, const ufp4_model_config *c) {
  cJSON *j = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString("LlamaForCausalLM"));
  cJSON_AddStringToObject(j, "model_type", "llama");
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
  cJSON_AddBoolToObject(j, "attention_bias", 0);
  cJSON_AddBoolToObject(j, "mlp_bias", 0);
  cJSON_AddNumberToObject(j, "attention_dropout", 0);
  cJSON_AddNumberToObject(j, "pretraining_tp", 1);
  cJSON_AddBoolToObject(j, "use_cache", 1);
  cJSON_AddStringToObject(j, "torch_dtype", "float32");
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  if (!text) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  int rc = ufp4_write_file_atomic(path, text, strlen(text));
  free(text);
  return rc;
}

static int get_int(const cJSON *j, const char *path, const char *key, int required, int fallback, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!v || cJSON_IsNull(v)) {
    if (required) return ufp4_fail(UFP4_EFORMAT, "%s: missing \"%s\"", path, key);
    *out = fallback;
    return 0;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a positive integer", path, key);
  *out = (int)v->valuedouble;
  return 0;
}

static int get_bool_false(const cJSON *j, const char *path, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (v && !cJSON_IsFalse(v) && !cJSON_IsNull(v))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" is not supported (ufp4's Llama has none)", path, key);
  return 0;
}

int ufp4_hf_config_read(const char *path, ufp4_model_config *c) {
  char *text;
  size_t len;
  int rc = ufp4_read_file(path, 1 << 20, &text, &len);
  if (rc) return rc;
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  if (!j || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_EFORMAT, "%s: not a JSON object", path);
  }
  *c = ufp4_model_config_default();
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_act");
  const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(j, "rms_norm_eps");
  const cJSON *theta = cJSON_GetObjectItemCaseSensitive(j, "rope_theta");
  const cJSON *init = cJSON_GetObjectItemCaseSensitive(j, "initializer_range");
  const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
  if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "llama"))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"model_type\" must be \"llama\"", path);
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
           (rc = get_bool_false(j, path, "attention_bias")) || (rc = get_bool_false(j, path, "mlp_bias"))) {
  } else {
    int head_dim;
    if ((rc = get_int(j, path, "head_dim", 0, c->d_model / c->n_heads, &head_dim)) == 0 &&
        head_dim * c->n_heads != c->d_model)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: head_dim %d x heads %d != hidden_size %d", path, head_dim, c->n_heads, c->d_model);
  }
  if (!rc) {
    if (eps) c->rms_eps = cJSON_IsNumber(eps) ? (float)eps->valuedouble : -1.0f;
    if (theta) c->rope_theta = cJSON_IsNumber(theta) ? theta->valuedouble : -1.0;
    if (init) c->init_std = cJSON_IsNumber(init) ? (float)init->valuedouble : -1.0f;
    c->tie_embeddings = tie ? cJSON_IsTrue(tie) : 1; /* transformers' LlamaConfig default */
    if ((rc = ufp4_model_config_check(c)))
      rc = ufp4_fail(UFP4_EFORMAT, "%s: %s", path, ufp4_last_error());
  }
  cJSON_Delete(j);
  return rc;
}

static int join(char *out, const char *dir, const char *name) {
  if (snprintf(out, PATH_MAX_LEN, "%s/%s", dir, name) >= PATH_MAX_LEN)
    return ufp4_fail(UFP4_EIO, "%s: path too long", dir);
  return 0;
}

static int write_params(const char *path, ufp4_model *m) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  int nt = ufp4_model_tensor_count(c);
  ufp4_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
  ufp4_tensor_info *info = calloc((size_t)nt, sizeof *info);
  if (!ts || !info) {
    free(ts);
    free(info);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  }
  const float *p = ufp4_model_params(m);
  for (int i = 0; i < nt; i++) {
    ufp4_model_tensor(c, i, &info[i]);
    ts[i].name = info[i].name;
    ts[i].dtype = UFP4_ST_F32;
    ts[i].src = UFP4_ST_SRC_F32;
    ts[i].ndim = info[i].ndim;
    ts[i].shape[0] = info[i].shape[0];
    ts[i].shape[1] = info[i].shape[1];
    ts[i].data = p + info[i].offset;
  }
  const ufp4_st_meta meta[] = {{"format", "pt"}, {"producer", "ufp4"}};
  int rc = ufp4_st_write(path, ts, (size_t)nt, meta, 2);
  free(ts);
  free(info);
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

int ufp4_checkpoint_save(const char *dir, ufp4_model *m, const float *m_state, const float *v_state,
                         const char *trainer_json) {
  char tmp[PATH_MAX_LEN], old[PATH_MAX_LEN], path[PATH_MAX_LEN];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", dir) >= (int)sizeof tmp || snprintf(old, sizeof old, "%s.old", dir) >= (int)sizeof old)
    return ufp4_fail(UFP4_EIO, "%s: path too long", dir);
  int rc;
  if ((rc = ufp4_remove_tree(tmp)) || (rc = ufp4_mkdirs(tmp))) return rc;
  if ((rc = join(path, tmp, "config.json")) || (rc = ufp4_hf_config_write(path, ufp4_model_get_config(m)))) goto fail;
  if ((rc = join(path, tmp, "model.safetensors")) || (rc = write_params(path, m))) goto fail;
  if (m_state && v_state) {
    if ((rc = join(path, tmp, "optimizer.safetensors")) ||
        (rc = write_optimizer(path, ufp4_model_num_params(m), m_state, v_state, trainer_json)))
      goto fail;
  }
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
  if (had_old) return ufp4_remove_tree(old);
  return 0;
fail:;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", ufp4_last_error());
  ufp4_remove_tree(tmp);
  return ufp4_fail(rc, "%s", saved);
}

int ufp4_checkpoint_config(const char *dir, ufp4_model_config *c) {
  char path[PATH_MAX_LEN];
  int rc = join(path, dir, "config.json");
  return rc ? rc : ufp4_hf_config_read(path, c);
}

int ufp4_checkpoint_load_params(const char *dir, ufp4_model *m) {
  char path[PATH_MAX_LEN];
  int rc = join(path, dir, "model.safetensors");
  if (rc) return rc;
  ufp4_st *st;
  if ((rc = ufp4_st_open(path, &st))) return rc;
  const ufp4_model_config *c = ufp4_model_get_config(m);
  int nt = ufp4_model_tensor_count(c);
  float *p = ufp4_model_params(m);
  for (int i = 0; i < nt && !rc; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    rc = ufp4_st_read_f32(st, t.name, p + t.offset, t.shape, t.ndim);
    if (rc) rc = ufp4_fail(rc, "%s: %s", path, ufp4_last_error());
  }
  ufp4_st_close(st);
  return rc;
}

int ufp4_checkpoint_load_optimizer(const char *dir, size_t n_params, float *m_state, float *v_state,
                                   char **trainer_json) {
  char path[PATH_MAX_LEN];
  if (trainer_json) *trainer_json = NULL;
  int rc = join(path, dir, "optimizer.safetensors");
  if (rc) return rc;
  ufp4_st *st;
  if ((rc = ufp4_st_open(path, &st))) return rc;
  size_t shape[1] = {n_params};
  if ((rc = ufp4_st_read_f32(st, "adamw.m", m_state, shape, 1)) || (rc = ufp4_st_read_f32(st, "adamw.v", v_state, shape, 1)))
    rc = ufp4_fail(rc, "%s: %s", path, ufp4_last_error());
  const char *meta = ufp4_st_meta_get(st, "trainer");
  if (!rc && trainer_json && meta) {
    *trainer_json = strdup(meta);
    if (!*trainer_json) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  }
  ufp4_st_close(st);
  return rc;
}
