/* Exporting a dense checkpoint (checkpoint.h) to a GGUF file that llama.cpp runs as architecture
 * "llama" (docs/EXPORT.md). What goes where:
 *   - hyperparameters as llama.* keys (context length = the checkpoint's seq_len);
 *   - the tokenizer (tokenizer.h's spec: bytes, gpt2 or a trained BPE folder) as a "gpt2" BPE
 *     vocabulary with the "gpt-2" pre-tokenizer: token i is ufp4's token i written in GPT-2's
 *     byte-to-unicode alphabet, the merges are vocab.bpe's in rank order (none for bytes),
 *     <|endoftext|> is a control token and is bos/eos, no BOS is added; ids between the
 *     tokenizer's vocabulary and the model's are unused padding tokens;
 *   - tensors under llama.cpp's names; q_proj and k_proj rows permuted from the rotate-half RoPE
 *     layout of Hugging Face / ufp4 to the interleaved pairs of llama.cpp's LLAMA_ROPE_TYPE_NORM
 *     (llama.cpp's convert_hf_to_gguf.py LlamaModel.permute): within each head of D rows, GGUF
 *     row 2i + j is HF row j*D/2 + i (j = 0, 1);
 *   - F32: every tensor fp32. BF16: 2-D tensors bfloat16 (RNE), norms fp32.
 *     MXFP4 / NVFP4: the block projections (q, k, v, o, gate, up, down) not matched by an exclude
 *     glob (fnmatch on the HF name, e.g. "model.layers.0.*") in ggml's block type, everything
 *     else fp32. Each projection's codes and scales are those of ufp4_quantize with the fprop
 *     weight format its run trained it with, when ggml's type holds that format (E2M1 without RHT
 *     or SR; MXFP4: an E8M0 scale of any rule in 1x32 blocks; NVFP4: NVFP4 scales in 1x16 blocks
 *     or 16x16 tiles; Four Over Six's choices included), so the file holds what the run trained
 *     with. "Its run" is the run folder the checkpoint belongs to, at the checkpoint's step: the
 *     schedule's phase that ran its last step, with the run's per-projection overrides and the
 *     blocks its recipe kept in fp32 (a run config whose overrides do not fit the checkpoint's
 *     model is an error). Otherwise (another format, a projection the run trained in fp32 or
 *     bf16) with the run recipe's own format at that step when ggml holds it, and else (or with
 *     no run folder) with the format of ufp4's "mxfp4" recipe (E2M1, 1x32, E8M0 floor) or "nvfp4"
 *     recipe (E2M1, 16x16 tiles of E4M3 with an FP32 tensor scale S_enc), both RNE. Every one of them fits ggml's blocks exactly (a 16x16 tile's scale is repeated in the
 *     16 rows' sub-blocks), and NVFP4's 1/S_enc is written as the F32 tensor
 *     "<name>.scale" that llama.cpp multiplies the projection's output by.
 * Only dense models (moe_experts 0) are exported; a projection whose input width is not a
 * multiple of ggml's block (32 for MXFP4, 64 for NVFP4) is refused with a message naming it. */
#ifndef UFP4_GGUF_EXPORT_H
#define UFP4_GGUF_EXPORT_H

#include <stdint.h>

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_GGUF_EXPORT_F32 = 0,
  UFP4_GGUF_EXPORT_BF16,
  UFP4_GGUF_EXPORT_MXFP4,
  UFP4_GGUF_EXPORT_NVFP4,
} ufp4_gguf_export_kind;

typedef struct {
  ufp4_gguf_export_kind kind;
  const char *tokenizer;      /* required for ufp4_gguf_export */
  const char *const *exclude; /* n_exclude fnmatch globs on HF tensor names */
  int n_exclude;
} ufp4_gguf_export_opts;

typedef struct {
  uint64_t bytes;       /* size of the file written */
  int tensors;          /* GGUF tensors written (the .scale tensors included) */
  int quantized;        /* projections stored in a 4-bit block type */
  double sqnr_db;       /* of the 4-bit projections against the fp32 weights, all of them pooled;
                           +inf when nothing was quantized */
  /* The recipe of the run the checkpoint belongs to (DIR/../../config.json, as `ufp4 train` lays
   * out run/ckpt/step_N): the spec of its schedule's phase at the checkpoint's step, followed by
   * " (with its overrides)" or " (... its schedule's phase at this step)" when the run has them;
   * "" when there is no run. recipe_holds: whether the 4-bit export holds what that run trained
   * with: 1 when every 4-bit projection was stored in the format its run trained it with (held ==
   * quantized); 0 when not, the others being requantized from the fp32 master weights (and
   * sqnr_db is the conversion's error); -1 for a high-precision export, no run config, a run whose
   * block projections all trained in fp32 or bf16, or a schedule whose step the folder's name does
   * not give. held: 4-bit projections stored in the format their run trained them with;
   * kept_quantized: 4-bit projections their run trained in fp32 or bf16 (a recipe's keep_first /
   * keep_last blocks, an override), quantized all the same (exclude them to keep them in full
   * precision). follows_run: held > 0. */
  char run_recipe[512];
  int recipe_holds;
  int follows_run;
  int held;
  int kept_quantized;
  /* The 4-bit projections' format, e.g. "e2m1, nvfp4 scales, 16x16 tiles, rne, 4over6 by mse";
   * with more than one, "by projection: " and the formats in order of first use, "; "-separated
   * (cut at the field's size); "" when nothing was quantized. */
  char weight_format[128];
  /* recipe_holds 0, and no 4-bit projection's run weights behind an RHT or SR: SQNR of the export
   * against the weights the run's forward used, pooled over the 4-bit projections (each one's
   * fprop weight format applied to the fp32 weights, or the fp32 or bf16-rounded weights of one it
   * trained in that precision); NaN otherwise. */
  double recipe_sqnr_db;
} ufp4_gguf_export_result;

/* Writes checkpoint `dir` as the GGUF file `path` (atomically). */
int ufp4_gguf_export(const char *dir, const char *path, const ufp4_gguf_export_opts *o,
                     ufp4_gguf_export_result *res);

/* The reference that a 4-bit export is checked against: writes the checkpoint folder `out_dir`
 * (config.json + model.safetensors) holding the weights of `dir` with exactly the projections that
 * ufp4_gguf_export would quantize (same kind and excludes) replaced by ufp4_dequantize of the same
 * codes and scales (NVFP4: code * (d / S_enc)). o->tokenizer is not used. */
int ufp4_gguf_export_dequantized(const char *dir, const char *out_dir, const ufp4_gguf_export_opts *o,
                                 ufp4_gguf_export_result *res);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
