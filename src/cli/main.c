/* ufp4: git-style dispatcher. `ufp4 help` lists the commands, `ufp4 CMD --help` explains one. */
#include <stdio.h>
#include <string.h>

#include "cli/blas_pin.h"
#include "cli/commands.h"
#include "core/build_info.h"
#include "ufp4/dist.h"
#include "ufp4/gemm.h"
#include "ufp4/ufp4.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
  int ranks; /* 1: may run under a multi-rank launch (the command shares its work over the ranks) */
} command;

static const command commands[] = {
    {"formats", ufp4_cmd_formats, "print each grid's levels, bin edges and per-bin geometric bias", 0},
    {"bias", ufp4_cmd_bias, "measure every grid on a tensor, with and without RHT (and --layers K)", 0},
    {"quantize", ufp4_cmd_quantize, "quantize a float32 .npy tensor and write the dequantized .npy", 0},
    {"bench", ufp4_cmd_bench, "benchmarks: quantizers, GEMMs, kernels, training steps (bench/)", 0},
    {"tokenizer", ufp4_cmd_tokenizer, "train a BPE tokenizer; encode, decode or measure text with one", 0},
    {"prepare", ufp4_cmd_prepare, "tokenize a corpus into train and validation token shards", 0},
    {"train", ufp4_cmd_train, "pretrain a Llama-style model under a 4-bit recipe", 1},
    {"eval", ufp4_cmd_eval, "validation loss and perplexity of a checkpoint on a shard", 0},
    {"sample", ufp4_cmd_sample, "generate text from a checkpoint", 0},
    {"export", ufp4_cmd_export, "a checkpoint as GGUF for llama.cpp or a Hugging Face NVFP4/MXFP4 folder", 0},
    {"compare", ufp4_cmd_compare, "BF16-relative loss error of 4-bit recipes over seeds, with a report", 1},
    {"sweep", ufp4_cmd_sweep, "scaling study: sizes x recipes, power-law fits, FP4-to-BF16 gap vs compute", 1},
    {"drift", ufp4_cmd_drift, "forward and backward drift through depth of a checkpoint per recipe", 0},
    {"study", ufp4_cmd_study, "the depth study's registered analysis: H1-H3 with Holm, settledness, stage 2", 0},
    {"report", ufp4_cmd_report, "rebuild a comparison report from finished run folders", 0},
    {"golden", ufp4_cmd_golden, "write the parity kit: test vectors for checking another quantizer", 0},
};
enum { n_commands = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
  fprintf(out, "usage: ufp4 <command> [options]   (ufp4 <command> --help for details)\n\ncommands:\n");
  for (int i = 0; i < n_commands; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "  %-10s %s\n  %-10s %s\n", "help", "this list", "version", "print the version");
}

int main(int argc, char **argv) {
  cli_pin_blas_core(argv);
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *name = argv[1];
  if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
    if (argc > 2) {
      for (int i = 0; i < n_commands; i++)
        if (!strcmp(argv[2], commands[i].name)) {
          char help[] = "--help";
          char *sub[] = {argv[2], help, NULL};
          return commands[i].run(2, sub);
        }
    }
    usage(stdout);
    return 0;
  }
  if (!strcmp(name, "version") || !strcmp(name, "--version")) {
    printf("ufp4 %s commit %s (OpenBLAS kernels: %s)\n", ufp4_version(), ufp4_build_commit(), ufp4_blas_core());
    return 0;
  }
  for (int i = 0; i < n_commands; i++) {
    if (strcmp(name, commands[i].name)) continue;
    /* N copies of a one-process command would write the same files at once. */
    if (!commands[i].ranks && ufp4_dist_launched_ranks() > 1) {
      fprintf(stderr, "ufp4 %s: launched as one of %ld ranks, but only train, compare and sweep use several; "
                      "run it without mpirun\n", name, ufp4_dist_launched_ranks());
      return 2;
    }
    return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "ufp4: '%s' is not a command\n", name);
  usage(stderr);
  return 2;
}
