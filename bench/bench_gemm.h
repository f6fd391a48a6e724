/* Fake-quant GEMM benchmark behind `ufp4 bench gemm`. */
#ifndef UFP4_BENCH_GEMM_H
#define UFP4_BENCH_GEMM_H

#include <stdio.h>

typedef struct {
  int reps;               /* timed repetitions; the median is reported */
  const char *json_path;  /* NULL: no JSON file */
} ufp4_bench_gemm_opts;

int ufp4_bench_gemm(const ufp4_bench_gemm_opts *o, FILE *out);

#endif
