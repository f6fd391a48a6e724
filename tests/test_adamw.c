/* AdamW: the AVX2 kernel against the scalar reference bit for bit, the reference against a double
 * evaluation of the update formula, and the whole step's segments and thread split. */
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
#include "training/adamw_internal.h"
#include "ufp4/optim.h"
#include "ufp4/philox.h"

enum { N = 4099 }; /* not a multiple of 8: the kernel's scalar tail runs too */

typedef struct {
  float p[N], g[N], m[N], v[N];
} state;

static void fill(state *s, uint64_t seed) {
  for (int i = 0; i < N; i++) {
    s->p[i] = ufp4_philox_normal(seed, 1, (uint64_t)i);
    s->g[i] = ufp4_philox_normal(seed, 2, (uint64_t)i) * (i % 7 == 0 ? 1e-6f : 1.0f);
    s->m[i] = 0.1f * ufp4_philox_normal(seed, 3, (uint64_t)i);
    s->v[i] = fabsf(ufp4_philox_normal(seed, 4, (uint64_t)i)) * (i % 5 == 0 ? 0.0f : 0.01f);
  }
  s->g[3] = 0.0f;
  s->g[4] = -0.0f;
  s->p[5] = 1e30f;
}

static const ufp4_adamw_consts K = {.b1 = 0.9f, .b2 = 0.95f, .eps = 1e-8f, .bc1 = 0.271f, .bc2 = 0.1426f,
                                    .lr = 2e-3f, .gscale = 0.75f};

static void test_avx2_matches_reference(void **st) {
  (void)st;
#ifdef UFP4_HAVE_X86
  if (!ufp4_simd_enabled()) skip();
  static state a, b;
  fill(&a, 5);
  b = a;
  for (int rep = 0; rep < 3; rep++) { /* the moments carry over from step to step */
    ufp4_adamw_span_ref(a.p, a.g, a.m, a.v, N, &K, 0.1f);
    ufp4_adamw_span_avx2(b.p, b.g, b.m, b.v, N, &K, 0.1f);
  }
  assert_memory_equal(&a, &b, sizeof a);
#else
  skip();
#endif
}

/* The reference is the formula: each step of it in double, rounded to float where the contract
 * rounds, gives the same floats (float ops are correctly rounded, so double-then-round of a single
 * operation is exact). */
static void test_reference_is_the_formula(void **st) {
  (void)st;
  static state a;
  fill(&a, 6);
  static float p0[N], m0[N], v0[N];
  memcpy(p0, a.p, sizeof p0);
  memcpy(m0, a.m, sizeof m0);
  memcpy(v0, a.v, sizeof v0);
  const float wd = 0.1f;
  ufp4_adamw_span_ref(a.p, a.g, a.m, a.v, N, &K, wd);
  for (int i = 0; i < N; i++) {
    float gi = (float)((double)a.g[i] * K.gscale);
    float mi = (float)((double)(float)((double)K.b1 * m0[i]) + (double)(float)((double)(1.0f - K.b1) * gi));
    float t = (float)((double)(1.0f - K.b2) * gi);
    float vi = (float)((double)(float)((double)K.b2 * v0[i]) + (double)(float)((double)t * gi));
    assert_true(mi == a.m[i]);
    assert_true(vi == a.v[i]);
    float mhat = (float)((double)mi / K.bc1), vhat = (float)((double)vi / K.bc2);
    float den = (float)((double)(float)sqrt((double)vhat) + K.eps);
    float upd = (float)((double)(float)((double)mhat / den) + (double)(float)((double)wd * p0[i]));
    float p = (float)((double)p0[i] - (double)(float)((double)K.lr * upd));
    assert_true(p == a.p[i]);
  }
}

/* ufp4_adamw_step over segments (decay on, off) at 1 and 2 threads equals the reference span by
 * span, bit for bit; parameters before the first segment are left alone. */
static void test_step_segments_and_threads(void **st) {
  (void)st;
  enum { M = 70000 };
  float *p[3], *g = malloc(M * sizeof(float)), *m[3], *v[3];
  for (int r = 0; r < 3; r++) {
    p[r] = malloc(M * sizeof(float));
    m[r] = calloc(M, sizeof(float));
    v[r] = calloc(M, sizeof(float));
  }
  for (int i = 0; i < M; i++) {
    g[i] = ufp4_philox_normal(9, 1, (uint64_t)i);
    p[0][i] = p[1][i] = p[2][i] = ufp4_philox_normal(9, 2, (uint64_t)i);
  }
  const size_t seg[5] = {10, 64, 20000, 20001, 40000};
  const uint8_t dec[5] = {1, 0, 1, 0, 1};
  ufp4_adamw_config c = ufp4_adamw_default();
  for (int t = 1; t <= 2; t++) {
    omp_set_num_threads(t);
    ufp4_adamw_step(p[t], g, m[t], v[t], M, &c, 1e-3, 3, 0.5f, seg, dec, 5);
  }
  const ufp4_adamw_consts k = {.b1 = (float)c.beta1, .b2 = (float)c.beta2, .eps = (float)c.eps,
                               .bc1 = (float)(1 - pow(c.beta1, 3)), .bc2 = (float)(1 - pow(c.beta2, 3)),
                               .lr = 1e-3f, .gscale = 0.5f};
  for (int s = 0; s < 5; s++) {
    size_t b = seg[s], e = s + 1 < 5 ? seg[s + 1] : M;
    ufp4_adamw_span_ref(p[0] + b, g + b, m[0] + b, v[0] + b, e - b, &k, dec[s] ? (float)c.weight_decay : 0.0f);
  }
  for (int t = 1; t <= 2; t++) {
    assert_memory_equal(p[0], p[t], M * sizeof(float));
    assert_memory_equal(m[0], m[t], M * sizeof(float));
    assert_memory_equal(v[0], v[t], M * sizeof(float));
  }
  assert_true(m[1][0] == 0.0f && m[1][9] == 0.0f && m[1][10] != 0.0f);
  for (int r = 0; r < 3; r++) {
    free(p[r]);
    free(m[r]);
    free(v[r]);
  }
  free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_avx2_matches_reference),
      cmocka_unit_test(test_reference_is_the_formula),
      cmocka_unit_test(test_step_segments_and_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
