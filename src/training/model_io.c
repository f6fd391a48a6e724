/* Checkpoint folders put to use: model_io.h. */
#include "ufp4/model_io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "training/model_io_internal.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/recipe.h"
#include "ufp4/safetensors.h"
#include "ufp4/tokenizer.h"
#include "ufp4/train.h"

/* The seed of the run that wrote checkpoint `dir`, from the trainer metadata of its
 * optimizer.safetensors (checkpoint_schedule.c writes it; the schema keeps seeds <= 2^53, exact in
 * a JSON number). A folder without that file, an exported or converted model, has none: 0. */
static int checkpoint_seed(const char *dir, uint64_t *seed) {
  *seed = 0;
  char path[4200];
  if (snprintf(path, sizeof path, "%s/optimizer.safetensors", dir) >= (int)sizeof path)
    return ufp4_fail(UFP4_EINVAL, "%s: path too long", dir);
  if (access(path, F_OK)) return 0;
  ufp4_st *st;
  int rc = ufp4_st_open(path, &st);
  if (rc) return rc;
  const char *meta = ufp4_st_meta_get(st, "trainer");
  cJSON *j = meta ? cJSON_Parse(meta) : NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "seed");
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0) ||
      v->valuedouble != floor(v->valuedouble))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: its trainer metadata records no seed (a non-negative integer)", path);
  else
    *seed = (uint64_t)v->valuedouble;
  cJSON_Delete(j);
  ufp4_st_close(st);
  return rc;
}

int ufp4_model_load(const char *dir, const char *recipe_spec, int batch, ufp4_model **out) {
  return ufp4_model_load_overrides(dir, recipe_spec, NULL, batch, out);
}

