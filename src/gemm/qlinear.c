#include <string.h>

#include "ufp4/error.h"
#include "ufp4/gemm.h"
#include "ufp4/linear.h"
#include "ufp4/minifloat.h"
#include "ufp4/quant.h"

size_t ufp4_linear_scratch_floats(size_t n, size_t in, size_t out) {
  size_t fprop = n * in + out * in, dgrad = n * out + in * out, wgrad = out * n + in * n;
  size_t m = fprop > dgrad ? fprop : dgrad;
  return m > wgrad ? m : wgrad;
}

static ufp4_precision layer_precision(const ufp4_linear_ctx *ctx) {
  return ctx->high_precision ? UFP4_PREC_FP32 : ctx->recipe->precision;
}

/* Writes operand `op` (rows x cols after the optional transpose of src) into dst, rounded as the
 * recipe says. */
static int prepare(const ufp4_linear_ctx *ctx, ufp4_operand op, const float *src, int transpose, size_t rows,
                   size_t cols, float *dst) {
  size_t n = rows * cols;
  if (transpose) ufp4_transpose(src, dst, cols, rows);
  else memcpy(dst, src, n * sizeof *dst);
  switch (layer_precision(ctx)) {
  case UFP4_PREC_FP32:
    return 0;
  case UFP4_PREC_BF16:
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) dst[i] = ufp4_round_bf16(dst[i]);
    return 0;
  case UFP4_PREC_FP4:
    break;
  }
  const ufp4_recipe *r = ctx->recipe;
  ufp4_qformat f = ufp4_recipe_operand_format(r, op);
  f.seed = ctx->seed;
  f.stream = (ctx->stream_base << 3) + (uint64_t)op;
  f.rht_signs = ctx->rht_signs;
  float pre = (ufp4_round_is_stochastic(f.round) && r->sr_prescale != 1.0f) ? r->sr_prescale : 1.0f;
  if (pre != 1.0f)
    for (size_t i = 0; i < n; i++) dst[i] *= pre;
  int rc = ufp4_fake_quant(&f, dst, dst, rows, cols);
  if (rc) return rc;
  if (pre != 1.0f)
    for (size_t i = 0; i < n; i++) dst[i] /= pre;
  return 0;
}

int ufp4_linear_forward(const ufp4_linear_ctx *ctx, const float *X, const float *W, float *Y, size_t n,
                        size_t in, size_t out, float *scratch) {
  float *a = scratch, *b = scratch + n * in;
  int rc;
  if ((rc = prepare(ctx, UFP4_OP_FPROP_X, X, 0, n, in, a))) return rc;
  if ((rc = prepare(ctx, UFP4_OP_FPROP_W, W, 0, out, in, b))) return rc;
  ufp4_sgemm_abt(a, b, Y, n, out, in, 0.0f);
  return 0;
}

int ufp4_linear_backward(const ufp4_linear_ctx *ctx, const float *dY, const float *X, const float *W,
                         float *dX, float *dW, size_t n, size_t in, size_t out, float *scratch) {
  int rc;
  if (dX) {
    float *a = scratch, *b = scratch + n * out;
    if ((rc = prepare(ctx, UFP4_OP_DGRAD_DY, dY, 0, n, out, a))) return rc;
    if ((rc = prepare(ctx, UFP4_OP_DGRAD_W, W, 1, in, out, b))) return rc;
    ufp4_sgemm_abt(a, b, dX, n, in, out, 1.0f);
  }
  float *a = scratch, *b = scratch + out * n;
  if ((rc = prepare(ctx, UFP4_OP_WGRAD_DY, dY, 1, out, n, a))) return rc;
  if ((rc = prepare(ctx, UFP4_OP_WGRAD_X, X, 1, in, n, b))) return rc;
  ufp4_sgemm_abt(a, b, dW, out, in, n, 1.0f);
  return 0;
}
