/* Commands that run many independent trainings (compare, sweep) share them out over the ranks of
 * an mpirun launch: run j of a grid belongs to rank j mod W, each run is an ordinary one-process
 * run into its own folder, and rank 0 alone writes what is built from all of them. A run's result
 * does not depend on the rank or thread count that made it, so the outputs are those of a
 * one-process launch. Without a launcher W = 1 and every run is local. */
#ifndef UFP4_CLI_RUN_SHARE_H
#define UFP4_CLI_RUN_SHARE_H

#include "ufp4/dist.h"

typedef struct {
  ufp4_dist *comm;
  int rank, world;
} cli_run_share;

/* Joins the launch (ufp4_dist_init) and, when several ranks share this node and neither
 * `threads` (a --threads value, 0 = unset) nor OMP_NUM_THREADS says otherwise, gives each rank
 * its share of the cores. A ufp4 status; on failure the message is set. */
int cli_run_share_begin(cli_run_share *s, int threads);
/* 1 when run j (0-based, in the command's fixed order) is this rank's to run. */
int cli_run_share_mine(const cli_run_share *s, int j);
/* How many of `total` runs are this rank's. */
int cli_run_share_count(const cli_run_share *s, int total);
/* Collective: every rank's status after its runs; 0 only when all succeeded, else the lowest
 * failing rank's status and message (ufp4_dist_agree). */
int cli_run_share_agree(cli_run_share *s, int status);
/* Collective: out[0..n) becomes the sum over ranks, in the communicator's fixed order. Results
 * that a rank did not compute are 0 there, so each sum is the one rank's value bit for bit. */
int cli_run_share_gather(cli_run_share *s, double *out, size_t n);
/* Ends the launch: call once, on every rank, after the last collective. */
void cli_run_share_end(cli_run_share *s);

#endif
