/* Backward drift (drift.h) and the residual-stream gradient hook it reads (model.h):
 * - fp32 against the exact passes is exact at every point: ratio 1, cosine 1;
 * - the hook's dX at every block input is the gradient of the loss with respect to that residual
 *   stream: a second model that starts at that point (its embedding rows set to the stream, its
 *   first block a zero block, which is the identity) gives the same gradient for its embedding
 *   rows, and a central finite difference of its loss along dX gives ||dX||;
 * - bf16 stays within 5e-3 of ratio 1, e2m1 moves every cosine below 1, and a recipe with
 *   stochastic rounding gives the same figures twice;
 * - the interval is the textbook Student-t one of the per-batch values the table returns, and the
 *   slope the least-squares slope of their logarithms;
 * - no batches or a missing checkpoint is an error that names it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_test_util.h"
#include "train_test_util.h"
#include "ufp4/diagnostics.h"
#include "ufp4/drift.h"
#include "ufp4/error.h"
#include "ufp4/model_io.h"

enum { B = 2, T = 8, L = 3, C = 16, VOCAB = 32, BATCHES = 5 };
#define BTC ((size_t)B * T * C)

/* t_{0.975, 4} from a printed table (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2: 2.776),
 * to the digits of R's qt(0.975, 4). */
#define T975_DF4 2.7764451051977987

static ufp4_model_config tiny_config(int layers) { return ckpt_tiny_config(layers, C, T, VOCAB); }

static ufp4_model *tiny_model(int layers) {
  ufp4_model_config c = tiny_config(layers);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c, B), 0);
  ufp4_model_init(m, 11);
  return m;
}

static const train_synth synth = {.batch = B, .seq = T, .vocab = VOCAB, .seed = 5, .mul = 7, .add = 3};

static void measure(ufp4_model *m, const char *recipe, int backward, ufp4_drift_table *t) {
  const char *recipes[] = {recipe};
  ufp4_drift_spec s = {.recipes = recipes,
                       .n_recipes = 1,
                       .batches = BATCHES,
                       .batch = B,
                       .batch_fn = train_synth_batch,
                       .ctx = (void *)&synth,
                       .backward = backward};
  assert_int_equal(ufp4_drift_measure(m, &s, t), 0);
  assert_int_equal(t->n_batches, BATCHES);
  assert_int_equal(t->n_layers, L);
  assert_int_equal(t->n_tensors, backward ? ufp4_model_tensor_count(ufp4_model_get_config(m)) : 0);
}

/* Every per-batch value of a series passes `ok`. */
static void each_value(const ufp4_drift_series *s, int (*ok)(double), const char *what) {
  for (long i = 0; i < (long)s->n_points * BATCHES; i++)
    if (!ok(s->values[i])) fail_msg("%s: value %ld is %.17g", what, i, s->values[i]);
}

/* Every value of the forward, dX and dW series passes ratio_ok or cos_ok. */
static void each_point(const ufp4_drift_table *t, int (*ratio_ok)(double), int (*cos_ok)(double)) {
  each_value(&t->fwd_ratio, ratio_ok, "forward ratio");
  each_value(&t->dx_ratio, ratio_ok, "dX ratio");
  each_value(&t->dw_ratio, ratio_ok, "dW ratio");
  each_value(&t->fwd_cosine, cos_ok, "forward cosine");
  each_value(&t->dx_cosine, cos_ok, "dX cosine");
  each_value(&t->dw_cosine, cos_ok, "dW cosine");
}

static int is_one(double v) { return v == 1.0; }
static int is_cos_one(double v) { return fabs(v - 1.0) < 1e-12; }

static void test_fp32_is_exact(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(L);
  ufp4_drift_table t;
  measure(m, "fp32", 1, &t);
  each_point(&t, is_one, is_cos_one);
  for (int p = 0; p <= L; p++) {
    const ufp4_drift_ci *c = ufp4_drift_at(&t.dx_ratio, 0, p);
    assert_true(c->mean == 1.0 && c->ci_low == 1.0 && c->ci_high == 1.0 && c->n == BATCHES);
  }
  assert_true(ufp4_drift_at(&t.dx_slope, 0, 0)->mean == 0.0);
  ufp4_drift_table_free(&t);
  ufp4_model_free(m);
}

/* ---- dX against a model that starts at the residual stream ---------------------------------- */

