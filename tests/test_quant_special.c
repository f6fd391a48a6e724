/* Special-value policies of quant.h: all-zero blocks, denormals and scale underflow, huge values,
 * NaN/Inf blocks, and signed zeros, for every scale kind. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "ufp4/quant.h"

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static ufp4_qformat fmt(ufp4_grid_id g, ufp4_scale_kind s, int block) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = g;
  f.scale = s;
  f.block = block;
  return f;
}

static void quantize_ok(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                        ufp4_qtensor *q, float *y) {
  assert_int_equal(ufp4_quantize(f, x, rows, cols, q), 0);
  ufp4_dequantize(q, y);
  /* fake_quant is the same map */
  float y2[256];
  assert_true(rows * cols <= 256);
  assert_int_equal(ufp4_fake_quant(f, x, y2, rows, cols), 0);
  for (size_t i = 0; i < rows * cols; i++)
    if (f2u(y[i]) != f2u(y2[i]) && !(isnan(y[i]) && isnan(y2[i])))
      fail_msg("%s: dequantize %g != fake_quant %g at %zu", ufp4_scale_name(f->scale),
               (double)y[i], (double)y2[i], i);
}

static void test_all_zero_block(void **state) {
  (void)state;
  /* Block 0 holds only +0 and -0; block 1 is ordinary. Every code of block 0 must be +0 (-0
   * included), the output exactly +0, and the stored scale the kind's zero: FP32 0, NVFP4 d = 0,
   * E8M0 the rule's code for amax 0, which is 0 (2^-127) for all four rules (minifloat.h). */
  float x[32];
  for (int i = 0; i < 16; i++) x[i] = (i & 1) ? -0.0f : 0.0f;
  for (int i = 16; i < 32; i++) x[i] = (float)(i - 20) * 0.5f;
  for (int k = 0; k < UFP4_SCALE_COUNT; k++) {
    ufp4_qformat f = fmt(UFP4_GRID_E2M1, (ufp4_scale_kind)k, 16);
    ufp4_qtensor q;
    float y[32];
    quantize_ok(&f, x, 1, 32, &q, y);
    for (int i = 0; i < 16; i++) {
      assert_int_equal(q.codes[i], 0);
      assert_int_equal(f2u(y[i]), 0);
    }
    if (k == UFP4_SCALE_FP32) assert_true(q.scales[0] == 0.0f);
    else if (k == UFP4_SCALE_NVFP4) {
      assert_int_equal(q.scale_bits[0], 0);
      assert_true(q.scales[0] == 0.0f);
    } else {
      assert_int_equal(q.scale_bits[0], 0);
      assert_true(q.scales[0] == 0x1p-127f);
    }
    /* the ordinary block (amax 5.5) is unaffected: its max lands on 4..6 times its scale */
    assert_true(y[31] > 4.0f);
    ufp4_qtensor_free(&q);
  }
}

static void test_denormals(void **state) {
  (void)state;
  /* No flush to zero. x = k * 2^-140 (all subnormal: 2^-140 * 6 < 2^-126) with amax 6*2^-140:
   * s = amax/6 = 2^-140 exactly, t = k exactly, so every E2M1-representable k comes back
   * bit-exact: y == x. */
  const float k[8] = {6, 3, -1, 0.5f, 4, -1.5f, 2, 0};
  float x[8], y[8];
  for (int i = 0; i < 8; i++) x[i] = ldexpf(k[i], -140);
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 8);
  ufp4_qtensor q;
  quantize_ok(&f, x, 1, 8, &q, y);
  assert_true(q.scales[0] == 0x1p-140f);
  for (int i = 0; i < 8; i++) assert_int_equal(f2u(y[i]), f2u(x[i]));
  assert_true(fpclassify(y[1]) == FP_SUBNORMAL);
  ufp4_qtensor_free(&q);

  /* Scale underflow: amax = 2^-148, s = 2^-148/6 = 0.33 * 2^-149 rounds to 0 -> stored all-zero
   * (scale 0, codes +0, output +0). */
  float u[4] = {0x1p-149f, -0x1p-149f, 0x1p-148f, 0.0f}, yu[4];
  quantize_ok(&f, u, 1, 4, &q, yu);
  assert_true(q.scales[0] == 0.0f);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(q.codes[i], 0);
    assert_int_equal(f2u(yu[i]), 0);
  }
  ufp4_qtensor_free(&q);

  /* NVFP4 on an all-subnormal tensor: S_enc = 2688 / (6*2^-140) overflows -> 1, then
   * d = E4M3(amax/6) = 0 -> the block is stored as all-zero. */
  f.scale = UFP4_SCALE_NVFP4;
  quantize_ok(&f, x, 1, 8, &q, y);
  assert_true(q.tensor_scale == 1.0f);
  assert_int_equal(q.scale_bits[0], 0);
  for (int i = 0; i < 8; i++) assert_int_equal(f2u(y[i]), 0);
  ufp4_qtensor_free(&q);

  /* E8M0: the exponent clamps at -127, and 2^-140 * 2^127 = 2^-13 rounds to 0: finite zeros. */
  f.scale = UFP4_SCALE_E8M0_CEIL;
  quantize_ok(&f, x, 1, 8, &q, y);
  assert_int_equal(q.scale_bits[0], 0);
  for (int i = 0; i < 8; i++) assert_true(y[i] == 0.0f);
  ufp4_qtensor_free(&q);
}

