/* ufp4 report: finished run folders -> report.md, report.html, report.json and plots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "ufp4/error.h"
#include "ufp4/report.h"

int ufp4_cmd_report(int argc, char **argv);

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 report --out DIR [options] RUNS.json\n"
          "       ufp4 report --out DIR [options] [NAME=]RUN_DIR...\n\n"
          "Compares finished training runs (folders written by `ufp4 train`) of several recipes and seeds\n"
          "against the baseline recipe run of the same seed. RUNS.json is an array of\n"
          "{\"recipe\": NAME, \"seed\": N, \"dir\": RUN_DIR} (dirs relative to the file's folder). Without it,\n"
          "the recipe of a RUN_DIR is NAME, or its config.json \"recipe\", and the seed is config.json's.\n\n"
          "Writes DIR/report.md, DIR/report.html (self-contained), DIR/report.json and DIR/plots/ (gnuplot\n"
          "data, scripts, SVG and PNG), and prints the summary table.\n\n"
          "options:\n"
          "  --final-steps N    average over the last N logged steps (default 100)\n"
          "  --baseline NAME    recipe the errors are relative to (default bf16)\n"
          "  --control NAME     noise-floor recipe (default fp32; 'none' for no control)\n"
          "  --title TEXT       report title\n"
          "  --no-plots         do not run gnuplot (data and scripts are still written)\n");
}

/* The command line as typed, quoted where a shell would need it. */
static char *command_line(int argc, char **argv) {
  size_t cap = 16;
  for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
  char *s = malloc(cap);
  if (!s) return NULL;
  size_t n = (size_t)snprintf(s, cap, "ufp4");
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const int plain = a[0] && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=,./:@%") ==
                                      strlen(a);
    s[n++] = ' ';
    if (plain) {
      memcpy(s + n, a, strlen(a));
      n += strlen(a);
      continue;
    }
    s[n++] = '\'';
    for (; *a; a++) {
      if (*a == '\'') {
        memcpy(s + n, "'\\''", 4);
        n += 4;
      } else s[n++] = *a;
    }
    s[n++] = '\'';
  }
  s[n] = 0;
  return s;
}

static int is_json_file(const char *p) {
  const size_t len = strlen(p);
  struct stat st;
  return len > 5 && !strcmp(p + len - 5, ".json") && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int ufp4_cmd_report(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_report_options opt = ufp4_report_options_default();
  const char *out = NULL;
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) return 1;
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--out", &v)) > 0) out = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--baseline", &v)) > 0) opt.baseline = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--control", &v)) > 0) opt.control = strcmp(v, "none") ? v : NULL;
    else if (!r && (r = cli_value(argc, argv, &i, "--title", &v)) > 0) opt.title = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--final-steps", &v)) > 0) {
      long n;
      if (cli_parse_long("report", "--final-steps", v, 1, 1 << 30, &n)) r = -1;
      else opt.final_steps = (int)n;
    } else if (!r && cli_flag(argv, i, "--no-plots")) opt.plots = 0;
    else if (!r && argv[i][0] == '-' && argv[i][1] == '-') {
      fprintf(stderr, "ufp4 report: unknown option '%s'\n", argv[i]);
      r = -1;
    } else if (!r) pos[npos++] = argv[i];
    if (r < 0) {
      free(pos);
      return 2;
    }
  }
  if (!out || !npos) {
    usage(stderr);
    free(pos);
    return 2;
  }
  ufp4_report_run *runs = NULL;
  size_t n = 0;
  int rc = 0;
  if (npos == 1 && is_json_file(pos[0])) {
    rc = ufp4_report_runs_load(pos[0], &runs, &n);
  } else {
    runs = calloc((size_t)npos, sizeof *runs);
    if (!runs) rc = ufp4_fail(UFP4_ENOMEM, "report: out of memory");
    for (int i = 0; i < npos && !rc; i++) {
      const char *eq = strchr(pos[i], '='), *slash = strchr(pos[i], '/');
      const char *dir = pos[i];
      if (eq && (!slash || eq < slash)) { /* NAME=DIR */
        if ((size_t)(eq - pos[i]) >= sizeof runs[i].recipe) {
          rc = ufp4_fail(UFP4_EINVAL, "report: recipe name in '%s' is too long", pos[i]);
          break;
        }
        snprintf(runs[i].recipe, sizeof runs[i].recipe, "%.*s", (int)(eq - pos[i]), pos[i]);
        dir = eq + 1;
      }
      if (strlen(dir) >= sizeof runs[i].dir) {
        rc = ufp4_fail(UFP4_EINVAL, "report: run folder path is too long");
        break;
      }
      snprintf(runs[i].dir, sizeof runs[i].dir, "%s", dir);
      runs[i].seed = -1;
    }
    n = (size_t)npos;
  }
  free(pos);
  char *cmd = command_line(argc, argv);
  opt.command = cmd;
  ufp4_report *rep = NULL;
  if (!rc) rc = ufp4_report_build(runs, n, &opt, &rep);
  if (!rc) rc = ufp4_report_write(rep, out);
  if (!rc) {
    ufp4_report_print_table(rep, stdout);
    printf("\n%s.\nreport: %s/report.md, %s/report.html, %s/report.json\n", rep->plot_note, out, out, out);
  } else {
    fprintf(stderr, "ufp4 report: %s\n", ufp4_last_error());
  }
  ufp4_report_free(rep);
  free(runs);
  free(cmd);
  return rc ? 1 : 0;
}
