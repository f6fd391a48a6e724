/* Every layer kernel, forward and backward, gives bit-identical results at 1, 2 and 3 OpenMP
 * threads (shapes chosen so that the work splits unevenly and repeated tokens share dwte rows). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/layers.h"

static uint64_t rng_state;
static float frand(float lo, float hi) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (float)(lo + (hi - lo) * ((double)(z >> 11) * 0x1.0p-53));
}

static float *randv(size_t n, float lo, float hi) {
  float *p = malloc(n * sizeof(float));
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) p[i] = frand(lo, hi);
  return p;
}
static float *zeros(size_t n) {
  float *p = calloc(n, sizeof(float));
  assert_non_null(p);
  return p;
}

/* The outputs of one run: up to 8 float buffers, compared bitwise across thread counts. */
typedef struct {
  float *buf[8];
  size_t n[8];
  int count;
  double scalar;
} result;

static void keep(result *r, float *p, size_t n) {
  r->buf[r->count] = p;
  r->n[r->count] = n;
  r->count++;
}

static void result_free(result *r) {
  for (int i = 0; i < r->count; i++) free(r->buf[i]);
}

typedef void (*layer_run)(result *r);

/* Runs the layer at 1, 2 and 3 threads with the same inputs (each run reseeds) and compares. */
static void check_threads(const char *name, layer_run run) {
  result base = {0};
  omp_set_num_threads(1);
  run(&base);
  for (int nt = 2; nt <= 3; nt++) {
    omp_set_num_threads(nt);
    assert_int_equal(omp_get_max_threads(), nt);
    result other = {0};
    run(&other);
    assert_int_equal(other.count, base.count);
    for (int i = 0; i < base.count; i++) {
      if (memcmp(base.buf[i], other.buf[i], base.n[i] * sizeof(float)) != 0) {
        fprintf(stderr, "%s: output %d differs between 1 and %d threads\n", name, i, nt);
        fail();
      }
    }
    assert_memory_equal(&base.scalar, &other.scalar, sizeof(double));
    result_free(&other);
  }
  result_free(&base);
}

static void run_embedding(result *r) {
  /* BT x C above 2^20, where the backward pass shares its columns over the threads. */
  enum { BT = 3517, V = 37, C = 300 };
  rng_state = 11;
  static int32_t tok[BT];
  for (int i = 0; i < BT; i++) tok[i] = (int32_t)(frand(0, 1) * V) % V;
  float *wte = randv((size_t)V * C, -1, 1), *dout = randv((size_t)BT * C, -1, 1);
  float *out = zeros((size_t)BT * C), *dwte = zeros((size_t)V * C);
  assert_int_equal(ufp4_embedding_forward(out, tok, wte, BT, V, C), 0);
  assert_int_equal(ufp4_embedding_backward(dwte, dout, tok, BT, V, C), 0);
  keep(r, out, (size_t)BT * C);
  keep(r, dwte, (size_t)V * C);
  free(wte);
  free(dout);
}

static void run_rmsnorm(result *r) {
  enum { N = 263, C = 300 };
  rng_state = 12;
  float *x = randv((size_t)N * C, -3, 3), *w = randv(C, 0, 2), *dout = randv((size_t)N * C, -1, 1);
  float *out = zeros((size_t)N * C), *rstd = zeros(N), *dx = zeros((size_t)N * C), *dw = zeros(C);
  assert_int_equal(ufp4_rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f), 0);
  assert_int_equal(ufp4_rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C), 0);
  keep(r, out, (size_t)N * C);
  keep(r, rstd, N);
  keep(r, dx, (size_t)N * C);
  keep(r, dw, C);
  free(x);
  free(w);
  free(dout);
}

static void run_rope(result *r) {
  enum { B = 3, T = 67, NH = 5, D = 64 };
  const size_t n = (size_t)B * T * NH * D;
  rng_state = 13;
  float *x = randv(n, -1, 1), *dout = randv(n, -1, 1);
  float *cs = zeros((size_t)T * D / 2), *sn = zeros((size_t)T * D / 2);
  float *out = zeros(n), *dx = zeros(n);
  assert_int_equal(ufp4_rope_init(cs, sn, T, D, 10000.0), 0);
  assert_int_equal(ufp4_rope_forward(out, x, cs, sn, B, T, NH, D), 0);
  assert_int_equal(ufp4_rope_backward(dx, dout, cs, sn, B, T, NH, D), 0);
  keep(r, out, n);
  keep(r, dx, n);
  keep(r, cs, (size_t)T * D / 2);
  keep(r, sn, (size_t)T * D / 2);
  free(x);
  free(dout);
}

