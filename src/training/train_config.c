/* The run configuration as JSON: written to config.json, and read back by --config and resume.
 * Defaults, keys, ranges and order all come from UFP4_TRAIN_SCHEMA (train_schema.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_file.h"
#include "training/recipe_phase.h"
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
#define WHEN_ALL UFP4_WHEN_ALL
#define WHEN_MOE UFP4_WHEN_MOE
#define WHEN_SET UFP4_WHEN_SET
#define WHEN_GUARD UFP4_WHEN_GUARD
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
#define TYPE_OVERRIDES char *
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
#define SET_OVERRIDES SET_TEXT
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

/* The recipe, or with a schedule its first phase's, resolved when it parses. */
static void add_recipe(cJSON *obj, const char *key, const char *spec, const ufp4_train_config *c) {
  ufp4_recipe r;
  char resolved[512];
  ufp4_recipe_schedule *sched = c->schedule[0] ? malloc(sizeof *sched) : NULL;
  char first[512];
  if (sched && ufp4_schedule_parse(c->schedule, c->steps, sched) == 0) {
    snprintf(first, sizeof first, "%s", sched->spec[0]);
    spec = first;
  }
  free(sched);
  if (ufp4_recipe_parse(spec, &r) == 0) {
    ufp4_recipe_format(&r, resolved, sizeof resolved);
    spec = resolved;
  }
  cJSON_AddStringToObject(obj, key, spec);
}

/* The ';'-joined items as an array of strings. */
static void add_overrides(cJSON *obj, const char *key, const char *list) {
  cJSON *a = cJSON_AddArrayToObject(obj, key);
  for (const char *p = list; a && *p;) {
    const char *end = strchr(p, ';');
    const size_t n = end ? (size_t)(end - p) : strlen(p);
    char *item = malloc(n + 1);
    if (item) {
      memcpy(item, p, n);
      item[n] = '\0';
      if (n) cJSON_AddItemToArray(a, cJSON_CreateString(item));
      free(item);
    }
    p += n + (end ? 1 : 0);
  }
}

/* "projection_recipes": per phase, its first step and the resolved per-projection table
 * (ufp4_model_recipe_table), one string per distinct recipe. Written only for a run with overrides
 * or a schedule, whose table says more than its recipe. */
