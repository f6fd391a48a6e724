/* A recipe comparison: plan the grid of runs, train this rank's share, report (ufp4/compare.h). */
#include "ufp4/compare.h"

#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/build_info.h"
#include "core/timer.h"
#include "report/report_load.h"
#include "report/run_resume.h"
#include "report/run_share.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/recipe.h"

#define MAX_RECIPES 64

typedef struct {
  char spec[MAX_RECIPES][512];
  int n;
} recipe_list;

ufp4_compare_options ufp4_compare_options_default(void) {
  ufp4_compare_options o = {
      .recipes = "bf16,e2m1,nvfp4,ufp4", .seeds = 3, .control = 1, .log = stderr};
  o.train = ufp4_train_config_default();
  o.train.eval_every = 0;
  o.train.diag_every = -1;
  o.train.ckpt_every = -1;
  o.train.keep_ckpts = 1;
  return o;
}

/* Appends spec unless it is already listed; it must parse as a recipe, or as a schedule
 * ("e2m1@0,bf16@0.9", ufp4_schedule_parse; whether its steps fit the run is checked when it
 * trains). */
static int add_recipe(recipe_list *l, const char *spec) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->spec[i], spec)) return 0;
  if (l->n >= MAX_RECIPES)
    return ufp4_fail(UFP4_EINVAL, "compare: more than %d recipes", MAX_RECIPES);
  if (strlen(spec) >= sizeof l->spec[0])
    return ufp4_fail(UFP4_EINVAL, "compare: recipe spec too long: %s", spec);
  ufp4_recipe r;
  ufp4_recipe_schedule *sched = strchr(spec, '@') ? malloc(sizeof *sched) : NULL;
  int rc = !strchr(spec, '@') ? ufp4_recipe_parse(spec, &r)
           : sched            ? ufp4_schedule_parse(spec, INT_MAX, sched)
                              : ufp4_fail(UFP4_ENOMEM, "compare: out of memory");
  free(sched);
  if (rc) return rc;
  strcpy(l->spec[l->n++], spec);
  return 0;
}

static int split_list(const char *list, recipe_list *out) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", list);
  /* ';' separates entries when any entry holds commas of its own: a schedule always does, so a
   * list with an '@' and no ';' is one schedule ("e2m1@0,bf16@0.9"), not three entries */
  const char *sep = strchr(buf, ';') || strchr(buf, '@') ? ";" : ",";
  char *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(buf, sep, &save); tok && !rc; tok = strtok_r(NULL, sep, &save))
    rc = add_recipe(out, tok);
  return rc;
}

static int expand_ablation(const char *kind, const recipe_list *base, recipe_list *out) {
  static const char *const rht[] = {"none", "wgrad", "dgrad+wgrad", "fprop+wgrad", "all"};
  static const char *const sr[] = {"dy", "none"};
  const int is_rht = !strcmp(kind, "rht-scope");
  if (!is_rht && strcmp(kind, "sr-scope"))
    return ufp4_fail(UFP4_EINVAL, "compare: --ablation %s: expected rht-scope or sr-scope", kind);
  const char *const *v = is_rht ? rht : sr;
  const int nv = is_rht ? 5 : 2;
  for (int b = 0; b < base->n; b++) {
    ufp4_recipe r;
    if (strchr(base->spec[b], '@')) /* which phase would the variants change? none is the obvious one */
      return ufp4_fail(UFP4_EINVAL, "compare: --ablation %s varies one recipe, and '%s' is a schedule; "
                       "give the ablation plain recipes", kind, base->spec[b]);
    int rc = ufp4_recipe_parse(base->spec[b], &r);
    if (rc) return rc;
    if (r.precision != UFP4_PREC_FP4) continue; /* bf16/fp32 have no RHT or SR to vary */
    for (int k = 0; k < nv; k++) {
      char spec[sizeof base->spec[b] + 32];
      snprintf(spec, sizeof spec, "%.511s,%.8s=%.16s", base->spec[b], is_rht ? "rht" : "sr", v[k]);
      if ((rc = add_recipe(out, spec))) return rc;
    }
  }
  return 0;
}

