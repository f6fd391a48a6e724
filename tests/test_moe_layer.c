/* The MoE block's gradients and its equivalences: central finite differences of a double objective
 * through router, experts, shared expert and the aux/z losses; per-expert Wgrad equal to the same
 * linear layer run on that expert's tokens alone (quantization blocks never mix experts); E = 1,
 * k = 1 equal to the dense SwiGLU MLP bit for bit; bit-identical results at 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_moe_util.h"
#include "ufp4/error.h"
#include "ufp4/layers.h"
#include "ufp4/linear.h"
#include "ufp4/moe.h"
#include "ufp4/recipe.h"
#include "ufp4/rht.h"

static ufp4_linear_ctx make_ctx(ufp4_recipe *r, const char *spec, float *signs) {
  assert_int_equal(ufp4_recipe_parse(spec, r), 0);
  ufp4_rht_signs_random(signs, r->rht_n, 17);
  ufp4_linear_ctx c = {.recipe = r,
                       .stream = {.seed = 29, .rank = 3, .layer = 1, .proj = 4},
                       .rht_signs = signs,
                       .layer = 1,
                       .proj = 4};
  return c;
}

/* ---- finite differences ------------------------------------------------------------------------ */

/* J = sum(out * R) + aux_coef * aux + z_coef * z, in double; also copies the routing. */
static double objective(ufp4_moe *s, moe_fix *f, const ufp4_linear_ctx *ctx, float *out, int *route,
                        ptrdiff_t *rows) {
  assert_int_equal(ufp4_moe_forward(s, &f->w, ctx, f->x, out, f->N), 0);
  double J = 0;
  for (size_t i = 0; i < f->N * (size_t)f->C; i++) J += (double)out[i] * (double)f->R[i];
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  const size_t nk = f->N * (size_t)f->cfg.top_k;
  memcpy(route, st.slot_expert, nk * sizeof *route);
  memcpy(rows, st.slot_row, nk * sizeof *rows);
  return J + st.objective;
}

typedef struct {
  int checked, skipped;
  double worst; /* largest |fd - analytic| / (atol + rtol |fd|) */
} fd_tally;

/* Checks `count` coordinates of p (spread over it) against the analytic gradient g. A coordinate
 * whose perturbation changes the top-k choice or the admission is skipped: J jumps there. */
static void fd_tensor(ufp4_moe *s, moe_fix *f, const ufp4_linear_ctx *ctx, float *p, const float *g, size_t n,
                      int count, fd_tally *tally, const char *name) {
  const size_t nk = f->N * (size_t)f->cfg.top_k;
  int *r0 = malloc(nk * sizeof *r0), *r1 = malloc(nk * sizeof *r1);
  ptrdiff_t *w0 = malloc(nk * sizeof *w0), *w1 = malloc(nk * sizeof *w1);
  float *out = malloc(f->N * (size_t)f->C * sizeof(float));
  objective(s, f, ctx, out, r0, w0);
  const float h = 1e-2f;
  for (int i = 0; i < count; i++) {
    size_t j = (size_t)((i * 2654435761u) % n);
    float keep = p[j];
    p[j] = keep + h;
    double jp = objective(s, f, ctx, out, r1, w1);
    int same = !memcmp(r0, r1, nk * sizeof *r0) && !memcmp(w0, w1, nk * sizeof *w0);
    float hp = p[j] - keep;
    p[j] = keep - h;
    double jm = objective(s, f, ctx, out, r1, w1);
    same = same && !memcmp(r0, r1, nk * sizeof *r0) && !memcmp(w0, w1, nk * sizeof *w0);
    float hm = keep - p[j];
    p[j] = keep;
    if (!same) {
      tally->skipped++;
      continue;
    }
    double fd = (jp - jm) / ((double)hp + (double)hm);
    double err = fabs(fd - (double)g[j]) / (2e-3 + 1e-2 * fabs(fd));
    if (err > tally->worst) tally->worst = err;
    if (err > 1.0) printf("  %s[%zu]: fd %.6g analytic %.6g\n", name, j, fd, (double)g[j]);
    tally->checked++;
  }
  free(r0);
  free(r1);
  free(w0);
  free(w1);
  free(out);
}

