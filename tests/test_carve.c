/* The model's block carving (src/model/carve.h): one list sizes a block and carves it, so the
 * arrays tile the block exactly, and a size that overflows size_t is noticed, not wrapped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "model/carve.h"

typedef struct {
  float *a, *b, *c;
} three;

/* A layout: a [n, 3], b [1], c [n, n]. */
static void layout(three *t, carver *cv, size_t n) {
  t->a = carve(cv, n, 3);
  t->b = carve(cv, 1, 1);
  t->c = carve(cv, n, n);
}

static void test_counts_then_carves(void **state) {
  (void)state;
  three t;
  carver count = carver_counting(sizeof(float));
  layout(&t, &count, 5);
  assert_int_equal(count.overflow, 0);
  assert_int_equal(count.count, 5 * 3 + 1 + 5 * 5);
  assert_null(t.a);
  float *block = malloc(count.count * sizeof(float));
  carver on = carver_on(block, sizeof(float));
  layout(&t, &on, 5);
  assert_ptr_equal(t.a, block);
  assert_ptr_equal(t.b, block + 15);
  assert_ptr_equal(t.c, block + 16);
  assert_int_equal(on.count, count.count); /* the last array ends at the block's end */
  free(block);
}

static void test_overflow_is_noticed(void **state) {
  (void)state;
  three t;
  carver count = carver_counting(sizeof(float));
  layout(&t, &count, SIZE_MAX / 2);
  assert_int_equal(count.overflow, 1);
  /* Elements that fit size_t but whose bytes do not. */
  carver bytes = carver_counting(sizeof(double));
  carve(&bytes, SIZE_MAX / sizeof(double) + 1, 1);
  assert_int_equal(bytes.overflow, 1);
  carver fits = carver_counting(sizeof(double));
  carve(&fits, SIZE_MAX / sizeof(double), 1);
  assert_int_equal(fits.overflow, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_counts_then_carves),
                                     cmocka_unit_test(test_overflow_is_noticed)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