static void grab(void *ud, int layer, const float *dx, size_t n) {
  assert_int_equal(n, BTC);
  memcpy((float *)ud + (size_t)layer * n, dx, n * sizeof(float));
}

static int tensor_by_name(const ufp4_model_config *c, const char *name, ufp4_tensor_info *t) {
  for (int i = 0; i < ufp4_model_tensor_count(c); i++) {
    ufp4_model_tensor(c, i, t);
    if (!strcmp(t->name, name)) return 1;
  }
  return 0;
}

/* A model of L - l + 1 blocks: block 0 all zero weights (norms 1), so it passes its input through
 * unchanged forward and backward, then copies of blocks l..L-1 of m, and m's final norm and head.
 * Embedding row i (i < B*T) is row i of m's residual stream h_l, so tokens 0..B*T-1 feed h_l. */
static ufp4_model *model_from(ufp4_model *m, int l, const float *h_l) {
  const ufp4_model_config *mc = ufp4_model_get_config(m);
  ufp4_model_config c = tiny_config(L - l + 1);
  ufp4_model *s;
  assert_int_equal(ufp4_model_create(&s, &c, B), 0);
  float *w = ufp4_model_params(s);
  for (int i = 0; i < ufp4_model_tensor_count(&c); i++) {
    ufp4_tensor_info t, src;
    ufp4_model_tensor(&c, i, &t);
    char name[UFP4_TENSOR_NAME_MAX], rest[64];
    int j;
    if (sscanf(t.name, "model.layers.%d.%63s", &j, rest) == 2) {
      if (j == 0) {
        for (size_t k = 0; k < t.count; k++) w[t.offset + k] = t.ndim == 1 ? 1.0f : 0.0f;
        continue;
      }
      snprintf(name, sizeof name, "model.layers.%d.%s", l + j - 1, rest);
    } else {
      snprintf(name, sizeof name, "%s", t.name);
    }
    assert_true(tensor_by_name(mc, name, &src));
    assert_int_equal(src.count, t.count);
    memcpy(w + t.offset, ufp4_model_params(m) + src.offset, t.count * sizeof(float));
  }
  ufp4_tensor_info e;
  assert_true(tensor_by_name(&c, "model.embed_tokens.weight", &e));
  memcpy(w + e.offset, h_l, BTC * sizeof(float));
  return s;
}

static double loss_of(ufp4_model *s, const int32_t *tok, const int32_t *tgt) {
  double loss;
  assert_int_equal(ufp4_model_forward(s, tok, tgt, B, T, &loss), 0);
  return loss;
}

static void test_dx_is_the_gradient(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(L);
  int32_t tokens[B * (T + 1)], inp[B * T], tgt[B * T], ident[B * T];
  train_synth_batch((void *)&synth, 2, tokens);
  for (int i = 0; i < B; i++)
    for (int j = 0; j < T; j++) {
      inp[i * T + j] = tokens[i * (T + 1) + j];
      tgt[i * T + j] = tokens[i * (T + 1) + j + 1];
      ident[i * T + j] = i * T + j;
    }
  float *dx = calloc((L + 1) * BTC, sizeof(float)), *h = malloc((L + 1) * BTC * sizeof(float));
  const double loss = loss_of(m, inp, tgt);
  for (int l = 0; l <= L; l++) memcpy(h + l * BTC, ufp4_model_residual(m, l), BTC * sizeof(float));
  ufp4_model_set_resid_grad_hook(m, grab, dx);
  assert_int_equal(ufp4_model_backward(m, 1.0f), 0);
  ufp4_model_set_resid_grad_hook(m, NULL, NULL);
  for (int l = 0; l <= L; l++) {
    const float *g = dx + l * BTC;
    ufp4_model *s = model_from(m, l, h + l * BTC);
    /* The model from h_l computes the same loss, so its gradient is that of the same function. */
    assert_true(fabs(loss_of(s, ident, tgt) - loss) < 1e-5);
    ufp4_model_zero_grads(s);
    assert_int_equal(ufp4_model_backward(s, 1.0f), 0);
    ufp4_tensor_info e;
    assert_true(tensor_by_name(ufp4_model_get_config(s), "model.embed_tokens.weight", &e));
    const float *ge = ufp4_model_grads(s) + e.offset;
    double norm = 0, err = 0;
    for (size_t k = 0; k < BTC; k++) {
      norm += (double)g[k] * g[k];
      err = fmax(err, fabs((double)ge[k] - g[k]));
    }
    norm = sqrt(norm);
    assert_true(norm > 0);
    if (err > 1e-6 * norm) fail_msg("block %d: embedding gradient differs from dX by %g (|dX| %g)", l, err, norm);
    /* Central difference of the loss along u = dX / |dX|: the derivative is |dX|. */
    float *w = ufp4_model_params(s) + e.offset;
    const double eps = 3e-3;
    for (size_t k = 0; k < BTC; k++) w[k] = (float)(h[l * BTC + k] + eps * g[k] / norm);
    const double up = loss_of(s, ident, tgt);
    for (size_t k = 0; k < BTC; k++) w[k] = (float)(h[l * BTC + k] - eps * g[k] / norm);
    const double down = loss_of(s, ident, tgt), fd = (up - down) / (2 * eps);
    if (fabs(fd - norm) > 0.005 * norm) fail_msg("block %d: finite difference %g, |dX| %g", l, fd, norm);
    ufp4_model_free(s);
  }
  free(dx);
  free(h);
  ufp4_model_free(m);
}

