/* safetensors writer and reader: round trip, bytes against an independent Python writer,
 * exhaustive F16, malformed files, mutation robustness, and atomic-write failure paths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ufp4/error.h"
#include "ufp4/safetensors.h"

static char tmpdir[64];

static int setup_dir(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/ufp4_st_XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", tmpdir, name); }

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static void spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static int has(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) {
    print_error("message \"%s\" lacks \"%s\"\n", hay, needle);
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------ the shared test set */

/* Must match make_set() in tests/st_ref.py. */
static const uint32_t special[] = {
    0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0xFF800000, 0x7FC00001, 0x7F800001, 0x80000000,
    0x00000001, 0x00008000, 0x00018000, 0x477FF000, 0x477FE000, 0x477FEFFF, 0x33800000, 0x33000000,
    0x33400000, 0x38800000, 0x387FE000, 0x387FF000, 0xC0490FDB, 0x3F800000};
#define NSPECIAL (sizeof special / sizeof special[0])
#define NSET 10
static const char *qname = "name \"q\" \xc3\xa9";

static float value(int k, int i) { return (float)((double)((i * 37 + k * 11) % 97 - 48) / 3.0); }

typedef struct {
  float emb[12], head[12], bias[5], sp[NSPECIAL], q[1];
  int64_t step;
  uint8_t mask[3];
  double adam[2];
  ufp4_st_tensor t[NSET];
  ufp4_st_meta meta[2];
} test_set;

static ufp4_st_tensor mk(const char *name, ufp4_st_dtype dt, ufp4_st_src src, const void *data, int ndim,
                         size_t d0, size_t d1) {
  ufp4_st_tensor t = {.name = name, .dtype = dt, .src = src, .ndim = ndim, .data = data};
  t.shape[0] = d0;
  t.shape[1] = d1;
  return t;
}

static void make_set(test_set *s) {
  for (int i = 0; i < 12; i++) s->emb[i] = value(0, i), s->head[i] = value(1, i);
  for (int i = 0; i < 5; i++) s->bias[i] = value(2, i);
  for (size_t i = 0; i < NSPECIAL; i++) s->sp[i] = u2f(special[i]);
  s->q[0] = value(8, 0);
  s->step = 12345;
  s->mask[0] = 1, s->mask[1] = 0, s->mask[2] = 1;
  s->adam[0] = 0.1, s->adam[1] = -2.5;
  s->t[0] = mk("model.embed_tokens.weight", UFP4_ST_F32, UFP4_ST_SRC_F32, s->emb, 2, 4, 3);
  s->t[1] = mk("lm_head.weight", UFP4_ST_BF16, UFP4_ST_SRC_F32, s->head, 2, 3, 4);
  s->t[2] = mk("b.bias", UFP4_ST_F16, UFP4_ST_SRC_F32, s->bias, 1, 5, 0);
  s->t[3] = mk("bf16.special", UFP4_ST_BF16, UFP4_ST_SRC_F32, s->sp, 1, NSPECIAL, 0);
  s->t[4] = mk("f16.special", UFP4_ST_F16, UFP4_ST_SRC_F32, s->sp, 1, NSPECIAL, 0);
  s->t[5] = mk("step", UFP4_ST_I64, UFP4_ST_SRC_RAW, &s->step, 0, 0, 0);
  s->t[6] = mk("mask", UFP4_ST_U8, UFP4_ST_SRC_RAW, s->mask, 1, 3, 0);
  s->t[7] = mk("empty", UFP4_ST_F32, UFP4_ST_SRC_F32, NULL, 2, 0, 4);
  s->t[8] = mk(qname, UFP4_ST_F32, UFP4_ST_SRC_RAW, s->q, 1, 1, 0);
  s->t[9] = mk("adam.exp_avg", UFP4_ST_F64, UFP4_ST_SRC_RAW, s->adam, 1, 2, 0);
  s->meta[0] = (ufp4_st_meta){"note", "say \"hi\"\n\x01\xc3\xa9"};
  s->meta[1] = (ufp4_st_meta){"format", "pt"};
}

