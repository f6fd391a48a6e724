/* The hf-nvfp4 and hf-mxfp4 exports (export_hf.h) of a tiny model built here: loading an exported
 * folder back (ufp4_model_load, `ufp4 eval`) gives the model whose projections are ufp4's own
 * quantizer output decoded as the engines do, bit for bit; an independent reader in Python
 * (tests/export_hf_reader.py, numpy only) decodes the files from the documented layout and gets
 * the same tensors; recipes whose forward format the target holds export exactly, others report
 * the conversion SQNR; malformed folders fail naming the file and the tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_test_util.h"
#include "cli_fixture.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/export_hf.h"
#include "ufp4/fileio.h"
#include "ufp4/minifloat.h"
#include "ufp4/model_io.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/safetensors.h"

enum { L = 2, D = 32, T = 16, VOCAB = 256, N_WINDOWS = 8 };

static char work[] = "/tmp/ufp4_export_hf_XXXXXX";
static char ckpt[256], shard[256];

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(work)) return -1;
  snprintf(ckpt, sizeof ckpt, "%s/ckpt", work);
  snprintf(shard, sizeof shard, "%s/val.tok", work);
  ufp4_model_config c = ckpt_tiny_config(L, D, T, VOCAB);
  return ckpt_write_tiny(work, &c, 7, N_WINDOWS);
}

static int teardown(void **state) {
  (void)state;
  ufp4_remove_tree(work);
  return 0;
}

static ufp4_model *load(const char *dir) {
  ufp4_model *m;
  int rc = ufp4_model_load(dir, "fp32", 2, &m);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  return m;
}

/* E2M1 by its definition (OCP MX v1.0 table), apart from the library's grid code. */
static float e2m1_value(uint8_t c) {
  const float mag = (c & 7) < 4 ? 0.5f * (float)(c & 7) : (float)(1 << ((c & 7) / 2 - 1)) * ((c & 1) ? 1.5f : 1.0f);
  return c & 8 ? -mag : mag;
}

/* The checkpoint's model with every projection replaced by ufp4_quantize's codes and scales under
 * f, decoded by the engine rule: NVFP4 code * (float(d) * (1/S_enc)) (ModelOpt's dequantize, with
 * weight_scale_2 = 1/S_enc in fp32), MXFP4 code * 2^(e - 127). Counts, for NVFP4, the elements
 * where that differs from ufp4_dequantize (code * (d / S_enc)), which must be within one ulp. */
static ufp4_model *reference(const ufp4_qformat *f, long *differ) {
  ufp4_model *m = load(ckpt);
  const ufp4_model_config *c = ufp4_model_get_config(m);
  float *p = ufp4_model_params(m);
  *differ = 0;
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (t.ndim != 2 || !strstr(t.name, "_proj.")) continue;
    const size_t R = t.shape[0], C = t.shape[1], bw = f->tile2d ? 16 : (size_t)f->block, nb = C / bw;
    ufp4_qtensor q;
    assert_int_equal(ufp4_quantize(f, p + t.offset, R, C, &q), 0);
    float *own = malloc(sizeof(float) * R * C);
    ufp4_dequantize(&q, own);
    for (size_t r = 0; r < R; r++)
      for (size_t k = 0; k < C; k++) {
        const size_t sb = f->tile2d ? (r / 16) * nb + k / bw : r * nb + k / bw, i2 = r * C + k;
        const float s = f->scale == UFP4_SCALE_NVFP4 ? ufp4_e4m3_to_f32(q.scale_bits[sb]) * (1.0f / q.tensor_scale)
                                                     : ldexpf(1.0f, (int)q.scale_bits[sb] - 127);
        const float v = e2m1_value(q.codes[i2]) * s;
        if (v != own[i2]) {
          ++*differ;
          assert_true(fabsf(v - own[i2]) <= ldexpf(fabsf(own[i2]), -22));
        }
        p[t.offset + i2] = v;
      }
    free(own);
    ufp4_qtensor_free(&q);
  }
  return m;
}

