/* Thread scaling per kernel: every kernel of a training step, called with the sizes one step of
 * the study's models calls it with, timed at 1 thread and at T threads (T = the OpenMP maximum,
 * at least 2) in the same process. A kernel whose T-thread call is not faster than its 1-thread
 * call has an OpenMP region that costs more than it earns at that size.
 *
 * Method: one untimed call at each thread count, then `reps` rounds; a round times a batch of
 * calls at 1 thread and a batch at T threads, back to back, so that load drift hits both alike.
 * A batch is as many calls as fill about 2 ms (counted once, at 1 thread), and the figure is the
 * median over the rounds of the batch time per call. Kernels that accumulate (backward passes,
 * AdamW) run on the same buffers call after call; their inputs are small, so the values stay
 * finite. */
#include "bench_kernels.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "linear/packed_gemm_internal.h"
#include "ufp4/fileio.h"
#include "ufp4/gemm.h"
#include "ufp4/layers.h"
#include "ufp4/linear.h"
#include "ufp4/optim.h"
#include "ufp4/parallel.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/recipe.h"
#include "ufp4/rht.h"
#include "ufp4/ufp4.h"

typedef struct {
  const char *name;
  int layers, d, heads, ffn, vocab, batch, seq;
} kshape;

/* The study's model (docs/STUDY.md: d 64, 4 heads, ffn 192, B 8, T 128, BPE-2048) at its deepest,
 * and 4x128 of `bench train` (d 128, ffn 352, B 16, T 128, bytes). */
static const kshape shapes[] = {
    {"16x64 (study)", 16, 64, 4, 192, 2048, 8, 128},
    {"4x128", 4, 128, 4, 352, 256, 16, 128},
};

/* Every buffer a kernel call touches, sized for one shape. */
typedef struct {
  const kshape *s;
  int BT, hd;
  size_t n_params;
  float *x, *y, *dx, *dy, *w, *dw, *rstd;         /* [BT, d], [d] */
  float *q, *k, *v, *o, *dq, *dk, *dv, *att, *sc; /* attention */
  float *cos_t, *sin_t;
  float *g, *u, *h, *dg, *du, *dh;                /* [BT, ffn] */
  float *wte, *dwte, *logits, *dlogits, *losses, *lse;
  int32_t *tok, *tgt;
  float *wqkv, *yqkv, *dyqkv, *dwqkv, *lscratch;  /* a fused q,k,v projection [3d, d] */
  float *p, *pg, *pm, *pv;                        /* the whole model's parameters for AdamW */
  ufp4_recipe e2m1, bf16;
  float signs[UFP4_RHT_MAX];
  ufp4_qformat rne, sr, rht;
} kbuf;

typedef int (*kernel_fn)(kbuf *b);

