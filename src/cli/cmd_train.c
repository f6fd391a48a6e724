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
          "                      only --steps, --total-steps, --threads, --ckpt-every, --keep-ckpts,\n"
          "                      --diag-every, --guard, --guard-policy, --nan-policy and --data may\n"
          "                      change), reproducing the uninterrupted run\n"
          "  --no-progress       no progress line on stderr\n\n"
          "Data parallel: `mpirun -np N ufp4 train ...` trains on N ranks, each on its own part of the\n"
          "data, with --batch sequences per rank (global batch N x batch x accum); rank 0 writes the run\n"
          "folder. A resume needs the same N. See docs/DISTRIBUTED.md.\n");
  const ufp4_train_config def = ufp4_train_config_default();
  ufp4_train_flags_usage(out, &def, NULL);
}

/* The run config from RUN/config.json (--resume), then --config FILE, then the flags, in that
 * order, so flags override what the files set. Returns 0 or the exit status (1 or 2). */
static int parse_args(int argc, char **argv, ufp4_train_config *cfg, const char **data_dir,
                      int *resume, const char **config_file) {
  const char *config = NULL, *v;
  for (int i = 1; i < argc; i++) {
    int r = cli_value(argc, argv, &i, "--config", &v);
    if (r < 0) return 2;
    if (r) config = v;
    else if (cli_flag(argv, i, "--resume")) *resume = 1;
  }
  for (int i = 1; i < argc; i++) {
    int r = cli_value(argc, argv, &i, "--out", &v);
    if (r < 0) return 2;
    if (r && ufp4_train_set_out_dir(cfg, v)) {
      cli_error("train", "--out");
      return 2; /* a bad flag value, like the others' */
    }
  }
  if (*resume) {
    char path[sizeof cfg->out_dir + 16];
    snprintf(path, sizeof path, "%s/config.json", cfg->out_dir);
    if (ufp4_train_config_load(path, cfg)) return cli_error("train", "--resume");
  }
  if (config && ufp4_train_config_load_strict(config, cfg)) return cli_error("train", NULL);
  *config_file = config;
  for (int i = 1; i < argc; i++) {
    int r;
    if ((r = cli_value(argc, argv, &i, "--config", &v)) ||
        (r = cli_value(argc, argv, &i, "--out", &v))) {
      if (r < 0) return 2;
      continue;
    }
    if (cli_flag(argv, i, "--resume")) continue;
    if ((r = cli_value(argc, argv, &i, "--data", &v))) {
      if (r < 0) return 2;
      *data_dir = v;
      continue;
    }
    if (ufp4_train_flags_parse_or_fail("train", argc, argv, &i, cfg) < 0) return 2;
  }
  return 0;
}

/* Rank 0's summary of what is about to run. */
static void print_plan(const ufp4_train_config *cfg, const char *resolved) {
  const ufp4_model_config *m = &cfg->model;
  fprintf(stderr, "ufp4 train: recipe %s\n", resolved);
  fprintf(stderr, "ufp4 train: model L=%d d=%d heads=%d/%d ffn=%d T=%d, ", m->n_layers, m->d_model,
          m->n_heads, m->n_kv_heads ? m->n_kv_heads : m->n_heads, m->ffn_dim, m->seq_len);
  fprintf(stderr, "batch %d x %d x accum %d, %d steps\n", cfg->batch, m->seq_len, cfg->grad_accum,
          cfg->steps);
  if (m->moe_experts > 0)
    fprintf(stderr,
            "ufp4 train: MoE MLPs every %d layer(s): %d experts, top-%d, expert ffn %d, "
            "shared ffn %d, capacity %g%s, aux %g, z %g\n",
            m->moe_every, m->moe_experts, m->moe_top_k, m->moe_ffn ? m->moe_ffn : m->ffn_dim,
            m->moe_shared_ffn, m->moe_capacity, m->moe_capacity > 0 ? "" : " (dropless)",
            m->moe_aux_coef, m->moe_z_coef);
  if (cfg->world > 1)
    fprintf(stderr, "ufp4 train: %d ranks, global batch %d sequences (%lld tokens) per step\n",
            cfg->world, cfg->batch * cfg->grad_accum * cfg->world,
            (long long)cfg->batch * cfg->grad_accum * cfg->world * cfg->model.seq_len);
  if (cfg->guard[0])
    fprintf(stderr, "ufp4 train: health guard %s every %d steps, policy %s\n", cfg->guard, cfg->diag_every,
            cfg->guard_policy);
}

/* The notes on keys of the --config file that the run does not take from it (derived ones, the
 * vocabulary), against the config the run will have once the data resolves it; nothing when the
 * data cannot be read (the run itself then says why). */
