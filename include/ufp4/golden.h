/* The parity kit: golden test vectors that another project checks its own FP4 quantizer against
 * (docs/PARITY.md has the file layout, the byte layout of the codes and scales, and a checker).
 *
 * ufp4_golden_write(dir) writes, for every format of ufp4_golden_formats() and every input of the
 * kit (Philox-generated, fixed seeds, plus hand-built hard tensors: ties at every element and scale
 * level, zeros, denormals, huge values, NaN/Inf blocks, amax exactly on a scale boundary):
 *   inputs/<input>.npy                          the float32 input
 *   cases/<format>/<input>/codes.bin            packed codes (ufp4_pack_codes: element 2i low nibble)
 *   cases/<format>/<input>/scales.bin           the stored scales: 1 byte each (E4M3 / E8M0 code)
 *                                               or 4 bytes each (fp32 factor, little-endian)
 *   cases/<format>/<input>/rotated.npy          (RHT formats only) the input after x <- x S H
 *   cases/<format>/<input>/dequant.npy          ufp4_dequantize of the codes and scales
 *   cases/<format>/<input>/measures.json        ufp4_measure_tensor
 *   manifest.json                               kit version, ufp4 version and commit, every
 *                                               format's parameters, every file's SHA-256
 * Nothing in the kit depends on the time, the thread count or the instruction set, so the same
 * build regenerates it byte for byte (and a build on another CPU must, too). */
#ifndef UFP4_GOLDEN_H
#define UFP4_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"
#include "ufp4/quant.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Bumped whenever a file, a case or the layout changes, so a checker knows which kit it reads. */
#define UFP4_GOLDEN_KIT_VERSION 2

/* One quantizer format of the kit: a recipe operand's format with its name and provenance. */
typedef struct {
  const char *name;    /* folder name under cases/, e.g. "nvfp4-b16-rne-rht16nv" */
  const char *recipe;  /* the recipe spec and operands that use this format, e.g. "nvfp4: wgrad.x" */
  ufp4_qformat fmt;    /* rht_signs is NULL here; see rht_signs below */
  int rht_signs;       /* 0 no RHT, 1 random from fmt.seed (ufp4_rht_signs_random), 2 NVIDIA's */
} ufp4_golden_format;

/* The formats of the kit, in manifest order; *n receives their count. */
const ufp4_golden_format *ufp4_golden_formats(size_t *n);

/* Writes the kit into dir, which must not exist yet: the files go to "<dir>.partial" (removed
 * first if a failed run left it) and the folder is renamed to dir once the manifest is written,
 * so dir is either a complete kit or absent. Returns 0 or an error code with ufp4_last_error(). */
int ufp4_golden_write(const char *dir);

/* SHA-256 (FIPS 180-4) as 64 lowercase hex digits plus a NUL, of a buffer or of a whole file. */
int ufp4_sha256_hex(const void *data, size_t n, char hex[65]);
int ufp4_sha256_file(const char *path, char hex[65]);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
