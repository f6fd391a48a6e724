/* ufp4 eval: validation loss and perplexity of a checkpoint on a token shard. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_load.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 eval --checkpoint DIR --data SHARD [--batches N] [--batch B] [--recipe SPEC]\n\n"
          "Mean next-token cross-entropy (nats) and perplexity of the checkpoint DIR (a folder with\n"
          "config.json and model.safetensors) over the first N batches of B x seq_len windows of SHARD,\n"
          "in shard order. SHARD is a .tok file, or a folder holding val.tok. --recipe runs the forward\n"
          "under a recipe (default fp32).\n");
}

int ufp4_cmd_eval(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *ckpt = NULL, *data = NULL, *recipe = "fp32";
  long batches = 16, batch = 4;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0) ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--data", &v)) > 0) data = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipe", &v)) > 0) recipe = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--batches", &v)) > 0) {
      if (cli_parse_long("eval", "--batches", v, 1, 1 << 30, &batches)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--batch", &v)) > 0) {
      if (cli_parse_long("eval", "--batch", v, 1, 1 << 20, &batch)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 eval: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!ckpt || !data) {
    usage(stderr);
    return 2;
  }
  ufp4_model *m;
  if (ufp4_cli_load_model(ckpt, recipe, (int)batch, &m)) {
    fprintf(stderr, "ufp4 eval: %s\n", ufp4_last_error());
    return 1;
  }
  /* A copy: the summary line below is printed after the model (which owns its config) is freed. */
  const ufp4_model_config cfg = *ufp4_model_get_config(m), *c = &cfg;
  char path[4200];
  size_t len = strlen(data);
  if (len > 4 && !strcmp(data + len - 4, ".tok")) snprintf(path, sizeof path, "%s", data);
  else snprintf(path, sizeof path, "%s/val.tok", data);
  ufp4_loader_config lc = {.batch = (size_t)batch, .seq_len = (size_t)c->seq_len, .seed = 0, .world = 1, .shuffle = 0};
  ufp4_shard_source src = {0};
  int rc = ufp4_loader_open(path, &lc, &src.loader);
  if (!rc && ufp4_loader_shard(src.loader)->info.vocab_size > (uint32_t)c->vocab)
    rc = ufp4_fail(UFP4_EINVAL, "%s: vocabulary %u is larger than the model's %d", path,
                   ufp4_loader_shard(src.loader)->info.vocab_size, c->vocab);
  double loss = NAN;
  if (!rc) {
    src.n = (size_t)batch * (size_t)(c->seq_len + 1);
    src.buf = malloc(src.n * sizeof(uint32_t));
    uint64_t avail = ufp4_loader_batches_per_epoch(src.loader);
    if ((uint64_t)batches > avail) batches = (long)avail;
    rc = src.buf ? ufp4_evaluate(m, ufp4_shard_source_batch, &src, (int)batches, (int)batch, c->seq_len, &loss)
                 : ufp4_fail(UFP4_ENOMEM, "eval: out of memory");
  }
  free(src.buf);
  ufp4_loader_free(src.loader);
  ufp4_model_free(m);
  if (rc) {
    fprintf(stderr, "ufp4 eval: %s\n", ufp4_last_error());
    return 1;
  }
  printf("checkpoint %s  data %s  batches %ld x %ld x %d  loss %.6f  perplexity %.4f\n", ckpt, path, batches, batch,
         c->seq_len, loss, exp(loss));
  return 0;
}
