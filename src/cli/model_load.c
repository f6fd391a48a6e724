#include "cli/model_load.h"

#include "ufp4/checkpoint.h"
#include "ufp4/recipe.h"

int ufp4_cli_load_model(const char *ckpt, const char *recipe_spec, int batch, ufp4_model **out) {
  *out = NULL;
  ufp4_model_config c;
  ufp4_recipe r;
  ufp4_model *m;
  int rc = ufp4_recipe_parse(recipe_spec, &r);
  if (!rc) rc = ufp4_checkpoint_config(ckpt, &c);
  if (!rc) rc = ufp4_model_create(&m, &c, batch);
  if (rc) return rc;
  if ((rc = ufp4_checkpoint_load_params(ckpt, m))) {
    ufp4_model_free(m);
    return rc;
  }
  ufp4_model_set_recipe(m, &r, 0);
  *out = m;
  return 0;
}