static ufp4_qformat fmt_of(ufp4_scale_kind s, int block, int tile2d) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = UFP4_GRID_E2M1;
  f.scale = s;
  f.block = block;
  f.tile2d = tile2d;
  return f;
}

static void assert_same_params(ufp4_model *a, ufp4_model *b) {
  assert_int_equal(ufp4_model_num_params(a), ufp4_model_num_params(b));
  assert_memory_equal(ufp4_model_params(a), ufp4_model_params(b), ufp4_model_num_params(a) * sizeof(float));
}

/* Exports in fmt (opts o), checks the loaded folder against the reference of qf bit for bit, and
 * saves the reference as checkpoint DIR/NAME.ref for the Python reader and the CLI. */
static void round_trip(ufp4_hf_format fmt, const ufp4_hf_export_opts *o, ufp4_qformat qf, const char *name,
                       ufp4_hf_export_result *res) {
  char out[512], ref[512];
  snprintf(out, sizeof out, "%s/%s", work, name);
  snprintf(ref, sizeof ref, "%s/%s.ref", work, name);
  int rc = ufp4_export_hf(ckpt, fmt, out, o, res);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  assert_int_equal(res->n_quantized, 7 * L);
  assert_int_equal(res->n_kept, 2); /* embed_tokens, lm_head (untied) */
  ufp4_hf_format got;
  assert_int_equal(ufp4_hf_detect(out, &got), 0);
  assert_int_equal(got, fmt);
  long differ;
  ufp4_model *want = reference(&qf, &differ), *m = load(out);
  assert_same_params(m, want);
  if (fmt == UFP4_HF_MXFP4) assert_int_equal(differ, 0);
  fprintf(stderr, "%s: %s, SQNR %.2f dB, %ld of the elements differ from ufp4_dequantize by one ulp\n", name,
          res->qformat, res->sqnr_db, differ);
  assert_int_equal(ufp4_checkpoint_save(ref, want, NULL, NULL, NULL), 0);
  ufp4_eval_result a, b;
  assert_int_equal(ufp4_eval_checkpoint(out, shard, "fp32", NULL, 4, 2, &a), 0);
  assert_int_equal(ufp4_eval_checkpoint(ref, shard, "fp32", NULL, 4, 2, &b), 0);
  assert_true(a.loss == b.loss);
  ufp4_model_free(m);
  ufp4_model_free(want);
}

static void test_nvfp4_round_trip(void **state) {
  (void)state;
  ufp4_hf_export_result res;
  round_trip(UFP4_HF_NVFP4, NULL, fmt_of(UFP4_SCALE_NVFP4, 16, 0), "nvfp4", &res);
  assert_int_equal(res.exact, 0);
  assert_true(isnan(res.conversion_sqnr_db));
  assert_true(res.sqnr_db > 10 && res.sqnr_db < 40);
}

static void test_mxfp4_round_trip(void **state) {
  (void)state;
  ufp4_hf_export_result res;
  round_trip(UFP4_HF_MXFP4, NULL, fmt_of(UFP4_SCALE_E8M0_FLOOR, 32, 0), "mxfp4", &res);
  ufp4_hf_export_opts o = {.mx_scale = UFP4_SCALE_E8M0_RCEIL};
  round_trip(UFP4_HF_MXFP4, &o, fmt_of(UFP4_SCALE_E8M0_RCEIL, 32, 0), "mxfp4_rceil", &res);
}

/* The nvfp4 recipe's forward weights are 16x16 tiles: exported exactly (codes and tile scales),
 * and the conversion SQNR against ufp4_fake_quant's weights is beyond what fp32 rounding of the
 * scale product can cost. */
