/* `ufp4 prepare` and `ufp4 tokenizer` end to end: shard contents against the corpus (bytes:
 * the documents' bytes; BPE: decoding gives the documents joined by <|endoftext|>), the
 * deterministic document split, the token count of SOTU under gpt2, and exit status plus a
 * message naming the file for bad input. Skips (77) when the ufp4 binary is not built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/wait.h>

#include "tok_test_util.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/shard.h"
#include "ufp4/tokenizer.h"

static char cli[4096], dir[4096], corpus[4200];
static char *docs[10];

/* Runs the CLI with `args`, stdout+stderr into *out; returns the exit status. */
static int run(const char *args, char *out, size_t cap) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", cli, args);
  FILE *p = popen(cmd, "r");
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void prepare_bytes(void **state) {
  (void)state;
  char args[16384], out[8192], shard_dir[4200], p[4300];
  snprintf(shard_dir, sizeof shard_dir, "%s/bytes", dir);
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer bytes --out '%s' --val-fraction 0.2", corpus, shard_dir);
  if (run(args, out, sizeof out)) fail_msg("prepare failed: %s", out);
  assert_non_null(strstr(out, "bytes/tok"));
  /* n = 10, n_val = 2: validation documents floor((j + 1/2) * 10 / 2) = 2 and 7 */
  for (int split = 0; split < 2; split++) {
    snprintf(p, sizeof p, "%s/%s", shard_dir, split ? "val.tok" : "train.tok");
    ufp4_shard s;
    assert_int_equal(ufp4_shard_open(p, &s), 0);
    assert_int_equal(s.info.tokenizer_id, 0);
    assert_int_equal(s.info.vocab_size, 256);
    uint64_t k = 0;
    for (int d = 0; d < 10; d++) {
      if ((d == 2 || d == 7) != split) continue;
      for (size_t i = 0; docs[d][i]; i++) assert_int_equal(ufp4_shard_token(&s, k++), (uint8_t)docs[d][i]);
    }
    assert_int_equal(k, s.info.token_count);
    assert_int_equal(s.info.n_docs, split ? 2 : 8);
    ufp4_shard_close(&s);
  }
}

static void train_then_prepare(void **state) {
  (void)state;
  char args[16384], out[8192], tok_dir[4200], shard_dir[4200], p[4300];
  snprintf(tok_dir, sizeof tok_dir, "%s/tok", dir);
  snprintf(shard_dir, sizeof shard_dir, "%s/bpe", dir);
  snprintf(args, sizeof args, "tokenizer train --vocab 300 --corpus '%s' --out '%s'", corpus, tok_dir);
  if (run(args, out, sizeof out)) fail_msg("train failed: %s", out);
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer '%s' --out '%s' --val-fraction 0", corpus, tok_dir,
           shard_dir);
  if (run(args, out, sizeof out)) fail_msg("prepare failed: %s", out);
  snprintf(p, sizeof p, "%s/val.tok", shard_dir);
  assert_false(tt_exists(p)); /* no validation documents, no file */
  ufp4_tokenizer *t;
  assert_int_equal(ufp4_tokenizer_open(tok_dir, &t), 0);
  snprintf(p, sizeof p, "%s/train.tok", shard_dir);
  ufp4_shard s;
  assert_int_equal(ufp4_shard_open(p, &s), 0);
  assert_int_equal(ufp4_shard_expect(&s, UFP4_TOK_BPE, ufp4_tokenizer_vocab_size(t), ufp4_tokenizer_hash(t)), 0);
  uint32_t *ids = malloc(s.info.token_count * sizeof *ids);
  assert_int_equal(ufp4_shard_read(&s, 0, s.info.token_count, ids), 0);
  char *text;
  size_t n;
  assert_int_equal(ufp4_tokenizer_decode(t, ids, s.info.token_count, &text, &n), 0);
  char *want = malloc(1 << 16);
  want[0] = 0;
  for (int d = 0; d < 10; d++) {
    if (d) strcat(want, "<|endoftext|>");
    strcat(want, docs[d]);
  }
  assert_string_equal(text, want);
  free(want);
  free(text);
  free(ids);
  ufp4_shard_close(&s);
  ufp4_tokenizer_free(t);
  /* the stats command round-trips and reports */
  snprintf(args, sizeof args, "tokenizer stats --tokenizer '%s' --corpus '%s' --repeat 1", tok_dir, corpus);
  if (run(args, out, sizeof out)) fail_msg("stats failed: %s", out);
  assert_non_null(strstr(out, "round trip       ok"));
}

