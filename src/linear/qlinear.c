#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "linear/packed_gemm_internal.h"
#include "linear/sgemm_internal.h"
#include "linear/transpose_internal.h"
#include "ufp4/error.h"
#include "ufp4/gemm.h"
#include "ufp4/linear.h"
#include "ufp4/minifloat.h"
#include "ufp4/quant.h"
#include "ufp4/stream.h"
#include "core/timer.h"

size_t ufp4_linear_scratch_floats(size_t n, size_t in, size_t out) {
  size_t fprop = n * in + out * in, dgrad = n * out + in * out, wgrad = out * n + in * n;
  size_t m = fprop > dgrad ? fprop : dgrad;
  return m > wgrad ? m : wgrad;
}

/* The precision of GEMM g of this layer (both its operands). */
static ufp4_precision gemm_precision(const ufp4_linear_ctx *ctx, ufp4_gemm_kind g) {
  return ctx->high_precision ? UFP4_PREC_FP32 : ufp4_recipe_gemm_precision(ctx->recipe, g);
}

/* Writes operand `op` (rows x cols; src holds it transposed, cols x rows, when transpose) into
 * dst, rounded as the recipe says (bf16 or 4-bit; never called under fp32). dst is laid out
 * rows x cols, or, when keep, as src is: a transposed operand is then rounded along src's columns
 * (bf16 elementwise, 4-bit by ufp4_fake_quant_t), the same values without the transposed copy. */
static int prepare(const ufp4_linear_ctx *ctx, ufp4_operand op, const float *src, int transpose, int keep,
                   size_t rows, size_t cols, float *dst) {
  size_t n = rows * cols;
  if (gemm_precision(ctx, ufp4_operand_gemm(op)) == UFP4_PREC_BF16) {
    if (transpose && !keep) ufp4_transpose_round_bf16(src, dst, cols, rows);
    else ufp4_round_bf16_copy(src, dst, n);
    return 0;
  }
  const ufp4_recipe *r = ctx->recipe;
  ufp4_stream_id id = ctx->stream;
  id.operand = (uint32_t)op;
  ufp4_qformat f = ufp4_recipe_operand_format(r, op);
  /* Only an operand under SR draws random bits, so only its stream must be unique. */
  int rc = ufp4_round_is_stochastic(f.round) ? ufp4_stream_check(&id) : 0;
  if (rc) return rc;
  f.seed = id.seed;
  f.stream = ufp4_stream_value(&id);
  f.rht_signs = ctx->rht_signs;
  float pre = (ufp4_round_is_stochastic(f.round) && r->sr_prescale != 1.0f) ? r->sr_prescale : 1.0f;
  const int probe = ctx->probe && ctx->probe->operand;
  /* The quantizer is a pure function of its input, so quantizing src out of place gives the bits of
   * copying first and quantizing in place; only a transpose, a prescale or the probe (which sees
   * the operand before quantization) needs the copy. */
  if (transpose && keep) return ufp4_fake_quant_t(&f, src, dst, cols, rows); /* keep: no prescale, no probe */
  const float *qsrc = src;
  if (transpose || pre != 1.0f || probe) {
    if (transpose) ufp4_transpose(src, dst, cols, rows);
    else memcpy(dst, src, n * sizeof *dst);
    if (pre != 1.0f)
      for (size_t i = 0; i < n; i++) dst[i] *= pre;
    if (probe) ctx->probe->operand(ctx->probe->ud, ctx->layer, ctx->proj, op, dst, rows, cols, &f);
    qsrc = dst;
  }
  if ((rc = ufp4_fake_quant(&f, qsrc, dst, rows, cols))) return rc;
  if (pre != 1.0f)
    for (size_t i = 0; i < n; i++) dst[i] /= pre;
  return 0;
}

/* The exact product of the same operands, for the probe: C = A B^T in fp32 without rounding. */
static int probe_gemm(const ufp4_linear_ctx *ctx, ufp4_gemm_kind g, const float *A, int ta, const float *B, int tb,
                      size_t m, size_t n2, size_t k, const float *rounded_a, const float *rounded_b) {
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n2 * k);
  float *exact = malloc(sizeof(float) * m * n2), *rounded = malloc(sizeof(float) * m * n2);
  int rc = (!a || !b || !exact || !rounded) ? ufp4_fail(UFP4_ENOMEM, "linear: out of memory for diagnostics") : 0;
  if (!rc) {
    if (ta) ufp4_transpose(A, a, k, m);
    else memcpy(a, A, sizeof(float) * m * k);
    if (tb) ufp4_transpose(B, b, k, n2);
    else memcpy(b, B, sizeof(float) * n2 * k);
    ufp4_sgemm_abt(a, b, exact, m, n2, k, 0.0f);
    ufp4_sgemm_abt(rounded_a, rounded_b, rounded, m, n2, k, 0.0f);
    ctx->probe->gemm(ctx->probe->ud, ctx->layer, ctx->proj, g, exact, rounded, m * n2);
  }
  free(a);
  free(b);
  free(exact);
  free(rounded);
  return rc;
}

