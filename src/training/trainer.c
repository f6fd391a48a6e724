/* The training loop (train.h): the set-up, then per step the diagnostics, this rank's forward and
 * backward, the gradient exchange, the update under the NaN policy, and what is due after it. What
 * the loop writes and when lives in its own files: the run folder (run_dir.h), the metrics lines
 * (metrics.h), the progress line (progress.h) and the checkpoints (checkpoint_schedule.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "training/checkpoint_schedule.h"
#include "training/config_diff.h"
#include "training/guard_run.h"
#include "training/metrics.h"
#include "training/progress.h"
#include "training/recipe_phase.h"
#include "training/run_dir.h"
#include "training/split_batch.h"
#include "ufp4/dist.h"
#include "ufp4/error.h"
#include "ufp4/parallel.h"
#include "ufp4/train.h"

/* The parameters are compared across ranks this often (and at checkpoints and the end). */
#define PARAM_CHECK_EVERY 100

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

/* This rank's model, optimizer state, batch buffers and (rank 0) logs. */
typedef struct {
  ufp4_model *model;
  float *m_state, *v_state;
  int32_t *tokens, *inp, *tgt;
  segments seg;
  run_logs logs;
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
  run_logs_close(&s->logs);
}

/* The loop's state between steps. */
typedef struct {
  const ufp4_train_config *cfg;
  const ufp4_data_source *data;
  ufp4_dist *comm; /* NULL for a world of one */
  const char *label;
  run_state s;
  size_t n; /* parameters */
  int start, writer;
  /* This rank's failure since the last agreement (a log write, a data read); the next agreement
   * point reports it, so that every rank stops there together. */
  int pending;
  double train_time, window_loss; /* window: the steps since the last metrics line */
  int window_n;
  ufp4_train_result *res;
  const ufp4_recipe_schedule *sched;
  int phase; /* of sched the model is under; -1 before the first step */
  train_guard guard; /* health guards, run with the diagnostics */
} trainer;

/* Every rank calls this at the same points: a failure anywhere stops all of them together. */
static int sync_status(ufp4_dist *comm, int rc) { return comm ? ufp4_dist_agree(comm, rc) : rc; }

/* Agrees on (and clears) this rank's pending failure. */
static int agree(trainer *t) {
  const int rc = sync_status(t->comm, t->pending);
  t->pending = 0;
  return rc;
}

static int check_params(ufp4_dist *comm, run_state *s, size_t n, int step) {
  if (!comm) return 0;
  char what[64];
  snprintf(what, sizeof what, "the parameters after step %d", step);
  return ufp4_dist_check_same(
      comm, ufp4_dist_fingerprint(ufp4_model_params(s->model), n * sizeof(float)), what);
}

/* Everything a config must satisfy before anything is allocated or written; parses the schedule
 * (the recipe as one phase without one) and the first phase's recipe, checks every phase under the
 * overrides and the stochastic-rounding streams; parses the guard. */
static int check_config(const ufp4_train_config *cfg, ufp4_recipe_schedule *sched, ufp4_recipe *recipe,
                        train_guard *guard) {
  int rc = train_check_recipes(cfg, sched);
  if (!rc) rc = ufp4_recipe_parse(sched->spec[0], recipe);
  if (rc || (rc = train_guard_init(cfg, guard))) return rc;
  if (cfg->batch < 1 || cfg->grad_accum < 1 || cfg->steps < 1 || cfg->log_every < 1 ||
      cfg->keep_ckpts < 1)
    return ufp4_fail(UFP4_EINVAL,
                     "train: batch, grad_accum, steps, log_every and keep_ckpts must be positive");
  if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
    return ufp4_fail(UFP4_EINVAL, "train: rank %d of world %d is not a data-parallel position",
                     cfg->rank, cfg->world);
  if (!memchr(cfg->out_dir, '\0', sizeof cfg->out_dir))
    return ufp4_fail(UFP4_EINVAL, "train: out_dir is not a terminated string (%s)",
                     "set it with ufp4_train_set_out_dir");
  return 0;
}

