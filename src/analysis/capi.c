/* The flat surface of capi.h: format specs parsed into ufp4_qformat, then the library's own calls.
 * It sits in analysis, the lowest layer that sees the quantizer, the measures and the linear layer
 * together. */
#include "ufp4/capi.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/linear.h"
#include "ufp4/measures.h"
#include "ufp4/minifloat.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/rht.h"
#include "ufp4/stream.h"

#define SPEC_MAX 512

/* A parsed format spec with the storage its rht_signs pointer refers to. */
typedef struct {
  ufp4_qformat fmt;
  float signs[UFP4_RHT_MAX];
} capi_format;

static int bad_value(const char *spec, const char *key, const char *v, const char *what) {
  return ufp4_fail(UFP4_EINVAL, "format spec '%s': %s: '%s' is not %s", spec, key, v, what);
}

static int parse_u64(const char *spec, const char *key, const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long u = strtoull(v, &end, 0);
  if (errno || end == v || *end || !isdigit((unsigned char)v[0])) return bad_value(spec, key, v, "an unsigned 64-bit integer");
  *out = (uint64_t)u;
  return 0;
}

static int parse_int(const char *spec, const char *key, const char *v, int *out) {
  char *end;
  errno = 0;
  long l = strtol(v, &end, 10);
  if (errno || end == v || *end || !isdigit((unsigned char)v[0]) || l > 1 << 20)
    return bad_value(spec, key, v, "a non-negative integer");
  *out = (int)l;
  return 0;
}

/* The spec's keys: `ufp4 quantize`'s flags without their dashes. */
static const char *const SPEC_KEYS[] = {"grid", "block", "tile2d", "scale", "round", "rht", "rht-signs", "seed",
                                        "stream", "adaptive", "adaptive-metric"};
enum { N_SPEC_KEYS = sizeof SPEC_KEYS / sizeof *SPEC_KEYS };

static int spec_key(const char *key) {
  for (int i = 0; i < N_SPEC_KEYS; i++)
    if (!strcmp(key, SPEC_KEYS[i])) return i;
  return -1;
}

/* One key=value (value NULL for a bare key) into f. */
static int parse_key(const char *spec, const char *key, const char *v, capi_format *f, int *nvidia) {
  ufp4_qformat *q = &f->fmt;
  if (spec_key(key) < 0)
    return ufp4_fail(UFP4_EINVAL,
                     "format spec '%s': unknown key '%s' (grid, block, tile2d, scale, round, rht, rht-signs, seed, "
                     "stream, adaptive, adaptive-metric)",
                     spec, key);
  if (!strcmp(key, "tile2d")) {
    if (v && strcmp(v, "0") && strcmp(v, "1")) return bad_value(spec, key, v, "0 or 1");
    q->tile2d = v && !strcmp(v, "0") ? 0 : 16;
    return 0;
  }
  if (!v) return ufp4_fail(UFP4_EINVAL, "format spec '%s': '%s' needs a value (%s=...)", spec, key, key);
  if (!strcmp(key, "grid"))
    return ufp4_grid_parse(v, &q->grid) ? bad_value(spec, key, v, "a grid (e2m1, e1m2, int4, e2m1-max2/3/4)") : 0;
  if (!strcmp(key, "scale"))
    return ufp4_scale_parse(v, &q->scale)
               ? bad_value(spec, key, v, "a scale (fp32, nvfp4, e8m0-floor, e8m0-ceil, e8m0-even, e8m0-rceil)")
               : 0;
  if (!strcmp(key, "round"))
    return ufp4_round_parse(v, &q->round) ? bad_value(spec, key, v, "a rounding mode (rne, rna, rnz, sr, sr8)") : 0;
  if (!strcmp(key, "block")) return parse_int(spec, key, v, &q->block);
  if (!strcmp(key, "rht")) return parse_int(spec, key, v, &q->rht);
  if (!strcmp(key, "seed")) return parse_u64(spec, key, v, &q->seed);
  if (!strcmp(key, "stream")) return parse_u64(spec, key, v, &q->stream);
  if (!strcmp(key, "adaptive"))
    return ufp4_adaptive_parse(v, &q->adaptive) ? bad_value(spec, key, v, "none or 4over6") : 0;
  if (!strcmp(key, "adaptive-metric"))
    return ufp4_metric_parse(v, &q->metric) ? bad_value(spec, key, v, "mse, mae or maxabs") : 0;
  /* rht-signs, the last key */
  if (strcmp(v, "random") && strcmp(v, "nvidia")) return bad_value(spec, key, v, "random or nvidia");
  *nvidia = !strcmp(v, "nvidia");
  return 0;
}

