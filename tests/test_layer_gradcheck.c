/* Finite-difference gradient checks of every layer kernel's backward.
 *
 * For each layer the test holds a double-precision re-implementation of the forward written from
 * the HF definitions (not from the kernels), and a scalar L = sum(out * R) with a fixed random R.
 * The kernel's backward, fed dout = R, must match the central difference of the double L at the
 * same point (inputs are floats, converted exactly to double), and the kernel's forward must match
 * the double forward. Tolerances: forward 2e-5 relative + 2e-6 absolute; gradient 1e-3 relative +
 * 1e-4 of the tensor's largest FD gradient + 1e-6 absolute. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/layers.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng_state;
static double urand(void) { /* splitmix64 -> [0, 1) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}
static float frand(float lo, float hi) { return (float)(lo + (hi - lo) * urand()); }

/* A float tensor as the kernel sees it, its exact double copy for the reference, and the kernel's
 * gradient for it. */
typedef struct {
  const char *name;
  size_t n;
  float *f;
  double *d;
  float *grad;
} tensor;

static tensor tensor_new(const char *name, size_t n, float lo, float hi) {
  tensor t = {name, n, malloc(n * sizeof(float)), malloc(n * sizeof(double)),
              calloc(n, sizeof(float))};
  assert_non_null(t.f);
  assert_non_null(t.d);
  assert_non_null(t.grad);
  for (size_t i = 0; i < n; i++) {
    t.f[i] = frand(lo, hi);
    t.d[i] = t.f[i];
  }
  return t;
}
static void tensor_free(tensor *t) {
  free(t->f);
  free(t->d);
  free(t->grad);
}

typedef double (*loss_fn)(void *ctx);

/* Checks t->grad against central differences of fn; every element when the tensor is small,
 * else a random subset of 96. */
static void gradcheck(const char *layer, tensor *t, loss_fn fn, void *ctx) {
  const double eps = 1e-4;
  size_t count = t->n <= 512 ? t->n : 96;
  double *fd = malloc(count * sizeof(double));
  size_t *idx = malloc(count * sizeof(size_t));
  assert_non_null(fd);
  assert_non_null(idx);
  double maxfd = 0.0;
  for (size_t c = 0; c < count; c++) {
    size_t i = t->n <= 512 ? c : (size_t)(urand() * (double)t->n);
    double save = t->d[i];
    t->d[i] = save + eps;
    double lp = fn(ctx);
    t->d[i] = save - eps;
    double lm = fn(ctx);
    t->d[i] = save;
    idx[c] = i;
    fd[c] = (lp - lm) / (2.0 * eps);
    if (fabs(fd[c]) > maxfd) maxfd = fabs(fd[c]);
  }
  int bad = 0;
  for (size_t c = 0; c < count; c++) {
    double an = t->grad[idx[c]];
    double tol = 1e-3 * fabs(fd[c]) + 1e-4 * maxfd + 1e-6;
    if (fabs(an - fd[c]) > tol) {
      if (bad < 5)
        fprintf(stderr, "%s: d%s[%zu] analytic %.9g, finite difference %.9g\n", layer, t->name,
                idx[c], an, fd[c]);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "%s: %d of %zu gradient elements of %s off\n", layer, bad, count, t->name);
  assert_int_equal(bad, 0);
  assert_true(maxfd > 0.0); /* a gradient that is identically zero would make the check vacuous */
  free(fd);
  free(idx);
}

static void check_forward(const char *layer, const float *got, const double *want, size_t n) {
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 2e-5 * fabs(want[i]) + 2e-6)) {
      if (bad < 5) fprintf(stderr, "%s: out[%zu] = %.9g, reference %.9g\n", layer, i, got[i], want[i]);
      bad++;
    }
  assert_int_equal(bad, 0);
}

static double dot_r(const double *out, const double *r, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += out[i] * r[i];
  return s;
}

/* ---- embedding -------------------------------------------------------------------------------- */

enum { EMB_BT = 12, EMB_V = 7, EMB_C = 9 };
typedef struct {
  tensor wte;
  const int32_t *tok;
  double out[EMB_BT * EMB_C];
  const double *r;
} emb_ctx;

static double emb_ref(void *p) {
  emb_ctx *c = p;
  for (int i = 0; i < EMB_BT; i++)
    for (int j = 0; j < EMB_C; j++) c->out[i * EMB_C + j] = c->wte.d[c->tok[i] * EMB_C + j];
  return c->r ? dot_r(c->out, c->r, EMB_BT * EMB_C) : 0.0;
}

