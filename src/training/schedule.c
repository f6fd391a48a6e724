/* Recipe schedules (include/ufp4/train.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/model.h"
#include "ufp4/recipe.h"
#include "training/recipe_phase.h"
#include "ufp4/train.h"

/* AT of one phase: an integer step, or a fraction of `steps` when it has a '.'. */
static int parse_at(const char *at, int steps, int *out) {
  char *end;
  if (strchr(at, '.')) {
    double f = strtod(at, &end);
    if (end == at || *end || !(f >= 0.0 && f <= 1.0))
      return ufp4_fail(UFP4_EINVAL, "schedule: '@%s' is not a fraction in [0, 1] or a step", at);
    *out = (int)llround(f * steps);
    return 0;
  }
  long v = strtol(at, &end, 10);
  if (end == at || *end || v < 0 || v > 1000000000L)
    return ufp4_fail(UFP4_EINVAL, "schedule: '@%s' is not a step number or a fraction", at);
  *out = (int)v;
  return 0;
}

/* Appends the phase SPEC@AT whose text is phase (the '@' still in it). */
static int add_phase(char *phase, int steps, ufp4_recipe_schedule *out) {
  char *at = strrchr(phase, '@');
  *at = '\0';
  const int i = out->n;
  if (i >= UFP4_MAX_PHASES) return ufp4_fail(UFP4_EINVAL, "schedule: more than %d phases", UFP4_MAX_PHASES);
  if (!*phase) return ufp4_fail(UFP4_EINVAL, "schedule: phase %d has no recipe before '@%s'", i + 1, at + 1);
  int rc = parse_at(at + 1, steps, &out->start[i]);
  if (rc) return rc;
  ufp4_recipe r;
  if ((rc = ufp4_recipe_parse(phase, &r))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ufp4_last_error()); /* ufp4_fail overwrites it */
    return ufp4_fail(rc, "schedule: phase %d '%s': %s", i + 1, phase, why);
  }
  if (i == 0 && out->start[0] != 0)
    return ufp4_fail(UFP4_EINVAL, "schedule: the first phase must start at 0, not step %d", out->start[0]);
  if (i > 0 && out->start[i] <= out->start[i - 1])
    return ufp4_fail(UFP4_EINVAL, "schedule: phase %d starts at step %d, not after phase %d (step %d)", i + 1,
                     out->start[i], i, out->start[i - 1]);
  snprintf(out->spec[i], sizeof out->spec[i], "%s", phase);
  out->n++;
  return 0;
}

int ufp4_schedule_parse(const char *text, int steps, ufp4_recipe_schedule *out) {
  memset(out, 0, sizeof *out);
  char buf[1024], phase[512];
  if (!text || !*text) return ufp4_fail(UFP4_EINVAL, "schedule: empty");
  if (strlen(text) >= sizeof buf) return ufp4_fail(UFP4_EINVAL, "schedule: too long");
  strcpy(buf, text);
  phase[0] = '\0';
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strlen(phase) + strlen(tok) + 2 > sizeof phase) return ufp4_fail(UFP4_EINVAL, "schedule: spec too long");
    if (phase[0]) strcat(phase, ",");
    strcat(phase, tok);
    if (!strchr(tok, '@')) continue;
    int rc = add_phase(phase, steps, out);
    if (rc) return rc;
    phase[0] = '\0';
  }
  if (phase[0]) return ufp4_fail(UFP4_EINVAL, "schedule: '%s' has no '@STEP' (e.g. 'ufp4@0,bf16@0.9')", phase);
  return 0;
}

int ufp4_schedule_phase(const ufp4_recipe_schedule *s, int step) {
  int p = 0;
  while (p + 1 < s->n && step >= s->start[p + 1]) p++;
  return p;
}

int ufp4_train_schedule(const ufp4_train_config *cfg, ufp4_recipe_schedule *out) {
  if (cfg->schedule[0]) return ufp4_schedule_parse(cfg->schedule, cfg->steps, out);
  memset(out, 0, sizeof *out);
  ufp4_recipe r;
  int rc = ufp4_recipe_parse(cfg->recipe, &r);
  if (rc) return rc;
  out->n = 1;
  snprintf(out->spec[0], sizeof out->spec[0], "%s", cfg->recipe);
  return 0;
}

