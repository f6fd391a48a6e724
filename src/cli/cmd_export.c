/* ufp4 export: a checkpoint in a format other programs load (docs/EXPORT.md). Each format is a row
 * of FORMATS calling one library function. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ufp4/export_hf.h"
#include "ufp4/gguf_export.h"
#include "ufp4/train.h"

#define MAX_EXCLUDE 64

typedef struct {
  const char *ckpt, *format, *out, *tokenizer, *calib;
  const char *exclude[MAX_EXCLUDE];
  int n_exclude;
} export_opts;

typedef int (*export_fn)(const export_opts *o, const char *what);

/* The config of the run the checkpoint belongs to (CKPT/../../config.json, as `ufp4 train` lays out
 * run/ckpt/step_N): 1 when there is one and it loads. */
static int run_config(const char *ckpt, ufp4_train_config *cfg) {
  char path[4200];
  snprintf(path, sizeof path, "%s/../../config.json", ckpt);
  *cfg = ufp4_train_config_default();
  FILE *fp = fopen(path, "rb");
  int have = fp && !ufp4_train_config_load(path, cfg);
  if (fp) fclose(fp);
  return have;
}

/* What a 4-bit export holds of its run (GGUF and HF alike). */
typedef struct {
  const char *recipe; /* the run's recipe at the checkpoint's step, with its overrides named */
  int quantized, held, kept; /* 4-bit projections; in the format they trained with; trained in fp32/bf16 */
  int holds;          /* 1 all held, 0 not, -1 nothing to compare (no run, or no 4-bit projection in it) */
  int several;        /* the projections used more than one format */
  double forward_db;  /* SQNR against the weights the run's forward used; NaN: not measurable */
} run_view;

static void say_run(const export_opts *o, const run_view *v) {
  if (!v->quantized || v->holds < 0) return;
  if (v->holds) {
    printf("the run's recipe %s trained with %s: the file holds its codes and scales\n", v->recipe,
           v->several ? "these weight formats" : "this weight format");
    return;
  }
  const int other = v->quantized - v->held - v->kept;
  if (!v->held && !v->kept)
    printf("note: %s cannot hold the weight quantization of the run's recipe %s (another grid,\n"
           "scale or block, SR, or an RHT): the fp32 master weights were requantized, with the SQNR above", o->format,
           v->recipe);
  else if (v->held)
    printf("note: the file holds the codes and scales of the run's recipe %s\nin %d of its %d 4-bit projections",
           v->recipe, v->held, v->quantized);
  else
    printf("note: no 4-bit projection holds the codes and scales of the run's recipe %s", v->recipe);
  if (v->kept)
    printf("; %d the run trained in fp32 or bf16 were quantized all the same (--exclude them to keep\n"
           "them in full precision)", v->kept);
  if (other && (v->held || v->kept))
    printf("; %d the run trained in a format %s cannot hold were requantized from the fp32 master\n"
           "weights", other, o->format);
  if (isnan(v->forward_db))
    printf("\n(the SQNR against the weights the run's forward used is not measurable: some projection's\n"
           "weights went through an RHT or stochastic rounding)\n");
  else
    printf("\nSQNR of the conversion against the weights the recipe's forward used: %.2f dB\n", v->forward_db);
}

/* A run whose schedule has several phases, and a folder whose name does not say the step
 * (step_N): the export cannot know which phase made the weights, and says so. */
static void say_unknown_phase(const char *ckpt) {
  static ufp4_train_config cfg;
  static ufp4_recipe_schedule sched;
  if (run_config(ckpt, &cfg) && cfg.schedule[0] && !ufp4_train_recipe_at(&cfg, ckpt, &sched))
    printf("note: the run has a recipe schedule and this folder's name does not give the checkpoint's step\n"
           "(step_N), so its quantization was not compared with the run's\n");
}