static void test_embedding(void **state) {
  (void)state;
  rng_state = 1;
  /* Repeated tokens (3 three times) exercise the accumulation of dwte rows. */
  static const int32_t tok[EMB_BT] = {3, 0, 6, 3, 1, 2, 3, 5, 0, 4, 6, 1};
  emb_ctx c = {.wte = tensor_new("wte", EMB_V * EMB_C, -1, 1), .tok = tok};
  tensor R = tensor_new("R", EMB_BT * EMB_C, -1, 1);
  float out[EMB_BT * EMB_C];
  assert_int_equal(ufp4_embedding_forward(out, tok, c.wte.f, EMB_BT, EMB_V, EMB_C), 0);
  c.r = R.d;
  emb_ref(&c);
  check_forward("embedding", out, c.out, EMB_BT * EMB_C);
  assert_int_equal(ufp4_embedding_backward(c.wte.grad, R.f, tok, EMB_BT, EMB_V, EMB_C), 0);
  gradcheck("embedding", &c.wte, emb_ref, &c);
  tensor_free(&c.wte);
  tensor_free(&R);
}

/* ---- RMSNorm ---------------------------------------------------------------------------------- */

enum { RMS_N = 6, RMS_C = 37 };
typedef struct {
  tensor x, w;
  double eps;
  double out[RMS_N * RMS_C];
  const double *r;
} rms_ctx;

static double rms_ref(void *p) {
  rms_ctx *c = p;
  for (int i = 0; i < RMS_N; i++) {
    double ms = 0.0;
    for (int j = 0; j < RMS_C; j++) ms += c->x.d[i * RMS_C + j] * c->x.d[i * RMS_C + j];
    double r = 1.0 / sqrt(ms / RMS_C + c->eps);
    for (int j = 0; j < RMS_C; j++) c->out[i * RMS_C + j] = c->x.d[i * RMS_C + j] * r * c->w.d[j];
  }
  return dot_r(c->out, c->r, RMS_N * RMS_C);
}

static void test_rmsnorm(void **state) {
  (void)state;
  rng_state = 2;
  /* eps comparable to mean(x^2) of the small-valued last row, so its effect is tested too. */
  rms_ctx c = {.x = tensor_new("x", RMS_N * RMS_C, -2, 2), .w = tensor_new("w", RMS_C, 0.5f, 1.5f),
               .eps = (double)1e-2f};
  for (int j = 0; j < RMS_C; j++) {
    c.x.f[(RMS_N - 1) * RMS_C + j] *= 0.05f;
    c.x.d[(RMS_N - 1) * RMS_C + j] = c.x.f[(RMS_N - 1) * RMS_C + j];
  }
  tensor R = tensor_new("R", RMS_N * RMS_C, -1, 1);
  c.r = R.d;
  float out[RMS_N * RMS_C], rstd[RMS_N];
  assert_int_equal(ufp4_rmsnorm_forward(out, rstd, c.x.f, c.w.f, RMS_N, RMS_C, (float)c.eps), 0);
  rms_ref(&c);
  check_forward("rmsnorm", out, c.out, RMS_N * RMS_C);
  assert_int_equal(
      ufp4_rmsnorm_backward(c.x.grad, c.w.grad, R.f, c.x.f, c.w.f, rstd, RMS_N, RMS_C), 0);
  gradcheck("rmsnorm", &c.x, rms_ref, &c);
  gradcheck("rmsnorm", &c.w, rms_ref, &c);
  tensor_free(&c.x);
  tensor_free(&c.w);
  tensor_free(&R);
}

/* ---- RoPE ------------------------------------------------------------------------------------- */

enum { ROPE_B = 2, ROPE_T = 5, ROPE_NH = 3, ROPE_D = 8 };
#define ROPE_N (ROPE_B * ROPE_T * ROPE_NH * ROPE_D)
typedef struct {
  tensor x;
  double theta;
  double out[ROPE_N];
  const double *r;
} rope_ctx;

