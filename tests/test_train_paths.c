/* Paths of the run folder are never cut short: a run folder, or a path built inside one, that does
 * not fit is refused with an error naming it, instead of being truncated into another path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "train_test_util.h"
#include "training/path.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"

static const train_synth synth = {.batch = 2, .seq = 8, .vocab = 16, .seed = 1, .mul = 3, .add = 1};

/* "/tmp/ufp4_paths/" followed by 'd's up to len bytes (a single name: its length is the point). */
static char *long_path(size_t len) {
  char *p = malloc(len + 1);
  assert_non_null(p);
  const char *head = "/tmp/ufp4_paths/";
  memset(p, 'd', len);
  memcpy(p, head, strlen(head));
  p[len] = '\0';
  return p;
}

static void test_path_helper_refuses_what_does_not_fit(void **state) {
  (void)state;
  train_path p;
  char *dir = long_path(PATH_MAX);
  assert_int_equal(train_path_fmt(&p, "%s/config.json", dir), UFP4_EINVAL);
  assert_string_equal(p.s, "");
  assert_non_null(strstr(ufp4_last_error(), "/tmp/ufp4_paths/ddd"));
  assert_non_null(strstr(ufp4_last_error(), "path too long"));
  /* The longest path that fits is kept whole. */
  dir[PATH_MAX - 1 - strlen("/x")] = '\0';
  assert_int_equal(train_path_fmt(&p, "%s/x", dir), 0);
  assert_int_equal(strlen(p.s), PATH_MAX - 1);
  free(dir);
}

static void test_checkpoint_refuses_overlong_folder(void **state) {
  (void)state;
  char *dir = long_path(PATH_MAX - 4); /* DIR fits, DIR/config.json does not */
  ufp4_model_config mc;
  assert_int_equal(ufp4_checkpoint_config(dir, &mc), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "path too long"));
  float m = 0, v = 0;
  assert_int_equal(ufp4_checkpoint_load_optimizer(dir, 1, &m, &v, NULL), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "/tmp/ufp4_paths/ddd"));
  free(dir);
}

static void test_out_dir_is_set_whole_or_refused(void **state) {
  (void)state;
  ufp4_train_config c = ufp4_train_config_default();
  char *dir = long_path(sizeof c.out_dir);
  assert_int_equal(ufp4_train_set_out_dir(&c, dir), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "/tmp/ufp4_paths/ddd"));
  assert_non_null(strstr(ufp4_last_error(), "too long"));
  assert_string_equal(c.out_dir, "runs/default"); /* untouched */
  dir[sizeof c.out_dir - 1] = '\0';
  assert_int_equal(ufp4_train_set_out_dir(&c, dir), 0);
  assert_string_equal(c.out_dir, dir);
  free(dir);
}

/* A library caller that filled out_dir to the brim without a terminator is refused up front. */
static void test_train_refuses_unterminated_out_dir(void **state) {
  (void)state;
  ufp4_train_config c = train_tiny_config("unused", "fp32", &synth, 1);
  memset(c.out_dir, 'd', sizeof c.out_dir);
  const ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result r;
  assert_int_equal(ufp4_train(&c, &src, 0, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "out_dir"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path_helper_refuses_what_does_not_fit),
      cmocka_unit_test(test_checkpoint_refuses_overlong_folder),
      cmocka_unit_test(test_out_dir_is_set_whole_or_refused),
      cmocka_unit_test(test_train_refuses_unterminated_out_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
