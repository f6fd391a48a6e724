/* ufp4 sample: generate text from a checkpoint. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/model_io.h"

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: ufp4 sample --checkpoint DIR --tokenizer bytes|gpt2|PATH --prompt TEXT\n"
      "                   [--tokens N] [--temperature X] [--top-k K] [--seed S] [--recipe SPEC]\n\n"
      "Continues TEXT by N tokens (default 100) with the model in DIR. Temperature 0 is greedy;\n"
      "top-k 0 samples from the whole vocabulary. The same seed gives the same text. The tokenizer\n"
      "must be the one the training shards were prepared with.\n");
}

typedef struct {
  const char *ckpt, *tok_spec, *prompt, *recipe;
  long n_new, top_k;
  ufp4_sample_opts s;
} sample_opts;

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, sample_opts *o) {
  *o = (sample_opts){
      .recipe = "fp32", .n_new = 100, .top_k = 40, .s = {.temperature = 0.8, .seed = 1}};
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0)
      o->ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--tokenizer", &v)) > 0)
      o->tok_spec = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--prompt", &v)) > 0)
      o->prompt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipe", &v)) > 0)
      o->recipe = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--tokens", &v)) > 0) {
      if (cli_parse_long("sample", "--tokens", v, 0, 1 << 20, &o->n_new)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--top-k", &v)) > 0) {
      if (cli_parse_long("sample", "--top-k", v, 0, 1 << 24, &o->top_k)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--temperature", &v)) > 0) {
      if (cli_parse_double("sample", "--temperature", v, 0, 100, &o->s.temperature)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--seed", &v)) > 0) {
      if (cli_parse_u64("sample", "--seed", v, &o->s.seed)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 sample: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!o->ckpt || !o->tok_spec || !o->prompt) {
    usage(stderr);
    return 2;
  }
  o->s.top_k = (int)o->top_k;
  return 0;
}

int ufp4_cmd_sample(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  sample_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  char *text;
  size_t len;
  if (ufp4_sample_checkpoint(o.ckpt, o.tok_spec, o.recipe, o.prompt, (int)o.n_new, &o.s, &text,
                             &len))
    return cli_error("sample", NULL);
  fwrite(text, 1, len, stdout);
  fputc('\n', stdout);
  free(text);
  return 0;
}
