/* The 4-bit Hugging Face layouts: export_hf.h, docs/EXPORT.md (Hugging Face formats). */
#include "ufp4/export_hf.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_file.h"
#include "training/ckpt_internal.h"
#include "training/model_io_internal.h"
#include "training/path.h"
#include "training/proj_recipes.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/minifloat.h"
#include "ufp4/model_io.h"
#include "ufp4/moe.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/safetensors.h"

const char *const ufp4_hf_default_exclude[] = {"lm_head", "model.embed_tokens", "*.mlp.gate",
                                               "*.mlp.shared_expert_gate", NULL};

int ufp4_hf_format_parse(const char *name, ufp4_hf_format *out) {
  if (name && !strcmp(name, "hf-nvfp4")) *out = UFP4_HF_NVFP4;
  else if (name && !strcmp(name, "hf-mxfp4")) *out = UFP4_HF_MXFP4;
  else return ufp4_fail(UFP4_EINVAL, "unknown Hugging Face 4-bit format \"%s\" (hf-nvfp4, hf-mxfp4)", name ? name : "");
  return 0;
}

const char *ufp4_hf_format_name(ufp4_hf_format f) {
  return f == UFP4_HF_NVFP4 ? "hf-nvfp4" : f == UFP4_HF_MXFP4 ? "hf-mxfp4" : "none";
}

/* ------------------------------------------------------------------ decoding (engine rules) */

/* E2M1 values of the 16 codes (bit 3 sign), the OCP MX table. */
static float e2m1(uint8_t c) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return c & 8 ? -mag[c & 7] : mag[c & 7];
}

/* ModelOpt's NVFP4QTensor.dequantize: per_block_scale = float(weight_scale) * weight_scale_2, then
 * each code's value times its block's scale. packed is [rows][cols/2], bits [rows][cols/16]. */
static void decode_nvfp4(const uint8_t *packed, const uint8_t *bits, float ws2, size_t rows, size_t cols, float *dst) {
  const size_t nb = cols / 16;
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < nb; b++) {
      const float s = ufp4_e4m3_to_f32(bits[r * nb + b]) * ws2;
      for (size_t k = 0; k < 16; k++) {
        const size_t i = r * cols + b * 16 + k;
        dst[i] = e2m1((uint8_t)(packed[i / 2] >> (4 * (i & 1)) & 0xF)) * s;
      }
    }
}

/* transformers' convert_moe_packed_tensors / triton_kernels' upcast_from_mxfp: a code's value
 * times 2^(scale - 127). blocks is [rows][cols/32][16], scales [rows][cols/32]. */
static void decode_mxfp4(const uint8_t *blocks, const uint8_t *scales, size_t rows, size_t cols, float *dst) {
  const size_t nb = cols / 32;
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < nb; b++) {
      const float s = ufp4_e8m0_to_f32(scales[r * nb + b]);
      for (size_t k = 0; k < 32; k++) {
        const size_t i = r * cols + b * 32 + k;
        dst[i] = e2m1((uint8_t)(blocks[i / 2] >> (4 * (i & 1)) & 0xF)) * s;
      }
    }
}

/* ------------------------------------------------------------------ export */

typedef struct {
  ufp4_hf_format fmt;
  ufp4_qformat qf; /* the format of a 4-bit tensor not trained in one the target holds */
  int have_recipe, ref_known;
  ufp4_recipe recipe; /* the run's, and what each projection trained under with its overrides */
  proj_recipes rec;   /* and kept blocks; empty without a recipe */
  int n_formats; /* 0 before the first 4-bit tensor, 1 while all are in one format, then 2 */
  const char *const *exclude;
  int n_exclude;
  float input_scale;
  const float *amax; /* calibrated input amax per (layer, probe id), < 0 unmeasured; or NULL */
  int n_ids, n_experts;
  int n_layers;
  /* buffers the written tensors point into, freed after the write */
  void **bufs;
  size_t n_bufs, cap_bufs;
  double sig, err, ref_sig, ref_err;
  ufp4_hf_export_result res;
} export_job;

static void *keep(export_job *j, size_t bytes) {
  if (j->n_bufs == j->cap_bufs) {
    size_t cap = j->cap_bufs ? 2 * j->cap_bufs : 64;
    void **b = realloc(j->bufs, cap * sizeof *b);
    if (!b) return NULL;
    j->bufs = b;
    j->cap_bufs = cap;
  }
  void *p = calloc(bytes ? bytes : 1, 1);
  if (p) j->bufs[j->n_bufs++] = p;
  return p;
}

