/* Block-scaled 4-bit quantization: the scalar reference of quant.h.
 *
 * Work is split into bands of rows (whole rows of about UFP4_Q_BAND_ELEMS elements for 1xN blocks,
 * 16 rows for 2D tiles). Every block
 * lies inside one band and every random number is addressed by (seed, stream, r*cols + c), so a
 * band's result does not depend on which thread runs it: the output is identical for any thread
 * count. The only cross-band quantity, NVFP4's tensor amax, is a max (exact in any order).
 *
 * Policies beyond the header text:
 *   - Dequantization saturates to +-FLT_MAX. With a power-of-two scale near the top of the range
 *     (E8M0 CEIL/EVEN/RCEIL on amax > 2^127), code * scale can be 2^128, which fp32 cannot hold;
 *     saturating keeps the header's promise that finite inputs never produce Inf.
 *   - NVFP4: if the encode factor 1/(d/S_enc) overflows (d/S_enc subnormal, only for tensors with
 *     amax below ~1e-36), t = x / (d/S_enc) is used instead, so that the block is not saturated
 *     wholesale by an infinite factor.
 *
 * This file knows no instruction set: a job runs the steps of a kernel family (ufp4_q_kernels),
 * and the family defined here, ufp4_q_reference_kernels, is the specification. dispatch.c picks
 * the family of ufp4_quantize and ufp4_fake_quant (the AVX2 one of x86/quant_avx2.c on CPUs with
 * AVX2 and FMA unless UFP4_NO_SIMD=1); ufp4_quantize_reference and ufp4_fake_quant_reference
 * always run this one, and tests/test_quant_simd.c compares the two. */
#include "quant/quant_internal.h"
#include "ufp4/error.h"
#include "ufp4/minifloat.h"
#include "ufp4/philox.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

blk_scale ufp4_q_block_scale(const ufp4_qjob *j, float amax, int bad) {
  return ufp4_q_block_scale_to(j, amax, bad, j->g);
}

blk_scale ufp4_q_block_scale_to(const ufp4_qjob *j, float amax, int bad, const ufp4_grid *gt) {
  blk_scale s = {BLK_ZERO, 0.0f, 0.0f, 0};
  const float g_max = gt->g_max;
  switch (j->f->scale) {
  case UFP4_SCALE_FP32:
    if (bad) {
      s.mode = BLK_NAN;
      s.scale = NAN;
      return s;
    }
    s.scale = amax / g_max;
    /* amax = 0, or amax so small that s underflows: stored as all-zero with s = 0. */
    s.mode = s.scale == 0.0f ? BLK_ZERO : BLK_DIV;
    return s;
  case UFP4_SCALE_NVFP4: {
    if (bad) {
      s.mode = BLK_NAN;
      s.scale = NAN;
      s.bits = 0x7F;
      return s;
    }
    s.bits = ufp4_f32_to_e4m3(amax * j->s_enc / g_max);
    float d = ufp4_e4m3_to_f32(s.bits);
    if (d == 0.0f) {
      s.mode = BLK_ZERO;
      s.scale = 0.0f;
      return s;
    }
    s.scale = d / j->s_enc;
    s.enc = 1.0f / s.scale;
    s.mode = isinf(s.enc) ? BLK_DIV : BLK_MUL;
    return s;
  }
  default: {
    ufp4_e8m0_rule rule = (ufp4_e8m0_rule)(j->f->scale - UFP4_SCALE_E8M0_FLOOR);
    if (bad) {
      s.mode = BLK_NAN;
      s.scale = NAN;
      s.bits = 0xFF;
      return s;
    }
    s.bits = ufp4_e8m0_scale(amax, gt, rule);
    if (s.bits == 0xFF) { /* cannot happen for a finite amax; kept so a NaN is never lost */
      s.mode = BLK_NAN;
      s.scale = NAN;
      return s;
    }
    s.scale = ldexpf(1.0f, (int)s.bits - 127);
    s.enc = ldexpf(1.0f, 127 - (int)s.bits); /* exact: 2^-127 .. 2^127 are all fp32 values */
    s.mode = amax == 0.0f ? BLK_ZERO : BLK_MUL;
    return s;
  }
  }
}

