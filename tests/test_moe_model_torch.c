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

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ufp4/checkpoint.h"
#include "ufp4/fileio.h"
#include "ufp4/model.h"
#include "ufp4/npy.h"
#include "ufp4/philox.h"

enum { B = 2, T = 16 };

/* As the dense torch test: fp32 accumulation over a few hundred terms gives a normwise relative
 * error of some hundred ulps of float; 1000 * FLT_EPSILON leaves room without hiding a real bug
 * (a wrong gate, a missing aux or z term, a dropped slot that still contributes: whole percents).
 * Routing is discrete: float32 routing can only differ from the float64 one where the gap between
 * the last routed and first unrouted probability is within float rounding of the softmax (about
 * 1e-7); the script reports the smallest gap and the test requires it to be far above that. */
#define TOL (1000 * FLT_EPSILON)
#define MIN_GAP 1e-5

static double rel_err(const float *got, const float *want, size_t n) {
  double d = 0, w = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    w += (double)want[i] * want[i];
  }
  return sqrt(d / (w > 0 ? w : 1));
}

static void compare(const char *dir, const char *file, const float *got, size_t n, const char *what) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  ufp4_npy ref;
  assert_int_equal(ufp4_npy_read(path, &ref), 0);
  assert_int_equal(ref.count, n);
  double e = rel_err(got, ref.data, n);
  if (!(e <= TOL)) fail_msg("%s: normwise relative error %.3g > %.3g", what, e, (double)TOL);
  ufp4_npy_free(&ref);
}

static double read_number(const char *dir, const char *file) {
  char path[4300], *text;
  size_t len;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  assert_int_equal(ufp4_read_file(path, 100, &text, &len), 0);
  double v = atof(text);
  free(text);
  return v;
}

static void run_case(int top_k, int shared, float capacity) {
  if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    /* CI installs python3-torch (scripts/setup.sh), so there a missing torch is a failure. */
    if (getenv("CI")) fail_msg("/usr/bin/python3 cannot import torch, and CI must run this test");
    print_message("skipped: /usr/bin/python3 with torch is not installed (Debian python3-torch)\n");
    skip();
  }
  const char *src = getenv("UFP4_SOURCE_DIR");
  assert_non_null(src);
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
  char ckpt[4200], path[4300];
  snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
  assert_int_equal(ufp4_checkpoint_save(ckpt, m, NULL, NULL, NULL), 0);

  int32_t tok[B * T], tgt[B * T];
  float ftok[B * T], ftgt[B * T];
  for (int i = 0; i < B * T; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(1, 1, (uint64_t)i) % (uint32_t)c.vocab);
    tgt[i] = i % 7 == 3 ? -1 : (int32_t)(ufp4_philox_u32(1, 2, (uint64_t)i) % (uint32_t)c.vocab);
    ftok[i] = (float)tok[i];
    ftgt[i] = (float)tgt[i];
  }
  size_t shape[2] = {B, T};
  snprintf(path, sizeof path, "%s/tokens.npy", dir);
  assert_int_equal(ufp4_npy_write(path, ftok, shape, 2), 0);
  snprintf(path, sizeof path, "%s/targets.npy", dir);
  assert_int_equal(ufp4_npy_write(path, ftgt, shape, 2), 0);

  char cmd[20000];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 %s/tests/torch_moe_ref.py %s/model.safetensors %s/config.json %s/tokens.npy "
           "%s/targets.npy %s",
           src, ckpt, ckpt, dir, dir, dir);
  assert_int_equal(system(cmd), 0);
  const double gap = read_number(dir, "min_gap.txt");
  if (!(gap > MIN_GAP)) fail_msg("routing gap %.3g too small for a float32/float64 comparison: change the seed", gap);

  double loss;
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, &loss), 0);
  compare(dir, "logits.npy", ufp4_model_logits(m), (size_t)B * T * c.vocab, "logits");
  const double ref_loss = read_number(dir, "loss.txt"), ref_obj = read_number(dir, "objective.txt");
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
  ufp4_model_zero_grads(m);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  const float *g = ufp4_model_grads(m);
  int nt = ufp4_model_tensor_count(&c);
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, i, &t);
    char file[200];
    snprintf(file, sizeof file, "grad.%s.npy", t.name);
    compare(dir, file, g + t.offset, t.count, t.name);
  }
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
