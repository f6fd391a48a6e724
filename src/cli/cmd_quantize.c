/* ufp4 quantize: one .npy tensor through the block quantizer, written back dequantized and,
 * optionally, as a packed self-describing file.
 *
 * Packed file layout (version 1; every integer and float little-endian):
 *   offset  size  field
 *        0     8  magic "UFP4PACK"
 *        8     4  u32 version (1)
 *       12     4  u32 header bytes (80): the scales start here
 *       16     4  u32 grid (ufp4_grid_id: 0 e2m1, 1 e1m2, 2 int4, 3-5 e2m1-max2/3/4)
 *       20     4  u32 scale kind (ufp4_scale_kind: 0 fp32, 1 nvfp4, 2-5 e8m0 floor/ceil/even/rceil)
 *       24     4  u32 block N of 1xN blocks (0 when tiled)
 *       28     4  u32 tile (0, or 16 for 16x16 tiles)
 *       32     4  u32 rht block size (0 = none; the codes are then in the rotated basis)
 *       36     4  u32 round mode (ufp4_round_mode: 0 rne, 1 rna, 2 rnz, 3 sr, 4 sr8)
 *       40     8  u64 rows
 *       48     8  u64 cols
 *       56     4  f32 tensor_scale (NVFP4's S_enc; 1 otherwise)
 *       60     4  u32 bytes per scale (4: fp32 dequantization factors; 1: E4M3 or E8M0 codes)
 *       64     8  u64 seed (stochastic rounding, and the random RHT signs)
 *       72     4  u32 rht signs (0 none, 1 random from the seed, 2 NVIDIA's fixed vector)
 *       76     4  u32 adaptive scaling: byte 0 the kind (ufp4_adaptive: 0 none, 1 4over6), byte 1
 *                  the metric (ufp4_adaptive_metric: 0 mse, 1 mae, 2 maxabs), bytes 2-3 zero. Files
 *                  written before 4/6 hold 0 here (the field was reserved), which reads as none.
 *       80        scales: ufp4_scale_count() of them, row-major over blocks
 *        ...      codes: ceil(rows*cols/2) bytes, element 2i in the low nibble, 2i+1 in the high
 * A value is decode(code) * scale, where scale is the fp32 factor, or for NVFP4
 * e4m3(byte) / tensor_scale, or for E8M0 2^(byte - 127).
 *
 * Four Over Six needs no per-block flag: the chosen candidate's scale is the block's scale (for
 * NVFP4 the E4M3 byte simply differs, as in the paper's kernels), and the value formula above is
 * the same for both candidates, so a reader dequantizes a 4/6 file exactly like a plain one. The
 * header field only records how the scales were chosen (and, for NVFP4, that tensor_scale maps
 * the tensor amax to 256 rather than 448). A flag would cost a bit per block that no consumer of
 * the values reads; the choice itself is a diagnostic (the share printed by quantize). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/qflags.h"
#include "ufp4/fileio.h"
#include "ufp4/ufp4.h"

#define PACK_HEADER_BYTES 80
#define PACK_VERSION 1

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 quantize --in x.npy --out y.npy [options]\n\n"
          "Quantizes a 2-D float32 .npy (rows x reduction dim; blocks run along each row) and writes\n"
          "the dequantized float32 .npy of the same shape. Prints elements, NMSE and SQNR.\n\n"
          "  --grid G          e2m1 (default), e1m2, int4, e2m1-max2, e2m1-max3, e2m1-max4\n"
          "  --block N         1xN blocks, N a power of two (default 16)\n"
          "  --tile2d          16x16 tiles instead of 1xN blocks (NVIDIA's weight recipe)\n"
          "  --scale K         fp32 (default), nvfp4, e8m0-floor, e8m0-ceil, e8m0-even, e8m0-rceil\n"
          "  --round M         rne (default), rna, rnz, sr, sr8\n"
          "  --rht N           rotate each row in chunks of N (0 = off, default) before quantizing.\n"
          "                    The output then STAYS IN THE ROTATED BASIS (x S H quantized), as the\n"
          "                    GEMM consumes it; NMSE is measured there (equal to the original basis's\n"
          "                    by orthogonality)\n"
          "  --unrotate        apply the inverse rotation to the output, back to the input's basis\n"
          "  --rht-signs S     random (default, Philox from --seed) or nvidia (fixed, needs --rht 16)\n"
          "  --seed S          stochastic rounding and random signs (default 0)\n"
          "  --stream N        stochastic rounding stream (default 0)\n"
          "  --adaptive A      none (default) or 4over6: Four Over Six (E2M1 with fp32, nvfp4 or e8m0-rceil\n"
          "                    scales); each block keeps the candidate (amax -> 6 or -> 4) of lower error\n"
          "  --adaptive-metric M  4over6's selection error: mse (default), mae, maxabs\n"
          "  --packed FILE     also write the codes and scales, written atomically (tmp, fsync, rename):\n"
          "      offset size field (little-endian)\n"
          "           0    8 magic \"UFP4PACK\"\n"
          "           8    4 u32 version (1)          12  4 u32 header bytes (80)\n"
          "          16    4 u32 grid id              20  4 u32 scale kind\n"
          "          24    4 u32 block N (0 if tiled) 28  4 u32 tile (0 or 16)\n"
          "          32    4 u32 rht size (0 none)    36  4 u32 round mode\n"
          "          40    8 u64 rows                 48  8 u64 cols\n"
          "          56    4 f32 tensor scale         60  4 u32 bytes per scale (4 fp32, 1 E4M3/E8M0)\n"
          "          64    8 u64 seed                 72  4 u32 rht signs (0 none, 1 random, 2 nvidia)\n"
          "          76    4 u32 adaptive: byte 0 kind (0 none, 1 4over6), byte 1 metric (0 mse 1 mae 2 maxabs)\n"
          "          80      scales, one per block, row-major over blocks\n"
          "            ...   codes, two per byte: element 2i low nibble, 2i+1 high nibble\n"
          "      grid ids: 0 e2m1 1 e1m2 2 int4 3-5 e2m1-max2/3/4; scale kinds: 0 fp32 1 nvfp4\n"
          "      2-5 e8m0 floor/ceil/even/rceil; round: 0 rne 1 rna 2 rnz 3 sr 4 sr8.\n"
          "      value = decode(code) * scale (fp32), e4m3(byte)/tensor_scale (nvfp4), 2^(byte-127) (e8m0)\n");
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(p, u);
}

/* Builds the whole image in memory and writes it atomically: a reader sees the old file or the
 * complete new one, never a torn one. */
