/* Health guards (guard.h): the spec parser; the SR bias statistic against its law (a correct SR
 * gives z-scores that are N(0, 1), so the guard's false-alarm rate is what docs/TRAINING.md says);
 * deliberately broken configurations that must trip each guard -- an SR stream that always rounds
 * down (quant_internal.h's test-only hook), block scales forced to underflow, an SQNR floor above
 * what E2M1 can reach, a clipping scale rule -- next to correct ones that must not; and the
 * training loop under both policies, with the training bits unchanged by the guard. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"
#include "train_test_util.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/guard.h"
#include "ufp4/measures.h"
#include "ufp4/synth.h"

/* ---- broken random streams, through the test-only hook */

static void rbits_all_ones(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out) {
  (void)seed, (void)stream, (void)idx0;
  for (size_t i = 0; i < n; i++) out[i] = 0xFFFFFFFFu; /* never below p 2^32: always rounds down */
}

static void rbits_all_zero(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out) {
  (void)seed, (void)stream, (void)idx0;
  memset(out, 0, n * sizeof *out); /* below p 2^32 whenever p > 0: always rounds up */
}

static float *gaussian(size_t n, uint64_t seed) {
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_GAUSSIAN, seed);
  assert_int_equal(ufp4_synth_fill(&s, x, n), 0);
  return x;
}

static ufp4_qformat sr_format(ufp4_round_mode mode, uint64_t stream) {
  ufp4_qformat f = ufp4_qformat_default();
  f.round = mode;
  f.seed = 12345;
  f.stream = stream;
  return f;
}

static double limit(const ufp4_guard *g, ufp4_operand op, ufp4_guard_measure k) { return g->limit[op][k]; }

/* ---- parser */

