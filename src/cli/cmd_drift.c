/* ufp4 drift: forward drift through depth of a trained checkpoint under each recipe. */
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
      "                  [--batches N] [--batch B]\n\n"
      "For each recipe, runs the checkpoint's forward on N validation batches twice -- in fp32 and under\n"
      "the recipe, same weights and tokens -- and reports per block the ratio ||h_q||/||h|| and the\n"
      "cosine of the residual stream (mean over batches): how the rounding error compounds with depth.\n"
      "Writes OUTDIR/drift.json, drift.dat and the plot drift.svg/png. SHARD is a .tok file or a folder\n"
      "holding val.tok. Recipes are ';'-separated when a spec holds commas.\n");
}

typedef struct {
  const char *ckpt, *data, *out_dir, *recipes;
  long batches, batch;
  char list[4096]; /* recipes, split in place */
  const char *names[MAX_RECIPES];
  int n;
} drift_opts;

/* Splits the recipe list at ';' when it holds one (specs may hold commas), else at ','. */
static void split_recipes(drift_opts *o) {
  snprintf(o->list, sizeof o->list, "%s", o->recipes);
  const char *sep = strchr(o->list, ';') ? ";" : ",";
  char *save = NULL;
  o->n = 0;
  for (char *t = strtok_r(o->list, sep, &save); t && o->n < MAX_RECIPES;
       t = strtok_r(NULL, sep, &save))
    o->names[o->n++] = t;
}

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, drift_opts *o) {
  memset(o, 0, sizeof *o);
  o->recipes = "e2m1,nvfp4,ufp4";
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
  split_recipes(o);
  return 0;
}

/* The table on stdout and drift.dat: layer, then (ratio, cosine) per recipe. */
static void print_table(const drift_opts *o, const ufp4_drift_result *res, FILE *dat) {
  const ufp4_drift_table *t = &res->table;
  const int L = t->n_layers;
  fprintf(dat, "# layer");
  for (int k = 0; k < o->n; k++) fprintf(dat, " ratio[%s] cosine[%s]", o->names[k], o->names[k]);
  fprintf(dat, "\n");
  printf("forward drift of %s over %ld batches of %ld x %d (layer 0 = embeddings)\n%6s", o->ckpt,
         res->batches, o->batch, res->seq_len, "layer");
  for (int k = 0; k < o->n; k++) printf("  %22.22s", o->names[k]);
  printf("\n%6s", "");
  for (int k = 0; k < o->n; k++) printf("  %10s %11s", "|hq|/|h|", "cosine");
  printf("\n");
  for (int l = 0; l <= L; l++) {
    fprintf(dat, "%d", l);
    printf("%6d", l);
    for (int k = 0; k < o->n; k++) {
      fprintf(dat, " %.9g %.9g", t->ratio[k * (L + 1) + l], t->cosine[k * (L + 1) + l]);
      printf("  %10.6f %11.8f", t->ratio[k * (L + 1) + l], t->cosine[k * (L + 1) + l]);
    }
    fprintf(dat, "\n");
    printf("\n");
  }
}

/* drift.json: the same figures as drift.dat, named. */
static void print_json(const drift_opts *o, const ufp4_drift_result *res, FILE *j) {
  const ufp4_drift_table *t = &res->table;
  const int L = t->n_layers;
  fprintf(j, "{\"checkpoint\":\"%s\",\"batches\":%ld,\"recipes\":[", o->ckpt, res->batches);
  for (int k = 0; k < o->n; k++) {
    fprintf(j, "%s{\"recipe\":\"%s\",\"layers\":[", k ? "," : "", o->names[k]);
    for (int l = 0; l <= L; l++) {
      char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE];
      fprintf(j, "%s{\"layer\":%d,\"norm_ratio\":%s,\"cosine\":%s}", l ? "," : "", l,
              ufp4_json_num(a, t->ratio[k * (L + 1) + l]),
              ufp4_json_num(b, t->cosine[k * (L + 1) + l]));
    }
    fprintf(j, "]}");
  }
  fprintf(j, "]}\n");
}

/* Prints the table and writes OUTDIR/drift.dat and drift.json (each atomically). */
static int write_outputs(const drift_opts *o, const ufp4_drift_result *res) {
  int rc = ufp4_mkdirs(o->out_dir);
  if (rc) return rc;
  char *dat = NULL, *json = NULL, path[4200];
  size_t dn = 0, jn = 0;
  FILE *d = open_memstream(&dat, &dn), *j = open_memstream(&json, &jn);
  if (!d || !j) rc = ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
  if (!rc) {
    print_table(o, res, d);
    print_json(o, res, j);
  }
  if (d) fclose(d);
  if (j) fclose(j);
  if (!rc) {
    snprintf(path, sizeof path, "%s/drift.dat", o->out_dir);
    rc = ufp4_write_file_atomic(path, dat, dn);
  }
  if (!rc) {
    snprintf(path, sizeof path, "%s/drift.json", o->out_dir);
    rc = ufp4_write_file_atomic(path, json, jn);
  }
  free(dat);
  free(json);
  return rc;
}

/* Appends one plot command over the recipes, data column first_col + 2k for recipe k. */
static size_t plot_line(const drift_opts *o, char *body, size_t bl, size_t size, int first_col) {
  for (int k = 0; k < o->n && bl < size; k++)
    bl += (size_t)snprintf(body + bl, size - bl,
                           "%s'drift.dat' using 1:%d with linespoints title '%s'", k ? ", " : "",
                           first_col + 2 * k, o->names[k]);
  return bl;
}

/* drift.svg/png: ratio and cosine against depth, side by side. */
static int plot(const drift_opts *o) {
  char body[8192];
  size_t bl = (size_t)snprintf(body, sizeof body,
                               "set key bottom left\nset multiplot layout 1,2\nset xlabel 'block'\n"
                               "set ylabel '||h_q|| / ||h||'\nplot ");
  bl = plot_line(o, body, bl, sizeof body, 2);
  bl += (size_t)snprintf(body + bl, sizeof body - bl > 0 ? sizeof body - bl : 0,
                         "\nset ylabel 'cosine to fp32'\nplot ");
  bl = plot_line(o, body, bl, sizeof body, 3);
  if (bl < sizeof body) snprintf(body + bl, sizeof body - bl, "\nunset multiplot\n");
  int p = ufp4_plot_gnuplot(o->out_dir, "drift", body, 1100, 450);
  if (p < 0) return p;
  printf("%s/drift.svg%s\n", o->out_dir,
         p ? " not plotted (gnuplot missing or failed); data in drift.dat" : "");
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
  rc = ufp4_drift_checkpoint(o.ckpt, o.data, o.names, o.n, o.batches, (int)o.batch, &res);
  if (!rc) rc = write_outputs(&o, &res);
  if (!rc) rc = plot(&o);
  ufp4_drift_table_free(&res.table);
  return rc ? cli_error("drift", NULL) : 0;
}
