#include "ufp4/recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/rht.h"

const char *const ufp4_recipe_presets[] = {"fp32",  "bf16",        "e2m1",         "ufp4",
                                           "nvfp4", "mxfp4", "e2m1-4over6", "nvfp4-4over6", NULL};

/* The 4/6 presets: a base preset with adaptive=4over6 (MSE, the paper's default). */
static const struct {
  const char *name, *base;
} four_over_six_presets[] = {{"e2m1-4over6", "e2m1"}, {"nvfp4-4over6", "nvfp4"}};

static const char *const operand_names[UFP4_N_OPERANDS] = {"fprop.x", "fprop.w", "dgrad.dy",
                                                           "dgrad.w", "wgrad.dy", "wgrad.x"};
static const char *const gemm_names[UFP4_N_GEMMS] = {"fprop", "dgrad", "wgrad"};

#define BIT(x) (1u << (x))
#define SR_DY (BIT(UFP4_OP_DGRAD_DY) | BIT(UFP4_OP_WGRAD_DY))
#define SR_BACKWARD (SR_DY | BIT(UFP4_OP_DGRAD_W) | BIT(UFP4_OP_WGRAD_X))
#define SR_ALL ((1u << UFP4_N_OPERANDS) - 1)
#define RHT_ALL ((1u << UFP4_N_GEMMS) - 1)

/* The papers' 1x16 blocks and 16-point RHT, the default of every preset but mxfp4's. */
#define PAPER_BLOCK 16
#define PAPER_RHT_N 16
#define MXFP4_BLOCK 32
#define MXFP4_RHT_N 64
#define MXFP4_SR_PRESCALE 0.75f /* Tseng et al.: keeps SR from clipping at the block maximum */
#define SR_BITS_EXACT 32
#define SR_BITS_HW 8
/* quant.h's 2D weight tiles are 16x16. */
#define W_TILE 16
#define NVIDIA_SIGNS_N ((int)(sizeof ufp4_rht_signs_nvidia16 / sizeof ufp4_rht_signs_nvidia16[0]))
/* Largest block= and keep_first= / keep_last= values the parser accepts. */
#define MAX_BLOCK 4096
#define MAX_KEPT (1 << 20)

const char *ufp4_operand_name(ufp4_operand op) {
  return (unsigned)op < UFP4_N_OPERANDS ? operand_names[op] : "?";
}

const char *ufp4_gemm_name(ufp4_gemm_kind g) {
  return (unsigned)g < UFP4_N_GEMMS ? gemm_names[g] : "?";
}

ufp4_gemm_kind ufp4_operand_gemm(ufp4_operand op) {
  return (ufp4_gemm_kind)(op / UFP4_OPERANDS_PER_GEMM);
}

static ufp4_recipe preset_base(const char *name, ufp4_precision p) {
  ufp4_recipe r = {0};
  snprintf(r.name, sizeof r.name, "%s", name);
  r.precision = p;
  r.grid = UFP4_GRID_E2M1;
  r.scale = UFP4_SCALE_FP32;
  r.block = PAPER_BLOCK;
  r.round = UFP4_ROUND_RNE;
  r.sr_bits = SR_BITS_EXACT;
  r.sr_prescale = 1.0f;
  r.rht_n = PAPER_RHT_N;
  r.rht_signs = UFP4_SIGNS_RANDOM;
  return r;
}

static int preset(const char *name, ufp4_recipe *r) {
  for (size_t i = 0; i < sizeof four_over_six_presets / sizeof four_over_six_presets[0]; i++)
    if (!strcmp(name, four_over_six_presets[i].name)) {
      int rc = preset(four_over_six_presets[i].base, r);
      snprintf(r->name, sizeof r->name, "%s", name);
      r->adaptive = UFP4_ADAPTIVE_4OVER6;
      r->metric = UFP4_METRIC_MSE;
      return rc;
    }
  if (!strcmp(name, "fp32")) {
    *r = preset_base(name, UFP4_PREC_FP32);
  } else if (!strcmp(name, "bf16")) {
    *r = preset_base(name, UFP4_PREC_BF16);
  } else if (!strcmp(name, "e2m1")) {
    *r = preset_base(name, UFP4_PREC_FP4);
    r->rht_mask = BIT(UFP4_WGRAD);
    r->sr_mask = SR_DY;
  } else if (!strcmp(name, "ufp4")) {
    *r = preset_base(name, UFP4_PREC_FP4);
    r->grid = UFP4_GRID_E1M2;
    r->rht_mask = RHT_ALL;
    r->sr_mask = SR_DY;
  } else if (!strcmp(name, "nvfp4")) {
    *r = preset_base(name, UFP4_PREC_FP4);
    r->scale = UFP4_SCALE_NVFP4;
    r->tile2d = 1;
    r->rht_mask = BIT(UFP4_WGRAD);
    r->rht_signs = UFP4_SIGNS_NVIDIA;
    r->sr_mask = SR_DY;
  } else if (!strcmp(name, "mxfp4")) {
    *r = preset_base(name, UFP4_PREC_FP4);
    r->scale = UFP4_SCALE_E8M0_FLOOR;
    r->block = MXFP4_BLOCK;
    r->rht_mask = BIT(UFP4_DGRAD) | BIT(UFP4_WGRAD);
    r->rht_n = MXFP4_RHT_N;
    r->sr_mask = SR_BACKWARD;
    r->sr_prescale = MXFP4_SR_PRESCALE;
  } else {
    return ufp4_fail(UFP4_EINVAL,
                     "recipe: unknown preset '%s' (fp32, bf16, e2m1, ufp4, nvfp4, mxfp4, e2m1-4over6, "
                     "nvfp4-4over6)",
                     name);
  }
  return 0;
}

