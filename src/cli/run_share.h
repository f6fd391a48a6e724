/* The run sharing over MPI ranks now lives in the library (report/run_share.h); these names stay
 * for the commands that join a launch themselves (`ufp4 train`). */
#ifndef UFP4_CLI_RUN_SHARE_H
#define UFP4_CLI_RUN_SHARE_H

#include "report/run_share.h"

typedef ufp4_run_share cli_run_share;

static inline int cli_run_share_begin(cli_run_share *s, int threads) {
  return ufp4_run_share_begin(s, threads);
}
static inline void cli_run_share_end(cli_run_share *s) { ufp4_run_share_end(s); }

#endif
