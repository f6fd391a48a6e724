/* ufp4 drift: forward and backward drift through depth of a trained checkpoint under each recipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/jsonnum.h"
#include "ufp4/model_io.h"
#include "ufp4/plot.h"

#define MAX_RECIPES 16

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: ufp4 drift --checkpoint DIR --data SHARD --out OUTDIR [--recipes e2m1,nvfp4,ufp4]\n"
      "                  [--mode forward|backward|both] [--batches N] [--batch B]\n\n"
      "At the checkpoint's fixed weights, runs N validation batches (default 4) of B sequences\n"
      "(default 4) in fp32 and under each recipe (same weights and tokens) and measures, per point,\n"
      "the mean over batches with its 95%% t interval (printed: the means and each slope's interval;\n"
      "drift.json and the plots: the intervals too):\n"
      "  forward   per block l, the residual stream after it: ||h_q||/||h|| and the cosine\n"
      "            (l = 0: the embeddings);\n"
      "  backward  per block l, dX = dloss/d(residual stream at the input of block l) of the\n"
      "            recipe's training backward (all three GEMMs rounded, stochastic rounding drawn\n"
      "            per batch) against the exact backward: ||dX_q||/||dX|| and the cosine (l = L:\n"
      "            the input of the final norm); and the same for the gradient dW of every tensor;\n"
      "  slope     per recipe, the slope of ln(ratio) per block crossed (negative: compounding\n"
      "            shrinkage).\n"
      "--mode both (the default) costs no more than backward: the backward needs the forward.\n"
      "Writes OUTDIR/drift.json (everything, per-batch values included), drift.dat and the plot\n"
      "drift.svg/png (forward), drift_backward.dat and drift_backward.svg/png (dX). SHARD is a\n"
      ".tok file or a folder holding val.tok. Recipes are ';'-separated when a spec holds commas.\n");
}

typedef struct {
  const char *ckpt, *data, *out_dir, *recipes, *mode;
  int forward, backward; /* what --mode asks to report */
  long batches, batch;
  char list[4096]; /* recipes, split in place */
  const char *names[MAX_RECIPES];
  int n;
} drift_opts;

/* Splits the recipe list at ';' when it holds one (specs may hold commas), else at ','. */
static int split_recipes(drift_opts *o) {
  snprintf(o->list, sizeof o->list, "%s", o->recipes);
  const char *sep = strchr(o->list, ';') ? ";" : ",";
  char *save = NULL;
  o->n = 0;
  for (char *t = strtok_r(o->list, sep, &save); t; t = strtok_r(NULL, sep, &save)) {
    if (o->n == MAX_RECIPES) {
      fprintf(stderr, "ufp4 drift: --recipes: at most %d recipes\n", MAX_RECIPES);
      return 2;
    }
    o->names[o->n++] = t;
  }
  if (o->n) return 0;
  fprintf(stderr, "ufp4 drift: --recipes: no recipe in '%s'\n", o->recipes);
  return 2;
}

/* --mode into o->forward / o->backward; 2 after a usage error. */
static int parse_mode(drift_opts *o) {
  o->forward = !strcmp(o->mode, "forward") || !strcmp(o->mode, "both");
  o->backward = !strcmp(o->mode, "backward") || !strcmp(o->mode, "both");
  if (o->forward || o->backward) return 0;
  fprintf(stderr, "ufp4 drift: --mode: '%s' is not forward, backward or both\n", o->mode);
  return 2;
}

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, drift_opts *o) {
  memset(o, 0, sizeof *o);
  o->recipes = "e2m1,nvfp4,ufp4";
  o->mode = "both";
  o->batches = o->batch = 4;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0)
      o->ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--data", &v)) > 0)
      o->data = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0)
      o->out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0)
      o->recipes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--mode", &v)) > 0)
      o->mode = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--batches", &v)) > 0) {
      if (cli_parse_long("drift", "--batches", v, 1, 1 << 20, &o->batches)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--batch", &v)) > 0) {
      if (cli_parse_long("drift", "--batch", v, 1, 1 << 20, &o->batch)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 drift: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!o->ckpt || !o->data || !o->out_dir) {
    usage(stderr);
    return 2;
  }
  return parse_mode(o) ? 2 : split_recipes(o);
}

/* A .dat file of one ratio/cosine pair of series: point, then (ratio, cosine) means per recipe
 * (drift.dat's columns since before the intervals), then (ratio low, high, cosine low, high) per
 * recipe: recipe k's means are columns 2 + 2k and 3 + 2k, its bounds 2 + 2n + 4k .. 5 + 2n + 4k. */
