/* report.json: every figure of the report, machine readable. Non-finite numbers are null. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_internal.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

static void num(cJSON *o, const char *key, double v) {
  if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}

static void msd(cJSON *o, const char *key, ufp4_msd m) {
  cJSON *x = cJSON_AddObjectToObject(o, key);
  num(x, "mean", m.mean);
  num(x, "std", m.std);
  cJSON_AddNumberToObject(x, "n", m.n);
}

/* One ordered pair, in the metric's own units (rel_err as a fraction, signed_gap in nats). */
static void pair_json(const ufp4_report *r, const ufp4_report_pair *p, cJSON *arr) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToArray(arr, o);
  cJSON_AddStringToObject(o, "a", r->recipes[p->a].recipe);
  cJSON_AddStringToObject(o, "b", r->recipes[p->b].recipe);
  cJSON_AddStringToObject(o, "metric", p->metric ? "signed_gap" : "rel_err");
  cJSON_AddNumberToObject(o, "n", (double)p->n);
  cJSON_AddBoolToObject(o, "valid", p->valid);
  num(o, "mean_diff", p->mean);
  num(o, "sd_diff", p->s.sd);
  num(o, "se", p->s.se);
  num(o, "ci_lo", p->s.lo);
  num(o, "ci_hi", p->s.hi);
  num(o, "t", p->s.t);
  if (isinf(p->s.t)) cJSON_AddStringToObject(o, "t_text", p->s.t > 0 ? "inf" : "-inf");
  num(o, "df", p->s.df);
  num(o, "p", p->s.p);
  num(o, "mdd", p->s.mdd);
  cJSON_AddBoolToObject(o, "significant", p->significant);
  if (p->need == UFP4_REPORT_NEED_OK) cJSON_AddNumberToObject(o, "seeds_needed", (double)p->seeds_needed);
  else cJSON_AddNullToObject(o, "seeds_needed");
  static const char *const need[] = {"none", "ok", "no spread", "more than the limit"};
  cJSON_AddStringToObject(o, "seeds_needed_status", need[p->need]);
}

int rpt_write_json(const ufp4_report *r, const char *path) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  cJSON_AddStringToObject(j, "title", r->title);
  cJSON_AddStringToObject(j, "command", r->command);
  if (r->commit[0]) cJSON_AddStringToObject(j, "commit", r->commit);
  cJSON_AddStringToObject(j, "baseline", r->baseline);
  if (r->control) cJSON_AddStringToObject(j, "control", r->control);
  else cJSON_AddNullToObject(j, "control");
  cJSON_AddNumberToObject(j, "final_steps", r->final_steps);
  cJSON_AddStringToObject(j, "metric", "mean over the window of |L - L_base| / L_base against the same seed");
  cJSON_AddBoolToObject(j, "plots", r->plotted);
  cJSON_AddStringToObject(j, "plot_note", r->plot_note);
  num(j, "noise_floor", r->control_idx >= 0 ? r->recipes[r->control_idx].rel_err.mean : NAN);

  cJSON *runs = cJSON_AddArrayToObject(j, "runs");
  for (size_t i = 0; i < r->n_runs; i++) {
    const ufp4_report_run_result *x = &r->runs[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(runs, o);
    cJSON_AddStringToObject(o, "recipe", x->recipe);
    cJSON_AddNumberToObject(o, "seed", (double)x->seed);
    cJSON_AddStringToObject(o, "dir", x->dir);
    cJSON_AddStringToObject(o, "config_recipe", x->config_recipe);
    cJSON_AddNumberToObject(o, "train_lines", (double)x->train.n);
    cJSON_AddNumberToObject(o, "val_lines", (double)x->val.n);
    cJSON_AddNumberToObject(o, "skipped", x->skipped);
    cJSON_AddNumberToObject(o, "last_step", x->train.n ? x->train.step[x->train.n - 1] : 0);
    cJSON_AddNumberToObject(o, "window", x->window);
    cJSON_AddNumberToObject(o, "rel_window", x->rel_window);
    num(o, "final_train", x->final_train);
    num(o, "final_val", x->final_val);
    num(o, "rel_err", x->rel_err);
    num(o, "signed_gap", x->signed_gap);
    num(o, "rel_gap", x->rel_gap);
    cJSON_AddBoolToObject(o, "diagnostics", x->diag != NULL);
  }
  cJSON *recs = cJSON_AddArrayToObject(j, "recipes");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const ufp4_report_recipe *q = &r->recipes[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(recs, o);
    cJSON_AddStringToObject(o, "recipe", q->recipe);
    cJSON_AddNumberToObject(o, "seeds", q->n_seeds);
    cJSON_AddBoolToObject(o, "baseline", q->is_baseline);
    cJSON_AddBoolToObject(o, "control", q->is_control);
    msd(o, "final_train", q->final_train);
    msd(o, "final_val", q->final_val);
    msd(o, "rel_err", q->rel_err);
    msd(o, "signed_gap", q->signed_gap);
    msd(o, "rel_gap", q->rel_gap);
  }
  cJSON *pw = cJSON_AddObjectToObject(j, "power");
  cJSON_AddNumberToObject(pw, "level", UFP4_REPORT_LEVEL);
  cJSON_AddNumberToObject(pw, "alpha", UFP4_REPORT_ALPHA);
  cJSON_AddNumberToObject(pw, "power", UFP4_REPORT_POWER);
  if (r->target_effect > 0) cJSON_AddNumberToObject(pw, "target_effect_pp", r->target_effect);
  else cJSON_AddNullToObject(pw, "target_effect_pp");
  cJSON *pairs = cJSON_AddArrayToObject(j, "pairs");
  for (size_t i = 0; i < r->n_pairs; i++) pair_json(r, &r->pairs[i], pairs);
  cJSON *notes = cJSON_AddArrayToObject(j, "notes");
  for (size_t i = 0; i < r->n_notes; i++) cJSON_AddItemToArray(notes, cJSON_CreateString(r->notes[i]));
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  if (!s) return ufp4_fail(UFP4_ENOMEM, "%s: out of memory", path);
  size_t len = strlen(s);
  s[len] = '\n'; /* cJSON's terminator becomes the final newline */
  int rc = ufp4_write_file_atomic(path, s, len + 1);
  free(s);
  return rc;
}