/* The baseline and the control first, then the recipes (or their ablation rows). */
static int plan(const ufp4_compare_options *o, recipe_list *list) {
  if (!o->data_dir || !o->out_dir)
    return ufp4_fail(UFP4_EINVAL, "compare: a data and an out folder are required");
  if (o->seeds < 1 || o->seeds > UFP4_MAX_GRID_SEEDS)
    return ufp4_fail(UFP4_EINVAL, "compare: seeds must be in 1..%d (got %d)", UFP4_MAX_GRID_SEEDS,
                     o->seeds);
  /* Each run's schedule is its entry's (run_config): one set for the whole grid would be dropped. */
  if (o->train.schedule[0])
    return ufp4_fail(UFP4_EINVAL,
                     "compare: the train schedule \"%.200s\" is set, but compare gives each run the "
                     "schedule of its entry in the recipe list (e.g. \"e2m1;e2m1@0,bf16@0.9\")",
                     o->train.schedule);
  recipe_list *asked = calloc(1, sizeof *asked);
  if (!asked) return ufp4_fail(UFP4_ENOMEM, "compare: out of memory");
  list->n = 0;
  int rc = add_recipe(list, "bf16");
  if (!rc && o->control) rc = add_recipe(list, "fp32");
  if (!rc) rc = split_list(o->recipes ? o->recipes : "", asked);
  if (!rc && o->ablation) rc = expand_ablation(o->ablation, asked, list);
  for (int i = 0; !rc && !o->ablation && i < asked->n; i++) rc = add_recipe(list, asked->spec[i]);
  free(asked);
  return rc;
}

int ufp4_compare_check(const ufp4_compare_options *o) {
  recipe_list *list = malloc(sizeof *list);
  if (!list) return ufp4_fail(UFP4_ENOMEM, "compare: out of memory");
  int rc = plan(o, list);
  free(list);
  return rc;
}

/* The grid being run: run j = (seed s, recipe k) with j = s * n + k. */
typedef struct {
  const ufp4_compare_options *o;
  const recipe_list *list;
  ufp4_train_config base; /* o->train with diag_every and ckpt_every resolved, progress on rank 0
                           * only */
  ufp4_run_share share;
  ufp4_resume_grid resume;
  ufp4_resume_fate *fate; /* every run's, from ufp4_resume_plan */
  ufp4_report_run *runs;  /* every run of the grid, whichever rank trains it */
  int own_runs, own_done; /* this rank's runs still to train, and those trained */
  double t0;
} grid;

/* The configuration of run j (a ufp4_resume_config_fn). */
static int run_config(void *ctx, int j, ufp4_train_config *cfg) {
  const grid *g = ctx;
  const int s = j / g->list->n;
  *cfg = g->base;
  cfg->seed = g->base.seed + (uint64_t)s;
  const char *spec = g->list->spec[j % g->list->n];
  /* A schedule is the run's schedule, and its first phase the run's recipe. */
  const char *at = strchr(spec, '@');
  snprintf(cfg->recipe, sizeof cfg->recipe, "%.*s", at ? (int)(at - spec) : 511, spec);
  snprintf(cfg->schedule, sizeof cfg->schedule, "%s", at ? spec : "");
  char name[400];
  rpt_recipe_dir_name(spec, name, sizeof name);
  char dir[sizeof cfg->out_dir + 1];
  const int len = snprintf(dir, sizeof dir, "%s/runs/%s/seed%llu", g->o->out_dir, name,
                           (unsigned long long)cfg->seed);
  /* A cut path would put two runs in one folder. */
  if (len < 0 || (size_t)len >= sizeof dir || ufp4_train_set_out_dir(cfg, dir))
    return ufp4_fail(UFP4_EINVAL,
                     "compare: the run folders would be longer than %zu bytes under the out "
                     "folder of %zu bytes (%.64s...)",
                     sizeof cfg->out_dir - 1, strlen(g->o->out_dir), g->o->out_dir);
  return 0;
}

/* Trains run j when it is this rank's (or takes it as done), and records it for the report
 * either way. */
static int grid_run(grid *g, int j) {
  ufp4_train_config cfg;
  int rc = run_config(g, j, &cfg);
  if (rc) return rc;
  const char *spec = cfg.schedule[0] ? cfg.schedule : cfg.recipe; /* the entry, as listed */
  if (ufp4_run_share_mine(&g->share, j)) {
    const int train = g->fate[j] != UFP4_RESUME_DONE;
    snprintf(cfg.progress_label, sizeof cfg.progress_label, "run %d/%d %.60s seed %llu%s",
             g->own_done + 1, g->own_runs, spec, (unsigned long long)cfg.seed,
             g->fate[j] == UFP4_RESUME_FROM_CKPT ? " (resumed)" : "");
    /* Progress and ETA come from rank 0's share, which is as long as any other's to within a
     * run. */
    const double elapsed = ufp4_now_s() - g->t0;
    cfg.eta_after_s = g->own_done ? elapsed / g->own_done * (g->own_runs - g->own_done - 1) : 0;
    ufp4_train_result res;
    if ((rc = ufp4_resume_train(&g->resume, &cfg, g->fate[j], &res))) return rc;
    g->own_done += train;
  }
  ufp4_report_run *run = &g->runs[j];
  snprintf(run->recipe, sizeof run->recipe, "%.255s", spec);
  run->seed = (long long)cfg.seed;
  snprintf(run->dir, sizeof run->dir, "%s", cfg.out_dir);
  return 0;
}

