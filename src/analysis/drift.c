/* Forward drift over batches and recipes: drift.h. */
#include "ufp4/drift.h"

#include <stdlib.h>
#include <string.h>

#include "ufp4/diagnostics.h"
#include "ufp4/error.h"
#include "ufp4/recipe.h"

void ufp4_drift_table_free(ufp4_drift_table *t) {
  free(t->ratio);
  free(t->cosine);
  memset(t, 0, sizeof *t);
}

/* Adds one batch's drift under the recipe set on m to ratio/cosine[0..L], each divided by n. */
static int add_batch(ufp4_model *m, const ufp4_drift_spec *s, uint64_t b, int32_t *tokens,
                     int32_t *inp, ufp4_drift_point *pts, double *ratio, double *cosine) {
  const int L = ufp4_model_get_config(m)->n_layers, T = ufp4_model_get_config(m)->seq_len;
  int rc = s->batch_fn(s->ctx, b, tokens);
  if (rc) return rc;
  for (long r = 0; r < s->batch; r++)
    memcpy(inp + r * T, tokens + r * (T + 1), sizeof(int32_t) * (size_t)T);
  if ((rc = ufp4_forward_drift(m, inp, s->batch, T, pts))) return rc;
  for (int l = 0; l <= L; l++) {
    ratio[l] += pts[l].norm_ratio / s->batches;
    cosine[l] += pts[l].cosine / s->batches;
  }
  return 0;
}

int ufp4_drift_measure(ufp4_model *m, const ufp4_drift_spec *s, ufp4_drift_table *out) {
  const int L = ufp4_model_get_config(m)->n_layers, T = ufp4_model_get_config(m)->seq_len;
  const size_t per = (size_t)(L + 1);
  memset(out, 0, sizeof *out);
  out->n_recipes = s->n_recipes;
  out->n_layers = L;
  out->ratio = calloc((size_t)s->n_recipes * per, sizeof(double));
  out->cosine = calloc((size_t)s->n_recipes * per, sizeof(double));
  ufp4_drift_point *pts = malloc(sizeof *pts * per);
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)s->batch * (size_t)(T + 1));
  int32_t *inp = malloc(sizeof(int32_t) * (size_t)s->batch * (size_t)T);
  int rc = 0;
  if (!out->ratio || !out->cosine || !pts || !tokens || !inp)
    rc = ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
  for (int k = 0; k < s->n_recipes && !rc; k++) {
    ufp4_recipe r;
    if ((rc = ufp4_recipe_parse(s->recipes[k], &r))) break;
    ufp4_model_set_recipe(m, &r, 1);
    for (long b = 0; b < s->batches && !rc; b++)
      rc = add_batch(m, s, (uint64_t)b, tokens, inp, pts, out->ratio + k * per,
                     out->cosine + k * per);
  }
  free(pts);
  free(tokens);
  free(inp);
  return rc;
}
