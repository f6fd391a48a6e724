/* Forward and backward of the whole decoder; see include/ufp4/model.h for the architecture. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ufp4/error.h"
#include "ufp4/gemm.h"
#include "ufp4/layers.h"
#include "ufp4/linear.h"
#include "ufp4/model.h"
#include "ufp4/moe.h"
#include "ufp4/philox.h"
#include "ufp4/rht.h"
#include "ufp4/stream.h"
#include "core/timer.h"

enum { LN1 = 0, WQ, WK, WV, WO, LN2, WG, WU, WD, PER_LAYER };

typedef struct {
  float *ln1, *rstd1, *q, *k, *v, *att, *ao, *mid, *ln2, *rstd2, *gate, *up, *act;
} layer_acts;

struct ufp4_model {
  ufp4_model_config c;
  int B;
  size_t n_params;
  float *params, *grads;
  float *w_embed, *w_norm, *w_head, *g_embed, *g_norm, *g_head;
  float **wl, **gl; /* per layer tensor pointers: wl[l * PER_LAYER + k]; WG, WU, WD NULL in MoE layers */
  /* MoE layers: one block each (NULL in dense layers), with its parameter and gradient pointers */
  ufp4_moe **moe;
  ufp4_moe_tensors *mw, *mg;
  float **moe_ptrs; /* backing store of the expert pointer arrays of mw and mg */
  float *rope_cos, *rope_sin;
  /* activations of the last forward */
  float *acts_block;
  float *resid; /* [L + 1][BT, C] */
  layer_acts *la;
  float *lnf, *rstdf, *logits, *losses, *lse;
  int32_t *targets;
  /* scratch */
  float *scratch_block;
  float *lin_scratch, *att_scratch, *tmp_c, *tmp_q, *tmp_k;
  float *d_resid, *d_ln, *d_q, *d_k, *d_v, *d_ao, *d_gate, *d_up, *d_act, *d_qpre, *d_kpre;
  int32_t *tokens;
  int last_B, last_T, have_targets;
  ufp4_recipe recipe;
  float rht_signs[UFP4_RHT_MAX];
  uint64_t recipe_seed, step;
  int rank;
  int all_fp32;
  const ufp4_linear_probe *probe;
  size_t acts_floats, scratch_floats;
  int timing;
  ufp4_model_times times;
  ufp4_linear_times lin_times;
};

/* Phase clock: reads the time only when timing is on. */
static double tick(const ufp4_model *m) { return m->timing ? ufp4_now_s() : 0.0; }

static size_t sz(size_t a, size_t b) { return a * b; }