/* Every run on every rank; 0 only when all of them, on all ranks, succeeded. */
static int grid_train(grid *g, int total) {
  int rc = 0;
  for (int j = 0; j < total && !rc; j++) rc = grid_run(g, j);
  /* Every rank's runs are on disk (or one failed) before rank 0 reads them all. */
  return ufp4_run_share_agree(&g->share, rc);
}

static int report(const grid *g, int total, ufp4_compare_result *res) {
  const ufp4_compare_options *o = g->o;
  ufp4_report_options opt = ufp4_report_options_default();
  opt.final_steps =
      o->final_steps ? o->final_steps : (o->train.steps / 5 > 0 ? o->train.steps / 5 : 1);
  opt.control = o->control ? "fp32" : NULL;
  opt.command = o->command;
  opt.target_effect = o->target_effect;
  /* Every run's, by ufp4_resume_plan; with --same-bits-as, the commits its runs may also carry. */
  char commit[512];
  if (o->same_bits_as && o->same_bits_as[0])
    snprintf(commit, sizeof commit, "%s (runs of %s kept: the same bits)", ufp4_build_commit(),
             o->same_bits_as);
  else
    snprintf(commit, sizeof commit, "%s", ufp4_build_commit());
  opt.commit = commit;
  return ufp4_report_make(g->runs, (size_t)total, &opt, o->out_dir, &res->report);
}

static void log_plan(const grid *g, int total) {
  const ufp4_compare_options *o = g->o;
  if (!o->log || g->share.rank) return;
  fprintf(o->log, "ufp4 compare: %d recipes x %d seeds = %d runs of %d steps into %s%s\n",
          g->list->n, o->seeds, total, g->base.steps, o->out_dir,
          g->share.world > 1 ? ", shared out over the ranks" : "");
}

static int compare(grid *g, ufp4_compare_result *res) {
  const int total = g->list->n * g->o->seeds;
  res->n_recipes = g->list->n;
  res->n_runs = total;
  g->runs = calloc((size_t)total, sizeof *g->runs);
  g->fate = calloc((size_t)total, sizeof *g->fate);
  int rc = g->runs && g->fate ? 0 : ufp4_fail(UFP4_ENOMEM, "compare: out of memory");
  if (!rc) {
    log_plan(g, total);
    g->resume = (ufp4_resume_grid){.what = "compare", .out_dir = g->o->out_dir,
                                   .data_dir = g->o->data_dir, .log = g->o->log,
                                   .config = run_config, .ctx = g,
                                   .same_bits_as = g->o->same_bits_as};
    rc = ufp4_resume_plan(&g->resume, &g->share, total, g->fate);
  }
  for (int j = 0; !rc && j < total; j++)
    g->own_runs += ufp4_run_share_mine(&g->share, j) && g->fate[j] != UFP4_RESUME_DONE;
  if (!rc) rc = grid_train(g, total);
  if (!rc && !g->share.rank) rc = report(g, total, res);
  free(g->runs);
  free(g->fate);
  return rc;
}

int ufp4_compare_run(const ufp4_compare_options *o, ufp4_compare_result *res) {
  memset(res, 0, sizeof *res);
  grid *g = calloc(1, sizeof *g);
  recipe_list *list = malloc(sizeof *list);
  int rc = !g || !list ? ufp4_fail(UFP4_ENOMEM, "compare: out of memory") : plan(o, list);
  if (rc) {
    free(g);
    free(list);
    return rc;
  }
  *g = (grid){.o = o, .list = list, .base = o->train, .t0 = ufp4_now_s()};
  if (g->base.diag_every < 0) g->base.diag_every = g->base.steps >= 4 ? g->base.steps / 4 : 1;
  ufp4_resume_defaults(&g->base);
  if (!(rc = ufp4_run_share_begin(&g->share, g->base.threads))) {
    res->rank = g->share.rank;
    if (g->share.rank) g->base.progress = 0;
    if (!(rc = ufp4_run_share_agree(&g->share, ufp4_mkdirs(o->out_dir)))) rc = compare(g, res);
  }
  res->seconds = ufp4_now_s() - g->t0;
  free(g);
  free(list);
  if (rc) ufp4_compare_result_free(res);
  return rc;
}

void ufp4_compare_result_free(ufp4_compare_result *res) {
  ufp4_report_free(res->report);
  res->report = NULL;
}
