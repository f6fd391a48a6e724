/* ufp4 train: pretrain a Llama-style model on token shards under a recipe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_share.h"
#include "cli/train_flags.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"
#include "ufp4/recipe.h"
#include "ufp4/train.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 train --data DIR --out RUN [options]\n"
          "       ufp4 train --out RUN --resume [--steps N]\n\n"
          "Trains a Llama-style decoder on DIR/train.tok (and evaluates on DIR/val.tok), the shards\n"
          "`ufp4 prepare` writes. Every linear projection of the blocks runs its three GEMMs under the\n"
          "recipe; the run folder RUN gets config.json, metrics.jsonl and Hugging Face checkpoints.\n\n"
          "  --config FILE       JSON config (the keys of RUN/config.json); flags override it\n"
          "  --resume            continue RUN from its latest checkpoint (config from RUN/config.json;\n"
          "                      only --steps may change), reproducing the uninterrupted run\n"
          "  --no-progress       no progress line on stderr\n\n"
          "Data parallel: `mpirun -np N ufp4 train ...` trains on N ranks, each on its own part of the\n"
          "data, with --batch sequences per rank (global batch N x batch x accum); rank 0 writes the run\n"
          "folder. A resume needs the same N. See docs/DISTRIBUTED.md.\n");
  ufp4_train_flags_usage(out);
}

int ufp4_cmd_train(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_train_config cfg = ufp4_train_config_default();
  const char *data_dir = NULL, *config = NULL;
  int resume = 0;
  /* The config file and --resume come first so that flags override what they load. */
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r = cli_value(argc, argv, &i, "--config", &v);
    if (r < 0) return 2;
    if (r) config = v;
    else if (cli_flag(argv, i, "--resume")) resume = 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r = cli_value(argc, argv, &i, "--out", &v);
    if (r < 0) return 2;
    if (r && ufp4_train_set_out_dir(&cfg, v)) {
      cli_error("train", "--out");
      return 2; /* a bad flag value, like the others' */
    }
  }
  if (resume) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", cfg.out_dir);
    if (ufp4_train_config_load(path, &cfg)) {
      fprintf(stderr, "ufp4 train: --resume: %s\n", ufp4_last_error());
      return 1;
    }
  }
  if (config && ufp4_train_config_load(config, &cfg)) {
    fprintf(stderr, "ufp4 train: %s\n", ufp4_last_error());
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--config", &v)) || (r = cli_value(argc, argv, &i, "--out", &v))) {
      if (r < 0) return 2;
      continue;
    }
    if (cli_flag(argv, i, "--resume")) continue;
    if ((r = cli_value(argc, argv, &i, "--data", &v))) {
      if (r < 0) return 2;
      data_dir = v;
      continue;
    }
    if (ufp4_train_flags_parse_or_fail("train", argc, argv, &i, &cfg) < 0) return 2;
  }
  if (!data_dir && !resume) {
    fprintf(stderr, "ufp4 train: --data DIR is required (a folder written by ufp4 prepare)\n");
    return 2;
  }
  if (!data_dir) data_dir = cfg.data_desc;
  ufp4_recipe recipe;
  if (ufp4_recipe_parse(cfg.recipe, &recipe)) {
    fprintf(stderr, "ufp4 train: --recipe: %s\n", ufp4_last_error());
    return 2;
  }
  if (cfg.optim.total_steps <= 0) cfg.optim.total_steps = cfg.steps; /* the cosine ends with the run */
  /* One run over all ranks (data parallel); the ranks of a node share its cores. */
  cli_run_share share;
  if (cli_run_share_begin(&share, cfg.threads)) {
    fprintf(stderr, "ufp4 train: %s\n", ufp4_last_error());
    return 1;
  }
  cfg.rank = share.rank;
  cfg.world = share.world;
  const int rank0 = cfg.rank == 0;
  if (!rank0) cfg.progress = 0;
  char resolved[512];
  ufp4_recipe_format(&recipe, resolved, sizeof resolved);
  if (rank0) {
    fprintf(stderr, "ufp4 train: recipe %s\n", resolved);
    fprintf(stderr, "ufp4 train: model L=%d d=%d heads=%d/%d ffn=%d T=%d, batch %d x %d x accum %d, %d steps\n",
            cfg.model.n_layers, cfg.model.d_model, cfg.model.n_heads,
            cfg.model.n_kv_heads ? cfg.model.n_kv_heads : cfg.model.n_heads, cfg.model.ffn_dim, cfg.model.seq_len,
            cfg.batch, cfg.model.seq_len, cfg.grad_accum, cfg.steps);
    if (cfg.model.moe_experts > 0)
      fprintf(stderr,
              "ufp4 train: MoE MLPs every %d layer(s): %d experts, top-%d, expert ffn %d, shared ffn %d, capacity %g%s, "
              "aux %g, z %g\n",
              cfg.model.moe_every, cfg.model.moe_experts, cfg.model.moe_top_k,
              cfg.model.moe_ffn ? cfg.model.moe_ffn : cfg.model.ffn_dim, cfg.model.moe_shared_ffn,
              cfg.model.moe_capacity, cfg.model.moe_capacity > 0 ? "" : " (dropless)", cfg.model.moe_aux_coef,
              cfg.model.moe_z_coef);
    if (cfg.world > 1)
      fprintf(stderr, "ufp4 train: %d ranks, global batch %d sequences (%lld tokens) per step\n", cfg.world,
              cfg.batch * cfg.grad_accum * cfg.world,
              (long long)cfg.batch * cfg.grad_accum * cfg.world * cfg.model.seq_len);
  }
  ufp4_train_result res;
  char dir[sizeof cfg.data_desc];
  snprintf(dir, sizeof dir, "%s", data_dir);
  int rc = ufp4_train_shards(&cfg, dir, resume, &res);
  /* Every failure after launch is agreed by all ranks (train.h), so rank 0 alone reports it. */
  if (rc && rank0) fprintf(stderr, "ufp4 train: %s\n", ufp4_last_error());
  if (!rc && rank0)
    printf("steps %d  final loss %.4f  val loss %.4f  %.0f tokens/s  skipped %d  run %s\n", res.steps_done,
           res.final_loss, res.final_val_loss, res.tokens_per_s, res.skipped_steps, cfg.out_dir);
  cli_run_share_end(&share);
  return rc ? 1 : 0;
}
