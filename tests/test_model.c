/* Whole-model checks: finite-difference gradients at a tiny size, thread independence, and the
 * HF tensor table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/model.h"
#include "ufp4/philox.h"

enum { B = 2, T = 8 };

static ufp4_model_config tiny(int kv_heads, int tied) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 16;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.ffn_dim = 24;
  c.seq_len = T;
  c.vocab = 11;
  c.init_std = 0.3f; /* large weights give gradients well above the finite-difference noise */
  c.tie_embeddings = tied;
  return c;
}

static void batch(int32_t *tok, int32_t *tgt, int V, uint64_t seed) {
  for (int i = 0; i < B * T; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(seed, 1, (uint64_t)i) % (uint32_t)V);
    tgt[i] = (int32_t)(ufp4_philox_u32(seed, 2, (uint64_t)i) % (uint32_t)V);
  }
  tgt[3] = -1; /* an ignored position must contribute nothing */
}

static double loss_at(ufp4_model *m, const int32_t *tok, const int32_t *tgt) {
  double loss = 0;
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, &loss), 0);
  return loss;
}

/* Central differences on parameters from every tensor against the analytic gradient. */
static void gradcheck(int kv_heads, int tied) {
  ufp4_model_config c = tiny(kv_heads, tied);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 5);
  int32_t tok[B * T], tgt[B * T];
  batch(tok, tgt, c.vocab, 3);
  ufp4_model_zero_grads(m);
  loss_at(m, tok, tgt);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  float *p = ufp4_model_params(m);
  const float *g = ufp4_model_grads(m);
  int nt = ufp4_model_tensor_count(&c), checked = 0, worst_tensor = -1;
  double worst = 0;
  for (int ti = 0; ti < nt; ti++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, ti, &t);
    for (int k = 0; k < 6; k++) {
      size_t i = t.offset + ufp4_philox_u32(9, (uint64_t)ti, (uint64_t)k) % t.count;
      const float saved = p[i];
      const float eps = 1e-2f;
      p[i] = saved + eps;
      double lp = loss_at(m, tok, tgt);
      p[i] = saved - eps;
      double lm = loss_at(m, tok, tgt);
      p[i] = saved;
      double fd = (lp - lm) / (2.0 * eps);
      double err = fabs(fd - g[i]) / (0.03 * fabs(fd) + 2e-3);
      if (err > worst) {
        worst = err;
        worst_tensor = ti;
      }
      if (err > 1) fail_msg("%s[%zu]: analytic %.6g, finite difference %.6g", t.name, i - t.offset, g[i], fd);
      checked++;
    }
  }
  assert_true(checked >= 6 * nt);
  (void)worst_tensor;
  ufp4_model_free(m);
}

static void test_gradcheck_mha(void **s) { (void)s; gradcheck(4, 0); }
static void test_gradcheck_gqa(void **s) { (void)s; gradcheck(2, 0); }
static void test_gradcheck_tied(void **s) { (void)s; gradcheck(1, 1); }

/* Same seed, same recipe with stochastic rounding: losses and gradients bit-identical at 1 and 2
 * threads. */
static void test_threads_bit_identical(void **state) {
  (void)state;
  ufp4_model_config c = tiny(2, 0);
  c.d_model = 32;
  c.ffn_dim = 64;
  const char *specs[] = {"fp32", "bf16", "e2m1", "ufp4", "nvfp4"};
  for (size_t r = 0; r < sizeof specs / sizeof *specs; r++) {
    float *grads[2];
    double loss[2];
    for (int th = 0; th < 2; th++) {
      omp_set_num_threads(th + 1);
      ufp4_model *m;
      assert_int_equal(ufp4_model_create(&m, &c, B), 0);
      ufp4_model_init(m, 1);
      ufp4_recipe rec;
      assert_int_equal(ufp4_recipe_parse(specs[r], &rec), 0);
      ufp4_model_set_recipe(m, &rec, 1);
      ufp4_model_set_step(m, 3, 0);
      int32_t tok[B * T], tgt[B * T];
      batch(tok, tgt, c.vocab, 8);
      ufp4_model_zero_grads(m);
      loss[th] = loss_at(m, tok, tgt);
      assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
      size_t n = ufp4_model_num_params(m);
      grads[th] = malloc(n * sizeof(float));
      memcpy(grads[th], ufp4_model_grads(m), n * sizeof(float));
      if (th == 1) assert_memory_equal(grads[0], grads[1], n * sizeof(float));
      ufp4_model_free(m);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(double));
    free(grads[0]);
    free(grads[1]);
  }
}

/* Quantized recipes change the loss, a recipe keeping every block in fp32 does not. */
static void test_keep_blocks_high_precision(void **state) {
  (void)state;
  ufp4_model_config c = tiny(4, 0);
  c.d_model = 32;
  c.ffn_dim = 64;
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 2);
  int32_t tok[B * T], tgt[B * T];
  batch(tok, tgt, c.vocab, 4);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("fp32", &r), 0);
  ufp4_model_set_recipe(m, &r, 1);
  double l_fp32 = loss_at(m, tok, tgt);
  assert_int_equal(ufp4_recipe_parse("ufp4", &r), 0);
  ufp4_model_set_recipe(m, &r, 1);
  double l_q = loss_at(m, tok, tgt);
  assert_int_equal(ufp4_recipe_parse("ufp4,keep_first=1,keep_last=1", &r), 0);
  ufp4_model_set_recipe(m, &r, 1);
  double l_kept = loss_at(m, tok, tgt);
  assert_true(l_q != l_fp32);
  assert_true(l_kept == l_fp32);
  ufp4_model_free(m);
}

static void test_tensor_table(void **state) {
  (void)state;
  ufp4_model_config c = tiny(2, 0);
  int nt = ufp4_model_tensor_count(&c);
  assert_int_equal(nt, 1 + 9 * 2 + 2);
  ufp4_tensor_info t;
  ufp4_model_tensor(&c, 0, &t);
  assert_string_equal(t.name, "model.embed_tokens.weight");
  ufp4_model_tensor(&c, 3, &t);
  assert_string_equal(t.name, "model.layers.0.self_attn.k_proj.weight");
  assert_int_equal(t.shape[0], 8); /* 2 kv heads x head dim 4 */
  assert_int_equal(t.shape[1], 16);
  ufp4_model_tensor(&c, nt - 1, &t);
  assert_string_equal(t.name, "lm_head.weight");
  size_t total = t.offset + t.count;
  /* V*C + L*(2C + C*C + 2*KV*C + C*C + 3*C*F) + C + V*C */
  assert_int_equal(total, 11 * 16 + 2 * (2 * 16 + 16 * 16 + 2 * 8 * 16 + 16 * 16 + 3 * 16 * 24) + 16 + 11 * 16);
  assert_int_equal(ufp4_model_param_count(&c), total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tensor_table),
      cmocka_unit_test(test_gradcheck_mha),
      cmocka_unit_test(test_gradcheck_gqa),
      cmocka_unit_test(test_gradcheck_tied),
      cmocka_unit_test(test_threads_bit_identical),
      cmocka_unit_test(test_keep_blocks_high_precision),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
