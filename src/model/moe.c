/* MoE block: buffers, dispatch into padded expert groups, the experts' SwiGLU MLPs through the
 * recipe, the shared expert, the combine, and backward. Routing lives in moe_route.c; the
 * semantics are documented in include/ufp4/moe.h. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/carve.h"
#include "model/moe_internal.h"
#include "ufp4/error.h"
#include "ufp4/layers.h"
#include "ufp4/linear.h"
#include "ufp4/recipe.h"

#define CHECK(call)      \
  do {                   \
    int rc_ = (call);    \
    if (rc_) return rc_; \
  } while (0)

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

static int check_config(const ufp4_moe_config *c, int C, size_t max_tokens) {
  if (!c) return ufp4_fail(UFP4_EINVAL, "moe: NULL config");
  if (c->n_experts < 1 || c->n_experts > UFP4_MOE_MAX_EXPERTS)
    return ufp4_fail(UFP4_EINVAL, "moe: n_experts %d is outside 1..%d", c->n_experts, UFP4_MOE_MAX_EXPERTS);
  if (c->top_k < 1 || c->top_k > 2 || c->top_k > c->n_experts)
    return ufp4_fail(UFP4_EINVAL, "moe: top_k %d must be 1 or 2 and at most n_experts %d", c->top_k, c->n_experts);
  if (c->expert_ffn < 1 || c->shared_ffn < 0 || C < 1 || max_tokens < 1)
    return ufp4_fail(UFP4_EINVAL, "moe: bad sizes (expert_ffn %d, shared_ffn %d, C %d, max_tokens %zu)",
                     c->expert_ffn, c->shared_ffn, C, max_tokens);
  /* Written as negations so that NaN fails too. */
  if (!(c->capacity_factor >= 0.0f && c->capacity_factor <= 1e6f))
    return ufp4_fail(UFP4_EINVAL, "moe: capacity_factor %g must be 0 (dropless) or a positive finite number",
                     (double)c->capacity_factor);
  if (!(c->aux_coef >= 0.0f && c->aux_coef <= 1e30f) || !(c->z_coef >= 0.0f && c->z_coef <= 1e30f))
    return ufp4_fail(UFP4_EINVAL, "moe: aux_coef %g and z_coef %g must be finite and >= 0", (double)c->aux_coef,
                     (double)c->z_coef);
  return 0;
}

/* Sizes of a block: tokens M, experts E, top-k k, width C, expert and shared widths Fe and Fs,
 * grouped rows G (all experts), rows MG of one padded group, linear scratch and hidden buffers. */
typedef struct {
  size_t M, E, k, C, Fe, Fs, G, MG, lin, hid;
} moe_dims;

static moe_dims dims_of(const ufp4_moe_config *cfg, int C, size_t max_tokens, size_t A) {
  moe_dims d = {.M = max_tokens, .E = (size_t)cfg->n_experts, .k = (size_t)cfg->top_k,
                .C = (size_t)C, .Fe = (size_t)cfg->expert_ffn, .Fs = (size_t)cfg->shared_ffn};
  /* One expert sees each token at most once; padding adds < A rows per group. */
  d.G = d.k * d.M + A * (d.E + 1);
  d.MG = moe_pad_rows(d.M, A);
  const size_t lin_e = max2(ufp4_linear_scratch_floats(d.MG, d.C, d.Fe),
                            ufp4_linear_scratch_floats(d.MG, d.Fe, d.C));
  const size_t lin_s = d.Fs ? max2(ufp4_linear_scratch_floats(d.MG, d.C, d.Fs),
                                   ufp4_linear_scratch_floats(d.MG, d.Fs, d.C))
                            : 0;
  d.lin = max2(lin_e, lin_s);
  d.hid = max2(d.MG * d.Fe, d.MG * d.Fs);
  return d;
}

/* One carver per element type, each over its own block. */
typedef struct {
  carver f, d, z, i, p;
} moe_carvers;

