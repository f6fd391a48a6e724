/* The run configuration's schema: the one place each setting of ufp4_train_config is declared,
 * with its JSON key, command-line flag, type, range, default and help text. The JSON writer and
 * loader (train_config.c), the flag parser and the flags' --help lines (cli/train_flags.c) are all
 * generated from UFP4_TRAIN_SCHEMA, so a range cannot differ between a flag and its config key.
 *
 *   X(obj, when, key, flag, kind, member, lo, hi, def, help)   a setting
 *   D(obj, when, key, fn)                                      a derived key: written, never read
 *
 *   obj     the JSON object holding the key: MODEL ("model"), OPTIM ("optim"), RUN (top level)
 *   when    ALL, or MOE: written only for an MoE model (moe_experts > 0), so that a dense run's
 *           config.json stays as it was before MoE existed; a MOE key is read whenever present;
 *           SET: written only when not empty (the config.json of a run without it keeps its
 *           text, so earlier runs stay resumable)
 *           GUARD: written only when guard is set (guard_policy: a run without guards keeps
 *           its config.json, and a grid's resume still recognises its folders)
 *   flag    the command-line flag, or NULL when the setting has none
 *   kind    INT (int), FLOAT (float), DOUBLE (double): a number in [lo, hi], INT a whole one;
 *           SEED (uint64_t): a whole number in [lo, hi] (hi is 2^53: config.json holds numbers as
 *           doubles, and a larger seed would come back as another one on resume);
 *           TEXT (char[]): a string shorter than the member; RECIPE: TEXT, written resolved
 *           (ufp4_recipe_format) when it parses, and as the schedule's first phase when the run
 *           has one; POLICY (ufp4_nan_policy): "skip" or "stop"; OVERRIDES (char[]): ';'-joined
 *           PATTERN=SPEC items, a JSON array of strings, a flag that appends one item
 *   def     the default of a RUN setting; MODEL and OPTIM settings take theirs from
 *           ufp4_model_config_default and ufp4_adamw_default (OWN in the table)
 *   fn      double fn(const ufp4_train_config *), defined in train_config.c
 *
 * Rows are in config.json's order (the writer emits them in table order), which is also the order
 * of the flags in --help. */
#ifndef UFP4_TRAINING_TRAIN_SCHEMA_H
#define UFP4_TRAINING_TRAIN_SCHEMA_H

#include <stddef.h>
#include "ufp4/train.h"

/* 2^53: the largest integer a double (and so a JSON number read by cJSON) holds exactly. */
#define UFP4_JSON_INT_MAX 9007199254740992.0

