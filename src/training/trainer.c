#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ufp4/checkpoint.h"
#include "ufp4/diagnostics.h"
#include "ufp4/dist.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/jsonnum.h"
#include "ufp4/parallel.h"
#include "ufp4/train.h"
#include "core/timer.h"

/* tokens [B, T+1] -> inputs [B, T] and targets shifted by one. */
static void split_batch(const int32_t *tokens, int32_t *inp, int32_t *tgt, int B, int T) {
  for (int b = 0; b < B; b++) {
    memcpy(inp + (size_t)b * T, tokens + (size_t)b * (T + 1), (size_t)T * sizeof(int32_t));
    memcpy(tgt + (size_t)b * T, tokens + (size_t)b * (T + 1) + 1, (size_t)T * sizeof(int32_t));
  }
}

int ufp4_evaluate(ufp4_model *m, ufp4_batch_fn val_batch, void *ctx, int n, int B, int T, double *loss) {
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
  int32_t *inp = malloc(sizeof(int32_t) * (size_t)B * T), *tgt = malloc(sizeof(int32_t) * (size_t)B * T);
  int rc = (!tokens || !inp || !tgt) ? ufp4_fail(UFP4_ENOMEM, "evaluate: out of memory") : 0;
  double total = 0;
  for (int i = 0; i < n && !rc; i++) {
    double l;
    if (!(rc = val_batch(ctx, (uint64_t)i, tokens))) {
      split_batch(tokens, inp, tgt, B, T);
      rc = ufp4_model_forward(m, inp, tgt, B, T, &l);
      total += l;
    }
  }
  free(tokens);
  free(inp);
  free(tgt);
  if (!rc) *loss = n > 0 ? total / n : NAN;
  return rc;
}

/* Weight decay on 2-D weights only: one segment per parameter tensor. */
typedef struct {
  size_t *start;
  uint8_t *decay;
  int n;
} segments;

static int make_segments(const ufp4_model_config *c, segments *s) {
  s->n = ufp4_model_tensor_count(c);
  s->start = malloc(sizeof(size_t) * (size_t)s->n);
  s->decay = malloc((size_t)s->n);
  if (!s->start || !s->decay) return ufp4_fail(UFP4_ENOMEM, "train: out of memory");
  for (int i = 0; i < s->n; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    s->start[i] = t.offset;
    s->decay[i] = t.ndim == 2;
  }
  return 0;
}

static int ckpt_path(char *out, size_t size, const char *run, int step) {
  if (snprintf(out, size, "%s/ckpt/step_%08d", run, step) >= (int)size)
    return ufp4_fail(UFP4_EIO, "%s: path too long", run);
  return 0;
}

/* Highest step with a complete checkpoint folder (config.json, model and optimizer present), or -1. */
static int latest_checkpoint(const char *run) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/ckpt", run);
  DIR *d = opendir(dir);
  if (!d) return -1;
  int best = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    int step;
    char tail;
    if (sscanf(e->d_name, "step_%d%c", &step, &tail) != 1) continue;
    char probe[1600];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/%s/optimizer.safetensors", dir, e->d_name);
    if (stat(probe, &st) == 0 && step > best) best = step;
  }
  closedir(d);
  return best;
}

/* Finishes removals that a killed run left half done (folders named step_N.deleting). */
static void remove_leftovers(const char *run) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/ckpt", run);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    const size_t len = strlen(e->d_name), suffix = sizeof ".deleting" - 1;
    if (strncmp(e->d_name, "step_", 5) || len <= suffix || strcmp(e->d_name + len - suffix, ".deleting")) continue;
    char path[1600];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ufp4_remove_tree(path);
  }
  closedir(d);
}

/* Removes checkpoints older than the `keep` most recent ones. Each is first renamed to
 * step_N.deleting (atomic, and synced) and only then emptied, so a kill during the removal never
 * leaves a folder under a checkpoint's name with some of its files gone. */