static void write_dat(const drift_opts *o, const ufp4_drift_series *ratio,
                      const ufp4_drift_series *cosine, FILE *dat) {
  fprintf(dat, "# point");
  for (int k = 0; k < o->n; k++) fprintf(dat, " ratio[%s] cosine[%s]", o->names[k], o->names[k]);
  for (int k = 0; k < o->n; k++)
    fprintf(dat, " ratio_lo[%s] ratio_hi[%s] cosine_lo[%s] cosine_hi[%s]", o->names[k],
            o->names[k], o->names[k], o->names[k]);
  fprintf(dat, "\n");
  for (int l = 0; l < ratio->n_points; l++) {
    fprintf(dat, "%d", l);
    for (int k = 0; k < o->n; k++)
      fprintf(dat, " %.9g %.9g", ufp4_drift_at(ratio, k, l)->mean, ufp4_drift_at(cosine, k, l)->mean);
    for (int k = 0; k < o->n; k++) {
      const ufp4_drift_ci *r = ufp4_drift_at(ratio, k, l), *c = ufp4_drift_at(cosine, k, l);
      fprintf(dat, " %.9g %.9g %.9g %.9g", r->ci_low, r->ci_high, c->ci_low, c->ci_high);
    }
    fprintf(dat, "\n");
  }
}

/* The means of a ratio/cosine pair on stdout, one row per point, and the slope line. */
static void print_points(const drift_opts *o, const char *title, const char *ratio_label,
                         const ufp4_drift_series *ratio, const ufp4_drift_series *cosine,
                         const ufp4_drift_series *slope) {
  printf("%s\n%6s", title, "point");
  for (int k = 0; k < o->n; k++) printf("  %22.22s", o->names[k]);
  printf("\n%6s", "");
  for (int k = 0; k < o->n; k++) printf("  %10s %11s", ratio_label, "cosine");
  printf("\n");
  for (int l = 0; l < ratio->n_points; l++) {
    printf("%6d", l);
    for (int k = 0; k < o->n; k++)
      printf("  %10.6f %11.8f", ufp4_drift_at(ratio, k, l)->mean, ufp4_drift_at(cosine, k, l)->mean);
    printf("\n");
  }
  printf("slope of ln ratio per block crossed, mean [95%% CI]:");
  for (int k = 0; k < o->n; k++) {
    const ufp4_drift_ci *s = ufp4_drift_at(slope, k, 0);
    printf("  %s %.3g [%.3g, %.3g]", o->names[k], s->mean, s->ci_low, s->ci_high);
  }
  printf("\n\n");
}

static const char *const dense_mats[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                         "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                         "mlp.down_proj"};

/* Index of the tensor called `name` in the checkpoint's table, or -1. */
static int tensor_index(const ufp4_model_config *c, const char *name) {
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (!strcmp(t.name, name)) return i;
  }
  return -1;
}

/* One "ratio/cosine" cell of dW, or "-" when the model has no such tensor. */
static void print_dw_cell(const ufp4_drift_result *res, int k, const char *name) {
  const int i = tensor_index(&res->config, name);
  if (i < 0) {
    printf(" %15s", "-");
    return;
  }
  printf(" %7.4f/%7.5f", ufp4_drift_at(&res->table.dw_ratio, k, i)->mean,
         ufp4_drift_at(&res->table.dw_cosine, k, i)->mean);
}

/* The compact dW table: per recipe, per block, ratio/cosine of the seven dense projections. */
static void print_weights(const drift_opts *o, const ufp4_drift_result *res) {
  const int nd = (int)(sizeof dense_mats / sizeof *dense_mats);
  char name[UFP4_TENSOR_NAME_MAX];
  for (int k = 0; k < o->n; k++) {
    printf("dW of %s: ||dW_q||/||dW|| / cosine, mean over %ld batches (every tensor, norms and "
           "experts included, with intervals, in drift.json)\n%6s",
           o->names[k], res->batches, "block");
    for (int j = 0; j < nd; j++) printf(" %15.15s", strchr(dense_mats[j], '.') + 1);
    printf("\n");
    for (int l = 0; l < res->table.n_layers; l++) {
      printf("%6d", l);
      for (int j = 0; j < nd; j++) {
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, dense_mats[j]);
        print_dw_cell(res, k, name);
      }
      printf("\n");
    }
    printf("%6s embed_tokens", "");
    print_dw_cell(res, k, "model.embed_tokens.weight");
    printf("  lm_head");
    print_dw_cell(res, k, "lm_head.weight");
    printf("\n\n");
  }
}