static int k_rmsnorm_f(kbuf *b) {
  return ufp4_rmsnorm_forward(b->y, b->rstd, b->x, b->w, b->BT, b->s->d, 1e-5f);
}
static int k_rmsnorm_b(kbuf *b) {
  return ufp4_rmsnorm_backward(b->dx, b->dw, b->dy, b->x, b->w, b->rstd, b->BT, b->s->d);
}
static int k_rope_f(kbuf *b) {
  return ufp4_rope_forward(b->dq, b->q, b->cos_t, b->sin_t, b->s->batch, b->s->seq, b->s->heads, b->hd);
}
static int k_rope_b(kbuf *b) {
  return ufp4_rope_backward(b->dk, b->q, b->cos_t, b->sin_t, b->s->batch, b->s->seq, b->s->heads, b->hd);
}
static int k_attn_f(kbuf *b) {
  const kshape *s = b->s;
  return ufp4_attention_forward(b->o, b->att, b->q, b->k, b->v, s->batch, s->seq, s->heads, s->heads, b->hd);
}
static int k_attn_b(kbuf *b) {
  const kshape *s = b->s;
  return ufp4_attention_backward(b->dq, b->dk, b->dv, b->sc, b->o, b->att, b->q, b->k, b->v, s->batch, s->seq,
                                 s->heads, s->heads, b->hd);
}
static int k_swiglu_f(kbuf *b) { return ufp4_swiglu_forward(b->h, b->g, b->u, b->BT, b->s->ffn); }
static int k_swiglu_b(kbuf *b) { return ufp4_swiglu_backward(b->dg, b->du, b->dh, b->g, b->u, b->BT, b->s->ffn); }
static int k_resid_f(kbuf *b) { return ufp4_residual_forward(b->y, b->x, b->dy, (size_t)b->BT * b->s->d); }
static int k_resid_b(kbuf *b) { return ufp4_residual_backward(b->dx, b->dk, b->dy, (size_t)b->BT * b->s->d); }
static int k_embed_f(kbuf *b) { return ufp4_embedding_forward(b->y, b->tok, b->wte, b->BT, b->s->vocab, b->s->d); }
static int k_embed_b(kbuf *b) { return ufp4_embedding_backward(b->dwte, b->dy, b->tok, b->BT, b->s->vocab, b->s->d); }
static int k_xent_f(kbuf *b) {
  double mean;
  return ufp4_cross_entropy_forward(b->losses, b->lse, &mean, NULL, b->logits, b->tgt, b->BT, b->s->vocab);
}
static int k_xent_b(kbuf *b) {
  return ufp4_cross_entropy_backward(b->dlogits, b->logits, b->lse, b->tgt, 1.0f, b->BT, b->s->vocab);
}
static int k_sgemm(kbuf *b) {
  ufp4_sgemm_abt(b->x, b->wqkv, b->yqkv, (size_t)b->BT, 3 * (size_t)b->s->d, (size_t)b->s->d, 0.0f);
  return 0;
}
static int k_lm_head(kbuf *b) {
  ufp4_sgemm_abt(b->x, b->wte, b->logits, (size_t)b->BT, (size_t)b->s->vocab, (size_t)b->s->d, 0.0f);
  return 0;
}
static int k_q_rne(kbuf *b) { return ufp4_fake_quant(&b->rne, b->x, b->y, (size_t)b->BT, (size_t)b->s->d); }
static int k_q_rht(kbuf *b) { return ufp4_fake_quant(&b->rht, b->x, b->y, (size_t)b->BT, (size_t)b->s->d); }
static int k_q_sr(kbuf *b) { return ufp4_fake_quant(&b->sr, b->dy, b->dx, (size_t)b->BT, (size_t)b->s->d); }
static int k_q_sr_t(kbuf *b) { return ufp4_fake_quant_t(&b->sr, b->dy, b->dx, (size_t)b->BT, (size_t)b->s->d); }
static int k_lin_r(kbuf *b, ufp4_gemm_kind g, const ufp4_recipe *r) {
  const size_t n = (size_t)b->BT, in = (size_t)b->s->d, out = 3 * in;
  ufp4_linear_ctx ctx = {.recipe = r, .stream = {.seed = 7, .proj = 1}, .rht_signs = b->signs};
  if (g == UFP4_FPROP) return ufp4_linear_forward(&ctx, b->x, b->wqkv, b->yqkv, n, in, out, b->lscratch);
  if (g == UFP4_DGRAD) return ufp4_linear_dgrad(&ctx, b->dyqkv, b->wqkv, b->dx, n, in, out, b->lscratch);
  return ufp4_linear_wgrad(&ctx, b->dyqkv, b->x, b->dwqkv, n, in, out, b->lscratch);
}
static int k_lin_f(kbuf *b) { return k_lin_r(b, UFP4_FPROP, &b->e2m1); }
static int k_lin_d(kbuf *b) { return k_lin_r(b, UFP4_DGRAD, &b->e2m1); }
static int k_lin_w(kbuf *b) { return k_lin_r(b, UFP4_WGRAD, &b->e2m1); }
/* bf16 linear GEMMs with the operands rounded into copies (OpenBLAS packs them), and rounded while
 * ufp4 packs them (packed_gemm_internal.h; the same bits). */
static int k_bf(kbuf *b, ufp4_gemm_kind g, int packed) {
  const int was = ufp4_pgemm_in_use();
  ufp4_pgemm_set_in_use(packed);
  int rc = k_lin_r(b, g, &b->bf16);
  ufp4_pgemm_set_in_use(was);
  return rc;
}
static int k_bf_f(kbuf *b) { return k_bf(b, UFP4_FPROP, 0); }
static int k_bf_d(kbuf *b) { return k_bf(b, UFP4_DGRAD, 0); }
static int k_bf_w(kbuf *b) { return k_bf(b, UFP4_WGRAD, 0); }
static int k_bfp_f(kbuf *b) { return k_bf(b, UFP4_FPROP, 1); }
static int k_bfp_d(kbuf *b) { return k_bf(b, UFP4_DGRAD, 1); }
static int k_bfp_w(kbuf *b) { return k_bf(b, UFP4_WGRAD, 1); }
static int k_gnorm(kbuf *b) {
  volatile double n = ufp4_grad_norm(b->pg, b->n_params);
  (void)n;
  return 0;
}
static int k_adamw(kbuf *b) {
  ufp4_adamw_config c = ufp4_adamw_default();
  const size_t seg[2] = {0, b->n_params};
  const uint8_t decay[1] = {1};
  ufp4_adamw_step(b->p, b->pg, b->pm, b->pv, b->n_params, &c, 1e-3, 10, 1.0f, seg, decay, 1);
  return 0;
}

