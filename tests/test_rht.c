/* RHT: FWHT against a dense Hadamard matrix built here, orthonormality, round trip, GEMM
 * invariance with shared signs, the NVIDIA sign vector, random signs, argument checks. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/philox.h"
#include "ufp4/rht.h"

/* Unnormalized Sylvester matrix: H_1 = [1], H_2n = [[H, H], [H, -H]], entries +-1, in double. */
static double *dense_hadamard(int n) {
  double *h = malloc((size_t)n * n * sizeof *h);
  h[0] = 1.0;
  for (int m = 1; m < n; m <<= 1)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        double v = h[i * n + j];
        h[i * n + j + m] = v;
        h[(i + m) * n + j] = v;
        h[(i + m) * n + j + m] = -v;
      }
  return h;
}

static float test_value(uint64_t i) { return ufp4_philox_normal(42, 7, i); }

static void test_fwht_matches_dense(void **state) {
  (void)state;
  for (int n = 2; n <= 256; n <<= 1) {
    double *h = dense_hadamard(n);
    float *x = malloc((size_t)n * sizeof *x);
    double *ref = malloc((size_t)n * sizeof *ref);
    double xnorm = 0.0;
    for (int i = 0; i < n; ++i) {
      x[i] = test_value((uint64_t)(n * 1000 + i));
      xnorm += (double)x[i] * x[i];
    }
    /* Row vector times H (H is symmetric, so H x = x H). */
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int i = 0; i < n; ++i) s += (double)x[i] * h[i * n + j];
      ref[j] = s / sqrt((double)n);
    }
    ufp4_fwht(x, n);
    double ynorm = 0.0;
    /* Each output is a sum of n terms in float plus one scaling: error <= ~log2(n) ulps of the
     * running magnitude; bound it by 1e-6 * ||x|| * log2(n). */
    double tol = 1e-6 * sqrt(xnorm) * log2((double)n);
    for (int j = 0; j < n; ++j) {
      if (fabs((double)x[j] - ref[j]) > tol)
        fail_msg("n=%d j=%d fwht %.9g dense %.9g", n, j, (double)x[j], ref[j]);
      ynorm += (double)x[j] * x[j];
    }
    /* Orthonormal: the norm is preserved. */
    assert_true(fabs(sqrt(ynorm) - sqrt(xnorm)) <= 1e-6 * sqrt(xnorm));
    free(h);
    free(x);
    free(ref);
  }
}

static void test_fwht_n16_exact_scale(void **state) {
  (void)state;
  /* A unit impulse becomes the first Hadamard row times 1/4 exactly: no rounding anywhere. */
  float x[16] = {0};
  x[0] = 1.0f;
  ufp4_fwht(x, 16);
  for (int i = 0; i < 16; ++i) assert_true(x[i] == 0.25f);
  /* Impulse at position 3: row 3 of H16 has sign (-1)^popcount(3 & j). */
  float y[16] = {0};
  y[3] = 4.0f;
  ufp4_fwht(y, 16);
  for (int j = 0; j < 16; ++j) assert_true(y[j] == ((__builtin_popcount(3 & j) & 1) ? -1.0f : 1.0f));
}

static void test_round_trip(void **state) {
  (void)state;
  const size_t rows = 37, cols = 256;
  float *x = malloc(rows * cols * sizeof *x), *y = malloc(rows * cols * sizeof *y);
  for (size_t i = 0; i < rows * cols; ++i) x[i] = test_value(i) * 3.0f;
  float signs[64];
  ufp4_rht_signs_random(signs, 64, 99);
  const int ns[] = {2, 4, 16, 64, 256};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; ++k) {
    const float *sg = ns[k] <= 64 ? signs : NULL;
    memcpy(y, x, rows * cols * sizeof *x);
    assert_int_equal(ufp4_rht_rows(y, rows, cols, ns[k], sg), 0);
    int changed = 0;
    for (size_t i = 0; i < rows * cols; ++i) changed |= y[i] != x[i];
    assert_true(changed);
    assert_int_equal(ufp4_rht_rows_inverse(y, rows, cols, ns[k], sg), 0);
    double num = 0, den = 0;
    for (size_t i = 0; i < rows * cols; ++i) {
      double d = (double)y[i] - x[i];
      num += d * d;
      den += (double)x[i] * x[i];
    }
    if (sqrt(num / den) > 1e-6) fail_msg("n=%d round trip rel err %.3g", ns[k], sqrt(num / den));
  }
  free(x);
  free(y);
}

/* Chunks are independent: rotating a row equals rotating each chunk with ufp4_fwht after the
 * signs, computed here by hand. */
static void test_rows_chunking(void **state) {
  (void)state;
  const size_t rows = 3, cols = 64;
  const int n = 16;
  float x[3 * 64], ref[3 * 64];
  for (size_t i = 0; i < rows * cols; ++i) x[i] = ref[i] = test_value(5000 + i);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; c += n) {
      float *p = ref + r * cols + c;
      for (int i = 0; i < n; ++i) p[i] *= ufp4_rht_signs_nvidia16[i];
      ufp4_fwht(p, n);
    }
  assert_int_equal(ufp4_rht_rows(x, rows, cols, n, ufp4_rht_signs_nvidia16), 0);
  assert_memory_equal(x, ref, sizeof x);
}

