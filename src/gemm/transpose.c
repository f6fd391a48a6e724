#include <stddef.h>

#include "ufp4/linear.h"

/* Tiles keep both the read and the write side within a few cache lines. */
#define TILE 32

void ufp4_transpose(const float *src, float *dst, size_t rows, size_t cols) {
  const long long row_tiles = (long long)((rows + TILE - 1) / TILE);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (long long rt = 0; rt < row_tiles; rt++) {
    size_t r0 = (size_t)rt * TILE, r1 = r0 + TILE < rows ? r0 + TILE : rows;
    for (size_t c0 = 0; c0 < cols; c0 += TILE) {
      size_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
      for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) dst[c * rows + r] = src[r * cols + c];
    }
  }
}
