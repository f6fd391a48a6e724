/* GGUF files (the format of ggml and llama.cpp), version 3: a writer, and the encodings of ggml's
 * block types that ufp4 exports (docs/EXPORT.md has the byte-level tables).
 *
 * Layout (ggml's docs/gguf.md; all integers little-endian):
 *   u32 magic "GGUF" (bytes 47 47 55 46), u32 version 3, u64 tensor count, u64 key-value count,
 *   the key-value pairs: key as a string (u64 length + bytes, no NUL), u32 value type, value;
 *   the tensor infos: name (string), u32 n_dims, u64 ne[n_dims] (ne[0] the contiguous dimension:
 *     a row-major [rows][cols] matrix is ne = {cols, rows}), u32 ggml type, u64 offset of the
 *     data from the start of the data section, a multiple of the alignment;
 *   zero padding to the alignment (general.alignment, 32 by default, which is what this writer
 *   uses and does not write as a key), then the tensor data, each tensor padded to the alignment.
 * Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one byte), 8 string,
 * 9 array (u32 element type, u64 count, elements), 10 u64, 11 i64, 12 f64.
 *
 * The writer keeps keys and tensors in the order they were added (llama.cpp looks them up by
 * name); the same calls give the same bytes. Duplicate keys or tensor names are refused
 * (UFP4_EINVAL), as llama.cpp refuses such files. Writes are atomic (fileio.h). */
#ifndef UFP4_GGUF_H
#define UFP4_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* ggml tensor types this writer knows (ggml.h's enum ggml_type values). */
typedef enum {
  UFP4_GGML_F32 = 0,
  UFP4_GGML_BF16 = 30,
  UFP4_GGML_MXFP4 = 39, /* block_mxfp4: 32 elements, 17 bytes */
  UFP4_GGML_NVFP4 = 40, /* block_nvfp4: 64 elements, 36 bytes */
} ufp4_ggml_type;

/* Elements per block and bytes per block of a type (1 and 4 for F32, 1 and 2 for BF16); 0 for a
 * type this writer does not know. */
size_t ufp4_ggml_block_elems(ufp4_ggml_type t);
size_t ufp4_ggml_block_bytes(ufp4_ggml_type t);
const char *ufp4_ggml_type_name(ufp4_ggml_type t); /* "F32", "BF16", "MXFP4", "NVFP4" */

/* ggml's block encodings. Codes are ufp4's E2M1 codes (grid.h: bit 3 sign, bits 0-2 the index of
 * 0 0.5 1 1.5 2 3 4 6), which are also the indices of ggml's kvalues_mxfp4 (the doubled E2M1
 * values 0 1 2 3 4 6 8 12 and their negatives), so a code is stored unchanged.
 *   MXFP4 block (17 bytes) for 32 consecutive elements of a row: byte 0 the E8M0 exponent e,
 *     bytes 1..16: byte 1+j holds element j in its low nibble and element j+16 in its high nibble.
 *     Value = kvalues[q] * 2^(e-128) = E2M1(q) * 2^(e-127) (e = 0 gives 2^-127, as OCP's).
 *   NVFP4 block (36 bytes) for 64 consecutive elements: bytes 0..3 one UE4M3 scale per 16
 *     elements, then 4 x 8 bytes, sub-block s's byte j holding element 16s+j (low nibble) and
 *     16s+j+8 (high nibble). Value = E2M1(q) * E4M3(d) (ggml decodes 0x7F as 0, not NaN). No
 *     per-tensor scale inside the block: llama.cpp multiplies a projection's output by an
 *     optional F32 tensor "<name>.scale" of shape {1}.
 * `codes` holds the block's elements (32 or 64 bytes, one code per byte), `scales` its 1 or 4
 * scale bytes. */
void ufp4_gguf_mxfp4_block(const uint8_t codes[32], uint8_t e8m0, uint8_t out[17]);
void ufp4_gguf_nvfp4_block(const uint8_t codes[64], const uint8_t e4m3[4], uint8_t out[36]);

typedef struct ufp4_gguf ufp4_gguf;

/* An empty file under construction; *out is NULL on failure. */
int ufp4_gguf_create(ufp4_gguf **out);
void ufp4_gguf_free(ufp4_gguf *g);

/* Key-value pairs. Strings are UTF-8 (checked), without NUL bytes. */
int ufp4_gguf_kv_str(ufp4_gguf *g, const char *key, const char *value);
int ufp4_gguf_kv_u32(ufp4_gguf *g, const char *key, uint32_t value);
int ufp4_gguf_kv_f32(ufp4_gguf *g, const char *key, float value);
int ufp4_gguf_kv_bool(ufp4_gguf *g, const char *key, int value);
/* An array of n strings: strs[i] of lens[i] bytes (need not be NUL-terminated). */
int ufp4_gguf_kv_str_array(ufp4_gguf *g, const char *key, const char *const *strs,
                           const size_t *lens, size_t n);
int ufp4_gguf_kv_i32_array(ufp4_gguf *g, const char *key, const int32_t *v, size_t n);

/* A tensor of `ndim` (1..4) dimensions ne[0..ndim-1] (ne[0] contiguous) of `type`; `data` holds
 * its ufp4_gguf_tensor_bytes() bytes and is copied. ne[0] must be a multiple of the type's block. */
int ufp4_gguf_add_tensor(ufp4_gguf *g, const char *name, ufp4_ggml_type type, int ndim,
                         const uint64_t *ne, const void *data, size_t size);
/* Bytes of a tensor of that type and shape; 0 when ne[0] is not a whole number of blocks. */
size_t ufp4_gguf_tensor_bytes(ufp4_ggml_type type, int ndim, const uint64_t *ne);

/* Writes the file to `path` atomically; *size (may be NULL) receives its length in bytes. */
int ufp4_gguf_write(const ufp4_gguf *g, const char *path, uint64_t *size);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
