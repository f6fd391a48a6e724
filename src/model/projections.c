/* Projection names, per-projection recipes and their compact table (include/ufp4/model.h). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/model.h"
#include "core/strbuf.h"

/* The four attention projections come first in every block, then the MLP's. */
#define ATTN_PROJ 4
#define EXPERT_GEMMS 3
#define WEIGHT_SUFFIX ".weight"
#define PROJ_SUFFIX "_proj" WEIGHT_SUFFIX

int ufp4_model_projection_count(const ufp4_model_config *c) {
  int n = 1; /* lm_head */
  for (int l = 0; l < c->n_layers; l++) {
    if (!ufp4_model_layer_is_moe(c, l)) n += ATTN_PROJ + EXPERT_GEMMS;
    else n += ATTN_PROJ + EXPERT_GEMMS * (c->moe_experts + (c->moe_shared_ffn > 0 ? 1 : 0));
  }
  return n;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

/* The projections are the tensors named *_proj.weight, in table order: a block's q, k, v, o, then
 * its dense gate, up, down, or each expert's gate, up, down and the shared expert's. */
void ufp4_model_projections(const ufp4_model_config *c, ufp4_projection_info *out) {
  const int nt = ufp4_model_tensor_count(c);
  int n = 0, layer = -1, slot = 0;
  for (int i = 0; i < nt; i++) {
    ufp4_tensor_info t;
    ufp4_model_tensor(c, i, &t);
    if (!ends_with(t.name, PROJ_SUFFIX)) continue;
    int l = -1;
    sscanf(t.name, "model.layers.%d.", &l);
    if (l != layer) slot = 0;
    layer = l;
    ufp4_projection_info *p = &out[n++];
    snprintf(p->name, sizeof p->name, "%.*s", (int)(strlen(t.name) - strlen(WEIGHT_SUFFIX)), t.name);
    p->layer = l;
    if (slot < ATTN_PROJ || !ufp4_model_layer_is_moe(c, l)) {
      p->proj = slot;
      p->expert = -1;
    } else {
      p->proj = UFP4_PROJ_GATE + (slot - ATTN_PROJ) % EXPERT_GEMMS;
      p->expert = (slot - ATTN_PROJ) / EXPERT_GEMMS;
    }
    slot++;
  }
  ufp4_projection_info *h = &out[n];
  snprintf(h->name, sizeof h->name, "lm_head");
  h->layer = -1;
  h->proj = UFP4_PROJ_HEAD;
  h->expert = -1;
}

/* One PATTERN=SPEC item applied to every projection it matches. */
static int apply_override(const char *item, const ufp4_projection_info *p, int n, ufp4_recipe *out) {
  char buf[640];
  const char *eq = strchr(item, '=');
  if (strlen(item) >= sizeof buf || !eq || eq == item || !eq[1])
    return ufp4_fail(UFP4_EINVAL, "override '%s': expected PATTERN=SPEC (e.g. 'lm_head=ufp4')", item);
  snprintf(buf, sizeof buf, "%.*s", (int)(eq - item), item);
  const char *spec = eq + 1;
  if (strstr(spec, "keep_first=") || strstr(spec, "keep_last="))
    return ufp4_fail(UFP4_EINVAL, "override '%s': keep_first / keep_last belong to the run's recipe", item);
  int matched = 0;
  for (int i = 0; i < n; i++) {
    if (fnmatch(buf, p[i].name, 0)) continue;
    matched++;
    int rc = ufp4_recipe_apply(spec, &out[i]);
    if (rc) {
      char why[512];
      snprintf(why, sizeof why, "%s", ufp4_last_error()); /* ufp4_fail overwrites it */
      return ufp4_fail(rc, "override '%s': %s", item, why);
    }
    out[i].keep_first = out[i].keep_last = 0;
  }
  if (!matched)
    return ufp4_fail(UFP4_EINVAL, "override '%s': pattern '%s' matches no projection (names like "
                     "model.layers.0.self_attn.q_proj, model.layers.0.mlp.down_proj, lm_head)", item, buf);
  return 0;
}

int ufp4_model_resolve_recipes(const ufp4_model_config *c, const ufp4_recipe *base, const char *overrides,
                               ufp4_recipe *out) {
  const int n = ufp4_model_projection_count(c), L = c->n_layers;
  ufp4_projection_info *p = malloc(sizeof *p * (size_t)n);
  if (!p) return ufp4_fail(UFP4_ENOMEM, "model: out of memory for the projection table");
  ufp4_model_projections(c, p);
  ufp4_recipe fp32;
  int rc = ufp4_recipe_parse("fp32", &fp32);
  for (int i = 0; !rc && i < n; i++) {
    const int kept = p[i].layer < 0 || p[i].layer < base->keep_first || p[i].layer >= L - base->keep_last;
    out[i] = kept ? fp32 : *base;
    out[i].keep_first = out[i].keep_last = 0;
  }
  char *list = overrides ? strdup(overrides) : NULL;
  if (overrides && !list) rc = ufp4_fail(UFP4_ENOMEM, "model: out of memory for the overrides");
  int items = 0;
  char *save = NULL;
  for (char *it = list ? strtok_r(list, ";", &save) : NULL; !rc && it; it = strtok_r(NULL, ";", &save)) {
    if (++items > UFP4_MAX_OVERRIDES)
      rc = ufp4_fail(UFP4_EINVAL, "overrides: more than %d items", UFP4_MAX_OVERRIDES);
    else
      rc = apply_override(it, p, n, out);
  }
  free(list);
  free(p);
  return rc;
}

/* ---- the compact table */

/* What follows a block projection's layer index (".self_attn.q_proj"); NULL for lm_head. */
static const char *rest_of(const ufp4_projection_info *p) {
  static const char prefix[] = "model.layers.";
  if (strncmp(p->name, prefix, sizeof prefix - 1)) return NULL;
  return strchr(p->name + sizeof prefix - 1, '.');
}

/* 1 when projection j is projection i's name in another (or the same) block. */
static int same_name(const ufp4_projection_info *p, int j, const char *rest) {
  const char *r = rest_of(&p[j]);
  return r && !strcmp(r, rest);
}

/* Appends projection i folded over the layers where the same name under recipe spec[i] is: "*"
 * when those are all the layers having it, else a brace list of ranges. Marks them done. */
static void fold(ufp4_strbuf *sb, const ufp4_projection_info *p, char (*spec)[512], int n, int i, char *done) {
  const char *rest = rest_of(&p[i]);
  if (!rest) {
    ufp4_strbuf_printf(sb, " %s", p[i].name);
    done[i] = 1;
    return;
  }
  int all = 1, count = 0, prev = -2, run_start = -1, first = 1;
  for (int j = 0; j < n; j++) {
    if (!same_name(p, j, rest)) continue;
    if (strcmp(spec[j], spec[i])) all = 0;
    else done[j] = 1, count++;
  }
  if (all || count == 1) {
    ufp4_strbuf_printf(sb, all ? " model.layers.*%s" : " %s", all ? rest : p[i].name);
    return;
  }
  ufp4_strbuf_printf(sb, " model.layers.{");
  for (int j = i; j <= n; j++) {
    const int in = j < n && same_name(p, j, rest) && !strcmp(spec[j], spec[i]);
    if (j < n && !in) continue;
    const int l = in ? p[j].layer : -2;
    if (in && l == prev + 1) {
      prev = l;
      continue;
    }
    if (run_start >= 0) {
      ufp4_strbuf_printf(sb, first ? "%d" : ",%d", run_start);
      if (prev > run_start) ufp4_strbuf_printf(sb, "-%d", prev);
      first = 0;
    }
    run_start = l;
    prev = l;
  }
  ufp4_strbuf_printf(sb, "}%s", rest);
}

char *ufp4_model_recipe_table(const ufp4_model_config *c, const ufp4_recipe *per_proj) {
  const int n = ufp4_model_projection_count(c);
  ufp4_projection_info *p = malloc(sizeof *p * (size_t)n);
  char(*spec)[512] = malloc(sizeof *spec * (size_t)n);
  char *done = calloc((size_t)n, 1), *listed = calloc((size_t)n, 1);
  ufp4_strbuf sb = {0};
  if (p && spec && done && listed) {
    ufp4_model_projections(c, p);
    for (int i = 0; i < n; i++) ufp4_recipe_format(&per_proj[i], spec[i], sizeof spec[i]);
    for (int i = 0; i < n; i++) {
      if (listed[i]) continue;
      ufp4_strbuf_printf(&sb, "%s:", spec[i]);
      for (int j = i; j < n; j++) {
        if (strcmp(spec[j], spec[i])) continue;
        listed[j] = 1;
        if (!done[j]) fold(&sb, p, spec, n, j, done);
      }
      ufp4_strbuf_printf(&sb, "\n");
    }
  }
  free(p);
  free(spec);
  free(done);
  free(listed);
  if (sb.oom || !sb.s) {
    ufp4_strbuf_free(&sb);
    return NULL;
  }
  return sb.s;
}