/* "key":{"mean","ci_low","ci_high","n","values":[...]} of recipe k at point p. */
static void json_ci(FILE *j, const char *key, const ufp4_drift_series *s, long nb, int k, int p) {
  const ufp4_drift_ci *c = ufp4_drift_at(s, k, p);
  char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE], d[UFP4_JSONNUM_SIZE];
  fprintf(j, "\"%s\":{\"mean\":%s,\"ci_low\":%s,\"ci_high\":%s,\"n\":%ld,\"values\":[", key,
          ufp4_json_num(a, c->mean), ufp4_json_num(b, c->ci_low), ufp4_json_num(d, c->ci_high), c->n);
  const double *v = s->values + ((long)k * s->n_points + p) * nb;
  for (long i = 0; i < nb; i++) fprintf(j, "%s%s", i ? "," : "", ufp4_json_num(a, v[i]));
  fprintf(j, "]}");
}

/* A list of points: {"<id>","norm_ratio","cosine" (the means), "norm_ratio_ci","cosine_ci"}; the
 * id is "layer":l, or "name" from the tensor table when names is set. */
static void json_points(FILE *j, const ufp4_drift_result *res, const ufp4_drift_series *ratio,
                        const ufp4_drift_series *cosine, int k, int names) {
  const long nb = res->table.n_batches;
  for (int p = 0; p < ratio->n_points; p++) {
    char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE];
    ufp4_tensor_info t;
    if (names) {
      ufp4_model_tensor(&res->config, p, &t);
      fprintf(j, "%s{\"name\":\"%s\",", p ? "," : "", t.name);
    } else {
      fprintf(j, "%s{\"layer\":%d,", p ? "," : "", p);
    }
    fprintf(j, "\"norm_ratio\":%s,\"cosine\":%s,", ufp4_json_num(a, ufp4_drift_at(ratio, k, p)->mean),
            ufp4_json_num(b, ufp4_drift_at(cosine, k, p)->mean));
    json_ci(j, "norm_ratio_ci", ratio, nb, k, p);
    fprintf(j, ",");
    json_ci(j, "cosine_ci", cosine, nb, k, p);
    fprintf(j, "}");
  }
}

/* drift.json: per recipe the forward "layers" (as before the intervals) and its
 * "log_ratio_slope", and "backward": {"layers", "log_ratio_slope", "weights"}. */
static void print_json(const drift_opts *o, const ufp4_drift_result *res, FILE *j) {
  const ufp4_drift_table *t = &res->table;
  fprintf(j, "{\"checkpoint\":\"%s\",\"batches\":%ld,\"batch\":%ld,\"mode\":\"%s\",\"confidence\":0.95,\"recipes\":[",
          o->ckpt, res->batches, o->batch, o->mode);
  for (int k = 0; k < o->n; k++) {
    fprintf(j, "%s{\"recipe\":\"%s\"", k ? "," : "", o->names[k]);
    if (o->forward) {
      fprintf(j, ",\"layers\":[");
      json_points(j, res, &t->fwd_ratio, &t->fwd_cosine, k, 0);
      fprintf(j, "],");
      json_ci(j, "log_ratio_slope", &t->fwd_slope, t->n_batches, k, 0);
    }
    if (o->backward) {
      fprintf(j, ",\"backward\":{\"layers\":[");
      json_points(j, res, &t->dx_ratio, &t->dx_cosine, k, 0);
      fprintf(j, "],");
      json_ci(j, "log_ratio_slope", &t->dx_slope, t->n_batches, k, 0);
      fprintf(j, ",\"weights\":[");
      json_points(j, res, &t->dw_ratio, &t->dw_cosine, k, 1);
      fprintf(j, "]}");
    }
    fprintf(j, "}");
  }
  fprintf(j, "]}\n");
}

