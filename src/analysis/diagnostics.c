#include "ufp4/diagnostics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/jsonnum.h"
#include "ufp4/measures.h"

static const char *const proj_names[] = {"q", "k", "v", "o", "gate", "up", "down"};
static const char *const kind_names[3] = {"gate", "up", "down"};

ufp4_drift_point ufp4_drift_compare(const float *q, const float *r, size_t n) {
  const double nq = ufp4_norm2(q, n), nr = ufp4_norm2(r, n);
  ufp4_drift_point p = {.layer = 0, .norm_ratio = nr > 0 ? sqrt(nq / nr) : NAN, .cosine = ufp4_cosine(q, r, n)};
  return p;
}

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
    out[l] = ufp4_drift_compare(ufp4_model_residual(m, (int)l), ref + l * per, per);
    out[l].layer = (int)l;
  }
  free(ref);
  return rc;
}

/* Sums over the routed experts of one (layer, GEMM kind): alpha and NMSE weighted by the operand's
 * energy ||A||^2, which makes them exactly the measures of the experts' operands taken together;
 * the other measures are element-weighted means of the per-expert ones. */
typedef struct {
  int n;                 /* experts seen */
  double energy, elems;  /* sum ||A||^2, sum of element counts */
  double alpha_e, nmse_e; /* sum alpha * ||A||^2, nmse * ||A||^2 */
  double b_eff, underflow, mean_rel_err, shrink_bias, clipped; /* sums of measure * elements */
  double four_share; /* 4/6: sum of the share of 4-blocks * elements */
  int adaptive;      /* the operand's format uses 4/6 */
} operand_sum;

typedef struct {
  int n;
  double err, energy; /* sum ||rounded - exact||^2, sum ||exact||^2 */
} gemm_sum;

typedef struct {
  FILE *out;
  int step;
  int rc;
  int n_experts, n_layers;
  operand_sum *ops; /* [layer][3 kinds][UFP4_N_OPERANDS] */
  gemm_sum *gemms;  /* [layer][3 kinds][UFP4_N_GEMMS] */
  const ufp4_diag_guard *guard; /* NULL: no health guards */
  const ufp4_model_config *cfg;  /* for the names of the guard's breaches */
} probe_state;

/* The guard's breaches of one operand's measures, handed to its callback. */
static void guard_operand(const probe_state *s, int layer, int proj, ufp4_operand op, const ufp4_qmeasures *q) {
  ufp4_guard_breach b[UFP4_GUARD_N_MEASURES];
  const int n = ufp4_guard_check(s->guard->guard, op, q, b, UFP4_GUARD_N_MEASURES);
  for (int i = 0; i < n; i++) {
    b[i].step = s->step;
    b[i].layer = layer;
    b[i].proj = proj;
    ufp4_guard_proj_name(s->cfg, layer, proj, b[i].proj_name, sizeof b[i].proj_name);
    s->guard->breach(s->guard->ud, &b[i]);
  }
}

/* "q".."down" for dense projections, "expert3.gate" or "shared.up" for MoE ones (moe.h ids). */
static const char *proj_label(const probe_state *s, int proj, char *buf, size_t size) {
  if (proj >= 0 && proj < 7) return proj_names[proj];
  if (proj == UFP4_PROJ_HEAD) return "lm_head"; /* a quantized head (layer -1) */
  int e = (proj - 8) / 3, k = (proj - 8) % 3;
  if (proj < 8) snprintf(buf, size, "proj%d", proj);
  else if (e == s->n_experts) snprintf(buf, size, "shared.%s", kind_names[k]);
  else snprintf(buf, size, "expert%d.%s", e, kind_names[k]);
  return buf;
}

/* Index of a routed expert's (layer, kind) in the sums, or -1 (dense or shared projection). */
static long routed_slot(const probe_state *s, int layer, int proj) {
  if (proj < 8 || !s->ops || layer < 0 || layer >= s->n_layers) return -1;
  int e = (proj - 8) / 3;
  if (e >= s->n_experts) return -1;
  return (long)layer * 3 + (proj - 8) % 3;
}

