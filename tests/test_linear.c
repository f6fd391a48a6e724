/* The linear layer's three GEMMs under a recipe, against references built in the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/gemm.h"
#include "ufp4/linear.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

enum { N = 64, IN = 96, OUT = 64 };

typedef struct {
  float X[N * IN], W[OUT * IN], dY[N * OUT];
} operands;

static void fill(float *x, size_t n, uint64_t stream) {
  for (size_t i = 0; i < n; i++) x[i] = ufp4_philox_normal(7, stream, i);
}

static operands *make_operands(void) {
  operands *o = malloc(sizeof *o);
  fill(o->X, N * IN, 1);
  fill(o->W, OUT * IN, 2);
  fill(o->dY, N * OUT, 3);
  return o;
}

static ufp4_linear_ctx ctx_for(const ufp4_recipe *r, const float *signs) {
  ufp4_linear_ctx c = {.recipe = r, .stream = {.seed = 11, .proj = 5}, .rht_signs = signs};
  return c;
}

/* With the fp32 recipe, the recipe path (operand copies, explicit transposes, C = A B^T) must equal
 * the plain fp32 GEMMs in their natural orientations bit for bit. */
static void test_fp32_recipe_is_plain_fp32(void **state) {
  (void)state;
  operands *o = make_operands();
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("fp32", &r), 0);
  ufp4_linear_ctx ctx = ctx_for(&r, NULL);
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  float Y[N * OUT], Yref[N * OUT], dX[N * IN] = {0}, dXref[N * IN] = {0}, dW[OUT * IN] = {0},
                                    dWref[OUT * IN] = {0};
  assert_int_equal(ufp4_linear_forward(&ctx, o->X, o->W, Y, N, IN, OUT, scratch), 0);
  assert_int_equal(ufp4_linear_backward(&ctx, o->dY, o->X, o->W, dX, dW, N, IN, OUT, scratch), 0);
  ufp4_sgemm_abt(o->X, o->W, Yref, N, OUT, IN, 0);
  ufp4_sgemm_ab(o->dY, o->W, dXref, N, IN, OUT, 1);
  ufp4_sgemm_atb(o->dY, o->X, dWref, OUT, IN, N, 1);
  assert_memory_equal(Y, Yref, sizeof Y);
  assert_memory_equal(dX, dXref, sizeof dX);
  assert_memory_equal(dW, dWref, sizeof dW);
  free(scratch);
  free(o);
}

/* Plain double-precision C = A B^T over explicitly transposed, explicitly quantized operands. */
static void ref_abt(const float *A, const float *B, double *C, size_t m, size_t k2, size_t k) {
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < k2; j++) {
      double s = 0;
      for (size_t l = 0; l < k; l++) s += (double)A[i * k + l] * B[j * k + l];
      C[i * k2 + j] = s;
    }
}

