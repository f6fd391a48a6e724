/* The run-config schema (training/train_schema.h) is the one declaration of every setting's range.
 * For every row, both readers of a setting, the JSON loader (--config, resume) and the flag parser
 * of `ufp4 train`, must accept each bound and refuse the closest value past it. The model limits
 * must be the same in the schema, in model validation and in the MoE layer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_fixture.h"
#include "training/train_schema.h"
#include "ufp4/error.h"
#include "ufp4/model.h"
#include "ufp4/moe.h"

#define ACCEPTED "--data DIR is required" /* what `ufp4 train` says once every flag parsed */

static int is_number(const ufp4_train_field *f) {
  return f->kind == UFP4_CFG_INT || f->kind == UFP4_CFG_FLOAT || f->kind == UFP4_CFG_DOUBLE ||
         f->kind == UFP4_CFG_SEED;
}

static int is_whole(const ufp4_train_field *f) {
  return f->kind == UFP4_CFG_INT || f->kind == UFP4_CFG_SEED;
}

/* The closest value past `bound` in direction dir (+1 or -1) that the kind could hold. */
static double past(const ufp4_train_field *f, double bound, double dir) {
  if (is_whole(f) && bound + dir != bound) return bound + dir;
  double v = nextafter(bound, dir * INFINITY);
  return is_whole(f) ? (dir > 0 ? ceil(v) : floor(v)) : v;
}

static void number_text(const ufp4_train_field *f, double v, char *buf, size_t size) {
  snprintf(buf, size, is_whole(f) ? "%.0f" : "%.17g", v);
}

/* A value both readers must accept, or refuse. */
typedef struct {
  char text[1100];
  int accepted;
} probe;

/* The probes of a row: each bound of a number and the closest value past it; the longest string
 * that fits and one byte more; a policy and a word that is none. Returns how many. */
static int probes(const ufp4_train_field *f, probe out[4]) {
  if (is_number(f)) {
    const double v[4] = {f->lo, f->hi, past(f, f->lo, -1), past(f, f->hi, +1)};
    for (int i = 0; i < 4; i++) {
      number_text(f, v[i], out[i].text, sizeof out[i].text);
      out[i].accepted = i < 2;
    }
    return 4;
  }
  if (f->kind == UFP4_CFG_TEXT || f->kind == UFP4_CFG_RECIPE) {
    assert_true(f->size < sizeof out[0].text);
    for (int i = 0; i < 2; i++) {
      memset(out[i].text, 'a', f->size - 1 + i);
      out[i].text[f->size - 1 + i] = '\0';
      out[i].accepted = i == 0;
    }
    return 2;
  }
  if (f->kind == UFP4_CFG_POLICY) {
    snprintf(out[0].text, sizeof out[0].text, "stop");
    snprintf(out[1].text, sizeof out[1].text, "maybe");
    out[0].accepted = 1, out[1].accepted = 0;
    return 2;
  }
  return 0;
}

static double member(const ufp4_train_field *f, const ufp4_train_config *c) {
  const char *at = (const char *)c + f->offset;
  switch (f->kind) {
  case UFP4_CFG_INT: return *(const int *)at;
  case UFP4_CFG_FLOAT: return *(const float *)at;
  case UFP4_CFG_DOUBLE: return *(const double *)at;
  case UFP4_CFG_SEED: return (double)*(const uint64_t *)at;
  default: return NAN;
  }
}

/* Loads {"<parent>": {"<key>": <value>}} (or {"<key>": <value>} at the top) into a default
 * config; value is quoted unless the row is a number. */
static int load_value(const ufp4_train_field *f, const char *value, ufp4_train_config *c) {
  char path[] = "/tmp/ufp4_schema_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "w");
  assert_non_null(out);
  const char *q = is_number(f) ? "" : "\"";
  if (f->parent) fprintf(out, "{\"%s\": {\"%s\": %s%s%s}}\n", f->parent, f->key, q, value, q);
  else fprintf(out, "{\"%s\": %s%s%s}\n", f->key, q, value, q);
  fclose(out);
  *c = ufp4_train_config_default();
  int rc = ufp4_train_config_load(path, c);
  unlink(path);
  return rc;
}