/* Parses '+'-joined names from `names` into a bit mask; `all` and `none` are accepted. */
static int parse_mask(const char *key, const char *value, const char *const *names, int n,
                      unsigned all, unsigned *out) {
  if (!strcmp(value, "none")) {
    *out = 0;
    return 0;
  }
  if (!strcmp(value, "all")) {
    *out = all;
    return 0;
  }
  unsigned mask = 0;
  char buf[256];
  if (strlen(value) >= sizeof buf) return ufp4_fail(UFP4_EINVAL, "recipe: %s: value too long", key);
  strcpy(buf, value);
  for (char *save = NULL, *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
    int found = 0;
    if (names == operand_names && !strcmp(tok, "dy")) {
      mask |= SR_DY;
      found = 1;
    }
    for (int i = 0; i < n && !found; i++)
      if (!strcmp(tok, names[i])) {
        mask |= 1u << i;
        found = 1;
      }
    if (!found) return ufp4_fail(UFP4_EINVAL, "recipe: %s: unknown name '%s'", key, tok);
  }
  *out = mask;
  return 0;
}

static int parse_int(const char *key, const char *value, int lo, int hi, int *out) {
  char *end;
  long v = strtol(value, &end, 10);
  if (end == value || *end || v < lo || v > hi)
    return ufp4_fail(UFP4_EINVAL, "recipe: %s=%s: expected an integer in [%d, %d]", key, value, lo, hi);
  *out = (int)v;
  return 0;
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static const char *const precision_names[] = {"fp32", "bf16", "fp4"};

/* fprop=/dgrad=/wgrad=: P or `recipe` (back to the preset's precision). */
static int apply_gemm(ufp4_recipe *r, ufp4_gemm_kind g, const char *value) {
  if (!strcmp(value, "recipe")) {
    r->gemm_precision[g] = 0;
    return 0;
  }
  for (int p = UFP4_PREC_FP32; p <= UFP4_PREC_FP4; p++)
    if (!strcmp(value, precision_names[p])) {
      r->gemm_precision[g] = (unsigned char)(p + 1);
      return 0;
    }
  return ufp4_fail(UFP4_EINVAL, "recipe: %s=%s: expected fp32, bf16, fp4 or recipe", gemm_names[g], value);
}

static int apply(ufp4_recipe *r, const char *key, const char *value) {
  int v;
  for (int g = 0; g < UFP4_N_GEMMS; g++)
    if (!strcmp(key, gemm_names[g])) return apply_gemm(r, (ufp4_gemm_kind)g, value);
  if (!strcmp(key, "grid")) return ufp4_grid_parse(value, &r->grid);
  if (!strcmp(key, "scale")) return ufp4_scale_parse(value, &r->scale);
  if (!strcmp(key, "round")) {
    ufp4_round_mode m;
    int rc = ufp4_round_parse(value, &m);
    if (rc) return rc;
    if (ufp4_round_is_stochastic(m))
      return ufp4_fail(UFP4_EINVAL, "recipe: round=%s: stochastic rounding is chosen per operand with sr=",
                       value);
    r->round = m;
    return 0;
  }
  if (!strcmp(key, "block")) {
    if (parse_int(key, value, 1, MAX_BLOCK, &v)) return UFP4_EINVAL;
    if (!is_pow2(v)) return ufp4_fail(UFP4_EINVAL, "recipe: block=%d is not a power of two", v);
    r->block = v;
    return 0;
  }
  if (!strcmp(key, "sr")) return parse_mask(key, value, operand_names, UFP4_N_OPERANDS, SR_ALL, &r->sr_mask);
  if (!strcmp(key, "sr_bits")) {
    if (strcmp(value, "32") && strcmp(value, "8"))
      return ufp4_fail(UFP4_EINVAL, "recipe: sr_bits=%s: expected 32 or 8", value);
    r->sr_bits = atoi(value);
    return 0;
  }
  if (!strcmp(key, "sr_prescale")) {
    char *end;
    float f = strtof(value, &end);
    if (end == value || *end || !(f > 0.0f && f <= 1.0f))
      return ufp4_fail(UFP4_EINVAL, "recipe: sr_prescale=%s: expected a number in (0, 1]", value);
    r->sr_prescale = f;
    return 0;
  }
  if (!strcmp(key, "rht")) return parse_mask(key, value, gemm_names, UFP4_N_GEMMS, RHT_ALL, &r->rht_mask);
  if (!strcmp(key, "rht_n")) {
    if (parse_int(key, value, UFP4_RHT_MIN, UFP4_RHT_MAX, &v)) return UFP4_EINVAL;
    if (!is_pow2(v)) return ufp4_fail(UFP4_EINVAL, "recipe: rht_n=%d is not a power of two", v);
    r->rht_n = v;
    return 0;
  }
  if (!strcmp(key, "rht_signs")) {
    if (!strcmp(value, "random")) r->rht_signs = UFP4_SIGNS_RANDOM;
    else if (!strcmp(value, "nvidia")) r->rht_signs = UFP4_SIGNS_NVIDIA;
    else return ufp4_fail(UFP4_EINVAL, "recipe: rht_signs=%s: expected random or nvidia", value);
    return 0;
  }
  if (!strcmp(key, "tile2d")) return parse_int(key, value, 0, 1, &r->tile2d);
  if (!strcmp(key, "keep_first")) return parse_int(key, value, 0, MAX_KEPT, &r->keep_first);
  if (!strcmp(key, "keep_last")) return parse_int(key, value, 0, MAX_KEPT, &r->keep_last);
  if (!strcmp(key, "adaptive")) return ufp4_adaptive_parse(value, &r->adaptive);
  if (!strcmp(key, "adaptive_metric")) return ufp4_metric_parse(value, &r->metric);
  return ufp4_fail(UFP4_EINVAL, "recipe: unknown key '%s'", key);
}

static int check(const ufp4_recipe *r) {
  if (r->rht_signs == UFP4_SIGNS_NVIDIA && r->rht_n != NVIDIA_SIGNS_N && r->rht_mask)
    return ufp4_fail(UFP4_EINVAL, "recipe: rht_signs=nvidia is a %d-entry vector, but rht_n=%d",
                     NVIDIA_SIGNS_N, r->rht_n);
  if (ufp4_recipe_quantizes(r) && ufp4_adaptive_check(r->adaptive, r->grid, r->scale)) {
    char why[256]; /* copied: ufp4_fail rewrites the buffer ufp4_last_error points to */
    snprintf(why, sizeof why, "%s", ufp4_last_error());
    return ufp4_fail(UFP4_EINVAL, "recipe: %s", why);
  }
  return 0;
}

/* Parses spec onto *r: from its preset, or, when partial is allowed and the first item is a
 * key=value pair, from *r as it is. */
static int parse_onto(const char *spec, ufp4_recipe *r, int partial) {
  if (!spec || !*spec) return ufp4_fail(UFP4_EINVAL, "recipe: empty spec");
  char buf[512];
  if (strlen(spec) >= sizeof buf) return ufp4_fail(UFP4_EINVAL, "recipe: spec too long");
  strcpy(buf, spec);
  char *save = NULL;
  char *tok = strtok_r(buf, ",", &save);
  int rc = 0;
  if (!tok) return ufp4_fail(UFP4_EINVAL, "recipe: empty spec '%s'", spec);
  if (!partial || !strchr(tok, '=')) {
    if ((rc = preset(tok, r))) return rc;
    tok = strtok_r(NULL, ",", &save);
  }
  for (; tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok || !eq[1])
      return ufp4_fail(UFP4_EINVAL, "recipe: '%s' is not key=value", tok);
    *eq = '\0';
    if ((rc = apply(r, tok, eq + 1))) return rc;
  }
  return check(r);
}

