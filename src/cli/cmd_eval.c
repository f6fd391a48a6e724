/* ufp4 eval: validation loss and perplexity of a checkpoint on a token shard. */
#include <math.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_flags.h"
#include "ufp4/model_io.h"

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: ufp4 eval --checkpoint DIR --data SHARD [--batches N] [--batch B] [--recipe SPEC]\n"
      "                 [--override PATTERN=SPEC ...]\n\n"
      "Mean next-token cross-entropy (nats) and perplexity of the checkpoint DIR (a folder with\n"
      "config.json and model.safetensors) over the first N batches of B x seq_len windows of SHARD,\n"
      "in shard order. SHARD is a .tok file, or a folder holding val.tok. --recipe runs the forward\n"
      "under a recipe (default fp32); its random RHT signs come from the seed of the run that wrote\n"
      "DIR, as in training, so a run's own recipe and --eval-batches give its own validation loss.\n"
      "--override (repeatable, as in train; docs/TRAINING.md) sets the recipe of the projections\n"
      "whose names match PATTERN, in order, the last match winning; lm_head is fp32 unless one names\n"
      "it. To evaluate a run trained with overrides under its own mix, pass its config.json's\n"
      "\"recipe\" as --recipe (under a schedule, the phase's SPEC) and each of its \"overrides\"\n"
      "as --override.\n");
}

typedef struct {
  const char *ckpt, *data, *recipe;
  long batches, batch;
  char overrides[UFP4_OVERRIDES_MAX];
} eval_opts;

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, eval_opts *o) {
  *o = (eval_opts){.recipe = "fp32", .batches = 16, .batch = 4};
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0)
      o->ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--data", &v)) > 0)
      o->data = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipe", &v)) > 0)
      o->recipe = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--override", &v)) > 0) {
      if (ufp4_cli_append_override("eval", "--override", v, o->overrides, sizeof o->overrides)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--batches", &v)) > 0) {
      if (cli_parse_long("eval", "--batches", v, 1, 1 << 30, &o->batches)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--batch", &v)) > 0) {
      if (cli_parse_long("eval", "--batch", v, 1, 1 << 20, &o->batch)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 eval: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!o->ckpt || !o->data) {
    usage(stderr);
    return 2;
  }
  return 0;
}

int ufp4_cmd_eval(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  static eval_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  ufp4_eval_result res;
  if (ufp4_eval_checkpoint(o.ckpt, o.data, o.recipe, o.overrides, o.batches, (int)o.batch, &res))
    return cli_error("eval", NULL);
  /* The loss with 9 significant digits, as metrics.jsonl writes val_loss (ufp4_json_num), so an
   * evaluation reads back as the run's own line does. */
  printf("checkpoint %s  data %s  batches %ld x %ld x %d  loss %.9g  perplexity %.4f\n", o.ckpt,
         res.path, res.batches, o.batch, res.seq_len, res.loss, exp(res.loss));
  return 0;
}
