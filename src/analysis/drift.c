/* Forward and backward drift over batches and recipes: drift.h. */
#include "ufp4/drift.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/diagnostics.h"
#include "ufp4/error.h"
#include "ufp4/power.h"
#include "ufp4/recipe.h"
#include "ufp4/stats.h"

ufp4_drift_ci ufp4_drift_summarize(const double *x, long n) {
  ufp4_drift_ci c = {.mean = ufp4_mean(x, (size_t)n), .ci_low = NAN, .ci_high = NAN, .n = n};
  if (n < 2) return c;
  const double half = ufp4_t_quantile(0.975, (double)(n - 1)) * ufp4_std(x, (size_t)n) / sqrt((double)n);
  c.ci_low = c.mean - half;
  c.ci_high = c.mean + half;
  return c;
}

static void series_free(ufp4_drift_series *s) {
  free(s->values);
  free(s->ci);
}

void ufp4_drift_table_free(ufp4_drift_table *t) {
  ufp4_drift_series *all[] = {&t->fwd_ratio, &t->fwd_cosine, &t->fwd_slope, &t->dx_ratio,
                              &t->dx_cosine, &t->dx_slope,   &t->dw_ratio,  &t->dw_cosine};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) series_free(all[i]);
  memset(t, 0, sizeof *t);
}

static int series_alloc(ufp4_drift_series *s, int n_recipes, int n_points, long batches) {
  s->n_points = n_points;
  s->values = calloc((size_t)n_recipes * (size_t)n_points * (size_t)batches, sizeof(double));
  s->ci = calloc((size_t)n_recipes * (size_t)n_points, sizeof *s->ci);
  return s->values && s->ci ? 0 : ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
}

/* The value slot of recipe k, point p, batch b. */
static double *slot(ufp4_drift_series *s, long batches, int k, int p, long b) {
  return s->values + ((long)k * s->n_points + p) * batches + b;
}

/* Least-squares slope of ln ratio[l] against x_l = l (reverse: n - 1 - l), l = first..n-1. */
static double log_slope(const ufp4_drift_series *s, long batches, int k, long b, int first,
                        int reverse) {
  const int n = s->n_points, m = n - first;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int l = first; l < n; l++) {
    const double r = s->values[((long)k * n + l) * batches + b], x = reverse ? n - 1 - l : l;
    if (!(r > 0) || !isfinite(r)) return NAN;
    const double y = log(r);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = m * sxx - sx * sx;
  return den > 0 ? (m * sxy - sx * sy) / den : NAN;
}

/* Everything one batch needs: the tokens, the exact pass's tensors, the recipe pass's dX. */
typedef struct {
  ufp4_model *m;
  const ufp4_drift_spec *s;
  ufp4_recipe *recipes;
  int L, T, n_tensors;
  size_t per; /* floats of one residual-stream tensor: B * T * d_model */
  int32_t *tokens, *inp, *tgt;
  float *ref_h;         /* [L + 1][per]: the exact residual stream */
  float *ref_dx, *q_dx; /* [L + 1][per]: dX of the exact and of the recipe backward */
  float *ref_dw;        /* [n_params]: the exact gradient */
} drift_run;

static void grab_dx(void *ud, int layer, const float *dx, size_t n) {
  memcpy((float *)ud + (size_t)layer * n, dx, n * sizeof(float));
}

/* Forward with targets, then (with the backward) the gradient of dloss 1 with dX into dx. */
static int pass(drift_run *r, float *dx) {
  double loss;
  int rc = ufp4_model_forward(r->m, r->inp, r->tgt, r->s->batch, r->T, &loss);
  if (rc || !r->s->backward) return rc;
  ufp4_model_zero_grads(r->m);
  ufp4_model_set_resid_grad_hook(r->m, grab_dx, dx);
  rc = ufp4_model_backward(r->m, 1.0f);
  ufp4_model_set_resid_grad_hook(r->m, NULL, NULL);
  return rc;
}

