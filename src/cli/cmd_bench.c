/* ufp4 bench: performance measurements. `ufp4 bench` alone runs `quant` then `train`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gemm.h"
#include "bench_kernels.h"
#include "bench_quant.h"
#include "bench_train.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/ufp4.h"

enum { B_QUANT = 1, B_GEMM = 2, B_TRAIN = 4, B_KERNELS = 8 };

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 bench [quant|gemm|train|kernels] [options]\n\n"
          "With no bench named, runs quant then train. Every figure is a median of repeated timed runs after\n"
          "untimed warm-up; the thread count is OpenMP's (OMP_NUM_THREADS).\n\n"
          "benches:\n"
          "  quant   ufp4_fake_quant throughput in G elements/s for e2m1, e1m2, int4 x fp32, nvfp4,\n"
          "          e8m0-rceil scales (1x16 blocks, RNE) at each thread count; fused RHT16 + quantize vs\n"
          "          quantize alone; the ratio to a memcpy of the same bytes; and, at one thread, the\n"
          "          time that quantizing inside a GEMM's packing would save: the quantizer writing the\n"
          "          full operand vs 12-row strips into one reused buffer, and the operand re-read from\n"
          "          memory vs from the hot strip, at the study's and llm.c's shapes, next to the GEMM\n"
          "          that reads the operand.\n"
          "  gemm    the three GEMMs of a linear layer (Fprop, Dgrad, Wgrad) under bf16, e2m1, nvfp4, ufp4\n"
          "          (both operands quantized along K, then the product) vs ufp4_sgemm_abt of the same\n"
          "          m x n x k, for layers 1024x768x3072 and 2048x2048x2048; and raw multi-threaded\n"
          "          cblas_sgemm in GFLOP/s.\n"
          "  train   tokens/s of a full training step (forward, backward, AdamW) for fp32, bf16, e2m1,\n"
          "          nvfp4, ufp4 on llm.c's config (L=6 d=384 6 heads ffn 1536 vocab 50257, B=4 T=256) and\n"
          "          a vocab-4096 config, with a per-phase breakdown and each run's peak RSS (in a fresh\n"
          "          process) against params + grads + AdamW state + activations.\n"
          "  kernels every kernel of a training step (norms, RoPE, attention, SwiGLU, residuals, embedding,\n"
          "          cross-entropy, GEMMs, quantizers, linear layers, grad norm + AdamW), one call at the\n"
          "          sizes a step of the study's 16x64 model and of 4x128 uses, timed at 1 thread and at\n"
          "          the OpenMP maximum (at least 2), alternating: the thread scaling of each kernel.\n\n"
          "options:\n"
          "  --json FILE         write every figure as JSON (with no bench named: FILE-quant.json and\n"
          "                      FILE-train.json, FILE's .json suffix dropped first)\n"
          "  --reps N            quant, gemm, kernels: timed repetitions (default quant 7, gemm 5,\n"
          "                      kernels 9)\n"
          "  --rows R --cols C   quant: tensor shape (default 4096 x 1024; cols a multiple of 16)\n"
          "  --threads LIST      quant: comma-separated thread counts (default 1 and the OpenMP maximum);\n"
          "                      kernels: the one count compared with 1\n"
          "  --shape WHICH       kernels: 16x64, 4x128 or both (default both)\n"
          "  --steps N           train: timed steps (default 5)\n"
          "  --warmup N          train: untimed steps first (default 1)\n"
          "  --config WHICH      train: llmc, small, both, moe (small and its MoE twin at equal active\n"
          "                      parameters), small-deep (the study's small deep models: make-run's\n"
          "                      L=2 d=128, 4x128 on bytes, 16x64) or one of them (make-run, 4x128, 16x64);\n"
          "                      default both\n"
          "  --recipes LIST      train: comma-separated recipes (default fp32,bf16,e2m1,nvfp4,ufp4)\n"
          "  --no-rss            train: measure in this process (no fork, no peak RSS)\n");
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

/* Splits a comma-separated recipe list into buf (kept alive by the caller). */
static int parse_recipes(const char *s, char *buf, size_t size, ufp4_bench_train_opts *o) {
  if (strlen(s) >= size) {
    fprintf(stderr, "ufp4 bench: --recipes: list too long\n");
    return -1;
  }
  strcpy(buf, s);
  o->n_recipes = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    ufp4_recipe r;
    if (o->n_recipes == UFP4_BENCH_MAX_RECIPES) {
      fprintf(stderr, "ufp4 bench: --recipes: at most %d entries\n", UFP4_BENCH_MAX_RECIPES);
      return -1;
    }
    if (ufp4_recipe_parse(tok, &r)) {
      cli_error("bench", "--recipes");
      return -1;
    }
    o->recipes[o->n_recipes++] = tok;
  }
  if (o->n_recipes == 0) {
    fprintf(stderr, "ufp4 bench: --recipes: empty list\n");
    return -1;
  }
  return 0;
}

