/* ufp4 drift: forward drift through depth of a trained checkpoint under each recipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_load.h"
#include "ufp4/data_source.h"
#include "ufp4/diagnostics.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/jsonnum.h"
#include "ufp4/plot.h"

#define MAX_RECIPES 16

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 drift --checkpoint DIR --data SHARD --out OUTDIR [--recipes e2m1,nvfp4,ufp4]\n"
          "                  [--batches N] [--batch B]\n\n"
          "For each recipe, runs the checkpoint's forward on N validation batches twice -- in fp32 and under\n"
          "the recipe, same weights and tokens -- and reports per block the ratio ||h_q||/||h|| and the\n"
          "cosine of the residual stream (mean over batches): how the rounding error compounds with depth.\n"
          "Writes OUTDIR/drift.json, drift.dat and the plot drift.svg/png. SHARD is a .tok file or a folder\n"
          "holding val.tok. Recipes are ';'-separated when a spec holds commas.\n");
}

int ufp4_cmd_drift(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *ckpt = NULL, *data = NULL, *out_dir = NULL, *recipes = "e2m1,nvfp4,ufp4";
  long batches = 4, batch = 4;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0) ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--data", &v)) > 0) data = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0) out_dir = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--recipes", &v)) > 0) recipes = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--batches", &v)) > 0) {
      if (cli_parse_long("drift", "--batches", v, 1, 1 << 20, &batches)) return 2;
    } else if (!r && (r = cli_value(argc, argv, &i, "--batch", &v)) > 0) {
      if (cli_parse_long("drift", "--batch", v, 1, 1 << 20, &batch)) return 2;
    } else if (!r) {
      fprintf(stderr, "ufp4 drift: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!ckpt || !data || !out_dir) {
    usage(stderr);
    return 2;
  }
  char list[4096], *names[MAX_RECIPES];
  int n = 0;
  snprintf(list, sizeof list, "%s", recipes);
  const char *sep = strchr(list, ';') ? ";" : ",";
  char *save = NULL;
  for (char *t = strtok_r(list, sep, &save); t && n < MAX_RECIPES; t = strtok_r(NULL, sep, &save)) names[n++] = t;

  ufp4_model *m = NULL;
  int rc = ufp4_cli_load_model(ckpt, "fp32", (int)batch, &m);
  if (rc) {
    fprintf(stderr, "ufp4 drift: %s\n", ufp4_last_error());
    return 1;
  }
  const ufp4_model_config *c = ufp4_model_get_config(m);
  const int L = c->n_layers, T = c->seq_len;
  char path[4200];
  size_t len = strlen(data);
  if (len > 4 && !strcmp(data + len - 4, ".tok")) snprintf(path, sizeof path, "%s", data);
  else snprintf(path, sizeof path, "%s/val.tok", data);
  ufp4_loader_config lc = {.batch = (size_t)batch, .seq_len = (size_t)T, .world = 1, .shuffle = 0};
  ufp4_shard_source src = {0};
  double *ratio = calloc((size_t)n * (L + 1), sizeof(double)), *cosine = calloc((size_t)n * (L + 1), sizeof(double));
  ufp4_drift_point *pts = malloc(sizeof *pts * (size_t)(L + 1));
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)batch * (T + 1)), *inp = malloc(sizeof(int32_t) * (size_t)batch * T);
  if (!ratio || !cosine || !pts || !tokens || !inp) rc = ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
  if (!rc) rc = ufp4_loader_open(path, &lc, &src.loader);
  if (!rc) {
    src.n = (size_t)batch * (size_t)(T + 1);
    if (!(src.buf = malloc(src.n * sizeof(uint32_t)))) rc = ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
    uint64_t avail = ufp4_loader_batches_per_epoch(src.loader);
    if ((uint64_t)batches > avail) batches = (long)avail;
  }
  for (int k = 0; k < n && !rc; k++) {
    ufp4_recipe r;
    if ((rc = ufp4_recipe_parse(names[k], &r))) break;
    ufp4_model_set_recipe(m, &r, 1);
    for (long b = 0; b < batches && !rc; b++) {
      if ((rc = ufp4_shard_source_batch(&src, (uint64_t)b, tokens))) break;
      for (long s = 0; s < batch; s++) memcpy(inp + s * T, tokens + s * (T + 1), sizeof(int32_t) * (size_t)T);
      if ((rc = ufp4_forward_drift(m, inp, (int)batch, T, pts))) break;
      for (int l = 0; l <= L; l++) {
        ratio[k * (L + 1) + l] += pts[l].norm_ratio / batches;
        cosine[k * (L + 1) + l] += pts[l].cosine / batches;
      }
    }
  }
  if (!rc) rc = ufp4_mkdirs(out_dir);
  if (!rc) {
    /* drift.dat: layer, then (ratio, cosine) per recipe; drift.json the same, named. */
    char *dat = NULL, *json = NULL;
    size_t dn = 0, jn = 0;
    FILE *d = open_memstream(&dat, &dn), *j = open_memstream(&json, &jn);
    if (!d || !j) rc = ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
    if (!rc) {
      fprintf(d, "# layer");
      for (int k = 0; k < n; k++) fprintf(d, " ratio[%s] cosine[%s]", names[k], names[k]);
      fprintf(d, "\n");
      fprintf(j, "{\"checkpoint\":\"%s\",\"batches\":%ld,\"recipes\":[", ckpt, batches);
      printf("forward drift of %s over %ld batches of %ld x %d (layer 0 = embeddings)\n%6s", ckpt, batches, batch, T,
             "layer");
      for (int k = 0; k < n; k++) printf("  %22.22s", names[k]);
      printf("\n%6s", "");
      for (int k = 0; k < n; k++) printf("  %10s %11s", "|hq|/|h|", "cosine");
      printf("\n");
      for (int l = 0; l <= L; l++) {
        fprintf(d, "%d", l);
        printf("%6d", l);
        for (int k = 0; k < n; k++) {
          fprintf(d, " %.9g %.9g", ratio[k * (L + 1) + l], cosine[k * (L + 1) + l]);
          printf("  %10.6f %11.8f", ratio[k * (L + 1) + l], cosine[k * (L + 1) + l]);
        }
        fprintf(d, "\n");
        printf("\n");
      }
      for (int k = 0; k < n; k++) {
        fprintf(j, "%s{\"recipe\":\"%s\",\"layers\":[", k ? "," : "", names[k]);
        for (int l = 0; l <= L; l++) {
          char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE];
          fprintf(j, "%s{\"layer\":%d,\"norm_ratio\":%s,\"cosine\":%s}", l ? "," : "", l,
                  ufp4_json_num(a, ratio[k * (L + 1) + l]), ufp4_json_num(b, cosine[k * (L + 1) + l]));
        }
        fprintf(j, "]}");
      }
      fprintf(j, "]}\n");
    }
    if (d) fclose(d);
    if (j) fclose(j);
    if (!rc) {
      snprintf(path, sizeof path, "%s/drift.dat", out_dir);
      rc = ufp4_write_file_atomic(path, dat, dn);
    }
    if (!rc) {
      snprintf(path, sizeof path, "%s/drift.json", out_dir);
      rc = ufp4_write_file_atomic(path, json, jn);
    }
    free(dat);
    free(json);
  }
  if (!rc) {
    char body[8192];
    size_t bl = (size_t)snprintf(body, sizeof body,
                                 "set key bottom left\nset multiplot layout 1,2\nset xlabel 'block'\nset ylabel '||h_q|| / ||h||'\nplot ");
    for (int k = 0; k < n && bl < sizeof body; k++)
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s'drift.dat' using 1:%d with linespoints title '%s'",
                             k ? ", " : "", 2 + 2 * k, names[k]);
    bl += (size_t)snprintf(body + bl, sizeof body - bl > 0 ? sizeof body - bl : 0, "\nset ylabel 'cosine to fp32'\nplot ");
    for (int k = 0; k < n && bl < sizeof body; k++)
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s'drift.dat' using 1:%d with linespoints title '%s'",
                             k ? ", " : "", 3 + 2 * k, names[k]);
    if (bl < sizeof body) snprintf(body + bl, sizeof body - bl, "\nunset multiplot\n");
    int p = ufp4_plot_gnuplot(out_dir, "drift", body, 1100, 450);
    if (p < 0) rc = p;
    else printf("%s/drift.svg%s\n", out_dir, p ? " not plotted (gnuplot missing or failed); data in drift.dat" : "");
  }
  free(src.buf);
  ufp4_loader_free(src.loader);
  free(ratio);
  free(cosine);
  free(pts);
  free(tokens);
  free(inp);
  ufp4_model_free(m);
  if (rc) {
    fprintf(stderr, "ufp4 drift: %s\n", ufp4_last_error());
    return 1;
  }
  return 0;
}
