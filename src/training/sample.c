#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/philox.h"
#include "ufp4/sample.h"

int ufp4_sample_next(const float *logits, int V, const ufp4_sample_opts *o, uint64_t index, float *work) {
  if (o->temperature <= 0) {
    int best = 0;
    for (int j = 1; j < V; j++)
      if (logits[j] > logits[best]) best = j;
    return best;
  }
  /* Keep the top_k largest logits (ties broken toward the smaller id), then sample the softmax. */
  float kth = -INFINITY;
  if (o->top_k > 0 && o->top_k < V) {
    memcpy(work, logits, sizeof(float) * (size_t)V);
    /* Partial selection: k passes are cheap for the small k people use. */
    for (int k = 0; k < o->top_k; k++) {
      int best = -1;
      for (int j = 0; j < V; j++)
        if (work[j] > -INFINITY && (best < 0 || work[j] > work[best])) best = j;
      kth = work[best];
      work[best] = -INFINITY;
    }
  }
  float mx = -INFINITY;
  for (int j = 0; j < V; j++)
    if (logits[j] >= kth && logits[j] > mx) mx = logits[j];
  double total = 0;
  for (int j = 0; j < V; j++) {
    work[j] = logits[j] >= kth ? (float)exp((logits[j] - mx) / o->temperature) : 0.0f;
    total += work[j];
  }
  double u = ufp4_philox_uniform(o->seed, 0x53414d50ull /* "SAMP" */, index) * total, acc = 0;
  int last = 0;
  for (int j = 0; j < V; j++) {
    if (work[j] <= 0) continue;
    acc += work[j];
    last = j;
    if (u < acc) return j;
  }
  return last;
}

int ufp4_generate(ufp4_model *m, const int32_t *prompt, int n_prompt, int n_new, const ufp4_sample_opts *o,
                  int32_t *out, int *n_out) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  if (n_prompt < 1) return ufp4_fail(UFP4_EINVAL, "sample: the prompt encodes to no tokens");
  int total = n_prompt + n_new;
  float *work = malloc(sizeof(float) * (size_t)c->vocab);
  if (!work) return ufp4_fail(UFP4_ENOMEM, "sample: out of memory");
  memcpy(out, prompt, sizeof(int32_t) * (size_t)n_prompt);
  int n = n_prompt, rc = 0;
  while (n < total) {
    /* The model sees at most seq_len tokens: the most recent window. */
    int start = n > c->seq_len ? n - c->seq_len : 0, T = n - start;
    if ((rc = ufp4_model_forward(m, out + start, NULL, 1, T, NULL))) break;
    const float *last = ufp4_model_logits(m) + (size_t)(T - 1) * c->vocab;
    out[n] = ufp4_sample_next(last, o->vocab > 0 && o->vocab < c->vocab ? o->vocab : c->vocab, o, (uint64_t)n, work);
    n++;
    if (o->stop_token >= 0 && out[n - 1] == o->stop_token) break;
  }
  free(work);
  *n_out = n;
  return rc;
}
