/* The GGUF writer (gguf.h): the bytes of a small file written out by hand from ggml's
 * docs/gguf.md, refusals, and ggml's MXFP4 / NVFP4 blocks decoded by a decoder transcribed from
 * ggml (ggml-common.h kvalues_fp4, ggml-impl.h ggml_e8m0_to_fp32_half / ggml_ue4m3_to_fp32,
 * ggml-quants.c dequantize_row_mxfp4 / _nvfp4) against ufp4_dequantize of the same codes.
 * llama.cpp itself reads the exports in tests/test_gguf_llama.mjs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/gguf.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"

static char dir[256];

/* ggml, transcribed: the doubled E2M1 values, E8M0 / 2 and UE4M3 / 2. */
static const int8_t KVALUES[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
static float e8m0_half(uint8_t x) {
  uint32_t bits = x < 2 ? 0x00200000u << x : (uint32_t)(x - 1) << 23;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static float ue4m3_half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  int exp = (x >> 3) & 0xF, man = x & 7;
  float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + man / 8.0f, exp - 7);
  return raw * 0.5f;
}
static void ggml_dequant_mxfp4(const uint8_t *b, float *y) {
  float d = e8m0_half(b[0]);
  for (int j = 0; j < 16; j++) {
    y[j] = KVALUES[b[1 + j] & 0x0F] * d;
    y[j + 16] = KVALUES[b[1 + j] >> 4] * d;
  }
}
static void ggml_dequant_nvfp4(const uint8_t *b, float *y) {
  for (int s = 0; s < 4; s++) {
    float d = ue4m3_half(b[s]);
    for (int j = 0; j < 8; j++) {
      y[16 * s + j] = KVALUES[b[4 + 8 * s + j] & 0x0F] * d;
      y[16 * s + j + 8] = KVALUES[b[4 + 8 * s + j] >> 4] * d;
    }
  }
}

static void random_tensor(float *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    float u = (float)ufp4_philox_u32(seed, 0, i) / 4294967296.0f - 0.5f;
    /* a spread of magnitudes, so that blocks get different scales */
    x[i] = u * ldexpf(1.0f, (int)(ufp4_philox_u32(seed, 1, i / 16) % 12) - 6);
  }
}

enum { R = 8, C = 128 };

/* A random R x C tensor quantized by ufp4 with E2M1 and the given scale and block, and its
 * dequantized values in want. */
static void quantize_random(ufp4_scale_kind scale, int block, uint64_t seed, ufp4_qtensor *q, float *want) {
  static float x[R * C];
  random_tensor(x, R * C, seed);
  ufp4_qformat f = ufp4_qformat_default();
  f.scale = scale, f.block = block;
  assert_int_equal(ufp4_quantize(&f, x, R, C, q), 0);
  ufp4_dequantize(q, want);
}

static void test_mxfp4_blocks_decode_as_ufp4(void **state) {
  (void)state;
  float want[R * C];
  ufp4_qtensor q;
  quantize_random(UFP4_SCALE_E8M0_FLOOR, 32, 7, &q, want);
  for (size_t b = 0; b < R * C / 32; b++) {
    uint8_t blk[17];
    float got[32];
    ufp4_gguf_mxfp4_block(q.codes + 32 * b, q.scale_bits[b], blk);
    ggml_dequant_mxfp4(blk, got);
    /* bit for bit, but for the sign of zero: ggml's table has no -0 (code 8 is +0) */
    for (int i = 0; i < 32; i++) assert_true(got[i] == want[32 * b + i]);
  }
  ufp4_qtensor_free(&q);
}

static void test_nvfp4_blocks_decode_as_ufp4(void **state) {
  (void)state;
  float want[R * C];
  ufp4_qtensor q;
  quantize_random(UFP4_SCALE_NVFP4, 16, 11, &q, want);
  float inv = 1.0f / q.tensor_scale; /* the <name>.scale tensor llama.cpp multiplies by */
  for (size_t b = 0; b < R * C / 64; b++) {
    uint8_t blk[36];
    float got[64];
    ufp4_gguf_nvfp4_block(q.codes + 64 * b, q.scale_bits + 4 * b, blk);
    ggml_dequant_nvfp4(blk, got);
    for (int i = 0; i < 64; i++) {
      float w = want[64 * b + i], g = got[i] * inv;
      /* ufp4: code * (d / S_enc); llama.cpp: (code * d) * (1 / S_enc): two roundings apart */
      assert_true(fabsf(g - w) <= 3e-7f * fabsf(w));
      assert_true((g == 0) == (w == 0));
    }
  }
  ufp4_qtensor_free(&q);
}

