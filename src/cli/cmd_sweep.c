/* ufp4 sweep: a scaling study -- model sizes x recipes -- with a power-law fit of loss against
 * training compute per recipe and the FP4-to-BF16 gap against compute. The work is ufp4_sweep_run
 * (sweep.h). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_share.h"
#include "cli/train_flags.h"
#include "ufp4/dist.h"
#include "ufp4/sweep.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 sweep --data DIR --out OUTDIR [--sizes 2x64,2x128,4x128] [--recipes bf16,e2m1,ufp4]\n"
          "                  [--seeds N] [train flags]\n\n"
          "Trains every size (LAYERSxWIDTH: heads = width/32, ffn = 3 x width) under every recipe on the same\n"
          "data and steps, and fits L(C) = a C^-b + c per recipe, with C = 6 N D the training FLOPs (N the\n"
          "parameters outside the embedding, D the tokens seen). Reports the final validation loss (mean over\n"
          "seeds), the gap of each recipe to bf16 at each size, the fits, and plots loss and gap against C into\n"
          "OUTDIR (sweep.md, sweep.json, sweep_loss.svg/png, sweep_gap.svg/png, runs/). Under mpirun the runs\n"
          "are shared out over the ranks (docs/DISTRIBUTED.md) and the results are the same.\n\n"
          "  --ckpt-every N      checkpoint every N steps (default: a tenth of the steps; 0: at the end)\n"
          "  --no-progress       no progress line on stderr\n\n"
          "train flags (as ufp4 train):\n");
  const ufp4_sweep_options def = ufp4_sweep_options_default();
  static const char *const own[] = {"--ckpt-every", NULL}; /* explained above */
  ufp4_grid_flags_usage(out, &def.train, own);
}

/* Flags into o; 1 on success, 0 after printing the usage (missing folders), -1 on a bad flag. */
static int parse(int argc, char **argv, ufp4_sweep_options *o) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--data", &v)) > 0) o->data_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0) o->out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--sizes", &v)) > 0) o->sizes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0) o->recipes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--seeds", &v)) > 0) {
      long n;
      if (cli_parse_long("sweep", "--seeds", v, 1, UFP4_MAX_GRID_SEEDS, &n)) return -1;
      o->seeds = (int)n;
    } else if (!r) {
      r = ufp4_grid_flags_parse_or_fail("sweep", argc, argv, &i, &o->train);
    }
    if (r < 0) return -1;
  }
  if (o->data_dir && o->out_dir) return 1;
  usage(stderr);
  return 0;
}

int ufp4_cmd_sweep(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_sweep_options o = ufp4_sweep_options_default();
  if (parse(argc, argv, &o) < 1) return 2;
  if (ufp4_sweep_check(&o)) {
    cli_error("sweep", NULL);
    return 2;
  }
  ufp4_sweep_result res;
  const int rc = ufp4_sweep_run(&o, &res);
  if (cli_ranks_end("sweep", rc, res.rank)) return 1;
  if (res.rank) return 0;
  ufp4_sweep_print(&res, stdout);
  const char *plots = res.plotted ? ", sweep_loss.svg, sweep_gap.svg"
                                  : " (plots not drawn: gnuplot missing or failed)";
  printf("\n%s/sweep.md%s\n", o.out_dir, plots);
  return 0;
}