/* Parses spec and checks it against a rows x cols tensor; fills the RHT signs. */
static int parse_format(const char *spec, size_t rows, size_t cols, capi_format *f) {
  if (!spec) return ufp4_fail(UFP4_EINVAL, "format spec: NULL");
  size_t len = strlen(spec);
  if (len >= SPEC_MAX) return ufp4_fail(UFP4_EINVAL, "format spec: longer than %d characters", SPEC_MAX - 1);
  char buf[SPEC_MAX];
  memcpy(buf, spec, len + 1);
  f->fmt = ufp4_qformat_default();
  int nvidia = 0, seen[N_SPEC_KEYS] = {0};
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (eq) *eq = '\0';
    const int k = spec_key(item);
    if (k >= 0 && seen[k]++)
      return ufp4_fail(UFP4_EINVAL, "format spec '%s': '%s' given twice", spec, item);
    int rc = parse_key(spec, item, eq ? eq + 1 : NULL, f, &nvidia);
    if (rc) return rc;
  }
  if (nvidia && f->fmt.rht != 16)
    return ufp4_fail(UFP4_EINVAL, "format spec '%s': rht-signs=nvidia needs rht=16 (the vector has 16 entries)",
                     spec);
  int rc = ufp4_qformat_check(&f->fmt, rows, cols);
  if (rc) {
    char why[256]; /* ufp4_fail formats into the buffer ufp4_last_error() returns */
    snprintf(why, sizeof why, "%s", ufp4_last_error());
    return ufp4_fail(rc, "format spec '%s': %s", spec, why);
  }
  if (f->fmt.rht) {
    if (nvidia)
      memcpy(f->signs, ufp4_rht_signs_nvidia16, sizeof ufp4_rht_signs_nvidia16);
    else
      ufp4_rht_signs_random(f->signs, f->fmt.rht, f->fmt.seed);
    f->fmt.rht_signs = f->signs;
  }
  return 0;
}

static int need(const void *p, size_t rows, size_t cols, const char *what) {
  if (!p && rows && cols) return ufp4_fail(UFP4_EINVAL, "%s: NULL array for %zu x %zu elements", what, rows, cols);
  return 0;
}

int ufp4_capi_format_check(const char *spec, size_t rows, size_t cols, size_t *n_scales, size_t *scale_bytes,
                           size_t *packed_bytes) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (rc) return rc;
  if (n_scales) *n_scales = ufp4_scale_count(&f.fmt, rows, cols);
  if (scale_bytes) *scale_bytes = f.fmt.scale == UFP4_SCALE_FP32 ? 4 : 1;
  if (packed_bytes) *packed_bytes = ufp4_packed_bytes(rows * cols);
  return 0;
}

int ufp4_capi_quantize(const char *spec, const float *x, float *y, size_t rows, size_t cols) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (!rc) rc = need(x, rows, cols, "quantize") || need(y, rows, cols, "quantize") ? UFP4_EINVAL : 0;
  return rc ? rc : ufp4_fake_quant(&f.fmt, x, y, rows, cols);
}

static void put_f32(uint8_t *p, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(u >> (8 * i));
}

static float get_f32(const uint8_t *p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; i++) u |= (uint32_t)p[i] << (8 * i);
  float v;
  memcpy(&v, &u, 4);
  return v;
}

