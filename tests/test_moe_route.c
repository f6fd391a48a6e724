/* The MoE block's forward against a plain double-precision reference of the whole block written
 * here (router, softmax, top-k with ties to the lower index, renormalized gates, capacity with the
 * documented dropped-token policy, experts, shared expert, aux and z losses), hand-computed cases,
 * the grouped-row layout, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_moe_util.h"
#include "ufp4/error.h"
#include "ufp4/moe.h"
#include "ufp4/recipe.h"

typedef struct {
  double *out;     /* [N, C] */
  int *expert;     /* [N, k] */
  int *kept;       /* [N, k] */
  double aux, z, entropy;
  size_t dropped;
  size_t count[16], admitted[16];
} ref_result;

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* y [C] += scale * down(silu(gate x) * up x) for one token, all in double. */
static void ref_mlp(const float *x, const float *Wg, const float *Wu, const float *Wd, int C, int F, double scale,
                    double *y) {
  for (int f = 0; f < F; f++) {
    double h = 0, u = 0;
    for (int c = 0; c < C; c++) {
      h += (double)x[c] * Wg[(size_t)f * C + c];
      u += (double)x[c] * Wu[(size_t)f * C + c];
    }
    double a = silu(h) * u;
    for (int c = 0; c < C; c++) y[c] += scale * a * Wd[(size_t)c * F + f];
  }
}

static void reference(const moe_fix *f, ref_result *r) {
  const int E = f->cfg.n_experts, k = f->cfg.top_k, C = f->C, Fe = f->cfg.expert_ffn, Fs = f->cfg.shared_ffn;
  const size_t N = f->N;
  r->out = calloc(N * (size_t)C, sizeof(double));
  r->expert = calloc(N * (size_t)k, sizeof(int));
  r->kept = calloc(N * (size_t)k, sizeof(int));
  double *P = calloc((size_t)E, sizeof(double)), *gate = calloc(N * (size_t)k, sizeof(double));
  size_t cap = (size_t)-1;
  if (f->cfg.capacity_factor > 0) cap = (size_t)ceil((double)f->cfg.capacity_factor * k * (double)N / E);
  r->aux = r->z = r->entropy = 0;
  r->dropped = 0;
  memset(r->count, 0, sizeof r->count);
  memset(r->admitted, 0, sizeof r->admitted);
  for (size_t t = 0; t < N; t++) {
    const float *xt = f->x + t * (size_t)C;
    double z[16], p[16], mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) {
      z[e] = 0;
      for (int c = 0; c < C; c++) z[e] += (double)xt[c] * f->w.router[(size_t)e * C + c];
      if (z[e] > mx) mx = z[e];
    }
    for (int e = 0; e < E; e++) sum += exp(z[e] - mx);
    for (int e = 0; e < E; e++) {
      p[e] = exp(z[e] - mx) / sum;
      P[e] += p[e] / (double)N;
      r->entropy -= p[e] * log(p[e]) / (double)N;
    }
    double lse = mx + log(sum);
    r->z += lse * lse / (double)N;
    double S = 0;
    for (int j = 0; j < k; j++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        if (j == 1 && e == r->expert[t * k]) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      r->expert[t * k + j] = best;
      S += p[best];
    }
    for (int j = 0; j < k; j++) {
      int e = r->expert[t * k + j];
      gate[t * k + j] = p[e] / S;
      r->count[e]++;
      r->kept[t * k + j] = r->admitted[e] < cap;
      if (r->kept[t * k + j]) r->admitted[e]++;
      else r->dropped++;
    }
  }
  for (int e = 0; e < E; e++) r->aux += E * ((double)r->count[e] / (double)N) * P[e];
  for (size_t t = 0; t < N; t++) {
    const float *xt = f->x + t * (size_t)C;
    double *o = r->out + t * (size_t)C;
    for (int j = 0; j < k; j++) {
      if (!r->kept[t * k + j]) continue;
      int e = r->expert[t * k + j];
      ref_mlp(xt, f->w.gate[e], f->w.up[e], f->w.down[e], C, Fe, gate[t * k + j], o);
    }
    if (Fs) {
      double a = 0;
      for (int c = 0; c < C; c++) a += (double)xt[c] * f->w.shared_router[c];
      ref_mlp(xt, f->w.shared_gate, f->w.shared_up, f->w.shared_down, C, Fs, 1.0 / (1.0 + exp(-a)), o);
    }
  }
  free(P);
  free(gate);
}

