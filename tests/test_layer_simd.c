/* The AVX2 RMSNorm (model/rmsnorm_internal.h) through the public layer calls, against the scalar
 * loops transcribed here, bit for bit: row counts that are and are not multiples of four, widths
 * that are (the AVX2 path) and are not (the scalar path), 1 and 2 threads, accumulation into dx
 * and dw. Exits 77 (skip) without the x86 kernels or on a CPU without AVX2 and FMA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "ufp4/layers.h"
#include "ufp4/philox.h"

static void forward_ref(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
  for (int i = 0; i < N; i++) {
    const float *xi = x + (size_t)i * C;
    double ss = 0.0;
    for (int j = 0; j < C; j++) ss += (double)xi[j] * xi[j];
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    rstd[i] = r;
    for (int j = 0; j < C; j++) out[(size_t)i * C + j] = (xi[j] * r) * w[j];
  }
}

static void backward_ref(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                         int N, int C) {
  for (int i = 0; i < N; i++) {
    const float *xi = x + (size_t)i * C, *gi = dout + (size_t)i * C;
    double s = 0.0;
    for (int j = 0; j < C; j++) s += (double)gi[j] * w[j] * xi[j];
    float r = rstd[i];
    float k = (float)((double)r * r * r * s / C);
    for (int j = 0; j < C; j++) dx[(size_t)i * C + j] += r * gi[j] * w[j] - xi[j] * k;
  }
  for (int j = 0; j < C; j++) {
    double acc = 0.0;
    for (int i = 0; i < N; i++) acc += (double)dout[(size_t)i * C + j] * x[(size_t)i * C + j] * (double)rstd[i];
    dw[j] += (float)acc;
  }
}

static float *randv(size_t n, uint64_t seed, float scale) {
  float *p = malloc(n * sizeof *p);
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) p[i] = scale * ufp4_philox_normal(seed, 0, i);
  return p;
}

static void check_shape(int N, int C) {
  const size_t n = (size_t)N * C;
  float *x = randv(n, 1, 3.0f), *w = randv((size_t)C, 2, 1.0f), *g = randv(n, 3, 0.01f);
  float *o1 = malloc(n * sizeof *o1), *o2 = malloc(n * sizeof *o2), *r1 = malloc((size_t)N * 4), *r2 = malloc((size_t)N * 4);
  float *dx1 = randv(n, 4, 1.0f), *dx2 = malloc(n * sizeof *dx2), *dw1 = randv((size_t)C, 5, 1.0f), *dw2 = malloc((size_t)C * 4);
  assert_true(o1 && o2 && r1 && r2 && dx2 && dw2);
  x[3] = 0.0f; /* a zero and a huge value among ordinary ones */
  x[n / 2] = 3e18f;
  /* Rows whose backward sum depends on the order of its adds: with w and x 1 at columns 0 .. 3
   * of each row i % 3 == 1 and dout 1e20, -1e20, 1, 1 there, the terms sum to 2 in index order and
   * to 0 in any order that adds a 1 to 1e20 first. */
  if (C % 4 == 0)
    for (int i = 1; i < N; i += 3)
      for (int j = 0; j < 4; j++) {
        static const float pat[4] = {1e20f, -1e20f, 1.0f, 1.0f};
        x[(size_t)i * C + j] = 1.0f;
        g[(size_t)i * C + j] = pat[j];
        w[j] = 1.0f;
      }
  forward_ref(o1, r1, x, w, N, C, 1e-5f);
  for (int t = 1; t <= 2; t++) {
    omp_set_num_threads(t);
    assert_int_equal(ufp4_rmsnorm_forward(o2, r2, x, w, N, C, 1e-5f), 0);
    if (memcmp(o1, o2, n * sizeof *o1) || memcmp(r1, r2, (size_t)N * sizeof *r1))
      fail_msg("forward N=%d C=%d, %d thread(s): differs from the scalar loop", N, C, t);
    memcpy(dx2, dx1, n * sizeof *dx1);
    memcpy(dw2, dw1, (size_t)C * sizeof *dw1);
    assert_int_equal(ufp4_rmsnorm_backward(dx2, dw2, g, x, w, r1, N, C), 0);
    float *dxr = malloc(n * sizeof *dxr), *dwr = malloc((size_t)C * sizeof *dwr);
    memcpy(dxr, dx1, n * sizeof *dx1);
    memcpy(dwr, dw1, (size_t)C * sizeof *dw1);
    backward_ref(dxr, dwr, g, x, w, r1, N, C);
    for (size_t i = 0; i < n; i++)
      if (memcmp(&dxr[i], &dx2[i], sizeof *dxr))
        fail_msg("backward dx N=%d C=%d, %d thread(s), element %zu: %a, not %a", N, C, t, i, (double)dx2[i], (double)dxr[i]);
    for (int j = 0; j < C; j++)
      if (memcmp(&dwr[j], &dw2[j], sizeof *dwr))
        fail_msg("backward dw N=%d C=%d, %d thread(s), column %d: %a, not %a", N, C, t, j, (double)dw2[j], (double)dwr[j]);
    free(dxr);
    free(dwr);
  }
  free(x), free(w), free(g), free(o1), free(o2), free(r1), free(r2), free(dx1), free(dx2), free(dw1), free(dw2);
}

static void test_rmsnorm(void **st) {
  (void)st;
  check_shape(37, 64);  /* 9 quads and a row */
  check_shape(8, 192);  /* the study's ffn width, whole quads */
  check_shape(13, 100); /* 4 | 100 with a tail of 4 floats past the 8-wide loop */
  check_shape(6, 66);   /* not a multiple of 4: the scalar loops */
  check_shape(3, 8);    /* fewer rows than a quad */
}

int main(void) {
  if (!ufp4_simd_enabled()) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rmsnorm)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
