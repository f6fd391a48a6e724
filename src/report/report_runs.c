/* The list of runs a report is built from: runs.json, or [NAME=]RUN_DIR arguments
 * (see ufp4/report.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_file.h"
#include "ufp4/error.h"
#include "ufp4/report.h"

int ufp4_report_runs_load(const char *path, ufp4_report_run **runs, size_t *n) {
  *runs = NULL;
  *n = 0;
  char *text;
  size_t size;
  int rc = ufp4_read_file_as(path, 64u << 20, "the run list", &text, &size);
  if (rc) return rc;
  cJSON *j = cJSON_ParseWithLength(text, size);
  if (!j) {
    const char *at = cJSON_GetErrorPtr();
    const size_t off = at && at >= text && at <= text + size ? (size_t)(at - text) : size;
    free(text);
    return ufp4_fail(UFP4_EFORMAT, "%s: not valid JSON (near byte %zu of %zu)", path, off, size);
  }
  free(text);
  const cJSON *arr = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "runs") : j;
  if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr)) {
    cJSON_Delete(j);
    return ufp4_fail(
        UFP4_EFORMAT,
        "%s: expected a non-empty array of {\"recipe\", \"seed\", \"dir\"} (or {\"runs\": [...]})",
        path);
  }
  const size_t m = (size_t)cJSON_GetArraySize(arr);
  ufp4_report_run *out = calloc(m, sizeof *out);
  if (!out) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  }
  char base[4096];
  snprintf(base, sizeof base, "%s", path);
  char *slash = strrchr(base, '/');
  if (slash)
    slash[1] = 0;
  else
    base[0] = 0;
  size_t k = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(it, "recipe");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(it, "seed");
    const cJSON *dir = cJSON_GetObjectItemCaseSensitive(it, "dir");
    if (!cJSON_IsString(dir) || !dir->valuestring[0]) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu has no \"dir\" string", path, k);
      break;
    }
    if (rec && (!cJSON_IsString(rec) || strlen(rec->valuestring) >= sizeof out->recipe)) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu: \"recipe\" must be a string of < 512 bytes", path,
                     k);
      break;
    }
    if (seed && (!cJSON_IsNumber(seed) || seed->valuedouble < 0 ||
                 seed->valuedouble != floor(seed->valuedouble))) {
      rc = ufp4_fail(UFP4_EFORMAT, "%s: run %zu: \"seed\" must be a non-negative integer", path, k);
      break;
    }
    snprintf(out[k].recipe, sizeof out[k].recipe, "%s", rec ? rec->valuestring : "");
    out[k].seed = seed ? (long long)seed->valuedouble : -1;
    if (dir->valuestring[0] == '/')
      snprintf(out[k].dir, sizeof out[k].dir, "%s", dir->valuestring);
    else
      snprintf(out[k].dir, sizeof out[k].dir, "%s%s", base, dir->valuestring);
    k++;
  }
  cJSON_Delete(j);
  if (rc) {
    free(out);
    return rc;
  }
  *runs = out;
  *n = k;
  return 0;
}

static int is_json_file(const char *p) {
  const size_t len = strlen(p);
  struct stat st;
  return len > 5 && !strcmp(p + len - 5, ".json") && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* NAME=DIR names the recipe when the '=' comes before any '/' (a folder may hold an '='). */
static int run_from_arg(const char *arg, ufp4_report_run *run) {
  const char *eq = strchr(arg, '='), *slash = strchr(arg, '/');
  const char *dir = arg;
  if (eq && (!slash || eq < slash)) {
    if ((size_t)(eq - arg) >= sizeof run->recipe)
      return ufp4_fail(UFP4_EINVAL, "report: recipe name in '%s' is too long", arg);
    snprintf(run->recipe, sizeof run->recipe, "%.*s", (int)(eq - arg), arg);
    dir = eq + 1;
  }
  if (strlen(dir) >= sizeof run->dir)
    return ufp4_fail(UFP4_EINVAL, "report: run folder path is too long");
  snprintf(run->dir, sizeof run->dir, "%s", dir);
  run->seed = -1;
  return 0;
}

int ufp4_report_runs_parse(const char *const *args, size_t n_args, ufp4_report_run **runs,
                           size_t *n) {
  *runs = NULL;
  *n = 0;
  if (!n_args) return ufp4_fail(UFP4_EINVAL, "report: no runs given");
  if (n_args == 1 && is_json_file(args[0])) return ufp4_report_runs_load(args[0], runs, n);
  ufp4_report_run *out = calloc(n_args, sizeof *out);
  if (!out) return ufp4_fail(UFP4_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < n_args; i++) {
    int rc = run_from_arg(args[i], &out[i]);
    if (rc) {
      free(out);
      return rc;
    }
  }
  *runs = out;
  *n = n_args;
  return 0;
}