static void fd_check(ufp4_moe_config cfg, uint64_t seed, int expect_drops) {
  const int C = 12;
  const size_t N = 21;
  moe_fix *f = moe_fix_new(cfg, C, N, seed, 1.0f, 1.0f);
  ufp4_recipe r;
  float signs[256];
  ufp4_linear_ctx ctx = make_ctx(&r, "fp32", signs);
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &cfg, C, N), 0);
  float *out = malloc(N * C * sizeof(float)), *dx = calloc(N * C, sizeof(float));
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, N), 0);
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  if (expect_drops) assert_true(st.dropped > 0);
  else assert_int_equal(st.dropped, 0);
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, dx, 1.0f), 0);
  fd_tally t = {0};
  fd_tensor(s, f, &ctx, f->x, dx, N * C, 24, &t, "x");
  fd_tensor(s, f, &ctx, f->w.router, f->g.router, (size_t)cfg.n_experts * C, 24, &t, "router");
  for (int e = 0; e < cfg.n_experts; e++) {
    const size_t n = (size_t)cfg.expert_ffn * C;
    fd_tensor(s, f, &ctx, f->wg[e], f->gg[e], n, 6, &t, "gate");
    fd_tensor(s, f, &ctx, f->wu[e], f->gu[e], n, 6, &t, "up");
    fd_tensor(s, f, &ctx, f->wd[e], f->gd[e], n, 6, &t, "down");
  }
  if (cfg.shared_ffn) {
    const size_t n = (size_t)cfg.shared_ffn * C;
    fd_tensor(s, f, &ctx, f->w.shared_gate, f->g.shared_gate, n, 8, &t, "shared_gate");
    fd_tensor(s, f, &ctx, f->w.shared_up, f->g.shared_up, n, 8, &t, "shared_up");
    fd_tensor(s, f, &ctx, f->w.shared_down, f->g.shared_down, n, 8, &t, "shared_down");
    fd_tensor(s, f, &ctx, f->w.shared_router, f->g.shared_router, (size_t)C, 12, &t, "shared_router");
  }
  printf("  checked %d coordinates, skipped %d (routing changed), worst error %.3f of tolerance\n", t.checked,
         t.skipped, t.worst);
  assert_true(t.checked > 3 * t.skipped);
  assert_true(t.worst <= 1.0);
  free(out);
  free(dx);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

/* The coefficients are large so that a missing aux or z-loss gradient exceeds the tolerance. */
static void test_fd_k1_dropless(void **st) {
  (void)st;
  fd_check((ufp4_moe_config){.n_experts = 3, .top_k = 1, .expert_ffn = 10, .aux_coef = 0.5f, .z_coef = 0.2f}, 11, 0);
}
static void test_fd_k2_dropless_shared(void **st) {
  (void)st;
  fd_check((ufp4_moe_config){.n_experts = 4, .top_k = 2, .expert_ffn = 10, .shared_ffn = 7, .aux_coef = 0.5f,
                             .z_coef = 0.2f},
           12, 0);
}
static void test_fd_k1_drops_shared(void **st) {
  (void)st;
  fd_check((ufp4_moe_config){.n_experts = 3, .top_k = 1, .expert_ffn = 10, .shared_ffn = 6, .capacity_factor = 0.6f,
                             .aux_coef = 0.5f, .z_coef = 0.2f},
           13, 1);
}
static void test_fd_k2_drops(void **st) {
  (void)st;
  fd_check((ufp4_moe_config){.n_experts = 4, .top_k = 2, .expert_ffn = 10, .capacity_factor = 0.7f, .aux_coef = 0.5f,
                             .z_coef = 0.2f},
           14, 1);
}

/* ---- quantization blocks never mix experts -------------------------------------------------------- */

/* Expert e alone: its admitted tokens gathered in admission order and padded with zero rows to a
 * multiple of A (16; mxfp4's RHT64 on Wgrad rotates along the tokens in blocks of 64), run through the same linear calls (same streams) as a stand-alone SwiGLU MLP.
 * Its three Wgrads must equal the block's bit for bit. A block that packed the groups without
 * padding would fail: a 1x16 block (and the RHT16 of Wgrad along tokens) would then hold rows of
 * two experts, whose magnitudes here differ by 30x, so the shared amax would change the smaller
 * expert's codes; and even a per-expert call on the unpadded rows would lay the SR stream out over
 * a different row length (and RHT16 would refuse a token count that is not a multiple of 16). */
