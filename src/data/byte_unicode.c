#include "data/byte_unicode.h"

static int printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff); }

void ufp4_byte_to_unicode(uint32_t cp[256]) {
  uint32_t n = 0;
  for (int b = 0; b < 256; b++) cp[b] = printable(b) ? (uint32_t)b : 256 + n++;
}

int ufp4_unicode_to_byte(uint32_t cp) {
  if (cp < 256) return printable((int)cp) ? (int)cp : -1;
  uint32_t n = 0;
  for (int b = 0; b < 256; b++)
    if (!printable(b) && 256 + n++ == cp) return b;
  return -1;
}

void ufp4_byte_order(uint8_t order[256]) {
  int k = 0;
  for (int b = 0; b < 256; b++)
    if (printable(b)) order[k++] = (uint8_t)b;
  for (int b = 0; b < 256; b++)
    if (!printable(b)) order[k++] = (uint8_t)b;
}
