/* The recipes of a checkpoint's projections, and their forward weights (training/proj_recipes.h). */
#include "training/proj_recipes.h"

#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/minifloat.h"
#include "ufp4/quant.h"

int proj_recipes_resolve(const ufp4_model_config *c, const ufp4_recipe *base, const char *overrides, proj_recipes *t) {
  t->n = ufp4_model_projection_count(c);
  t->proj = malloc(sizeof *t->proj * (size_t)t->n);
  t->per = malloc(sizeof *t->per * (size_t)t->n);
  if (!t->proj || !t->per) return ufp4_fail(UFP4_ENOMEM, "export: out of memory for the run's recipes");
  ufp4_model_projections(c, t->proj);
  return ufp4_model_resolve_recipes(c, base, overrides, t->per);
}

void proj_recipes_free(proj_recipes *t) {
  free(t->proj);
  free(t->per);
  t->proj = NULL;
  t->per = NULL;
  t->n = 0;
}

const ufp4_recipe *proj_recipes_find(const proj_recipes *t, const char *name) {
  size_t len = strlen(name);
  if (len > 7 && !strcmp(name + len - 7, ".weight")) len -= 7;
  for (int i = 0; t->per && i < t->n; i++)
    if (strlen(t->proj[i].name) == len && !strncmp(t->proj[i].name, name, len)) return &t->per[i];
  return NULL;
}

int proj_recipes_block_fp4(const proj_recipes *t) {
  for (int i = 0; t->per && i < t->n; i++)
    if (t->proj[i].layer >= 0 && ufp4_recipe_gemm_precision(&t->per[i], UFP4_FPROP) == UFP4_PREC_FP4) return 1;
  return 0;
}

int proj_forward_weights(const ufp4_recipe *r, const float *w, size_t rows, size_t cols, float *ref) {
  const size_t n = rows * cols;
  const ufp4_precision fwd = r ? ufp4_recipe_gemm_precision(r, UFP4_FPROP) : UFP4_PREC_FP32; /* per-GEMM keys included */
  if (fwd == UFP4_PREC_FP32) {
    memcpy(ref, w, n * sizeof *ref);
    return 1;
  }
  if (fwd == UFP4_PREC_BF16) {
    for (size_t i = 0; i < n; i++) ref[i] = ufp4_round_bf16(w[i]);
    return 1;
  }
  const ufp4_qformat f = ufp4_recipe_operand_format(r, UFP4_OP_FPROP_W);
  if (f.rht || f.round == UFP4_ROUND_SR || f.round == UFP4_ROUND_SR8) return 0;
  const int rc = ufp4_fake_quant(&f, w, ref, rows, cols);
  return rc ? rc : 1;
}