static void test_recipe_exact(void **state) {
  (void)state;
  ufp4_hf_export_result res;
  ufp4_hf_export_opts o = {.recipe = "nvfp4"};
  round_trip(UFP4_HF_NVFP4, &o, fmt_of(UFP4_SCALE_NVFP4, 16, 16), "nvfp4_tiles", &res);
  assert_int_equal(res.exact, 1);
  assert_string_equal(res.qformat, "e2m1,nvfp4,16x16,rne");
  fprintf(stderr, "nvfp4 recipe -> hf-nvfp4: conversion SQNR %.1f dB\n", res.conversion_sqnr_db);
  assert_true(res.conversion_sqnr_db > 120);
  o.recipe = "mxfp4";
  round_trip(UFP4_HF_MXFP4, &o, fmt_of(UFP4_SCALE_E8M0_FLOOR, 32, 0), "mxfp4_recipe", &res);
  assert_int_equal(res.exact, 1);
  assert_true(isinf(res.conversion_sqnr_db));
}

/* 10 log10(sum ref^2 / sum (ref - x)^2) over the projections, by hand. */
static double conversion_by_hand(const ufp4_qformat *recipe_f, ufp4_model *exported) {
  ufp4_model *m = load(ckpt);
  const ufp4_model_config *c = ufp4_model_get_config(m);
  double sig = 0, err = 0;
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (t.ndim != 2 || !strstr(t.name, "_proj.")) continue;
    float *ref = malloc(sizeof(float) * t.count);
    assert_int_equal(ufp4_fake_quant(recipe_f, ufp4_model_params(m) + t.offset, ref, t.shape[0], t.shape[1]), 0);
    const float *x = ufp4_model_params(exported) + t.offset;
    for (size_t k = 0; k < t.count; k++) {
      sig += (double)ref[k] * ref[k];
      err += ((double)ref[k] - x[k]) * ((double)ref[k] - x[k]);
    }
    free(ref);
  }
  ufp4_model_free(m);
  return 10 * log10(sig / err);
}

/* The e2m1 recipe (FP32 block scales) is not NVFP4: the export requantizes and reports the SQNR
 * against the recipe's forward weights; the ufp4 recipe rotates its weights with an RHT whose
 * signs the checkpoint does not hold, so that SQNR is unknown (NaN). */
static void test_recipe_conversion(void **state) {
  (void)state;
  ufp4_hf_export_result res;
  ufp4_hf_export_opts o = {.recipe = "e2m1"};
  round_trip(UFP4_HF_NVFP4, &o, fmt_of(UFP4_SCALE_NVFP4, 16, 0), "nvfp4_from_e2m1", &res);
  assert_int_equal(res.exact, 0);
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("e2m1", &r), 0);
  ufp4_qformat rf = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_W);
  char out[512];
  snprintf(out, sizeof out, "%s/nvfp4_from_e2m1", work);
  ufp4_model *m = load(out);
  const double want = conversion_by_hand(&rf, m);
  fprintf(stderr, "e2m1 -> hf-nvfp4: conversion SQNR %.3f dB (by hand %.3f)\n", res.conversion_sqnr_db, want);
  assert_true(fabs(res.conversion_sqnr_db - want) < 1e-9);
  assert_true(isfinite(want) && want > 10);
  ufp4_model_free(m);
  o.recipe = "ufp4";
  round_trip(UFP4_HF_NVFP4, &o, fmt_of(UFP4_SCALE_NVFP4, 16, 0), "nvfp4_from_ufp4", &res);
  assert_int_equal(res.exact, 0);
  assert_true(isnan(res.conversion_sqnr_db));
}

/* A run with per-projection overrides. Block 1's MLP in nvfp4-4over6 on an nvfp4 run: exact, with
 * both formats, each projection bit for bit the reference of the format it trained with. Block 0
 * in bf16: not exact, the conversion SQNR now counting block 0's 4-bit error against its bf16
 * weights; with block 0 excluded as well, exact again. A pattern matching nothing is refused. */