static void expect_json(const ufp4_train_field *f, const char *value, int accepted) {
  ufp4_train_config c;
  int rc = load_value(f, value, &c);
  if (rc != (accepted ? 0 : UFP4_EFORMAT))
    fail_msg("\"%s\": %.40s %s by the JSON loader", f->key, value,
             accepted ? "refused" : "accepted");
  if (!accepted || !is_number(f)) return;
  const double v = strtod(value, NULL);
  if (member(f, &c) != (f->kind == UFP4_CFG_FLOAT ? (double)(float)v : v))
    fail_msg("\"%s\": %s read as %.17g", f->key, value, member(f, &c));
}

/* Writes text to a temporary file and loads it strictly into a default config; the error message in
 * msg. */
static int load_strict(const char *text, char *msg, size_t size) {
  char path[] = "/tmp/ufp4_strict_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "w");
  assert_non_null(out);
  fputs(text, out);
  fclose(out);
  ufp4_train_config c = ufp4_train_config_default();
  int rc = ufp4_train_config_load_strict(path, &c);
  snprintf(msg, size, "%s", rc ? ufp4_last_error() : "");
  unlink(path);
  return rc;
}

/* train --config: an unknown key, or a known one in the wrong object, is refused by name (it used
 * to be ignored: an MoE key at the top level trained a dense model); the lenient loader (run
 * folders) still ignores them; and every file the writer makes loads strictly, MoE and overrides
 * included. */
static void test_strict_keys(void **state) {
  (void)state;
  char msg[1024];
  const struct {
    const char *text, *want;
  } bad[] = {
      {"{\"recipe\": \"ufp4\", \"bogus_key\": 3}", "unknown key \"bogus_key\" at the top level"},
      {"{\"moe_experts\": 4}", "unknown key \"moe_experts\" at the top level (it belongs in \"model\")"},
      {"{\"model\": {\"lr\": 0.1}}", "unknown key \"lr\" in \"model\" (it belongs in \"optim\")"},
      {"{\"optim\": {\"recipe\": \"e2m1\"}}", "unknown key \"recipe\" in \"optim\" (it belongs at the top level)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(load_strict(bad[i].text, msg, sizeof msg), UFP4_EFORMAT);
    if (!strstr(msg, bad[i].want)) fail_msg("%s: %s", bad[i].text, msg);
  }
  char path[] = "/tmp/ufp4_lenient_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_true(write(fd, "{\"bogus_key\": 3}", 16) == 16);
  close(fd);
  ufp4_train_config c = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load(path, &c), 0);
  unlink(path);
  c = ufp4_train_config_default();
  c.model.n_kv_heads = c.model.n_heads; /* as a run resolves them before it writes config.json */
  c.model.moe_experts = 4;
  snprintf(c.overrides, sizeof c.overrides, "lm_head=ufp4");
  snprintf(c.schedule, sizeof c.schedule, "ufp4@0,bf16@0.5");
  snprintf(c.guard, sizeof c.guard, "sqnr>5");
  char *json = ufp4_train_config_json(&c);
  assert_non_null(json);
  int rc = load_strict(json, msg, sizeof msg);
  if (rc) fail_msg("the writer's own config.json is refused: %s\n%s", msg, json);
  free(json);
}

/* Writes text to a new temporary file whose name goes into path (a mkstemp template). */
static void write_temp(char *path, const char *text) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const size_t n = strlen(text);
  assert_true(write(fd, text, n) == (ssize_t)n);
  close(fd);
}

/* Derived keys in a --config file are not read; a value that differs from the run's is a note
 * naming the file, the key and both values. The writer's own config.json has none on the same run;
 * on two ranks, world and global_batch_tokens differ. The notes are cut at the buffer's size. */