int ufp4_model_create(ufp4_model **out, const ufp4_model_config *c, int B) {
  *out = NULL;
  int rc = ufp4_model_config_check(c);
  if (rc) return rc;
  if (B < 1) return ufp4_fail(UFP4_EINVAL, "model: batch size %d must be positive", B);
  ufp4_model *m = calloc(1, sizeof *m);
  if (!m) return ufp4_fail(UFP4_ENOMEM, "model: out of memory");
  m->c = *c;
  m->B = B;
  const int L = c->n_layers;
  const size_t C = (size_t)c->d_model, V = (size_t)c->vocab, F = (size_t)c->ffn_dim, T = (size_t)c->seq_len;
  const size_t H = (size_t)c->n_heads, D = C / H, KV = D * (size_t)c->n_kv_heads, QD = H * D;
  const size_t BT = (size_t)B * T;
  m->n_params = ufp4_model_param_count(c);
  m->params = malloc(m->n_params * sizeof(float));
  m->grads = calloc(m->n_params, sizeof(float));
  m->wl = malloc(sizeof(float *) * (size_t)L * PER_LAYER);
  m->gl = malloc(sizeof(float *) * (size_t)L * PER_LAYER);
  m->la = calloc((size_t)L, sizeof *m->la);
  m->moe = calloc((size_t)L, sizeof *m->moe);
  m->mw = calloc((size_t)L, sizeof *m->mw);
  m->mg = calloc((size_t)L, sizeof *m->mg);
  const size_t E = c->moe_experts > 0 ? (size_t)c->moe_experts : 0;
  m->moe_ptrs = calloc((size_t)L * 6 * E + 1, sizeof *m->moe_ptrs);
  if (!m->params || !m->grads || !m->wl || !m->gl || !m->la || !m->moe || !m->mw || !m->mg || !m->moe_ptrs)
    goto oom;
  /* Walks the tensor table in its order (config.c): embed, per layer the six attention-side tensors
   * then the MLP's (dense or MoE), norm, head. */
  int idx = 0;
  ufp4_tensor_info t;
#define NEXT(wp, gp)                              \
  do {                                            \
    ufp4_model_tensor(c, idx++, &t);              \
    (wp) = m->params + t.offset;                  \
    (gp) = m->grads + t.offset;                   \
  } while (0)
  NEXT(m->w_embed, m->g_embed);
  for (int l = 0; l < L; l++) {
    float **w = m->wl + (size_t)l * PER_LAYER, **g = m->gl + (size_t)l * PER_LAYER;
    for (int k = LN1; k <= LN2; k++) NEXT(w[k], g[k]);
    if (!ufp4_model_layer_is_moe(c, l)) {
      for (int k = WG; k <= WD; k++) NEXT(w[k], g[k]);
      continue;
    }
    w[WG] = w[WU] = w[WD] = g[WG] = g[WU] = g[WD] = NULL;
    ufp4_moe_tensors *mw = &m->mw[l], *mg = &m->mg[l];
    float **pp = m->moe_ptrs + (size_t)l * 6 * E;
    mw->gate = pp;
    mw->up = pp + E;
    mw->down = pp + 2 * E;
    mg->gate = pp + 3 * E;
    mg->up = pp + 4 * E;
    mg->down = pp + 5 * E;
    NEXT(mw->router, mg->router);
    for (size_t e = 0; e < E; e++) {
      NEXT(mw->gate[e], mg->gate[e]);
      NEXT(mw->up[e], mg->up[e]);
      NEXT(mw->down[e], mg->down[e]);
    }
    if (c->moe_shared_ffn > 0) {
      NEXT(mw->shared_gate, mg->shared_gate);
      NEXT(mw->shared_up, mg->shared_up);
      NEXT(mw->shared_down, mg->shared_down);
      NEXT(mw->shared_router, mg->shared_router);
    }
    const ufp4_moe_config mc = {.n_experts = c->moe_experts,
                                .top_k = c->moe_top_k,
                                .expert_ffn = c->moe_ffn,
                                .shared_ffn = c->moe_shared_ffn,
                                .capacity_factor = c->moe_capacity,
                                .aux_coef = c->moe_aux_coef,
                                .z_coef = c->moe_z_coef};
    if ((rc = ufp4_moe_create(&m->moe[l], &mc, (int)C, (size_t)B * T))) {
      ufp4_model_free(m);
      return rc;
    }
  }
  NEXT(m->w_norm, m->g_norm);
  if (!c->tie_embeddings) NEXT(m->w_head, m->g_head);
#undef NEXT
  if (c->tie_embeddings) {
    m->w_head = m->w_embed;
    m->g_head = m->g_embed;
  }
  /* One allocation for every activation of the last forward. */
  /* An MoE layer keeps no dense gate/up/act: its block holds its own activations. */
  const size_t per_layer = 2 * BT * C + BT + BT * QD + 2 * BT * KV + sz((size_t)B * H, T * T) + BT * QD + BT * C +
                           BT;
  const size_t n_dense = (size_t)(L - ufp4_model_moe_layers(c));
  const size_t acts = (size_t)(L + 1) * BT * C + (size_t)L * per_layer + n_dense * 3 * BT * F + BT * C + BT +
                      BT * V + 2 * BT;
  m->acts_floats = acts;
  m->acts_block = malloc(acts * sizeof(float));
  if (!m->acts_block) goto oom;
  float *p = m->acts_block;
#define TAKE(ptr, n) (ptr = p, p += (n))
  TAKE(m->resid, (size_t)(L + 1) * BT * C);
  for (int l = 0; l < L; l++) {
    layer_acts *a = &m->la[l];
    TAKE(a->ln1, BT * C);
    TAKE(a->rstd1, BT);
    TAKE(a->q, BT * QD);
    TAKE(a->k, BT * KV);
    TAKE(a->v, BT * KV);
    TAKE(a->att, sz((size_t)B * H, T * T));
    TAKE(a->ao, BT * QD);
    TAKE(a->mid, BT * C);
    TAKE(a->ln2, BT * C);
    TAKE(a->rstd2, BT);
    if (ufp4_model_layer_is_moe(c, l)) continue;
    TAKE(a->gate, BT * F);
    TAKE(a->up, BT * F);
    TAKE(a->act, BT * F);
  }
  TAKE(m->lnf, BT * C);
  TAKE(m->rstdf, BT);
  TAKE(m->logits, BT * V);
  TAKE(m->losses, BT);
  TAKE(m->lse, BT);
  /* Scratch and activation gradients, one allocation. */
  size_t lin = 0;
  const size_t shapes[4][2] = {{C, QD}, {C, KV}, {QD, C}, {C, F}};
  for (int s = 0; s < 4; s++) {
    size_t a1 = ufp4_linear_scratch_floats(BT, shapes[s][0], shapes[s][1]);
    size_t a2 = ufp4_linear_scratch_floats(BT, shapes[s][1], shapes[s][0]);
    lin = lin > a1 ? lin : a1;
    lin = lin > a2 ? lin : a2;
  }
  const size_t att_s = ufp4_attention_scratch_floats(B, (int)T, c->n_kv_heads);
  const size_t scratch = lin + att_s + BT * C + BT * QD + BT * KV + BT * C + BT * C + BT * QD + 2 * BT * KV +
                         BT * QD + 3 * BT * F + BT * QD + BT * KV;
  m->scratch_floats = scratch;
  m->scratch_block = malloc(scratch * sizeof(float));
  m->rope_cos = malloc(T * (D / 2) * sizeof(float));
  m->rope_sin = malloc(T * (D / 2) * sizeof(float));
  m->tokens = malloc(BT * sizeof(int32_t));
  m->targets = malloc(BT * sizeof(int32_t));
  if (!m->scratch_block || !m->rope_cos || !m->rope_sin || !m->tokens || !m->targets) goto oom;
  p = m->scratch_block;
  TAKE(m->lin_scratch, lin);
  TAKE(m->att_scratch, att_s);
  TAKE(m->tmp_c, BT * C);
  TAKE(m->tmp_q, BT * QD);
  TAKE(m->tmp_k, BT * KV);
  TAKE(m->d_resid, BT * C);
  TAKE(m->d_ln, BT * C);
  TAKE(m->d_q, BT * QD);
  TAKE(m->d_k, BT * KV);
  TAKE(m->d_v, BT * KV);
  TAKE(m->d_ao, BT * QD);
  TAKE(m->d_gate, BT * F);
  TAKE(m->d_up, BT * F);
  TAKE(m->d_act, BT * F);
  TAKE(m->d_qpre, BT * QD);
  TAKE(m->d_kpre, BT * KV);
#undef TAKE
  if ((rc = ufp4_rope_init(m->rope_cos, m->rope_sin, (int)T, (int)D, c->rope_theta))) {
    ufp4_model_free(m);
    return rc;
  }
  ufp4_recipe_parse("fp32", &m->recipe);
  *out = m;
  return 0;
oom:
  ufp4_model_free(m);
  return ufp4_fail(UFP4_ENOMEM, "model: out of memory for %zu parameters at batch %d x %d", ufp4_model_param_count(c),
                   B, c->seq_len);
}

