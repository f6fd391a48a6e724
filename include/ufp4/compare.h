/* A recipe comparison as one library call (what `ufp4 compare` runs): the same model, data, data
 * order and schedule under the bf16 baseline, an fp32 control and each 4-bit recipe, over several
 * seeds; then the report of report.h, built from the run folders and written into out_dir.
 *
 * Runs, in this order: for each seed s = 0 .. seeds-1, for each recipe: bf16, fp32 (unless
 * control = 0), then the asked recipes in the order given, duplicates dropped (or, with an
 * ablation, each asked FP4 recipe once per scope value: rht-scope = none, wgrad, dgrad+wgrad,
 * fprop+wgrad, all; sr-scope = dy, none, appended to its spec as ",rht=X" / ",sr=X"; bf16 and fp32
 * have no RHT or SR to vary). Recipe k of seed s trains `train` with seed train.seed + s into
 * OUT/runs/NAME/seedS, NAME the spec with every character other than letters, digits, '-' and '.'
 * replaced by '_'. Seed s of every recipe shares the init, the data order and the SR streams.
 *
 * Resumable: a study of long runs can be run in several sittings by repeating the same call (the
 * same `ufp4 compare` command) with the same binary. Before training, rank 0 looks at every run
 * folder: a run finished by this binary with this configuration is not trained again (the report
 * uses it); an interrupted one resumes from its newest checkpoint and ends bit-identical to an
 * uninterrupted run; one with no checkpoint starts again. A folder made by another binary (the
 * git commit each run.json records, train.h; a "-dirty" build is its own binary) or with another
 * configuration (threads, ckpt_every and keep_ckpts aside, which change no result) is moved to
 * OUT/stale/COMMIT/runs/NAME/seedS, never deleted, and redone; a damaged run folder is an error
 * naming the file. The log says what was moved, then "N done, M to resume, K to run". The report
 * records the binary's commit. Details: report/run_resume.h.
 *
 * Under mpirun the runs are shared out over the ranks (report/run_share.h): every rank calls
 * ufp4_compare_run, rank 0 alone builds and writes the report, and the report is that of one
 * process. A failed run fails the call on every rank, and no report is written. The call joins
 * the launch (ufp4_dist_init, dist.h) and leaves it joined, so a process may make several calls;
 * the process ends the launch with ufp4_dist_finalize once, after its last call. */
#ifndef UFP4_COMPARE_H
#define UFP4_COMPARE_H

#include <stdio.h>

#include "ufp4/report.h"
#include "ufp4/train.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  const char *data_dir; /* token shards (`ufp4 prepare`); required */
  const char *out_dir; /* the report and runs/; created; required */
  const char
      *recipes; /* ','-separated (';' when a spec holds commas); default "bf16,e2m1,nvfp4,ufp4" */
  int seeds; /* seeds per recipe, 1..UFP4_MAX_GRID_SEEDS (default 3) */
  int final_steps; /* relative-error window in logged steps; 0 (default): steps / 5, at least 1 */
  const char *ablation; /* NULL (default), "rht-scope" or "sr-scope" */
  int control; /* 1 (default): the fp32 control run, the noise floor of the metric */
  const char *command; /* recorded in the report; NULL = none */
  double target_effect; /* > 0: the report gives the seeds each pair needs to detect this
                         * difference of relative error, in percentage points (report.h);
                         * 0 (default): none */
  FILE *log; /* where the plan and the resume lines go (rank 0); default stderr; NULL = nowhere */
  ufp4_train_config train; /* every run's configuration but recipe, seed offset and out_dir (its
                            * schedule must be empty: a run's schedule is its entry of recipes,
                            * UFP4_EINVAL otherwise); by
                            * default ufp4_train_config_default() with eval_every = 0,
                            * diag_every = -1, which means steps / 4 (at least 1), ckpt_every =
                            * -1, which means every ceil(steps / 10) steps (at least 1), so that
                            * an interruption loses at most a tenth of a run, and keep_ckpts = 1
                            * (a resume needs only the newest) */
  const char *same_bits_as; /* ','-separated commits (as run.json records them) whose run folders
                             * count as this binary's own: kept when finished, resumed when not
                             * (run_resume.h). Only for binaries shown to compute the same bits
                             * (docs/STUDY.md, amendment 1). NULL (default): none */
} ufp4_compare_options;

ufp4_compare_options ufp4_compare_options_default(void);

typedef struct {
  int n_recipes, n_runs; /* the grid: n_runs = n_recipes * seeds */
  int rank; /* this process's rank in the launch (0 without one) */
  ufp4_report *report; /* rank 0: the report written into out_dir; NULL on other ranks */
  double seconds; /* wall time of the call */
} ufp4_compare_result;

/* Checks the options without training: both folders given, seeds >= 1, every recipe spec parses,
 * the ablation kind is known. UFP4_EINVAL with a message naming what is wrong. */
int ufp4_compare_check(const ufp4_compare_options *o);
/* ufp4_compare_check, then every run of this rank, then (rank 0) the report. A ufp4 status; *res
 * is filled on success and must be released with ufp4_compare_result_free. */
int ufp4_compare_run(const ufp4_compare_options *o, ufp4_compare_result *res);
void ufp4_compare_result_free(ufp4_compare_result *res);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
