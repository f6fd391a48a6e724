/* What the exports need to know of the run a checkpoint comes from: the recipe each projection
 * trained under (a base recipe, the run's overrides and the blocks it kept in fp32, resolved as
 * the trainer resolves them), and the weights a recipe's forward multiplied by. The GGUF and the
 * Hugging Face exports both judge their files against these. Internal to the training layer. */
#ifndef UFP4_TRAINING_PROJ_RECIPES_H
#define UFP4_TRAINING_PROJ_RECIPES_H

#include <stddef.h>

#include "ufp4/model.h"
#include "ufp4/recipe.h"

typedef struct {
  int n;                      /* ufp4_model_projection_count */
  ufp4_projection_info *proj; /* [n], ufp4_model_projections' order */
  ufp4_recipe *per;           /* [n], the recipe of each */
} proj_recipes;

/* Fills t for model c (ufp4_model_resolve_recipes); a ufp4 status (an override that fits no
 * projection of c fails). t is then freed by proj_recipes_free, whatever the status. */
int proj_recipes_resolve(const ufp4_model_config *c, const ufp4_recipe *base, const char *overrides, proj_recipes *t);
void proj_recipes_free(proj_recipes *t);
/* The recipe of the projection named name ("model.layers.0.self_attn.q_proj", or its tensor's
 * name with ".weight"), or NULL: no such projection (a router), or t not resolved. */
const ufp4_recipe *proj_recipes_find(const proj_recipes *t, const char *name);
/* Whether any projection of a block (not the lm_head) runs its forward GEMM in 4 bits. */
int proj_recipes_block_fp4(const proj_recipes *t);

/* The weights w [rows][cols] that the forward GEMM of recipe r multiplied by, into ref: w itself
 * (r NULL, or an fp32 forward), w rounded to bf16, or w fake-quantized in r's forward weight
 * format. 0 when they cannot be known in the weights' basis (an RHT or stochastic rounding on
 * them: ref is then not written), 1 when ref holds them, or a negative ufp4 status. */
int proj_forward_weights(const ufp4_recipe *r, const float *w, size_t rows, size_t cols, float *ref);

#endif
