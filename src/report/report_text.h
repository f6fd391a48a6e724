/* Shared wording of report.md and report.html (not a public API). */
#ifndef UFP4_REPORT_TEXT_H
#define UFP4_REPORT_TEXT_H

#include "report/report_internal.h"

typedef struct {
  char seeds[16], train[64], val[64], rel[64], gap[64], relgap[64], floor[64], sig[128];
} rpt_cells;

/* The test of `recipe` against the control on `metric` (0 rel_err, 1 signed_gap); NULL if none. */
const ufp4_report_test *rpt_control_test(const ufp4_report *r, int recipe, int metric);
/* One sentence: the pair, metric, mean difference, t, df, p and the verdict at p < 0.05. */
void rpt_test_sentence(const ufp4_report *r, const ufp4_report_test *t, char *out, size_t size);
/* The summary-table cells of recipe i. */
void rpt_recipe_cells(const ufp4_report *r, size_t i, rpt_cells *c);
int rpt_max_seeds(const ufp4_report *r);

typedef struct {
  char train[32], val[32], rel[32], gap[32];
} rpt_run_cells;
/* The per-run table cells of run x. */
void rpt_run_cells_fill(const ufp4_report_run_result *x, rpt_run_cells *c);

#endif