static void test_recipe_overrides(void **state) {
  (void)state;
  char out[512];
  ufp4_hf_export_result res;
  ufp4_hf_export_opts o = {.recipe = "nvfp4", .overrides = "model.layers.1.mlp.*=nvfp4-4over6"};
  snprintf(out, sizeof out, "%s/mixed", work);
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), 0);
  assert_int_equal(res.exact, 1);
  assert_true(res.run_fp4 && res.held == 7 * L && res.kept_quantized == 0);
  assert_string_equal(res.qformat, "e2m1,nvfp4,16x16,rne and others, by projection");
  ufp4_recipe r;
  assert_int_equal(ufp4_recipe_parse("nvfp4-4over6", &r), 0);
  const ufp4_qformat f46 = ufp4_recipe_operand_format(&r, UFP4_OP_FPROP_W);
  const ufp4_qformat tiles = fmt_of(UFP4_SCALE_NVFP4, 16, 16);
  long differ;
  ufp4_model *m = load(out), *plain = reference(&tiles, &differ), *four = reference(&f46, &differ);
  const ufp4_model_config *c = ufp4_model_get_config(m);
  int n46 = 0, n_plain = 0;
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (t.ndim != 2 || !strstr(t.name, "_proj.")) continue;
    const int is46 = strstr(t.name, "layers.1.mlp.") != NULL;
    const float *want = ufp4_model_params(is46 ? four : plain) + t.offset, *other = ufp4_model_params(is46 ? plain : four) + t.offset;
    assert_memory_equal(ufp4_model_params(m) + t.offset, want, t.count * sizeof(float));
    if (is46) n46 += memcmp(want, other, t.count * sizeof(float)) != 0;
    else n_plain++;
  }
  assert_int_equal(n_plain, 7 * L - 3);
  assert_true(n46 > 0); /* 4/6 chose 4 somewhere, so the two formats are told apart */
  ufp4_model_free(m), ufp4_model_free(plain), ufp4_model_free(four);

  o.overrides = "model.layers.0.*=bf16";
  snprintf(out, sizeof out, "%s/bf16_block0", work);
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), 0);
  assert_int_equal(res.exact, 0);
  assert_true(res.run_fp4 && res.held == 7 && res.kept_quantized == 7);
  assert_string_equal(res.qformat, "e2m1,nvfp4,16x16,rne");
  assert_true(res.conversion_sqnr_db > 10 && res.conversion_sqnr_db < 60);
  /* block 0's reference is its bf16-rounded weights: the same export judged against fp32 ones differs */
  const double bf16_db = res.conversion_sqnr_db;
  o.overrides = "model.layers.0.*=fp32";
  snprintf(out, sizeof out, "%s/fp32_block0", work);
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), 0);
  assert_true(res.conversion_sqnr_db != bf16_db && fabs(res.conversion_sqnr_db - bf16_db) < 1.0);
  o.overrides = "model.layers.0.*=bf16";
  const char *pats[] = {"lm_head", "model.embed_tokens", "model.layers.0.*"};
  o.exclude = pats, o.n_exclude = 3;
  snprintf(out, sizeof out, "%s/bf16_block0_x", work);
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), 0);
  assert_int_equal(res.exact, 1);
  assert_true(res.conversion_sqnr_db > 120);

  o.overrides = "model.layers.9.*=bf16";
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "model.layers.9.*=bf16"));
}

