#include "training/metrics.h"

#include <math.h>

#include "training/run_dir.h"
#include "ufp4/jsonnum.h"
#include "ufp4/recipe.h"

static const char *const log_name = "metrics.jsonl";

int metrics_step_line(FILE *f, const char *dir, const train_step_stats *st, int with_aux,
                      int with_comm) {
  char loss[UFP4_JSONNUM_SIZE], gnorm[UFP4_JSONNUM_SIZE], aux[UFP4_JSONNUM_SIZE];
  fprintf(f,
          "{\"step\":%d,\"loss\":%s,\"lr\":%.6g,\"grad_norm\":%s,"
          "\"tokens_per_s\":%.1f,\"ms_per_step\":%.2f",
          st->step, ufp4_json_num(loss, st->loss), st->lr, ufp4_json_num(gnorm, st->grad_norm),
          st->tokens_per_s, st->seconds * 1e3);
  if (with_aux) fprintf(f, ",\"aux_loss\":%s", ufp4_json_num(aux, st->aux));
  if (with_comm) fprintf(f, ",\"comm_ms\":%.3f", st->comm_ms);
  fprintf(f, "%s}\n", st->skipped ? ",\"skipped\":true" : "");
  return run_log_flush(f, dir, log_name);
}

int metrics_eval_line(FILE *f, const char *dir, int step, double val_loss) {
  char loss[UFP4_JSONNUM_SIZE], ppl[UFP4_JSONNUM_SIZE];
  fprintf(f, "{\"step\":%d,\"val_loss\":%s,\"val_ppl\":%s}\n", step, ufp4_json_num(loss, val_loss),
          ufp4_json_num(ppl, exp(val_loss)));
  return run_log_flush(f, dir, log_name);
}

int metrics_recipe_line(FILE *f, const char *dir, int step, int phase, const char *spec) {
  ufp4_recipe r;
  char resolved[512];
  if (ufp4_recipe_parse(spec, &r) == 0) {
    ufp4_recipe_format(&r, resolved, sizeof resolved);
    spec = resolved;
  }
  fprintf(f, "{\"step\":%d,\"event\":\"recipe\",\"phase\":%d,\"recipe\":\"%s\"}\n", step, phase, spec);
  return run_log_flush(f, dir, log_name);
}
