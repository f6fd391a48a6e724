/* ufp4 prepare: tokenize a corpus into DIR/train.tok and DIR/val.tok (ufp4/shard.h).
 *
 * The split is by document and deterministic: with n documents and n_val = round(f * n),
 * validation takes documents floor((j + 1/2) * n / n_val), j = 0..n_val-1 -- evenly spread over
 * the corpus order (for SOTU: over the years), no randomness involved. Within a shard the
 * documents keep corpus order, separated by <|endoftext|> (bytes tokenizer: no separator). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/corpus_flags.h"
#include "core/timer.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/shard.h"
#include "ufp4/tokenizer.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 prepare --corpus PATH --tokenizer bytes|gpt2|DIR --out DIR [options]\n\n"
          "Writes DIR/train.tok and DIR/val.tok token shards (either is skipped when it would get no\n"
          "document; DIR and missing parents are created) and prints documents, bytes, tokens and\n"
          "bytes per token.\n\n"
          "  --val-fraction F  share of documents for validation, evenly spread (default 0.1)\n"
          "  --separator S     split a corpus file into documents at S (\\n is a newline)\n");
}

typedef struct {
  size_t docs, bytes, tokens;
} split_stats;

static int write_split(const char *path, ufp4_tokenizer *tok, const ufp4_corpus *c, const unsigned char *is_val,
                       unsigned char want_val, split_stats *st) {
  memset(st, 0, sizeof *st);
  ufp4_shard_info info = {0};
  info.tokenizer_id = (uint32_t)ufp4_tokenizer_kind(tok);
  info.vocab_size = ufp4_tokenizer_vocab_size(tok);
  info.tokenizer_hash = ufp4_tokenizer_hash(tok);
  ufp4_shard_writer *w;
  int rc = ufp4_shard_writer_open(path, &info, &w);
  if (rc) return rc;
  ufp4_tokvec ids = {0};
  int64_t eot = ufp4_tokenizer_eot(tok);
  for (size_t d = 0; !rc && d < c->n_docs; d++) {
    if (is_val[d] != want_val) continue;
    ids.n = 0;
    if (st->docs && eot >= 0) rc = ufp4_tokvec_push(&ids, (uint32_t)eot);
    if (!rc) rc = ufp4_tokenizer_encode(tok, c->texts[d], c->lens[d], c->names[d], &ids);
    if (!rc) rc = ufp4_shard_writer_append(w, ids.ids, ids.n);
    st->docs++;
    st->bytes += c->lens[d];
    st->tokens += ids.n;
  }
  ufp4_tokvec_free(&ids);
  if (rc) {
    ufp4_shard_writer_abort(w);
    return rc;
  }
  return ufp4_shard_writer_commit(w, st->docs);
}

int ufp4_cmd_prepare(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  cli_corpus_opts co = {0};
  const char *tok_spec = NULL, *out_dir = NULL, *v;
  double frac = 0.1;
  for (int i = 1; i < argc; i++) {
    int r;
    if ((r = cli_corpus_flag(argc, argv, &i, &co))) {
    } else if ((r = cli_value(argc, argv, &i, "--tokenizer", &tok_spec))) {
    } else if ((r = cli_value(argc, argv, &i, "--out", &out_dir))) {
    } else if ((r = cli_value(argc, argv, &i, "--val-fraction", &v))) {
      if (r > 0 && cli_parse_double("prepare", "--val-fraction", v, 0.0, 1.0, &frac)) return 2;
    } else {
      fprintf(stderr, "ufp4 prepare: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!co.path || !tok_spec || !out_dir) {
    fprintf(stderr, "ufp4 prepare: --corpus, --tokenizer and --out are required\n");
    usage(stderr);
    return 2;
  }
  ufp4_corpus c;
  ufp4_tokenizer *tok = NULL;
  unsigned char *is_val = NULL;
  int status = 1;
  if (cli_corpus_load(&co, &c)) return cli_error("prepare", NULL);
  if (ufp4_tokenizer_open(tok_spec, &tok) || ufp4_mkdirs(out_dir)) {
    cli_error("prepare", NULL);
    goto done;
  }
  is_val = calloc(c.n_docs, 1);
  if (!is_val) goto done;
  size_t n = c.n_docs, n_val = (size_t)floor(frac * (double)n + 0.5);
  if (n_val > n) n_val = n;
  for (size_t j = 0; j < n_val; j++) is_val[(size_t)floor(((double)j + 0.5) * (double)n / (double)n_val)] = 1;
  split_stats st[2] = {{0}};
  const char *names[2] = {"train.tok", "val.tok"};
  double t0 = ufp4_now_s();
  for (int s = 0; s < 2; s++) {
    if ((s == 1 ? n_val : n - n_val) == 0) continue;
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%s", out_dir, names[s]);
    if (write_split(path, tok, &c, is_val, (unsigned char)s, &st[s])) {
      cli_error("prepare", NULL);
      goto done;
    }
  }
  double dt = ufp4_now_s() - t0;
  printf("prepared %s with tokenizer %s (vocabulary %u) -> %s\n", co.path, ufp4_tokenizer_name(tok),
         ufp4_tokenizer_vocab_size(tok), out_dir);
  printf("  %-6s %10s %12s %12s %10s\n", "split", "documents", "bytes", "tokens", "bytes/tok");
  for (int s = 0; s < 3; s++) {
    split_stats x = s < 2 ? st[s] : (split_stats){st[0].docs + st[1].docs, st[0].bytes + st[1].bytes,
                                                  st[0].tokens + st[1].tokens};
    printf("  %-6s %10zu %12zu %12zu %10.4f\n", s == 0 ? "train" : s == 1 ? "val" : "total", x.docs, x.bytes,
           x.tokens, x.tokens ? (double)x.bytes / (double)x.tokens : 0.0);
  }
  printf("  tokenized and written in %.3f s (%.2f MB/s)\n", dt, (double)c.total_bytes / dt / 1e6);
  status = 0;
done:
  free(is_val);
  ufp4_tokenizer_free(tok);
  ufp4_corpus_free(&c);
  return status;
}
