/* Resuming a grid of runs: each folder's fate, stale folders moved aside (report/run_resume.h). */
#include "report/run_resume.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/build_info.h"
#include "report/report_load.h"
#include "training/config_diff.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

void ufp4_resume_defaults(ufp4_train_config *cfg) {
  if (cfg->ckpt_every < 0) cfg->ckpt_every = cfg->steps > 10 ? (cfg->steps + 9) / 10 : 1;
}

/* Settings that change how a run is carried out but not one bit of what it computes: a run made
 * under other values is still this run, and may be resumed or kept. The health guards only watch
 * (a finished run kept under a new guard was not checked by it). */
static const char *const free_keys[] = {"threads", "ckpt_every", "keep_ckpts", "guard", "guard_policy"};

/* Whether the folder's config.json is cfg's run: *differs gets the first differing key, or "". */
static int config_differs(const ufp4_train_config *cfg, char *differs, size_t size) {
  train_config_diff d;
  int rc = train_config_diff_folder(cfg, free_keys, sizeof free_keys / sizeof *free_keys, &d);
  snprintf(differs, size, "%s", rc ? "" : d.key);
  return rc;
}

static int exists(const char *dir, const char *name) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return stat(path, &st) == 0;
}

/* A commit as a folder name: what the build writes is safe already, but run.json is only a file. */
static void commit_dir_name(const char *commit, char *out, size_t size) {
  size_t j = 0;
  for (size_t i = 0; commit[i] && j + 1 < size; i++) {
    const char ch = commit[i];
    const int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                   ch == '-' || ch == '+' || (ch == '.' && j > 0);
    out[j++] = ok ? ch : '_';
  }
  out[j] = '\0';
}

/* Moves run folder `dir` (under g->out_dir) to OUT/stale/COMMIT/<its path under OUT>, and logs it. */
static int move_stale(const ufp4_resume_grid *g, const char *dir, const char *commit, const char *why) {
  const size_t n = strlen(g->out_dir);
  const char *rel = !strncmp(dir, g->out_dir, n) && dir[n] == '/' ? dir + n + 1 : dir;
  char name[256], base[8192], to[8300];
  commit_dir_name(commit, name, sizeof name);
  int len = snprintf(base, sizeof base, "%s/stale/%s/%s", g->out_dir, name, rel);
  if (len < 0 || (size_t)len >= sizeof base)
    return ufp4_fail(UFP4_EINVAL, "%s: %s: the stale folder's path is too long", g->what, dir);
  snprintf(to, sizeof to, "%s", base);
  struct stat st;
  for (int k = 2; lstat(to, &st) == 0; k++) snprintf(to, sizeof to, "%s.%d", base, k);
  char parent[8300];
  snprintf(parent, sizeof parent, "%s", to);
  *strrchr(parent, '/') = '\0';
  int rc = ufp4_mkdirs(parent);
  if (rc) return rc;
  if (rename(dir, to))
    return ufp4_fail(UFP4_EIO, "%s: cannot move %s aside to %s: %s", g->what, dir, to,
                     strerror(errno));
  if ((rc = ufp4_fsync_parent(dir)) || (rc = ufp4_fsync_parent(to))) return rc;
  if (g->log)
    fprintf(g->log, "%s: %s %s: moved to %s; it is run again\n", g->what, rel, why, to);
  return 0;
}

/* Whether a run.json commit names this binary: itself, a commit of g->same_bits_as, or a
 * '+'-joined chain (a run resumed by another binary) of such commits. */
static int commit_is_ours(const ufp4_resume_grid *g, const char *commit) {
  const char *self = ufp4_build_commit();
  if (!strcmp(commit, self)) return 1;
  if (!g->same_bits_as || !g->same_bits_as[0]) return 0;
  for (const char *p = commit;;) {
    const char *end = strchr(p, '+');
    const size_t n = end ? (size_t)(end - p) : strlen(p);
    int ok = n == strlen(self) && !strncmp(p, self, n);
    for (const char *q = g->same_bits_as; !ok && *q;) {
      const char *qe = strchr(q, ',');
      const size_t m = qe ? (size_t)(qe - q) : strlen(q);
      ok = m == n && n > 0 && !strncmp(p, q, n);
      q += m + (qe ? 1 : 0);
    }
    if (!ok) return 0;
    if (!end) return 1;
    p = end + 1;
  }
}

