/* ufp4 bench: performance measurements. `ufp4 bench` alone runs `quant`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_quant.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/ufp4.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 bench [quant] [options]\n\n"
          "benches:\n"
          "  quant   (default) ufp4_fake_quant throughput in G elements/s for e2m1, e1m2, int4 x fp32,\n"
          "          nvfp4, e8m0-rceil scales (1x16 blocks, RNE) at each thread count; fused RHT16 +\n"
          "          quantize vs quantize alone; and the ratio to a memcpy of the same bytes.\n"
          "          Each figure is the median of --reps timed calls after one warm-up call.\n\n"
          "options of quant:\n"
          "  --rows R --cols C   tensor shape (default 4096 x 1024; cols a multiple of 16)\n"
          "  --reps N            timed repetitions (default 7)\n"
          "  --threads LIST      comma-separated thread counts (default 1 and the OpenMP maximum)\n"
          "  --json FILE         also write every figure to FILE as JSON\n");
}

static int parse_threads(const char *s, ufp4_bench_quant_opts *o) {
  char buf[256];
  if (strlen(s) >= sizeof buf) {
    fprintf(stderr, "ufp4 bench: --threads: list too long\n");
    return -1;
  }
  strcpy(buf, s);
  o->n_threads = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long v;
    if (o->n_threads == UFP4_BENCH_MAX_THREADS) {
      fprintf(stderr, "ufp4 bench: --threads: at most %d entries\n", UFP4_BENCH_MAX_THREADS);
      return -1;
    }
    if (cli_parse_long("bench", "--threads", tok, 1, 1024, &v)) return -1;
    o->threads[o->n_threads++] = (int)v;
  }
  if (o->n_threads == 0) {
    fprintf(stderr, "ufp4 bench: --threads: empty list\n");
    return -1;
  }
  return 0;
}

static int bench_quant_main(int argc, char **argv, int first) {
  ufp4_bench_quant_opts o;
  memset(&o, 0, sizeof o);
  o.rows = 4096;
  o.cols = 1024;
  o.reps = 7;
  int maxt = ufp4_get_threads();
  o.threads[o.n_threads++] = 1;
  if (maxt > 1) o.threads[o.n_threads++] = maxt;
  for (int i = first; i < argc; i++) {
    const char *v = NULL;
    int r;
    long l;
    if ((r = cli_value(argc, argv, &i, "--rows", &v))) {
      if (r < 0 || cli_parse_size("bench", "--rows", v, 1, (size_t)1 << 20, &o.rows)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--cols", &v))) {
      if (r < 0 || cli_parse_size("bench", "--cols", v, 16, (size_t)1 << 20, &o.cols)) return 2;
      if (o.cols % 16) {
        fprintf(stderr, "ufp4 bench: --cols: %zu is not a multiple of 16\n", o.cols);
        return 2;
      }
    } else if ((r = cli_value(argc, argv, &i, "--reps", &v))) {
      if (r < 0 || cli_parse_long("bench", "--reps", v, 1, 100000, &l)) return 2;
      o.reps = (int)l;
    } else if ((r = cli_value(argc, argv, &i, "--threads", &v))) {
      if (r < 0 || parse_threads(v, &o)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--json", &v))) {
      if (r < 0) return 2;
      o.json_path = v;
    } else {
      fprintf(stderr, "ufp4 bench quant: unknown option '%s' (ufp4 bench --help)\n", argv[i]);
      return 2;
    }
  }
  if (o.rows > ((size_t)1 << 30) / o.cols) {
    fprintf(stderr, "ufp4 bench: %zu x %zu is too large (at most 2^30 elements)\n", o.rows, o.cols);
    return 2;
  }
  if (ufp4_bench_quant(&o, stdout) != 0) {
    fprintf(stderr, "ufp4 bench quant: %s\n", ufp4_last_error());
    return 1;
  }
  return 0;
}

int ufp4_cmd_bench(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-') return bench_quant_main(argc, argv, 1);
  if (!strcmp(argv[1], "quant")) return bench_quant_main(argc, argv, 2);
  fprintf(stderr, "ufp4 bench: '%s' is not a bench (ufp4 bench --help)\n", argv[1]);
  return 2;
}
