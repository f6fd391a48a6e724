/* The state of one MoE block, shared by moe.c (dispatch, experts, combine) and moe_route.c
 * (router, top-k, capacity, aux and z losses). Not part of the public API. */
#ifndef UFP4_MOE_INTERNAL_H
#define UFP4_MOE_INTERNAL_H

#include <stddef.h>

#include "ufp4/moe.h"

struct ufp4_moe {
  ufp4_moe_config cfg;
  /* ufp4_moe_set_expert_recipes: per expert GEMM, or NULL (the template's) */
  const ufp4_recipe *const *expert_recipes;
  const float *const *expert_signs;
  int C;
  size_t max_tokens, max_rows, max_group; /* tokens; grouped rows (all experts); rows of one group */
  size_t row_align; /* groups of the last forward start at and pad to multiples of this (group_align) */
  size_t align_cap; /* the largest row_align the blocks below have room for */
  size_t N;                               /* tokens of the last forward */
  int have_forward;

  /* routing, [max_tokens * E] / [max_tokens * k] / [max_tokens] */
  float *logits, *prob;
  double *lse, *entropy;
  int *slot_expert;
  float *slot_gate;
  ptrdiff_t *slot_row;
  double *dgate; /* [max_tokens * k]: d objective / d g_tj of the last backward */
  float *dz;     /* [max_tokens * E] */

  /* per expert [E] */
  size_t *count, *admitted, *group_start, *group_rows;
  double *load, *pmean;

  /* grouped rows [max_rows]: token of each row (SIZE_MAX for padding) and its gate */
  size_t *row_token;
  float *row_gate;
  size_t rows_used;

  /* expert activations, [max_rows * C] or [max_rows * Fe] */
  float *xg, *hg, *ug, *ag, *yg;
  /* backward: dY of down and dX of gate/up per grouped row; one expert's hidden gradients */
  float *dyg, *dxg, *d_a, *d_h, *d_u;

  /* shared expert, [max_group * Fs] / [max_group * C] / [max_group] */
  float *sh_h, *sh_u, *sh_a, *sh_y, *sh_s, *sh_dy;
  float *xs;    /* copy of the forward's x, [max_group * C], zero rows after N */
  float *sh_dx; /* the shared expert's padded dX */
  size_t shared_rows; /* rows the shared expert's GEMMs run on */
  int quant;          /* the last forward ran 4-bit GEMMs: groups padded */
  double *sh_da;

  float *lin_scratch;
  size_t floats, doubles, sizes, ints; /* element counts of the blocks below, for activation_bytes */
  float *fblock;
  double *dblock;
  size_t *zblock;
  int *iblock;
  ptrdiff_t *pblock;

  double aux, zloss, router_entropy;
  size_t dropped, padded_rows;
};

/* n rounded up to a multiple of a rows. */
static inline size_t moe_pad_rows(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

/* Router forward: logits, softmax, top-k, gates, capacity, groups, aux, z-loss, entropy. */
int ufp4_moe_route_forward(ufp4_moe *s, const float *router, const float *x, size_t N);
/* Router backward: from s->dgate (filled by the caller for admitted slots, 0 for dropped ones) and
 * the aux/z objective scaled by dloss, accumulates into grouter [E, C] and dx [N, C] (either may
 * be NULL). */
int ufp4_moe_route_backward(ufp4_moe *s, const float *router, const float *x, float *grouter, float *dx,
                            float dloss);

#endif