/* A world of one never touches the communicator, so library callers need no launcher. */
static int open_comm(const ufp4_train_config *cfg, ufp4_dist **comm) {
  *comm = NULL;
  if (cfg->world == 1) return 0;
  int rc = ufp4_dist_init(comm);
  if (rc) return rc;
  if (ufp4_dist_world(*comm) != cfg->world)
    return ufp4_fail(UFP4_EINVAL, "train: configured for %d ranks, but launched as %d", cfg->world,
                     ufp4_dist_world(*comm));
  return 0;
}

/* What a resume may change: how long the run goes (the steps, the cosine's horizon), how it is
 * carried out (threads, checkpoints), what watches it and what it does when it breaks
 * (diagnostics, which change no bit of the run, and the guards that need them; the NaN policy: a
 * run that stopped on a non-finite loss is resumed under another), the path of its data, and the
 * rank count, which the checkpoint checks itself with its own advice. The derived keys follow from
 * keys that are compared, and the phase starts in projection_recipes from the steps, whose effect
 * on phases already entered train_check_resume_phases refuses with its own advice. Everything else
 * decides what the run computes or logs, and a resume continues the run config.json describes. */
static const char *const resume_free_keys[] = {
    "steps",      "optim.total_steps", "threads",    "ckpt_every",          "keep_ckpts",
    "diag_every", "guard",             "guard_policy", "nan_policy",        "data",
    "world",      "global_batch_tokens", "model.n_params", "model.n_active_params", "projection_recipes"};

/* A resume that would change a setting of resume_free_keys' complement fails, naming the run's
 * config.json, the key and both values, before config.json is rewritten. */
static int check_resume_config(const ufp4_train_config *cfg) {
  /* Read as a configuration, so that a run folder of an older binary, whose config.json lacks keys
   * added since, is compared in what it holds. */
  ufp4_train_config *was = malloc(sizeof *was); /* large (the overrides): off the stack */
  char path[sizeof cfg->out_dir + 16];
  snprintf(path, sizeof path, "%s/config.json", cfg->out_dir);
  train_config_diff d;
  int rc = was ? 0 : ufp4_fail(UFP4_ENOMEM, "%s: out of memory for the run configuration", path);
  if (!rc) {
    *was = ufp4_train_config_default();
    rc = ufp4_train_config_load(path, was);
  }
  if (!rc) rc = train_config_diff_configs(was, cfg, resume_free_keys, sizeof resume_free_keys / sizeof *resume_free_keys, &d);
  free(was);
  if (rc || !d.key[0]) return rc;
  return ufp4_fail(UFP4_EINVAL,
                   "%s/config.json: a resume continues the run as configured there, but this one changes \"%s\" "
                   "(the run: %.100s; now: %.100s); a resume may change only the steps, the cosine's horizon, "
                   "the threads, checkpoints, diagnostics, guards and NaN policy, and the data's path; train "
                   "another configuration in a new run folder (--out)",
                   cfg->out_dir, d.key, d.folder, d.now);
}

/* Model, optimizer state and buffers; the resumed state (and its carry) when `resume`. Local to
 * this rank. */
static int setup(const ufp4_train_config *cfg, run_state *s, int resume,
                 int *start, ckpt_carry *carry) {
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
  *start = 0; /* the recipes come with the first step's phase (enter_phase) */
  return resume ? ckpt_resume(cfg, s->model, s->m_state, s->v_state, start, carry) : 0;
}

/* Set-up on every rank, agreed; then rank 0 opens the run folder. A resume takes up the loss
 * window, the skipped steps and the losses where the checkpoint left them. */
