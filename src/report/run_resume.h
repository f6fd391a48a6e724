/* Resuming a grid of runs (ufp4_compare_run, ufp4_sweep_run) over several sittings: before any
 * run trains, rank 0 looks at every run folder of the grid and decides its fate, and the ranks then
 * act on it. A run folder is this grid's run when its run.json (train.h) names this binary's commit
 * (core/build_info.h) and its config.json is the run's resolved configuration (ufp4_train_config_json
 * of ufp4_train_shards_resolve), up to the settings that do not change what a run computes:
 * threads, ckpt_every and keep_ckpts. Then:
 *   finished (run.json "finished", metrics.jsonl readable)   done: not trained again; its record
 *                                                            gives the result
 *   not finished, with a complete checkpoint                  resumed from it (bit-identical to an
 *                                                            uninterrupted run, train.h)
 *   not finished, no checkpoint; or no folder, or an empty   trained from the start
 *   one
 * A commit listed in same_bits_as counts as this binary's (and so does a '+'-joined commit whose
 * every part is this binary's or listed): a binary shown to compute the same bits may then keep
 * and resume another's runs; the run.json of a run it resumes records both ("OLD+NEW").
 * A folder made by another binary (a '+'-joined run.json commit counts as another), by one that
 * recorded none, or with another configuration is not mixed in: it is moved, whole, to
 * OUT/stale/COMMIT/<its path under OUT> (".2", ".3", ... appended when that is taken; COMMIT
 * "unrecorded" when there is no run.json), a line on the log says so, and the run is trained
 * again. Nothing is deleted. A damaged run.json, config.json or (finished run) metrics.jsonl is
 * an error naming the file. Internal to the report layer. */
#ifndef UFP4_REPORT_RUN_RESUME_H
#define UFP4_REPORT_RUN_RESUME_H

#include <stdio.h>

#include "report/run_share.h"
#include "ufp4/train.h"

typedef enum {
  UFP4_RESUME_NEW = 0, /* no run yet (or a stale one moved aside, or one that left no checkpoint) */
  UFP4_RESUME_FROM_CKPT,  /* interrupted after a checkpoint: resume */
  UFP4_RESUME_DONE,    /* finished by this binary with this configuration: skip */
} ufp4_resume_fate;

/* The configuration of run j of a grid (out_dir set), as the grid trains it; a ufp4 status. */
typedef int (*ufp4_resume_config_fn)(void *ctx, int j, ufp4_train_config *cfg);

typedef struct {
  const char *what;     /* "compare" or "sweep": the log lines' prefix */
  const char *out_dir;  /* the grid's folder: its runs are under it, stale ones go to OUT/stale */
  const char *data_dir; /* the shards every run trains on */
  FILE *log;            /* rank 0's lines (stale folders moved, the counts); NULL = nowhere */
  ufp4_resume_config_fn config;
  void *ctx;
  const char *same_bits_as; /* ','-separated commits whose folders count as this binary's; NULL */
} ufp4_resume_grid;

/* Compare's and sweep's defaults for resuming: with ckpt_every < 0 (the grids' default), a
 * checkpoint every ceil(steps / 10) steps, so that an interruption costs at most a tenth of a
 * run; an explicit ckpt_every >= 0 is kept (0: only at the end, so an interrupted run restarts). */
void ufp4_resume_defaults(ufp4_train_config *cfg);

/* Collective: the fates of the grid's `total` runs into fate[total] on every rank. Rank 0 looks at
 * the folders, moves stale ones aside and logs "N done, M to resume, K to run"; the others wait
 * for its verdict. A ufp4 status, agreed by every rank. */
int ufp4_resume_plan(const ufp4_resume_grid *g, ufp4_run_share *share, int total, ufp4_resume_fate *fate);

/* Run `cfg` as its fate says: a done run's result is read from its run.json, a resumed one
 * continues from its newest checkpoint, a new one starts (in a folder that may hold the files of
 * an attempt that left no checkpoint: they are replaced). */
int ufp4_resume_train(const ufp4_resume_grid *g, ufp4_train_config *cfg, ufp4_resume_fate fate,
                    ufp4_train_result *res);

#endif
