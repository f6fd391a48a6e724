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
#include "model/carve.h"

enum { LN1 = 0, WQ, WK, WV, WO, LN2, WG, WU, WD, PER_LAYER };
/* Pointer arrays per MoE layer in moe_ptrs: experts' gate, up, down, for weights and gradients. */
enum { MOE_PTR_ARRAYS = 6 };

typedef struct {
  float *ln1, *rstd1, *q, *k, *v, *att, *ao, *mid, *ln2, *rstd2, *gate, *up, *act;
} layer_acts;

struct ufp4_model {
  ufp4_model_config c;
  int B;
  size_t n_params;
  float *params, *grads;
  float *w_embed, *w_norm, *w_head, *g_embed, *g_norm, *g_head;
  /* per layer tensor pointers: wl[l * PER_LAYER + k]; WG, WU, WD NULL in MoE layers */
  float **wl, **gl;
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
  /* Recipes (ufp4_model_set_recipes): the distinct ones with their RHT signs, and per projection
   * (ufp4_model_projections' order) the index of its own; a block's projections start at
   * layer_proj[l]. moe_rec / moe_signs: per MoE layer, EXPERT_SLOTS(E) pointers into them. */
  ufp4_recipe *rtab;
  float (*rsigns)[UFP4_RHT_MAX];
  int n_rtab, n_proj;
  int *proj_rec, *layer_proj;
  const ufp4_recipe **moe_rec;
  const float **moe_signs;
  float *head_scratch; /* a quantized lm_head's linear-layer scratch; NULL when it runs fp32 */
  uint64_t recipe_seed, step;
  int rank;
  int all_fp32;
  const ufp4_linear_probe *probe;
  ufp4_resid_grad_fn dx_hook; /* ufp4_model_set_resid_grad_hook */
  void *dx_ud;
  size_t acts_floats, scratch_floats;
  int timing;
  ufp4_model_times times;
  ufp4_linear_times lin_times;
};

/* Phase clock: reads the time only when timing is on. */
static double tick(const ufp4_model *m) { return m->timing ? ufp4_now_s() : 0.0; }

/* Sizes of the allocated batch: BT tokens, model width C, heads' widths QD (queries) and KV. */
typedef struct {
  size_t B, T, BT, C, V, F, H, D, QD, KV;
} model_dims;

static model_dims dims_of(const ufp4_model *m) {
  const ufp4_model_config *c = &m->c;
  model_dims d = {.B = (size_t)m->B, .T = (size_t)c->seq_len, .C = (size_t)c->d_model,
                  .V = (size_t)c->vocab, .F = (size_t)c->ffn_dim, .H = (size_t)c->n_heads};
  d.BT = d.B * d.T;
  d.D = d.C / d.H;
  d.QD = d.H * d.D;
  d.KV = d.D * (size_t)c->n_kv_heads;
  return d;
}

static int out_of_memory(const ufp4_model *m) {
  return ufp4_fail(UFP4_ENOMEM, "model: out of memory for %zu parameters at batch %d x %d",
                   ufp4_model_param_count(&m->c), m->B, m->c.seq_len);
}

/* Parameters, gradients and the per-layer pointer tables. */
static int alloc_tables(ufp4_model *m) {
  const size_t L = (size_t)m->c.n_layers;
  const size_t E = m->c.moe_experts > 0 ? (size_t)m->c.moe_experts : 0;
  m->n_params = ufp4_model_param_count(&m->c);
  m->params = malloc(m->n_params * sizeof(float));
  m->grads = calloc(m->n_params, sizeof(float));
  m->wl = malloc(sizeof(float *) * L * PER_LAYER);
  m->gl = malloc(sizeof(float *) * L * PER_LAYER);
  m->la = calloc(L, sizeof *m->la);
  m->moe = calloc(L, sizeof *m->moe);
  m->mw = calloc(L, sizeof *m->mw);
  m->mg = calloc(L, sizeof *m->mg);
  m->moe_ptrs = calloc(L * MOE_PTR_ARRAYS * E + 1, sizeof *m->moe_ptrs);
  if (!m->params || !m->grads || !m->wl || !m->gl || !m->la || !m->moe || !m->mw || !m->mg ||
      !m->moe_ptrs)
    return out_of_memory(m);
  return 0;
}

