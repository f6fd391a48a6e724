/* The quantizer-format flags that `ufp4 bias` and `ufp4 quantize` share, parsed one way so that
 * their spelling, ranges and error messages cannot drift apart. */
#ifndef UFP4_CLI_QFLAGS_H
#define UFP4_CLI_QFLAGS_H

#include <stdint.h>

#include "ufp4/quant.h"
#include "ufp4/rht.h"

/* Which flags a command accepts; the others stay "unknown option" for it. */
enum {
  QF_GRID = 1 << 0,      /* --grid G */
  QF_BLOCK = 1 << 1,     /* --block N, 1..4096 */
  QF_TILE2D = 1 << 2,    /* --tile2d: 16x16 tiles */
  QF_SCALE = 1 << 3,     /* --scale K */
  QF_ROUND = 1 << 4,     /* --round M */
  QF_RHT = 1 << 5,       /* --rht N: 0 or a power of two in [2, UFP4_RHT_MAX] */
  QF_RHT_SIGNS = 1 << 6, /* --rht-signs random|nvidia */
  QF_SEED = 1 << 7,      /* --seed S (u64) */
  QF_STREAM = 1 << 8,    /* --stream N (u64) */
  QF_ADAPTIVE = 1 << 9,  /* --adaptive none|4over6, --adaptive-metric mse|mae|maxabs */
};

typedef struct {
  ufp4_qformat fmt; /* fmt.rht_signs is left alone: cli_qflags_signs fills a buffer for it */
  int nvidia_signs;
} cli_qflags;

/* If argv[*i] is one of the accepted flags, stores it in q (advancing *i past a value) and
 * returns 1; returns -1 after printing "ufp4 <cmd>: --flag: ..." on a bad or missing value; 0
 * when argv[*i] is none of them. */
int cli_qflag(const char *cmd, unsigned accept, int argc, char **argv, int *i, cli_qflags *q);
/* The checks across flags: --rht-signs nvidia needs --rht 16; --adaptive must fit fmt.grid and
 * fmt.scale (ufp4_adaptive_check). Returns 0, or -1 after printing. */
int cli_qflags_check(const char *cmd, const cli_qflags *q);
/* Fills signs[0..fmt.rht) (NVIDIA's fixed vector, or random from fmt.seed) and returns the kind
 * stored in packed files: 0 no RHT, 1 random, 2 nvidia. */
int cli_qflags_signs(const cli_qflags *q, float signs[UFP4_RHT_MAX]);

#endif
