/* The run configuration as JSON: written to config.json, and read back by --config and resume. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/train.h"

ufp4_train_config ufp4_train_config_default(void) {
  ufp4_train_config c;
  memset(&c, 0, sizeof c);
  c.model = ufp4_model_config_default();
  snprintf(c.recipe, sizeof c.recipe, "fp32");
  c.optim = ufp4_adamw_default();
  c.batch = 8;
  c.grad_accum = 1;
  c.steps = 200;
  c.seed = 1;
  c.log_every = 1;
  c.eval_every = 50;
  c.eval_batches = 8;
  c.ckpt_every = 0;
  c.keep_ckpts = 2;
  c.nan_policy = UFP4_NAN_SKIP;
  c.progress = 1;
  c.world = 1;
  snprintf(c.out_dir, sizeof c.out_dir, "runs/default");
  return c;
}

char *ufp4_train_config_json(const ufp4_train_config *c) {
  cJSON *j = cJSON_CreateObject();
  cJSON *m = cJSON_AddObjectToObject(j, "model");
  cJSON_AddNumberToObject(m, "n_layers", c->model.n_layers);
  cJSON_AddNumberToObject(m, "d_model", c->model.d_model);
  cJSON_AddNumberToObject(m, "n_heads", c->model.n_heads);
  cJSON_AddNumberToObject(m, "n_kv_heads", c->model.n_kv_heads);
  cJSON_AddNumberToObject(m, "ffn_dim", c->model.ffn_dim);
  cJSON_AddNumberToObject(m, "seq_len", c->model.seq_len);
  cJSON_AddNumberToObject(m, "vocab", c->model.vocab);
  cJSON_AddNumberToObject(m, "rms_eps", c->model.rms_eps);
  cJSON_AddNumberToObject(m, "rope_theta", c->model.rope_theta);
  cJSON_AddNumberToObject(m, "init_std", c->model.init_std);
  cJSON_AddNumberToObject(m, "tie_embeddings", c->model.tie_embeddings);
  if (c->model.moe_experts > 0) { /* a dense run's config.json stays as it was */
    cJSON_AddNumberToObject(m, "moe_experts", c->model.moe_experts);
    cJSON_AddNumberToObject(m, "moe_top_k", c->model.moe_top_k);
    cJSON_AddNumberToObject(m, "moe_ffn", c->model.moe_ffn);
    cJSON_AddNumberToObject(m, "moe_shared_ffn", c->model.moe_shared_ffn);
    cJSON_AddNumberToObject(m, "moe_every", c->model.moe_every);
    cJSON_AddNumberToObject(m, "moe_capacity", c->model.moe_capacity);
    cJSON_AddNumberToObject(m, "moe_aux_coef", c->model.moe_aux_coef);
    cJSON_AddNumberToObject(m, "moe_z_coef", c->model.moe_z_coef);
  }
  cJSON_AddNumberToObject(m, "n_params", (double)ufp4_model_param_count(&c->model));
  if (c->model.moe_experts > 0)
    cJSON_AddNumberToObject(m, "n_active_params", (double)ufp4_model_active_param_count(&c->model));
  ufp4_recipe r;
  if (ufp4_recipe_parse(c->recipe, &r) == 0) {
    char buf[512];
    ufp4_recipe_format(&r, buf, sizeof buf);
    cJSON_AddStringToObject(j, "recipe", buf);
  } else {
    cJSON_AddStringToObject(j, "recipe", c->recipe);
  }
  cJSON *o = cJSON_AddObjectToObject(j, "optim");
  cJSON_AddNumberToObject(o, "lr", c->optim.lr);
  cJSON_AddNumberToObject(o, "min_lr", c->optim.min_lr);
  cJSON_AddNumberToObject(o, "warmup_steps", c->optim.warmup_steps);
  cJSON_AddNumberToObject(o, "total_steps", c->optim.total_steps);
  cJSON_AddNumberToObject(o, "beta1", c->optim.beta1);
  cJSON_AddNumberToObject(o, "beta2", c->optim.beta2);
  cJSON_AddNumberToObject(o, "eps", c->optim.eps);
  cJSON_AddNumberToObject(o, "weight_decay", c->optim.weight_decay);
  cJSON_AddNumberToObject(o, "grad_clip", c->optim.grad_clip);
  cJSON_AddNumberToObject(j, "batch", c->batch);
  cJSON_AddNumberToObject(j, "grad_accum", c->grad_accum);
  cJSON_AddNumberToObject(j, "world", c->world);
  cJSON_AddNumberToObject(j, "global_batch_tokens",
                          (double)c->batch * c->grad_accum * c->world * c->model.seq_len);
  cJSON_AddNumberToObject(j, "steps", c->steps);
  cJSON_AddNumberToObject(j, "seed", (double)c->seed);
  cJSON_AddNumberToObject(j, "log_every", c->log_every);
  cJSON_AddNumberToObject(j, "eval_every", c->eval_every);
  cJSON_AddNumberToObject(j, "eval_batches", c->eval_batches);
  cJSON_AddNumberToObject(j, "ckpt_every", c->ckpt_every);
  cJSON_AddNumberToObject(j, "diag_every", c->diag_every);
  cJSON_AddNumberToObject(j, "keep_ckpts", c->keep_ckpts);
  cJSON_AddStringToObject(j, "nan_policy", c->nan_policy == UFP4_NAN_STOP ? "stop" : "skip");
  cJSON_AddNumberToObject(j, "threads", c->threads);
  cJSON_AddStringToObject(j, "data", c->data_desc);
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  return s;
}