static int write_packed(const char *path, const ufp4_qtensor *q, int signs_kind) {
  size_t n = q->rows * q->cols;
  size_t ns = ufp4_scale_count(&q->fmt, q->rows, q->cols);
  size_t sbytes = q->scale_bits ? 1 : 4;
  size_t total = PACK_HEADER_BYTES + ns * sbytes + ufp4_packed_bytes(n);
  uint8_t *img = calloc(total, 1);
  if (!img) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory for %zu bytes", path, total);
  memcpy(img, "UFP4PACK", 8);
  put_u32(img + 8, PACK_VERSION);
  put_u32(img + 12, PACK_HEADER_BYTES);
  put_u32(img + 16, (uint32_t)q->fmt.grid);
  put_u32(img + 20, (uint32_t)q->fmt.scale);
  put_u32(img + 24, q->fmt.tile2d ? 0u : (uint32_t)q->fmt.block);
  put_u32(img + 28, (uint32_t)q->fmt.tile2d);
  put_u32(img + 32, (uint32_t)q->fmt.rht);
  put_u32(img + 36, (uint32_t)q->fmt.round);
  put_u64(img + 40, q->rows);
  put_u64(img + 48, q->cols);
  put_f32(img + 56, q->tensor_scale);
  put_u32(img + 60, (uint32_t)sbytes);
  put_u64(img + 64, q->fmt.seed);
  put_u32(img + 72, (uint32_t)signs_kind);
  put_u32(img + 76, (uint32_t)q->fmt.adaptive | ((uint32_t)q->fmt.metric << 8));
  uint8_t *p = img + PACK_HEADER_BYTES;
  for (size_t i = 0; i < ns; i++) {
    if (q->scale_bits)
      *p++ = q->scale_bits[i];
    else {
      put_f32(p, q->scales[i]);
      p += 4;
    }
  }
  ufp4_pack_codes(q->codes, n, p);

  int rc = ufp4_write_file_atomic(path, img, total);
  free(img);
  return rc;
}

typedef struct {
  const char *in, *out, *packed;
  cli_qflags q;
  int unrotate;
} quant_opts;

