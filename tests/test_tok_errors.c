/* Bad input to corpora and tokenizers: each failure is a negative status with a message naming
 * the file (and, for UTF-8, the byte offset), never a crash. Also the corpus rules: directory
 * order, the separator, skipped empty pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_test_util.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/tokenizer.h"

static char dir[4096];

static void mkpath(char *out, const char *name) { snprintf(out, 4200, "%s/%s", dir, name); }

static void expect_error(int rc, int status, const char *must_contain) {
  assert_int_equal(rc, status);
  if (!strstr(ufp4_last_error(), must_contain))
    fail_msg("error '%s' does not mention '%s'", ufp4_last_error(), must_contain);
}

static void corpus_rules(void **state) {
  (void)state;
  char d[4200], p[4300];
  mkpath(d, "docs");
  mkdir(d, 0777);
  snprintf(p, sizeof p, "%s/b.txt", d), tt_write_str(p, "second");
  snprintf(p, sizeof p, "%s/a.txt", d), tt_write_str(p, "first");
  snprintf(p, sizeof p, "%s/c.md", d), tt_write_str(p, "ignored");
  ufp4_corpus c;
  assert_int_equal(ufp4_corpus_load(d, NULL, &c), 0);
  assert_int_equal(c.n_docs, 2);
  assert_memory_equal(c.texts[0], "first", 5);
  assert_memory_equal(c.texts[1], "second", 6);
  assert_int_equal(c.total_bytes, 11);
  ufp4_corpus_free(&c);
  snprintf(p, sizeof p, "%s/sep.txt", dir), tt_write_str(p, "one\n\ntwo\n\n\n\nthree\n\n");
  assert_int_equal(ufp4_corpus_load(p, "\n\n", &c), 0);
  assert_int_equal(c.n_docs, 3); /* the empty piece between the two separators is skipped */
  assert_int_equal(c.lens[2], 5);
  assert_memory_equal(c.texts[2], "three", 5);
  assert_non_null(strstr(c.names[1], "sep.txt#1"));
  ufp4_corpus_free(&c);
}

static void bad_corpora(void **state) {
  (void)state;
  char p[4200];
  ufp4_corpus c;
  mkpath(p, "invalid.txt");
  tt_write(p, "abc\xe2\x82", 5); /* truncated euro sign */
  expect_error(ufp4_corpus_load(p, NULL, &c), UFP4_EFORMAT, "invalid.txt: invalid UTF-8 at byte offset 3");
  tt_write(p, "abc\xed\xa0\x80", 6); /* UTF-16 surrogate */
  expect_error(ufp4_corpus_load(p, NULL, &c), UFP4_EFORMAT, "offset 3");
  mkpath(p, "empty.txt");
  tt_write(p, "", 0);
  expect_error(ufp4_corpus_load(p, NULL, &c), UFP4_EFORMAT, "empty.txt: empty file");
  mkpath(p, "nothing");
  expect_error(ufp4_corpus_load(p, NULL, &c), UFP4_EIO, "nothing");
  mkpath(p, "emptydir");
  mkdir(p, 0777);
  expect_error(ufp4_corpus_load(p, NULL, &c), UFP4_EFORMAT, "no *.txt");
  mkpath(p, "onlysep.txt");
  tt_write_str(p, "||||");
  expect_error(ufp4_corpus_load(p, "||", &c), UFP4_EFORMAT, "onlysep.txt");
}

static void write_tok(const char *name, const char *encoder, const char *vocab) {
  char d[4200], p[4300];
  mkpath(d, name);
  mkdir(d, 0777);
  snprintf(p, sizeof p, "%s/encoder.json", d);
  if (encoder) tt_write_str(p, encoder);
  snprintf(p, sizeof p, "%s/vocab.bpe", d);
  if (vocab) tt_write_str(p, vocab);
}

