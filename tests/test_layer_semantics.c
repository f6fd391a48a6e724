/* HF-semantics spot checks of the layer kernels with hand-computed cases, GQA == MHA with
 * repeated kv heads, the causal mask, the cross-entropy ignore index, and bad-argument handling. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/layers.h"

static uint64_t rng_state;
static float frand(float lo, float hi) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (float)(lo + (hi - lo) * ((double)(z >> 11) * 0x1.0p-53));
}
static void fill(float *p, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) p[i] = frand(lo, hi);
}

/* D = 4, theta = 10000: inv_freq = [10000^0, 10000^(-2/4)] = [1, 0.01].
 * Position 0: every angle is 0, cos = 1, sin = 0, so the output is x exactly.
 * Position 1, x = [1, 2, 3, 4], angles [1, 0.01] (HF repeats them for the second half):
 *   out0 = 1 cos 1    - 3 sin 1    = 0.540302 - 2.524413 = -1.98411065
 *   out1 = 2 cos 0.01 - 4 sin 0.01 = 1.999900 - 0.039999 =  1.95990067
 *   out2 = 3 cos 1    + 1 sin 1    = 1.620907 + 0.841471 =  2.46237790
 *   out3 = 4 cos 0.01 + 2 sin 0.01 = 3.999800 + 0.020000 =  4.01979967
 * (torch with HF's apply_rotary_pos_emb prints [-1.98411059, 1.95990062, 2.46237803, 4.01979971].) */
static void test_rope_hand(void **state) {
  (void)state;
  float cs[2 * 2], sn[2 * 2];
  assert_int_equal(ufp4_rope_init(cs, sn, 2, 4, 10000.0), 0);
  float x[2 * 4] = {1, 2, 3, 4, 1, 2, 3, 4}, out[2 * 4];
  assert_int_equal(ufp4_rope_forward(out, x, cs, sn, 1, 2, 1, 4), 0);
  assert_memory_equal(out, x, 4 * sizeof(float));
  const double want[4] = {-1.98411065, 1.95990067, 2.46237790, 4.01979967};
  for (int i = 0; i < 4; i++) assert_true(fabs(out[4 + i] - want[i]) < 1e-6);
  /* Backward rotates by -angle: applied to the forward output it gives x back. */
  float dx[2 * 4] = {0};
  assert_int_equal(ufp4_rope_backward(dx, out, cs, sn, 1, 2, 1, 4), 0);
  for (int i = 0; i < 8; i++) assert_true(fabs(dx[i] - x[i]) < 1e-6);
}

/* x = [3, 4], w = [1, 2], eps = 0: mean(x^2) = 12.5, rstd = 1/sqrt(12.5) = 0.28284271;
 * out = [3 * 0.28284271 * 1, 4 * 0.28284271 * 2] = [0.84852814, 2.26274170]. */
static void test_rmsnorm_hand(void **state) {
  (void)state;
  float x[2] = {3, 4}, w[2] = {1, 2}, out[2], rstd[1];
  assert_int_equal(ufp4_rmsnorm_forward(out, rstd, x, w, 1, 2, 0.0f), 0);
  assert_true(fabs(rstd[0] - 0.28284271) < 1e-7);
  assert_true(fabs(out[0] - 0.84852814) < 1e-6);
  assert_true(fabs(out[1] - 2.26274170) < 1e-6);
}

/* silu(0) = 0; silu(2) = 2 / (1 + e^-2) = 1.76159416; silu(-100) underflows to -0 without NaN. */
static void test_swiglu_hand(void **state) {
  (void)state;
  float g[3] = {0, 2, -100}, u[3] = {5, 3, 7}, out[3];
  assert_int_equal(ufp4_swiglu_forward(out, g, u, 1, 3), 0);
  assert_true(out[0] == 0.0f);
  assert_true(fabs(out[1] - 3 * 1.76159416) < 1e-5);
  assert_true(out[2] == 0.0f && !isnan(out[2]));
  float dg[3] = {0}, du[3] = {0}, dout[3] = {1, 1, 1};
  assert_int_equal(ufp4_swiglu_backward(dg, du, dout, g, u, 1, 3), 0);
  /* d silu/dg at 0 is sigmoid(0) = 0.5, times up = 5. */
  assert_true(fabs(dg[0] - 2.5) < 1e-6);
  assert_true(isfinite(dg[2]) && isfinite(du[2]));
}