static void test_derived_notes(void **state) {
  (void)state;
  char notes[2048], path[] = "/tmp/ufp4_derived_XXXXXX";
  ufp4_train_config c = ufp4_train_config_default();
  c.model.n_kv_heads = c.model.n_heads;
  char *json = ufp4_train_config_json(&c);
  assert_non_null(json);
  write_temp(path, json);
  free(json);
  assert_int_equal(ufp4_train_config_derived_notes(path, &c, notes, sizeof notes), 0);
  assert_string_equal(notes, "");
  ufp4_train_config two = c;
  two.world = 2 * c.world;
  assert_int_equal(ufp4_train_config_derived_notes(path, &two, notes, sizeof notes), 2);
  char want[256];
  snprintf(want, sizeof want, "%s: \"world\" is derived, not read: the file says %d, this run has %d\n", path,
           c.world, two.world);
  if (!strstr(notes, want)) fail_msg("%s", notes);
  assert_non_null(strstr(notes, "\"global_batch_tokens\" is derived, not read"));
  unlink(path);

  char hand[] = "/tmp/ufp4_derived_XXXXXX";
  write_temp(hand, "{\"world\": \"four\", \"model\": {\"n_params\": 7, \"d_model\": 64}}");
  ufp4_train_config d = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load_strict(hand, &d), 0);
  assert_int_equal(ufp4_train_config_derived_notes(hand, &d, notes, sizeof notes), 2);
  assert_non_null(strstr(notes, "\"world\" is derived, not read: the file says a string, this run has"));
  assert_non_null(strstr(notes, "\"n_params\" is derived, not read: the file says 7, this run has"));
  char tiny[24];
  memset(tiny, 'x', sizeof tiny);
  assert_int_equal(ufp4_train_config_derived_notes(hand, &d, tiny, sizeof tiny), 2);
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
  unlink(hand);
  assert_int_equal(ufp4_train_config_derived_notes("/nonexistent/ufp4.json", &d, notes, sizeof notes), 0);

  /* "vocab" is read, then replaced by the data's: a note when the data's differs. */
  char voc[] = "/tmp/ufp4_derived_XXXXXX";
  write_temp(voc, "{\"model\": {\"vocab\": 4096}}");
  ufp4_train_config v = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load_strict(voc, &v), 0);
  assert_int_equal(ufp4_train_config_derived_notes(voc, &v, notes, sizeof notes), 0);
  v.model.vocab = 256;
  assert_int_equal(ufp4_train_config_derived_notes(voc, &v, notes, sizeof notes), 1);
  assert_non_null(strstr(notes, "\"vocab\" comes from the data: the file says 4096, this run has 256\n"));
  unlink(voc);
}

static void test_json_bounds(void **state) {
  (void)state;
  probe p[4];
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    for (int i = 0, n = probes(f, p); i < n; i++) expect_json(f, p[i].text, p[i].accepted);
  }
}

/* Runs `ufp4 train <args>` (no --data, so a run stops after parsing); 1 when every flag parsed,
 * 0 when one was refused with a message naming `flag`. */
static int flags_accepted(const char *args, const char *flag) {
  static char out[1 << 14];
  int rc = cli_run(out, sizeof out, "%s train %s", getenv("UFP4_CLI"), args);
  assert_int_equal(rc, 2);
  if (strstr(out, ACCEPTED)) return 1;
  if (!strstr(out, flag)) fail_msg("`train %.200s` refused without naming %s: %s", args, flag, out);
  return 0;
}

static void expect_flag(const ufp4_train_field *f, const char *value, int accepted) {
  char args[1200];
  snprintf(args, sizeof args, "'%s=%s'", f->flag, value);
  if (flags_accepted(args, f->flag) != accepted)
    fail_msg("%s=%.40s %s by the flag parser", f->flag, value, accepted ? "refused" : "accepted");
}

