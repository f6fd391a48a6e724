/* Writes the parity kit (ufp4/golden.h): inputs, codes, scales, dequantized tensors, measures and
 * a manifest with every file's SHA-256. The manifest is written last and the folder renamed into
 * place after it, so a kit folder that exists is complete. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/build_info.h"
#include "parity/golden_internal.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/measures.h"
#include "ufp4/npy.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"
#include "ufp4/version.h"


typedef struct {
  char root[4096]; /* the folder being written ("<dir>.partial") */
  cJSON *files;    /* path relative to the kit -> SHA-256 hex */
} kit;

static int kit_path(const kit *k, const char *rel, char *out, size_t size) {
  if (snprintf(out, size, "%s/%s", k->root, rel) >= (int)size)
    return ufp4_fail(UFP4_EINVAL, "golden: path %s/%s is too long", k->root, rel);
  return 0;
}

static int record(kit *k, const char *rel, const char *hex) {
  return cJSON_AddStringToObject(k->files, rel, hex) ? 0 : ufp4_fail(UFP4_ENOMEM, "golden: out of memory");
}

static int put_bytes(kit *k, const char *rel, const void *data, size_t n) {
  char path[4200], hex[65];
  int rc = kit_path(k, rel, path, sizeof path);
  if (!rc) rc = ufp4_write_file_atomic(path, data, n);
  if (!rc) rc = ufp4_sha256_hex(data, n, hex);
  return rc ? rc : record(k, rel, hex);
}

static int put_npy(kit *k, const char *rel, const float *x, size_t rows, size_t cols) {
  char path[4200], hex[65];
  const size_t shape[2] = {rows, cols};
  int rc = kit_path(k, rel, path, sizeof path);
  if (!rc) rc = ufp4_npy_write(path, x, shape, 2);
  if (!rc) rc = ufp4_sha256_file(path, hex);
  return rc ? rc : record(k, rel, hex);
}

static int put_json(kit *k, const char *rel, const cJSON *j) {
  char *text = cJSON_Print(j);
  if (!text) return ufp4_fail(UFP4_ENOMEM, "golden: out of memory printing %s", rel);
  size_t n = strlen(text);
  text[n] = '\n'; /* replaces the NUL: the file ends in a newline */
  int rc = put_bytes(k, rel, text, n + 1);
  free(text);
  return rc;
}

static cJSON *measures_json(const ufp4_qmeasures *m, int n_levels) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "alpha", m->alpha);
  cJSON_AddNumberToObject(j, "nmse", m->nmse);
  cJSON_AddNumberToObject(j, "sqnr_db", m->sqnr_db);
  cJSON_AddNumberToObject(j, "shrink_bias", m->shrink_bias);
  cJSON_AddNumberToObject(j, "mean_rel_err", m->mean_rel_err);
  cJSON_AddItemToObject(j, "bucket_p", cJSON_CreateDoubleArray(m->bucket_p, n_levels));
  cJSON_AddNumberToObject(j, "bucket_entropy", m->bucket_entropy);
  cJSON_AddNumberToObject(j, "b_eff", m->b_eff);
  cJSON_AddNumberToObject(j, "underflow", m->underflow);
  cJSON_AddNumberToObject(j, "clipped", m->clipped);
  cJSON_AddNumberToObject(j, "n", (double)m->n);
  cJSON_AddNumberToObject(j, "n_nonfinite", (double)m->n_nonfinite);
  return j;
}

/* The stored scales as bytes: E4M3 / E8M0 codes as they are, FP32 factors little-endian. */
static uint8_t *scale_bytes(const ufp4_qtensor *q, size_t ns, size_t *n) {
  *n = q->scale_bits ? ns : 4 * ns;
  uint8_t *b = malloc(*n ? *n : 1);
  if (!b) return NULL;
  for (size_t i = 0; i < ns; i++) {
    if (q->scale_bits) {
      b[i] = q->scale_bits[i];
      continue;
    }
    uint32_t u;
    memcpy(&u, &q->scales[i], 4);
    for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(u >> (8 * k));
  }
  return b;
}

