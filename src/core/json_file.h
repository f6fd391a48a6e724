/* Reading one JSON document from a file, for every reader of ufp4's own JSON files (config.json,
 * run.json, drift.json, a run list, Hugging Face config.json). Internal to the library and the CLI.
 *
 * Each error names the file. With `what` set ("the run configuration"), a read failure says
 * "PATH: cannot read WHAT (the OS error)"; with NULL it is ufp4_read_file's own message. */
#ifndef UFP4_CORE_JSON_FILE_H
#define UFP4_CORE_JSON_FILE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Reads a whole file of at most max_size bytes (ufp4_read_file) into a NUL-terminated buffer. */
int ufp4_read_file_as(const char *path, size_t max_size, const char *what, char **text, size_t *size);

/* Reads PATH and parses it as a JSON object into *out (free with cJSON_Delete). A file that is not
 * JSON, holds more than one JSON value, or holds JSON that is not an object, is UFP4_EFORMAT "PATH: not a JSON object" followed by
 * `hint` (NULL: nothing), e.g. "; the run folder is damaged". On failure *out is NULL. */
int ufp4_json_read_object(const char *path, size_t max_size, const char *what, const char *hint, cJSON **out);

#endif
