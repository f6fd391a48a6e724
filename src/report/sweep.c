/* A scaling study: plan the grid, train this rank's share, gather, fit (ufp4/sweep.h). */
#include "ufp4/sweep.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "report/run_resume.h"
#include "report/run_share.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/jsonnum.h"
#include "ufp4/plot.h"
#include "ufp4/recipe.h"

ufp4_sweep_options ufp4_sweep_options_default(void) {
  ufp4_sweep_options o = {
      .sizes = "2x64,2x128,4x128", .recipes = "bf16,e2m1,ufp4", .seeds = 1, .log = stderr};
  o.train = ufp4_train_config_default();
  o.train.eval_every = 0;
  o.train.ckpt_every = -1;
  o.train.keep_ckpts = 1;
  return o;
}

static int parse_sizes(const char *s, ufp4_sweep_result *res) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  res->n_sizes = 0;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int l, w;
    char tail;
    if (res->n_sizes >= UFP4_SWEEP_MAX_SIZES || sscanf(t, "%dx%d%c", &l, &w, &tail) != 2 || l < 1 ||
        w < 32 || w % 32)
      return ufp4_fail(UFP4_EINVAL,
                       "sweep: --sizes: '%s' is not LAYERSxWIDTH with WIDTH a multiple of 32", t);
    res->size[res->n_sizes++] = (ufp4_sweep_size){.layers = l, .width = w};
  }
  return res->n_sizes ? 0 : ufp4_fail(UFP4_EINVAL, "sweep: --sizes is empty");
}

static int parse_recipes(const char *list, ufp4_sweep_result *res) {
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", list);
  const char *sep = strchr(buf, ';') ? ";" : ",";
  char *save = NULL;
  int rc = 0;
  res->n_recipes = 0;
  res->bf16 = -1;
  for (char *t = strtok_r(buf, sep, &save); t && !rc; t = strtok_r(NULL, sep, &save)) {
    ufp4_recipe r;
    if (res->n_recipes >= UFP4_SWEEP_MAX_RECIPES)
      rc = ufp4_fail(UFP4_EINVAL, "sweep: more than %d recipes", UFP4_SWEEP_MAX_RECIPES);
    else if (strlen(t) >= sizeof res->recipe[0])
      rc = ufp4_fail(UFP4_EINVAL, "sweep: recipe spec too long: %s", t);
    else if (!(rc = ufp4_recipe_parse(t, &r)))
      strcpy(res->recipe[res->n_recipes++], t);
  }
  for (int k = 0; k < res->n_recipes; k++)
    if (!strcmp(res->recipe[k], "bf16")) res->bf16 = k;
  if (!rc && res->bf16 < 0)
    rc = ufp4_fail(UFP4_EINVAL, "sweep: --recipes must include bf16, the reference of the gap");
  return rc;
}

/* Every run folder (run_config) fits a run config's out_dir: a cut path would put two runs in one
 * folder. The longest has the largest seed. */
static int check_run_dirs(const ufp4_sweep_options *o, const ufp4_sweep_result *res) {
  const size_t room = sizeof o->train.out_dir;
  const unsigned long long seed = (unsigned long long)o->train.seed + (unsigned long long)o->seeds - 1;
  for (int si = 0; si < res->n_sizes; si++)
    for (int k = 0; k < res->n_recipes; k++) {
      const int len = snprintf(NULL, 0, "%s/runs/%dx%d/%s/seed%llu", o->out_dir, res->size[si].layers,
                               res->size[si].width, res->recipe[k], seed);
      if (len < 0 || (size_t)len >= room)
        return ufp4_fail(UFP4_EINVAL,
                         "sweep: the run folders would be longer than %zu bytes under the out "
                         "folder of %zu bytes (%.64s...)",
                         room - 1, strlen(o->out_dir), o->out_dir);
    }
  return 0;
}

