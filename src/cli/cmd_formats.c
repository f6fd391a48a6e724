/* ufp4 formats: the element grids and the geometric bias of each bin (paper's Eq. 2). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/ufp4.h"

static const char *measure_text =
    "Geometric bias of level q_i (paper's Eq. 2): b_i = (l - r) / 2 with l = (q_i - q_{i-1}) / 2 and\n"
    "r = (q_{i+1} - q_i) / 2 the half-widths of its bin. It is the mean round-to-nearest error\n"
    "E[rho(t) - t] of the values that fall in the bin, when the density of t = |x|/s is locally\n"
    "uniform. A negative b means values shrink toward zero. Only interior levels have one: the zero\n"
    "bin has no left half and the top bin saturates (shown as '-').";

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 formats [--json]\n\n"
          "Prints every 4-bit element grid: its magnitudes (levels), the rounding bin edges\n"
          "(midpoints between levels), g_max, and per level the geometric bias.\n\n"
          "  --json   the same as a JSON object {measure, grids: [{name, g_max, n_levels, levels,\n"
          "           edges, bins: [{index, level, lo, hi, interior, bias}]}]}; bias is null\n"
          "           where the level is not interior.\n\n%s\n",
          measure_text);
}

/* Bin of level i: [edge below, edge above]; the top bin runs to infinity (saturation). */
static double bin_lo(const ufp4_grid *g, int i) { return i == 0 ? 0.0 : g->edges[i - 1]; }
static double bin_hi(const ufp4_grid *g, int i) { return i == g->n_levels - 1 ? INFINITY : g->edges[i]; }

static int print_json(void) {
  cJSON *root = cJSON_CreateObject();
  if (!root) goto oom;
  cJSON_AddStringToObject(root, "measure", measure_text);
  cJSON *grids = cJSON_AddArrayToObject(root, "grids");
  for (int id = 0; id < UFP4_GRID_COUNT; id++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)id);
    cJSON *jg = cJSON_CreateObject();
    cJSON_AddItemToArray(grids, jg);
    cJSON_AddStringToObject(jg, "name", g->name);
    cJSON_AddNumberToObject(jg, "g_max", g->g_max);
    cJSON_AddNumberToObject(jg, "n_levels", g->n_levels);
    cJSON *lv = cJSON_AddArrayToObject(jg, "levels");
    cJSON *ed = cJSON_AddArrayToObject(jg, "edges");
    cJSON *bins = cJSON_AddArrayToObject(jg, "bins");
    for (int i = 0; i < g->n_levels; i++) {
      cJSON_AddItemToArray(lv, cJSON_CreateNumber(g->levels[i]));
      if (i + 1 < g->n_levels) cJSON_AddItemToArray(ed, cJSON_CreateNumber(g->edges[i]));
      int interior = 0;
      double b = ufp4_bin_bias(g, i, &interior);
      cJSON *jb = cJSON_CreateObject();
      cJSON_AddItemToArray(bins, jb);
      cJSON_AddNumberToObject(jb, "index", i);
      cJSON_AddNumberToObject(jb, "level", g->levels[i]);
      cJSON_AddNumberToObject(jb, "lo", bin_lo(g, i));
      if (i == g->n_levels - 1)
        cJSON_AddNullToObject(jb, "hi"); /* JSON has no infinity */
      else
        cJSON_AddNumberToObject(jb, "hi", bin_hi(g, i));
      cJSON_AddBoolToObject(jb, "interior", interior);
      if (interior && isfinite(b))
        cJSON_AddNumberToObject(jb, "bias", b);
      else
        cJSON_AddNullToObject(jb, "bias");
    }
  }
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  if (!s) goto oom;
  puts(s);
  free(s);
  return 0;
oom:
  fprintf(stderr, "ufp4 formats: out of memory building the JSON output\n");
  return 1;
}

static void print_text(void) {
  printf("4-bit element grids (magnitudes; a separate sign bit gives the negatives and -0)\n\n%s\n", measure_text);
  for (int id = 0; id < UFP4_GRID_COUNT; id++) {
    const ufp4_grid *g = ufp4_grid_get((ufp4_grid_id)id);
    printf("\n%s  g_max %g  %d levels\n  levels:", g->name, g->g_max, g->n_levels);
    for (int i = 0; i < g->n_levels; i++) printf(" %g", g->levels[i]);
    printf("\n  edges: ");
    for (int i = 0; i + 1 < g->n_levels; i++) printf(" %g", g->edges[i]);
    printf("\n  %5s %7s  %-16s %9s\n", "index", "level", "bin", "bias");
    for (int i = 0; i < g->n_levels; i++) {
      char bin[48];
      if (i == g->n_levels - 1)
        snprintf(bin, sizeof bin, "[%g, inf)", bin_lo(g, i));
      else
        snprintf(bin, sizeof bin, "[%g, %g]", bin_lo(g, i), bin_hi(g, i));
      int interior = 0;
      double b = ufp4_bin_bias(g, i, &interior);
      if (interior && isfinite(b))
        printf("  %5d %7g  %-16s %9.4f\n", i, g->levels[i], bin, b);
      else
        printf("  %5d %7g  %-16s %9s\n", i, g->levels[i], bin, "-");
    }
  }
}

int ufp4_cmd_formats(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (cli_flag(argv, i, "--json")) {
      json = 1;
    } else {
      fprintf(stderr, "ufp4 formats: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (json) return print_json();
  print_text();
  return 0;
}