/* The layout of the five blocks (carve.h): sizes and arrays both come from this one list. */
static void carve_blocks(ufp4_moe *s, const moe_dims *d, moe_carvers *cv) {
  const size_t M = d->M, E = d->E, k = d->k, C = d->C, G = d->G, MG = d->MG;
  s->logits = carve(&cv->f, M, E);
  s->prob = carve(&cv->f, M, E);
  s->dz = carve(&cv->f, M, E);
  s->slot_gate = carve(&cv->f, M, k);
  s->row_gate = carve(&cv->f, G, 1);
  s->xg = carve(&cv->f, G, C);
  s->yg = carve(&cv->f, G, C);
  s->dyg = carve(&cv->f, G, C);
  s->dxg = carve(&cv->f, G, C);
  s->hg = carve(&cv->f, G, d->Fe);
  s->ug = carve(&cv->f, G, d->Fe);
  s->ag = carve(&cv->f, G, d->Fe);
  s->d_a = carve(&cv->f, d->hid, 1);
  s->d_h = carve(&cv->f, d->hid, 1);
  s->d_u = carve(&cv->f, d->hid, 1);
  s->sh_h = carve(&cv->f, MG, d->Fs);
  s->sh_u = carve(&cv->f, MG, d->Fs);
  s->sh_a = carve(&cv->f, MG, d->Fs);
  s->sh_y = carve(&cv->f, MG, C);
  s->sh_dy = carve(&cv->f, MG, C);
  s->sh_dx = carve(&cv->f, MG, C);
  s->sh_s = carve(&cv->f, MG, 1);
  s->xs = carve(&cv->f, MG, C);
  s->lin_scratch = carve(&cv->f, d->lin, 1);
  s->lse = carve(&cv->d, M, 1);
  s->entropy = carve(&cv->d, M, 1);
  s->sh_da = carve(&cv->d, M, 1);
  s->dgate = carve(&cv->d, M, k);
  s->load = carve(&cv->d, E, 1);
  s->pmean = carve(&cv->d, E, 1);
  s->count = carve(&cv->z, E, 1);
  s->admitted = carve(&cv->z, E, 1);
  s->group_start = carve(&cv->z, E, 1);
  s->group_rows = carve(&cv->z, E, 1);
  s->row_token = carve(&cv->z, G, 1);
  s->slot_expert = carve(&cv->i, M, k);
  s->slot_row = carve(&cv->p, M, k);
}

/* Counts the blocks' elements, allocates them and carves them. */
static int alloc_blocks(ufp4_moe *s, const moe_dims *d) {
  moe_carvers n = {carver_counting(sizeof(float)), carver_counting(sizeof(double)),
                   carver_counting(sizeof(size_t)), carver_counting(sizeof(int)),
                   carver_counting(sizeof(ptrdiff_t))};
  carve_blocks(s, d, &n);
  if (n.f.overflow || n.d.overflow || n.z.overflow || n.i.overflow || n.p.overflow ||
      n.f.count > SIZE_MAX / sizeof(float) / 2) /* activation_bytes adds the blocks' bytes */
    return ufp4_fail(UFP4_ENOMEM, "moe: buffers for %zu tokens overflow size_t", d->M);
  s->floats = n.f.count;
  s->doubles = n.d.count;
  s->sizes = n.z.count;
  s->ints = n.i.count + n.p.count;
  s->fblock = malloc(n.f.count * sizeof(float));
  s->dblock = malloc(n.d.count * sizeof(double));
  s->zblock = malloc(n.z.count * sizeof(size_t));
  s->iblock = malloc(n.i.count * sizeof(int));
  s->pblock = malloc(n.p.count * sizeof(ptrdiff_t));
  if (!s->fblock || !s->dblock || !s->zblock || !s->iblock || !s->pblock)
    return ufp4_fail(UFP4_ENOMEM, "moe: out of memory for %zu tokens", d->M);
  moe_carvers on = {carver_on(s->fblock, sizeof(float)), carver_on(s->dblock, sizeof(double)),
                    carver_on(s->zblock, sizeof(size_t)), carver_on(s->iblock, sizeof(int)),
                    carver_on(s->pblock, sizeof(ptrdiff_t))};
  carve_blocks(s, d, &on);
  return 0;
}

