/* Fake-quant GEMM cost: the three GEMMs of a linear layer (ufp4_linear_forward / _dgrad / _wgrad)
 * under each recipe, against ufp4_sgemm_abt of the same m x n x k (the deterministic tiled SGEMM
 * the layer itself ends with) and raw multi-threaded OpenBLAS cblas_sgemm for reference.
 *
 * Shape "N x OUT x IN" is the layer: X [N, IN], W [OUT, IN], Y [N, OUT]. Every GEMM has 2 N OUT IN
 * flops: Fprop m=N n=OUT k=IN, Dgrad m=N n=IN k=OUT, Wgrad m=OUT n=IN k=N. Each figure is the median
 * of `reps` calls after one warm-up call, and the recipe and plain calls alternate so that load
 * drift hits both alike. */
#include "bench_gemm.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ufp4/fileio.h"
#include "ufp4/gemm.h"
#include "ufp4/linear.h"
#include "ufp4/model.h"
#include "ufp4/optim.h"
#include "ufp4/recipe.h"
#include "ufp4/ufp4.h"

typedef struct {
  size_t n, out, in;
} layer_shape;

static const layer_shape shapes[] = {{1024, 768, 3072}, {2048, 2048, 2048}};
static const char *const recipes[] = {"bf16", "e2m1", "nvfp4", "ufp4"};
enum { N_SHAPES = 2, N_RECIPES = 4 };

typedef struct {
  const ufp4_linear_ctx *ctx;
  const float *X, *W, *dY;
  float *Y, *dX, *dW, *scratch;
  size_t n, in, out;
} layer_io;

static int run_kind(layer_io *io, ufp4_gemm_kind g) {
  switch (g) {
  case UFP4_FPROP:
    return ufp4_linear_forward(io->ctx, io->X, io->W, io->Y, io->n, io->in, io->out, io->scratch);
  case UFP4_DGRAD:
    return ufp4_linear_dgrad(io->ctx, io->dY, io->W, io->dX, io->n, io->in, io->out, io->scratch);
  default:
    return ufp4_linear_wgrad(io->ctx, io->dY, io->X, io->dW, io->n, io->in, io->out, io->scratch);
  }
}

/* (m, n, k) of kind g in the C = A B^T orientation the layer uses. */
static void mnk(const layer_shape *s, ufp4_gemm_kind g, size_t *m, size_t *n, size_t *k) {
  if (g == UFP4_FPROP) *m = s->n, *n = s->out, *k = s->in;
  else if (g == UFP4_DGRAD) *m = s->n, *n = s->in, *k = s->out;
  else *m = s->out, *n = s->in, *k = s->n;
}