/* An exclude list decides which projections stay fp32, and is what the configs list. */
static void test_exclude(void **state) {
  (void)state;
  char out[512], path[600];
  snprintf(out, sizeof out, "%s/excl", work);
  const char *pats[] = {"lm_head", "model.embed_tokens", "*.mlp.down_proj", "model.layers.1.*"};
  ufp4_hf_export_opts o = {.exclude = pats, .n_exclude = 4};
  ufp4_hf_export_result res;
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res), 0);
  assert_int_equal(res.n_quantized, 6); /* layer 0 less down_proj */
  assert_int_equal(res.n_kept, 2 + 1 + 7);
  ufp4_model *m = load(out), *orig = load(ckpt);
  const ufp4_model_config *c = ufp4_model_get_config(m);
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    const int same = !memcmp(ufp4_model_params(m) + t.offset, ufp4_model_params(orig) + t.offset, t.count * sizeof(float));
    const int quant = t.ndim == 2 && strstr(t.name, "layers.0.") && strstr(t.name, "_proj") && !strstr(t.name, "down_proj");
    assert_int_equal(same, !quant);
  }
  ufp4_model_free(m);
  ufp4_model_free(orig);
  snprintf(path, sizeof path, "%s/hf_quant_config.json", out);
  char *text;
  size_t len;
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &len), 0);
  assert_non_null(strstr(text, "\"model.layers.1.*\""));
  assert_non_null(strstr(text, "\"quant_algo\":\t\"NVFP4\""));
  free(text);
  /* A projection whose width is not a multiple of the block is refused by name. */
  ufp4_model_config c2 = ckpt_tiny_config(1, 48, T, VOCAB);
  ufp4_model *m2;
  assert_int_equal(ufp4_model_create(&m2, &c2, 1), 0);
  ufp4_model_init(m2, 1);
  snprintf(out, sizeof out, "%s/bad48", work);
  assert_int_equal(ufp4_export_hf_model(m2, UFP4_HF_MXFP4, out, NULL, NULL), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "model.layers.0.self_attn.q_proj.weight: 48 columns"));
  ufp4_model_free(m2);
}

static const float *param(ufp4_model *m, const char *name) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (!strcmp(t.name, name)) return ufp4_model_params(m) + t.offset;
  }
  fail_msg("no tensor %s", name);
  return NULL;
}

static float file_scalar(const ufp4_st *st, const char *name) {
  const ufp4_st_info *t = ufp4_st_find(st, name);
  assert_non_null(t);
  assert_int_equal(t->dtype, UFP4_ST_F32);
  assert_int_equal(t->ndim, 0);
  float v;
  memcpy(&v, t->data, sizeof v);
  return v;
}

/* Calibrated input_scale: the first block's q, k and v read RMSNorm(embedding) of the tokens, whose
 * amax is computed here by hand from the shard's ids; every projection gets a measured value. */
static void test_calibration(void **state) {
  (void)state;
  enum { CB = 2, CBATCHES = 2 };
  char out[512], path[600];
  snprintf(out, sizeof out, "%s/nvfp4_cal", work);
  ufp4_hf_export_opts o = {.calib_data = shard, .calib_batches = CBATCHES, .calib_batch = CB};
  ufp4_hf_export_result res;
  int rc = ufp4_export_hf(ckpt, UFP4_HF_NVFP4, out, &o, &res);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  assert_int_equal(res.n_calibrated, 7 * L);
  ufp4_model *m = load(ckpt);
  const ufp4_model_config *c = ufp4_model_get_config(m);
  const float *emb = param(m, "model.embed_tokens.weight"), *g = param(m, "model.layers.0.input_layernorm.weight");
  double amax = 0;
  for (int w = 0; w < CB * CBATCHES; w++)
    for (int p = 0; p < T; p++) {
      const int id = (int)(((size_t)w * (T + 1) + (size_t)p) * 37 + 11) % VOCAB;
      double ss = 0;
      for (int k = 0; k < D; k++) ss += (double)emb[id * D + k] * emb[id * D + k];
      const double inv = 1.0 / sqrt(ss / D + c->rms_eps);
      for (int k = 0; k < D; k++) amax = fmax(amax, fabs(emb[id * D + k] * inv * g[k]));
    }
  ufp4_model_free(m);
  snprintf(path, sizeof path, "%s/model.safetensors", out);
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(path, &st), 0);
  const float q = file_scalar(st, "model.layers.0.self_attn.q_proj.input_scale");
  fprintf(stderr, "calibrated layer-0 q input_scale %.9g = amax %.9g / 2688 (by hand %.9g)\n", q, q * 2688.0, amax);
  assert_true(fabs(q * 2688.0 - amax) <= 1e-5 * amax);
  assert_true(q == file_scalar(st, "model.layers.0.self_attn.k_proj.input_scale"));
  assert_true(q == file_scalar(st, "model.layers.0.self_attn.v_proj.input_scale"));
  static const char *const mods[] = {"self_attn.o_proj", "mlp.gate_proj", "mlp.down_proj"};
  for (int l = 0; l < L; l++)
    for (int i = 0; i < 3; i++) {
      char name[128];
      snprintf(name, sizeof name, "model.layers.%d.%s.input_scale", l, mods[i]);
      const float v = file_scalar(st, name);
      assert_true(v > 0 && v < 0.5f && v != q);
    }
  ufp4_st_close(st);
}