/* clang-format off */
#define UFP4_TRAIN_SCHEMA(X, D)                                                                    \
  X(MODEL, ALL, "n_layers", "--layers", INT, model.n_layers, 1, UFP4_MODEL_MAX_LAYERS, OWN,        \
    "transformer blocks")                                                                          \
  X(MODEL, ALL, "d_model", "--d-model", INT, model.d_model, 2, 65536, OWN, "model width")          \
  X(MODEL, ALL, "n_heads", "--heads", INT, model.n_heads, 1, 4096, OWN, "attention heads")         \
  X(MODEL, ALL, "n_kv_heads", "--kv-heads", INT, model.n_kv_heads, 1, 4096, OWN,                   \
    "key/value heads (grouped-query attention; default: --heads)")                                \
  X(MODEL, ALL, "ffn_dim", "--ffn", INT, model.ffn_dim, 1, 1e6, OWN, "MLP hidden width")           \
  X(MODEL, ALL, "seq_len", "--seq-len", INT, model.seq_len, 1, 1e6, OWN, "tokens per sequence")    \
  X(MODEL, ALL, "vocab", NULL, INT, model.vocab, 2, 1 << 24, OWN, "vocabulary (from the data)")    \
  X(MODEL, ALL, "rms_eps", "--rms-eps", FLOAT, model.rms_eps, 1e-12, 1, OWN, "RMSNorm epsilon")    \
  X(MODEL, ALL, "rope_theta", "--rope-theta", DOUBLE, model.rope_theta, 1.0001, 1e12, OWN,         \
    "RoPE base")                                                                                   \
  X(MODEL, ALL, "init_std", "--init-std", FLOAT, model.init_std, 1e-9, 10, OWN,                    \
    "weight init standard deviation")                                                              \
  X(MODEL, ALL, "tie_embeddings", "--tie-embeddings", INT, model.tie_embeddings, 0, 1, OWN,        \
    "1: lm_head shares the embedding")                                                             \
  X(MODEL, MOE, "moe_experts", "--moe-experts", INT, model.moe_experts, 0, UFP4_MOE_MAX_EXPERTS,   \
    OWN, "MoE: routed experts per MoE layer (0: dense model)")                                     \
  X(MODEL, MOE, "moe_top_k", "--moe-top-k", INT, model.moe_top_k, 1, 2, OWN,                       \
    "MoE: experts per token, 1 or 2")                                                              \
  X(MODEL, MOE, "moe_ffn", "--moe-ffn", INT, model.moe_ffn, 0, 1e6, OWN,                           \
    "MoE: width of each expert (0: --ffn)")                                                        \
  X(MODEL, MOE, "moe_shared_ffn", "--moe-shared-ffn", INT, model.moe_shared_ffn, 0, 1e6, OWN,      \
    "MoE: width of the shared expert (0: none)")                                                   \
  X(MODEL, MOE, "moe_every", "--moe-every", INT, model.moe_every, 1, UFP4_MODEL_MAX_LAYERS, OWN,   \
    "MoE: layer l is MoE when (l+1) % N == 0")                                                     \
  X(MODEL, MOE, "moe_capacity", "--moe-capacity", FLOAT, model.moe_capacity, 0, 1e6, OWN,          \
    "MoE: capacity factor (0: dropless)")                                                          \
  X(MODEL, MOE, "moe_aux_coef", "--moe-aux-coef", FLOAT, model.moe_aux_coef, 0, 1e6, OWN,          \
    "MoE: load-balancing loss coefficient")                                                        \
  X(MODEL, MOE, "moe_z_coef", "--moe-z-coef", FLOAT, model.moe_z_coef, 0, 1e6, OWN,                \
    "MoE: router z-loss coefficient")                                                              \
  D(MODEL, ALL, "n_params", n_params_of)                                                           \
  D(MODEL, MOE, "n_active_params", n_active_params_of)                                             \
  X(RUN, ALL, "recipe", "--recipe", RECIPE, recipe, 0, 0, "fp32",                                  \
    "recipe spec: fp32 bf16 e2m1 ufp4 nvfp4 mxfp4 e2m1-4over6 nvfp4-4over6 "                       \
    "[,key=value...]")                                                                             \
  X(RUN, SET, "overrides", "--override", OVERRIDES, overrides, 0, 0, "",                           \
    "PATTERN=SPEC: projections named by the glob run SPEC, full or partial, over the recipe "      \
    "(repeatable, last match wins; docs/TRAINING.md)")                                             \
  X(RUN, SET, "schedule", "--schedule", TEXT, schedule, 0, 0, "",                                  \
    "recipe schedule SPEC@AT,... (AT a step, or a fraction of --steps with a '.')")                \
  X(OPTIM, ALL, "lr", "--lr", DOUBLE, optim.lr, 0, 10, OWN, "peak learning rate")                  \
  X(OPTIM, ALL, "min_lr", "--min-lr", DOUBLE, optim.min_lr, 0, 10, OWN,                            \
    "final learning rate of the cosine")                                                           \
  X(OPTIM, ALL, "warmup_steps", "--warmup", INT, optim.warmup_steps, 0, 1e9, OWN,                  \
    "linear warmup steps")                                                                         \
  X(OPTIM, ALL, "total_steps", "--total-steps", INT, optim.total_steps, 0, 1e9, OWN,               \
    "cosine horizon (0: --steps)")                                                                 \
  X(OPTIM, ALL, "beta1", "--beta1", DOUBLE, optim.beta1, 0, 0.999999, OWN, "AdamW beta1")          \
  X(OPTIM, ALL, "beta2", "--beta2", DOUBLE, optim.beta2, 0, 0.999999999, OWN, "AdamW beta2")       \
  X(OPTIM, ALL, "eps", NULL, DOUBLE, optim.eps, 0, 1, OWN, "AdamW epsilon")                        \
  X(OPTIM, ALL, "weight_decay", "--weight-decay", DOUBLE, optim.weight_decay, 0, 10, OWN,          \
    "AdamW decoupled weight decay (2-D weights)")                                                  \
  X(OPTIM, ALL, "grad_clip", "--grad-clip", DOUBLE, optim.grad_clip, 0, 1e9, OWN,                  \
    "max global gradient norm (0: off)")                                                           \
  X(RUN, ALL, "batch", "--batch", INT, batch, 1, 1e6, 8, "sequences per micro-batch")              \
  X(RUN, ALL, "grad_accum", "--accum", INT, grad_accum, 1, 1e6, 1,                                 \
    "micro-batches per step (gradient accumulation)")                                              \
  D(RUN, ALL, "world", world_of)                                                                   \
  D(RUN, ALL, "global_batch_tokens", global_batch_tokens_of)                                       \
  X(RUN, ALL, "steps", "--steps", INT, steps, 1, 1e9, 200, "optimizer steps")                      \
  X(RUN, ALL, "seed", "--seed", SEED, seed, 0, UFP4_JSON_INT_MAX, 1,                               \
    "seed: init, data order, SR streams, RHT signs")                                               \
  X(RUN, ALL, "log_every", "--log-every", INT, log_every, 1, 1e9, 1, "metrics line every N steps") \
  X(RUN, ALL, "eval_every", "--eval-every", INT, eval_every, 0, 1e9, 50,                           \
    "validation every N steps (0: at the end)")                                                    \
  X(RUN, ALL, "eval_batches", "--eval-batches", INT, eval_batches, 0, 1e6, 8,                      \
    "validation batches per evaluation")                                                           \
  X(RUN, ALL, "ckpt_every", "--ckpt-every", INT, ckpt_every, 0, 1e9, 0,                            \
    "checkpoint every N steps (0: at the end)")                                                    \
  X(RUN, ALL, "diag_every", "--diag-every", INT, diag_every, 0, 1e9, 0,                            \
    "diagnostics.jsonl every N steps (0: off)")                                                    \
  X(RUN, SET, "guard", "--guard", TEXT, guard, 0, 0, "",                                            \
    "health guards on the diagnostics schedule, e.g. 'underflow<0.5,clip<0.01,sqnr>10,srbias<4sigma'"  \
    " (needs --diag-every; docs/TRAINING.md)")                                                     \
  X(RUN, GUARD, "guard_policy", "--guard-policy", TEXT, guard_policy, 0, 0, "warn",                \
    "warn | stop: what a guard breach does")                                                       \
  X(RUN, ALL, "keep_ckpts", "--keep-ckpts", INT, keep_ckpts, 1, 1e6, 2, "checkpoints kept")        \
  X(RUN, ALL, "nan_policy", "--nan-policy", POLICY, nan_policy, 0, 0, UFP4_NAN_SKIP,               \
    "skip | stop: what a non-finite loss or gradient does")                                        \
  X(RUN, ALL, "threads", "--threads", INT, threads, 0, 1024, 0,                                   \
    "OpenMP threads (0: the OpenMP default)")                                                      \
  X(RUN, ALL, "data", NULL, TEXT, data_desc, 0, 0, "", "where the batches come from")