/* Walks the tensor table (config.c) in its order, handing each tensor's parameters and gradients
 * to the next pointer pair. */
typedef struct {
  ufp4_model *m;
  int idx;
} tensor_walk;

static void next_tensor(tensor_walk *tw, float **w, float **g) {
  ufp4_tensor_info t;
  ufp4_model_tensor(&tw->m->c, tw->idx++, &t);
  *w = tw->m->params + t.offset;
  *g = tw->m->grads + t.offset;
}

/* An MoE layer's tensors: router, each expert's gate, up, down, then the shared expert's. */
static void bind_moe_layer(tensor_walk *tw, int l) {
  ufp4_model *m = tw->m;
  const size_t E = (size_t)m->c.moe_experts;
  ufp4_moe_tensors *mw = &m->mw[l], *mg = &m->mg[l];
  float **pp = m->moe_ptrs + (size_t)l * MOE_PTR_ARRAYS * E;
  mw->gate = pp;
  mw->up = pp + E;
  mw->down = pp + 2 * E;
  mg->gate = pp + 3 * E;
  mg->up = pp + 4 * E;
  mg->down = pp + 5 * E;
  next_tensor(tw, &mw->router, &mg->router);
  for (size_t e = 0; e < E; e++) {
    next_tensor(tw, &mw->gate[e], &mg->gate[e]);
    next_tensor(tw, &mw->up[e], &mg->up[e]);
    next_tensor(tw, &mw->down[e], &mg->down[e]);
  }
  if (m->c.moe_shared_ffn <= 0) return;
  next_tensor(tw, &mw->shared_gate, &mg->shared_gate);
  next_tensor(tw, &mw->shared_up, &mg->shared_up);
  next_tensor(tw, &mw->shared_down, &mg->shared_down);
  next_tensor(tw, &mw->shared_router, &mg->shared_router);
}

/* embed, per layer the six attention-side tensors then the MLP's (dense or MoE), norm, head. */
static void bind_tensors(ufp4_model *m) {
  tensor_walk tw = {m, 0};
  next_tensor(&tw, &m->w_embed, &m->g_embed);
  for (int l = 0; l < m->c.n_layers; l++) {
    float **w = m->wl + (size_t)l * PER_LAYER, **g = m->gl + (size_t)l * PER_LAYER;
    for (int k = LN1; k <= LN2; k++) next_tensor(&tw, &w[k], &g[k]);
    if (ufp4_model_layer_is_moe(&m->c, l)) {
      w[WG] = w[WU] = w[WD] = g[WG] = g[WU] = g[WD] = NULL;
      bind_moe_layer(&tw, l);
    } else {
      for (int k = WG; k <= WD; k++) next_tensor(&tw, &w[k], &g[k]);
    }
  }
  next_tensor(&tw, &m->w_norm, &m->g_norm);
  if (!m->c.tie_embeddings) {
    next_tensor(&tw, &m->w_head, &m->g_head);
  } else {
    m->w_head = m->w_embed;
    m->g_head = m->g_embed;
  }
}

static int create_moe_blocks(ufp4_model *m) {
  const ufp4_model_config *c = &m->c;
  const ufp4_moe_config mc = {.n_experts = c->moe_experts,
                              .top_k = c->moe_top_k,
                              .expert_ffn = c->moe_ffn,
                              .shared_ffn = c->moe_shared_ffn,
                              .capacity_factor = c->moe_capacity,
                              .aux_coef = c->moe_aux_coef,
                              .z_coef = c->moe_z_coef};
  const size_t max_tokens = (size_t)m->B * (size_t)c->seq_len;
  for (int l = 0; l < c->n_layers; l++) {
    if (!ufp4_model_layer_is_moe(c, l)) continue;
    int rc = ufp4_moe_create(&m->moe[l], &mc, c->d_model, max_tokens);
    if (rc) return rc;
  }
  return 0;
}

/* The activation block's layout: the residual stream, each layer's activations (an MoE layer keeps
 * no dense gate/up/act: its block holds its own), then the head's. */
