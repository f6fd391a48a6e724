/* A linear layer as three GEMMs under a recipe (recipe.h).
 *
 *   forward   Y [N, out]  = X [N, in] W [out, in]^T                 (Fprop)
 *   backward  dX [N, in] += dY [N, out] W [out, in]                   (Dgrad)
 *             dW [out, in] += dY^T X                                  (Wgrad)
 *
 * Every GEMM is computed in one orientation, C = A B^T with A and B row-major and blocked along
 * their rows (the reduction dimension): operands whose reduction dimension is not contiguous are
 * transposed first. Each prepared operand is then rounded to bf16, or fake-quantized to 4 bits (with
 * the GEMM's RHT when the recipe asks for it, the same signs on both operands so that the rotation
 * cancels in the product), and the product is an fp32 SGEMM (gemm.h, deterministic at any thread count).
 * Each GEMM runs in its own precision, ufp4_recipe_gemm_precision (a recipe may keep one GEMM in
 * bf16 or fp32 and quantize the others). Under the fp32 precision the
 * operands are not copied at all: each GEMM runs in its natural orientation (gemm.h's abt, ab, atb),
 * which makes a disabled recipe bit-identical to the plain fp32 layer by construction. A bf16
 * operand is rounded while it is copied or transposed, and a 4-bit operand that needs no
 * transpose is quantized straight from its source (out of place), so only the transposed 4-bit
 * operands pay for a separate copy.
 *
 * Stochastic rounding streams: operand op of a layer draws from ctx->stream with its operand field
 * set to op (stream.h), so the bits depend on (seed, step, rank, layer, expert, projection, operand)
 * and never on threads. A stream id whose fields do not fit stream.h's packing is refused. */
#ifndef UFP4_LINEAR_H
#define UFP4_LINEAR_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/recipe.h"
#include "ufp4/stream.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Diagnostics hook (ufp4_diagnostics_*): when set, every operand about to be 4-bit quantized is
 * shown to `operand` (as the quantizer sees it: transposed along the reduction dimension, prescaled,
 * before RHT, with the format that will quantize it), and every GEMM's exact and rounded products to
 * `gemm`. The training result does not change; the GEMMs are computed twice. */
typedef struct {
  void (*operand)(void *ud, int layer, int proj, ufp4_operand op, const float *x, size_t rows, size_t cols,
                  const ufp4_qformat *f);
  void (*gemm)(void *ud, int layer, int proj, ufp4_gemm_kind g, const float *exact, const float *rounded, size_t n);
  void *ud;
} ufp4_linear_probe;

/* Seconds spent inside the layer, accumulated when ufp4_linear_ctx.times is set (benchmarks):
 * operand preparation (copy or transpose, bf16 rounding, prescale, RHT, fake quantization) and the
 * SGEMM itself. Timing reads the clock only; it never changes a result. */
typedef struct {
  double prepare, gemm;
} ufp4_linear_times;

typedef struct {
  const ufp4_recipe *recipe;
  int high_precision;     /* 1: run this layer in fp32 whatever the recipe (kept blocks) */
  ufp4_stream_id stream;  /* the layer's stream; the GEMMs fill in the operand field */
  const float *rht_signs; /* recipe->rht_n signs */
  const ufp4_linear_probe *probe; /* NULL: no diagnostics */
  int layer, proj;                /* identify the layer to the probe */
  ufp4_linear_times *times;       /* NULL: not timed */
} ufp4_linear_ctx;

/* Floats of scratch the layer needs for these shapes (two prepared operands). */
size_t ufp4_linear_scratch_floats(size_t n, size_t in, size_t out);

int ufp4_linear_forward(const ufp4_linear_ctx *ctx, const float *X, const float *W, float *Y, size_t n,
                        size_t in, size_t out, float *scratch);
/* dX may be NULL (no input gradient needed). Both dX and dW accumulate. */
int ufp4_linear_backward(const ufp4_linear_ctx *ctx, const float *dY, const float *X, const float *W,
                         float *dX, float *dW, size_t n, size_t in, size_t out, float *scratch);

/* The two GEMMs of backward on their own (backward is dgrad, when dX is not NULL, then wgrad):
 * dX [n, in] += dY W (Dgrad) and dW [out, in] += dY^T X (Wgrad). */
int ufp4_linear_dgrad(const ufp4_linear_ctx *ctx, const float *dY, const float *W, float *dX, size_t n, size_t in,
                      size_t out, float *scratch);
int ufp4_linear_wgrad(const ufp4_linear_ctx *ctx, const float *dY, const float *X, float *dW, size_t n, size_t in,
                      size_t out, float *scratch);

/* Projections i < n_proj that read the same input X (a block's q, k and v; gate and up), each under
 * its own ctx[i] with its own W[i] [out[i], in]: the results, bits included, are those of n_proj
 * calls of ufp4_linear_forward (Y[i] = X W[i]^T), and of ufp4_linear_backward (dX += dY[i] W[i] in
 * order i = 0, 1, ...; dW[i] += dY[i]^T X). The difference is cost: when every projection rounds X
 * to the same bits -- the same recipe, precision and RHT signs, no probe, and X's operand not under
 * stochastic rounding (whose bits come from each projection's own stream) -- X is prepared once for
 * Fprop and X^T once for Wgrad instead of once per projection. Otherwise these loop over the single
 * calls. scratch: ufp4_linear_scratch_floats(n, in, max out[i]) floats. */
int ufp4_linear_forward_shared(const ufp4_linear_ctx *ctx, int n_proj, const float *X, const float *const *W,
                               float *const *Y, size_t n, size_t in, const size_t *out, float *scratch);
int ufp4_linear_backward_shared(const ufp4_linear_ctx *ctx, int n_proj, const float *const *dY, const float *X,
                                const float *const *W, float *dX, float *const *dW, size_t n, size_t in,
                                const size_t *out, float *scratch);

/* Out-of-place transpose: dst [cols, rows] = src [rows, cols]^T. */
void ufp4_transpose(const float *src, float *dst, size_t rows, size_t cols);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
