/* Shared by the end-to-end CLI tests (and, for cli_run, the MPI tests): running a command with its
 * output captured, and a work folder holding the SOTU corpus prepared as byte-level shards.
 * Everything is static inline, so a test may include this and use only part of it. */
#ifndef UFP4_TESTS_CLI_FIXTURE_H
#define UFP4_TESTS_CLI_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ufp4/fileio.h"

/* Runs a shell command; returns its exit status (-1 for a signal), with the first size - 1 bytes
 * of stdout and stderr in out. The rest of the output is read and dropped, so a chatty command
 * never blocks on a full pipe (and dies of SIGPIPE) after the buffer is full. */
static inline int cli_run(char *out, size_t size, const char *fmt, ...) {
  char cmd[8192], full[8400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  while (fread(full, 1, sizeof full, p) > 0) {
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A cmocka group setup's part: finds the binary ($UFP4_CLI) and the corpus, exiting 77 (skip)
 * without them, makes the folder `work` (a mkdtemp template), stores it in *state for
 * cli_fixture_teardown, and prepares WORK/data as byte-level shards. Returns 0 or -1. */
static inline int cli_fixture_setup(void **state, char *work, const char **cli) {
  *cli = getenv("UFP4_CLI");
  const char *src = getenv("UFP4_SOURCE_DIR");
  char corpus[4096];
  snprintf(corpus, sizeof corpus, "%s/data/raw/sotu", src ? src : ".");
  struct stat st;
  if (!*cli || stat(corpus, &st)) {
    fprintf(stderr, "skipped: needs UFP4_CLI and the SOTU corpus in %s (make test fetches it)\n", corpus);
    exit(77);
  }
  if (!mkdtemp(work)) return -1;
  *state = work;
  static char out[1 << 16];
  return cli_run(out, sizeof out, "%s prepare --corpus %s --tokenizer bytes --out %s/data", *cli, corpus, work) ? -1 : 0;
}

/* A cmocka group teardown: removes the work folder the setup stored in *state. */
static inline int cli_fixture_teardown(void **state) {
  if (*state) ufp4_remove_tree(*state);
  return 0;
}

#endif