typedef struct {
  const char *name;
  kernel_fn fn;
  const char *what; /* the call's size */
  int packed;       /* times the packed GEMM: skipped where it is not available */
} kernel;

enum { N_KERNELS = 30 };
static const kernel kernels[N_KERNELS] = {
    {"embedding fwd", k_embed_f, "BT x d", 0},
    {"embedding bwd", k_embed_b, "BT x d into V x d", 0},
    {"rmsnorm fwd", k_rmsnorm_f, "BT x d", 0},
    {"rmsnorm bwd", k_rmsnorm_b, "BT x d", 0},
    {"rope fwd", k_rope_f, "B x T x H x hd", 0},
    {"rope bwd", k_rope_b, "B x T x H x hd", 0},
    {"attention fwd", k_attn_f, "B x H x T x T", 0},
    {"attention bwd", k_attn_b, "B x H x T x T", 0},
    {"swiglu fwd", k_swiglu_f, "BT x ffn", 0},
    {"swiglu bwd", k_swiglu_b, "BT x ffn", 0},
    {"residual fwd", k_resid_f, "BT x d", 0},
    {"residual bwd", k_resid_b, "BT x d", 0},
    {"sgemm qkv (fp32)", k_sgemm, "BT x 3d x d", 0},
    {"sgemm lm_head (fp32)", k_lm_head, "BT x V x d", 0},
    {"cross-entropy fwd", k_xent_f, "BT x V", 0},
    {"cross-entropy bwd", k_xent_b, "BT x V", 0},
    {"quant e2m1 RNE", k_q_rne, "BT x d", 0},
    {"quant e2m1 RNE RHT16", k_q_rht, "BT x d", 0},
    {"quant e2m1 SR", k_q_sr, "BT x d", 0},
    {"quant e2m1 SR columns", k_q_sr_t, "BT x d, blocks down", 0},
    {"linear qkv e2m1 Fprop", k_lin_f, "BT x 3d x d", 0},
    {"linear qkv e2m1 Dgrad", k_lin_d, "BT x d x 3d", 0},
    {"linear qkv e2m1 Wgrad", k_lin_w, "3d x d x BT", 0},
    {"linear qkv bf16 Fprop", k_bf_f, "BT x 3d x d", 0},
    {"linear qkv bf16 Dgrad", k_bf_d, "BT x d x 3d", 0},
    {"linear qkv bf16 Wgrad", k_bf_w, "3d x d x BT", 0},
    {"linear bf16 Fprop in pack", k_bfp_f, "rounded while packed", 1},
    {"linear bf16 Dgrad in pack", k_bfp_d, "rounded while packed", 1},
    {"linear bf16 Wgrad in pack", k_bfp_w, "rounded while packed", 1},
    {"grad norm + AdamW", NULL, "all parameters", 0},
};

static float *fill(size_t n, uint64_t stream, float scale) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (p)
    for (size_t i = 0; i < n; i++) p[i] = scale * ufp4_philox_normal(5, stream, i);
  return p;
}

static void kbuf_free(kbuf *b) {
  float *all[] = {b->x, b->y, b->dx, b->dy, b->w, b->dw, b->rstd, b->q, b->k, b->v, b->o, b->dq, b->dk,
                  b->dv, b->att, b->sc, b->cos_t, b->sin_t, b->g, b->u, b->h, b->dg, b->du, b->dh, b->wte,
                  b->dwte, b->logits, b->dlogits, b->losses, b->lse, b->wqkv, b->yqkv, b->dyqkv, b->dwqkv,
                  b->lscratch, b->p, b->pg, b->pm, b->pv};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
  free(b->tok);
  free(b->tgt);
}