static void check_isolation(const char *spec, size_t A, int C, const char *before) {
  const int Fe = C;
  ufp4_moe_config cfg = {.n_experts = 3, .top_k = 2, .expert_ffn = Fe, .shared_ffn = (int)A, .capacity_factor = 0.9f,
                         .aux_coef = 0.01f};
  const size_t N = 45;
  moe_fix *f = moe_fix_new(cfg, C, N, 21, 1.0f, 30.0f);
  ufp4_recipe r;
  float signs[256];
  ufp4_linear_ctx ctx = make_ctx(&r, spec, signs);
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &cfg, C, N), 0);
  float *out = malloc(N * C * sizeof(float)), *dx = calloc(N * C, sizeof(float));
  if (before) { /* a forward under another recipe first: the block grows its buffers later */
    ufp4_recipe rb;
    float signs_b[256];
    ufp4_linear_ctx cb = make_ctx(&rb, before, signs_b);
    assert_int_equal(ufp4_moe_forward(s, &f->w, &cb, f->x, out, N), 0);
  }
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, N), 0);
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, dx, 1.0f), 0);
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  int unaligned = 0;
  size_t padded = (N + A - 1) / A * A - N; /* the shared expert's rows */
  for (int e = 0; e < cfg.n_experts; e++) {
    const size_t n = st.admitted[e], np = (n + A - 1) / A * A;
    unaligned += n % A != 0;
    padded += np - n;
    if (!n) continue;
    float *X = calloc(np * C, sizeof(float)), *dY = calloc(np * C, sizeof(float));
    float *h = malloc(np * Fe * sizeof(float)), *u = malloc(np * Fe * sizeof(float)), *a = malloc(np * Fe * sizeof(float));
    float *y = malloc(np * C * sizeof(float)), *da = calloc(np * Fe, sizeof(float)), *dh = calloc(np * Fe, sizeof(float));
    float *du = calloc(np * Fe, sizeof(float));
    float *gWg = calloc((size_t)Fe * C, sizeof(float)), *gWu = calloc((size_t)Fe * C, sizeof(float)),
          *gWd = calloc((size_t)Fe * C, sizeof(float));
    float *scratch = malloc(ufp4_linear_scratch_floats(np, C, Fe) * 2 * sizeof(float));
    size_t m = 0;
    for (size_t t = 0; t < N; t++)
      for (int j = 0; j < cfg.top_k; j++) {
        size_t i = t * 2 + (size_t)j;
        if (st.slot_expert[i] != e || st.slot_row[i] < 0) continue;
        memcpy(X + m * C, f->x + t * C, C * sizeof(float));
        for (int c = 0; c < C; c++) dY[m * C + c] = st.slot_gate[i] * f->R[t * C + c];
        m++;
      }
    assert_int_equal(m, n);
    ufp4_linear_ctx cg = ctx, cu = ctx, cd = ctx;
    cg.stream.expert = cu.stream.expert = cd.stream.expert = (uint32_t)e;
    cu.stream.proj += 1;
    cd.stream.proj += 2;
    assert_int_equal(ufp4_linear_forward(&cg, X, f->wg[e], h, np, C, Fe, scratch), 0);
    assert_int_equal(ufp4_linear_forward(&cu, X, f->wu[e], u, np, C, Fe, scratch), 0);
    assert_int_equal(ufp4_swiglu_forward(a, h, u, (int)np, Fe), 0);
    assert_int_equal(ufp4_linear_forward(&cd, a, f->wd[e], y, np, Fe, C, scratch), 0);
    assert_int_equal(ufp4_linear_dgrad(&cd, dY, f->wd[e], da, np, Fe, C, scratch), 0);
    assert_int_equal(ufp4_linear_wgrad(&cd, dY, a, gWd, np, Fe, C, scratch), 0);
    assert_int_equal(ufp4_swiglu_backward(dh, du, da, h, u, (int)np, Fe), 0);
    assert_int_equal(ufp4_linear_wgrad(&cg, dh, X, gWg, np, C, Fe, scratch), 0);
    assert_int_equal(ufp4_linear_wgrad(&cu, du, X, gWu, np, C, Fe, scratch), 0);
    assert_memory_equal(gWd, f->gd[e], (size_t)Fe * C * sizeof(float));
    assert_memory_equal(gWg, f->gg[e], (size_t)Fe * C * sizeof(float));
    assert_memory_equal(gWu, f->gu[e], (size_t)Fe * C * sizeof(float));
    free(X), free(dY), free(h), free(u), free(a), free(y), free(da), free(dh), free(du);
    free(gWg), free(gWu), free(gWd), free(scratch);
  }
  assert_true(unaligned > 0); /* the test needs groups that padding actually changes */
  assert_int_equal(st.padded_rows, padded);
  free(out);
  free(dx);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

