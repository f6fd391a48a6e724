/* Whole-file reads and crash-safe writes shared by every writer in ufp4.
 *
 * ufp4_write_file_atomic writes to a temporary "<path>.tmp.XXXXXX" in the same folder, fsyncs it,
 * renames it over `path` and fsyncs the folder: readers see the old file or the new one, never a
 * mix, and a failure (ENOSPC, EACCES, a missing folder) unlinks the temporary and leaves an
 * existing file untouched. The temporary is made 0644 before the rename (mkstemp creates it 0600).
 * Once the rename is done, a failed fsync of the folder is still reported (UFP4_EIO), though the
 * new file is then in place.
 *
 * Streaming writers that cannot hold the whole file in memory use the same steps one at a time:
 * ufp4_atomic_open, ufp4_atomic_write (any number; the fd may also be seeked and rewritten),
 * then ufp4_atomic_commit, or ufp4_atomic_abort to drop the temporary. */
#ifndef UFP4_FILEIO_H
#define UFP4_FILEIO_H

#include <stddef.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  int fd; /* -1 once committed or aborted */
  char path[4096], tmp[4112];
} ufp4_atomic_file;

int ufp4_atomic_open(ufp4_atomic_file *a, const char *path);
/* Appends at the fd's offset. On failure the caller still calls ufp4_atomic_abort. */
int ufp4_atomic_write(ufp4_atomic_file *a, const void *data, size_t size);
/* fchmod 0644, fsync, close, rename over path, fsync the folder. On failure the temporary is
 * removed; either way `a` is finished. */
int ufp4_atomic_commit(ufp4_atomic_file *a);
/* Closes and removes the temporary; a no-op on a finished `a`. */
void ufp4_atomic_abort(ufp4_atomic_file *a);

/* Writes n_parts buffers back to back. Returns 0 or UFP4_EIO naming the path and the OS error. */
int ufp4_write_parts_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t n_parts);
int ufp4_write_file_atomic(const char *path, const void *data, size_t size);
/* Reads a whole regular file of at most max_size bytes (SIZE_MAX: any size) into a malloc'ed,
 * NUL-terminated buffer; *size excludes the NUL. A larger file is UFP4_EFORMAT. */
int ufp4_read_file(const char *path, size_t max_size, char **data, size_t *size);
/* fsync of a folder, so that the entries created, renamed or removed in it survive a crash; and
 * of the folder holding `path` (after renaming something to `path`). EINVAL from file systems that
 * cannot sync folders is ignored. Returns 0 or UFP4_EIO naming the folder and the OS error. */
int ufp4_fsync_dir(const char *dir);
int ufp4_fsync_parent(const char *path);
/* Test hook: makes this thread's atomic writes (ufp4_atomic_write, ufp4_atomic_commit) fail at one
 * step, as a full disk or a failing device would; the errno named is in the message, and the
 * temporary is removed as on a real failure. Reset to UFP4_IO_FAULT_NONE by the caller. */
typedef enum {
  UFP4_IO_FAULT_NONE = 0,
  UFP4_IO_FAULT_WRITE,  /* a write stores half its bytes, then ENOSPC */
  UFP4_IO_FAULT_FSYNC,  /* fsync of the temporary reports EIO */
  UFP4_IO_FAULT_RENAME, /* rename reports EACCES */
} ufp4_io_fault;
void ufp4_io_test_fault(ufp4_io_fault f);

/* mkdir -p; 0 if it exists. */
int ufp4_mkdirs(const char *path);
/* rm -r of a folder ufp4 created (regular files and folders only; links are unlinked, not
 * followed). */
int ufp4_remove_tree(const char *path);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