/* Allocates and fills the buffers of shape s; 0 or UFP4_ENOMEM. */
static int kbuf_init(kbuf *b, const kshape *s) {
  memset(b, 0, sizeof *b);
  b->s = s;
  b->BT = s->batch * s->seq;
  b->hd = s->d / s->heads;
  const size_t BT = (size_t)b->BT, d = (size_t)s->d, F = (size_t)s->ffn, V = (size_t)s->vocab;
  const size_t att = (size_t)s->batch * s->heads * s->seq * s->seq;
  /* The model's parameters: per block 4 d^2 attention + 3 d F MLP + 2 d norms; embedding; final norm. */
  b->n_params = (size_t)s->layers * (4 * d * d + 3 * d * F + 2 * d) + V * d + d;
  b->x = fill(BT * d, 1, 1.0f), b->y = fill(BT * d, 2, 1.0f), b->dx = fill(BT * d, 3, 1e-3f);
  b->dy = fill(BT * d, 4, 1e-3f), b->w = fill(d, 5, 1.0f), b->dw = fill(d, 6, 0.0f), b->rstd = fill(BT, 7, 1.0f);
  b->q = fill(BT * d, 8, 1.0f), b->k = fill(BT * d, 9, 1.0f), b->v = fill(BT * d, 10, 1.0f);
  b->o = fill(BT * d, 11, 1e-3f), b->dq = fill(BT * d, 12, 0.0f), b->dk = fill(BT * d, 13, 0.0f);
  b->dv = fill(BT * d, 14, 0.0f), b->att = fill(att, 15, 0.0f);
  b->sc = fill(ufp4_attention_scratch_floats(s->batch, s->seq, s->heads), 16, 0.0f);
  b->cos_t = fill((size_t)s->seq * b->hd / 2, 17, 0.0f), b->sin_t = fill((size_t)s->seq * b->hd / 2, 18, 0.0f);
  b->g = fill(BT * F, 19, 1.0f), b->u = fill(BT * F, 20, 1.0f), b->h = fill(BT * F, 21, 0.0f);
  b->dg = fill(BT * F, 22, 0.0f), b->du = fill(BT * F, 23, 0.0f), b->dh = fill(BT * F, 24, 1e-3f);
  b->wte = fill(V * d, 25, 0.02f), b->dwte = fill(V * d, 26, 0.0f), b->logits = fill(BT * V, 27, 1.0f);
  b->dlogits = fill(BT * V, 28, 0.0f), b->losses = fill(BT, 29, 0.0f), b->lse = fill(BT, 30, 0.0f);
  b->wqkv = fill(3 * d * d, 31, 0.05f), b->yqkv = fill(3 * BT * d, 32, 0.0f);
  b->dyqkv = fill(3 * BT * d, 33, 1e-3f), b->dwqkv = fill(3 * d * d, 34, 0.0f);
  b->lscratch = fill(ufp4_linear_scratch_floats(BT, d, 3 * d), 35, 0.0f);
  b->p = fill(b->n_params, 36, 0.02f), b->pg = fill(b->n_params, 37, 1e-3f);
  b->pm = fill(b->n_params, 38, 0.0f), b->pv = fill(b->n_params, 39, 0.0f);
  b->tok = malloc(BT * sizeof *b->tok), b->tgt = malloc(BT * sizeof *b->tgt);
  float *chk[] = {b->x, b->y, b->dx, b->dy, b->w, b->dw, b->rstd, b->q, b->k, b->v, b->o, b->dq, b->dk,
                  b->dv, b->att, b->sc, b->cos_t, b->sin_t, b->g, b->u, b->h, b->dg, b->du, b->dh, b->wte,
                  b->dwte, b->logits, b->dlogits, b->losses, b->lse, b->wqkv, b->yqkv, b->dyqkv, b->dwqkv,
                  b->lscratch, b->p, b->pg, b->pm, b->pv};
  int ok = b->tok && b->tgt;
  for (size_t i = 0; i < sizeof chk / sizeof *chk; i++) ok = ok && chk[i];
  if (!ok) return ufp4_fail(UFP4_ENOMEM, "out of memory");
  for (size_t i = 0; i < BT; i++) {
    b->tok[i] = (int32_t)(ufp4_philox_u32(5, 40, i) % (uint32_t)V);
    b->tgt[i] = (int32_t)(ufp4_philox_u32(5, 41, i) % (uint32_t)V);
  }
  int rc = ufp4_rope_init(b->cos_t, b->sin_t, s->seq, b->hd, 10000.0);
  if (!rc) rc = ufp4_recipe_parse("e2m1", &b->e2m1);
  if (!rc) rc = ufp4_recipe_parse("bf16", &b->bf16);
  if (rc) return rc;
  ufp4_rht_signs_random(b->signs, 16, 7);
  b->rne = ufp4_qformat_default();
  b->sr = b->rne;
  b->sr.round = UFP4_ROUND_SR;
  b->sr.seed = 7;
  b->rht = b->rne;
  b->rht.rht = 16;
  b->rht.rht_signs = b->signs;
  /* Softmax rows for attention backward: the forward pass writes them. */
  return k_attn_f(b);
}

