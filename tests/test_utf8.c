/* Strict UTF-8 against the well-formed byte sequences of the Unicode Standard, Table 3-7,
 * written here as explicit byte ranges (an independent formulation from the decoder's
 * bit arithmetic), exhaustively over all 1-, 2- and 3-byte strings and all 4-byte strings with
 * a valid-or-not lead byte F0..F7 and a sampled tail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/utf8.h"

/* Table 3-7: the length of the well-formed sequence at s, or 0. */
static int table37(const uint8_t *s, size_t n) {
  static const struct {
    uint8_t lo[4], hi[4];
    int len;
  } rows[] = {
      {{0x00}, {0x7f}, 1},
      {{0xc2, 0x80}, {0xdf, 0xbf}, 2},
      {{0xe0, 0xa0, 0x80}, {0xe0, 0xbf, 0xbf}, 3},
      {{0xe1, 0x80, 0x80}, {0xec, 0xbf, 0xbf}, 3},
      {{0xed, 0x80, 0x80}, {0xed, 0x9f, 0xbf}, 3},
      {{0xee, 0x80, 0x80}, {0xef, 0xbf, 0xbf}, 3},
      {{0xf0, 0x90, 0x80, 0x80}, {0xf0, 0xbf, 0xbf, 0xbf}, 4},
      {{0xf1, 0x80, 0x80, 0x80}, {0xf3, 0xbf, 0xbf, 0xbf}, 4},
      {{0xf4, 0x80, 0x80, 0x80}, {0xf4, 0x8f, 0xbf, 0xbf}, 4},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    if ((size_t)rows[r].len > n) continue;
    int ok = 1;
    for (int i = 0; i < rows[r].len && ok; i++) ok = s[i] >= rows[r].lo[i] && s[i] <= rows[r].hi[i];
    if (ok) return rows[r].len;
  }
  return 0;
}

/* whole string valid per Table 3-7 */
static int ref_valid(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    int l = table37(s + i, n - i);
    if (!l) return 0;
    i += (size_t)l;
  }
  return 1;
}

static void all_short_strings(void **state) {
  (void)state;
  uint8_t s[3];
  for (uint32_t v = 0; v < (1u << 24); v++) {
    s[0] = (uint8_t)(v >> 16), s[1] = (uint8_t)(v >> 8), s[2] = (uint8_t)v;
    for (size_t n = 1; n <= 3; n++) {
      if (n < 3 && (v & ((1u << (8 * (3 - n))) - 1))) continue; /* shorter strings once each */
      size_t bad;
      int got = ufp4_utf8_valid(s, n, &bad), want = ref_valid(s, n);
      if (got != want) fail_msg("%zu bytes %02x %02x %02x: got %d want %d", n, s[0], s[1], s[2], got, want);
    }
  }
}

static void four_byte_strings(void **state) {
  (void)state;
  uint8_t s[4];
  for (uint32_t lead = 0xf0; lead <= 0xf7; lead++)
    for (uint32_t b1 = 0; b1 < 256; b1++)
      for (uint32_t b2 = 0; b2 < 256; b2 += 7)
        for (uint32_t b3 = 0x70; b3 < 0xd0; b3 += 5) {
          s[0] = (uint8_t)lead, s[1] = (uint8_t)b1, s[2] = (uint8_t)b2, s[3] = (uint8_t)b3;
          assert_int_equal(ufp4_utf8_valid(s, 4, NULL), ref_valid(s, 4));
        }
}

static void encode_decode_every_code_point(void **state) {
  (void)state;
  for (uint32_t cp = 0; cp <= 0x10ffff + 16; cp++) {
    uint8_t b[4];
    int n = ufp4_utf8_encode(cp, b);
    int valid_cp = cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!valid_cp) {
      assert_int_equal(n, 0);
      continue;
    }
    /* length by code point range, Table 3-6 */
    int want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    assert_int_equal(n, want);
    assert_int_equal(table37(b, (size_t)n), n);
    uint32_t back = 0;
    assert_int_equal(ufp4_utf8_decode(b, (size_t)n, &back), n);
    assert_int_equal(back, cp);
    /* every truncation is invalid */
    for (int k = 1; k < n; k++) assert_int_equal(ufp4_utf8_decode(b, (size_t)k, &back), 0);
  }
}

static void first_bad_offset(void **state) {
  (void)state;
  const uint8_t s[] = {'a', 'b', 0xc3, 0xa9, 'c', 0xe2, 0x82, 'd'}; /* "ab" e-acute "c", truncated euro */
  size_t bad = 99;
  assert_int_equal(ufp4_utf8_valid(s, sizeof s, &bad), 0);
  assert_int_equal(bad, 5);
  const uint8_t overlong[] = {0xc0, 0xaf}; /* '/' in two bytes */
  assert_int_equal(ufp4_utf8_valid(overlong, 2, &bad), 0);
  assert_int_equal(bad, 0);
  const uint8_t surrogate[] = {'x', 0xed, 0xa0, 0x80}; /* U+D800 */
  assert_int_equal(ufp4_utf8_valid(surrogate, 4, &bad), 0);
  assert_int_equal(bad, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(all_short_strings),
      cmocka_unit_test(four_byte_strings),
      cmocka_unit_test(encode_decode_every_code_point),
      cmocka_unit_test(first_bad_offset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
