/* Files that appear complete or not at all: written to a temp file beside the destination,
 * fsync'ed, then renamed over it (and the directory fsync'ed), so a crash or error never leaves a
 * half-written file under the final name. */
#ifndef UFP4_DATA_ATOMIC_FILE_H
#define UFP4_DATA_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
  FILE *f;
  char path[4096], tmp[4200];
} ufp4_atomic_file;

int ufp4_atomic_open(ufp4_atomic_file *a, const char *path);
int ufp4_atomic_write(ufp4_atomic_file *a, const void *data, size_t n);
/* Flushes, fsyncs and renames; on failure the temp file is removed. */
int ufp4_atomic_commit(ufp4_atomic_file *a);
void ufp4_atomic_abort(ufp4_atomic_file *a);
int ufp4_data_write_atomic(const char *path, const void *data, size_t n);

#endif
