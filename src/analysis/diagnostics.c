#include "ufp4/diagnostics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/jsonnum.h"
#include "ufp4/measures.h"

static const char *const proj_names[] = {"q", "k", "v", "o", "gate", "up", "down"};

int ufp4_forward_drift(ufp4_model *m, const int32_t *tokens, int B, int T, ufp4_drift_point *out) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  const size_t per = (size_t)B * T * c->d_model, L = (size_t)c->n_layers;
  float *ref = malloc(sizeof(float) * per * (L + 1));
  if (!ref) return ufp4_fail(UFP4_ENOMEM, "drift: out of memory");
  ufp4_model_set_high_precision(m, 1);
  int rc = ufp4_model_forward(m, tokens, NULL, B, T, NULL);
  ufp4_model_set_high_precision(m, 0);
  if (!rc) {
    for (size_t l = 0; l <= L; l++) memcpy(ref + l * per, ufp4_model_residual(m, (int)l), sizeof(float) * per);
    rc = ufp4_model_forward(m, tokens, NULL, B, T, NULL);
  }
  for (size_t l = 0; !rc && l <= L; l++) {
    const float *q = ufp4_model_residual(m, (int)l), *r = ref + l * per;
    double nq = ufp4_norm2(q, per), nr = ufp4_norm2(r, per);
    out[l].layer = (int)l;
    out[l].norm_ratio = nr > 0 ? sqrt(nq / nr) : NAN;
    out[l].cosine = ufp4_cosine(q, r, per);
  }
  free(ref);
  return rc;
}

typedef struct {
  FILE *out;
  int step;
  int rc;
} probe_state;

static void on_operand(void *ud, int layer, int proj, ufp4_operand op, const float *x, size_t rows, size_t cols,
                       const ufp4_qformat *f) {
  probe_state *s = ud;
  ufp4_qmeasures q;
  if (s->rc || (s->rc = ufp4_measure_tensor(f, x, rows, cols, &q))) return;
  char b[7][UFP4_JSONNUM_SIZE];
  fprintf(s->out,
          "{\"step\":%d,\"layer\":%d,\"proj\":\"%s\",\"operand\":\"%s\",\"alpha\":%s,\"sqnr_db\":%s,\"b_eff\":%s,"
          "\"underflow\":%s,\"mean_rel_err\":%s,\"shrink_bias\":%s,\"clipped\":%s}\n",
          s->step, layer, proj_names[proj], ufp4_operand_name(op), ufp4_json_num(b[0], q.alpha),
          ufp4_json_num(b[1], q.sqnr_db), ufp4_json_num(b[2], q.b_eff), ufp4_json_num(b[3], q.underflow),
          ufp4_json_num(b[4], q.mean_rel_err), ufp4_json_num(b[5], q.shrink_bias), ufp4_json_num(b[6], q.clipped));
}

static void on_gemm(void *ud, int layer, int proj, ufp4_gemm_kind g, const float *exact, const float *rounded,
                    size_t n) {
  probe_state *s = ud;
  char b[UFP4_JSONNUM_SIZE];
  fprintf(s->out, "{\"step\":%d,\"layer\":%d,\"proj\":\"%s\",\"gemm\":\"%s\",\"out_sqnr_db\":%s}\n", s->step, layer,
          proj_names[proj], ufp4_gemm_name(g), ufp4_json_num(b, ufp4_sqnr_db(ufp4_nmse(exact, rounded, n))));
}

int ufp4_diagnostics_run(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, int step,
                         FILE *out) {
  const ufp4_model_config *c = ufp4_model_get_config(m);
  ufp4_drift_point *drift = malloc(sizeof *drift * (size_t)(c->n_layers + 1));
  if (!drift) return ufp4_fail(UFP4_ENOMEM, "diagnostics: out of memory");
  int rc = ufp4_forward_drift(m, tokens, B, T, drift);
  if (!rc) {
    fprintf(out, "{\"step\":%d,\"drift\":[", step);
    for (int l = 0; l <= c->n_layers; l++)
    {
      char a[UFP4_JSONNUM_SIZE], b[UFP4_JSONNUM_SIZE];
      fprintf(out, "%s{\"layer\":%d,\"norm_ratio\":%s,\"cosine\":%s}", l ? "," : "", l,
              ufp4_json_num(a, drift[l].norm_ratio), ufp4_json_num(b, drift[l].cosine));
    }
    fprintf(out, "]}\n");
  }
  free(drift);
  if (rc) return rc;
  probe_state s = {out, step, 0};
  ufp4_linear_probe probe = {on_operand, on_gemm, &s};
  ufp4_model_set_probe(m, &probe);
  double loss;
  rc = ufp4_model_forward(m, tokens, targets, B, T, &loss);
  if (!rc) rc = ufp4_model_backward(m, 1.0f);
  ufp4_model_set_probe(m, NULL);
  fflush(out);
  return rc ? rc : s.rc;
}
