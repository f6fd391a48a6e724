/* Recipe presets, spec-string overrides, canonical formatting and operand formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ufp4/error.h"
#include "ufp4/recipe.h"

#define B(x) (1u << (x))

static void test_presets_match_reference_table(void **state) {
  (void)state;
  ufp4_recipe r;
  /* docs/SOURCES.md, Recipes: paper's E2M1 reference = E2M1, 1x16 FP32, RHT on Wgrad, SR on dY. */
  assert_int_equal(ufp4_recipe_parse("e2m1", &r), 0);
  assert_int_equal(r.precision, UFP4_PREC_FP4);
  assert_int_equal(r.grid, UFP4_GRID_E2M1);
  assert_int_equal(r.scale, UFP4_SCALE_FP32);
  assert_int_equal(r.block, 16);
  assert_int_equal(r.rht_mask, B(UFP4_WGRAD));
  assert_int_equal(r.sr_mask, B(UFP4_OP_DGRAD_DY) | B(UFP4_OP_WGRAD_DY));
  assert_int_equal(r.tile2d, 0);
  /* UFP4 = E1M2, RHT on all three GEMMs, SR on dY only. */
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  assert_int_equal(r.grid, UFP4_GRID_E1M2);
  assert_int_equal(r.rht_mask, B(UFP4_FPROP) | B(UFP4_DGRAD) | B(UFP4_WGRAD));
  assert_int_equal(r.sr_mask, B(UFP4_OP_DGRAD_DY) | B(UFP4_OP_WGRAD_DY));
  /* NVFP4: E4M3 + FP32 tensor scale, 2D weights, fixed signs on Wgrad. */
  assert_int_equal(ufp4_recipe_parse("nvfp4", &r), 0);
  assert_int_equal(r.scale, UFP4_SCALE_NVFP4);
  assert_int_equal(r.tile2d, 1);
  assert_int_equal(r.rht_signs, UFP4_SIGNS_NVIDIA);
  assert_int_equal(r.rht_mask, B(UFP4_WGRAD));
  /* MXFP4: 1x32 E8M0, RHT64 on the backward GEMMs, SR on the backward. */
  assert_int_equal(ufp4_recipe_parse("mxfp4", &r), 0);
  assert_int_equal(r.block, 32);
  assert_true(ufp4_scale_is_e8m0(r.scale));
  assert_int_equal(r.rht_n, 64);
  assert_int_equal(r.rht_mask, B(UFP4_DGRAD) | B(UFP4_WGRAD));
  assert_int_equal(r.sr_mask & (B(UFP4_OP_FPROP_X) | B(UFP4_OP_FPROP_W)), 0);
  assert_int_equal(ufp4_recipe_parse("bf16", &r), 0);
  assert_int_equal(r.precision, UFP4_PREC_BF16);
  assert_int_equal(ufp4_recipe_parse("fp32", &r), 0);
  assert_int_equal(r.precision, UFP4_PREC_FP32);
}

static void test_overrides(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4,rht=wgrad", &r), 0);
  assert_int_equal(r.rht_mask, B(UFP4_WGRAD));
  assert_int_equal(r.grid, UFP4_GRID_E1M2);
  assert_int_equal(ufp4_recipe_parse("e2m1,block=32,scale=e8m0-rceil", &r), 0);
  assert_int_equal(r.block, 32);
  assert_int_equal(r.scale, UFP4_SCALE_E8M0_RCEIL);
  assert_int_equal(ufp4_recipe_parse("e2m1,sr=none,rht=fprop+dgrad", &r), 0);
  assert_int_equal(r.sr_mask, 0);
  assert_int_equal(r.rht_mask, B(UFP4_FPROP) | B(UFP4_DGRAD));
  assert_int_equal(ufp4_recipe_parse("e2m1,sr=fprop.x+wgrad.x,sr_bits=8,keep_last=2", &r), 0);
  assert_int_equal(r.sr_mask, B(UFP4_OP_FPROP_X) | B(UFP4_OP_WGRAD_X));
  assert_int_equal(r.sr_bits, 8);
  assert_int_equal(r.keep_last, 2);
}

