/* What `ufp4 bench train` relies on: the model's phase timers change no bit of a training step,
 * they measure something only when enabled, and ufp4_model_activation_bytes counts exactly the
 * activation buffers of the architecture. Also that the split linear backward (dgrad, wgrad) is
 * the backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ufp4/linear.h"
#include "ufp4/model.h"
#include "ufp4/philox.h"
#include "ufp4/recipe.h"
#include "ufp4/rht.h"

enum { B = 2, T = 8 };

static ufp4_model_config tiny(void) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.seq_len = T;
  c.vocab = 11;
  c.tie_embeddings = 0;
  return c;
}

/* One step under `spec` with timing on or off: loss and gradients. */
static double step(const char *spec, int timing, float *grads, size_t *n, ufp4_model_times *times) {
  ufp4_model_config c = tiny();
  c.n_kv_heads = 4; /* 4-bit operands need every reduction dimension a multiple of 16 */
  c.ffn_dim = 32;
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 5);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(spec, &r), 0);
  ufp4_model_set_recipe(m, &r, 5);
  ufp4_model_set_step(m, 2, 0);
  ufp4_model_set_timing(m, timing);
  int32_t tok[B * T], tgt[B * T];
  for (int i = 0; i < B * T; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(3, 1, (uint64_t)i) % 11u);
    tgt[i] = (int32_t)(ufp4_philox_u32(3, 2, (uint64_t)i) % 11u);
  }
  double loss = 0;
  ufp4_model_zero_grads(m);
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, &loss), 0);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  *n = ufp4_model_num_params(m);
  memcpy(grads, ufp4_model_grads(m), *n * sizeof(float));
  ufp4_model_phase_times(m, times);
  ufp4_model_free(m);
  return loss;
}

static void test_timing_changes_nothing(void **state) {
  (void)state;
  const char *specs[] = {"fp32", "bf16", "ufp4", "nvfp4"};
  for (int s = 0; s < 4; s++) {
    float *g0 = malloc(100000 * sizeof(float)), *g1 = malloc(100000 * sizeof(float));
    size_t n0, n1;
    ufp4_model_times t0, t1;
    double l0 = step(specs[s], 0, g0, &n0, &t0), l1 = step(specs[s], 1, g1, &n1, &t1);
    assert_int_equal(n0, n1);
    assert_memory_equal(&l0, &l1, sizeof l0);
    assert_memory_equal(g0, g1, n0 * sizeof(float));
    /* Off: nothing accumulated. On: every phase ran, and the parts sit inside the whole. */
    assert_true(t0.forward == 0 && t0.backward == 0 && t0.linear_gemm == 0 && t0.attention == 0 && t0.head == 0);
    assert_true(t1.forward > 0 && t1.backward > 0 && t1.linear_gemm > 0 && t1.attention > 0 && t1.head > 0);
    assert_true(t1.linear_prepare + t1.linear_gemm + t1.attention + t1.head <= t1.forward + t1.backward);
    if (s == 0) assert_true(t1.linear_prepare == 0); /* fp32 prepares nothing */
    else assert_true(t1.linear_prepare > 0);
    free(g0);
    free(g1);
  }
}

/* tiny(): L=2, C=16, H=4, KVH=2 (D=4, QD=16, KV=8), F=24, V=11, T=8, B=2 -> BT=16.
 *   residual stream (L+1) BT C                  = 3 * 256                      =  768
 *   per layer: ln1 256, rstd1 16, q 256, k 128, v 128, att B H T T 512, ao 256,
 *              mid 256, ln2 256, rstd2 16, gate/up/act 3 * 384 = 1152    = 3232, x2 = 6464
 *   final norm 256, rstd 16, logits BT V 176, losses 16, lse 16                 =  480
 *   7712 floats = 30848 bytes. */
static void test_activation_bytes(void **state) {
  (void)state;
  ufp4_model_config c = tiny();
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  assert_int_equal(ufp4_model_activation_bytes(m), 30848);
  assert_true(ufp4_model_scratch_bytes(m) > 0);
  ufp4_model_free(m);
}

enum { N = 32, IN = 48, OUT = 16 };

static void test_split_backward(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  float signs[UFP4_RHT_MAX];
  ufp4_rht_signs_random(signs, r.rht_n, 9);
  ufp4_linear_ctx ctx = {.recipe = &r, .stream = {.seed = 9, .proj = 4}, .rht_signs = signs};
  float *X = malloc(N * IN * sizeof(float)), *W = malloc(OUT * IN * sizeof(float)), *dY = malloc(N * OUT * sizeof(float));
  float *dX0 = calloc(N * IN, sizeof(float)), *dX1 = calloc(N * IN, sizeof(float));
  float *dW0 = calloc(OUT * IN, sizeof(float)), *dW1 = calloc(OUT * IN, sizeof(float));
  float *scratch = malloc(ufp4_linear_scratch_floats(N, IN, OUT) * sizeof(float));
  for (int i = 0; i < N * IN; i++) X[i] = ufp4_philox_normal(1, 1, (uint64_t)i);
  for (int i = 0; i < OUT * IN; i++) W[i] = ufp4_philox_normal(1, 2, (uint64_t)i);
  for (int i = 0; i < N * OUT; i++) dY[i] = ufp4_philox_normal(1, 3, (uint64_t)i);
  assert_int_equal(ufp4_linear_backward(&ctx, dY, X, W, dX0, dW0, N, IN, OUT, scratch), 0);
  assert_int_equal(ufp4_linear_dgrad(&ctx, dY, W, dX1, N, IN, OUT, scratch), 0);
  assert_int_equal(ufp4_linear_wgrad(&ctx, dY, X, dW1, N, IN, OUT, scratch), 0);
  assert_memory_equal(dX0, dX1, N * IN * sizeof(float));
  assert_memory_equal(dW0, dW1, OUT * IN * sizeof(float));
  /* Timed, the same bits again, and both parts of the layer were seen. */
  ufp4_linear_times lt = {0, 0};
  ctx.times = &lt;
  memset(dW1, 0, OUT * IN * sizeof(float));
  assert_int_equal(ufp4_linear_wgrad(&ctx, dY, X, dW1, N, IN, OUT, scratch), 0);
  assert_memory_equal(dW0, dW1, OUT * IN * sizeof(float));
  assert_true(lt.prepare > 0 && lt.gemm > 0);
  free(X);
  free(W);
  free(dY);
  free(dX0);
  free(dX1);
  free(dW0);
  free(dW1);
  free(scratch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timing_changes_nothing),
      cmocka_unit_test(test_activation_bytes),
      cmocka_unit_test(test_split_backward),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
