/* A batch of token windows as the model takes it. Internal to the training layer. */
#ifndef UFP4_TRAINING_SPLIT_BATCH_H
#define UFP4_TRAINING_SPLIT_BATCH_H

#include <stdint.h>
#include <string.h>

/* tokens [B, T+1] -> inputs [B, T] and the targets, the same windows shifted by one. */
static inline void train_split_batch(const int32_t *tokens, int32_t *inp, int32_t *tgt, int B,
                                     int T) {
  for (int b = 0; b < B; b++) {
    memcpy(inp + (size_t)b * T, tokens + (size_t)b * (T + 1), (size_t)T * sizeof(int32_t));
    memcpy(tgt + (size_t)b * T, tokens + (size_t)b * (T + 1) + 1, (size_t)T * sizeof(int32_t));
  }
}

#endif
