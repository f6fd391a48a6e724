/* The model layer's vector exponentials (model/vexp_internal.h) against the scalar code they
 * replace, bit for bit: the C library's expf on every one of the 2^32 float inputs; the SwiGLU
 * loops on values that reach every branch of expf; attention's softmax and score-gradient rows,
 * one and four at a time; cross-entropy's 8-lane exp against a scalar
 * transcription of its 4-lane rule on a third of all floats. Exits 77 (skip) without the x86
 * kernels or on a CPU without AVX2 and FMA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "model/vexp_internal.h"
#include "ufp4/philox.h"

#ifdef UFP4_HAVE_X86
static float f_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t u_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Same bits, or both NaN (expf returns its NaN argument quieted; the kernel calls expf for it). */
static int same(float a, float b) { return u_of(a) == u_of(b) || (isnan(a) && isnan(b)); }

enum { CHUNK = 1 << 16 };
/* The sanitizer build checks the kernels' memory accesses, on every 61st chunk; the plain build
 * checks every value. */
#ifdef __SANITIZE_ADDRESS__
enum { CHUNK_STEP = 61 };
#else
enum { CHUNK_STEP = 1 };
#endif

/* Every float x, in chunks of 2^16 consecutive bit patterns: ufp4_m_expf_sub_avx2(x - 0) == expf(x).
 * Prints the first few mismatches, so that a failure says which inputs. */
static void test_expf_exhaustive(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  long long bad = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : bad)
  for (long long c = 0; c < (1LL << 32) / CHUNK; c += CHUNK_STEP) {
    float *x = malloc(2 * CHUNK * sizeof *x), *y = x + CHUNK; /* not on the threads' stacks */
    if (!x) abort();
    for (int i = 0; i < CHUNK; i++) x[i] = f_of((uint32_t)(c * CHUNK + i));
    ufp4_m_expf_sub_avx2(y, x, 0.0f, CHUNK);
    for (int i = 0; i < CHUNK; i++) {
      float ref = expf(x[i]);
      if (!same(ref, y[i])) {
        if (bad < 5) printf("expf(%a): libm %a, kernel %a\n", (double)x[i], (double)ref, (double)y[i]);
        bad++;
      }
    }
    free(x);
  }
  assert_int_equal(bad, 0);
}

/* In place, a shift, and every length 0..40 (the scalar tail): expf(in[j] - sub). */
static void test_expf_sub_tails(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  const float subs[] = {0.0f, 3.25f, -7.5f, 90.0f, FLT_MAX, -INFINITY};
  for (size_t s = 0; s < sizeof subs / sizeof *subs; s++)
    for (int n = 0; n <= 40; n++) {
      float in[40], out[40], ref[40];
      for (int j = 0; j < n; j++) {
        in[j] = 30.0f * ufp4_philox_normal(11, (uint64_t)s, (uint64_t)(n * 40 + j));
        ref[j] = expf(in[j] - subs[s]);
      }
      memcpy(out, in, (size_t)n * sizeof *in);
      ufp4_m_expf_sub_avx2(out, out, subs[s], (size_t)n);
      for (int j = 0; j < n; j++) assert_true(same(ref[j], out[j]));
    }
}

/* Gates over the whole useful range and the special values: expf(-g) overflowing, underflowing,
 * NaN, infinities, signed zeros. */
static float gate_value(size_t i) {
  static const float special[] = {0.0f, -0.0f, 88.0f, -88.0f, 88.7f, -88.7f, 104.0f, -104.0f, 1e30f,
                                  -1e30f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN, 0x1p-149f};
  if (i % 13 == 0) return special[(i / 13) % (sizeof special / sizeof *special)];
  return (i % 3 ? 4.0f : 40.0f) * ufp4_philox_normal(21, 0, (uint64_t)i);
}

enum { NS = 4099 }; /* not a multiple of 8 */

static void test_swiglu_forward(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  static float g[NS], up[NS], out[NS];
  for (size_t i = 0; i < NS; i++) {
    g[i] = gate_value(i);
    up[i] = ufp4_philox_normal(22, 0, (uint64_t)i);
  }
  ufp4_m_swiglu_forward_avx2(out, g, up, NS);
  for (size_t i = 0; i < NS; i++) {
    float ref = g[i] / (1.0f + expf(-g[i])) * up[i];
    if (!same(ref, out[i])) fail_msg("swiglu forward at %zu (g = %a): %a, not %a", i, (double)g[i], (double)out[i], (double)ref);
  }
}

