/* The paper's measures of what a quantizer does to a tensor (docs/NUMERICS.md, Measures).
 *
 * All sums are accumulated in double in a fixed order, so results do not depend on the thread
 * count. "A" below is the tensor the quantizer sees: the raw tensor, or its RHT rotation when the
 * format has rht > 0 (so NMSE with RHT is ||Q(HA) - HA||^2 / ||HA||^2). */
#ifndef UFP4_MEASURES_H
#define UFP4_MEASURES_H

#include <stddef.h>
#include "ufp4/grid.h"
#include "ufp4/quant.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct {
  double alpha;          /* <Q(A), A> / ||A||^2: signal attenuation */
  double nmse;           /* ||Q(A) - A||^2 / ||A||^2 */
  double sqnr_db;        /* -10 log10 nmse */
  double shrink_bias;    /* E[rho(t) - t] over elements, t = |x|/s in grid units */
  double mean_rel_err;   /* mean over nonzero elements of (|Q(a)| - |a|) / s: signed rounding
                            error in units of the block scale; same as shrink_bias but over
                            nonzero inputs only */
  double bucket_p[UFP4_GRID_MAX_LEVELS]; /* fraction of elements per magnitude index */
  double bucket_entropy; /* -sum p_i log(p_i + 1e-12), natural log */
  double b_eff;          /* exp(entropy) / n_levels */
  double underflow;      /* fraction of nonzero inputs quantized to 0 */
  double clipped;        /* fraction of elements with t > g_max (saturated), beyond a relative
                            2^-20 that only reflects the fp32 rounding of s = amax/g_max */
  double bucket_bias[UFP4_GRID_MAX_LEVELS]; /* per magnitude index (bin): mean of rho(t) - t over
                            the kept elements quantized to that level, grid units (0 if none) */
  double four_share;     /* 4/6 (f->adaptive): fraction of blocks that kept the 4-candidate; 0
                            otherwise */
  /* Stochastic rounding (f->round sr or sr8) only, else 0: a test of the rounding against its
   * own law. An element strictly between neighbouring levels lo < t < hi (t < g_max) rounds up
   * with the probability P the mode defines (sr: (t - lo)/(hi - lo), exact within 2^-32; sr8:
   * floor(256 p)/256), so d = rho - E[rho] = rho - lo - P (hi - lo) has mean 0 and variance
   * (hi - lo)^2 P (1 - P), in grid units, and draws are independent across elements (Philox by
   * element index). Over the sr_n elements with 0 < P < 1:
   *   sr_bias   sum d / sum (hi - lo): the mean rounding bias in grid steps (a stream that
   *             always rounds down gives -sum P (hi - lo) / sum (hi - lo), near -0.5);
   *   sr_z_mag  sum d / sqrt(sum var): bias of magnitudes (negative: toward zero);
   *   sr_z_val  sum sign(x) d / sqrt(sum var): bias of values (negative: toward -inf).
   * A correct SR gives z-scores that are N(0, 1) for large sr_n (central limit theorem). t is
   * |x| / s in double, where the quantizer rounds fp32 t: elements within a relative 2^-20 of a
   * level (a block's maximum at g_max, say) are left out, since the quantizer's t may be on it.
   * Under Four Over Six (f->adaptive) sr_n is 0: it keeps the better of two candidates rounded
   * with the same random bits, so its draws do not follow SR's law and the test does not apply. */
  size_t sr_n;
  double sr_bias, sr_z_mag, sr_z_val;
  size_t n, n_nonfinite; /* element count; elements skipped: NaN/Inf inputs and the finite
                            elements of a block the quantizer poisoned with a NaN scale. All
                            means and fractions are over the elements kept; with none kept
                            (or n 0) alpha, nmse, sqnr_db, shrink_bias, mean_rel_err,
                            bucket_entropy, b_eff, underflow and clipped are NaN, not a
                            perfect score (four_share, sr_* and the buckets stay 0). */
} ufp4_qmeasures;

/* Quantizes a rows x cols tensor with format f (RHT included when f->rht > 0) and measures it. */
int ufp4_measure_tensor(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                        ufp4_qmeasures *m);

/* Building blocks, usable on any pair of arrays. */
double ufp4_dot(const float *a, const float *b, size_t n);
double ufp4_norm2(const float *a, size_t n);           /* sum of squares */
double ufp4_alpha(const float *a, const float *qa, size_t n);
double ufp4_nmse(const float *a, const float *qa, size_t n);
double ufp4_sqnr_db(double nmse);
double ufp4_cosine(const float *a, const float *b, size_t n);
/* delta-SQNR = 10 log10(NMSE_raw / NMSE_rht). */
double ufp4_delta_sqnr_db(double nmse_raw, double nmse_rht);

/* A chain of K quantized GEMMs (the compounding of the paper's §3): y_0 = X, y_k = y_{k-1} W_k^T
 * with W_k gaussian of std 1/sqrt(d), in full precision and with both operands quantized by f
 * along the reduction dimension (RHT on both when f->rht > 0). Per layer: */
typedef struct {
  double signal_ratio; /* ||y_q,k|| / ||y_k|| */
  double cosine;       /* cos(y_q,k, y_k) */
  double eta;          /* alpha_A,k * alpha_B,k of this GEMM's operands */
  double eta_cum;      /* product of eta over layers 1..k */
} ufp4_chain_layer;

/* x is tokens x d (row-major); W_k come from Philox under `seed`. out has K entries. */
int ufp4_chain_simulate(const ufp4_qformat *f, const float *x, size_t tokens, size_t d, int K,
                        uint64_t seed, ufp4_chain_layer *out);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
