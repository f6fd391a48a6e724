#include "training/run_dir.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/build_info.h"
#include "core/json_file.h"
#include "training/path.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

int ufp4_train_set_out_dir(ufp4_train_config *cfg, const char *dir) {
  const size_t len = strlen(dir);
  if (len >= sizeof cfg->out_dir)
    return ufp4_fail(UFP4_EINVAL,
                     "%.200s...: run folder path too long (%zu bytes; the limit is %zu)", dir, len,
                     sizeof cfg->out_dir - 1);
  memcpy(cfg->out_dir, dir, len + 1);
  return 0;
}

/* The "step" of one JSON line; UFP4_EFORMAT naming PATH:LINE when the line is not such an object. */
static int line_step(const char *line, size_t len, const char *path, size_t no, int *step) {
  cJSON *j = cJSON_ParseWithLength(line, len);
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
  const int ok = cJSON_IsNumber(s);
  if (ok) *step = s->valueint;
  cJSON_Delete(j);
  return ok ? 0
            : ufp4_fail(UFP4_EFORMAT,
                        "%s:%zu: not a JSON object with a \"step\"; the run folder is damaged",
                        path, no);
}

/* A JSON-lines log keeps only its lines up to `step` (a resume), so that it reads as one run. A
 * last line without its newline was cut by a kill during the write and is dropped; any other line
 * that is not JSON is an error naming it, rather than a log that mixes runs or hides the damage. */
static int cut_log(const char *path, int step) {
  char *text;
  size_t len;
  if (access(path, F_OK)) return 0;
  int rc = ufp4_read_file(path, (size_t)1 << 31, &text, &len);
  if (rc) return rc;
  size_t keep = 0, no = 0;
  for (size_t i = 0; i < len && !rc;) {
    char *nl = memchr(text + i, '\n', len - i);
    int s = -1;
    if (!nl) break;
    if ((rc = line_step(text + i, (size_t)(nl - text) - i, path, ++no, &s)) || s > step) break;
    keep = i = (size_t)(nl - text) + 1;
  }
  if (!rc) rc = ufp4_write_file_atomic(path, text, keep);
  free(text);
  return rc;
}

/* Opens OUT/name for the loop's lines; on a resume, after cutting it back to `keep_to`. */
static int open_log(const char *out_dir, const char *name, int resume, int keep_to, FILE **f) {
  train_path path;
  int rc = train_path_fmt(&path, "%s/%s", out_dir, name);
  if (rc || (resume && (rc = cut_log(path.s, keep_to)))) return rc;
  if (!(*f = fopen(path.s, resume ? "a" : "w")))
    return ufp4_fail(UFP4_EIO, "%s: cannot open for writing: %s", path.s, strerror(errno));
  return 0;
}

static int write_config(const ufp4_train_config *cfg) {
  train_path path;
  int rc = train_path_fmt(&path, "%s/config.json", cfg->out_dir);
  if (rc) return rc;
  char *json = ufp4_train_config_json(cfg);
  rc = json ? ufp4_write_file_atomic(path.s, json, strlen(json))
            : ufp4_fail(UFP4_ENOMEM, "train: out of memory");
  free(json);
  return rc;
}

/* ---- run.json */

static const char *const state_names[] = {"none", "running", "failed", "finished"};

static int write_record(const char *dir, const ufp4_run_record *rec) {
  train_path path;
  int rc = train_path_fmt(&path, "%s/run.json", dir);
  if (rc) return rc;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "commit", rec->commit);
  cJSON_AddStringToObject(j, "state", state_names[rec->state]);
  const ufp4_train_result *r = &rec->result;
  cJSON_AddNumberToObject(j, "steps_done", r->steps_done);
  if (rec->state == UFP4_RUN_FINISHED) {
    /* cJSON writes a double with as many digits as it takes to read back the same bits (a NaN as
     * null), so the record holds the result exactly. */
    cJSON_AddNumberToObject(j, "final_loss", r->final_loss);
    cJSON_AddNumberToObject(j, "final_val_loss", r->final_val_loss);
    cJSON_AddNumberToObject(j, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(j, "skipped_steps", r->skipped_steps);
  }
  if (rec->state == UFP4_RUN_FAILED) cJSON_AddStringToObject(j, "error", rec->error);
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  rc = text ? ufp4_write_file_atomic(path.s, text, strlen(text))
            : ufp4_fail(UFP4_ENOMEM, "train: out of memory");
  free(text);
  return rc;
}

