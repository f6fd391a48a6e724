/* The run folder's housekeeping for the training loop (train.h lists what the folder holds):
 * creating it with config.json and run.json, opening metrics.jsonl and diagnostics.jsonl, cut
 * back on a resume to the lines of the steps the checkpoint had reached, and the run's last word
 * in run.json. Checkpoints are checkpoint_schedule.h's. Internal to the training layer. */
#ifndef UFP4_TRAINING_RUN_DIR_H
#define UFP4_TRAINING_RUN_DIR_H

#include <stdio.h>

#include "ufp4/train.h"

typedef struct {
  FILE *metrics; /* metrics.jsonl */
  FILE *diag;    /* diagnostics.jsonl; NULL unless diag_every > 0 */
  char commit[256]; /* the binaries run.json records (ufp4_run_record) */
} run_logs;

/* Rank 0's part of the set-up: makes out_dir, writes config.json and run.json ("running": this
 * binary, or on a resume the record's binaries and this one), and opens the logs, fresh ("w") or,
 * on a resume at step `start`, appending after the lines up to `start`. On failure the logs
 * already opened stay in *logs for run_logs_close. */
int run_dir_open(const ufp4_train_config *cfg, int resume, int start, run_logs *logs);
/* run.json "finished" with the result: the run's last write. */
int run_record_finish(const ufp4_train_config *cfg, const run_logs *logs,
                      const ufp4_train_result *res);
/* run.json "failed" with ufp4_last_error(), as far as it can be written; the error message stays
 * the run's (status rc). */
void run_record_fail(const ufp4_train_config *cfg, const run_logs *logs, int steps_done, int rc);
void run_logs_close(run_logs *logs);

/* Flushes a log: a line that did not reach the file (ENOSPC, EIO) is UFP4_EIO naming DIR/NAME,
 * which stops the run rather than losing lines. */
int run_log_flush(FILE *f, const char *dir, const char *name);

#endif
