/* Per-projection and per-GEMM recipe overrides (model.h, recipe.h): the names, the grammar, the
 * resolution order, and that the named projections, and only they, run in the precision asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/model.h"
#include "ufp4/philox.h"

enum { B = 2, T = 16 };

static ufp4_model_config tiny(int experts) {
  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 2;
  c.ffn_dim = 32;
  c.seq_len = T;
  c.vocab = 32;
  c.init_std = 0.3f;
  c.moe_experts = experts;
  c.moe_top_k = 1;
  c.moe_every = 2; /* layer 1 is MoE */
  ufp4_model_config_resolve(&c);
  return c;
}

/* ---- recipe grammar */

static void test_gemm_keys_and_partial_specs(void **state) {
  (void)state;
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("ufp4,fprop=bf16", &r), 0);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_FPROP), UFP4_PREC_BF16);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_DGRAD), UFP4_PREC_FP4);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_WGRAD), UFP4_PREC_FP4);
  /* A partial spec changes only its keys; a full one replaces the recipe. */
  assert_int_equal(ufp4_recipe_apply("rht=none,wgrad=fp32", &r), 0);
  assert_int_equal(r.grid, UFP4_GRID_E1M2);
  assert_int_equal(r.rht_mask, 0u);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_FPROP), UFP4_PREC_BF16);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_WGRAD), UFP4_PREC_FP32);
  assert_int_equal(ufp4_recipe_apply("fprop=recipe", &r), 0);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_FPROP), UFP4_PREC_FP4);
  assert_int_equal(ufp4_recipe_apply("e2m1", &r), 0);
  assert_int_equal(r.grid, UFP4_GRID_E2M1);
  assert_int_equal(ufp4_recipe_gemm_precision(&r, UFP4_WGRAD), UFP4_PREC_FP4);
  /* bf16 with one 4-bit GEMM quantizes; ufp4 with every GEMM in bf16 does not. */
  assert_int_equal(ufp4_recipe_parse("bf16,wgrad=fp4", &r), 0);
  assert_true(ufp4_recipe_quantizes(&r));
  assert_int_equal(ufp4_recipe_parse("ufp4,fprop=bf16,dgrad=bf16,wgrad=bf16", &r), 0);
  assert_false(ufp4_recipe_quantizes(&r));
  /* Bad input leaves the recipe as it was. */
  ufp4_recipe before = r;
  assert_int_equal(ufp4_recipe_apply("rht=none,fprop=fp8", &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "fprop=fp8"));
  assert_int_equal(r.rht_mask, before.rht_mask);
  assert_int_equal(ufp4_recipe_apply("rht", &r), UFP4_EINVAL);
  assert_int_equal(ufp4_recipe_parse("fprop=bf16", &r), UFP4_EINVAL); /* a full spec needs a preset */
}

/* Recipes without per-GEMM keys format as before the keys existed (config.json keeps its text);
 * those with them round-trip. */
static void test_format(void **state) {
  (void)state;
  ufp4_recipe r, back;
  char buf[512], again[512];
  assert_int_equal(ufp4_recipe_parse("bf16", &r), 0);
  ufp4_recipe_format(&r, buf, sizeof buf);
  assert_string_equal(buf, "bf16,keep_first=0,keep_last=0");
  assert_int_equal(ufp4_recipe_parse("e2m1", &r), 0);
  ufp4_recipe_format(&r, buf, sizeof buf);
  assert_string_equal(buf, "e2m1,grid=e2m1,scale=fp32,block=16,round=rne,sr=dgrad.dy+wgrad.dy,sr_bits=32,"
                           "sr_prescale=1,rht=wgrad,rht_n=16,rht_signs=random,tile2d=0,keep_first=0,keep_last=0");
  const char *specs[] = {"ufp4,fprop=bf16", "bf16,wgrad=fp4", "ufp4,fprop=bf16,dgrad=bf16,wgrad=bf16",
                         "fp32,dgrad=bf16"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    assert_int_equal(ufp4_recipe_parse(specs[i], &r), 0);
    ufp4_recipe_format(&r, buf, sizeof buf);
    assert_int_equal(ufp4_recipe_parse(buf, &back), 0);
    ufp4_recipe_format(&back, again, sizeof again);
    assert_string_equal(buf, again);
    for (int g = 0; g < UFP4_N_GEMMS; g++)
      assert_int_equal(ufp4_recipe_gemm_precision(&r, g), ufp4_recipe_gemm_precision(&back, g));
  }
}

/* ---- names */