/* Element j and j+16 (MXFP4), j and j+8 in each 16 (NVFP4) share a byte: not the OCP pairs. */
static void test_nibble_order(void **state) {
  (void)state;
  uint8_t codes[64], out[36];
  for (int i = 0; i < 64; i++) codes[i] = (uint8_t)(i % 16);
  ufp4_gguf_mxfp4_block(codes, 0x7F, out);
  assert_int_equal(out[0], 0x7F);
  for (int j = 0; j < 16; j++) assert_int_equal(out[1 + j], (uint8_t)(j | j << 4)); /* j, j+16 (same code) */
  for (int i = 0; i < 64; i++) codes[i] = (uint8_t)(i < 8 ? 1 : i < 16 ? 2 : 0);
  const uint8_t d[4] = {0x38, 0x40, 0x00, 0x7E};
  ufp4_gguf_nvfp4_block(codes, d, out);
  assert_memory_equal(out, d, 4);
  for (int j = 0; j < 8; j++) assert_int_equal(out[4 + j], 0x21);
  for (int j = 8; j < 32; j++) assert_int_equal(out[4 + j], 0x00);
}

/* The whole file for one u32 key, one string key and one 1x2 F32 tensor, byte by byte. */
static void test_file_bytes(void **state) {
  (void)state;
  ufp4_gguf *g;
  assert_int_equal(ufp4_gguf_create(&g), 0);
  assert_int_equal(ufp4_gguf_kv_u32(g, "a", 7), 0);
  assert_int_equal(ufp4_gguf_kv_str(g, "bc", "xy"), 0);
  const float v[2] = {1.0f, -2.0f};
  const uint64_t ne[2] = {2, 1};
  assert_int_equal(ufp4_gguf_add_tensor(g, "t", UFP4_GGML_F32, 2, ne, v, sizeof v), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/x.gguf", dir);
  uint64_t size;
  assert_int_equal(ufp4_gguf_write(g, path, &size), 0);
  ufp4_gguf_free(g);
  static const uint8_t want[] = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,                    /* magic, version 3 */
      1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,    /* 1 tensor, 2 key-values */
      1, 0, 0, 0, 0, 0, 0, 0, 'a', 4, 0, 0, 0, 7, 0, 0, 0, /* "a": u32 (4) 7 */
      2, 0, 0, 0, 0, 0, 0, 0, 'b', 'c', 8, 0, 0, 0,       /* "bc": string (8) */
      2, 0, 0, 0, 0, 0, 0, 0, 'x', 'y',                   /* "xy" */
      1, 0, 0, 0, 0, 0, 0, 0, 't', 2, 0, 0, 0,            /* "t", 2 dims */
      2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,    /* ne = {2, 1} */
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                /* F32, offset 0 */
  };
  /* header: 106 bytes, padded to 128; data: 8 bytes padded to 32 */
  assert_int_equal(sizeof want, 106);
  char *data;
  size_t n;
  assert_int_equal(ufp4_read_file(path, 1 << 20, &data, &n), 0);
  assert_int_equal(n, 160);
  assert_int_equal(size, 160);
  assert_memory_equal(data, want, sizeof want);
  for (size_t i = sizeof want; i < 128; i++) assert_int_equal(data[i], 0);
  assert_memory_equal(data + 128, v, sizeof v);
  for (size_t i = 136; i < 160; i++) assert_int_equal(data[i], 0);
  free(data);
}

static void test_refusals(void **state) {
  (void)state;
  ufp4_gguf *g;
  assert_int_equal(ufp4_gguf_create(&g), 0);
  assert_int_equal(ufp4_gguf_kv_u32(g, "k", 1), 0);
  assert_int_equal(ufp4_gguf_kv_f32(g, "k", 1.0f), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "duplicate key 'k'"));
  const char *bad = "\xff";
  size_t len = 1;
  assert_int_equal(ufp4_gguf_kv_str_array(g, "s", &bad, &len, 1), UFP4_EINVAL);
  uint8_t buf[64] = {0};
  uint64_t ne[2] = {48, 1};
  assert_int_equal(ufp4_gguf_add_tensor(g, "m", UFP4_GGML_MXFP4, 2, ne, buf, 17), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "not a multiple of MXFP4's block of 32"));
  ne[0] = 32;
  assert_int_equal(ufp4_gguf_add_tensor(g, "m", UFP4_GGML_MXFP4, 2, ne, buf, 16), UFP4_EINVAL);
  assert_int_equal(ufp4_gguf_add_tensor(g, "m", UFP4_GGML_MXFP4, 2, ne, buf, 17), 0);
  assert_int_equal(ufp4_gguf_add_tensor(g, "m", UFP4_GGML_MXFP4, 2, ne, buf, 17), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "duplicate tensor 'm'"));
  ne[0] = 64;
  assert_int_equal(ufp4_gguf_tensor_bytes(UFP4_GGML_NVFP4, 2, ne), 36);
  assert_int_equal(ufp4_gguf_tensor_bytes(UFP4_GGML_BF16, 2, ne), 128);
  ufp4_gguf_free(g);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ufp4_test_gguf.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ufp4_remove_tree(dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mxfp4_blocks_decode_as_ufp4),
      cmocka_unit_test(test_nvfp4_blocks_decode_as_ufp4),
      cmocka_unit_test(test_nibble_order),
      cmocka_unit_test(test_file_bytes),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