static int gguf_write(const export_opts *o, ufp4_gguf_export_kind kind, int dequantized) {
  ufp4_gguf_export_opts g = {.kind = kind, .tokenizer = o->tokenizer, .exclude = o->exclude,
                             .n_exclude = o->n_exclude};
  ufp4_gguf_export_result r;
  if (!dequantized && !o->tokenizer) {
    fprintf(stderr, "ufp4 export: --format %s needs --tokenizer bytes|gpt2|PATH (the run's tokenizer)\n", o->format);
    return 2;
  }
  if (dequantized ? ufp4_gguf_export_dequantized(o->ckpt, o->out, &g, &r) : ufp4_gguf_export(o->ckpt, o->out, &g, &r))
    return cli_error("export", o->format);
  if (dequantized)
    printf("%s -> %s  (%s)  %d projections replaced by their dequantized 4-bit values", o->ckpt, o->out,
           o->format, r.quantized);
  else
    printf("%s -> %s  (%s)  %llu bytes, %d tensors, %d in 4 bits", o->ckpt, o->out, o->format,
           (unsigned long long)r.bytes, r.tensors, r.quantized);
  if (r.quantized) printf(", SQNR %.2f dB against the fp32 weights", r.sqnr_db);
  printf("\n");
  if (r.quantized) printf("4-bit weights: %s\n", r.weight_format);
  const run_view v = {r.run_recipe, r.quantized, r.held, r.kept_quantized, r.recipe_holds,
                      !strncmp(r.weight_format, "by projection", 13), r.recipe_sqnr_db};
  say_run(o, &v);
  if (r.quantized && (kind == UFP4_GGUF_EXPORT_MXFP4 || kind == UFP4_GGUF_EXPORT_NVFP4)) say_unknown_phase(o->ckpt);
  return 0;
}

static int gguf_f32(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_F32, 0); }
static int gguf_bf16(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_BF16, 0); }
static int gguf_mxfp4(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_MXFP4, 0); }
static int gguf_nvfp4(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_NVFP4, 0); }
static int ckpt_mxfp4(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_MXFP4, 1); }
static int ckpt_nvfp4(const export_opts *o, const char *w) { return gguf_write(o, UFP4_GGUF_EXPORT_NVFP4, 1); }

/* hf-nvfp4 / hf-mxfp4 (export_hf.h). The defaults (embeddings, lm_head, routers) stay fp32 and
 * --exclude adds to them, as for GGUF; the run's recipe (DIR/../../config.json, when the folder
 * is a run's checkpoint) decides whether the codes are exactly those its forward used. */
static int hf_write(const export_opts *o, ufp4_hf_format fmt) {
  const char *ex[MAX_EXCLUDE + 16];
  int n = 0;
  for (int i = 0; ufp4_hf_default_exclude[i] && n < 16; i++) ex[n++] = ufp4_hf_default_exclude[i];
  for (int i = 0; i < o->n_exclude; i++) ex[n++] = o->exclude[i];
  static ufp4_train_config cfg;
  static ufp4_recipe_schedule sched;
  static char named[1200];
  /* The recipe of the checkpoint's step (its schedule's phase), with the run's overrides. */
  const char *spec = run_config(o->ckpt, &cfg) ? ufp4_train_recipe_at(&cfg, o->ckpt, &sched) : NULL;
  const int have = spec != NULL;
  if (have)
    snprintf(named, sizeof named, "%s%s%s%s%s", spec, cfg.overrides[0] || sched.n > 1 ? " (" : "",
             cfg.overrides[0] ? "with its overrides" : "", cfg.overrides[0] && sched.n > 1 ? ", " : "",
             sched.n > 1 ? "its schedule's phase at this step)" : cfg.overrides[0] ? ")" : "");
  ufp4_hf_export_opts h = {.exclude = ex, .n_exclude = n, .recipe = spec, .overrides = have ? cfg.overrides : NULL,
                           .calib_data = o->calib};
  ufp4_hf_export_result r;
  if (ufp4_export_hf(o->ckpt, fmt, o->out, &h, &r)) return cli_error("export", o->format);
  printf("%s -> %s  (%s, %s)  %d tensors in 4 bits, %d kept fp32, SQNR %.2f dB against the fp32 weights\n", o->ckpt,
         o->out, o->format, r.qformat, r.n_quantized, r.n_kept, r.sqnr_db);
  if (fmt == UFP4_HF_NVFP4)
    printf("input_scale: %d of %d projections calibrated%s\n", r.n_calibrated, r.n_quantized,
           o->calib ? "" : " (no --calib-data: 1.0, i.e. an input amax of 2688; docs/EXPORT.md)");
  const run_view v = {named, r.n_quantized, r.held, r.kept_quantized, have && r.run_fp4 ? r.exact : -1,
                      strstr(r.qformat, "by projection") != NULL, r.conversion_sqnr_db};
  say_run(o, &v);
  if (r.n_quantized) say_unknown_phase(o->ckpt);
  return 0;
}

