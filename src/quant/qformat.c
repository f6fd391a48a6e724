/* Names, defaults and validation of quantization formats (quant.h). */
#include "ufp4/error.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"

#include <string.h>

static const char *const scale_names[UFP4_SCALE_COUNT] = {
    "fp32", "nvfp4", "e8m0-floor", "e8m0-ceil", "e8m0-even", "e8m0-rceil",
};

const char *ufp4_scale_name(ufp4_scale_kind k) {
  if ((int)k < 0 || k >= UFP4_SCALE_COUNT) return "unknown";
  return scale_names[k];
}

int ufp4_scale_parse(const char *name, ufp4_scale_kind *out) {
  if (!name || !out) return ufp4_fail(UFP4_EINVAL, "scale name: NULL argument");
  for (int k = 0; k < UFP4_SCALE_COUNT; k++) {
    if (strcmp(name, scale_names[k]) == 0) {
      *out = (ufp4_scale_kind)k;
      return 0;
    }
  }
  if (strcmp(name, "e4m3") == 0) {
    *out = UFP4_SCALE_NVFP4;
    return 0;
  }
  if (strcmp(name, "e8m0") == 0) {
    *out = UFP4_SCALE_E8M0_FLOOR;
    return 0;
  }
  return ufp4_fail(UFP4_EINVAL,
                   "unknown scale '%s' (expected fp32, nvfp4, e4m3, e8m0, e8m0-floor, e8m0-ceil, "
                   "e8m0-even or e8m0-rceil)",
                   name);
}

static const char *const adaptive_names[UFP4_ADAPTIVE_COUNT] = {"none", "4over6"};
static const char *const metric_names[UFP4_METRIC_COUNT] = {"mse", "mae", "maxabs"};

const char *ufp4_adaptive_name(ufp4_adaptive a) {
  return (unsigned)a < UFP4_ADAPTIVE_COUNT ? adaptive_names[a] : "unknown";
}

const char *ufp4_metric_name(ufp4_adaptive_metric m) {
  return (unsigned)m < UFP4_METRIC_COUNT ? metric_names[m] : "unknown";
}

