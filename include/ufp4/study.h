/* The analysis of the pre-registered depth study (docs/STUDY.md, sections 3.1, 4-7): finished
 * `ufp4 compare` folders at several depths, and the `ufp4 drift --mode both` outputs of the
 * baseline's final checkpoints at the deepest depth -> H1, H2 and H3 with Holm over the three,
 * the per-depth and secondary families, the settledness table, and the stage-2 seed count.
 *
 * Inputs. A depth folder is the --out of one `ufp4 compare`: DIR/runs/<name>/seed<N>/metrics.jsonl,
 * <name> the folder name compare gives a recipe spec (letters, digits, '-' and '.' kept, anything
 * else '_'). Several folders may hold the same depth (stage 1 and stage 2); a (depth, recipe,
 * seed) found in two of them is an error. L_r(s, L) is the val_loss of the run's last evaluation.
 * A seed is in the analysis when recipes a, b and the baseline have a run at every depth and, at
 * each depth, their last evaluations are at one step (a seed still running is left out and named
 * in `excluded`; a run whose metrics.jsonl cannot be read, e.g. one being written, counts as
 * unfinished and the error is kept in `unreadable`). The control and the secondary recipes only enter their own comparisons, over
 * the included seeds that have them at every depth.
 *
 * Errors rather than a quietly smaller analysis: a run whose run.json says finished but whose
 * metrics.jsonl cannot be read (damaged, or a diverged evaluation logged as null); a recipe named
 * in the options with no runs/<name> folder in any depth folder (a misspelling); with drift_dir,
 * a missing folder or an included seed without drift.json; with seeds = N, an included set other
 * than 1..N (with sd_only, only seeds 1..N are looked at, and all of them must be complete, so the
 * stage-1 look can be made again after stage 2 has added seeds to the same folders).
 *
 * Statistics (all from ufp4_paired_summarize, 95% intervals, MDD at 80% power):
 *   D(s, L)  = 100 (L_a - L_b) / L_base                percentage points (pp)
 *   H1       d(s) = mean over depths of D(s, L)        test of mean 0, MDD at alpha / 3
 *   per depth  D(s, L) at each depth                   Holm over the depths at alpha
 *   H2       b(s) = least-squares slope of D(s, L) against log2 L, pp per doubling (with one depth
 *            not computed: an invalid test, p = 1 for Holm; one depth serves the secondary family)
 *   control  e_c(s) = mean over depths of 100 (L_control - L_base) / L_base; the noise floor is
 *            |mean e_c|: an H1 effect smaller than it is "below the noise floor", whatever its p
 *   secondary  for each secondary recipe r: mean over depths of 100 (L_r - L_ref) / L_base, ref its
 *            own reference (secondary_refs[k], else secondary_ref, else a), Holm within the family
 *   H3       per seed, from its drift.json: the mean over batches of the forward log-ratio slope
 *            and of the backward dX log-ratio slope, for a and for b. (a) a's mean slope is
 *            negative with an interval excluding 0, forward and backward; the p-value for Holm
 *            is the larger of the two (an intersection-union test). (b) b's interval lies inside
 *            (-0.25 |mean a|, +0.25 |mean a|), forward and backward: b's slope is within a quarter
 *            of a's from zero, i.e. b "does not compound" by the registered margin.
 *   H3, secondary  the same form for the other measures of drift.json, from its per-batch values:
 *            per batch the least-squares slope of ln(measure) against the blocks the signal has
 *            crossed, the seed's value the mean over its batches, then a, b and a - b over seeds:
 *              forward cosine      ln c_l against l, l = 1..L (as the forward ratio)
 *              dX cosine           ln c_l against L - l, l = 0..L (as the dX ratio)
 *              dW ratio / cosine   per projection kind (the tensors model.layers.<i>.<rest> whose
 *                                  <rest> ends in "_proj.weight", e.g. self_attn.q_proj.weight):
 *                                  ln of block i's measure against L - 1 - i, i = 0..L-1 (the
 *                                  gradient reaching block i has crossed the L - 1 - i above it)
 *            A batch with a non-positive measure makes its seed's value NaN (that seed leaves the
 *            test; n says so); so does a primary slope that drift.json has as null. Holm within
 *            this family over a's tests, at alpha.
 *            Also kept: per seed, the drift's own batch-level mean and 95% interval of the two
 *            primary slopes, and per block the seed mean (95% interval over seeds) of the forward
 *            and dX ratio and cosine of a and b (h3_curves).
 *            A drift.json must say mode "both", name a checkpoint path with a "seed<N>" folder of
 *            its own seed, measure a model of the deepest depth's blocks, have the same batches as
 *            the others, and have some projection's dW.
 *   Holm     over the p-values of H1, H2, H3(a) at alpha (0.05/3, 0.05/2, 0.05 in turn, stopping
 *            at the first that fails). A hypothesis is supported when Holm rejects it AND its
 *            estimate has the predicted sign (H1, H2 positive; H3 negative) AND, for H3, (b) holds.
 *   series   per recipe and depth, e_r(s, L) = 100 (L_r - L_base) / L_base over seeds: the depth
 *            series' table and plot (descriptive)
 *   settled  per depth, G_q(s) = mean over the evaluations in quarter q of the steps
 *            ((q - 1) S / 4, q S / 4], S the last evaluation, of L_a - L_b (nats). Settled when the
 *            interval of the seed mean of G_4 - G_3 contains 0 and |mean| is below
 *            max(|mean G_4| / 4, 0.002).
 *   stage 2  (the internal pilot, section 5) sd of d(s) only; the target 0.005 nats in pp is
 *            100 * target / mean L_base (the mean over seeds and depths); n = max(n_min,
 *            ufp4_paired_n(target, sd, alpha / 3, 0.8)), at most n_cap (then the MDD reached at
 *            n_cap is given). Written only by an sd_only call (stage2.json); the final analysis
 *            reports the n it has and H1's MDD at that n instead of deciding n again.
 * A run counts as finished when its run.json says so and its last evaluation is at the depth's
 * last step; the binaries (run.json's commit) of the runs in the analysis are listed.
 * No figure depends on the order of the folders or the file system's listing order. */