static int hf_nvfp4(const export_opts *o, const char *w) { return hf_write(o, UFP4_HF_NVFP4); }
static int hf_mxfp4(const export_opts *o, const char *w) { return hf_write(o, UFP4_HF_MXFP4); }

static const struct {
  const char *name;
  export_fn fn;
  const char *what;
} FORMATS[] = {
    {"gguf-f32", gguf_f32, "GGUF file for llama.cpp, every tensor F32"},
    {"gguf-bf16", gguf_bf16, "GGUF file, matrices BF16, norms F32"},
    {"gguf-mxfp4", gguf_mxfp4, "GGUF file, projections in ggml's MXFP4 blocks, the rest F32"},
    {"gguf-nvfp4", gguf_nvfp4, "GGUF file, projections in ggml's NVFP4 blocks + F32 tensor scales"},
    {"dequant-mxfp4", ckpt_mxfp4, "checkpoint folder, projections = dequantized gguf-mxfp4 weights"},
    {"dequant-nvfp4", ckpt_nvfp4, "checkpoint folder, projections = dequantized gguf-nvfp4 weights"},
    {"hf-nvfp4", hf_nvfp4, "Hugging Face folder in NVIDIA ModelOpt's NVFP4 layout (vLLM, TensorRT-LLM)"},
    {"hf-mxfp4", hf_mxfp4, "Hugging Face folder in gpt-oss's MXFP4 layout (transformers, vLLM)"},
};
enum { N_FORMATS = sizeof FORMATS / sizeof *FORMATS };

static void usage(FILE *out) {
  fprintf(out,
          "usage: ufp4 export --checkpoint DIR --format F --out PATH [--tokenizer T] [--exclude GLOB ...]\n"
          "                   [--calib-data SHARD]\n\n"
          "Writes the checkpoint DIR in format F (docs/EXPORT.md). --tokenizer (bytes, gpt2 or a BPE\n"
          "folder, the one the run's shards were prepared with) is written into GGUF files. --exclude\n"
          "keeps the projections whose Hugging Face name matches GLOB (e.g. 'model.layers.0.*') in\n"
          "high precision; embeddings, norms and lm_head always are. --calib-data (hf-nvfp4) measures each\n"
          "projection's input amax on that validation shard for its input_scale. Formats:\n");
  for (int i = 0; i < N_FORMATS; i++) fprintf(out, "  %-14s %s\n", FORMATS[i].name, FORMATS[i].what);
}

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, export_opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *v;
    int r;
    if ((r = cli_value(argc, argv, &i, "--checkpoint", &v)) > 0)
      o->ckpt = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--format", &v)) > 0)
      o->format = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--out", &v)) > 0)
      o->out = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--tokenizer", &v)) > 0)
      o->tokenizer = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--calib-data", &v)) > 0)
      o->calib = v;
    else if (!r && (r = cli_value(argc, argv, &i, "--exclude", &v)) > 0) {
      if (o->n_exclude == MAX_EXCLUDE) {
        fprintf(stderr, "ufp4 export: more than %d --exclude patterns\n", MAX_EXCLUDE);
        return 2;
      }
      o->exclude[o->n_exclude++] = v;
    } else if (!r) {
      fprintf(stderr, "ufp4 export: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (r < 0) return 2;
  }
  if (!o->ckpt || !o->format || !o->out) {
    usage(stderr);
    return 2;
  }
  return 0;
}

int ufp4_cmd_export(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  export_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  for (int i = 0; i < N_FORMATS; i++)
    if (!strcmp(o.format, FORMATS[i].name)) return FORMATS[i].fn(&o, FORMATS[i].what);
  fprintf(stderr, "ufp4 export: unknown format '%s' (ufp4 export --help lists them)\n", o.format);
  return 2;
}