static double record_num(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int parse_record(const cJSON *j, const char *path, ufp4_run_record *rec) {
  const cJSON *commit = cJSON_GetObjectItemCaseSensitive(j, "commit");
  const cJSON *state = cJSON_GetObjectItemCaseSensitive(j, "state");
  if (!cJSON_IsString(commit) || !commit->valuestring[0] ||
      strlen(commit->valuestring) >= sizeof rec->commit)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"commit\" must be a string of 1 to %zu bytes", path,
                     sizeof rec->commit - 1);
  strcpy(rec->commit, commit->valuestring);
  for (int k = UFP4_RUN_RUNNING; k <= UFP4_RUN_FINISHED; k++)
    if (cJSON_IsString(state) && !strcmp(state->valuestring, state_names[k])) rec->state = k;
  if (rec->state == UFP4_RUN_NONE)
    return ufp4_fail(UFP4_EFORMAT, "%s: \"state\" must be running, failed or finished", path);
  ufp4_train_result *r = &rec->result;
  const double done = record_num(j, "steps_done"), skipped = record_num(j, "skipped_steps");
  r->final_loss = record_num(j, "final_loss");
  r->final_val_loss = record_num(j, "final_val_loss");
  r->tokens_per_s = record_num(j, "tokens_per_s");
  if (!(done >= 0 && done <= 1e9))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"steps_done\" must be a step count", path);
  r->steps_done = (int)done;
  if (rec->state == UFP4_RUN_FINISHED && !(skipped >= 0 && skipped <= done))
    return ufp4_fail(UFP4_EFORMAT, "%s: \"skipped_steps\" must be a step count", path);
  r->skipped_steps = rec->state == UFP4_RUN_FINISHED ? (int)skipped : 0;
  const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (cJSON_IsString(err)) snprintf(rec->error, sizeof rec->error, "%s", err->valuestring);
  return 0;
}

int ufp4_run_record_read(const char *dir, ufp4_run_record *rec) {
  memset(rec, 0, sizeof *rec);
  train_path path;
  int rc = train_path_fmt(&path, "%s/run.json", dir);
  if (rc || access(path.s, F_OK)) return rc;
  cJSON *j;
  if ((rc = ufp4_json_read_object(path.s, 1 << 20, NULL, "; the run folder is damaged", &j))) return rc;
  rc = parse_record(j, path.s, rec);
  cJSON_Delete(j);
  if (rc) memset(rec, 0, sizeof *rec);
  return rc;
}

/* The binaries of a resumed run: the record's, then this one unless it was the last. */
static int resumed_commit(const char *dir, char *out, size_t size) {
  ufp4_run_record old;
  int rc = ufp4_run_record_read(dir, &old);
  if (rc) return rc;
  const char *self = ufp4_build_commit();
  const char *before = old.state == UFP4_RUN_NONE ? "unknown" : old.commit;
  const char *last = strrchr(before, '+');
  last = last ? last + 1 : before;
  const int n = strcmp(last, self) ? snprintf(out, size, "%s+%s", before, self)
                                   : snprintf(out, size, "%s", before);
  /* Too many binaries to list: the record still must not name this one alone. */
  if (n < 0 || (size_t)n >= size) snprintf(out, size, "mixed+%s", self);
  return 0;
}

int run_dir_open(const ufp4_train_config *cfg, int resume, int start, run_logs *logs) {
  int rc;
  if ((rc = ufp4_mkdirs(cfg->out_dir)) || (rc = write_config(cfg))) return rc;
  if (resume) rc = resumed_commit(cfg->out_dir, logs->commit, sizeof logs->commit);
  else snprintf(logs->commit, sizeof logs->commit, "%s", ufp4_build_commit());
  ufp4_run_record rec = {.state = UFP4_RUN_RUNNING, .result.steps_done = start};
  snprintf(rec.commit, sizeof rec.commit, "%s", logs->commit);
  if (rc || (rc = write_record(cfg->out_dir, &rec))) return rc;
  if ((rc = open_log(cfg->out_dir, "metrics.jsonl", resume, start, &logs->metrics))) return rc;
  /* Diagnostics of step s are taken before it runs: a resume at `start` takes them again. */
  if (cfg->diag_every > 0)
    return open_log(cfg->out_dir, "diagnostics.jsonl", resume, start - 1, &logs->diag);
  return 0;
}

int run_record_finish(const ufp4_train_config *cfg, const run_logs *logs,
                      const ufp4_train_result *res) {
  ufp4_run_record rec = {.state = UFP4_RUN_FINISHED, .result = *res};
  snprintf(rec.commit, sizeof rec.commit, "%s", logs->commit);
  return write_record(cfg->out_dir, &rec);
}

void run_record_fail(const ufp4_train_config *cfg, const run_logs *logs, int steps_done, int rc) {
  ufp4_run_record rec = {.state = UFP4_RUN_FAILED, .result.steps_done = steps_done};
  snprintf(rec.commit, sizeof rec.commit, "%s", logs->commit);
  snprintf(rec.error, sizeof rec.error, "%s", ufp4_last_error());
  /* The run's own error is what the caller must see, whether or not the record was written. */
  if (write_record(cfg->out_dir, &rec)) ufp4_fail(rc, "%s", rec.error);
}

void run_logs_close(run_logs *logs) {
  if (logs->metrics) fclose(logs->metrics);
  if (logs->diag) fclose(logs->diag);
  logs->metrics = logs->diag = NULL;
}

int run_log_flush(FILE *f, const char *dir, const char *name) {
  if (fflush(f) == 0 && !ferror(f)) return 0;
  const int e = errno;
  return ufp4_fail(UFP4_EIO, "%s/%s: write failed: %s", dir, name, strerror(e));
}