static int call(const kernel *k, kbuf *b) {
  if (k->fn) return k->fn(b);
  int rc = k_gnorm(b);
  return rc ? rc : k_adamw(b);
}

/* Seconds per call over a batch of `calls`. */
static int time_batch(const kernel *k, kbuf *b, int calls, double *per_call) {
  double t0 = bench_now_s();
  for (int i = 0; i < calls; i++) {
    int rc = call(k, b);
    if (rc) return rc;
  }
  *per_call = (bench_now_s() - t0) / calls;
  return 0;
}

int ufp4_bench_kernels(const ufp4_bench_kernels_opts *o, FILE *out) {
  const int reps = o->reps, T = o->threads, t_saved = ufp4_get_threads();
  cJSON *root = o->json_path ? cJSON_CreateObject() : NULL;
  cJSON *jrows = root ? cJSON_AddArrayToObject(root, "kernels") : NULL;
  if (root) {
    cJSON_AddNumberToObject(root, "threads", T);
    cJSON_AddNumberToObject(root, "reps", reps);
  }
  double *t1 = malloc(2 * (size_t)reps * sizeof *t1);
  if (!t1) {
    cJSON_Delete(root);
    return ufp4_fail(UFP4_ENOMEM, "out of memory");
  }
  double *tT = t1 + reps;
  fprintf(out, "ufp4 bench kernels: one call of each kernel at the sizes a training step uses, 1 thread against %d, "
               "alternating; median of %d batches of ~2 ms\n", T, reps);
  int rc = 0;
  for (int si = 0; si < (int)(sizeof shapes / sizeof *shapes) && !rc; si++) {
    if (!(o->shapes & (1 << si))) continue;
    const kshape *s = &shapes[si];
    kbuf b;
    if ((rc = kbuf_init(&b, s))) {
      kbuf_free(&b);
      break;
    }
    fprintf(out, "\nshape %s: d=%d heads=%d ffn=%d vocab=%d, B=%d T=%d (BT=%d), %zu parameters\n", s->name, s->d,
            s->heads, s->ffn, s->vocab, s->batch, s->seq, b.BT, b.n_params);
    fprintf(out, "%-24s %-20s %10s %10s %8s\n", "kernel", "call", "1T us", "nT us", "1T/nT");
    for (int ki = 0; ki < N_KERNELS && !rc; ki++) {
      const kernel *k = &kernels[ki];
      if (k->packed && !ufp4_pgemm_ready()) continue; /* it would time the copy path under its name */
      double w;
      ufp4_set_threads(1);
      if ((rc = time_batch(k, &b, 1, &w))) break;
      int calls = w > 2e-3 ? 1 : (int)(2e-3 / (w > 1e-7 ? w : 1e-7));
      ufp4_set_threads(T);
      if ((rc = time_batch(k, &b, 1, &w))) break;
      for (int r = 0; r < reps && !rc; r++) {
        ufp4_set_threads(1);
        rc = time_batch(k, &b, calls, &t1[r]);
        ufp4_set_threads(T);
        if (!rc) rc = time_batch(k, &b, calls, &tT[r]);
      }
      if (rc) break;
      double m1 = bench_median(t1, reps), mT = bench_median(tT, reps);
      fprintf(out, "%-24s %-20s %10.1f %10.1f %8.2f%s\n", k->name, k->what, 1e6 * m1, 1e6 * mT, m1 / mT,
              m1 / mT < 1.0 ? "  slower" : "");
      if (root) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(jrows, j);
        cJSON_AddStringToObject(j, "shape", s->name);
        cJSON_AddStringToObject(j, "kernel", k->name);
        cJSON_AddNumberToObject(j, "us_1_thread", 1e6 * m1);
        cJSON_AddNumberToObject(j, "us_n_threads", 1e6 * mT);
        cJSON_AddNumberToObject(j, "calls_per_batch", calls);
      }
    }
    kbuf_free(&b);
  }
  ufp4_set_threads(t_saved);
  free(t1);
  if (!rc && root) {
    char *text = cJSON_Print(root);
    if (!text) rc = ufp4_fail(UFP4_ENOMEM, "out of memory");
    else {
      rc = ufp4_write_file_atomic(o->json_path, text, strlen(text));
      free(text);
      if (!rc) fprintf(out, "wrote %s\n", o->json_path);
    }
  }
  cJSON_Delete(root);
  return rc;
}
