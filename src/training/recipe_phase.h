/* The training loop's use of recipe schedules and projection overrides (train.h, model.h).
 * Internal to the training layer. */
#ifndef UFP4_TRAINING_RECIPE_PHASE_H
#define UFP4_TRAINING_RECIPE_PHASE_H

#include <stdio.h>
#include "ufp4/model.h"
#include "ufp4/train.h"

/* The run's schedule (ufp4_train_schedule) into *sched, with every phase's recipe resolved under
 * the overrides against the model, so a bad spec or pattern fails before anything is written; and
 * the stochastic-rounding stream check when any projection of any phase draws SR bits. */
int train_check_recipes(const ufp4_train_config *cfg, ufp4_recipe_schedule *sched);
/* Puts model m under phase `phase` of sched with the run's overrides. The recipes are a pure
 * function of the phase, so a resumed run rebuilds exactly the state of the straight one. */
int train_set_phase(ufp4_model *m, const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, int phase);
/* A resume at `step` (steps done) must keep the phases the run has already entered: the starts
 * below `step` of the saved schedule (saved[0..n_saved), from the checkpoint; n_saved 0 means an
 * older checkpoint, which is not checked) and of this run's must be the same. A fraction moved by
 * another --steps fails here, naming both, rather than rewriting the run's past. */
int train_check_resume_phases(const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, const int *saved,
                              int n_saved, int step);
/* The table (ufp4_model_recipe_table) of the run's projections under spec and the overrides;
 * malloc'ed, NULL when spec or the overrides do not resolve (train_check_recipes says why). */
char *train_recipe_table(const ufp4_train_config *cfg, const char *spec);
/* The resolved per-projection table of each phase (ufp4_model_recipe_table), for the log. */
void train_print_recipes(const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, FILE *out);

#endif