static void test_parse(void **state) {
  (void)state;
  ufp4_guard g;
  assert_int_equal(ufp4_guard_parse("underflow<0.5,clip<0.01,sqnr>10,srbias<4sigma", &g), 0);
  assert_int_equal(g.n_rules, 4);
  for (int op = 0; op < UFP4_N_OPERANDS; op++) {
    assert_true(limit(&g, op, UFP4_GUARD_UNDERFLOW) == 0.5);
    assert_true(limit(&g, op, UFP4_GUARD_CLIP) == 0.01);
    assert_true(limit(&g, op, UFP4_GUARD_SQNR) == 10);
    assert_true(limit(&g, op, UFP4_GUARD_SRBIAS) == 4);
  }
  /* Later rules replace earlier thresholds on the slots they select: kind, GEMM, slot. */
  assert_int_equal(ufp4_guard_parse("sqnr>10,dy.sqnr>5,wgrad.sqnr>3,fprop.w.sqnr>7,srbias<5", &g), 0);
  const double want[UFP4_N_OPERANDS] = {10, 7, 5, 10, 3, 3};
  for (int op = 0; op < UFP4_N_OPERANDS; op++) {
    assert_true(limit(&g, op, UFP4_GUARD_SQNR) == want[op]);
    assert_true(limit(&g, op, UFP4_GUARD_SRBIAS) == 5);
    assert_true(isnan(limit(&g, op, UFP4_GUARD_UNDERFLOW)));
  }
  assert_int_equal(ufp4_guard_parse("", &g), 0);
  assert_int_equal(g.n_rules, 0);
  assert_int_equal(ufp4_guard_parse("none", &g), 0);
  assert_int_equal(g.n_rules, 0);
  const char *bad[][2] = {{"sqnr<10", "floor"},          {"underflow>0.5", "ceiling"},
                          {"foo<1", "unknown measure"},  {"q.sqnr>1", "no operand"},
                          {"underflow<2", "fraction"},   {"srbias<0", "sigmas"},
                          {"sqnr>10,", "empty rule"},    {"sqnr10", "no '<' or '>'"},
                          {"clip<0.1x", "fraction"},     {"sqnr>", "dB"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (ufp4_guard_parse(bad[i][0], &g) != UFP4_EINVAL) fail_msg("'%s' was accepted", bad[i][0]);
    if (!strstr(ufp4_last_error(), bad[i][1]))
      fail_msg("'%s': message '%s' does not say '%s'", bad[i][0], ufp4_last_error(), bad[i][1]);
  }
}

static void test_proj_names(void **state) {
  (void)state;
  char b[96];
  ufp4_model_config d = ufp4_model_config_default(); /* dense, 6 blocks */
  d.n_layers = 6;
  ufp4_model_config_resolve(&d);
  ufp4_guard_proj_name(&d, 3, UFP4_PROJ_Q, b, sizeof b);
  assert_string_equal(b, "model.layers.3.self_attn.q_proj");
  ufp4_guard_proj_name(&d, 0, UFP4_PROJ_DOWN, b, sizeof b);
  assert_string_equal(b, "model.layers.0.mlp.down_proj");
  ufp4_guard_proj_name(&d, -1, UFP4_PROJ_HEAD, b, sizeof b);
  assert_string_equal(b, "lm_head");
  ufp4_model_config c = ufp4_model_config_default(); /* MoE: 4 routed experts + a shared one */
  c.n_layers = 6;
  c.moe_experts = 4;
  c.moe_shared_ffn = 16;
  c.moe_every = 1;
  ufp4_model_config_resolve(&c);
  ufp4_guard_proj_name(&c, 5, UFP4_PROJ_EXPERT(2, 2), b, sizeof b);
  assert_string_equal(b, "model.layers.5.mlp.experts.2.down_proj");
  ufp4_guard_proj_name(&c, 1, UFP4_PROJ_EXPERT(4, 0), b, sizeof b);
  assert_string_equal(b, "model.layers.1.mlp.shared_expert.gate_proj");
  ufp4_guard_proj_name(&d, 2, UFP4_PROJ_EXPERT(0, 1), b, sizeof b); /* no experts in a dense model */
  assert_string_equal(b, "model.layers.2.proj9");
  /* Every projection of an MoE model, from the probe's ids. */
  c.n_layers = 2;
  c.moe_every = 2;
  ufp4_model_config_resolve(&c);
  const int n = ufp4_model_projection_count(&c);
  ufp4_projection_info *p = calloc((size_t)n, sizeof *p);
  assert_non_null(p);
  ufp4_model_projections(&c, p);
  for (int i = 0; i < n; i++) {
    const int id = p[i].expert >= 0 ? UFP4_PROJ_EXPERT(p[i].expert, p[i].proj - UFP4_PROJ_GATE) : p[i].proj;
    ufp4_guard_proj_name(&c, p[i].layer, id, b, sizeof b);
    assert_string_equal(b, p[i].name);
  }
  free(p);
}

/* ---- the SR bias statistic */

/* Over K independent streams of a correct exact SR, the z-scores must look N(0, 1): their mean
 * within 4 standard errors of 0, their variance within a 4-sigma chi-square band of 1, and the
 * count beyond 2 sigma within 4 binomial standard deviations of K * 4.55%. A wrong variance (a
 * missing step^2, P instead of P(1 - P)) or a wrong expectation fails one of these. */
enum { K = 200, SR_ROWS = 64, SR_COLS = 256 };

static void check_z_law(ufp4_round_mode mode, const float *x) {
  double sum[2] = {0, 0}, sum2[2] = {0, 0};
  int beyond2[2] = {0, 0};
  for (int k = 0; k < K; k++) {
    ufp4_qformat f = sr_format(mode, (uint64_t)k);
    ufp4_qmeasures m;
    assert_int_equal(ufp4_measure_tensor(&f, x, SR_ROWS, SR_COLS, &m), 0);
    assert_true(m.sr_n > SR_ROWS * SR_COLS / 2); /* nearly every gaussian element is between levels */
    const double z[2] = {m.sr_z_mag, m.sr_z_val};
    for (int i = 0; i < 2; i++) {
      sum[i] += z[i];
      sum2[i] += z[i] * z[i];
      beyond2[i] += fabs(z[i]) > 2;
    }
  }
  for (int i = 0; i < 2; i++) {
    const double mean = sum[i] / K, var = sum2[i] / K - mean * mean;
    if (fabs(mean) > 4 / sqrt(K)) fail_msg("z[%d]: mean %g over %d streams", i, mean, K);
    if (fabs(var - 1) > 4 * sqrt(2.0 / K)) fail_msg("z[%d]: variance %g over %d streams", i, var, K);
    const double p = 0.0455, e = K * p, sd = sqrt(K * p * (1 - p));
    if (fabs(beyond2[i] - e) > 4 * sd) fail_msg("z[%d]: %d of %d beyond 2 sigma", i, beyond2[i], K);
  }
}

/* Blocks of 16 whose first element is 6 (so the FP32 scale is exactly 1 and t = |x|) and whose
 * others are uniform in (lo, hi) with random signs: every random choice is between E2M1 levels
 * of one step size, so a variance with the wrong power of the step cannot average out. */
static float *one_step_blocks(float lo, float hi, uint64_t seed) {
  float *x = malloc(SR_ROWS * SR_COLS * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < SR_ROWS * SR_COLS; i++) {
    const uint32_t r = ufp4_philox_u32(seed, 0, i);
    const float u = (float)(r >> 8) * 0x1p-24f;
    x[i] = i % 16 == 0 ? 6.0f : (r & 1 ? -1.0f : 1.0f) * (lo + (hi - lo) * u);
  }
  return x;
}

static void test_sr_z_is_standard_normal(void **state) {
  (void)state;
  float *x[3] = {gaussian(SR_ROWS * SR_COLS, 7), one_step_blocks(4.0f, 6.0f, 1), one_step_blocks(0.5f, 2.0f, 2)};
  for (int i = 0; i < 3; i++) {
    check_z_law(UFP4_ROUND_SR, x[i]);
    /* SR8 is biased toward zero by design (floor(256 p)/256); measured against its own law it
     * is as clean as exact SR, so sr8 recipes do not trip the guard. */
    check_z_law(UFP4_ROUND_SR8, x[i]);
    free(x[i]);
  }
}

/* Nearest rounding makes no random choice: no SR statistic, and the srbias rule never applies. */
static void test_sr_stats_only_under_sr(void **state) {
  (void)state;
  float *x = gaussian(64 * 64, 3);
  ufp4_qformat f = sr_format(UFP4_ROUND_RNE, 0);
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(&f, x, 64, 64, &m), 0);
  assert_int_equal(m.sr_n, 0);
  /* Nor under Four Over Six with SR: it keeps the better of two candidates drawn with the same
   * bits, which is not SR's law (measures.h), so the statistic would be biased by construction. */
  f = sr_format(UFP4_ROUND_SR, 0);
  assert_int_equal(ufp4_measure_tensor(&f, x, 64, 64, &m), 0);
  assert_true(m.sr_n > 0);
  f.adaptive = UFP4_ADAPTIVE_4OVER6;
  assert_int_equal(ufp4_measure_tensor(&f, x, 64, 64, &m), 0);
  assert_int_equal(m.sr_n, 0);
  ufp4_guard g;
  assert_int_equal(ufp4_guard_parse("srbias<0.001", &g), 0);
  ufp4_guard_breach b[4];
  assert_int_equal(ufp4_guard_check(&g, UFP4_OP_WGRAD_DY, &m, b, 4), 0);
  free(x);
}