static void ref_free(ref_result *r) {
  free(r->out);
  free(r->expert);
  free(r->kept);
}

static ufp4_linear_ctx spec_ctx(ufp4_recipe *r, const char *spec) {
  assert_int_equal(ufp4_recipe_parse(spec, r), 0);
  ufp4_linear_ctx c = {.recipe = r, .stream = {.seed = 3, .layer = 12, .proj = 4}, .proj = 4};
  return c;
}

static ufp4_linear_ctx fp32_ctx(ufp4_recipe *r) { return spec_ctx(r, "fp32"); }

static size_t pad16(size_t n) { return (n + 15) / 16 * 16; }

/* Runs the block and the reference and compares outputs, losses, routing and the row layout. */
static void check_against_reference(ufp4_moe_config cfg, int C, size_t N, uint64_t seed, int expect_drops) {
  moe_fix *f = moe_fix_new(cfg, C, N, seed, 1.0f, 1.0f);
  ufp4_recipe rec;
  ufp4_linear_ctx ctx = fp32_ctx(&rec);
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &cfg, C, N + 5), 0);
  float *out = malloc(N * (size_t)C * sizeof(float));
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, N), 0);
  ref_result r;
  reference(f, &r);
  ufp4_moe_stats st;
  ufp4_moe_get_stats(s, &st);
  const int E = cfg.n_experts, k = cfg.top_k;
  assert_int_equal(st.n_tokens, N);
  assert_int_equal(st.dropped, r.dropped);
  if (expect_drops) assert_true(r.dropped > 0);
  else assert_int_equal(r.dropped, 0);
  size_t start[16], padded = 0, row = 0;
  double load_sum = 0;
  for (int e = 0; e < E; e++) {
    assert_int_equal(st.admitted[e], r.admitted[e]);
    assert_true(fabs(st.load[e] - (double)r.count[e] / (double)N) < 1e-15);
    load_sum += st.load[e];
    start[e] = row;
    row += pad16(r.admitted[e]);
    padded += pad16(r.admitted[e]) - r.admitted[e];
  }
  assert_true(fabs(load_sum - k) < 1e-12);
  /* Under fp32 no GEMM sees a padding row (there are no blocks to keep apart), but the layout
   * still starts every group at a multiple of 16. */
  assert_int_equal(st.padded_rows, 0);
  assert_true(padded > 0);
  size_t next[16] = {0};
  for (size_t i = 0; i < N * (size_t)k; i++) {
    int e = r.expert[i];
    assert_int_equal(st.slot_expert[i], e);
    /* Admission order = token order: the n-th admitted assignment of e sits at row start + n. */
    if (r.kept[i]) assert_int_equal(st.slot_row[i], (ptrdiff_t)(start[e] + next[e]++));
    else assert_int_equal(st.slot_row[i], -1);
  }
  double maxerr = 0;
  for (size_t i = 0; i < N * (size_t)C; i++) {
    double err = fabs((double)out[i] - r.out[i]) / (1e-3 + fabs(r.out[i]));
    if (err > maxerr) maxerr = err;
  }
  assert_true(maxerr < 1e-4);
  assert_true(fabs(st.aux - r.aux) <= 1e-6 * r.aux);
  assert_true(fabs(st.z - r.z) <= 1e-6 * r.z);
  assert_true(fabs(st.router_entropy - r.entropy) <= 1e-6 * r.entropy);
  assert_true(fabs(st.objective - (cfg.aux_coef * r.aux + cfg.z_coef * r.z)) <= 1e-6 * (1 + st.objective));
  ref_free(&r);
  free(out);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

static void test_reference_dropless_k2_shared(void **st) {
  (void)st;
  ufp4_moe_config c = {.n_experts = 4, .top_k = 2, .expert_ffn = 24, .shared_ffn = 20, .aux_coef = 0.01f, .z_coef = 0.001f};
  check_against_reference(c, 32, 37, 1, 0);
}