static void test_isolation_e2m1(void **st) {
  (void)st;
  check_isolation("e2m1", 16, 32, NULL);
}
static void test_isolation_ufp4(void **st) {
  (void)st;
  check_isolation("ufp4", 16, 32, NULL);
}
/* RHT64 on Dgrad and Wgrad: widths of 64, and groups padded to 64 rows (a 16-row padding fails:
 * RHT64 refuses a group of 48 rows); also after a forward under nvfp4 (groups of 16), as when a
 * recipe schedule switches. */
static void test_isolation_mxfp4(void **st) {
  (void)st;
  check_isolation("mxfp4", 64, 64, NULL);
  check_isolation("mxfp4", 64, 64, "nvfp4");
}

/* ---- E = 1, k = 1 equals the dense MLP ------------------------------------------------------------- */

static void check_dense(const char *spec, size_t N) {
  const int C = 32, F = 48;
  ufp4_moe_config cfg = {.n_experts = 1, .top_k = 1, .expert_ffn = F, .aux_coef = 0.01f};
  moe_fix *f = moe_fix_new(cfg, C, N, 31, 1.0f, 1.0f);
  ufp4_recipe r;
  float signs[256];
  ufp4_linear_ctx ctx = make_ctx(&r, spec, signs);
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &cfg, C, N), 0);
  float *out = malloc(N * C * sizeof(float)), *dx = calloc(N * C, sizeof(float));
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, N), 0);
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, dx, 1.0f), 0);

  /* The dense model's MLP (src/model/llama.c): projections 4, 5, 6 of the layer. */
  ufp4_linear_ctx cg = ctx, cu = ctx, cd = ctx;
  cu.stream.proj += 1, cu.proj = 5;
  cd.stream.proj += 2, cd.proj = 6;
  float *scratch = malloc(ufp4_linear_scratch_floats(N, C, F) * 2 * sizeof(float));
  float *h = malloc(N * F * sizeof(float)), *u = malloc(N * F * sizeof(float)), *a = malloc(N * F * sizeof(float));
  float *y = malloc(N * C * sizeof(float)), *da = calloc(N * F, sizeof(float)), *dh = calloc(N * F, sizeof(float));
  float *du = calloc(N * F, sizeof(float)), *dxr = calloc(N * C, sizeof(float));
  float *gWg = calloc((size_t)F * C, sizeof(float)), *gWu = calloc((size_t)F * C, sizeof(float)),
        *gWd = calloc((size_t)F * C, sizeof(float));
  assert_int_equal(ufp4_linear_forward(&cg, f->x, f->wg[0], h, N, C, F, scratch), 0);
  assert_int_equal(ufp4_linear_forward(&cu, f->x, f->wu[0], u, N, C, F, scratch), 0);
  assert_int_equal(ufp4_swiglu_forward(a, h, u, (int)N, F), 0);
  assert_int_equal(ufp4_linear_forward(&cd, a, f->wd[0], y, N, F, C, scratch), 0);
  assert_int_equal(ufp4_linear_backward(&cd, f->R, a, f->wd[0], da, gWd, N, F, C, scratch), 0);
  assert_int_equal(ufp4_swiglu_backward(dh, du, da, h, u, (int)N, F), 0);
  assert_int_equal(ufp4_linear_backward(&cg, dh, f->x, f->wg[0], dxr, gWg, N, C, F, scratch), 0);
  assert_int_equal(ufp4_linear_backward(&cu, du, f->x, f->wu[0], dxr, gWu, N, C, F, scratch), 0);

  assert_memory_equal(out, y, N * C * sizeof(float));
  assert_memory_equal(dx, dxr, N * C * sizeof(float));
  assert_memory_equal(f->gg[0], gWg, (size_t)F * C * sizeof(float));
  assert_memory_equal(f->gu[0], gWu, (size_t)F * C * sizeof(float));
  assert_memory_equal(f->gd[0], gWd, (size_t)F * C * sizeof(float));
  /* One expert: p = 1, the aux loss is E * f * P = 1 and passes no gradient to the router. */
  for (int c = 0; c < C; c++) assert_true(f->g.router[c] == 0.0f);
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  assert_true(st.aux == 1.0);
  free(scratch), free(h), free(u), free(a), free(y), free(da), free(dh), free(du), free(dxr);
  free(gWg), free(gWu), free(gWd), free(out), free(dx);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