/* The step of checkpoint folder dir (".../step_N", as `ufp4 train` names them), -1 for another name. */
static int ckpt_step(const char *dir) {
  size_t end = strlen(dir), start;
  while (end > 1 && dir[end - 1] == '/') end--;
  for (start = end; start > 0 && dir[start - 1] != '/'; start--) {}
  char name[64];
  int step, used = 0;
  if (end - start >= sizeof name) return -1;
  memcpy(name, dir + start, end - start);
  name[end - start] = '\0';
  return sscanf(name, "step_%d%n", &step, &used) == 1 && !name[used] && step >= 0 ? step : -1;
}

const char *ufp4_train_recipe_at(const ufp4_train_config *cfg, const char *ckpt_dir, ufp4_recipe_schedule *sched) {
  if (ufp4_train_schedule(cfg, sched)) return NULL;
  if (sched->n == 1) return sched->spec[0];
  const int step = ckpt_step(ckpt_dir);
  return step < 0 ? NULL : sched->spec[ufp4_schedule_phase(sched, step ? step - 1 : 0)];
}

/* ---- the loop's side (training/recipe_phase.h) */

/* The weight shape [out, in] of every projection (its tensor "NAME.weight"; a tied lm_head, which
 * has none, is [vocab, d_model]), in one pass: projections come in the tensor table's order. */
static void projection_shapes(const ufp4_model_config *c, const ufp4_projection_info *info, int n, size_t *out,
                              size_t *in) {
  for (int i = 0; i < n; i++) out[i] = (size_t)c->vocab, in[i] = (size_t)c->d_model;
  char want[UFP4_TENSOR_NAME_MAX + 8] = "";
  int j = 0;
  if (n) snprintf(want, sizeof want, "%s.weight", info[0].name);
  ufp4_tensor_info t;
  for (int k = 0; k < ufp4_model_tensor_count(c) && j < n; k++) {
    ufp4_model_tensor(c, k, &t);
    if (t.ndim != 2 || strcmp(t.name, want)) continue;
    out[j] = t.shape[0], in[j] = t.shape[1];
    if (++j < n) snprintf(want, sizeof want, "%s.weight", info[j].name);
  }
}

/* Before any step: every RHT of a 4-bit GEMM must divide the axis it rotates, Fprop's along the
 * projection's inputs, Dgrad's along its outputs and Wgrad's along the micro-batch's tokens
 * (batch x seq_len; MoE experts pad their groups to it, moe.h). Otherwise the run would stop at
 * its first step with the quantizer's bare "rht N does not divide the row length M"; this names
 * the projection, its recipe (after overrides), the GEMM and what to change. */
static int check_rht_axes(const ufp4_train_config *cfg, const ufp4_projection_info *info, const ufp4_recipe *per,
                          const size_t *outs, const size_t *ins, int n) {
  static const char *const gemm[] = {"Fprop", "Dgrad", "Wgrad"};
  const size_t tokens = (size_t)cfg->batch * (size_t)cfg->model.seq_len;
  for (int i = 0; i < n; i++) {
    const unsigned all = (1u << UFP4_N_GEMMS) - 1, padded = 1u << UFP4_WGRAD; /* experts pad their groups */
    size_t axis;
    const int g = ufp4_recipe_rht_misfit(&per[i], info[i].expert >= 0 ? all & ~padded : all, tokens, ins[i], outs[i], &axis);
    if (g < 0) continue;
    const ufp4_recipe *r = &per[i];
    const char *what = g == UFP4_WGRAD ? "the micro-batch's tokens (--batch x --seq-len)"
                                       : ufp4_recipe_rht_axis_name((ufp4_gemm_kind)g);
    char spec[1024];
    ufp4_recipe_format(r, spec, sizeof spec);
    return ufp4_fail(UFP4_EINVAL,
                     "train: %s under recipe %s: its %s RHT of %d rotates along %s, %zu, which %d does not "
                     "divide; change that size, or the projection's rht_n or rht (e.g. --override '%s=rht=none')",
                     info[i].name, spec, gemm[g], r->rht_n, what, axis, r->rht_n, info[i].name);
  }
  return 0;
}