int ufp4_recipe_parse(const char *spec, ufp4_recipe *r) { return parse_onto(spec, r, 0); }

int ufp4_recipe_apply(const char *spec, ufp4_recipe *r) {
  ufp4_recipe t = *r;
  int rc = parse_onto(spec, &t, 1);
  if (!rc) *r = t;
  return rc;
}

ufp4_precision ufp4_recipe_gemm_precision(const ufp4_recipe *r, ufp4_gemm_kind g) {
  return r->gemm_precision[g] ? (ufp4_precision)(r->gemm_precision[g] - 1) : r->precision;
}

int ufp4_recipe_quantizes(const ufp4_recipe *r) {
  for (int g = 0; g < UFP4_N_GEMMS; g++)
    if (ufp4_recipe_gemm_precision(r, (ufp4_gemm_kind)g) == UFP4_PREC_FP4) return 1;
  return 0;
}

int ufp4_recipe_rht_misfit(const ufp4_recipe *r, unsigned gemm_mask, size_t tokens, size_t in, size_t out,
                           size_t *axis) {
  if (r->rht_n <= 0) return -1;
  for (int g = 0; g < UFP4_N_GEMMS; g++) {
    if (!(gemm_mask & r->rht_mask & (1u << g)) || ufp4_recipe_gemm_precision(r, (ufp4_gemm_kind)g) != UFP4_PREC_FP4)
      continue;
    const size_t len = g == UFP4_FPROP ? in : g == UFP4_DGRAD ? out : tokens;
    if (len % (size_t)r->rht_n) {
      *axis = len;
      return g;
    }
  }
  return -1;
}

