/* The lines of metrics.jsonl (train.h lists their keys). Every number goes through
 * ufp4_json_num or a fixed printf format, so a run's lines are the same bytes on every machine
 * apart from the timing fields (tokens_per_s, ms_per_step, comm_ms). Internal to the training
 * layer. */
#ifndef UFP4_TRAINING_METRICS_H
#define UFP4_TRAINING_METRICS_H

#include <stdio.h>

/* What one optimizer step did, as every rank sees it after the gradient exchange. */
typedef struct {
  int step;         /* steps done, this one included */
  double loss, aux; /* mean cross-entropy and auxiliary objective over ranks and micro-batches */
  double lr, grad_norm;
  double seconds;      /* the step's wall time, forward to update */
  double tokens_per_s; /* over all ranks */
  double comm_ms;      /* of `seconds`, in the gradient and loss exchange */
  int skipped;         /* the NaN policy dropped the update */
} train_step_stats;

/* One step's line. with_aux adds aux_loss (an MoE model), with_comm adds comm_ms (world > 1).
 * The line is flushed: a write that failed is UFP4_EIO naming DIR/metrics.jsonl. */
int metrics_step_line(FILE *f, const char *dir, const train_step_stats *st, int with_aux,
                      int with_comm);
/* One evaluation's line: val_loss and its perplexity. */
int metrics_eval_line(FILE *f, const char *dir, int step, double val_loss);
/* A schedule's switch: phase `phase` runs spec (written resolved) from the step numbered `step`
 * on (counted as the step lines count, so a resume that cuts the log back to its checkpoint drops
 * the event exactly when it will run the switch again). A spec holds no '"' or '\\'. */
int metrics_recipe_line(FILE *f, const char *dir, int step, int phase, const char *spec);

#endif
