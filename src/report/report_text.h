/* Shared wording of report.md, report.html and the printed table (not a public API). */
#ifndef UFP4_REPORT_TEXT_H
#define UFP4_REPORT_TEXT_H

#include "report/report_internal.h"

typedef struct {
  char seeds[16], train[64], val[64], rel[64], gap[64], relgap[64], floor[64], sig[128];
} rpt_cells;

/* The pair of `recipe` minus the control on `metric` (0 rel_err, 1 signed_gap); NULL if none. */
const ufp4_report_pair *rpt_control_test(const ufp4_report *r, int recipe, int metric);
/* The summary-table cells of recipe i. */
void rpt_recipe_cells(const ufp4_report *r, size_t i, rpt_cells *c);
int rpt_max_seeds(const ufp4_report *r);

typedef struct {
  char train[32], val[32], rel[32], gap[32];
} rpt_run_cells;
/* The per-run table cells of run x. */
void rpt_run_cells_fill(const ufp4_report_run_result *x, rpt_run_cells *c);

/* The parts of one matrix cell, in the metric's display unit (rel_err in percentage points,
 * signed gap in nats). No part ever holds a NaN printed as a number: what cannot be given is
 * said in words (ci) or left empty (p, mdd, need). */
typedef struct {
  char diff[32]; /* mean difference; "n/a" without a common seed */
  char ci[80];   /* "[lo, hi]", or why there is none ("no CI: 1 common seed") */
  char lo[32], hi[32]; /* the interval's ends; empty without one */
  char p[32];    /* "p = 0.012" */
  char mdd[48];  /* "MDD 0.21" */
  char need[64]; /* "12 seeds for 0.1 pp" (target effect, rel_err only) */
} rpt_pair_cells;
void rpt_pair_cells_fill(const ufp4_report *r, const ufp4_report_pair *p, rpt_pair_cells *c);
/* "percentage points" / "nats", and a heading naming the metric and its unit. */
const char *rpt_metric_unit(int metric);
/* The matrix heading of metric: what a cell holds. */
void rpt_matrix_heading(const ufp4_report *r, int metric, char *out, size_t size);
/* Is recipe i a row / column of the matrices (every recipe but the baseline)? */
int rpt_in_matrix(const ufp4_report *r, size_t i);

/* The verdict: one sentence per significant pair (each unordered pair once, written so that the
 * difference is positive) and metric; or, when none is, a plain statement with the range of the
 * MDDs; then, with a target effect, the seeds it needs. Each sentence is passed to emit, with
 * strong = 1 for a significant pair. Returns the number of significant sentences. */
size_t rpt_verdict(const ufp4_report *r, void (*emit)(void *ctx, const char *sentence, int strong),
                   void *ctx);

/* Why the paired-gap plot is missing, as a sentence. */
void rpt_no_lead_plot(const ufp4_report *r, char *out, size_t size);

#endif