/* Reference roundings, chosen by exact distance rather than bit tricks. */
static uint16_t ref_bf16(float x) {
  uint32_t u = f2u(x);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40);
  uint32_t lo = u >> 16, hi = lo + 1;
  if ((u & 0xFFFF) == 0) return (uint16_t)lo;
  double a = fabs((double)x), ml = fabs((double)u2f(lo << 16));
  double mh = ((hi & 0x7FFF) == 0x7F80) ? ldexp(1, 128) : fabs((double)u2f(hi << 16));
  double dl = a - ml, dh = mh - a;
  return (uint16_t)((dl < dh || (dl == dh && !(lo & 1))) ? lo : hi);
}

static double ref_f16_value(uint16_t h) { /* finite codes only */
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return (h & 0x8000) ? -v : v;
}

static uint16_t ref_f16(float x) {
  uint32_t u = f2u(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return sign | 0x7E00 | ((u >> 13) & 0x1FF);
  double a = fabs((double)x);
  if (a >= 65520.0) return sign | 0x7C00; /* 65504 + half its ulp (32/2) and above */
  uint16_t best = 0;
  double bd = INFINITY;
  for (uint32_t c = 0; c < 0x7C00; c++) { /* scan all finite magnitudes; ties keep the even one */
    double d = fabs(ref_f16_value((uint16_t)c) - a);
    if (d < bd || (d == bd && !(c & 1))) bd = d, best = (uint16_t)c;
  }
  return sign | best;
}

/* ------------------------------------------------------------------ round trip */

static void test_roundtrip(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char p[256];
  path_in(p, sizeof p, "rt.safetensors");
  assert_int_equal(ufp4_st_write(p, s.t, NSET, s.meta, 2), 0);

  ufp4_st *st = NULL;
  assert_int_equal(ufp4_st_open(p, &st), 0);
  assert_int_equal(ufp4_st_count(st), NSET);
  for (size_t i = 1; i < NSET; i++)
    assert_true(strcmp(ufp4_st_at(st, i - 1)->name, ufp4_st_at(st, i)->name) < 0);
  assert_null(ufp4_st_at(st, NSET));

  /* The data section starts 8-aligned and each whole-byte tensor at a multiple of its size. */
  size_t len;
  uint8_t *bytes = slurp(p, &len);
  assert_non_null(bytes);
  uint64_t hn = 0;
  for (int b = 7; b >= 0; b--) hn = (hn << 8) | bytes[b];
  assert_int_equal(hn % 8, 0);
  for (size_t i = 0; i < NSET; i++) {
    const ufp4_st_info *t = ufp4_st_at(st, i);
    assert_int_equal(t->begin % (size_t)(ufp4_st_dtype_bits(t->dtype) / 8), 0);
    assert_ptr_equal((const uint8_t *)t->data - t->begin, (const void *)((const uint8_t *)ufp4_st_at(st, 0)->data - ufp4_st_at(st, 0)->begin));
  }
  free(bytes);

  float out[64];
  size_t sh43[2] = {4, 3}, sh34[2] = {3, 4}, sh5[1] = {5}, shs[1] = {NSPECIAL}, sh04[2] = {0, 4};
  assert_int_equal(ufp4_st_read_f32(st, "model.embed_tokens.weight", out, sh43, 2), 0);
  for (int i = 0; i < 12; i++) assert_int_equal(f2u(out[i]), f2u(s.emb[i]));
  assert_int_equal(ufp4_st_read_f32(st, "lm_head.weight", out, sh34, 2), 0);
  for (int i = 0; i < 12; i++) assert_int_equal(f2u(out[i]), (uint32_t)ref_bf16(s.head[i]) << 16);
  assert_int_equal(ufp4_st_read_f32(st, "b.bias", out, sh5, 1), 0);
  for (int i = 0; i < 5; i++) assert_true(out[i] == (float)ref_f16_value(ref_f16(s.bias[i])));

  /* Special values: raw codes against the references and against hand-worked cases. */
  const ufp4_st_info *tb = ufp4_st_find(st, "bf16.special"), *th = ufp4_st_find(st, "f16.special");
  assert_non_null(tb);
  assert_non_null(th);
  assert_int_equal(tb->dtype, UFP4_ST_BF16);
  assert_int_equal(th->count, NSPECIAL);
  uint16_t cb[NSPECIAL], ch[NSPECIAL];
  memcpy(cb, tb->data, sizeof cb);
  memcpy(ch, th->data, sizeof ch);
  for (size_t i = 0; i < NSPECIAL; i++) {
    assert_int_equal(cb[i], ref_bf16(s.sp[i]));
    assert_int_equal(ch[i], ref_f16(s.sp[i]));
  }
  assert_int_equal(cb[0], 0x3F80); /* 1 + 2^-8: tie, even is 1.0 */
  assert_int_equal(cb[1], 0x3F82); /* 1 + 3*2^-8: tie between 0x3F81 and 0x3F82, even wins */
  assert_int_equal(cb[3], 0x7F80); /* FLT_MAX is above bf16 max + half ulp: Inf */
  assert_int_equal(cb[6], 0x7FC0); /* signalling NaN comes out quiet */
  assert_int_equal(ch[11], 0x7C00); /* 65520: tie between 65504 (odd) and 65536 -> Inf */
  assert_int_equal(ch[13], 0x7BFF); /* just under 65520 -> 65504 */
  assert_int_equal(ch[15], 0x0000); /* 2^-25: tie between 0 and 2^-24 -> 0 */
  assert_int_equal(ch[16], 0x0001); /* 1.5 * 2^-25 -> 2^-24 */
  assert_int_equal(ch[19], 0x0400); /* (1023.5) * 2^-24: tie -> 1024 * 2^-24, the smallest normal */
  assert_int_equal(ufp4_st_read_f32(st, "bf16.special", out, shs, 1), 0);
  assert_true(isnan(out[5]) && isinf(out[3]) && out[0] == 1.0f);

  assert_int_equal(ufp4_st_read_f32(st, "empty", out, sh04, 2), 0);
  size_t sh1[1] = {1}, sh2[1] = {2};
  assert_int_equal(ufp4_st_read_f32(st, qname, out, sh1, 1), 0);
  assert_true(out[0] == s.q[0]);
  assert_int_equal(ufp4_st_read_f32(st, "adam.exp_avg", out, sh2, 1), 0);
  assert_true(out[0] == 0.1f && out[1] == -2.5f);

  const ufp4_st_info *ts = ufp4_st_find(st, "step");
  assert_non_null(ts);
  assert_int_equal(ts->ndim, 0);
  assert_int_equal(ts->count, 1);
  int64_t step;
  memcpy(&step, ts->data, 8);
  assert_int_equal(step, 12345);
  const ufp4_st_info *tm = ufp4_st_find(st, "mask");
  assert_memory_equal(tm->data, s.mask, 3);
  assert_null(ufp4_st_find(st, "nope"));

  assert_int_equal(ufp4_st_meta_count(st), 2);
  assert_string_equal(ufp4_st_meta_key(st, 0), "format");
  assert_string_equal(ufp4_st_meta_get(st, "note"), s.meta[0].value);
  assert_null(ufp4_st_meta_get(st, "absent"));

  /* Errors name the tensor and both shapes. */
  assert_int_equal(ufp4_st_read_f32(st, "lm_head.weight", out, sh43, 2), UFP4_EINVAL);
  assert_true(has(ufp4_last_error(), "lm_head.weight") && has(ufp4_last_error(), "[3,4]") &&
              has(ufp4_last_error(), "[4,3]") && has(ufp4_last_error(), p));
  assert_int_equal(ufp4_st_read_f32(st, "lm_head.weight", out, sh34, 1), UFP4_EINVAL);
  size_t sh0[1] = {0};
  assert_int_equal(ufp4_st_read_f32(st, "step", out, sh0, 0), UFP4_EINVAL);
  assert_true(has(ufp4_last_error(), "step") && has(ufp4_last_error(), "I64"));
  assert_int_equal(ufp4_st_read_f32(st, "nope", out, sh1, 1), UFP4_EINVAL);
  assert_true(has(ufp4_last_error(), "nope"));
  ufp4_st_close(st);
}

static void test_deterministic(void **state) {
  (void)state;
  test_set s, r;
  make_set(&s);
  make_set(&r);
  for (int i = 0; i < NSET; i++) r.t[i] = s.t[NSET - 1 - i];
  r.meta[0] = s.meta[1], r.meta[1] = s.meta[0];
  char a[256], b[256];
  path_in(a, sizeof a, "det_a.safetensors");
  path_in(b, sizeof b, "det_b.safetensors");
  assert_int_equal(ufp4_st_write(a, s.t, NSET, s.meta, 2), 0);
  assert_int_equal(ufp4_st_write(b, r.t, NSET, r.meta, 2), 0);
  size_t la, lb;
  uint8_t *ba = slurp(a, &la), *bb = slurp(b, &lb);
  assert_int_equal(la, lb);
  assert_memory_equal(ba, bb, la);
  free(ba);
  free(bb);
}

/* ------------------------------------------------------------------ Python reference */

static int run_ref(const char *mode, const char *file) {
  const char *src = getenv("UFP4_SOURCE_DIR");
  char script[512], cmd[1400];
  if (src) {
    snprintf(script, sizeof script, "%s/tests/st_ref.py", src);
  } else { /* run by hand: the script sits next to this source file */
    snprintf(script, sizeof script, "%s", __FILE__);
    char *slash = strrchr(script, '/');
    snprintf(slash ? slash + 1 : script, sizeof script - (size_t)(slash ? slash + 1 - script : 0), "st_ref.py");
  }
  if (access("/usr/bin/python3", X_OK) != 0 || access(script, R_OK) != 0) return -77;
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' %s '%s'", script, mode, file);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_python_bytes(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char ours[256], ref[256];
  path_in(ours, sizeof ours, "py_ours.safetensors");
  path_in(ref, sizeof ref, "py_ref.safetensors");
  assert_int_equal(ufp4_st_write(ours, s.t, NSET, s.meta, 2), 0);
  int rc = run_ref("write", ref);
  if (rc == -77) {
    print_message("SKIP: /usr/bin/python3 or tests/st_ref.py (UFP4_SOURCE_DIR) not found\n");
    skip();
  }
  assert_int_equal(rc, 0);
  size_t lo, lr;
  uint8_t *bo = slurp(ours, &lo), *br = slurp(ref, &lr);
  assert_non_null(bo);
  assert_non_null(br);
  assert_int_equal(lo, lr);
  for (size_t i = 0; i < lo; i++)
    if (bo[i] != br[i]) fail_msg("byte %zu differs: ours 0x%02x, Python 0x%02x", i, bo[i], br[i]);
  free(bo);
  free(br);
  assert_int_equal(run_ref("check", ours), 0);
  /* And our reader accepts the independently written file. */
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(ref, &st), 0);
  assert_int_equal(ufp4_st_count(st), NSET);
  ufp4_st_close(st);
}