int ufp4_capi_encode(const char *spec, const float *x, size_t rows, size_t cols, uint8_t *packed, uint8_t *scales,
                     float *tensor_scale) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (rc) return rc;
  if (need(x, rows, cols, "encode") || need(packed, rows, cols, "encode") || need(scales, rows, cols, "encode"))
    return UFP4_EINVAL;
  ufp4_qtensor q;
  if ((rc = ufp4_quantize(&f.fmt, x, rows, cols, &q))) return rc;
  size_t ns = ufp4_scale_count(&f.fmt, rows, cols);
  for (size_t i = 0; i < ns; i++) {
    if (q.scale_bits)
      scales[i] = q.scale_bits[i];
    else
      put_f32(scales + 4 * i, q.scales[i]);
  }
  if (rows && cols) ufp4_pack_codes(q.codes, rows * cols, packed);
  if (tensor_scale) *tensor_scale = q.tensor_scale;
  ufp4_qtensor_free(&q);
  return 0;
}

/* The fp32 dequantization factor of stored scale i, as the quantizer computed it. */
static float scale_value(const ufp4_qformat *f, const uint8_t *scales, size_t i, float tensor_scale) {
  if (f->scale == UFP4_SCALE_FP32) return get_f32(scales + 4 * i);
  if (f->scale == UFP4_SCALE_NVFP4) return ufp4_e4m3_to_f32(scales[i]) / tensor_scale;
  return ufp4_e8m0_to_f32(scales[i]);
}

int ufp4_capi_decode(const char *spec, const uint8_t *packed, const uint8_t *scales, float tensor_scale,
                     size_t rows, size_t cols, float *y) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (rc) return rc;
  if (need(packed, rows, cols, "decode") || need(scales, rows, cols, "decode") || need(y, rows, cols, "decode"))
    return UFP4_EINVAL;
  size_t n = rows * cols, ns = ufp4_scale_count(&f.fmt, rows, cols);
  ufp4_qtensor q = {.rows = rows, .cols = cols, .fmt = f.fmt, .tensor_scale = tensor_scale};
  q.codes = malloc(n ? n : 1);
  q.scales = malloc((ns ? ns : 1) * sizeof *q.scales);
  if (!q.codes || !q.scales) {
    free(q.codes);
    free(q.scales);
    return ufp4_fail(UFP4_ENOMEM, "decode: out of memory for %zu x %zu elements", rows, cols);
  }
  ufp4_unpack_codes(packed, n, q.codes);
  for (size_t i = 0; i < ns; i++) q.scales[i] = scale_value(&f.fmt, scales, i, tensor_scale);
  ufp4_dequantize(&q, y);
  free(q.codes);
  free(q.scales);
  return 0;
}

int ufp4_capi_n_measures(void) { return UFP4_CAPI_N_MEASURES; }

int ufp4_capi_measures(const char *spec, const float *x, size_t rows, size_t cols, double *out) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (rc) return rc;
  if (need(x, rows, cols, "measures") || !out) return ufp4_fail(UFP4_EINVAL, "measures: NULL array");
  ufp4_qmeasures m;
  if ((rc = ufp4_measure_tensor(&f.fmt, x, rows, cols, &m))) return rc;
  double v[UFP4_CAPI_N_MEASURES] = {
      [UFP4_CAPI_M_ALPHA] = m.alpha,
      [UFP4_CAPI_M_NMSE] = m.nmse,
      [UFP4_CAPI_M_SQNR_DB] = m.sqnr_db,
      [UFP4_CAPI_M_SHRINK_BIAS] = m.shrink_bias,
      [UFP4_CAPI_M_MEAN_REL_ERR] = m.mean_rel_err,
      [UFP4_CAPI_M_BUCKET_ENTROPY] = m.bucket_entropy,
      [UFP4_CAPI_M_B_EFF] = m.b_eff,
      [UFP4_CAPI_M_UNDERFLOW] = m.underflow,
      [UFP4_CAPI_M_CLIPPED] = m.clipped,
      [UFP4_CAPI_M_N] = (double)m.n,
      [UFP4_CAPI_M_N_NONFINITE] = (double)m.n_nonfinite,
      [UFP4_CAPI_M_FOUR_SHARE] = m.four_share,
      [UFP4_CAPI_M_SR_N] = (double)m.sr_n,
      [UFP4_CAPI_M_SR_BIAS] = m.sr_bias,
      [UFP4_CAPI_M_SR_Z_MAG] = m.sr_z_mag,
      [UFP4_CAPI_M_SR_Z_VAL] = m.sr_z_val,
  };
  for (int i = 0; i < UFP4_GRID_MAX_LEVELS; i++) {
    v[UFP4_CAPI_M_BUCKET_P + i] = m.bucket_p[i];
    v[UFP4_CAPI_M_BUCKET_BIAS + i] = m.bucket_bias[i];
  }
  memcpy(out, v, sizeof v);
  return 0;
}