static void sotu_gpt2_counts(void **state) {
  (void)state;
  char sotu[4096], stamp[4200], args[16384], out[8192], shard_dir[4200], p[4300];
  tt_source_path(sotu, sizeof sotu, "data/raw/sotu");
  tt_source_path(stamp, sizeof stamp, "data/raw/gpt2/.complete");
  if (!tt_exists(stamp)) skip();
  snprintf(shard_dir, sizeof shard_dir, "%s/sotu", dir);
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer gpt2 --out '%s'", sotu, shard_dir);
  if (run(args, out, sizeof out)) fail_msg("prepare failed: %s", out);
  /* 233 addresses, 23 for validation; 2,074,279 text tokens (the reference encoder's count,
   * test_tok_gpt2_ref) plus one <|endoftext|> between documents within each shard */
  uint64_t total = 0, docs_total = 0;
  for (int split = 0; split < 2; split++) {
    snprintf(p, sizeof p, "%s/%s", shard_dir, split ? "val.tok" : "train.tok");
    ufp4_shard s;
    assert_int_equal(ufp4_shard_open(p, &s), 0);
    assert_int_equal(s.info.tokenizer_id, UFP4_TOK_GPT2);
    assert_int_equal(s.info.vocab_size, 50257);
    assert_int_equal(s.info.token_width, 2);
    assert_int_equal(s.info.n_docs, split ? 23 : 210);
    total += s.info.token_count;
    docs_total += s.info.n_docs;
    ufp4_shard_close(&s);
  }
  assert_int_equal(docs_total, 233);
  assert_int_equal(total, 2074279 + (210 - 1) + (23 - 1));
}

static void bad_input(void **state) {
  (void)state;
  char args[16384], out[8192], p[4300];
  snprintf(p, sizeof p, "%s/bad.txt", dir);
  tt_write(p, "fine\nthen \xc0\xaf bad", 15);
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer bytes --out '%s/x'", p, dir);
  assert_int_equal(run(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "bad.txt: invalid UTF-8 at byte offset 10"));
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer '%s/none' --out '%s/x'", corpus, dir, dir);
  assert_int_equal(run(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "/none"));
  snprintf(args, sizeof args, "prepare --corpus '%s' --tokenizer bytes --out '%s/x' --val-fraction 2", corpus, dir);
  assert_int_equal(run(args, out, sizeof out), 2);
  snprintf(args, sizeof args, "tokenizer train --vocab 10 --corpus '%s' --out '%s/x'", corpus, dir);
  assert_int_equal(run(args, out, sizeof out), 2);
  snprintf(p, sizeof p, "%s/empty.txt", dir);
  tt_write(p, "", 0);
  snprintf(args, sizeof args, "tokenizer train --vocab 300 --corpus '%s' --out '%s/x'", p, dir);
  assert_int_equal(run(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "empty.txt: empty file"));
}

int main(void) {
  const char *c = getenv("UFP4_CLI");
  snprintf(cli, sizeof cli, "%s", c && *c ? c : "./ufp4");
  if (access(cli, X_OK)) {
    fprintf(stderr, "SKIP: the ufp4 binary %s is not built\n", cli);
    return 77;
  }
  tt_mkdtemp(dir, sizeof dir, "tokcli");
  snprintf(corpus, sizeof corpus, "%s/corpus", dir);
  mkdir(corpus, 0777);
  static const char *words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "caf\xc3\xa9", "2024"};
  for (int d = 0; d < 10; d++) {
    docs[d] = malloc(4096);
    docs[d][0] = 0;
    for (int w = 0; w < 60; w++) {
      strcat(docs[d], w ? " " : "");
      strcat(docs[d], words[(w * (d + 3) + d) % 10]);
    }
    strcat(docs[d], ".\n");
    char p[4300];
    snprintf(p, sizeof p, "%s/doc%02d.txt", corpus, d);
    tt_write_str(p, docs[d]);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(prepare_bytes),
      cmocka_unit_test(train_then_prepare),
      cmocka_unit_test(sotu_gpt2_counts),
      cmocka_unit_test(bad_input),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  for (int d = 0; d < 10; d++) free(docs[d]);
  tt_rmdir(dir);
  return rc;
}
