/* core/json_file.h: reading one JSON object from a file. A valid object is read; every other
 * content (not JSON, JSON that is not an object, two documents, a torn tail, an embedded NUL,
 * an empty file, a file over the size limit) is UFP4_EFORMAT naming the file, with the caller's
 * hint; a missing file names what it should have held, or gives the read's own message. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_file.h"
#include "ufp4/error.h"

static char dir[] = "/tmp/ufp4_json_file_XXXXXX";
static char path[256];

static void put(const char *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void test_object_is_read(void **state) {
  (void)state;
  const char text[] = " {\"a\": 1, \"b\": [2, 3]}\n\t ";
  put(text, sizeof text - 1);
  cJSON *j = (cJSON *)1;
  assert_int_equal(ufp4_json_read_object(path, 1 << 20, "a test file", NULL, &j), 0);
  assert_true(cJSON_IsObject(j));
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "a")->valueint, 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "b")), 2);
  cJSON_Delete(j);
}

static void test_not_an_object(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t n;
  } bad[] = {
      {"[1, 2]", 6},          {"\"text\"", 6},        {"42", 2},   {"null", 4}, {"", 0},
      {"{\"a\": 1", 7},       {"{abc}", 5},           {"{} x", 4}, /* a second value */
      {"{}\n{\"a\"", 8},      /* a torn second document */
      {"{}\0{\"a\":1}", 10},  /* a NUL inside the file, then more */
  };
  char want[512];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    put(bad[i].bytes, bad[i].n);
    cJSON *j = (cJSON *)1;
    print_message("case %zu\n", i);
    assert_int_equal(ufp4_json_read_object(path, 1 << 20, NULL, "; the folder is damaged", &j), UFP4_EFORMAT);
    assert_null(j);
    snprintf(want, sizeof want, "%s: not a JSON object; the folder is damaged", path);
    assert_string_equal(ufp4_last_error(), want);
    assert_int_equal(ufp4_json_read_object(path, 1 << 20, NULL, NULL, &j), UFP4_EFORMAT);
    snprintf(want, sizeof want, "%s: not a JSON object", path);
    assert_string_equal(ufp4_last_error(), want);
  }
}

static void test_too_large(void **state) {
  (void)state;
  put("{\"a\": 12345}", 12);
  cJSON *j = (cJSON *)1;
  assert_int_equal(ufp4_json_read_object(path, 11, NULL, NULL, &j), UFP4_EFORMAT);
  assert_null(j);
  assert_non_null(strstr(ufp4_last_error(), path));
  assert_int_equal(ufp4_json_read_object(path, 12, NULL, NULL, &j), 0);
  cJSON_Delete(j);
}

static void test_missing_file(void **state) {
  (void)state;
  char missing[300], want[400];
  snprintf(missing, sizeof missing, "%s/none.json", dir);
  cJSON *j = (cJSON *)1;
  int rc = ufp4_json_read_object(missing, 1 << 20, "the run configuration", NULL, &j);
  assert_true(rc < 0 && rc != UFP4_EFORMAT);
  assert_null(j);
  snprintf(want, sizeof want, "%s: cannot read the run configuration (", missing);
  assert_memory_equal(ufp4_last_error(), want, strlen(want));
  /* Without `what`, the read's own message, which names the file too. */
  assert_int_equal(ufp4_json_read_object(missing, 1 << 20, NULL, NULL, &j), rc);
  assert_non_null(strstr(ufp4_last_error(), missing));
  assert_null(strstr(ufp4_last_error(), "cannot read the"));
  /* ufp4_read_file_as alone: the same message, and the text of a file that exists. */
  char *text = NULL;
  size_t size = 0;
  assert_int_equal(ufp4_read_file_as(missing, 100, "a list", &text, &size), rc);
  snprintf(want, sizeof want, "%s: cannot read a list (", missing);
  assert_memory_equal(ufp4_last_error(), want, strlen(want));
  put("abc", 3);
  assert_int_equal(ufp4_read_file_as(path, 100, "a list", &text, &size), 0);
  assert_int_equal(size, 3);
  assert_string_equal(text, "abc");
  free(text);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/file.json", dir);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_object_is_read),
      cmocka_unit_test(test_not_an_object),
      cmocka_unit_test(test_too_large),
      cmocka_unit_test(test_missing_file),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(path);
  rmdir(dir);
  return failed;
}