static void carve_activations(ufp4_model *m, carver *cv) {
  const model_dims d = dims_of(m);
  const size_t BT = d.BT;
  m->resid = carve(cv, (size_t)m->c.n_layers + 1, BT * d.C);
  for (int l = 0; l < m->c.n_layers; l++) {
    layer_acts *a = &m->la[l];
    a->ln1 = carve(cv, BT, d.C);
    a->rstd1 = carve(cv, BT, 1);
    a->q = carve(cv, BT, d.QD);
    a->k = carve(cv, BT, d.KV);
    a->v = carve(cv, BT, d.KV);
    a->att = carve(cv, d.B * d.H, d.T * d.T);
    a->ao = carve(cv, BT, d.QD);
    a->mid = carve(cv, BT, d.C);
    a->ln2 = carve(cv, BT, d.C);
    a->rstd2 = carve(cv, BT, 1);
    if (ufp4_model_layer_is_moe(&m->c, l)) continue;
    a->gate = carve(cv, BT, d.F);
    a->up = carve(cv, BT, d.F);
    a->act = carve(cv, BT, d.F);
  }
  m->lnf = carve(cv, BT, d.C);
  m->rstdf = carve(cv, BT, 1);
  m->logits = carve(cv, BT, d.V);
  m->losses = carve(cv, BT, 1);
  m->lse = carve(cv, BT, 1);
}

/* Floats of linear-layer scratch for the largest projection of a block, either direction. */
static size_t linear_scratch(const model_dims *d) {
  const size_t shapes[][2] = {{d->C, d->QD}, {d->C, d->KV}, {d->QD, d->C}, {d->C, d->F}};
  size_t most = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    size_t there = ufp4_linear_scratch_floats(d->BT, shapes[s][0], shapes[s][1]);
    size_t back = ufp4_linear_scratch_floats(d->BT, shapes[s][1], shapes[s][0]);
    if (there > most) most = there;
    if (back > most) most = back;
  }
  return most;
}

/* The scratch block's layout: the layers' scratch, then the activation gradients. */
static void carve_scratch(ufp4_model *m, carver *cv) {
  const model_dims d = dims_of(m);
  const size_t BT = d.BT;
  m->lin_scratch = carve(cv, linear_scratch(&d), 1);
  m->att_scratch = carve(cv, ufp4_attention_scratch_floats(m->B, m->c.seq_len, m->c.n_kv_heads), 1);
  m->tmp_c = carve(cv, BT, d.C);
  m->tmp_q = carve(cv, BT, d.QD);
  m->tmp_k = carve(cv, BT, d.KV);
  m->d_resid = carve(cv, BT, d.C);
  m->d_ln = carve(cv, BT, d.C);
  m->d_q = carve(cv, BT, d.QD);
  m->d_k = carve(cv, BT, d.KV);
  m->d_v = carve(cv, BT, d.KV);
  m->d_ao = carve(cv, BT, d.QD);
  m->d_gate = carve(cv, BT, d.F);
  m->d_up = carve(cv, BT, d.F);
  m->d_act = carve(cv, BT, d.F);
  m->d_qpre = carve(cv, BT, d.QD);
  m->d_kpre = carve(cv, BT, d.KV);
}

/* Sizes a block with its layout, allocates it and carves it: *floats gets its size. */
static int alloc_carved(ufp4_model *m, void (*layout)(ufp4_model *, carver *), float **block,
                        size_t *floats) {
  carver count = carver_counting(sizeof(float));
  layout(m, &count);
  if (count.overflow || !(*block = malloc(count.count * sizeof(float)))) return out_of_memory(m);
  *floats = count.count;
  carver on = carver_on(*block, sizeof(float));
  layout(m, &on);
  return 0;
}

/* RoPE tables and the token buffers. */
static int alloc_inputs(ufp4_model *m) {
  const model_dims d = dims_of(m);
  m->rope_cos = malloc(d.T * (d.D / 2) * sizeof(float));
  m->rope_sin = malloc(d.T * (d.D / 2) * sizeof(float));
  m->tokens = malloc(d.BT * sizeof(int32_t));
  m->targets = malloc(d.BT * sizeof(int32_t));
  if (!m->rope_cos || !m->rope_sin || !m->tokens || !m->targets) return out_of_memory(m);
  return ufp4_rope_init(m->rope_cos, m->rope_sin, (int)d.T, (int)d.D, m->c.rope_theta);
}