/* Index of name in names[0..n), or -1. */
static int name_index(const char *name, const char *const *names, int n) {
  for (int i = 0; name && i < n; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

int ufp4_adaptive_parse(const char *name, ufp4_adaptive *out) {
  int i = name_index(name, adaptive_names, UFP4_ADAPTIVE_COUNT);
  if (i < 0 || !out)
    return ufp4_fail(UFP4_EINVAL, "unknown adaptive scaling '%s' (expected none or 4over6)", name ? name : "(null)");
  *out = (ufp4_adaptive)i;
  return 0;
}

int ufp4_metric_parse(const char *name, ufp4_adaptive_metric *out) {
  int i = name_index(name, metric_names, UFP4_METRIC_COUNT);
  if (i < 0 || !out)
    return ufp4_fail(UFP4_EINVAL, "unknown adaptive metric '%s' (expected mse, mae or maxabs)", name ? name : "(null)");
  *out = (ufp4_adaptive_metric)i;
  return 0;
}

int ufp4_adaptive_check(ufp4_adaptive a, ufp4_grid_id g, ufp4_scale_kind s) {
  if ((unsigned)a >= UFP4_ADAPTIVE_COUNT)
    return ufp4_fail(UFP4_EINVAL, "quantization format: invalid adaptive scaling %d", (int)a);
  if (a == UFP4_ADAPTIVE_NONE) return 0;
  /* The 4-candidate exists to close E2M1's 4-to-6 gap; on a uniform grid (E1M2, INT4) or a
   * truncated E2M1 there is no such gap and "map amax to 4" has no meaning. */
  if (g != UFP4_GRID_E2M1)
    return ufp4_fail(UFP4_EINVAL, "adaptive=4over6 needs grid e2m1 (the 4-to-6 gap it removes is E2M1's), got grid %s",
                     ufp4_grid_get(g) ? ufp4_grid_get(g)->name : "?");
  /* FLOOR, CEIL and EVEN set the power of two from floor(log2 g_max), which is 2 for both 6 and
   * 4: the two candidates would be the same block and 4/6 a no-op. RCEIL divides by g_max. */
  if (ufp4_scale_is_e8m0(s) && s != UFP4_SCALE_E8M0_RCEIL)
    return ufp4_fail(UFP4_EINVAL,
                     "adaptive=4over6 with E8M0 scales needs scale=e8m0-rceil: under %s the power of two "
                     "depends only on floor(log2 g_max) = 2 for both 6 and 4, so both candidates are the same",
                     ufp4_scale_name(s));
  return 0;
}

ufp4_qformat ufp4_qformat_default(void) {
  ufp4_qformat f;
  memset(&f, 0, sizeof f);
  f.grid = UFP4_GRID_E2M1;
  f.round = UFP4_ROUND_RNE;
  f.scale = UFP4_SCALE_FP32;
  f.block = 16;
  f.tile2d = 0;
  f.rht = 0;
  f.rht_signs = NULL;
  f.seed = 0;
  f.stream = 0;
  return f;
}

static int is_pow2(long v) { return v > 0 && (v & (v - 1)) == 0; }

int ufp4_qformat_check(const ufp4_qformat *f, size_t rows, size_t cols) {
  if (!f) return ufp4_fail(UFP4_EINVAL, "quantization format: NULL");
  if ((int)f->grid < 0 || f->grid >= UFP4_GRID_COUNT)
    return ufp4_fail(UFP4_EINVAL, "quantization format: invalid grid id %d", (int)f->grid);
  if ((int)f->round < 0 || f->round >= UFP4_ROUND_COUNT)
    return ufp4_fail(UFP4_EINVAL, "quantization format: invalid rounding mode %d", (int)f->round);
  if ((int)f->scale < 0 || f->scale >= UFP4_SCALE_COUNT)
    return ufp4_fail(UFP4_EINVAL, "quantization format: invalid scale kind %d", (int)f->scale);
  if ((unsigned)f->metric >= UFP4_METRIC_COUNT)
    return ufp4_fail(UFP4_EINVAL, "quantization format: invalid adaptive metric %d", (int)f->metric);
  if (ufp4_adaptive_check(f->adaptive, f->grid, f->scale)) return UFP4_EINVAL;
  if (f->tile2d != 0 && f->tile2d != 16)
    return ufp4_fail(UFP4_EINVAL, "quantization format: tile2d must be 0 or 16, got %d", f->tile2d);
  if (f->tile2d == 0 && (!is_pow2(f->block) || f->block > 4096))
    return ufp4_fail(UFP4_EINVAL,
                     "quantization format: block must be a power of two in 1..4096, got %d",
                     f->block);
  if (f->rht != 0) {
    if (!is_pow2(f->rht) || f->rht < UFP4_RHT_MIN || f->rht > UFP4_RHT_MAX)
      return ufp4_fail(UFP4_EINVAL,
                       "quantization format: rht must be 0 or a power of two in %d..%d, got %d",
                       UFP4_RHT_MIN, UFP4_RHT_MAX, f->rht);
    if (cols % (size_t)f->rht != 0)
      return ufp4_fail(UFP4_EINVAL,
                       "quantization format: rht %d does not divide the row length %zu", f->rht,
                       cols);
  }
  if (cols != 0 && rows > SIZE_MAX / cols)
    return ufp4_fail(UFP4_ENOMEM, "quantization format: %zu x %zu elements overflow size_t", rows,
                     cols);
  return 0;
}

size_t ufp4_scale_count(const ufp4_qformat *f, size_t rows, size_t cols) {
  if (!f) return 0;
  if (f->tile2d) {
    size_t t = (size_t)f->tile2d;
    return ((rows + t - 1) / t) * ((cols + t - 1) / t);
  }
  if (f->block <= 0) return 0;
  size_t n = (size_t)f->block;
  return rows * ((cols + n - 1) / n);
}