static void test_torch_load(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char ours[256];
  path_in(ours, sizeof ours, "torch.safetensors");
  assert_int_equal(ufp4_st_write(ours, s.t, NSET, s.meta, 2), 0);
  int rc = run_ref("torch", ours);
  if (rc == -77 || rc == 77) {
    print_message("SKIP: torch is not importable under /usr/bin/python3\n");
    skip();
  }
  assert_int_equal(rc, 0);
}

/* ------------------------------------------------------------------ F16, exhaustively */

static void test_f16_exhaustive(void **state) {
  (void)state;
  uint16_t *codes = malloc(65536 * sizeof *codes);
  float *f = malloc(65536 * sizeof *f);
  for (uint32_t c = 0; c < 65536; c++) codes[c] = (uint16_t)c;
  char p[256], q[256];
  path_in(p, sizeof p, "f16_all.safetensors");
  path_in(q, sizeof q, "f16_back.safetensors");
  ufp4_st_tensor t = mk("h", UFP4_ST_F16, UFP4_ST_SRC_RAW, codes, 1, 65536, 0);
  assert_int_equal(ufp4_st_write(p, &t, 1, NULL, 0), 0);
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(p, &st), 0);
  size_t sh[1] = {65536};
  assert_int_equal(ufp4_st_read_f32(st, "h", f, sh, 1), 0);
  ufp4_st_close(st);
  for (uint32_t c = 0; c < 65536; c++) {
    int e = (c >> 10) & 0x1F, m = c & 0x3FF;
    if (e == 31) {
      assert_true(m ? isnan(f[c]) : isinf(f[c]));
      assert_int_equal(signbit(f[c]) != 0, (c >> 15) != 0);
    } else if (f[c] != (float)ref_f16_value((uint16_t)c) || (signbit(f[c]) != 0) != (signbit(ref_f16_value((uint16_t)c)) != 0)) {
      fail_msg("F16 0x%04x decodes to %a", c, (double)f[c]);
    }
  }
  /* Every F16 value is exact in F32, so encoding it back must return the code (NaNs come back
   * quiet, with their payload). */
  t = mk("h", UFP4_ST_F16, UFP4_ST_SRC_F32, f, 1, 65536, 0);
  assert_int_equal(ufp4_st_write(q, &t, 1, NULL, 0), 0);
  assert_int_equal(ufp4_st_open(q, &st), 0);
  const uint8_t *back = ufp4_st_find(st, "h")->data;
  for (uint32_t c = 0; c < 65536; c++) {
    uint16_t b;
    memcpy(&b, back + 2 * c, 2);
    int nan = ((c >> 10) & 0x1F) == 31 && (c & 0x3FF);
    uint16_t want = nan ? (uint16_t)(c | 0x200) : (uint16_t)c;
    if (b != want) fail_msg("F16 0x%04x re-encodes to 0x%04x", c, b);
  }
  ufp4_st_close(st);
  free(codes);
  free(f);
}

