/* The training loop: data -> model under a recipe -> AdamW, with a run folder that records
 * everything needed to reproduce or resume the run.
 *
 * Run folder (out_dir):
 *   config.json     the fully resolved run configuration, recipe included
 *   metrics.jsonl   one JSON object per logged step: step, loss, lr, grad_norm, tokens_per_s,
 *                   ms_per_step (and aux_loss for an MoE model, the objective terms that backward
 *                   trains but loss leaves out; comm_ms when world > 1); per evaluation: step,
 *                   val_loss, val_ppl; with a schedule, at each phase: step (the first step, as
 *                   the step lines count, trained under it), "event": "recipe", phase, recipe
 *                   (resolved)
 *                   per health-guard breach (guard set): {"step","guard":{"proj","layer","gemm",
 *                   "operand","measure","value","limit","policy"}}
 *   diagnostics.jsonl     with diag_every > 0: operand, GEMM and drift measures (diagnostics.h)
 *   ckpt/step_NNNNNNNN/   checkpoints (checkpoint.h): Hugging Face loadable, plus optimizer state
 *   run.json        the run's record (ufp4_run_record): which binary trained it and whether it
 *                   finished; written "running" when the run starts, and replaced, as the run's
 *                   last write, by "finished" with the result, or by "failed" with the error
 *
 * Determinism: batch i of the run is a pure function of (seed, i) through the batch source, the
 * stochastic rounding of micro-step s uses stream s, and every kernel is thread-count independent,
 * so a seed reproduces the run bit for bit, and a resumed run continues it exactly.
 *
 * Data parallelism (world > 1, dist.h; docs/DISTRIBUTED.md): each rank trains on its own batches,
 * the gradients and the loss become their means over the ranks (deterministic ring sums, so the
 * ranks keep identical parameters, checked by fingerprint at the start, every 100 steps and at
 * checkpoints), validation losses are averaged the same way, and rank 0 alone writes the run
 * folder. The ranks agree on a status word after each step's backward, each evaluation and each
 * checkpoint save, so a failure on one rank returns "rank R failed: ..." on all of them. Stochastic
 * rounding streams include the rank. Checkpoints record the world; a resume needs the same. */
#ifndef UFP4_TRAIN_H
#define UFP4_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/model.h"
#include "ufp4/optim.h"
#include "ufp4/recipe.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Fills tokens[B * (T + 1)] with batch number `index` (B windows of T + 1 tokens). Under data
 * parallelism the source gives each rank its own disjoint batch for the same index. */
typedef int (*ufp4_batch_fn)(void *ctx, uint64_t index, int32_t *tokens);

typedef enum { UFP4_NAN_SKIP = 0, UFP4_NAN_STOP } ufp4_nan_policy;

/* Most overrides text a run holds: UFP4_MAX_OVERRIDES items of up to 512 bytes, ';'-joined. */
#define UFP4_OVERRIDES_MAX (UFP4_MAX_OVERRIDES * 512)

typedef struct {
  ufp4_model_config model;
  char recipe[512];       /* spec string, resolved into config.json */
  /* Projection overrides, "PATTERN=SPEC" items joined by ';' (ufp4_model_resolve_recipes); config
   * key "overrides" (an array of strings, written only when there are any), flag --override
   * (repeatable, each one appends). "" = none. */
  char overrides[UFP4_OVERRIDES_MAX];
  /* Recipe schedule (ufp4_schedule_parse), "" = none: `recipe` alone. With one, the run's recipe
   * is its first phase's, which config.json writes as "recipe". */
  char schedule[1024];
  ufp4_adamw_config optim;
  int batch;              /* sequences per micro-batch */
  int grad_accum;         /* micro-batches per optimizer step */
  int steps;              /* optimizer steps */
  uint64_t seed;          /* init, data order, SR streams, RHT signs */
  int log_every;          /* metrics line every N steps (>= 1) */
  int eval_every;         /* 0 = only at the end */
  int eval_batches;
  int ckpt_every;         /* 0 = only at the end */
  int diag_every;         /* diagnostics.jsonl every N steps (diagnostics.h); 0 = off */
  char guard[256];        /* health guards (guard.h's spec), checked at every diagnostics step;
                           * "" = none */
  char guard_policy[8];   /* "warn": a breach is logged (stderr, metrics.jsonl) and the run goes
                           * on; "stop": the run stops with an error naming it */
  int keep_ckpts;         /* most recent checkpoints kept (>= 1) */
  ufp4_nan_policy nan_policy;
  int threads;            /* 0 = OpenMP default */
  int progress;           /* 1: progress line on stderr */
  int rank, world;        /* data-parallel position (1 process: 0, 1); world > 1 needs the
                           * process's ufp4_dist communicator to have that world */
  char progress_label[128]; /* shown in the progress line ("" = the recipe name) */
  double eta_after_s;     /* time still to come after this run (compare's other runs), for the total ETA */
  char out_dir[1024];
  char data_desc[1024];   /* recorded in config.json: where the batches come from */
} ufp4_train_config;

