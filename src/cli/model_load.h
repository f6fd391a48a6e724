/* Opens a checkpoint folder as a model ready to run under a recipe, for eval and sample. */
#ifndef UFP4_CLI_MODEL_LOAD_H
#define UFP4_CLI_MODEL_LOAD_H

#include "ufp4/model.h"

int ufp4_cli_load_model(const char *ckpt, const char *recipe_spec, int batch, ufp4_model **out);

#endif