static void test_names(void **state) {
  (void)state;
  ufp4_model_config c = tiny(2);
  c.moe_shared_ffn = 8;
  const int n = ufp4_model_projection_count(&c);
  /* dense layer 0: 7; MoE layer 1: 4 attention + 2 experts x 3 + shared 3; lm_head */
  assert_int_equal(n, 7 + 13 + 1);
  ufp4_projection_info p[21];
  ufp4_model_projections(&c, p);
  static const char *const expect[21] = {
      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
      "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj",
      "model.layers.0.mlp.down_proj", "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj",
      "model.layers.1.self_attn.v_proj", "model.layers.1.self_attn.o_proj", "model.layers.1.mlp.experts.0.gate_proj",
      "model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.experts.0.down_proj",
      "model.layers.1.mlp.experts.1.gate_proj", "model.layers.1.mlp.experts.1.up_proj",
      "model.layers.1.mlp.experts.1.down_proj", "model.layers.1.mlp.shared_expert.gate_proj",
      "model.layers.1.mlp.shared_expert.up_proj", "model.layers.1.mlp.shared_expert.down_proj", "lm_head"};
  for (int i = 0; i < n; i++) assert_string_equal(p[i].name, expect[i]);
  assert_int_equal(p[16].layer, 1);
  assert_int_equal(p[16].expert, 1);
  assert_int_equal(p[16].proj, UFP4_PROJ_DOWN);
  assert_int_equal(p[17].expert, 2); /* the shared expert is e = n_experts */
  assert_int_equal(p[3].proj, UFP4_PROJ_O);
  assert_int_equal(p[3].expert, -1);
  assert_int_equal(p[20].proj, UFP4_PROJ_HEAD);
  /* Each block name is a weight tensor's name without ".weight" (the checkpoint's names). */
  const int nt = ufp4_model_tensor_count(&c);
  for (int i = 0; i + 1 < n; i++) {
    int found = 0;
    for (int k = 0; k < nt && !found; k++) {
      ufp4_tensor_info t;
      ufp4_model_tensor(&c, k, &t);
      const size_t len = strlen(p[i].name);
      found = !strncmp(t.name, p[i].name, len) && !strcmp(t.name + len, ".weight");
    }
    assert_true(found);
  }
}

/* ---- resolution */

static void resolve(const ufp4_model_config *c, const char *base, const char *overrides, ufp4_recipe *out,
                    int expect) {
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse(base, &r), 0);
  assert_int_equal(ufp4_model_resolve_recipes(c, &r, overrides, out), expect);
}

static void test_last_match_wins(void **state) {
  (void)state;
  ufp4_model_config c = tiny(0);
  ufp4_recipe out[15];
  assert_int_equal(ufp4_model_projection_count(&c), 15);
  resolve(&c, "ufp4", "model.layers.*.mlp.*=bf16;*.down_proj=fprop=fp32", out, 0);
  assert_int_equal(out[0].precision, UFP4_PREC_FP4);                  /* 0.q: the run's */
  assert_int_equal(out[4].precision, UFP4_PREC_BF16);                 /* 0.gate: first item */
  assert_int_equal(out[6].precision, UFP4_PREC_BF16);                 /* 0.down: both, in order */
  assert_int_equal(ufp4_recipe_gemm_precision(&out[6], UFP4_FPROP), UFP4_PREC_FP32);
  assert_int_equal(ufp4_recipe_gemm_precision(&out[6], UFP4_DGRAD), UFP4_PREC_BF16);
  assert_int_equal(out[14].precision, UFP4_PREC_FP32);                /* lm_head: fp32 by default */
  /* The same two items the other way round: the full spec now wins on down_proj. */
  resolve(&c, "ufp4", "*.down_proj=fprop=fp32;model.layers.*.mlp.*=bf16", out, 0);
  assert_int_equal(ufp4_recipe_gemm_precision(&out[6], UFP4_FPROP), UFP4_PREC_BF16);
  /* keep_first / keep_last are the fp32 overrides of their blocks, applied first. */
  ufp4_recipe a[15], b[15];
  resolve(&c, "nvfp4,keep_last=1", "model.layers.1.self_attn.o_proj=e2m1", a, 0);
  resolve(&c, "nvfp4", "model.layers.1.*=fp32;model.layers.1.self_attn.o_proj=e2m1", b, 0);
  for (int i = 0; i < 15; i++) {
    char x[512], y[512];
    ufp4_recipe_format(&a[i], x, sizeof x);
    ufp4_recipe_format(&b[i], y, sizeof y);
    assert_string_equal(x, y);
  }
  assert_int_equal(a[10].grid, UFP4_GRID_E2M1);
  assert_int_equal(a[10].scale, UFP4_SCALE_FP32);
  assert_int_equal(a[9].precision, UFP4_PREC_FP32);
}