void ufp4_model_free(ufp4_model *m) {
  if (!m) return;
  free(m->params);
  free(m->grads);
  free(m->wl);
  free(m->gl);
  free(m->la);
  if (m->moe)
    for (int l = 0; l < m->c.n_layers; l++) ufp4_moe_free(m->moe[l]);
  free(m->moe);
  free(m->mw);
  free(m->mg);
  free(m->moe_ptrs);
  free(m->acts_block);
  free(m->scratch_block);
  free(m->rope_cos);
  free(m->rope_sin);
  free(m->tokens);
  free(m->targets);
  free(m);
}

const ufp4_model_config *ufp4_model_get_config(const ufp4_model *m) { return &m->c; }
float *ufp4_model_params(ufp4_model *m) { return m->params; }
float *ufp4_model_grads(ufp4_model *m) { return m->grads; }
size_t ufp4_model_num_params(const ufp4_model *m) { return m->n_params; }
const float *ufp4_model_logits(const ufp4_model *m) { return m->logits; }
const float *ufp4_model_residual(const ufp4_model *m, int layer) {
  return m->resid + (size_t)layer * (size_t)m->last_B * (size_t)m->last_T * (size_t)m->c.d_model;
}

size_t ufp4_model_activation_bytes(const ufp4_model *m) {
  size_t bytes = m->acts_floats * sizeof(float);
  for (int l = 0; l < m->c.n_layers; l++)
    if (m->moe[l]) bytes += ufp4_moe_activation_bytes(m->moe[l]);
  return bytes;
}

