#include "cli/train_flags.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/args.h"

typedef enum { F_INT, F_FLOAT, F_DOUBLE, F_U64, F_STR, F_NAN } flag_kind;

typedef struct {
  const char *name;
  flag_kind kind;
  size_t offset; /* into ufp4_train_config */
  double lo, hi;
  const char *help;
} flag;

#define OFF(field) offsetof(ufp4_train_config, field)
static const flag flags[] = {
    {"--recipe", F_STR, OFF(recipe), 0, 0, "recipe spec: fp32 bf16 e2m1 ufp4 nvfp4 mxfp4 [,key=value...]"},
    {"--steps", F_INT, OFF(steps), 1, 1e9, "optimizer steps"},
    {"--batch", F_INT, OFF(batch), 1, 1e6, "sequences per micro-batch"},
    {"--accum", F_INT, OFF(grad_accum), 1, 1e6, "micro-batches per step (gradient accumulation)"},
    {"--seq-len", F_INT, OFF(model.seq_len), 1, 1e6, "tokens per sequence"},
    {"--layers", F_INT, OFF(model.n_layers), 1, 4096, "transformer blocks"},
    {"--d-model", F_INT, OFF(model.d_model), 2, 65536, "model width"},
    {"--heads", F_INT, OFF(model.n_heads), 1, 4096, "attention heads"},
    {"--kv-heads", F_INT, OFF(model.n_kv_heads), 1, 4096, "key/value heads (grouped-query attention)"},
    {"--ffn", F_INT, OFF(model.ffn_dim), 1, 1e6, "MLP hidden width"},
    {"--tie-embeddings", F_INT, OFF(model.tie_embeddings), 0, 1, "1: lm_head shares the embedding"},
    {"--rope-theta", F_DOUBLE, OFF(model.rope_theta), 1.0001, 1e12, "RoPE base"},
    {"--init-std", F_FLOAT, OFF(model.init_std), 1e-9, 10, "weight init standard deviation"},
    {"--rms-eps", F_FLOAT, OFF(model.rms_eps), 1e-12, 1, "RMSNorm epsilon"},
    {"--moe-experts", F_INT, OFF(model.moe_experts), 0, 4096, "MoE: routed experts per MoE layer (0: dense model)"},
    {"--moe-top-k", F_INT, OFF(model.moe_top_k), 1, 2, "MoE: experts per token, 1 or 2 (default 2)"},
    {"--moe-ffn", F_INT, OFF(model.moe_ffn), 0, 1e6, "MoE: width of each expert (0: --ffn)"},
    {"--moe-shared-ffn", F_INT, OFF(model.moe_shared_ffn), 0, 1e6, "MoE: width of the shared expert (0: none)"},
    {"--moe-every", F_INT, OFF(model.moe_every), 1, 4096, "MoE: layer l is MoE when (l+1) % N == 0 (default 1)"},
    {"--moe-capacity", F_FLOAT, OFF(model.moe_capacity), 0, 1e6, "MoE: capacity factor (0: dropless)"},
    {"--moe-aux-coef", F_FLOAT, OFF(model.moe_aux_coef), 0, 1e6, "MoE: load-balancing loss coefficient (default 0.01)"},
    {"--moe-z-coef", F_FLOAT, OFF(model.moe_z_coef), 0, 1e6, "MoE: router z-loss coefficient (default 0)"},
    {"--lr", F_DOUBLE, OFF(optim.lr), 0, 10, "peak learning rate"},
    {"--min-lr", F_DOUBLE, OFF(optim.min_lr), 0, 10, "final learning rate of the cosine"},
    {"--warmup", F_INT, OFF(optim.warmup_steps), 0, 1e9, "linear warmup steps"},
    {"--total-steps", F_INT, OFF(optim.total_steps), 0, 1e9, "cosine horizon (default: --steps)"},
    {"--weight-decay", F_DOUBLE, OFF(optim.weight_decay), 0, 10, "AdamW decoupled weight decay (2-D weights)"},
    {"--beta1", F_DOUBLE, OFF(optim.beta1), 0, 0.999999, "AdamW beta1"},
    {"--beta2", F_DOUBLE, OFF(optim.beta2), 0, 0.999999999, "AdamW beta2"},
    {"--grad-clip", F_DOUBLE, OFF(optim.grad_clip), 0, 1e9, "max global gradient norm (0: off)"},
    {"--seed", F_U64, OFF(seed), 0, 0, "seed: init, data order, SR streams, RHT signs"},
    {"--log-every", F_INT, OFF(log_every), 1, 1e9, "metrics line every N steps"},
    {"--eval-every", F_INT, OFF(eval_every), 0, 1e9, "validation every N steps (0: at the end)"},
    {"--eval-batches", F_INT, OFF(eval_batches), 0, 1e6, "validation batches per evaluation"},
    {"--ckpt-every", F_INT, OFF(ckpt_every), 0, 1e9, "checkpoint every N steps (0: at the end)"},
    {"--diag-every", F_INT, OFF(diag_every), 0, 1e9, "diagnostics.jsonl every N steps (0: off)"},
    {"--keep-ckpts", F_INT, OFF(keep_ckpts), 1, 1e6, "checkpoints kept"},
    {"--threads", F_INT, OFF(threads), 0, 1024, "OpenMP threads (0: default)"},
    {"--nan-policy", F_NAN, OFF(nan_policy), 0, 0, "skip | stop: what a non-finite loss or gradient does"},
};

void ufp4_train_flags_usage(FILE *out) {
  for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) fprintf(out, "  %-18s  %s\n", flags[k].name, flags[k].help);
}

int ufp4_train_flags_parse(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg) {
  for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
    const flag *f = &flags[k];
    const char *v;
    int r = cli_value(argc, argv, i, f->name, &v);
    if (r <= 0) {
      if (r < 0) return -1;
      continue;
    }
    char *field = (char *)cfg + f->offset;
    long lv;
    double dv;
    switch (f->kind) {
    case F_INT:
      if (cli_parse_long(cmd, f->name, v, (long)f->lo, (long)f->hi, &lv)) return -1;
      *(int *)field = (int)lv;
      return 1;
    case F_FLOAT:
    case F_DOUBLE:
      if (cli_parse_double(cmd, f->name, v, f->lo, f->hi, &dv)) return -1;
      if (f->kind == F_FLOAT) *(float *)field = (float)dv;
      else *(double *)field = dv;
      return 1;
    case F_U64:
      return cli_parse_u64(cmd, f->name, v, (uint64_t *)field) ? -1 : 1;
    case F_STR:
      if (strlen(v) >= sizeof cfg->recipe) {
        fprintf(stderr, "ufp4 %s: %s: value too long\n", cmd, f->name);
        return -1;
      }
      strcpy(field, v);
      return 1;
    case F_NAN:
      if (strcmp(v, "skip") && strcmp(v, "stop")) {
        fprintf(stderr, "ufp4 %s: %s: expected skip or stop, not '%s'\n", cmd, f->name, v);
        return -1;
      }
      *(ufp4_nan_policy *)field = strcmp(v, "stop") ? UFP4_NAN_SKIP : UFP4_NAN_STOP;
      return 1;
    }
  }
  return 0;
}

int ufp4_train_flags_parse_or_fail(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg) {
  if (cli_flag(argv, *i, "--no-progress")) {
    cfg->progress = 0;
    return 1;
  }
  int r = ufp4_train_flags_parse(cmd, argc, argv, i, cfg);
  if (r == 0) {
    fprintf(stderr, "ufp4 %s: unknown option '%s' (see ufp4 %s --help)\n", cmd, argv[*i], cmd);
    return -1;
  }
  return r;
}