/* An MoE model (Qwen2-MoE layout, a shared expert): every expert's projections are 4-bit under
 * their own names, routers and the shared-expert gate stay fp32 by default; loading back gives
 * ufp4_dequantize's weights (MXFP4 decodes exactly) and the originals elsewhere. */
static void test_moe(void **state) {
  (void)state;
  ufp4_model_config c = ckpt_tiny_config(2, D, T, VOCAB);
  c.moe_experts = 4;
  c.moe_top_k = 2;
  c.moe_ffn = 32;
  c.moe_shared_ffn = 32;
  ufp4_model_config_resolve(&c);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, 1), 0);
  ufp4_model_init(m, 5);
  char out[512];
  snprintf(out, sizeof out, "%s/moe_mx", work);
  ufp4_hf_export_result res;
  int rc = ufp4_export_hf_model(m, UFP4_HF_MXFP4, out, NULL, &res);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  /* per layer: q k v o, 4 experts x 3, shared expert x 3 */
  assert_int_equal(res.n_quantized, 2 * (4 + 12 + 3));
  ufp4_model *back = load(out);
  const ufp4_qformat f = fmt_of(UFP4_SCALE_E8M0_FLOOR, 32, 0);
  for (int i = 0; i < ufp4_model_tensor_count(&c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&c, i, &t);
    const float *w = ufp4_model_params(m) + t.offset, *got = ufp4_model_params(back) + t.offset;
    if (t.ndim == 2 && strstr(t.name, "_proj.")) {
      ufp4_qtensor q;
      float *want = malloc(sizeof(float) * t.count);
      assert_int_equal(ufp4_quantize(&f, w, t.shape[0], t.shape[1], &q), 0);
      ufp4_dequantize(&q, want);
      assert_memory_equal(got, want, t.count * sizeof(float));
      ufp4_qtensor_free(&q);
      free(want);
    } else {
      assert_memory_equal(got, w, t.count * sizeof(float));
    }
  }
  ufp4_model_free(back);

  /* Under a recipe, with one routed expert of layer 1 trained in bf16 (experts are projections
   * with names of their own): the other experts, the shared expert and attention hold the run's
   * codes, that expert's three are requantized from its bf16-trained weights, and the routers,
   * which are no projections, stay as they are. The file is the same bits as without the recipe
   * (the mxfp4 recipe's weight format is the target's), and the conversion SQNR counts the
   * requantized expert against its bf16-rounded weights: finite, not exact. */
  ufp4_hf_export_opts o = {.recipe = "mxfp4", .overrides = "model.layers.1.mlp.experts.2.*=bf16"};
  snprintf(out, sizeof out, "%s/moe_mx_recipe", work);
  rc = ufp4_export_hf_model(m, UFP4_HF_MXFP4, out, &o, &res);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  assert_int_equal(res.n_quantized, 2 * (4 + 12 + 3));
  assert_true(res.run_fp4);
  assert_int_equal(res.held, 2 * (4 + 12 + 3) - 3);
  assert_int_equal(res.kept_quantized, 3);
  assert_int_equal(res.exact, 0);
  assert_true(isfinite(res.conversion_sqnr_db) && res.conversion_sqnr_db > 10 && res.conversion_sqnr_db < 120);
  char plain[512];
  snprintf(plain, sizeof plain, "%s/moe_mx", work);
  ufp4_model *a = load(plain), *b = load(out);
  assert_same_params(a, b);
  ufp4_model_free(a);
  ufp4_model_free(b);
  /* Without the override every 4-bit tensor holds the run's codes. */
  o.overrides = NULL;
  snprintf(out, sizeof out, "%s/moe_mx_recipe_all", work);
  assert_int_equal(ufp4_export_hf_model(m, UFP4_HF_MXFP4, out, &o, &res), 0);
  assert_int_equal(res.held, 2 * (4 + 12 + 3));
  assert_int_equal(res.kept_quantized, 0);
  assert_int_equal(res.exact, 1);
  assert_true(isinf(res.conversion_sqnr_db));
  /* An override naming an expert the model lacks is refused. */
  o.overrides = "model.layers.1.mlp.experts.7.*=bf16";
  assert_int_equal(ufp4_export_hf_model(m, UFP4_HF_MXFP4, out, &o, &res), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "experts.7"));
  ufp4_model_free(m);
}