static void test_reference_dropless_k1(void **st) {
  (void)st;
  ufp4_moe_config c = {.n_experts = 5, .top_k = 1, .expert_ffn = 16, .aux_coef = 0.01f};
  check_against_reference(c, 24, 50, 2, 0);
}

static void test_reference_drops_k1(void **st) {
  (void)st;
  /* cap = ceil(0.5 * 1 * 37 / 4) = 5 per expert: at most 20 of 37 tokens can be admitted. */
  ufp4_moe_config c = {.n_experts = 4, .top_k = 1, .expert_ffn = 16, .capacity_factor = 0.5f, .aux_coef = 0.01f};
  check_against_reference(c, 32, 37, 3, 1);
}

static void test_reference_drops_k2_shared(void **st) {
  (void)st;
  ufp4_moe_config c = {.n_experts = 3, .top_k = 2, .expert_ffn = 16, .shared_ffn = 8, .capacity_factor = 0.8f,
                       .aux_coef = 0.02f, .z_coef = 0.01f};
  check_against_reference(c, 16, 41, 4, 1);
}

/* A zero router makes every p exactly 1/E: ties everywhere, so top-2 is experts 0 and 1 (lower
 * index wins) with gates 0.5; aux = E * (1 * 1/E + 1 * 1/E) = 2; lse = log E, so z = (log 4)^2;
 * entropy = log 4. Under a 4-bit recipe, five tokens per used expert pad to 16: 2 * 11 = 22
 * padded rows. */
static void test_ties_hand_computed(void **st) {
  (void)st;
  ufp4_moe_config c = {.n_experts = 4, .top_k = 2, .expert_ffn = 8, .aux_coef = 1.0f};
  moe_fix *f = moe_fix_new(c, 8, 5, 5, 0.0f, 1.0f);
  ufp4_recipe rec;
  ufp4_linear_ctx ctx = spec_ctx(&rec, "e2m1");
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 5), 0);
  float out[5 * 8];
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 5), 0);
  ufp4_moe_stats sx;
  ufp4_moe_get_stats(s, &sx);
  for (int t = 0; t < 5; t++) {
    assert_int_equal(sx.slot_expert[2 * t], 0);
    assert_int_equal(sx.slot_expert[2 * t + 1], 1);
    assert_true(sx.slot_gate[2 * t] == 0.5f && sx.slot_gate[2 * t + 1] == 0.5f);
  }
  assert_true(sx.aux == 2.0);
  assert_true(fabs(sx.z - log(4.0) * log(4.0)) < 1e-12);
  assert_true(fabs(sx.router_entropy - log(4.0)) < 1e-12);
  assert_int_equal(sx.padded_rows, 22);
  assert_int_equal(sx.dropped, 0);
  assert_true(sx.load[0] == 1.0 && sx.load[1] == 1.0 && sx.load[2] == 0.0 && sx.load[3] == 0.0);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

/* E = 2, k = 1, N = 4, capacity 0.5: cap = ceil(0.5 * 1 * 4 / 2) = 1. Every token prefers
 * expert 0 (logit 3 against 0), so token 0 is admitted and tokens 1..3 are dropped: their output
 * is exactly 0 (no shared expert, gates not renormalized). f = (1, 0), P_0 = e^3 / (1 + e^3),
 * aux = 2 * P_0. Under a 4-bit recipe expert 0's one row pads to 16: 15 padded rows. */