static void test_bad_overrides(void **state) {
  (void)state;
  ufp4_model_config c = tiny(0);
  ufp4_recipe out[15];
  resolve(&c, "ufp4", "model.layer.*=bf16", out, UFP4_EINVAL); /* a typo matches nothing */
  assert_non_null(strstr(ufp4_last_error(), "matches no projection"));
  resolve(&c, "ufp4", "lm_head", out, UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "PATTERN=SPEC"));
  resolve(&c, "ufp4", "=bf16", out, UFP4_EINVAL);
  resolve(&c, "ufp4", "lm_head=", out, UFP4_EINVAL);
  resolve(&c, "ufp4", "lm_head=rht=sideways", out, UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "lm_head=rht=sideways"));
  assert_non_null(strstr(ufp4_last_error(), "sideways"));
  resolve(&c, "ufp4", "*=keep_first=1", out, UFP4_EINVAL);
  resolve(&c, "ufp4", "", out, 0);
  resolve(&c, "ufp4", NULL, out, 0);
}

static void test_table(void **state) {
  (void)state;
  ufp4_model_config c = tiny(0);
  c.n_layers = 4;
  ufp4_recipe out[29];
  resolve(&c, "bf16,keep_first=1", "model.layers.3.mlp.down_proj=fp32", out, 0);
  char *t = ufp4_model_recipe_table(&c, out);
  assert_non_null(t);
  assert_string_equal(t,
                      "fp32,keep_first=0,keep_last=0: model.layers.0.self_attn.q_proj"
                      " model.layers.0.self_attn.k_proj model.layers.0.self_attn.v_proj"
                      " model.layers.0.self_attn.o_proj model.layers.0.mlp.gate_proj"
                      " model.layers.0.mlp.up_proj model.layers.{0,3}.mlp.down_proj lm_head\n"
                      "bf16,keep_first=0,keep_last=0: model.layers.{1-3}.self_attn.q_proj"
                      " model.layers.{1-3}.self_attn.k_proj model.layers.{1-3}.self_attn.v_proj"
                      " model.layers.{1-3}.self_attn.o_proj model.layers.{1-3}.mlp.gate_proj"
                      " model.layers.{1-3}.mlp.up_proj model.layers.{1-2}.mlp.down_proj\n");
  free(t);
  resolve(&c, "ufp4", NULL, out, 0);
  t = ufp4_model_recipe_table(&c, out);
  assert_non_null(strstr(t, ": model.layers.*.self_attn.q_proj "));
  free(t);
}

/* ---- what runs */

/* The probe's record: per (layer + 1, proj) the operands it saw quantized (bit op) and the GEMMs
 * it saw rounded (bit 8 + g); the head is layer -1. */
enum { MAX_PROJ = 8 + 3 * 3 };
typedef struct {
  unsigned seen[4][MAX_PROJ];
  ufp4_grid_id grid[4][MAX_PROJ];
} record;

static void on_operand(void *ud, int layer, int proj, ufp4_operand op, const float *x, size_t rows, size_t cols,
                       const ufp4_qformat *f) {
  (void)x, (void)rows, (void)cols;
  record *r = ud;
  r->seen[layer + 1][proj] |= 1u << op;
  r->grid[layer + 1][proj] = f->grid;
}

static void on_gemm(void *ud, int layer, int proj, ufp4_gemm_kind g, const float *exact, const float *rounded,
                    size_t n) {
  (void)exact, (void)rounded, (void)n;
  record *r = ud;
  r->seen[layer + 1][proj] |= 1u << (8 + g);
}

static void step(ufp4_model *m, const ufp4_model_config *c, double *loss) {
  int32_t tok[B * T], tgt[B * T];
  for (int i = 0; i < B * T; i++) {
    tok[i] = (int32_t)(ufp4_philox_u32(7, 1, (uint64_t)i) % (uint32_t)c->vocab);
    tgt[i] = (int32_t)(ufp4_philox_u32(7, 2, (uint64_t)i) % (uint32_t)c->vocab);
  }
  ufp4_model_zero_grads(m);
  assert_int_equal(ufp4_model_forward(m, tok, tgt, B, T, loss), 0);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
}

#define ALL_OPS 0x3fu
#define GEMM_BITS(mask) ((mask) << 8)
#define FWD_OPS ((1u << UFP4_OP_FPROP_X) | (1u << UFP4_OP_FPROP_W))

/* Under fp32, exactly the named projections are rounded, each GEMM as its override says: o_proj of
 * block 1 in UFP4 (all six operands, E1M2), block 0's down_proj with Fprop in bf16 (rounded, but no
 * operand quantized) and Dgrad and Wgrad in E2M1, expert 1's up_proj of the MoE block in nvfp4,
 * and lm_head in UFP4. */
