/* ufp4 tokenizer: train a BPE vocabulary, encode or decode text, and measure a tokenizer on a
 * corpus (tokens, bytes per token, encode throughput, round trip). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int fail(const char *sub) {
  fprintf(stderr, "ufp4 tokenizer %s: %s\n", sub, ufp4_last_error());
  return 1;
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

int ufp4_cmd_tokenizer(int argc, char **argv) {
  if (argc < 2 || cli_wants_help(argc, argv)) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *sub = argv[1], *tok_spec = NULL, *out_dir = NULL, *in = NULL, *v;
  cli_corpus_opts co = {0};
  size_t vocab = 0, repeat = 3;
  for (int i = 2; i < argc; i++) {
    int r;
    if ((r = cli_value(argc, argv, &i, "--tokenizer", &tok_spec))) {
    } else if ((r = cli_corpus_flag(argc, argv, &i, &co))) {
    } else if ((r = cli_value(argc, argv, &i, "--out", &out_dir))) {
    } else if ((r = cli_value(argc, argv, &i, "--in", &in))) {
    } else if ((r = cli_value(argc, argv, &i, "--vocab", &v))) {
      if (r > 0 && cli_parse_size("tokenizer", "--vocab", v, 258, 1u << 24, &vocab)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--repeat", &v))) {
      if (r > 0 && cli_parse_size("tokenizer", "--repeat", v, 1, 100, &repeat)) return 2;
    } else {
      fprintf(stderr, "ufp4 tokenizer %s: unknown option '%s'\n", sub, argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  int status = 0;
  ufp4_corpus corpus = {0};
  ufp4_tokenizer *tok = NULL;
  ufp4_tokvec ids = {0};
  char *text = NULL;
  if (!strcmp(sub, "train")) {
    if (!vocab || !co.path || !out_dir) {
      fprintf(stderr, "ufp4 tokenizer train: --vocab, --corpus and --out are required\n");
      status = 2;
      goto done;
    }
    if (cli_corpus_load(&co, &corpus) || ufp4_mkdirs(out_dir)) {
      status = fail(sub);
      goto done;
    }
    double t0 = ufp4_now_s();
    uint32_t got;
    if (ufp4_bpe_train(&corpus, (uint32_t)vocab, out_dir, &got)) {
      status = fail(sub);
      goto done;
    }
    printf("trained a %u-entry BPE (%u merges) on %zu documents, %zu bytes in %.3f s -> %s/encoder.json, "
           "%s/vocab.bpe\n", got, got - 257, corpus.n_docs, corpus.total_bytes, ufp4_now_s() - t0, out_dir, out_dir);
  } else if (!strcmp(sub, "encode") || !strcmp(sub, "decode") || !strcmp(sub, "stats")) {
    if (!tok_spec) {
      fprintf(stderr, "ufp4 tokenizer %s: --tokenizer is required\n", sub);
      status = 2;
      goto done;
    }
    if (ufp4_tokenizer_open(tok_spec, &tok)) {
      status = fail(sub);
      goto done;
    }
    size_t len;
    if (!strcmp(sub, "encode")) {
      if (read_input(in, &text, &len) || ufp4_tokenizer_encode(tok, text, len, in ? in : "stdin", &ids)) {
        status = fail(sub);
        goto done;
      }
      for (size_t i = 0; i < ids.n; i++) printf(i ? " %u" : "%u", ids.ids[i]);
      printf("\n");
    } else if (!strcmp(sub, "decode")) {
      if (read_input(in, &text, &len)) {
        status = fail(sub);
        goto done;
      }
      char *p = text, *end;
      for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
        if (!*p) break;
        unsigned long long id = strtoull(p, &end, 10);
        if (end == p || id > UINT32_MAX) {
          ufp4_fail(UFP4_EFORMAT, "%s: '%.20s' is not a token id", in ? in : "stdin", p);
          status = fail(sub);
          goto done;
        }
        ufp4_tokvec_push(&ids, (uint32_t)id);
        p = end;
      }
      char *out;
      size_t n;
      if (ufp4_tokenizer_decode(tok, ids.ids, ids.n, &out, &n)) {
        status = fail(sub);
        goto done;
      }
      fwrite(out, 1, n, stdout);
      free(out);
    } else {
      if (!co.path) {
        fprintf(stderr, "ufp4 tokenizer stats: --corpus is required\n");
        status = 2;
        goto done;
      }
      if (cli_corpus_load(&co, &corpus)) {
        status = fail(sub);
        goto done;
      }
      double best = 1e30;
      size_t n_tokens = 0;
      for (size_t r = 0; r < repeat; r++) {
        /* a fresh tokenizer each round, so the pre-token cache starts cold every time */
        ufp4_tokenizer_free(tok);
        if (ufp4_tokenizer_open(tok_spec, &tok)) {
          status = fail(sub);
          goto done;
        }
        double t0 = ufp4_now_s();
        ids.n = 0;
        for (size_t d = 0; d < corpus.n_docs; d++)
          if (ufp4_tokenizer_encode(tok, corpus.texts[d], corpus.lens[d], corpus.names[d], &ids)) {
            status = fail(sub);
            goto done;
          }
        double dt = ufp4_now_s() - t0;
        if (dt < best) best = dt;
        n_tokens = ids.n;
      }
      /* round trip, document by document */
      size_t bad = 0;
      ufp4_tokvec one = {0};
      for (size_t d = 0; d < corpus.n_docs; d++) {
        one.n = 0;
        char *out;
        size_t n;
        if (ufp4_tokenizer_encode(tok, corpus.texts[d], corpus.lens[d], corpus.names[d], &one) ||
            ufp4_tokenizer_decode(tok, one.ids, one.n, &out, &n)) {
          ufp4_tokvec_free(&one);
          status = fail(sub);
          goto done;
        }
        if (n != corpus.lens[d] || memcmp(out, corpus.texts[d], n)) bad++;
        free(out);
      }
      ufp4_tokvec_free(&one);
      printf("tokenizer %s (vocabulary %u) on %s\n", ufp4_tokenizer_name(tok), ufp4_tokenizer_vocab_size(tok),
             co.path);
      printf("  documents        %zu\n  bytes            %zu\n  tokens           %zu\n", corpus.n_docs,
             corpus.total_bytes, n_tokens);
      printf("  bytes per token  %.4f\n", n_tokens ? (double)corpus.total_bytes / (double)n_tokens : 0.0);
      printf("  encode           %.3f s, %.2f MB/s (best of %zu, one thread)\n", best,
             (double)corpus.total_bytes / best / 1e6, repeat);
      printf("  round trip       %s (%zu of %zu documents differ)\n", bad ? "FAILED" : "ok", bad, corpus.n_docs);
      if (bad) status = 1;
    }
  } else {
    fprintf(stderr, "ufp4 tokenizer: unknown subcommand '%s'\n", sub);
    usage(stderr);
    status = 2;
  }
done:
  free(text);
  ufp4_tokvec_free(&ids);
  ufp4_tokenizer_free(tok);
  ufp4_corpus_free(&corpus);
  return status;
}