int train_check_recipes(const ufp4_train_config *cfg, ufp4_recipe_schedule *sched) {
  int rc = ufp4_train_schedule(cfg, sched);
  const int n = ufp4_model_projection_count(&cfg->model);
  ufp4_recipe *per = rc ? NULL : malloc(sizeof *per * (size_t)n);
  ufp4_projection_info *info = rc ? NULL : malloc(sizeof *info * (size_t)n);
  size_t *shapes = rc ? NULL : malloc(sizeof *shapes * 2 * (size_t)n);
  if (!rc && (!per || !info || !shapes)) rc = ufp4_fail(UFP4_ENOMEM, "train: out of memory for the projection recipes");
  if (!rc) {
    ufp4_model_projections(&cfg->model, info);
    projection_shapes(&cfg->model, info, n, shapes, shapes + n);
  }
  int sr = 0;
  for (int p = 0; !rc && p < sched->n; p++) {
    ufp4_recipe base;
    if ((rc = ufp4_recipe_parse(sched->spec[p], &base)) ||
        (rc = ufp4_model_resolve_recipes(&cfg->model, &base, cfg->overrides, per)) ||
        (rc = check_rht_axes(cfg, info, per, shapes, shapes + n, n)))
      break;
    for (int i = 0; i < n; i++) sr |= ufp4_recipe_quantizes(&per[i]) && per[i].sr_mask;
  }
  free(per);
  free(info);
  free(shapes);
  /* Every micro-batch of every rank must draw its own stochastic-rounding streams (a run with no
   * operand under SR draws none). */
  if (!rc && sr)
    rc = ufp4_model_check_streams(&cfg->model, (uint64_t)cfg->steps, cfg->grad_accum, cfg->world);
  return rc;
}

int train_set_phase(ufp4_model *m, const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, int phase) {
  ufp4_recipe r;
  int rc = ufp4_recipe_parse(sched->spec[phase], &r);
  return rc ? rc : ufp4_model_set_recipes(m, &r, cfg->overrides, cfg->seed);
}

char *train_recipe_table(const ufp4_train_config *cfg, const char *spec) {
  const int n = ufp4_model_projection_count(&cfg->model);
  ufp4_recipe *per = malloc(sizeof *per * (size_t)n);
  ufp4_recipe base;
  char *table = NULL;
  if (per && !ufp4_recipe_parse(spec, &base) && !ufp4_model_resolve_recipes(&cfg->model, &base, cfg->overrides, per))
    table = ufp4_model_recipe_table(&cfg->model, per);
  free(per);
  return table;
}

void train_print_recipes(const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, FILE *out) {
  for (int p = 0; p < sched->n; p++) {
    char *table = train_recipe_table(cfg, sched->spec[p]);
    if (!table) break;
    fprintf(out, "recipes by projection, from step %d:\n", sched->start[p]);
    for (char *save = NULL, *line = strtok_r(table, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
      fprintf(out, "  %s\n", line);
    free(table);
  }
}

/* "0, 1800" of the starts below step. */
static void past_starts(const int *start, int n, int step, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int p = 0; p < n && start[p] < step && len < size; p++)
    len += (size_t)snprintf(out + len, size - len, "%s%d", p ? ", " : "", start[p]);
}

int train_check_resume_phases(const ufp4_train_config *cfg, const ufp4_recipe_schedule *sched, const int *saved,
                              int n_saved, int step) {
  if (n_saved <= 0) return 0;
  char was[256], now[256];
  past_starts(saved, n_saved, step, was, sizeof was);
  past_starts(sched->start, sched->n, step, now, sizeof now);
  if (!strcmp(was, now)) return 0;
  return ufp4_fail(UFP4_EINVAL,
                   "%s: resuming at step %d, the run had entered phases starting at steps {%s} of its schedule, "
                   "but this run's schedule (%s, with --steps %d) starts them at {%s}: a fraction in the schedule "
                   "moves with --steps; give the switch as a step number to keep it",
                   cfg->out_dir, step, was, cfg->schedule[0] ? cfg->schedule : cfg->recipe, cfg->steps, now);
}