int ufp4_moe_create(ufp4_moe **out, const ufp4_moe_config *cfg, int C, size_t max_tokens) {
  if (!out) return ufp4_fail(UFP4_EINVAL, "moe: NULL output pointer");
  *out = NULL;
  CHECK(check_config(cfg, C, max_tokens));
  const size_t E = (size_t)cfg->n_experts, k = (size_t)cfg->top_k, A = UFP4_MOE_GROUP_ALIGN;
  if (max_tokens > (SIZE_MAX - 2 * A * (E + 1)) / k)
    return ufp4_fail(UFP4_ENOMEM, "moe: max_tokens %zu is too large", max_tokens);
  const moe_dims d = dims_of(cfg, C, max_tokens, A);
  ufp4_moe *s = calloc(1, sizeof *s);
  if (!s) return ufp4_fail(UFP4_ENOMEM, "moe: out of memory");
  s->cfg = *cfg;
  s->C = C;
  s->max_tokens = d.M;
  s->max_rows = d.G;
  s->max_group = d.MG;
  s->row_align = s->align_cap = A;
  int rc = alloc_blocks(s, &d);
  if (rc) {
    ufp4_moe_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

static void free_blocks(ufp4_moe *s) {
  free(s->fblock);
  free(s->dblock);
  free(s->zblock);
  free(s->iblock);
  free(s->pblock);
}

/* Makes room for groups aligned to A rows (more padding than create planned for): new blocks,
 * carved for A, replace the old ones, which hold nothing a forward still needs (it calls this
 * before it writes anything). On failure the old blocks stay. */
static int grow_to_align(ufp4_moe *s, size_t A) {
  if (A <= s->align_cap) return 0;
  const size_t E = (size_t)s->cfg.n_experts, k = (size_t)s->cfg.top_k;
  if (s->max_tokens > (SIZE_MAX - 2 * A * (E + 1)) / k)
    return ufp4_fail(UFP4_ENOMEM, "moe: %zu tokens in groups of %zu rows overflow size_t", s->max_tokens, A);
  const moe_dims d = dims_of(&s->cfg, s->C, s->max_tokens, A);
  ufp4_moe t = *s;
  t.fblock = NULL, t.dblock = NULL, t.zblock = NULL, t.iblock = NULL, t.pblock = NULL;
  int rc = alloc_blocks(&t, &d);
  if (rc) {
    free_blocks(&t);
    return rc;
  }
  free_blocks(s);
  t.max_rows = d.G;
  t.max_group = d.MG;
  t.align_cap = A;
  *s = t;
  return 0;
}

void ufp4_moe_free(ufp4_moe *s) {
  if (!s) return;
  free_blocks(s);
  free(s);
}

size_t ufp4_moe_activation_bytes(const ufp4_moe *s) {
  if (!s) return 0;
  return s->floats * sizeof(float) + s->doubles * sizeof(double) + s->sizes * sizeof(size_t) +
         s->ints * sizeof(ptrdiff_t);
}

/* An expert's three GEMMs, in the order of the dense gate, up and down projections. */
enum { EXPERT_GATE = 0, EXPERT_UP, EXPERT_DOWN };

/* Expert e's GEMM `kind` (EXPERT_*): the template (the layer's gate projection) with
 * the expert's own streams, projections gate, up, down of expert e, and its probe id. */
static ufp4_linear_ctx expert_ctx(const ufp4_moe *s, const ufp4_linear_ctx *t, int e, int kind) {
  ufp4_linear_ctx c = *t;
  if (s->expert_recipes) {
    c.recipe = s->expert_recipes[3 * e + kind];
    c.rht_signs = s->expert_signs[3 * e + kind];
  }
  c.stream.proj = t->stream.proj + (uint32_t)kind;
  c.stream.expert = (uint32_t)e;
  c.proj = UFP4_PROJ_EXPERT(e, kind);
  return c;
}

void ufp4_moe_set_expert_recipes(ufp4_moe *s, const ufp4_recipe *const *recipes, const float *const *signs) {
  s->expert_recipes = recipes && signs ? recipes : NULL;
  s->expert_signs = recipes && signs ? signs : NULL;
}

/* 1 when some expert GEMM runs 4-bit operands: then every group is padded. */
static int any_quantized(const ufp4_moe *s, const ufp4_linear_ctx *ctx) {
  if (!s->expert_recipes) return ufp4_recipe_quantizes(ctx->recipe);
  const int slots = 3 * (s->cfg.n_experts + (s->cfg.shared_ffn > 0 ? 1 : 0));
  for (int i = 0; i < slots; i++)
    if (ufp4_recipe_quantizes(s->expert_recipes[i])) return 1;
  return 0;
}

/* The rows a group starts at and pads to: UFP4_MOE_GROUP_ALIGN, or the longer RHT of a 4-bit
 * recipe that rotates Wgrad, whose operands it rotates along the tokens: rht_n must divide every
 * group's rows (qformat.h), and zero rows keep the rotation from mixing in anything. Powers of two,
 * so the largest is a multiple of all the others. */
static size_t group_align(const ufp4_moe *s, const ufp4_linear_ctx *ctx) {
  const int slots = s->expert_recipes ? 3 * (s->cfg.n_experts + (s->cfg.shared_ffn > 0 ? 1 : 0)) : 1;
  size_t A = UFP4_MOE_GROUP_ALIGN;
  for (int i = 0; i < slots; i++) {
    const ufp4_recipe *r = s->expert_recipes ? s->expert_recipes[i] : ctx->recipe;
    if (ufp4_recipe_quantizes(r) && (r->rht_mask & (1u << UFP4_WGRAD)) &&
        ufp4_recipe_gemm_precision(r, UFP4_WGRAD) == UFP4_PREC_FP4 && (size_t)r->rht_n > A)
      A = (size_t)r->rht_n;
  }
  return A;
}

static int check_tensors(const ufp4_moe *s, const ufp4_moe_tensors *w, const char *what) {
  if (!w || !w->router || !w->gate || !w->up || !w->down)
    return ufp4_fail(UFP4_EINVAL, "moe: %s lacks the router or the expert arrays", what);
  for (int e = 0; e < s->cfg.n_experts; e++)
    if (!w->gate[e] || !w->up[e] || !w->down[e])
      return ufp4_fail(UFP4_EINVAL, "moe: %s lacks expert %d's gate, up or down tensor", what, e);
  if (s->cfg.shared_ffn > 0 && (!w->shared_gate || !w->shared_up || !w->shared_down || !w->shared_router))
    return ufp4_fail(UFP4_EINVAL, "moe: %s lacks a shared-expert tensor (shared_ffn %d)", what, s->cfg.shared_ffn);
  return 0;
}

/* One SwiGLU MLP forward on n rows: h = X Wg^T, u = X Wu^T, a = silu(h) * u, y = a Wd^T. */
static int mlp_forward(ufp4_moe *s, const ufp4_linear_ctx *tmpl, int e, const float *X, const float *Wg,
                       const float *Wu, const float *Wd, float *h, float *u, float *a, float *y, size_t n, int F) {
  const size_t C = (size_t)s->C;
  ufp4_linear_ctx cg = expert_ctx(s, tmpl, e, EXPERT_GATE), cu = expert_ctx(s, tmpl, e, EXPERT_UP),
                  cd = expert_ctx(s, tmpl, e, EXPERT_DOWN);
  CHECK(ufp4_linear_forward(&cg, X, Wg, h, n, C, (size_t)F, s->lin_scratch));
  CHECK(ufp4_linear_forward(&cu, X, Wu, u, n, C, (size_t)F, s->lin_scratch));
  CHECK(ufp4_swiglu_forward(a, h, u, (int)n, F));
  return ufp4_linear_forward(&cd, a, Wd, y, n, (size_t)F, C, s->lin_scratch);
}

/* Its backward, in the dense model's order: down, swiglu, gate (Dgrad then Wgrad), up. dX (may be
 * NULL) and the three weight gradients accumulate. */
static int mlp_backward(ufp4_moe *s, const ufp4_linear_ctx *tmpl, int e, const float *dY, const float *X,
                        const float *Wg, const float *Wu, const float *Wd, const float *h, const float *u,
                        const float *a, float *dX, float *gWg, float *gWu, float *gWd, size_t n, int F) {
  const size_t C = (size_t)s->C, nf = n * (size_t)F;
  ufp4_linear_ctx cg = expert_ctx(s, tmpl, e, EXPERT_GATE), cu = expert_ctx(s, tmpl, e, EXPERT_UP),
                  cd = expert_ctx(s, tmpl, e, EXPERT_DOWN);
  memset(s->d_a, 0, nf * sizeof(float));
  CHECK(ufp4_linear_backward(&cd, dY, a, Wd, s->d_a, gWd, n, (size_t)F, C, s->lin_scratch));
  memset(s->d_h, 0, nf * sizeof(float));
  memset(s->d_u, 0, nf * sizeof(float));
  CHECK(ufp4_swiglu_backward(s->d_h, s->d_u, s->d_a, h, u, (int)n, F));
  CHECK(ufp4_linear_backward(&cg, s->d_h, X, Wg, dX, gWg, n, C, (size_t)F, s->lin_scratch));
  return ufp4_linear_backward(&cu, s->d_u, X, Wu, dX, gWu, n, C, (size_t)F, s->lin_scratch);
}

int ufp4_moe_forward(ufp4_moe *s, const ufp4_moe_tensors *w, const ufp4_linear_ctx *ctx, const float *x,
                     float *out, size_t N) {
  if (!s || !ctx || !ctx->recipe || !x || !out) return ufp4_fail(UFP4_EINVAL, "moe forward: NULL argument");
  if (N < 1 || N > s->max_tokens)
    return ufp4_fail(UFP4_EINVAL, "moe forward: %zu tokens, the block holds 1..%zu", N, s->max_tokens);
  CHECK(check_tensors(s, w, "forward weights"));
  s->have_forward = 0;
  s->N = N;
  const int E = s->cfg.n_experts, k = s->cfg.top_k, Fe = s->cfg.expert_ffn, Fs = s->cfg.shared_ffn;
  const size_t C = (size_t)s->C;
  /* Only 4-bit operands have blocks that padding keeps apart; under fp32/bf16 the GEMMs run on the
   * unpadded rows, which keeps E = 1 equal to the dense layer at any N (OpenBLAS may sum a longer
   * reduction in another order even when the extra terms are zeros). */
  s->quant = !ctx->high_precision && any_quantized(s, ctx);
  s->row_align = s->quant ? group_align(s, ctx) : UFP4_MOE_GROUP_ALIGN;
  CHECK(grow_to_align(s, s->row_align));
  s->shared_rows = s->quant ? moe_pad_rows(N, s->row_align) : N;
  /* The router and the shared expert need every token again in backward; a copy keeps the
   * caller free to reuse x, and its zero tail is the shared expert's padding. */
  memcpy(s->xs, x, N * C * sizeof(float));
  memset(s->xs + N * C, 0, (s->shared_rows - N) * C * sizeof(float));
  CHECK(ufp4_moe_route_forward(s, w->router, x, N));
  s->padded_rows = 0;
  if (s->quant) {
    for (int e = 0; e < E; e++) s->padded_rows += s->group_rows[e] - s->admitted[e];
    if (Fs > 0) s->padded_rows += s->shared_rows - N;
  }

#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < s->rows_used; r++) {
    float *dst = s->xg + r * C;
    if (s->row_token[r] == SIZE_MAX) memset(dst, 0, C * sizeof(float));
    else memcpy(dst, x + s->row_token[r] * C, C * sizeof(float));
  }
  for (int e = 0; e < E; e++) {
    const size_t n = s->quant ? s->group_rows[e] : s->admitted[e], r0 = s->group_start[e];
    if (!n) continue;
    const size_t hf = r0 * (size_t)Fe;
    CHECK(mlp_forward(s, ctx, e, s->xg + r0 * C, w->gate[e], w->up[e], w->down[e], s->hg + hf, s->ug + hf,
                      s->ag + hf, s->yg + r0 * C, n, Fe));
  }
  if (Fs > 0) {
    CHECK(mlp_forward(s, ctx, E, s->xs, w->shared_gate, w->shared_up, w->shared_down, s->sh_h, s->sh_u, s->sh_a,
                      s->sh_y, s->shared_rows, Fs));
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
      double a = 0.0;
      for (size_t c = 0; c < C; c++) a += (double)x[t * C + c] * (double)w->shared_router[c];
      s->sh_s[t] = (float)(1.0 / (1.0 + exp(-(double)(float)a)));
    }
  }

#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < N; t++) {
    float *o = out + t * C;
    int first = 1;
    if (Fs > 0) {
      const float sg = s->sh_s[t], *y = s->sh_y + t * C;
      for (size_t c = 0; c < C; c++) o[c] = sg * y[c];
      first = 0;
    }
    for (int j = 0; j < k; j++) {
      const ptrdiff_t r = s->slot_row[t * (size_t)k + (size_t)j];
      if (r < 0) continue;
      const float g = s->slot_gate[t * (size_t)k + (size_t)j], *y = s->yg + (size_t)r * C;
      /* The first term is stored, not added to 0, so that k = 1 gives the dense output's bits
       * (0 + -0 would turn a -0 into +0). */
      if (first)
        for (size_t c = 0; c < C; c++) o[c] = g * y[c];
      else
        for (size_t c = 0; c < C; c++) o[c] += g * y[c];
      first = 0;
    }
    if (first) memset(o, 0, C * sizeof(float));
  }
  s->have_forward = 1;
  return 0;
}

