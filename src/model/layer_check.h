/* Argument checks shared by the layer kernels (internal). */
#ifndef UFP4_MODEL_LAYER_CHECK_H
#define UFP4_MODEL_LAYER_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "ufp4/error.h"

/* *out = a * b; returns 0, or UFP4_ENOMEM when the product overflows size_t. */
static inline int layer_mul(size_t *out, size_t a, size_t b, const char *what) {
  if (a != 0 && b > SIZE_MAX / a) return ufp4_fail(UFP4_ENOMEM, "%s: element count overflows", what);
  *out = a * b;
  return 0;
}

/* Element count of a tensor with up to four positive int dims (pass 1 for unused ones). */
static inline int layer_count(size_t *out, const char *what, int d0, int d1, int d2, int d3) {
  if (d0 <= 0 || d1 <= 0 || d2 <= 0 || d3 <= 0)
    return ufp4_fail(UFP4_EINVAL, "%s: dimensions must be positive (got %d, %d, %d, %d)", what, d0,
                     d1, d2, d3);
  size_t n = (size_t)d0;
  int rc;
  if ((rc = layer_mul(&n, n, (size_t)d1, what)) < 0) return rc;
  if ((rc = layer_mul(&n, n, (size_t)d2, what)) < 0) return rc;
  if ((rc = layer_mul(&n, n, (size_t)d3, what)) < 0) return rc;
  *out = n;
  return 0;
}

#define LAYER_NONNULL(what, p)                                                                     \
  do {                                                                                             \
    if (!(p)) return ufp4_fail(UFP4_EINVAL, "%s: %s is NULL", what, #p);                           \
  } while (0)

#endif
