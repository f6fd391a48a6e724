/* Seeded synthetic tensors (synth.h). Every element is a pure function of (seed, i), so the fill
 * is identical whatever the thread count or schedule.
 *
 * Philox streams (ASCII tags, distinct from the RHT and SR streams):
 *   SYN_NORM  the base normal of element i (gaussian, the t numerator, the outliers base), so the
 *             "outliers" tensor of a seed is the "gaussian" tensor of that seed with some entries
 *             scaled;
 *   SYN_UNIF  the uniform behind laplace;
 *   SYN_CHI2  the dof normals of element i's chi-square, at indices i*dof .. i*dof + dof-1;
 *   SYN_OUTL  the uniform deciding whether element i is an outlier. */
#include "ufp4/synth.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/philox.h"

#define SYN_NORM UINT64_C(0x53594e2d4e4f524d) /* "SYN-NORM" */
#define SYN_UNIF UINT64_C(0x53594e2d554e4946) /* "SYN-UNIF" */
#define SYN_CHI2 UINT64_C(0x53594e2d43484932) /* "SYN-CHI2" */
#define SYN_OUTL UINT64_C(0x53594e2d4f55544c) /* "SYN-OUTL" */

/* Student-t builds chi-square(dof) from dof squared normals, so dof is an integer and bounded to
 * keep the cost per element reasonable. */
#define SYN_MAX_DOF 64

static const char *const dist_names[UFP4_DIST_COUNT] = {"gaussian", "laplace", "student-t",
                                                        "outliers"};

ufp4_synth_spec ufp4_synth_default(ufp4_synth_dist dist, uint64_t seed) {
  ufp4_synth_spec s;
  memset(&s, 0, sizeof s);
  s.dist = dist;
  s.dof = 3.0;
  s.outlier_frac = 0.01;
  s.outlier_scale = 20.0;
  s.seed = seed;
  return s;
}

const char *ufp4_synth_dist_name(ufp4_synth_dist d) {
  return ((int)d >= 0 && d < UFP4_DIST_COUNT) ? dist_names[d] : "unknown";
}

int ufp4_synth_dist_parse(const char *name, ufp4_synth_dist *out) {
  if (!name || !out) return ufp4_fail(UFP4_EINVAL, "ufp4_synth_dist_parse: NULL argument");
  for (int i = 0; i < UFP4_DIST_COUNT; ++i) {
    if (strcmp(name, dist_names[i]) == 0) {
      *out = (ufp4_synth_dist)i;
      return UFP4_OK;
    }
  }
  return ufp4_fail(UFP4_EINVAL,
                   "unknown distribution '%s' (expected gaussian, laplace, student-t, outliers)",
                   name);
}

/* Laplace(0, b) with b = 1/sqrt(2) (variance 2 b^2 = 1) by the inverse CDF. The 24-bit uniform is
 * moved to the centre of its cell, u + 2^-25, so it lies strictly inside (0, 1) and the log never
 * sees 0. */
static float laplace_at(uint64_t seed, uint64_t i) {
  const double b = 1.0 / sqrt(2.0);
  double u = (double)ufp4_philox_uniform(seed, SYN_UNIF, i) + 0x1p-25;
  double v = u - 0.5;
  double m = -b * log1p(-2.0 * fabs(v));
  return (float)(v < 0 ? -m : m);
}

/* t = z / sqrt(chi2/dof). A chi-square of exactly 0 (all dof normals 0) has probability ~0 but
 * would divide by zero, so the result is clamped to the finite float range. */
static float student_at(uint64_t seed, uint64_t i, int dof) {
  double z = ufp4_philox_normal(seed, SYN_NORM, i);
  double chi2 = 0.0;
  for (int j = 0; j < dof; ++j) {
    double g = ufp4_philox_normal(seed, SYN_CHI2, i * (uint64_t)dof + (uint64_t)j);
    chi2 += g * g;
  }
  double t = z / sqrt(chi2 / dof);
  if (!(fabs(t) <= FLT_MAX)) t = z < 0 ? -FLT_MAX : (z > 0 ? FLT_MAX : 0.0);
  return (float)t;
}

static int check_spec(const ufp4_synth_spec *s, int *dof) {
  switch (s->dist) {
  case UFP4_DIST_GAUSSIAN:
  case UFP4_DIST_LAPLACE:
    return UFP4_OK;
  case UFP4_DIST_STUDENT_T:
    if (!(s->dof >= 1.0 && s->dof <= SYN_MAX_DOF) || s->dof != floor(s->dof))
      return ufp4_fail(UFP4_EINVAL,
                       "student-t: dof %g is not an integer in 1..%d (chi-square is built from "
                       "dof normals)",
                       s->dof, SYN_MAX_DOF);
    *dof = (int)s->dof;
    return UFP4_OK;
  case UFP4_DIST_OUTLIERS:
    if (!(s->outlier_frac >= 0.0 && s->outlier_frac <= 1.0))
      return ufp4_fail(UFP4_EINVAL, "outliers: fraction %g is not in [0, 1]", s->outlier_frac);
    if (!isfinite(s->outlier_scale) || fabs(s->outlier_scale) > FLT_MAX / 16)
      return ufp4_fail(UFP4_EINVAL, "outliers: scale %g is not a moderate finite number",
                       s->outlier_scale);
    return UFP4_OK;
  default:
    return ufp4_fail(UFP4_EINVAL, "unknown distribution id %d", (int)s->dist);
  }
}

int ufp4_synth_fill(const ufp4_synth_spec *s, float *x, size_t n) {
  if (!s) return ufp4_fail(UFP4_EINVAL, "ufp4_synth_fill: NULL spec");
  if (!x && n) return ufp4_fail(UFP4_EINVAL, "ufp4_synth_fill: NULL output for %zu elements", n);
  int dof = 0;
  int st = check_spec(s, &dof);
  if (st) return st;
  const uint64_t seed = s->seed;
  const ufp4_synth_dist dist = s->dist;
  /* The outlier test compares the 24-bit uniform in float, as drawn. */
  const double frac = s->outlier_frac;
  const float scale = (float)s->outlier_scale;
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (size_t i = 0; i < n; ++i) {
    float v;
    switch (dist) {
    case UFP4_DIST_LAPLACE: v = laplace_at(seed, i); break;
    case UFP4_DIST_STUDENT_T: v = student_at(seed, i, dof); break;
    case UFP4_DIST_OUTLIERS:
      v = ufp4_philox_normal(seed, SYN_NORM, i);
      if ((double)ufp4_philox_uniform(seed, SYN_OUTL, i) < frac) v *= scale;
      break;
    default: v = ufp4_philox_normal(seed, SYN_NORM, i); break;
    }
    x[i] = v;
  }
  return UFP4_OK;
}
