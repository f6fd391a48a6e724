/* ufp4 compare: the same model, data, order and schedule under BF16 and each 4-bit recipe, over
 * several seeds, with an fp32 control; then the report. The work is ufp4_compare_run (compare.h). */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_share.h"
#include "cli/train_flags.h"
#include "ufp4/dist.h"
#include "ufp4/compare.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 compare --data DIR --out REPORT [--recipes bf16,e2m1,nvfp4,ufp4] [--seeds N]\n"
          "                    [--final-steps N] [--ablation rht-scope|sr-scope] [--no-control]\n"
          "                    [--target-effect PP] [--same-bits-as COMMITS] [train flags]\n\n"
          "Trains the same model on the same data in the same order under each recipe and seed, plus the\n"
          "bf16 baseline and an fp32 control (the noise floor of the metric), then writes REPORT/report.md,\n"
          "report.html, report.json and plots, and prints the table. Seed s of every recipe shares the init,\n"
          "the data order and the stochastic-rounding streams. Under mpirun the runs are shared out over the\n"
          "ranks (docs/DISTRIBUTED.md) and the report is the same. The report leads with the verdict and the\n"
          "matrix of paired differences between recipes (95%% CI, p, and the difference detectable at 80%%\n"
          "power given the spread over seeds).\n\n"
          "Rerunning the same command finishes an interrupted comparison: runs this binary finished with\n"
          "this configuration are kept, interrupted ones resume from their newest checkpoint (every tenth\n"
          "of a run by default) bit-identically, and runs of another binary or configuration are moved to\n"
          "REPORT/stale/ and redone (docs/TRAINING.md, \"Running a long study in sittings\").\n\n"
          "  --recipes LIST      recipes to compare with bf16 (';'-separated when a spec holds commas;\n"
          "                      a lone schedule such as 'e2m1@0,bf16@0.9' is one entry);\n"
          "                      SPEC@AT,... is a recipe schedule (train --schedule)\n"
          "  --seeds N           seeds per recipe (default 3): seed, seed+1, ...\n"
          "  --final-steps N     averaging window of the relative error (default: last 20%% of the steps)\n"
          "  --ablation KIND     rht-scope: each recipe with RHT on none, wgrad, dgrad+wgrad, fprop+wgrad,\n"
          "                      all (the paper's Table 2); sr-scope: each recipe with SR on dy and none\n"
          "  --no-control        skip the fp32 control\n"
          "  --target-effect PP  also give, per pair, the seeds needed to detect a difference of PP\n"
          "                      percentage points of relative error (0.1 = 0.1%%) at 80%% power, alpha 0.05,\n"
          "                      from the spread this run saw (a pilot)\n"
          "  --diag-every N      diagnostics every N steps (default: 4 times per run)\n"
          "  --ckpt-every N      checkpoint every N steps (default: a tenth of the steps; 0: at the end)\n"
          "  --no-progress       no progress line on stderr\n"
          "  --same-bits-as C,.. keep and resume the runs of these binaries (commits as run.json records\n"
          "                      them) as this one's own; only for a binary shown to compute the same bits\n"
          "                      (docs/STUDY.md, amendment 1); a resumed run records \"OLD+NEW\"\n\n"
          "train flags (as ufp4 train):\n");
  const ufp4_compare_options def = ufp4_compare_options_default();
  static const char *const own[] = {"--diag-every", "--ckpt-every", NULL}; /* explained above */
  ufp4_grid_flags_usage(out, &def.train, own);
}

/* Flags into o; 1 on success, 0 after printing the usage (missing folders), -1 on a bad flag. */
static int parse(int argc, char **argv, ufp4_compare_options *o) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    long n;
    if ((r = cli_value(argc, argv, &i, "--data", &v)) > 0) o->data_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0) o->out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0) o->recipes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--ablation", &v)) > 0) o->ablation = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--same-bits-as", &v)) > 0) o->same_bits_as = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--seeds", &v)) > 0) {
      if (cli_parse_long("compare", "--seeds", v, 1, UFP4_MAX_GRID_SEEDS, &n)) return -1;
      o->seeds = (int)n;
    } else if (!r && (r = cli_value(argc, argv, &i, "--final-steps", &v)) > 0) {
      if (cli_parse_long("compare", "--final-steps", v, 1, 1 << 30, &n)) return -1;
      o->final_steps = (int)n;
    } else if (!r && (r = cli_value(argc, argv, &i, "--target-effect", &v)) > 0) {
      if (cli_parse_double("compare", "--target-effect", v, 1e-9, 100, &o->target_effect)) return -1;
    } else if (!r && cli_flag(argv, i, "--no-control")) {
      o->control = 0;
    } else if (!r) {
      r = ufp4_grid_flags_parse_or_fail("compare", argc, argv, &i, &o->train);
    }
    if (r < 0) return -1;
  }
  if (o->data_dir && o->out_dir) return 1;
  usage(stderr);
  return 0;
}

int ufp4_cmd_compare(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_compare_options o = ufp4_compare_options_default();
  if (parse(argc, argv, &o) < 1) return 2;
  if (ufp4_compare_check(&o)) {
    cli_error("compare", NULL);
    return 2;
  }
  char command[8192] = "ufp4"; /* recorded in the report */
  size_t len = strlen(command);
  for (int i = 0; i < argc && len + 2 < sizeof command; i++)
    len += (size_t)snprintf(command + len, sizeof command - len, " %s", argv[i]);
  o.command = command;
  ufp4_compare_result res;
  const int rc = ufp4_compare_run(&o, &res);
  if (cli_ranks_end("compare", rc, res.rank)) return 1;
  if (res.report) {
    ufp4_report_print_table(res.report, stdout);
    printf("\nreport: %s/report.html (and report.md, report.json); %.1f minutes\n", o.out_dir,
           res.seconds / 60);
  }
  ufp4_compare_result_free(&res);
  return 0;
}
