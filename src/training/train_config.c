/* The run configuration as JSON: written to config.json, and read back by --config and resume.
 * Defaults, keys, ranges and order all come from UFP4_TRAIN_SCHEMA (train_schema.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "training/train_schema.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/train.h"

/* ---- the schema as data */

static double n_params_of(const ufp4_train_config *c) {
  return (double)ufp4_model_param_count(&c->model);
}

static double n_active_params_of(const ufp4_train_config *c) {
  return (double)ufp4_model_active_param_count(&c->model);
}

static double world_of(const ufp4_train_config *c) { return c->world; }

static double global_batch_tokens_of(const ufp4_train_config *c) {
  return (double)c->batch * c->grad_accum * c->world * c->model.seq_len;
}

#define PARENT_MODEL "model"
#define PARENT_OPTIM "optim"
#define PARENT_RUN NULL
#define WHEN_ALL 0
#define WHEN_MOE 1
#define MEMBER_SIZE(member) sizeof(((ufp4_train_config *)0)->member)
#define FIELD_ROW(obj, when, key, flag, kind, member, lo, hi, def, help)                           \
  {PARENT_##obj, WHEN_##when, key, flag, UFP4_CFG_##kind, offsetof(ufp4_train_config, member),     \
   MEMBER_SIZE(member), lo, hi, help, NULL},
#define DERIVED_ROW(obj, when, key, fn)                                                            \
  {PARENT_##obj, WHEN_##when, key, NULL, UFP4_CFG_DERIVED, 0, 0, 0, 0, NULL, fn},
#define NO_ROW(...)

const ufp4_train_field ufp4_train_fields[] = {UFP4_TRAIN_SCHEMA(FIELD_ROW, DERIVED_ROW)};
const size_t ufp4_train_n_fields = sizeof ufp4_train_fields / sizeof *ufp4_train_fields;

/* Each member has the C type its kind reads and writes. */
#define TYPE_INT int
#define TYPE_FLOAT float
#define TYPE_DOUBLE double
#define TYPE_SEED uint64_t
#define TYPE_TEXT char *
#define TYPE_RECIPE char *
#define TYPE_POLICY ufp4_nan_policy
#define CHECK_TYPE(obj, when, key, flag, kind, member, lo, hi, def, help)                          \
  _Static_assert(_Generic(((ufp4_train_config *)0)->member, TYPE_##kind: 1, default: 0),           \
                 "train_schema.h: " key " is not of its kind's type");
UFP4_TRAIN_SCHEMA(CHECK_TYPE, NO_ROW)

/* ---- defaults */

#define SET_INT(m, d) m = d;
#define SET_FLOAT SET_INT
#define SET_DOUBLE SET_INT
#define SET_SEED SET_INT
#define SET_POLICY SET_INT
#define SET_TEXT(m, d) snprintf(m, sizeof m, "%s", d);
#define SET_RECIPE SET_TEXT
#define DEFAULT_MODEL(kind, m, d) /* ufp4_model_config_default */
#define DEFAULT_OPTIM(kind, m, d) /* ufp4_adamw_default */
#define DEFAULT_RUN(kind, m, d) SET_##kind(m, d)
#define SET_DEFAULT(obj, when, key, flag, kind, member, lo, hi, def, help)                         \
  DEFAULT_##obj(kind, c.member, def)

ufp4_train_config ufp4_train_config_default(void) {
  ufp4_train_config c;
  memset(&c, 0, sizeof c);
  c.model = ufp4_model_config_default();
  c.optim = ufp4_adamw_default();
  UFP4_TRAIN_SCHEMA(SET_DEFAULT, NO_ROW)
  c.progress = 1;
  c.world = 1;
  snprintf(c.out_dir, sizeof c.out_dir, "runs/default");
  return c;
}

/* ---- writer */

static void add_recipe(cJSON *obj, const char *key, const char *spec) {
  ufp4_recipe r;
  char resolved[512];
  if (ufp4_recipe_parse(spec, &r) == 0) {
    ufp4_recipe_format(&r, resolved, sizeof resolved);
    spec = resolved;
  }
  cJSON_AddStringToObject(obj, key, spec);
}

static void add_field(cJSON *obj, const ufp4_train_field *f, const ufp4_train_config *c) {
  const char *at = (const char *)c + f->offset;
  switch (f->kind) {
  case UFP4_CFG_INT: cJSON_AddNumberToObject(obj, f->key, *(const int *)at); break;
  case UFP4_CFG_FLOAT: cJSON_AddNumberToObject(obj, f->key, *(const float *)at); break;
  case UFP4_CFG_DOUBLE: cJSON_AddNumberToObject(obj, f->key, *(const double *)at); break;
  case UFP4_CFG_SEED: cJSON_AddNumberToObject(obj, f->key, (double)*(const uint64_t *)at); break;
  case UFP4_CFG_TEXT: cJSON_AddStringToObject(obj, f->key, at); break;
  case UFP4_CFG_RECIPE: add_recipe(obj, f->key, at); break;
  case UFP4_CFG_POLICY:
    cJSON_AddStringToObject(obj, f->key,
                            *(const ufp4_nan_policy *)at == UFP4_NAN_STOP ? "stop" : "skip");
    break;
  case UFP4_CFG_DERIVED: cJSON_AddNumberToObject(obj, f->key, f->derive(c)); break;
  }
}

/* The object a row's key goes in, created at its first row, so objects keep the table's order. */
static cJSON *object_for(cJSON *root, const char *parent) {
  if (!parent) return root;
  cJSON *o = cJSON_GetObjectItemCaseSensitive(root, parent);
  return o ? o : cJSON_AddObjectToObject(root, parent);
}

char *ufp4_train_config_json(const ufp4_train_config *c) {
  cJSON *j = cJSON_CreateObject();
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    if (f->moe_only && c->model.moe_experts <= 0) continue;
    add_field(object_for(j, f->parent), f, c);
  }
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  return s;
}

/* ---- loader */

static int read_number(const cJSON *v, const ufp4_train_field *f, const char *path, char *at) {
  const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!isfinite(d) || d < f->lo || d > f->hi)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a number in [%g, %g]", path, f->key, f->lo,
                     f->hi);
  const int whole = f->kind == UFP4_CFG_INT || f->kind == UFP4_CFG_SEED;
  if (whole && d != floor(d))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be an integer", path, f->key);
  switch (f->kind) {
  case UFP4_CFG_INT: *(int *)at = (int)d; break;
  case UFP4_CFG_FLOAT: *(float *)at = (float)d; break;
  case UFP4_CFG_SEED: *(uint64_t *)at = (uint64_t)d; break;
  default: *(double *)at = d; break;
  }
  return 0;
}

