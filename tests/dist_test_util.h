/* Shared by the MPI tests: finding the launcher (skip without MPI, fail under CI), the launcher
 * prefix for N ranks (run it with cli_fixture.h's cli_run), and a synthetic token shard that needs
 * no corpus. */
#ifndef UFP4_TESTS_DIST_TEST_UTIL_H
#define UFP4_TESTS_DIST_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_fixture.h"
#include "ufp4/dist.h"
#include "ufp4/shard.h"

static inline int dist_in_ci(void) {
  const char *ci = getenv("CI");
  return ci && *ci && strcmp(ci, "0") && strcmp(ci, "false");
}

/* Exits 77 (skip) when the build has no MPI or no launcher; under CI that is a failure instead,
 * since CI must run the multi-rank tests, unless the build was configured without MPI on purpose
 * (-DUFP4_MPI=OFF: the sanitizer build, whose multi-rank runs the normal build covers). */
static inline void dist_require_mpi(const char *what) {
  const char *why = NULL;
#if defined(UFP4_MPI_DISABLED)
  fprintf(stderr, "skipped: %s: this build was configured with -DUFP4_MPI=OFF\n", what);
  exit(77);
#elif defined(UFP4_MPIEXEC)
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

/* A cmocka group setup's part: finds the binary ($UFP4_CLI; without it skip, or fail under CI),
 * makes the folder `work` (a mkdtemp template) and stores it in *state for cli_fixture_teardown,
 * and writes WORK/data/{train,val}.tok, synthetic shards over a vocabulary of 64. Returns 0 or -1. */
static inline int dist_fixture_setup(void **state, char *work, const char **cli) {
  *cli = getenv("UFP4_CLI");
  if (!*cli) {
    fprintf(stderr, "%s: needs UFP4_CLI (ctest sets it)\n", dist_in_ci() ? "FAILED" : "skipped");
    exit(dist_in_ci() ? 1 : 77);
  }
  if (!mkdtemp(work)) return -1;
  *state = work;
  char path[4200];
  snprintf(path, sizeof path, "%s/data", work);
  if (ufp4_mkdirs(path)) return -1;
  snprintf(path, sizeof path, "%s/data/train.tok", work);
  if (dist_write_shard(path, 64, 60000, 1)) return -1;
  snprintf(path, sizeof path, "%s/data/val.tok", work);
  return dist_write_shard(path, 64, 8000, 2);
}

#endif