/* HF: cos/sin = cat(freqs, freqs) with freqs = pos * inv_freq; q*cos + rotate_half(q)*sin. */
static double rope_ref(void *p) {
  rope_ctx *c = p;
  const int h = ROPE_D / 2;
  for (int b = 0; b < ROPE_B; b++)
    for (int t = 0; t < ROPE_T; t++)
      for (int n = 0; n < ROPE_NH; n++) {
        const double *x = c->x.d + ((b * ROPE_T + t) * ROPE_NH + n) * ROPE_D;
        double *o = c->out + ((b * ROPE_T + t) * ROPE_NH + n) * ROPE_D;
        for (int d = 0; d < ROPE_D; d++) {
          double ang = t * pow(c->theta, -2.0 * (d % h) / ROPE_D);
          double rot = d < h ? -x[d + h] : x[d - h];
          o[d] = x[d] * cos(ang) + rot * sin(ang);
        }
      }
  return dot_r(c->out, c->r, ROPE_N);
}

static void test_rope(void **state) {
  (void)state;
  rng_state = 3;
  rope_ctx c = {.x = tensor_new("x", ROPE_N, -1, 1), .theta = 10.0}; /* small theta: big angles */
  tensor R = tensor_new("R", ROPE_N, -1, 1);
  c.r = R.d;
  float cs[ROPE_T * ROPE_D / 2], sn[ROPE_T * ROPE_D / 2], out[ROPE_N];
  assert_int_equal(ufp4_rope_init(cs, sn, ROPE_T, ROPE_D, c.theta), 0);
  assert_int_equal(ufp4_rope_forward(out, c.x.f, cs, sn, ROPE_B, ROPE_T, ROPE_NH, ROPE_D), 0);
  rope_ref(&c);
  check_forward("rope", out, c.out, ROPE_N);
  /* In place gives the same bits as out of place. */
  float inplace[ROPE_N];
  memcpy(inplace, c.x.f, sizeof inplace);
  assert_int_equal(ufp4_rope_forward(inplace, inplace, cs, sn, ROPE_B, ROPE_T, ROPE_NH, ROPE_D), 0);
  assert_memory_equal(inplace, out, sizeof out);
  assert_int_equal(ufp4_rope_backward(c.x.grad, R.f, cs, sn, ROPE_B, ROPE_T, ROPE_NH, ROPE_D), 0);
  gradcheck("rope", &c.x, rope_ref, &c);
  tensor_free(&c.x);
  tensor_free(&R);
}

/* ---- attention -------------------------------------------------------------------------------- */

enum { AT_B = 2, AT_T = 5, AT_H = 4, AT_KVH = 2, AT_D = 6 };
#define AT_QN (AT_B * AT_T * AT_H * AT_D)
#define AT_KN (AT_B * AT_T * AT_KVH * AT_D)
typedef struct {
  tensor q, k, v;
  double out[AT_QN];
  const double *r;
} at_ctx;