/* A stream that always rounds down (or up), through the real quantizer: sr_bias is minus (plus)
 * the mean of P (hand-computed below from the same tensor), the z-scores are huge, and the guard
 * trips; the correct stream on the same tensor does not. */
static void test_broken_sr_trips(void **state) {
  (void)state;
  enum { ROWS = 64, COLS = 256 };
  float *x = gaussian(ROWS * COLS, 11);
  ufp4_qformat f = sr_format(UFP4_ROUND_SR, 99);
  ufp4_guard g;
  assert_int_equal(ufp4_guard_parse("srbias<4sigma", &g), 0);
  ufp4_guard_breach b[4];
  ufp4_qmeasures ok, down, up;
  assert_int_equal(ufp4_measure_tensor(&f, x, ROWS, COLS, &ok), 0);
  assert_int_equal(ufp4_guard_check(&g, UFP4_OP_DGRAD_DY, &ok, b, 4), 0);
  ufp4_q_test_set_rbits_hook(rbits_all_ones);
  int rc = ufp4_measure_tensor(&f, x, ROWS, COLS, &down);
  ufp4_q_test_set_rbits_hook(rbits_all_zero);
  rc |= ufp4_measure_tensor(&f, x, ROWS, COLS, &up);
  ufp4_q_test_set_rbits_hook(NULL);
  assert_int_equal(rc, 0);
  /* Independent expectation: each element between levels contributes -P (down) or 1 - P (up)
   * steps, so sr_bias(down) = -sum P step / sum step and sr_bias(up) - sr_bias(down) = 1. */
  assert_true(down.sr_n == ok.sr_n && up.sr_n == ok.sr_n);
  assert_true(down.sr_bias < -0.3 && up.sr_bias > 0.3);
  if (fabs(up.sr_bias - down.sr_bias - 1.0) > 1e-9)
    fail_msg("sr_bias up %.12g, down %.12g: they must differ by one step", up.sr_bias, down.sr_bias);
  assert_true(down.sr_z_mag < -50 && up.sr_z_mag > 50);
  assert_int_equal(ufp4_guard_check(&g, UFP4_OP_DGRAD_DY, &down, b, 4), 1);
  assert_int_equal(b[0].measure, UFP4_GUARD_SRBIAS);
  assert_true(b[0].value > 50 && b[0].limit == 4);
  assert_int_equal(ufp4_guard_check(&g, UFP4_OP_WGRAD_DY, &up, b, 4), 1);
  free(x);
}

