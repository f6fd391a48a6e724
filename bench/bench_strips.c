/* What quantizing a 4-bit operand inside a GEMM's packing could save (docs/PERFORMANCE.md,
 * "Quantize while packing, 4-bit: measured, not built").
 *
 * Today the linear layer quantizes an operand into a full tensor, and OpenBLAS then packs that
 * tensor into its panels. Quantizing while packing (BLIS-style) would instead quantize each run of
 * rows the packing takes (12 rows of C at a time in OpenBLAS's driver: 3 x UNROLL_N) into a small
 * buffer that stays in cache, and pack from there. The arithmetic is the same; what it removes is
 * the write of the quantized tensor and its re-read by the packing. This bench measures both:
 *  - the write: the quantizer's own band kernel (quant_internal.h) run over the tensor as
 *    ufp4_fake_quant runs it, writing the full tensor, against the same kernel run on 12-row
 *    strips that all write into one reused buffer. Both produce the same values (checked, strip by
 *    strip, against the full tensor), so the difference is where the results go;
 *  - the re-read: right after the full tensor is written, copying it strip by strip into a small
 *    buffer (what packing it costs in reads), against copying the hot strip as many times.
 * One thread, as each thread packs its own panels. The GEMM that would consume the operand
 * (ufp4_sgemm_abt, the operand against a weight of `out` rows) is timed too, to put the saving in
 * proportion. */
#include "bench_strips.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "quant/quant_internal.h"
#include "ufp4/error.h"
#include "ufp4/gemm.h"
#include "ufp4/grid.h"
#include "ufp4/parallel.h"
#include "ufp4/synth.h"

#define STRIP_ROWS 12 /* rows of C per run of OpenBLAS's N-side packing (3 x UNROLL_N) */

typedef struct {
  size_t rows, k, out;
  const char *what;
} strip_shape;

/* The study's q/k/v (d = 64) and down (ffn 192) operands, and llm.c's (d = 384, ffn 1536). */
static const strip_shape shapes[] = {
    {1024, 64, 64, "16x64 q,k,v X"},
    {1024, 192, 64, "16x64 down X"},
    {1024, 384, 384, "llmc q,k,v X"},
    {1024, 1536, 384, "llmc down X"},
};

typedef struct {
  ufp4_qjob job;
  int sr;
  uint32_t *rb; /* random bits of one band or strip */
} strip_ctx;

/* Rows [r0, r0 + h) of the job's tensor through the band kernel, written at out (row stride cols). */
static void quantize_rows(strip_ctx *c, size_t r0, size_t h, float *out) {
  ufp4_qjob j = c->job;
  const size_t cols = j.cols;
  j.y = out;
  if (c->sr) j.k->fill_rbits(j.f->seed, j.f->stream, (uint64_t)(r0 * cols), h * cols, c->rb);
  /* r0 = 0: the kernel addresses its output (and scale indices, unused here) from the band's first
   * row; the input and the random bits are the band's own. */
  j.k->band(&j, j.x + r0 * cols, c->sr ? c->rb : NULL, 0, h, 0, 0);
}

static void full_pass(strip_ctx *c, float *y) {
  const size_t cols = c->job.cols, band = cols >= UFP4_Q_BAND_ELEMS ? 1 : UFP4_Q_BAND_ELEMS / cols;
  for (size_t r0 = 0; r0 < c->job.rows; r0 += band)
    quantize_rows(c, r0, c->job.rows - r0 < band ? c->job.rows - r0 : band, y + r0 * cols);
}

static void strip_pass(strip_ctx *c, float *strip) {
  for (size_t r0 = 0; r0 < c->job.rows; r0 += STRIP_ROWS)
    quantize_rows(c, r0, c->job.rows - r0 < STRIP_ROWS ? c->job.rows - r0 : STRIP_ROWS, strip);
}

/* Copies the job's rows strip by strip from src (the full tensor: row r0 at src + r0 cols) or,
 * when hot, from the one strip buffer, into dst: the reads a packing of it makes. */
static void copy_strips(const strip_ctx *c, const float *src, int hot, float *dst) {
  const size_t cols = c->job.cols;
  for (size_t r0 = 0; r0 < c->job.rows; r0 += STRIP_ROWS) {
    const size_t h = c->job.rows - r0 < STRIP_ROWS ? c->job.rows - r0 : STRIP_ROWS;
    memcpy(dst, hot ? src : src + r0 * cols, h * cols * sizeof *dst);
    __asm__ volatile("" : : "r"(dst) : "memory"); /* each copy is observable */
  }
}

/* 0 when every strip equals its rows of the full tensor y. */
static int strips_match(strip_ctx *c, const float *y, float *strip) {
  const size_t cols = c->job.cols;
  for (size_t r0 = 0; r0 < c->job.rows; r0 += STRIP_ROWS) {
    const size_t h = c->job.rows - r0 < STRIP_ROWS ? c->job.rows - r0 : STRIP_ROWS;
    quantize_rows(c, r0, h, strip);
    if (memcmp(strip, y + r0 * cols, h * cols * sizeof *y)) return -1;
  }
  return 0;
}

