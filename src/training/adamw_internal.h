/* The AdamW update of a run of parameters, per instruction set (adamw.c). Internal to the library.
 *
 * Every kernel computes, for each i, in float and in this order (no fused multiply-add, so that
 * every kernel gives the scalar reference's bits):
 *   gi = g[i] * gscale
 *   m[i] = b1 * m[i] + (1 - b1) * gi
 *   v[i] = b2 * v[i] + ((1 - b2) * gi) * gi
 *   p[i] = p[i] - lr * ((m[i] / bc1) / (sqrt(v[i] / bc2) + eps) + wd * p[i])
 * Elements are independent, so any split over threads gives the same bits. */
#ifndef UFP4_TRAINING_ADAMW_INTERNAL_H
#define UFP4_TRAINING_ADAMW_INTERNAL_H

#include <stddef.h>

typedef struct {
  float b1, b2, eps, bc1, bc2, lr, gscale;
} ufp4_adamw_consts;

/* The scalar reference (adamw.c) and the AVX2 kernel (x86/adamw_avx2.c, when compiled in), over
 * elements [0, n) of the given arrays with weight decay wd. */
void ufp4_adamw_span_ref(float *p, const float *g, float *m, float *v, size_t n, const ufp4_adamw_consts *k, float wd);
void ufp4_adamw_span_avx2(float *p, const float *g, float *m, float *v, size_t n, const ufp4_adamw_consts *k,
                          float wd);

#endif