/* The grid of o into res (sizes, recipes, token counts), without training. */
static int plan(const ufp4_sweep_options *o, ufp4_sweep_result *res) {
  memset(res, 0, sizeof *res);
  if (!o->data_dir || !o->out_dir)
    return ufp4_fail(UFP4_EINVAL, "sweep: a data and an out folder are required");
  if (o->seeds < 1 || o->seeds > UFP4_MAX_GRID_SEEDS)
    return ufp4_fail(UFP4_EINVAL, "sweep: seeds must be in 1..%d (got %d)", UFP4_MAX_GRID_SEEDS,
                     o->seeds);
  /* run_config keeps o->train's schedule: every run, the bf16 reference too, would train it. */
  if (o->train.schedule[0])
    return ufp4_fail(UFP4_EINVAL,
                     "sweep: the train schedule \"%.200s\" is set, but a sweep trains each recipe "
                     "without a schedule (ufp4 compare takes schedules as recipes)",
                     o->train.schedule);
  int rc = parse_sizes(o->sizes ? o->sizes : "", res);
  if (!rc) rc = parse_recipes(o->recipes ? o->recipes : "", res);
  if (!rc) rc = check_run_dirs(o, res);
  res->seeds = o->seeds;
  res->steps = o->train.steps;
  res->seqs_per_step = o->train.batch * o->train.grad_accum;
  res->seq_len = o->train.model.seq_len;
  return rc;
}

int ufp4_sweep_check(const ufp4_sweep_options *o) {
  ufp4_sweep_result *res = malloc(sizeof *res);
  if (!res) return ufp4_fail(UFP4_ENOMEM, "sweep: out of memory");
  int rc = plan(o, res);
  free(res);
  return rc;
}

/* The configuration of run (size si, recipe k, seed s); also fills the size's N and C. */
static ufp4_train_config run_config(const ufp4_sweep_options *o, ufp4_sweep_result *res, int si,
                                    int k, int s) {
  ufp4_train_config cfg = o->train;
  ufp4_resume_defaults(&cfg);
  ufp4_sweep_size *z = &res->size[si];
  cfg.model.n_layers = z->layers;
  cfg.model.d_model = z->width;
  cfg.model.n_heads = z->width / 32;
  cfg.model.n_kv_heads = 0;
  cfg.model.ffn_dim = 3 * z->width;
  cfg.seed = o->train.seed + (uint64_t)s;
  snprintf(cfg.recipe, sizeof cfg.recipe, "%s", res->recipe[k]);
  snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s/runs/%dx%d/%s/seed%llu", o->out_dir, z->layers,
           z->width, res->recipe[k], (unsigned long long)cfg.seed);
  z->params = ufp4_model_param_count(&cfg.model) - (size_t)cfg.model.vocab * cfg.model.d_model;
  z->flops = 6.0 * (double)z->params * cfg.steps * cfg.batch * cfg.grad_accum * cfg.model.seq_len;
  return cfg;
}

/* The grid being run: run j = (size si, recipe k, seed s), j in size, recipe, seed order. */
typedef struct {
  const ufp4_sweep_options *o;
  ufp4_sweep_result *res;
  ufp4_resume_grid resume;
  ufp4_resume_fate *fate; /* every run's, from ufp4_resume_plan */
} sweep_grid;

/* The configuration of run j (a ufp4_resume_config_fn). */
static int grid_config(void *ctx, int j, ufp4_train_config *cfg) {
  sweep_grid *g = ctx;
  const int seeds = g->o->seeds, nr = g->res->n_recipes;
  *cfg = run_config(g->o, g->res, j / (nr * seeds), j / seeds % nr, j % seeds);
  return 0;
}

/* This rank's runs, trained, resumed or (finished before) read; run_loss[j] = the final loss of
 * run j. */
