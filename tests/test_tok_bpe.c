/* The pre-tokenizer and the BPE encoder on hand cases. The expected pieces and GPT-2 ids were
 * produced by the reference (node running gpt-3-encoder@1.1.4's regex and encode()); the
 * merge-rule cases use a tiny vocabulary written here, with the merges traced by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_test_util.h"
#include "ufp4/error.h"
#include "ufp4/tokenizer.h"

typedef struct {
  const char *text;
  size_t n;
  size_t off[16], len[16];
} pieces;

static int collect(void *ctx, size_t off, size_t n) {
  pieces *p = ctx;
  if (p->n == 16) return 1;
  p->off[p->n] = off;
  p->len[p->n] = n;
  p->n++;
  return 0;
}

static void check_pieces(const char *text, const char *const *want) {
  pieces p = {text, 0, {0}, {0}};
  assert_int_equal(ufp4_pretokenize(text, strlen(text), "case", collect, &p), 0);
  size_t k = 0;
  while (want[k]) k++;
  if (p.n != k) fail_msg("\"%s\": %zu pieces, want %zu", text, p.n, k);
  for (size_t i = 0; i < k; i++) {
    if (p.len[i] != strlen(want[i]) || memcmp(text + p.off[i], want[i], p.len[i]))
      fail_msg("\"%s\": piece %zu is \"%.*s\", want \"%s\"", text, i, (int)p.len[i], text + p.off[i], want[i]);
  }
}

static void pretokenizer_matches_reference(void **state) {
  (void)state;
#define P(text, ...) check_pieces(text, (const char *const[]){__VA_ARGS__, NULL})
  P("Hello world", "Hello", " world");
  P("I'm here", "I", "'m", " here");
  P("a  b", "a", " ", " b");
  P("a\n\nb", "a", "\n", "\n", "b");
  P("x   ", "x", "   ");
  P("\t\tx", "\t", "\t", "x");
  P(" 123abc", " 123", "abc");
  P("'hello", "'", "hello");
  P("don't!!", "don", "'t", "!!");
  P("  hi", " ", " hi");
  P("'S", "'", "S");
  P("$5.00", "$", "5", ".", "00");
  P("na\xc3\xafve caf\xc3\xa9", "na\xc3\xafve", " caf\xc3\xa9");                 /* naive cafe, accented */
  P("x\xc2\xa0y", "x", "\xc2\xa0", "y");                                          /* NO-BREAK SPACE is \s */
  P("\xd9\xa1\xd9\xa2\xd9\xa3 \xd9\xa4", "\xd9\xa1\xd9\xa2\xd9\xa3", " \xd9\xa4"); /* Arabic-Indic digits: \p{N} */
  P("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e text", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", " text"); /* CJK: \p{L} */
  P(" \xe3\x80\x80" "a", " ", "\xe3\x80\x80", "a");                              /* IDEOGRAPHIC SPACE */
  P("a ,\"b\"", "a", " ,\"", "b", "\"");
  P("<|endoftext|>", "<|", "endoftext", "|>");
#undef P
}

static void invalid_utf8_is_an_error(void **state) {
  (void)state;
  pieces p = {0};
  const char bad[] = "ok \xff then";
  assert_int_equal(ufp4_pretokenize(bad, sizeof bad - 1, "doc.txt", collect, &p), UFP4_EFORMAT);
  assert_non_null(strstr(ufp4_last_error(), "doc.txt"));
  assert_non_null(strstr(ufp4_last_error(), "offset 3"));
}

/* GPT-2's byte-to-unicode mapping, written out again for the test. */
static uint32_t b2u(int b) {
  if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return (uint32_t)b;
  uint32_t n = 0;
  for (int c = 0; c < b; c++)
    if (!((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))) n++;
  return 256 + n;
}

static void put_json_key(FILE *f, int b) {
  uint32_t c = b2u(b);
  if (c == '"' || c == '\\') fprintf(f, "\"\\%c\"", (char)c);
  else if (c < 0x80) fprintf(f, "\"%c\"", (char)c);
  else fprintf(f, "\"%c%c\"", (char)(0xc0 | (c >> 6)), (char)(0x80 | (c & 0x3f)));
}