double ufp4_model_aux_loss(const ufp4_model *m) {
  double sum = 0;
  for (int l = 0; l < m->c.n_layers; l++) {
    if (!m->moe[l]) continue;
    ufp4_moe_stats st;
    ufp4_moe_get_stats(m->moe[l], &st);
    sum += st.objective;
  }
  return sum;
}

int ufp4_model_moe_stats(const ufp4_model *m, int layer, ufp4_moe_stats *out) {
  if (layer < 0 || layer >= m->c.n_layers || !m->moe[layer])
    return ufp4_fail(UFP4_EINVAL, "model: layer %d is not an MoE layer", layer);
  ufp4_moe_get_stats(m->moe[layer], out);
  return 0;
}
size_t ufp4_model_scratch_bytes(const ufp4_model *m) { return m->scratch_floats * sizeof(float); }

void ufp4_model_set_timing(ufp4_model *m, int on) { m->timing = on != 0; }
void ufp4_model_reset_phase_times(ufp4_model *m) {
  memset(&m->times, 0, sizeof m->times);
  memset(&m->lin_times, 0, sizeof m->lin_times);
}
void ufp4_model_phase_times(const ufp4_model *m, ufp4_model_times *out) {
  *out = m->times;
  out->linear_prepare = m->lin_times.prepare;
  out->linear_gemm = m->lin_times.gemm;
}

void ufp4_model_zero_grads(ufp4_model *m) { memset(m->grads, 0, m->n_params * sizeof(float)); }

void ufp4_model_init(ufp4_model *m, uint64_t seed) {
  int nt = ufp4_model_tensor_count(&m->c);
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(&m->c, i, &t);
    float *w = m->params + t.offset;
    if (t.ndim == 1) {
      for (size_t j = 0; j < t.count; j++) w[j] = 1.0f;
      continue;
    }
    const uint64_t stream = 0x494e4954ull << 32 | (uint64_t)i; /* "INIT" */
#pragma omp parallel for schedule(static) if (t.count > 65536)
    for (size_t j = 0; j < t.count; j++) w[j] = m->c.init_std * ufp4_philox_normal(seed, stream, j);
  }
}

int ufp4_model_set_recipe(ufp4_model *m, const ufp4_recipe *r, uint64_t seed) {
  m->recipe = *r;
  m->recipe_seed = seed;
  if (r->rht_signs == UFP4_SIGNS_NVIDIA) memcpy(m->rht_signs, ufp4_rht_signs_nvidia16, sizeof(float) * 16);
  else ufp4_rht_signs_random(m->rht_signs, r->rht_n, seed);
  return 0;
}

void ufp4_model_set_high_precision(ufp4_model *m, int on) { m->all_fp32 = on; }
void ufp4_model_set_probe(ufp4_model *m, const ufp4_linear_probe *probe) { m->probe = probe; }

void ufp4_model_set_step(ufp4_model *m, uint64_t step, int rank) {
  m->step = step;
  m->rank = rank;
}

int ufp4_model_check_streams(const ufp4_model_config *c, uint64_t steps, int micro_steps, int world) {
  if (steps < 1 || micro_steps < 1 || world < 1 || c->n_layers < 1)
    return ufp4_fail(UFP4_EINVAL,
                     "model: streams for %llu steps x %d micro-batches on %d ranks of %d layers: "
                     "each must be positive",
                     (unsigned long long)steps, micro_steps, world, c->n_layers);
  /* Experts 0 .. E-1 and the shared expert E; a dense model uses expert 0 only. */
  uint32_t last_expert = 0;
  if (ufp4_model_moe_layers(c) > 0)
    last_expert = (uint32_t)c->moe_experts - (c->moe_shared_ffn > 0 ? 0 : 1);
  const ufp4_stream_id last = {.step = steps - 1,
                               .micro = (uint32_t)micro_steps - 1,
                               .micro_steps = (uint32_t)micro_steps,
                               .rank = (uint32_t)world - 1,
                               .layer = (uint32_t)c->n_layers - 1,
                               .expert = last_expert,
                               .proj = UFP4_N_PROJ - 1,
                               .operand = UFP4_N_OPERANDS - 1};
  return ufp4_stream_check(&last);
}