/* A valid encoder.json body: the 256 byte tokens (ids in byte order) plus extra entries. */
static char *byte_encoder(const char *extra) {
  char *s = malloc(8192), *p = s;
  p += sprintf(p, "{");
  for (int b = 0; b < 256; b++) {
    int pr = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    uint32_t c = (uint32_t)b;
    if (!pr) {
      c = 256;
      for (int x = 0; x < b; x++) c += !((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff));
    }
    if (c == '"' || c == '\\') p += sprintf(p, "\"\\%c\": %d, ", (char)c, b);
    else if (c < 0x80) p += sprintf(p, "\"%c\": %d, ", (char)c, b);
    else p += sprintf(p, "\"%c%c\": %d, ", (char)(0xc0 | (c >> 6)), (char)(0x80 | (c & 0x3f)), b);
  }
  sprintf(p, "%s}", extra);
  return s;
}

static void bad_tokenizers(void **state) {
  (void)state;
  ufp4_tokenizer *t;
  char p[4200];
  mkpath(p, "no-such-tokenizer");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EIO, "no-such-tokenizer");
  assert_null(t);
  write_tok("novocab", "{}", NULL);
  mkpath(p, "novocab");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EIO, "novocab/vocab.bpe");
  write_tok("notjson", "{\"a\": 1,", "#version: 0.2\n");
  mkpath(p, "notjson");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "notjson/encoder.json: not valid JSON");
  char *enc = byte_encoder("\"ab\": 256, \"<|endoftext|>\": 257");
  write_tok("ok", enc, "#version: 0.2\na b\n");
  mkpath(p, "ok");
  assert_int_equal(ufp4_tokenizer_open(p, &t), 0);
  ufp4_tokenizer_free(t);
  write_tok("badmerge", enc, "#version: 0.2\na b\nab c\n");
  mkpath(p, "badmerge");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "badmerge/vocab.bpe:3");
  write_tok("badline", enc, "#version: 0.2\na b c\n");
  mkpath(p, "badline");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "badline/vocab.bpe:2");
  write_tok("emptyvocab", enc, "");
  mkpath(p, "emptyvocab");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "empty file");
  free(enc);
  enc = byte_encoder("\"ab\": 255, \"<|endoftext|>\": 257"); /* 255 twice, 256 missing */
  write_tok("dupid", enc, "#version: 0.2\na b\n");
  mkpath(p, "dupid");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "dupid/encoder.json");
  free(enc);
  enc = byte_encoder("\"ab\": 256, \"<|endoftext|>\": 2.5");
  write_tok("fracid", enc, "#version: 0.2\na b\n");
  mkpath(p, "fracid");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "fracid/encoder.json");
  free(enc);
  enc = byte_encoder("\"ab\": 256, \"<|end|>\": 257");
  write_tok("noeot", enc, "#version: 0.2\na b\n");
  mkpath(p, "noeot");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "<|endoftext|>");
  free(enc);
  write_tok("shortenc", "{\"a\": 0, \"<|endoftext|>\": 1}", "#version: 0.2\n");
  mkpath(p, "shortenc");
  expect_error(ufp4_tokenizer_open(p, &t), UFP4_EFORMAT, "shortenc/encoder.json");
  /* gpt2 from a directory that lacks the files */
  setenv("UFP4_GPT2_DIR", p, 1);
  assert_true(ufp4_tokenizer_open("gpt2", &t) < 0);
  mkpath(p, "nowhere");
  setenv("UFP4_GPT2_DIR", p, 1);
  expect_error(ufp4_tokenizer_open("gpt2", &t), UFP4_EIO, "fetch_data");
  unsetenv("UFP4_GPT2_DIR");
}

int main(void) {
  tt_mkdtemp(dir, sizeof dir, "tokerr");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(corpus_rules),
      cmocka_unit_test(bad_corpora),
      cmocka_unit_test(bad_tokenizers),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tt_rmdir(dir);
  return rc;
}