/* The module name ("model.layers.0.self_attn.q_proj") of a tensor name ending in ".weight". */
static void module_of(const char *name, char *mod, size_t size) {
  snprintf(mod, size, "%s", name);
  size_t n = strlen(mod);
  if (n > 7 && !strcmp(mod + n - 7, ".weight")) mod[n - 7] = 0;
}

static int excluded(const export_job *j, const char *mod) {
  for (int i = 0; i < j->n_exclude; i++)
    if (fnmatch(j->exclude[i], mod, 0) == 0) return 1;
  return 0;
}

/* "e2m1,nvfp4,16x16,rne", with ",4over6-mse" for Four Over Six. */
static void describe(const ufp4_qformat *f, char *buf, size_t size) {
  int n = snprintf(buf, size, "e2m1,%s,%s,%s", ufp4_scale_name(f->scale), f->tile2d ? "16x16" : f->block == 16 ? "1x16" : "1x32",
                   ufp4_round_name(f->round));
  if (f->adaptive && n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, ",%s-%s", ufp4_adaptive_name(f->adaptive), ufp4_metric_name(f->metric));
}

/* Whether target fmt holds the forward weight format f of a recipe whose sr_mask is sr_mask. */
static int target_holds(ufp4_hf_format fmt, const ufp4_qformat *f, unsigned sr_mask) {
  const int sr = (sr_mask >> UFP4_OP_FPROP_W) & 1;
  return f->grid == UFP4_GRID_E2M1 && f->rht == 0 && !sr &&
         (fmt == UFP4_HF_NVFP4 ? f->scale == UFP4_SCALE_NVFP4 && (f->tile2d == 16 || f->block == 16)
                               : ufp4_scale_is_e8m0(f->scale) && !f->tile2d && f->block == 32);
}

/* Sums for the two SQNRs of one tensor: w the master weights, x the exported ones decoded, r the
 * recipe it trained under. */
static int measure(export_job *j, const char *name, const ufp4_recipe *r, const float *w, const float *x, size_t rows,
                   size_t cols) {
  const size_t n = rows * cols;
  for (size_t i = 0; i < n; i++) {
    j->sig += (double)w[i] * w[i];
    j->err += ((double)w[i] - x[i]) * ((double)w[i] - x[i]);
  }
  if (!j->have_recipe) return 0;
  float *ref = malloc(n * sizeof *ref);
  if (!ref) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", name);
  const int known = proj_forward_weights(r, w, rows, cols, ref);
  if (known < 0) {
    free(ref);
    return known;
  }
  if (!known) {
    j->ref_known = 0;
  } else {
    for (size_t i = 0; i < n; i++) {
      j->ref_sig += (double)ref[i] * ref[i];
      j->ref_err += ((double)ref[i] - x[i]) * ((double)ref[i] - x[i]);
    }
  }
  free(ref);
  return 0;
}

static void entry(ufp4_st_tensor *e, const char *name, ufp4_st_dtype dt, int ndim, size_t d0, size_t d1, size_t d2,
                  const void *data) {
  memset(e, 0, sizeof *e);
  e->name = name;
  e->dtype = dt;
  e->src = UFP4_ST_SRC_RAW;
  e->ndim = ndim;
  e->shape[0] = d0;
  e->shape[1] = d1;
  e->shape[2] = d2;
  e->data = data;
}

static char *name_with(export_job *j, const char *mod, const char *suffix) {
  size_t n = strlen(mod) + strlen(suffix) + 1;
  char *s = keep(j, n);
  if (s) snprintf(s, n, "%s%s", mod, suffix);
  return s;
}

static float *scalar(export_job *j, float v) {
  float *p = keep(j, sizeof v);
  if (p) *p = v;
  return p;
}

