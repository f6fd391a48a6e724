/* Sharing the runs of a grid over the ranks of a launch (see report/run_share.h). */
#include "report/run_share.h"

#include <omp.h>
#include <stdlib.h>

int ufp4_run_share_begin(ufp4_run_share *s, int threads) {
  s->comm = NULL;
  s->rank = 0;
  s->world = 1;
  int rc = ufp4_dist_init(&s->comm);
  if (rc) return rc;
  s->rank = ufp4_dist_rank(s->comm);
  s->world = ufp4_dist_world(s->comm);
  const int local = ufp4_dist_local_world(s->comm);
  /* Ranks on one node would otherwise each start a pool as wide as the node. */
  if (threads == 0 && local > 1 && !getenv("OMP_NUM_THREADS")) {
    const int t = omp_get_num_procs() / local;
    omp_set_num_threads(t > 1 ? t : 1);
  }
  return 0;
}

int ufp4_run_share_mine(const ufp4_run_share *s, int j) { return j % s->world == s->rank; }

int ufp4_run_share_count(const ufp4_run_share *s, int total) {
  return total / s->world + (s->rank < total % s->world);
}

int ufp4_run_share_agree(ufp4_run_share *s, int status) { return ufp4_dist_agree(s->comm, status); }

int ufp4_run_share_gather(ufp4_run_share *s, double *out, size_t n) {
  return ufp4_dist_sum_f64(s->comm, out, n);
}

void ufp4_run_share_end(ufp4_run_share *s) {
  (void)s;
  ufp4_dist_finalize();
}
