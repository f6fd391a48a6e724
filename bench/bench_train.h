/* Training-step benchmark behind `ufp4 bench train`. */
#ifndef UFP4_BENCH_TRAIN_H
#define UFP4_BENCH_TRAIN_H

#include <stddef.h>
#include <stdio.h>

#include "ufp4/model.h"

#define UFP4_BENCH_MAX_RECIPES 8
#define UFP4_BENCH_N_CONFIGS 6

typedef struct {
  int steps;            /* timed steps; medians are reported */
  int warmup;           /* untimed steps first */
  int configs;          /* bit i: config i of ufp4_bench_train_config */
  int n_recipes;
  const char *recipes[UFP4_BENCH_MAX_RECIPES];
  int rss;              /* 1: each (config, recipe) in a fresh child process, with its peak RSS */
  const char *json_path;
} ufp4_bench_train_opts;

/* One (config, recipe) measurement: medians over the timed steps, in seconds. */
typedef struct {
  double step, forward, backward, optimizer, prepare, gemm, attention, head;
  double loss;          /* loss of the last step (a sanity figure) */
  long maxrss_kb;       /* peak RSS of the measuring process, 0 when not measured */
  size_t n_params, activation_bytes, scratch_bytes;
} ufp4_bench_train_result;

/* Benchmark configuration `index` (0 .. UFP4_BENCH_N_CONFIGS-1; 0: llm.c's GPT-2 small-ish, 1: vocabulary
 * 4096, 2: the same with MoE MLPs at equal active parameters, 3-5: the small deep models of the study),
 * with its batch B and sequence length T. */
void ufp4_bench_train_config(int index, ufp4_model_config *c, int *B, int *T, const char **name);

/* Theoretical training memory in bytes: parameters, gradients and two AdamW moments (4 floats per
 * parameter) plus the given activation bytes. */
size_t ufp4_bench_train_theory_bytes(size_t n_params, size_t activation_bytes);

/* Measures one (config, recipe) in this process. */
int ufp4_bench_train_one(int config, const char *recipe, int warmup, int steps, ufp4_bench_train_result *r);

/* Runs the benchmark, prints its tables to `out`, writes the JSON file if asked. self_exe is the
 * path of the ufp4 binary, re-executed as `ufp4 bench train-child` for the RSS measurement. */
int ufp4_bench_train(const ufp4_bench_train_opts *o, const char *self_exe, FILE *out);

/* `ufp4 bench train-child CONFIG RECIPE WARMUP STEPS`: one measurement, printed as one line. */
int ufp4_bench_train_child(int argc, char **argv);

#endif
