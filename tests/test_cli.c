/* End-to-end tests of the ufp4 binary: run it, parse what it prints or writes, and compare
 * with references computed here. The binary's path comes from UFP4_CLI (set by ctest). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ufp4/npy.h"
#include "ufp4/minifloat.h"

static const char *cli;
static char tmpdir[] = "/tmp/ufp4_test_cli.XXXXXX";

static void path_in_tmp(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = 0;
    if (len) *len = (size_t)n;
  }
  return buf;
}

/* Runs `ufp4 ARGS` with stdout and stderr captured; returns the exit status (-1 if it did not
 * exit normally). *out and *err (if not NULL) receive the captured text, to be freed. */
static int run(char **out, char **err, const char *fmt, ...) {
  char args[2048], cmd[4096], po[512], pe[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  path_in_tmp(po, sizeof po, "stdout.txt");
  path_in_tmp(pe, sizeof pe, "stderr.txt");
  snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", cli, args, po, pe);
  int st = system(cmd);
  if (out) *out = slurp(po, NULL);
  if (err) *err = slurp(pe, NULL);
  if (st == -1 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

static cJSON *run_json(const char *fmt_args) {
  char *out = NULL, *err = NULL;
  int st = run(&out, &err, "%s", fmt_args);
  if (st != 0) fprintf(stderr, "ufp4 %s: exit %d, stderr: %s\n", fmt_args, st, err ? err : "");
  assert_int_equal(st, 0);
  assert_non_null(out);
  cJSON *j = cJSON_Parse(out);
  if (!j) fprintf(stderr, "not JSON: %.200s\n", out);
  assert_non_null(j);
  free(out);
  free(err);
  return j;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* ---- (1) formats --json: the geometric bias (l - r)/2 per interior level ---- */

static const cJSON *find_grid(const cJSON *grids, const char *name) {
  const cJSON *g;
  cJSON_ArrayForEach(g, grids) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return g;
  }
  fail_msg("grid %s missing", name);
  return NULL;
}

/* expected[i] is the bias of level i; NaN marks a non-interior level, which must be null. */
static void check_grid_bias(const cJSON *grids, const char *name, const double *levels, const double *expected,
                            int n) {
  const cJSON *g = find_grid(grids, name);
  const cJSON *bins = cJSON_GetObjectItemCaseSensitive(g, "bins");
  assert_int_equal(cJSON_GetArraySize(bins), n);
  for (int i = 0; i < n; i++) {
    const cJSON *b = cJSON_GetArrayItem(bins, i);
    assert_true(num(b, "level") == levels[i]);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(b, "bias");
    if (isnan(expected[i])) {
      assert_true(cJSON_IsNull(bias));
    } else {
      assert_true(cJSON_IsNumber(bias));
      if (fabs(bias->valuedouble - expected[i]) > 1e-12)
        fail_msg("%s level %g: bias %g, expected %g", name, levels[i], bias->valuedouble, expected[i]);
    }
  }
}

static void test_formats_json(void **state) {
  (void)state;
  cJSON *j = run_json("formats --json");
  const cJSON *grids = cJSON_GetObjectItemCaseSensitive(j, "grids");
  assert_true(cJSON_IsArray(grids));
  /* E2M1 at q=2: l = (2-1.5)/2 = 0.25, r = (3-2)/2 = 0.5 -> (0.25-0.5)/2 = -0.125;
   * at q=4: l = (4-3)/2 = 0.5, r = (6-4)/2 = 1 -> -0.25; elsewhere l = r. */
  const double e2m1_l[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double e2m1_b[] = {NAN, 0, 0, 0, -0.125, 0, -0.25, NAN};
  check_grid_bias(grids, "e2m1", e2m1_l, e2m1_b, 8);
  const double e1m2_l[] = {0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75};
  const double uni_b[] = {NAN, 0, 0, 0, 0, 0, 0, NAN};
  check_grid_bias(grids, "e1m2", e1m2_l, uni_b, 8);
  const double int4_l[] = {0, 1, 2, 3, 4, 5, 6, 7};
  check_grid_bias(grids, "int4", int4_l, uni_b, 8);
  /* Range-restricted to 4: q=2 keeps -0.125, q=3 has l = r = 0.5, 4 becomes the top bin. */
  const double max4_l[] = {0, 0.5, 1, 1.5, 2, 3, 4};
  const double max4_b[] = {NAN, 0, 0, 0, -0.125, 0, NAN};
  check_grid_bias(grids, "e2m1-max4", max4_l, max4_b, 7);
  cJSON_Delete(j);
}

/* ---- (2) the paper's reversal on outlier-heavy gaussian data ---- */

static const cJSON *find_result(const cJSON *results, const char *grid, int rht) {
  const cJSON *r;
  cJSON_ArrayForEach(r, results) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "grid");
    if (cJSON_IsString(g) && !strcmp(g->valuestring, grid) && num(r, "rht") == rht) return r;
  }
  fail_msg("result %s rht %d missing", grid, rht);
  return NULL;
}

static void test_bias_reversal(void **state) {
  (void)state;
  cJSON *j = run_json("bias --dist outliers --rows 1024 --cols 1024 --seed 1 --json");
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "results");
  assert_int_equal(cJSON_GetArraySize(res), 12); /* 6 grids, raw and rht16 */
  double e2_raw = num(find_result(res, "e2m1", 0), "sqnr_db");
  double e1_raw = num(find_result(res, "e1m2", 0), "sqnr_db");
  double e2_rht = num(find_result(res, "e2m1", 16), "sqnr_db");
  double e1_rht = num(find_result(res, "e1m2", 16), "sqnr_db");
  printf("SQNR dB raw: e2m1 %.3f e1m2 %.3f; rht16: e2m1 %.3f e1m2 %.3f\n", e2_raw, e1_raw, e2_rht, e1_rht);
  assert_true(e2_raw > e1_raw);
  assert_true(e2_rht < e1_rht);
  /* E1M2 and symmetric INT4 are the same grid up to a factor 4 that the fp32 scale absorbs. */
  assert_true(fabs(num(find_result(res, "int4", 16), "nmse") / num(find_result(res, "e1m2", 16), "nmse") - 1) < 1e-6);
  /* dSQNR is the stated function of the two NMSEs. */
  const cJSON *r = find_result(res, "e1m2", 16);
  double d = 10 * log10(num(find_result(res, "e1m2", 0), "nmse") / num(r, "nmse"));
  assert_true(fabs(num(r, "dsqnr_db") - d) < 1e-9);
  cJSON_Delete(j);
}

/* ---- (3) and (5): exact RNE E2M1 output and the packed file ---- */

static const float e2m1_levels[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

/* Nearest level by exhaustive search; on equal distance the even index wins. */
static int ref_rne_index(float t) {
  double a = fabs((double)t);
  int best = 0;
  for (int i = 1; i < 8; i++) {
    double di = fabs(a - e2m1_levels[i]), db = fabs(a - e2m1_levels[best]);
    if (di < db || (di == db && i % 2 == 0)) best = i;
  }
  return best;
}

enum { Q_ROWS = 40, Q_COLS = 32 };

/* Blocks of 16 whose amax is exactly 6, so the fp32 scale is 6/6 = 1 and t = x. Block (0,0)
 * holds every tie point, block (0,1) a value inside every bin, the rest multiples of 1/8 in
 * [-6, 6] (which include the ties) with one entry forced to +-6. */
static void make_tie_tensor(float *x) {
  const float ties[16] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f,
                          -3.5f, -5, 0};
  const float bins[16] = {-6, 0.1f, 0.3f, 0.6f, 0.9f, 1.2f, 1.4f, 1.6f, 1.9f, 2.2f, 2.8f, 3.2f, 3.8f, 4.5f, 5.5f,
                          -5.9f};
  memcpy(x, ties, sizeof ties);
  memcpy(x + 16, bins, sizeof bins);
  uint32_t s = 12345;
  for (int i = Q_COLS; i < Q_ROWS * Q_COLS; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((int)(s >> 16) % 97 - 48) / 8.0f; /* -6 .. 6 in steps of 1/8 */
  }
  for (int b = 2; b < Q_ROWS * Q_COLS / 16; b++) x[b * 16 + b % 16] = (b % 2) ? 6.0f : -6.0f;
}

static void write_npy(const char *name, const float *x, size_t rows, size_t cols, char *path, size_t n) {
  path_in_tmp(path, n, name);
  size_t shape[2] = {rows, cols};
  assert_int_equal(ufp4_npy_write(path, x, shape, 2), 0);
}

static void test_quantize_exact_rne(void **state) {
  (void)state;
  float x[Q_ROWS * Q_COLS];
  make_tie_tensor(x);
  char in[512], out[512];
  write_npy("ties.npy", x, Q_ROWS, Q_COLS, in, sizeof in);
  path_in_tmp(out, sizeof out, "ties_q.npy");
  char *so = NULL;
  assert_int_equal(run(&so, NULL, "quantize --in '%s' --out '%s' --grid e2m1 --block 16 --scale fp32", in, out), 0);
  assert_non_null(strstr(so, "NMSE"));
  free(so);
  ufp4_npy y;
  assert_int_equal(ufp4_npy_read(out, &y), 0);
  assert_int_equal(y.ndim, 2);
  assert_int_equal(y.shape[0], Q_ROWS);
  assert_int_equal(y.shape[1], Q_COLS);
  for (int i = 0; i < Q_ROWS * Q_COLS; i++) {
    float want = copysignf(e2m1_levels[ref_rne_index(x[i])], x[i]);
    if (y.data[i] != want) fail_msg("element %d: x %g -> %g, expected %g", i, x[i], y.data[i], want);
  }
  /* Spot checks of the reference itself, by the rule in docs/NUMERICS.md: 0.75 -> 1 (index 2 even),
   * 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, 0.25 -> 0. */
  assert_true(y.data[1] == 0 && y.data[2] == 1 && y.data[3] == 1 && y.data[4] == 2 && y.data[5] == 2 &&
              y.data[6] == 4 && y.data[7] == 4);
  ufp4_npy_free(&y);
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }
static float get_f32(const uint8_t *p) {
  uint32_t u = get_u32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A tensor whose blocks have very different ranges, so every scale differs. */
static void make_ranged_tensor(float *x, size_t rows, size_t cols) {
  uint32_t s = 777;
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      s = s * 1664525u + 1013904223u;
      double u = ((double)(s >> 8) / 16777216.0) * 2 - 1;
      x[r * cols + c] = (float)(u * pow(2.0, (double)((r * 7 + c / 16) % 23) - 11));
    }
}

/* cols need not be a multiple of 16: each row then ends in a shorter block with its own scale. */
static void check_packed(const float *x, size_t rows, size_t cols) {
  char in[512], out[512], pk[512];
  write_npy("ranged.npy", x, rows, cols, in, sizeof in);
  path_in_tmp(out, sizeof out, "ranged_q.npy");
  path_in_tmp(pk, sizeof pk, "ranged.pack");
  assert_int_equal(run(NULL, NULL, "quantize --in '%s' --out '%s' --packed '%s'", in, out, pk), 0);
  size_t len = 0;
  uint8_t *f = (uint8_t *)slurp(pk, &len);
  assert_non_null(f);
  size_t n = rows * cols, nb = (cols + 15) / 16, nblk = rows * nb;
  assert_int_equal(len, 80 + 4 * nblk + (n + 1) / 2);
  assert_memory_equal(f, "UFP4PACK", 8);
  assert_int_equal(get_u32(f + 8), 1);   /* version */
  assert_int_equal(get_u32(f + 12), 80); /* header bytes */
  assert_int_equal(get_u32(f + 16), 0);  /* e2m1 */
  assert_int_equal(get_u32(f + 20), 0);  /* fp32 scale */
  assert_int_equal(get_u32(f + 24), 16); /* block */
  assert_int_equal(get_u32(f + 28), 0);  /* not tiled */
  assert_int_equal(get_u32(f + 32), 0);  /* no rht */
  assert_int_equal(get_u64(f + 40), rows);
  assert_int_equal(get_u64(f + 48), cols);
  assert_true(get_f32(f + 56) == 1.0f);
  assert_int_equal(get_u32(f + 60), 4);
  ufp4_npy y;
  assert_int_equal(ufp4_npy_read(out, &y), 0);
  assert_int_equal(y.count, n);
  const uint8_t *codes = f + 80 + 4 * nblk;
  if (n % 2) assert_int_equal(codes[n / 2] >> 4, 0); /* padding nibble */
  for (size_t i = 0; i < n; i++) {
    size_t r = i / cols, col = i % cols, blk = r * nb + col / 16;
    uint8_t c = (codes[i / 2] >> (4 * (i % 2))) & 0xF;
    float scale = get_f32(f + 80 + 4 * blk);
    float v = e2m1_levels[c & 7] * scale;
    if (c & 8) v = -v;
    if (v != y.data[i]) fail_msg("element %zu: code %x * %g = %g, dequantized %g", i, c, scale, v, y.data[i]);
    /* The fp32 scale is the block's amax / 6. */
    if (col % 16 == 0) {
      float amax = 0;
      for (size_t k = i; k < i + 16 && k < (r + 1) * cols; k++) amax = fmaxf(amax, fabsf(x[k]));
      assert_true(scale == amax / 6.0f);
    }
  }
  ufp4_npy_free(&y);
  free(f);
}

/* Four Over Six in the packed file: NVFP4 with --adaptive 4over6 --adaptive-metric maxabs. The
 * header records the kind and metric (offset 76), the tensor scale maps the amax to 256 (not 448),
 * no per-block flag is stored, and decode(code) * e4m3(byte) / tensor_scale reproduces the
 * dequantized output bit for bit: the round trip is exact whichever candidate each block kept. Some
 * blocks kept 4, recognisable by their E4M3 byte alone: that of amax * S_enc / 4. */
static void test_quantize_packed_4over6(void **state) {
  (void)state;
  enum { R = 17, C = 48 };
  static float x[R * C];
  make_ranged_tensor(x, R, C);
  char in[512], out[512], pk[512], *so = NULL;
  write_npy("fos.npy", x, R, C, in, sizeof in);
  path_in_tmp(out, sizeof out, "fos_q.npy");
  path_in_tmp(pk, sizeof pk, "fos.pack");
  assert_int_equal(run(&so, NULL, "quantize --in '%s' --out '%s' --packed '%s' --scale nvfp4 --adaptive 4over6 "
                                  "--adaptive-metric maxabs", in, out, pk), 0);
  assert_non_null(strstr(so, "blocks kept the 4-candidate"));
  free(so);
  size_t len = 0, n = R * C, nblk = R * C / 16;
  uint8_t *f = (uint8_t *)slurp(pk, &len);
  assert_non_null(f);
  assert_int_equal(len, 80 + nblk + n / 2);
  assert_int_equal(get_u32(f + 20), 1);                 /* nvfp4 */
  assert_int_equal(get_u32(f + 60), 1);                 /* one byte per scale: no flag */
  assert_int_equal(get_u32(f + 76), 1u | (2u << 8));   /* 4over6, maxabs */
  float amax = 0;
  for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
  const float ts = get_f32(f + 56);
  assert_true(ts == 256.0f * 6.0f / amax);
  ufp4_npy y;
  assert_int_equal(ufp4_npy_read(out, &y), 0);
  int fours = 0;
  for (size_t b = 0; b < nblk; b++) {
    float bmax = 0;
    for (size_t k = 0; k < 16; k++) bmax = fmaxf(bmax, fabsf(x[b * 16 + k]));
    uint8_t byte = f[80 + b], b4 = ufp4_f32_to_e4m3(bmax * ts / 4.0f), b6 = ufp4_f32_to_e4m3(bmax * ts / 6.0f);
    assert_true(byte == b4 || byte == b6);
    fours += byte == b4 && b4 != b6;
    float scale = ufp4_e4m3_to_f32(byte) / ts;
    for (size_t k = 0; k < 16; k++) {
      size_t i = b * 16 + k;
      uint8_t c = (f[80 + nblk + i / 2] >> (4 * (i % 2))) & 0xF;
      float v = e2m1_levels[c & 7] * scale;
      if (c & 8) v = -v;
      if (memcmp(&v, &y.data[i], sizeof v) != 0 && !(v == 0 && y.data[i] == 0))
        fail_msg("element %zu: packed %a, dequantized %a", i, (double)v, (double)y.data[i]);
    }
  }
  assert_true(fours > 0);
  ufp4_npy_free(&y);
  free(f);
  /* Refused with a clear message where 4/6 makes no sense. */
  char *se = NULL;
  assert_int_equal(run(NULL, &se, "quantize --in '%s' --out '%s' --grid e1m2 --adaptive 4over6", in, out), 2);
  assert_non_null(strstr(se, "needs grid e2m1"));
  free(se);
}

static void test_quantize_packed(void **state) {
  (void)state;
  enum { R = 33, C = 41 }; /* blocks of 16, 16, 9; odd element count, so one padding nibble */
  static float x[R * C];
  make_ranged_tensor(x, R, C);
  check_packed(x, R, C);
  /* The tie tensor: codes must be the reference RNE indices, and signs those of the inputs. */
  float t[Q_ROWS * Q_COLS];
  make_tie_tensor(t);
  char in[512], out[512], pk[512];
  write_npy("ties.npy", t, Q_ROWS, Q_COLS, in, sizeof in);
  path_in_tmp(out, sizeof out, "ties_q.npy");
  path_in_tmp(pk, sizeof pk, "ties.pack");
  assert_int_equal(run(NULL, NULL, "quantize --in '%s' --out '%s' --packed '%s'", in, out, pk), 0);
  size_t len = 0;
  uint8_t *f = (uint8_t *)slurp(pk, &len);
  assert_non_null(f);
  size_t nblk = Q_ROWS * Q_COLS / 16;
  assert_int_equal(len, 80 + 4 * nblk + Q_ROWS * Q_COLS / 2);
  const uint8_t *codes = f + 80 + 4 * nblk;
  for (size_t i = 0; i < Q_ROWS * Q_COLS; i++) {
    uint8_t c = (codes[i / 2] >> (4 * (i % 2))) & 0xF;
    int idx = ref_rne_index(t[i]);
    assert_int_equal(c & 7, idx);
    if (idx) assert_int_equal(c >> 3, signbit(t[i]) ? 1 : 0);
  }
  free(f);
}

/* ---- (4) errors: malformed input is exit 1 naming the file; usage errors are exit 2 ---- */

static void test_errors(void **state) {
  (void)state;
  char bad[512], out[512];
  path_in_tmp(bad, sizeof bad, "malformed_input.npy");
  path_in_tmp(out, sizeof out, "never_written.npy");
  FILE *f = fopen(bad, "wb");
  assert_non_null(f);
  fputs("\x93NUMPY this is not a valid header", f);
  fclose(f);
  char *err = NULL;
  assert_int_equal(run(NULL, &err, "quantize --in '%s' --out '%s'", bad, out), 1);
  assert_non_null(err);
  if (!strstr(err, "malformed_input.npy")) fail_msg("stderr does not name the file: %s", err);
  free(err);
  assert_int_not_equal(access(out, F_OK), 0);
  /* bias --in goes through the same reader. */
  assert_int_equal(run(NULL, &err, "bias --in '%s'", bad), 1);
  assert_non_null(strstr(err, "malformed_input.npy"));
  free(err);
  /* A well-formed 1-D array is still the wrong input. */
  float v[4] = {1, 2, 3, 4};
  size_t shape1[1] = {4};
  path_in_tmp(bad, sizeof bad, "one_d.npy");
  assert_int_equal(ufp4_npy_write(bad, v, shape1, 1), 0);
  assert_int_equal(run(NULL, &err, "quantize --in '%s' --out '%s'", bad, out), 1);
  assert_non_null(strstr(err, "one_d.npy"));
  free(err);

  const char *usage_errors[] = {
      "formats --bogus",          "bias --bogus",           "bias --rows abc",         "bias --grids e2m1,e9m9",
      "quantize --in a --bogus",  "quantize --out x.npy",   "quantize --in a --out b --rht 3",
      "bench --bogus",            "bench nosuchbench",      "bias --dist cauchy",
      "bench kernels --shape 8x8", "bench quant --shape 16x64", "bench kernels --threads 0",
  };
  for (size_t i = 0; i < sizeof usage_errors / sizeof *usage_errors; i++) {
    int st = run(NULL, NULL, "%s", usage_errors[i]);
    if (st != 2) fail_msg("'ufp4 %s' exited %d, expected 2", usage_errors[i], st);
  }
  const char *helps[] = {"formats", "bias", "quantize", "bench"};
  for (size_t i = 0; i < 4; i++) {
    char *so = NULL;
    assert_int_equal(run(&so, NULL, "%s --help", helps[i]), 0);
    assert_non_null(strstr(so, "usage: ufp4"));
    free(so);
  }
}

/* ---- (6) the chain: eta_cum is the running product of eta ----
 * Only E2M1 is sure to shrink: on gaussian data each operand keeps alpha ~ 0.996 (its bins at 2 and
 * 4 round down on average), so eta < 1 and eta_cum falls layer over layer. A uniform grid has no
 * geometric bias, and with a density that decreases inside a bin RNE rounds slightly more values
 * up than down: alpha ~ 1.0007 for E1M2 on N(0,1) in 1x16 blocks (numpy check), so its eta_cum may
 * rise, and the test does not ask it to fall. */
static void test_bias_layers(void **state) {
  (void)state;
  cJSON *j = run_json("bias --layers 4 --json");
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "results");
  assert_int_equal(cJSON_GetArraySize(res), 12);
  const cJSON *r;
  int n_e2m1 = 0;
  cJSON_ArrayForEach(r, res) {
    const char *grid = cJSON_GetObjectItemCaseSensitive(r, "grid")->valuestring;
    int shrinks = !strcmp(grid, "e2m1");
    n_e2m1 += shrinks;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(r, "layers");
    assert_int_equal(cJSON_GetArraySize(layers), 4);
    double prev = 1;
    for (int k = 0; k < 4; k++) {
      const cJSON *l = cJSON_GetArrayItem(layers, k);
      assert_int_equal((int)num(l, "layer"), k + 1);
      double eta = num(l, "eta"), cum = num(l, "eta_cum"), cosv = num(l, "cosine");
      assert_true(eta > 0.9 && eta < 1.1);
      if (fabs(cum - prev * eta) > 1e-12 * fabs(cum))
        fail_msg("%s layer %d: eta_cum %.17g != %.17g * %.17g", grid, k + 1, cum, prev, eta);
      if (shrinks && !(eta < 1 && cum < prev)) fail_msg("e2m1 layer %d: eta %.9f, eta_cum %.9f after %.9f", k + 1, eta, cum, prev);
      assert_true(cosv > 0 && cosv <= 1 + 1e-12);
      assert_true(num(l, "signal_ratio") > 0);
      prev = cum;
    }
  }
  assert_int_equal(n_e2m1, 2); /* raw and rht16 */
  cJSON_Delete(j);
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs `ufp4 bench ARGS --json FILE`, checks that its output names every one of names[0..n), and
 * returns the parsed JSON. */
static cJSON *bench_json(const char *args, const char *file, const char *const *names, size_t n_names) {
  char json[600];
  path_in_tmp(json, sizeof json, file);
  char *so = NULL;
  assert_int_equal(run(&so, NULL, "bench %s --json '%s'", args, json), 0);
  assert_non_null(so);
  for (size_t i = 0; i < n_names; i++)
    if (!strstr(so, names[i])) fail_msg("bench %s printed no '%s':\n%s", args, names[i], so);
  free(so);
  size_t n = 0;
  char *text = slurp(json, &n);
  assert_non_null(text);
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  return j;
}

/* ---- (7) bench kernels: every kernel timed at 1 and 2 threads, one row each in the JSON ---- */
static void test_bench_kernels(void **state) {
  (void)state;
  const char *names[] = {"rmsnorm bwd", "attention fwd", "swiglu bwd", "quant e2m1 SR columns",
                         "linear qkv e2m1 Wgrad", "grad norm + AdamW"};
  cJSON *j = bench_json("kernels --reps 1 --shape 16x64 --threads 2", "kernels.json", names,
                        sizeof names / sizeof *names);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "threads")->valueint, 2);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "kernels"), *r;
  /* 27 kernels, and 3 more where the packed GEMM is available (packed_gemm_internal.h). */
  const int nrows = cJSON_GetArraySize(rows);
  assert_true(nrows == 27 || nrows == 30);
  cJSON_ArrayForEach(r, rows) {
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "us_1_thread")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "us_n_threads")->valuedouble > 0);
  }
  cJSON_Delete(j);
}