int ufp4_bench_gemm(const ufp4_bench_gemm_opts *o, FILE *out) {
  const int reps = o->reps;
  cJSON *root = o->json_path ? cJSON_CreateObject() : NULL;
  cJSON *jrows = root ? cJSON_AddArrayToObject(root, "gemm") : NULL;
  if (root) {
    cJSON_AddNumberToObject(root, "threads", ufp4_get_threads());
    cJSON_AddNumberToObject(root, "reps", reps);
  }
  fprintf(out, "ufp4 bench gemm: linear-layer GEMMs, both operands fake-quantized along K, vs ufp4_sgemm_abt of the "
               "same m x n x k; median of %d, %d threads\n", reps, ufp4_get_threads());
  int rc = 0;
  double *tv = malloc(2 * (size_t)reps * sizeof *tv);
  if (!tv) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  for (int si = 0; si < N_SHAPES && !rc; si++) {
    const layer_shape *s = &shapes[si];
    const size_t big = s->n * s->in > s->out * s->in ? s->n * s->in : s->out * s->in;
    float *X = malloc(s->n * s->in * sizeof(float)), *W = malloc(s->out * s->in * sizeof(float));
    float *dY = malloc(s->n * s->out * sizeof(float)), *Y = malloc(s->n * s->out * sizeof(float));
    float *dX = calloc(s->n * s->in, sizeof(float)), *dW = calloc(s->out * s->in, sizeof(float));
    float *scratch = malloc(ufp4_linear_scratch_floats(s->n, s->in, s->out) * sizeof(float));
    float *A = malloc(big * sizeof(float)), *Bm = malloc(big * sizeof(float)), *C = malloc(big * sizeof(float));
    if (!X || !W || !dY || !Y || !dX || !dW || !scratch || !A || !Bm || !C) {
      rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
    } else {
      for (size_t i = 0; i < s->n * s->in; i++) X[i] = ufp4_philox_normal(1, 1, i);
      for (size_t i = 0; i < s->out * s->in; i++) W[i] = 0.02f * ufp4_philox_normal(1, 2, i);
      for (size_t i = 0; i < s->n * s->out; i++) dY[i] = 1e-3f * ufp4_philox_normal(1, 3, i);
      for (size_t i = 0; i < big; i++) A[i] = X[i % (s->n * s->in)], Bm[i] = W[i % (s->out * s->in)];
      const double flops = 2.0 * (double)s->n * (double)s->out * (double)s->in;
      fprintf(out, "\nlayer N=%zu OUT=%zu IN=%zu (%.2f GFLOP per GEMM)\n", s->n, s->out, s->in, flops / 1e9);
      /* Raw OpenBLAS, its own threading, Fprop orientation. */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->n, (int)s->out, (int)s->in, 1.0f, A, (int)s->in,
                  Bm, (int)s->in, 0.0f, C, (int)s->out);
      for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->n, (int)s->out, (int)s->in, 1.0f, A,
                    (int)s->in, Bm, (int)s->in, 0.0f, C, (int)s->out);
        tv[r] = bench_now_s() - t0;
      }
      double t_blas = bench_median(tv, reps);
      fprintf(out, "raw cblas_sgemm (OpenBLAS threads) %zu x %zu x %zu: %.2f ms = %.1f GFLOP/s\n", s->n, s->out, s->in,
              1e3 * t_blas, flops / t_blas / 1e9);
      if (root) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(jrows, j);
        cJSON_AddStringToObject(j, "what", "cblas_sgemm");
        cJSON_AddNumberToObject(j, "n", (double)s->n);
        cJSON_AddNumberToObject(j, "out", (double)s->out);
        cJSON_AddNumberToObject(j, "in", (double)s->in);
        cJSON_AddNumberToObject(j, "median_s", t_blas);
        cJSON_AddNumberToObject(j, "gflops", flops / t_blas / 1e9);
      }
      fprintf(out, "%-6s %-6s %-16s %9s %9s %9s %9s %8s %9s\n", "gemm", "recipe", "m x n x k", "sgemm ms", "GFLOP/s",
              "recipe ms", "(quant", "gemm)", "x sgemm");
      for (int g = UFP4_FPROP; g <= UFP4_WGRAD && !rc; g++) {
        size_t m, n2, k;
        mnk(s, (ufp4_gemm_kind)g, &m, &n2, &k);
        char dims[48];
        snprintf(dims, sizeof dims, "%zux%zux%zu", m, n2, k);
        for (int ri = 0; ri < N_RECIPES && !rc; ri++) {
          ufp4_recipe rec;
          if ((rc = ufp4_recipe_parse(recipes[ri], &rec))) break;
          float signs[UFP4_RHT_MAX];
          if (rec.rht_n > 0) ufp4_rht_signs_random(signs, rec.rht_n, 7);
          ufp4_linear_times lt = {0, 0};
          ufp4_linear_ctx ctx = {.recipe = &rec, .stream = {.seed = 7, .proj = 1}, .rht_signs = signs};
          layer_io io = {&ctx, X, W, dY, Y, dX, dW, scratch, s->n, s->in, s->out};
          /* beta 1 like the layer's backward; the values only grow a little over the reps. */
          ufp4_sgemm_abt(A, Bm, C, m, n2, k, 0.0f);
          if ((rc = run_kind(&io, (ufp4_gemm_kind)g))) break;
          ctx.times = &lt;
          for (int r = 0; r < reps && !rc; r++) {
            double t0 = bench_now_s();
            ufp4_sgemm_abt(A, Bm, C, m, n2, k, 0.0f);
            double t1 = bench_now_s();
            rc = run_kind(&io, (ufp4_gemm_kind)g);
            tv[r] = t1 - t0;
            tv[reps + r] = bench_now_s() - t1;
          }
          if (rc) break;
          double t_s = bench_median(tv, reps), t_q = bench_median(tv + reps, reps);
          fprintf(out, "%-6s %-6s %-16s %9.2f %9.1f %9.2f %9.2f %8.2f %9.3f\n", ufp4_gemm_name((ufp4_gemm_kind)g),
                  recipes[ri], dims, 1e3 * t_s, flops / t_s / 1e9, 1e3 * t_q, 1e3 * lt.prepare / reps,
                  1e3 * lt.gemm / reps, t_q / t_s);
          if (root) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddItemToArray(jrows, j);
            cJSON_AddStringToObject(j, "what", "linear");
            cJSON_AddStringToObject(j, "gemm", ufp4_gemm_name((ufp4_gemm_kind)g));
            cJSON_AddStringToObject(j, "recipe", recipes[ri]);
            cJSON_AddNumberToObject(j, "m", (double)m);
            cJSON_AddNumberToObject(j, "n", (double)n2);
            cJSON_AddNumberToObject(j, "k", (double)k);
            cJSON_AddNumberToObject(j, "sgemm_median_s", t_s);
            cJSON_AddNumberToObject(j, "recipe_median_s", t_q);
            cJSON_AddNumberToObject(j, "quant_mean_s", lt.prepare / reps);
            cJSON_AddNumberToObject(j, "gemm_mean_s", lt.gemm / reps);
            cJSON_AddNumberToObject(j, "ratio", t_q / t_s);
          }
        }
      }
    }
    free(X);
    free(W);
    free(dY);
    free(Y);
    free(dX);
    free(dW);
    free(scratch);
    free(A);
    free(Bm);
    free(C);
  }
  free(tv);
  if (!rc)
    fprintf(out, "\n(quant, gemm) = mean ms inside the layer: operand preparation (transpose, RHT, quantization) "
                 "and its SGEMM; x sgemm = recipe median / sgemm median\n");
  if (!rc && root) {
    char *txt = cJSON_Print(root);
    rc = txt ? ufp4_write_file_atomic(o->json_path, txt, strlen(txt)) : ufp4_fail(UFP4_ENOMEM, "out of memory");
    free(txt);
    if (!rc) fprintf(out, "wrote %s\n", o->json_path);
  }
  cJSON_Delete(root);
  return rc;
}
