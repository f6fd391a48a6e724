/* The incremental BPE trainer against a naive one written here: after every merge it recounts
 * all adjacent pairs of all words from scratch and takes the most frequent (ties: smallest
 * (first id, second id)), as the rules in ufp4/tokenizer.h say. Both run on the same words (the
 * trainer's pre-tokenizer), on a hand-made corpus and on a slice of SOTU when it is present; the
 * merges written to vocab.bpe must be identical. Then the trained files load, keep GPT-2's byte
 * ids, round-trip, and compress. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_test_util.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/tokenizer.h"

typedef struct {
  size_t n;
  char **w;
  size_t *len;
  long *freq;
} wordlist;

typedef struct {
  const char *text;
  wordlist *wl;
} wl_ctx;

static int add_word(void *ctx, size_t off, size_t n) {
  wl_ctx *c = ctx;
  wordlist *wl = c->wl;
  for (size_t i = 0; i < wl->n; i++)
    if (wl->len[i] == n && !memcmp(wl->w[i], c->text + off, n)) {
      wl->freq[i]++;
      return 0;
    }
  wl->w = realloc(wl->w, (wl->n + 1) * sizeof *wl->w);
  wl->len = realloc(wl->len, (wl->n + 1) * sizeof *wl->len);
  wl->freq = realloc(wl->freq, (wl->n + 1) * sizeof *wl->freq);
  wl->w[wl->n] = malloc(n);
  memcpy(wl->w[wl->n], c->text + off, n);
  wl->len[wl->n] = n;
  wl->freq[wl->n] = 1;
  wl->n++;
  return 0;
}

/* GPT-2 byte order: printable bytes first (their ids 0..187), then the rest. */
static int printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff); }

static uint32_t cp_of(int b) {
  if (printable(b)) return (uint32_t)b;
  uint32_t n = 0;
  for (int c = 0; c < b; c++) n += !printable(c);
  return 256 + n;
}