/* The case's manifest entry: where it is and what a decoder needs besides the files. */
static cJSON *case_json(const char *fmt, const char *input, const char *dir, const ufp4_qtensor *q,
                        size_t ns) {
  cJSON *c = cJSON_CreateObject();
  uint32_t bits;
  char hex[16];
  memcpy(&bits, &q->tensor_scale, 4);
  snprintf(hex, sizeof hex, "0x%08x", (unsigned)bits);
  cJSON_AddStringToObject(c, "format", fmt);
  cJSON_AddStringToObject(c, "input", input);
  cJSON_AddStringToObject(c, "dir", dir);
  cJSON_AddNumberToObject(c, "rows", (double)q->rows);
  cJSON_AddNumberToObject(c, "cols", (double)q->cols);
  cJSON_AddNumberToObject(c, "block_rows", q->fmt.tile2d ? q->fmt.tile2d : 1);
  cJSON_AddNumberToObject(c, "block_cols", q->fmt.tile2d ? q->fmt.tile2d : q->fmt.block);
  cJSON_AddNumberToObject(c, "scale_count", (double)ns);
  cJSON_AddNumberToObject(c, "scale_bytes", q->scale_bits ? 1 : 4);
  cJSON_AddNumberToObject(c, "tensor_scale", q->tensor_scale);
  cJSON_AddStringToObject(c, "tensor_scale_bits", hex);
  if (q->fmt.adaptive != UFP4_ADAPTIVE_NONE) cJSON_AddNumberToObject(c, "blocks_four", (double)q->blocks_four);
  return c;
}

typedef struct {
  const ufp4_golden_format *gf;
  ufp4_qformat fmt; /* gf->fmt with its sign vector */
  const golden_input *in;
  const float *x;
} golden_case;

/* The files of one case other than the measures. */
static int put_case_data(kit *k, const char *dir, const golden_case *gc, const ufp4_qtensor *q,
                         float *y) {
  size_t rows = gc->in->rows, cols = gc->in->cols, n = rows * cols, ns = ufp4_scale_count(&gc->fmt, rows, cols);
  size_t nsb = 0;
  char rel[512];
  uint8_t *packed = malloc(ufp4_packed_bytes(n)), *sb = scale_bytes(q, ns, &nsb);
  int rc = packed && sb ? 0 : ufp4_fail(UFP4_ENOMEM, "golden: out of memory for %s", dir);
  if (!rc) {
    ufp4_pack_codes(q->codes, n, packed);
    snprintf(rel, sizeof rel, "%s/codes.bin", dir);
    rc = put_bytes(k, rel, packed, ufp4_packed_bytes(n));
  }
  if (!rc) {
    snprintf(rel, sizeof rel, "%s/scales.bin", dir);
    rc = put_bytes(k, rel, sb, nsb);
  }
  if (!rc && gc->fmt.rht) { /* what the quantizer saw, for checking a rotation on its own */
    memcpy(y, gc->x, n * sizeof *y);
    rc = ufp4_rht_rows(y, rows, cols, gc->fmt.rht, gc->fmt.rht_signs);
    /* A NaN's sign and payload after Inf - Inf are the CPU's (x86 sets the sign, Arm does not);
     * one NaN keeps the kit the same bytes on every machine. */
    for (size_t i = 0; i < n; i++)
      if (isnan(y[i])) y[i] = NAN;
    snprintf(rel, sizeof rel, "%s/rotated.npy", dir);
    if (!rc) rc = put_npy(k, rel, y, rows, cols);
  }
  if (!rc) {
    ufp4_dequantize(q, y);
    snprintf(rel, sizeof rel, "%s/dequant.npy", dir);
    rc = put_npy(k, rel, y, rows, cols);
  }
  free(packed);
  free(sb);
  return rc;
}