/* GQA with H = 4, KVH = 2 (heads 0,1 read kv 0; heads 2,3 read kv 1) equals MHA over kv heads
 * repeated as [kv0, kv0, kv1, kv1] (HF repeat_kv); the GQA dk/dv are the sums over the repeats. */
static void test_gqa_equals_mha(void **state) {
  (void)state;
  enum { B = 2, T = 9, H = 4, KVH = 2, D = 8 };
  rng_state = 21;
  float q[B * T * H * D], k[B * T * KVH * D], v[B * T * KVH * D], dout[B * T * H * D];
  float k4[B * T * H * D], v4[B * T * H * D];
  fill(q, sizeof q / 4, -2, 2);
  fill(k, sizeof k / 4, -2, 2);
  fill(v, sizeof v / 4, -1, 1);
  fill(dout, sizeof dout / 4, -1, 1);
  for (int bt = 0; bt < B * T; bt++)
    for (int h = 0; h < H; h++)
      for (int d = 0; d < D; d++) {
        k4[(bt * H + h) * D + d] = k[(bt * KVH + h / 2) * D + d];
        v4[(bt * H + h) * D + d] = v[(bt * KVH + h / 2) * D + d];
      }
  static float out_g[B * T * H * D], out_m[B * T * H * D], att_g[B * H * T * T], att_m[B * H * T * T];
  assert_int_equal(ufp4_attention_forward(out_g, att_g, q, k, v, B, T, H, KVH, D), 0);
  assert_int_equal(ufp4_attention_forward(out_m, att_m, q, k4, v4, B, T, H, H, D), 0);
  assert_memory_equal(out_g, out_m, sizeof out_g);
  assert_memory_equal(att_g, att_m, sizeof att_g);
  static float dq_g[B * T * H * D], dk_g[B * T * KVH * D], dv_g[B * T * KVH * D];
  static float dq_m[B * T * H * D], dk_m[B * T * H * D], dv_m[B * T * H * D];
  float scratch[B * H * T];
  assert_int_equal(ufp4_attention_backward(dq_g, dk_g, dv_g, scratch, dout, att_g, q, k, v, B, T,
                                           H, KVH, D),
                   0);
  assert_int_equal(ufp4_attention_backward(dq_m, dk_m, dv_m, scratch, dout, att_m, q, k4, v4, B,
                                           T, H, H, D),
                   0);
  assert_memory_equal(dq_g, dq_m, sizeof dq_g);
  for (int bt = 0; bt < B * T; bt++)
    for (int g = 0; g < KVH; g++)
      for (int d = 0; d < D; d++) {
        double sk = (double)dk_m[(bt * H + 2 * g) * D + d] + dk_m[(bt * H + 2 * g + 1) * D + d];
        double sv = (double)dv_m[(bt * H + 2 * g) * D + d] + dv_m[(bt * H + 2 * g + 1) * D + d];
        assert_true(fabs(dk_g[(bt * KVH + g) * D + d] - sk) <= 1e-5 * fabs(sk) + 1e-6);
        assert_true(fabs(dv_g[(bt * KVH + g) * D + d] - sv) <= 1e-5 * fabs(sv) + 1e-6);
      }
}

/* Changing q, k, v at the last position leaves every earlier output bit-identical (and changes
 * the last one); a gradient arriving only at position t reaches no k, v row after t. */
