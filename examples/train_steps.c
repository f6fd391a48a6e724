/* Trains a tiny Llama-style model for three AdamW steps under a 4-bit recipe and prints the
 * losses, through the public C API of libufp4 (docs/API.md, "C").
 *
 *   train_steps [RECIPE]
 *
 * RECIPE is a recipe spec as the CLI takes it ("ufp4", "e2m1", "nvfp4", "bf16", "fp32",
 * "e2m1,rht=none", ...; default "ufp4"). The model (2 blocks, d_model 32, vocabulary 64) sees the
 * same batch at every step, a cyclic token sequence it can learn, so the loss starts near ln 64
 * (the weights are small at initialization) and falls.
 *
 * Library callers do not get the `ufp4` command's OpenBLAS kernel pin: set OPENBLAS_CORETYPE
 * (e.g. Haswell) in the environment for the command's bits (docs/API.md).
 *
 * Build against an installed ufp4:
 *   cc -O2 train_steps.c $(pkg-config --cflags --libs ufp4) -o train_steps */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/model.h"
#include "ufp4/optim.h"
#include "ufp4/recipe.h"
#include "ufp4/version.h"

enum { B = 4, T = 16, STEPS = 3 };

static int fail(const char *what) {
  fprintf(stderr, "train_steps: %s: %s\n", what, ufp4_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *spec = argc > 1 ? argv[1] : "ufp4";
  ufp4_recipe recipe;
  if (ufp4_recipe_parse(spec, &recipe)) return fail("recipe");

  ufp4_model_config c = ufp4_model_config_default();
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 2;
  c.ffn_dim = 64;
  c.seq_len = T;
  c.vocab = 64;
  ufp4_model_config_resolve(&c);
  if (ufp4_model_config_check(&c)) return fail("model");
  ufp4_model *m;
  if (ufp4_model_create(&m, &c, B)) return fail("model");
  ufp4_model_init(m, 1);
  if (ufp4_model_set_recipe(m, &recipe, 1)) return fail("recipe");

  /* Sequence b is the cycle 0, 1, 2, ... started at 5b; the target of each token is the next. */
  int32_t tokens[B * T], targets[B * T];
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      tokens[b * T + t] = (5 * b + t) % c.vocab;
      targets[b * T + t] = (5 * b + t + 1) % c.vocab;
    }

  size_t n = ufp4_model_num_params(m);
  float *mom = calloc(n, sizeof *mom), *var = calloc(n, sizeof *var);
  if (!mom || !var) return fail("memory");
  ufp4_adamw_config opt = ufp4_adamw_default();
  opt.weight_decay = 0;
  size_t seg_start[1] = {0};
  uint8_t seg_decay[1] = {0};
  char resolved[256];
  ufp4_recipe_format(&recipe, resolved, sizeof resolved);
  printf("ufp4 %s, recipe %s, %zu parameters\n", ufp4_version(), resolved, n);
  for (int step = 1; step <= STEPS; step++) {
    double loss;
    ufp4_model_zero_grads(m);
    ufp4_model_set_step(m, (uint64_t)(step - 1), 0); /* the stochastic-rounding streams */
    if (ufp4_model_forward(m, tokens, targets, B, T, &loss)) return fail("forward");
    if (ufp4_model_backward(m, 1.0f)) return fail("backward");
    ufp4_adamw_step(ufp4_model_params(m), ufp4_model_grads(m), mom, var, n, &opt, 1e-2, step, 1.0f, seg_start,
                    seg_decay, 1);
    printf("step %d loss %.6f\n", step, loss);
  }
  /* The loss after the third update. */
  double loss;
  ufp4_model_set_step(m, STEPS, 0);
  if (ufp4_model_forward(m, tokens, targets, B, T, &loss)) return fail("forward");
  printf("after %d steps loss %.6f (ln %d = %.6f)\n", STEPS, loss, c.vocab, log((double)c.vocab));
  free(mom);
  free(var);
  ufp4_model_free(m);
  return 0;
}