static int put_case(kit *k, const golden_case *gc, cJSON *cases) {
  size_t rows = gc->in->rows, cols = gc->in->cols;
  char dir[256], rel[512];
  snprintf(dir, sizeof dir, "cases/%s/%s", gc->gf->name, gc->in->name);
  char path[4200];
  int rc = kit_path(k, dir, path, sizeof path);
  if (!rc) rc = ufp4_mkdirs(path);
  if (rc) return rc;
  ufp4_qtensor q;
  memset(&q, 0, sizeof q);
  float *y = malloc(rows * cols * sizeof *y);
  if (!y) return ufp4_fail(UFP4_ENOMEM, "golden: out of memory for %s", dir);
  ufp4_qmeasures m;
  rc = ufp4_quantize(&gc->fmt, gc->x, rows, cols, &q);
  if (!rc) rc = put_case_data(k, dir, gc, &q, y);
  if (!rc) rc = ufp4_measure_tensor(&gc->fmt, gc->x, rows, cols, &m);
  if (!rc) {
    cJSON *mj = measures_json(&m, ufp4_grid_get(gc->fmt.grid)->n_levels);
    snprintf(rel, sizeof rel, "%s/measures.json", dir);
    rc = put_json(k, rel, mj);
    cJSON_Delete(mj);
  }
  if (!rc) cJSON_AddItemToArray(cases, case_json(gc->gf->name, gc->in->name, dir, &q, ufp4_scale_count(&gc->fmt, rows, cols)));
  ufp4_qtensor_free(&q);
  free(y);
  return rc;
}

static cJSON *format_json(const ufp4_golden_format *gf, const float *signs) {
  const ufp4_qformat *f = &gf->fmt;
  char args[256];
  golden_quantize_args(gf, args, sizeof args);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "name", gf->name);
  cJSON_AddStringToObject(j, "recipe", gf->recipe);
  cJSON_AddStringToObject(j, "quantize_args", args);
  cJSON_AddStringToObject(j, "grid", ufp4_grid_get(f->grid)->name);
  cJSON_AddStringToObject(j, "scale", ufp4_scale_name(f->scale));
  cJSON_AddNumberToObject(j, "block", f->tile2d ? 0 : f->block);
  cJSON_AddNumberToObject(j, "tile2d", f->tile2d);
  cJSON_AddStringToObject(j, "round", ufp4_round_name(f->round));
  cJSON_AddNumberToObject(j, "rht", f->rht);
  cJSON_AddStringToObject(j, "rht_signs", golden_signs_name(gf->rht_signs));
  cJSON_AddStringToObject(j, "adaptive", ufp4_adaptive_name(f->adaptive));
  cJSON_AddStringToObject(j, "adaptive_metric", ufp4_metric_name(f->metric));
  cJSON *sv = cJSON_AddArrayToObject(j, "rht_sign_vector");
  for (int i = 0; i < f->rht; i++) cJSON_AddItemToArray(sv, cJSON_CreateNumber(signs[i]));
  cJSON_AddNumberToObject(j, "seed", (double)f->seed);
  cJSON_AddNumberToObject(j, "stream", (double)f->stream);
  return j;
}

/* Every case of one format, after its entry in `formats`. */
static int put_format(kit *k, const ufp4_golden_format *gf, float *const *xs, cJSON *formats, cJSON *cases) {
  float signs[UFP4_RHT_MAX];
  golden_case gc = {gf, gf->fmt, NULL, NULL};
  if (gf->rht_signs == 2)
    memcpy(signs, ufp4_rht_signs_nvidia16, sizeof(float) * 16);
  else if (gf->rht_signs == 1)
    ufp4_rht_signs_random(signs, gf->fmt.rht, gf->fmt.seed);
  gc.fmt.rht_signs = gf->rht_signs ? signs : NULL;
  cJSON_AddItemToArray(formats, format_json(gf, signs));
  size_t n_in;
  const golden_input *in = golden_inputs(&n_in);
  int rc = 0;
  for (size_t i = 0; i < n_in && !rc; i++) {
    gc.in = &in[i];
    gc.x = xs[i];
    rc = put_case(k, &gc, cases);
  }
  return rc;
}