static void test_swiglu_backward(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  static float g[NS], up[NS], d[NS], dg[NS], du[NS], dg0[NS], du0[NS];
  for (size_t i = 0; i < NS; i++) {
    g[i] = gate_value(i);
    up[i] = ufp4_philox_normal(23, 0, (uint64_t)i);
    d[i] = ufp4_philox_normal(23, 1, (uint64_t)i);
    dg[i] = dg0[i] = ufp4_philox_normal(23, 2, (uint64_t)i); /* the kernels accumulate */
    du[i] = du0[i] = ufp4_philox_normal(23, 3, (uint64_t)i);
  }
  ufp4_m_swiglu_backward_avx2(dg, du, d, g, up, NS);
  for (size_t i = 0; i < NS; i++) {
    float sg = 1.0f / (1.0f + expf(-g[i]));
    float rg = dg0[i] + d[i] * up[i] * sg * (1.0f + g[i] * (1.0f - sg));
    float ru = du0[i] + d[i] * g[i] * sg;
    if (!same(rg, dg[i]) || !same(ru, du[i]))
      fail_msg("swiglu backward at %zu (g = %a): dgate %a / %a, dup %a / %a", i, (double)g[i],
               (double)dg[i], (double)rg, (double)du[i], (double)ru);
  }
}

/* attention.c's scalar row, transcribed. */
static void softmax_row_ref(float *p, int n, int T) {
  float mx = -FLT_MAX;
  for (int j = 0; j < n; j++)
    if (p[j] > mx) mx = p[j];
  double sum = 0.0;
  for (int j = 0; j < n; j++) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  float inv = (float)(1.0 / sum);
  for (int j = 0; j < n; j++) p[j] *= inv;
  for (int j = n; j < T; j++) p[j] = 0.0f;
}

/* Rows of every length 1..150 (with garbage past n that must become 0), of spreads from 1 to 200
 * (so that expf underflows), with repeated maxima, signed zeros, infinities and NaN. */
static void test_softmax_rows(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  for (int kind = 0; kind < 6; kind++)
    for (int n = 1; n <= 150; n++) {
      const int T = n + 9;
      float a[160], b[160];
      for (int j = 0; j < T; j++) {
        float v = (kind == 1 ? 60.0f : kind == 2 ? 3.0f : 1.0f) * ufp4_philox_normal(41, (uint64_t)kind, (uint64_t)(n * 160 + j));
        if (kind == 3) v = j % 3 ? 0.0f : -0.0f;                   /* a max that is a zero of both signs */
        if (kind == 4 && j % 17 == 5) v = -INFINITY;
        if (kind == 5 && j == n / 2) v = j % 2 ? NAN : INFINITY;
        if (kind == 2 && j % 5 == 0) v = 2.5f;                     /* a repeated maximum */
        a[j] = b[j] = v;
      }
      softmax_row_ref(a, n, T);
      ufp4_m_softmax_row_avx2(b, n, T);
      for (int j = 0; j < T; j++)
        if (!same(a[j], b[j])) fail_msg("softmax row kind %d n %d at %d: %a, not %a", kind, n, j, (double)b[j], (double)a[j]);
    }
}

/* Four consecutive rows of a causal block through the 4-row kernel: the same as each through the
 * scalar row (row stride T + 3, so that the rows do not sit back to back). */
static void test_softmax_rows4(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  enum { T = 70, LD = T + 3 };
  static float a[4 * LD], b[4 * LD];
  for (int n0 = 1; n0 + 3 <= T; n0++) {
    for (int i = 0; i < 4 * LD; i++) a[i] = b[i] = 5.0f * ufp4_philox_normal(43, (uint64_t)n0, (uint64_t)i);
    for (int l = 0; l < 4; l++) softmax_row_ref(a + l * LD, n0 + l, T);
    ufp4_m_softmax_rows4_avx2(b, LD, n0, T);
    for (int l = 0; l < 4; l++)
      for (int j = 0; j < T; j++)
        if (!same(a[l * LD + j], b[l * LD + j]))
          fail_msg("softmax rows4 n0 %d row %d at %d: %a, not %a", n0, l, j, (double)b[l * LD + j], (double)a[l * LD + j]);
  }
}

/* attention.c's score-gradient rows, transcribed. */
static void ds_row_ref(float *dst, const float *p, int n, int width, float scale) {
  double pdp = 0.0;
  for (int j = 0; j < n; j++) pdp += (double)p[j] * dst[j];
  float c = (float)pdp;
  for (int j = 0; j < n; j++) dst[j] = p[j] * (dst[j] - c) * scale;
  for (int j = n; j < width; j++) dst[j] = 0.0f;
}