/* The reader in Python decodes each export from the layout alone and compares with the reference
 * checkpoints written by the round trips (run after them: cmocka keeps the order). */
static void test_python_reader(void **state) {
  (void)state;
  const char *src = getenv("UFP4_SOURCE_DIR");
  char out[1 << 14];
  static const char *const names[] = {"nvfp4", "mxfp4", "mxfp4_rceil", "nvfp4_tiles", "mxfp4_recipe"};
  for (int i = 0; i < 5; i++) {
    int rc = cli_run(out, sizeof out, "/usr/bin/python3 %s/tests/export_hf_reader.py %s/%s %s/%s.ref", src ? src : ".",
                     work, names[i], work, names[i]);
    fprintf(stderr, "%s", out);
    if (rc == 77) skip();
    assert_int_equal(rc, 0);
  }
  /* The reader does tell files apart: the 1x16 NVFP4 export is not the 16x16-tile reference. */
  int rc = cli_run(out, sizeof out, "/usr/bin/python3 %s/tests/export_hf_reader.py %s/nvfp4 %s/nvfp4_tiles.ref",
                   src ? src : ".", work, work);
  fprintf(stderr, "%s", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "MISMATCH model.layers.0.self_attn.q_proj.weight"));
}

/* `ufp4 eval` and `ufp4 sample` on an export print what they print for the reference checkpoint. */
static void test_cli_eval(void **state) {
  (void)state;
  const char *cli = getenv("UFP4_CLI");
  if (!cli) skip();
  char a[4096], b[4096];
  static const char *const names[] = {"nvfp4", "mxfp4"};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cli_run(a, sizeof a, "%s eval --checkpoint %s/%s --data %s --batches 4 --batch 2", cli, work, names[i], shard), 0);
    assert_int_equal(cli_run(b, sizeof b, "%s eval --checkpoint %s/%s.ref --data %s --batches 4 --batch 2", cli, work, names[i], shard), 0);
    assert_non_null(strstr(a, "loss "));
    assert_string_equal(strstr(a, "loss "), strstr(b, "loss "));
    /* `ufp4 sample` too: greedy text of the export is that of the reference. */
    const char *sample = "%s sample --checkpoint %s/%s%s --tokenizer bytes --prompt 'ab' --tokens 12 --temperature 0";
    assert_int_equal(cli_run(a, sizeof a, sample, cli, work, names[i], ""), 0);
    assert_int_equal(cli_run(b, sizeof b, sample, cli, work, names[i], ".ref"), 0);
    assert_true(strlen(a) >= 2);
    assert_string_equal(a, b);
  }
}

