/* The quantize-while-packing bound behind `ufp4 bench quant`'s last table (bench_strips.c). */
#ifndef UFP4_BENCH_STRIPS_H
#define UFP4_BENCH_STRIPS_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* Prints the table (median of reps, one thread) to out and appends one object per row to arr
 * (which may be NULL). Restores the thread count. Returns 0 or a negative ufp4_status. */
int ufp4_bench_quant_strips(int reps, FILE *out, cJSON *arr);

#endif