/* Bytes get ids 0..255 in byte order here (any permutation is allowed), then extra tokens. */
static void write_tiny_vocab(const char *dir, const char *const *extra, const char *merges) {
  char path[4200];
  snprintf(path, sizeof path, "%s/encoder.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "{");
  for (int b = 0; b < 256; b++) {
    put_json_key(f, b);
    fprintf(f, ": %d, ", b);
  }
  int id = 256;
  for (; extra && *extra; extra++) fprintf(f, "\"%s\": %d, ", *extra, id++);
  fprintf(f, "\"<|endoftext|>\": %d}", id);
  fclose(f);
  snprintf(path, sizeof path, "%s/vocab.bpe", dir);
  tt_write_str(path, merges);
}

static void encode_str(ufp4_tokenizer *t, const char *s, ufp4_tokvec *v) {
  v->n = 0;
  assert_int_equal(ufp4_tokenizer_encode(t, s, strlen(s), "case", v), 0);
}

static void merge_rules(void **state) {
  (void)state;
  char dir[4096];
  tt_mkdtemp(dir, sizeof dir, "tokbpe");
  /* ids: "#," 256, ",$" 257, "#,$" 258, "aa" 259, "aaa" 260 ... */
  const char *extra[] = {"#,", ",$", "#,$", "aa", "aaa", "ab", NULL};
  write_tiny_vocab(dir, extra, "#version: 0.2\n# ,\n, $\n# ,$\na a\naa a\na b\n");
  ufp4_tokenizer *t;
  assert_int_equal(ufp4_tokenizer_open(dir, &t), 0);
  assert_int_equal(ufp4_tokenizer_kind(t), UFP4_TOK_BPE);
  assert_int_equal(ufp4_tokenizer_vocab_size(t), 263);
  assert_int_equal(ufp4_tokenizer_eot(t), 262);
  ufp4_tokvec v = {0};
  /* "#,$": rank 0 (# ,) merges first -> ["#,", "$"]. Standard BPE stops there; the reference
   * looks up ("#,", "$") as the string "#,,$", which is merge 2 ("#", ",$"), so it merges into
   * "#,$" (258). */
  encode_str(t, "#,$", &v);
  assert_int_equal(v.n, 1);
  assert_int_equal(v.ids[0], 258);
  /* "aaaa": (a a) is rank 3, all occurrences in one left-to-right pass -> [aa, aa]; then
   * (aa aa) is no merge and (aa a) does not occur, so two tokens of 259. */
  encode_str(t, "aaaa", &v);
  assert_int_equal(v.n, 2);
  assert_int_equal(v.ids[0], 259);
  assert_int_equal(v.ids[1], 259);
  /* "aaab": pairs (a a) rank 3, (a b) rank 5 -> [aa, a, b] -> (aa a) rank 4 -> [aaa, b]. */
  encode_str(t, "aaab", &v);
  assert_int_equal(v.n, 2);
  assert_int_equal(v.ids[0], 260);
  assert_int_equal(v.ids[1], 'b');
  /* decode gives the bytes back, the special token its name */
  uint32_t ids[] = {258, 262, 'x'};
  char *s;
  size_t n;
  assert_int_equal(ufp4_tokenizer_decode(t, ids, 3, &s, &n), 0);
  assert_string_equal(s, "#,$<|endoftext|>x");
  free(s);
  uint32_t bad = 263;
  assert_int_equal(ufp4_tokenizer_decode(t, &bad, 1, &s, &n), UFP4_EINVAL);
  ufp4_tokvec_free(&v);
  ufp4_tokenizer_free(t);
  tt_rmdir(dir);
}

static void bytes_tokenizer(void **state) {
  (void)state;
  ufp4_tokenizer *t;
  assert_int_equal(ufp4_tokenizer_open("bytes", &t), 0);
  assert_int_equal(ufp4_tokenizer_vocab_size(t), 256);
  assert_int_equal(ufp4_tokenizer_eot(t), -1);
  ufp4_tokvec v = {0};
  encode_str(t, "A\xc3\xa9", &v); /* A, e-acute in two bytes */
  assert_int_equal(v.n, 3);
  assert_int_equal(v.ids[0], 0x41);
  assert_int_equal(v.ids[1], 0xc3);
  assert_int_equal(v.ids[2], 0xa9);
  assert_int_equal(ufp4_tokenizer_encode(t, "\xc3", 1, "x.txt", &v), UFP4_EFORMAT);
  ufp4_tokvec_free(&v);
  ufp4_tokenizer_free(t);
}

static void gpt2_known_ids(void **state) {
  (void)state;
  char dir[4096];
  tt_source_path(dir, sizeof dir, "data/raw/gpt2/encoder.json");
  if (!tt_exists(dir)) skip();
  ufp4_tokenizer *t;
  assert_int_equal(ufp4_tokenizer_open("gpt2", &t), 0);
  assert_int_equal(ufp4_tokenizer_kind(t), UFP4_TOK_GPT2);
  assert_int_equal(ufp4_tokenizer_vocab_size(t), 50257);
  assert_int_equal(ufp4_tokenizer_eot(t), 50256);
  static const struct {
    const char *text;
    size_t n;
    uint32_t ids[8];
  } cases[] = {
      {"Hello world", 2, {15496, 995}},
      {" <|endoftext|>", 7, {1279, 91, 437, 1659, 5239, 91, 29}}, /* literal text, not 50256 */
      {" ,\"x", 2, {42911, 87}},
      {"a\",\"b", 3, {64, 2430, 65}},
      {"x',''", 3, {87, 3256, 7061}},
  };
  ufp4_tokvec v = {0};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    encode_str(t, cases[c].text, &v);
    assert_int_equal(v.n, cases[c].n);
    for (size_t i = 0; i < v.n; i++) assert_int_equal(v.ids[i], cases[c].ids[i]);
  }
  ufp4_tokvec_free(&v);
  ufp4_tokenizer_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pretokenizer_matches_reference),
      cmocka_unit_test(invalid_utf8_is_an_error),
      cmocka_unit_test(merge_rules),
      cmocka_unit_test(bytes_tokenizer),
      cmocka_unit_test(gpt2_known_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