/* ---- recipes ------------------------------------------------------------------------------ */

static int near_one(double v) { return fabs(v - 1.0) < 5e-3; }

static void test_bf16_close_e2m1_not(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(L);
  ufp4_drift_table t;
  measure(m, "bf16", 1, &t);
  each_point(&t, near_one, near_one);
  ufp4_drift_table_free(&t);
  measure(m, "e2m1", 1, &t);
  for (int p = 0; p <= L; p++) assert_true(ufp4_drift_at(&t.dx_cosine, 0, p)->mean < 1 - 1e-6);
  for (int i = 0; i < t.n_tensors; i++) assert_true(ufp4_drift_at(&t.dw_cosine, 0, i)->mean < 1 - 1e-6);
  for (int p = 1; p <= L; p++) assert_true(ufp4_drift_at(&t.fwd_cosine, 0, p)->mean < 1 - 1e-6);
  ufp4_drift_table_free(&t);
  ufp4_model_free(m);
}

static void test_deterministic_and_modes_agree(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(L);
  ufp4_drift_table a, b, f;
  measure(m, "ufp4", 1, &a); /* stochastic rounding of dY */
  measure(m, "ufp4", 1, &b);
  const size_t pts = (L + 1) * BATCHES * sizeof(double), w = (size_t)a.n_tensors * BATCHES * sizeof(double);
  assert_memory_equal(a.dx_ratio.values, b.dx_ratio.values, pts);
  assert_memory_equal(a.dx_cosine.values, b.dx_cosine.values, pts);
  assert_memory_equal(a.dw_cosine.values, b.dw_cosine.values, w);
  /* The forward figures do not depend on whether the backward is measured too. */
  measure(m, "ufp4", 0, &f);
  assert_memory_equal(a.fwd_ratio.values, f.fwd_ratio.values, pts);
  assert_memory_equal(a.fwd_cosine.values, f.fwd_cosine.values, pts);
  assert_null(f.dx_ratio.values);
  /* Each batch draws its own stream: the batches do not all give the same figure. */
  int differ = 0;
  for (int i = 1; i < BATCHES; i++) differ |= a.dx_cosine.values[i] != a.dx_cosine.values[0];
  assert_true(differ);
  ufp4_drift_table_free(&a);
  ufp4_drift_table_free(&b);
  ufp4_drift_table_free(&f);
  ufp4_model_free(m);
}

/* ---- the interval and the slope ------------------------------------------------------------ */

static void check_ci(const double *x, const ufp4_drift_ci *c) {
  double sum = 0, ss = 0;
  for (int i = 0; i < BATCHES; i++) sum += x[i];
  const double mean = sum / BATCHES;
  for (int i = 0; i < BATCHES; i++) ss += (x[i] - mean) * (x[i] - mean);
  const double half = T975_DF4 * sqrt(ss / (BATCHES - 1)) / sqrt((double)BATCHES);
  const double tol = 1e-12 * (fabs(mean) + 1e-300) + 1e-9 * half;
  assert_int_equal(c->n, BATCHES);
  if (fabs(c->mean - mean) > tol || fabs(c->ci_low - (mean - half)) > tol ||
      fabs(c->ci_high - (mean + half)) > tol)
    fail_msg("interval [%.17g, %.17g] mean %.17g, by hand [%.17g, %.17g] mean %.17g", c->ci_low,
             c->ci_high, c->mean, mean - half, mean + half, mean);
}

