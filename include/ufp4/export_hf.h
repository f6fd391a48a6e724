/* Exporting a checkpoint's projection weights in the 4-bit Hugging Face layouts that inference
 * engines load, and the formats' decoding (which ufp4_checkpoint_load_params uses, so that
 * `ufp4 eval` and `ufp4 sample` read an exported folder). docs/EXPORT.md (Hugging Face formats) is the byte-level
 * description, with the engines' sources it follows.
 *
 *   hf-nvfp4  NVIDIA ModelOpt's unified HF checkpoint (what vLLM's ModelOptNvFp4Config and
 *             TensorRT-LLM load), for each 4-bit projection P of shape [out, in]:
 *               P.weight          U8 [out, in/2]   two E2M1 codes a byte, element 2i in the low
 *                                                  nibble, 2i+1 in the high one
 *               P.weight_scale    F8_E4M3 [out, in/16]  block scale d
 *               P.weight_scale_2  F32 []           tensor scale, a multiplier:
 *                                                  W = e2m1(code) * (float(d) * weight_scale_2)
 *               P.input_scale     F32 []           the activation tensor scale (opts below)
 *             plus hf_quant_config.json and config.json's "quantization_config" (quant_method
 *             "modelopt", quant_algo "NVFP4", group_size 16, the exclude patterns).
 *   hf-mxfp4  the gpt-oss layout (openai/gpt-oss, transformers' Mxfp4 integration), for each
 *             4-bit projection weight P.weight of shape [out, in]:
 *               P.weight_blocks   U8 [out, in/32, 16]  32 E2M1 codes a block, same nibble order
 *               P.weight_scales   U8 [out, in/32]      E8M0: W = e2m1(code) * 2^(scale - 127)
 *             plus config.json's "quantization_config" {"quant_method": "mxfp4",
 *             "modules_to_not_convert": the exclude patterns}.
 *
 * Which tensors are 4-bit: every 2-D parameter whose module name (the tensor name less
 * ".weight") matches none of the exclude patterns (fnmatch(3) globs, '*' also matching '.');
 * the default list keeps embeddings, lm_head, the MoE routers and shared-expert gates in fp32
 * (norms are 1-D and never 4-bit). All other tensors are written as ufp4_checkpoint_save writes
 * them (fp32, HF names). An MoE model's experts are exported one by one under their Qwen2-MoE
 * names (mlp.experts.E.gate_proj...), not fused into gpt-oss's gate_up_proj. */
#ifndef UFP4_EXPORT_HF_H
#define UFP4_EXPORT_HF_H

#include <stddef.h>
#include "ufp4/export.h"
#include "ufp4/model.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum { UFP4_HF_NONE = 0, UFP4_HF_NVFP4, UFP4_HF_MXFP4 } ufp4_hf_format;

/* "hf-nvfp4" / "hf-mxfp4"; UFP4_EINVAL otherwise. */
int ufp4_hf_format_parse(const char *name, ufp4_hf_format *out);
const char *ufp4_hf_format_name(ufp4_hf_format f);

/* The default exclude patterns, NULL-terminated. */
extern const char *const ufp4_hf_default_exclude[];

typedef struct {
  const char *const *exclude; /* n_exclude glob patterns; NULL uses ufp4_hf_default_exclude */
  int n_exclude;
  /* The recipe (recipe.h spec) the checkpoint was trained under, or NULL. When its forward weight
   * format is one the target holds (hf-nvfp4: E2M1, NVFP4 scales, 1x16 or 16x16 tiles; hf-mxfp4:
   * E2M1, an E8M0 rule, 1x32), without RHT or stochastic rounding, the export uses exactly that
   * format, so the codes are those the recipe's forward used; otherwise the defaults below, and
   * the result reports how far the export is from the recipe's forward weights. */
  const char *recipe;
  /* With recipe: the run's per-projection overrides ("PATTERN=SPEC;...", as
   * ufp4_model_resolve_recipes takes them; NULL or "" for none). Each projection is then judged,
   * and quantized where the target holds its format, by the recipe it trained under (the recipe's
   * keep_first / keep_last blocks in fp32, then the overrides); a pattern that matches no
   * projection is an error. The calibration forward below uses recipe alone. */
  const char *overrides;
  /* hf-mxfp4's E8M0 rule when the recipe does not give one: 0 = UFP4_SCALE_E8M0_FLOOR (OCP MX
   * v1.0, ufp4's mxfp4 recipe); UFP4_SCALE_E8M0_RCEIL is the round-up rule of the triton_kernels
   * quantizer that transformers' Mxfp4HfQuantizer calls. */
  int mx_scale;
  /* hf-nvfp4's input_scale (ModelOpt: amax of the projection's input / (6 * 448)). With calib_data
   * (ufp4_export_hf only: a validation shard as ufp4_val_source_open takes it), each projection's
   * input amax is measured over the first calib_batches batches of calib_batch windows (0: 8 and 4)
   * in a forward under the recipe (or "nvfp4" when it has no 4-bit forward), with no block kept in
   * fp32; input_scale = amax / 2688 in fp32. Otherwise, and for a projection whose input is all
   * zeros, input_scale (0: 1.0, which stands for an amax of 2688; docs/EXPORT.md (Hugging Face formats)). */
  float input_scale;
  const char *calib_data;
  long calib_batches;
  int calib_batch;
} ufp4_hf_export_opts;