/* The 32 random bits of n consecutive elements starting at linear index idx0. */
static void fill_rbits_ref(uint64_t seed, uint64_t stream, uint64_t idx0, size_t n, uint32_t *out) {
  uint64_t quad = idx0 >> 2;
  unsigned off = (unsigned)(idx0 & 3u);
  uint32_t w[4];
  size_t i = 0;
  while (i < n) {
    ufp4_philox_quad(seed, stream, quad++, w);
    for (unsigned k = off; k < 4 && i < n; k++) out[i++] = w[k];
    off = 0;
  }
}

/* 4/6's error of the block quantized with the ordinary scale s (quant.h): element i of the block
 * (row-major) goes to partial sum i mod 8. */
static float candidate_error(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t h,
                             size_t w, blk_scale s) {
  const ufp4_adaptive_metric m = j->f->metric;
  float lane[8] = {0};
  size_t e = 0;
  for (size_t i = 0; i < h; i++) {
    const float *p = src + i * j->cols;
    const uint32_t *rr = rb ? rb + i * j->cols : NULL;
    for (size_t k = 0; k < w; k++, e++) {
      float t = s.mode == BLK_MUL ? p[k] * s.enc : p[k] / s.scale;
      uint8_t code = ufp4_encode(j->g, t, j->f->round, rr ? rr[k] : 0u);
      float y = ufp4_q_dequant_value(j->dec[code], s.scale);
      lane[e % 8] = ufp4_q_err_add(lane[e % 8], ufp4_q_err_term(y - p[k], m), m);
    }
  }
  return ufp4_q_err_reduce(lane, m);
}

/* One block of h rows x w cols. src/rb are band-local (row stride cols), starting at the block's
 * first row and column; r0, c0 are the block's global coordinates. */
void ufp4_q_do_block(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t c0,
                     size_t h, size_t w, size_t sidx) {
  const size_t cols = j->cols;
  float amax = 0.0f;
  int bad = 0;
  for (size_t i = 0; i < h; i++) {
    const float *p = src + i * cols;
    for (size_t k = 0; k < w; k++) {
      float a = fabsf(p[k]);
      bad |= !(a <= FLT_MAX);
      amax = a > amax ? a : amax;
    }
  }
  blk_scale s = ufp4_q_block_scale(j, amax, bad);
  int four = 0;
  if (j->g4) {
    blk_scale s4 = ufp4_q_block_scale_to(j, amax, bad, j->g4);
    if (ufp4_q_adaptive_applies(j, s, s4) &&
        candidate_error(j, src, rb, h, w, s4) < candidate_error(j, src, rb, h, w, s)) {
      s = s4;
      four = 1;
    }
  }
  if (j->four) j->four[sidx] = (uint8_t)four;
  if (j->scales) j->scales[sidx] = s.scale;
  if (j->scale_bits) j->scale_bits[sidx] = s.bits;

  const ufp4_grid *g = j->g;
  const ufp4_round_mode mode = j->f->round;
  for (size_t i = 0; i < h; i++) {
    const float *p = src + i * cols;
    const uint32_t *rr = rb ? rb + i * cols : NULL;
    size_t o = (r0 + i) * cols + c0;
    uint8_t *cd = j->codes ? j->codes + o : NULL;
    float *yy = j->y ? j->y + o : NULL;
    if (s.mode == BLK_ZERO || s.mode == BLK_NAN) {
      float v = ufp4_q_dequant_value(0.0f, s.scale);
      for (size_t k = 0; k < w; k++) {
        if (cd) cd[k] = 0;
        if (yy) yy[k] = v;
      }
      continue;
    }
    for (size_t k = 0; k < w; k++) {
      float t = s.mode == BLK_MUL ? p[k] * s.enc : p[k] / s.scale;
      uint8_t code = ufp4_encode(g, t, mode, rr ? rr[k] : 0u);
      if (cd) cd[k] = code;
      if (yy) yy[k] = ufp4_q_dequant_value(j->dec[code], s.scale);
    }
  }
}