/* A present key of the wrong type or out of range is an error naming the file and the key. */
static int read_field(const cJSON *v, const ufp4_train_field *f, const char *path,
                      ufp4_train_config *c) {
  char *at = (char *)c + f->offset;
  switch (f->kind) {
  case UFP4_CFG_TEXT:
  case UFP4_CFG_RECIPE:
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= f->size)
      return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be a string of under %zu bytes", path, f->key,
                       f->size);
    strcpy(at, v->valuestring);
    return 0;
  case UFP4_CFG_POLICY:
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "skip") && strcmp(v->valuestring, "stop")))
      return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be \"skip\" or \"stop\"", path, f->key);
    *(ufp4_nan_policy *)at = strcmp(v->valuestring, "stop") ? UFP4_NAN_SKIP : UFP4_NAN_STOP;
    return 0;
  case UFP4_CFG_DERIVED: return 0; /* written for readers of config.json; recomputed, not read */
  default: return read_number(v, f, path, at);
  }
}

static int read_fields(const cJSON *root, const char *path, ufp4_train_config *c) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "optim");
  if ((m && !cJSON_IsObject(m)) || (o && !cJSON_IsObject(o)))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"model\" and \"optim\" must be objects", path);
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    const cJSON *obj = f->parent ? cJSON_GetObjectItemCaseSensitive(root, f->parent) : root;
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->key) : NULL;
    int rc = v ? read_field(v, f, path, c) : 0;
    if (rc) return rc;
  }
  return 0;
}

int ufp4_train_config_load(const char *path, ufp4_train_config *c) {
  char *text;
  size_t len;
  int rc = ufp4_read_file(path, 1 << 20, &text, &len);
  if (rc) return rc;
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  rc = cJSON_IsObject(j) ? read_fields(j, path, c)
                         : ufp4_fail(UFP4_EFORMAT, "%s: not a JSON object", path);
  cJSON_Delete(j);
  return rc;
}