/* The option applies to one of the benches being run, or it is a usage error. */
static int applies(int run, int to, const char *opt) {
  if (run & to) return 1;
  fprintf(stderr, "ufp4 bench: %s is not an option of the bench(es) being run (ufp4 bench --help)\n", opt);
  return 0;
}

/* FILE-<bench>.json for the combined run. */
static char *json_for(const char *base, const char *bench) {
  size_t n = strlen(base);
  if (n > 5 && !strcmp(base + n - 5, ".json")) n -= 5;
  char *p = malloc(n + strlen(bench) + 7);
  if (p) sprintf(p, "%.*s-%s.json", (int)n, base, bench);
  return p;
}

typedef struct {
  int run; /* B_* bits */
  ufp4_bench_quant_opts q;
  ufp4_bench_gemm_opts g;
  ufp4_bench_train_opts t;
  ufp4_bench_kernels_opts k;
  char recipe_buf[1024]; /* --recipes, split in place; t.recipes point into it */
  const char *json;
} bench_opts;

static void defaults(bench_opts *o) {
  memset(o, 0, sizeof *o);
  o->q.rows = 4096;
  o->q.cols = 1024;
  o->q.reps = 7;
  int maxt = ufp4_get_threads();
  o->q.threads[o->q.n_threads++] = 1;
  if (maxt > 1) o->q.threads[o->q.n_threads++] = maxt;
  o->g = (ufp4_bench_gemm_opts){.reps = 5, .json_path = NULL};
  o->k = (ufp4_bench_kernels_opts){.reps = 9, .threads = maxt > 1 ? maxt : 2, .shapes = 3, .json_path = NULL};
  o->t.steps = 5;
  o->t.warmup = 1;
  o->t.configs = 3;
  o->t.rss = 1;
  static const char *const default_recipes[] = {"fp32", "bf16", "e2m1", "nvfp4", "ufp4"};
  for (int i = 0; i < 5; i++) o->t.recipes[o->t.n_recipes++] = default_recipes[i];
}

/* --config of the train bench; 0, or -1 after printing. */
static int parse_config(const char *v, ufp4_bench_train_opts *t) {
  if (!strcmp(v, "llmc"))
    t->configs = 1;
  else if (!strcmp(v, "small"))
    t->configs = 2;
  else if (!strcmp(v, "both"))
    t->configs = 3;
  else if (!strcmp(v, "moe"))
    t->configs = 6;
  else if (!strcmp(v, "small-deep"))
    t->configs = 8 | 16 | 32;
  else if (!strcmp(v, "make-run"))
    t->configs = 8;
  else if (!strcmp(v, "4x128"))
    t->configs = 16;
  else if (!strcmp(v, "16x64"))
    t->configs = 32;
  else {
    fprintf(stderr, "ufp4 bench: --config: '%s' is not llmc, small, both, moe, small-deep, make-run, 4x128 or 16x64\n",
            v);
    return -1;
  }
  return 0;
}

/* The quant and gemm options at argv[*i]: 1 taken, -1 after printing an error, 0 neither. */
static int quant_gemm_option(int argc, char **argv, int *i, bench_opts *o) {
  const char *v = NULL;
  int r, run = o->run;
  long l;
  if ((r = cli_value(argc, argv, i, "--rows", &v))) {
    if (r < 0 || !applies(run, B_QUANT, "--rows") ||
        cli_parse_size("bench", "--rows", v, 1, (size_t)1 << 20, &o->q.rows))
      return -1;
  } else if ((r = cli_value(argc, argv, i, "--cols", &v))) {
    if (r < 0 || !applies(run, B_QUANT, "--cols") ||
        cli_parse_size("bench", "--cols", v, 16, (size_t)1 << 20, &o->q.cols))
      return -1;
    if (o->q.cols % 16) {
      fprintf(stderr, "ufp4 bench: --cols: %zu is not a multiple of 16\n", o->q.cols);
      return -1;
    }
  } else if ((r = cli_value(argc, argv, i, "--reps", &v))) {
    if (r < 0 || !applies(run, B_QUANT | B_GEMM | B_KERNELS, "--reps") ||
        cli_parse_long("bench", "--reps", v, 1, 100000, &l))
      return -1;
    o->q.reps = o->g.reps = o->k.reps = (int)l;
  } else if ((r = cli_value(argc, argv, i, "--threads", &v))) {
    if (r < 0 || !applies(run, B_QUANT | B_KERNELS, "--threads")) return -1;
    if (run & B_KERNELS) {
      if (cli_parse_long("bench", "--threads", v, 1, 1024, &l)) return -1;
      o->k.threads = (int)l;
    } else if (parse_threads(v, &o->q)) {
      return -1;
    }
  } else if ((r = cli_value(argc, argv, i, "--shape", &v))) {
    if (r < 0 || !applies(run, B_KERNELS, "--shape")) return -1;
    if (!strcmp(v, "16x64")) o->k.shapes = 1;
    else if (!strcmp(v, "4x128")) o->k.shapes = 2;
    else if (!strcmp(v, "both")) o->k.shapes = 3;
    else {
      fprintf(stderr, "ufp4 bench: --shape: '%s' is not 16x64, 4x128 or both\n", v);
      return -1;
    }
  }
  return r;
}