/* The fate of the run cfg (resolved), moving its folder aside when it is not this grid's run. */
static int probe(const ufp4_resume_grid *g, const ufp4_train_config *cfg, ufp4_resume_fate *fate) {
  const char *dir = cfg->out_dir;
  *fate = UFP4_RESUME_NEW;
  struct stat st;
  if (stat(dir, &st)) return 0;
  ufp4_run_record rec;
  int rc = ufp4_run_record_read(dir, &rec);
  if (rc) return rc;
  char why[512], key[256];
  if (rec.state == UFP4_RUN_NONE) {
    /* A folder with no run in it yet is simply used. */
    if (!exists(dir, "config.json") && !exists(dir, "metrics.jsonl")) return 0;
    return move_stale(g, dir, "unrecorded", "was made by a binary that recorded no commit");
  }
  if (!commit_is_ours(g, rec.commit)) {
    snprintf(why, sizeof why, "was made by binary %s, not by this one (%s)", rec.commit,
             ufp4_build_commit());
    return move_stale(g, dir, rec.commit, why);
  }
  if ((rc = config_differs(cfg, key, sizeof key))) return rc;
  if (key[0]) {
    snprintf(why, sizeof why, "was made with another configuration (\"%s\" differs)", key);
    return move_stale(g, dir, rec.commit, why);
  }
  if (rec.state == UFP4_RUN_FINISHED) {
    /* The report reads it: a damaged log is an error now, not after the other runs. */
    ufp4_series train = {0}, val = {0};
    int skipped;
    rc = rpt_load_metrics(dir, &train, &val, &skipped);
    free(train.step);
    free(train.value);
    free(val.step);
    free(val.value);
    *fate = UFP4_RESUME_DONE;
    return rc;
  }
  *fate = ufp4_train_latest_checkpoint(dir) >= 0 ? UFP4_RESUME_FROM_CKPT : UFP4_RESUME_NEW;
  return 0;
}

/* Rank 0: every run's fate, and the log line with the counts. */
static int plan_all(const ufp4_resume_grid *g, int total, ufp4_resume_fate *fate) {
  int count[3] = {0, 0, 0}, rc = 0;
  for (int j = 0; j < total && !rc; j++) {
    ufp4_train_config cfg;
    if (!(rc = g->config(g->ctx, j, &cfg)) && !(rc = ufp4_train_shards_resolve(&cfg, g->data_dir)) &&
        !(rc = probe(g, &cfg, &fate[j])))
      count[fate[j]]++;
  }
  if (!rc && g->log)
    fprintf(g->log, "%s: %d done, %d to resume, %d to run; binary %s\n", g->what,
            count[UFP4_RESUME_DONE], count[UFP4_RESUME_FROM_CKPT], count[UFP4_RESUME_NEW],
            ufp4_build_commit());
  return rc;
}

int ufp4_resume_plan(const ufp4_resume_grid *g, ufp4_run_share *share, int total, ufp4_resume_fate *fate) {
  double *f = calloc((size_t)total, sizeof *f);
  int rc = f ? 0 : ufp4_fail(UFP4_ENOMEM, "%s: out of memory", g->what);
  if (!rc && !share->rank) {
    rc = plan_all(g, total, fate);
    for (int j = 0; j < total; j++) f[j] = fate[j];
  }
  /* Rank 0's verdict (the others hold 0s) reaches every rank as the sum. */
  rc = ufp4_run_share_agree(share, rc);
  if (!rc) rc = ufp4_run_share_gather(share, f, (size_t)total);
  for (int j = 0; !rc && j < total; j++) fate[j] = (ufp4_resume_fate)f[j];
  free(f);
  return rc;
}

int ufp4_resume_train(const ufp4_resume_grid *g, ufp4_train_config *cfg, ufp4_resume_fate fate,
                    ufp4_train_result *res) {
  int rc;
  /* A resume checks the model against the shards: give it the resolved configuration. */
  if (fate == UFP4_RESUME_FROM_CKPT && (rc = ufp4_train_shards_resolve(cfg, g->data_dir))) return rc;
  if (fate != UFP4_RESUME_DONE)
    return ufp4_train_shards(cfg, g->data_dir, fate == UFP4_RESUME_FROM_CKPT, res);
  ufp4_run_record rec;
  if ((rc = ufp4_run_record_read(cfg->out_dir, &rec))) return rc;
  if (rec.state != UFP4_RUN_FINISHED)
    return ufp4_fail(UFP4_EINVAL, "%s: %s/run.json no longer says finished", g->what, cfg->out_dir);
  *res = rec.result;
  return 0;
}
