/* Helpers shared by the data-pipeline tests: temp dirs, writing files, locating the data. */
#ifndef UFP4_TESTS_TOK_TEST_UTIL_H
#define UFP4_TESTS_TOK_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void tt_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(1);
  }
  if (n) fwrite(data, 1, n, f);
  fclose(f);
}

static inline void tt_write_str(const char *path, const char *s) { tt_write(path, s, strlen(s)); }

/* A fresh directory under $TMPDIR (or /tmp), removed by tt_rmdir. */
static inline void tt_mkdtemp(char *out, size_t cap, const char *tag) {
  const char *base = getenv("TMPDIR");
  snprintf(out, cap, "%s/ufp4-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(1);
  }
}

static inline void tt_rmdir(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

/* $UFP4_SOURCE_DIR/<rel>, or ./<rel>. */
static inline void tt_source_path(char *out, size_t cap, const char *rel) {
  const char *src = getenv("UFP4_SOURCE_DIR");
  snprintf(out, cap, "%s/%s", src && *src ? src : ".", rel);
}

static inline int tt_exists(const char *p) {
  struct stat st;
  return !stat(p, &st);
}

#endif