static void test_flag_bounds(void **state) {
  (void)state;
  if (!getenv("UFP4_CLI")) skip();
  probe p[4];
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    const int n = f->flag ? probes(f, p) : 0;
    for (int i = 0; i < n; i++) expect_flag(f, p[i].text, p[i].accepted);
  }
}

/* No two rows share a key in the same object, or a flag. */
static void test_rows_unique(void **state) {
  (void)state;
  for (size_t a = 0; a < ufp4_train_n_fields; a++)
    for (size_t b = a + 1; b < ufp4_train_n_fields; b++) {
      const ufp4_train_field *x = &ufp4_train_fields[a], *y = &ufp4_train_fields[b];
      const int same_parent = (!x->parent && !y->parent) ||
                              (x->parent && y->parent && !strcmp(x->parent, y->parent));
      assert_false(same_parent && !strcmp(x->key, y->key));
      assert_false(x->flag && y->flag && !strcmp(x->flag, y->flag));
    }
}

static const ufp4_train_field *field(const char *key) {
  for (size_t k = 0; k < ufp4_train_n_fields; k++)
    if (!strcmp(ufp4_train_fields[k].key, key)) return &ufp4_train_fields[k];
  fail_msg("no schema row \"%s\"", key);
  return NULL;
}

static int moe_create_status(int experts) {
  ufp4_moe_config mc = {.n_experts = experts, .top_k = 2, .expert_ffn = 4};
  ufp4_moe *s = NULL;
  int rc = ufp4_moe_create(&s, &mc, 8, 16);
  ufp4_moe_free(s);
  return rc;
}

/* Every expert count above the MoE layer's limit is refused by config validation, the JSON loader
 * and the flag parser alike, not only later by ufp4_moe_create. */
static void test_expert_limit(void **state) {
  (void)state;
  const ufp4_train_field *f = field("moe_experts");
  assert_true(f->hi == UFP4_MOE_MAX_EXPERTS);
  ufp4_model_config c = ufp4_model_config_default();
  c.moe_experts = UFP4_MOE_MAX_EXPERTS;
  ufp4_model_config_resolve(&c);
  assert_int_equal(ufp4_model_config_check(&c), 0);
  assert_int_equal(moe_create_status(UFP4_MOE_MAX_EXPERTS), 0);
  static const int over[] = {UFP4_MOE_MAX_EXPERTS + 1, 2048, 4096};
  for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
    c.moe_experts = over[i];
    assert_int_equal(ufp4_model_config_check(&c), UFP4_EINVAL);
    assert_int_not_equal(moe_create_status(over[i]), 0);
    char text[16];
    snprintf(text, sizeof text, "%d", over[i]);
    expect_json(f, text, 0);
    if (getenv("UFP4_CLI")) expect_flag(f, text, 0);
  }
}

/* The layer limit (the stride of the per-layer rounding streams) is the schema's and
 * validation's. */
static void test_layer_limit(void **state) {
  (void)state;
  assert_true(field("n_layers")->hi == UFP4_MODEL_MAX_LAYERS);
  assert_true(field("moe_every")->hi == UFP4_MODEL_MAX_LAYERS);
  ufp4_model_config c = ufp4_model_config_default();
  ufp4_model_config_resolve(&c);
  c.n_layers = UFP4_MODEL_MAX_LAYERS;
  assert_int_equal(ufp4_model_config_check(&c), 0);
  c.n_layers = UFP4_MODEL_MAX_LAYERS + 1;
  assert_int_equal(ufp4_model_config_check(&c), UFP4_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_unique),  cmocka_unit_test(test_json_bounds),
      cmocka_unit_test(test_flag_bounds),  cmocka_unit_test(test_expert_limit),
      cmocka_unit_test(test_layer_limit),  cmocka_unit_test(test_strict_keys), cmocka_unit_test(test_derived_notes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
