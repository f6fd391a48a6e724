/* Using a trained checkpoint folder (checkpoint.h): opening it as a model ready to run under a
 * recipe, the validation shard a command names, and the two uses that need nothing more than that,
 * evaluation, sampling and forward drift. `ufp4 eval`, `ufp4 sample` and `ufp4 drift` are thin
 * wrappers of these. */
#ifndef UFP4_MODEL_IO_H
#define UFP4_MODEL_IO_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/data_source.h"
#include "ufp4/drift.h"
#include "ufp4/model.h"
#include "ufp4/sample.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* The checkpoint folder `dir` (config.json + model.safetensors) as a model for batches of `batch`
 * sequences, its GEMMs under the recipe `recipe_spec` (recipe.h's spelling, e.g. "fp32").
 * A recipe's random RHT signs are drawn from the seed of the run that wrote the checkpoint (the
 * trainer metadata of its optimizer.safetensors), as in training, so the run's own recipe
 * computes what the run computed (its validation loss, bit for bit); from 0 for a folder without
 * that file (an exported or converted model). *out is NULL on failure. */
int ufp4_model_load(const char *dir, const char *recipe_spec, int batch, ufp4_model **out);
/* The same, with per-projection overrides on top of recipe_spec (ufp4_model_set_recipes; a
 * ';'-joined list of PATTERN=SPEC items, NULL or "" for none), e.g. a run's config.json "recipe"
 * and "overrides" to run its forward as it trained. */
int ufp4_model_load_overrides(const char *dir, const char *recipe_spec, const char *overrides, int batch,
                              ufp4_model **out);

/* `data` names a validation shard: a path ending in ".tok", or else a folder holding val.tok.
 * Writes that path into path[size], opens it in shard order (no shuffle, one rank) for batches of
 * B x (T + 1) tokens and allocates src->buf for one batch. On failure src is left closable. */
int ufp4_val_source_open(const char *data, int B, int T, ufp4_shard_source *src, char *path,
                         size_t size);
/* Frees what ufp4_val_source_open allocated (a zeroed source is fine). */
void ufp4_val_source_close(ufp4_shard_source *src);

typedef struct {
  double loss;     /* mean next-token cross-entropy in nats */
  long batches;    /* batches evaluated: those asked for, capped at one pass of the shard */
  int seq_len;     /* the checkpoint's T */
  char path[4200]; /* the shard read */
} ufp4_eval_result;

/* Loss of checkpoint `dir` under `recipe_spec` and `overrides` (ufp4_model_load_overrides; NULL
 * for none) over the first `batches` batches of `batch` windows of the validation shard `data`
 * (see ufp4_val_source_open). Fails when the shard's vocabulary is larger than the model's. */
int ufp4_eval_checkpoint(const char *dir, const char *data, const char *recipe_spec, const char *overrides,
                         long batches, int batch, ufp4_eval_result *res);

/* Continues `prompt` by up to n_new tokens of checkpoint `dir` under `recipe_spec`, tokenized by
 * `tokenizer` (tokenizer.h's spec: bytes, gpt2 or a folder), stopping at its end-of-text token.
 * *text (malloc'ed, *len bytes, prompt included) is the decoded sequence, sampled among the ids
 * the tokenizer has (a padded vocabulary's others are never drawn). Fails when the tokenizer has
 * more tokens than the model, or fewer than half as many (another tokenizer). */
int ufp4_sample_checkpoint(const char *dir, const char *tokenizer, const char *recipe_spec,
                           const char *prompt, int n_new, const ufp4_sample_opts *o, char **text,
                           size_t *len);

typedef struct {
  ufp4_drift_table table;
  long batches;              /* batches averaged: those asked for, capped at one pass of the shard */
  int seq_len;               /* the checkpoint's T */
  ufp4_model_config config;  /* the checkpoint's model: its tensor table names the dW points */
} ufp4_drift_result;

/* Drift (drift.h) of checkpoint `dir` under each of the n recipes, over the first `batches`
 * batches of `batch` windows of the validation shard `data` (see ufp4_val_source_open): the
 * forward, and with `backward` the backward too. Fails when the shard's vocabulary is larger than
 * the model's. Free res->table with ufp4_drift_table_free, also after a failure. */
int ufp4_drift_checkpoint(const char *dir, const char *data, const char *const *recipes, int n,
                          long batches, int batch, int backward, ufp4_drift_result *res);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