static void free_recipes(ufp4_model *m) {
  free(m->rtab);
  free(m->rsigns);
  free(m->proj_rec);
  free(m->layer_proj);
  free(m->moe_rec);
  free(m->moe_signs);
  free(m->head_scratch);
}

/* Everything but the configuration, in allocation order. */
static int build(ufp4_model *m) {
  int rc;
  if ((rc = alloc_tables(m))) return rc;
  bind_tensors(m);
  if ((rc = create_moe_blocks(m))) return rc;
  if ((rc = alloc_carved(m, carve_activations, &m->acts_block, &m->acts_floats))) return rc;
  if ((rc = alloc_carved(m, carve_scratch, &m->scratch_block, &m->scratch_floats))) return rc;
  if ((rc = alloc_inputs(m))) return rc;
  /* Until ufp4_model_set_recipe: every projection in plain fp32. */
  ufp4_recipe fp32;
  if ((rc = ufp4_recipe_parse("fp32", &fp32))) return rc;
  return ufp4_model_set_recipe(m, &fp32, 0);
}

int ufp4_model_create(ufp4_model **out, const ufp4_model_config *c, int B) {
  *out = NULL;
  int rc = ufp4_model_config_check(c);
  if (rc) return rc;
  if (B < 1) return ufp4_fail(UFP4_EINVAL, "model: batch size %d must be positive", B);
  ufp4_model *m = calloc(1, sizeof *m);
  if (!m) return ufp4_fail(UFP4_ENOMEM, "model: out of memory");
  m->c = *c;
  m->B = B;
  if ((rc = build(m))) {
    ufp4_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
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
  free_recipes(m);
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

/* Top half of the weight-initialization streams ("INIT" in ASCII); the tensor index is the bottom. */
#define INIT_STREAM_TAG UINT64_C(0x494e4954)

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
    const uint64_t stream = INIT_STREAM_TAG << 32 | (uint64_t)i;
#pragma omp parallel for schedule(static) if (t.count > 65536)
    for (size_t j = 0; j < t.count; j++) w[j] = m->c.init_std * ufp4_philox_normal(seed, stream, j);
  }
}

int ufp4_model_set_recipe(ufp4_model *m, const ufp4_recipe *r, uint64_t seed) {
  return ufp4_model_set_recipes(m, r, NULL, seed);
}

/* Expert e's GEMM k (0 gate, 1 up, 2 down) among its block's projections: after the attention four,
 * the experts' three each, the shared expert (e = E) last. */
#define EXPERT_SLOTS(E) (3 * ((size_t)(E) + 1))
#define EXPERT_PROJ(e, k) (UFP4_PROJ_GATE + 3 * (e) + (k))

/* The distinct recipes of per (by canonical text), each with its signs, and the index of each
 * projection's; into a fresh model state `t` that replaces m's only when all of it was built. */
static int build_recipes(ufp4_model *t, const ufp4_recipe *per, uint64_t seed) {
  const int n = t->n_proj;
  char(*text)[512] = malloc(sizeof *text * (size_t)n);
  int *first = malloc(sizeof *first * (size_t)n); /* a projection of each distinct recipe */
  t->rtab = malloc(sizeof *t->rtab * (size_t)n);
  t->rsigns = malloc(sizeof *t->rsigns * (size_t)n);
  t->proj_rec = malloc(sizeof *t->proj_rec * (size_t)n);
  int rc = (!text || !first || !t->rtab || !t->rsigns || !t->proj_rec)
               ? ufp4_fail(UFP4_ENOMEM, "model: out of memory for %d projection recipes", n) : 0;
  for (int i = 0; !rc && i < n; i++) {
    ufp4_recipe_format(&per[i], text[i], sizeof text[i]);
    int d = 0;
    while (d < t->n_rtab && strcmp(text[first[d]], text[i])) d++;
    if (d < t->n_rtab) {
      t->proj_rec[i] = d;
      continue;
    }
    const int k = t->n_rtab++;
    first[k] = i;
    t->rtab[k] = per[i];
    t->proj_rec[i] = k;
    if (per[i].rht_signs == UFP4_SIGNS_NVIDIA)
      memcpy(t->rsigns[k], ufp4_rht_signs_nvidia16, sizeof ufp4_rht_signs_nvidia16);
    else
      ufp4_rht_signs_random(t->rsigns[k], per[i].rht_n, seed);
  }
  free(text);
  free(first);
  return rc;
}

