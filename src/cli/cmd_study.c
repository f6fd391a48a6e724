/* ufp4 study: the pre-registered depth study's analysis (ufp4/study.h, docs/STUDY.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/build_info.h"
#include "ufp4/study.h"

#define MAX_FOLDERS 64

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 study --out DIR --depth L=COMPARE_DIR [--depth L=COMPARE_DIR ...] [options]\n\n"
          "The analysis that docs/STUDY.md registers, over the finished `ufp4 compare` folders of each depth\n"
          "(several folders may give one depth: stage 1 and stage 2). Writes DIR/analysis.md and\n"
          "DIR/analysis.json: H1 (the depth-mean of D = 100 (L_a - L_b) / L_base), H2 (its slope against\n"
          "log2 depth) and H3 (the drift slopes of a and b at fixed weights) with Holm over the three, the\n"
          "per-depth tests, the secondary recipes, the noise floor of the control, the settledness of\n"
          "the gap per quarter of training, and with --drift H3's secondary measures (cosines, dW per\n"
          "projection kind) and the per-block curves (DIR/h3_curves.dat, h3_forward.svg, h3_backward.svg).\n"
          "A seed counts when a, b and the baseline finished (run.json) at every depth.\n\n"
          "options:\n"
          "  --drift DIR         DIR/seed<N>/drift.json from `ufp4 drift --mode both` on each seed's final\n"
          "                      baseline checkpoint (H3); without it H3 counts as not rejected\n"
          "  --sd-only           the internal pilot's look: only the sd of the H1 statistic and the seeds it\n"
          "                      needs (DIR/stage2.json); no mean and no test is computed (give --seeds\n"
          "                      with stage 1's count when stage 2 will share the folders)\n"
          "  --a NAME --b NAME   the pair (default e2m1, ufp4)\n"
          "  --baseline NAME     default bf16\n"
          "  --control NAME      default fp32; 'none' for no control\n"
          "  --secondary SPEC    a recipe compared with --secondary-ref (repeatable, at most %d);\n"
          "                      'SPEC vs REF' gives this one its own reference; one Holm family\n"
          "  --secondary-ref N   default: the a recipe\n"
          "  --target-nats X     stage-2 target effect in nats of L_a - L_b (default 0.005)\n"
          "  --n-min N --n-cap N stage-2 bounds on the seeds (default 12, 24)\n"
          "  --seeds N           fail unless the seeds finished at every depth are exactly 1..N (the final\n"
          "                      analysis passes the registered n)\n",
          UFP4_STUDY_MAX_SECONDARY);
}

static int parse_depth(const char *v, ufp4_study_folder *f) {
  char *end;
  const long d = strtol(v, &end, 10);
  if (end == v || *end != '=' || d < 1 || d > 100000 || !end[1]) {
    fprintf(stderr, "ufp4 study: --depth: '%s' is not L=COMPARE_DIR\n", v);
    return -1;
  }
  f->depth = (int)d;
  f->dir = end + 1;
  return 0;
}

static int parse_more(int argc, char **argv, int *i, ufp4_study_options *o) {
  const char *v;
  long n;
  int r;
  if ((r = cli_value(argc, argv, i, "--a", &v)) > 0) o->a = v;
  else if (!r && (r = cli_value(argc, argv, i, "--b", &v)) > 0) o->b = v;
  else if (!r && (r = cli_value(argc, argv, i, "--baseline", &v)) > 0) o->baseline = v;
  else if (!r && (r = cli_value(argc, argv, i, "--control", &v)) > 0) o->control = strcmp(v, "none") ? v : NULL;
  else if (!r && (r = cli_value(argc, argv, i, "--secondary-ref", &v)) > 0) o->secondary_ref = v;
  else if (!r && (r = cli_value(argc, argv, i, "--secondary", &v)) > 0) {
    if (o->n_secondary == UFP4_STUDY_MAX_SECONDARY) {
      fprintf(stderr, "ufp4 study: more than %d --secondary recipes\n", UFP4_STUDY_MAX_SECONDARY);
      return -1;
    }
    /* 'SPEC vs REF': a spec holds no spaces, so " vs " cannot be part of one */
    static char spec[UFP4_STUDY_MAX_SECONDARY][512];
    const char *vs = strstr(v, " vs ");
    const int k = o->n_secondary++;
    o->secondary[k] = v;
    o->secondary_refs[k] = NULL;
    if (vs) {
      if ((size_t)(vs - v) >= sizeof spec[k] || vs == v || !vs[4]) {
        fprintf(stderr, "ufp4 study: --secondary '%s' is not SPEC or 'SPEC vs REF'\n", v);
        return -1;
      }
      snprintf(spec[k], sizeof spec[k], "%.*s", (int)(vs - v), v);
      o->secondary[k] = spec[k];
      o->secondary_refs[k] = vs + 4;
    }
  } else if (!r && (r = cli_value(argc, argv, i, "--target-nats", &v)) > 0) {
    if (cli_parse_double("study", "--target-nats", v, 1e-9, 10, &o->target_nats)) r = -1;
  } else if (!r && (r = cli_value(argc, argv, i, "--n-min", &v)) > 0) {
    if (cli_parse_long("study", "--n-min", v, 2, 100000, &n)) r = -1;
    else o->n_min = (int)n;
  } else if (!r && (r = cli_value(argc, argv, i, "--n-cap", &v)) > 0) {
    if (cli_parse_long("study", "--n-cap", v, 2, 100000, &n)) r = -1;
    else o->n_cap = (int)n;
  } else if (!r && (r = cli_value(argc, argv, i, "--seeds", &v)) > 0) {
    if (cli_parse_long("study", "--seeds", v, 2, 100000, &n)) r = -1;
    else o->seeds = (int)n;
  } else if (!r) {
    fprintf(stderr, "ufp4 study: unknown option '%s'\n", argv[*i]);
    r = -1;
  }
  return r < 0 ? -1 : 0;
}