/* ---- underflow, SQNR, clipping */

static int trips(const char *spec, const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                 ufp4_guard_measure k, double *value) {
  ufp4_guard g;
  assert_int_equal(ufp4_guard_parse(spec, &g), 0);
  ufp4_qmeasures m;
  assert_int_equal(ufp4_measure_tensor(f, x, rows, cols, &m), 0);
  ufp4_guard_breach b[4];
  const int n = ufp4_guard_check(&g, UFP4_OP_FPROP_X, &m, b, 4);
  assert_true(n <= 1);
  if (n) {
    assert_int_equal(b[0].measure, k);
    *value = b[0].value;
  }
  return n;
}

/* NVFP4 block scales are E4M3 relative to the tensor's amax: one outlier 1e7 times the rest puts
 * every other block's amax * 448 / 1e7 below E4M3's smallest subnormal 2^-9, so those blocks'
 * scales underflow to 0 and all their elements with them. The FP32 scale on the same tensor, and
 * NVFP4 without the outlier, keep underflow to E2M1's usual few percent. E8M0 on a tensor scaled
 * by 1e-41 (fp32 subnormals) is clamped at its smallest scale 2^-127 and underflows too. */
static void test_scale_underflow_trips(void **state) {
  (void)state;
  enum { ROWS = 32, COLS = 256 };
  float *x = gaussian(ROWS * COLS, 5);
  ufp4_qformat f = ufp4_qformat_default();
  double v = 0;
  f.scale = UFP4_SCALE_NVFP4;
  assert_int_equal(trips("underflow<0.5", &f, x, ROWS, COLS, UFP4_GUARD_UNDERFLOW, &v), 0);
  x[7] = 1e7f;
  assert_int_equal(trips("underflow<0.5", &f, x, ROWS, COLS, UFP4_GUARD_UNDERFLOW, &v), 1);
  assert_true(v > 0.99);
  f.scale = UFP4_SCALE_FP32;
  assert_int_equal(trips("underflow<0.5", &f, x, ROWS, COLS, UFP4_GUARD_UNDERFLOW, &v), 0);
  x[7] = 0.5f;
  for (size_t i = 0; i < ROWS * COLS; i++) x[i] *= 1e-41f;
  f.scale = UFP4_SCALE_E8M0_RCEIL;
  assert_int_equal(trips("underflow<0.5", &f, x, ROWS, COLS, UFP4_GUARD_UNDERFLOW, &v), 1);
  assert_true(v > 0.9);
  free(x);
}

/* E2M1 with 1x16 FP32 scales reaches about 17 dB on gaussian data (docs/NUMERICS.md); no 4-bit
 * grid reaches 40 dB on it, so that floor must trip, and a 10 dB one must not. */
static void test_sqnr_floor_trips(void **state) {
  (void)state;
  enum { ROWS = 32, COLS = 256 };
  float *x = gaussian(ROWS * COLS, 9);
  ufp4_qformat f = ufp4_qformat_default();
  double v = 0;
  assert_int_equal(trips("sqnr>10", &f, x, ROWS, COLS, UFP4_GUARD_SQNR, &v), 0);
  assert_int_equal(trips("sqnr>40", &f, x, ROWS, COLS, UFP4_GUARD_SQNR, &v), 1);
  assert_true(v > 10 && v < 40);
  free(x);
}

/* Blocks of 7.5: E8M0 floor takes s = 2^(floor(log2 7.5) - 2) = 1, t = 7.5 > 6, every element
 * clips; the FP32 scale maps 7.5 to 6 exactly, none does. */
