/* ufp4 sweep: a scaling study -- model sizes x recipes -- with a power-law fit of loss against
 * training compute per recipe and the FP4-to-BF16 gap against compute. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_share.h"
#include "cli/train_flags.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/jsonnum.h"
#include "ufp4/plot.h"
#include "ufp4/recipe.h"
#include "ufp4/stats.h"
#include "ufp4/train.h"

#define MAX_SIZES 16
#define MAX_RECIPES 16

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
          "train flags (as ufp4 train):\n");
  ufp4_train_flags_usage(out);
}

typedef struct {
  int layers, width;
} size_spec;

static int parse_sizes(const char *s, size_spec *out, int *n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  *n = 0;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int l, w;
    char tail;
    if (*n >= MAX_SIZES || sscanf(t, "%dx%d%c", &l, &w, &tail) != 2 || l < 1 || w < 32 || w % 32)
      return ufp4_fail(UFP4_EINVAL, "sweep: --sizes: '%s' is not LAYERSxWIDTH with WIDTH a multiple of 32", t);
    out[(*n)++] = (size_spec){l, w};
  }
  return *n ? 0 : ufp4_fail(UFP4_EINVAL, "sweep: --sizes is empty");
}

int ufp4_cmd_sweep(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  ufp4_train_config base = ufp4_train_config_default();
  base.eval_every = 0;
  const char *data_dir = NULL, *out_dir = NULL, *sizes_arg = "2x64,2x128,4x128", *recipes_arg = "bf16,e2m1,ufp4";
  long seeds = 1;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--data", &v)) > 0) data_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0) out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--sizes", &v)) > 0) sizes_arg = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0) recipes_arg = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--seeds", &v)) > 0) {
      if (cli_parse_long("sweep", "--seeds", v, 1, 1000, &seeds)) return 2;
    } else if (!r) {
      r = ufp4_train_flags_parse_or_fail("sweep", argc, argv, &i, &base);
    }
    if (r < 0) return 2;
  }
  if (!data_dir || !out_dir) {
    usage(stderr);
    return 2;
  }
  size_spec sizes[MAX_SIZES];
  int ns, nr = 0;
  char rbuf[2048], *recipes[MAX_RECIPES];
  snprintf(rbuf, sizeof rbuf, "%s", recipes_arg);
  const char *sep = strchr(rbuf, ';') ? ";" : ",";
  char *save = NULL;
  int rc = parse_sizes(sizes_arg, sizes, &ns);
  for (char *t = strtok_r(rbuf, sep, &save); t && !rc; t = strtok_r(NULL, sep, &save)) {
    ufp4_recipe r;
    if (nr >= MAX_RECIPES) rc = ufp4_fail(UFP4_EINVAL, "sweep: more than %d recipes", MAX_RECIPES);
    else if (!(rc = ufp4_recipe_parse(t, &r))) recipes[nr++] = t;
  }
  int bf16 = -1;
  for (int k = 0; k < nr; k++)
    if (!strcmp(recipes[k], "bf16")) bf16 = k;
  if (!rc && bf16 < 0) rc = ufp4_fail(UFP4_EINVAL, "sweep: --recipes must include bf16, the reference of the gap");
  if (!rc) rc = ufp4_mkdirs(out_dir);
  if (rc) {
    fprintf(stderr, "ufp4 sweep: %s\n", ufp4_last_error());
    return rc == UFP4_EINVAL ? 2 : 1;
  }
  double loss[MAX_SIZES][MAX_RECIPES] = {{0}}, flops[MAX_SIZES] = {0};
  size_t params[MAX_SIZES] = {0};
  const int total = ns * nr * (int)seeds;
  /* The final loss of run j, filled by the rank that runs it and then summed over the ranks. */
  double *run_loss = calloc((size_t)total, sizeof *run_loss);
  cli_run_share share;
  if (!run_loss || (rc = cli_run_share_begin(&share, base.threads))) {
    fprintf(stderr, "ufp4 sweep: %s\n", run_loss ? ufp4_last_error() : "out of memory");
    free(run_loss);
    return 1;
  }
  const int own_total = cli_run_share_count(&share, total);
  if (share.rank) base.progress = 0;
  int done = 0, own_done = 0;
  for (int si = 0; si < ns && !rc; si++) {
    for (int k = 0; k < nr && !rc; k++) {
      for (long s = 0; s < seeds && !rc; s++, done++) {
        ufp4_train_config cfg = base;
        cfg.model.n_layers = sizes[si].layers;
        cfg.model.d_model = sizes[si].width;
        cfg.model.n_heads = sizes[si].width / 32;
        cfg.model.n_kv_heads = 0;
        cfg.model.ffn_dim = 3 * sizes[si].width;
        cfg.seed = base.seed + (uint64_t)s;
        snprintf(cfg.recipe, sizeof cfg.recipe, "%s", recipes[k]);
        snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s/runs/%dx%d/%s/seed%llu", out_dir, sizes[si].layers,
                 sizes[si].width, recipes[k], (unsigned long long)cfg.seed);
        snprintf(cfg.progress_label, sizeof cfg.progress_label, "run %d/%d %dx%d %s seed %llu", own_done + 1,
                 own_total, sizes[si].layers, sizes[si].width, recipes[k], (unsigned long long)cfg.seed);
        params[si] = ufp4_model_param_count(&cfg.model) - (size_t)cfg.model.vocab * cfg.model.d_model;
        flops[si] = 6.0 * (double)params[si] * cfg.steps * cfg.batch * cfg.grad_accum * cfg.model.seq_len;
        if (!cli_run_share_mine(&share, done)) continue;
        ufp4_train_result res;
        if ((rc = ufp4_train_shards(&cfg, data_dir, 0, &res))) break;
        run_loss[done] = isnan(res.final_val_loss) ? res.final_loss : res.final_val_loss;
        own_done++;
      }
    }
  }
  if (!(rc = cli_run_share_agree(&share, rc))) rc = cli_run_share_gather(&share, run_loss, (size_t)total);
  if (rc || share.rank) {
    if (rc && !share.rank) fprintf(stderr, "ufp4 sweep: %s\n", ufp4_last_error());
    free(run_loss);
    cli_run_share_end(&share);
    return rc ? 1 : 0;
  }
  cli_run_share_end(&share);
  for (int j = 0; j < total; j++) loss[j / (nr * (int)seeds)][j / (int)seeds % nr] += run_loss[j] / seeds;
  free(run_loss);
  ufp4_power_fit fits[MAX_RECIPES];
  int fitted[MAX_RECIPES] = {0};
  for (int k = 0; k < nr; k++) {
    double L[MAX_SIZES];
    for (int si = 0; si < ns; si++) L[si] = loss[si][k];
    fitted[k] = ns >= 3 && ufp4_fit_power_law(flops, L, (size_t)ns, 0, 0, &fits[k]) == 0;
  }
  /* Tables: terminal, markdown, json, and the plot data. */
  char *md = NULL, *json = NULL, *dat = NULL;
  size_t mdn = 0, jn = 0, dn = 0;
  FILE *M = open_memstream(&md, &mdn), *J = open_memstream(&json, &jn), *D = open_memstream(&dat, &dn);
  if (!M || !J || !D) {
    fprintf(stderr, "ufp4 sweep: out of memory\n");
    return 1;
  }
  fprintf(M, "# Scaling sweep\n\nFinal validation loss (mean over %ld seed%s), %d steps of %d x %d tokens.\n\n", seeds,
          seeds > 1 ? "s" : "", base.steps, base.batch * base.grad_accum, base.model.seq_len);
  fprintf(M, "| size | params (non-emb.) | C (FLOPs) |");
  for (int k = 0; k < nr; k++) fprintf(M, " %s |", recipes[k]);
  for (int k = 0; k < nr; k++)
    if (k != bf16) fprintf(M, " gap %s |", recipes[k]);
  fprintf(M, "\n|---|---|---|");
  for (int k = 0; k < 2 * nr - 1; k++) fprintf(M, "---|");
  fprintf(M, "\n");
  fprintf(J, "{\"sizes\":[");
  fprintf(D, "# C");
  for (int k = 0; k < nr; k++) fprintf(D, " L[%s]", recipes[k]);
  for (int k = 0; k < nr; k++) fprintf(D, " gap[%s]", recipes[k]);
  fprintf(D, "\n");
  for (int si = 0; si < ns; si++) {
    fprintf(M, "| %dx%d | %zu | %.3g |", sizes[si].layers, sizes[si].width, params[si], flops[si]);
    fprintf(J, "%s{\"layers\":%d,\"width\":%d,\"params\":%zu,\"flops\":%.6g,\"loss\":{", si ? "," : "", sizes[si].layers,
            sizes[si].width, params[si], flops[si]);
    fprintf(D, "%.6g", flops[si]);
    for (int k = 0; k < nr; k++) {
      char b[UFP4_JSONNUM_SIZE];
      fprintf(M, " %.4f |", loss[si][k]);
      fprintf(J, "%s\"%s\":%s", k ? "," : "", recipes[k], ufp4_json_num(b, loss[si][k]));
      fprintf(D, " %.9g", loss[si][k]);
    }
    for (int k = 0; k < nr; k++) {
      fprintf(D, " %.9g", loss[si][k] - loss[si][bf16]);
      if (k != bf16) fprintf(M, " %+.4f |", loss[si][k] - loss[si][bf16]);
    }
    fprintf(M, "\n");
    fprintf(J, "}}");
    fprintf(D, "\n");
  }
  fprintf(M, "\nFits L(C) = a C^-b + c (three parameters: with three sizes the fit is exact and says nothing of "
             "its error).\n\n| recipe | a | b | c | RMSE |\n|---|---|---|---|---|\n");
  fprintf(J, "],\"fits\":[");
  for (int k = 0; k < nr; k++) {
    char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE], c[UFP4_JSONNUM_SIZE];
    if (fitted[k]) fprintf(M, "| %s | %.4g | %.4f | %.4f | %.2e |\n", recipes[k], fits[k].a, fits[k].b, fits[k].c, fits[k].rmse);
    else fprintf(M, "| %s | - | - | - | not fitted (needs 3 sizes) |\n", recipes[k]);
    fprintf(J, "%s{\"recipe\":\"%s\",\"a\":%s,\"b\":%s,\"c\":%s}", k ? "," : "", recipes[k],
            ufp4_json_num(a, fitted[k] ? fits[k].a : NAN), ufp4_json_num(b, fitted[k] ? fits[k].b : NAN),
            ufp4_json_num(c, fitted[k] ? fits[k].c : NAN));
  }
  fprintf(J, "]}\n");
  fclose(M);
  fclose(J);
  fclose(D);
  char path[4200];
  snprintf(path, sizeof path, "%s/sweep.md", out_dir);
  rc = ufp4_write_file_atomic(path, md, mdn);
  snprintf(path, sizeof path, "%s/sweep.json", out_dir);
  if (!rc) rc = ufp4_write_file_atomic(path, json, jn);
  snprintf(path, sizeof path, "%s/sweep.dat", out_dir);
  if (!rc) rc = ufp4_write_file_atomic(path, dat, dn);
  fwrite(md, 1, mdn, stdout);
  free(md);
  free(json);
  free(dat);
  if (!rc) {
    char body[8192];
    size_t bl = (size_t)snprintf(body, sizeof body, "set logscale x\nset xlabel 'training FLOPs C'\nset ylabel 'final val loss'\nplot ");
    for (int k = 0; k < nr && bl < sizeof body; k++) {
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s'sweep.dat' using 1:%d with points pt 7 title '%s'", k ? ", " : "",
                             2 + k, recipes[k]);
      if (fitted[k] && bl < sizeof body)
        bl += (size_t)snprintf(body + bl, sizeof body - bl, ", %.9g*x**(-%.9g)+%.9g with lines dt 2 title 'fit %s'",
                               fits[k].a, fits[k].b, fits[k].c, recipes[k]);
    }
    if (bl < sizeof body) snprintf(body + bl, sizeof body - bl, "\n");
    int p = ufp4_plot_gnuplot(out_dir, "sweep_loss", body, 900, 520);
    bl = (size_t)snprintf(body, sizeof body, "set logscale x\nset xlabel 'training FLOPs C'\nset ylabel 'L - L_bf16'\nplot ");
    for (int k = 0, first = 1; k < nr && bl < sizeof body; k++) {
      if (k == bf16) continue;
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s'sweep.dat' using 1:%d with linespoints title '%s'",
                             first ? "" : ", ", 2 + nr + k, recipes[k]);
      first = 0;
    }
    if (bl < sizeof body) snprintf(body + bl, sizeof body - bl, "\n");
    if (p >= 0) p = ufp4_plot_gnuplot(out_dir, "sweep_gap", body, 900, 520);
    if (p < 0) rc = p;
    printf("\n%s/sweep.md%s\n", out_dir, p > 0 ? " (plots not drawn: gnuplot missing or failed)" : ", sweep_loss.svg, sweep_gap.svg");
  }
  if (rc) {
    fprintf(stderr, "ufp4 sweep: %s\n", ufp4_last_error());
    return 1;
  }
  return 0;
}
