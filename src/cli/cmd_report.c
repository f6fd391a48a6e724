/* ufp4 report: finished run folders -> report.md, report.html, report.json and plots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/report.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 report --out DIR [options] RUNS.json\n"
          "       ufp4 report --out DIR [options] [NAME=]RUN_DIR...\n\n"
          "Compares finished training runs (folders written by `ufp4 train`) of several recipes and seeds\n"
          "against the baseline recipe run of the same seed. RUNS.json is an array of\n"
          "{\"recipe\": NAME, \"seed\": N, \"dir\": RUN_DIR} (dirs relative to the file's folder). Without it,\n"
          "the recipe of a RUN_DIR is NAME, or its config.json \"recipe\" (named by its preset when it is\n"
          "one: \"bf16,keep_first=0,keep_last=0\" is bf16), and the seed is config.json's.\n\n"
          "Writes DIR/report.md, DIR/report.html (self-contained), DIR/report.json and DIR/plots/ (gnuplot\n"
          "data, scripts, SVG and PNG), and prints the summary table, the verdict and the matrix of paired\n"
          "differences between recipes (95%% CI, p, and the difference detectable at 80%% power).\n\n"
          "options:\n"
          "  --final-steps N    average over the last N logged steps (default 100)\n"
          "  --baseline NAME    recipe the errors are relative to (default bf16)\n"
          "  --control NAME     noise-floor recipe (default fp32; 'none' for no control)\n"
          "  --title TEXT       report title\n"
          "  --no-plots         do not run gnuplot (data and scripts are still written)\n"
          "  --target-effect PP also give, per pair, the seeds needed to detect a difference of PP\n"
          "                     percentage points of relative error (0.1 = 0.1%%) at 80%% power, alpha\n"
          "                     0.05, from the spread of these runs (a pilot)\n");
}

/* Flags into opt and *out, the other arguments into pos[*npos]; 1 on success, 0 after printing
 * the usage (no --out or no runs), -1 on a bad flag. */
static int parse(int argc, char **argv, ufp4_report_options *opt, const char **out, const char **pos,
                 int *npos) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--out", &v)) > 0) *out = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--baseline", &v)) > 0) opt->baseline = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--control", &v)) > 0)
      opt->control = strcmp(v, "none") ? v : NULL;
    else if (!r && (r = cli_value(argc, argv, &i, "--title", &v)) > 0) opt->title = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--final-steps", &v)) > 0) {
      long n;
      if (cli_parse_long("report", "--final-steps", v, 1, 1 << 30, &n)) r = -1;
      else opt->final_steps = (int)n;
    } else if (!r && (r = cli_value(argc, argv, &i, "--target-effect", &v)) > 0) {
      if (cli_parse_double("report", "--target-effect", v, 1e-9, 100, &opt->target_effect)) r = -1;
    } else if (!r && cli_flag(argv, i, "--no-plots")) opt->plots = 0;
    else if (!r && argv[i][0] == '-' && argv[i][1] == '-') {
      fprintf(stderr, "ufp4 report: unknown option '%s'\n", argv[i]);
      r = -1;
    } else if (!r) pos[(*npos)++] = argv[i];
    if (r < 0) return -1;
  }
  if (*out && *npos) return 1;
  usage(stderr);
  return 0;
}

int ufp4_cmd_report(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_report_options opt = ufp4_report_options_default();
  const char *out = NULL;
  const char **pos = calloc((size_t)argc + 1, sizeof *pos);
  int npos = 0;
  if (!pos) return 1;
  if (parse(argc, argv, &opt, &out, pos, &npos) < 1) {
    free(pos);
    return 2;
  }
  ufp4_report_run *runs = NULL;
  size_t n = 0;
  char *cmd = cli_command_line(argc, argv);
  opt.command = cmd;
  ufp4_report *rep = NULL;
  int rc = ufp4_report_runs_parse(pos, (size_t)npos, &runs, &n);
  if (!rc) rc = ufp4_report_make(runs, n, &opt, out, &rep);
  if (!rc) {
    ufp4_report_print_table(rep, stdout);
    printf("\n%s.\nreport: %s/report.md, %s/report.html, %s/report.json\n", rep->plot_note, out, out,
           out);
  } else {
    cli_error("report", NULL);
  }
  ufp4_report_free(rep);
  free(runs);
  free(cmd);
  free(pos);
  return rc ? 1 : 0;
}