/* The probe id (model.h's ufp4_proj, moe.h's UFP4_PROJ_EXPERT) and layer of a module name, or -1. */
static int probe_id(const char *mod, int n_experts, int *layer) {
  static const char *const dense[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
  static const char *const kinds[3] = {"gate_proj", "up_proj", "down_proj"};
  int at = 0, e = 0, n2 = 0;
  if (sscanf(mod, "model.layers.%d.%n", layer, &at) != 1 || at == 0) return -1;
  const char *rest = mod + at;
  for (int i = 0; i < 7; i++)
    if (!strcmp(rest, dense[i])) return i;
  const int shared = !strncmp(rest, "mlp.shared_expert.", 18);
  if (shared) rest += 18, e = n_experts;
  else if (sscanf(rest, "mlp.experts.%d.%n", &e, &n2) == 1 && n2 > 0) rest += n2;
  else return -1;
  for (int k = 0; k < 3; k++)
    if (!strcmp(rest, kinds[k])) return UFP4_PROJ_EXPERT(e, k);
  return -1;
}

/* input_scale of module mod: its calibrated amax / (6 * 448), else the option's value. */
static float input_scale_of(export_job *j, const char *mod) {
  int layer, id = j->amax ? probe_id(mod, j->n_experts, &layer) : -1;
  if (id < 0 || id >= j->n_ids || layer < 0 || layer >= j->n_layers) return j->input_scale;
  const float a = j->amax[(size_t)layer * (size_t)j->n_ids + (size_t)id];
  if (!(a > 0) || !isfinite(a)) return j->input_scale;
  j->res.n_calibrated++;
  return a / (6.0f * UFP4_E4M3_MAX);
}

/* The NVFP4 tensors of one quantized weight: 1x16 scales, or 16x16 tile scales repeated down the
 * 16 rows of each tile (the file has one scale per 1x16 block; the values are the tile's). */
static int emit_nvfp4(export_job *j, const char *mod, const ufp4_qtensor *q, ufp4_st_tensor *out, float *x) {
  const size_t rows = q->rows, cols = q->cols, nb = cols / 16;
  uint8_t *packed = keep(j, rows * cols / 2), *bits = keep(j, rows * nb);
  char *nw = name_with(j, mod, ".weight"), *ns = name_with(j, mod, ".weight_scale");
  char *n2 = name_with(j, mod, ".weight_scale_2"), *ni = name_with(j, mod, ".input_scale");
  float *ws2 = scalar(j, 1.0f / q->tensor_scale), *is = scalar(j, input_scale_of(j, mod));
  if (!packed || !bits || !nw || !ns || !n2 || !ni || !ws2 || !is) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", mod);
  ufp4_pack_codes(q->codes, rows * cols, packed);
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < nb; b++)
      bits[r * nb + b] = q->fmt.tile2d ? q->scale_bits[(r / 16) * nb + b] : q->scale_bits[r * nb + b];
  decode_nvfp4(packed, bits, *ws2, rows, cols, x);
  entry(&out[0], nw, UFP4_ST_U8, 2, rows, cols / 2, 0, packed);
  entry(&out[1], ns, UFP4_ST_F8_E4M3, 2, rows, nb, 0, bits);
  entry(&out[2], n2, UFP4_ST_F32, 0, 0, 0, 0, ws2);
  entry(&out[3], ni, UFP4_ST_F32, 0, 0, 0, 0, is);
  return 0;
}

static int emit_mxfp4(export_job *j, const char *name, const ufp4_qtensor *q, ufp4_st_tensor *out, float *x) {
  const size_t rows = q->rows, cols = q->cols, nb = cols / 32;
  uint8_t *blocks = keep(j, rows * cols / 2), *scales = keep(j, rows * nb);
  char *nb_ = name_with(j, name, "_blocks"), *ns = name_with(j, name, "_scales");
  if (!blocks || !scales || !nb_ || !ns) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", name);
  ufp4_pack_codes(q->codes, rows * cols, blocks);
  memcpy(scales, q->scale_bits, rows * nb);
  decode_mxfp4(blocks, scales, rows, cols, x);
  entry(&out[0], nb_, UFP4_ST_U8, 3, rows, nb, 16, blocks);
  entry(&out[1], ns, UFP4_ST_U8, 2, rows, nb, 0, scales);
  return 0;
}

