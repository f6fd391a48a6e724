/* ufp4 compare: the same model, data, order and schedule under BF16 and each 4-bit recipe, over
 * several seeds, with an fp32 control; then the report (report.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_share.h"
#include "cli/train_flags.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/recipe.h"
#include "ufp4/report.h"
#include "ufp4/train.h"
#include "core/timer.h"

#define MAX_RECIPES 64

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 compare --data DIR --out REPORT [--recipes bf16,e2m1,nvfp4,ufp4] [--seeds N]\n"
          "                    [--final-steps N] [--ablation rht-scope|sr-scope] [--no-control] [train flags]\n\n"
          "Trains the same model on the same data in the same order under each recipe and seed, plus the\n"
          "bf16 baseline and an fp32 control (the noise floor of the metric), then writes REPORT/report.md,\n"
          "report.html, report.json and plots, and prints the table. Seed s of every recipe shares the init,\n"
          "the data order and the stochastic-rounding streams. Under mpirun the runs are shared out over the\n"
          "ranks (docs/DISTRIBUTED.md) and the report is the same.\n\n"
          "  --recipes LIST      recipes to compare with bf16 (';'-separated when a spec holds commas)\n"
          "  --seeds N           seeds per recipe (default 3): seed, seed+1, ...\n"
          "  --final-steps N     averaging window of the relative error (default: last 20%% of the steps)\n"
          "  --ablation KIND     rht-scope: each recipe with RHT on none, wgrad, dgrad+wgrad, fprop+wgrad,\n"
          "                      all (the paper's Table 2); sr-scope: each recipe with SR on dy and none\n"
          "  --no-control        skip the fp32 control\n"
          "  --diag-every N      diagnostics every N steps (default: 4 times per run)\n\n"
          "train flags (as ufp4 train):\n");
  ufp4_train_flags_usage(out);
}

typedef struct {
  char spec[512];
  char label[512];
} recipe_entry;

static int add_recipe(recipe_entry *list, int *n, const char *spec) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(list[i].spec, spec)) return 0;
  if (*n >= MAX_RECIPES) return ufp4_fail(UFP4_EINVAL, "compare: more than %d recipes", MAX_RECIPES);
  if (strlen(spec) >= sizeof list[*n].spec) return ufp4_fail(UFP4_EINVAL, "compare: recipe spec too long: %s", spec);
  ufp4_recipe r;
  int rc = ufp4_recipe_parse(spec, &r);
  if (rc) return rc;
  strcpy(list[*n].spec, spec);
  strcpy(list[*n].label, spec);
  (*n)++;
  return 0;
}

/* A folder name for a recipe spec: letters, digits, '-', '.' kept; everything else '_'. */
static void dir_name(const char *spec, char *out, size_t size) {
  size_t j = 0;
  for (size_t i = 0; spec[i] && j + 1 < size; i++) {
    char ch = spec[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.';
    out[j++] = ok ? ch : '_';
  }
  out[j] = '\0';
}

static int expand_ablation(const char *kind, recipe_entry *base, int n_base, recipe_entry *out, int *n) {
  static const char *const rht[] = {"none", "wgrad", "dgrad+wgrad", "fprop+wgrad", "all"};
  static const char *const sr[] = {"dy", "none"};
  const char *const *v;
  int nv;
  const char *key;
  if (!strcmp(kind, "rht-scope")) {
    v = rht;
    nv = 5;
    key = "rht";
  } else if (!strcmp(kind, "sr-scope")) {
    v = sr;
    nv = 2;
    key = "sr";
  } else {
    return ufp4_fail(UFP4_EINVAL, "compare: --ablation %s: expected rht-scope or sr-scope", kind);
  }
  for (int b = 0; b < n_base; b++) {
    ufp4_recipe r;
    int rc = ufp4_recipe_parse(base[b].spec, &r);
    if (rc) return rc;
    if (r.precision != UFP4_PREC_FP4) continue; /* bf16/fp32 have no RHT or SR to vary */
    for (int k = 0; k < nv; k++) {
      char spec[sizeof base[b].spec + 32];
      snprintf(spec, sizeof spec, "%.511s,%.8s=%.16s", base[b].spec, key, v[k]);
      if ((rc = add_recipe(out, n, spec))) return rc;
    }
  }
  return 0;
}

static void split_list(const char *list, recipe_entry *out, int *n, int *rc) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", list);
  const char *sep = strchr(buf, ';') ? ";" : ",";
  char *save = NULL;
  for (char *tok = strtok_r(buf, sep, &save); tok && !*rc; tok = strtok_r(NULL, sep, &save)) *rc = add_recipe(out, n, tok);
}