static void test_clip_trips(void **state) {
  (void)state;
  enum { ROWS = 4, COLS = 64 };
  float x[ROWS * COLS];
  for (size_t i = 0; i < ROWS * COLS; i++) x[i] = i % 2 ? 7.5f : -7.5f;
  ufp4_qformat f = ufp4_qformat_default();
  double v = 0;
  assert_int_equal(trips("clip<0.01", &f, x, ROWS, COLS, UFP4_GUARD_CLIP, &v), 0);
  f.scale = UFP4_SCALE_E8M0_FLOOR;
  assert_int_equal(trips("clip<0.01", &f, x, ROWS, COLS, UFP4_GUARD_CLIP, &v), 1);
  assert_true(v == 1.0);
}

/* ---- the training loop */

static const train_synth synth = {.batch = 4, .seq = 16, .vocab = 32, .seed = 5, .mul = 5, .add = 3};

static ufp4_train_config guarded(const char *dir, const char *guard, const char *policy) {
  ufp4_train_config c = train_tiny_config(dir, "e2m1", &synth, 4);
  c.diag_every = 2;
  snprintf(c.guard, sizeof c.guard, "%s", guard);
  snprintf(c.guard_policy, sizeof c.guard_policy, "%s", policy);
  return c;
}

static int train_in(const ufp4_train_config *c, ufp4_train_result *res) {
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  return ufp4_train(c, &src, 0, res);
}

static char *read_text(const char *dir, const char *name) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *t;
  size_t n;
  assert_int_equal(ufp4_read_file(path, SIZE_MAX, &t, &n), 0);
  return t;
}

static size_t count(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)); p++) n++;
  return n;
}

/* A correct recipe under sane guards and policy stop trains to the end with no breach, and to the
 * same bits as the same run without a guard (and without diagnostics at all); config.json holds
 * the guard, and a run without one has no guard key. */
static void test_train_correct_does_not_trip(void **state) {
  (void)state;
  char d1[] = "/tmp/ufp4_guard_XXXXXX", d2[] = "/tmp/ufp4_guard_XXXXXX";
  assert_non_null(mkdtemp(d1));
  assert_non_null(mkdtemp(d2));
  ufp4_train_result a, b;
  ufp4_train_config c = guarded(d1, "underflow<0.5,clip<0.01,sqnr>5,srbias<5sigma", "stop");
  if (train_in(&c, &a)) fail_msg("%s", ufp4_last_error());
  c = guarded(d2, "", "warn");
  c.diag_every = 0;
  assert_int_equal(train_in(&c, &b), 0);
  assert_int_equal(a.steps_done, 4);
  assert_memory_equal(&a.final_loss, &b.final_loss, sizeof a.final_loss);
  char *m = read_text(d1, "metrics.jsonl"), *cfg1 = read_text(d1, "config.json"),
       *cfg2 = read_text(d2, "config.json");
  assert_int_equal(count(m, "\"guard\""), 0);
  assert_non_null(strstr(cfg1, "\"guard\":\t\"underflow<0.5,clip<0.01,sqnr>5,srbias<5sigma\""));
  assert_non_null(strstr(cfg1, "\"guard_policy\":\t\"stop\""));
  assert_null(strstr(cfg2, "guard"));
  free(m);
  free(cfg1);
  free(cfg2);
  ufp4_remove_tree(d1);
  ufp4_remove_tree(d2);
}

/* The broken SR stream under warn: the run finishes, to the bits of the same broken run without
 * guards, and metrics.jsonl names each breach; e2m1 puts SR on dY only, so every breach is a dY
 * slot, of every projection, at both diagnostics steps. */