/* four_share is printed only for 4/6 formats (adaptive), so other recipes' lines keep their bytes. */
static void print_operand(const probe_state *s, int layer, const char *proj, ufp4_operand op, const ufp4_qmeasures *q,
                          int n_experts, int adaptive) {
  char b[8][UFP4_JSONNUM_SIZE], tail[96] = "";
  size_t len = 0;
  if (adaptive) len += (size_t)snprintf(tail, sizeof tail, ",\"four_share\":%s", ufp4_json_num(b[7], q->four_share));
  if (n_experts) snprintf(tail + len, sizeof tail - len, ",\"n_experts\":%d", n_experts);
  fprintf(s->out,
          "{\"step\":%d,\"layer\":%d,\"proj\":\"%s\",\"operand\":\"%s\",\"alpha\":%s,\"sqnr_db\":%s,\"b_eff\":%s,"
          "\"underflow\":%s,\"mean_rel_err\":%s,\"shrink_bias\":%s,\"clipped\":%s%s}\n",
          s->step, layer, proj, ufp4_operand_name(op), ufp4_json_num(b[0], q->alpha), ufp4_json_num(b[1], q->sqnr_db),
          ufp4_json_num(b[2], q->b_eff), ufp4_json_num(b[3], q->underflow), ufp4_json_num(b[4], q->mean_rel_err),
          ufp4_json_num(b[5], q->shrink_bias), ufp4_json_num(b[6], q->clipped), tail);
}

static void on_operand(void *ud, int layer, int proj, ufp4_operand op, const float *x, size_t rows, size_t cols,
                       const ufp4_qformat *f) {
  probe_state *s = ud;
  ufp4_qmeasures q;
  if (s->rc || (s->rc = ufp4_measure_tensor(f, x, rows, cols, &q))) return;
  char buf[48];
  print_operand(s, layer, proj_label(s, proj, buf, sizeof buf), op, &q, 0, f->adaptive != UFP4_ADAPTIVE_NONE);
  if (s->guard) guard_operand(s, layer, proj, op, &q);
  long slot = routed_slot(s, layer, proj);
  if (slot < 0) return;
  operand_sum *a = &s->ops[slot * UFP4_N_OPERANDS + op];
  const double energy = ufp4_norm2(x, rows * cols), n = (double)(rows * cols);
  a->n++;
  a->energy += energy;
  a->elems += n;
  a->alpha_e += q.alpha * energy;
  a->nmse_e += q.nmse * energy;
  a->b_eff += q.b_eff * n;
  a->underflow += q.underflow * n;
  a->mean_rel_err += q.mean_rel_err * n;
  a->shrink_bias += q.shrink_bias * n;
  a->clipped += q.clipped * n;
  a->four_share += q.four_share * n;
  a->adaptive = f->adaptive != UFP4_ADAPTIVE_NONE;
}

static void on_gemm(void *ud, int layer, int proj, ufp4_gemm_kind g, const float *exact, const float *rounded,
                    size_t n) {
  probe_state *s = ud;
  char b[UFP4_JSONNUM_SIZE], buf[48];
  const double nmse = ufp4_nmse(exact, rounded, n);
  fprintf(s->out, "{\"step\":%d,\"layer\":%d,\"proj\":\"%s\",\"gemm\":\"%s\",\"out_sqnr_db\":%s}\n", s->step, layer,
          proj_label(s, proj, buf, sizeof buf), ufp4_gemm_name(g), ufp4_json_num(b, ufp4_sqnr_db(nmse)));
  long slot = routed_slot(s, layer, proj);
  if (slot < 0) return;
  gemm_sum *a = &s->gemms[slot * UFP4_N_GEMMS + g];
  const double energy = ufp4_norm2(exact, n);
  a->n++;
  a->energy += energy;
  a->err += nmse * energy;
}