static void run_attention(result *r) {
  enum { B = 3, T = 71, H = 6, KVH = 2, D = 32 };
  const size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * KVH * D;
  const size_t na = (size_t)B * H * T * T;
  rng_state = 14;
  float *q = randv(nq, -2, 2), *k = randv(nk, -2, 2), *v = randv(nk, -1, 1);
  float *dout = randv(nq, -1, 1);
  float *scratch = zeros(ufp4_attention_scratch_floats(B, T, KVH));
  float *out = zeros(nq), *att = zeros(na), *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
  assert_int_equal(ufp4_attention_forward(out, att, q, k, v, B, T, H, KVH, D), 0);
  assert_int_equal(
      ufp4_attention_backward(dq, dk, dv, scratch, dout, att, q, k, v, B, T, H, KVH, D), 0);
  keep(r, out, nq);
  keep(r, att, na);
  keep(r, dq, nq);
  keep(r, dk, nk);
  keep(r, dv, nk);
  free(q);
  free(k);
  free(v);
  free(dout);
  free(scratch);
}

static void run_swiglu(result *r) {
  enum { N = 97, F = 611 };
  const size_t n = (size_t)N * F;
  rng_state = 15;
  float *g = randv(n, -8, 8), *u = randv(n, -2, 2), *dout = randv(n, -1, 1);
  float *out = zeros(n), *dg = zeros(n), *du = zeros(n);
  assert_int_equal(ufp4_swiglu_forward(out, g, u, N, F), 0);
  assert_int_equal(ufp4_swiglu_backward(dg, du, dout, g, u, N, F), 0);
  keep(r, out, n);
  keep(r, dg, n);
  keep(r, du, n);
  free(g);
  free(u);
  free(dout);
}

static void run_cross_entropy(result *r) {
  enum { BT = 67, V = 2003 };
  const size_t n = (size_t)BT * V;
  rng_state = 16;
  int32_t tgt[BT];
  for (int i = 0; i < BT; i++) tgt[i] = i % 9 == 4 ? -1 : (int32_t)(frand(0, 1) * V) % V;
  float *logits = randv(n, -6, 6), *losses = zeros(BT), *lse = zeros(BT), *dl = zeros(n);
  int nvalid = 0;
  assert_int_equal(ufp4_cross_entropy_forward(losses, lse, &r->scalar, &nvalid, logits, tgt, BT, V), 0);
  assert_int_equal(ufp4_cross_entropy_backward(dl, logits, lse, tgt, 1.0f, BT, V), 0);
  keep(r, losses, BT);
  keep(r, lse, BT);
  keep(r, dl, n);
  free(logits);
}

static void run_residual(result *r) {
  const size_t n = 100003;
  rng_state = 17;
  float *a = randv(n, -1, 1), *b = randv(n, -1, 1), *dout = randv(n, -1, 1);
  float *out = zeros(n), *da = randv(n, -1, 1), *db = zeros(n);
  assert_int_equal(ufp4_residual_forward(out, a, b, n), 0);
  assert_int_equal(ufp4_residual_backward(da, db, dout, n), 0);
  keep(r, out, n);
  keep(r, da, n);
  keep(r, db, n);
  free(a);
  free(b);
  free(dout);
}

static void test_embedding(void **s) { (void)s; check_threads("embedding", run_embedding); }
static void test_rmsnorm(void **s) { (void)s; check_threads("rmsnorm", run_rmsnorm); }
static void test_rope(void **s) { (void)s; check_threads("rope", run_rope); }
static void test_attention(void **s) { (void)s; check_threads("attention", run_attention); }
static void test_swiglu(void **s) { (void)s; check_threads("swiglu", run_swiglu); }
static void test_cross_entropy(void **s) { (void)s; check_threads("cross_entropy", run_cross_entropy); }
static void test_residual(void **s) { (void)s; check_threads("residual", run_residual); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding), cmocka_unit_test(test_rmsnorm),
      cmocka_unit_test(test_rope),      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_swiglu),    cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_residual),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