static void print_config_notes(const char *config_file, const ufp4_train_config *cfg, const char *data_dir) {
  static ufp4_train_config resolved;
  static char notes[16384];
  resolved = *cfg;
  if (ufp4_train_shards_resolve(&resolved, data_dir) ||
      !ufp4_train_config_derived_notes(config_file, &resolved, notes, sizeof notes))
    return;
  char *save = NULL;
  for (char *line = strtok_r(notes, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    fprintf(stderr, "ufp4 train: note: %s\n", line);
}

/* With a schedule the run trains its phases, the first one being the run's recipe (train.h): the
 * start line (resolved, which holds the recipe's resolved spec) names them, and a recipe set by
 * --recipe or --config that is not the first phase's, which the run would ignore, is refused. 0,
 * or the exit status. */
static int say_schedule(const ufp4_train_config *cfg, int argc, char **argv, char *resolved, size_t size) {
  static ufp4_recipe_schedule sched;
  ufp4_recipe first;
  char spec[512];
  if (ufp4_schedule_parse(cfg->schedule, cfg->steps, &sched) || ufp4_recipe_parse(sched.spec[0], &first)) {
    cli_error("train", "--schedule");
    return 2;
  }
  ufp4_recipe_format(&first, spec, sizeof spec);
  /* A recipe was set when --recipe is given or the --config file's differs from the default (a
   * resume's config.json holds the first phase, so it agrees). */
  static ufp4_train_config def;
  def = ufp4_train_config_default();
  int set = strcmp(cfg->recipe, def.recipe) != 0;
  for (int i = 1; i < argc; i++) set |= !strcmp(argv[i], "--recipe") || !strncmp(argv[i], "--recipe=", 9);
  if (set && strcmp(spec, resolved)) {
    fprintf(stderr,
            "ufp4 train: the recipe %s (of --recipe, --config or a resumed run) is not the first phase "
            "of the schedule '%s' (%s), which is the run's recipe; leave the recipe out\n",
            resolved, cfg->schedule, spec);
    return 2;
  }
  snprintf(resolved, size, "%s (the first phase of --schedule '%s')", spec, cfg->schedule);
  return 0;
}

/* Trains over all ranks of this process's world (data parallel; the ranks of a node share its
 * cores); returns the exit status. */
static int run(ufp4_train_config *cfg, const char *data_dir, int resume, const char *resolved,
               const char *config_file) {
  cli_run_share share;
  if (cli_run_share_begin(&share, cfg->threads)) return cli_error("train", NULL);
  cfg->rank = share.rank;
  cfg->world = share.world;
  const int rank0 = cfg->rank == 0;
  if (!rank0) cfg->progress = 0;
  if (rank0) print_plan(cfg, resolved);
  if (rank0 && config_file) print_config_notes(config_file, cfg, data_dir);
  ufp4_train_result res;
  char dir[sizeof cfg->data_desc];
  snprintf(dir, sizeof dir, "%s", data_dir);
  int rc = ufp4_train_shards(cfg, dir, resume, &res);
  /* Every failure after launch is agreed by all ranks (train.h), so rank 0 alone reports it. */
  if (rc && rank0) cli_error("train", NULL);
  if (!rc && rank0)
    printf("steps %d  final loss %.4f  val loss %.4f  %.0f tokens/s  skipped %d  run %s\n",
           res.steps_done, res.final_loss, res.final_val_loss, res.tokens_per_s, res.skipped_steps,
           cfg->out_dir);
  cli_run_share_end(&share);
  return rc ? 1 : 0;
}

int ufp4_cmd_train(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_train_config cfg = ufp4_train_config_default();
  const char *data_dir = NULL;
  int resume = 0;
  const char *config_file = NULL;
  int rc = parse_args(argc, argv, &cfg, &data_dir, &resume, &config_file);
  if (rc) return rc;
  if (!data_dir && !resume) {
    fprintf(stderr, "ufp4 train: --data DIR is required (a folder written by ufp4 prepare)\n");
    return 2;
  }
  if (!data_dir) data_dir = cfg.data_desc;
  ufp4_recipe recipe;
  if (ufp4_recipe_parse(cfg.recipe, &recipe)) {
    cli_error("train", "--recipe");
    return 2;
  }
  /* The cosine ends with the run. */
  if (cfg.optim.total_steps <= 0) cfg.optim.total_steps = cfg.steps;
  char resolved[1600]; /* a spec (under 512) and, with a schedule, its text (under 1024) */
  ufp4_recipe_format(&recipe, resolved, 512);
  if (cfg.schedule[0] && (rc = say_schedule(&cfg, argc, argv, resolved, sizeof resolved))) return rc;
  return run(&cfg, data_dir, resume, resolved, config_file);
}