/* Rewrites DIR/model.safetensors with tensor `victim` dropped (dtype NDTYPES) or retyped. */
static void rewrite(const char *dir, const char *victim, ufp4_st_dtype dtype) {
  char path[600];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(path, &st), 0);
  size_t n = ufp4_st_count(st), k = 0;
  ufp4_st_tensor *ts = calloc(n, sizeof *ts);
  char **names = calloc(n, sizeof *names);
  void **data = calloc(n, sizeof *data);
  for (size_t i = 0; i < n; i++) {
    const ufp4_st_info *t = ufp4_st_at(st, i);
    const int hit = !strcmp(t->name, victim);
    if (hit && dtype == UFP4_ST_NDTYPES) continue;
    names[k] = strdup(t->name);
    data[k] = malloc(t->nbytes + 1);
    memcpy(data[k], t->data, t->nbytes);
    ts[k] = (ufp4_st_tensor){.name = names[k], .dtype = hit ? dtype : t->dtype, .src = UFP4_ST_SRC_RAW, .ndim = t->ndim, .data = data[k]};
    memcpy(ts[k].shape, t->shape, sizeof ts[k].shape);
    k++;
  }
  const ufp4_st_meta meta[] = {{"format", "pt"}};
  ufp4_st_close(st);
  assert_int_equal(ufp4_st_write(path, ts, k, meta, 1), 0);
  for (size_t i = 0; i < k; i++) free(names[i]), free(data[i]);
  free(ts);
  free(names);
  free(data);
}

static void expect_load_error(const char *dir, const char *want1, const char *want2) {
  ufp4_model *m;
  assert_int_not_equal(ufp4_model_load(dir, "fp32", 1, &m), 0);
  fprintf(stderr, "  expected error: %s\n", ufp4_last_error());
  assert_non_null(strstr(ufp4_last_error(), want1));
  assert_non_null(strstr(ufp4_last_error(), want2));
}

static void test_malformed(void **state) {
  (void)state;
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/broken", work);
  ufp4_hf_export_opts none = {0};
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_NVFP4, dir, &none, NULL), 0);
  rewrite(dir, "model.layers.0.self_attn.k_proj.weight_scale", UFP4_ST_U8);
  expect_load_error(dir, "model.safetensors: tensor model.layers.0.self_attn.k_proj.weight_scale has dtype U8", "F8_E4M3");
  rewrite(dir, "model.layers.0.self_attn.k_proj.weight_scale", UFP4_ST_NDTYPES);
  expect_load_error(dir, "model.safetensors: tensor model.layers.0.self_attn.k_proj.weight_scale is missing", "");
  /* Truncated: the last byte of the file gone. */
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_MXFP4, dir, &none, NULL), 0);
  char *text;
  size_t len;
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &len), 0);
  assert_int_equal(ufp4_write_file_atomic(path, text, len - 1), 0);
  free(text);
  expect_load_error(dir, "model.safetensors", "");
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_MXFP4, dir, &none, NULL), 0);
  rewrite(dir, "model.layers.1.mlp.up_proj.weight_blocks", UFP4_ST_I8);
  expect_load_error(dir, "tensor model.layers.1.mlp.up_proj.weight_blocks has dtype I8", "expected U8");
  /* A quantization this loader does not know. */
  assert_int_equal(ufp4_export_hf(ckpt, UFP4_HF_MXFP4, dir, &none, NULL), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  assert_int_equal(ufp4_read_file(path, 1 << 20, &text, &len), 0);
  char *at = strstr(text, "\"mxfp4\"");
  assert_non_null(at);
  memcpy(at, "\"awq!!\"", 7);
  assert_int_equal(ufp4_write_file_atomic(path, text, len), 0);
  free(text);
  expect_load_error(dir, "config.json: quantization_config.quant_method \"awq!!\" is not supported", "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvfp4_round_trip),  cmocka_unit_test(test_mxfp4_round_trip),
      cmocka_unit_test(test_recipe_exact),      cmocka_unit_test(test_recipe_conversion),
      cmocka_unit_test(test_recipe_overrides),
      cmocka_unit_test(test_exclude),           cmocka_unit_test(test_calibration),
      cmocka_unit_test(test_moe),
      cmocka_unit_test(test_python_reader),
      cmocka_unit_test(test_cli_eval),          cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