/* Writes what `fill` prints into OUTDIR/name, atomically. */
static int write_out(const drift_opts *o, const char *name, const ufp4_drift_result *res, int backward,
                     void (*fill)(const drift_opts *, const ufp4_drift_result *, int, FILE *)) {
  char *buf = NULL, path[4200];
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
  fill(o, res, backward, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
  int rc = ufp4_write_file_atomic(path, buf, n);
  free(buf);
  return rc;
}

static void fill_dat(const drift_opts *o, const ufp4_drift_result *res, int backward, FILE *f) {
  const ufp4_drift_table *t = &res->table;
  if (backward) write_dat(o, &t->dx_ratio, &t->dx_cosine, f);
  else write_dat(o, &t->fwd_ratio, &t->fwd_cosine, f);
}

static void fill_json(const drift_opts *o, const ufp4_drift_result *res, int backward, FILE *f) {
  (void)backward;
  print_json(o, res, f);
}

/* Prints the tables and writes OUTDIR/drift.json and the .dat files of the asked parts. */
static int write_outputs(const drift_opts *o, const ufp4_drift_result *res) {
  const ufp4_drift_table *t = &res->table;
  printf("drift of %s over %ld batches of %ld x %d (mean over batches)\n\n", o->ckpt, res->batches,
         o->batch, res->seq_len);
  if (o->forward)
    print_points(o, "forward: residual stream after block l (0 = embeddings)", "|hq|/|h|",
                 &t->fwd_ratio, &t->fwd_cosine, &t->fwd_slope);
  if (o->backward) {
    print_points(o, "backward: dX at the input of block l (L = from the head)", "|dXq|/|dX|",
                 &t->dx_ratio, &t->dx_cosine, &t->dx_slope);
    print_weights(o, res);
  }
  int rc = ufp4_mkdirs(o->out_dir);
  if (!rc) rc = write_out(o, "drift.json", res, 0, fill_json);
  if (!rc && o->forward) rc = write_out(o, "drift.dat", res, 0, fill_dat);
  if (!rc && o->backward) rc = write_out(o, "drift_backward.dat", res, 1, fill_dat);
  return rc;
}

/* Appends one plot command over the recipes: mean column `col` (2 or 3) with the bounds of its
 * pair, recipes nudged apart along x so their error bars do not hide each other. */
static size_t plot_line(const drift_opts *o, const char *dat, char *body, size_t bl, size_t size,
                        int col) {
  for (int k = 0; k < o->n && bl < size; k++) {
    const int mean = col + 2 * k, lo = 2 + 2 * o->n + 4 * k + 2 * (col - 2);
    const double dx = 0.06 * (k - (o->n - 1) / 2.0);
    bl += (size_t)snprintf(body + bl, size - bl,
                           "%s'%s' using ($1%+.2f):%d:%d:%d with yerrorlines title '%s'",
                           k ? ", " : "", dat, dx, mean, lo, lo + 1, o->names[k]);
  }
  return bl;
}

/* NAME.svg/png: ratio and cosine against the block, side by side, with 95% intervals. */
static int plot(const drift_opts *o, const ufp4_drift_result *res, const char *name,
                const char *ratio_label, const char *xlabel) {
  char body[16384], dat[64];
  snprintf(dat, sizeof dat, "%s.dat", name);
  size_t bl = (size_t)snprintf(body, sizeof body,
                               "set key below horizontal\nset xrange [-0.5:%d.5]\n"
                               "set multiplot layout 1,2 title '%s: mean and 95%% t interval over "
                               "%ld batches, against fp32'\nset xlabel '%s'\nset ylabel '%s'\nplot ",
                               res->table.n_layers, name, res->batches, xlabel, ratio_label);
  bl = plot_line(o, dat, body, bl, sizeof body, 2);
  if (bl < sizeof body) bl += (size_t)snprintf(body + bl, sizeof body - bl, "\nset ylabel 'cosine to fp32'\nplot ");
  bl = plot_line(o, dat, body, bl, sizeof body, 3);
  if (bl < sizeof body) snprintf(body + bl, sizeof body - bl, "\nunset multiplot\n");
  int p = ufp4_plot_gnuplot(o->out_dir, name, body, 1100, 450);
  if (p < 0) return p;
  printf("%s/%s.svg%s\n", o->out_dir, name,
         p ? " not plotted (gnuplot missing or failed); data in the .dat file" : "");
  return 0;
}

int ufp4_cmd_drift(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  drift_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  ufp4_drift_result res;
  rc = ufp4_drift_checkpoint(o.ckpt, o.data, o.names, o.n, o.batches, (int)o.batch, o.backward, &res);
  if (!rc) rc = write_outputs(&o, &res);
  if (!rc && o.forward)
    rc = plot(&o, &res, "drift", "||h_q|| / ||h||", "block l (residual stream after it)");
  if (!rc && o.backward)
    rc = plot(&o, &res, "drift_backward", "||dX_q|| / ||dX||", "block l (dX at its input)");
  ufp4_drift_table_free(&res.table);
  return rc ? cli_error("drift", NULL) : 0;
}
