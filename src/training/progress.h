/* The progress line on stderr (cfg->progress, rank 0): step, loss, learning rate, throughput and
 * the time left, for this run and, with eta_after_s, for all the runs still to come. A terminal
 * gets one line rewritten in place; a log file about 20 lines per run. Internal to the training
 * layer. */
#ifndef UFP4_TRAINING_PROGRESS_H
#define UFP4_TRAINING_PROGRESS_H

#include "training/metrics.h"
#include "ufp4/train.h"

/* After step st->step; `label` names the run, train_s is the training time of the steps since
 * `start` (the first step of this process), from which the time left is extrapolated. */
void progress_step(const ufp4_train_config *cfg, const char *label, const train_step_stats *st,
                   int start, double train_s);
/* Step `step` (counting from 1) had its update skipped by the NaN policy: said on a line of its
 * own. */
void progress_skipped(int step);

#endif
