/* ufp4_fake_quant_t (quantizing the transpose of x, written back in x's layout) against its
 * definition, ufp4_fake_quant_t_reference (transpose, the scalar reference, transpose back), bit
 * for bit: every grid x scale x rounding, without RHT and with the 16-point RHT (NVIDIA's signs,
 * random signs, none), on shapes the AVX2 column kernels take (rows a multiple of 16, columns of
 * 8) and on ones that go through the transposed copy (other shapes, other blocks, tiles, 4/6);
 * at 1 and 2 threads, and in place. Exits 77 (skip) on a CPU without AVX2/FMA or with
 * UFP4_NO_SIMD set: the two paths are then the same code. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cpu.h"
#include "quant_fill_util.h"
#include "ufp4/error.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

static void check(const ufp4_qformat *f, const float *x, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  float *yr = malloc(n * sizeof *yr), *ys = malloc(n * sizeof *ys);
  assert_non_null(yr);
  assert_non_null(ys);
  char desc[200];
  snprintf(desc, sizeof desc, "grid %s scale %s round %s block %d tile %d rht %d%s adaptive %d (%zux%zu)",
           ufp4_grid_get(f->grid)->name, ufp4_scale_name(f->scale), ufp4_round_name(f->round), f->block, f->tile2d,
           f->rht, f->rht_signs ? " signed" : "", (int)f->adaptive, rows, cols);
  if (ufp4_fake_quant_t_reference(f, x, yr, rows, cols)) fail_msg("%s: reference: %s", desc, ufp4_last_error());
  for (int t = 1; t <= 3; t++) {
    omp_set_num_threads(t < 3 ? t : 2);
    if (t < 3) {
      if (ufp4_fake_quant_t(f, x, ys, rows, cols)) fail_msg("%s: %s", desc, ufp4_last_error());
    } else { /* in place */
      memcpy(ys, x, n * sizeof *ys);
      if (ufp4_fake_quant_t(f, ys, ys, rows, cols)) fail_msg("%s: %s", desc, ufp4_last_error());
    }
    for (size_t i = 0; i < n; i++)
      if (memcmp(&yr[i], &ys[i], sizeof *ys))
        fail_msg("%s, %s: element (%zu, %zu), x = %a: reference %a, kernel %a", desc,
                 t == 1 ? "1 thread" : t == 2 ? "2 threads" : "in place", i / cols, i % cols, (double)x[i],
                 (double)yr[i], (double)ys[i]);
  }
  free(yr);
  free(ys);
}

/* x [rows x cols] whose column blocks hold fill()'s kinds of data: fill the transpose, then
 * transpose it. */
static float *make_x(size_t rows, size_t cols, const ufp4_grid *g) {
  float *t = malloc(rows * cols * sizeof *t), *x = malloc(rows * cols * sizeof *x);
  assert_non_null(t);
  assert_non_null(x);
  fill(t, cols, rows, g);
  for (size_t c = 0; c < cols; c++)
    for (size_t r = 0; r < rows; r++) x[r * cols + c] = t[c * rows + r];
  free(t);
  return x;
}

static void run_matrix(size_t rows, size_t cols, int block, int tile, int adaptive) {
  float signs[16];
  for (int g = 0; g < UFP4_GRID_COUNT; g++) {
    float *x = make_x(rows, cols, ufp4_grid_get((ufp4_grid_id)g));
    for (int s = 0; s < UFP4_SCALE_COUNT; s++)
      for (int m = 0; m < UFP4_ROUND_COUNT; m++)
        for (int variant = 0; variant < (rows % 16 ? 1 : 4); variant++) {
          /* variant 0: no RHT; 1-3: RHT 16 with no signs, NVIDIA's, random ones */
          const int rht = variant ? 16 : 0;
          ufp4_qformat f = ufp4_qformat_default();
          f.grid = (ufp4_grid_id)g;
          f.scale = (ufp4_scale_kind)s;
          f.round = (ufp4_round_mode)m;
          f.block = block;
          f.tile2d = tile;
          f.rht = rht;
          f.seed = rnd() | ((uint64_t)rnd() << 32);
          f.stream = rnd() % 5;
          if (adaptive) {
            if (f.grid != UFP4_GRID_E2M1 || f.scale != UFP4_SCALE_NVFP4) continue;
            f.adaptive = UFP4_ADAPTIVE_4OVER6;
          }
          if (variant == 2) {
            f.rht_signs = ufp4_rht_signs_nvidia16;
          } else if (variant == 3) {
            ufp4_rht_signs_random(signs, 16, f.seed);
            f.rht_signs = signs;
          }
          check(&f, x, rows, cols);
        }
    free(x);
  }
}

static void require_simd(void) {
  if (!ufp4_simd_enabled()) {
    fprintf(stderr, "test_quant_cols: no AVX2/FMA or UFP4_NO_SIMD set; nothing to compare\n");
    exit(77);
  }
}

/* The column kernels: 64 rows (4 blocks per column), 24 columns (3 groups of 8). */
static void test_in_columns(void **state) {
  (void)state;
  require_simd();
  run_matrix(64, 24, 16, 0, 0);
  run_matrix(16, 8, 16, 0, 0);
}

/* Through the transposed copy: rows not a multiple of 16, columns not of 8, another block, tiles,
 * 4/6. */
static void test_by_copy(void **state) {
  (void)state;
  require_simd();
  run_matrix(40, 24, 16, 0, 0); /* no RHT here: rht 16 needs whole blocks of 16 rows */
  run_matrix(32, 12, 16, 0, 0);
  run_matrix(32, 16, 32, 0, 0);
  run_matrix(32, 16, 16, 16, 0);
  run_matrix(32, 16, 16, 0, 1);
}

/* Shape errors name the transposed tensor, as ufp4_fake_quant would. */
static void test_errors(void **state) {
  (void)state;
  ufp4_qformat f = ufp4_qformat_default();
  float x[4] = {0};
  assert_int_not_equal(ufp4_fake_quant_t(&f, NULL, x, 2, 2), 0);
  assert_int_equal(ufp4_fake_quant_t(&f, x, x, 0, 4), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_in_columns), cmocka_unit_test(test_by_copy),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
