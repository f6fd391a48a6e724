/* safetensors parser: a file that validates must hand out tensors whose bytes lie inside the
 * input and whose sizes agree with their shapes; every float-convertible tensor is read back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ufp4/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ufp4_st *st;
  int rc = ufp4_st_parse(data, size, "fuzz.safetensors", &st);
  fuzz_check_error(rc, "fuzz.safetensors");
  if (rc) return 0;
  size_t n = ufp4_st_count(st);
  for (size_t i = 0; i < n; i++) {
    const ufp4_st_info *t = ufp4_st_at(st, i);
    if (!t || !t->name) abort();
    if (ufp4_st_find(st, t->name) != t) abort();
    const uint8_t *p = t->data;
    if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
    uint64_t bits = (uint64_t)t->count * (uint64_t)ufp4_st_dtype_bits(t->dtype);
    if (bits != (uint64_t)t->nbytes * 8) abort();
    volatile uint8_t sink = 0;
    for (size_t k = 0; k < t->nbytes; k++) sink ^= p[k]; /* ASan checks every byte is inside */
    (void)sink;
    if ((t->dtype == UFP4_ST_F32 || t->dtype == UFP4_ST_BF16 || t->dtype == UFP4_ST_F16 ||
         t->dtype == UFP4_ST_F64) && t->count <= (1u << 16)) {
      float *dst = malloc((t->count ? t->count : 1) * sizeof *dst);
      if (!dst) abort();
      if (ufp4_st_read_f32(st, t->name, dst, t->shape, t->ndim)) abort();
      free(dst);
    }
  }
  for (size_t i = 0; i < ufp4_st_meta_count(st); i++) {
    const char *k = ufp4_st_meta_key(st, i);
    if (!k || !ufp4_st_meta_get(st, k)) abort();
  }
  ufp4_st_close(st);
  return 0;
}