static void ref_transpose(const float *src, float *dst, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

static void quant_operand(const ufp4_recipe *r, const ufp4_linear_ctx *ctx, ufp4_operand op, float *x,
                          size_t rows, size_t cols) {
  ufp4_qformat f = ufp4_recipe_operand_format(r, op);
  ufp4_stream_id id = ctx->stream;
  id.operand = op;
  f.seed = id.seed;
  f.stream = ufp4_stream_value(&id);
  f.rht_signs = ctx->rht_signs;
  float pre = ufp4_round_is_stochastic(f.round) ? r->sr_prescale : 1.0f;
  for (size_t i = 0; i < rows * cols; i++) x[i] *= pre;
  assert_int_equal(ufp4_fake_quant(&f, x, x, rows, cols), 0);
  for (size_t i = 0; i < rows * cols; i++) x[i] /= pre;
}

static void assert_close(const float *got, const double *want, size_t n, double rel) {
  double scale = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  for (size_t i = 0; i < n; i++) {
    if (fabs(got[i] - want[i]) > rel * scale) fail_msg("element %zu: got %.9g want %.9g", i, got[i], want[i]);
  }
}

/* Each operand must be quantized along its own GEMM's reduction dimension, with the GEMM's RHT. */
static void check_recipe_against_reference(const char *spec) {
  operands *o = make_operands();
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
  float signs[256];
  ufp4_rht_signs_random(signs, r.rht_n, 3);
  ufp4_linear_ctx ctx = ctx_for(&r, signs);
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  static float Y[N * OUT], dX[N * IN], dW[OUT * IN];
  memset(dX, 0, sizeof dX);
  memset(dW, 0, sizeof dW);
  assert_int_equal(ufp4_linear_forward(&ctx, o->X, o->W, Y, N, IN, OUT, scratch), 0);
  assert_int_equal(ufp4_linear_backward(&ctx, o->dY, o->X, o->W, dX, dW, N, IN, OUT, scratch), 0);

  static float a[N * IN > OUT * N ? N * IN : OUT * N], b[OUT * IN > IN * N ? OUT * IN : IN * N];
  static double C[N * IN > OUT * IN ? N * IN : OUT * IN];
  /* Fprop: X along in, W along in. */
  memcpy(a, o->X, sizeof o->X);
  memcpy(b, o->W, sizeof o->W);
  quant_operand(&r, &ctx, UFP4_OP_FPROP_X, a, N, IN);
  quant_operand(&r, &ctx, UFP4_OP_FPROP_W, b, OUT, IN);
  ref_abt(a, b, C, N, OUT, IN);
  assert_close(Y, C, N * OUT, 1e-5);
  /* Dgrad: dY along out, W^T along out. */
  memcpy(a, o->dY, sizeof o->dY);
  ref_transpose(o->W, b, OUT, IN);
  quant_operand(&r, &ctx, UFP4_OP_DGRAD_DY, a, N, OUT);
  quant_operand(&r, &ctx, UFP4_OP_DGRAD_W, b, IN, OUT);
  ref_abt(a, b, C, N, IN, OUT);
  assert_close(dX, C, N * IN, 1e-5);
  /* Wgrad: dY^T along tokens, X^T along tokens. */
  ref_transpose(o->dY, a, N, OUT);
  ref_transpose(o->X, b, N, IN);
  quant_operand(&r, &ctx, UFP4_OP_WGRAD_DY, a, OUT, N);
  quant_operand(&r, &ctx, UFP4_OP_WGRAD_X, b, IN, N);
  ref_abt(a, b, C, OUT, IN, N);
  assert_close(dW, C, OUT * IN, 1e-5);
  free(scratch);
  free(o);
}

static void test_e2m1_against_reference(void **s) { (void)s; check_recipe_against_reference("e2m1"); }
static void test_ufp4_against_reference(void **s) { (void)s; check_recipe_against_reference("ufp4"); }
static void test_nvfp4_against_reference(void **s) { (void)s; check_recipe_against_reference("nvfp4,rht_signs=random"); }
static void test_mxfp4_against_reference(void **s) { (void)s; check_recipe_against_reference("mxfp4,rht_n=32"); }

/* 4-bit operands move the product far more than fp32 rounding and bf16 operands sit in between:
 * a no-op quantizer, or bf16 that forgot to round, fails here. */
static void test_error_magnitudes_by_precision(void **state) {
  (void)state;
  operands *o = make_operands();
  ufp4_recipe fp32, q, rot;
  assert_int_equal(ufp4_recipe_parse("fp32", &fp32), 0);
  assert_int_equal(ufp4_recipe_parse("ufp4", &q), 0);
  float signs[16];
  ufp4_rht_signs_random(signs, 16, 9);
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  static float Y0[N * OUT], Y1[N * OUT];
  ufp4_linear_ctx c0 = ctx_for(&fp32, signs), c1 = ctx_for(&q, signs);
  assert_int_equal(ufp4_linear_forward(&c0, o->X, o->W, Y0, N, IN, OUT, scratch), 0);
  assert_int_equal(ufp4_linear_forward(&c1, o->X, o->W, Y1, N, IN, OUT, scratch), 0);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < N * OUT; i++) {
    diff += (Y1[i] - Y0[i]) * (double)(Y1[i] - Y0[i]);
    norm += Y0[i] * (double)Y0[i];
  }
  assert_true(diff / norm > 1e-4); /* 4-bit noise is far above fp32 rounding */
  assert_true(diff / norm < 0.1);
  /* bf16 operands: the relative error sits near bf16's 2^-9 unit roundoff, well below 4-bit. */
  assert_int_equal(ufp4_recipe_parse("bf16", &rot), 0);
  ufp4_linear_ctx c2 = ctx_for(&rot, signs);
  assert_int_equal(ufp4_linear_forward(&c2, o->X, o->W, Y1, N, IN, OUT, scratch), 0);
  diff = 0;
  for (size_t i = 0; i < N * OUT; i++) diff += (Y1[i] - Y0[i]) * (double)(Y1[i] - Y0[i]);
  assert_true(diff / norm > 1e-8);
  assert_true(diff / norm < 1e-4);
  free(scratch);
  free(o);
}