static float amax_finite_ref(const float *p, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; i++) {
    float a = fabsf(p[i]);
    if (a <= FLT_MAX && a > amax) amax = a;
  }
  return amax;
}

/* The band's blocks one by one; the reference never fuses the RHT (fuses_rht16 is 0). */
static void band_ref(const ufp4_qjob *j, const float *src, const uint32_t *rb, size_t r0, size_t h,
                     size_t bi, int fused_rht16) {
  (void)fused_rht16;
  const ufp4_qformat *f = j->f;
  const size_t bw = f->tile2d ? (size_t)f->tile2d : (size_t)f->block;
  const size_t nbc = (j->cols + bw - 1) / bw; /* blocks per band row */
  /* Tiles: one row of h x bw tiles. 1-D blocks: h rows of 1 x bw blocks. */
  const size_t rows = f->tile2d ? 1 : h, bh = f->tile2d ? h : 1;
  for (size_t i = 0; i < rows; i++)
    for (size_t b = 0; b < nbc; b++) {
      size_t c0 = b * bw, o = i * j->cols + c0;
      size_t w = j->cols - c0 < bw ? j->cols - c0 : bw;
      size_t sidx = f->tile2d ? bi * nbc + b : (r0 + i) * nbc + b;
      ufp4_q_do_block(j, src + o, rb ? rb + o : NULL, r0 + i, c0, bh, w, sidx);
    }
}

/* No fused RHT16 (amax_finite_rht16 NULL, fuses_rht16 0) and the scalar FWHT (rht_simd 0). */
const ufp4_q_kernels ufp4_q_reference_kernels = {
    .amax_finite = amax_finite_ref, .fill_rbits = fill_rbits_ref, .band = band_ref};

/* amax over the finite values of the (rotated) tensor, for NVFP4's S_enc. */
static int tensor_amax(const ufp4_qjob *j, float *out) {
  const ufp4_qformat *f = j->f;
  const ufp4_q_kernels *k = j->k;
  const size_t rows = j->rows, cols = j->cols;
  const int fused = f->rht == 16 && k->amax_finite_rht16;
  float amax = 0.0f;
  int fail = 0;
#pragma omp parallel
  {
    float *buf = f->rht ? malloc(cols * sizeof(float)) : NULL;
    int ok = !f->rht || buf;
    float local = 0.0f;
#pragma omp for schedule(static)
    for (size_t r = 0; r < rows; r++) {
      if (!ok) continue;
      const float *p = j->x + r * cols;
      float a;
      if (fused) {
        a = k->amax_finite_rht16(p, cols, f->rht_signs);
      } else {
        if (f->rht) {
          memcpy(buf, p, cols * sizeof(float));
          ufp4_rht_rows_serial(buf, 1, cols, f->rht, f->rht_signs, k->rht_simd);
          p = buf;
        }
        a = k->amax_finite(p, cols);
      }
      if (a > local) local = a;
    }
#pragma omp critical(ufp4_quant_amax)
    {
      if (!ok) fail = 1;
      if (local > amax) amax = local;
    }
    free(buf);
  }
  if (fail) return ufp4_fail(UFP4_ENOMEM, "quantize: out of memory for the RHT row buffer");
  *out = amax;
  return 0;
}

/* NVFP4's S_enc from the tensor amax. 4/6 maps the amax to 256 (not 448) in E4M3 so that the
 * 4-candidate still fits (quant.h). */
static void set_s_enc(ufp4_qjob *j, float amax) {
  const float top = j->f->adaptive == UFP4_ADAPTIVE_4OVER6 ? UFP4_4OVER6_E4M3_TOP : UFP4_E4M3_MAX;
  float s_enc = top * j->g->g_max / amax;
  j->s_enc = (amax == 0.0f || !isfinite(s_enc)) ? 1.0f : s_enc;
}