/* ckpt_replace_fn: 2-D tensors not excluded become their 4-bit encoding. */
static int replace(void *ud, const ufp4_tensor_info *t, const float *w, ufp4_st_tensor *out, int *n) {
  export_job *j = ud;
  *n = 0;
  char mod[UFP4_TENSOR_NAME_MAX];
  module_of(t->name, mod, sizeof mod);
  if (t->ndim != 2 || t->count == 0) return 0;
  if (excluded(j, mod)) {
    j->res.n_kept++;
    return 0;
  }
  const size_t rows = t->shape[0], cols = t->shape[1], blk = j->fmt == UFP4_HF_NVFP4 ? 16 : 32;
  if (cols % blk)
    return ufp4_fail(UFP4_EINVAL, "%s: %zu columns are not a multiple of the %s block of %zu; exclude it (--exclude '%s')",
                     t->name, cols, ufp4_hf_format_name(j->fmt), blk, mod);
  /* The format the run trained this projection with, when the target holds it. */
  const ufp4_recipe *r = proj_recipes_find(&j->rec, mod);
  ufp4_qformat f = j->qf;
  const ufp4_qformat own = r ? ufp4_recipe_operand_format(r, UFP4_OP_FPROP_W) : f;
  const int fp4 = r && ufp4_recipe_gemm_precision(r, UFP4_FPROP) == UFP4_PREC_FP4;
  if (fp4 && target_holds(j->fmt, &own, r->sr_mask)) f = own, j->res.held++;
  else j->res.exact = 0;
  if (r && !fp4) j->res.kept_quantized++;
  char name[96];
  describe(&f, name, sizeof name);
  if (!j->n_formats) j->n_formats = 1;
  else if (strcmp(name, j->res.qformat)) j->n_formats = 2;
  if (j->n_formats == 1) snprintf(j->res.qformat, sizeof j->res.qformat, "%s", name);
  ufp4_qtensor q;
  int rc = ufp4_quantize(&f, w, rows, cols, &q);
  if (rc) return rc;
  float *x = malloc(rows * cols * sizeof *x);
  if (!x) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", t->name);
  if (!rc) rc = j->fmt == UFP4_HF_NVFP4 ? emit_nvfp4(j, mod, &q, out, x) : emit_mxfp4(j, t->name, &q, out, x);
  if (!rc) rc = measure(j, t->name, r, w, x, rows, cols);
  if (!rc) {
    *n = j->fmt == UFP4_HF_NVFP4 ? 4 : 2;
    j->res.n_quantized++;
  }
  free(x);
  ufp4_qtensor_free(&q);
  return rc;
}

/* The default quantizer format: the recipe's forward weight format when the target holds it, else
 * the target's own. With a recipe, the one each projection of model c trained under (its
 * overrides and kept blocks resolved as the trainer does), which replace() uses where the target
 * holds it. */
static int choose_format(export_job *j, const ufp4_hf_export_opts *o, const ufp4_model_config *c) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = UFP4_GRID_E2M1;
  f.round = UFP4_ROUND_RNE;
  if (j->fmt == UFP4_HF_NVFP4) {
    f.scale = UFP4_SCALE_NVFP4;
    f.block = 16;
  } else {
    f.scale = o && o->mx_scale ? (ufp4_scale_kind)o->mx_scale : UFP4_SCALE_E8M0_FLOOR;
    f.block = 32;
    if (!ufp4_scale_is_e8m0(f.scale)) return ufp4_fail(UFP4_EINVAL, "hf-mxfp4: mx_scale must be an E8M0 rule");
  }
  j->qf = f;
  if (!o || !o->recipe) return 0;
  int rc = ufp4_recipe_parse(o->recipe, &j->recipe);
  if (rc) return rc;
  j->have_recipe = 1;
  j->ref_known = 1; /* until a tensor's forward weights lie behind an RHT or SR */
  if ((rc = proj_recipes_resolve(c, &j->recipe, o->overrides, &j->rec))) return rc;
  j->res.run_fp4 = proj_recipes_block_fp4(&j->rec);
  const ufp4_qformat r = ufp4_recipe_operand_format(&j->recipe, UFP4_OP_FPROP_W);
  if (ufp4_recipe_gemm_precision(&j->recipe, UFP4_FPROP) == UFP4_PREC_FP4 && target_holds(j->fmt, &r, j->recipe.sr_mask))
    j->qf = r;
  return 0;
}

static cJSON *string_array(const char *const *s, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
  return a;
}

/* config.json's quantization_config, as ModelOpt's convert_hf_quant_config_format writes it for
 * NVFP4, or as the gpt-oss checkpoints carry it for MXFP4. */