static int train_share(sweep_grid *g, ufp4_run_share *share, double *run_loss) {
  const ufp4_sweep_options *o = g->o;
  ufp4_sweep_result *res = g->res;
  const int nr = res->n_recipes, total = res->n_sizes * nr * o->seeds;
  int own_total = 0, own_done = 0;
  for (int j = 0; j < total; j++)
    own_total += ufp4_run_share_mine(share, j) && g->fate[j] != UFP4_RESUME_DONE;
  for (int j = 0; j < total; j++) {
    const int si = j / (nr * o->seeds), k = j / o->seeds % nr;
    ufp4_train_config cfg;
    grid_config(g, j, &cfg);
    if (!ufp4_run_share_mine(share, j)) continue;
    snprintf(cfg.progress_label, sizeof cfg.progress_label, "run %d/%d %dx%d %s seed %llu%s",
             own_done + 1, own_total, res->size[si].layers, res->size[si].width, res->recipe[k],
             (unsigned long long)cfg.seed,
             g->fate[j] == UFP4_RESUME_FROM_CKPT ? " (resumed)" : "");
    if (share->rank) cfg.progress = 0;
    ufp4_train_result tr;
    int rc = ufp4_resume_train(&g->resume, &cfg, g->fate[j], &tr);
    if (rc) return rc;
    run_loss[j] = isnan(tr.final_val_loss) ? tr.final_loss : tr.final_val_loss;
    own_done += g->fate[j] != UFP4_RESUME_DONE;
  }
  return 0;
}

/* Seed means of the gathered losses, and the fit of each recipe over the sizes. */
static void fit_all(ufp4_sweep_result *res, const double *run_loss) {
  const int nr = res->n_recipes, seeds = res->seeds, total = res->n_sizes * nr * seeds;
  for (int j = 0; j < total; j++)
    res->size[j / (nr * seeds)].loss[j / seeds % nr] += run_loss[j] / seeds;
  for (int k = 0; k < nr; k++) {
    double C[UFP4_SWEEP_MAX_SIZES], L[UFP4_SWEEP_MAX_SIZES];
    for (int si = 0; si < res->n_sizes; si++)
      C[si] = res->size[si].flops, L[si] = res->size[si].loss[k];
    res->fitted[k] = res->n_sizes >= 3 &&
                     ufp4_fit_power_law(C, L, (size_t)res->n_sizes, 0, 0, &res->fit[k]) == 0;
  }
}

int ufp4_sweep_run(const ufp4_sweep_options *o, ufp4_sweep_result *res) {
  int rc = plan(o, res);
  if (rc) return rc;
  const int total = res->n_sizes * res->n_recipes * o->seeds;
  /* The final loss of run j, filled by the rank that runs it and then summed over the ranks. */
  double *run_loss = calloc((size_t)total, sizeof *run_loss);
  sweep_grid g = {.o = o, .res = res, .fate = calloc((size_t)total, sizeof *g.fate)};
  g.resume = (ufp4_resume_grid){.what = "sweep", .out_dir = o->out_dir, .data_dir = o->data_dir,
                                .log = o->log, .config = grid_config, .ctx = &g};
  if (!run_loss || !g.fate) rc = ufp4_fail(UFP4_ENOMEM, "sweep: out of memory");
  ufp4_run_share share;
  if (!rc && !(rc = ufp4_run_share_begin(&share, o->train.threads))) {
    res->rank = share.rank;
    rc = ufp4_run_share_agree(&share, ufp4_mkdirs(o->out_dir));
    if (!rc) rc = ufp4_resume_plan(&g.resume, &share, total, g.fate);
    if (!rc) rc = ufp4_run_share_agree(&share, train_share(&g, &share, run_loss));
    if (!rc) rc = ufp4_run_share_gather(&share, run_loss, (size_t)total);
  }
  if (!rc && !res->rank) {
    fit_all(res, run_loss);
    rc = ufp4_sweep_write(res, o->out_dir);
  }
  free(run_loss);
  free(g.fate);
  return rc;
}

