/* Text generation from a model: temperature, top-k and a seed (Philox), so a seed reproduces the
 * sample. Temperature 0 is greedy decoding. */
#ifndef UFP4_SAMPLE_H
#define UFP4_SAMPLE_H

#include <stdint.h>
#include "ufp4/model.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  double temperature; /* 0 = greedy */
  int top_k;          /* 0 = the whole vocabulary */
  uint64_t seed;
  int64_t stop_token; /* -1 = none */
  int vocab;          /* 0 = the model's; else ids < vocab only (a tokenizer smaller than the
                         model's vocabulary: the rest could not be decoded) */
} ufp4_sample_opts;

/* The next token from one row of logits [V]; `index` selects the random number; work: V floats. */
int ufp4_sample_next(const float *logits, int V, const ufp4_sample_opts *o, uint64_t index, float *work);
/* Appends up to n_new tokens to the prompt; out holds n_prompt + n_new ids, *n_out the count. */
int ufp4_generate(ufp4_model *m, const int32_t *prompt, int n_prompt, int n_new, const ufp4_sample_opts *o,
                  int32_t *out, int *n_out);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
