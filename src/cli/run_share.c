#include "cli/run_share.h"

#include <omp.h>
#include <stdlib.h>

int cli_run_share_begin(cli_run_share *s, int threads) {
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

int cli_run_share_mine(const cli_run_share *s, int j) { return j % s->world == s->rank; }

int cli_run_share_count(const cli_run_share *s, int total) {
  return total / s->world + (s->rank < total % s->world);
}

int cli_run_share_agree(cli_run_share *s, int status) { return ufp4_dist_agree(s->comm, status); }

int cli_run_share_gather(cli_run_share *s, double *out, size_t n) { return ufp4_dist_sum_f64(s->comm, out, n); }

void cli_run_share_end(cli_run_share *s) {
  (void)s;
  ufp4_dist_finalize();
}