static int one_shape(const strip_shape *s, int sr, int reps, FILE *out, cJSON *arr) {
  const size_t n = s->rows * s->k;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *w = malloc(s->out * s->k * sizeof *w);
  float *c = malloc(s->rows * s->out * sizeof *c), *strip = malloc(STRIP_ROWS * s->k * sizeof *strip);
  float *copy = malloc(STRIP_ROWS * s->k * sizeof *copy);
  uint32_t *rb = malloc((UFP4_Q_BAND_ELEMS + STRIP_ROWS * s->k) * sizeof *rb);
  double *t = malloc(5 * (size_t)reps * sizeof *t);
  int rc = 0;
  if (!x || !y || !w || !c || !strip || !copy || !rb || !t) {
    rc = ufp4_fail(UFP4_ENOMEM, "out of memory for the strips");
    goto done;
  }
  ufp4_synth_spec spec = ufp4_synth_default(UFP4_DIST_GAUSSIAN, 7);
  if ((rc = ufp4_synth_fill(&spec, x, n)) || (rc = ufp4_synth_fill(&spec, w, s->out * s->k))) goto done;
  ufp4_qformat f = ufp4_qformat_default();
  f.round = sr ? UFP4_ROUND_SR : UFP4_ROUND_RNE;
  f.seed = 1;
  strip_ctx ctx = {.sr = sr, .rb = rb};
  memset(&ctx.job, 0, sizeof ctx.job);
  ctx.job.f = &f;
  ctx.job.g = ufp4_grid_get(f.grid);
  ctx.job.rows = s->rows;
  ctx.job.cols = s->k;
  ctx.job.x = x;
  ctx.job.k = ufp4_q_kernels_pick();
  ctx.job.s_enc = 1.0f;
  for (int e = 0; e < 16; e++) ctx.job.dec[e] = ufp4_decode(ctx.job.g, (uint8_t)e);
  full_pass(&ctx, y);
  if (strips_match(&ctx, y, strip)) {
    rc = ufp4_fail(UFP4_EINVAL, "a strip of %s differs from the full tensor", s->what);
    goto done;
  }
  ufp4_sgemm_abt(y, w, c, s->rows, s->out, s->k, 0.0f); /* warm-up */
  for (int r = 0; r < reps; r++) { /* all five in alternation; the full tensor's re-read right after its write */
    double t0 = bench_now_s();
    full_pass(&ctx, y);
    double t1 = bench_now_s();
    copy_strips(&ctx, y, 0, copy);
    double t2 = bench_now_s();
    strip_pass(&ctx, strip);
    double t3 = bench_now_s();
    copy_strips(&ctx, strip, 1, copy);
    double t4 = bench_now_s();
    ufp4_sgemm_abt(y, w, c, s->rows, s->out, s->k, 0.0f);
    t[r] = t1 - t0;
    t[reps + r] = t2 - t1;
    t[2 * reps + r] = t3 - t2;
    t[3 * reps + r] = t4 - t3;
    t[4 * reps + r] = bench_now_s() - t4;
  }
  const double tf = bench_median(t, reps), trf = bench_median(t + reps, reps), ts = bench_median(t + 2 * reps, reps);
  const double trs = bench_median(t + 3 * reps, reps), tg = bench_median(t + 4 * reps, reps);
  const double save = (tf - ts) + (trf - trs);
  fprintf(out, "  %-14s %4zu x %-4zu %-3s %8.1f %8.1f %8.1f %8.1f %8.3f %9.1f %7.1f%%\n", s->what, s->rows, s->k,
          sr ? "SR" : "RNE", 1e6 * tf, 1e6 * ts, 1e6 * trf, 1e6 * trs, 1e9 * save / (double)n, 1e6 * tg,
          100.0 * save / tg);
  if (arr) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "operand", s->what);
    cJSON_AddNumberToObject(o, "rows", (double)s->rows);
    cJSON_AddNumberToObject(o, "k", (double)s->k);
    cJSON_AddNumberToObject(o, "out", (double)s->out);
    cJSON_AddStringToObject(o, "round", sr ? "sr" : "rne");
    cJSON_AddNumberToObject(o, "full_s", tf);
    cJSON_AddNumberToObject(o, "strips_s", ts);
    cJSON_AddNumberToObject(o, "reread_full_s", trf);
    cJSON_AddNumberToObject(o, "reread_strip_s", trs);
    cJSON_AddNumberToObject(o, "gemm_s", tg);
  }
done:
  free(x);
  free(y);
  free(w);
  free(c);
  free(strip);
  free(copy);
  free(rb);
  free(t);
  return rc;
}

int ufp4_bench_quant_strips(int reps, FILE *out, cJSON *arr) {
  const int threads = omp_get_max_threads();
  ufp4_set_threads(1);
  fprintf(out, "\nquantize while packing, what it would save: one thread, e2m1 1x16 fp32 scale. Write: the band kernel\n"
               "writing the full tensor vs %d-row strips into one reused buffer (same values, checked). Re-read: the\n"
               "full tensor, just written, copied strip by strip into a small buffer vs the hot strip copied as often.\n"
               "Saved = both differences; the GEMM that reads the operand (against a weight of `out` rows) for scale\n",
          STRIP_ROWS);
  fprintf(out, "  %-14s %-11s %-3s %8s %8s %8s %8s %8s %9s %8s\n", "operand", "shape", "", "full us", "strip us",
          "reread", "hot", "ns/elem", "GEMM us", "of GEMM");
  int rc = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes && !rc; i++)
    for (int sr = 0; sr < 2 && !rc; sr++) rc = one_shape(&shapes[i], sr, reps, out, arr);
  ufp4_set_threads(threads);
  return rc;
}
