/* Helpers shared by the fuzz targets: parsers that only take a path get the input through an
 * anonymous in-memory file (memfd), named by its /proc/self/fd link, so no disk is touched and
 * parallel fuzzers cannot collide. */
#ifndef UFP4_FUZZ_UTIL_H
#define UFP4_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
  int fd;
  char path[64];
} fuzz_file;

/* Aborts on setup failure: that is the harness, not the parser, and must not pass silently. */
static inline void fuzz_file_make(fuzz_file *f, const uint8_t *data, size_t size) {
  f->fd = memfd_create("ufp4-fuzz", 0);
  if (f->fd < 0) abort();
  for (size_t done = 0; done < size;) {
    ssize_t w = write(f->fd, data + done, size - done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
  snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void fuzz_file_drop(fuzz_file *f) {
  close(f->fd);
  f->fd = -1;
}

/* A failed parse must leave a message naming the input: the "clear error" half of the contract. */
#include <string.h>
#include "ufp4/error.h"
static inline void fuzz_check_error(int rc, const char *name) {
  if (rc >= 0) return;
  const char *msg = ufp4_last_error();
  if (getenv("UFP4_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", msg ? msg : "(null)");
  if (!msg || !strstr(msg, name)) {
    fprintf(stderr, "error message does not name the input %s: %s\n", name, msg ? msg : "(null)");
    abort();
  }
}

#endif
