/* Whether a run folder holds the run of a configuration: its config.json against the one
 * ufp4_train_config_json would write for the configuration, key by key and exactly. The grids'
 * resume (report/run_resume.h) decides by the file as it is, the trainer's resume (ufp4_train
 * with resume) by the file read as a configuration; each lets its own keys differ. Internal to
 * the training layer and those above. */
#ifndef UFP4_TRAINING_CONFIG_DIFF_H
#define UFP4_TRAINING_CONFIG_DIFF_H

#include <stddef.h>

#include "ufp4/train.h"

typedef struct {
  char key[256];    /* the first key that differs, as "model.n_layers"; "" when none does */
  char folder[256]; /* its value in the folder's config.json (or `was`), as compact JSON ("absent" */
  char now[256];    /* when that lacks it), and in cfg's (`now`'s); cut short to fit */
} train_config_diff;

/* Compares cfg->out_dir/config.json with the configuration cfg would write, skipping the keys
 * named in free_keys[n_free] (full names: "threads", "optim.total_steps"). Numbers must be equal
 * exactly (cJSON's own comparison lets the last bits differ, which can change a run), arrays
 * element by element, and a key that only one side has differs. A ufp4 status: a missing or
 * damaged config.json is an error naming it. */
int train_config_diff_folder(const ufp4_train_config *cfg, const char *const *free_keys, size_t n_free,
                             train_config_diff *diff);

/* The same comparison between two configurations, both as ufp4_train_config_json writes them:
 * `was` plays the folder's part. A configuration read from an older config.json (by
 * ufp4_train_config_load, which gives the keys it lacks their defaults) thus compares with a
 * current one without differing in the keys that binary did not write. */
int train_config_diff_configs(const ufp4_train_config *was, const ufp4_train_config *now, const char *const *free_keys,
                              size_t n_free, train_config_diff *diff);

#endif
