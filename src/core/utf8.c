#include "core/utf8.h"

int ufp4_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
  if (!n) return 0;
  uint8_t b = s[0];
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  int len;
  uint32_t c, min;
  if ((b & 0xe0) == 0xc0) len = 2, c = b & 0x1f, min = 0x80;
  else if ((b & 0xf0) == 0xe0) len = 3, c = b & 0x0f, min = 0x800;
  else if ((b & 0xf8) == 0xf0) len = 4, c = b & 0x07, min = 0x10000;
  else return 0;
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return len;
}

static int valid(const uint8_t *s, size_t n, int nul_ok, size_t *bad) {
  size_t i = 0;
  while (i < n) {
    uint32_t cp;
    int k = s[i] < 0x80 ? (s[i] || nul_ok) : ufp4_utf8_decode(s + i, n - i, &cp);
    if (!k) {
      if (bad) *bad = i;
      return 0;
    }
    i += (size_t)k;
  }
  return 1;
}

int ufp4_utf8_valid(const void *s, size_t n, size_t *bad) { return valid(s, n, 1, bad); }

int ufp4_utf8_valid_no_nul(const void *s, size_t n, size_t *bad) { return valid(s, n, 0, bad); }

int ufp4_utf8_encode(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (uint8_t)(0xc0 | (cp >> 6));
    out[1] = (uint8_t)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xe0 | (cp >> 12));
    out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp & 0x3f));
    return 3;
  }
  if (cp > 0x10ffff) return 0;
  out[0] = (uint8_t)(0xf0 | (cp >> 18));
  out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (uint8_t)(0x80 | (cp & 0x3f));
  return 4;
}