static int run_job(ufp4_qjob *j) {
  const ufp4_qformat *f = j->f;
  const size_t rows = j->rows, cols = j->cols;
  if (rows == 0 || cols == 0) return 0;
  for (int c = 0; c < 16; c++) j->dec[c] = ufp4_decode(j->g, (uint8_t)c);

  j->s_enc = 1.0f;
  if (f->scale == UFP4_SCALE_NVFP4) {
    float amax = 0.0f;
    int rc = tensor_amax(j, &amax);
    if (rc) return rc;
    set_s_enc(j, amax);
  }

  /* A band is one row of 2D tiles, or a run of whole rows of 1-D blocks holding about
   * UFP4_Q_BAND_ELEMS elements: at d_model = 64 a row holds 4 blocks, too little work for a
   * kernel call, a buffer refill and a loop iteration each. Bands only divide the work; every
   * value is addressed by its own row and column, so the band size never changes a bit. */
  const size_t band = f->tile2d ? (size_t)f->tile2d : (cols >= UFP4_Q_BAND_ELEMS ? 1 : UFP4_Q_BAND_ELEMS / cols);
  const size_t nbands = (rows + band - 1) / band;
  const int sr = ufp4_round_is_stochastic(f->round);
  const ufp4_q_kernels *k = j->k;
  const int fused = k->fuses_rht16 && f->rht == 16 && !f->tile2d && f->block == 16;
  const int rotate = f->rht && !fused;
  int fail = 0;

#pragma omp parallel
  {
    float *buf = rotate ? malloc(band * cols * sizeof(float)) : NULL;
    uint32_t *rb = sr ? malloc(band * cols * sizeof(uint32_t)) : NULL;
    int ok = (!rotate || buf) && (!sr || rb);
#pragma omp for schedule(static)
    for (size_t bi = 0; bi < nbands; bi++) {
      if (!ok) continue;
      size_t r0 = bi * band;
      size_t h = rows - r0 < band ? rows - r0 : band;
      const float *src = j->x + r0 * cols;
      if (rotate) {
        memcpy(buf, src, h * cols * sizeof(float));
        ufp4_rht_rows_serial(buf, h, cols, f->rht, f->rht_signs, k->rht_simd);
        src = buf;
      }
      if (sr) k->fill_rbits(f->seed, f->stream, (uint64_t)(r0 * cols), h * cols, rb);
      k->band(j, src, sr ? rb : NULL, r0, h, bi, fused);
    }
#pragma omp critical(ufp4_quant_fail)
    {
      if (!ok) fail = 1;
    }
    free(buf);
    free(rb);
  }
  if (fail) return ufp4_fail(UFP4_ENOMEM, "quantize: out of memory for per-thread buffers");
  return 0;
}

/* A job over x (rows x cols) in format f with kernels k; the caller sets its outputs. */
static ufp4_qjob job_of(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                        const ufp4_q_kernels *k) {
  ufp4_qjob j;
  memset(&j, 0, sizeof j);
  j.f = f;
  j.g = ufp4_grid_get(f->grid);
  j.rows = rows;
  j.cols = cols;
  j.x = x;
  j.k = k;
  if (f->adaptive == UFP4_ADAPTIVE_4OVER6) j.g4 = ufp4_grid_get(UFP4_GRID_E2M1_MAX4);
  return j;
}