/* Batch b's tokens and its exact pass. */
static int exact_pass(drift_run *r, long b) {
  const int B = r->s->batch, T = r->T;
  int rc = r->s->batch_fn(r->s->ctx, (uint64_t)b, r->tokens);
  if (rc) return rc;
  for (int i = 0; i < B; i++) {
    memcpy(r->inp + (size_t)i * T, r->tokens + (size_t)i * (T + 1), sizeof(int32_t) * (size_t)T);
    memcpy(r->tgt + (size_t)i * T, r->tokens + (size_t)i * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
  }
  ufp4_model_set_high_precision(r->m, 1);
  rc = pass(r, r->ref_dx);
  ufp4_model_set_high_precision(r->m, 0);
  if (rc) return rc;
  for (int l = 0; l <= r->L; l++)
    memcpy(r->ref_h + (size_t)l * r->per, ufp4_model_residual(r->m, l), sizeof(float) * r->per);
  if (r->s->backward)
    memcpy(r->ref_dw, ufp4_model_grads(r->m), sizeof(float) * ufp4_model_num_params(r->m));
  return 0;
}

/* Stores one point of recipe k, batch b into a ratio and a cosine series. */
static void store(ufp4_drift_series *ratio, ufp4_drift_series *cosine, long batches, int k, int p,
                  long b, ufp4_drift_point d) {
  *slot(ratio, batches, k, p, b) = d.norm_ratio;
  *slot(cosine, batches, k, p, b) = d.cosine;
}

/* Recipe k's pass on batch b and its points against the exact pass. */
static int recipe_pass(drift_run *r, ufp4_drift_table *t, int k, long b) {
  const long nb = t->n_batches;
  ufp4_model_set_recipe(r->m, &r->recipes[k], 1);
  ufp4_model_set_step(r->m, (uint64_t)b, 0);
  int rc = pass(r, r->q_dx);
  if (rc) return rc;
  for (int l = 0; l <= r->L; l++)
    store(&t->fwd_ratio, &t->fwd_cosine, nb, k, l, b,
          ufp4_drift_compare(ufp4_model_residual(r->m, l), r->ref_h + (size_t)l * r->per, r->per));
  *slot(&t->fwd_slope, nb, k, 0, b) = log_slope(&t->fwd_ratio, nb, k, b, 1, 0);
  if (!r->s->backward) return 0;
  for (int l = 0; l <= r->L; l++)
    store(&t->dx_ratio, &t->dx_cosine, nb, k, l, b,
          ufp4_drift_compare(r->q_dx + (size_t)l * r->per, r->ref_dx + (size_t)l * r->per, r->per));
  *slot(&t->dx_slope, nb, k, 0, b) = log_slope(&t->dx_ratio, nb, k, b, 0, 1);
  const float *g = ufp4_model_grads(r->m);
  for (int i = 0; i < r->n_tensors; i++) {
    ufp4_tensor_info ti;
    ufp4_model_tensor(ufp4_model_get_config(r->m), i, &ti);
    store(&t->dw_ratio, &t->dw_cosine, nb, k, i, b,
          ufp4_drift_compare(g + ti.offset, r->ref_dw + ti.offset, ti.count));
  }
  return 0;
}

/* The table's series for the spec, and the run's buffers. */
static int allocate(drift_run *r, ufp4_drift_table *t) {
  const ufp4_drift_spec *s = r->s;
  const int R = s->n_recipes, P = r->L + 1, W = t->n_tensors;
  const long nb = s->batches;
  int rc = series_alloc(&t->fwd_ratio, R, P, nb);
  if (!rc) rc = series_alloc(&t->fwd_cosine, R, P, nb);
  if (!rc) rc = series_alloc(&t->fwd_slope, R, 1, nb);
  if (!rc && s->backward) rc = series_alloc(&t->dx_ratio, R, P, nb);
  if (!rc && s->backward) rc = series_alloc(&t->dx_cosine, R, P, nb);
  if (!rc && s->backward) rc = series_alloc(&t->dx_slope, R, 1, nb);
  if (!rc && s->backward) rc = series_alloc(&t->dw_ratio, R, W, nb);
  if (!rc && s->backward) rc = series_alloc(&t->dw_cosine, R, W, nb);
  if (rc) return rc;
  const size_t tok = (size_t)s->batch * (size_t)r->T, stream = (size_t)P * r->per;
  r->recipes = calloc((size_t)R, sizeof *r->recipes);
  r->tokens = malloc(sizeof(int32_t) * (tok + (size_t)s->batch));
  r->inp = malloc(sizeof(int32_t) * tok);
  r->tgt = malloc(sizeof(int32_t) * tok);
  r->ref_h = malloc(sizeof(float) * stream);
  if (s->backward) {
    r->ref_dx = malloc(sizeof(float) * stream);
    r->q_dx = malloc(sizeof(float) * stream);
    r->ref_dw = malloc(sizeof(float) * ufp4_model_num_params(r->m));
  }
  if (!r->recipes || !r->tokens || !r->inp || !r->tgt || !r->ref_h ||
      (s->backward && (!r->ref_dx || !r->q_dx || !r->ref_dw)))
    return ufp4_fail(UFP4_ENOMEM, "drift: out of memory for %d blocks of %zu floats", P, r->per);
  return 0;
}

static void release(drift_run *r) {
  free(r->recipes);
  free(r->tokens);
  free(r->inp);
  free(r->tgt);
  free(r->ref_h);
  free(r->ref_dx);
  free(r->q_dx);
  free(r->ref_dw);
}

/* Every series' summaries from its per-batch values. */
static void summarize_all(ufp4_drift_table *t) {
  ufp4_drift_series *all[] = {&t->fwd_ratio, &t->fwd_cosine, &t->fwd_slope, &t->dx_ratio,
                              &t->dx_cosine, &t->dx_slope,   &t->dw_ratio,  &t->dw_cosine};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    for (int k = 0; all[i]->values && k < t->n_recipes; k++)
      for (int p = 0; p < all[i]->n_points; p++)
        all[i]->ci[(long)k * all[i]->n_points + p] =
            ufp4_drift_summarize(slot(all[i], t->n_batches, k, p, 0), t->n_batches);
}

static int check_spec(const ufp4_model *m, const ufp4_drift_spec *s) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  if (s->n_recipes < 1 || s->batches < 1 || s->batch < 1)
    return ufp4_fail(UFP4_EINVAL, "drift: %d recipes over %ld batches of %d: each must be positive",
                     s->n_recipes, s->batches, s->batch);
  return ufp4_model_check_streams(c, (uint64_t)s->batches, 1, 1);
}

int ufp4_drift_measure(ufp4_model *m, const ufp4_drift_spec *s, ufp4_drift_table *out) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  memset(out, 0, sizeof *out);
  drift_run r = {.m = m, .s = s, .L = c->n_layers, .T = c->seq_len};
  r.per = (size_t)s->batch * (size_t)c->seq_len * (size_t)c->d_model;
  out->n_recipes = s->n_recipes;
  out->n_layers = c->n_layers;
  out->n_batches = s->batches;
  out->backward = s->backward != 0;
  out->n_tensors = s->backward ? ufp4_model_tensor_count(c) : 0;
  r.n_tensors = out->n_tensors;
  int rc = check_spec(m, s);
  if (!rc) rc = allocate(&r, out);
  for (int k = 0; k < s->n_recipes && !rc; k++) rc = ufp4_recipe_parse(s->recipes[k], &r.recipes[k]);
  for (long b = 0; b < s->batches && !rc; b++) {
    rc = exact_pass(&r, b);
    for (int k = 0; k < s->n_recipes && !rc; k++) rc = recipe_pass(&r, out, k, b);
  }
  if (!rc) summarize_all(out);
  ufp4_model_zero_grads(m);
  release(&r);
  return rc;
}