/* Against the scalar rows, on ordinary data and on rows whose sum depends on the order of its adds
 * (p dp terms 1e20, -1e20, 1, 1 at the start of every row sum to 2 in index order only). */
static void test_attn_ds_rows4(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  enum { W = 66, LDD = W + 1, LDP = W + 5 };
  static float d1[4 * LDD], d2[4 * LDD], p[4 * LDP];
  for (int kind = 0; kind < 2; kind++)
    for (int n0 = 1; n0 + 3 <= W; n0++) {
      for (int i = 0; i < 4 * LDP; i++) p[i] = fabsf(ufp4_philox_normal(44, (uint64_t)n0, (uint64_t)i));
      for (int i = 0; i < 4 * LDD; i++) d1[i] = d2[i] = ufp4_philox_normal(45, (uint64_t)n0, (uint64_t)i);
      if (kind == 1 && n0 >= 4)
        for (int l = 0; l < 4; l++) {
          static const float pat[4] = {1e20f, -1e20f, 1.0f, 1.0f};
          for (int j = 0; j < 4; j++) p[l * LDP + j] = 1.0f, d1[l * LDD + j] = d2[l * LDD + j] = pat[j];
        }
      for (int l = 0; l < 4; l++) ds_row_ref(d1 + l * LDD, p + l * LDP, n0 + l, W, 0.125f);
      ufp4_m_attn_ds_rows4_avx2(d2, LDD, p, LDP, n0, W, 0.125f);
      for (int l = 0; l < 4; l++)
        for (int j = 0; j < W; j++)
          if (!same(d1[l * LDD + j], d2[l * LDD + j]))
            fail_msg("ds rows4 kind %d n0 %d row %d at %d: %a, not %a", kind, n0, l, j, (double)d2[l * LDD + j],
                     (double)d1[l * LDD + j]);
    }
}

/* cross_entropy.c's rule for one float (its comment: Cephes's expf scheme, no FMA). */
static float cephes_ref(float x) {
  if (!(x > -87.0f && x < 88.0f)) return expf(x);
  const float magic = 12582912.0f;
  float n = (x * 1.44269504088896341f + magic) - magic;
  float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * f_of((uint32_t)((int32_t)n + 127) << 23);
}

/* Every third bit pattern (a stride prime to the vector width, so every lane position sees every
 * residue), and a row of awkward length shifted by its max as the layer does. */
static void test_cephes(void **st) {
  (void)st;
  if (!ufp4_simd_enabled()) skip();
  long long bad = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : bad)
  for (long long c = 0; c < (1LL << 32) / (3LL * CHUNK) + 1; c += CHUNK_STEP) {
    float *x = malloc(2 * CHUNK * sizeof *x), *y = x + CHUNK;
    if (!x) abort();
    int n = 0;
    for (; n < CHUNK; n++) {
      long long u = (c * CHUNK + n) * 3;
      if (u >= (1LL << 32)) break;
      x[n] = f_of((uint32_t)u);
    }
    ufp4_m_exp_cephes_sub_avx2(y, x, 0.0f, n);
    for (int i = 0; i < n; i++)
      if (!same(cephes_ref(x[i]), y[i])) {
        if (bad < 5) printf("cephes exp(%a): %a, not %a\n", (double)x[i], (double)y[i], (double)cephes_ref(x[i]));
        bad++;
      }
    free(x);
  }
  assert_int_equal(bad, 0);
  float row[203], out[203];
  for (int j = 0; j < 203; j++) row[j] = 8.0f * ufp4_philox_normal(31, 0, (uint64_t)j);
  memcpy(out, row, sizeof out);
  ufp4_m_exp_cephes_sub_avx2(out, out, 5.5f, 203);
  for (int j = 0; j < 203; j++) assert_true(same(cephes_ref(row[j] - 5.5f), out[j]));
}
#endif

int main(void) {
#ifdef UFP4_HAVE_X86
  if (!ufp4_simd_enabled()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expf_exhaustive), cmocka_unit_test(test_expf_sub_tails),
      cmocka_unit_test(test_swiglu_forward),  cmocka_unit_test(test_swiglu_backward),
      cmocka_unit_test(test_softmax_rows),    cmocka_unit_test(test_softmax_rows4),
      cmocka_unit_test(test_attn_ds_rows4),   cmocka_unit_test(test_cephes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