static void test_train_warn_logs(void **state) {
  (void)state;
  char d1[] = "/tmp/ufp4_guard_XXXXXX", d2[] = "/tmp/ufp4_guard_XXXXXX";
  assert_non_null(mkdtemp(d1));
  assert_non_null(mkdtemp(d2));
  ufp4_train_result a, b;
  ufp4_q_test_set_rbits_hook(rbits_all_ones);
  ufp4_train_config c = guarded(d1, "srbias<4sigma", "warn");
  int rc = train_in(&c, &a);
  c = guarded(d2, "", "warn");
  rc |= train_in(&c, &b);
  ufp4_q_test_set_rbits_hook(NULL);
  assert_int_equal(rc, 0);
  assert_int_equal(a.steps_done, 4);
  assert_memory_equal(&a.final_loss, &b.final_loss, sizeof a.final_loss);
  char *m = read_text(d1, "metrics.jsonl");
  /* 7 projections x 2 dY slots x steps 0 and 2. */
  assert_int_equal(count(m, "\"guard\""), 28);
  assert_int_equal(count(m, "\"measure\":\"srbias\""), 28);
  assert_int_equal(count(m, "\"operand\":\"dgrad.dy\""), 14);
  assert_int_equal(count(m, "\"operand\":\"wgrad.dy\""), 14);
  assert_non_null(strstr(m, "{\"step\":0,\"guard\":{\"proj\":\"model.layers.0.self_attn.q_proj\",\"layer\":0,"
                            "\"gemm\":\"dgrad\",\"operand\":\"dgrad.dy\",\"measure\":\"srbias\""));
  assert_non_null(strstr(m, "\"proj\":\"model.layers.0.mlp.down_proj\""));
  assert_non_null(strstr(m, "\"policy\":\"warn\""));
  assert_int_equal(count(m, "\"loss\""), 4); /* the run's own lines are all there */
  free(m);
  ufp4_remove_tree(d1);
  ufp4_remove_tree(d2);
}

/* Policy stop: the first diagnostics step ends the run with a message naming step, projection,
 * GEMM, operand, measure and value; run.json records the failure. */
static void expect_stop(const char *guard, const char *const *says, size_t n_says) {
  char d[] = "/tmp/ufp4_guard_XXXXXX";
  assert_non_null(mkdtemp(d));
  ufp4_train_result a;
  ufp4_train_config c = guarded(d, guard, "stop");
  const int rc = train_in(&c, &a);
  assert_int_equal(rc, UFP4_EINVAL);
  assert_int_equal(a.steps_done, 0);
  const char *e = ufp4_last_error();
  for (size_t i = 0; i < n_says; i++)
    if (!strstr(e, says[i])) fail_msg("'%s' does not say '%s'", e, says[i]);
  char *run = read_text(d, "run.json");
  assert_non_null(strstr(run, "failed"));
  free(run);
  ufp4_remove_tree(d);
}

static void test_train_stop(void **state) {
  (void)state;
  ufp4_q_test_set_rbits_hook(rbits_all_ones);
  /* Backward measures the projections in reverse: down_proj's Dgrad is the first SR operand. */
  const char *sr[] = {"health guard breached: step 0, model.layers.0.mlp.down_proj, dgrad operand dY "
                      "(dgrad.dy): srbias ",
                      ">= 4", "stopping (--guard-policy stop"};
  expect_stop("srbias<4sigma", sr, 3);
  ufp4_q_test_set_rbits_hook(NULL);
  const char *sqnr[] = {"health guard breached: step 0, model.layers.0.self_attn.q_proj, fprop operand X "
                        "(fprop.x): sqnr ",
                        "<= 40 (must stay above 40)"};
  expect_stop("sqnr>40", sqnr, 2);
}

/* A guard needs the diagnostics schedule, and a bad spec or policy is refused before the run. */
static void test_train_refuses(void **state) {
  (void)state;
  ufp4_train_result r;
  ufp4_train_config c = guarded("/tmp/ufp4_guard_never", "sqnr>10", "warn");
  c.diag_every = 0;
  assert_int_equal(train_in(&c, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "--diag-every"));
  c = guarded("/tmp/ufp4_guard_never", "sqnr<10", "warn");
  assert_int_equal(train_in(&c, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "sqnr is a floor"));
  c = guarded("/tmp/ufp4_guard_never", "sqnr>10", "halt");
  assert_int_equal(train_in(&c, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "warn or stop"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_proj_names),
      cmocka_unit_test(test_sr_z_is_standard_normal),
      cmocka_unit_test(test_sr_stats_only_under_sr),
      cmocka_unit_test(test_broken_sr_trips),
      cmocka_unit_test(test_scale_underflow_trips),
      cmocka_unit_test(test_sqnr_floor_trips),
      cmocka_unit_test(test_clip_trips),
      cmocka_unit_test(test_train_correct_does_not_trip),
      cmocka_unit_test(test_train_warn_logs),
      cmocka_unit_test(test_train_stop),
      cmocka_unit_test(test_train_refuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
