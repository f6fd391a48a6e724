/* The training loop's checkpoints (checkpoint.h writes and reads one): when they are due, where
 * they go (OUT/ckpt/step_NNNNNNNN), how many are kept, and which one a resume starts from.
 *
 * Pruning renames a checkpoint to step_N.deleting (atomically, synced) before emptying it, so a
 * kill during the removal never leaves a folder under a checkpoint's name with files missing; the
 * next save finishes such leftovers. A checkpoint counts as complete when its
 * optimizer.safetensors exists, the last file written before the folder is renamed into place.
 * Internal to the training layer. */
#ifndef UFP4_TRAINING_CHECKPOINT_SCHEDULE_H
#define UFP4_TRAINING_CHECKPOINT_SCHEDULE_H

#include "ufp4/train.h"

/* What the loop carries from step to step besides the parameters and the AdamW moments, saved
 * with every checkpoint so that a resumed run ends with the result of the uninterrupted one: the
 * train losses summed since the last metrics line (final_loss is their mean at the end), the
 * steps the NaN policy skipped, and the result's losses as of the checkpoint (a run killed after
 * its final checkpoint resumes with no step left to run). */
typedef struct {
  double window_loss;
  int window_n;
  int skipped_steps;
  double final_loss, final_val_loss; /* NaN when not known yet */
  /* the first step of each phase of the recipe schedule the run had when it saved (n_phases 0:
   * a checkpoint from before they were saved), so that a resume can refuse a schedule that would
   * rewrite what the run already did (a fraction moved by another --steps) */
  int n_phases;
  int phase_start[UFP4_MAX_PHASES];
} ckpt_carry;

/* Is a checkpoint due after `done_steps` steps: every ckpt_every steps, and at the end. */
int ckpt_due(const ufp4_train_config *cfg, int done_steps);

/* Saves the model and AdamW state as checkpoint `step` (its metadata records step, seed, world
 * and the carry), then removes those older than the keep_ckpts newest. */
int ckpt_save_step(const ufp4_train_config *cfg, ufp4_model *m, const float *m_state,
                   const float *v_state, int step, const ckpt_carry *carry);

/* Loads the newest complete checkpoint of cfg->out_dir into m, m_state, v_state and *carry and
 * stores its step in *step. Fails, naming the checkpoint, when there is none, when its model is
 * not this config's, or when it was written by another number of ranks (the data order depends on
 * it). A checkpoint from before the carry was saved gives an empty window and no skipped steps. */
int ckpt_resume(const ufp4_train_config *cfg, ufp4_model *m, float *m_state, float *v_state,
                int *step, ckpt_carry *carry);

#endif
