/* Internal parts of the parity kit (ufp4/golden.h): its formats and its input tensors. */
#ifndef UFP4_PARITY_GOLDEN_INTERNAL_H
#define UFP4_PARITY_GOLDEN_INTERNAL_H

#include <stddef.h>

#include "ufp4/golden.h"

/* One input tensor of the kit: rows x cols float32, filled from fixed Philox seeds and constants
 * only, so every build writes the same bytes. cols is 64 for all of them, a multiple of every
 * block (16, 32), tile (16) and RHT size (16, 64) of the formats; rows a multiple of 16. */
typedef struct {
  const char *name; /* file stem under inputs/ */
  const char *what; /* one line for the manifest */
  size_t rows, cols;
  void (*fill)(float *x, size_t rows, size_t cols);
} golden_input;

const golden_input *golden_inputs(size_t *n);

/* "none", "random" or "nvidia" for ufp4_golden_format.rht_signs. */
const char *golden_signs_name(int kind);
/* The `ufp4 quantize` flags that reproduce the format, e.g. "--grid e2m1 --block 16 --scale fp32
 * --round rne --rht 0 --seed 2718 --stream 3". */
void golden_quantize_args(const ufp4_golden_format *gf, char *buf, size_t size);

#endif
