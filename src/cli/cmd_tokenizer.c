/* ufp4 tokenizer: train a BPE vocabulary, encode or decode text, and measure a tokenizer on a
 * corpus (tokens, bytes per token, encode throughput, round trip). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/corpus_flags.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/tokenizer.h"
#include "core/timer.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 tokenizer <train|encode|decode|stats> [options]\n\n"
          "  train  --vocab N --corpus PATH --out DIR [--separator S]\n"
          "         learn a byte-level BPE of N entries (256 bytes + merges + <|endoftext|>) on GPT-2\n"
          "         pre-tokens; writes DIR/encoder.json and DIR/vocab.bpe (creating DIR and missing\n"
          "         parents); prints the time taken\n"
          "  encode --tokenizer T [--in FILE]   print the ids of FILE (default stdin), one line\n"
          "  decode --tokenizer T [--in FILE]   print the text of whitespace-separated ids\n"
          "  stats  --tokenizer T --corpus PATH [--separator S] [--repeat R]\n"
          "         documents, bytes, tokens, bytes per token, encode MB/s (best of R, default 3,\n"
          "         one thread, each document encoded separately), and a decode round-trip check\n\n"
          "T is bytes, gpt2, or a directory with encoder.json + vocab.bpe. A corpus is a file, or a\n"
          "directory of *.txt files (one document each, by name); --separator splits a file into\n"
          "documents (\\n in S is a newline).\n");
}

/* "ufp4 tokenizer SUB: <last error>" (cli_error's form, for a two-word command). */
static int fail(const char *sub) {
  char cmd[64];
  snprintf(cmd, sizeof cmd, "tokenizer %s", sub);
  return cli_error(cmd, NULL);
}

static int read_input(const char *path, char **buf, size_t *len) {
  if (path) return ufp4_read_file(path, SIZE_MAX, buf, len);
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  if (!b) return ufp4_fail(UFP4_ENOMEM, "stdin: out of memory");
  size_t got;
  while ((got = fread(b + n, 1, cap - n - 1, stdin)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char *q = realloc(b, cap *= 2);
      if (!q) {
        free(b);
        return ufp4_fail(UFP4_ENOMEM, "stdin: out of memory");
      }
      b = q;
    }
  }
  b[n] = 0;
  *buf = b;
  *len = n;
  return 0;
}

