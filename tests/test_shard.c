/* Token shards: round trips at both widths against the layout of ufp4/shard.h decoded by hand
 * here, and every kind of damage -- each header bit flipped, every truncation, trailing bytes,
 * a token outside the vocabulary, a vocabulary/tokenizer mismatch, a missing file -- failing
 * with an error that names the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_test_util.h"
#include "ufp4/corpus.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/shard.h"

static char dir[4096];

static void write_shard(const char *path, uint32_t vocab, const uint32_t *ids, size_t n) {
  ufp4_shard_info info = {.tokenizer_id = 2, .vocab_size = vocab, .tokenizer_hash = 0x1122334455667788ull};
  ufp4_shard_writer *w;
  assert_int_equal(ufp4_shard_writer_open(path, &info, &w), 0);
  assert_int_equal(ufp4_shard_writer_append(w, ids, n / 2), 0);
  assert_int_equal(ufp4_shard_writer_append(w, ids + n / 2, n - n / 2), 0);
  assert_int_equal(ufp4_shard_writer_commit(w, 7), 0);
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void round_trip(uint32_t vocab, uint32_t width) {
  enum { N = 100003 };
  uint32_t *ids = malloc(N * sizeof *ids);
  for (size_t i = 0; i < N; i++) ids[i] = (uint32_t)((i * 2654435761u) % vocab);
  char path[4200];
  snprintf(path, sizeof path, "%s/rt%u.tok", dir, vocab);
  write_shard(path, vocab, ids, N);
  char *raw;
  size_t n;
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &raw, &n), 0);
  const uint8_t *b = (const uint8_t *)raw;
  assert_int_equal(n, 64 + (size_t)N * width);
  assert_memory_equal(b, "UFP4TOK\0", 8);
  assert_int_equal(le(b + 8, 4), 1);
  assert_int_equal(le(b + 12, 4), 2);
  assert_int_equal(le(b + 16, 4), vocab);
  assert_int_equal(le(b + 20, 4), width);
  assert_int_equal(le(b + 24, 8), N);
  assert_int_equal(le(b + 32, 8), 0x1122334455667788ull);
  assert_int_equal(le(b + 40, 8), 7);
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 of bytes 0..55 */
  for (int i = 0; i < 56; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  assert_int_equal(le(b + 56, 8), h);
  for (size_t i = 0; i < N; i++) assert_int_equal(le(b + 64 + i * width, (int)width), ids[i]);
  free(raw);
  ufp4_shard s;
  assert_int_equal(ufp4_shard_open(path, &s), 0);
  assert_int_equal(s.info.token_count, N);
  assert_int_equal(s.info.n_docs, 7);
  uint32_t buf[10];
  assert_int_equal(ufp4_shard_read(&s, N - 10, 10, buf), 0);
  assert_memory_equal(buf, ids + N - 10, sizeof buf);
  assert_int_equal(ufp4_shard_read(&s, N - 9, 10, buf), UFP4_EINVAL);
  assert_int_equal(ufp4_shard_expect(&s, 2, vocab, 0x1122334455667788ull), 0);
  assert_int_equal(ufp4_shard_expect(&s, 2, vocab + 1, 0x1122334455667788ull), UFP4_EFORMAT);
  assert_non_null(strstr(ufp4_last_error(), path));
  assert_non_null(strstr(ufp4_last_error(), "vocabulary size mismatch"));
  assert_int_equal(ufp4_shard_expect(&s, 1, vocab, 0x1122334455667788ull), UFP4_EFORMAT);
  assert_int_equal(ufp4_shard_expect(&s, 2, vocab, 0x1122334455667789ull), UFP4_EFORMAT);
  ufp4_shard_close(&s);
  free(ids);
}

static void round_trips(void **state) {
  (void)state;
  round_trip(50257, 2);
  round_trip(65536, 2);
  round_trip(65537, 4);
  round_trip(256, 2);
}

