/* The version: the macros of ufp4/version.h agree with each other, with the runtime
 * ufp4_version() / ufp4_version_number(), and with the version CMake read from the header for the
 * SONAME, ufp4.pc and the CMake package (UFP4_CMAKE_VERSION, from CMakeLists.txt). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ufp4/version.h"

static void test_macros_agree(void **state) {
  (void)state;
  char buf[64];
  snprintf(buf, sizeof buf, "%d.%d.%d", UFP4_VERSION_MAJOR, UFP4_VERSION_MINOR, UFP4_VERSION_PATCH);
  assert_string_equal(UFP4_VERSION, buf);
  assert_int_equal(UFP4_VERSION_NUMBER, UFP4_VERSION_MAJOR * 10000 + UFP4_VERSION_MINOR * 100 + UFP4_VERSION_PATCH);
  /* The numbering leaves two decimal digits to MINOR and PATCH. */
  assert_true(UFP4_VERSION_MINOR < 100 && UFP4_VERSION_PATCH < 100);
#if UFP4_VERSION_NUMBER < 100
#error "UFP4_VERSION_NUMBER is not usable in #if"
#endif
}

static void test_runtime(void **state) {
  (void)state;
  assert_string_equal(ufp4_version(), UFP4_VERSION);
  assert_int_equal(ufp4_version_number(), UFP4_VERSION_NUMBER);
}

static void test_cmake_read_the_header(void **state) {
  (void)state;
  assert_string_equal(UFP4_CMAKE_VERSION, UFP4_VERSION);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_macros_agree),
      cmocka_unit_test(test_runtime),
      cmocka_unit_test(test_cmake_read_the_header),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
