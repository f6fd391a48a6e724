/* Many independent trainings (the runs of ufp4_compare_run and ufp4_sweep_run) shared out over
 * the ranks of an mpirun launch: run j of a grid belongs to rank j mod W, each run is an ordinary
 * one-process run into its own folder, and rank 0 alone writes what is built from all of them. A
 * run's result does not depend on the rank or thread count that made it, so the outputs are those
 * of a one-process launch. Without a launcher W = 1 and every run is local. Internal to the
 * library and the CLI (`ufp4 train` joins a launch the same way). */
#ifndef UFP4_REPORT_RUN_SHARE_H
#define UFP4_REPORT_RUN_SHARE_H

#include "ufp4/dist.h"

typedef struct {
  ufp4_dist *comm;
  int rank, world;
} ufp4_run_share;

/* Joins the launch (ufp4_dist_init) and, when several ranks share this node and neither
 * `threads` (a --threads value, 0 = unset) nor OMP_NUM_THREADS says otherwise, gives each rank
 * its share of the cores. A ufp4 status; on failure the message is set. */
int ufp4_run_share_begin(ufp4_run_share *s, int threads);
/* 1 when run j (0-based, in the command's fixed order) is this rank's to run. */
int ufp4_run_share_mine(const ufp4_run_share *s, int j);
/* How many of `total` runs are this rank's. */
int ufp4_run_share_count(const ufp4_run_share *s, int total);
/* Collective: every rank's status after its runs; 0 only when all succeeded, else the lowest
 * failing rank's status and message (ufp4_dist_agree). */
int ufp4_run_share_agree(ufp4_run_share *s, int status);
/* Collective: out[0..n) becomes the sum over ranks, in the communicator's fixed order. Results
 * that a rank did not compute are 0 there, so each sum is the one rank's value bit for bit. */
int ufp4_run_share_gather(ufp4_run_share *s, double *out, size_t n);
/* Ends the launch (ufp4_dist_finalize): for a command that owns the process, once, on every rank,
 * after the last collective. Library calls leave the launch joined for the process to end. */
void ufp4_run_share_end(ufp4_run_share *s);

#endif
