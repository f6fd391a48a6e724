/* The run sharing over MPI ranks now lives in the library (report/run_share.h); these names stay
 * for the commands that join a launch themselves (`ufp4 train`). */
#ifndef UFP4_CLI_RUN_SHARE_H
#define UFP4_CLI_RUN_SHARE_H

#include "cli/args.h"
#include "report/run_share.h"
#include "ufp4/dist.h"

typedef ufp4_run_share cli_run_share;

static inline int cli_run_share_begin(cli_run_share *s, int threads) {
  return ufp4_run_share_begin(s, threads);
}
static inline void cli_run_share_end(cli_run_share *s) { ufp4_run_share_end(s); }

/* Ends a command whose library call shared its runs over the ranks (compare, sweep); returns rc.
 * Rank 0 reports a failure, which every rank has agreed, before any rank may exit: the first rank
 * to exit non-zero makes mpirun abort the job, which would kill a rank 0 still printing. So rank 0
 * prints, then every rank meets at a barrier (Open MPI's MPI_Finalize also waits for every rank,
 * but the MPI standard does not promise it), then MPI ends. */
static inline int cli_ranks_end(const char *cmd, int rc, int rank) {
  if (rc && rank == 0) cli_error(cmd, NULL);
  ufp4_dist *d;
  if (rc && ufp4_dist_launched_ranks() > 1 && !ufp4_dist_init(&d)) (void)ufp4_dist_barrier(d);
  ufp4_dist_finalize(); /* this process makes no other collective call */
  return rc;
}

#endif