static cJSON *quantization_config(const export_job *j) {
  cJSON *q = cJSON_CreateObject();
  if (j->fmt == UFP4_HF_MXFP4) {
    cJSON_AddItemToObject(q, "modules_to_not_convert", string_array(j->exclude, j->n_exclude));
    cJSON_AddStringToObject(q, "quant_method", "mxfp4");
    return q;
  }
  cJSON *groups = cJSON_AddObjectToObject(q, "config_groups");
  cJSON *g0 = cJSON_AddObjectToObject(groups, "group_0");
  static const char *const kinds[2] = {"input_activations", "weights"};
  for (int k = 0; k < 2; k++) {
    cJSON *a = cJSON_AddObjectToObject(g0, kinds[k]);
    cJSON_AddBoolToObject(a, "dynamic", 0);
    cJSON_AddNumberToObject(a, "num_bits", 4);
    cJSON_AddStringToObject(a, "type", "float");
    cJSON_AddNumberToObject(a, "group_size", 16);
  }
  static const char *const targets[1] = {"Linear"};
  cJSON_AddItemToObject(g0, "targets", string_array(targets, 1));
  cJSON_AddItemToObject(q, "ignore", string_array(j->exclude, j->n_exclude));
  cJSON_AddStringToObject(q, "quant_algo", "NVFP4");
  cJSON *prod = cJSON_AddObjectToObject(q, "producer");
  cJSON_AddStringToObject(prod, "name", "ufp4");
  cJSON_AddStringToObject(q, "quant_method", "modelopt");
  return q;
}

/* hf_quant_config.json, ModelOpt's own file (its "quantization" section is what TensorRT-LLM and
 * vLLM read). */
static cJSON *hf_quant_config(const export_job *j) {
  cJSON *root = cJSON_CreateObject();
  cJSON *prod = cJSON_AddObjectToObject(root, "producer");
  cJSON_AddStringToObject(prod, "name", "ufp4");
  cJSON *q = cJSON_AddObjectToObject(root, "quantization");
  cJSON_AddStringToObject(q, "quant_algo", "NVFP4");
  cJSON_AddNullToObject(q, "kv_cache_quant_algo");
  cJSON_AddNumberToObject(q, "group_size", 16);
  cJSON_AddItemToObject(q, "exclude_modules", string_array(j->exclude, j->n_exclude));
  return root;
}

typedef struct {
  export_job *j;
  ufp4_model *m;
} fill_ctx;

static int write_json(const char *dir, const char *file, cJSON *json) {
  train_path p;
  int rc = train_path_fmt(&p, "%s/%s", dir, file);
  if (!rc) rc = ckpt_write_json(p.s, json);
  cJSON_Delete(json);
  return rc;
}

static int fill_export(void *ud, const char *tmp) {
  fill_ctx *f = ud;
  cJSON *cfg = ckpt_config_json(ufp4_model_get_config(f->m));
  if (cfg) cJSON_AddItemToObject(cfg, "quantization_config", quantization_config(f->j));
  int rc = write_json(tmp, "config.json", cfg);
  if (!rc && f->j->fmt == UFP4_HF_NVFP4) rc = write_json(tmp, "hf_quant_config.json", hf_quant_config(f->j));
  train_path p;
  if (!rc) rc = train_path_fmt(&p, "%s/model.safetensors", tmp);
  if (!rc) rc = ckpt_write_params(p.s, f->m, replace, f->j);
  return rc;
}

static double sqnr(double sig, double err) { return err == 0 ? INFINITY : 10.0 * log10(sig / err); }

