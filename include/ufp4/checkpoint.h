/* Checkpoints: a folder that Hugging Face transformers loads as LlamaForCausalLM (dense) or
 * Qwen2MoeForCausalLM (moe_experts > 0), plus what exact resume needs.
 *
 *   DIR/config.json            transformers' LlamaConfig (model_type "llama"), or Qwen2MoeConfig
 *                              (model_type "qwen2_moe": num_experts, num_experts_per_tok,
 *                              moe_intermediate_size, shared_expert_intermediate_size,
 *                              norm_topk_prob true, decoder_sparse_step, mlp_only_layers [],
 *                              router_aux_loss_coef, and ufp4's own "ufp4_moe_capacity_factor" and
 *                              "ufp4_moe_z_loss_coef", which transformers ignores)
 *   DIR/model.safetensors      fp32 parameters under HF names (lm_head omitted when tied), with
 *                              metadata {"format": "pt"}, which transformers requires, and
 *                              "ufp4_recipes": the recipe of every projection at this step
 *                              (ufp4_model_recipe_table's lines, model.h). An MoE
 *                              checkpoint adds zero q/k/v biases to every layer (Qwen2 attention
 *                              always has them) and, without a shared expert, a zero-width one
 *                              (shared_expert.{gate,up}_proj [0, C], down_proj [C, 0]) with a zero
 *                              shared_expert_gate [1, C], since Qwen2-MoE always builds one; its
 *                              output is then exactly 0. Loading checks the biases are zero.
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
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Writes config.json for c into `path` (atomically). */
int ufp4_hf_config_write(const char *path, const ufp4_model_config *c);
/* Reads a LlamaConfig or Qwen2MoeConfig config.json: unknown keys are ignored, missing required ones
 * and unsupported values (Llama biases, another activation or model type, rope scaling; for
 * qwen2_moe norm_topk_prob false, a non-empty mlp_only_layers, sliding windows, or a top_k ufp4
 * does not implement) are errors. A missing optional key takes transformers' default. */
int ufp4_hf_config_read(const char *path, ufp4_model_config *c);

/* Saves parameters (and, when m_state/v_state are non-NULL, the AdamW state with `trainer_json`
 * as metadata) into checkpoint folder `dir`. */
int ufp4_checkpoint_save(const char *dir, ufp4_model *m, const float *m_state, const float *v_state,
                         const char *trainer_json);
/* Reads config.json of `dir` into *c. */
int ufp4_checkpoint_config(const char *dir, ufp4_model_config *c);
/* Loads the parameters of `dir` into m (its config must match the file's shapes). A folder exported
 * in hf-nvfp4 or hf-mxfp4 (export_hf.h) is recognized by its config and its 4-bit projections are
 * dequantized as the engines decode them. */
int ufp4_checkpoint_load_params(const char *dir, ufp4_model *m);
/* Loads the optimizer state; *trainer_json receives a malloc'ed copy of the metadata (or NULL). */
int ufp4_checkpoint_load_optimizer(const char *dir, size_t n_params, float *m_state, float *v_state,
                                   char **trainer_json);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
