/* ufp4 sample: generate text from a checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_load.h"
#include "ufp4/error.h"
#include "ufp4/sample.h"
#include "ufp4/tokenizer.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 sample --checkpoint DIR --tokenizer bytes|gpt2|PATH --prompt TEXT\n"
          "                   [--tokens N] [--temperature X] [--top-k K] [--seed S] [--recipe SPEC]\n\n"
          "Continues TEXT by N tokens (default 100) with the model in DIR. Temperature 0 is greedy;\n"
          "top-k 0 samples from the whole vocabulary. The same seed gives the same text. The tokenizer\n"
          "must be the one the training shards were prepared with.\n");
}

int ufp4_cmd_sample(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *ckpt = NULL, *tok_spec = NULL, *prompt = NULL, *recipe = "fp32";
  long n_new = 100, top_k = 40;
  double temp = 0.8;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0) ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--tokenizer", &v)) > 0) tok_spec = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--prompt", &v)) > 0) prompt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipe", &v)) > 0) recipe = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--tokens", &v)) > 0) {
      if (cli_parse_long("sample", "--tokens", v, 0, 1 << 20, &n_new)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--top-k", &v)) > 0) {
      if (cli_parse_long("sample", "--top-k", v, 0, 1 << 24, &top_k)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--temperature", &v)) > 0) {
      if (cli_parse_double("sample", "--temperature", v, 0, 100, &temp)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--seed", &v)) > 0) {
      if (cli_parse_u64("sample", "--seed", v, &seed)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 sample: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!ckpt || !tok_spec || !prompt) {
    usage(stderr);
    return 2;
  }
  ufp4_tokenizer *tok = NULL;
  ufp4_model *m = NULL;
  ufp4_tokvec ids = {0};
  int32_t *seq = NULL;
  char *text = NULL;
  size_t text_len;
  int n_out = 0, rc = ufp4_tokenizer_open(tok_spec, &tok);
  if (!rc) rc = ufp4_cli_load_model(ckpt, recipe, 1, &m);
  if (!rc && ufp4_tokenizer_vocab_size(tok) > (uint32_t)ufp4_model_get_config(m)->vocab)
    rc = ufp4_fail(UFP4_EINVAL, "tokenizer %s has %u tokens but the model only %d", tok_spec,
                   ufp4_tokenizer_vocab_size(tok), ufp4_model_get_config(m)->vocab);
  if (!rc) rc = ufp4_tokenizer_encode(tok, prompt, strlen(prompt), "--prompt", &ids);
  if (!rc && !(seq = malloc(sizeof(int32_t) * (ids.n + (size_t)n_new + 1)))) rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
  if (!rc) {
    for (size_t i = 0; i < ids.n; i++) seq[i] = (int32_t)ids.ids[i];
    ufp4_sample_opts o = {.temperature = temp, .top_k = (int)top_k, .seed = seed, .stop_token = ufp4_tokenizer_eot(tok)};
    rc = ufp4_generate(m, seq, (int)ids.n, (int)n_new, &o, seq, &n_out);
  }
  if (!rc) rc = ufp4_tokenizer_decode(tok, (const uint32_t *)seq, (size_t)n_out, &text, &text_len);
  if (!rc) {
    fwrite(text, 1, text_len, stdout);
    fputc('\n', stdout);
  }
  free(text);
  free(seq);
  ufp4_tokvec_free(&ids);
  ufp4_model_free(m);
  ufp4_tokenizer_free(tok);
  if (rc) {
    fprintf(stderr, "ufp4 sample: %s\n", ufp4_last_error());
    return 1;
  }
  return 0;
}