/* ---- (8) bench quant's last table: the quantize-while-packing bound, one row per operand and rounding ---- */
static void test_bench_quant_strips(void **state) {
  (void)state;
  const char *names[] = {"quantize while packing", "16x64 q,k,v X", "llmc down X"};
  cJSON *j = bench_json("quant --rows 16 --cols 64 --reps 1 --threads 1", "quant.json", names,
                        sizeof names / sizeof *names);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "strips"), *r;
  assert_int_equal(cJSON_GetArraySize(rows), 8); /* 4 operands x RNE, SR */
  int sr = 0;
  cJSON_ArrayForEach(r, rows) {
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "full_s")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "strips_s")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "reread_full_s")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "reread_strip_s")->valuedouble > 0);
    assert_true(cJSON_GetObjectItemCaseSensitive(r, "gemm_s")->valuedouble > 0);
    sr += !strcmp(cJSON_GetObjectItemCaseSensitive(r, "round")->valuestring, "sr");
  }
  assert_int_equal(sr, 4);
  cJSON_Delete(j);
}

int main(void) {
  cli = getenv("UFP4_CLI");
  if (!cli || !*cli || access(cli, X_OK) != 0) {
    fprintf(stderr, "test_cli: UFP4_CLI is not set to an executable ufp4 binary; skipping\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_formats_json),      cmocka_unit_test(test_bias_reversal),
      cmocka_unit_test(test_quantize_exact_rne), cmocka_unit_test(test_quantize_packed), cmocka_unit_test(test_quantize_packed_4over6),
      cmocka_unit_test(test_errors),            cmocka_unit_test(test_bias_layers),
      cmocka_unit_test(test_bench_kernels),     cmocka_unit_test(test_bench_quant_strips),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