ufp4_train_config ufp4_train_config_default(void);

/* A recipe schedule: "SPEC@AT,SPEC@AT,..." (e.g. "ufp4@0,bf16@0.9" or "nvfp4,rht=none@0,bf16@900"):
 * phase i runs recipe SPEC_i from the step AT_i on, until the next phase. AT is a step number (an
 * integer, 0-based: the number of steps done before the switch) or, written with a '.' , a
 * fraction of the run's steps, rounded to the nearest step. The first phase starts at 0 and the
 * starts increase strictly; a phase may start at or after the last step (a run trained in sittings
 * with a growing --steps reaches it later; a fraction moves with --steps, a step number does not).
 * A spec holds commas but no '@', so each phase ends at its '@AT'. */
#define UFP4_MAX_PHASES 16
typedef struct {
  int n;
  int start[UFP4_MAX_PHASES];     /* the first step (0-based) of each phase */
  char spec[UFP4_MAX_PHASES][512];
} ufp4_recipe_schedule;
/* Parses text for a run of `steps` steps; UFP4_EINVAL naming what is wrong. Each spec must parse. */
int ufp4_schedule_parse(const char *text, int steps, ufp4_recipe_schedule *out);
/* The phase that runs step `step` (0-based). */
int ufp4_schedule_phase(const ufp4_recipe_schedule *s, int step);
/* The run's schedule: cfg->schedule parsed, or, without one, cfg->recipe as a single phase. */
int ufp4_train_schedule(const ufp4_train_config *cfg, ufp4_recipe_schedule *out);
/* The recipe spec under which the run of cfg trained the last step of its checkpoint folder
 * ckpt_dir (named step_N, N steps done, as `ufp4 train` writes them): the phase of its schedule
 * that ran step N - 1 (0-based; phase 0 for step 0), or cfg->recipe without a schedule. It points
 * into *sched, which it fills (ufp4_train_schedule). NULL when the schedule does not parse, or when
 * it has several phases and the folder's name gives no step. */
const char *ufp4_train_recipe_at(const ufp4_train_config *cfg, const char *ckpt_dir, ufp4_recipe_schedule *sched);
/* Sets cfg->out_dir to dir; UFP4_EINVAL, naming dir, when it does not fit (it is never cut short,
 * which would train into another folder). */
int ufp4_train_set_out_dir(ufp4_train_config *cfg, const char *dir);

/* Most seeds a grid of runs (compare, sweep) takes per recipe and size. */
#define UFP4_MAX_GRID_SEEDS 1000

typedef struct {
  ufp4_batch_fn train_batch;
  void *train_ctx;
  ufp4_batch_fn val_batch; /* may be NULL: no evaluation */
  void *val_ctx;
} ufp4_data_source;

typedef struct {
  int steps_done;
  double final_loss;       /* mean train loss of the last logged window */
  double final_val_loss;   /* NaN when there was no evaluation */
  double tokens_per_s;     /* over the whole run, excluding evaluation and checkpoints */
  int skipped_steps;       /* steps dropped by the NaN policy */
} ufp4_train_result;

