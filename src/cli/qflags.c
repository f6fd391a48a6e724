#include "cli/qflags.h"

#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "ufp4/ufp4.h"

/* For a flag whose value is a name: 1 if it was known (ok), else -1 after saying so. */
static int named(const char *cmd, const char *flag, const char *v, int ok, const char *what) {
  if (ok) return 1;
  fprintf(stderr, "ufp4 %s: %s: unknown %s '%s'\n", cmd, flag, what, v);
  return -1;
}

int cli_qflag(const char *cmd, unsigned accept, int argc, char **argv, int *i, cli_qflags *q) {
  const char *v = NULL;
  long l;
  int r;
  ufp4_qformat *f = &q->fmt;
  if ((accept & QF_TILE2D) && cli_flag(argv, *i, "--tile2d")) {
    f->tile2d = 16;
    return 1;
  }
  if ((accept & QF_GRID) && (r = cli_value(argc, argv, i, "--grid", &v)))
    return r < 0 ? -1 : named(cmd, "--grid", v, ufp4_grid_parse(v, &f->grid) == 0, "grid");
  if ((accept & QF_SCALE) && (r = cli_value(argc, argv, i, "--scale", &v)))
    return r < 0 ? -1 : named(cmd, "--scale", v, ufp4_scale_parse(v, &f->scale) == 0, "scale");
  if ((accept & QF_ROUND) && (r = cli_value(argc, argv, i, "--round", &v)))
    return r < 0 ? -1 : named(cmd, "--round", v, ufp4_round_parse(v, &f->round) == 0, "rounding");
  if ((accept & QF_BLOCK) && (r = cli_value(argc, argv, i, "--block", &v))) {
    if (r < 0 || cli_parse_long(cmd, "--block", v, 1, 4096, &l)) return -1;
    f->block = (int)l;
    return 1;
  }
  if ((accept & QF_RHT) && (r = cli_value(argc, argv, i, "--rht", &v))) {
    if (r < 0 || cli_parse_long(cmd, "--rht", v, 0, UFP4_RHT_MAX, &l)) return -1;
    if (l == 1 || (l & (l - 1))) {
      fprintf(stderr, "ufp4 %s: --rht: %ld is not 0 or a power of two in [2, %d]\n", cmd, l, UFP4_RHT_MAX);
      return -1;
    }
    f->rht = (int)l;
    return 1;
  }
  if ((accept & QF_RHT_SIGNS) && (r = cli_value(argc, argv, i, "--rht-signs", &v))) {
    if (r < 0) return -1;
    if (strcmp(v, "random") && strcmp(v, "nvidia")) {
      fprintf(stderr, "ufp4 %s: --rht-signs: '%s' is not random or nvidia\n", cmd, v);
      return -1;
    }
    q->nvidia_signs = !strcmp(v, "nvidia");
    return 1;
  }
  if ((accept & QF_ADAPTIVE) && (r = cli_value(argc, argv, i, "--adaptive", &v)))
    return r < 0 ? -1 : named(cmd, "--adaptive", v, ufp4_adaptive_parse(v, &f->adaptive) == 0, "adaptive scaling");
  if ((accept & QF_ADAPTIVE) && (r = cli_value(argc, argv, i, "--adaptive-metric", &v)))
    return r < 0 ? -1 : named(cmd, "--adaptive-metric", v, ufp4_metric_parse(v, &f->metric) == 0, "metric");
  if ((accept & QF_SEED) && (r = cli_value(argc, argv, i, "--seed", &v)))
    return r < 0 || cli_parse_u64(cmd, "--seed", v, &f->seed) ? -1 : 1;
  if ((accept & QF_STREAM) && (r = cli_value(argc, argv, i, "--stream", &v)))
    return r < 0 || cli_parse_u64(cmd, "--stream", v, &f->stream) ? -1 : 1;
  return 0;
}

int cli_qflags_check(const char *cmd, const cli_qflags *q) {
  if (q->nvidia_signs && q->fmt.rht != 16) {
    fprintf(stderr, "ufp4 %s: --rht-signs nvidia needs --rht 16 (the vector has 16 entries)\n", cmd);
    return -1;
  }
  if (ufp4_adaptive_check(q->fmt.adaptive, q->fmt.grid, q->fmt.scale) != 0) {
    fprintf(stderr, "ufp4 %s: --adaptive: %s\n", cmd, ufp4_last_error());
    return -1;
  }
  return 0;
}

int cli_qflags_signs(const cli_qflags *q, float signs[UFP4_RHT_MAX]) {
  if (!q->fmt.rht) return 0;
  if (q->nvidia_signs) {
    memcpy(signs, ufp4_rht_signs_nvidia16, sizeof(float) * 16);
    return 2;
  }
  ufp4_rht_signs_random(signs, q->fmt.rht, q->fmt.seed);
  return 1;
}
