/* Shared fixture of the MoE block tests: random weights and inputs for one block, and its
 * gradient tensors. Header-only (static functions) so each test program stays one file plus this. */
#ifndef TEST_MOE_UTIL_H
#define TEST_MOE_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/moe.h"
#include "ufp4/philox.h"

typedef struct {
  ufp4_moe_config cfg;
  int C;
  size_t N;
  float *x, *R;                    /* input [N, C]; the objective's weights sum(out * R) */
  float *wblock, *gblock;          /* every parameter / gradient float, in one block each */
  size_t nparam;
  float *wg[16], *wu[16], *wd[16]; /* tests use E <= 16 */
  float *gg[16], *gu[16], *gd[16];
  ufp4_moe_tensors w, g;
} moe_fix;

static void moe_fill(float *p, size_t n, uint64_t seed, uint64_t stream, float scale) {
  for (size_t i = 0; i < n; i++) p[i] = scale * ufp4_philox_normal(seed, stream, i);
}

/* Points the tensors of one set (w or g) into block b; returns the floats used. */
static size_t moe_fix_layout(const moe_fix *f, float *b, ufp4_moe_tensors *t, float **gate, float **up,
                             float **down) {
  const size_t E = (size_t)f->cfg.n_experts, C = (size_t)f->C, Fe = (size_t)f->cfg.expert_ffn,
               Fs = (size_t)f->cfg.shared_ffn;
  size_t o = 0;
  memset(t, 0, sizeof *t);
  t->router = b + o, o += E * C;
  for (size_t e = 0; e < E; e++) {
    gate[e] = b + o, o += Fe * C;
    up[e] = b + o, o += Fe * C;
    down[e] = b + o, o += C * Fe;
  }
  t->gate = gate;
  t->up = up;
  t->down = down;
  if (Fs) {
    t->shared_gate = b + o, o += Fs * C;
    t->shared_up = b + o, o += Fs * C;
    t->shared_down = b + o, o += C * Fs;
    t->shared_router = b + o, o += C;
  }
  return o;
}

/* Router weights scaled by router_scale (large: clear top-k margins); expert weights ~ N(0, 1/C).
 * Expert e's weights are further multiplied by expert_scale^e (tests that want experts of very
 * different magnitudes). */
static moe_fix *moe_fix_new(ufp4_moe_config cfg, int C, size_t N, uint64_t seed, float router_scale,
                            float expert_scale) {
  moe_fix *f = calloc(1, sizeof *f);
  f->cfg = cfg;
  f->C = C;
  f->N = N;
  f->x = malloc(N * (size_t)C * sizeof(float));
  f->R = malloc(N * (size_t)C * sizeof(float));
  moe_fill(f->x, N * (size_t)C, seed, 1, 1.0f);
  moe_fill(f->R, N * (size_t)C, seed, 2, 1.0f);
  const size_t E = (size_t)cfg.n_experts, Cz = (size_t)C;
  f->nparam = E * Cz + E * 3 * (size_t)cfg.expert_ffn * Cz + 3 * (size_t)cfg.shared_ffn * Cz + (cfg.shared_ffn ? Cz : 0);
  f->wblock = malloc(f->nparam * sizeof(float));
  f->gblock = calloc(f->nparam, sizeof(float));
  if (moe_fix_layout(f, f->wblock, &f->w, f->wg, f->wu, f->wd) != f->nparam) abort();
  moe_fix_layout(f, f->gblock, &f->g, f->gg, f->gu, f->gd);
  const float ws = 1.0f / sqrtf((float)C), wsf = 1.0f / sqrtf((float)cfg.expert_ffn);
  moe_fill(f->w.router, (size_t)cfg.n_experts * (size_t)C, seed, 3, router_scale);
  float m = 1.0f;
  for (int e = 0; e < cfg.n_experts; e++, m *= expert_scale) {
    const size_t n = (size_t)cfg.expert_ffn * (size_t)C;
    moe_fill(f->wg[e], n, seed, 10 + 3 * (uint64_t)e, ws * m);
    moe_fill(f->wu[e], n, seed, 11 + 3 * (uint64_t)e, ws * m);
    moe_fill(f->wd[e], n, seed, 12 + 3 * (uint64_t)e, wsf * m);
  }
  if (cfg.shared_ffn) {
    const size_t n = (size_t)cfg.shared_ffn * (size_t)C;
    moe_fill(f->w.shared_gate, n, seed, 4, ws);
    moe_fill(f->w.shared_up, n, seed, 5, ws);
    moe_fill(f->w.shared_down, n, seed, 6, 1.0f / sqrtf((float)cfg.shared_ffn));
    moe_fill(f->w.shared_router, (size_t)C, seed, 7, ws);
  }
  return f;
}

static void moe_fix_free(moe_fix *f) {
  if (!f) return;
  free(f->x);
  free(f->R);
  free(f->wblock);
  free(f->gblock);
  free(f);
}

#endif