static void check_series(const ufp4_drift_series *s) {
  assert_non_null(s->values);
  for (int p = 0; p < s->n_points; p++) check_ci(s->values + (long)p * BATCHES, ufp4_drift_at(s, 0, p));
}

/* Slope of ln ratio against x = l (forward, l = 1..L) or L - l (backward, l = 0..L), by the
 * textbook formula. */
static double slope_by_hand(const ufp4_drift_series *ratio, int batch, int reverse) {
  const int first = reverse ? 0 : 1, n = L + 1 - first;
  double xm = 0, ym = 0, sxy = 0, sxx = 0, x[L + 1], y[L + 1];
  for (int l = first; l <= L; l++) {
    x[l] = reverse ? L - l : l;
    y[l] = log(ratio->values[(long)l * BATCHES + batch]);
    xm += x[l] / n;
    ym += y[l] / n;
  }
  for (int l = first; l <= L; l++) {
    sxy += (x[l] - xm) * (y[l] - ym);
    sxx += (x[l] - xm) * (x[l] - xm);
  }
  return sxy / sxx;
}

static void test_interval_is_textbook(void **state) {
  (void)state;
  const double x[BATCHES] = {1, 2, 3, 4, 5};
  ufp4_drift_ci c = ufp4_drift_summarize(x, BATCHES);
  /* mean 3, s = sqrt(2.5), half width t * s / sqrt(5) = 2.7764451 * 0.70710678 = 1.9632432 */
  assert_true(c.mean == 3.0);
  assert_true(fabs(c.ci_low - 1.0367568385224924) < 1e-12);
  assert_true(fabs(c.ci_high - 4.9632431614775076) < 1e-12);
  c = ufp4_drift_summarize(x + 3, 1);
  assert_true(c.mean == 4.0 && isnan(c.ci_low) && isnan(c.ci_high) && c.n == 1);

  ufp4_model *m = tiny_model(L);
  ufp4_drift_table t;
  measure(m, "e2m1", 1, &t);
  const ufp4_drift_series *all[] = {&t.fwd_ratio, &t.fwd_cosine, &t.fwd_slope, &t.dx_ratio,
                                    &t.dx_cosine, &t.dx_slope,   &t.dw_ratio,  &t.dw_cosine};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) check_series(all[i]);
  /* The per-batch values spread: the interval is not degenerate. */
  assert_true(ufp4_drift_at(&t.dx_ratio, 0, 0)->ci_high > ufp4_drift_at(&t.dx_ratio, 0, 0)->ci_low);
  for (int b = 0; b < BATCHES; b++) {
    assert_true(fabs(t.fwd_slope.values[b] - slope_by_hand(&t.fwd_ratio, b, 0)) < 1e-12);
    assert_true(fabs(t.dx_slope.values[b] - slope_by_hand(&t.dx_ratio, b, 1)) < 1e-12);
  }
  ufp4_drift_table_free(&t);
  ufp4_model_free(m);
}

/* ---- bad input ---------------------------------------------------------------------------- */

/* (A recipe that does not parse: test_model_io.c and test_cli_drift.c.) */
static void test_bad_input_is_named(void **state) {
  (void)state;
  ufp4_model *m = tiny_model(L);
  const char *recipes[] = {"e2m1"};
  ufp4_drift_spec s = {.recipes = recipes, .n_recipes = 1, .batches = 0, .batch = B,
                       .batch_fn = train_synth_batch, .ctx = (void *)&synth, .backward = 1};
  ufp4_drift_table t;
  assert_int_not_equal(ufp4_drift_measure(m, &s, &t), 0);
  assert_non_null(strstr(ufp4_last_error(), "batches"));
  ufp4_drift_table_free(&t);
  ufp4_model_free(m);
  ufp4_drift_result res;
  assert_int_not_equal(ufp4_drift_checkpoint("/nonexistent/ckpt_x", "/nonexistent", recipes, 1, 1, B, 1, &res), 0);
  assert_non_null(strstr(ufp4_last_error(), "/nonexistent/ckpt_x"));
  ufp4_drift_table_free(&res.table);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_is_exact),
      cmocka_unit_test(test_dx_is_the_gradient),
      cmocka_unit_test(test_bf16_close_e2m1_not),
      cmocka_unit_test(test_deterministic_and_modes_agree),
      cmocka_unit_test(test_interval_is_textbook),
      cmocka_unit_test(test_bad_input_is_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
