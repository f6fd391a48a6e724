#include "training/run_dir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A JSON-lines log keeps only its lines up to `step` (a resume), so that it reads as one run. */
static int cut_log(const char *path, int step) {
  char *text;
  size_t len;
  if (access(path, F_OK)) return 0;
  int rc = ufp4_read_file(path, (size_t)1 << 31, &text, &len);
  if (rc) return rc;
  size_t keep = 0;
  for (size_t i = 0; i < len;) {
    char *nl = memchr(text + i, '\n', len - i);
    size_t end = nl ? (size_t)(nl - text) + 1 : len;
    int s = -1;
    if (sscanf(text + i, "{\"step\":%d", &s) == 1 && s > step) break;
    keep = end;
    i = end;
  }
  rc = ufp4_write_file_atomic(path, text, keep);
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

int run_dir_open(const ufp4_train_config *cfg, int resume, int start, run_logs *logs) {
  int rc;
  if ((rc = ufp4_mkdirs(cfg->out_dir)) || (rc = write_config(cfg))) return rc;
  if ((rc = open_log(cfg->out_dir, "metrics.jsonl", resume, start, &logs->metrics))) return rc;
  /* Diagnostics of step s are taken before it runs: a resume at `start` takes them again. */
  if (cfg->diag_every > 0)
    return open_log(cfg->out_dir, "diagnostics.jsonl", resume, start - 1, &logs->diag);
  return 0;
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