typedef struct {
  const char *sub, *tok_spec, *out_dir, *in;
  cli_corpus_opts co;
  size_t vocab, repeat;
} tok_opts;

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, tok_opts *o) {
  *o = (tok_opts){.sub = argv[1], .repeat = 3};
  for (int i = 2; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--tokenizer", &o->tok_spec))) {
    } else if ((r = cli_corpus_flag(argc, argv, &i, &o->co))) {
    } else if ((r = cli_value(argc, argv, &i, "--out", &o->out_dir))) {
    } else if ((r = cli_value(argc, argv, &i, "--in", &o->in))) {
    } else if ((r = cli_value(argc, argv, &i, "--vocab", &v))) {
      if (r > 0 && cli_parse_size("tokenizer", "--vocab", v, 258, 1u << 24, &o->vocab)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--repeat", &v))) {
      if (r > 0 && cli_parse_size("tokenizer", "--repeat", v, 1, 100, &o->repeat)) return 2;
    } else {
      fprintf(stderr, "ufp4 tokenizer %s: unknown option '%s'\n", o->sub, argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  return 0;
}

static int train(const tok_opts *o) {
  if (!o->vocab || !o->co.path || !o->out_dir) {
    fprintf(stderr, "ufp4 tokenizer train: --vocab, --corpus and --out are required\n");
    return 2;
  }
  ufp4_corpus corpus = {0};
  int status = 0;
  if (cli_corpus_load(&o->co, &corpus) || ufp4_mkdirs(o->out_dir)) {
    ufp4_corpus_free(&corpus);
    return fail(o->sub);
  }
  double t0 = ufp4_now_s();
  uint32_t got;
  if (ufp4_bpe_train(&corpus, (uint32_t)o->vocab, o->out_dir, &got))
    status = fail(o->sub);
  else
    printf(
        "trained a %u-entry BPE (%u merges) on %zu documents, %zu bytes in %.3f s -> %s/encoder.json, "
        "%s/vocab.bpe\n",
        got, got - 257, corpus.n_docs, corpus.total_bytes, ufp4_now_s() - t0, o->out_dir,
        o->out_dir);
  ufp4_corpus_free(&corpus);
  return status;
}

static int encode(const tok_opts *o, ufp4_tokenizer *tok) {
  char *text = NULL;
  size_t len;
  ufp4_tokvec ids = {0};
  int status = 0;
  if (read_input(o->in, &text, &len) ||
      ufp4_tokenizer_encode(tok, text, len, o->in ? o->in : "stdin", &ids)) {
    status = fail(o->sub);
  } else {
    for (size_t i = 0; i < ids.n; i++) printf(i ? " %u" : "%u", ids.ids[i]);
    printf("\n");
  }
  free(text);
  ufp4_tokvec_free(&ids);
  return status;
}

/* Whitespace- or comma-separated ids of text into ids; a ufp4 status naming `src` on a bad id. */
static int parse_ids(const char *text, const char *src, ufp4_tokvec *ids) {
  const char *p = text;
  char *end;
  for (;;) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
    if (!*p) return 0;
    unsigned long long id = strtoull(p, &end, 10);
    if (end == p || id > UINT32_MAX)
      return ufp4_fail(UFP4_EFORMAT, "%s: '%.20s' is not a token id", src, p);
    ufp4_tokvec_push(ids, (uint32_t)id);
    p = end;
  }
}

static int decode(const tok_opts *o, ufp4_tokenizer *tok) {
  char *text = NULL, *out = NULL;
  size_t len, n;
  ufp4_tokvec ids = {0};
  int status = 0;
  if (read_input(o->in, &text, &len) || parse_ids(text, o->in ? o->in : "stdin", &ids) ||
      ufp4_tokenizer_decode(tok, ids.ids, ids.n, &out, &n))
    status = fail(o->sub);
  else
    fwrite(out, 1, n, stdout);
  free(out);
  free(text);
  ufp4_tokvec_free(&ids);
  return status;
}

/* Best of o->repeat timed encodes of the corpus, each with a fresh tokenizer (so the pre-token
 * cache starts cold every time), which *tok holds afterwards. */
static int time_encode(const tok_opts *o, const ufp4_corpus *corpus, ufp4_tokenizer **tok,
                       double *best, size_t *n_tokens) {
  ufp4_tokvec ids = {0};
  int rc = 0;
  *best = 1e30;
  for (size_t r = 0; r < o->repeat && !rc; r++) {
    ufp4_tokenizer_free(*tok);
    *tok = NULL;
    if ((rc = ufp4_tokenizer_open(o->tok_spec, tok))) break;
    double t0 = ufp4_now_s();
    ids.n = 0;
    for (size_t d = 0; d < corpus->n_docs && !rc; d++)
      rc = ufp4_tokenizer_encode(*tok, corpus->texts[d], corpus->lens[d], corpus->names[d], &ids);
    double dt = ufp4_now_s() - t0;
    if (dt < *best) *best = dt;
    *n_tokens = ids.n;
  }
  ufp4_tokvec_free(&ids);
  return rc;
}

/* The documents whose encode-decode round trip differs, into *bad. */
static int round_trip(ufp4_tokenizer *tok, const ufp4_corpus *corpus, size_t *bad) {
  ufp4_tokvec one = {0};
  int rc = 0;
  *bad = 0;
  for (size_t d = 0; d < corpus->n_docs && !rc; d++) {
    one.n = 0;
    char *out;
    size_t n;
    rc = ufp4_tokenizer_encode(tok, corpus->texts[d], corpus->lens[d], corpus->names[d], &one);
    if (!rc) rc = ufp4_tokenizer_decode(tok, one.ids, one.n, &out, &n);
    if (rc) break;
    if (n != corpus->lens[d] || memcmp(out, corpus->texts[d], n)) ++*bad;
    free(out);
  }
  ufp4_tokvec_free(&one);
  return rc;
}

static int stats(const tok_opts *o, ufp4_tokenizer **tok) {
  if (!o->co.path) {
    fprintf(stderr, "ufp4 tokenizer stats: --corpus is required\n");
    return 2;
  }
  ufp4_corpus corpus = {0};
  double best;
  size_t n_tokens = 0, bad;
  if (cli_corpus_load(&o->co, &corpus) || time_encode(o, &corpus, tok, &best, &n_tokens) ||
      round_trip(*tok, &corpus, &bad)) {
    ufp4_corpus_free(&corpus);
    return fail(o->sub);
  }
  printf("tokenizer %s (vocabulary %u) on %s\n", ufp4_tokenizer_name(*tok),
         ufp4_tokenizer_vocab_size(*tok), o->co.path);
  printf("  documents        %zu\n  bytes            %zu\n  tokens           %zu\n", corpus.n_docs,
         corpus.total_bytes, n_tokens);
  printf("  bytes per token  %.4f\n",
         n_tokens ? (double)corpus.total_bytes / (double)n_tokens : 0.0);
  printf("  encode           %.3f s, %.2f MB/s (best of %zu, one thread)\n", best,
         (double)corpus.total_bytes / best / 1e6, o->repeat);
  printf("  round trip       %s (%zu of %zu documents differ)\n", bad ? "FAILED" : "ok", bad,
         corpus.n_docs);
  ufp4_corpus_free(&corpus);
  return bad ? 1 : 0;
}

/* encode, decode or stats: the ones that need --tokenizer. */
static int with_tokenizer(const tok_opts *o) {
  if (!o->tok_spec) {
    fprintf(stderr, "ufp4 tokenizer %s: --tokenizer is required\n", o->sub);
    return 2;
  }
  ufp4_tokenizer *tok = NULL;
  int status;
  if (ufp4_tokenizer_open(o->tok_spec, &tok))
    status = fail(o->sub);
  else if (!strcmp(o->sub, "encode"))
    status = encode(o, tok);
  else if (!strcmp(o->sub, "decode"))
    status = decode(o, tok);
  else
    status = stats(o, &tok);
  ufp4_tokenizer_free(tok);
  return status;
}

int ufp4_cmd_tokenizer(int argc, char **argv) {
  if (argc < 2 || cli_wants_help(argc, argv)) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  tok_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  if (!strcmp(o.sub, "train")) return train(&o);
  if (!strcmp(o.sub, "encode") || !strcmp(o.sub, "decode") || !strcmp(o.sub, "stats"))
    return with_tokenizer(&o);
  fprintf(stderr, "ufp4 tokenizer: unknown subcommand '%s'\n", o.sub);
  usage(stderr);
  return 2;
}
