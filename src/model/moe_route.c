/* MoE routing: router logits, softmax, top-k with renormalized gates, capacity and dropping, the
 * grouped-row layout, the Switch load-balancing loss and the ST-MoE router z-loss, and their
 * backward. Semantics: include/ufp4/moe.h. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/moe_internal.h"
#include "ufp4/error.h"
#include "ufp4/gemm.h"

/* Index of the largest p[e] over e != skip; strict > keeps the lower index on ties, and a NaN never
 * wins a comparison, so the result is always a valid index. */
static int argmax_except(const float *p, int E, int skip) {
  int best = -1;
  for (int e = 0; e < E; e++) {
    if (e == skip) continue;
    if (best < 0 || p[e] > p[best]) best = e;
  }
  return best;
}

/* Softmax (double, from the float logits), entropy, top-k and gates of one token. */
static void route_token(ufp4_moe *s, size_t t) {
  const int E = s->cfg.n_experts, k = s->cfg.top_k;
  const float *z = s->logits + t * (size_t)E;
  float *p = s->prob + t * (size_t)E;
  double m = z[0];
  for (int e = 1; e < E; e++)
    if (z[e] > m) m = z[e];
  double sum = 0.0;
  for (int e = 0; e < E; e++) sum += exp((double)z[e] - m);
  double ent = 0.0;
  for (int e = 0; e < E; e++) {
    double pe = exp((double)z[e] - m) / sum;
    p[e] = (float)pe;
    if (pe > 0.0) ent -= pe * log(pe);
  }
  s->lse[t] = m + log(sum);
  s->entropy[t] = ent;
  int *ex = s->slot_expert + t * (size_t)k;
  float *g = s->slot_gate + t * (size_t)k;
  ex[0] = argmax_except(p, E, -1);
  if (k == 1) {
    g[0] = 1.0f; /* p/p: exactly 1 for any finite p > 0; k = 1 must equal the dense MLP */
    return;
  }
  ex[1] = argmax_except(p, E, ex[0]);
  double S = (double)p[ex[0]] + (double)p[ex[1]];
  g[0] = (float)((double)p[ex[0]] / S);
  g[1] = (float)((double)p[ex[1]] / S);
}

int ufp4_moe_route_forward(ufp4_moe *s, const float *router, const float *x, size_t N) {
  const int E = s->cfg.n_experts, k = s->cfg.top_k;
  ufp4_sgemm_abt(x, router, s->logits, N, (size_t)E, (size_t)s->C, 0.0f);
#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < N; t++) route_token(s, t);

  /* Capacity: admission in token order, slot order within a token (sequential by definition). */
  size_t cap = SIZE_MAX;
  if (s->cfg.capacity_factor > 0.0f) {
    double c = ceil((double)s->cfg.capacity_factor * (double)k * (double)N / (double)E);
    cap = c < 1.0 ? 1 : (size_t)c;
  }
  memset(s->count, 0, (size_t)E * sizeof *s->count);
  memset(s->admitted, 0, (size_t)E * sizeof *s->admitted);
  s->dropped = 0;
  for (size_t i = 0; i < N * (size_t)k; i++) {
    int e = s->slot_expert[i];
    s->count[e]++;
    if (s->admitted[e] < cap) s->slot_row[i] = (ptrdiff_t)s->admitted[e]++;
    else {
      s->slot_row[i] = -1;
      s->dropped++;
    }
  }
  size_t row = 0;
  for (int e = 0; e < E; e++) {
    s->group_start[e] = row;
    s->group_rows[e] = moe_pad_rows(s->admitted[e], s->row_align);
    row += s->group_rows[e];
  }
  s->rows_used = row;
  for (size_t r = 0; r < row; r++) {
    s->row_token[r] = SIZE_MAX;
    s->row_gate[r] = 0.0f;
  }
  for (size_t i = 0; i < N * (size_t)k; i++) {
    if (s->slot_row[i] < 0) continue;
    size_t r = s->group_start[s->slot_expert[i]] + (size_t)s->slot_row[i];
    s->slot_row[i] = (ptrdiff_t)r;
    s->row_token[r] = i / (size_t)k;
    s->row_gate[r] = s->slot_gate[i];
  }

  /* Aux (Switch / HF load_balancing_loss_func), z-loss (ST-MoE), entropy: fixed-order sums. */
#pragma omp parallel for schedule(static)
  for (int e = 0; e < E; e++) {
    double acc = 0.0;
    for (size_t t = 0; t < N; t++) acc += (double)s->prob[t * (size_t)E + (size_t)e];
    s->pmean[e] = acc / (double)N;
    s->load[e] = (double)s->count[e] / (double)N;
  }
  double aux = 0.0, zl = 0.0, ent = 0.0;
  for (int e = 0; e < E; e++) aux += s->load[e] * s->pmean[e];
  for (size_t t = 0; t < N; t++) {
    zl += s->lse[t] * s->lse[t];
    ent += s->entropy[t];
  }
  s->aux = (double)E * aux;
  s->zloss = zl / (double)N;
  s->router_entropy = ent / (double)N;
  return 0;
}

int ufp4_moe_route_backward(ufp4_moe *s, const float *router, const float *x, float *grouter, float *dx,
                            float dloss) {
  const int E = s->cfg.n_experts, k = s->cfg.top_k;
  const size_t N = s->N;
  const double aux_scale = (double)dloss * (double)s->cfg.aux_coef * (double)E / (double)N;
  const double z_scale = (double)dloss * (double)s->cfg.z_coef * 2.0 / (double)N;
#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < N; t++) {
    const float *z = s->logits + t * (size_t)E;
    double dp[UFP4_MOE_MAX_EXPERTS], pd[UFP4_MOE_MAX_EXPERTS];
    for (int e = 0; e < E; e++) {
      pd[e] = exp((double)z[e] - s->lse[t]);
      dp[e] = aux_scale * s->load[e]; /* d aux / d p_te = E f_e / N; f_e is a count */
    }
    if (k == 2) { /* g_j = p_j / S over the top-k, dropped slots included in S */
      const int *ex = s->slot_expert + t * 2;
      const double *dg = s->dgate + t * 2;
      const float *p = s->prob + t * (size_t)E;
      double S = (double)p[ex[0]] + (double)p[ex[1]];
      double dot = dg[0] * (double)p[ex[0]] + dg[1] * (double)p[ex[1]];
      for (int j = 0; j < 2; j++) dp[ex[j]] += dg[j] / S - dot / (S * S);
    }
    double pdp = 0.0;
    for (int e = 0; e < E; e++) pdp += pd[e] * dp[e];
    float *dz = s->dz + t * (size_t)E;
    for (int e = 0; e < E; e++) dz[e] = (float)(pd[e] * (dp[e] - pdp) + z_scale * s->lse[t] * pd[e]);
  }
  if (grouter) ufp4_sgemm_atb(s->dz, x, grouter, (size_t)E, (size_t)s->C, N, 1.0f);
  if (dx) ufp4_sgemm_ab(s->dz, router, dx, N, (size_t)s->C, (size_t)E, 1.0f);
  return 0;
}
