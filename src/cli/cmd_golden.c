/* ufp4 golden: writes the parity kit (ufp4/golden.h, docs/PARITY.md). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/golden.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 golden --out DIR\n\n"
          "Writes the parity kit, version %d, into DIR (which must not exist): for every format of the\n"
          "recipes (E2M1, E1M2, INT4 with FP32 scales; NVFP4 with 1x16 blocks and 16x16 tiles; MXFP4\n"
          "with each E8M0 rule; RNE, RNA, RNZ, SR, SR8; with and without RHT; Four Over Six) and\n"
          "every input (normal, outliers, exact ties, scale boundaries, zeros/denormals/huge/NaN/Inf,\n"
          "tiny), the input .npy, the packed codes and stored scales, the dequantized .npy and the\n"
          "measures, plus manifest.json with each format's parameters and each file's SHA-256. The same\n"
          "build writes the same bytes. docs/PARITY.md documents the layout; scripts/parity_check.py\n"
          "checks a kit.\n",
          UFP4_GOLDEN_KIT_VERSION);
}

int ufp4_cmd_golden(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    int r = cli_value(argc, argv, &i, "--out", &out);
    if (r < 0) return 2;
    if (!r) {
      fprintf(stderr, "ufp4 golden: unknown option '%s' (ufp4 golden --help)\n", argv[i]);
      return 2;
    }
  }
  if (!out) {
    fprintf(stderr, "ufp4 golden: --out DIR is required (ufp4 golden --help)\n");
    return 2;
  }
  if (ufp4_golden_write(out) != 0) return cli_error("golden", NULL);
  size_t n;
  ufp4_golden_formats(&n);
  printf("%s: parity kit version %d, %zu formats (manifest.json)\n", out, UFP4_GOLDEN_KIT_VERSION, n);
  return 0;
}