/* ------------------------------------------------------------------ malformed files */

static uint8_t *image(const char *json, size_t jlen, size_t data_len, size_t *len) {
  *len = 8 + jlen + data_len;
  uint8_t *b = calloc(1, *len);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)jlen >> (8 * i));
  memcpy(b + 8, json, jlen);
  return b;
}

static void expect_bad(const uint8_t *b, size_t len, const char *want, const char *want2) {
  ufp4_st *st = (ufp4_st *)(uintptr_t)1;
  int rc = ufp4_st_parse(b, len, "bad.st", &st);
  if (rc != UFP4_EFORMAT) fail_msg("expected EFORMAT (%s), got %d", want, rc);
  assert_null(st);
  const char *m = ufp4_last_error();
  assert_true(has(m, "bad.st") && has(m, want) && (!want2 || has(m, want2)));
}

static void test_malformed_json(void **state) {
  (void)state;
  static const struct {
    const char *json;
    size_t data;
    const char *want, *want2;
  } cases[] = {
      {"{abc", 0, "not valid JSON", NULL},
      {"{} x", 0, "not valid JSON", NULL},
      {"[1,2]", 0, "not an object", NULL},
      {"\"hi\"", 0, "not an object", NULL},
      {"{\"w\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype F17", "w"},
      {"{\"w\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "need 8", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the end", "w"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap", NULL},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "gap", "b"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap", "a"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover", NULL},
      {"{}", 4, "cover", NULL},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "negative", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "not an integer", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "not an integer", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, "above 2^53", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0,
       "overflows", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, "negative", "w"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "appears twice", "a"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "missing \"data_offsets\"", "w"},
      {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing \"dtype\"", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "missing \"shape\"", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unexpected key", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "appears twice",
       "w"},
      {"{\"w\":3}", 0, "entry is not an object", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 4, "shape is not an array", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets is not", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, "end before begin", "w"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "more than 8",
       "w"},
      {"{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "whole number of bytes", "w"},
      {"{\"__metadata__\":3}", 0, "__metadata__ is not an object", NULL},
      {"{\"__metadata__\":{\"a\":1}}", 0, "not a string", "a"},
      {"{\"__metadata__\":{\"a\":\"x\",\"a\":\"y\"}}", 0, "appears twice", "a"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len;
    uint8_t *b = image(cases[i].json, strlen(cases[i].json), cases[i].data, &len);
    print_message("case %zu: %s\n", i, cases[i].json);
    expect_bad(b, len, cases[i].want, cases[i].want2);
    free(b);
  }

  /* Positive controls: the same shapes of file, well formed, are accepted (unpadded headers too). */
  static const struct {
    const char *json;
    size_t data;
  } good[] = {
      {"{}", 0},
      {"{\"w\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]}}", 2},
      {"{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}  \n", 8},
      {"{\"__metadata__\":{\"k\":\"v\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[0,4]}}", 4},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    size_t len;
    uint8_t *b = image(good[i].json, strlen(good[i].json), good[i].data, &len);
    ufp4_st *st;
    if (ufp4_st_parse(b, len, "good.st", &st) != 0) fail_msg("good case %zu rejected: %s", i, ufp4_last_error());
    ufp4_st_close(st);
    free(b);
  }
}

static void test_malformed_binary(void **state) {
  (void)state;
  uint8_t small[5] = {2, 0, 0, 0, 0};
  expect_bad(small, sizeof small, "shorter than", NULL);
  expect_bad(small, 0, "shorter than", NULL);

  size_t len;
  uint8_t *b = image("{}", 2, 0, &len);
  b[0] = 100; /* N = 100 but only 2 header bytes follow */
  expect_bad(b, len, "past the end", NULL);
  b[0] = 0, b[5] = 1; /* N = 2^40 */
  expect_bad(b, len, "exceeds the limit", NULL);
  b[5] = 0; /* N = 0 */
  expect_bad(b, len, "header size is 0", NULL);
  free(b);

  b = image("{}\0 ", 4, 0, &len);
  expect_bad(b, len, "UTF-8", NULL);
  free(b);
  b = image("{\"\xff\":1}", 6, 0, &len);
  expect_bad(b, len, "UTF-8", NULL);
  free(b);
  b = image("{\"\xc0\xaf\":1}", 7, 0, &len); /* overlong '/' */
  expect_bad(b, len, "UTF-8", NULL);
  free(b);
}

/* Every single-byte corruption and every truncation of a real file either parses to something
 * self-consistent or is rejected with EFORMAT and a message; none crashes. */
static void test_mutations(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char p[256];
  path_in(p, sizeof p, "mut.safetensors");
  assert_int_equal(ufp4_st_write(p, s.t, NSET, s.meta, 2), 0);
  size_t len;
  uint8_t *orig = slurp(p, &len);
  uint8_t *b = malloc(len);
  static const uint8_t masks[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF};
  size_t accepted = 0, rejected = 0;
  for (size_t i = 0; i < len; i++)
    for (size_t m = 0; m < sizeof masks; m++) {
      memcpy(b, orig, len);
      b[i] ^= masks[m];
      ufp4_st *st;
      int rc = ufp4_st_parse(b, len, "mut", &st);
      if (rc == 0) {
        accepted++;
        size_t covered = 0;
        for (size_t k = 0; k < ufp4_st_count(st); k++) {
          const ufp4_st_info *t = ufp4_st_at(st, k);
          covered += t->nbytes;
          assert_true((const uint8_t *)t->data >= b && (const uint8_t *)t->data + t->nbytes <= b + len);
        }
        assert_true(covered < len);
        ufp4_st_close(st);
      } else {
        rejected++;
        if (rc != UFP4_EFORMAT) fail_msg("byte %zu ^ 0x%02x: status %d", i, masks[m], rc);
        assert_true(strstr(ufp4_last_error(), "mut") != NULL);
      }
    }
  /* Flipping data bytes keeps the file valid; flipping most header bytes does not. */
  assert_true(accepted > 0 && rejected > 0);
  for (size_t n = 0; n < len; n++) {
    ufp4_st *st;
    if (ufp4_st_parse(orig, n, "trunc", &st) != UFP4_EFORMAT) fail_msg("truncation to %zu accepted", n);
  }
  free(b);
  free(orig);
}

static void test_open_errors(void **state) {
  (void)state;
  ufp4_st *st;
  char p[256];
  path_in(p, sizeof p, "does_not_exist.safetensors");
  assert_int_equal(ufp4_st_open(p, &st), UFP4_EIO);
  assert_true(has(ufp4_last_error(), p));
  assert_int_equal(ufp4_st_open(tmpdir, &st), UFP4_EIO);
  path_in(p, sizeof p, "empty_file");
  spit(p, "", 0);
  assert_int_equal(ufp4_st_open(p, &st), UFP4_EFORMAT);
  assert_true(has(ufp4_last_error(), p));
}

/* ------------------------------------------------------------------ atomic writes */

static int temp_files_left(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) n++;
  if (d) closedir(d);
  return n;
}

static void test_atomic_faults(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char p[256];
  path_in(p, sizeof p, "keep.safetensors");
  static const char old[] = "OLD CONTENT, must survive";
  spit(p, old, sizeof old);
  static const struct {
    ufp4_st_fault f;
    const char *err;
  } faults[] = {
      {UFP4_ST_FAULT_WRITE, "No space left on device"},
      {UFP4_ST_FAULT_FSYNC, "Input/output error"},
      {UFP4_ST_FAULT_RENAME, "Permission denied"},
  };
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    ufp4_st_test_fault(faults[i].f);
    int rc = ufp4_st_write(p, s.t, NSET, s.meta, 2);
    ufp4_st_test_fault(UFP4_ST_FAULT_NONE);
    assert_int_equal(rc, UFP4_EIO);
    assert_true(has(ufp4_last_error(), p) && has(ufp4_last_error(), faults[i].err));
    size_t len;
    uint8_t *now = slurp(p, &len);
    assert_int_equal(len, sizeof old);
    assert_memory_equal(now, old, sizeof old);
    free(now);
    assert_int_equal(temp_files_left(), 0);
  }
  /* Without a fault the same call replaces the file. */
  assert_int_equal(ufp4_st_write(p, s.t, NSET, s.meta, 2), 0);
  ufp4_st *st;
  assert_int_equal(ufp4_st_open(p, &st), 0);
  ufp4_st_close(st);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0644);
}

