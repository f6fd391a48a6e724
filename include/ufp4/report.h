/* The comparison report of `ufp4 compare` / `ufp4 report`: finished run folders (one per recipe
 * and seed, written by ufp4_train, see train.h) -> figures, significance tests, plots and a report.
 *
 * Figures per run (window = the last final_steps logged, non-skipped train lines):
 *   final_train  mean train loss over the run's own last final_steps train lines
 *   final_val    val_loss of the last evaluation line (NaN when there is none)
 *   rel_err      mean over the window of |L(s) - L_base(s)| / L_base(s), where L_base is the
 *                baseline recipe's run OF THE SAME SEED and the window is the last final_steps steps
 *                that both runs logged (the paper's BF16-relative loss error, docs/NUMERICS.md)
 *   signed_gap   mean over the same window of L(s) - L_base(s)
 *   rel_gap      mean over the same window of (L(s) - L_base(s)) / L_base(s)
 *   Runs of the baseline recipe, and runs with no baseline run of their seed, have NaN there.
 * Per recipe: mean and sample std over seeds of each figure (NaNs left out; std NaN below 2).
 * The control recipe's rel_err (fp32 vs bf16) is the noise floor printed next to every recipe.
 * Pairs (the matrix of the report): for every ORDERED pair (a, b) of distinct non-baseline recipes
 * (the control included), on rel_err and on signed_gap, the per-seed differences
 * d_s = metric(a, s) - metric(b, s) over the seeds both have (row a minus column b), summarized by
 * ufp4_paired_summarize (power.h): mean, sample sd, the 95% t confidence interval
 * mean -+ t_{0.975, n-1} sd / sqrt(n), the two-sided paired-t p-value, and the minimum detectable
 * difference at 80% power and alpha 0.05 for the observed sd (ufp4_paired_mdd). "significant"
 * means p < 0.05. With fewer than 2 common seeds there is no interval and no test (valid = 0; the
 * mean of the one difference, if any, is still given). With a target effect (options, in
 * percentage points of relative error), each valid rel_err pair also gets the seeds its sd needs
 * to detect that effect at 80% power (ufp4_paired_n); signed-gap pairs get none (the effect is
 * in the units of relative error).
 *
 * Outputs of ufp4_report_write in out_dir: report.json (every figure above, machine readable),
 * report.md, report.html (self-contained: inline CSS and inline SVG, no external references),
 * and plots/ with each plot's data (.dat), gnuplot script (.gp, `cd plots && gnuplot X.gp`
 * reproduces X.svg and X.png) and its SVG and PNG. report.md and report.html lead with the verdict
 * (one line per significant pair, or a plain statement that none is, with the MDDs), the matrices
 * and the paired-gap plot. Plots: the paired gap L - L_base vs step per recipe (each seed's gap
 * against the baseline run of its seed, smoothed by a trailing moving average over ~1/20 of its
 * points; line = mean over seeds, band = min..max over seeds), seed-mean train loss (raw and
 * smoothed the same way), val loss, seed-mean relative error vs step (smoothed the same way),
 * and when a run has diagnostics.jsonl: alpha and SQNR
 * per layer per operand kind, output SQNR per GEMM per layer, and forward drift (norm ratio and
 * cosine) per layer, each at the last diagnostics step of each run, averaged over projections
 * and seeds. gnuplot is found on PATH (or as $UFP4_GNUPLOT); without it the report is written
 * without plots and says so. */
#ifndef UFP4_REPORT_H
#define UFP4_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "ufp4/power.h"
#include "ufp4/stats.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  char recipe[512]; /* label; "" = the "recipe" of the run's config.json, named by its preset when
                       its canonical spec is one ("bf16,keep_first=0,keep_last=0" is "bf16") */
  long long seed;   /* -1 = take "seed" from config.json */
  char dir[4096];
} ufp4_report_run;

typedef struct {
  int final_steps;       /* averaging window in logged steps (default 100) */
  const char *baseline;  /* default "bf16" */
  const char *control;   /* default "fp32"; NULL or "" = no control */
  const char *title;     /* default "ufp4 recipe comparison" */
  const char *command;   /* the exact command line, recorded in the report; may be NULL */
  const char *commit;    /* the binary that made every run (ufp4 compare: its own git commit),
                          * recorded in the report; may be NULL */
  int plots;             /* 1 (default): plot when gnuplot is available; 0: never */
  double target_effect;  /* > 0: the seeds each rel_err pair needs to detect this difference of
                          * relative error, in percentage points (0.1 = 0.1 pp = 0.001 of the
                          * fraction); 0 (default): none */
} ufp4_report_options;

/* The settings of the pair statistics. */
#define UFP4_REPORT_LEVEL 0.95       /* confidence level of the interval */
#define UFP4_REPORT_ALPHA 0.05       /* level of the test and of the MDD */
#define UFP4_REPORT_POWER 0.80       /* power of the MDD and of the seeds needed */
#define UFP4_REPORT_MAX_SEEDS 100000 /* seeds needed beyond this are reported as "more than" */

ufp4_report_options ufp4_report_options_default(void);

