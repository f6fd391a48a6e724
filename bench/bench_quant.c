/* Quantizer throughput: ufp4_fake_quant per grid x scale x thread count, the cost of fusing
 * RHT16 into it, a memcpy of the same bytes as the bandwidth bound, and what quantizing while
 * packing would save (bench_strips.c). Each figure is the median of `reps` timed calls after one
 * untimed warm-up call (page faults, caches, thread start-up). */
#include "bench_quant.h"
#include "bench_strips.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ufp4/ufp4.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median seconds of one fake_quant call, or a negative status. */
static int time_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols, int reps,
                      double *t) {
  double *v = malloc((size_t)reps * sizeof *v);
  if (!v) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  int rc = ufp4_fake_quant(f, x, y, rows, cols);
  for (int r = 0; r < reps && !rc; r++) {
    double t0 = now_s();
    rc = ufp4_fake_quant(f, x, y, rows, cols);
    v[r] = now_s() - t0;
  }
  if (!rc) *t = median(v, reps);
  free(v);
  return rc;
}

/* Times a and b in alternation, so that drift in the machine's load hits both alike. */
static int time_pair(const ufp4_qformat *a, const ufp4_qformat *b, const float *x, float *y, size_t rows,
                     size_t cols, int reps, double *ta, double *tb) {
  double *v = malloc(2 * (size_t)reps * sizeof *v);
  if (!v) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  int rc = ufp4_fake_quant(a, x, y, rows, cols);
  if (!rc) rc = ufp4_fake_quant(b, x, y, rows, cols);
  for (int r = 0; r < reps && !rc; r++) {
    double t0 = now_s();
    rc = ufp4_fake_quant(a, x, y, rows, cols);
    double t1 = now_s();
    if (!rc) rc = ufp4_fake_quant(b, x, y, rows, cols);
    v[r] = t1 - t0;
    v[reps + r] = now_s() - t1;
  }
  if (!rc) {
    *ta = median(v, reps);
    *tb = median(v + reps, reps);
  }
  free(v);
  return rc;
}

static double time_memcpy(const float *x, float *y, size_t n, int reps) {
  double *v = malloc((size_t)reps * sizeof *v);
  if (!v) return -1;
  memcpy(y, x, n * sizeof *x);
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    memcpy(y, x, n * sizeof *x);
    /* Keep the copy observable so that it cannot be dropped. */
    __asm__ volatile("" : : "r"(y) : "memory");
    v[r] = now_s() - t0;
  }
  double m = median(v, reps);
  free(v);
  return m;
}

static const ufp4_grid_id bench_grids[] = {UFP4_GRID_E2M1, UFP4_GRID_E1M2, UFP4_GRID_INT4};
static const ufp4_scale_kind bench_scales[] = {UFP4_SCALE_FP32, UFP4_SCALE_NVFP4, UFP4_SCALE_E8M0_RCEIL};
enum { n_bgrids = 3, n_bscales = 3 };