/* C (+)= A' B'^T from operands in their stored layouts (A [m, k], or [k, m] when ta; B [k, n2]
 * when tb, else [n2, k]), in the orientation gemm.h has for them; not for ta && !tb. Under the
 * kernel set the ufp4 executable and the tests pin (Haswell, docs/PERFORMANCE.md) OpenBLAS packs an
 * operand into the same panels whichever way it is stored, and the micro-kernel then sums in the
 * same order, so this gives the bits of ufp4_sgemm_abt on transposed copies (test_train's
 * fingerprints; the study's runs, docs/STUDY.md section 10). Under another kernel set (a library
 * caller on an AVX-512 machine gets SkylakeX, with small-matrix kernels per orientation) that is not
 * promised. */
static void sgemm_stored(const float *A, int ta, const float *B, int tb, float *C, size_t m, size_t n2, size_t k,
                         float beta) {
  /* ufp4_sgemm_abt, _ab and _atb, in pieces when the product has few tiles (sgemm_internal.h). */
  if (!ta && !tb) ufp4_sgemm_pieces(UFP4_GEMM_N, UFP4_GEMM_T, m, n2, k, 1.0f, A, k, B, k, beta, C, n2);
  else if (!ta) ufp4_sgemm_pieces(UFP4_GEMM_N, UFP4_GEMM_N, m, n2, k, 1.0f, A, k, B, n2, beta, C, n2);
  else ufp4_sgemm_pieces(UFP4_GEMM_T, UFP4_GEMM_N, m, n2, k, 1.0f, A, m, B, n2, beta, C, n2);
}

/* 1 when GEMM g's operands are rounded in their stored layouts, no transposed copy made (prepare's
 * keep): bf16 rounds elementwise, and 4-bit quantizes a transposed operand along its stored
 * columns (ufp4_fake_quant_t). Not for C = A^T B^T, which gemm.h has no orientation for; not with
 * the probe, which compares with products of transposed copies; not with an SR prescale, which
 * prepare applies to a copy. */
static int keeps_layout(const ufp4_linear_ctx *ctx, ufp4_gemm_kind g, int ta, int tb) {
  const ufp4_precision p = gemm_precision(ctx, g);
  return (p == UFP4_PREC_BF16 || (p == UFP4_PREC_FP4 && ctx->recipe->sr_prescale == 1.0f)) && !(ta && !tb) &&
         !ctx->probe;
}

/* 1 when GEMM g rounds its operands to bf16 in the packing of its own GEMM (ufp4_sgemm_packed):
 * a bf16 GEMM in a stored orientation, no probe, and the packed GEMM in use (ufp4_pgemm_in_use). */
static int rounds_while_packing(const ufp4_linear_ctx *ctx, ufp4_gemm_kind g, int ta, int tb) {
  return gemm_precision(ctx, g) == UFP4_PREC_BF16 && !ctx->probe && !(ta && !tb) && ufp4_pgemm_in_use();
}

/* Adds the seconds since *t0 to the layer's prepare (prepare = 1) or gemm timer, when timed; *t0 moves on. */
static void lap(const ufp4_linear_ctx *ctx, double *t0, int prepare) {
  if (!ctx->times) return;
  double t = ufp4_now_s();
  *(prepare ? &ctx->times->prepare : &ctx->times->gemm) += t - *t0;
  *t0 = t;
}

/* C [m, n2] (+)= A' B'^T where A' is A [m, k] (or A^T when ta) and B' likewise, each rounded by the
 * recipe as operands opa and opb of GEMM g. An operand shared by several projections
 * (ufp4_linear_*_shared) comes prepared: a_ready or b_ready is then A' or B', and A or B is not
 * read. A' is prepared at scratch[0 .. m k), B' after it unless it is shared. */
