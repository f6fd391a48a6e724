/* Quantizes a tensor under a 4-bit format and prints what the quantizer did to it, through the
 * public C API of libufp4 (docs/API.md, "C").
 *
 *   quantize_tensor [GRID [SCALE [BLOCK [FILE.npy]]]]
 *
 * GRID is a grid name (e2m1, e1m2, int4, ufp4, ...; `ufp4 formats` lists them), SCALE a scale kind
 * (fp32, nvfp4, e8m0-floor, ...), BLOCK the 1xN block size; defaults e2m1 fp32 16. The tensor is a
 * 2-D float32 .npy file (a 1-D one is one row), or, without FILE, 256 x 1024 Gaussian values from
 * the library's seeded generator. Rounding is round-to-nearest-even, without RHT.
 *
 * Build against an installed ufp4:
 *   cc -O2 quantize_tensor.c $(pkg-config --cflags --libs ufp4) -o quantize_tensor */
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/ufp4.h"

static int fail(const char *what) {
  fprintf(stderr, "quantize_tensor: %s: %s\n", what, ufp4_last_error());
  return 1;
}

int main(int argc, char **argv) {
  /* The headers this program was compiled with against the library it runs with. */
  if (ufp4_version_number() / 100 != UFP4_VERSION_NUMBER / 100) {
    fprintf(stderr, "quantize_tensor: built with ufp4 %s headers, running with library %s\n", UFP4_VERSION,
            ufp4_version());
    return 1;
  }
  ufp4_qformat f = ufp4_qformat_default(); /* E2M1, RNE, FP32 scale, 1x16, no RHT */
  if (argc > 1 && ufp4_grid_parse(argv[1], &f.grid)) return fail("grid");
  if (argc > 2 && ufp4_scale_parse(argv[2], &f.scale)) return fail("scale");
  if (argc > 3) f.block = atoi(argv[3]);

  ufp4_npy a = {0};
  float *x;
  size_t rows, cols;
  if (argc > 4) {
    if (ufp4_npy_read(argv[4], &a)) return fail("input");
    if (a.ndim > 2) {
      fprintf(stderr, "quantize_tensor: %s: a %d-D array; give a 1-D or 2-D one\n", argv[4], a.ndim);
      ufp4_npy_free(&a);
      return 1;
    }
    rows = a.ndim == 2 ? a.shape[0] : 1;
    cols = a.count / (rows ? rows : 1);
    x = a.data;
  } else {
    rows = 256;
    cols = 1024;
    x = malloc(rows * cols * sizeof *x);
    ufp4_synth_spec s = ufp4_synth_default(UFP4_DIST_GAUSSIAN, 1);
    if (!x || ufp4_synth_fill(&s, x, rows * cols)) return fail("input");
  }
  if (ufp4_qformat_check(&f, rows, cols)) return fail("format");

  /* The measures (quantize, dequantize and compare in one call)... */
  ufp4_qmeasures m;
  if (ufp4_measure_tensor(&f, x, rows, cols, &m)) return fail("measure");
  /* ...and the codes and scales as stored, to show the first block. */
  ufp4_qtensor q;
  if (ufp4_quantize(&f, x, rows, cols, &q)) return fail("quantize");

  printf("ufp4 %s\n", ufp4_version());
  printf("tensor %zu x %zu (%s)\n", rows, cols, argc > 4 ? argv[4] : "gaussian, seed 1");
  printf("format grid=%s scale=%s block=%d round=%s\n", ufp4_grid_get(f.grid)->name, ufp4_scale_name(f.scale),
         f.block, ufp4_round_name(f.round));
  printf("first block: scale %.9g, codes", q.scales[0]);
  for (size_t i = 0; i < (size_t)f.block && i < cols; i++) printf(" %x", q.codes[i]);
  printf("\n");
  printf("alpha %.9f\n", m.alpha);
  printf("nmse %.9g\n", m.nmse);
  printf("sqnr_db %.6f\n", m.sqnr_db);
  printf("shrink_bias %.9f\n", m.shrink_bias);
  printf("b_eff %.6f\n", m.b_eff);
  printf("underflow %.9f\n", m.underflow);
  printf("clipped %.9f\n", m.clipped);
  ufp4_qtensor_free(&q);
  if (argc > 4)
    ufp4_npy_free(&a);
  else
    free(x);
  return 0;
}