int ufp4_bench_quant(const ufp4_bench_quant_opts *o, FILE *out) {
  size_t n = o->rows * o->cols;
  if (o->rows == 0 || o->cols == 0 || o->reps < 1 || o->n_threads < 1 || o->cols % 16)
    return ufp4_fail(UFP4_EINVAL, "need rows, cols >= 1 with cols a multiple of 16, reps >= 1");
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  cJSON *root = o->json_path ? cJSON_CreateObject() : NULL;
  int rc = 0;
  if (!x || !y) {
    rc = ufp4_fail(UFP4_ENOMEM, "out of memory for 2 x %zu floats", n);
    goto done;
  }
  ufp4_synth_spec spec = ufp4_synth_default(UFP4_DIST_GAUSSIAN, 1);
  if ((rc = ufp4_synth_fill(&spec, x, n))) goto done;

  double mb = (double)(n * sizeof *x) / 1e6;
  double t_mem = time_memcpy(x, y, n, o->reps);
  if (t_mem < 0) {
    rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
    goto done;
  }
  fprintf(out, "ufp4 bench quant: ufp4_fake_quant on %zu x %zu float32 gaussian (%.2f M elements, %.1f MB in +"
               " %.1f MB out), 1x16 blocks, RNE; median of %d reps after 1 warm-up\n",
          o->rows, o->cols, (double)n / 1e6, mb, mb, o->reps);
  fprintf(out, "memcpy of the same %.1f MB (1 thread): %.3f ms = %.2f GB/s read+write, %.3f G elements/s\n\n", mb,
          1e3 * t_mem, 2 * mb / 1e3 / t_mem, (double)n / 1e9 / t_mem);
  cJSON *jres = NULL, *jfuse = NULL, *jstrips = NULL;
  if (root) {
    cJSON_AddNumberToObject(root, "rows", (double)o->rows);
    cJSON_AddNumberToObject(root, "cols", (double)o->cols);
    cJSON_AddNumberToObject(root, "reps", o->reps);
    cJSON *jm = cJSON_AddObjectToObject(root, "memcpy");
    cJSON_AddNumberToObject(jm, "median_s", t_mem);
    cJSON_AddNumberToObject(jm, "gbytes_per_s_rw", 2 * mb / 1e3 / t_mem);
    jres = cJSON_AddArrayToObject(root, "quant");
    jfuse = cJSON_AddArrayToObject(root, "rht16_fusion");
    jstrips = cJSON_AddArrayToObject(root, "strips");
  }

  fprintf(out, "%7s  %-5s %-11s %10s %9s %9s\n", "threads", "grid", "scale", "G elem/s", "ms", "x memcpy");
  for (int ti = 0; ti < o->n_threads && !rc; ti++) {
    ufp4_set_threads(o->threads[ti]);
    for (int g = 0; g < n_bgrids && !rc; g++)
      for (int s = 0; s < n_bscales && !rc; s++) {
        ufp4_qformat f = ufp4_qformat_default();
        f.grid = bench_grids[g];
        f.scale = bench_scales[s];
        double t = 0;
        if ((rc = time_quant(&f, x, y, o->rows, o->cols, o->reps, &t))) break;
        fprintf(out, "%7d  %-5s %-11s %10.3f %9.3f %9.2f\n", o->threads[ti], ufp4_grid_get(f.grid)->name,
                ufp4_scale_name(f.scale), (double)n / 1e9 / t, 1e3 * t, t / t_mem);
        if (jres) {
          cJSON *j = cJSON_CreateObject();
          cJSON_AddItemToArray(jres, j);
          cJSON_AddNumberToObject(j, "threads", o->threads[ti]);
          cJSON_AddStringToObject(j, "grid", ufp4_grid_get(f.grid)->name);
          cJSON_AddStringToObject(j, "scale", ufp4_scale_name(f.scale));
          cJSON_AddNumberToObject(j, "median_s", t);
          cJSON_AddNumberToObject(j, "gelem_per_s", (double)n / 1e9 / t);
          cJSON_AddNumberToObject(j, "memcpy_ratio", t / t_mem);
        }
      }
  }
  if (rc) goto done;

  fprintf(out, "\nfused RHT16 + quantize vs quantize alone (fp32 scale, NVIDIA signs; the two timed in alternation;\n"
               "paper, on GPUs: 1.06x Hopper, 1.07x Blackwell):\n");
  for (int ti = 0; ti < o->n_threads && !rc; ti++) {
    ufp4_set_threads(o->threads[ti]);
    for (int g = 0; g < 2 && !rc; g++) { /* e2m1 (reference recipe) and e1m2 (UFP4) */
      ufp4_qformat plain = ufp4_qformat_default(), fused;
      plain.grid = bench_grids[g];
      fused = plain;
      fused.rht = 16;
      fused.rht_signs = ufp4_rht_signs_nvidia16;
      double tp = 0, tf = 0;
      if ((rc = time_pair(&plain, &fused, x, y, o->rows, o->cols, o->reps, &tp, &tf))) break;
      double ratio = tf / tp;
      fprintf(out, "  threads %d  %-5s  %.3f ms vs %.3f ms = %.2fx  (%.3f G elem/s, %.2fx memcpy)\n", o->threads[ti],
              ufp4_grid_get(plain.grid)->name, 1e3 * tf, 1e3 * tp, ratio, (double)n / 1e9 / tf, tf / t_mem);
      if (jfuse) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(jfuse, j);
        cJSON_AddNumberToObject(j, "threads", o->threads[ti]);
        cJSON_AddStringToObject(j, "grid", ufp4_grid_get(plain.grid)->name);
        cJSON_AddNumberToObject(j, "median_s", tf);
        cJSON_AddNumberToObject(j, "plain_median_s", tp);
        cJSON_AddNumberToObject(j, "ratio", ratio);
      }
    }
  }
  if (rc || (rc = ufp4_bench_quant_strips(o->reps, out, jstrips))) goto done;

  if (root) {
    char *s = cJSON_Print(root);
    if (!s) {
      rc = ufp4_fail(UFP4_ENOMEM, "out of memory building JSON");
    } else {
      FILE *fp = fopen(o->json_path, "w");
      int bad = !fp;
      if (fp) {
        bad = fputs(s, fp) < 0 || fputc('\n', fp) < 0;
        bad |= fclose(fp) != 0;
      }
      if (bad)
        rc = ufp4_fail(UFP4_EIO, "%s: cannot write the JSON results", o->json_path);
      else
        fprintf(out, "\nwrote %s\n", o->json_path);
      free(s);
    }
  }
done:
  cJSON_Delete(root);
  free(x);
  free(y);
  return rc;
}
