/* Seeded synthetic tensors for the bias analysis. Element i of a tensor is a function of
 * (seed, i) only, via Philox, so any thread layout produces the same tensor. */
#ifndef UFP4_SYNTH_H
#define UFP4_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_DIST_GAUSSIAN = 0, /* N(0, 1) */
  UFP4_DIST_LAPLACE,      /* Laplace(0, 1/sqrt 2): unit variance */
  UFP4_DIST_STUDENT_T,    /* Student-t with `dof` degrees of freedom: z / sqrt(chi2/dof), the
                             chi-square summed from dof normals, so dof must be an integer in
                             1..64 (otherwise UFP4_EINVAL) */
  UFP4_DIST_OUTLIERS,     /* N(0, 1) with a fraction `outlier_frac` of entries multiplied by
                             `outlier_scale` (defaults 0.01 and 20) */
  UFP4_DIST_COUNT
} ufp4_synth_dist;

typedef struct {
  ufp4_synth_dist dist;
  double dof;           /* student-t, default 3 */
  double outlier_frac;  /* default 0.01 */
  double outlier_scale; /* default 20 */
  uint64_t seed;
} ufp4_synth_spec;

ufp4_synth_spec ufp4_synth_default(ufp4_synth_dist dist, uint64_t seed);
const char *ufp4_synth_dist_name(ufp4_synth_dist d); /* "gaussian", "laplace", "student-t", "outliers" */
int ufp4_synth_dist_parse(const char *name, ufp4_synth_dist *out);
/* Fills n floats. Returns 0 or UFP4_EINVAL. */
int ufp4_synth_fill(const ufp4_synth_spec *s, float *x, size_t n);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
