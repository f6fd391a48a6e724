#include "training/checkpoint_schedule.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "training/path.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

int ckpt_due(const ufp4_train_config *cfg, int done_steps) {
  return (cfg->ckpt_every > 0 && done_steps % cfg->ckpt_every == 0) || done_steps == cfg->steps;
}

static int step_dir(train_path *p, const char *run, int step) {
  return train_path_fmt(p, "%s/ckpt/step_%08d", run, step);
}

/* Highest step with a complete checkpoint folder, or -1 (also when the path does not fit). */
static int latest_checkpoint(const char *run) {
  train_path dir;
  DIR *d = train_path_fmt(&dir, "%s/ckpt", run) ? NULL : opendir(dir.s);
  if (!d) return -1;
  int best = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    int step;
    char tail;
    train_path probe;
    struct stat st;
    if (sscanf(e->d_name, "step_%d%c", &step, &tail) != 1) continue;
    if (train_path_fmt(&probe, "%s/%s/optimizer.safetensors", dir.s, e->d_name)) continue;
    if (stat(probe.s, &st) == 0 && step > best) best = step;
  }
  closedir(d);
  return best;
}

/* Finishes removals that a killed run left half done (folders named step_N.deleting). */
static void remove_leftovers(const char *run) {
  train_path dir;
  DIR *d = train_path_fmt(&dir, "%s/ckpt", run) ? NULL : opendir(dir.s);
  if (!d) return;
  struct dirent *e;
  const size_t suffix = sizeof ".deleting" - 1;
  while ((e = readdir(d))) {
    const size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "step_", 5) || len <= suffix ||
        strcmp(e->d_name + len - suffix, ".deleting"))
      continue;
    train_path path;
    if (!train_path_fmt(&path, "%s/%s", dir.s, e->d_name)) ufp4_remove_tree(path.s);
  }
  closedir(d);
}

/* Removes the checkpoints older than the `keep` most recent ones, each renamed aside first. */
static void prune_checkpoints(const char *run, int keep, int every, int newest) {
  remove_leftovers(run);
  for (int step = newest - keep * every; step > 0 && every > 0; step -= every) {
    train_path path, doomed;
    if (step_dir(&path, run, step) || train_path_fmt(&doomed, "%s.deleting", path.s)) return;
    struct stat st;
    if (stat(path.s, &st)) break;
    if (rename(path.s, doomed.s) || ufp4_fsync_parent(path.s)) break;
    ufp4_remove_tree(doomed.s);
  }
}

int ckpt_save_step(const ufp4_train_config *cfg, ufp4_model *m, const float *m_state,
                   const float *v_state, int step) {
  train_path path;
  char json[256];
  int rc = step_dir(&path, cfg->out_dir, step);
  if (rc) return rc;
  /* world is kept so that a resume can refuse another rank count: the data order depends on it. */
  snprintf(json, sizeof json, "{\"step\":%d,\"seed\":%llu,\"world\":%d}", step,
           (unsigned long long)cfg->seed, cfg->world);
  if ((rc = ufp4_checkpoint_save(path.s, m, m_state, v_state, json))) return rc;
  prune_checkpoints(cfg->out_dir, cfg->keep_ckpts, cfg->ckpt_every > 0 ? cfg->ckpt_every : 0, step);
  return 0;
}

/* The trainer metadata of checkpoint `path` must record `step` and this run's world. */
static int check_trainer_meta(const char *path, const char *trainer, int step, int run_world) {
  cJSON *j = trainer ? cJSON_Parse(trainer) : NULL;
  const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
  const cJSON *w = j ? cJSON_GetObjectItemCaseSensitive(j, "world") : NULL;
  /* Checkpoints from before data parallelism record no world: they were written by one rank. */
  const int world = cJSON_IsNumber(w) ? w->valueint : 1;
  int rc = 0;
  if (!cJSON_IsNumber(st) || st->valueint != step)
    rc = ufp4_fail(UFP4_EFORMAT, "%s: optimizer metadata does not record step %d", path, step);
  else if (world != run_world)
    rc = ufp4_fail(UFP4_EINVAL,
                   "%s: written by a run of %d rank%s, but this run has %d; the data order "
                   "depends on the number of ranks, so resume it with %s%d",
                   path, world, world == 1 ? "" : "s", run_world,
                   world == 1 ? "no mpirun, or mpirun -np " : "mpirun -np ", world);
  cJSON_Delete(j);
  return rc;
}

int ckpt_resume(const ufp4_train_config *cfg, ufp4_model *m, float *m_state, float *v_state,
                int *step) {
  *step = latest_checkpoint(cfg->out_dir);
  if (*step < 0)
    return ufp4_fail(UFP4_EINVAL, "%s: --resume, but no complete checkpoint under %s/ckpt",
                     cfg->out_dir, cfg->out_dir);
  train_path path;
  char *trainer = NULL;
  ufp4_model_config saved;
  const size_t n = ufp4_model_num_params(m);
  int rc = step_dir(&path, cfg->out_dir, *step);
  if (!rc) rc = ufp4_checkpoint_config(path.s, &saved);
  if (!rc && ufp4_model_param_count(&saved) != n)
    rc = ufp4_fail(UFP4_EINVAL, "%s: the checkpoint's model does not match this run's config",
                   path.s);
  if (!rc) rc = ufp4_checkpoint_load_params(path.s, m);
  if (!rc) rc = ufp4_checkpoint_load_optimizer(path.s, n, m_state, v_state, &trainer);
  if (!rc) rc = check_trainer_meta(path.s, trainer, *step, cfg->world);
  free(trainer);
  return rc;
}
