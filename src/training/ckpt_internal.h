/* Pieces of checkpoint.c that the 4-bit Hugging Face export (export_hf.c) reuses, so that an
 * exported folder is written by the same code as a checkpoint. */
#ifndef UFP4_TRAINING_CKPT_INTERNAL_H
#define UFP4_TRAINING_CKPT_INTERNAL_H

#include <cjson/cJSON.h>
#include "ufp4/model.h"
#include "ufp4/safetensors.h"

/* config.json of c as a cJSON object (NULL when out of memory); ufp4_hf_config_write writes it. */
cJSON *ckpt_config_json(const ufp4_model_config *c);
/* Prints j (indented) into `path` atomically. */
int ckpt_write_json(const char *path, const cJSON *j);

/* Called for each parameter tensor t (its fp32 values `data`): stores in out[0..*n) up to
 * CKPT_MAX_REPLACE tensors written instead of it, or sets *n = 0 to write it as fp32. Data the
 * entries point to must stay valid until ckpt_write_params returns. */
#define CKPT_MAX_REPLACE 4
typedef int (*ckpt_replace_fn)(void *ud, const ufp4_tensor_info *t, const float *data,
                               ufp4_st_tensor *out, int *n);
/* model.safetensors of m into `path`: every parameter under its HF name, the tensors an MoE
 * checkpoint adds for transformers, metadata {"format": "pt"}; `fn` (may be NULL) replaces some. */
int ckpt_write_params(const char *path, ufp4_model *m, ckpt_replace_fn fn, void *ud);

/* Builds folder `dir` atomically: fill(ud, tmp) writes its files into the empty folder "DIR.tmp",
 * which then replaces DIR as ufp4_checkpoint_save describes (checkpoint.h). */
int ckpt_publish(const char *dir, int (*fill)(void *ud, const char *tmp), void *ud);

#endif