static void add_projection_table(cJSON *root, const ufp4_train_config *c) {
  if (!c->overrides[0] && !c->schedule[0]) return;
  ufp4_recipe_schedule *s = malloc(sizeof *s);
  cJSON *a = cJSON_AddArrayToObject(root, "projection_recipes");
  for (int p = 0; s && a && !ufp4_train_schedule(c, s) && p < s->n; p++) {
    char *table = train_recipe_table(c, s->spec[p]);
    if (!table) break;
    cJSON *phase = cJSON_CreateObject();
    cJSON_AddNumberToObject(phase, "step", s->start[p]);
    cJSON *lines = cJSON_AddArrayToObject(phase, "recipes");
    for (char *save = NULL, *line = strtok_r(table, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
      cJSON_AddItemToArray(lines, cJSON_CreateString(line));
    cJSON_AddItemToArray(a, phase);
    free(table);
  }
  free(s);
}

static void add_field(cJSON *obj, const ufp4_train_field *f, const ufp4_train_config *c) {
  const char *at = (const char *)c + f->offset;
  switch (f->kind) {
  case UFP4_CFG_INT: cJSON_AddNumberToObject(obj, f->key, *(const int *)at); break;
  case UFP4_CFG_FLOAT: cJSON_AddNumberToObject(obj, f->key, *(const float *)at); break;
  case UFP4_CFG_DOUBLE: cJSON_AddNumberToObject(obj, f->key, *(const double *)at); break;
  case UFP4_CFG_SEED: cJSON_AddNumberToObject(obj, f->key, (double)*(const uint64_t *)at); break;
  case UFP4_CFG_TEXT: cJSON_AddStringToObject(obj, f->key, at); break;
  case UFP4_CFG_RECIPE: add_recipe(obj, f->key, at, c); break;
  case UFP4_CFG_OVERRIDES: add_overrides(obj, f->key, at); break;
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
    if (f->when == UFP4_WHEN_MOE && c->model.moe_experts <= 0) continue;
    if (f->when == UFP4_WHEN_SET && !*((const char *)c + f->offset)) continue;
    if (f->when == UFP4_WHEN_GUARD && !c->guard[0]) continue;
    add_field(object_for(j, f->parent), f, c);
  }
  add_projection_table(j, c);
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

/* An array of "PATTERN=SPEC" strings, joined by ';' (which no item may hold). */
static int read_overrides(const cJSON *v, const ufp4_train_field *f, const char *path, char *at) {
  size_t len = 0;
  const cJSON *it;
  if (!cJSON_IsArray(v))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\" must be an array of \"PATTERN=SPEC\" strings", path, f->key);
  at[0] = '\0';
  cJSON_ArrayForEach(it, v) {
    if (!cJSON_IsString(it) || !strchr(it->valuestring, '=') || strchr(it->valuestring, ';'))
      return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\": each item must be a \"PATTERN=SPEC\" string without ';'", path,
                       f->key);
    const size_t n = strlen(it->valuestring);
    if (len + n + 2 > f->size) return ufp4_fail(UFP4_EFORMAT, "%s: \"%s\": too long", path, f->key);
    if (len) at[len++] = ';';
    memcpy(at + len, it->valuestring, n + 1);
    len += n;
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
  case UFP4_CFG_OVERRIDES: return read_overrides(v, f, path, at);
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

/* The schema's object ("model", "optim" or NULL for the top level) holding key, or "?" when no
 * row has it. */
static const char *schema_parent(const char *key) {
  for (size_t k = 0; k < ufp4_train_n_fields; k++)
    if (!strcmp(ufp4_train_fields[k].key, key)) return ufp4_train_fields[k].parent;
  return "?";
}

/* Where a known key belongs, for a refusal: "" when no row has it. */
static const char *belongs(const char *parent) {
  if (!parent) return " (it belongs at the top level)";
  if (!strcmp(parent, "?")) return "";
  return !strcmp(parent, "model") ? " (it belongs in \"model\")" : " (it belongs in \"optim\")";
}

/* Every key of the file is one the schema has, in its object ("projection_recipes", which the
 * writer adds for readers, too): a typo or a key at the wrong level would otherwise change nothing,
 * silently (an MoE setting at the top level trained a dense model). */
static int check_known_keys(const cJSON *root, const char *path) {
  for (const cJSON *it = root->child; it; it = it->next) {
    const char *k = it->string, *want = schema_parent(k);
    if (!strcmp(k, "model") || !strcmp(k, "optim")) {
      for (const cJSON *in = it->child; in; in = in->next) {
        const char *w = schema_parent(in->string);
        if (!w || strcmp(w, k))
          return ufp4_fail(UFP4_EFORMAT, "%s: unknown key \"%s\" in \"%s\"%s", path, in->string, k, belongs(w));
      }
      continue;
    }
    if (!strcmp(k, "projection_recipes") || !want) continue;
    return ufp4_fail(UFP4_EFORMAT, "%s: unknown key \"%s\" at the top level%s", path, k, belongs(want));
  }
  return 0;
}

static int load(const char *path, ufp4_train_config *c, int strict) {
  cJSON *j;
  int rc = ufp4_json_read_object(path, 1 << 20, NULL, NULL, &j);
  if (rc) return rc;
  if (strict) rc = check_known_keys(j, path);
  if (!rc) rc = read_fields(j, path, c);
  cJSON_Delete(j);
  return rc;
}

int ufp4_train_config_load(const char *path, ufp4_train_config *c) { return load(path, c, 0); }

int ufp4_train_config_load_strict(const char *path, ufp4_train_config *c) { return load(path, c, 1); }

int ufp4_train_config_derived_notes(const char *path, const ufp4_train_config *c, char *out, size_t size) {
  cJSON *j;
  if (size) out[0] = '\0';
  if (ufp4_json_read_object(path, 1 << 20, NULL, NULL, &j)) return 0; /* it was read before */
  int n = 0;
  size_t used = 0;
  for (size_t k = 0; k < ufp4_train_n_fields; k++) {
    const ufp4_train_field *f = &ufp4_train_fields[k];
    /* The vocabulary is read, then replaced by the data's (ufp4_train_shards). */
    const int vocab = !strcmp(f->key, "vocab") && f->parent && !strcmp(f->parent, "model");
    if (f->kind != UFP4_CFG_DERIVED && !vocab) continue;
    const cJSON *obj = f->parent ? cJSON_GetObjectItemCaseSensitive(j, f->parent) : j;
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->key) : NULL;
    const double have = vocab ? c->model.vocab : f->derive(c);
    if (!v || (cJSON_IsNumber(v) && v->valuedouble == have)) continue;
    n++;
    char file_value[64];
    if (cJSON_IsNumber(v)) snprintf(file_value, sizeof file_value, "%.17g", v->valuedouble);
    else snprintf(file_value, sizeof file_value, "a %s", cJSON_IsString(v) ? "string" : "non-number");
    int w = snprintf(out + used, used < size ? size - used : 0, "%s: \"%s\" %s: the file says %s, this run has %.17g\n",
                     path, f->key, vocab ? "comes from the data" : "is derived, not read", file_value, have);
    if (w > 0) used = used + (size_t)w < size ? used + (size_t)w : size;
  }
  cJSON_Delete(j);
  return n;
}
