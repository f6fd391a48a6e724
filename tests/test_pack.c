/* Packed FP4 storage: two codes per byte, element 2i in the low nibble. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ufp4/philox.h"
#include "ufp4/quant.h"

static void test_sizes_and_order(void **state) {
  (void)state;
  assert_int_equal(ufp4_packed_bytes(0), 0);
  assert_int_equal(ufp4_packed_bytes(1), 1);
  assert_int_equal(ufp4_packed_bytes(2), 1);
  assert_int_equal(ufp4_packed_bytes(3), 2);
  assert_int_equal(ufp4_packed_bytes(1001), 501);
  /* {1, 2, 3}: byte 0 = code1 << 4 | code0 = 0x21; byte 1 = 0x03 (odd count: high nibble 0).
   * High bits of an input byte are not part of the code and must not leak. */
  const uint8_t codes[3] = {0x1, 0x2, 0xF3};
  uint8_t packed[2] = {0xAA, 0xAA};
  ufp4_pack_codes(codes, 3, packed);
  assert_int_equal(packed[0], 0x21);
  assert_int_equal(packed[1], 0x03);
  uint8_t back[3];
  ufp4_unpack_codes((const uint8_t[]){0xF0, 0x7E}, 3, back);
  assert_int_equal(back[0], 0x0);
  assert_int_equal(back[1], 0xF);
  assert_int_equal(back[2], 0xE);
}

static void test_round_trip(void **state) {
  (void)state;
  const size_t ns[] = {1, 2, 15, 16, 17, 1000, 1001};
  for (int k = 0; k < 7; k++) {
    size_t n = ns[k];
    uint8_t *c = malloc(n), *p = malloc(ufp4_packed_bytes(n)), *u = malloc(n);
    for (size_t i = 0; i < n; i++) c[i] = (uint8_t)(ufp4_philox_u32(9, 0, i) & 0xF);
    ufp4_pack_codes(c, n, p);
    ufp4_unpack_codes(p, n, u);
    assert_memory_equal(c, u, n);
    for (size_t i = 0; i < n; i++) /* nibble order, independently of unpack */
      assert_int_equal((p[i / 2] >> (4 * (i % 2))) & 0xF, c[i]);
    if (n & 1) assert_int_equal(p[n / 2] >> 4, 0);
    free(c);
    free(p);
    free(u);
  }
}

static void test_quantize_pack_dequantize(void **state) {
  (void)state;
  /* quantize -> pack -> unpack into a fresh code array -> dequantize == fake_quant, bit for bit,
   * on an odd element count. */
  enum { R = 5, C = 45 };
  float x[R * C], y[R * C], ref[R * C];
  for (int i = 0; i < R * C; i++) x[i] = ufp4_philox_normal(3, 0, (uint64_t)i);
  const ufp4_scale_kind ks[3] = {UFP4_SCALE_FP32, UFP4_SCALE_NVFP4, UFP4_SCALE_E8M0_RCEIL};
  for (int g = 0; g < UFP4_GRID_COUNT; g++)
    for (int k = 0; k < 3; k++)
      for (int tile = 0; tile <= 16; tile += 16) {
        ufp4_qformat f = ufp4_qformat_default();
        f.grid = (ufp4_grid_id)g;
        f.scale = ks[k];
        f.tile2d = tile;
        f.round = UFP4_ROUND_SR;
        ufp4_qtensor q;
        assert_int_equal(ufp4_quantize(&f, x, R, C, &q), 0);
        uint8_t packed[(R * C + 1) / 2];
        assert_int_equal(ufp4_packed_bytes(R * C), sizeof packed);
        ufp4_pack_codes(q.codes, R * C, packed);
        memset(q.codes, 0, R * C);
        ufp4_unpack_codes(packed, R * C, q.codes);
        ufp4_dequantize(&q, y);
        assert_int_equal(ufp4_fake_quant(&f, x, ref, R, C), 0);
        assert_memory_equal(y, ref, sizeof y);
        ufp4_qtensor_free(&q);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_and_order),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_quantize_pack_dequantize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