static int export_model(ufp4_model *m, ufp4_hf_format fmt, const char *out_dir, const ufp4_hf_export_opts *o,
                        ufp4_hf_export_result *res, const float *amax, int n_ids) {
  if (fmt != UFP4_HF_NVFP4 && fmt != UFP4_HF_MXFP4) return ufp4_fail(UFP4_EINVAL, "export: unknown format %d", (int)fmt);
  export_job *j = calloc(1, sizeof *j);
  if (!j) return ufp4_fail(UFP4_ENOMEM, "export: out of memory");
  j->fmt = fmt;
  j->n_layers = ufp4_model_get_config(m)->n_layers;
  j->n_experts = ufp4_model_get_config(m)->moe_experts;
  j->amax = amax;
  j->n_ids = n_ids;
  j->exclude = o && o->exclude ? o->exclude : ufp4_hf_default_exclude;
  j->n_exclude = o && o->exclude ? o->n_exclude : 0;
  if (!(o && o->exclude))
    while (ufp4_hf_default_exclude[j->n_exclude]) j->n_exclude++;
  j->input_scale = o && o->input_scale > 0 ? o->input_scale : 1.0f;
  int rc = choose_format(j, o, ufp4_model_get_config(m));
  j->res.exact = j->have_recipe; /* replace() clears it */
  fill_ctx f = {j, m};
  if (!rc) rc = ckpt_publish(out_dir, fill_export, &f);
  if (!j->n_formats) describe(&j->qf, j->res.qformat, sizeof j->res.qformat);
  if (j->n_formats > 1) {
    size_t len = strlen(j->res.qformat);
    snprintf(j->res.qformat + len, sizeof j->res.qformat - len, " and others, by projection");
  }
  j->res.sqnr_db = sqnr(j->sig, j->err);
  j->res.conversion_sqnr_db = j->have_recipe && j->ref_known ? sqnr(j->ref_sig, j->ref_err) : NAN;
  if (res) *res = j->res;
  for (size_t i = 0; i < j->n_bufs; i++) free(j->bufs[i]);
  free(j->bufs);
  proj_recipes_free(&j->rec);
  free(j);
  return rc;
}

int ufp4_export_hf_model(ufp4_model *m, ufp4_hf_format fmt, const char *out_dir, const ufp4_hf_export_opts *o,
                         ufp4_hf_export_result *res) {
  return export_model(m, fmt, out_dir, o, res, NULL, 0);
}

/* ------------------------------------------------------------------ calibration */

typedef struct {
  float *amax;
  int n_ids;
  float unscale; /* 1 / the recipe's SR prescale when fprop.x is under SR, else 1 */
} calib;

/* ufp4_linear_probe.operand: the running max |x| of every Fprop input (NaN never wins). */
static void calib_operand(void *ud, int layer, int proj, ufp4_operand op, const float *x, size_t rows, size_t cols,
                          const ufp4_qformat *f) {
  (void)f;
  calib *c = ud;
  if (op != UFP4_OP_FPROP_X || proj < 0 || proj >= c->n_ids) return;
  float *a = &c->amax[(size_t)layer * (size_t)c->n_ids + (size_t)proj];
  float m = *a < 0 ? 0.0f : *a;
  for (size_t i = 0; i < rows * cols; i++) {
    const float v = fabsf(x[i]) * c->unscale;
    if (v > m) m = v;
  }
  *a = m;
}

/* The forward recipe of the calibration: the given one when it quantizes, else nvfp4; no block
 * kept in fp32, so that every projection is shown to the probe. */
static int calib_recipe(const ufp4_hf_export_opts *o, char *spec, size_t size, float *unscale) {
  ufp4_recipe r;
  const char *base = o->recipe && !ufp4_recipe_parse(o->recipe, &r) && r.precision == UFP4_PREC_FP4 ? o->recipe : "nvfp4";
  snprintf(spec, size, "%s,keep_first=0,keep_last=0", base);
  int rc = ufp4_recipe_parse(spec, &r);
  *unscale = !rc && ((r.sr_mask >> UFP4_OP_FPROP_X) & 1) && r.sr_prescale > 0 ? 1.0f / r.sr_prescale : 1.0f;
  return rc;
}

int ufp4_export_hf(const char *ckpt_dir, ufp4_hf_format fmt, const char *out_dir, const ufp4_hf_export_opts *o,
                   ufp4_hf_export_result *res) {
  const int cal = fmt == UFP4_HF_NVFP4 && o && o->calib_data;
  const int B = cal && o->calib_batch > 0 ? o->calib_batch : cal ? 4 : 1;
  char spec[512] = "fp32";
  calib c = {NULL, 0, 1.0f};
  int rc = cal ? calib_recipe(o, spec, sizeof spec, &c.unscale) : 0;
  ufp4_model *m = NULL;
  if (!rc) rc = ufp4_model_load(ckpt_dir, spec, B, &m);
  if (!rc && cal) {
    const ufp4_model_config *mc = ufp4_model_get_config(m);
    c.n_ids = UFP4_PROJ_EXPERT(mc->moe_experts + 1, 0);
    c.amax = malloc(sizeof(float) * (size_t)c.n_ids * (size_t)mc->n_layers);
    if (!c.amax) rc = ufp4_fail(UFP4_ENOMEM, "export: out of memory");
    for (size_t i = 0; !rc && i < (size_t)c.n_ids * (size_t)mc->n_layers; i++) c.amax[i] = -1.0f;
    ufp4_linear_probe probe = {.operand = calib_operand, .ud = &c};
    ufp4_eval_result ev;
    ufp4_model_set_probe(m, &probe);
    if (!rc) rc = model_io_eval(m, o->calib_data, o->calib_batches > 0 ? o->calib_batches : 8, B, &ev);
    ufp4_model_set_probe(m, NULL);
  }
  if (!rc) rc = export_model(m, fmt, out_dir, o, res, c.amax, c.n_ids);
  free(c.amax);
  ufp4_model_free(m);
  return rc;
}