static int parse_args(int argc, char **argv, quant_opts *o) {
  memset(o, 0, sizeof *o);
  o->q.fmt = ufp4_qformat_default();
  const unsigned accept = QF_GRID | QF_BLOCK | QF_TILE2D | QF_SCALE | QF_ROUND | QF_RHT | QF_RHT_SIGNS | QF_SEED |
                          QF_STREAM | QF_ADAPTIVE;
  for (int i = 1; i < argc; i++) {
    int r;
    if ((r = cli_qflag("quantize", accept, argc, argv, &i, &o->q))) {
    } else if ((r = cli_value(argc, argv, &i, "--in", &o->in))) {
    } else if ((r = cli_value(argc, argv, &i, "--out", &o->out))) {
    } else if ((r = cli_value(argc, argv, &i, "--packed", &o->packed))) {
    } else if (cli_flag(argv, i, "--unrotate")) {
      o->unrotate = 1;
    } else {
      fprintf(stderr, "ufp4 quantize: unknown option '%s' (ufp4 quantize --help)\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!o->in || !o->out) {
    fprintf(stderr, "ufp4 quantize: --in and --out are required (ufp4 quantize --help)\n");
    return 2;
  }
  if (cli_qflags_check("quantize", &o->q)) return 2;
  if (o->unrotate && !o->q.fmt.rht) {
    fprintf(stderr, "ufp4 quantize: --unrotate needs --rht N\n");
    return 2;
  }
  return 0;
}

/* Quantizes a into q and y (dequantized; --unrotate takes it back to a's basis) and measures
 * *nmse in the basis the quantizer saw: a itself, or a rotated when --rht. Returns 0 or 1 after
 * printing the error. */
static int quantize(const quant_opts *o, const ufp4_npy *a, const float *signs, ufp4_qtensor *q,
                    float *y, double *nmse) {
  size_t rows = a->shape[0], cols = a->shape[1], n = a->count;
  if (ufp4_qformat_check(&o->q.fmt, rows, cols) != 0 ||
      ufp4_quantize(&o->q.fmt, a->data, rows, cols, q) != 0)
    return cli_error("quantize", o->in);
  ufp4_dequantize(q, y);
  float *ref = NULL; /* what the quantizer saw: the input, rotated when --rht */
  if (o->q.fmt.rht) {
    ref = malloc(n * sizeof *ref);
    if (!ref) {
      fprintf(stderr, "ufp4 quantize: out of memory for %zu floats\n", n);
      return 1;
    }
    memcpy(ref, a->data, n * sizeof *ref);
    if (ufp4_rht_rows(ref, rows, cols, o->q.fmt.rht, signs) != 0) {
      free(ref);
      return cli_error("quantize", NULL);
    }
  }
  *nmse = ufp4_nmse(ref ? ref : a->data, y, n);
  free(ref);
  if (o->unrotate && ufp4_rht_rows_inverse(y, rows, cols, o->q.fmt.rht, signs) != 0)
    return cli_error("quantize", NULL);
  return 0;
}

static void print_summary(const quant_opts *o, const ufp4_npy *a, const ufp4_qtensor *q, double nmse) {
  char blk[32];
  if (o->q.fmt.tile2d)
    snprintf(blk, sizeof blk, "16x16 tiles");
  else
    snprintf(blk, sizeof blk, "1x%d blocks", o->q.fmt.block);
  printf(
      "%s -> %s: %zu x %zu = %zu elements; %s, %s, %s scale, %s rounding%s%s; NMSE %.4e, SQNR %.2f dB\n",
      o->in, o->out, a->shape[0], a->shape[1], a->count, ufp4_grid_get(o->q.fmt.grid)->name, blk,
      ufp4_scale_name(o->q.fmt.scale), ufp4_round_name(o->q.fmt.round),
      o->q.fmt.rht ? (o->unrotate ? ", rht (unrotated)" : ", rht (output rotated)") : "",
      o->packed ? ", packed" : "", nmse, ufp4_sqnr_db(nmse));
  if (o->q.fmt.adaptive) {
    size_t nb = ufp4_scale_count(&o->q.fmt, a->shape[0], a->shape[1]);
    printf("%s (%s): %zu of %zu blocks kept the 4-candidate (%.2f%%)\n", ufp4_adaptive_name(o->q.fmt.adaptive),
           ufp4_metric_name(o->q.fmt.metric), q->blocks_four, nb, nb ? 100.0 * (double)q->blocks_four / (double)nb : 0.0);
  }
}

int ufp4_cmd_quantize(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  quant_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;

  ufp4_npy a;
  if (ufp4_npy_read(o.in, &a) != 0) return cli_error("quantize", NULL);
  if (a.ndim != 2 || a.count == 0) {
    fprintf(
        stderr,
        "ufp4 quantize: %s: need a non-empty 2-D array (rows x reduction dim), got %d-D with %zu elements\n",
        o.in, a.ndim, a.count);
    ufp4_npy_free(&a);
    return 1;
  }
  float signs[UFP4_RHT_MAX];
  int signs_kind = cli_qflags_signs(&o.q, signs);
  if (signs_kind) o.q.fmt.rht_signs = signs;

  ufp4_qtensor q;
  memset(&q, 0, sizeof q);
  float *y = malloc(a.count * sizeof *y);
  double nmse = 0;
  size_t shape[2] = {a.shape[0], a.shape[1]};
  if (!y) {
    fprintf(stderr, "ufp4 quantize: out of memory for %zu floats\n", a.count);
    rc = 1;
  } else if (!(rc = quantize(&o, &a, signs, &q, y, &nmse))) {
    if (ufp4_npy_write(o.out, y, shape, 2) != 0 ||
        (o.packed && write_packed(o.packed, &q, signs_kind) != 0))
      rc = cli_error("quantize", NULL);
    else
      print_summary(&o, &a, &q, nmse);
  }
  ufp4_qtensor_free(&q);
  free(y);
  ufp4_npy_free(&a);
  return rc;
}