#ifndef UFP4_STUDY_H
#define UFP4_STUDY_H

#include <stddef.h>

#include "ufp4/export.h"
#include "ufp4/power.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

#define UFP4_STUDY_MAX_DEPTHS 8
#define UFP4_STUDY_MAX_SECONDARY 8
#define UFP4_STUDY_MAX_PROJ_KINDS 16 /* projection kinds of a block whose dW enter H3's secondary family */
#define UFP4_STUDY_MAX_H3_SECONDARY (2 + 2 * UFP4_STUDY_MAX_PROJ_KINDS)
#define UFP4_STUDY_MAX_RECIPES (3 + 2 * UFP4_STUDY_MAX_SECONDARY) /* a, b, control, secondary and references */

typedef struct {
  int depth;
  const char *dir; /* a compare --out folder */
} ufp4_study_folder;

typedef struct {
  const char *a, *b;           /* the pair of H1-H3 (default "e2m1", "ufp4") */
  const char *baseline;        /* default "bf16" */
  const char *control;         /* default "fp32"; NULL: none */
  const char *secondary[UFP4_STUDY_MAX_SECONDARY];      /* recipe specs, each compared with its reference */
  const char *secondary_refs[UFP4_STUDY_MAX_SECONDARY]; /* secondary[k]'s reference; NULL: secondary_ref */
  int n_secondary;
  const char *secondary_ref;   /* the default reference; NULL: a */
  const char *drift_dir;       /* holds seed<N>/drift.json; NULL: no H3 */
  double alpha;                /* familywise, default 0.05 */
  double power;                /* default 0.8 */
  double margin;               /* H3 (b) equivalence margin as a fraction of |a|, default 0.25 */
  double target_nats;          /* stage 2 target effect, default 0.005 */
  int n_min, n_cap;            /* stage 2 bounds, default 12 and 24 */
  int seeds;                   /* > 0: the included seeds must be exactly 1..seeds, or the call fails
                                * (the registered n; with sd_only, later seeds are not looked at);
                                * 0 (default): whatever seeds are complete */
} ufp4_study_options;

ufp4_study_options ufp4_study_options_default(void);

typedef struct {
  int valid; /* n >= 2 */
  ufp4_paired_summary s;
  double p_holm;   /* the level Holm compared p with (NaN when not reached) */
  double mdd_holm; /* the MDD at p_holm and the options' power (NaN when not reached or invalid; 0 when
                    * sd is 0, as s.mdd). s.mdd is at the summary's alpha: the same figure when Holm
                    * compared p with that alpha, larger at a stricter level (the first steps of a
                    * family summarized at alpha), smaller at a looser one (H1-H3, summarized at
                    * alpha/3, after their first step). For h3, the IUT's, it is the arm with the
                    * larger p; each arm of h3_a has its own at the same level. */
  int rejected;    /* by Holm in its family */
} ufp4_study_test;

/* One secondary H3 measure: a's, b's and a - b's slope over seeds; b inside the margin of |a|. */
typedef struct {
  char name[72]; /* "forward cosine", "dX cosine", "dW ratio self_attn.q_proj", "dW cosine ..." */
  ufp4_study_test a, b, diff;
  int b_equivalent;
} ufp4_study_h3_measure;

