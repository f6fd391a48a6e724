/* Health guards (guard.h): the spec parser, the check of one operand's measures, and the names a
 * breach is reported with. */
#include "ufp4/guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/model.h"
#include "ufp4/moe.h"

static const char *const measure_names[UFP4_GUARD_N_MEASURES] = {"underflow", "clip", "sqnr", "srbias"};

const char *ufp4_guard_measure_name(ufp4_guard_measure k) {
  return (int)k >= 0 && k < UFP4_GUARD_N_MEASURES ? measure_names[k] : "?";
}

int ufp4_guard_is_ceiling(ufp4_guard_measure k) { return k != UFP4_GUARD_SQNR; }

/* The operand kind of a slot: "x", "w" or "dy" (what follows the '.' of its name). */
static const char *kind_of(ufp4_operand op) { return strchr(ufp4_operand_name(op), '.') + 1; }

/* Bit mask of the slots sel names (slot, kind or GEMM); 0 when it names none. */
static unsigned select_slots(const char *sel, size_t len) {
  unsigned mask = 0;
  for (int op = 0; op < UFP4_N_OPERANDS; op++) {
    const char *names[3] = {ufp4_operand_name((ufp4_operand)op), kind_of((ufp4_operand)op),
                            ufp4_gemm_name(ufp4_operand_gemm((ufp4_operand)op))};
    for (int k = 0; k < 3; k++)
      if (strlen(names[k]) == len && !strncmp(names[k], sel, len)) mask |= 1u << op;
  }
  return mask;
}

/* One rule "[SEL.]MEASURE OP VALUE" (len bytes at r) into g. */
static int parse_rule(const char *r, size_t len, ufp4_guard *g) {
  char rule[128];
  if (len >= sizeof rule) return ufp4_fail(UFP4_EINVAL, "guard: rule '%.*s...' is too long", 40, r);
  memcpy(rule, r, len);
  rule[len] = '\0';
  char *cmp = strpbrk(rule, "<>");
  if (!cmp)
    return ufp4_fail(UFP4_EINVAL, "guard: rule '%s' has no '<' or '>' (e.g. underflow<0.5, sqnr>10)",
                     rule);
  const char op = *cmp;
  *cmp = '\0';
  char *dot = strrchr(rule, '.'), *name = dot ? dot + 1 : rule;
  unsigned mask = (1u << UFP4_N_OPERANDS) - 1;
  if (dot && !(mask = select_slots(rule, (size_t)(dot - rule))))
    return ufp4_fail(UFP4_EINVAL,
                     "guard: rule '%.*s': '%.*s' is no operand (fprop.x ... wgrad.x, x, w, dy, fprop, "
                     "dgrad, wgrad)",
                     (int)len, r, (int)(dot - rule), rule);
  int k = 0;
  while (k < UFP4_GUARD_N_MEASURES && strcmp(name, measure_names[k])) k++;
  if (k == UFP4_GUARD_N_MEASURES)
    return ufp4_fail(UFP4_EINVAL, "guard: rule '%.*s': unknown measure '%s' (underflow, clip, sqnr, srbias)",
                     (int)len, r, name);
  if ((op == '<') != ufp4_guard_is_ceiling((ufp4_guard_measure)k))
    return ufp4_fail(UFP4_EINVAL, "guard: rule '%.*s': %s is a %s, write %s%cVALUE", (int)len, r, name,
                     op == '<' ? "floor" : "ceiling", name, op == '<' ? '>' : '<');
  char *end;
  const double v = strtod(cmp + 1, &end);
  if (k == UFP4_GUARD_SRBIAS && !strcmp(end, "sigma")) end += 5;
  const int frac = k == UFP4_GUARD_UNDERFLOW || k == UFP4_GUARD_CLIP;
  if (end == cmp + 1 || *end || !isfinite(v) || (frac && !(v > 0 && v <= 1)) ||
      (k == UFP4_GUARD_SRBIAS && !(v > 0)))
    return ufp4_fail(UFP4_EINVAL, "guard: rule '%.*s': '%s' is not a %s", (int)len, r, cmp + 1,
                     frac ? "fraction in (0, 1]"
                          : k == UFP4_GUARD_SRBIAS ? "positive number of sigmas (4 or 4sigma)" : "number of dB");
  for (int s = 0; s < UFP4_N_OPERANDS; s++)
    if (mask & (1u << s)) g->limit[s][k] = v;
  g->n_rules++;
  return 0;
}

