/* Random Hadamard Transform (rht.h): sign flip, then an orthonormal fast Walsh-Hadamard transform
 * on each n-chunk of a row.
 *
 * fwht_unscaled() is the reference. The AVX2 version (x86/rht_avx2.c; n >= 8, used when
 * ufp4_simd_enabled())
 * computes every output of every butterfly level with the same single IEEE operation on the
 * same operands (x[j] = a + b, x[j+h] = a - b), then the same one multiply by the scale, so it
 * gives the same bits; it only reorders independent operations. It is compiled for AVX2 without
 * FMA, so no multiply-add can be contracted. */
#include "ufp4/rht.h"

#include <math.h>

#include "core/cpu.h"
#include "transforms/rht_internal.h"

#include "ufp4/error.h"
#include "ufp4/philox.h"

/* Stream "RHTSIGNS" in ASCII, so the signs never share Philox bits with SR or synthetic data. */
#define RHT_SIGN_STREAM UINT64_C(0x5248545349474e53)

/* Below this many elements a parallel region costs more than it saves. */
#define RHT_PARALLEL_MIN ((size_t)1 << 15)

const float ufp4_rht_signs_nvidia16[16] = {
    +1.0f, +1.0f, +1.0f, -1.0f, +1.0f, -1.0f, -1.0f, -1.0f,
    -1.0f, -1.0f, -1.0f, +1.0f, -1.0f, +1.0f, -1.0f, -1.0f,
};

static int is_pow2_in(int n, int lo, int hi) { return n >= lo && n <= hi && (n & (n - 1)) == 0; }

/* The scale is applied once, after all butterflies, so that the transform's rounding matches an
 * unnormalized Hadamard product followed by one multiplication. 1/sqrt(n) is computed in double and
 * rounded once; for n a power of 4 (4, 16, 64, 256) it is an exact power of two (n = 16: 0.25). */
static float fwht_scale(int n) { return (float)(1.0 / sqrt((double)n)); }

static void fwht_unscaled(float *x, int n) {
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n; i += h << 1) {
      for (int j = i; j < i + h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

static void fwht_ref(float *x, int n) {
  fwht_unscaled(x, n);
  const float s = fwht_scale(n);
  for (int i = 0; i < n; ++i) x[i] *= s;
}

/* An invalid n (not a power of two in 1..UFP4_RHT_MAX) leaves x untouched: this function has no
 * status to return, and ufp4_rht_rows validates n before calling it. */
void ufp4_fwht(float *x, int n) {
  if (!x || !is_pow2_in(n, 1, UFP4_RHT_MAX)) return;
#ifdef UFP4_HAVE_X86
  if (n >= 8 && ufp4_simd_enabled()) {
    ufp4_rht_chunk_avx2(x, n, NULL, 1, fwht_scale(n));
    return;
  }
#endif
  fwht_ref(x, n);
}

/* Sign i is -1 when the top bit of Philox word i is set: one fair bit per sign. */
void ufp4_rht_signs_random(float *signs, int n, uint64_t seed) {
  if (!signs) return;
  for (int i = 0; i < n; ++i)
    signs[i] = (ufp4_philox_u32(seed, RHT_SIGN_STREAM, (uint64_t)i) >> 31) ? -1.0f : 1.0f;
}

static int check_args(const float *x, size_t rows, size_t cols, int n, const char *fn) {
  if (!is_pow2_in(n, UFP4_RHT_MIN, UFP4_RHT_MAX))
    return ufp4_fail(UFP4_EINVAL, "%s: RHT size %d is not a power of two in %d..%d", fn, n,
                     UFP4_RHT_MIN, UFP4_RHT_MAX);
  if (cols % (size_t)n != 0)
    return ufp4_fail(UFP4_EINVAL, "%s: %zu columns is not a multiple of the RHT size %d", fn, cols,
                     n);
  if (!x && rows && cols) return ufp4_fail(UFP4_EINVAL, "%s: tensor is NULL", fn);
  return UFP4_OK;
}

static void apply_signs(float *c, int n, const float *signs) {
  if (signs)
    for (int i = 0; i < n; ++i) c[i] *= signs[i];
}

/* x <- x S H (inverse 0) or x H S (inverse 1) on every chunk of one row. */
static void rht_row(float *row, size_t cols, int n, const float *signs, int inverse, int fast, float scale) {
  for (size_t c = 0; c < cols; c += (size_t)n) {
    float *p = row + c;
#ifdef UFP4_HAVE_X86
    if (fast) {
      ufp4_rht_chunk_avx2(p, n, signs, !inverse, scale);
      continue;
    }
#else
    (void)fast;
    (void)scale;
#endif
    if (!inverse) apply_signs(p, n, signs);
    fwht_ref(p, n);
    if (inverse) apply_signs(p, n, signs);
  }
}

static void rht_rows_run(float *x, size_t rows, size_t cols, int n, const float *signs, int inverse,
                         int simd) {
  const int fast = simd && n >= 8;
  const float scale = fwht_scale(n);
#pragma omp parallel for schedule(static) if (rows * cols >= RHT_PARALLEL_MIN)
  for (size_t r = 0; r < rows; ++r) rht_row(x + r * cols, cols, n, signs, inverse, fast, scale);
}

/* For callers already inside a parallel region: no OpenMP, arguments already checked. */
void ufp4_rht_rows_serial(float *x, size_t rows, size_t cols, int n, const float *signs, int simd) {
  const int fast = simd && n >= 8;
  const float scale = fwht_scale(n);
  for (size_t r = 0; r < rows; ++r) rht_row(x + r * cols, cols, n, signs, 0, fast, scale);
}

int ufp4_rht_rows_impl(float *x, size_t rows, size_t cols, int n, const float *signs, int simd) {
  int st = check_args(x, rows, cols, n, "ufp4_rht_rows");
  if (st) return st;
  rht_rows_run(x, rows, cols, n, signs, 0, simd);
  return UFP4_OK;
}

int ufp4_rht_rows(float *x, size_t rows, size_t cols, int n, const float *signs) {
  return ufp4_rht_rows_impl(x, rows, cols, n, signs, ufp4_simd_enabled());
}

/* (S H)^-1 = H^T S^-1 = H S, since H is symmetric orthonormal and S = S^-1: x <- x H S. */
int ufp4_rht_rows_inverse(float *x, size_t rows, size_t cols, int n, const float *signs) {
  int st = check_args(x, rows, cols, n, "ufp4_rht_rows_inverse");
  if (st) return st;
  rht_rows_run(x, rows, cols, n, signs, 1, ufp4_simd_enabled());
  return UFP4_OK;
}