int ufp4_capi_rht(const char *spec, float *x, size_t rows, size_t cols, int inverse) {
  capi_format f;
  int rc = parse_format(spec, rows, cols, &f);
  if (rc) return rc;
  if (!f.fmt.rht) return ufp4_fail(UFP4_EINVAL, "rht: format spec '%s' has no rht=N", spec);
  if (need(x, rows, cols, "rht")) return UFP4_EINVAL;
  return inverse ? ufp4_rht_rows_inverse(x, rows, cols, f.fmt.rht, f.signs)
                 : ufp4_rht_rows(x, rows, cols, f.fmt.rht, f.signs);
}

int ufp4_capi_rht_signs(const char *spec, float *signs, int *n) {
  capi_format f;
  int rc = parse_format(spec, 0, 0, &f);
  if (rc) return rc;
  if (!f.fmt.rht) return ufp4_fail(UFP4_EINVAL, "rht signs: format spec '%s' has no rht=N", spec);
  if (!signs || !n) return ufp4_fail(UFP4_EINVAL, "rht signs: NULL output");
  memcpy(signs, f.signs, (size_t)f.fmt.rht * sizeof *signs);
  *n = f.fmt.rht;
  return 0;
}

int ufp4_capi_grid(const char *name, float *levels, double *bias, int *n_levels) {
  ufp4_grid_id id;
  if (!name || ufp4_grid_parse(name, &id))
    return ufp4_fail(UFP4_EINVAL, "grid '%s': unknown (e2m1, e1m2, int4, e2m1-max2/3/4)", name ? name : "(null)");
  if (!levels || !bias || !n_levels) return ufp4_fail(UFP4_EINVAL, "grid '%s': NULL output", name);
  const ufp4_grid *g = ufp4_grid_get(id);
  *n_levels = g->n_levels;
  for (int i = 0; i < UFP4_GRID_MAX_LEVELS; i++) {
    levels[i] = i < g->n_levels ? g->levels[i] : NAN;
    bias[i] = i < g->n_levels ? ufp4_bin_bias(g, i, NULL) : NAN;
  }
  return 0;
}

int ufp4_capi_recipe_canonical(const char *recipe, char *buf, size_t size) {
  ufp4_recipe r;
  if (!recipe) return ufp4_fail(UFP4_EINVAL, "recipe: NULL");
  int rc = ufp4_recipe_parse(recipe, &r);
  if (rc) return rc;
  if (!buf || !size) return ufp4_fail(UFP4_EINVAL, "recipe '%s': no buffer for the canonical spec", recipe);
  ufp4_recipe_format(&r, buf, size);
  return 0;
}

/* A linear context for (recipe, stream fields), with the recipe's signs drawn as the model draws
 * them (ufp4_model_set_recipe) and a scratch buffer for the shapes. */
typedef struct {
  ufp4_recipe recipe;
  float signs[UFP4_RHT_MAX];
  ufp4_linear_ctx ctx;
  float *scratch;
} capi_linear;