static void test_huge_values(void **state) {
  (void)state;
  /* FLT_MAX and its neighbours never produce Inf, for any grid, scale and rounding. For FP32
   * s = FLT_MAX/g_max and g_max * s == FLT_MAX for every grid (checked in numpy float32). E8M0
   * CEIL/EVEN/RCEIL reach 2^126 with t ~ 4, whose 2^128 saturates to FLT_MAX. */
  const float x[16] = {FLT_MAX, -FLT_MAX, 1, FLT_MAX / 3, 3e38f, -1e38f, 2e37f, -5e30f,
                       0,       1e-30f,   7, -FLT_MAX, 3.3e38f, 1e38f, -2.9e38f, 0.5f};
  for (int g = 0; g < UFP4_GRID_COUNT; g++)
    for (int k = 0; k < UFP4_SCALE_COUNT; k++)
      for (int m = 0; m < UFP4_ROUND_COUNT; m++) {
        ufp4_qformat f = fmt((ufp4_grid_id)g, (ufp4_scale_kind)k, 16);
        f.round = (ufp4_round_mode)m;
        ufp4_qtensor q;
        float y[16];
        quantize_ok(&f, x, 1, 16, &q, y);
        for (int i = 0; i < 16; i++)
          if (!isfinite(y[i]))
            fail_msg("%s/%s/%d: y[%d] = %g", ufp4_grid_get(f.grid)->name,
                     ufp4_scale_name(f.scale), m, i, (double)y[i]);
        assert_true(y[0] > 1e37f);
        assert_true(y[1] < -1e37f);
        if (k == UFP4_SCALE_FP32) {
          assert_true(q.scales[0] == FLT_MAX / ufp4_grid_get(f.grid)->g_max);
          assert_true(y[0] == FLT_MAX); /* t = g_max exactly, g_max * s = FLT_MAX */
        }
        ufp4_qtensor_free(&q);
      }
}

static void test_nan_inf_blocks(void **state) {
  (void)state;
  /* Three blocks of 16; block 1 holds one NaN (or +Inf, or -Inf) among small finite values.
   * Block 1: NaN scale (FP32 NaN, E4M3 0x7F, E8M0 0xFF), codes +0, output NaN everywhere.
   * Blocks 0 and 2 must equal the result for the same tensor with block 1 zeroed: the NaN does
   * not leak. Block 1's finite values (<= 1.5) stay below amax_tensor = 12, so NVFP4's S_enc is
   * also the same. */
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  float x[48], clean[48];
  for (int i = 0; i < 48; i++) clean[i] = (float)((i * 7) % 13 - 6) * 0.25f;
  clean[3] = 12;
  clean[40] = -9;
  for (int b = 0; b < 3; b++)
    for (int k = 0; k < UFP4_SCALE_COUNT; k++) {
      memcpy(x, clean, sizeof x);
      x[21] = bad[b];
      float z[48];
      memcpy(z, clean, sizeof z);
      for (int i = 16; i < 32; i++) z[i] = 0;
      ufp4_qformat f = fmt(UFP4_GRID_E2M1, (ufp4_scale_kind)k, 16);
      ufp4_qtensor q;
      float y[48], yz[48];
      quantize_ok(&f, x, 1, 48, &q, y);
      assert_int_equal(ufp4_fake_quant(&f, z, yz, 1, 48), 0);
      assert_true(isnan(q.scales[1]));
      if (k == UFP4_SCALE_NVFP4) assert_int_equal(q.scale_bits[1], 0x7F);
      else if (k != UFP4_SCALE_FP32) assert_int_equal(q.scale_bits[1], 0xFF);
      for (int i = 16; i < 32; i++) {
        assert_int_equal(q.codes[i], 0);
        assert_true(isnan(y[i]));
      }
      for (int i = 0; i < 48; i++)
        if ((i < 16 || i >= 32) && f2u(y[i]) != f2u(yz[i]))
          fail_msg("%s bad=%d: block leak at %d: %g vs %g", ufp4_scale_name(f.scale), b, i,
                   (double)y[i], (double)yz[i]);
      if (k == UFP4_SCALE_NVFP4) assert_true(q.tensor_scale == 2688.0f / 12.0f);
      ufp4_qtensor_free(&q);
    }

  /* NVFP4 amax_tensor over finite values only: Inf next to 3 in block 0, 100 in block 1.
   * S_enc = 2688/100 = 26.88; block 1: d = 100*26.88/6 = 448, scale 448/26.88 = 16.67, 100 ->
   * t = 6 -> 6*scale. A non-finite amax would have given S_enc = 0 or 1 instead. */
  float v[32] = {0};
  v[0] = INFINITY, v[1] = 3, v[16] = 100, v[17] = -50;
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, 16);
  ufp4_qtensor q;
  float y[32];
  quantize_ok(&f, v, 1, 32, &q, y);
  const float s_enc = 2688.0f / 100.0f;
  assert_true(q.tensor_scale == s_enc);
  assert_int_equal(q.scale_bits[1], 0x7E); /* 448 */
  assert_true(q.scales[1] == 448.0f / s_enc);
  assert_true(y[16] == 6.0f * (448.0f / s_enc));
  assert_true(isnan(y[0]) && isnan(y[1]));
  ufp4_qtensor_free(&q);

  /* Only NaN and zeros: amax_tensor = 0 -> S_enc = 1. */
  float w[16] = {0};
  w[5] = NAN;
  quantize_ok(&f, w, 1, 16, &q, y);
  assert_true(q.tensor_scale == 1.0f);
  assert_int_equal(q.scale_bits[0], 0x7F);
  ufp4_qtensor_free(&q);
}