static void test_causal_mask(void **state) {
  (void)state;
  enum { B = 2, T = 6, H = 4, KVH = 2, D = 8 };
  rng_state = 22;
  float q[B * T * H * D], k[B * T * KVH * D], v[B * T * KVH * D];
  fill(q, sizeof q / 4, -2, 2);
  fill(k, sizeof k / 4, -2, 2);
  fill(v, sizeof v / 4, -1, 1);
  float out1[B * T * H * D], out2[B * T * H * D], att[B * H * T * T];
  assert_int_equal(ufp4_attention_forward(out1, att, q, k, v, B, T, H, KVH, D), 0);
  for (int b = 0; b < B; b++) {
    size_t last = (size_t)b * T + T - 1;
    for (int i = 0; i < H * D; i++) q[last * H * D + i] += 1.0f;
    for (int i = 0; i < KVH * D; i++) {
      k[last * KVH * D + i] -= 1.5f;
      v[last * KVH * D + i] += 2.0f;
    }
  }
  assert_int_equal(ufp4_attention_forward(out2, att, q, k, v, B, T, H, KVH, D), 0);
  for (int b = 0; b < B; b++) {
    size_t row = (size_t)H * D;
    assert_memory_equal(out1 + (size_t)b * T * row, out2 + (size_t)b * T * row, (T - 1) * row * 4);
    assert_memory_not_equal(out1 + ((size_t)b * T + T - 1) * row,
                            out2 + ((size_t)b * T + T - 1) * row, row * 4);
  }
  const int t0 = 2;
  float dout[B * T * H * D] = {0};
  for (int b = 0; b < B; b++)
    for (int i = 0; i < H * D; i++) dout[((size_t)b * T + t0) * H * D + i] = frand(-1, 1);
  float dq[B * T * H * D] = {0}, dk[B * T * KVH * D] = {0}, dv[B * T * KVH * D] = {0};
  float scratch[B * KVH * T];
  assert_int_equal(
      ufp4_attention_backward(dq, dk, dv, scratch, dout, att, q, k, v, B, T, H, KVH, D), 0);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < KVH * D; i++) {
        size_t at = ((size_t)b * T + t) * KVH * D + i;
        if (t > t0) assert_true(dk[at] == 0.0f && dv[at] == 0.0f);
      }
  int nonzero = 0;
  for (size_t i = 0; i < sizeof dv / 4; i++) nonzero += dv[i] != 0.0f;
  assert_true(nonzero > 0);
}

/* logits [0, ln 3]: softmax [1/4, 3/4]; target 1 gives loss ln(4/3) = 0.28768207, the same with
 * 1000 added to both logits (stable log-sum-exp). Row 2 is ignored: its huge logits change nothing,
 * the mean is over the 2 counted rows, and its dlogits row is 0. */
static void test_cross_entropy_hand_and_ignore(void **state) {
  (void)state;
  const float l3 = logf(3.0f);
  float logits[3 * 2] = {0, l3, 1000, 1000 + l3, 5e30f, -5e30f};
  int32_t tgt[3] = {1, 1, UFP4_IGNORE_INDEX};
  float losses[3], lse[3], dl[3 * 2];
  double mean;
  int nvalid;
  assert_int_equal(ufp4_cross_entropy_forward(losses, lse, &mean, &nvalid, logits, tgt, 3, 2), 0);
  assert_int_equal(nvalid, 2);
  assert_true(fabs(losses[0] - 0.28768207) < 1e-6);
  assert_true(fabs(losses[1] - 0.28768207) < 1e-4); /* ulp of 1000 in float is 6e-5 */
  assert_true(losses[2] == 0.0f);
  assert_true(fabs(mean - 0.28768207) < 1e-4);
  /* dlogits = (softmax - onehot) * dloss / 2 = ([1/4, 3/4] - [0, 1]) * 2 / 2 = [0.25, -0.25]. */
  assert_int_equal(ufp4_cross_entropy_backward(dl, logits, lse, tgt, 2.0f, 3, 2), 0);
  assert_true(fabs(dl[0] - 0.25) < 1e-6 && fabs(dl[1] + 0.25) < 1e-6);
  assert_true(dl[4] == 0.0f && dl[5] == 0.0f);

  /* Every row ignored: mean 0, count 0, zero gradient, no NaN. */
  int32_t none[3] = {-1, -1, -1};
  assert_int_equal(ufp4_cross_entropy_forward(losses, lse, &mean, &nvalid, logits, none, 3, 2), 0);
  assert_int_equal(nvalid, 0);
  assert_true(mean == 0.0);
  assert_int_equal(ufp4_cross_entropy_backward(dl, logits, lse, none, 1.0f, 3, 2), 0);
  for (int i = 0; i < 6; i++) assert_true(dl[i] == 0.0f);

  /* Only -1 is the ignore index; other out-of-range targets are errors that write nothing. */
  int32_t bad1[3] = {1, -2, 0}, bad2[3] = {1, 2, 0};
  losses[0] = 42.0f;
  assert_int_equal(ufp4_cross_entropy_forward(losses, lse, &mean, &nvalid, logits, bad1, 3, 2),
                   UFP4_EINVAL);
  assert_int_equal(ufp4_cross_entropy_forward(losses, lse, &mean, &nvalid, logits, bad2, 3, 2),
                   UFP4_EINVAL);
  assert_true(losses[0] == 42.0f);
  assert_int_equal(ufp4_cross_entropy_backward(dl, logits, lse, bad2, 1.0f, 3, 2), UFP4_EINVAL);
}