static int begin(trainer *t, int resume) {
  const ufp4_train_config *cfg = t->cfg;
  ckpt_carry carry = {.final_loss = NAN, .final_val_loss = NAN};
  int rc = setup(cfg, &t->s, resume, &t->start, &carry);
  if (!rc && resume) rc = train_check_resume_phases(cfg, t->sched, carry.phase_start, carry.n_phases, t->start);
  t->window_loss = carry.window_loss;
  t->window_n = carry.window_n;
  t->res->skipped_steps = carry.skipped_steps;
  t->res->final_loss = carry.final_loss;
  t->res->final_val_loss = carry.final_val_loss;
  t->res->steps_done = t->start;
  if (!rc && t->comm && cfg->rank != ufp4_dist_rank(t->comm))
    rc = ufp4_fail(UFP4_EINVAL, "train: configured as rank %d, but launched as rank %d", cfg->rank,
                   ufp4_dist_rank(t->comm));
  if ((rc = sync_status(t->comm, rc))) return rc;
  t->n = ufp4_model_num_params(t->s.model);
  /* Same seed or same checkpoint: the ranks start from the same bits, or the run is not one run. */
  if ((rc = check_params(t->comm, &t->s, t->n, t->start))) return rc;
  return sync_status(t->comm, t->writer ? run_dir_open(cfg, resume, t->start, &t->s.logs) : 0);
}

/* diagnostics.jsonl for `step`, on its first batch, before the gradients are zeroed for the step
 * itself. */
static int diagnose(trainer *t, int step) {
  const ufp4_train_config *cfg = t->cfg;
  const int B = cfg->batch, T = cfg->model.seq_len;
  const uint64_t first = (uint64_t)step * cfg->grad_accum;
  run_state *s = &t->s;
  int rc = t->data->train_batch(t->data->train_ctx, first, s->tokens);
  if (rc) return rc;
  train_split_batch(s->tokens, s->inp, s->tgt, B, T);
  ufp4_model_set_step(s->model, first, cfg->rank);
  if ((rc = train_guard_diagnose(&t->guard, s->model, s->inp, s->tgt, B, T, step, s->logs.diag,
                                 s->logs.metrics, cfg->out_dir)))
    return rc;
  return run_log_flush(s->logs.diag, cfg->out_dir, "diagnostics.jsonl");
}

/* This rank's forward and backward over the step's micro-batches: loss[0] is its mean
 * cross-entropy, loss[1] the mean of the model's auxiliary objective (MoE load balancing and
 * z-loss; 0 for a dense model), which backward trains but the logged loss leaves out so that dense
 * and MoE runs compare. */