typedef struct {
  int n_quantized;    /* tensors written in 4 bits */
  int n_kept;         /* 2-D tensors kept in fp32 by the exclude patterns */
  int n_calibrated;   /* hf-nvfp4 input_scales set from a measured amax */
  /* The quantizer format used, e.g. "e2m1,nvfp4,1x16,rne" or "e2m1,nvfp4,16x16,rne,4over6-mse";
   * the first one's followed by " and others, by projection" when the tensors used several. */
  char qformat[96];
  /* 1 when a recipe was given and every 4-bit tensor holds exactly what its forward used: the
   * format that projection trained with (not a block the recipe kept in fp32, nor one overridden
   * to fp32, bf16 or a format the target cannot hold); 0 otherwise. held: 4-bit tensors in the
   * format they trained with; kept_quantized: 4-bit tensors the recipe trained in fp32 or bf16
   * (kept blocks, overrides); run_fp4: 1 when the recipe trained some block projection in 4 bits
   * (else there is nothing of the run's to hold). */
  int exact;
  int held, kept_quantized, run_fp4;
  /* 10 log10(sum W^2 / sum (W - Wx)^2) over the 4-bit tensors, Wx the exported weights decoded
   * as the engine does: against the fp32 master weights, and against the weights the recipe's
   * forward used (NAN without a recipe, or when that recipe rotates the weights with an RHT whose
   * signs the checkpoint does not record). An exact MXFP4 export gives INFINITY; an exact NVFP4
   * one a finite value above 120 dB, because the engine's block scale float(d) * weight_scale_2
   * can differ in the last bit from ufp4's d / S_enc (docs/EXPORT.md (Hugging Face formats)). */
  double sqnr_db;
  double conversion_sqnr_db;
} ufp4_hf_export_result;

/* Writes the parameters of m as folder `out_dir` (config.json, model.safetensors, and for
 * hf-nvfp4 hf_quant_config.json), atomically as ufp4_checkpoint_save does. A 4-bit tensor whose
 * `in` is not a multiple of the block (16, 32) is an error naming it (exclude it). o may be NULL
 * (all defaults); res may be NULL. */
int ufp4_export_hf_model(ufp4_model *m, ufp4_hf_format fmt, const char *out_dir,
                         const ufp4_hf_export_opts *o, ufp4_hf_export_result *res);
/* The same for checkpoint folder `ckpt_dir`. */
int ufp4_export_hf(const char *ckpt_dir, ufp4_hf_format fmt, const char *out_dir,
                   const ufp4_hf_export_opts *o, ufp4_hf_export_result *res);

/* The format of folder `dir` from its config.json "quantization_config" (quant_method "modelopt"
 * with quant_algo "NVFP4", or "mxfp4") or, without one, its hf_quant_config.json: UFP4_HF_NONE for
 * a plain checkpoint; UFP4_EFORMAT naming the file for another quantization or a malformed one. */
int ufp4_hf_detect(const char *dir, ufp4_hf_format *out);

/* The dequantized weights of `name` ("...proj.weight", shape rows x cols) in an exported
 * model.safetensors `st` (path for messages), decoded as the engines do; errors name the file
 * and the tensor (missing, wrong dtype or shape, NaN scale codes). */
struct ufp4_st;
int ufp4_hf_read_weight(const struct ufp4_st *st, const char *path, ufp4_hf_format fmt,
                        const char *name, size_t rows, size_t cols, float *dst);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
