/* Two FP4 codes per byte, element 2i in the low nibble (OCP MX / NVIDIA FP4x2 order). */
#include "ufp4/quant.h"

size_t ufp4_packed_bytes(size_t n_codes) { return n_codes / 2 + (n_codes & 1); }

void ufp4_pack_codes(const uint8_t *codes, size_t n, uint8_t *packed) {
  size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; i++)
    packed[i] = (uint8_t)((codes[2 * i] & 0x0F) | ((codes[2 * i + 1] & 0x0F) << 4));
  if (n & 1) packed[pairs] = (uint8_t)(codes[n - 1] & 0x0F);
}

void ufp4_unpack_codes(const uint8_t *packed, size_t n, uint8_t *codes) {
  size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; i++) {
    codes[2 * i] = packed[i] & 0x0F;
    codes[2 * i + 1] = packed[i] >> 4;
  }
  if (n & 1) codes[n - 1] = packed[pairs] & 0x0F;
}