static void sweep_md(const ufp4_sweep_result *res, ufp4_strbuf *b) {
  const int nr = res->n_recipes;
  ufp4_strbuf_printf(b,
                     "# Scaling sweep\n\nFinal validation loss (mean over %d seed%s), %d steps of "
                     "%d x %d tokens.\n\n",
                     res->seeds, res->seeds > 1 ? "s" : "", res->steps, res->seqs_per_step,
                     res->seq_len);
  ufp4_strbuf_puts(b, "| size | params (non-emb.) | C (FLOPs) |");
  for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " %s |", res->recipe[k]);
  for (int k = 0; k < nr; k++)
    if (k != res->bf16) ufp4_strbuf_printf(b, " gap %s |", res->recipe[k]);
  ufp4_strbuf_puts(b, "\n|---|---|---|");
  for (int k = 0; k < 2 * nr - 1; k++) ufp4_strbuf_puts(b, "---|");
  ufp4_strbuf_puts(b, "\n");
  for (int si = 0; si < res->n_sizes; si++) {
    const ufp4_sweep_size *z = &res->size[si];
    ufp4_strbuf_printf(b, "| %dx%d | %zu | %.3g |", z->layers, z->width, z->params, z->flops);
    for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " %.4f |", z->loss[k]);
    for (int k = 0; k < nr; k++)
      if (k != res->bf16) ufp4_strbuf_printf(b, " %+.4f |", z->loss[k] - z->loss[res->bf16]);
    ufp4_strbuf_puts(b, "\n");
  }
  ufp4_strbuf_puts(
      b,
      "\nFits L(C) = a C^-b + c (three parameters: with three sizes the fit is exact and says "
      "nothing of its error).\n\n| recipe | a | b | c | RMSE |\n|---|---|---|---|---|\n");
  for (int k = 0; k < nr; k++) {
    const ufp4_power_fit *f = &res->fit[k];
    if (res->fitted[k])
      ufp4_strbuf_printf(b, "| %s | %.4g | %.4f | %.4f | %.2e |\n", res->recipe[k], f->a, f->b,
                         f->c, f->rmse);
    else
      ufp4_strbuf_printf(b, "| %s | - | - | - | not fitted (needs 3 sizes) |\n", res->recipe[k]);
  }
}

static void sweep_json(const ufp4_sweep_result *res, ufp4_strbuf *b) {
  char x[UFP4_JSONNUM_SIZE], y[UFP4_JSONNUM_SIZE], z[UFP4_JSONNUM_SIZE];
  ufp4_strbuf_puts(b, "{\"sizes\":[");
  for (int si = 0; si < res->n_sizes; si++) {
    const ufp4_sweep_size *s = &res->size[si];
    ufp4_strbuf_printf(b, "%s{\"layers\":%d,\"width\":%d,\"params\":%zu,\"flops\":%.6g,\"loss\":{",
                       si ? "," : "", s->layers, s->width, s->params, s->flops);
    for (int k = 0; k < res->n_recipes; k++)
      ufp4_strbuf_printf(b, "%s\"%s\":%s", k ? "," : "", res->recipe[k],
                         ufp4_json_num(x, s->loss[k]));
    ufp4_strbuf_puts(b, "}}");
  }
  ufp4_strbuf_puts(b, "],\"fits\":[");
  for (int k = 0; k < res->n_recipes; k++) {
    const int ok = res->fitted[k];
    const ufp4_power_fit *f = &res->fit[k];
    ufp4_strbuf_printf(b, "%s{\"recipe\":\"%s\",\"a\":%s,\"b\":%s,\"c\":%s}", k ? "," : "",
                       res->recipe[k], ufp4_json_num(x, ok ? f->a : NAN),
                       ufp4_json_num(y, ok ? f->b : NAN), ufp4_json_num(z, ok ? f->c : NAN));
  }
  ufp4_strbuf_puts(b, "]}\n");
}

