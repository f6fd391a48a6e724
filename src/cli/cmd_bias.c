/* ufp4 bias: the paper's measures of every grid on one tensor, without and with RHT, and
 * (--layers K) the compounding of the attenuation through a chain of quantized GEMMs. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/qflags.h"
#include "ufp4/bias_table.h"
#include "ufp4/ufp4.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 bias [options]\n\n"
          "Quantizes one tensor with every grid asked for, without RHT and with RHT, and prints\n"
          "alpha = <Q(A),A>/||A||^2, NMSE, SQNR, dSQNR = 10 log10(NMSE_raw/NMSE_rht), the shrinkage\n"
          "bias E[rho(t) - t] (grid units), B_eff = exp(bucket entropy)/n_levels, and the fractions of\n"
          "nonzero inputs that underflow to 0 and of elements that clip at g_max.\n\n"
          "input (synthetic by default; element i depends only on the seed and i):\n"
          "  --dist D            gaussian (default), laplace, student-t, outliers\n"
          "  --rows R --cols C   shape, default 1024 x 1024; cols is the reduction (block) dimension\n"
          "  --seed S            default 1; also draws the random RHT signs and the chain weights\n"
          "  --dof v             student-t degrees of freedom (default 3)\n"
          "  --outlier-frac f    outliers: fraction of entries scaled (default 0.01)\n"
          "  --outlier-scale k   outliers: their factor (default 20)\n"
          "  --in x.npy          a 2-D float32 .npy (rows x reduction dim) instead\n"
          "format:\n"
          "  --block N           1xN blocks (default 16)\n"
          "  --scale K           fp32 (default), nvfp4, e8m0-floor, e8m0-ceil, e8m0-even, e8m0-rceil\n"
          "  --round M           rne (default), rna, rnz, sr, sr8\n"
          "  --rht N             RHT block size of the rotated measurement (default 16; 0 = raw only)\n"
          "  --rht-signs S       random (default, from the seed) or nvidia (fixed 16-entry vector)\n"
          "  --grids LIST        comma-separated, default e2m1,e1m2,int4,e2m1-max2,e2m1-max3,e2m1-max4\n"
          "  --adaptive A        none (default) or 4over6: Four Over Six block scaling (needs --grids e2m1;\n"
          "                      with --scale nvfp4 the tensor amax maps to 256 in E4M3); adds the share\n"
          "                      of blocks that kept the 4-candidate\n"
          "  --adaptive-metric M 4over6's selection error: mse (default), mae, maxabs\n"
          "other:\n"
          "  --layers K          also simulate a chain of K quantized GEMMs (d = cols, tokens = rows;\n"
          "                      gaussian weights of std 1/sqrt(d)) per grid, raw and with RHT, and\n"
          "                      print per layer ||y_q||/||y||, cos(y_q, y) and cumulative eta\n"
          "  --threads N         OpenMP threads (results do not depend on it)\n"
          "  --json              print everything as JSON instead of tables\n");
}

typedef struct {
  ufp4_synth_dist dist;
  size_t rows, cols;
  double dof, outlier_frac, outlier_scale;
  int dof_set, frac_set, oscale_set;
  const char *in;
  cli_qflags q; /* q.fmt.seed also seeds the synthetic input and the chain weights */
  ufp4_grid_id grids[UFP4_GRID_COUNT];
  int n_grids;
  int layers;
  int threads;
  int json;
  ufp4_npy file; /* owns the data when --in is given */
} bias_opts;