int ufp4_moe_backward(ufp4_moe *s, const ufp4_moe_tensors *w, const ufp4_moe_tensors *g,
                      const ufp4_linear_ctx *ctx, const float *dout, float *dx, float dloss) {
  if (!s || !ctx || !ctx->recipe || !dout) return ufp4_fail(UFP4_EINVAL, "moe backward: NULL argument");
  if (!s->have_forward) return ufp4_fail(UFP4_EINVAL, "moe backward: no forward to differentiate");
  CHECK(check_tensors(s, w, "backward weights"));
  CHECK(check_tensors(s, g, "backward gradients"));
  const int E = s->cfg.n_experts, k = s->cfg.top_k, Fe = s->cfg.expert_ffn, Fs = s->cfg.shared_ffn;
  const size_t C = (size_t)s->C, N = s->N;
  const float *x = s->xs;

#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < N; t++) {
    for (int j = 0; j < k; j++) {
      const size_t i = t * (size_t)k + (size_t)j;
      double acc = 0.0;
      if (s->slot_row[i] >= 0) {
        const float *y = s->yg + (size_t)s->slot_row[i] * C, *d = dout + t * C;
        for (size_t c = 0; c < C; c++) acc += (double)d[c] * (double)y[c];
      }
      s->dgate[i] = acc;
    }
  }
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < s->rows_used; r++) {
    float *dy = s->dyg + r * C;
    if (s->row_token[r] == SIZE_MAX) {
      memset(dy, 0, C * sizeof(float));
      continue;
    }
    const float gr = s->row_gate[r], *d = dout + s->row_token[r] * C;
    for (size_t c = 0; c < C; c++) dy[c] = gr * d[c];
  }
  if (dx) memset(s->dxg, 0, s->rows_used * C * sizeof(float));
  for (int e = 0; e < E; e++) {
    const size_t n = s->quant ? s->group_rows[e] : s->admitted[e], r0 = s->group_start[e];
    if (!n) continue;
    const size_t hf = r0 * (size_t)Fe;
    CHECK(mlp_backward(s, ctx, e, s->dyg + r0 * C, s->xg + r0 * C, w->gate[e], w->up[e], w->down[e], s->hg + hf,
                       s->ug + hf, s->ag + hf, dx ? s->dxg + r0 * C : NULL, g->gate[e], g->up[e], g->down[e], n,
                       Fe));
  }

  if (Fs > 0) {
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
      const float sg = s->sh_s[t], *y = s->sh_y + t * C, *d = dout + t * C;
      float *dy = s->sh_dy + t * C;
      double acc = 0.0;
      for (size_t c = 0; c < C; c++) {
        acc += (double)d[c] * (double)y[c];
        dy[c] = sg * d[c];
      }
      s->sh_da[t] = acc * (double)sg * (1.0 - (double)sg);
    }
    const size_t ns = s->shared_rows;
    memset(s->sh_dy + N * C, 0, (ns - N) * C * sizeof(float));
    /* Padded rows need a padded dX; unpadded ones accumulate straight into dx. */
    float *sdx = ns == N ? dx : dx ? s->sh_dx : NULL;
    if (sdx && sdx != dx) memset(sdx, 0, ns * C * sizeof(float));
    CHECK(mlp_backward(s, ctx, E, s->sh_dy, s->xs, w->shared_gate, w->shared_up, w->shared_down, s->sh_h, s->sh_u,
                       s->sh_a, sdx, g->shared_gate, g->shared_up, g->shared_down, ns, Fs));
    if (sdx && sdx != dx)
      for (size_t i = 0; i < N * C; i++) dx[i] += sdx[i];
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < C; c++) {
      double acc = 0.0;
      for (size_t t = 0; t < N; t++) acc += s->sh_da[t] * (double)x[t * C + c];
      g->shared_router[c] += (float)acc;
    }
    if (dx) {
#pragma omp parallel for schedule(static)
      for (size_t t = 0; t < N; t++) {
        const float da = (float)s->sh_da[t];
        for (size_t c = 0; c < C; c++) dx[t * C + c] += da * w->shared_router[c];
      }
    }
  }

  if (dx) {
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
      float *o = dx + t * C;
      for (int j = 0; j < k; j++) {
        const ptrdiff_t r = s->slot_row[t * (size_t)k + (size_t)j];
        if (r < 0) continue;
        const float *d = s->dxg + (size_t)r * C;
        for (size_t c = 0; c < C; c++) o[c] += d[c];
      }
    }
  }
  return ufp4_moe_route_backward(s, w->router, x, g->router, dx, dloss);
}

void ufp4_moe_get_stats(const ufp4_moe *s, ufp4_moe_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!s) return;
  const double objective = (double)s->cfg.aux_coef * s->aux + (double)s->cfg.z_coef * s->zloss;
  out->n_experts = s->cfg.n_experts;
  out->top_k = s->cfg.top_k;
  if (!s->have_forward) return; /* nothing routed yet: zeros and NULL arrays */
  out->load = s->load;
  out->admitted = s->admitted;
  out->slot_expert = s->slot_expert;
  out->slot_gate = s->slot_gate;
  out->slot_row = s->slot_row;
  out->aux = s->aux;
  out->z = s->zloss;
  out->objective = objective;
  out->router_entropy = s->router_entropy;
  out->dropped = s->dropped;
  out->padded_rows = s->padded_rows;
  out->n_tokens = s->N;
}