static int linear_open(const char *recipe, const uint64_t *s, size_t n, size_t in, size_t out, capi_linear *L) {
  memset(L, 0, sizeof *L);
  if (!recipe || !s) return ufp4_fail(UFP4_EINVAL, "linear: NULL recipe or stream");
  int rc = ufp4_recipe_parse(recipe, &L->recipe);
  if (rc) return rc;
  for (int i = 2; i < UFP4_CAPI_STREAM_FIELDS; i++)
    if (s[i] > UINT32_MAX)
      return ufp4_fail(UFP4_EINVAL, "linear: stream field %d is %llu, over 32 bits", i, (unsigned long long)s[i]);
  ufp4_stream_id id = {.seed = s[0],
                       .step = s[1],
                       .micro = (uint32_t)s[2],
                       .micro_steps = (uint32_t)s[3],
                       .rank = (uint32_t)s[4],
                       .layer = (uint32_t)s[5],
                       .expert = (uint32_t)s[6],
                       .proj = (uint32_t)s[7]};
  /* The engine checks a stream only where it draws from it (SR); a caller's fields are checked
   * always, so a wrong one fails under every recipe, not first when SR is turned on. */
  if ((rc = ufp4_stream_check(&id))) return rc;
  if (L->recipe.rht_signs == UFP4_SIGNS_NVIDIA)
    memcpy(L->signs, ufp4_rht_signs_nvidia16, sizeof ufp4_rht_signs_nvidia16);
  else
    ufp4_rht_signs_random(L->signs, L->recipe.rht_n, s[0]);
  L->ctx = (ufp4_linear_ctx){.recipe = &L->recipe, .stream = id, .rht_signs = L->signs};
  size_t nf = ufp4_linear_scratch_floats(n, in, out);
  L->scratch = malloc((nf ? nf : 1) * sizeof(float));
  if (!L->scratch) return ufp4_fail(UFP4_ENOMEM, "linear: out of memory for %zu scratch floats", nf);
  return 0;
}

/* The RHT of each GEMM in gemm_mask divides the axis it rotates; otherwise a message naming the
 * GEMM, the axis and its length (the quantizer's own names none of them). */
static int check_axes(const ufp4_recipe *r, const char *recipe, unsigned gemm_mask, size_t n, size_t in, size_t out) {
  static const char *const gemm[] = {"Fprop", "Dgrad", "Wgrad"};
  size_t axis;
  const int g = ufp4_recipe_rht_misfit(r, gemm_mask, n, in, out, &axis);
  if (g < 0) return 0;
  return ufp4_fail(UFP4_EINVAL,
                   "linear under recipe '%s': its %s RHT of %d rotates along %s, %zu, which %d does not divide; "
                   "use a multiple of %d there, or a recipe without that RHT (rht=none, or rht_n=...)",
                   recipe, gemm[g], r->rht_n, g == UFP4_WGRAD ? "the tokens (the rows of X)" : ufp4_recipe_rht_axis_name((ufp4_gemm_kind)g),
                   axis, r->rht_n, r->rht_n);
}

int ufp4_capi_linear_check(const char *recipe, size_t n, size_t in, size_t out, int need_dx, int need_dw) {
  if (!recipe) return ufp4_fail(UFP4_EINVAL, "linear: NULL recipe");
  ufp4_recipe r;
  int rc = ufp4_recipe_parse(recipe, &r);
  unsigned mask = 1u << UFP4_FPROP | (need_dx ? 1u << UFP4_DGRAD : 0) | (need_dw ? 1u << UFP4_WGRAD : 0);
  return rc ? rc : check_axes(&r, recipe, mask, n, in, out);
}

int ufp4_capi_linear_forward(const char *recipe, const uint64_t *stream, const float *X, const float *W, float *Y,
                             size_t n, size_t in, size_t out) {
  capi_linear L;
  int rc = linear_open(recipe, stream, n, in, out, &L);
  if (!rc) rc = check_axes(&L.recipe, recipe, 1u << UFP4_FPROP, n, in, out);
  if (!rc) rc = ufp4_linear_forward(&L.ctx, X, W, Y, n, in, out, L.scratch);
  free(L.scratch);
  return rc;
}

int ufp4_capi_linear_backward(const char *recipe, const uint64_t *stream, const float *dY, const float *X,
                              const float *W, float *dX, float *dW, size_t n, size_t in, size_t out) {
  capi_linear L;
  int rc = linear_open(recipe, stream, n, in, out, &L);
  if (!rc) rc = check_axes(&L.recipe, recipe, (dX ? 1u << UFP4_DGRAD : 0) | (dW ? 1u << UFP4_WGRAD : 0), n, in, out);
  /* ufp4_linear_backward is Dgrad (when dX is not NULL), then Wgrad: the same calls. */
  if (!rc && dW) rc = ufp4_linear_backward(&L.ctx, dY, X, W, dX, dW, n, in, out, L.scratch);
  else if (!rc && dX) rc = ufp4_linear_dgrad(&L.ctx, dY, W, dX, n, in, out, L.scratch);
  free(L.scratch);
  return rc;
}