/* Naive training; writes the merges as vocab.bpe lines into *out. Returns the number of tokens. */
static size_t naive_train(const wordlist *wl, size_t max_tokens, char **out) {
  size_t cap_tok = max_tokens + 1;
  uint8_t **tb = malloc(cap_tok * sizeof *tb);
  size_t *tl = malloc(cap_tok * sizeof *tl);
  size_t n_tok = 0;
  for (int k = 0, pass = 0; pass < 2; pass++)
    for (int b = 0; b < 256; b++)
      if (printable(b) == !pass) {
        tb[k] = malloc(1);
        tb[k][0] = (uint8_t)b;
        tl[k] = 1;
        k++, n_tok++;
      }
  uint32_t byte_id[256];
  for (size_t k = 0; k < 256; k++) byte_id[tb[k][0]] = (uint32_t)k;
  uint32_t **sym = malloc(wl->n * sizeof *sym);
  size_t *sl = malloc(wl->n * sizeof *sl);
  for (size_t i = 0; i < wl->n; i++) {
    sym[i] = malloc(wl->len[i] * sizeof **sym);
    for (size_t j = 0; j < wl->len[i]; j++) sym[i][j] = byte_id[(uint8_t)wl->w[i][j]];
    sl[i] = wl->len[i];
  }
  size_t out_cap = 1 << 16, out_n = 0;
  *out = malloc(out_cap);
  out_n += (size_t)sprintf(*out, "#version: 0.2\n");
  while (n_tok < max_tokens) {
    long best = 0;
    uint32_t ba = 0, bb = 0;
    /* count every distinct pair by brute force: for each occurrence, sum its frequency over all words */
    for (size_t i = 0; i < wl->n; i++)
      for (size_t j = 0; j + 1 < sl[i]; j++) {
        uint32_t a = sym[i][j], b = sym[i][j + 1];
        long cnt = 0;
        for (size_t i2 = 0; i2 < wl->n; i2++)
          for (size_t j2 = 0; j2 + 1 < sl[i2]; j2++) cnt += (sym[i2][j2] == a && sym[i2][j2 + 1] == b) * wl->freq[i2];
        if (cnt > best || (cnt == best && (a < ba || (a == ba && b < bb)))) best = cnt, ba = a, bb = b;
      }
    if (best < 2) break;
    size_t l = tl[ba] + tl[bb];
    uint8_t *cat = malloc(l);
    memcpy(cat, tb[ba], tl[ba]);
    memcpy(cat + tl[ba], tb[bb], tl[bb]);
    uint32_t c = (uint32_t)n_tok;
    for (size_t k = 0; k < n_tok; k++)
      if (tl[k] == l && !memcmp(tb[k], cat, l)) c = (uint32_t)k;
    if (c == n_tok) tb[n_tok] = cat, tl[n_tok] = l, n_tok++;
    else free(cat);
    /* the merge line, in the byte-unicode alphabet */
    if (out_n + 4 * (tl[ba] + tl[bb]) + 4 > out_cap) *out = realloc(*out, out_cap *= 2);
    for (int side = 0; side < 2; side++) {
      uint32_t id = side ? bb : ba;
      for (size_t k = 0; k < tl[id]; k++) {
        uint32_t cp = cp_of(tb[id][k]);
        if (cp < 0x80) (*out)[out_n++] = (char)cp;
        else (*out)[out_n++] = (char)(0xc0 | (cp >> 6)), (*out)[out_n++] = (char)(0x80 | (cp & 0x3f));
      }
      (*out)[out_n++] = side ? '\n' : ' ';
    }
    for (size_t i = 0; i < wl->n; i++) {
      size_t j2 = 0;
      for (size_t j = 0; j < sl[i];) {
        if (j + 1 < sl[i] && sym[i][j] == ba && sym[i][j + 1] == bb) sym[i][j2++] = c, j += 2;
        else sym[i][j2++] = sym[i][j++];
      }
      sl[i] = j2;
    }
  }
  (*out)[out_n] = 0;
  for (size_t i = 0; i < wl->n; i++) free(sym[i]);
  free(sym);
  free(sl);
  for (size_t k = 0; k < n_tok; k++) free(tb[k]);
  free(tb);
  free(tl);
  return n_tok;
}

