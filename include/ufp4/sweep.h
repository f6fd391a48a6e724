/* A scaling study as one library call (what `ufp4 sweep` runs): every model size under every
 * recipe on the same data and steps, and the fit L(C) = a C^-b + c per recipe (stats.h), with
 * C = 6 N D the training FLOPs (N the parameters outside the embedding, D the tokens seen).
 *
 * Size LxW is L layers of width W: heads = W / 32, ffn = 3 W, n_kv_heads = heads. Run
 * (size, recipe, seed s) trains `train` with seed train.seed + s into
 * OUT/runs/LxW/RECIPE/seedS; its loss is the final validation loss, or the final train loss
 * when the run had no evaluation. A recipe is fitted when there are at least 3 sizes (and the
 * fit succeeds). Under mpirun the runs are shared out over the ranks (report/run_share.h) and rank
 * 0 alone writes; the results are those of one process. Like ufp4_compare_run (compare.h), the
 * call leaves the launch joined: the process ends it with ufp4_dist_finalize after its last call.
 *
 * Files in out_dir, each written atomically: sweep.md (the tables), sweep.json
 * {"sizes":[{"layers","width","params","flops","loss":{RECIPE:
 * L}}],"fits":[{"recipe","a","b","c"}]} (null where not fitted), sweep.dat (gnuplot data: C, the
 * losses, the gaps to bf16), and the plots sweep_loss.svg/png and sweep_gap.svg/png when gnuplot is
 * there (plot.h).
 *
 * Resumable in sittings exactly as ufp4_compare_run (compare.h, report/run_resume.h): runs finished
 * by this binary with this configuration are read back from their run.json (the loss to the bit),
 * interrupted ones resume from their newest checkpoint, and folders of another binary or
 * configuration are moved to OUT/stale/COMMIT/runs/... and redone. */
#ifndef UFP4_SWEEP_H
#define UFP4_SWEEP_H

#include <stddef.h>
#include <stdio.h>

#include "ufp4/stats.h"
#include "ufp4/train.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

enum { UFP4_SWEEP_MAX_SIZES = 16, UFP4_SWEEP_MAX_RECIPES = 16 };

typedef struct {
  const char *data_dir; /* token shards (`ufp4 prepare`); required */
  const char *out_dir; /* created; required */
  const char *sizes; /* LAYERSxWIDTH,... with WIDTH a multiple of 32; default "2x64,2x128,4x128" */
  const char *recipes; /* ','-separated (';' when a spec holds commas), must include bf16, the
                        * reference of the gap; default "bf16,e2m1,ufp4" */
  int seeds; /* 1..UFP4_MAX_GRID_SEEDS (default 1); the loss is the mean over the seeds */
  FILE *log; /* rank 0's lines (runs done, to resume, to run; stale folders); default stderr;
              * NULL = nowhere */
  ufp4_train_config train; /* all but the model shape, recipe, seed offset and out_dir (its
                            * schedule must be empty: a sweep trains each recipe as listed,
                            * UFP4_EINVAL otherwise); by
                            * default ufp4_train_config_default() with eval_every = 0,
                            * keep_ckpts = 1 and ckpt_every = -1: every ceil(steps / 10) steps */
} ufp4_sweep_options;

ufp4_sweep_options ufp4_sweep_options_default(void);

typedef struct {
  int layers, width;
  size_t params; /* N: outside the embedding */
  double flops; /* C = 6 N D */
  double loss[UFP4_SWEEP_MAX_RECIPES]; /* per recipe, mean over seeds */
} ufp4_sweep_size;

typedef struct {
  int n_sizes, n_recipes, seeds;
  int bf16; /* index of bf16 among the recipes */
  int steps, seqs_per_step, seq_len; /* D = steps * seqs_per_step * seq_len tokens */
  char recipe[UFP4_SWEEP_MAX_RECIPES][512];
  ufp4_sweep_size size[UFP4_SWEEP_MAX_SIZES];
  ufp4_power_fit fit[UFP4_SWEEP_MAX_RECIPES];
  int fitted[UFP4_SWEEP_MAX_RECIPES];
  int rank; /* this process's rank; only rank 0 has results and wrote the files */
  int plotted; /* 1 when gnuplot drew the plots */
} ufp4_sweep_result;

/* Checks the options without training: both folders given, seeds >= 1, the sizes, every recipe
 * spec, bf16 among them. UFP4_EINVAL with a message naming what is wrong. */
int ufp4_sweep_check(const ufp4_sweep_options *o);
/* ufp4_sweep_check, every run of this rank, then (rank 0) the fits and ufp4_sweep_write into
 * out_dir. A ufp4 status. */
int ufp4_sweep_run(const ufp4_sweep_options *o, ufp4_sweep_result *res);
/* Writes sweep.md, sweep.json, sweep.dat and the plots into out_dir; sets res->plotted. */
int ufp4_sweep_write(ufp4_sweep_result *res, const char *out_dir);
/* sweep.md's text. */
void ufp4_sweep_print(const ufp4_sweep_result *res, FILE *f);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