/* Projection `proj` of layer l: fp32 in kept blocks, its stochastic-rounding stream (an MoE block
 * derives its experts' from the gate projection's). */
static ufp4_linear_ctx proj_ctx(ufp4_model *m, int l, ufp4_proj proj) {
  const int L = m->c.n_layers;
  const int kept = l < m->recipe.keep_first || l >= L - m->recipe.keep_last;
  ufp4_linear_ctx ctx = {.recipe = &m->recipe,
                         .high_precision = m->all_fp32 || kept,
                         .stream = {.seed = m->recipe_seed,
                                    .step = m->step,
                                    .rank = (uint32_t)m->rank,
                                    .layer = (uint32_t)l,
                                    .proj = (uint32_t)proj},
                         .rht_signs = m->rht_signs,
                         .probe = m->probe,
                         .layer = l,
                         .proj = proj,
                         .times = m->timing ? &m->lin_times : NULL};
  return ctx;
}

/* The seven projections of layer l. */
typedef struct {
  ufp4_linear_ctx q, k, v, o, gate, up, down;
} layer_ctx;

static layer_ctx layer_ctxs(ufp4_model *m, int l) {
  layer_ctx x = {proj_ctx(m, l, UFP4_PROJ_Q),    proj_ctx(m, l, UFP4_PROJ_K),
                 proj_ctx(m, l, UFP4_PROJ_V),    proj_ctx(m, l, UFP4_PROJ_O),
                 proj_ctx(m, l, UFP4_PROJ_GATE), proj_ctx(m, l, UFP4_PROJ_UP),
                 proj_ctx(m, l, UFP4_PROJ_DOWN)};
  return x;
}

#define CHECK(call)              \
  do {                           \
    int rc_ = (call);            \
    if (rc_) return rc_;         \
  } while (0)

static int forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, double *loss);
static int backward(ufp4_model *m, float dloss);

int ufp4_model_forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, double *loss) {
  double t0 = tick(m);
  int rc = forward(m, tokens, targets, B, T, loss);
  if (m->timing) m->times.forward += ufp4_now_s() - t0;
  return rc;
}

int ufp4_model_backward(ufp4_model *m, float dloss) {
  double t0 = tick(m);
  int rc = backward(m, dloss);
  if (m->timing) m->times.backward += ufp4_now_s() - t0;
  return rc;
}