/* The train bench's options at argv[*i]: as quant_gemm_option. */
static int train_option(int argc, char **argv, int *i, bench_opts *o) {
  const char *v = NULL;
  int r, run = o->run;
  long l;
  if ((r = cli_value(argc, argv, i, "--steps", &v))) {
    if (r < 0 || !applies(run, B_TRAIN, "--steps") ||
        cli_parse_long("bench", "--steps", v, 1, 10000, &l))
      return -1;
    o->t.steps = (int)l;
  } else if ((r = cli_value(argc, argv, i, "--warmup", &v))) {
    if (r < 0 || !applies(run, B_TRAIN, "--warmup") ||
        cli_parse_long("bench", "--warmup", v, 0, 10000, &l))
      return -1;
    o->t.warmup = (int)l;
  } else if ((r = cli_value(argc, argv, i, "--config", &v))) {
    if (r < 0 || !applies(run, B_TRAIN, "--config") || parse_config(v, &o->t)) return -1;
  } else if ((r = cli_value(argc, argv, i, "--recipes", &v))) {
    if (r < 0 || !applies(run, B_TRAIN, "--recipes") ||
        parse_recipes(v, o->recipe_buf, sizeof o->recipe_buf, &o->t))
      return -1;
  } else if (!strcmp(argv[*i], "--no-rss")) {
    if (!applies(run, B_TRAIN, "--no-rss")) return -1;
    o->t.rss = 0;
    r = 1;
  }
  return r;
}

/* Options from argv[first]; returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, int first, bench_opts *o) {
  for (int i = first; i < argc; i++) {
    int r;
    if ((r = quant_gemm_option(argc, argv, &i, o)) || (r = train_option(argc, argv, &i, o))) {
      if (r < 0) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--json", &o->json))) {
      if (r < 0) return 2;
    } else {
      fprintf(stderr, "ufp4 bench: unknown option '%s' (ufp4 bench --help)\n", argv[i]);
      return 2;
    }
  }
  if ((o->run & B_QUANT) && o->q.rows > ((size_t)1 << 30) / o->q.cols) {
    fprintf(stderr, "ufp4 bench: %zu x %zu is too large (at most 2^30 elements)\n", o->q.rows,
            o->q.cols);
    return 2;
  }
  return 0;
}

/* Runs the benches asked for, each writing to its json_path when set. */
static int run_benches(bench_opts *o, int combined) {
  if ((o->run & B_QUANT) && ufp4_bench_quant(&o->q, stdout) != 0)
    return cli_error("bench quant", NULL);
  if ((o->run & B_GEMM) && ufp4_bench_gemm(&o->g, stdout) != 0)
    return cli_error("bench gemm", NULL);
  if ((o->run & B_KERNELS) && ufp4_bench_kernels(&o->k, stdout) != 0)
    return cli_error("bench kernels", NULL);
  if (o->run & B_TRAIN) {
    if (combined) printf("\n");
    if (ufp4_bench_train(&o->t, "/proc/self/exe", stdout) != 0)
      return cli_error("bench train", NULL);
    if (o->t.json_path) printf("wrote %s\n", o->t.json_path);
  }
  return 0;
}

int ufp4_cmd_bench(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  bench_opts o;
  defaults(&o);
  int first = 2;
  if (argc < 2 || argv[1][0] == '-')
    o.run = B_QUANT | B_TRAIN, first = 1;
  else if (!strcmp(argv[1], "quant"))
    o.run = B_QUANT;
  else if (!strcmp(argv[1], "gemm"))
    o.run = B_GEMM;
  else if (!strcmp(argv[1], "train"))
    o.run = B_TRAIN;
  else if (!strcmp(argv[1], "kernels"))
    o.run = B_KERNELS;
  else if (!strcmp(argv[1], "train-child"))
    return ufp4_bench_train_child(argc - 1, argv + 1);
  else {
    fprintf(stderr, "ufp4 bench: '%s' is not a bench (ufp4 bench --help)\n", argv[1]);
    return 2;
  }
  int rc = parse_args(argc, argv, first, &o);
  if (rc) return rc;
  const int combined = o.run == (B_QUANT | B_TRAIN);
  char *jq = NULL, *jt = NULL;
  if (o.json && combined) {
    jq = json_for(o.json, "quant");
    jt = json_for(o.json, "train");
    if (!jq || !jt) {
      free(jq);
      free(jt);
      fprintf(stderr, "ufp4 bench: out of memory\n");
      return 1;
    }
  }
  o.q.json_path = combined ? jq : o.json;
  o.g.json_path = o.json;
  o.k.json_path = o.json;
  o.t.json_path = combined ? jt : o.json;
  rc = run_benches(&o, combined);
  free(jq);
  free(jt);
  return rc;
}