int ufp4_q_quantize(const ufp4_qformat *f, const float *x, size_t rows, size_t cols, ufp4_qtensor *q,
                    const ufp4_q_kernels *k) {
  if (!q) return ufp4_fail(UFP4_EINVAL, "quantize: NULL output tensor");
  memset(q, 0, sizeof *q);
  int rc = ufp4_qformat_check(f, rows, cols);
  if (rc) return rc;
  size_t n = rows * cols;
  if (n && !x) return ufp4_fail(UFP4_EINVAL, "quantize: NULL input");
  size_t ns = ufp4_scale_count(f, rows, cols);
  q->rows = rows;
  q->cols = cols;
  q->fmt = *f;
  q->tensor_scale = 1.0f;
  q->codes = malloc(n ? n : 1);
  q->scales = malloc((ns ? ns : 1) * sizeof(float));
  if (f->scale != UFP4_SCALE_FP32) q->scale_bits = malloc(ns ? ns : 1);
  if (!q->codes || !q->scales || (f->scale != UFP4_SCALE_FP32 && !q->scale_bits)) {
    ufp4_qtensor_free(q);
    return ufp4_fail(UFP4_ENOMEM, "quantize: cannot allocate a %zu x %zu quantized tensor", rows,
                     cols);
  }
  ufp4_qjob j = job_of(f, x, rows, cols, k);
  j.codes = q->codes;
  j.scales = q->scales;
  j.scale_bits = q->scale_bits;
  if (j.g4 && !(j.four = calloc(ns ? ns : 1, 1))) {
    ufp4_qtensor_free(q);
    return ufp4_fail(UFP4_ENOMEM, "quantize: cannot allocate %zu 4/6 choice flags", ns);
  }
  rc = run_job(&j);
  for (size_t b = 0; j.four && b < ns; b++) q->blocks_four += j.four[b];
  free(j.four);
  if (rc) {
    ufp4_qtensor_free(q);
    return rc;
  }
  if (f->scale == UFP4_SCALE_NVFP4) q->tensor_scale = j.s_enc;
  return 0;
}

int ufp4_quantize_reference(const ufp4_qformat *f, const float *x, size_t rows, size_t cols,
                            ufp4_qtensor *q) {
  return ufp4_q_quantize(f, x, rows, cols, q, &ufp4_q_reference_kernels);
}

void ufp4_qtensor_free(ufp4_qtensor *q) {
  if (!q) return;
  free(q->codes);
  free(q->scales);
  free(q->scale_bits);
  q->codes = NULL;
  q->scales = NULL;
  q->scale_bits = NULL;
}

void ufp4_dequantize(const ufp4_qtensor *q, float *y) {
  if (!q || !y || !q->codes || !q->scales) return;
  const ufp4_grid *g = ufp4_grid_get(q->fmt.grid);
  if (!g) return;
  float dec[16];
  for (int c = 0; c < 16; c++) dec[c] = ufp4_decode(g, (uint8_t)c);
  const size_t rows = q->rows, cols = q->cols;
  const int tile = q->fmt.tile2d;
  const size_t bw = tile ? (size_t)tile : (size_t)q->fmt.block;
  if (q->fmt.block <= 0 && !tile) return;
  const size_t nbc = (cols + bw - 1) / bw;
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const size_t srow = tile ? (r / (size_t)tile) * nbc : r * nbc;
    for (size_t c = 0; c < cols; c++) {
      size_t i = r * cols + c;
      y[i] = ufp4_q_dequant_value(dec[q->codes[i] & 0x0F], q->scales[srow + c / bw]);
    }
  }
}

int ufp4_q_fake_quant(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols,
                      const ufp4_q_kernels *k) {
  int rc = ufp4_qformat_check(f, rows, cols);
  if (rc) return rc;
  if (rows != 0 && cols != 0 && (!x || !y)) return ufp4_fail(UFP4_EINVAL, "fake_quant: NULL input or output");
  ufp4_qjob j = job_of(f, x, rows, cols, k);
  j.y = y;
  return run_job(&j);
}

int ufp4_fake_quant_reference(const ufp4_qformat *f, const float *x, float *y, size_t rows,
                              size_t cols) {
  return ufp4_q_fake_quant(f, x, y, rows, cols, &ufp4_q_reference_kernels);
}

/* dst [cols x rows] = src [rows x cols] transposed. */
static void transpose_into(const float *src, float *dst, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < cols; c++)
    for (size_t r = 0; r < rows; r++) dst[c * rows + r] = src[r * cols + c];
}

