/* The fp32 MoE model against an independent PyTorch float64 implementation (tests/torch_moe_ref.py)
 * of Qwen2MoeForCausalLM that reads the same checkpoint (config.json and model.safetensors, zero
 * q/k/v biases and, without a shared expert, the zero-width one included): logits, cross-entropy,
 * the MoE objective (aux + z-loss) and the gradient of CE + objective for every parameter.
 * Tiny configs of 3 layers, E = 4: k = 2 with a shared expert, dropless, moe_every 2 (layer 1 MoE
 * between dense layers 0 and 2); and k = 1 in every layer under capacity factor 1 (some assignments
 * dropped) without a shared expert. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "torch_ref_util.h"

enum { B = 2, T = 16 };

/* Tolerance as the dense torch test (TORCH_REF_TOL: a wrong gate, a missing aux or z term, a
 * dropped slot that still contributes moves results by whole percents). Routing is discrete:
 * float32 routing can only differ from the float64 one where the gap between the last routed and
 * first unrouted probability is within float rounding of the softmax (about 1e-7); the script
 * reports the smallest gap and the test requires it to be far above that. */
#define MIN_GAP 1e-5

static void run_case(int top_k, int shared, float capacity) {
  torch_ref_require_torch();
  char dir[] = "/tmp/ufp4_torchmoe_XXXXXX";
  assert_non_null(mkdtemp(dir));
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 3;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 48;
  c.seq_len = T;
  c.vocab = 37;
  c.init_std = 0.2f;
  c.rope_theta = 500.0;
  c.moe_experts = 4;
  c.moe_top_k = top_k;
  c.moe_ffn = 24;
  c.moe_shared_ffn = shared;
  c.moe_every = shared ? 2 : 1;
  c.moe_capacity = capacity;
  c.moe_aux_coef = 0.1f; /* large enough that a wrong aux gradient shows in the router's */
  c.moe_z_coef = 0.01f;
  ufp4_model_config_resolve(&c);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 42);
  int32_t tok[B * T], tgt[B * T];
  torch_ref_run_script("torch_moe_ref.py", dir, m, c.vocab, B, T, tok, tgt);
  const double gap = torch_ref_read_number(dir, "min_gap.txt");
  if (!(gap > MIN_GAP)) fail_msg("routing gap %.3g too small for a float32/float64 comparison: change the seed", gap);

  double loss;
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, &loss), 0);
  torch_ref_compare(dir, "logits.npy", ufp4_model_logits(m), (size_t)B * T * c.vocab, "logits");
  const double ref_loss = torch_ref_read_number(dir, "loss.txt"), ref_obj = torch_ref_read_number(dir, "objective.txt");
  if (!(fabs(loss - ref_loss) <= 1e-5 * ref_loss)) fail_msg("loss %.9g, reference %.9g", loss, ref_loss);
  const double obj = ufp4_model_aux_loss(m);
  if (!(fabs(obj - ref_obj) <= 1e-5 * ref_obj)) fail_msg("MoE objective %.9g, reference %.9g", obj, ref_obj);
  if (capacity > 0) {
    size_t dropped = 0;
    for (int l = 0; l < c.n_layers; l++) {
      ufp4_moe_stats st;
      if (ufp4_model_moe_stats(m, l, &st) == 0) dropped += st.dropped;
    }
    assert_true(dropped > 0); /* the case must exercise the dropped-token policy */
  }
  torch_ref_compare_grads(dir, m, &c);
  ufp4_model_free(m);
  ufp4_remove_tree(dir);
}

static void test_torch_k2_shared_dense_layer(void **s) { (void)s; run_case(2, 16, 0.0f); }
static void test_torch_k1_capacity_no_shared(void **s) { (void)s; run_case(1, 0, 1.0f); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_torch_k2_shared_dense_layer),
                                     cmocka_unit_test(test_torch_k1_capacity_no_shared)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