int ufp4_model_load_overrides(const char *dir, const char *recipe_spec, const char *overrides, int batch,
                              ufp4_model **out) {
  *out = NULL;
  ufp4_model_config c;
  ufp4_recipe r;
  ufp4_model *m;
  uint64_t seed;
  int rc = ufp4_recipe_parse(recipe_spec, &r);
  if (!rc) rc = ufp4_checkpoint_config(dir, &c);
  if (!rc) rc = checkpoint_seed(dir, &seed);
  if (!rc) rc = ufp4_model_create(&m, &c, batch);
  if (rc) return rc;
  if ((rc = ufp4_checkpoint_load_params(dir, m))) {
    ufp4_model_free(m);
    return rc;
  }
  if ((rc = ufp4_model_set_recipes(m, &r, overrides, seed))) {
    ufp4_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int ufp4_val_source_open(const char *data, int B, int T, ufp4_shard_source *src, char *path,
                         size_t size) {
  memset(src, 0, sizeof *src);
  size_t len = strlen(data);
  if (len > 4 && !strcmp(data + len - 4, ".tok"))
    snprintf(path, size, "%s", data);
  else
    snprintf(path, size, "%s/val.tok", data);
  ufp4_loader_config lc = {
      .batch = (size_t)B, .seq_len = (size_t)T, .seed = 0, .world = 1, .shuffle = 0};
  int rc = ufp4_loader_open(path, &lc, &src->loader);
  if (rc) return rc;
  src->n = (size_t)B * (size_t)(T + 1);
  src->buf = malloc(src->n * sizeof(uint32_t));
  return src->buf ? 0 : ufp4_fail(UFP4_ENOMEM, "%s: out of memory for a batch", path);
}

void ufp4_val_source_close(ufp4_shard_source *src) {
  free(src->buf);
  ufp4_loader_free(src->loader);
  memset(src, 0, sizeof *src);
}

/* A shard whose tokens may exceed the model's vocabulary would index past the embeddings. */
static int check_vocab(const ufp4_shard_source *src, const char *path, const ufp4_model_config *c) {
  const uint32_t v = ufp4_loader_shard(src->loader)->info.vocab_size;
  if (v > (uint32_t)c->vocab)
    return ufp4_fail(UFP4_EINVAL, "%s: vocabulary %u is larger than the model's %d", path, v,
                     c->vocab);
  return 0;
}

int model_io_eval(ufp4_model *m, const char *data, long batches, int batch, ufp4_eval_result *res) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  res->seq_len = c->seq_len;
  ufp4_shard_source src;
  int rc = ufp4_val_source_open(data, batch, c->seq_len, &src, res->path, sizeof res->path);
  if (!rc) rc = check_vocab(&src, res->path, c);
  if (!rc) {
    uint64_t avail = ufp4_loader_batches_per_epoch(src.loader);
    res->batches = (uint64_t)batches > avail ? (long)avail : batches;
    rc = ufp4_evaluate(m, ufp4_shard_source_batch, &src, (int)res->batches, batch, c->seq_len,
                       &res->loss);
  }
  ufp4_val_source_close(&src);
  return rc;
}

int ufp4_eval_checkpoint(const char *dir, const char *data, const char *recipe_spec, const char *overrides,
                         long batches, int batch, ufp4_eval_result *res) {
  memset(res, 0, sizeof *res);
  ufp4_model *m;
  int rc = ufp4_model_load_overrides(dir, recipe_spec, overrides, batch, &m);
  if (rc) return rc;
  rc = model_io_eval(m, data, batches, batch, res);
  ufp4_model_free(m);
  return rc;
}

/* The prompt's ids, then up to n_new generated ones, into seq (malloc'ed, *n_out ids). */
static int generate(ufp4_model *m, ufp4_tokenizer *tok, const char *prompt, int n_new,
                    const ufp4_sample_opts *o, int32_t **seq, int *n_out) {
  ufp4_tokvec ids = {0};
  int rc = ufp4_tokenizer_encode(tok, prompt, strlen(prompt), "--prompt", &ids);
  if (!rc && !(*seq = malloc(sizeof(int32_t) * (ids.n + (size_t)n_new + 1))))
    rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
  if (!rc) {
    for (size_t i = 0; i < ids.n; i++) (*seq)[i] = (int32_t)ids.ids[i];
    ufp4_sample_opts so = *o;
    so.stop_token = ufp4_tokenizer_eot(tok);
    so.vocab = (int)ufp4_tokenizer_vocab_size(tok); /* only ids it can decode */
    rc = ufp4_generate(m, *seq, (int)ids.n, n_new, &so, *seq, n_out);
  }
  ufp4_tokvec_free(&ids);
  return rc;
}

int ufp4_sample_checkpoint(const char *dir, const char *tokenizer, const char *recipe_spec,
                           const char *prompt, int n_new, const ufp4_sample_opts *o, char **text,
                           size_t *len) {
  *text = NULL;
  *len = 0;
  ufp4_tokenizer *tok = NULL;
  ufp4_model *m = NULL;
  int32_t *seq = NULL;
  int n_out = 0, rc = ufp4_tokenizer_open(tokenizer, &tok);
  if (!rc) rc = ufp4_model_load(dir, recipe_spec, 1, &m);
  /* A model's vocabulary may be padded past its tokenizer's (ids it never saw, never sampled), but
   * never to twice its size: a tokenizer that small is another one, whose ids mean other tokens. */
  const uint32_t tv = rc ? 0 : ufp4_tokenizer_vocab_size(tok), mv = rc ? 0 : (uint32_t)ufp4_model_get_config(m)->vocab;
  if (!rc && (tv > mv || 2 * (uint64_t)tv < mv))
    rc = ufp4_fail(UFP4_EINVAL, "tokenizer %s has %u tokens but the model %s%u: not the tokenizer its training "
                   "shards were prepared with", tokenizer, tv, tv > mv ? "only " : "", mv);
  if (!rc) rc = generate(m, tok, prompt, n_new, o, &seq, &n_out);
  if (!rc) rc = ufp4_tokenizer_decode(tok, (const uint32_t *)seq, (size_t)n_out, text, len);
  free(seq);
  ufp4_model_free(m);
  ufp4_tokenizer_free(tok);
  return rc;
}

int ufp4_drift_checkpoint(const char *dir, const char *data, const char *const *recipes, int n,
                          long batches, int batch, int backward, ufp4_drift_result *res) {
  memset(res, 0, sizeof *res);
  ufp4_model *m;
  int rc = ufp4_model_load(dir, "fp32", batch, &m);
  if (rc) return rc;
  res->config = *ufp4_model_get_config(m);
  res->seq_len = res->config.seq_len;
  ufp4_shard_source src;
  char path[4200];
  rc = ufp4_val_source_open(data, batch, res->seq_len, &src, path, sizeof path);
  if (!rc) rc = check_vocab(&src, path, ufp4_model_get_config(m));
  if (!rc) {
    uint64_t avail = ufp4_loader_batches_per_epoch(src.loader);
    res->batches = (uint64_t)batches > avail ? (long)avail : batches;
    ufp4_drift_spec s = {.recipes = recipes,
                         .n_recipes = n,
                         .batches = res->batches,
                         .batch = batch,
                         .batch_fn = ufp4_shard_source_batch,
                         .ctx = &src,
                         .backward = backward};
    rc = ufp4_drift_measure(m, &s, &res->table);
  }
  ufp4_val_source_close(&src);
  ufp4_model_free(m);
  return rc;
}
