/* Model, optimizer and run flags shared by `ufp4 train` and the commands that train several runs. */
#ifndef UFP4_CLI_TRAIN_FLAGS_H
#define UFP4_CLI_TRAIN_FLAGS_H

#include <stdio.h>
#include "ufp4/train.h"

/* The train flags' help lines, with the defaults of `def` (the command's own: compare and sweep
 * checkpoint and log otherwise than train), leaving out the flags in `own` (NULL-terminated, or
 * NULL), which the command's usage explains itself. */
void ufp4_train_flags_usage(FILE *out, const ufp4_train_config *def, const char *const *own);
/* Parses the flag at argv[*i] into cfg: 1 taken (and *i advanced past its value), 0 not a train
 * flag, -1 a bad value (message printed). */
int ufp4_train_flags_parse(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg);

/* As ufp4_train_flags_parse, plus --no-progress; an unknown option is reported (naming `cmd`)
 * and returns -1, so the caller exits with status 2 on any negative value. */
int ufp4_train_flags_parse_or_fail(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg);

/* As ufp4_train_flags_parse_or_fail, for a command that trains a grid of runs (compare, sweep),
 * which sets each run's recipe and schedule from its own --recipes: --recipe and --schedule would
 * be ignored there (or applied to every run, the bf16 reference too), so they are refused with a
 * message naming cmd (-1). */
int ufp4_grid_flags_parse_or_fail(const char *cmd, int argc, char **argv, int *i, ufp4_train_config *cfg);
/* ufp4_train_flags_usage for such a command: it also leaves out the flags that
 * ufp4_grid_flags_parse_or_fail refuses (one list, in train_flags.c). */
void ufp4_grid_flags_usage(FILE *out, const ufp4_train_config *def, const char *const *own);

/* --override PATTERN=SPEC: appends v to the ';'-joined list at[size] (its pattern and spec are
 * checked when the model resolves them, ufp4_model_resolve_recipes); 0, or -1 with a message
 * naming cmd and flag when v is not PATTERN=SPEC or the list would not fit. */
int ufp4_cli_append_override(const char *cmd, const char *flag, const char *v, char *at, size_t size);

#endif