static void test_atomic_os_failures(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char p[256];
  /* A folder that does not exist: the temporary cannot be created. */
  path_in(p, sizeof p, "no_such_dir/x.safetensors");
  assert_int_equal(ufp4_st_write(p, s.t, NSET, s.meta, 2), UFP4_EIO);
  assert_true(has(ufp4_last_error(), p) && has(ufp4_last_error(), "No such file or directory"));
  /* The path is a folder: rename(2) refuses (EISDIR) even for root; the folder survives. */
  path_in(p, sizeof p, "a_dir");
  assert_int_equal(mkdir(p, 0755), 0);
  assert_int_equal(ufp4_st_write(p, s.t, NSET, s.meta, 2), UFP4_EIO);
  assert_true(has(ufp4_last_error(), p) && has(ufp4_last_error(), "rename"));
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(temp_files_left(), 0);
  assert_int_equal(rmdir(p), 0);
}

static void test_write_invalid(void **state) {
  (void)state;
  test_set s;
  make_set(&s);
  char p[256];
  path_in(p, sizeof p, "invalid.safetensors");
  ufp4_st_tensor t[2] = {s.t[0], s.t[0]};
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL); /* duplicate name */
  assert_true(has(ufp4_last_error(), "model.embed_tokens.weight"));
  t[1].name = "__metadata__";
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL);
  t[1] = s.t[5];
  t[1].src = UFP4_ST_SRC_F32; /* no float -> I64 conversion */
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL);
  assert_true(has(ufp4_last_error(), "step"));
  t[1] = s.t[1];
  t[1].name = "bad\xff";
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL);
  t[1] = s.t[1];
  t[1].ndim = 9;
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL);
  t[1].ndim = 3;
  t[1].shape[0] = t[1].shape[1] = t[1].shape[2] = (size_t)1 << 40; /* 2^120 elements */
  assert_int_equal(ufp4_st_write(p, t, 2, NULL, 0), UFP4_EINVAL);
  ufp4_st_meta m[2] = {{"k", "a"}, {"k", "b"}};
  assert_int_equal(ufp4_st_write(p, t, 1, m, 2), UFP4_EINVAL);
  assert_int_equal(access(p, F_OK), -1);
  assert_int_equal(temp_files_left(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),        cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_python_bytes),     cmocka_unit_test(test_torch_load),
      cmocka_unit_test(test_f16_exhaustive),   cmocka_unit_test(test_malformed_json),
      cmocka_unit_test(test_malformed_binary), cmocka_unit_test(test_mutations),
      cmocka_unit_test(test_open_errors),      cmocka_unit_test(test_atomic_faults),
      cmocka_unit_test(test_atomic_os_failures), cmocka_unit_test(test_write_invalid),
  };
  return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
