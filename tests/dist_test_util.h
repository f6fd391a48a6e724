/* Shared by the MPI tests: finding the launcher (skip without MPI, fail under CI), launching a
 * program on N ranks, and a synthetic token shard that needs no corpus. */
#ifndef UFP4_TESTS_DIST_TEST_UTIL_H
#define UFP4_TESTS_DIST_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ufp4/dist.h"
#include "ufp4/shard.h"

static inline int dist_in_ci(void) {
  const char *ci = getenv("CI");
  return ci && *ci && strcmp(ci, "0") && strcmp(ci, "false");
}

/* Exits 77 (skip) when the build has no MPI or no launcher; under CI that is a failure instead,
 * since CI must run the multi-rank tests. */
static inline void dist_require_mpi(const char *what) {
  const char *why = NULL;
#ifdef UFP4_MPIEXEC
  if (!ufp4_dist_have_mpi()) why = "this build has no MPI (UFP4_HAVE_MPI)";
  else if (access(UFP4_MPIEXEC, X_OK)) why = "the launcher " UFP4_MPIEXEC " is not executable";
#else
  why = "this build has no MPI (configure with -DUFP4_MPI=ON and libopenmpi-dev installed)";
#endif
  if (!why) return;
  if (dist_in_ci()) {
    fprintf(stderr, "FAILED: %s needs MPI under CI, but %s\n", what, why);
    exit(1);
  }
  fprintf(stderr, "skipped: %s: %s\n", what, why);
  exit(77);
}

/* "mpirun <flags> -np N": root needs --allow-run-as-root, more ranks than cores --oversubscribe. */
static inline void dist_launcher(char *out, size_t size, int np) {
#ifdef UFP4_MPIEXEC
  snprintf(out, size, "%s --allow-run-as-root --oversubscribe -np %d", UFP4_MPIEXEC, np);
#else
  snprintf(out, size, "false -np %d", np);
#endif
}

/* Runs a shell command; exit status (-1 for a signal), with stdout and stderr in out. */
static inline int dist_run(char *out, size_t size, const char *fmt, ...) {
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

/* A learnable synthetic stream: token t+1 = (3 t + 1 + noise) mod vocab, noise in {0, 1, 2} from a
 * fixed LCG, so that losses fall well below ln(vocab) within a few dozen steps. */
static inline int dist_write_shard(const char *path, uint32_t vocab, size_t n, uint64_t seed) {
  ufp4_shard_info info = {.tokenizer_id = 2, .vocab_size = vocab};
  ufp4_shard_writer *w;
  if (ufp4_shard_writer_open(path, &info, &w)) return -1;
  uint32_t *ids = malloc(n * sizeof *ids);
  if (!ids) {
    ufp4_shard_writer_abort(w);
    return -1;
  }
  uint64_t s = seed * 2654435761u + 1;
  uint32_t t = 0;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = (3 * t + 1 + (uint32_t)(s >> 62) % 3) % vocab;
    ids[i] = t;
  }
  int rc = ufp4_shard_writer_append(w, ids, n);
  free(ids);
  if (rc) {
    ufp4_shard_writer_abort(w);
    return -1;
  }
  return ufp4_shard_writer_commit(w, 1) ? -1 : 0;
}

#endif