/* HF eager attention: repeat_kv, scores q k^T / sqrt(D), causal mask, softmax, times v. */
static double at_ref(void *p) {
  at_ctx *c = p;
  const int group = AT_H / AT_KVH;
  for (int b = 0; b < AT_B; b++)
    for (int h = 0; h < AT_H; h++)
      for (int t = 0; t < AT_T; t++) {
        double s[AT_T], mx = -INFINITY, sum = 0.0;
        const double *q = c->q.d + ((b * AT_T + t) * AT_H + h) * AT_D;
        for (int j = 0; j <= t; j++) {
          const double *k = c->k.d + ((b * AT_T + j) * AT_KVH + h / group) * AT_D;
          s[j] = 0.0;
          for (int d = 0; d < AT_D; d++) s[j] += q[d] * k[d];
          s[j] /= sqrt((double)AT_D);
          if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
        double *o = c->out + ((b * AT_T + t) * AT_H + h) * AT_D;
        for (int d = 0; d < AT_D; d++) o[d] = 0.0;
        for (int j = 0; j <= t; j++) {
          const double *v = c->v.d + ((b * AT_T + j) * AT_KVH + h / group) * AT_D;
          for (int d = 0; d < AT_D; d++) o[d] += s[j] / sum * v[d];
        }
      }
  return dot_r(c->out, c->r, AT_QN);
}

static void test_attention(void **state) {
  (void)state;
  rng_state = 4;
  /* q spread over [-2, 2] so the softmax is far from uniform. */
  at_ctx c = {.q = tensor_new("q", AT_QN, -2, 2), .k = tensor_new("k", AT_KN, -2, 2),
              .v = tensor_new("v", AT_KN, -1, 1)};
  tensor R = tensor_new("R", AT_QN, -1, 1);
  c.r = R.d;
  float out[AT_QN], att[AT_B * AT_H * AT_T * AT_T];
  float scratch[AT_B * AT_KVH * AT_T];
  assert_int_equal(ufp4_attention_scratch_floats(AT_B, AT_T, AT_KVH), AT_B * AT_KVH * AT_T);
  assert_int_equal(
      ufp4_attention_forward(out, att, c.q.f, c.k.f, c.v.f, AT_B, AT_T, AT_H, AT_KVH, AT_D), 0);
  at_ref(&c);
  check_forward("attention", out, c.out, AT_QN);
  /* Saved probabilities: rows sum to 1, the masked upper triangle is exactly 0. */
  for (int r = 0; r < AT_B * AT_H * AT_T; r++) {
    int t = r % AT_T;
    double s = 0.0;
    for (int j = 0; j < AT_T; j++) {
      if (j > t) assert_true(att[r * AT_T + j] == 0.0f);
      s += att[r * AT_T + j];
    }
    assert_true(fabs(s - 1.0) < 1e-6);
  }
  assert_int_equal(ufp4_attention_backward(c.q.grad, c.k.grad, c.v.grad, scratch, R.f, att, c.q.f,
                                           c.k.f, c.v.f, AT_B, AT_T, AT_H, AT_KVH, AT_D),
                   0);
  gradcheck("attention", &c.q, at_ref, &c);
  gradcheck("attention", &c.k, at_ref, &c);
  gradcheck("attention", &c.v, at_ref, &c);
  tensor_free(&c.q);
  tensor_free(&c.k);
  tensor_free(&c.v);
  tensor_free(&R);
}

/* ---- SwiGLU ----------------------------------------------------------------------------------- */

enum { SW_N = 5, SW_F = 40 };
typedef struct {
  tensor g, u;
  double out[SW_N * SW_F];
  const double *r;
} sw_ctx;

static double sw_ref(void *p) {
  sw_ctx *c = p;
  for (int i = 0; i < SW_N * SW_F; i++) c->out[i] = c->g.d[i] / (1.0 + exp(-c->g.d[i])) * c->u.d[i];
  return dot_r(c->out, c->r, SW_N * SW_F);
}

static void test_swiglu(void **state) {
  (void)state;
  rng_state = 5;
  sw_ctx c = {.g = tensor_new("gate", SW_N * SW_F, -8, 8), .u = tensor_new("up", SW_N * SW_F, -2, 2)};
  tensor R = tensor_new("R", SW_N * SW_F, -1, 1);
  c.r = R.d;
  float out[SW_N * SW_F];
  assert_int_equal(ufp4_swiglu_forward(out, c.g.f, c.u.f, SW_N, SW_F), 0);
  sw_ref(&c);
  check_forward("swiglu", out, c.out, SW_N * SW_F);
  assert_int_equal(ufp4_swiglu_backward(c.g.grad, c.u.grad, R.f, c.g.f, c.u.f, SW_N, SW_F), 0);
  gradcheck("swiglu", &c.g, sw_ref, &c);
  gradcheck("swiglu", &c.u, sw_ref, &c);
  tensor_free(&c.g);
  tensor_free(&c.u);
  tensor_free(&R);
}

/* ---- cross-entropy ---------------------------------------------------------------------------- */

enum { CE_BT = 7, CE_V = 33 };
typedef struct {
  tensor logits;
  const int32_t *tgt;
  double dloss;
  double losses[CE_BT], lse[CE_BT], mean;
} ce_ctx;

/* L = dloss * mean over non-ignored rows of (logsumexp(row) - row[target]). */
static double ce_ref(void *p) {
  ce_ctx *c = p;
  double total = 0.0;
  int cnt = 0;
  for (int i = 0; i < CE_BT; i++) {
    const double *l = c->logits.d + i * CE_V;
    double s = 0.0;
    for (int j = 0; j < CE_V; j++) s += exp(l[j]);
    c->lse[i] = log(s);
    c->losses[i] = c->tgt[i] < 0 ? 0.0 : c->lse[i] - l[c->tgt[i]];
    if (c->tgt[i] >= 0) {
      total += c->losses[i];
      cnt++;
    }
  }
  c->mean = total / cnt;
  return c->dloss * c->mean;
}

static void test_cross_entropy(void **state) {
  (void)state;
  rng_state = 6;
  static const int32_t tgt[CE_BT] = {3, -1, 0, 32, 17, -1, 3};
  ce_ctx c = {.logits = tensor_new("logits", CE_BT * CE_V, -4, 4), .tgt = tgt, .dloss = 0.75};
  float losses[CE_BT], lse[CE_BT];
  double mean = -1;
  int nvalid = -1;
  assert_int_equal(
      ufp4_cross_entropy_forward(losses, lse, &mean, &nvalid, c.logits.f, tgt, CE_BT, CE_V), 0);
  ce_ref(&c);
  assert_int_equal(nvalid, 5);
  check_forward("cross_entropy losses", losses, c.losses, CE_BT);
  check_forward("cross_entropy lse", lse, c.lse, CE_BT);
  assert_true(fabs(mean - c.mean) <= 1e-6 * c.mean);
  /* Out of place into a buffer of garbage: backward overwrites. */
  for (size_t i = 0; i < c.logits.n; i++) c.logits.grad[i] = 123.0f;
  assert_int_equal(ufp4_cross_entropy_backward(c.logits.grad, c.logits.f, lse, tgt, (float)c.dloss,
                                               CE_BT, CE_V),
                   0);
  gradcheck("cross_entropy", &c.logits, ce_ref, &c);
  /* In place gives the same bits. */
  float inplace[CE_BT * CE_V];
  memcpy(inplace, c.logits.f, sizeof inplace);
  assert_int_equal(
      ufp4_cross_entropy_backward(inplace, inplace, lse, tgt, (float)c.dloss, CE_BT, CE_V), 0);
  assert_memory_equal(inplace, c.logits.grad, sizeof inplace);
  tensor_free(&c.logits);
}

/* ---- residual --------------------------------------------------------------------------------- */

enum { RES_N = 50 };
typedef struct {
  tensor a, b;
  double out[RES_N];
  const double *r;
} res_ctx;

static double res_ref(void *p) {
  res_ctx *c = p;
  for (int i = 0; i < RES_N; i++) c->out[i] = c->a.d[i] + c->b.d[i];
  return dot_r(c->out, c->r, RES_N);
}

static void test_residual(void **state) {
  (void)state;
  rng_state = 7;
  res_ctx c = {.a = tensor_new("a", RES_N, -1, 1), .b = tensor_new("b", RES_N, -1, 1)};
  tensor R = tensor_new("R", RES_N, -1, 1);
  c.r = R.d;
  float out[RES_N];
  assert_int_equal(ufp4_residual_forward(out, c.a.f, c.b.f, RES_N), 0);
  res_ref(&c);
  check_forward("residual", out, c.out, RES_N);
  /* Accumulation: start from a nonzero gradient and check the increment. */
  for (int i = 0; i < RES_N; i++) c.a.grad[i] = 1.0f;
  assert_int_equal(ufp4_residual_backward(c.a.grad, c.b.grad, R.f, RES_N), 0);
  for (int i = 0; i < RES_N; i++) c.a.grad[i] -= 1.0f;
  gradcheck("residual", &c.a, res_ref, &c);
  gradcheck("residual", &c.b, res_ref, &c);
  tensor_free(&c.a);
  tensor_free(&c.b);
  tensor_free(&R);
}

/* Every backward except cross-entropy's accumulates: running it twice doubles the gradient. */
static void test_backward_accumulates(void **state) {
  (void)state;
  rng_state = 8;
  enum { N = 4, C = 10 };
  tensor x = tensor_new("x", N * C, -1, 1), w = tensor_new("w", C, 0.5f, 1.5f);
  tensor R = tensor_new("R", N * C, -1, 1);
  float out[N * C], rstd[N], dx1[N * C] = {0}, dw1[C] = {0};
  assert_int_equal(ufp4_rmsnorm_forward(out, rstd, x.f, w.f, N, C, 1e-5f), 0);
  assert_int_equal(ufp4_rmsnorm_backward(dx1, dw1, R.f, x.f, w.f, rstd, N, C), 0);
  assert_int_equal(ufp4_rmsnorm_backward(x.grad, w.grad, R.f, x.f, w.f, rstd, N, C), 0);
  assert_int_equal(ufp4_rmsnorm_backward(x.grad, w.grad, R.f, x.f, w.f, rstd, N, C), 0);
  for (int i = 0; i < N * C; i++) assert_true(x.grad[i] == 2.0f * dx1[i]);
  for (int j = 0; j < C; j++) assert_true(w.grad[j] == 2.0f * dw1[j]);
  tensor_free(&x);
  tensor_free(&w);
  tensor_free(&R);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding),     cmocka_unit_test(test_rmsnorm),
      cmocka_unit_test(test_rope),          cmocka_unit_test(test_attention),
      cmocka_unit_test(test_swiglu),        cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_residual),      cmocka_unit_test(test_backward_accumulates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