static void prune_checkpoints(const char *run, int keep, int every, int newest) {
  remove_leftovers(run);
  for (int step = newest - keep * every; step > 0 && every > 0; step -= every) {
    char path[2200], doomed[2300];
    if (ckpt_path(path, sizeof path, run, step)) return;
    struct stat st;
    if (stat(path, &st)) break;
    snprintf(doomed, sizeof doomed, "%s.deleting", path);
    if (rename(path, doomed) || ufp4_fsync_parent(path)) break;
    ufp4_remove_tree(doomed);
  }
}

/* metrics.jsonl keeps only the lines up to `step` (resume) so the file reads as one run. */
static int truncate_metrics(const char *path, int step) {
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

static void format_eta(double s, char *buf, size_t size) {
  if (!isfinite(s) || s < 0) s = 0;
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
}

typedef struct {
  ufp4_model *model;
  float *m_state, *v_state;
  int32_t *tokens, *inp, *tgt;
  segments seg;
  FILE *metrics, *diag;
} run_state;

static void run_state_free(run_state *s) {
  ufp4_model_free(s->model);
  free(s->m_state);
  free(s->v_state);
  free(s->tokens);
  free(s->inp);
  free(s->tgt);
  free(s->seg.start);
  free(s->seg.decay);
  if (s->metrics) fclose(s->metrics);
  if (s->diag) fclose(s->diag);
}

static int save(const ufp4_train_config *cfg, run_state *s, int step) {
  char path[1200], json[256];
  int rc = ckpt_path(path, sizeof path, cfg->out_dir, step);
  if (rc) return rc;
  /* world is kept so that a resume can refuse another rank count: the data order depends on it. */
  snprintf(json, sizeof json, "{\"step\":%d,\"seed\":%llu,\"world\":%d}", step, (unsigned long long)cfg->seed,
           cfg->world);
  if ((rc = ufp4_checkpoint_save(path, s->model, s->m_state, s->v_state, json))) return rc;
  prune_checkpoints(cfg->out_dir, cfg->keep_ckpts, cfg->ckpt_every > 0 ? cfg->ckpt_every : 0, step);
  return 0;
}

static int resume_from(const ufp4_train_config *cfg, run_state *s, int *start_step) {
  int step = latest_checkpoint(cfg->out_dir);
  if (step < 0) return ufp4_fail(UFP4_EINVAL, "%s: --resume, but no complete checkpoint under %s/ckpt", cfg->out_dir, cfg->out_dir);
  char path[1200], *trainer = NULL;
  int rc = ckpt_path(path, sizeof path, cfg->out_dir, step);
  ufp4_model_config saved;
  if (!rc) rc = ufp4_checkpoint_config(path, &saved);
  if (!rc && ufp4_model_param_count(&saved) != ufp4_model_num_params(s->model))
    rc = ufp4_fail(UFP4_EINVAL, "%s: the checkpoint's model does not match this run's config", path);
  if (!rc) rc = ufp4_checkpoint_load_params(path, s->model);
  if (!rc) rc = ufp4_checkpoint_load_optimizer(path, ufp4_model_num_params(s->model), s->m_state, s->v_state, &trainer);
  if (!rc) {
    cJSON *j = trainer ? cJSON_Parse(trainer) : NULL;
    const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
    const cJSON *w = j ? cJSON_GetObjectItemCaseSensitive(j, "world") : NULL;
    const int world = cJSON_IsNumber(w) ? w->valueint : 1; /* checkpoints from before data parallelism */
    if (!cJSON_IsNumber(st) || st->valueint != step)
      rc = ufp4_fail(UFP4_EFORMAT, "%s: optimizer metadata does not record step %d", path, step);
    else if (world != cfg->world)
      rc = ufp4_fail(UFP4_EINVAL,
                     "%s: written by a run of %d rank%s, but this run has %d; the data order depends on the number "
                     "of ranks, so resume it with %s%d",
                     path, world, world == 1 ? "" : "s", cfg->world, world == 1 ? "no mpirun, or mpirun -np " : "mpirun -np ",
                     world);
    cJSON_Delete(j);
  }
  free(trainer);
  *start_step = step;
  return rc;
}

/* A log line that did not reach the file (ENOSPC, EIO) stops the run rather than losing lines. */
static int flush_log(FILE *f, const char *dir, const char *name) {
  if (fflush(f) == 0 && !ferror(f)) return 0;
  const int e = errno;
  return ufp4_fail(UFP4_EIO, "%s/%s: write failed: %s", dir, name, strerror(e));
}

/* Every rank calls this at the same points: a failure anywhere stops all of them together. */
static int sync_status(ufp4_dist *comm, int rc) { return comm ? ufp4_dist_agree(comm, rc) : rc; }

static int check_params(ufp4_dist *comm, run_state *s, size_t n, int step) {
  if (!comm) return 0;
  char what[64];
  snprintf(what, sizeof what, "the parameters after step %d", step);
  return ufp4_dist_check_same(comm, ufp4_dist_fingerprint(ufp4_model_params(s->model), n * sizeof(float)), what);
}

/* The parameters are compared across ranks this often (and at checkpoints and the end). */
#define PARAM_CHECK_EVERY 100

/* Model, optimizer state and buffers; the resumed state when `resume`. Local to this rank. */
static int setup(const ufp4_train_config *cfg, const ufp4_recipe *recipe, run_state *s, int resume, int *start) {
  const int B = cfg->batch, T = cfg->model.seq_len;
  int rc = ufp4_model_create(&s->model, &cfg->model, B);
  if (rc) return rc;
  const size_t n = ufp4_model_num_params(s->model);
  s->m_state = calloc(n, sizeof(float));
  s->v_state = calloc(n, sizeof(float));
  s->tokens = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
  s->inp = malloc(sizeof(int32_t) * (size_t)B * T);
  s->tgt = malloc(sizeof(int32_t) * (size_t)B * T);
  if (!s->m_state || !s->v_state || !s->tokens || !s->inp || !s->tgt)
    return ufp4_fail(UFP4_ENOMEM, "train: out of memory for %zu parameters", n);
  if ((rc = make_segments(&cfg->model, &s->seg))) return rc;
  ufp4_model_init(s->model, cfg->seed);
  if ((rc = ufp4_model_set_recipe(s->model, recipe, cfg->seed))) return rc;
  *start = 0;
  return resume ? resume_from(cfg, s, start) : 0;
}

/* Rank 0's files: config.json, and metrics.jsonl / diagnostics.jsonl cut back to `start` on resume. */
static int open_outputs(const ufp4_train_config *cfg, run_state *s, int resume, int start) {
  char path[2200];
  int rc;
  if ((rc = ufp4_mkdirs(cfg->out_dir))) return rc;
  snprintf(path, sizeof path, "%s/config.json", cfg->out_dir);
  char *json = ufp4_train_config_json(cfg);
  rc = json ? ufp4_write_file_atomic(path, json, strlen(json)) : ufp4_fail(UFP4_ENOMEM, "train: out of memory");
  free(json);
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->out_dir);
  if (resume && (rc = truncate_metrics(path, start))) return rc;
  if (!(s->metrics = fopen(path, resume ? "a" : "w")))
    return ufp4_fail(UFP4_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
  if (cfg->diag_every > 0) {
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", cfg->out_dir);
    /* Diagnostics of step s are taken before it runs: a resume at `start` takes them again. */
    if (resume && (rc = truncate_metrics(path, start - 1))) return rc;
    if (!(s->diag = fopen(path, resume ? "a" : "w")))
      return ufp4_fail(UFP4_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
  }
  return 0;
}

/* This rank's forward and backward over the step's micro-batches: loss[0] is its mean cross-entropy,
 * loss[1] the mean of the model's auxiliary objective (MoE load balancing and z-loss; 0 for a dense
 * model), which backward trains but the logged loss leaves out so that dense and MoE runs compare. */
static int local_step(const ufp4_train_config *cfg, const ufp4_data_source *data, run_state *s, int step,
                      double loss[2]) {
  const int B = cfg->batch, T = cfg->model.seq_len;
  int rc = 0;
  ufp4_model_zero_grads(s->model);
  loss[0] = loss[1] = 0;
  for (int micro = 0; micro < cfg->grad_accum && !rc; micro++) {
    const uint64_t index = (uint64_t)step * cfg->grad_accum + micro; /* the source strides ranks */
    double l;
    if ((rc = data->train_batch(data->train_ctx, index, s->tokens))) break;
    split_batch(s->tokens, s->inp, s->tgt, B, T);
    ufp4_model_set_step(s->model, index, cfg->rank);
    if ((rc = ufp4_model_forward(s->model, s->inp, s->tgt, B, T, &l))) break;
    if ((rc = ufp4_model_backward(s->model, 1.0f / cfg->grad_accum))) break;
    loss[0] += l / cfg->grad_accum;
    loss[1] += ufp4_model_aux_loss(s->model) / cfg->grad_accum;
  }
  return rc;
}

/* Gradient and losses become their means over the ranks; every rank then holds the same bits. */
static int reduce_step(ufp4_dist *comm, float *grads, size_t n, double loss[2]) {
  const int w = ufp4_dist_world(comm);
  int rc = ufp4_dist_sum_f32(comm, grads, n);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) grads[i] /= (float)w;
  if ((rc = ufp4_dist_sum_f64(comm, loss, 2))) return rc;
  loss[0] /= w;
  loss[1] /= w;
  return 0;
}

int ufp4_train(const ufp4_train_config *cfg_in, const ufp4_data_source *data, int resume, ufp4_train_result *res) {
  ufp4_train_config resolved = *cfg_in;
  if (resolved.optim.total_steps <= 0) resolved.optim.total_steps = resolved.steps;
  ufp4_model_config_resolve(&resolved.model);
  const ufp4_train_config *cfg = &resolved;
  memset(res, 0, sizeof *res);
  res->final_val_loss = NAN;
  ufp4_recipe recipe;
  int rc = ufp4_recipe_parse(cfg->recipe, &recipe);
  if (rc) return rc;
  if (cfg->batch < 1 || cfg->grad_accum < 1 || cfg->steps < 1 || cfg->log_every < 1 || cfg->keep_ckpts < 1)
    return ufp4_fail(UFP4_EINVAL, "train: batch, grad_accum, steps, log_every and keep_ckpts must be positive");
  if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
    return ufp4_fail(UFP4_EINVAL, "train: rank %d of world %d is not a data-parallel position", cfg->rank, cfg->world);
  /* Every micro-batch of every rank must draw its own stochastic-rounding streams. */
  rc = ufp4_model_check_streams(&cfg->model, (uint64_t)cfg->steps, cfg->grad_accum, cfg->world);
  if (rc) return rc;
  /* A world of one never touches the communicator, so library callers need no launcher. */
  ufp4_dist *comm = NULL;
  if (cfg->world > 1) {
    if ((rc = ufp4_dist_init(&comm))) return rc;
    if (ufp4_dist_world(comm) != cfg->world)
      return ufp4_fail(UFP4_EINVAL, "train: configured for %d ranks, but launched as %d", cfg->world,
                       ufp4_dist_world(comm));
  }
  ufp4_set_threads(cfg->threads);
  const int B = cfg->batch, T = cfg->model.seq_len;
  const int writer = cfg->rank == 0;
  run_state s = {0};
  int start = 0;
  rc = setup(cfg, &recipe, &s, resume, &start);
  if (!rc && comm && cfg->rank != ufp4_dist_rank(comm))
    rc = ufp4_fail(UFP4_EINVAL, "train: configured as rank %d, but launched as rank %d", cfg->rank, ufp4_dist_rank(comm));
  if ((rc = sync_status(comm, rc))) goto done;
  /* Same seed or same checkpoint: the ranks start from the same bits, or the run is not one run. */
  if (comm && (rc = check_params(comm, &s, ufp4_model_num_params(s.model), start))) goto done;
  if ((rc = sync_status(comm, writer ? open_outputs(cfg, &s, resume, start) : 0))) goto done;

  const size_t n = ufp4_model_num_params(s.model);
  double train_time = 0, window_loss = 0;
  int window_n = 0;
  /* This rank's failure since the last agreement (a log write, a data read); the next agreement
   * point reports it, so that every rank stops there together. */
  int pending = 0;
  for (int step = start; step < cfg->steps; step++) {
    if (!pending && s.diag && step % cfg->diag_every == 0) {
      /* On this step's first batch, before the gradients are zeroed for the step itself. */
      pending = data->train_batch(data->train_ctx, (uint64_t)step * cfg->grad_accum, s.tokens);
      if (!pending) {
        split_batch(s.tokens, s.inp, s.tgt, B, T);
        ufp4_model_set_step(s.model, (uint64_t)step * cfg->grad_accum, cfg->rank);
        pending = ufp4_diagnostics_run(s.model, s.inp, s.tgt, B, T, step, s.diag);
        if (!pending) pending = flush_log(s.diag, cfg->out_dir, "diagnostics.jsonl");
      }
    }
    const double t0 = ufp4_now_s(), c0 = comm ? ufp4_dist_comm_seconds(comm) : 0;
    double losses[2] = {0, 0};
    if (!pending) pending = local_step(cfg, data, &s, step, losses);
    /* Before the gradient exchange: a rank that failed must not leave the others waiting in it. */
    rc = sync_status(comm, pending);
    pending = 0;
    if (rc) goto done;
    if (comm && (rc = reduce_step(comm, ufp4_model_grads(s.model), n, losses))) goto done;
    const double loss = losses[0], aux = losses[1];
    const double comm_ms = comm ? (ufp4_dist_comm_seconds(comm) - c0) * 1e3 : 0;
    const double gnorm = ufp4_grad_norm(ufp4_model_grads(s.model), n);
    const double lr = ufp4_lr_at(&cfg->optim, step);
    const int bad = !isfinite(loss) || !isfinite(aux) || !isfinite(gnorm);
    if (bad) {
      /* loss and gnorm are the reduced ones, so every rank takes the same branch. */
      if (cfg->nan_policy == UFP4_NAN_STOP) {
        rc = ufp4_fail(UFP4_EINVAL,
                       "train: step %d: loss %g, gradient norm %g is not finite; stopping (the last checkpoint is kept)",
                       step + 1, loss, gnorm);
        goto done;
      }
      res->skipped_steps++;
      if (cfg->progress && writer) fprintf(stderr, "\nstep %d: non-finite loss or gradient, update skipped\n", step + 1);
    } else {
      float scale = cfg->optim.grad_clip > 0 && gnorm > cfg->optim.grad_clip ? (float)(cfg->optim.grad_clip / gnorm) : 1.0f;
      ufp4_adamw_step(ufp4_model_params(s.model), ufp4_model_grads(s.model), s.m_state, s.v_state, n, &cfg->optim, lr,
                      step + 1, scale, s.seg.start, s.seg.decay, s.seg.n);
    }
    const double dt = ufp4_now_s() - t0;
    train_time += dt;
    const double tok_s = (double)B * T * cfg->grad_accum * cfg->world / dt;
    if (!bad) {
      window_loss += loss;
      window_n++;
    }
    const int done_steps = step + 1;
    if (done_steps % cfg->log_every == 0 || done_steps == cfg->steps) {
      if (writer) {
        char lbuf[UFP4_JSONNUM_SIZE], gbuf[UFP4_JSONNUM_SIZE], abuf[UFP4_JSONNUM_SIZE], cbuf[96] = "";
        int used = 0;
        if (cfg->model.moe_experts > 0)
          used = snprintf(cbuf, sizeof cbuf, ",\"aux_loss\":%s", ufp4_json_num(abuf, aux));
        if (comm) snprintf(cbuf + used, sizeof cbuf - (size_t)used, ",\"comm_ms\":%.3f", comm_ms);
        fprintf(s.metrics,
                "{\"step\":%d,\"loss\":%s,\"lr\":%.6g,\"grad_norm\":%s,\"tokens_per_s\":%.1f,\"ms_per_step\":%.2f%s%s}\n",
                done_steps, ufp4_json_num(lbuf, loss), lr, ufp4_json_num(gbuf, gnorm), tok_s, dt * 1e3, cbuf,
                bad ? ",\"skipped\":true" : "");
        pending = flush_log(s.metrics, cfg->out_dir, "metrics.jsonl");
      }
      res->final_loss = window_n ? window_loss / window_n : NAN;
      window_loss = 0;
      window_n = 0;
    }
    const int eval_now = data->val_batch && cfg->eval_batches > 0 &&
                         ((cfg->eval_every > 0 && done_steps % cfg->eval_every == 0) || done_steps == cfg->steps);
    if (eval_now) {
      /* Each rank evaluates its own stride of the validation windows; the mean of the means is the
       * mean over all of them, since every rank has the same number of batches. */
      double vl = NAN;
      if (!pending) pending = ufp4_evaluate(s.model, data->val_batch, data->val_ctx, cfg->eval_batches, B, T, &vl);
      rc = sync_status(comm, pending);
      pending = 0;
      if (rc) goto done;
      if (comm) {
        if ((rc = ufp4_dist_sum_f64(comm, &vl, 1))) goto done;
        vl /= cfg->world;
      }
      res->final_val_loss = vl;
      if (writer) {
        char vbuf[UFP4_JSONNUM_SIZE], pbuf[UFP4_JSONNUM_SIZE];
        fprintf(s.metrics, "{\"step\":%d,\"val_loss\":%s,\"val_ppl\":%s}\n", done_steps, ufp4_json_num(vbuf, vl),
                ufp4_json_num(pbuf, exp(vl)));
        pending = flush_log(s.metrics, cfg->out_dir, "metrics.jsonl");
      }
    }
    if (cfg->progress && writer) {
      /* A terminal gets one line rewritten in place; a log file gets about 20 lines per run. */
      const int tty = isatty(fileno(stderr));
      const int every = cfg->steps >= 20 ? cfg->steps / 20 : 1;
      if (tty || done_steps % every == 0 || done_steps == cfg->steps) {
        char eta[32], total[48] = "";
        const double left = train_time / (done_steps - start) * (cfg->steps - done_steps);
        format_eta(left, eta, sizeof eta);
        if (cfg->eta_after_s > 0) {
          char all[32];
          format_eta(left + cfg->eta_after_s, all, sizeof all);
          snprintf(total, sizeof total, ", all runs %s", all);
        }
        fprintf(stderr, "%s[%s] step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s%s", tty ? "\r" : "",
                cfg->progress_label[0] ? cfg->progress_label : recipe.name, done_steps, cfg->steps, loss, lr, tok_s,
                eta, total, tty && done_steps < cfg->steps ? "   " : "\n");
        fflush(stderr);
      }
    }
    const int ckpt_now = (cfg->ckpt_every > 0 && done_steps % cfg->ckpt_every == 0) || done_steps == cfg->steps;
    if ((ckpt_now || done_steps % PARAM_CHECK_EVERY == 0) && (rc = check_params(comm, &s, n, done_steps))) goto done;
    /* Rank 0 saves after the step's agreement; the agreement after the save stops everyone if it failed. */
    if (ckpt_now) {
      if (!pending && writer) pending = save(cfg, &s, done_steps);
      rc = sync_status(comm, pending);
      pending = 0;
      if (rc) goto done;
    }
    res->steps_done = done_steps;
  }
  if ((rc = sync_status(comm, pending))) goto done;
  res->tokens_per_s = train_time > 0 ? (double)B * T * cfg->grad_accum * cfg->world * (res->steps_done - start) / train_time : 0;
done:
  run_state_free(&s);
  return rc;
}