/* The expert pointer arrays of the MoE layers, and the head's scratch when it is quantized. */
static int bind_recipes(ufp4_model *m, ufp4_model *t) {
  const ufp4_model_config *c = &m->c;
  const size_t E = c->moe_experts > 0 ? (size_t)c->moe_experts : 0;
  t->layer_proj = malloc(sizeof *t->layer_proj * (size_t)c->n_layers);
  t->moe_rec = calloc((size_t)c->n_layers * EXPERT_SLOTS(E), sizeof *t->moe_rec);
  t->moe_signs = calloc((size_t)c->n_layers * EXPERT_SLOTS(E), sizeof *t->moe_signs);
  if (!t->layer_proj || !t->moe_rec || !t->moe_signs)
    return ufp4_fail(UFP4_ENOMEM, "model: out of memory for the projection recipes");
  int at = 0;
  for (int l = 0; l < c->n_layers; l++) {
    t->layer_proj[l] = at;
    if (!m->moe[l]) {
      at += UFP4_N_PROJ;
      continue;
    }
    const size_t slots = 3 * (E + (c->moe_shared_ffn > 0 ? 1 : 0));
    for (size_t s = 0; s < slots; s++) {
      const int k = t->proj_rec[at + UFP4_PROJ_GATE + (int)s];
      t->moe_rec[(size_t)l * EXPERT_SLOTS(E) + s] = &t->rtab[k];
      t->moe_signs[(size_t)l * EXPERT_SLOTS(E) + s] = t->rsigns[k];
    }
    at += UFP4_PROJ_GATE + (int)slots;
  }
  const ufp4_recipe *head = &t->rtab[t->proj_rec[t->n_proj - 1]];
  int rounded = 0; /* an fp32 head keeps the plain SGEMMs, and their bits */
  for (int g = 0; g < UFP4_N_GEMMS; g++)
    rounded |= ufp4_recipe_gemm_precision(head, (ufp4_gemm_kind)g) != UFP4_PREC_FP32;
  if (rounded) {
    const size_t BT = (size_t)m->B * (size_t)c->seq_len;
    t->head_scratch = malloc(sizeof(float) * ufp4_linear_scratch_floats(BT, (size_t)c->d_model, (size_t)c->vocab));
    if (!t->head_scratch) return ufp4_fail(UFP4_ENOMEM, "model: out of memory for a quantized lm_head");
  }
  return 0;
}

int ufp4_model_set_recipes(ufp4_model *m, const ufp4_recipe *base, const char *overrides, uint64_t seed) {
  ufp4_model t = {0};
  t.n_proj = ufp4_model_projection_count(&m->c);
  ufp4_recipe *per = malloc(sizeof *per * (size_t)t.n_proj);
  int rc = per ? ufp4_model_resolve_recipes(&m->c, base, overrides, per)
               : ufp4_fail(UFP4_ENOMEM, "model: out of memory for the projection recipes");
  if (!rc) rc = build_recipes(&t, per, seed);
  if (!rc) rc = bind_recipes(m, &t);
  free(per);
  if (rc) {
    free_recipes(&t);
    return rc;
  }
  free_recipes(m);
  m->rtab = t.rtab;
  m->rsigns = t.rsigns;
  m->n_rtab = t.n_rtab;
  m->n_proj = t.n_proj;
  m->proj_rec = t.proj_rec;
  m->layer_proj = t.layer_proj;
  m->moe_rec = t.moe_rec;
  m->moe_signs = t.moe_signs;
  m->head_scratch = t.head_scratch;
  m->recipe_seed = seed;
  for (int l = 0; l < m->c.n_layers; l++)
    if (m->moe[l]) {
      const size_t at = (size_t)l * EXPERT_SLOTS(m->c.moe_experts);
      ufp4_moe_set_expert_recipes(m->moe[l], m->moe_rec + at, m->moe_signs + at);
    }
  return 0;
}

