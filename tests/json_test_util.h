/* Tests that read a JSON file the code under test wrote: parse it or fail the test. */
#ifndef UFP4_JSON_TEST_UTIL_H
#define UFP4_JSON_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "ufp4/fileio.h"

/* Reads the file at the path printf(fmt, arg) gives and parses it; fails the test when it cannot. */
static inline cJSON *load_json(const char *fmt, const char *arg) {
  char path[4096], *text;
  size_t n;
  snprintf(path, sizeof path, fmt, arg);
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &n), 0);
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  return j;
}

#endif
