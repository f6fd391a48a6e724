/* The fp32 model against an independent PyTorch float64 implementation (tests/torch_llama_ref.py)
 * that reads the same safetensors checkpoint: logits, loss and every parameter gradient. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "torch_ref_util.h"

enum { B = 2, T = 16 };

static void run_case(int kv_heads, int tied) {
  torch_ref_require_torch();
  char dir[] = "/tmp/ufp4_torch_XXXXXX";
  assert_non_null(mkdtemp(dir));
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.ffn_dim = 48;
  c.seq_len = T;
  c.vocab = 37;
  c.init_std = 0.2f;
  c.rope_theta = 500.0; /* a small theta makes every rotation frequency matter over 16 positions */
  c.tie_embeddings = tied;
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 42);
  int32_t tok[B * T], tgt[B * T];
  torch_ref_run_script("torch_llama_ref.py", dir, m, c.vocab, B, T, tok, tgt);

  double loss;
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, &loss), 0);
  torch_ref_compare(dir, "logits.npy", ufp4_model_logits(m), (size_t)B * T * c.vocab, "logits");
  const double ref_loss = torch_ref_read_number(dir, "loss.txt");
  if (!(fabs(loss - ref_loss) <= 1e-5 * ref_loss)) fail_msg("loss %.9g, reference %.9g", loss, ref_loss);
  torch_ref_compare_grads(dir, m, &c);
  ufp4_model_free(m);
  ufp4_remove_tree(dir);
}

static void test_torch_gqa_untied(void **s) { (void)s; run_case(2, 0); }
static void test_torch_mha_tied(void **s) { (void)s; run_case(4, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_torch_gqa_untied), cmocka_unit_test(test_torch_mha_tied)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