/* clang-format on */

typedef enum {
  UFP4_CFG_INT,
  UFP4_CFG_FLOAT,
  UFP4_CFG_DOUBLE,
  UFP4_CFG_SEED,
  UFP4_CFG_TEXT,
  UFP4_CFG_RECIPE,
  UFP4_CFG_POLICY,
  UFP4_CFG_OVERRIDES,
  UFP4_CFG_DERIVED,
} ufp4_cfg_kind;

enum { UFP4_WHEN_ALL = 0, UFP4_WHEN_MOE, UFP4_WHEN_SET, UFP4_WHEN_GUARD };

/* One row of UFP4_TRAIN_SCHEMA, as data. */
typedef struct {
  const char *parent;  /* "model", "optim", or NULL for the top level */
  int when;            /* UFP4_WHEN_*: when the writer writes the key */
  const char *key;
  const char *flag;    /* NULL: no flag */
  ufp4_cfg_kind kind;
  size_t offset, size; /* of the member in ufp4_train_config (0 for DERIVED) */
  double lo, hi;       /* numeric kinds */
  const char *help;    /* NULL for DERIVED */
  double (*derive)(const ufp4_train_config *c); /* DERIVED only */
} ufp4_train_field;

/* The rows of UFP4_TRAIN_SCHEMA in order, DERIVED ones included (train_config.c). */
extern const ufp4_train_field ufp4_train_fields[];
extern const size_t ufp4_train_n_fields;

#endif