static void test_named_projections_run_overridden(void **state) {
  (void)state;
  ufp4_model_config c = tiny(2);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 3);
  ufp4_recipe base;
  assert_int_equal(ufp4_recipe_parse("fp32", &base), 0);
  assert_int_equal(ufp4_model_set_recipes(m, &base,
                                          "model.layers.1.self_attn.o_proj=ufp4;"
                                          "model.layers.0.mlp.down_proj=e2m1,fprop=bf16;"
                                          "model.layers.1.mlp.experts.1.up_proj=nvfp4;lm_head=ufp4",
                                          1),
                   0);
  record rec;
  memset(&rec, 0, sizeof rec);
  const ufp4_linear_probe probe = {on_operand, on_gemm, &rec};
  ufp4_model_set_probe(m, &probe);
  double loss;
  step(m, &c, &loss);
  const int up1 = UFP4_PROJ_EXPERT(1, 1);
  /* The MoE block routes top-1 over two experts: expert 1 gets tokens for this batch or the test
   * says nothing about it. */
  ufp4_moe_stats st;
  assert_int_equal(ufp4_model_moe_stats(m, 1, &st), 0);
  assert_true(st.admitted[1] > 0);
  for (int l = -1; l < 2; l++)
    for (int p = 0; p < MAX_PROJ; p++) {
      unsigned want = 0;
      if (l == 1 && p == UFP4_PROJ_O) want = ALL_OPS | GEMM_BITS(7u);
      if (l == 0 && p == UFP4_PROJ_DOWN) want = (ALL_OPS & ~FWD_OPS) | GEMM_BITS(7u);
      if (l == 1 && p == up1) want = ALL_OPS | GEMM_BITS(7u);
      if (l == -1 && p == UFP4_PROJ_HEAD) want = ALL_OPS | GEMM_BITS(7u);
      if (rec.seen[l + 1][p] != want) fail_msg("layer %d proj %d: seen %#x, want %#x", l, p, rec.seen[l + 1][p], want);
    }
  assert_int_equal(rec.grid[2][UFP4_PROJ_O], UFP4_GRID_E1M2);
  assert_int_equal(rec.grid[1][UFP4_PROJ_DOWN], UFP4_GRID_E2M1);
  assert_int_equal(rec.grid[0][UFP4_PROJ_HEAD], UFP4_GRID_E1M2);
  /* The head's quantization changes the loss; the same model with every override spelled fp32
   * gives the plain fp32 loss bit for bit. */
  ufp4_model_set_probe(m, NULL);
  double quantized;
  step(m, &c, &quantized);
  assert_true(quantized == loss);
  assert_int_equal(ufp4_model_set_recipes(m, &base, "*=fp32", 1), 0);
  double all32, plain;
  step(m, &c, &all32);
  assert_int_equal(ufp4_model_set_recipe(m, &base, 1), 0);
  step(m, &c, &plain);
  assert_true(all32 == plain);
  assert_true(quantized != plain);
  assert_int_equal(ufp4_model_set_recipes(m, &base, "lm_head=ufp4", 1), 0);
  double head_only;
  step(m, &c, &head_only);
  assert_true(head_only != plain);
  ufp4_model_free(m);
}

/* keep_last as a recipe key and as the override it stands for give the same bits, and a bad
 * override leaves the model's recipes as they were. */
static void test_keep_is_sugar(void **state) {
  (void)state;
  ufp4_model_config c = tiny(0);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 4);
  ufp4_recipe kept, plain;
  assert_int_equal(ufp4_recipe_parse("ufp4,keep_last=1", &kept), 0);
  assert_int_equal(ufp4_recipe_parse("ufp4", &plain), 0);
  double a, b, q, again;
  assert_int_equal(ufp4_model_set_recipe(m, &kept, 9), 0);
  step(m, &c, &a);
  assert_int_equal(ufp4_model_set_recipes(m, &plain, "model.layers.1.*=fp32", 9), 0);
  step(m, &c, &b);
  assert_true(a == b);
  assert_int_equal(ufp4_model_set_recipe(m, &plain, 9), 0);
  step(m, &c, &q);
  assert_true(q != a);
  assert_int_equal(ufp4_model_set_recipes(m, &plain, "model.layers.9.*=fp32", 9), UFP4_EINVAL);
  step(m, &c, &again);
  assert_true(again == q);
  ufp4_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_keys_and_partial_specs),
      cmocka_unit_test(test_format),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_last_match_wins),
      cmocka_unit_test(test_bad_overrides),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_named_projections_run_overridden),
      cmocka_unit_test(test_keep_is_sugar),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