const ufp4_recipe *ufp4_model_projection_recipe(const ufp4_model *m, int i) {
  return &m->rtab[m->proj_rec[i]];
}

void ufp4_model_set_high_precision(ufp4_model *m, int on) { m->all_fp32 = on; }
void ufp4_model_set_probe(ufp4_model *m, const ufp4_linear_probe *probe) { m->probe = probe; }
void ufp4_model_set_resid_grad_hook(ufp4_model *m, ufp4_resid_grad_fn fn, void *ud) {
  m->dx_hook = fn;
  m->dx_ud = ud;
}

void ufp4_model_set_step(ufp4_model *m, uint64_t step, int rank) {
  m->step = step;
  m->rank = rank;
}

int ufp4_model_check_streams(const ufp4_model_config *c, uint64_t steps, int micro_steps,
                             int world) {
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
                               .proj = UFP4_PROJ_HEAD,
                               .operand = UFP4_N_OPERANDS - 1};
  return ufp4_stream_check(&last);
}

/* The context of projection `slot` of the model (ufp4_model_projections' order), running as
 * block l's projection `proj` for its stochastic-rounding stream (an MoE block derives its experts'
 * from the gate projection's, and its recipes from ufp4_moe_set_expert_recipes). */
static ufp4_linear_ctx slot_ctx(ufp4_model *m, int slot, int l, int proj) {
  const int k = m->proj_rec[slot];
  ufp4_linear_ctx ctx = {.recipe = &m->rtab[k],
                         .high_precision = m->all_fp32,
                         .stream = {.seed = m->recipe_seed,
                                    .step = m->step,
                                    .rank = (uint32_t)m->rank,
                                    .layer = (uint32_t)l,
                                    .proj = (uint32_t)proj},
                         .rht_signs = m->rsigns[k],
                         .probe = m->probe,
                         .layer = l,
                         .proj = proj,
                         .times = m->timing ? &m->lin_times : NULL};
  return ctx;
}

static ufp4_linear_ctx proj_ctx(ufp4_model *m, int l, ufp4_proj proj) {
  return slot_ctx(m, m->layer_proj[l] + (int)proj, l, (int)proj);
}

/* lm_head: stream layer 0 with the projection id no block uses; the probe sees it as layer -1. */
static ufp4_linear_ctx head_ctx(ufp4_model *m) {
  ufp4_linear_ctx ctx = slot_ctx(m, m->n_proj - 1, 0, UFP4_PROJ_HEAD);
  ctx.layer = -1;
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

static int forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   double *loss);
static int backward(ufp4_model *m, float dloss);