/* Trains from scratch, or with resume = 1 from the latest checkpoint in out_dir; the result of a
 * resumed run is that of the uninterrupted one, but for tokens_per_s, which covers this call's
 * steps. A resume must have the configuration out_dir/config.json holds (read as by
 * ufp4_train_config_load, compared as ufp4_train_config_json writes both) up to steps,
 * optim.total_steps, threads, ckpt_every, keep_ckpts, diag_every, guard, guard_policy,
 * nan_policy, the data's description, and the keys derived from others (world, which the
 * checkpoint checks, global_batch_tokens, n_params, the phase starts of projection_recipes): any
 * other key that differs is UFP4_EINVAL naming it and both values, before anything is written.
 * Returns 0 or a negative status with ufp4_last_error() set. */
int ufp4_train(const ufp4_train_config *cfg, const ufp4_data_source *data, int resume, ufp4_train_result *res);

/* The configuration as ufp4_train runs it and config.json records it: total_steps 0 becomes steps,
 * and the model's derived fields are filled (ufp4_model_config_resolve). */
void ufp4_train_config_resolve(ufp4_train_config *cfg);

typedef enum {
  UFP4_RUN_NONE = 0,  /* no run.json: no run, or one from a binary before run records */
  UFP4_RUN_RUNNING,   /* started, and not ended by a return of ufp4_train: running or killed */
  UFP4_RUN_FAILED,    /* ufp4_train returned an error; `error` holds it */
  UFP4_RUN_FINISHED,  /* every step done and every file written; `result` holds what it returned */
} ufp4_run_state;

/* A run folder's run.json. */
typedef struct {
  ufp4_run_state state;
  /* The binary that trained the run (its git commit, `git describe --always --dirty`, or
   * "unknown"); when a resume was made by another binary, all of them in order joined by '+'. */
  char commit[256];
  ufp4_train_result result; /* FINISHED: exactly the result ufp4_train returned (losses to the bit;
                             * tokens_per_s of the last sitting) */
  char error[512];          /* FAILED */
} ufp4_run_record;

/* Reads DIR/run.json into *rec; state UFP4_RUN_NONE when there is none. A file that is not such a
 * record is UFP4_EFORMAT naming it. */
int ufp4_run_record_read(const char *dir, ufp4_run_record *rec);

/* The step of the newest complete checkpoint of run folder `dir`, the one a resume starts from;
 * -1 when there is none. */
int ufp4_train_latest_checkpoint(const char *dir);

/* Writes the resolved configuration as JSON (malloc'ed string). */
char *ufp4_train_config_json(const ufp4_train_config *cfg);
/* Reads a JSON config (the same keys as config.json; missing keys keep their current value). */
int ufp4_train_config_load(const char *path, ufp4_train_config *cfg);
/* The same, for a file a user wrote (train --config): a key the schema does not have, or has in
 * another object ("moe_experts" at the top level instead of in "model"), is UFP4_EFORMAT naming the
 * file and the key. Run folders' config.json are read with ufp4_train_config_load, so a folder
 * written by another version still loads. */
int ufp4_train_config_load_strict(const char *path, ufp4_train_config *cfg);
/* Of a file that ufp4_train_config_load_strict read: the derived keys it holds ("n_params",
 * "world", "global_batch_tokens", ..., which config.json carries for its readers and no loader
 * reads), and "vocab" in "model" (which ufp4_train_shards replaces by the data's), whose values
 * differ from those of cfg, the run's config as resolved against its data
 * (ufp4_train_shards_resolve, with its world). Writes one line per key into out (NUL-terminated,
 * cut at size): `PATH: "KEY" is derived, not read: the file says X, this run has Y` ("comes from
 * the data" for vocab). Returns their number (0 also when the file cannot be read again). A run's
 * own config.json passed as --config matches on a run of the same shape, data and world. */
int ufp4_train_config_derived_notes(const char *path, const ufp4_train_config *cfg, char *out, size_t size);

/* Mean loss over n validation batches (batch i = val_batch(i)). */
int ufp4_evaluate(ufp4_model *m, ufp4_batch_fn val_batch, void *ctx, int n, int B, int T, double *loss);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