static void compare_with_naive(const ufp4_corpus *c, uint32_t vocab) {
  wordlist wl = {0};
  for (size_t d = 0; d < c->n_docs; d++) {
    wl_ctx ctx = {c->texts[d], &wl};
    assert_int_equal(ufp4_pretokenize(c->texts[d], c->lens[d], NULL, add_word, &ctx), 0);
  }
  char *want;
  size_t want_tokens = naive_train(&wl, vocab - 1, &want);
  char dir[4096], path[4200];
  tt_mkdtemp(dir, sizeof dir, "bpetrain");
  uint32_t got_vocab = 0;
  assert_int_equal(ufp4_bpe_train(c, vocab, dir, &got_vocab), 0);
  assert_int_equal(got_vocab, want_tokens + 1);
  snprintf(path, sizeof path, "%s/vocab.bpe", dir);
  char *got;
  size_t got_len;
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &got, &got_len), 0);
  assert_string_equal(got, want);
  /* the files load as a tokenizer of that size, with the bytes at GPT-2's ids and
   * <|endoftext|> last, and the corpus round-trips */
  ufp4_tokenizer *t;
  assert_int_equal(ufp4_tokenizer_open(dir, &t), 0);
  assert_int_equal(ufp4_tokenizer_vocab_size(t), got_vocab);
  assert_int_equal(ufp4_tokenizer_eot(t), got_vocab - 1);
  size_t l;
  assert_int_equal(ufp4_tokenizer_token_bytes(t, 0, &l)[0], '!');
  assert_int_equal(ufp4_tokenizer_token_bytes(t, 188, &l)[0], 0x00);
  /* merge k (ufp4_tokenizer_merge, the exporters' view) joins two tokens into token 256 + k */
  assert_int_equal(ufp4_tokenizer_merge_count(t), got_vocab - 257);
  for (uint32_t k = 0; k < ufp4_tokenizer_merge_count(t); k++) {
    uint32_t a, b;
    size_t la, lb, lm;
    assert_int_equal(ufp4_tokenizer_merge(t, k, &a, &b), 0);
    const uint8_t *ba = ufp4_tokenizer_token_bytes(t, a, &la), *bb = ufp4_tokenizer_token_bytes(t, b, &lb);
    const uint8_t *bm = ufp4_tokenizer_token_bytes(t, 256 + k, &lm);
    assert_int_equal(la + lb, lm);
    assert_memory_equal(ba, bm, la);
    assert_memory_equal(bb, bm + la, lb);
  }
  uint32_t a, b;
  assert_int_equal(ufp4_tokenizer_merge(t, ufp4_tokenizer_merge_count(t), &a, &b), UFP4_EINVAL);
  ufp4_tokvec v = {0};
  size_t bytes = 0;
  for (size_t d = 0; d < c->n_docs; d++) {
    size_t start = v.n;
    assert_int_equal(ufp4_tokenizer_encode(t, c->texts[d], c->lens[d], NULL, &v), 0);
    char *s;
    size_t n;
    assert_int_equal(ufp4_tokenizer_decode(t, v.ids + start, v.n - start, &s, &n), 0);
    assert_int_equal(n, c->lens[d]);
    assert_memory_equal(s, c->texts[d], n);
    free(s);
    bytes += n;
  }
  if (got_vocab > 300) assert_true(v.n < bytes); /* merges compress */
  ufp4_tokvec_free(&v);
  ufp4_tokenizer_free(t);
  free(got);
  free(want);
  for (size_t i = 0; i < wl.n; i++) free(wl.w[i]);
  free(wl.w);
  free(wl.len);
  free(wl.freq);
  tt_rmdir(dir);
}

static void hand_corpus(void **state) {
  (void)state;
  /* repeated words with ties, a doubled letter run (aaaa: overlapping pairs), punctuation,
   * non-ASCII letters, and a token that two merge paths reach */
  static const char *docs[] = {
      "low lower lowest low low newer newest wider wide aaaa aaaa aaa banana bandana!! ",
      "caf\xc3\xa9 caf\xc3\xa9 na\xc3\xafve abc abc bca cab abcabc abcabc... low-lower\n\n  low",
  };
  ufp4_corpus c = {0};
  c.n_docs = 2;
  c.texts = (const char **)docs;
  size_t lens[2] = {strlen(docs[0]), strlen(docs[1])};
  c.lens = lens;
  compare_with_naive(&c, 300); /* runs out of pairs seen twice before 300 */
  compare_with_naive(&c, 270);
}

static void sotu_slice(void **state) {
  (void)state;
  char path[4096];
  tt_source_path(path, sizeof path, "data/raw/sotu/1790_george_washington_n.txt");
  if (!tt_exists(path)) skip();
  ufp4_corpus c;
  assert_int_equal(ufp4_corpus_load(path, NULL, &c), 0);
  compare_with_naive(&c, 400);
  ufp4_corpus_free(&c);
}

static void bad_arguments(void **state) {
  (void)state;
  ufp4_corpus c = {0};
  assert_int_equal(ufp4_bpe_train(&c, 1000, "/tmp", NULL), UFP4_EINVAL);
  const char *doc = "x";
  size_t len = 1;
  c.n_docs = 1, c.texts = &doc, c.lens = &len;
  assert_int_equal(ufp4_bpe_train(&c, 100, "/tmp", NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_bpe_train(&c, 300, "/nonexistent-dir/sub", NULL), UFP4_EIO);
  assert_non_null(strstr(ufp4_last_error(), "/nonexistent-dir/sub"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hand_corpus),
      cmocka_unit_test(sotu_slice),
      cmocka_unit_test(bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