int ufp4_cmd_compare(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_train_config base = ufp4_train_config_default();
  base.eval_every = 0;
  base.diag_every = -1; /* -1: chosen below from the run length */
  const char *data_dir = NULL, *out_dir = NULL, *recipes = "bf16,e2m1,nvfp4,ufp4", *ablation = NULL;
  long seeds = 3, final_steps = 0;
  int control = 1;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--data", &v)) > 0) data_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0) out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0) recipes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--ablation", &v)) > 0) ablation = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--seeds", &v)) > 0) {
      if (cli_parse_long("compare", "--seeds", v, 1, 1000, &seeds)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--final-steps", &v)) > 0) {
      if (cli_parse_long("compare", "--final-steps", v, 1, 1 << 30, &final_steps)) return 2;
    } else if (!r && cli_flag(argv, i, "--no-control")) {
      control = 0;
    } else if (!r) {
      r = ufp4_train_flags_parse_or_fail("compare", argc, argv, &i, &base);
    }
    if (r < 0) return 2;
  }
  if (!data_dir || !out_dir) {
    usage(stderr);
    return 2;
  }
  /* The baseline and the control first, then the recipes (or their ablation rows). */
  recipe_entry list[MAX_RECIPES], asked[MAX_RECIPES];
  int n = 0, n_asked = 0, rc = add_recipe(list, &n, "bf16");
  if (!rc && control) rc = add_recipe(list, &n, "fp32");
  if (!rc) split_list(recipes, asked, &n_asked, &rc);
  if (!rc && ablation) rc = expand_ablation(ablation, asked, n_asked, list, &n);
  for (int i = 0; !rc && !ablation && i < n_asked; i++) rc = add_recipe(list, &n, asked[i].spec);
  if (rc) {
    fprintf(stderr, "ufp4 compare: %s\n", ufp4_last_error());
    return 2;
  }
  if (base.diag_every < 0) base.diag_every = base.steps >= 4 ? base.steps / 4 : 1;
  if (!final_steps) final_steps = base.steps / 5 > 0 ? base.steps / 5 : 1;
  cli_run_share share;
  if ((rc = cli_run_share_begin(&share, base.threads)) || (rc = cli_run_share_agree(&share, ufp4_mkdirs(out_dir)))) {
    fprintf(stderr, "ufp4 compare: %s\n", ufp4_last_error());
    cli_run_share_end(&share);
    return 1;
  }
  const int rank0 = share.rank == 0;
  const int total_runs = n * (int)seeds;
  const int own_runs = cli_run_share_count(&share, total_runs);
  ufp4_report_run *runs = calloc((size_t)total_runs, sizeof *runs);
  if (!runs) {
    fprintf(stderr, "ufp4 compare: out of memory\n");
    cli_run_share_end(&share);
    return 1;
  }
  if (rank0)
    fprintf(stderr, "ufp4 compare: %d recipes x %ld seeds = %d runs of %d steps into %s%s\n", n, seeds, total_runs,
            base.steps, out_dir, share.world > 1 ? ", shared out over the ranks" : "");
  /* Progress and ETA come from rank 0's share, which is as long as any other's to within a run. */
  if (!rank0) base.progress = 0;
  const double t0 = ufp4_now_s();
  int done = 0, own_done = 0;
  for (long s = 0; s < seeds && !rc; s++) {
    for (int k = 0; k < n && !rc; k++) {
      const int mine = cli_run_share_mine(&share, done);
      ufp4_train_config cfg = base;
      cfg.seed = base.seed + (uint64_t)s;
      snprintf(cfg.recipe, sizeof cfg.recipe, "%.511s", list[k].spec);
      char name[400];
      dir_name(list[k].spec, name, sizeof name);
      snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s/runs/%s/seed%llu", out_dir, name, (unsigned long long)cfg.seed);
      snprintf(cfg.progress_label, sizeof cfg.progress_label, "run %d/%d %s seed %llu", own_done + 1, own_runs,
               list[k].label, (unsigned long long)cfg.seed);
      const double elapsed = ufp4_now_s() - t0;
      cfg.eta_after_s = own_done ? elapsed / own_done * (own_runs - own_done - 1) : 0;
      ufp4_train_result res;
      if (mine && (rc = ufp4_train_shards(&cfg, data_dir, 0, &res))) break;
      own_done += mine;
      ufp4_report_run *run = &runs[done++];
      snprintf(run->recipe, sizeof run->recipe, "%.255s", list[k].label);
      run->seed = (long long)cfg.seed;
      snprintf(run->dir, sizeof run->dir, "%s", cfg.out_dir);
    }
  }
  /* Every rank's runs are on disk (or one failed) before rank 0 reads them all. */
  if ((rc = cli_run_share_agree(&share, rc)) || !rank0) {
    if (rc && rank0) fprintf(stderr, "ufp4 compare: %s\n", ufp4_last_error());
    free(runs);
    cli_run_share_end(&share);
    return rc ? 1 : 0;
  }
  char command[8192] = "ufp4";
  size_t len = strlen(command);
  for (int i = 0; i < argc && len + 2 < sizeof command; i++)
    len += (size_t)snprintf(command + len, sizeof command - len, " %s", argv[i]);
  ufp4_report_options opt = ufp4_report_options_default();
  opt.final_steps = (int)final_steps;
  opt.control = control ? "fp32" : NULL;
  opt.command = command;
  ufp4_report *report = NULL;
  rc = ufp4_report_build(runs, (size_t)done, &opt, &report);
  if (!rc) rc = ufp4_report_write(report, out_dir);
  if (!rc) {
    ufp4_report_print_table(report, stdout);
    printf("\nreport: %s/report.html (and report.md, report.json); %.1f minutes\n", out_dir, (ufp4_now_s() - t0) / 60);
  }
  ufp4_report_free(report);
  free(runs);
  cli_run_share_end(&share);
  if (rc) {
    fprintf(stderr, "ufp4 compare: %s\n", ufp4_last_error());
    return 1;
  }
  return 0;
}
