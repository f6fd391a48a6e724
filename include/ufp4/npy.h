/* NumPy .npy files (format versions 1.0, 2.0 and 3.0), float32 only.
 *
 * The reader accepts dtype '<f4' (and '|f4'/'=f4' on little-endian hosts) in C order; it rejects,
 * with a message naming the file and the problem: a bad magic or version, a header that is not a
 * Python dict literal with exactly descr, fortran_order and shape, another dtype, fortran_order
 * True for ndim >= 2, a shape whose product overflows, and data shorter or longer than the shape
 * says. Writes are atomic: a temporary file in the same folder, fsync, then rename. */
#ifndef UFP4_NPY_H
#define UFP4_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

#define UFP4_NPY_MAX_DIMS 8

typedef struct {
  int ndim;
  size_t shape[UFP4_NPY_MAX_DIMS];
  size_t count; /* product of shape (1 for ndim 0) */
  float *data;  /* malloc'ed; free with ufp4_npy_free */
} ufp4_npy;

/* Parses an in-memory .npy image; `name` is used in error messages. */
int ufp4_npy_parse(const uint8_t *buf, size_t len, const char *name, ufp4_npy *out);
int ufp4_npy_read(const char *path, ufp4_npy *out);
int ufp4_npy_write(const char *path, const float *data, const size_t *shape, int ndim);
void ufp4_npy_free(ufp4_npy *a);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
