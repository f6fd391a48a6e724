/* Quantizer throughput benchmark behind `ufp4 bench quant`. */
#ifndef UFP4_BENCH_QUANT_H
#define UFP4_BENCH_QUANT_H

#include <stddef.h>
#include <stdio.h>

#define UFP4_BENCH_MAX_THREADS 16

typedef struct {
  size_t rows, cols;
  int reps;                                 /* timed repetitions; the median is reported */
  int n_threads;                            /* entries of threads[] */
  int threads[UFP4_BENCH_MAX_THREADS];      /* OpenMP thread counts to run at */
  const char *json_path;                    /* NULL: no JSON file */
} ufp4_bench_quant_opts;

/* Runs the benchmark, prints its table and ratios to `out`, and writes the JSON file if asked.
 * Returns 0 or a negative ufp4_status (message in ufp4_last_error()). */
int ufp4_bench_quant(const ufp4_bench_quant_opts *o, FILE *out);

#endif