typedef struct {
  int n_depths, depth[UFP4_STUDY_MAX_DEPTHS]; /* ascending */
  size_t n_seeds;
  long long *seeds;       /* the included seeds, ascending */
  char excluded[1024];    /* "seed 13 (L=16: e2m1 not finished); ..." or "" */
  char unreadable[600];   /* a metrics.jsonl that could not be read (a run being written counts
                           * as unfinished): the last such error, or "" */
  double mean_base;       /* mean L_base over seeds and depths (nats) */
  ufp4_study_test h1, h2, per_depth[UFP4_STUDY_MAX_DEPTHS];
  int h1_supported, h2_supported, h3_supported;
  int h1_below_noise;     /* |mean d| < noise floor */
  int has_control;
  ufp4_study_test control; /* e_c(s), not in any family */
  ufp4_study_test control_depth[UFP4_STUDY_MAX_DEPTHS]; /* the control's relative error at each depth */
  double noise_floor;     /* |mean e_c|, pp; NaN without control */
  int n_secondary;
  ufp4_study_test secondary[UFP4_STUDY_MAX_SECONDARY];
  const char *secondary_ref[UFP4_STUDY_MAX_SECONDARY]; /* each one's reference (the options' strings) */
  /* the depth series (descriptive, no family): each recipe's relative error 100 (L_r - L_base) /
   * L_base per depth over the included seeds that have it; recipes a, b, the control, then the
   * secondary recipes and their references, each name once */
  int n_recipes;
  const char *recipe[UFP4_STUDY_MAX_RECIPES];
  ufp4_study_test rel_err[UFP4_STUDY_MAX_RECIPES][UFP4_STUDY_MAX_DEPTHS];
  /* settledness, per depth */
  double g_mean[UFP4_STUDY_MAX_DEPTHS][4];
  ufp4_study_test settle[UFP4_STUDY_MAX_DEPTHS];
  int settled[UFP4_STUDY_MAX_DEPTHS];
  /* H3: 0 forward, 1 backward (dX); slopes of a, of b, and a - b, over seeds */
  int has_h3;
  size_t h3_seeds;
  ufp4_study_test h3_a[2], h3_b[2], h3_diff[2];
  double h3_p;            /* max of h3_a[0].p, h3_a[1].p */
  ufp4_study_test h3;     /* Holm's view of H3(a) */
  int h3_equivalent[2];   /* (b) per direction */
  long h3_batches;        /* batches of every drift measurement */
  int h3_layers;          /* L of the drift checkpoints */
  int n_h3_secondary;
  ufp4_study_h3_measure h3_secondary[UFP4_STUDY_MAX_H3_SECONDARY];
  double *h3_seed_slopes; /* [n_seeds][a, b][forward, dX][mean, ci_lo, ci_hi]: each checkpoint's
                           * slope over its batches, as drift.json has it */
  double *h3_curves;      /* [forward ratio, forward cosine, dX ratio, dX cosine][a, b][h3_layers + 1]
                           * [mean, ci_lo, ci_hi]: per block, the seeds' means of their batch means */
  char binaries[512];     /* the commits (run.json) of the runs in the analysis, ", "-joined */
  double *per_seed;       /* each test's value per included seed, rows of n_seeds: d(s) (H1), b(s)
                           * (H2), e_c(s) (the control; NaN without one), D(s, L) for each depth,
                           * then each secondary comparison; NaN where a seed lacks a run. NULL
                           * with sd_only */
  int last_step[UFP4_STUDY_MAX_DEPTHS]; /* the last evaluation step of each depth */
  /* stage 2 */
  double sd_pp, target_pp;
  size_t n_needed;        /* max(n_min, paired_n), capped; 0 outside sd_only */
  int capped;             /* the cap binds: mdd_at_cap is what n_cap reaches */
  double mdd_at_cap;
} ufp4_study_result;

/* Reads the folders (and drift files) and computes everything above. With sd_only the tests are
 * not computed (their fields are NaN): only the seeds, mean_base, sd_pp, target_pp, n_needed,
 * capped and mdd_at_cap, as the internal pilot allows. Without drift_dir the H3 fields are NaN
 * and has_h3 is 0. *out is calloc'ed; NULL on failure. */
int ufp4_study_analyze(const ufp4_study_folder *folders, size_t n_folders, const ufp4_study_options *o,
                       int sd_only, ufp4_study_result **out);
/* analysis.json and analysis.md (with H3, also h3_curves.dat and the plots h3_forward and
 * h3_backward, .svg and .png, when gnuplot runs), or, for an sd_only result, stage2.json, into
 * out_dir (created if needed), each file written atomically. `command` and `commit` are recorded;
 * either may be NULL. */
int ufp4_study_write(const ufp4_study_result *r, const ufp4_study_options *o, int sd_only, const char *command,
                     const char *commit, const char *out_dir);
void ufp4_study_free(ufp4_study_result *r);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