/* ------------------------------------------------------------------ loading */


static const char *str_at(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* NVFP4 with 16-element groups, from ModelOpt's "quantization" section or config.json's
 * quantization_config ("quant_algo" and, where given, "group_size"). */
static int check_nvfp4(const cJSON *q, const char *path) {
  const char *algo = str_at(q, "quant_algo");
  if (!algo || strcmp(algo, "NVFP4"))
    return ufp4_fail(UFP4_EFORMAT, "%s: quant_algo \"%s\" is not supported (ufp4 loads NVFP4)", path, algo ? algo : "(missing)");
  const cJSON *gs = cJSON_GetObjectItemCaseSensitive(q, "group_size");
  if (gs && (!cJSON_IsNumber(gs) || gs->valuedouble != 16))
    return ufp4_fail(UFP4_EFORMAT, "%s: group_size must be 16 for NVFP4", path);
  return 0;
}

int ufp4_hf_detect(const char *dir, ufp4_hf_format *out) {
  *out = UFP4_HF_NONE;
  train_path cfg, hq;
  int rc;
  if ((rc = train_path_fmt(&cfg, "%s/config.json", dir)) || (rc = train_path_fmt(&hq, "%s/hf_quant_config.json", dir)))
    return rc;
  cJSON *c, *h;
  if ((rc = ufp4_json_read_object(cfg.s, 1 << 20, NULL, NULL, &c))) return rc;
  const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "quantization_config");
  if (q && !cJSON_IsNull(q)) {
    const char *method = cJSON_IsObject(q) ? str_at(q, "quant_method") : NULL;
    if (method && !strcmp(method, "mxfp4")) *out = UFP4_HF_MXFP4;
    else if (method && !strcmp(method, "modelopt") && !(rc = check_nvfp4(q, cfg.s))) *out = UFP4_HF_NVFP4;
    else if (!rc)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: quantization_config.quant_method \"%s\" is not supported (ufp4 loads \"modelopt\" NVFP4 and \"mxfp4\")",
                     cfg.s, method ? method : "(missing)");
  }
  cJSON_Delete(c);
  if (rc || *out != UFP4_HF_NONE || access(hq.s, F_OK) != 0) return rc;
  if ((rc = ufp4_json_read_object(hq.s, 1 << 20, NULL, NULL, &h))) return rc;
  const cJSON *sec = cJSON_GetObjectItemCaseSensitive(h, "quantization");
  if (!cJSON_IsObject(sec)) rc = ufp4_fail(UFP4_EFORMAT, "%s: no \"quantization\" object", hq.s);
  else if (!(rc = check_nvfp4(sec, hq.s))) *out = UFP4_HF_NVFP4;
  cJSON_Delete(h);
  return rc;
}

/* Tensor `name` of st with dtype dt and shape d[0..ndim); scalars (ndim 0) also accept shape [1]. */
static int expect(const ufp4_st *st, const char *path, const char *name, ufp4_st_dtype dt, int ndim, const size_t *d,
                  const ufp4_st_info **out) {
  const ufp4_st_info *t = ufp4_st_find(st, name);
  if (!t) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s is missing", path, name);
  if (t->dtype != dt)
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s has dtype %s, expected %s", path, name, ufp4_st_dtype_name(t->dtype),
                     ufp4_st_dtype_name(dt));
  int ok = ndim == 0 ? t->count == 1 && t->ndim <= 1 : t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
  if (!ok) {
    char want[64] = "[]";
    if (ndim == 2) snprintf(want, sizeof want, "[%zu, %zu]", d[0], d[1]);
    if (ndim == 3) snprintf(want, sizeof want, "[%zu, %zu, %zu]", d[0], d[1], d[2]);
    return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s has %d dims and %zu elements, expected shape %s", path, name, t->ndim,
                     t->count, want);
  }
  *out = t;
  return 0;
}

