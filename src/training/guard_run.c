/* Health guards in the training loop (training/guard_run.h). */
#include "training/guard_run.h"

#include <string.h>

#include "training/run_dir.h"
#include "ufp4/diagnostics.h"
#include "ufp4/error.h"
#include "ufp4/jsonnum.h"

/* Lines a diagnostics step prints on stderr under warn; metrics.jsonl gets every breach. */
#define STDERR_BREACHES 8

int train_guard_init(const ufp4_train_config *cfg, train_guard *g) {
  memset(g, 0, sizeof *g);
  int rc = ufp4_guard_parse(cfg->guard, &g->guard);
  if (rc) return rc;
  if (strcmp(cfg->guard_policy, "warn") && strcmp(cfg->guard_policy, "stop"))
    return ufp4_fail(UFP4_EINVAL, "train: guard_policy must be warn or stop, not '%s'", cfg->guard_policy);
  g->stop = !strcmp(cfg->guard_policy, "stop");
  if (g->guard.n_rules && cfg->diag_every <= 0)
    return ufp4_fail(UFP4_EINVAL,
                     "train: the guard '%s' is checked on the diagnostics schedule: set --diag-every N "
                     "(diag_every) as well",
                     cfg->guard);
  return 0;
}

static void on_breach(void *ud, const ufp4_guard_breach *b) {
  train_guard *g = ud;
  if (!g->n_breaches++) g->first = *b;
  char v[UFP4_JSONNUM_SIZE], l[UFP4_JSONNUM_SIZE];
  fprintf(g->metrics,
          "{\"step\":%d,\"guard\":{\"proj\":\"%s\",\"layer\":%d,\"gemm\":\"%s\",\"operand\":\"%s\","
          "\"measure\":\"%s\",\"value\":%s,\"limit\":%s,\"policy\":\"%s\"}}\n",
          b->step, b->proj_name, b->layer, ufp4_gemm_name(ufp4_operand_gemm(b->op)), ufp4_operand_name(b->op),
          ufp4_guard_measure_name(b->measure), ufp4_json_num(v, b->value), ufp4_json_num(l, b->limit),
          g->stop ? "stop" : "warn");
  if (!g->rc) g->rc = run_log_flush(g->metrics, g->dir, "metrics.jsonl");
  if (g->stop || g->n_breaches > STDERR_BREACHES) return;
  char what[512];
  ufp4_guard_describe(b, what, sizeof what);
  fprintf(stderr, "ufp4 train: health guard breached (warn): %s\n", what);
}

int train_guard_diagnose(train_guard *g, ufp4_model *m, const int32_t *inp, const int32_t *tgt, int B,
                         int T, int step, FILE *diag, FILE *metrics, const char *dir) {
  if (!g->guard.n_rules) return ufp4_diagnostics_run(m, inp, tgt, B, T, step, diag);
  g->metrics = metrics;
  g->dir = dir;
  g->n_breaches = 0;
  g->rc = 0;
  const ufp4_diag_guard dg = {&g->guard, on_breach, g};
  int rc = ufp4_diagnostics_run_guarded(m, inp, tgt, B, T, step, diag, &dg);
  if (rc || (rc = g->rc)) return rc;
  if (!g->stop && g->n_breaches > STDERR_BREACHES)
    fprintf(stderr, "ufp4 train: health guard: %d more breaches at step %d (all in metrics.jsonl)\n",
            g->n_breaches - STDERR_BREACHES, step);
  if (!g->stop || !g->n_breaches) return 0;
  char what[512];
  ufp4_guard_describe(&g->first, what, sizeof what);
  return ufp4_fail(UFP4_EINVAL,
                   "train: health guard breached: %s; stopping (--guard-policy stop; %d breach%s at this "
                   "step, all in metrics.jsonl)",
                   what, g->n_breaches, g->n_breaches == 1 ? "" : "es");
}