static int parse_grids(const char *list, bias_opts *o) {
  char buf[256];
  if (strlen(list) >= sizeof buf) {
    fprintf(stderr, "ufp4 bias: --grids: list too long\n");
    return -1;
  }
  strcpy(buf, list);
  o->n_grids = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    ufp4_grid_id id;
    if (ufp4_grid_parse(tok, &id) != 0) {
      fprintf(stderr, "ufp4 bias: --grids: unknown grid '%s'\n", tok);
      return -1;
    }
    if (o->n_grids == UFP4_GRID_COUNT) {
      fprintf(stderr, "ufp4 bias: --grids: at most %d grids\n", UFP4_GRID_COUNT);
      return -1;
    }
    o->grids[o->n_grids++] = id;
  }
  if (o->n_grids == 0) {
    fprintf(stderr, "ufp4 bias: --grids: empty list\n");
    return -1;
  }
  return 0;
}

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, bias_opts *o) {
  memset(o, 0, sizeof *o);
  o->dist = UFP4_DIST_GAUSSIAN;
  o->rows = o->cols = 1024;
  o->q.fmt = ufp4_qformat_default();
  o->q.fmt.seed = 1;
  o->q.fmt.rht = 16;
  for (int g = 0; g < UFP4_GRID_COUNT; g++) o->grids[g] = (ufp4_grid_id)g;
  o->n_grids = UFP4_GRID_COUNT;
  const char *c = "bias";
  const unsigned accept = QF_BLOCK | QF_SCALE | QF_ROUND | QF_RHT | QF_RHT_SIGNS | QF_SEED | QF_ADAPTIVE;
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    int r;
    long l;
    if ((r = cli_qflag(c, accept, argc, argv, &i, &o->q))) {
      if (r < 0) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--dist", &v))) {
      if (r < 0) return 2;
      if (ufp4_synth_dist_parse(v, &o->dist) != 0) {
        fprintf(stderr, "ufp4 bias: --dist: unknown distribution '%s'\n", v);
        return 2;
      }
    } else if ((r = cli_value(argc, argv, &i, "--rows", &v))) {
      if (r < 0 || cli_parse_size(c, "--rows", v, 1, (size_t)1 << 28, &o->rows)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--cols", &v))) {
      if (r < 0 || cli_parse_size(c, "--cols", v, 1, (size_t)1 << 28, &o->cols)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--dof", &v))) {
      if (r < 0 || cli_parse_double(c, "--dof", v, 0.1, 1e6, &o->dof)) return 2;
      o->dof_set = 1;
    } else if ((r = cli_value(argc, argv, &i, "--outlier-frac", &v))) {
      if (r < 0 || cli_parse_double(c, "--outlier-frac", v, 0, 1, &o->outlier_frac)) return 2;
      o->frac_set = 1;
    } else if ((r = cli_value(argc, argv, &i, "--outlier-scale", &v))) {
      if (r < 0 || cli_parse_double(c, "--outlier-scale", v, 0, 1e30, &o->outlier_scale)) return 2;
      o->oscale_set = 1;
    } else if ((r = cli_value(argc, argv, &i, "--in", &v))) {
      if (r < 0) return 2;
      o->in = v;
    } else if ((r = cli_value(argc, argv, &i, "--grids", &v))) {
      if (r < 0 || parse_grids(v, o)) return 2;
    } else if ((r = cli_value(argc, argv, &i, "--layers", &v))) {
      if (r < 0 || cli_parse_long(c, "--layers", v, 0, 1000, &l)) return 2;
      o->layers = (int)l;
    } else if ((r = cli_value(argc, argv, &i, "--threads", &v))) {
      if (r < 0 || cli_parse_long(c, "--threads", v, 1, 1024, &l)) return 2;
      o->threads = (int)l;
    } else if (cli_flag(argv, i, "--json")) {
      o->json = 1;
    } else {
      fprintf(stderr, "ufp4 bias: unknown option '%s' (ufp4 bias --help)\n", argv[i]);
      return 2;
    }
  }
  for (int g = 0; g < o->n_grids; g++)
    if (ufp4_adaptive_check(o->q.fmt.adaptive, o->grids[g], o->q.fmt.scale)) {
      fprintf(stderr, "ufp4 bias: --adaptive: %s (pass --grids e2m1)\n", ufp4_last_error());
      return 2;
    }
  return cli_qflags_check(c, &o->q) ? 2 : 0;
}

static const char *input_desc(const bias_opts *o, char *buf, size_t n) {
  if (o->in) {
    snprintf(buf, n, "file %s, %zu x %zu", o->in, o->rows, o->cols);
  } else if (o->dist == UFP4_DIST_OUTLIERS) {
    snprintf(buf, n, "outliers (N(0,1), %g%% of entries x%g), %zu x %zu, seed %llu",
             100 * o->outlier_frac, o->outlier_scale, o->rows, o->cols, (unsigned long long)o->q.fmt.seed);
  } else if (o->dist == UFP4_DIST_STUDENT_T) {
    snprintf(buf, n, "student-t (dof %g), %zu x %zu, seed %llu", o->dof, o->rows, o->cols,
             (unsigned long long)o->q.fmt.seed);
  } else {
    snprintf(buf, n, "%s, %zu x %zu, seed %llu", ufp4_synth_dist_name(o->dist), o->rows, o->cols,
             (unsigned long long)o->q.fmt.seed);
  }
  return buf;
}

static const char *rht_label(int rht, char *buf, size_t n) {
  if (rht == 0)
    snprintf(buf, n, "raw");
  else
    snprintf(buf, n, "rht%d", rht);
  return buf;
}

static void print_table(const bias_opts *o, const ufp4_bias_row *rows, int n_rows) {
  char in[512];
  printf("ufp4 bias: input %s\n", input_desc(o, in, sizeof in));
  printf("format: 1x%d blocks, %s scale, %s rounding", o->q.fmt.block, ufp4_scale_name(o->q.fmt.scale),
         ufp4_round_name(o->q.fmt.round));
  if (o->q.fmt.adaptive)
    printf(", adaptive %s (%s)", ufp4_adaptive_name(o->q.fmt.adaptive), ufp4_metric_name(o->q.fmt.metric));
  if (o->q.fmt.rht)
    printf("; rht%d = RHT in chunks of %d along cols, %s signs", o->q.fmt.rht, o->q.fmt.rht,
           o->q.nvidia_signs ? "NVIDIA's fixed" : "random (from the seed)");
  printf("\nalpha = <Q(A),A>/||A||^2; dSQNR = gain of rht over raw; shrink bias in grid units;\n"
         "underflow = nonzero inputs quantized to 0; clipped = elements above g_max\n\n");
  const int adapt = o->q.fmt.adaptive != UFP4_ADAPTIVE_NONE;
  printf("%-10s %-6s %9s %10s %8s %8s %11s %6s %9s %8s%s\n", "grid", "rht", "alpha", "NMSE", "SQNR dB",
         "dSQNR", "shrink bias", "B_eff", "underflow", "clipped", adapt ? " 4-blocks" : "");
  for (int i = 0; i < n_rows; i++) {
    const ufp4_bias_row *r = &rows[i];
    char lab[16], ds[16], four[24] = "";
    if (r->rht)
      snprintf(ds, sizeof ds, "%+.2f", r->dsqnr);
    else
      snprintf(ds, sizeof ds, "-");
    if (adapt) snprintf(four, sizeof four, " %7.3f%%", 100 * r->m.four_share);
    printf("%-10s %-6s %9.5f %10.3e %8.2f %8s %11.5f %6.3f %8.3f%% %7.3f%%%s\n",
           ufp4_grid_get(r->grid)->name, rht_label(r->rht, lab, sizeof lab), r->m.alpha, r->m.nmse,
           r->m.sqnr_db, ds, r->m.shrink_bias, r->m.b_eff, 100 * r->m.underflow, 100 * r->m.clipped, four);
  }
  if (rows[0].m.n_nonfinite)
    printf("(%zu of %zu elements skipped: non-finite inputs and the rest of their blocks, whose scale they made non-finite)\n",
           rows[0].m.n_nonfinite, rows[0].m.n);
  printf("\nper-bin bias: mean of rho(t) - t over the elements quantized to each level (grid units)\n");
  for (int i = 0; i < n_rows; i++) {
    const ufp4_grid *g = ufp4_grid_get(rows[i].grid);
    char lab[16];
    printf("%-10s %-6s", g->name, rht_label(rows[i].rht, lab, sizeof lab));
    for (int b = 0; b < g->n_levels; b++) printf(" %g:%+.4f", (double)g->levels[b], rows[i].m.bucket_bias[b]);
    printf("\n");
  }
}

/* Layers as rows; one column group per grid holding its raw and rotated runs side by side. */
static void print_chain(const bias_opts *o, const ufp4_bias_row *rows, int n_rows) {
  static const struct {
    const char *title;
    size_t off;
  } metric[] = {
      {"||y_q|| / ||y||  (signal kept, quantization noise included)", offsetof(ufp4_chain_layer, signal_ratio)},
      {"cos(y_q, y)", offsetof(ufp4_chain_layer, cosine)},
      {"cumulative eta = prod over layers of alpha_X * alpha_W  (the compounding attenuation)",
       offsetof(ufp4_chain_layer, eta_cum)},
  };
  int per = (n_rows > 1 && rows[1].grid == rows[0].grid) ? 2 : 1;
  int width = 9 * per; /* one group: per columns of " %8.5f" */
  printf("\nchain of %d quantized GEMMs y_k = y_{k-1} W_k^T: tokens %zu, d %zu, W_k ~ N(0, 1/d) from seed %llu;\n"
         "both operands quantized along d, RHT on both in the rht columns\n",
         o->layers, o->rows, o->cols, (unsigned long long)o->q.fmt.seed);
  for (size_t mi = 0; mi < sizeof metric / sizeof metric[0]; mi++) {
    printf("\n%s\n%5s", metric[mi].title, "");
    for (int i = 0; i < n_rows; i += per) printf(" |%*s", width, ufp4_grid_get(rows[i].grid)->name);
    printf("\n%5s", "layer");
    for (int i = 0; i < n_rows; i++) {
      char lab[16];
      printf("%s %8s", i % per ? "" : " |", rht_label(rows[i].rht, lab, sizeof lab));
    }
    printf("\n");
    for (int k = 0; k < o->layers; k++) {
      printf("%5d", k + 1);
      for (int i = 0; i < n_rows; i++) {
        double v = *(const double *)((const char *)&rows[i].chain[k] + metric[mi].off);
        printf("%s %8.5f", i % per ? "" : " |", v);
      }
      printf("\n");
    }
  }
}

/* A result's measures (measures.h) into its JSON object j. */
static void add_measures(cJSON *j, const ufp4_qmeasures *m, int n_levels) {
  cJSON_AddNumberToObject(j, "shrink_bias", m->shrink_bias);
  cJSON_AddNumberToObject(j, "mean_rel_err", m->mean_rel_err);
  cJSON_AddNumberToObject(j, "bucket_entropy", m->bucket_entropy);
  cJSON_AddNumberToObject(j, "b_eff", m->b_eff);
  cJSON_AddNumberToObject(j, "underflow", m->underflow);
  cJSON_AddNumberToObject(j, "clipped", m->clipped);
  cJSON_AddNumberToObject(j, "n", (double)m->n);
  cJSON_AddNumberToObject(j, "n_nonfinite", (double)m->n_nonfinite);
  cJSON_AddNumberToObject(j, "four_share", m->four_share);
  /* stochastic rounding's unbiasedness test (measures.h): 0 elements, all 0, without SR */
  cJSON_AddNumberToObject(j, "sr_n", (double)m->sr_n);
  cJSON_AddNumberToObject(j, "sr_bias", m->sr_bias);
  cJSON_AddNumberToObject(j, "sr_z_mag", m->sr_z_mag);
  cJSON_AddNumberToObject(j, "sr_z_val", m->sr_z_val);
  cJSON *bp = cJSON_AddArrayToObject(j, "bucket_p");
  cJSON *bb = cJSON_AddArrayToObject(j, "bucket_bias");
  for (int b = 0; b < n_levels; b++) {
    cJSON_AddItemToArray(bp, cJSON_CreateNumber(m->bucket_p[b]));
    cJSON_AddItemToArray(bb, cJSON_CreateNumber(m->bucket_bias[b]));
  }
}

static int print_json(const bias_opts *o, const ufp4_bias_row *rows, int n_rows) {
  cJSON *root = cJSON_CreateObject();
  cJSON *in = cJSON_AddObjectToObject(root, "input");
  if (o->in) {
    cJSON_AddStringToObject(in, "file", o->in);
  } else {
    cJSON_AddStringToObject(in, "dist", ufp4_synth_dist_name(o->dist));
    cJSON_AddNumberToObject(in, "seed", (double)o->q.fmt.seed);
    if (o->dist == UFP4_DIST_STUDENT_T) cJSON_AddNumberToObject(in, "dof", o->dof);
    if (o->dist == UFP4_DIST_OUTLIERS) {
      cJSON_AddNumberToObject(in, "outlier_frac", o->outlier_frac);
      cJSON_AddNumberToObject(in, "outlier_scale", o->outlier_scale);
    }
  }
  cJSON_AddNumberToObject(in, "rows", (double)o->rows);
  cJSON_AddNumberToObject(in, "cols", (double)o->cols);
  cJSON *fm = cJSON_AddObjectToObject(root, "format");
  cJSON_AddNumberToObject(fm, "block", o->q.fmt.block);
  cJSON_AddStringToObject(fm, "scale", ufp4_scale_name(o->q.fmt.scale));
  cJSON_AddStringToObject(fm, "round", ufp4_round_name(o->q.fmt.round));
  cJSON_AddNumberToObject(fm, "rht", o->q.fmt.rht);
  cJSON_AddStringToObject(fm, "rht_signs", o->q.nvidia_signs ? "nvidia" : "random");
  cJSON_AddStringToObject(fm, "adaptive", ufp4_adaptive_name(o->q.fmt.adaptive));
  cJSON_AddStringToObject(fm, "adaptive_metric", ufp4_metric_name(o->q.fmt.metric));
  cJSON *res = cJSON_AddArrayToObject(root, "results");
  for (int i = 0; i < n_rows; i++) {
    const ufp4_bias_row *r = &rows[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(res, j);
    cJSON_AddStringToObject(j, "grid", ufp4_grid_get(r->grid)->name);
    cJSON_AddNumberToObject(j, "rht", r->rht);
    cJSON_AddNumberToObject(j, "alpha", r->m.alpha);
    cJSON_AddNumberToObject(j, "nmse", r->m.nmse);
    cJSON_AddNumberToObject(j, "sqnr_db", r->m.sqnr_db);
    if (r->rht)
      cJSON_AddNumberToObject(j, "dsqnr_db", r->dsqnr);
    else
      cJSON_AddNullToObject(j, "dsqnr_db");
    add_measures(j, &r->m, ufp4_grid_get(r->grid)->n_levels);
    if (r->chain) {
      cJSON *ch = cJSON_AddArrayToObject(j, "layers");
      for (int k = 0; k < o->layers; k++) {
        cJSON *jl = cJSON_CreateObject();
        cJSON_AddItemToArray(ch, jl);
        cJSON_AddNumberToObject(jl, "layer", k + 1);
        cJSON_AddNumberToObject(jl, "signal_ratio", r->chain[k].signal_ratio);
        cJSON_AddNumberToObject(jl, "cosine", r->chain[k].cosine);
        cJSON_AddNumberToObject(jl, "eta", r->chain[k].eta);
        cJSON_AddNumberToObject(jl, "eta_cum", r->chain[k].eta_cum);
      }
    }
  }
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  if (!s) {
    fprintf(stderr, "ufp4 bias: out of memory building the JSON output\n");
    return 1;
  }
  puts(s);
  free(s);
  return 0;
}

static void free_input(bias_opts *o, float *x) {
  if (o->in)
    ufp4_npy_free(&o->file);
  else
    free(x);
}

static int load_input(bias_opts *o, float **x) {
  if (o->in) {
    ufp4_npy *a = &o->file;
    if (ufp4_npy_read(o->in, a) != 0) return cli_error("bias", NULL);
    if (a->ndim != 2 || a->count == 0) {
      fprintf(stderr, "ufp4 bias: %s: need a non-empty 2-D array (rows x reduction dim), got %d-D\n", o->in,
              a->ndim);
      ufp4_npy_free(a);
      return 1;
    }
    o->rows = a->shape[0];
    o->cols = a->shape[1];
    *x = a->data;
    return 0;
  }
  ufp4_synth_spec s = ufp4_synth_default(o->dist, o->q.fmt.seed);
  if (o->dof_set) s.dof = o->dof;
  if (o->frac_set) s.outlier_frac = o->outlier_frac;
  if (o->oscale_set) s.outlier_scale = o->outlier_scale;
  o->dof = s.dof;
  o->outlier_frac = s.outlier_frac;
  o->outlier_scale = s.outlier_scale;
  if (o->rows > ((size_t)1 << 31) / o->cols) {
    fprintf(stderr, "ufp4 bias: %zu x %zu is too large (at most 2^31 elements)\n", o->rows, o->cols);
    return 2;
  }
  *x = malloc(o->rows * o->cols * sizeof **x);
  if (!*x) {
    fprintf(stderr, "ufp4 bias: out of memory for %zu x %zu floats\n", o->rows, o->cols);
    return 1;
  }
  if (ufp4_synth_fill(&s, *x, o->rows * o->cols) != 0) {
    free(*x);
    *x = NULL;
    return cli_error("bias", NULL);
  }
  return 0;
}

int ufp4_cmd_bias(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  bias_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  if (o.threads) ufp4_set_threads(o.threads);

  float *x = NULL;
  if ((rc = load_input(&o, &x))) return rc;
  if (o.q.fmt.rht && o.cols % (size_t)o.q.fmt.rht) {
    fprintf(
        stderr,
        "ufp4 bias: cols %zu is not a multiple of the RHT size %d (use --rht 0 or another size)\n",
        o.cols, o.q.fmt.rht);
    free_input(&o, x);
    return o.in ? 1 : 2;
  }

  float signs[UFP4_RHT_MAX];
  cli_qflags_signs(&o.q, signs);
  ufp4_bias_spec spec = {
      .fmt = o.q.fmt, .grids = o.grids, .n_grids = o.n_grids, .layers = o.layers};
  spec.fmt.rht_signs = signs;
  ufp4_bias_table t;
  rc = ufp4_bias_measure(&spec, x, o.rows, o.cols, &t) ? cli_error("bias", NULL) : 0;
  if (!rc && o.json) {
    rc = print_json(&o, t.rows, t.n_rows);
  } else if (!rc) {
    print_table(&o, t.rows, t.n_rows);
    if (o.layers > 0) print_chain(&o, t.rows, t.n_rows);
  }
  ufp4_bias_table_free(&t);
  free_input(&o, x);
  return rc;
}