static void test_nvfp4_tiny_tensor(void **state) {
  (void)state;
  /* amax_tensor = 1e-35: S_enc = 2688/1e-35 = 2.688e38 (finite). Block 1 (amax 1e-38):
   * d = E4M3(1e-38 * 2.688e38 / 6 = 0.448) = 0.4375, scale = 0.4375/2.688e38 = 1.63e-39, a
   * subnormal whose reciprocal overflows. The encoder then divides by the scale (block_quant.c),
   * t = x / 1.63e-39: 1e-38 -> 6.14 -> 6; 5e-39 -> 3.07 -> 3; 2e-39 -> 1.23 -> 1;
   * -1e-39 -> -0.61 -> -0.5. Multiplying by Inf would have saturated all four to 6. */
  float x[32] = {0}, y[32];
  x[0] = 1e-35f;
  x[16] = 1e-38f, x[17] = 5e-39f, x[18] = 2e-39f, x[19] = -1e-39f;
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_NVFP4, 16);
  ufp4_qtensor q;
  quantize_ok(&f, x, 1, 32, &q, y);
  assert_true(q.tensor_scale == 2688.0f / 1e-35f);
  assert_true(ufp4_e4m3_to_f32(q.scale_bits[1]) == 0.4375f);
  assert_int_equal(q.codes[16], 0x7);
  assert_int_equal(q.codes[17], 0x5);
  assert_int_equal(q.codes[18], 0x2);
  assert_int_equal(q.codes[19], 0x9);
  for (int i = 0; i < 32; i++) assert_true(isfinite(y[i]));
  ufp4_qtensor_free(&q);
}

static void test_signed_zero(void **state) {
  (void)state;
  /* In a block with amax 6 (s = 1): -0 -> t = -0 -> code 0x8 (sign-magnitude -0) -> -0;
   * -0.1 -> rounds to magnitude 0 with its sign -> -0; +0 -> 0x0 -> +0. INT4 has no -0 (0x8 is
   * -8), so its negative zeros come back as +0 with code 0. */
  const float x[4] = {-0.0f, 6, -0.1f, 0.0f};
  float y[4];
  ufp4_qtensor q;
  ufp4_qformat f = fmt(UFP4_GRID_E2M1, UFP4_SCALE_FP32, 4);
  quantize_ok(&f, x, 1, 4, &q, y);
  assert_int_equal(q.codes[0], 0x8);
  assert_int_equal(q.codes[2], 0x8);
  assert_int_equal(q.codes[3], 0x0);
  assert_int_equal(f2u(y[0]), 0x80000000u);
  assert_int_equal(f2u(y[2]), 0x80000000u);
  assert_int_equal(f2u(y[3]), 0);
  ufp4_qtensor_free(&q);

  f.grid = UFP4_GRID_INT4;
  quantize_ok(&f, x, 1, 4, &q, y);
  assert_int_equal(q.codes[0], 0);
  assert_int_equal(q.codes[2], 0);
  assert_int_equal(f2u(y[0]), 0);
  assert_int_equal(f2u(y[2]), 0);
  ufp4_qtensor_free(&q);

  /* A block of only -0 is an all-zero block: +0 codes, +0 output. */
  const float nz[4] = {-0.0f, -0.0f, -0.0f, -0.0f};
  f.grid = UFP4_GRID_E2M1;
  quantize_ok(&f, nz, 1, 4, &q, y);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(q.codes[i], 0);
    assert_int_equal(f2u(y[i]), 0);
  }
  ufp4_qtensor_free(&q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_zero_block), cmocka_unit_test(test_denormals),
      cmocka_unit_test(test_huge_values),    cmocka_unit_test(test_nan_inf_blocks),
      cmocka_unit_test(test_nvfp4_tiny_tensor),
      cmocka_unit_test(test_signed_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
