/* Per-kernel thread scaling behind `ufp4 bench kernels`. */
#ifndef UFP4_BENCH_KERNELS_H
#define UFP4_BENCH_KERNELS_H

#include <stdio.h>

typedef struct {
  int reps;              /* timed batches per thread count; the median is reported */
  int threads;           /* the thread count compared with 1 (default: the OpenMP maximum, at least 2) */
  int shapes;            /* bit 1: the study's 16x64 shapes, bit 2: 4x128's */
  const char *json_path; /* NULL: no JSON file */
} ufp4_bench_kernels_opts;

/* Times every kernel of a training step, one call of the sizes a step makes, at 1 thread and at
 * o->threads, alternating, and prints the per-call medians and the speedup. Returns 0 or a
 * negative ufp4_status (message in ufp4_last_error()). */
int ufp4_bench_kernels(const ufp4_bench_kernels_opts *o, FILE *out);

#endif
