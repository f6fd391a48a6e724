/* ufp4_bias_measure (bias_table.h), called directly: its rows are ufp4_measure_tensor and
 * ufp4_chain_simulate of each grid, raw then rotated, bit for bit; the rotated row's dSQNR is
 * against the raw row of the same grid; a format the quantizer rejects fails cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ufp4/bias_table.h"
#include "ufp4/error.h"
#include "ufp4/rht.h"
#include "ufp4/synth.h"

enum { ROWS = 32, COLS = 64, LAYERS = 3 };

static float *student_t_input(void) {
  float *x = malloc(sizeof(float) * ROWS * COLS);
  ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_STUDENT_T, 9);
  assert_non_null(x);
  assert_int_equal(ufp4_synth_fill(&s, x, ROWS * COLS), 0);
  return x;
}

static void test_rows_are_the_measures(void **state) {
  (void)state;
  float *x = student_t_input(), signs[UFP4_RHT_MAX];
  ufp4_rht_signs_random(signs, 16, 5);
  const ufp4_grid_id grids[] = {UFP4_GRID_INT4, UFP4_GRID_E2M1};
  ufp4_bias_spec s = {
      .fmt = ufp4_qformat_default(), .grids = grids, .n_grids = 2, .layers = LAYERS};
  s.fmt.seed = 5;
  s.fmt.rht = 16;
  s.fmt.rht_signs = signs;
  ufp4_bias_table t;
  assert_int_equal(ufp4_bias_measure(&s, x, ROWS, COLS, &t), 0);
  assert_int_equal(t.n_rows, 4);
  assert_int_equal(t.layers, LAYERS);
  for (int i = 0; i < 4; i++) {
    const ufp4_bias_row *r = &t.rows[i];
    ufp4_qformat f = s.fmt;
    f.grid = grids[i / 2];
    f.rht = i % 2 ? 16 : 0;
    f.rht_signs = i % 2 ? signs : NULL;
    assert_int_equal(r->grid, f.grid);
    assert_int_equal(r->rht, f.rht);
    ufp4_qmeasures m;
    ufp4_chain_layer chain[LAYERS];
    assert_int_equal(ufp4_measure_tensor(&f, x, ROWS, COLS, &m), 0);
    assert_int_equal(ufp4_chain_simulate(&f, x, ROWS, COLS, LAYERS, 5, chain), 0);
    assert_memory_equal(&m, &r->m, sizeof m);
    assert_non_null(r->chain);
    assert_memory_equal(chain, r->chain, sizeof chain);
    double want = i % 2 ? ufp4_delta_sqnr_db(t.rows[i - 1].m.nmse, m.nmse) : 0.0;
    assert_memory_equal(&want, &r->dsqnr, sizeof want);
  }
  ufp4_bias_table_free(&t);
  free(x);
}

static void test_raw_only_without_chain(void **state) {
  (void)state;
  float *x = student_t_input();
  const ufp4_grid_id grids[] = {UFP4_GRID_E1M2, UFP4_GRID_E2M1, UFP4_GRID_INT4};
  ufp4_bias_spec s = {.fmt = ufp4_qformat_default(), .grids = grids, .n_grids = 3};
  ufp4_bias_table t;
  assert_int_equal(ufp4_bias_measure(&s, x, ROWS, COLS, &t), 0);
  assert_int_equal(t.n_rows, 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(t.rows[i].grid, grids[i]);
    assert_int_equal(t.rows[i].rht, 0);
    assert_null(t.rows[i].chain);
    assert_true(t.rows[i].m.n == ROWS * COLS);
  }
  ufp4_bias_table_free(&t);
  ufp4_bias_table_free(&t); /* a freed table is zeroed: freeing it again is harmless */
  free(x);
}

static void test_rejected_format_fails(void **state) {
  (void)state;
  float *x = student_t_input();
  const ufp4_grid_id grids[] = {UFP4_GRID_E2M1};
  ufp4_bias_spec s = {.fmt = ufp4_qformat_default(), .grids = grids, .n_grids = 1, .layers = 2};
  s.fmt.block = 0;
  ufp4_bias_table t;
  assert_int_not_equal(ufp4_bias_measure(&s, x, ROWS, COLS, &t), 0);
  assert_string_not_equal(ufp4_last_error(), "no error recorded");
  ufp4_bias_table_free(&t);
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_are_the_measures),
      cmocka_unit_test(test_raw_only_without_chain),
      cmocka_unit_test(test_rejected_format_fails),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