/* 1 on success, 0 after printing the usage, -1 on a bad flag. */
static int parse(int argc, char **argv, ufp4_study_options *o, ufp4_study_folder *f, size_t *nf, const char **out,
                 int *sd_only) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--out", &v)) > 0) *out = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--drift", &v)) > 0) o->drift_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--depth", &v)) > 0) {
      if (*nf == MAX_FOLDERS) {
        fprintf(stderr, "ufp4 study: more than %d --depth folders\n", MAX_FOLDERS);
        return -1;
      }
      if (parse_depth(v, &f[(*nf)++])) return -1;
    } else if (!r && cli_flag(argv, i, "--sd-only")) *sd_only = 1;
    else if (!r && parse_more(argc, argv, &i, o)) return -1;
    if (r < 0) return -1;
  }
  if (*out && *nf) return 1;
  usage(stderr);
  return 0;
}

static void print_summary(const ufp4_study_result *r, int sd_only, const char *out) {
  printf("%zu seeds finished at every depth%s%s\n", r->n_seeds, r->excluded[0] ? "; left out: " : "", r->excluded);
  if (r->unreadable[0]) printf("a run could not be read (counted as unfinished): %s\n", r->unreadable);
  if (sd_only) {
    printf("sd of the H1 statistic %.4f pp, target %.4f pp: %zu seeds%s\n", r->sd_pp, r->target_pp, r->n_needed,
           r->capped ? " (cap)" : "");
    printf("stage 2: %s/stage2.json\n", out);
    return;
  }
  printf("sd of the H1 statistic %.4f pp; H1's MDD at %zu seeds %.4f pp (target %.4f pp)\n", r->sd_pp, r->n_seeds,
         r->h1.s.mdd, r->target_pp);
  printf("H1 mean %+.4f pp [%+.4f, %+.4f] p=%.3g: %s\n", r->h1.s.mean, r->h1.s.lo, r->h1.s.hi, r->h1.s.p,
         r->h1_supported ? "supported" : "not supported");
  printf("H2 slope %+.4f pp/doubling [%+.4f, %+.4f] p=%.3g: %s\n", r->h2.s.mean, r->h2.s.lo, r->h2.s.hi, r->h2.s.p,
         r->h2_supported ? "supported" : "not supported");
  printf("H3 %s\n", !r->has_h3 ? "not measured" : r->h3_supported ? "supported" : "not supported");
  printf("analysis: %s/analysis.md, %s/analysis.json\n", out, out);
}

int ufp4_cmd_study(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_study_options o = ufp4_study_options_default();
  ufp4_study_folder f[MAX_FOLDERS];
  size_t nf = 0;
  const char *out = NULL;
  int sd_only = 0;
  const int p = parse(argc, argv, &o, f, &nf, &out, &sd_only);
  if (p < 1) return 2;
  ufp4_study_result *r = NULL;
  char *cmd = cli_command_line(argc, argv);
  int rc = ufp4_study_analyze(f, nf, &o, sd_only, &r);
  if (!rc) rc = ufp4_study_write(r, &o, sd_only, cmd, ufp4_build_commit(), out);
  if (!rc) print_summary(r, sd_only, out);
  else cli_error("study", NULL);
  ufp4_study_free(r);
  free(cmd);
  return rc ? 1 : 0;
}