static void test_capacity_hand_computed(void **st) {
  (void)st;
  ufp4_moe_config c = {.n_experts = 2, .top_k = 1, .expert_ffn = 8, .capacity_factor = 0.5f, .aux_coef = 0.01f};
  moe_fix *f = moe_fix_new(c, 4, 4, 6, 0.0f, 1.0f);
  for (int t = 0; t < 4; t++) f->x[t * 4] = 3.0f;
  f->w.router[0] = 1.0f; /* z_t0 = 3, z_t1 = 0 */
  ufp4_recipe rec;
  ufp4_linear_ctx ctx = spec_ctx(&rec, "e2m1");
  ufp4_moe *s;
  assert_int_equal(ufp4_moe_create(&s, &c, 4, 4), 0);
  float out[16];
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 4), 0);
  ufp4_moe_stats sx;
  ufp4_moe_get_stats(s, &sx);
  assert_int_equal(sx.dropped, 3);
  assert_int_equal(sx.slot_row[0], 0);
  for (int t = 1; t < 4; t++) assert_int_equal(sx.slot_row[t], -1);
  double nonzero = 0;
  for (int i = 0; i < 4; i++) nonzero += fabs(out[i]);
  assert_true(nonzero > 0);
  for (int i = 4; i < 16; i++) assert_true(out[i] == 0.0f);
  const double p0 = exp(3.0) / (1.0 + exp(3.0));
  assert_true(fabs(sx.aux - 2.0 * p0) < 1e-6);
  assert_int_equal(sx.padded_rows, 15);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

static void test_bad_input(void **st) {
  (void)st;
  ufp4_moe *s = NULL;
  ufp4_moe_config c = {.n_experts = 2, .top_k = 3, .expert_ffn = 8};
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), UFP4_EINVAL); /* k > 2 */
  c.top_k = 2;
  c.n_experts = 1;
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), UFP4_EINVAL); /* k > E */
  c.n_experts = 2;
  c.capacity_factor = NAN;
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), UFP4_EINVAL);
  c.capacity_factor = -1.0f;
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), UFP4_EINVAL);
  c.capacity_factor = 0.0f;
  assert_int_equal(ufp4_moe_create(&s, &c, 0, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_moe_create(&s, &c, 8, (size_t)-1 / 2), UFP4_ENOMEM);
  assert_null(s);
  assert_int_equal(ufp4_moe_create(NULL, &c, 8, 4), UFP4_EINVAL);
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), 0);
  ufp4_moe_stats none;
  ufp4_moe_get_stats(s, &none);
  assert_true(none.n_experts == 2 && none.load == NULL && none.slot_row == NULL && none.n_tokens == 0);
  moe_fix *f = moe_fix_new(c, 8, 4, 7, 1.0f, 1.0f);
  ufp4_recipe rec;
  ufp4_linear_ctx ctx = fp32_ctx(&rec);
  float out[8 * 8], dx[8 * 8] = {0};
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, dx, 1.0f), UFP4_EINVAL); /* no forward */
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 5), UFP4_EINVAL);         /* N > max */
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 0), UFP4_EINVAL);
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, NULL, out, 4), UFP4_EINVAL);
  float *keep = f->w.up[1];
  f->w.up[1] = NULL;
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 4), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "expert 1"));
  f->w.up[1] = keep;
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 4), 0);
  ufp4_moe_tensors g = f->g;
  g.router = NULL;
  assert_int_equal(ufp4_moe_backward(s, &f->w, &g, &ctx, f->R, dx, 1.0f), UFP4_EINVAL);
  assert_int_equal(ufp4_moe_backward(s, &f->w, &f->g, &ctx, f->R, dx, 1.0f), 0);
  assert_true(ufp4_moe_activation_bytes(s) > 0);
  ufp4_moe_free(s);
  ufp4_moe_free(NULL);
  moe_fix_free(f);
  /* A shared expert is declared but its tensors are missing. */
  c.shared_ffn = 4;
  assert_int_equal(ufp4_moe_create(&s, &c, 8, 4), 0);
  f = moe_fix_new((ufp4_moe_config){.n_experts = 2, .top_k = 2, .expert_ffn = 8}, 8, 4, 7, 1.0f, 1.0f);
  assert_int_equal(ufp4_moe_forward(s, &f->w, &ctx, f->x, out, 4), UFP4_EINVAL);
  ufp4_moe_free(s);
  moe_fix_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_dropless_k2_shared),
      cmocka_unit_test(test_reference_dropless_k1),
      cmocka_unit_test(test_reference_drops_k1),
      cmocka_unit_test(test_reference_drops_k2_shared),
      cmocka_unit_test(test_ties_hand_computed),
      cmocka_unit_test(test_capacity_hand_computed),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
