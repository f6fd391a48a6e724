/* safetensors files (the Hugging Face format): model checkpoints that transformers can load, and
 * optimizer state for exact resume.
 *
 * Layout (public spec): an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON, then the data
 * section. The JSON is an object mapping each tensor name to
 *   {"dtype":"F32","shape":[d0,d1,..],"data_offsets":[begin,end]}
 * (offsets relative to the first byte of the data section, end exclusive) plus an optional
 * "__metadata__" object of string -> string. Tensors are row-major, little-endian.
 *
 * WRITER. Bytes are a pure function of the inputs (same tensors and metadata -> same file):
 *   - JSON has no whitespace; "__metadata__" comes first (omitted when there is none), then the
 *     tensors in ascending byte order of their names (strcmp), each with keys in the order
 *     dtype, shape, data_offsets; names and metadata are escaped by cJSON.
 *   - The JSON is padded with spaces (0x20) to a multiple of 8 bytes, so the data section starts
 *     8-byte aligned.
 *   - In the data section, tensors are laid out by element size in bits, largest first, ties in
 *     ascending name order (the same rule as the reference implementation), so every tensor of a
 *     whole-byte dtype starts at an offset that is a multiple of its element size.
 *   - Conversion from float (UFP4_ST_SRC_F32): F32 is copied bit for bit; BF16 and F16 round to
 *     nearest, ties to even; NaN stays a quiet NaN of the same sign; F16 overflows to +-Inf and
 *     keeps subnormals (IEEE binary16 semantics).
 *   - Writes are atomic: a temporary file "<path>.tmp.XXXXXX" in the same folder (mode 0644), all
 *     bytes written, fsync, close, rename over `path`, then fsync of the folder. On any failure
 *     (ENOSPC, EACCES, short write, a folder that does not exist, rename refused) the temporary is
 *     unlinked, an existing file at `path` is left untouched, and UFP4_EIO is returned with a
 *     message naming the path and the OS error. A folder fsync that fails after the rename is
 *     also UFP4_EIO (the new file is then in place but may not survive a crash); EINVAL from a
 *     folder fsync (file systems that do not support it) is ignored. A symlink at `path` is
 *     replaced by the file, not followed.
 *
 * READER. ufp4_st_open maps the file read-only (mmap); ufp4_st_parse works on memory. Everything
 * is validated before any tensor is handed out, and each problem is rejected with UFP4_EFORMAT and
 * a message naming the file (and the tensor where there is one):
 *   - file shorter than 8 bytes; N == 0, N > file size - 8, or N > UFP4_ST_MAX_HEADER (100 MB);
 *   - header not valid UTF-8, containing a NUL byte, not JSON, trailing non-space bytes, or JSON
 *     that is not an object;
 *   - duplicate names (cJSON keeps both; detected); "__metadata__" not an object of strings, or
 *     with duplicate keys;
 *   - a tensor entry that is not an object, lacks dtype/shape/data_offsets, repeats one of them,
 *     or has any other key;
 *   - an unknown dtype; a shape that is not an array of integers in [0, 2^53], more than
 *     UFP4_ST_MAX_DIMS dims, or whose element count times the element size overflows;
 *   - data_offsets not two integers in [0, 2^53] with begin <= end; end - begin different from
 *     the size the shape implies; an end past the data section;
 *   - overlapping tensors, a gap between tensors, or bytes after the last tensor (the spec
 *     requires the data section be exactly covered).
 * Tensor pointers point into the file image and are NOT necessarily aligned (other writers may not
 * align); read them with memcpy or ufp4_st_read_f32. Numbers in the JSON are parsed by cJSON as
 * doubles, hence the 2^53 limit (no real file comes near it). Host byte order must be little
 * endian (checked at compile time). A mapped file that another process truncates while open can
 * raise SIGBUS; files are expected to be replaced by rename (as the writer does), never rewritten
 * in place. */
#ifndef UFP4_SAFETENSORS_H
#define UFP4_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

#define UFP4_ST_MAX_DIMS 8
#define UFP4_ST_MAX_HEADER ((uint64_t)100000000) /* bytes, as the reference implementation */

/* The spec's dtype names; UFP4_ST_F4 and the F6 types are packed sub-byte formats (element
 * count times bits must be a whole number of bytes). */
typedef enum {
  UFP4_ST_BOOL = 0,
  UFP4_ST_U8,
  UFP4_ST_I8,
  UFP4_ST_F8_E5M2,
  UFP4_ST_F8_E4M3,
  UFP4_ST_F8_E8M0,
  UFP4_ST_I16,
  UFP4_ST_U16,
  UFP4_ST_F16,
  UFP4_ST_BF16,
  UFP4_ST_I32,
  UFP4_ST_U32,
  UFP4_ST_F32,
  UFP4_ST_F64,
  UFP4_ST_I64,
  UFP4_ST_U64,
  UFP4_ST_C64,
  UFP4_ST_F4,
  UFP4_ST_F6_E2M3,
  UFP4_ST_F6_E3M2,
  UFP4_ST_NDTYPES
} ufp4_st_dtype;

