/* Checkpoints: a folder that Hugging Face transformers loads as LlamaForCausalLM, plus what exact
 * resume needs.
 *
 *   DIR/config.json            transformers' LlamaConfig (model_type "llama")
 *   DIR/model.safetensors      fp32 parameters under HF names (lm_head omitted when tied), with
 *                              metadata {"format": "pt"}, which transformers requires
 *   DIR/optimizer.safetensors  AdamW moments "adamw.m" and "adamw.v" (flat, parameter order) and
 *                              metadata: step and the trainer state as JSON (optional)
 *
 * A checkpoint is written into "DIR.tmp", every file atomically (safetensors.h), and the folder is
 * renamed to DIR only when complete; an existing DIR is first renamed aside and removed only after
 * the new one is in place, so a crash at any point leaves a complete checkpoint under DIR or
 * under DIR.old, never a half-written one under DIR. */
#ifndef UFP4_CHECKPOINT_H
#define UFP4_CHECKPOINT_H

#include <stddef.h>
#include "ufp4/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes config.json for c into `path` (atomically). */
int ufp4_hf_config_write(const char *path, const ufp4_model_config *c);
/* Reads a LlamaConfig config.json: unknown keys are ignored, missing required ones and
 * unsupported values (biases, another activation or model type, rope scaling) are errors. */
int ufp4_hf_config_read(const char *path, ufp4_model_config *c);

/* Saves parameters (and, when m_state/v_state are non-NULL, the AdamW state with `trainer_json`
 * as metadata) into checkpoint folder `dir`. */
int ufp4_checkpoint_save(const char *dir, ufp4_model *m, const float *m_state, const float *v_state,
                         const char *trainer_json);
/* Reads config.json of `dir` into *c. */
int ufp4_checkpoint_config(const char *dir, ufp4_model_config *c);
/* Loads the parameters of `dir` into m (its config must match the file's shapes). */
int ufp4_checkpoint_load_params(const char *dir, ufp4_model *m);
/* Loads the optimizer state; *trainer_json receives a malloc'ed copy of the metadata (or NULL). */
int ufp4_checkpoint_load_optimizer(const char *dir, size_t n_params, float *m_state, float *v_state,
                                   char **trainer_json);

#ifdef __cplusplus
}
#endif
#endif