/* Reads runs.json: an array of {"recipe": str, "seed": int, "dir": str}, or an object holding
 * such an array under "runs". Relative dirs are taken relative to the folder of runs.json.
 * *runs is malloc'ed. */
int ufp4_report_runs_load(const char *path, ufp4_report_run **runs, size_t *n);
/* The runs as `ufp4 report` takes them: one argument naming an existing *.json file is a run list
 * (ufp4_report_runs_load); otherwise each argument is [NAME=]RUN_DIR, NAME the recipe label
 * (without it config.json's "recipe") and the seed config.json's. An '=' after the first '/' is
 * part of the folder. *runs is malloc'ed. */
int ufp4_report_runs_parse(const char *const *args, size_t n_args, ufp4_report_run **runs, size_t *n);

struct ufp4_report_diag; /* parsed diagnostics.jsonl (internal) */

typedef struct {
  char recipe[512];
  long long seed;
  char dir[4096];
  char config_recipe[512]; /* canonical recipe string from config.json */
  ufp4_series train, val;  /* sorted by step; skipped steps left out of train */
  int skipped;             /* train lines marked skipped */
  int window;              /* train lines averaged for final_train */
  int rel_window;          /* common steps averaged for rel_err (0: none) */
  double final_train, final_val, rel_err, signed_gap, rel_gap;
  struct ufp4_report_diag *diag; /* NULL without diagnostics.jsonl */
} ufp4_report_run_result;

typedef struct {
  char recipe[512];
  int n_seeds;
  int is_baseline, is_control;
  ufp4_msd final_train, final_val, rel_err, signed_gap, rel_gap;
} ufp4_report_recipe;

/* What seeds_needed of a pair holds. */
enum {
  UFP4_REPORT_NEED_NONE = 0, /* no target effect, a signed-gap pair, or no valid test */
  UFP4_REPORT_NEED_OK,       /* seeds_needed is the answer */
  UFP4_REPORT_NEED_NO_SPREAD,/* the differences have sd 0: no power calculation */
  UFP4_REPORT_NEED_TOO_MANY  /* more than UFP4_REPORT_MAX_SEEDS */
};

typedef struct {
  int a, b;           /* recipe indices: row a minus column b */
  int metric;         /* 0: rel_err, 1: signed_gap */
  size_t n;           /* common seeds */
  double mean;        /* mean difference over them (NaN when n = 0) */
  int valid;          /* 1: n >= 2, and s holds the summary; 0: s's numbers are NaN */
  int significant;    /* valid && s.p < UFP4_REPORT_ALPHA */
  ufp4_paired_summary s;
  int need;           /* UFP4_REPORT_NEED_* */
  size_t seeds_needed; /* need == UFP4_REPORT_NEED_OK: seeds for the target effect */
} ufp4_report_pair;

typedef struct {
  int final_steps;
  char *baseline, *control, *title, *command, *commit; /* commit "" when not given */
  int plots;
  ufp4_report_run_result *runs;
  size_t n_runs;
  ufp4_report_recipe *recipes; /* in order of first appearance */
  size_t n_recipes;
  int baseline_idx, control_idx; /* -1 when absent */
  ufp4_report_pair *pairs; /* every ordered pair, metric 0 then 1 for each */
  size_t n_pairs;
  double target_effect; /* percentage points of rel_err; 0 = none */
  char **notes; /* warnings worth reading, e.g. a run without a baseline of its seed */
  size_t n_notes;
  int plotted;  /* set by ufp4_report_write: 1 when gnuplot made the plots */
  char plot_note[512];
} ufp4_report;

/* Reads every run folder and computes the figures and tests. A missing or malformed
 * config.json / metrics.jsonl is an error naming the file (and line); a missing baseline recipe
 * is an error; a duplicate (recipe, seed) is an error. */
int ufp4_report_build(const ufp4_report_run *runs, size_t n, const ufp4_report_options *opt, ufp4_report **out);
/* Writes report.json, report.md, report.html and plots/ into out_dir (created if needed). */
int ufp4_report_write(ufp4_report *r, const char *out_dir);
/* ufp4_report_build, then ufp4_report_write into out_dir: what `ufp4 report` and `ufp4 compare`
 * do with finished runs. *out is NULL on failure. */
int ufp4_report_make(const ufp4_report_run *runs, size_t n, const ufp4_report_options *opt, const char *out_dir,
                     ufp4_report **out);
/* The summary table: recipe, seeds, final train, final val, rel. err (mean +- std), signed gap,
 * noise floor, significance against the control; then the verdict lines and the two pair
 * matrices, compactly (cells: difference +- CI half-width, p, MDD; recipes numbered). */
void ufp4_report_print_table(const ufp4_report *r, FILE *f);
/* The pair of row a, column b on metric (0 rel_err, 1 signed_gap); NULL when there is none (a
 * baseline recipe, a == b, or an index out of range). */
const ufp4_report_pair *ufp4_report_find_pair(const ufp4_report *r, int a, int b, int metric);
void ufp4_report_free(ufp4_report *r);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