static int gemm(const ufp4_linear_ctx *ctx, ufp4_gemm_kind g, ufp4_operand opa, const float *A, int ta,
                ufp4_operand opb, const float *B, int tb, float *C, size_t m, size_t n2, size_t k, float beta,
                float *scratch, const float *a_ready, const float *b_ready) {
  double t0 = ctx->times ? ufp4_now_s() : 0.0;
  const ufp4_precision p = gemm_precision(ctx, g);
  if (p == UFP4_PREC_FP32 && !(ta && !tb)) {
    /* No rounding: the stored operands feed the GEMM directly, in their natural orientation. */
    sgemm_stored(A, ta, B, tb, C, m, n2, k, beta);
    lap(ctx, &t0, 0);
    return 0;
  }
  if (rounds_while_packing(ctx, g, ta, tb)) {
    /* bf16 rounding in the GEMM's own packing: no rounded copy is written (sgemm_internal.h). The
     * bits of the copy path below: rounding is elementwise (and idempotent, so an operand that a
     * shared call rounded already may be rounded again), and the packed GEMM gives
     * ufp4_sgemm_pieces' bits (tests/test_pgemm.c, test_train's fingerprints). */
    const ufp4_gemm_trans oa = ta ? UFP4_GEMM_T : UFP4_GEMM_N, ob = tb ? UFP4_GEMM_N : UFP4_GEMM_T;
    if (ufp4_sgemm_packed(oa, ob, m, n2, k, A, ta ? m : k, B, tb ? n2 : k, beta, C, n2, UFP4_PACK_BF16) == 0) {
      lap(ctx, &t0, 0);
      return 0;
    }
  }
  const float *a = a_ready ? a_ready : scratch, *b = b_ready ? b_ready : scratch + m * k;
  const int keep = keeps_layout(ctx, g, ta, tb); /* a and b then in A's and B's layouts */
  int rc;
  if (p == UFP4_PREC_FP32) { /* A^T B^T: not an orientation gemm.h has */
    ufp4_transpose(A, scratch, k, m);
    memcpy(scratch + m * k, B, n2 * k * sizeof *scratch);
  } else if ((!a_ready && (rc = prepare(ctx, opa, A, ta, keep, m, k, scratch))) ||
             (!b_ready && (rc = prepare(ctx, opb, B, tb, keep, n2, k, scratch + m * k)))) {
    return rc;
  }
  if (ctx->probe && ctx->probe->gemm && p != UFP4_PREC_FP32 &&
      (rc = probe_gemm(ctx, g, A, ta, B, tb, m, n2, k, a, b)))
    return rc;
  lap(ctx, &t0, 1);
  sgemm_stored(a, keep && ta, b, keep && tb, C, m, n2, k, beta);
  lap(ctx, &t0, 0);
  return 0;
}

/* 1 when operand op, read by every projection of ctx[0 .. n_proj-1], is rounded to the same bits in
 * each: the same recipe, precision and RHT signs, no probe (it reports each projection's operand),
 * and not stochastic rounding, whose bits come from each projection's own stream. */
static int shares(const ufp4_linear_ctx *ctx, int n_proj, ufp4_operand op) {
  const ufp4_gemm_kind g = ufp4_operand_gemm(op);
  const ufp4_precision p = gemm_precision(&ctx[0], g);
  if (p == UFP4_PREC_FP32 || ctx[0].probe) return 0;
  /* Rounded while packed, in each projection's GEMM: nothing to prepare once. */
  if (rounds_while_packing(&ctx[0], g, op == UFP4_OP_WGRAD_X, op == UFP4_OP_WGRAD_X)) return 0;
  if (p == UFP4_PREC_FP4 && ufp4_round_is_stochastic(ufp4_recipe_operand_format(ctx[0].recipe, op).round)) return 0;
  for (int i = 1; i < n_proj; i++)
    if (gemm_precision(&ctx[i], g) != p || ctx[i].recipe != ctx[0].recipe || ctx[i].rht_signs != ctx[0].rht_signs ||
        ctx[i].probe)
      return 0;
  return 1;
}