/* A repeated token's dwte row is the sum of its dout rows, in row order. */
static void test_embedding_repeats(void **state) {
  (void)state;
  float wte[3 * 2] = {1, 2, 3, 4, 5, 6}, out[4 * 2], dwte[3 * 2] = {0};
  int32_t tok[4] = {2, 0, 2, 2};
  float dout[4 * 2] = {0.5f, 1, 0.25f, 2, 0.125f, 4, 1, 8};
  assert_int_equal(ufp4_embedding_forward(out, tok, wte, 4, 3, 2), 0);
  const float want[8] = {5, 6, 1, 2, 5, 6, 5, 6};
  assert_memory_equal(out, want, sizeof want);
  assert_int_equal(ufp4_embedding_backward(dwte, dout, tok, 4, 3, 2), 0);
  /* row 2: [0.5 + 0.125 + 1, 1 + 4 + 8] = [1.625, 13]; row 0: [0.25, 2]; row 1 untouched. */
  const float wantd[6] = {0.25f, 2, 0, 0, 1.625f, 13};
  assert_memory_equal(dwte, wantd, sizeof wantd);
}

static void test_bad_arguments(void **state) {
  (void)state;
  float a[64] = {0}, b[64] = {0}, c[64] = {0}, d[64] = {0}, e[64] = {0};
  int32_t tok[2] = {0, 5};
  b[0] = 7.0f;
  assert_int_equal(ufp4_embedding_forward(b, tok, a, 2, 5, 4), UFP4_EINVAL); /* token 5 >= V */
  assert_true(b[0] == 7.0f); /* nothing written */
  assert_int_equal(ufp4_embedding_forward(NULL, tok, a, 2, 6, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_embedding_backward(a, b, tok, 2, 6, 0), UFP4_EINVAL);
  assert_int_equal(ufp4_rmsnorm_forward(a, b, c, d, 2, 4, -1.0f), UFP4_EINVAL);
  assert_int_equal(ufp4_rmsnorm_forward(a, b, c, NULL, 2, 4, 1e-5f), UFP4_EINVAL);
  assert_int_equal(ufp4_rmsnorm_backward(a, b, c, d, e, a, -2, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_rope_init(a, b, 2, 3, 10000.0), UFP4_EINVAL); /* odd head dim */
  assert_int_equal(ufp4_rope_init(a, b, 2, 4, 1.0), UFP4_EINVAL);
  assert_int_equal(ufp4_rope_forward(a, b, c, d, 1, 2, 1, 5), UFP4_EINVAL);
  assert_int_equal(ufp4_rope_backward(a, b, c, NULL, 1, 2, 1, 4), UFP4_EINVAL);
  /* 3 query heads cannot share 2 kv heads. */
  assert_int_equal(ufp4_attention_forward(a, b, c, d, e, 1, 2, 3, 2, 2), UFP4_EINVAL);
  assert_int_equal(ufp4_attention_backward(a, b, c, d, e, a, b, c, d, 1, 2, 4, 0, 2), UFP4_EINVAL);
  assert_int_equal(ufp4_attention_backward(a, b, c, NULL, e, a, b, c, d, 1, 2, 2, 1, 2),
                   UFP4_EINVAL);
  assert_int_equal(ufp4_swiglu_forward(a, b, NULL, 2, 2), UFP4_EINVAL);
  assert_int_equal(ufp4_swiglu_backward(a, b, c, d, e, 0, 2), UFP4_EINVAL);
  assert_int_equal(ufp4_residual_forward(a, NULL, c, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_residual_backward(a, b, NULL, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_attention_scratch_floats(0, 4, 1), 0);
  /* An element count that overflows size_t is ENOMEM, not a wrapped allocation size. */
  assert_int_equal(ufp4_attention_forward(a, b, c, d, e, 1 << 30, 1 << 30, 1 << 30, 1, 1 << 30),
                   UFP4_ENOMEM);
  assert_non_null(strstr(ufp4_last_error(), "ufp4_attention_forward"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rope_hand),
      cmocka_unit_test(test_rmsnorm_hand),
      cmocka_unit_test(test_swiglu_hand),
      cmocka_unit_test(test_gqa_equals_mha),
      cmocka_unit_test(test_causal_mask),
      cmocka_unit_test(test_cross_entropy_hand_and_ignore),
      cmocka_unit_test(test_embedding_repeats),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