static void test_threads_bit_identical(void **state) {
  (void)state;
  operands *o = make_operands();
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4,sr=all", &r), 0);
  float signs[16];
  ufp4_rht_signs_random(signs, 16, 1);
  ufp4_linear_ctx ctx = ctx_for(&r, signs);
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  static float Y[2][N * OUT], dX[2][N * IN], dW[2][OUT * IN];
  memset(dX, 0, sizeof dX);
  memset(dW, 0, sizeof dW);
  for (int t = 0; t < 2; t++) {
    omp_set_num_threads(t + 1);
    assert_int_equal(ufp4_linear_forward(&ctx, o->X, o->W, Y[t], N, IN, OUT, scratch), 0);
    assert_int_equal(ufp4_linear_backward(&ctx, o->dY, o->X, o->W, dX[t], dW[t], N, IN, OUT, scratch), 0);
  }
  assert_memory_equal(Y[0], Y[1], sizeof Y[0]);
  assert_memory_equal(dX[0], dX[1], sizeof dX[0]);
  assert_memory_equal(dW[0], dW[1], sizeof dW[0]);
  free(scratch);
  free(o);
}

/* The shared-input calls give the bits of one call per projection, whether X is prepared once (RNE
 * operands) or per projection (X under SR, where each projection's own stream draws its bits: a
 * shared X would be caught here because the three projections have different streams). */
static void check_shared(const char *spec) {
  enum { P = 3 };
  const size_t outs[P] = {OUT, OUT / 2, OUT / 4};
  operands *o = make_operands();
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
  float signs[16];
  ufp4_rht_signs_random(signs, 16, 3);
  ufp4_linear_ctx ctx[P];
  for (int i = 0; i < P; i++) {
    ctx[i] = ctx_for(&r, signs);
    ctx[i].stream.proj = (uint32_t)i;
  }
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  static float Y[2][P][N * OUT], dX[2][N * IN], dW[2][P][OUT * IN];
  memset(Y, 0, sizeof Y);
  memset(dX, 0, sizeof dX);
  memset(dW, 0, sizeof dW);
  for (int i = 0; i < P; i++) {
    assert_int_equal(ufp4_linear_forward(&ctx[i], o->X, o->W, Y[0][i], N, IN, outs[i], scratch), 0);
    assert_int_equal(ufp4_linear_backward(&ctx[i], o->dY, o->X, o->W, dX[0], dW[0][i], N, IN, outs[i], scratch), 0);
  }
  /* W and dY of projection i: the first outs[i] rows of W; dY with row stride outs[i]. */
  const float *w[P] = {o->W, o->W, o->W}, *dy[P] = {o->dY, o->dY, o->dY};
  float *y[P] = {Y[1][0], Y[1][1], Y[1][2]}, *dw[P] = {dW[1][0], dW[1][1], dW[1][2]};
  assert_int_equal(ufp4_linear_forward_shared(ctx, P, o->X, w, y, N, IN, outs, scratch), 0);
  assert_int_equal(ufp4_linear_backward_shared(ctx, P, dy, o->X, w, dX[1], dw, N, IN, outs, scratch), 0);
  for (int i = 0; i < P; i++) {
    assert_memory_equal(Y[0][i], Y[1][i], N * outs[i] * sizeof(float));
    assert_memory_equal(dW[0][i], dW[1][i], outs[i] * IN * sizeof(float));
  }
  assert_memory_equal(dX[0], dX[1], sizeof dX[0]);
  free(scratch);
  free(o);
}

static void test_shared_input_fp32(void **s) { (void)s; check_shared("fp32"); }
static void test_shared_input_bf16(void **s) { (void)s; check_shared("bf16"); }
static void test_shared_input_e2m1(void **s) { (void)s; check_shared("e2m1"); }
static void test_shared_input_ufp4(void **s) { (void)s; check_shared("ufp4"); }
static void test_shared_input_nvfp4(void **s) { (void)s; check_shared("nvfp4"); }
static void test_shared_input_sr_all(void **s) { (void)s; check_shared("ufp4,sr=all"); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_recipe_is_plain_fp32),
      cmocka_unit_test(test_e2m1_against_reference),
      cmocka_unit_test(test_ufp4_against_reference),
      cmocka_unit_test(test_nvfp4_against_reference),
      cmocka_unit_test(test_mxfp4_against_reference),
      cmocka_unit_test(test_error_magnitudes_by_precision),
      cmocka_unit_test(test_threads_bit_identical),
      cmocka_unit_test(test_shared_input_fp32),
      cmocka_unit_test(test_shared_input_bf16),
      cmocka_unit_test(test_shared_input_e2m1),
      cmocka_unit_test(test_shared_input_ufp4),
      cmocka_unit_test(test_shared_input_nvfp4),
      cmocka_unit_test(test_shared_input_sr_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