/* ufp4_fake_quant_t by its definition: quantize a transposed copy, transpose the result back. */
static int fake_quant_t_by_copy(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols,
                                const ufp4_q_kernels *k) {
  float *t = malloc(rows * cols * sizeof *t);
  if (!t) return ufp4_fail(UFP4_ENOMEM, "fake_quant_t: cannot allocate a %zu x %zu transpose", cols, rows);
  transpose_into(x, t, rows, cols);
  int rc = ufp4_q_fake_quant(f, t, t, cols, rows, k);
  if (!rc) transpose_into(t, y, cols, rows);
  free(t);
  return rc;
}

/* x [rows x cols] is the transpose of the job's tensor (cols x rows). With a kernel family that
 * quantizes columns in place (cols_band), every 8 columns form a band: their random bits are the
 * transposed tensor's rows 8 g .. 8 g + 7, drawn as the row bands of run_job draw them. */
int ufp4_q_fake_quant_t(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols,
                        const ufp4_q_kernels *k) {
  int rc = ufp4_qformat_check(f, cols, rows);
  if (rc) return rc;
  if (rows == 0 || cols == 0) return 0;
  if (!x || !y) return ufp4_fail(UFP4_EINVAL, "fake_quant_t: NULL input or output");
  const int in_columns = k->cols_band && (k->cols_rounds >> f->round & 1) && f->block == 16 && !f->tile2d &&
                         f->adaptive == UFP4_ADAPTIVE_NONE &&
                         (f->rht == 0 || f->rht == 16) && rows % 16 == 0 && cols % 8 == 0;
  if (!in_columns) return fake_quant_t_by_copy(f, x, y, rows, cols, k);
  ufp4_qjob j = job_of(f, x, cols, rows, k);
  j.y = y; /* the kernels write through their column layout; this says there is an output */
  for (int c = 0; c < 16; c++) j.dec[c] = ufp4_decode(j.g, (uint8_t)c);
  const size_t groups = cols / 8;
  j.s_enc = 1.0f;
  if (f->scale == UFP4_SCALE_NVFP4) {
    float amax = 0.0f;
    if (f->rht == 16) {
#pragma omp parallel for schedule(static) reduction(max : amax)
      for (size_t g = 0; g < groups; g++) {
        float a = k->amax_cols_rht16(x + 8 * g, cols, rows, f->rht_signs);
        amax = a > amax ? a : amax;
      }
    } else {
      amax = k->amax_finite(x, rows * cols); /* a maximum: the order of the elements is irrelevant */
    }
    set_s_enc(&j, amax);
  }
  const int sr = ufp4_round_is_stochastic(f->round);
  int fail = 0;
#pragma omp parallel
  {
    uint32_t *rb = sr ? malloc(8 * rows * sizeof *rb) : NULL;
    const int ok = !sr || rb;
#pragma omp for schedule(static)
    for (size_t g = 0; g < groups; g++) {
      if (!ok) continue;
      for (size_t b = 0; sr && b < 8; b++)
        k->fill_rbits(f->seed, f->stream, (uint64_t)((8 * g + b) * rows), rows, rb + b * rows);
      k->cols_band(&j, x + 8 * g, cols, rows, rb, y + 8 * g, f->rht == 16);
    }
#pragma omp critical(ufp4_quant_fail)
    {
      if (!ok) fail = 1;
    }
    free(rb);
  }
  return fail ? ufp4_fail(UFP4_ENOMEM, "fake_quant_t: out of memory for per-thread buffers") : 0;
}

int ufp4_fake_quant_t_reference(const ufp4_qformat *f, const float *x, float *y, size_t rows, size_t cols) {
  int rc = ufp4_qformat_check(f, cols, rows);
  if (rc) return rc;
  if (rows == 0 || cols == 0) return 0;
  if (!x || !y) return ufp4_fail(UFP4_EINVAL, "fake_quant_t: NULL input or output");
  return fake_quant_t_by_copy(f, x, y, rows, cols, &ufp4_q_reference_kernels);
}