/* "F32" etc., or NULL for an out-of-range value. */
const char *ufp4_st_dtype_name(ufp4_st_dtype d);
/* Element size in bits, or 0 for an out-of-range value. */
int ufp4_st_dtype_bits(ufp4_st_dtype d);
/* Parses a dtype name; returns 0 or UFP4_EINVAL. */
int ufp4_st_dtype_from_name(const char *s, ufp4_st_dtype *out);

/* ---------------------------------------------------------------- writer */

typedef enum {
  UFP4_ST_SRC_RAW = 0, /* `data` already holds the file bytes (little-endian) of `dtype` */
  UFP4_ST_SRC_F32 = 1, /* `data` is float[count]; converted to dtype F32, BF16 or F16 */
} ufp4_st_src;

typedef struct {
  const char *name; /* UTF-8, unique, not "__metadata__" */
  ufp4_st_dtype dtype; /* dtype stored in the file */
  ufp4_st_src src;
  int ndim; /* 0..UFP4_ST_MAX_DIMS; 0 is a scalar (one element) */
  size_t shape[UFP4_ST_MAX_DIMS];
  const void *data; /* may be NULL only when the tensor has no elements */
} ufp4_st_tensor;

typedef struct {
  const char *key; /* UTF-8, unique */
  const char *value;
} ufp4_st_meta;

/* Writes `n` tensors and `n_meta` metadata pairs to `path` atomically (see above). Returns 0,
 * UFP4_EINVAL (bad name, duplicate, dtype/src combination, shape overflow), UFP4_ENOMEM or
 * UFP4_EIO. The inputs are not modified and may be in any order. */
int ufp4_st_write(const char *path, const ufp4_st_tensor *tensors, size_t n,
                  const ufp4_st_meta *meta, size_t n_meta);

/* Testing only: makes the next writes on this thread fail at the given stage, as the OS would
 * (the errno is given in the message). Reset to UFP4_ST_FAULT_NONE by the caller. */
typedef enum {
  UFP4_ST_FAULT_NONE = 0,
  UFP4_ST_FAULT_WRITE,  /* the first write() stores half its bytes, then ENOSPC */
  UFP4_ST_FAULT_FSYNC,  /* fsync of the temporary reports EIO */
  UFP4_ST_FAULT_RENAME, /* rename reports EACCES */
} ufp4_st_fault;
void ufp4_st_test_fault(ufp4_st_fault f);

/* ---------------------------------------------------------------- reader */

typedef struct {
  const char *name; /* owned by the ufp4_st; valid until ufp4_st_close */
  ufp4_st_dtype dtype;
  int ndim;
  size_t shape[UFP4_ST_MAX_DIMS];
  size_t count;  /* product of shape (1 for ndim 0) */
  size_t nbytes; /* end - begin */
  size_t begin;  /* offset in the data section */
  const void *data; /* into the file image; possibly unaligned */
} ufp4_st_info;

typedef struct ufp4_st ufp4_st; /* opaque */

/* Maps and validates `path`. On success *out owns the mapping; free with ufp4_st_close. */
int ufp4_st_open(const char *path, ufp4_st **out);
/* Validates an in-memory image; `name` is used in messages. `buf` is borrowed: it must stay
 * valid and unchanged until ufp4_st_close. */
int ufp4_st_parse(const uint8_t *buf, size_t len, const char *name, ufp4_st **out);
void ufp4_st_close(ufp4_st *st); /* NULL is allowed */

/* Tensors in ascending strcmp order of name; i < ufp4_st_count. */
size_t ufp4_st_count(const ufp4_st *st);
const ufp4_st_info *ufp4_st_at(const ufp4_st *st, size_t i);
/* NULL when there is no such tensor (no error is recorded). */
const ufp4_st_info *ufp4_st_find(const ufp4_st *st, const char *name);

/* Metadata pairs in ascending key order; value lookup returns NULL when absent. */
size_t ufp4_st_meta_count(const ufp4_st *st);
const char *ufp4_st_meta_key(const ufp4_st *st, size_t i);
const char *ufp4_st_meta_get(const ufp4_st *st, const char *key);

/* Copies tensor `name` into dst[count] as float32, after checking that its shape is exactly
 * shape[0..ndim) (else UFP4_EINVAL naming the tensor and both shapes). F32 is copied bit for bit;
 * BF16 and F16 widen exactly; F64 rounds to nearest even (C conversion). Any other dtype, or a
 * missing tensor, is UFP4_EINVAL naming the tensor. */
int ufp4_st_read_f32(const ufp4_st *st, const char *name, float *dst, const size_t *shape,
                     int ndim);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