int ufp4_model_forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                       double *loss) {
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

static int forward(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   double *loss) {
  const ufp4_model_config *c = &m->c;
  if (B < 1 || B > m->B || T < 1 || T > c->seq_len)
    return ufp4_fail(UFP4_EINVAL, "model: batch %d x %d exceeds the allocated %d x %d", B, T, m->B,
                     c->seq_len);
  const int C = c->d_model, H = c->n_heads, KVH = c->n_kv_heads, D = C / H;
  const int F = c->ffn_dim, V = c->vocab;
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
    {
      const ufp4_linear_ctx qkv[3] = {pc.q, pc.k, pc.v};
      const float *wq[3] = {w[WQ], w[WK], w[WV]};
      float *yq[3] = {m->tmp_q, m->tmp_k, a->v};
      const size_t oq[3] = {(size_t)QD, (size_t)KV, (size_t)KV};
      CHECK(ufp4_linear_forward_shared(qkv, 3, a->ln1, wq, yq, BT, C, oq, m->lin_scratch));
    }
    CHECK(ufp4_rope_forward(a->q, m->tmp_q, m->rope_cos, m->rope_sin, B, T, H, D));
    CHECK(ufp4_rope_forward(a->k, m->tmp_k, m->rope_cos, m->rope_sin, B, T, KVH, D));
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
    {
      const ufp4_linear_ctx gu[2] = {pc.gate, pc.up};
      const float *wg[2] = {w[WG], w[WU]};
      float *yg[2] = {a->gate, a->up};
      const size_t og[2] = {(size_t)F, (size_t)F};
      CHECK(ufp4_linear_forward_shared(gu, 2, a->ln2, wg, yg, BT, C, og, m->lin_scratch));
    }
    CHECK(ufp4_swiglu_forward(a->act, a->gate, a->up, (int)BT, F));
    CHECK(ufp4_linear_forward(&pc.down, a->act, w[WD], m->tmp_c, BT, F, C, m->lin_scratch));
    CHECK(ufp4_residual_forward(y, a->mid, m->tmp_c, BT * C));
  }
  double th = tick(m);
  const float *top = m->resid + (size_t)c->n_layers * BT * C;
  CHECK(ufp4_rmsnorm_forward(m->lnf, m->rstdf, top, m->w_norm, (int)BT, C, c->rms_eps));
  if (!m->head_scratch || m->all_fp32) {
    ufp4_sgemm_abt(m->lnf, m->w_head, m->logits, BT, (size_t)V, (size_t)C, 0.0f);
  } else {
    const ufp4_linear_ctx hc = head_ctx(m);
    CHECK(ufp4_linear_forward(&hc, m->lnf, m->w_head, m->logits, BT, (size_t)C, (size_t)V, m->head_scratch));
  }
  m->have_targets = targets != NULL;
  if (targets) {
    memcpy(m->targets, targets, BT * sizeof(int32_t));
    double mean = 0;
    CHECK(ufp4_cross_entropy_forward(m->losses, m->lse, &mean, NULL, m->logits, targets, (int)BT,
                                     V));
    if (loss) *loss = mean;
  }
  if (m->timing) m->times.head += ufp4_now_s() - th;
  return 0;
}

