/* One JSON document from a file (json_file.h). */
#include "core/json_file.h"

#include <stdio.h>
#include <stdlib.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"

int ufp4_read_file_as(const char *path, size_t max_size, const char *what, char **text, size_t *size) {
  int rc = ufp4_read_file(path, max_size, text, size);
  if (rc && what) {
    char why[512];
    snprintf(why, sizeof why, "%s", ufp4_last_error()); /* ufp4_fail overwrites it */
    return ufp4_fail(rc, "%s: cannot read %s (%s)", path, what, why);
  }
  return rc;
}

int ufp4_json_read_object(const char *path, size_t max_size, const char *what, const char *hint, cJSON **out) {
  *out = NULL;
  char *text;
  size_t size;
  int rc = ufp4_read_file_as(path, max_size, what, &text, &size);
  if (rc) return rc;
  /* Strict: only whitespace may follow the object, so a file with two documents or a torn tail
   * ("{...}\n{..." from an interrupted writer) is not read as its first part. cJSON looks for the
   * terminating NUL inside the length, hence size + 1 (ufp4_read_file adds it); it skips NULs as
   * whitespace, so a NUL inside the file followed by more text is refused too. */
  cJSON *j = cJSON_ParseWithLengthOpts(text, size + 1, NULL, 1);
  free(text);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return ufp4_fail(UFP4_EFORMAT, "%s: not a JSON object%s", path, hint ? hint : "");
  }
  *out = j;
  return 0;
}