static void gemm_invariance(const float *signs, int n) {
  const size_t M = 64, N = 48, D = 256;
  float *x = malloc(M * D * sizeof *x), *w = malloc(N * D * sizeof *w);
  float *xr = malloc(M * D * sizeof *x), *wr = malloc(N * D * sizeof *w);
  for (size_t i = 0; i < M * D; ++i) xr[i] = x[i] = test_value(100000 + i);
  for (size_t i = 0; i < N * D; ++i) wr[i] = w[i] = test_value(200000 + i) * 0.1f;
  assert_int_equal(ufp4_rht_rows(xr, M, D, n, signs), 0);
  assert_int_equal(ufp4_rht_rows(wr, N, D, n, signs), 0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double a = 0, b = 0, mag = 0;
      for (size_t k = 0; k < D; ++k) {
        a += (double)x[i * D + k] * w[j * D + k];
        b += (double)xr[i * D + k] * wr[j * D + k];
        mag += fabs((double)x[i * D + k] * w[j * D + k]);
      }
      /* The only difference is the float rounding of the rotated operands (a few ulps each), so
       * the error scales with sum |x_k w_k|. */
      if (fabs(a - b) > 1e-5 * mag + 1e-12)
        fail_msg("n=%d (%zu,%zu): %.9g vs %.9g (mag %.3g)", n, i, j, a, b, mag);
    }
  free(x);
  free(w);
  free(xr);
  free(wr);
}

static void test_gemm_invariance(void **state) {
  (void)state;
  float s16[16], s256[256];
  ufp4_rht_signs_random(s16, 16, 1234);
  ufp4_rht_signs_random(s256, 256, 1234);
  gemm_invariance(ufp4_rht_signs_nvidia16, 16);
  gemm_invariance(s16, 16);
  gemm_invariance(s256, 256);
  gemm_invariance(NULL, 64);
}

static void test_nvidia_vector(void **state) {
  (void)state;
  const char *ref = "+++-+------+-+--"; /* docs/NUMERICS.md, Random Hadamard Transform */
  for (int i = 0; i < 16; ++i)
    assert_true(ufp4_rht_signs_nvidia16[i] == (ref[i] == '+' ? 1.0f : -1.0f));
}

static void test_random_signs(void **state) {
  (void)state;
  float a[256], b[256], c[256];
  ufp4_rht_signs_random(a, 256, 7);
  ufp4_rht_signs_random(b, 256, 7);
  ufp4_rht_signs_random(c, 256, 8);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_not_equal(a, c, sizeof a);
  /* Same definition as the header: top bit of Philox (seed, "RHTSIGNS", i). */
  for (int i = 0; i < 256; ++i) {
    uint32_t u = ufp4_philox_u32(7, UINT64_C(0x5248545349474e53), (uint64_t)i);
    assert_true(a[i] == ((u >> 31) ? -1.0f : 1.0f));
  }
  /* Balance over many seeds: 64 seeds x 256 = 16384 fair bits, sd of the count of -1 = 64; allow
   * 5 sd. A prefix is consistent with the longer draw. */
  long neg = 0;
  for (uint64_t s = 0; s < 64; ++s) {
    float v[256], p[16];
    ufp4_rht_signs_random(v, 256, s);
    ufp4_rht_signs_random(p, 16, s);
    assert_memory_equal(v, p, sizeof p);
    for (int i = 0; i < 256; ++i) {
      assert_true(v[i] == 1.0f || v[i] == -1.0f);
      neg += v[i] < 0;
    }
  }
  assert_true(labs(neg - 8192) <= 320);
}

static void test_bad_args(void **state) {
  (void)state;
  float x[64] = {0};
  assert_int_equal(ufp4_rht_rows(x, 1, 64, 0, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(x, 1, 64, 1, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(x, 1, 64, 12, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(x, 1, 64, 512, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(x, 1, 64, -16, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(x, 2, 24, 16, NULL), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "multiple"));
  assert_int_equal(ufp4_rht_rows_inverse(x, 2, 24, 16, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows_inverse(x, 1, 64, 3, NULL), UFP4_EINVAL);
  assert_int_equal(ufp4_rht_rows(NULL, 1, 64, 16, NULL), UFP4_EINVAL);
  /* An invalid size leaves the data untouched rather than transforming part of it. */
  float y[12];
  for (int i = 0; i < 12; ++i) y[i] = (float)i;
  ufp4_fwht(y, 12);
  for (int i = 0; i < 12; ++i) assert_true(y[i] == (float)i);
  /* Empty tensors are fine. */
  assert_int_equal(ufp4_rht_rows(NULL, 0, 64, 16, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fwht_matches_dense), cmocka_unit_test(test_fwht_n16_exact_scale),
      cmocka_unit_test(test_round_trip),         cmocka_unit_test(test_rows_chunking),
      cmocka_unit_test(test_gemm_invariance),    cmocka_unit_test(test_nvidia_vector),
      cmocka_unit_test(test_random_signs),       cmocka_unit_test(test_bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
