/* Compounding of quantization bias through a chain of K quantized GEMMs (measures.h).
 *
 * Layer k (0-based) draws W_k[i][j] = N(0,1)/sqrt(d) from Philox (seed, stream k+1, index i*d+j);
 * stream 0 is left unused so that seed 0 / stream 0 never aliases a layer.
 *   reference  y_k  = y_{k-1} W_k^T                  (fp32 sgemm)
 *   quantized  yq_k = Q_A(yq_{k-1}) Q_B(W_k)^T        (fp32 sgemm of the dequantized operands)
 * Both operands are rows x d with d the reduction dimension, so each is quantized along its rows.
 * With f->rht > 0 both carry the same rotation, which cancels in the product.
 * Stochastic rounding streams: Q_A of layer k uses f->stream + 2k, Q_B uses f->stream + 2k + 1, so
 * no two quantizations share random bits.
 * eta_k = alpha(Q_A) * alpha(Q_B), each measured against the operand its quantizer saw (the rotated
 * one under RHT, which is the paper's definition; the rotation is orthogonal, so the norms are the
 * same as unrotated). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/measures.h"
#include "ufp4/philox.h"
#include "ufp4/rht.h"

static void fill_weight(float *w, size_t d, uint64_t seed, uint64_t stream) {
  const float sd = (float)(1.0 / sqrt((double)d));
  const size_t n = d * d;
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (size_t i = 0; i < n; ++i) w[i] = ufp4_philox_normal(seed, stream, i) * sd;
}

/* alpha of the quantized operand qv against the operand the quantizer saw (v rotated by RHT when
 * f->rht > 0; `scratch` receives that rotated copy). */
static int operand_alpha(const ufp4_qformat *f, const float *v, const float *qv, float *scratch,
                         size_t rows, size_t d, double *alpha) {
  const float *seen = v;
  if (f->rht > 0) {
    memcpy(scratch, v, rows * d * sizeof(float));
    int st = ufp4_rht_rows(scratch, rows, d, f->rht, f->rht_signs);
    if (st) return st;
    seen = scratch;
  }
  *alpha = ufp4_alpha(seen, qv, rows * d);
  return UFP4_OK;
}

int ufp4_chain_simulate(const ufp4_qformat *f, const float *x, size_t tokens, size_t d, int K,
                        uint64_t seed, ufp4_chain_layer *out) {
  if (!f || !x || !out) return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: NULL argument");
  if (K < 1) return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: K = %d, need at least 1", K);
  if (tokens == 0 || d == 0)
    return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: empty input (%zu x %zu)", tokens, d);
  if (tokens > (size_t)INT32_MAX || d > (size_t)INT32_MAX)
    return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: %zu x %zu exceeds the BLAS int range",
                     tokens, d);
  size_t unit = f->tile2d > 0 ? (size_t)f->tile2d : (f->block > 0 ? (size_t)f->block : 1);
  if (d % unit != 0)
    return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: d = %zu is not a multiple of the block %zu",
                     d, unit);
  if (f->rht > 0 && d % (size_t)f->rht != 0)
    return ufp4_fail(UFP4_EINVAL, "ufp4_chain_simulate: d = %zu is not a multiple of the RHT size %d",
                     d, f->rht);
  int st = ufp4_qformat_check(f, tokens, d);
  if (st) return st;
  st = ufp4_qformat_check(f, d, d);
  if (st) return st;

  const size_t big = tokens > d ? tokens : d;
  if (big > SIZE_MAX / sizeof(float) / d)
    return ufp4_fail(UFP4_ENOMEM, "ufp4_chain_simulate: %zu x %zu too large", big, d);
  const size_t ny = tokens * d, nw = d * d;
  float *y = malloc(ny * sizeof(float)), *yn = malloc(ny * sizeof(float));
  float *yq = malloc(ny * sizeof(float)), *yqn = malloc(ny * sizeof(float));
  float *aq = malloc(ny * sizeof(float)), *w = malloc(nw * sizeof(float));
  float *wq = malloc(nw * sizeof(float));
  float *scratch = malloc((ny > nw ? ny : nw) * sizeof(float));
  if (!y || !yn || !yq || !yqn || !aq || !w || !wq || !scratch) {
    st = ufp4_fail(UFP4_ENOMEM, "ufp4_chain_simulate: out of memory");
    goto done;
  }
  memcpy(y, x, ny * sizeof(float));
  memcpy(yq, x, ny * sizeof(float));

  const int M = (int)tokens, D = (int)d;
  double eta_cum = 1.0;
  for (int k = 0; k < K; ++k) {
    fill_weight(w, d, seed, (uint64_t)k + 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, D, D, 1.0f, y, D, w, D, 0.0f, yn, D);

    ufp4_qformat fa = *f, fb = *f;
    fa.stream = f->stream + 2 * (uint64_t)k;
    fb.stream = f->stream + 2 * (uint64_t)k + 1;
    if ((st = ufp4_fake_quant(&fa, yq, aq, tokens, d))) goto done;
    if ((st = ufp4_fake_quant(&fb, w, wq, d, d))) goto done;
    double alpha_a, alpha_b;
    if ((st = operand_alpha(f, yq, aq, scratch, tokens, d, &alpha_a))) goto done;
    if ((st = operand_alpha(f, w, wq, scratch, d, d, &alpha_b))) goto done;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, D, D, 1.0f, aq, D, wq, D, 0.0f, yqn,
                D);

    float *t = y; y = yn; yn = t;
    t = yq; yq = yqn; yqn = t;
    double n2 = ufp4_norm2(y, ny), n2q = ufp4_norm2(yq, ny);
    out[k].signal_ratio = n2 > 0.0 ? sqrt(n2q / n2) : NAN;
    out[k].cosine = ufp4_cosine(yq, y, ny);
    out[k].eta = alpha_a * alpha_b;
    eta_cum *= out[k].eta;
    out[k].eta_cum = eta_cum;
  }
  st = UFP4_OK;
done:
  free(y); free(yn); free(yq); free(yqn); free(aq); free(w); free(wq); free(scratch);
  return st;
}
