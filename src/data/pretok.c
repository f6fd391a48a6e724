/* GPT-2 pre-tokenization, a hand-compiled form of the JS regex
 *   /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu
 * Alternatives are tried in order at each position, as a backtracking regex engine does:
 *  - a contraction when the text starts with one;
 *  - an optional U+0020 then a maximal run of one class (letters, numbers, or "other": neither
 *    whitespace nor letter nor number), the space only when the next code point starts the run;
 *  - a whitespace run: all of it if it reaches the end of the text; otherwise all but its last
 *    code point (so that the last one, typically a space, can prefix the next word), or, when the
 *    run is a single code point, that code point alone (the final \s+). */
#include <string.h>

#include "data/unicode_tables.h"
#include "core/utf8.h"
#include "ufp4/error.h"
#include "ufp4/tokenizer.h"

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

static int in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < r[mid][0]) hi = mid;
    else if (c > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

static int classify(uint32_t c) {
  if (c < 0x80) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_LETTER;
    if (c >= '0' && c <= '9') return C_NUMBER;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return C_SPACE;
    return C_OTHER;
  }
  if (in_ranges(c, ufp4_uc_letter_ranges, ufp4_uc_letter_count)) return C_LETTER;
  if (in_ranges(c, ufp4_uc_number_ranges, ufp4_uc_number_count)) return C_NUMBER;
  if (in_ranges(c, ufp4_uc_space_ranges, ufp4_uc_space_count)) return C_SPACE;
  return C_OTHER;
}

/* Class and length of the (already validated) code point at s[i]. */
static int class_at(const uint8_t *s, size_t n, size_t i, int *len) {
  if (s[i] < 0x80) {
    *len = 1;
    return classify(s[i]);
  }
  uint32_t c = 0;
  *len = ufp4_utf8_decode(s + i, n - i, &c);
  return classify(c);
}

static size_t contraction(const uint8_t *s, size_t n, size_t i) {
  if (s[i] != '\'' || i + 1 >= n) return 0;
  uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

int ufp4_pretokenize(const char *text, size_t len, const char *what,
                     int (*piece)(void *ctx, size_t off, size_t n), void *ctx) {
  const uint8_t *s = (const uint8_t *)text;
  size_t bad;
  if (!ufp4_utf8_valid(s, len, &bad))
    return ufp4_fail(UFP4_EFORMAT, "%s: invalid UTF-8 at byte offset %zu", what ? what : "text", bad);
  size_t i = 0;
  while (i < len) {
    size_t end = i + contraction(s, len, i);
    if (end == i) {
      int l0, cls = class_at(s, len, i, &l0);
      size_t run = i;
      if (cls == C_SPACE && s[i] == ' ' && i + 1 < len) {
        int l1, next = class_at(s, len, i + 1, &l1);
        if (next != C_SPACE) cls = next, run = i + 1;
      }
      if (cls != C_SPACE) {
        int l;
        end = run;
        while (end < len && class_at(s, len, end, &l) == cls) end += (size_t)l;
      } else {
        int l;
        size_t last = i, count = 0;
        end = i;
        while (end < len && class_at(s, len, end, &l) == C_SPACE) last = end, end += (size_t)l, count++;
        if (end < len && count > 1) end = last;
      }
    }
    int rc = piece(ctx, i, end - i);
    if (rc) return rc;
    i = end;
  }
  return 0;
}
