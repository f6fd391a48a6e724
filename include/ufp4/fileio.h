/* Whole-file reads and crash-safe writes shared by every writer in ufp4.
 *
 * ufp4_write_file_atomic writes to a temporary "<path>.tmp.XXXXXX" in the same folder, fsyncs it,
 * renames it over `path` and fsyncs the folder: readers see the old file or the new one, never a
 * mix, and a failure (ENOSPC, EACCES, a missing folder) unlinks the temporary and leaves an
 * existing file untouched. */
#ifndef UFP4_FILEIO_H
#define UFP4_FILEIO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes n_parts buffers back to back. Returns 0 or UFP4_EIO naming the path and the OS error. */
int ufp4_write_parts_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t n_parts);
int ufp4_write_file_atomic(const char *path, const void *data, size_t size);
/* Reads a whole regular file of at most max_size bytes into a malloc'ed, NUL-terminated buffer. */
int ufp4_read_file_limited(const char *path, size_t max_size, char **data, size_t *size);
/* mkdir -p; 0 if it exists. */
int ufp4_mkdirs(const char *path);
/* rm -r of a folder ufp4 created (regular files and folders only; links are unlinked, not
 * followed). */
int ufp4_remove_tree(const char *path);

#ifdef __cplusplus
}
#endif
#endif
