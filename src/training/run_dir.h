/* The run folder's housekeeping for the training loop (train.h lists what the folder holds):
 * creating it with config.json, and opening metrics.jsonl and diagnostics.jsonl, cut back on a
 * resume to the lines of the steps the checkpoint had reached. Checkpoints are
 * checkpoint_schedule.h's. Internal to the training layer. */
#ifndef UFP4_TRAINING_RUN_DIR_H
#define UFP4_TRAINING_RUN_DIR_H

#include <stdio.h>

#include "ufp4/train.h"

typedef struct {
  FILE *metrics; /* metrics.jsonl */
  FILE *diag;    /* diagnostics.jsonl; NULL unless diag_every > 0 */
} run_logs;

/* Rank 0's part of the set-up: makes out_dir, writes config.json, and opens the logs, fresh ("w")
 * or, on a resume at step `start`, appending after the lines up to `start`. On failure the logs
 * already opened stay in *logs for run_logs_close. */
int run_dir_open(const ufp4_train_config *cfg, int resume, int start, run_logs *logs);
void run_logs_close(run_logs *logs);

/* Flushes a log: a line that did not reach the file (ENOSPC, EIO) is UFP4_EIO naming DIR/NAME,
 * which stops the run rather than losing lines. */
int run_log_flush(FILE *f, const char *dir, const char *name);

#endif