/* Each setter reads one optional key; a present key of the wrong type is an error. */
static int num(const cJSON *obj, const char *key, const char *path, double lo, double hi, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a number in [%g, %g]", path, key, lo, hi);
  *out = v->valuedouble;
  return 0;
}

static int integer(const cJSON *obj, const char *key, const char *path, int lo, int hi, int *out) {
  double d = *out;
  int rc = num(obj, key, path, lo, hi, &d);
  if (rc) return rc;
  if (d != floor(d)) return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be an integer", path, key);
  *out = (int)d;
  return 0;
}

static int flt(const cJSON *obj, const char *key, const char *path, double lo, double hi, float *out) {
  double d = *out;
  int rc = num(obj, key, path, lo, hi, &d);
  *out = (float)d;
  return rc;
}

static int str(const cJSON *obj, const char *key, const char *path, char *out, size_t size) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return 0;
  if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a string of under %zu bytes", path, key, size);
  strcpy(out, v->valuestring);
  return 0;
}

int ufp4_train_config_load(const char *path, ufp4_train_config *c) {
  char *text;
  size_t len;
  int rc = ufp4_read_file(path, 1 << 20, &text, &len);
  if (rc) return rc;
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_EFORMAT, "%s: not a JSON object", path);
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "optim");
  double seed = (double)c->seed;
  char nan[16] = "";
  if ((m && !cJSON_IsObject(m)) || (o && !cJSON_IsObject(o))) {
    rc = ufp4_fail(UFP4_EFORMAT, "%s: \"model\" and \"optim\" must be objects", path);
  } else if ((m && ((rc = integer(m, "n_layers", path, 1, 4096, &c->model.n_layers)) ||
                    (rc = integer(m, "d_model", path, 2, 1 << 16, &c->model.d_model)) ||
                    (rc = integer(m, "n_heads", path, 1, 1 << 12, &c->model.n_heads)) ||
                    (rc = integer(m, "n_kv_heads", path, 1, 1 << 12, &c->model.n_kv_heads)) ||
                    (rc = integer(m, "ffn_dim", path, 1, 1 << 20, &c->model.ffn_dim)) ||
                    (rc = integer(m, "seq_len", path, 1, 1 << 20, &c->model.seq_len)) ||
                    (rc = integer(m, "vocab", path, 2, 1 << 24, &c->model.vocab)) ||
                    (rc = flt(m, "rms_eps", path, 1e-12, 1, &c->model.rms_eps)) ||
                    (rc = num(m, "rope_theta", path, 1.0001, 1e12, &c->model.rope_theta)) ||
                    (rc = flt(m, "init_std", path, 1e-9, 10, &c->model.init_std)) ||
                    (rc = integer(m, "tie_embeddings", path, 0, 1, &c->model.tie_embeddings)) ||
                    (rc = integer(m, "moe_experts", path, 0, 4096, &c->model.moe_experts)) ||
                    (rc = integer(m, "moe_top_k", path, 1, 2, &c->model.moe_top_k)) ||
                    (rc = integer(m, "moe_ffn", path, 0, 1 << 20, &c->model.moe_ffn)) ||
                    (rc = integer(m, "moe_shared_ffn", path, 0, 1 << 20, &c->model.moe_shared_ffn)) ||
                    (rc = integer(m, "moe_every", path, 1, 4096, &c->model.moe_every)) ||
                    (rc = flt(m, "moe_capacity", path, 0, 1e6, &c->model.moe_capacity)) ||
                    (rc = flt(m, "moe_aux_coef", path, 0, 1e6, &c->model.moe_aux_coef)) ||
                    (rc = flt(m, "moe_z_coef", path, 0, 1e6, &c->model.moe_z_coef)))) ||
             (o && ((rc = num(o, "lr", path, 0, 10, &c->optim.lr)) || (rc = num(o, "min_lr", path, 0, 10, &c->optim.min_lr)) ||
                    (rc = integer(o, "warmup_steps", path, 0, 1 << 30, &c->optim.warmup_steps)) ||
                    (rc = integer(o, "total_steps", path, 0, 1 << 30, &c->optim.total_steps)) ||
                    (rc = num(o, "beta1", path, 0, 0.999999, &c->optim.beta1)) ||
                    (rc = num(o, "beta2", path, 0, 0.999999999, &c->optim.beta2)) ||
                    (rc = num(o, "eps", path, 0, 1, &c->optim.eps)) ||
                    (rc = num(o, "weight_decay", path, 0, 10, &c->optim.weight_decay)) ||
                    (rc = num(o, "grad_clip", path, 0, 1e9, &c->optim.grad_clip)))) ||
             (rc = str(j, "recipe", path, c->recipe, sizeof c->recipe)) ||
             (rc = integer(j, "batch", path, 1, 1 << 20, &c->batch)) ||
             (rc = integer(j, "grad_accum", path, 1, 1 << 20, &c->grad_accum)) ||
             (rc = integer(j, "steps", path, 1, 1 << 30, &c->steps)) || (rc = num(j, "seed", path, 0, 9007199254740992.0, &seed)) ||
             (rc = integer(j, "log_every", path, 1, 1 << 30, &c->log_every)) ||
             (rc = integer(j, "eval_every", path, 0, 1 << 30, &c->eval_every)) ||
             (rc = integer(j, "eval_batches", path, 0, 1 << 20, &c->eval_batches)) ||
             (rc = integer(j, "ckpt_every", path, 0, 1 << 30, &c->ckpt_every)) ||
             (rc = integer(j, "diag_every", path, 0, 1 << 30, &c->diag_every)) ||
             (rc = integer(j, "keep_ckpts", path, 1, 1 << 20, &c->keep_ckpts)) ||
             (rc = integer(j, "threads", path, 0, 1024, &c->threads)) || (rc = str(j, "nan_policy", path, nan, sizeof nan)) ||
             (rc = str(j, "data", path, c->data_desc, sizeof c->data_desc))) {
  }
  if (!rc) {
    c->seed = (uint64_t)seed;
    if (nan[0] && strcmp(nan, "skip") && strcmp(nan, "stop"))
      rc = ufp4_fail(UFP4_EFORMAT, "%s: \"nan_policy\" must be \"skip\" or \"stop\"", path);
    else if (nan[0])
      c->nan_policy = strcmp(nan, "stop") ? UFP4_NAN_SKIP : UFP4_NAN_STOP;
  }
  cJSON_Delete(j);
  return rc;
}