int ufp4_linear_forward_shared(const ufp4_linear_ctx *ctx, int n_proj, const float *X, const float *const *W,
                               float *const *Y, size_t n, size_t in, const size_t *out, float *scratch) {
  int rc;
  if (!shares(ctx, n_proj, UFP4_OP_FPROP_X)) {
    for (int i = 0; i < n_proj; i++)
      if ((rc = ufp4_linear_forward(&ctx[i], X, W[i], Y[i], n, in, out[i], scratch))) return rc;
    return 0;
  }
  /* X' [n, in] at the start of the scratch, as gemm() lays out its first operand. */
  double t0 = ctx[0].times ? ufp4_now_s() : 0.0;
  if ((rc = prepare(&ctx[0], UFP4_OP_FPROP_X, X, 0, 0, n, in, scratch))) return rc;
  lap(&ctx[0], &t0, 1);
  for (int i = 0; i < n_proj; i++)
    if ((rc = gemm(&ctx[i], UFP4_FPROP, UFP4_OP_FPROP_X, X, 0, UFP4_OP_FPROP_W, W[i], 0, Y[i], n, out[i], in, 0.0f,
                   scratch, scratch, NULL)))
      return rc;
  return 0;
}

int ufp4_linear_backward_shared(const ufp4_linear_ctx *ctx, int n_proj, const float *const *dY, const float *X,
                                const float *const *W, float *dX, float *const *dW, size_t n, size_t in,
                                const size_t *out, float *scratch) {
  int rc;
  if (!shares(ctx, n_proj, UFP4_OP_WGRAD_X)) {
    for (int i = 0; i < n_proj; i++)
      if ((rc = ufp4_linear_backward(&ctx[i], dY[i], X, W[i], dX, dW[i], n, in, out[i], scratch))) return rc;
    return 0;
  }
  /* Dgrad of every projection first, accumulating into dX in projection order as the unshared
   * calls do; then Wgrad, dW_i [out_i, in] += A_i B^T with A_i = dY_i^T [out_i, n] and the shared
   * B = X^T [in, n], prepared once after room for the largest A_i. */
  if (dX)
    for (int i = 0; i < n_proj; i++)
      if ((rc = ufp4_linear_dgrad(&ctx[i], dY[i], W[i], dX, n, in, out[i], scratch))) return rc;
  size_t out_max = 0;
  for (int i = 0; i < n_proj; i++) out_max = out[i] > out_max ? out[i] : out_max;
  float *xt = scratch + out_max * n;
  double t0 = ctx[0].times ? ufp4_now_s() : 0.0;
  /* In X's own layout [n, in] when Wgrad keeps layouts (the same for every projection: shares()). */
  if ((rc = prepare(&ctx[0], UFP4_OP_WGRAD_X, X, 1, keeps_layout(&ctx[0], UFP4_WGRAD, 1, 1), in, n, xt))) return rc;
  lap(&ctx[0], &t0, 1);
  for (int i = 0; i < n_proj; i++)
    if ((rc = gemm(&ctx[i], UFP4_WGRAD, UFP4_OP_WGRAD_DY, dY[i], 1, UFP4_OP_WGRAD_X, X, 1, dW[i], out[i], in, n, 1.0f,
                   scratch, NULL, xt)))
      return rc;
  return 0;
}

int ufp4_linear_forward(const ufp4_linear_ctx *ctx, const float *X, const float *W, float *Y, size_t n,
                        size_t in, size_t out, float *scratch) {
  return gemm(ctx, UFP4_FPROP, UFP4_OP_FPROP_X, X, 0, UFP4_OP_FPROP_W, W, 0, Y, n, out, in, 0.0f, scratch, NULL, NULL);
}

int ufp4_linear_dgrad(const ufp4_linear_ctx *ctx, const float *dY, const float *W, float *dX, size_t n, size_t in,
                      size_t out, float *scratch) {
  return gemm(ctx, UFP4_DGRAD, UFP4_OP_DGRAD_DY, dY, 0, UFP4_OP_DGRAD_W, W, 1, dX, n, in, out, 1.0f, scratch, NULL,
              NULL);
}

int ufp4_linear_wgrad(const ufp4_linear_ctx *ctx, const float *dY, const float *X, float *dW, size_t n, size_t in,
                      size_t out, float *scratch) {
  return gemm(ctx, UFP4_WGRAD, UFP4_OP_WGRAD_DY, dY, 1, UFP4_OP_WGRAD_X, X, 1, dW, out, in, n, 1.0f, scratch, NULL,
              NULL);
}

int ufp4_linear_backward(const ufp4_linear_ctx *ctx, const float *dY, const float *X, const float *W,
                         float *dX, float *dW, size_t n, size_t in, size_t out, float *scratch) {
  int rc;
  if (dX && (rc = ufp4_linear_dgrad(ctx, dY, W, dX, n, in, out, scratch))) return rc;
  return ufp4_linear_wgrad(ctx, dY, X, dW, n, in, out, scratch);
}
