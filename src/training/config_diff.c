/* A run folder's config.json against a configuration (training/config_diff.h). */
#include "training/config_diff.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_file.h"
#include "ufp4/error.h"

typedef struct {
  const char *const *free_keys;
  size_t n_free;
  train_config_diff *out;
} walk;

static int is_free(const walk *w, const char *name) {
  for (size_t i = 0; i < w->n_free; i++)
    if (!strcmp(name, w->free_keys[i])) return 1;
  return 0;
}

static int first_diff(const walk *w, const cJSON *want, const cJSON *have, const char *prefix, int record);

/* Arrays (the overrides) match element by element, objects inside them key by key. */
static int same_value(const walk *w, const cJSON *a, const cJSON *b) {
  if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) return a->valuedouble == b->valuedouble;
  if (cJSON_IsString(a) && cJSON_IsString(b)) return !strcmp(a->valuestring, b->valuestring);
  if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
    for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next)
      if (cJSON_IsObject(x) && cJSON_IsObject(y) ? first_diff(w, x, y, "[].", 0) : !same_value(w, x, y)) return 0;
    return 1;
  }
  if (cJSON_IsObject(a) || cJSON_IsArray(a)) return 0; /* objects are walked by first_diff */
  return (a->type & 0xFF) == (b->type & 0xFF);
}

/* v as compact JSON into out, or "absent". */
static void show(const cJSON *v, char *out, size_t size) {
  char *text = v ? cJSON_PrintUnformatted(v) : NULL;
  snprintf(out, size, "%s", text ? text : v ? "(out of memory)" : "absent");
  free(text);
}

/* 1 at the first key (recorded in w->out when `record`) that differs. */
static int differs_at(const walk *w, const char *name, const cJSON *want, const cJSON *have, int record) {
  if (record) {
    /* A key longer than the field is cut: the schema's are a few dozen characters. */
    if (snprintf(w->out->key, sizeof w->out->key, "%s", name) < 0) w->out->key[0] = '?';
    show(have, w->out->folder, sizeof w->out->folder);
    show(want, w->out->now, sizeof w->out->now);
  }
  return 1;
}

static int first_diff(const walk *w, const cJSON *want, const cJSON *have, const char *prefix, int record) {
  const cJSON *it;
  char name[512];
  cJSON_ArrayForEach(it, want) {
    if (snprintf(name, sizeof name, "%s%s", prefix, it->string) < 0) return differs_at(w, prefix, it, NULL, record);
    if (is_free(w, name)) continue;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(have, it->string);
    if (h && cJSON_IsObject(it) && cJSON_IsObject(h)) {
      char sub[514];
      if (snprintf(sub, sizeof sub, "%s.", name) < 0) return differs_at(w, name, it, h, record);
      if (first_diff(w, it, h, sub, record)) return 1;
    } else if (!h || !same_value(w, it, h)) {
      return differs_at(w, name, it, h, record);
    }
  }
  cJSON_ArrayForEach(it, have) {
    if (snprintf(name, sizeof name, "%s%s", prefix, it->string) < 0) return differs_at(w, prefix, NULL, it, record);
    if (!is_free(w, name) && !cJSON_GetObjectItemCaseSensitive(want, it->string))
      return differs_at(w, name, NULL, it, record);
  }
  return 0;
}

/* Walks the two trees into diff when rc is 0, and frees both: the two entry points' common end. */
static int walk_and_free(int rc, cJSON *want, cJSON *have, const char *const *free_keys, size_t n_free,
                         train_config_diff *diff) {
  if (!rc) {
    const walk w = {free_keys, n_free, diff};
    first_diff(&w, want, have, "", 1);
  }
  cJSON_Delete(want);
  cJSON_Delete(have);
  return rc;
}

int train_config_diff_folder(const ufp4_train_config *cfg, const char *const *free_keys, size_t n_free,
                             train_config_diff *diff) {
  memset(diff, 0, sizeof *diff);
  char *json = ufp4_train_config_json(cfg);
  cJSON *want = json ? cJSON_Parse(json) : NULL, *have = NULL;
  free(json);
  char path[sizeof cfg->out_dir + 16];
  snprintf(path, sizeof path, "%s/config.json", cfg->out_dir);
  int rc = want ? ufp4_json_read_object(path, 64u << 20, "the run configuration", "; the run folder is damaged", &have)
                : ufp4_fail(UFP4_ENOMEM, "%s: out of memory for the run configuration", cfg->out_dir);
  return walk_and_free(rc, want, have, free_keys, n_free, diff);
}

int train_config_diff_configs(const ufp4_train_config *was, const ufp4_train_config *now, const char *const *free_keys,
                              size_t n_free, train_config_diff *diff) {
  memset(diff, 0, sizeof *diff);
  char *a = ufp4_train_config_json(was), *b = ufp4_train_config_json(now);
  cJSON *have = a ? cJSON_Parse(a) : NULL, *want = b ? cJSON_Parse(b) : NULL;
  free(a);
  free(b);
  int rc = have && want ? 0 : ufp4_fail(UFP4_ENOMEM, "%s: out of memory for the run configuration", now->out_dir);
  return walk_and_free(rc, want, have, free_keys, n_free, diff);
}