/* gnuplot data: C, then L per recipe, then L - L_bf16 per recipe (columns 2 + k, 2 + nr + k). */
static void sweep_dat(const ufp4_sweep_result *res, ufp4_strbuf *b) {
  const int nr = res->n_recipes;
  ufp4_strbuf_puts(b, "# C");
  for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " L[%s]", res->recipe[k]);
  for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " gap[%s]", res->recipe[k]);
  ufp4_strbuf_puts(b, "\n");
  for (int si = 0; si < res->n_sizes; si++) {
    const ufp4_sweep_size *z = &res->size[si];
    ufp4_strbuf_printf(b, "%.6g", z->flops);
    for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " %.9g", z->loss[k]);
    for (int k = 0; k < nr; k++) ufp4_strbuf_printf(b, " %.9g", z->loss[k] - z->loss[res->bf16]);
    ufp4_strbuf_puts(b, "\n");
  }
}

/* Draws one plot from a composed body; 0 plotted, 1 not (gnuplot missing), < 0 an error. */
static int plot(const char *out_dir, const char *name, ufp4_strbuf *body) {
  int p = body->oom ? ufp4_fail(UFP4_ENOMEM, "sweep: out of memory")
                    : ufp4_plot_gnuplot(out_dir, name, body->s, 900, 520);
  ufp4_strbuf_free(body);
  return p;
}

/* Loss against C per recipe with its fit, then the gap to bf16 against C. Returns as plot(),
 * for the gap plot (the loss plot's 1 does not stop the gap plot from being tried). */
static int sweep_plots(const ufp4_sweep_result *res, const char *out_dir) {
  ufp4_strbuf b = {0};
  ufp4_strbuf_puts(
      &b, "set logscale x\nset xlabel 'training FLOPs C'\nset ylabel 'final val loss'\nplot ");
  for (int k = 0; k < res->n_recipes; k++) {
    ufp4_strbuf_printf(&b, "%s'sweep.dat' using 1:%d with points pt 7 title '%s'", k ? ", " : "",
                       2 + k, res->recipe[k]);
    if (res->fitted[k])
      ufp4_strbuf_printf(&b, ", %.9g*x**(-%.9g)+%.9g with lines dt 2 title 'fit %s'", res->fit[k].a,
                         res->fit[k].b, res->fit[k].c, res->recipe[k]);
  }
  ufp4_strbuf_puts(&b, "\n");
  int p = plot(out_dir, "sweep_loss", &b);
  if (p < 0) return p;
  ufp4_strbuf_puts(&b,
                   "set logscale x\nset xlabel 'training FLOPs C'\nset ylabel 'L - L_bf16'\nplot ");
  for (int k = 0, first = 1; k < res->n_recipes; k++) {
    if (k == res->bf16) continue;
    ufp4_strbuf_printf(&b, "%s'sweep.dat' using 1:%d with linespoints title '%s'",
                       first ? "" : ", ", 2 + res->n_recipes + k, res->recipe[k]);
    first = 0;
  }
  ufp4_strbuf_puts(&b, "\n");
  return plot(out_dir, "sweep_gap", &b);
}

static int write_one(const ufp4_sweep_result *res, const char *out_dir, const char *file,
                     void (*compose)(const ufp4_sweep_result *, ufp4_strbuf *)) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", out_dir, file);
  ufp4_strbuf b = {0};
  compose(res, &b);
  return ufp4_strbuf_write(&b, path);
}

int ufp4_sweep_write(ufp4_sweep_result *res, const char *out_dir) {
  int rc = ufp4_mkdirs(out_dir);
  if (!rc) rc = write_one(res, out_dir, "sweep.md", sweep_md);
  if (!rc) rc = write_one(res, out_dir, "sweep.json", sweep_json);
  if (!rc) rc = write_one(res, out_dir, "sweep.dat", sweep_dat);
  if (rc) return rc;
  const int p = sweep_plots(res, out_dir);
  res->plotted = p == 0;
  return p < 0 ? p : 0;
}

void ufp4_sweep_print(const ufp4_sweep_result *res, FILE *f) {
  ufp4_strbuf b = {0};
  sweep_md(res, &b);
  if (b.s) fwrite(b.s, 1, b.n, f);
  ufp4_strbuf_free(&b);
}