int ufp4_guard_parse(const char *spec, ufp4_guard *g) {
  for (int s = 0; s < UFP4_N_OPERANDS; s++)
    for (int k = 0; k < UFP4_GUARD_N_MEASURES; k++) g->limit[s][k] = NAN;
  g->n_rules = 0;
  if (!spec || !spec[0] || !strcmp(spec, "none")) return 0;
  for (const char *p = spec;;) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!len) return ufp4_fail(UFP4_EINVAL, "guard: empty rule in '%s'", spec);
    int rc = parse_rule(p, len, g);
    if (rc) return rc;
    if (!e) return 0;
    p = e + 1;
  }
}

/* The value of measure k in m; NAN for srbias when the SR test does not apply. */
static double value_of(const ufp4_qmeasures *m, ufp4_guard_measure k, int *applies) {
  *applies = 1;
  switch (k) {
  case UFP4_GUARD_UNDERFLOW: return m->underflow;
  case UFP4_GUARD_CLIP: return m->clipped;
  case UFP4_GUARD_SQNR: return m->sqnr_db;
  default:
    *applies = m->sr_n >= UFP4_GUARD_SR_MIN_N;
    return fmax(fabs(m->sr_z_mag), fabs(m->sr_z_val));
  }
}

int ufp4_guard_check(const ufp4_guard *g, ufp4_operand op, const ufp4_qmeasures *m,
                     ufp4_guard_breach *out, int max) {
  int n = 0;
  for (int k = 0; g->n_rules && k < UFP4_GUARD_N_MEASURES; k++) {
    const double lim = g->limit[op][k];
    int applies;
    const double v = value_of(m, (ufp4_guard_measure)k, &applies);
    if (isnan(lim) || !applies) continue;
    /* Written so that a NaN value breaches. */
    const int ok = ufp4_guard_is_ceiling((ufp4_guard_measure)k) ? v < lim : v > lim;
    if (ok) continue;
    if (n < max) {
      ufp4_guard_breach *b = &out[n];
      memset(b, 0, sizeof *b);
      b->op = op;
      b->measure = (ufp4_guard_measure)k;
      b->value = v;
      b->limit = lim;
    }
    n++;
  }
  return n;
}

void ufp4_guard_proj_name(const ufp4_model_config *c, int layer, int proj, char *buf, size_t size) {
  /* The probe's id of an expert projection is UFP4_PROJ_EXPERT(e, k); the table's is (GATE + k, e). */
  const int first = UFP4_PROJ_EXPERT(0, 0);
  const int expert = proj >= first && proj != UFP4_PROJ_HEAD ? (proj - first) / 3 : -1;
  const int id = expert >= 0 ? UFP4_PROJ_GATE + (proj - first) % 3 : proj;
  snprintf(buf, size, "model.layers.%d.proj%d", layer, proj); /* no projection of c has this id */
  const int n = ufp4_model_projection_count(c);
  ufp4_projection_info *p = malloc((size_t)n * sizeof *p); /* only on a breach: not a hot path */
  if (!p) return;
  ufp4_model_projections(c, p);
  for (int i = 0; i < n; i++)
    if (p[i].proj == id && p[i].expert == expert && (proj == UFP4_PROJ_HEAD || p[i].layer == layer)) {
      snprintf(buf, size, "%s", p[i].name);
      break;
    }
  free(p);
}

void ufp4_guard_describe(const ufp4_guard_breach *b, char *buf, size_t size) {
  static const char *const kind_label[] = {"X", "W", "dY", "W", "dY", "X"};
  const int ceiling = ufp4_guard_is_ceiling(b->measure);
  snprintf(buf, size, "step %d, %s, %s operand %s (%s): %s %.6g %s %.6g (must stay %s %.6g)", b->step,
           b->proj_name, ufp4_gemm_name(ufp4_operand_gemm(b->op)), kind_label[b->op],
           ufp4_operand_name(b->op), ufp4_guard_measure_name(b->measure), b->value, ceiling ? ">=" : "<=",
           b->limit, ceiling ? "below" : "above", b->limit);
}
