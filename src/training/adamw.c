#include <math.h>

#include "ufp4/optim.h"

#include "core/cpu.h"
#include "training/adamw_internal.h"

ufp4_adamw_config ufp4_adamw_default(void) {
  ufp4_adamw_config c = {.lr = 1e-3,
                         .min_lr = 1e-4,
                         .warmup_steps = 20,
                         .total_steps = 0, /* 0: the run's length */
                         .beta1 = 0.9,
                         .beta2 = 0.95,
                         .eps = 1e-8,
                         .weight_decay = 0.1,
                         .grad_clip = 1.0};
  return c;
}

double ufp4_lr_at(const ufp4_adamw_config *c, int step) {
  if (c->warmup_steps > 0 && step < c->warmup_steps) return c->lr * (step + 1) / c->warmup_steps;
  int decay_steps = c->total_steps - c->warmup_steps;
  if (decay_steps <= 0) return c->lr;
  double progress = (double)(step - c->warmup_steps) / decay_steps;
  if (progress > 1) progress = 1;
  return c->min_lr + 0.5 * (c->lr - c->min_lr) * (1 + cos(3.14159265358979323846 * progress));
}

/* Fixed chunk size: partial sums never depend on how many threads share the chunks. */
#define NORM_CHUNK 65536

double ufp4_grad_norm(const float *g, size_t n) {
  size_t chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
  double total = 0;
  double partial[64];
  for (size_t c0 = 0; c0 < chunks; c0 += 64) {
    size_t cn = chunks - c0 < 64 ? chunks - c0 : 64;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < cn; c++) {
      size_t b = (c0 + c) * NORM_CHUNK, e = b + NORM_CHUNK < n ? b + NORM_CHUNK : n;
      double s = 0;
      for (size_t i = b; i < e; i++) s += (double)g[i] * g[i];
      partial[c] = s;
    }
    for (size_t c = 0; c < cn; c++) total += partial[c];
  }
  return sqrt(total);
}

void ufp4_adamw_span_ref(float *p, const float *g, float *m, float *v, size_t n, const ufp4_adamw_consts *k,
                         float wd) {
  const float b1 = k->b1, b2 = k->b2, eps = k->eps, bc1 = k->bc1, bc2 = k->bc2, flr = k->lr, gscale = k->gscale;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * gscale;
    float mi = b1 * m[i] + (1 - b1) * gi;
    float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    p[i] -= flr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
  }
}

/* Parameters per unit of work: one parallel region over the whole update, in chunks that may
 * straddle segments, instead of one region per tensor (a model of 16 blocks of d_model 64 has 146
 * tensors, many of 64 parameters). */
#define ADAMW_CHUNK 16384

void ufp4_adamw_step(float *p, const float *g, float *m, float *v, size_t n, const ufp4_adamw_config *c,
                     double lr, int t, float gscale, const size_t *seg_start, const uint8_t *seg_decay,
                     int n_segments) {
  const ufp4_adamw_consts k = {.b1 = (float)c->beta1,
                               .b2 = (float)c->beta2,
                               .eps = (float)c->eps,
                               .bc1 = (float)(1 - pow(c->beta1, t)),
                               .bc2 = (float)(1 - pow(c->beta2, t)),
                               .lr = (float)lr,
                               .gscale = gscale};
  const float wd = (float)c->weight_decay;
  const int simd = ufp4_simd_enabled();
  const size_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp parallel for schedule(static)
  for (size_t ci = 0; ci < chunks; ci++) {
    const size_t b = ci * ADAMW_CHUNK, e = b + ADAMW_CHUNK < n ? b + ADAMW_CHUNK : n;
    /* The last segment starting at or before b, then each segment's part of [b, e); parameters
     * before the first segment are not updated. */
    int s = 0;
    while (s + 1 < n_segments && seg_start[s + 1] <= b) s++;
    size_t i = n_segments > 0 && seg_start[0] > b ? seg_start[0] : b;
    for (; n_segments > 0 && i < e; s++) {
      const size_t se = s + 1 < n_segments && seg_start[s + 1] < e ? seg_start[s + 1] : e;
      const float w = seg_decay[s] ? wd : 0.0f;
#ifdef UFP4_HAVE_X86
      if (simd) ufp4_adamw_span_avx2(p + i, g + i, m + i, v + i, se - i, &k, w);
      else
#endif
        ufp4_adamw_span_ref(p + i, g + i, m + i, v + i, se - i, &k, w);
      i = se;
    }
  }
  (void)simd;
}