static int backward(ufp4_model *m, float dloss) {
  const ufp4_model_config *c = &m->c;
  if (!m->have_targets) return ufp4_fail(UFP4_EINVAL,
                                         "model: backward needs a forward with targets");
  const int B = m->last_B, T = m->last_T;
  const int C = c->d_model, H = c->n_heads, KVH = c->n_kv_heads, D = C / H;
  const int F = c->ffn_dim, V = c->vocab;
  const int QD = H * D, KV = KVH * D;
  const size_t BT = (size_t)B * (size_t)T;
  double th = tick(m);
  /* dlogits overwrite the logits. */
  CHECK(ufp4_cross_entropy_backward(m->logits, m->logits, m->lse, m->targets, dloss, (int)BT, V));
  if (!m->head_scratch || m->all_fp32) {
    ufp4_sgemm_ab(m->logits, m->w_head, m->d_ln, BT, (size_t)C, (size_t)V, 0.0f);
    ufp4_sgemm_atb(m->logits, m->lnf, m->g_head, (size_t)V, (size_t)C, BT, 1.0f);
  } else {
    const ufp4_linear_ctx hc = head_ctx(m);
    memset(m->d_ln, 0, BT * C * sizeof(float));
    CHECK(ufp4_linear_backward(&hc, m->logits, m->lnf, m->w_head, m->d_ln, m->g_head, BT, (size_t)C, (size_t)V,
                               m->head_scratch));
  }
  memset(m->d_resid, 0, BT * C * sizeof(float));
  const float *top = m->resid + (size_t)c->n_layers * BT * C;
  CHECK(ufp4_rmsnorm_backward(m->d_resid, m->g_norm, m->d_ln, top, m->w_norm, m->rstdf,
                              (int)BT, C));
  if (m->timing) m->times.head += ufp4_now_s() - th;
  if (m->dx_hook) m->dx_hook(m->dx_ud, c->n_layers, m->d_resid, BT * C);
  for (int l = c->n_layers - 1; l >= 0; l--) {
    layer_acts *a = &m->la[l];
    float **w = m->wl + (size_t)l * PER_LAYER, **g = m->gl + (size_t)l * PER_LAYER;
    const float *x = m->resid + (size_t)l * BT * C;
    layer_ctx pc = layer_ctxs(m, l);
    /* MLP half: d_resid holds dL/d(block output) = dL/d(mid) through the residual. */
    memset(m->d_ln, 0, BT * C * sizeof(float));
    if (m->moe[l]) {
      CHECK(ufp4_moe_backward(m->moe[l], &m->mw[l], &m->mg[l], &pc.gate, m->d_resid, m->d_ln,
                              dloss));
    } else {
      memset(m->d_act, 0, BT * F * sizeof(float));
      CHECK(ufp4_linear_backward(&pc.down, m->d_resid, a->act, w[WD], m->d_act, g[WD], BT, F, C,
                                 m->lin_scratch));
      memset(m->d_gate, 0, BT * F * sizeof(float));
      memset(m->d_up, 0, BT * F * sizeof(float));
      CHECK(ufp4_swiglu_backward(m->d_gate, m->d_up, m->d_act, a->gate, a->up, (int)BT, F));
      const ufp4_linear_ctx gu[2] = {pc.gate, pc.up};
      const float *dyg[2] = {m->d_gate, m->d_up}, *wg[2] = {w[WG], w[WU]};
      float *dwg[2] = {g[WG], g[WU]};
      const size_t og[2] = {(size_t)F, (size_t)F};
      CHECK(ufp4_linear_backward_shared(gu, 2, dyg, a->ln2, wg, m->d_ln, dwg, BT, C, og, m->lin_scratch));
    }
    CHECK(ufp4_rmsnorm_backward(m->d_resid, g[LN2], m->d_ln, a->mid, w[LN2], a->rstd2, (int)BT, C));
    /* Attention half: d_resid now holds dL/d(mid). */
    memset(m->d_ao, 0, BT * QD * sizeof(float));
    CHECK(ufp4_linear_backward(&pc.o, m->d_resid, a->ao, w[WO], m->d_ao, g[WO], BT, QD, C,
                               m->lin_scratch));
    memset(m->d_q, 0, BT * QD * sizeof(float));
    memset(m->d_k, 0, BT * KV * sizeof(float));
    memset(m->d_v, 0, BT * KV * sizeof(float));
    double ta = tick(m);
    CHECK(ufp4_attention_backward(m->d_q, m->d_k, m->d_v, m->att_scratch, m->d_ao, a->att, a->q,
                                  a->k, a->v, B, T, H, KVH, D));
    if (m->timing) m->times.attention += ufp4_now_s() - ta;
    memset(m->d_qpre, 0, BT * QD * sizeof(float));
    memset(m->d_kpre, 0, BT * KV * sizeof(float));
    CHECK(ufp4_rope_backward(m->d_qpre, m->d_q, m->rope_cos, m->rope_sin, B, T, H, D));
    CHECK(ufp4_rope_backward(m->d_kpre, m->d_k, m->rope_cos, m->rope_sin, B, T, KVH, D));
    memset(m->d_ln, 0, BT * C * sizeof(float));
    {
      const ufp4_linear_ctx qkv[3] = {pc.q, pc.k, pc.v};
      const float *dyq[3] = {m->d_qpre, m->d_kpre, m->d_v}, *wq[3] = {w[WQ], w[WK], w[WV]};
      float *dwq[3] = {g[WQ], g[WK], g[WV]};
      const size_t oq[3] = {(size_t)QD, (size_t)KV, (size_t)KV};
      CHECK(ufp4_linear_backward_shared(qkv, 3, dyq, a->ln1, wq, m->d_ln, dwq, BT, C, oq, m->lin_scratch));
    }
    CHECK(ufp4_rmsnorm_backward(m->d_resid, g[LN1], m->d_ln, x, w[LN1], a->rstd1, (int)BT, C));
    if (m->dx_hook) m->dx_hook(m->dx_ud, l, m->d_resid, BT * C);
  }
  CHECK(ufp4_embedding_backward(m->g_embed, m->d_resid, m->tokens, (int)BT, V, C));
  m->have_targets = 0;
  return 0;
}