static void expect_open_fails(const char *path, const char *why) {
  ufp4_shard s;
  int rc = ufp4_shard_open(path, &s);
  if (rc >= 0) fail_msg("%s: opened although %s", path, why);
  if (!strstr(ufp4_last_error(), path)) fail_msg("error '%s' does not name the file", ufp4_last_error());
}

static void damage(void **state) {
  (void)state;
  uint32_t ids[300];
  for (int i = 0; i < 300; i++) ids[i] = (uint32_t)i % 1000;
  char good[4200], bad[4200];
  snprintf(good, sizeof good, "%s/good.tok", dir);
  snprintf(bad, sizeof bad, "%s/bad.tok", dir);
  write_shard(good, 1000, ids, 300);
  char *raw;
  size_t n;
  assert_int_equal(ufp4_read_file(good, SIZE_MAX, &raw, &n), 0);
  /* every single-bit flip in the header */
  for (int bit = 0; bit < 64 * 8; bit++) {
    raw[bit / 8] ^= (char)(1 << (bit % 8));
    tt_write(bad, raw, n);
    expect_open_fails(bad, "a header bit was flipped");
    raw[bit / 8] ^= (char)(1 << (bit % 8));
  }
  /* every truncation, and a trailing byte */
  for (size_t k = 0; k < n; k += (k < 80 ? 1 : 37)) {
    tt_write(bad, raw, k);
    expect_open_fails(bad, "the file was truncated");
  }
  tt_write(bad, raw, n - 1);
  expect_open_fails(bad, "the file lost its last byte");
  char *longer = malloc(n + 1);
  memcpy(longer, raw, n);
  longer[n] = 0;
  tt_write(bad, longer, n + 1);
  expect_open_fails(bad, "the file has a trailing byte");
  free(longer);
  /* a token >= vocab behind a valid header */
  raw[64 + 2 * 123] = (char)0xe8, raw[64 + 2 * 123 + 1] = 0x03; /* 1000 */
  tt_write(bad, raw, n);
  expect_open_fails(bad, "a token is outside the vocabulary");
  assert_non_null(strstr(ufp4_last_error(), "token 123"));
  free(raw);
  /* header-level validation on its own */
  ufp4_shard_info info = {.tokenizer_id = 0, .vocab_size = 256, .token_width = 4}, out;
  uint8_t h[64];
  ufp4_shard_header_pack(&info, h);
  assert_int_equal(ufp4_shard_header_parse(h, 64, "x.tok", &out), UFP4_EFORMAT); /* width 4 for 256 */
  info.token_width = 2, info.tokenizer_id = 3;
  ufp4_shard_header_pack(&info, h);
  assert_int_equal(ufp4_shard_header_parse(h, 64, "x.tok", &out), UFP4_EFORMAT); /* unknown tokenizer */
  info.tokenizer_id = 0;
  ufp4_shard_header_pack(&info, h);
  assert_int_equal(ufp4_shard_header_parse(h, 64, "x.tok", &out), 0);
  assert_int_equal(ufp4_shard_header_parse(h, 63, "x.tok", &out), UFP4_EFORMAT);
  /* missing file, writer rejecting out-of-vocabulary tokens, nothing left behind on abort */
  char missing[4200];
  snprintf(missing, sizeof missing, "%s/missing.tok", dir);
  expect_open_fails(missing, "it does not exist");
  ufp4_shard_info wi = {.tokenizer_id = 0, .vocab_size = 256};
  ufp4_shard_writer *w;
  assert_int_equal(ufp4_shard_writer_open(missing, &wi, &w), 0);
  uint32_t big = 256;
  assert_int_equal(ufp4_shard_writer_append(w, &big, 1), UFP4_EINVAL);
  ufp4_shard_writer_abort(w);
  assert_false(tt_exists(missing));
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
  assert_int_not_equal(system(cmd), 0); /* no temp file left */
}

int main(void) {
  tt_mkdtemp(dir, sizeof dir, "shard");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trips),
      cmocka_unit_test(damage),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tt_rmdir(dir);
  return rc;
}