static int forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, double *loss) {
  const ufp4_model_config *c = &m->c;
  if (B < 1 || B > m->B || T < 1 || T > c->seq_len)
    return ufp4_fail(UFP4_EINVAL, "model: batch %d x %d exceeds the allocated %d x %d", B, T, m->B, c->seq_len);
  const int C = c->d_model, H = c->n_heads, KVH = c->n_kv_heads, D = C / H, F = c->ffn_dim, V = c->vocab;
  const int QD = H * D, KV = KVH * D;
  const size_t BT = (size_t)B * (size_t)T;
  m->last_B = B;
  m->last_T = T;
  memcpy(m->tokens, tokens, BT * sizeof(int32_t));
  CHECK(ufp4_embedding_forward(m->resid, tokens, m->w_embed, (int)BT, V, C));
  for (int l = 0; l < c->n_layers; l++) {
    layer_acts *a = &m->la[l];
    float **w = m->wl + (size_t)l * PER_LAYER;
    const float *x = m->resid + (size_t)l * BT * C;
    float *y = m->resid + (size_t)(l + 1) * BT * C;
    layer_ctx pc = layer_ctxs(m, l);
    CHECK(ufp4_rmsnorm_forward(a->ln1, a->rstd1, x, w[LN1], (int)BT, C, c->rms_eps));
    CHECK(ufp4_linear_forward(&pc.q, a->ln1, w[WQ], m->tmp_q, BT, C, QD, m->lin_scratch));
    CHECK(ufp4_rope_forward(a->q, m->tmp_q, m->rope_cos, m->rope_sin, B, T, H, D));
    CHECK(ufp4_linear_forward(&pc.k, a->ln1, w[WK], m->tmp_k, BT, C, KV, m->lin_scratch));
    CHECK(ufp4_rope_forward(a->k, m->tmp_k, m->rope_cos, m->rope_sin, B, T, KVH, D));
    CHECK(ufp4_linear_forward(&pc.v, a->ln1, w[WV], a->v, BT, C, KV, m->lin_scratch));
    double ta = tick(m);
    CHECK(ufp4_attention_forward(a->ao, a->att, a->q, a->k, a->v, B, T, H, KVH, D));
    if (m->timing) m->times.attention += ufp4_now_s() - ta;
    CHECK(ufp4_linear_forward(&pc.o, a->ao, w[WO], m->tmp_c, BT, QD, C, m->lin_scratch));
    CHECK(ufp4_residual_forward(a->mid, x, m->tmp_c, BT * C));
    CHECK(ufp4_rmsnorm_forward(a->ln2, a->rstd2, a->mid, w[LN2], (int)BT, C, c->rms_eps));
    if (m->moe[l]) {
      CHECK(ufp4_moe_forward(m->moe[l], &m->mw[l], &pc.gate, a->ln2, m->tmp_c, BT));
      CHECK(ufp4_residual_forward(y, a->mid, m->tmp_c, BT * C));
      continue;
    }
    CHECK(ufp4_linear_forward(&pc.gate, a->ln2, w[WG], a->gate, BT, C, F, m->lin_scratch));
    CHECK(ufp4_linear_forward(&pc.up, a->ln2, w[WU], a->up, BT, C, F, m->lin_scratch));
    CHECK(ufp4_swiglu_forward(a->act, a->gate, a->up, (int)BT, F));
    CHECK(ufp4_linear_forward(&pc.down, a->act, w[WD], m->tmp_c, BT, F, C, m->lin_scratch));
    CHECK(ufp4_residual_forward(y, a->mid, m->tmp_c, BT * C));
  }
  double th = tick(m);
  const float *top = m->resid + (size_t)c->n_layers * BT * C;
  CHECK(ufp4_rmsnorm_forward(m->lnf, m->rstdf, top, m->w_norm, (int)BT, C, c->rms_eps));
  ufp4_sgemm_abt(m->lnf, m->w_head, m->logits, BT, (size_t)V, (size_t)C, 0.0f);
  m->have_targets = targets != NULL;
  if (targets) {
    memcpy(m->targets, targets, BT * sizeof(int32_t));
    double mean = 0;
    CHECK(ufp4_cross_entropy_forward(m->losses, m->lse, &mean, NULL, m->logits, targets, (int)BT, V));
    if (loss) *loss = mean;
  }
  if (m->timing) m->times.head += ufp4_now_s() - th;
  return 0;
}