static int local_step(const ufp4_train_config *cfg, const ufp4_data_source *data, run_state *s,
                      int step, double loss[2]) {
  const int B = cfg->batch, T = cfg->model.seq_len;
  int rc = 0;
  ufp4_model_zero_grads(s->model);
  loss[0] = loss[1] = 0;
  for (int micro = 0; micro < cfg->grad_accum && !rc; micro++) {
    const uint64_t index = (uint64_t)step * cfg->grad_accum + micro; /* the source strides ranks */
    double l;
    if ((rc = data->train_batch(data->train_ctx, index, s->tokens))) break;
    train_split_batch(s->tokens, s->inp, s->tgt, B, T);
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

/* A step with a non-finite loss or gradient: stop, or count it and drop its update. st holds the
 * reduced values, so every rank takes the same branch. */
static int nan_policy(trainer *t, const train_step_stats *st) {
  if (t->cfg->nan_policy == UFP4_NAN_STOP)
    return ufp4_fail(UFP4_EINVAL,
                     "train: step %d: loss %g, gradient norm %g is not finite; stopping "
                     "(the last checkpoint is kept)",
                     st->step, st->loss, st->grad_norm);
  t->res->skipped_steps++;
  if (t->cfg->progress && t->writer) progress_skipped(st->step);
  return 0;
}

static void adamw(trainer *t, const train_step_stats *st) {
  const ufp4_adamw_config *o = &t->cfg->optim;
  const float scale = o->grad_clip > 0 && st->grad_norm > o->grad_clip
                          ? (float)(o->grad_clip / st->grad_norm)
                          : 1.0f;
  ufp4_adamw_step(ufp4_model_params(t->s.model), ufp4_model_grads(t->s.model), t->s.m_state,
                  t->s.v_state, t->n, o, st->lr, st->step, scale, t->s.seg.start, t->s.seg.decay,
                  t->s.seg.n);
}

/* Step `step` from the batches to the updated parameters, agreed by all ranks; fills *st. */
static int update(trainer *t, int step, train_step_stats *st) {
  const ufp4_train_config *cfg = t->cfg;
  const double t0 = ufp4_now_s(), c0 = t->comm ? ufp4_dist_comm_seconds(t->comm) : 0;
  double losses[2] = {0, 0};
  if (!t->pending) t->pending = local_step(cfg, t->data, &t->s, step, losses);
  /* Before the gradient exchange: a rank that failed must not leave the others waiting in it. */
  int rc = agree(t);
  if (rc) return rc;
  if (t->comm && (rc = reduce_step(t->comm, ufp4_model_grads(t->s.model), t->n, losses))) return rc;
  st->step = step + 1;
  st->loss = losses[0];
  st->aux = losses[1];
  st->comm_ms = t->comm ? (ufp4_dist_comm_seconds(t->comm) - c0) * 1e3 : 0;
  st->grad_norm = ufp4_grad_norm(ufp4_model_grads(t->s.model), t->n);
  st->lr = ufp4_lr_at(&cfg->optim, step);
  st->skipped = !isfinite(st->loss) || !isfinite(st->aux) || !isfinite(st->grad_norm);
  if (!st->skipped) adamw(t, st);
  else if ((rc = nan_policy(t, st))) return rc;
  st->seconds = ufp4_now_s() - t0;
  st->tokens_per_s =
      (double)cfg->batch * cfg->model.seq_len * cfg->grad_accum * cfg->world / st->seconds;
  t->train_time += st->seconds;
  return 0;
}

/* Adds the step to the window; every log_every steps (and at the end) the window's mean loss is the
 * result's final_loss and rank 0 writes the step's metrics line. */
static void log_step(trainer *t, const train_step_stats *st) {
  const ufp4_train_config *cfg = t->cfg;
  if (!st->skipped) {
    t->window_loss += st->loss;
    t->window_n++;
  }
  if (st->step % cfg->log_every != 0 && st->step != cfg->steps) return;
  if (t->writer)
    t->pending = metrics_step_line(t->s.logs.metrics, cfg->out_dir, st, cfg->model.moe_experts > 0,
                                   t->comm != NULL);
  t->res->final_loss = t->window_n ? t->window_loss / t->window_n : NAN;
  t->window_loss = 0;
  t->window_n = 0;
}

/* Every eval_every steps (and at the end), when there are validation batches. Each rank evaluates
 * its own stride of the validation windows; the mean of the means is the mean over all of them,
 * since every rank has the same number of batches. */
static int evaluate_if_due(trainer *t, int done) {
  const ufp4_train_config *cfg = t->cfg;
  if (!t->data->val_batch || cfg->eval_batches <= 0) return 0;
  if (!((cfg->eval_every > 0 && done % cfg->eval_every == 0) || done == cfg->steps)) return 0;
  double vl = NAN;
  if (!t->pending)
    t->pending = ufp4_evaluate(t->s.model, t->data->val_batch, t->data->val_ctx, cfg->eval_batches,
                               cfg->batch, cfg->model.seq_len, &vl);
  int rc = agree(t);
  if (rc) return rc;
  if (t->comm) {
    if ((rc = ufp4_dist_sum_f64(t->comm, &vl, 1))) return rc;
    vl /= cfg->world;
  }
  t->res->final_val_loss = vl;
  if (t->writer) t->pending = metrics_eval_line(t->s.logs.metrics, cfg->out_dir, done, vl);
  return 0;
}

/* The ranks' parameters are compared at checkpoints and every PARAM_CHECK_EVERY steps; rank 0
 * saves after the step's agreement, and the agreement after the save stops all if it failed. */
static int checkpoint_if_due(trainer *t, int done) {
  const int due = ckpt_due(t->cfg, done);
  int rc;
  if ((due || done % PARAM_CHECK_EVERY == 0) && (rc = check_params(t->comm, &t->s, t->n, done)))
    return rc;
  if (!due) return 0;
  ckpt_carry carry = {.window_loss = t->window_loss,
                      .window_n = t->window_n,
                      .skipped_steps = t->res->skipped_steps,
                      .final_loss = t->res->final_loss,
                      .final_val_loss = t->res->final_val_loss,
                      .n_phases = t->sched->n};
  memcpy(carry.phase_start, t->sched->start, sizeof carry.phase_start);
  if (!t->pending && t->writer)
    t->pending = ckpt_save_step(t->cfg, t->s.model, t->s.m_state, t->s.v_state, done, &carry);
  return agree(t);
}

/* Puts the model under the phase of `step` when it is not yet; rank 0 logs a phase that starts at
 * this step. */
static int enter_phase(trainer *t, int step) {
  const int p = ufp4_schedule_phase(t->sched, step);
  if (p == t->phase) return 0;
  int rc = train_set_phase(t->s.model, t->cfg, t->sched, p);
  if (rc) return rc;
  t->phase = p;
  if (t->writer && t->cfg->schedule[0] && step == t->sched->start[p])
    rc = metrics_recipe_line(t->s.logs.metrics, t->cfg->out_dir, step + 1, p, t->sched->spec[p]);
  return rc;
}

static int run_steps(trainer *t) {
  const ufp4_train_config *cfg = t->cfg;
  for (int step = t->start; step < cfg->steps; step++) {
    train_step_stats st;
    if (!t->pending) t->pending = enter_phase(t, step);
    if (!t->pending && t->s.logs.diag && step % cfg->diag_every == 0)
      t->pending = diagnose(t, step);
    int rc = update(t, step, &st);
    if (rc) return rc;
    log_step(t, &st);
    if ((rc = evaluate_if_due(t, st.step))) return rc;
    if (cfg->progress && t->writer) progress_step(cfg, t->label, &st, t->start, t->train_time);
    if ((rc = checkpoint_if_due(t, st.step))) return rc;
    t->res->steps_done = st.step;
  }
  return agree(t);
}

void ufp4_train_config_resolve(ufp4_train_config *cfg) {
  if (cfg->optim.total_steps <= 0) cfg->optim.total_steps = cfg->steps;
  ufp4_model_config_resolve(&cfg->model);
}

int ufp4_train(const ufp4_train_config *cfg_in, const ufp4_data_source *data, int resume,
               ufp4_train_result *res) {
  ufp4_train_config cfg = *cfg_in;
  ufp4_train_config_resolve(&cfg);
  memset(res, 0, sizeof *res);
  res->final_val_loss = NAN;
  ufp4_recipe recipe;
  train_guard guard;
  ufp4_recipe_schedule *sched = malloc(sizeof *sched);
  int rc = sched ? check_config(&cfg, sched, &recipe, &guard) : ufp4_fail(UFP4_ENOMEM, "train: out of memory");
  /* Before anything is allocated for the model, so that a changed model is named as such. Without
   * a checkpoint there is nothing to continue, which ckpt_resume says. */
  if (!rc && resume && ufp4_train_latest_checkpoint(cfg.out_dir) >= 0) rc = check_resume_config(&cfg);
  if (rc) {
    free(sched);
    return rc;
  }
  trainer t = {.cfg = &cfg, .data = data, .res = res, .writer = cfg.rank == 0, .sched = sched, .phase = -1,
               .guard = guard};
  t.label = cfg.progress_label[0] ? cfg.progress_label : recipe.name;
  if ((rc = open_comm(&cfg, &t.comm))) return rc;
  ufp4_set_threads(cfg.threads);
  if (t.writer && cfg.progress && (cfg.overrides[0] || cfg.schedule[0] || recipe.keep_first || recipe.keep_last))
    train_print_recipes(&cfg, sched, stderr);
  if (!(rc = begin(&t, resume)) && !(rc = run_steps(&t))) {
    const double tokens = (double)cfg.batch * cfg.model.seq_len * cfg.grad_accum * cfg.world;
    res->tokens_per_s = t.train_time > 0 ? tokens * (res->steps_done - t.start) / t.train_time : 0;
    /* The last write of a finished run: a folder that says "finished" holds all of it. */
    rc = sync_status(t.comm, t.writer ? run_record_finish(&cfg, &t.s.logs, res) : 0);
  } else if (t.s.logs.metrics) {
    run_record_fail(&cfg, &t.s.logs, res->steps_done, rc);
  }
  run_state_free(&t.s);
  free(sched);
  return rc;
}
