/* Shared by the end-to-end CLI tests: running the ufp4 binary, and a work folder holding the SOTU
 * corpus prepared as byte-level shards. */
#ifndef UFP4_TESTS_CLI_FIXTURE_H
#define UFP4_TESTS_CLI_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Runs a shell command; returns its exit status, with stdout and stderr in out. */
static int cli_run(char *out, size_t size, const char *fmt, ...) {
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
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Finds the binary ($UFP4_CLI) and the corpus, exiting 77 (skip) without them, makes the folder
 * `work` (a mkdtemp template) and prepares WORK/data as byte-level shards. Returns 0 or -1. */
static int cli_fixture_setup(char *work, const char **cli) {
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
  static char out[1 << 16];
  return cli_run(out, sizeof out, "%s prepare --corpus %s --tokenizer bytes --out %s/data", *cli, corpus, work) ? -1 : 0;
}

#endif