/* The per-(layer, kind) records over the routed experts: proj "experts.gate" etc. */
static void print_sums(const probe_state *s) {
  for (int l = 0; l < s->n_layers; l++)
    for (int k = 0; k < 3; k++) {
      char proj[32];
      snprintf(proj, sizeof proj, "experts.%s", kind_names[k]);
      for (int op = 0; op < UFP4_N_OPERANDS; op++) {
        const operand_sum *a = &s->ops[((size_t)l * 3 + (size_t)k) * UFP4_N_OPERANDS + (size_t)op];
        if (!a->n) continue;
        ufp4_qmeasures q;
        memset(&q, 0, sizeof q);
        q.alpha = a->energy > 0 ? a->alpha_e / a->energy : NAN;
        q.sqnr_db = a->energy > 0 ? ufp4_sqnr_db(a->nmse_e / a->energy) : NAN;
        q.b_eff = a->b_eff / a->elems;
        q.underflow = a->underflow / a->elems;
        q.mean_rel_err = a->mean_rel_err / a->elems;
        q.shrink_bias = a->shrink_bias / a->elems;
        q.clipped = a->clipped / a->elems;
        q.four_share = a->four_share / a->elems;
        print_operand(s, l, proj, (ufp4_operand)op, &q, a->n, a->adaptive);
      }
      for (int g = 0; g < UFP4_N_GEMMS; g++) {
        const gemm_sum *a = &s->gemms[((size_t)l * 3 + (size_t)k) * UFP4_N_GEMMS + (size_t)g];
        if (!a->n) continue;
        char b[UFP4_JSONNUM_SIZE];
        fprintf(s->out, "{\"step\":%d,\"layer\":%d,\"proj\":\"%s\",\"gemm\":\"%s\",\"out_sqnr_db\":%s,\"n_experts\":%d}\n",
                s->step, l, proj, ufp4_gemm_name((ufp4_gemm_kind)g),
                ufp4_json_num(b, a->energy > 0 ? ufp4_sqnr_db(a->err / a->energy) : NAN), a->n);
      }
    }
}

/* One line per MoE layer: the routing statistics of the forward just run. */
static void print_moe(const probe_state *s, const ufp4_model *m) {
  for (int l = 0; l < s->n_layers; l++) {
    ufp4_moe_stats st;
    if (!ufp4_model_layer_is_moe(ufp4_model_get_config(m), l) || ufp4_model_moe_stats(m, l, &st)) continue;
    char b[UFP4_JSONNUM_SIZE];
    fprintf(s->out, "{\"step\":%d,\"layer\":%d,\"moe\":{\"load\":[", s->step, l);
    for (int e = 0; e < st.n_experts; e++) fprintf(s->out, "%s%s", e ? "," : "", ufp4_json_num(b, st.load[e]));
    fprintf(s->out, "],\"router_entropy\":%s", ufp4_json_num(b, st.router_entropy));
    fprintf(s->out, ",\"aux\":%s", ufp4_json_num(b, st.aux));
    fprintf(s->out, ",\"z\":%s", ufp4_json_num(b, st.z));
    fprintf(s->out, ",\"objective\":%s", ufp4_json_num(b, st.objective));
    fprintf(s->out, ",\"dropped\":%zu,\"padded_rows\":%zu,\"tokens\":%zu}}\n", st.dropped, st.padded_rows, st.n_tokens);
  }
}

int ufp4_diagnostics_run(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, int step,
                         FILE *out) {
  return ufp4_diagnostics_run_guarded(m, tokens, targets, B, T, step, out, NULL);
}

int ufp4_diagnostics_run_guarded(ufp4_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                                 int step, FILE *out, const ufp4_diag_guard *guard) {
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
  probe_state s = {.out = out, .step = step, .n_experts = c->moe_experts, .n_layers = c->n_layers,
                   .guard = guard && guard->guard && guard->guard->n_rules ? guard : NULL, .cfg = c};
  if (c->moe_experts > 0) {
    s.ops = calloc((size_t)c->n_layers * 3 * UFP4_N_OPERANDS, sizeof *s.ops);
    s.gemms = calloc((size_t)c->n_layers * 3 * UFP4_N_GEMMS, sizeof *s.gemms);
    if (!s.ops || !s.gemms) {
      free(s.ops);
      free(s.gemms);
      return ufp4_fail(UFP4_ENOMEM, "diagnostics: out of memory");
    }
  }
  ufp4_linear_probe probe = {on_operand, on_gemm, &s};
  ufp4_model_set_probe(m, &probe);
  double loss;
  rc = ufp4_model_forward(m, tokens, targets, B, T, &loss);
  if (!rc && c->moe_experts > 0) print_moe(&s, m);
  if (!rc) rc = ufp4_model_backward(m, 1.0f);
  ufp4_model_set_probe(m, NULL);
  if (!rc && !s.rc && s.ops) print_sums(&s);
  free(s.ops);
  free(s.gemms);
  fflush(out);
  return rc ? rc : s.rc;
}
