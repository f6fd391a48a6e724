/* Health guards: thresholds on what the recipe does to each 4-bit operand, checked on the
 * diagnostics schedule (diagnostics.h), so that a silent numerical failure -- stochastic rounding
 * that is not unbiased, block scales that underflow, an operand clipped or drowned in noise --
 * stops or flags a run instead of quietly costing it.
 *
 * Spec (the --guard flag and the "guard" config key): comma-separated rules
 *   [SELECTOR.]MEASURE OP VALUE
 *   MEASURE OP VALUE   underflow<F    fraction of nonzero inputs quantized to 0 must stay below F
 *                      clip<F         fraction of elements saturated at g_max must stay below F
 *                      sqnr>DB        SQNR of the operand (dB) must stay above DB
 *                      srbias<K[sigma] |z| of the SR bias test must stay below K (SR operands)
 *   SELECTOR           an operand slot (fprop.x fprop.w dgrad.dy dgrad.w wgrad.dy wgrad.x), an
 *                      operand kind (x, w, dy: every slot of that kind) or a GEMM (fprop, dgrad,
 *                      wgrad: both its slots); none = every operand
 * Rules apply in order, a later one replacing an earlier one's threshold on the slots it selects:
 * "sqnr>10,dy.sqnr>5" asks 10 dB of X and W and 5 dB of dY. "" (or "none") is no guard.
 *
 * What each measure is: measures.h's ufp4_qmeasures (underflow, clipped, sqnr_db) on the tensor
 * the quantizer sees; srbias is max(|sr_z_mag|, |sr_z_val|), the z-scores of the rounding bias
 * against the SR law, checked on operands under SR with at least UFP4_GUARD_SR_MIN_N randomly
 * rounded elements (fewer: the normal approximation is not trusted and the rule is skipped). For a
 * correct SR each z is N(0, 1), so srbias<K trips by chance with probability at most
 * 2 * 2 (1 - Phi(K)) per check (two z-scores, union bound): 1.3e-4 at K = 4, 1.1e-6 at K = 5.
 * A NaN measure (an operand whose signal is zero but whose quantization is not) is a breach. */
#ifndef UFP4_GUARD_H
#define UFP4_GUARD_H

#include <stddef.h>
#include "ufp4/measures.h"
#include "ufp4/model.h"
#include "ufp4/recipe.h"
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_GUARD_UNDERFLOW = 0,
  UFP4_GUARD_CLIP,
  UFP4_GUARD_SQNR,
  UFP4_GUARD_SRBIAS,
  UFP4_GUARD_N_MEASURES
} ufp4_guard_measure;

/* Fewest randomly rounded elements for the SR bias rule to be checked. */
#define UFP4_GUARD_SR_MIN_N 256

typedef struct {
  /* Threshold per operand slot and measure; NaN: not checked. */
  double limit[UFP4_N_OPERANDS][UFP4_GUARD_N_MEASURES];
  int n_rules; /* 0: no guard at all */
} ufp4_guard;

/* Parses a spec into g; UFP4_EINVAL naming the rule and what is wrong with it. */
int ufp4_guard_parse(const char *spec, ufp4_guard *g);
/* "underflow", "clip", "sqnr", "srbias". */
const char *ufp4_guard_measure_name(ufp4_guard_measure k);
/* Whether the measure must stay below (1) or above (0) its threshold. */
int ufp4_guard_is_ceiling(ufp4_guard_measure k);

typedef struct {
  int step, layer, proj; /* proj: the probe's id (model.h's ufp4_proj, moe.h's expert ids) */
  ufp4_operand op;
  ufp4_guard_measure measure;
  double value, limit;
  char proj_name[96]; /* the Hugging Face name: "model.layers.3.self_attn.q_proj" */
} ufp4_guard_breach;

/* The breaches of slot op's measures m under g, in measure order, written to out[0..max-1];
 * returns how many there are (which may exceed max). step, layer, proj and proj_name are left for
 * the caller. */
int ufp4_guard_check(const ufp4_guard *g, ufp4_operand op, const ufp4_qmeasures *m,
                     ufp4_guard_breach *out, int max);

/* The Hugging Face name of a projection of block `layer` of a model of config c (proj as the
 * probe reports it: moe.h's UFP4_PROJ_EXPERT ids for experts, UFP4_PROJ_HEAD for lm_head), looked
 * up in model.h's ufp4_model_projections, the one table of names; "model.layers.L.projN" for an
 * id the model does not have. */
void ufp4_guard_proj_name(const ufp4_model_config *c, int layer, int proj, char *buf, size_t size);

/* One line saying what breached: "step 3, model.layers.0.mlp.up_proj, wgrad operand dY
 * (wgrad.dy): srbias 35.2 >= 4 (must stay below)". */
void ufp4_guard_describe(const ufp4_guard_breach *b, char *buf, size_t size);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
