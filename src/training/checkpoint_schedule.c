#include "training/checkpoint_schedule.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
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
int ufp4_train_latest_checkpoint(const char *run) {
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

/* A double as JSON that reads back as the same bits (%.17g), or null when it is not finite. */
static const char *exact_num(char buf[32], double v) {
  if (isfinite(v)) snprintf(buf, 32, "%.17g", v);
  else snprintf(buf, 32, "null");
  return buf;
}

int ckpt_save_step(const ufp4_train_config *cfg, ufp4_model *m, const float *m_state,
                   const float *v_state, int step, const ckpt_carry *carry) {
  train_path path;
  char json[1024], window[32], loss[32], val[32];
  int rc = step_dir(&path, cfg->out_dir, step);
  if (rc) return rc;
  /* world is kept so that a resume can refuse another rank count: the data order depends on it. */
  size_t len = (size_t)snprintf(json, sizeof json,
                                "{\"step\":%d,\"seed\":%llu,\"world\":%d,\"window_loss\":%s,\"window_n\":%d,"
                                "\"skipped_steps\":%d,\"final_loss\":%s,\"final_val_loss\":%s,\"phase_starts\":[",
                                step, (unsigned long long)cfg->seed, cfg->world, exact_num(window, carry->window_loss),
                                carry->window_n, carry->skipped_steps, exact_num(loss, carry->final_loss),
                                exact_num(val, carry->final_val_loss));
  for (int p = 0; p < carry->n_phases && len < sizeof json; p++) /* at most 16 x 12 characters */
    len += (size_t)snprintf(json + len, sizeof json - len, "%s%d", p ? "," : "", carry->phase_start[p]);
  if (len < sizeof json) snprintf(json + len, sizeof json - len, "]}");
  if ((rc = ufp4_checkpoint_save(path.s, m, m_state, v_state, json))) return rc;
  prune_checkpoints(cfg->out_dir, cfg->keep_ckpts, cfg->ckpt_every > 0 ? cfg->ckpt_every : 0, step);
  return 0;
}

/* A number of the trainer metadata, or `absent` when it is missing or null. */
static double meta_num(const cJSON *j, const char *key, double absent) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  return cJSON_IsNumber(v) ? v->valuedouble : absent;
}

/* The trainer metadata of checkpoint `path` must record `step` and this run's world; the carry is
 * read from it. */
static int read_trainer_meta(const char *path, const char *trainer, int step, int run_world,
                             ckpt_carry *carry) {
  cJSON *j = trainer ? cJSON_Parse(trainer) : NULL;
  const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
  const cJSON *w = j ? cJSON_GetObjectItemCaseSensitive(j, "world") : NULL;
  *carry = (ckpt_carry){.window_loss = meta_num(j, "window_loss", 0),
                        .window_n = (int)meta_num(j, "window_n", 0),
                        .skipped_steps = (int)meta_num(j, "skipped_steps", 0),
                        .final_loss = meta_num(j, "final_loss", NAN),
                        .final_val_loss = meta_num(j, "final_val_loss", NAN)};
  const cJSON *ps = j ? cJSON_GetObjectItemCaseSensitive(j, "phase_starts") : NULL, *x;
  cJSON_ArrayForEach(x, ps) {
    if (carry->n_phases < UFP4_MAX_PHASES && cJSON_IsNumber(x)) carry->phase_start[carry->n_phases++] = x->valueint;
  }
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
                int *step, ckpt_carry *carry) {
  *step = ufp4_train_latest_checkpoint(cfg->out_dir);
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
  if (!rc) rc = read_trainer_meta(path.s, trainer, *step, cfg->world, carry);
  free(trainer);
  return rc;
}
