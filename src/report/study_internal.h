/* What study.c (the loss analysis) and study_h3.c (the drift analysis) share. */
#ifndef UFP4_REPORT_STUDY_INTERNAL_H
#define UFP4_REPORT_STUDY_INTERNAL_H

#include <stddef.h>

#include "ufp4/study.h"

/* A test over the finite values of v[0..n) (a seed without the runs of a comparison is not in it):
 * 95% interval, MDD at alpha and power; invalid with NaN figures when fewer than 2 remain. */
void study_summarize(const double *v, size_t n, double alpha, double power, ufp4_study_test *t);
/* An invalid test with NaN figures: one that was not computed. */
void study_test_none(ufp4_study_test *t);
/* Holm's step-down at alpha over tests[0..n) (n <= 64): every p_holm is first NaN and every
 * rejected 0 (not reached); then from the smallest p (an invalid test has p = 1) each is compared
 * with alpha / (n - i) until one fails; a test compared gets mdd_holm, study_mdd_at that level. */
void study_holm(ufp4_study_test **tests, int n, double alpha, double power);
/* The MDD of t's per-seed values (its sd and n) at `level` and `power`: NaN for an invalid test or a
 * level that is not a number, 0 for sd 0 (as ufp4_paired_summarize's mdd). */
double study_mdd_at(const ufp4_study_test *t, double level, double power);
/* The least-squares slope of y against x over n points; NaN when the x do not vary or a y is not
 * finite. */
double study_ls_slope(const double *x, const double *y, int n);
/* H3 and its secondary family from o->drift_dir (ufp4/study.h), over r's seeds. */
int study_h3(const ufp4_study_options *o, ufp4_study_result *r);

#endif