const char *ufp4_recipe_rht_axis_name(ufp4_gemm_kind g) {
  return g == UFP4_FPROP ? "its inputs" : g == UFP4_DGRAD ? "its outputs" : "the tokens";
}

static void mask_string(unsigned mask, const char *const *names, int n, char *out, size_t size) {
  out[0] = '\0';
  if (!mask) {
    snprintf(out, size, "none");
    return;
  }
  size_t len = 0;
  for (int i = 0; i < n; i++)
    if (mask & (1u << i)) len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", len ? "+" : "", names[i]);
}

/* ",fprop=bf16" for each GEMM with its own precision; "" when none has (the format of every recipe
 * before per-GEMM keys existed, so their config.json files keep their text). */
static void gemm_keys(const ufp4_recipe *r, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int g = 0; g < UFP4_N_GEMMS; g++)
    if (r->gemm_precision[g])
      len += (size_t)snprintf(out + len, len < size ? size - len : 0, ",%s=%s", gemm_names[g],
                              precision_names[r->gemm_precision[g] - 1]);
}

void ufp4_recipe_format(const ufp4_recipe *r, char *buf, size_t size) {
  char sr[96], rht[64], gk[64];
  mask_string(r->sr_mask, operand_names, UFP4_N_OPERANDS, sr, sizeof sr);
  mask_string(r->rht_mask, gemm_names, UFP4_N_GEMMS, rht, sizeof rht);
  gemm_keys(r, gk, sizeof gk);
  if (r->precision != UFP4_PREC_FP4 && !ufp4_recipe_quantizes(r)) {
    snprintf(buf, size, "%s,keep_first=%d,keep_last=%d%s", precision_names[r->precision], r->keep_first,
             r->keep_last, gk);
    return;
  }
  /* adaptive= only where it says something: the specs of pre-4/6 recipes keep their bytes. */
  ufp4_recipe base;
  char adapt[64] = "";
  char saved[512]; /* a hand-named recipe is no preset: keep the caller's error text */
  snprintf(saved, sizeof saved, "%s", ufp4_last_error());
  if (preset(r->name, &base) != 0) {
    base.adaptive = UFP4_ADAPTIVE_NONE, base.metric = UFP4_METRIC_MSE;
    ufp4_fail(UFP4_EINVAL, "%s", saved);
  }
  if (r->adaptive || r->metric || base.adaptive || base.metric)
    snprintf(adapt, sizeof adapt, ",adaptive=%s,adaptive_metric=%s", ufp4_adaptive_name(r->adaptive),
             ufp4_metric_name(r->metric));
  snprintf(buf, size,
           "%s,grid=%s,scale=%s,block=%d,round=%s,sr=%s,sr_bits=%d,sr_prescale=%.9g,rht=%s,rht_n=%d,"
           "rht_signs=%s,tile2d=%d,keep_first=%d,keep_last=%d%s%s",
           r->name, ufp4_grid_get(r->grid)->name, ufp4_scale_name(r->scale), r->block, ufp4_round_name(r->round),
           sr, r->sr_bits, (double)r->sr_prescale, rht, r->rht_n,
           r->rht_signs == UFP4_SIGNS_NVIDIA ? "nvidia" : "random", r->tile2d, r->keep_first, r->keep_last,
           adapt, gk);
}

ufp4_qformat ufp4_recipe_operand_format(const ufp4_recipe *r, ufp4_operand op) {
  ufp4_qformat f = ufp4_qformat_default();
  f.grid = r->grid;
  f.scale = r->scale;
  f.block = r->block;
  int is_w = op == UFP4_OP_FPROP_W || op == UFP4_OP_DGRAD_W;
  f.tile2d = (r->tile2d && is_w) ? W_TILE : 0;
  if (r->sr_mask & (1u << op)) f.round = r->sr_bits == SR_BITS_HW ? UFP4_ROUND_SR8 : UFP4_ROUND_SR;
  else f.round = r->round;
  f.rht = (r->rht_mask & (1u << ufp4_operand_gemm(op))) ? r->rht_n : 0;
  f.adaptive = r->adaptive;
  f.metric = r->metric;
  return f;
}