/* A copy of n bytes of t (tensor data in a mapped file need not be aligned). */
static uint8_t *bytes_of(const ufp4_st_info *t) {
  uint8_t *b = malloc(t->nbytes ? t->nbytes : 1);
  if (b) memcpy(b, t->data, t->nbytes);
  return b;
}

static int nan_scale(const uint8_t *s, size_t n, uint8_t nan_code, uint8_t mask) {
  for (size_t i = 0; i < n; i++)
    if ((s[i] & mask) == nan_code) return 1;
  return 0;
}

static int read_nvfp4(const ufp4_st *st, const char *path, const char *name, size_t rows, size_t cols, float *dst) {
  char mod[UFP4_TENSOR_NAME_MAX], n[UFP4_TENSOR_NAME_MAX + 32];
  module_of(name, mod, sizeof mod);
  const ufp4_st_info *w, *s, *s2;
  const size_t dw[2] = {rows, cols / 2}, ds[2] = {rows, cols / 16};
  int rc;
  if (cols % 16) return ufp4_fail(UFP4_EFORMAT, "%s: %s has %zu columns, not a multiple of 16", path, name, cols);
  if ((rc = expect(st, path, name, UFP4_ST_U8, 2, dw, &w))) return rc;
  snprintf(n, sizeof n, "%s.weight_scale", mod);
  if ((rc = expect(st, path, n, UFP4_ST_F8_E4M3, 2, ds, &s))) return rc;
  snprintf(n, sizeof n, "%s.weight_scale_2", mod);
  if ((rc = expect(st, path, n, UFP4_ST_F32, 0, NULL, &s2))) return rc;
  float ws2;
  memcpy(&ws2, s2->data, sizeof ws2);
  if (!isfinite(ws2)) return ufp4_fail(UFP4_EFORMAT, "%s: tensor %s is not finite", path, n);
  uint8_t *pw = bytes_of(w), *ps = bytes_of(s);
  if (!pw || !ps) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  else if (nan_scale(ps, s->count, 0x7F, 0x7F))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: tensor %s.weight_scale holds a NaN scale (E4M3 0x7F/0xFF)", path, mod);
  else decode_nvfp4(pw, ps, ws2, rows, cols, dst);
  free(pw);
  free(ps);
  return rc;
}

static int read_mxfp4(const ufp4_st *st, const char *path, const char *name, size_t rows, size_t cols, float *dst) {
  char nb[UFP4_TENSOR_NAME_MAX + 16], ns[UFP4_TENSOR_NAME_MAX + 16];
  snprintf(nb, sizeof nb, "%s_blocks", name);
  snprintf(ns, sizeof ns, "%s_scales", name);
  const ufp4_st_info *b, *s;
  const size_t db[3] = {rows, cols / 32, 16}, ds[2] = {rows, cols / 32};
  int rc;
  if (cols % 32) return ufp4_fail(UFP4_EFORMAT, "%s: %s has %zu columns, not a multiple of 32", path, name, cols);
  if ((rc = expect(st, path, nb, UFP4_ST_U8, 3, db, &b)) || (rc = expect(st, path, ns, UFP4_ST_U8, 2, ds, &s)))
    return rc;
  uint8_t *pb = bytes_of(b), *ps = bytes_of(s);
  if (!pb || !ps) rc = ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  else if (nan_scale(ps, s->count, 0xFF, 0xFF))
    rc = ufp4_fail(UFP4_EFORMAT, "%s: tensor %s holds a NaN scale (E8M0 0xFF)", path, ns);
  else decode_mxfp4(pb, ps, rows, cols, dst);
  free(pb);
  free(ps);
  return rc;
}

int ufp4_hf_read_weight(const struct ufp4_st *st, const char *path, ufp4_hf_format fmt, const char *name, size_t rows,
                        size_t cols, float *dst) {
  if (fmt == UFP4_HF_NVFP4) return read_nvfp4(st, path, name, rows, cols, dst);
  if (fmt == UFP4_HF_MXFP4) return read_mxfp4(st, path, name, rows, cols, dst);
  return ufp4_fail(UFP4_EINVAL, "%s: %s: not a 4-bit format", path, name);
}
