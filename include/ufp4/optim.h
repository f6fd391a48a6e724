/* AdamW with decoupled weight decay, global-norm gradient clipping and a cosine learning-rate
 * schedule with linear warmup.
 *
 *   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
 *   p <- p - lr * ( (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p )
 * (Loshchilov & Hutter's decoupled decay, as PyTorch's AdamW computes it). Weight decay applies to
 * the tensors the caller marks (ufp4 marks the 2-D weights, not the norm gains).
 *
 * Every reduction (the gradient norm) is summed in double over a fixed partition, so the result
 * does not depend on the thread count. */
#ifndef UFP4_OPTIM_H
#define UFP4_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  double lr, min_lr;      /* peak and floor of the schedule */
  int warmup_steps;       /* linear warmup from lr/warmup to lr */
  int total_steps;        /* cosine decays from lr at the end of warmup to min_lr at total_steps;
                             0 (the default) means the run's length, filled in by the trainer */
  double beta1, beta2, eps, weight_decay;
  double grad_clip;       /* max global L2 norm; 0 disables */
} ufp4_adamw_config;

ufp4_adamw_config ufp4_adamw_default(void);

/* Learning rate of 0-based step `step`. */
double ufp4_lr_at(const ufp4_adamw_config *c, int step);

/* Global L2 norm of g[0..n) (double, fixed partition). */
double ufp4_grad_norm(const float *g, size_t n);

/* One AdamW update of n parameters at 1-based step t with learning rate lr; decay[i] says whether
 * parameter i decays, given per segment: segments [seg_start[s], seg_start[s+1]) with seg_decay[s].
 * g is scaled by `gscale` first (clipping). The same bits at any thread count and with or without
 * the AVX2 kernel (the update is elementwise, in float, without fused multiply-adds). */
void ufp4_adamw_step(float *p, const float *g, float *m, float *v, size_t n, const ufp4_adamw_config *c,
                     double lr, int t, float gscale, const size_t *seg_start, const uint8_t *seg_decay,
                     int n_segments);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