static void test_dense_fp32(void **st) {
  (void)st;
  check_dense("fp32", 64);
}
static void test_dense_e2m1(void **st) {
  (void)st;
  check_dense("e2m1", 64);
}
static void test_dense_ufp4(void **st) {
  (void)st;
  check_dense("ufp4", 64);
}
static void test_dense_nvfp4(void **st) {
  (void)st;
  check_dense("nvfp4", 48);
}
/* 40 tokens pad to 48 rows: under fp32 the zero rows still change nothing. */
static void test_dense_fp32_padded(void **st) {
  (void)st;
  check_dense("fp32", 40);
}

/* ---- thread-count independence --------------------------------------------------------------------- */

typedef struct {
  float *out, *dx, *grads;
  double aux, z;
  size_t dropped;
} run_result;

static run_result run_block(int threads, const char *spec) {
  omp_set_num_threads(threads);
  ufp4_moe_config cfg = {.n_experts = 4, .top_k = 2, .expert_ffn = 48, .shared_ffn = 32, .capacity_factor = 1.0f,
                         .aux_coef = 0.01f, .z_coef = 0.001f};
  const int C = 64;
  const size_t N = 300;
  moe_fix *f = moe_fix_new(cfg, C, N, 41, 1.0f, 1.0f);
  ufp4_recipe r;
  float signs[256];
  ufp4_linear_ctx ctx = make_ctx(&r, spec, signs);
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &cfg, C, N), 0);
  run_result res = {.out = malloc(N * C * sizeof(float)), .dx = calloc(N * C, sizeof(float)),
                    .grads = malloc(f->nparam * sizeof(float))};
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, res.out, N), 0);
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, res.dx, 0.5f), 0);
  memcpy(res.grads, f->gblock, f->nparam * sizeof(float));
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  res.aux = st.aux;
  res.z = st.z;
  res.dropped = st.dropped;
  ufp4_moe_free(s);
  moe_fix_free(f);
  return res;
}

static void check_threads(const char *spec) {
  run_result a = run_block(1, spec), b = run_block(2, spec);
  omp_set_num_threads(omp_get_num_procs());
  const size_t nout = 300 * 64;
  assert_true(a.dropped > 0);
  assert_memory_equal(a.out, b.out, nout * sizeof(float));
  assert_memory_equal(a.dx, b.dx, nout * sizeof(float));
  assert_true(a.aux == b.aux && a.z == b.z && a.dropped == b.dropped);
  /* nparam = E*C + E*3*Fe*C + 3*Fs*C + C */
  const size_t np = 4 * 64 + 4 * 3 * 48 * 64 + 3 * 32 * 64 + 64;
  assert_memory_equal(a.grads, b.grads, np * sizeof(float));
  free(a.out), free(a.dx), free(a.grads), free(b.out), free(b.dx), free(b.grads);
}

static void test_threads_ufp4(void **st) {
  (void)st;
  check_threads("ufp4");
}
static void test_threads_fp32(void **st) {
  (void)st;
  check_threads("fp32");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fd_k1_dropless),   cmocka_unit_test(test_fd_k2_dropless_shared),
      cmocka_unit_test(test_fd_k1_drops_shared), cmocka_unit_test(test_fd_k2_drops),
      cmocka_unit_test(test_isolation_e2m1),   cmocka_unit_test(test_isolation_ufp4),
      cmocka_unit_test(test_isolation_mxfp4),
      cmocka_unit_test(test_dense_fp32),       cmocka_unit_test(test_dense_e2m1),
      cmocka_unit_test(test_dense_ufp4),       cmocka_unit_test(test_dense_nvfp4),
      cmocka_unit_test(test_dense_fp32_padded), cmocka_unit_test(test_threads_ufp4),
      cmocka_unit_test(test_threads_fp32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
