/* Health guards in the training loop (guard.h; docs/TRAINING.md, Health guards): the run's guard
 * parsed once, and the diagnostics steps run with it. A breach is a line in metrics.jsonl and, under
 * policy warn, a line on stderr; under policy stop the diagnostics step ends in an error naming the
 * first breach. Without a guard the diagnostics run exactly as before: no check, no extra work.
 * Internal to the training layer. */
#ifndef UFP4_TRAINING_GUARD_RUN_H
#define UFP4_TRAINING_GUARD_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "ufp4/guard.h"
#include "ufp4/train.h"

typedef struct {
  ufp4_guard guard;
  int stop;           /* policy stop */
  /* Of the diagnostics step running: */
  FILE *metrics;      /* metrics.jsonl (rank 0's) */
  const char *dir;    /* the run folder, for write errors */
  int n_breaches;
  ufp4_guard_breach first;
  int rc;             /* a failed metrics write */
} train_guard;

/* Parses cfg's guard and policy into g; UFP4_EINVAL naming what is wrong (a bad rule, a policy
 * other than warn or stop, a guard without diagnostics to run on). */
int train_guard_init(const ufp4_train_config *cfg, train_guard *g);

/* ufp4_diagnostics_run of one batch into diag, with g's checks when g has rules: each breach is
 * logged to metrics (and stderr under warn); under stop a breach makes the return an error. */
int train_guard_diagnose(train_guard *g, ufp4_model *m, const int32_t *inp, const int32_t *tgt, int B,
                         int T, int step, FILE *diag, FILE *metrics, const char *dir);

#endif