static int backward(ufp4_model *m, float dloss) {
  const ufp4_model_config *c = &m->c;
  if (!m->have_targets) return ufp4_fail(UFP4_EINVAL, "model: backward needs a forward with targets");
  const int B = m->last_B, T = m->last_T;
  const int C = c->d_model, H = c->n_heads, KVH = c->n_kv_heads, D = C / H, F = c->ffn_dim, V = c->vocab;
  const int QD = H * D, KV = KVH * D;
  const size_t BT = (size_t)B * (size_t)T;
  double th = tick(m);
  /* dlogits overwrite the logits. */
  CHECK(ufp4_cross_entropy_backward(m->logits, m->logits, m->lse, m->targets, dloss, (int)BT, V));
  ufp4_sgemm_ab(m->logits, m->w_head, m->d_ln, BT, (size_t)C, (size_t)V, 0.0f);
  ufp4_sgemm_atb(m->logits, m->lnf, m->g_head, (size_t)V, (size_t)C, BT, 1.0f);
  memset(m->d_resid, 0, BT * C * sizeof(float));
  const float *top = m->resid + (size_t)c->n_layers * BT * C;
  CHECK(ufp4_rmsnorm_backward(m->d_resid, m->g_norm, m->d_ln, top, m->w_norm, m->rstdf, (int)BT, C));
  if (m->timing) m->times.head += ufp4_now_s() - th;
  for (int l = c->n_layers - 1; l >= 0; l--) {
    layer_acts *a = &m->la[l];
    float **w = m->wl + (size_t)l * PER_LAYER, **g = m->gl + (size_t)l * PER_LAYER;
    const float *x = m->resid + (size_t)l * BT * C;
    layer_ctx pc = layer_ctxs(m, l);
    /* MLP half: d_resid holds dL/d(block output) = dL/d(mid) through the residual. */
    memset(m->d_ln, 0, BT * C * sizeof(float));
    if (m->moe[l]) {
      CHECK(ufp4_moe_backward(m->moe[l], &m->mw[l], &m->mg[l], &pc.gate, m->d_resid, m->d_ln, dloss));
    } else {
      memset(m->d_act, 0, BT * F * sizeof(float));
      CHECK(ufp4_linear_backward(&pc.down, m->d_resid, a->act, w[WD], m->d_act, g[WD], BT, F, C, m->lin_scratch));
      memset(m->d_gate, 0, BT * F * sizeof(float));
      memset(m->d_up, 0, BT * F * sizeof(float));
      CHECK(ufp4_swiglu_backward(m->d_gate, m->d_up, m->d_act, a->gate, a->up, (int)BT, F));
      CHECK(ufp4_linear_backward(&pc.gate, m->d_gate, a->ln2, w[WG], m->d_ln, g[WG], BT, C, F, m->lin_scratch));
      CHECK(ufp4_linear_backward(&pc.up, m->d_up, a->ln2, w[WU], m->d_ln, g[WU], BT, C, F, m->lin_scratch));
    }
    CHECK(ufp4_rmsnorm_backward(m->d_resid, g[LN2], m->d_ln, a->mid, w[LN2], a->rstd2, (int)BT, C));
    /* Attention half: d_resid now holds dL/d(mid). */
    memset(m->d_ao, 0, BT * QD * sizeof(float));
    CHECK(ufp4_linear_backward(&pc.o, m->d_resid, a->ao, w[WO], m->d_ao, g[WO], BT, QD, C, m->lin_scratch));
    memset(m->d_q, 0, BT * QD * sizeof(float));
    memset(m->d_k, 0, BT * KV * sizeof(float));
    memset(m->d_v, 0, BT * KV * sizeof(float));
    double ta = tick(m);
    CHECK(ufp4_attention_backward(m->d_q, m->d_k, m->d_v, m->att_scratch, m->d_ao, a->att, a->q, a->k, a->v, B, T, H,
                                  KVH, D));
    if (m->timing) m->times.attention += ufp4_now_s() - ta;
    memset(m->d_qpre, 0, BT * QD * sizeof(float));
    memset(m->d_kpre, 0, BT * KV * sizeof(float));
    CHECK(ufp4_rope_backward(m->d_qpre, m->d_q, m->rope_cos, m->rope_sin, B, T, H, D));
    CHECK(ufp4_rope_backward(m->d_kpre, m->d_k, m->rope_cos, m->rope_sin, B, T, KVH, D));
    memset(m->d_ln, 0, BT * C * sizeof(float));
    CHECK(ufp4_linear_backward(&pc.q, m->d_qpre, a->ln1, w[WQ], m->d_ln, g[WQ], BT, C, QD, m->lin_scratch));
    CHECK(ufp4_linear_backward(&pc.k, m->d_kpre, a->ln1, w[WK], m->d_ln, g[WK], BT, C, KV, m->lin_scratch));
    CHECK(ufp4_linear_backward(&pc.v, m->d_v, a->ln1, w[WV], m->d_ln, g[WV], BT, C, KV, m->lin_scratch));
    CHECK(ufp4_rmsnorm_backward(m->d_resid, g[LN1], m->d_ln, x, w[LN1], a->rstd1, (int)BT, C));
  }
  CHECK(ufp4_embedding_backward(m->g_embed, m->d_resid, m->tokens, (int)BT, V, C));
  m->have_targets = 0;
  return 0;
}