static int put_inputs(kit *k, float **xs, cJSON *list) {
  size_t n_in;
  const golden_input *in = golden_inputs(&n_in);
  char rel[256];
  for (size_t i = 0; i < n_in; i++) {
    xs[i] = malloc(in[i].rows * in[i].cols * sizeof(float));
    if (!xs[i]) return ufp4_fail(UFP4_ENOMEM, "golden: out of memory for input %s", in[i].name);
    in[i].fill(xs[i], in[i].rows, in[i].cols);
    snprintf(rel, sizeof rel, "inputs/%s.npy", in[i].name);
    int rc = put_npy(k, rel, xs[i], in[i].rows, in[i].cols);
    if (rc) return rc;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", in[i].name);
    cJSON_AddStringToObject(j, "file", rel);
    cJSON_AddNumberToObject(j, "rows", (double)in[i].rows);
    cJSON_AddNumberToObject(j, "cols", (double)in[i].cols);
    cJSON_AddStringToObject(j, "what", in[i].what);
    cJSON_AddItemToArray(list, j);
  }
  return 0;
}

static cJSON *manifest_head(void) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "kit", "ufp4 parity kit (docs/PARITY.md)");
  cJSON_AddNumberToObject(m, "kit_version", UFP4_GOLDEN_KIT_VERSION);
  cJSON_AddStringToObject(m, "ufp4_version", ufp4_version());
  cJSON_AddStringToObject(m, "ufp4_commit", ufp4_build_commit());
  cJSON_AddStringToObject(m, "sr_bits",
                          "element (r, c) of the tensor the quantizer sees (rotated under RHT) reads the 32-bit "
                          "word i % 4 of Philox4x32-10 with key {seed lo32, seed hi32} and counter {(i / 4) lo32, "
                          "(i / 4) hi32, stream lo32, stream hi32}, i = r * cols + c");
  return m;
}

/* Everything but the rename: inputs, cases, then the manifest. */
static int write_kit(kit *k, float **xs) {
  cJSON *m = manifest_head();
  cJSON *inputs = cJSON_AddArrayToObject(m, "inputs");
  cJSON *formats = cJSON_AddArrayToObject(m, "formats");
  cJSON *cases = cJSON_AddArrayToObject(m, "cases");
  k->files = cJSON_AddObjectToObject(m, "files");
  char path[4200];
  int rc = kit_path(k, "inputs", path, sizeof path);
  if (!rc) rc = ufp4_mkdirs(path);
  if (!rc) rc = put_inputs(k, xs, inputs);
  size_t n_fmt;
  const ufp4_golden_format *f = ufp4_golden_formats(&n_fmt);
  for (size_t i = 0; i < n_fmt && !rc; i++) rc = put_format(k, &f[i], xs, formats, cases);
  if (!rc) {
    char *text = cJSON_Print(m);
    size_t n = text ? strlen(text) : 0;
    if (text) text[n] = '\n';
    rc = text ? 0 : ufp4_fail(UFP4_ENOMEM, "golden: out of memory printing the manifest");
    if (!rc) rc = kit_path(k, "manifest.json", path, sizeof path);
    if (!rc) rc = ufp4_write_file_atomic(path, text, n + 1);
    free(text);
  }
  cJSON_Delete(m);
  return rc;
}

int ufp4_golden_write(const char *dir) {
  struct stat st;
  if (!dir || !*dir) return ufp4_fail(UFP4_EINVAL, "golden: no output folder");
  if (stat(dir, &st) == 0)
    return ufp4_fail(UFP4_EINVAL, "golden: %s exists; the kit is written to a new folder", dir);
  kit k;
  memset(&k, 0, sizeof k);
  if (snprintf(k.root, sizeof k.root, "%s.partial", dir) >= (int)sizeof k.root)
    return ufp4_fail(UFP4_EINVAL, "golden: %s: path too long", dir);
  int rc = ufp4_remove_tree(k.root);
  if (!rc) rc = ufp4_mkdirs(k.root);
  if (rc) return rc;
  size_t n_in;
  golden_inputs(&n_in);
  float **xs = calloc(n_in, sizeof *xs);
  rc = xs ? write_kit(&k, xs) : ufp4_fail(UFP4_ENOMEM, "golden: out of memory");
  for (size_t i = 0; xs && i < n_in; i++) free(xs[i]);
  free(xs);
  if (!rc && rename(k.root, dir) != 0)
    rc = ufp4_fail(UFP4_EIO, "golden: cannot rename %s to %s: %s", k.root, dir, strerror(errno));
  if (!rc) rc = ufp4_fsync_parent(dir);
  return rc;
}