static void test_errors_name_the_problem(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("e3m0", &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "e3m0"));
  assert_int_equal(ufp4_recipe_parse("ufp4,block=24", &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "power of two"));
  assert_int_equal(ufp4_recipe_parse("ufp4,colour=blue", &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "colour"));
  assert_int_equal(ufp4_recipe_parse("ufp4,rht=backward", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("ufp4,round=sr", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("ufp4,rht_n=32,rht_signs=nvidia", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("ufp4,block", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("", &r), UFP4_EINVAL);
}

static void test_format_round_trips(void **state) {
  (void)state;
  const char *specs[] = {"fp32", "bf16", "e2m1", "ufp4", "nvfp4", "mxfp4", "ufp4,rht=wgrad,sr=all,grid=int4",
                         "e2m1,block=32,scale=e8m0-rceil,keep_first=1"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    ufp4_recipe a, b;
    char buf[512];
    assert_int_equal(ufp4_recipe_parse(specs[i], &a), 0);
    ufp4_recipe_format(&a, buf, sizeof buf);
    assert_int_equal(ufp4_recipe_parse(buf, &b), 0);
    char buf2[512];
    ufp4_recipe_format(&b, buf2, sizeof buf2);
    assert_string_equal(buf, buf2);
    assert_int_equal(a.precision, b.precision);
    assert_int_equal(a.sr_mask, b.sr_mask);
    assert_int_equal(a.rht_mask, b.rht_mask);
    assert_int_equal(a.scale, b.scale);
    assert_int_equal(a.grid, b.grid);
    assert_int_equal(a.keep_first, b.keep_first);
  }
}

/* Each operand slot belongs to the GEMM of the table in recipe.h. */
static void test_operand_gemm(void **state) {
  (void)state;
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_FPROP_X), UFP4_FPROP);
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_FPROP_W), UFP4_FPROP);
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_DGRAD_DY), UFP4_DGRAD);
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_DGRAD_W), UFP4_DGRAD);
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_WGRAD_DY), UFP4_WGRAD);
  assert_int_equal(ufp4_operand_gemm(UFP4_OP_WGRAD_X), UFP4_WGRAD);
  assert_int_equal(UFP4_N_OPERANDS, UFP4_N_GEMMS * UFP4_OPERANDS_PER_GEMM);
}

static void test_operand_formats(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("nvfp4", &r), 0);
  ufp4_qformat w = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_W);
  ufp4_qformat x = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_X);
  ufp4_qformat dy = ufp4_recipe_operand_format(&r, UFP4_OP_WGRAD_DY);
  assert_int_equal(w.tile2d, 16);
  assert_int_equal(x.tile2d, 0);
  assert_int_equal(x.rht, 0);
  assert_int_equal(dy.rht, 16);
  assert_int_equal(dy.round, UFP4_ROUND_SR);
  assert_int_equal(x.round, UFP4_ROUND_RNE);
}

/* ufp4_recipe_rht_misfit against its rule restated: over every preset, GEMM mask, and each axis a
 * multiple of the RHT or not, the first GEMM (in Fprop, Dgrad, Wgrad order) in the mask that runs
 * in 4 bits under an RHT whose axis (in, out, tokens) it does not divide. */
static void test_rht_misfit(void **state) {
  (void)state;
  for (int p = 0; ufp4_recipe_presets[p]; p++) {
    for (int variant = 0; variant < 2; variant++) {
      ufp4_recipe r;
      assert_int_equal(ufp4_recipe_parse(ufp4_recipe_presets[p], &r), 0);
      if (variant) assert_int_equal(ufp4_recipe_apply("dgrad=bf16", &r), 0);
      for (unsigned mask = 0; mask < 8; mask++)
        for (int bits = 0; bits < 8; bits++) {
          const size_t n = r.rht_n > 0 ? (size_t)r.rht_n : 16;
          const size_t in = bits & 1 ? n * 3 : n * 3 + 1, out = bits & 2 ? n * 2 : n * 2 + 2,
                       tokens = bits & 4 ? n * 5 : n * 5 - 1;
          int want = -1;
          size_t want_axis = 0;
          for (int g = 0; g < UFP4_N_GEMMS && want < 0; g++) {
            const size_t axis = g == UFP4_FPROP ? in : g == UFP4_DGRAD ? out : tokens;
            if ((mask >> g & 1) && r.rht_n > 0 && (r.rht_mask >> g & 1) &&
                ufp4_recipe_gemm_precision(&r, (ufp4_gemm_kind)g) == UFP4_PREC_FP4 && axis % (size_t)r.rht_n)
              want = g, want_axis = axis;
          }
          size_t axis = 0;
          const int got = ufp4_recipe_rht_misfit(&r, mask, tokens, in, out, &axis);
          if (got != want || (got >= 0 && axis != want_axis))
            fail_msg("%s%s mask %u bits %d: got %d (%zu), want %d (%zu)", ufp4_recipe_presets[p],
                     variant ? ",dgrad=bf16" : "", mask, bits, got, axis, want, want_axis);
        }
    }
  }
  ufp4_recipe u;
  size_t axis = 0;
  assert_int_equal(ufp4_recipe_parse("ufp4", &u), 0);
  assert_int_equal(ufp4_recipe_rht_misfit(&u, 7, 20, 32, 48, &axis), UFP4_WGRAD); /* 20 tokens */
  assert_int_equal(axis, 20);
  assert_int_equal(ufp4_recipe_rht_misfit(&u, 7, 32, 24, 48, &axis), UFP4_FPROP);
  assert_int_equal(axis, 24);
  assert_string_equal(ufp4_recipe_rht_axis_name(UFP4_DGRAD), "its outputs");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets_match_reference_table), cmocka_unit_test(test_overrides),
      cmocka_unit_test(test_errors_name_the_problem), cmocka_unit_test(test_format_round_trips),
      cmocka_unit_test(test_operand_formats), cmocka_unit_test(test_operand_gemm),
      cmocka_unit_test(test_rht_misfit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
