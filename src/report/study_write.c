/* Writing the depth study's analysis: analysis.json, analysis.md, or stage2.json (ufp4/study.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/plot.h"
#include "ufp4/study.h"

/* The drift curves of h3_curves, in ufp4/study.h's order. */
static const char *const curve_name[4] = {"forward ratio", "forward cosine", "dX ratio", "dX cosine"};

static void jnum(FILE *f, const char *key, double v) {
  if (isfinite(v)) fprintf(f, "\"%s\":%.17g", key, v);
  else fprintf(f, "\"%s\":null", key);
}

static void jtest(FILE *f, const char *key, const ufp4_study_test *t) {
  fprintf(f, "\"%s\":{\"valid\":%s,\"n\":%zu,", key, t->valid ? "true" : "false", t->s.n);
  jnum(f, "mean", t->s.mean), fputc(',', f);
  jnum(f, "sd", t->s.sd), fputc(',', f);
  jnum(f, "ci_lo", t->s.lo), fputc(',', f);
  jnum(f, "ci_hi", t->s.hi), fputc(',', f);
  jnum(f, "t", t->s.t), fputc(',', f);
  jnum(f, "p", t->s.p), fputc(',', f);
  jnum(f, "mdd", t->s.mdd), fputc(',', f);
  jnum(f, "mdd_alpha", t->s.alpha), fputc(',', f);
  jnum(f, "holm_level", t->p_holm), fputc(',', f);
  jnum(f, "mdd_holm", t->mdd_holm);
  fprintf(f, ",\"holm_rejected\":%s}", t->rejected ? "true" : "false");
}

static void jstr(FILE *f, const char *key, const char *s) {
  fprintf(f, "\"%s\":\"", key);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

/* The head of analysis.json and stage2.json; the seeds' decision only in stage2.json (sd_only),
 * where n is decided: the final analysis reports the n it has and H1's MDD there. */
static void json_head(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *command,
                      const char *commit, int sd_only) {
  fputc('{', f);
  jstr(f, "command", command ? command : ""), fputc(',', f);
  jstr(f, "commit", commit ? commit : ""), fputc(',', f);
  jstr(f, "a", o->a), fputc(',', f);
  jstr(f, "b", o->b), fputc(',', f);
  jstr(f, "baseline", o->baseline), fputs(",\"depths\":[", f);
  for (int d = 0; d < r->n_depths; d++) fprintf(f, "%s%d", d ? "," : "", r->depth[d]);
  fputs("],\"seeds\":[", f);
  for (size_t s = 0; s < r->n_seeds; s++) fprintf(f, "%s%lld", s ? "," : "", r->seeds[s]);
  fputs("],", f);
  jstr(f, "excluded", r->excluded), fputc(',', f);
  jstr(f, "unreadable", r->unreadable), fputc(',', f);
  jstr(f, "binaries", r->binaries), fputs(",\"last_steps\":[", f);
  for (int d = 0; d < r->n_depths; d++) fprintf(f, "%s%d", d ? "," : "", r->last_step[d]);
  fputs("],", f);
  jnum(f, "mean_baseline_loss", r->mean_base), fputs(sd_only ? ",\"stage2\":{" : ",\"power\":{", f);
  jnum(f, "sd_pp", r->sd_pp), fputc(',', f);
  jnum(f, "target_nats", o->target_nats), fputc(',', f);
  jnum(f, "target_pp", r->target_pp);
  if (sd_only) {
    fprintf(f, ",\"n_min\":%d,\"n_cap\":%d,\"n_needed\":%zu,\"capped\":%s,", o->n_min, o->n_cap, r->n_needed,
            r->capped ? "true" : "false");
    jnum(f, "mdd_at_cap_pp", r->mdd_at_cap);
  } else {
    fprintf(f, ",\"n\":%zu,\"seeds_option\":%d,", r->n_seeds, o->seeds);
    jnum(f, "h1_mdd_pp", r->h1.s.mdd);
  }
  fputc('}', f);
}

/* "key":[v0, v1, ...] with null for NaN. */
static void jarray(FILE *f, const char *key, const double *v, size_t n) {
  if (key) fprintf(f, "\"%s\":", key);
  fputc('[', f);
  for (size_t i = 0; i < n; i++) {
    if (i) fputc(',', f);
    if (isfinite(v[i])) fprintf(f, "%.17g", v[i]);
    else fputs("null", f);
  }
  fputc(']', f);
}

/* Each test's value per seed (ufp4/study.h's per_seed), so any figure can be recomputed. */
static void json_per_seed(FILE *f, const ufp4_study_result *r) {
  const size_t n = r->n_seeds;
  fputs(",\"per_seed\":{", f);
  jarray(f, "h1_d", r->per_seed, n), fputc(',', f);
  jarray(f, "h2_b", r->per_seed + n, n), fputc(',', f);
  jarray(f, "control_e", r->per_seed + 2 * n, n), fputs(",\"per_depth_D\":[", f);
  for (int d = 0; d < r->n_depths; d++) {
    if (d) fputc(',', f);
    jarray(f, NULL, r->per_seed + (size_t)(3 + d) * n, n);
  }
  fputs("],\"secondary\":[", f);
  for (int k = 0; k < r->n_secondary; k++) {
    if (k) fputc(',', f);
    jarray(f, NULL, r->per_seed + (size_t)(3 + r->n_depths + k) * n, n);
  }
  fputs("]}", f);
}

/* One H3 measure's three tests. */
static void jmeasure(FILE *f, const char *name, const ufp4_study_test *a, const ufp4_study_test *b,
                     const ufp4_study_test *diff, int equivalent) {
  fputc('{', f);
  jstr(f, "measure", name), fputc(',', f);
  jtest(f, "a", a), fputc(',', f);
  jtest(f, "b", b), fputc(',', f);
  jtest(f, "a_minus_b", diff);
  fprintf(f, ",\"b_equivalent\":%s}", equivalent ? "true" : "false");
}

/* The H3 detail: the two primary measures, the secondary family, the seeds' batch-level slopes,
 * and the curves. */
static void json_h3(FILE *f, const ufp4_study_result *r) {
  fprintf(f, ",\"h3_detail\":{\"seeds\":%zu,\"batches\":%ld,\"layers\":%d,\"primary\":[", r->h3_seeds,
          r->h3_batches, r->h3_layers);
  const char *dir[2] = {"forward ratio", "dX ratio"};
  for (int k = 0; k < 2; k++) {
    if (k) fputc(',', f);
    jmeasure(f, dir[k], &r->h3_a[k], &r->h3_b[k], &r->h3_diff[k], r->h3_equivalent[k]);
  }
  fputs("],\"secondary\":[", f);
  for (int m = 0; m < r->n_h3_secondary; m++) {
    const ufp4_study_h3_measure *x = &r->h3_secondary[m];
    if (m) fputc(',', f);
    jmeasure(f, x->name, &x->a, &x->b, &x->diff, x->b_equivalent);
  }
  fputs("],\"seed_slopes\":[", f);
  for (size_t s = 0; r->h3_seed_slopes && s < r->n_seeds; s++) {
    const double *v = r->h3_seed_slopes + 12 * s;
    fprintf(f, "%s{\"seed\":%lld", s ? "," : "", r->seeds[s]);
    static const char *const key[4] = {"a_forward", "a_dx", "b_forward", "b_dx"};
    for (int k = 0; k < 4; k++) {
      fprintf(f, ",\"%s\":[", key[k]);
      for (int i = 0; i < 3; i++) {
        if (i) fputc(',', f);
        if (isfinite(v[3 * k + i])) fprintf(f, "%.17g", v[3 * k + i]);
        else fputs("null", f);
      }
      fputc(']', f);
    }
    fputc('}', f);
  }
  fputs("],\"curves\":[", f);
  const int P = r->h3_layers + 1;
  for (int c = 0; r->h3_curves && c < 4; c++)
    for (int role = 0; role < 2; role++) {
      fprintf(f, "%s{\"measure\":\"%s\",\"recipe\":\"%s\",\"points\":[", c || role ? "," : "", curve_name[c],
              role ? "b" : "a");
      for (int p = 0; p < P; p++) {
        const double *v = r->h3_curves + (((long)c * 2 + role) * P + p) * 3;
        fprintf(f, "%s{\"layer\":%d,", p ? "," : "", p);
        jnum(f, "mean", v[0]), fputc(',', f);
        jnum(f, "ci_lo", v[1]), fputc(',', f);
        jnum(f, "ci_hi", v[2]), fputc('}', f);
      }
      fputs("]}", f);
    }
  fputs("]}", f);
}

static void json_body(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fputs(",\"units\":{\"h1\":\"percentage points (pp) of baseline-relative loss\",\"h2\":\"pp per doubling of "
        "depth\",\"h3\":\"ln ratio (or ln cosine) per block crossed\",\"per_depth\":\"pp\",\"secondary\":\"pp\","
        "\"g_quarters\":\"nats\"},",
        f);
  jtest(f, "h1", &r->h1), fputc(',', f);
  jtest(f, "h2", &r->h2), fputc(',', f);
  jtest(f, "h3", &r->h3);
  fprintf(f, ",\"supported\":{\"h1\":%s,\"h2\":%s,\"h3\":%s},\"h1_below_noise_floor\":%s,",
          r->h1_supported ? "true" : "false", r->h2_supported ? "true" : "false", r->h3_supported ? "true" : "false",
          r->h1_below_noise ? "true" : "false");
  jnum(f, "noise_floor_pp", r->noise_floor);
  if (r->has_control) fputc(',', f), jtest(f, "control", &r->control);
  fputs(",\"per_depth\":[", f);
  for (int d = 0; d < r->n_depths; d++) {
    fprintf(f, "%s{\"depth\":%d,", d ? "," : "", r->depth[d]);
    jtest(f, "d", &r->per_depth[d]);
    if (r->has_control) fputc(',', f), jtest(f, "control", &r->control_depth[d]);
    fputs(",\"g_quarters_nats\":[", f);
    for (int q = 0; q < 4; q++) {
      if (q) fputc(',', f);
      if (isfinite(r->g_mean[d][q])) fprintf(f, "%.17g", r->g_mean[d][q]);
      else fputs("null", f);
    }
    fputs("],", f);
    jtest(f, "g4_minus_g3", &r->settle[d]);
    fprintf(f, ",\"settled\":%s}", r->settled[d] ? "true" : "false");
  }
  fputs("],\"secondary\":[", f);
  for (int k = 0; k < r->n_secondary; k++) {
    fprintf(f, "%s{", k ? "," : "");
    jstr(f, "recipe", o->secondary[k]), fputc(',', f);
    jstr(f, "reference", r->secondary_ref[k]), fputc(',', f);
    jtest(f, "d", &r->secondary[k]);
    fputc('}', f);
  }
  fputs("],\"series\":[", f);
  for (int m = 0; m < r->n_recipes; m++) {
    fprintf(f, "%s{", m ? "," : "");
    jstr(f, "recipe", r->recipe[m]), fputs(",\"depths\":[", f);
    for (int d = 0; d < r->n_depths; d++) {
      fprintf(f, "%s{\"depth\":%d,", d ? "," : "", r->depth[d]);
      jtest(f, "rel_err", &r->rel_err[m][d]);
      fputc('}', f);
    }
    fputs("]}", f);
  }
  fputc(']', f);
  if (r->per_seed) json_per_seed(f, r);
  if (r->h3_seed_slopes) json_h3(f, r);
  fputs("}\n", f);
}

/* v in the printf format fmt, or "-" when it is not finite (no "nan" or "inf" in a table). */
typedef struct {
  char s[48];
} cellbuf;
static const char *cell(cellbuf *b, const char *fmt, double v) {
  if (isfinite(v)) snprintf(b->s, sizeof b->s, fmt, v);
  else snprintf(b->s, sizeof b->s, "-");
  return b->s;
}

/* A table row: n, mean, sd, 95% CI, t, p, MDD, then `extra` (the last columns, "|"-separated). */
static void md_row(FILE *f, const char *name, const ufp4_study_test *t, const char *extra) {
  if (!t->valid) {
    fprintf(f, "| %s | %zu | - | - | - | - | - | - | %s |\n", name, t->s.n, extra);
    return;
  }
  cellbuf b[7];
  fprintf(f, "| %s | %zu | %s | %s | [%s, %s] | %s | %s | %s | %s |\n", name, t->s.n, cell(&b[0], "%+.4f", t->s.mean),
          cell(&b[1], "%.4f", t->s.sd), cell(&b[2], "%+.4f", t->s.lo), cell(&b[3], "%+.4f", t->s.hi),
          cell(&b[4], "%.3f", t->s.t), cell(&b[5], "%.3g", t->s.p), cell(&b[6], "%.4f", t->s.mdd), extra);
}

static const char *const TABLE_HEAD = "| n | mean | sd | 95% CI | t | p | MDD |";
/* The rule under a TABLE_HEAD row with a name column before it and one column after it. */
static const char *const TABLE_RULE = "| --- | --- | --- | --- | --- | --- | --- | --- | --- |";

/* Holm's decision on t: "rejected at level x (MDD m)", "not rejected at level x (MDD m)", or "not
 * reached" (an earlier step failed, so this test was not compared with any level). The MDD column
 * is at the table's alpha; m, mdd's, is at the level Holm applied (for an H3 arm, the arm's own). */
static void holm_text(char *buf, size_t n, const ufp4_study_test *t, const ufp4_study_test *mdd) {
  if (!isfinite(t->p_holm)) {
    snprintf(buf, n, "not reached");
    return;
  }
  int k = snprintf(buf, n, "%s at level %.4g", t->rejected ? "rejected" : "not rejected", t->p_holm);
  if (k > 0 && (size_t)k < n && isfinite(mdd->mdd_holm))
    snprintf(buf + k, n - (size_t)k, " (MDD %.4g)", mdd->mdd_holm);
}

/* The control's relative error (pp) as a cell. */
static void control_cell(char *buf, size_t n, const ufp4_study_result *r, const ufp4_study_test *c) {
  if (!r->has_control) snprintf(buf, n, "-");
  else if (c->valid) snprintf(buf, n, "%+.4f [%+.4f, %+.4f]", c->s.mean, c->s.lo, c->s.hi);
  else snprintf(buf, n, "?");
}

static void md_primary(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fprintf(f,
          "## Primary hypotheses (Holm over H1-H3 at alpha %g)\n\nUnits: percentage points (pp) of "
          "%s-relative loss; H2 pp per doubling of depth; H3 ln(norm ratio) per block crossed. The MDD is at "
          "%g%% power and alpha %g/3, the strictest level Holm can apply. Noise floor: the %s control's "
          "relative error, averaged over depths.\n\n| test %s Holm | supported | noise floor (pp) |\n%s --- | --- |\n",
          o->alpha, o->baseline, 100 * o->power, o->alpha, o->control ? o->control : "(no)", TABLE_HEAD, TABLE_RULE);
  char buf[400], holm[64], ctl[96];
  control_cell(ctl, sizeof ctl, r, &r->control);
  const ufp4_study_test *t[2] = {&r->h1, &r->h2};
  const int sup[2] = {r->h1_supported, r->h2_supported};
  const char *name[2] = {"H1: mean over depths of D", "H2: slope of D vs log2 L"};
  for (int k = 0; k < 2; k++) {
    holm_text(holm, sizeof holm, t[k], t[k]);
    snprintf(buf, sizeof buf, "%s | %s | %s", holm, sup[k] ? "**supported**" : "not supported",
             k == 0 ? ctl : "-");
    md_row(f, name[k], t[k], buf);
  }
  const char *dir[2] = {"forward ratio", "dX ratio"};
  for (int k = 0; k < 2 && r->has_h3; k++) {
    char nm[120];
    holm_text(holm, sizeof holm, &r->h3, &r->h3_a[k]);
    snprintf(buf, sizeof buf, "IUT p = %.3g, %s | %s | -", r->h3_p, holm, r->h3_supported ? "**supported**" : "not supported");
    snprintf(nm, sizeof nm, "H3(a): %s slope, %s", o->a, dir[k]);
    md_row(f, nm, &r->h3_a[k], buf);
    snprintf(nm, sizeof nm, "H3(b): %s slope, %s", o->b, dir[k]);
    snprintf(buf, sizeof buf, "inside +-%.0f%% of %s's absolute mean: %s | - | -", 100 * o->margin, o->a,
             r->h3_equivalent[k] ? "yes" : "no");
    md_row(f, nm, &r->h3_b[k], buf);
    snprintf(nm, sizeof nm, "%s - %s slope, %s", o->a, o->b, dir[k]);
    md_row(f, nm, &r->h3_diff[k], "secondary | - | -");
  }
  if (!r->has_h3)
    fputs(o->drift_dir ? "\nH3: fewer than 2 seeds have defined drift slopes; it counts as not rejected (p = 1).\n"
                       : "\nH3: no drift measurements were given; it counts as not rejected (p = 1).\n",
          f);
  if (r->n_depths < 2) fputs("\nH2 is a slope over depths: with one depth it is not computed (p = 1 for Holm).\n", f);
  if (r->has_control)
    fprintf(f, "\nH1's estimate is %s the noise floor (|mean| %.4f pp).\n", r->h1_below_noise ? "**below**" : "above",
            r->noise_floor);
  int unsettled = 0;
  for (int d = 0; d < r->n_depths; d++) unsettled += !r->settled[d];
  if (unsettled) {
    fputs("\n**Not settled** (section 3.1 of the registration; H1 and H2 average over these depths):", f);
    for (int d = 0; d < r->n_depths; d++)
      if (!r->settled[d]) fprintf(f, " L = %d", r->depth[d]);
    fputs(".\n", f);
  }
}

static void md_depths(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fprintf(f,
          "\n## Per depth (secondary, Holm over the depths at alpha %g; MDD at alpha %g) and settledness\n\n"
          "| depth | n | mean D | sd | 95%% CI | t | p | MDD | Holm | %s control (pp) | last step | G1 | G2 | G3 | "
          "G4 (nats) | G4-G3 95%% CI | settled |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
          o->alpha, o->alpha, o->control ? o->control : "no");
  for (int d = 0; d < r->n_depths; d++) {
    const ufp4_study_test *t = &r->per_depth[d], *g = &r->settle[d];
    char holm[64], ctl[96], name[16];
    holm_text(holm, sizeof holm, t, t);
    control_cell(ctl, sizeof ctl, r, &r->control_depth[d]);
    snprintf(name, sizeof name, "%d", r->depth[d]);
    char extra[700];
    cellbuf b[6];
    snprintf(extra, sizeof extra, "%s | %s | %d | %s | %s | %s | %s | [%s, %s] | %s", holm, ctl, r->last_step[d],
             cell(&b[0], "%+.4f", r->g_mean[d][0]), cell(&b[1], "%+.4f", r->g_mean[d][1]),
             cell(&b[2], "%+.4f", r->g_mean[d][2]), cell(&b[3], "%+.4f", r->g_mean[d][3]), cell(&b[4], "%+.4f", g->s.lo),
             cell(&b[5], "%+.4f", g->s.hi), r->settled[d] ? "yes" : "**no**");
    md_row(f, name, t, extra);
  }
}

/* The depth series: each recipe's relative error per depth. */
static void md_series(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fprintf(f, "\n## The depth series (descriptive): relative error 100 (L - L_%s) / L_%s in pp, mean [95%% t "
             "interval] over seeds (n)\n\nPlot: depth_series.svg (data in depth_series.dat).\n\n| recipe |",
          o->baseline, o->baseline);
  for (int d = 0; d < r->n_depths; d++) fprintf(f, " L = %d |", r->depth[d]);
  fputs("\n| --- |", f);
  for (int d = 0; d < r->n_depths; d++) fputs(" --- |", f);
  fputc('\n', f);
  for (int m = 0; m < r->n_recipes; m++) {
    fprintf(f, "| %s |", r->recipe[m]);
    for (int d = 0; d < r->n_depths; d++) {
      const ufp4_study_test *t = &r->rel_err[m][d];
      cellbuf b[3];
      fprintf(f, " %s [%s, %s] (%zu) |", cell(&b[0], "%+.3f", t->s.mean), cell(&b[1], "%+.3f", t->s.lo),
              cell(&b[2], "%+.3f", t->s.hi), t->s.n);
    }
    fputc('\n', f);
  }
}

static void md_secondary(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fprintf(f,
          "\n## Secondary recipes (mean over depths, Holm within the family at alpha %g; MDD at alpha %g)\n\n"
          "| recipe - reference %s Holm | %s control (pp) |\n%s --- |\n",
          o->alpha, o->alpha, TABLE_HEAD, o->control ? o->control : "no", TABLE_RULE);
  char ctl[96], holm[64], extra[200];
  control_cell(ctl, sizeof ctl, r, &r->control);
  for (int k = 0; k < r->n_secondary; k++) {
    char name[300];
    snprintf(name, sizeof name, "%s - %s", o->secondary[k], r->secondary_ref[k]);
    holm_text(holm, sizeof holm, &r->secondary[k], &r->secondary[k]);
    snprintf(extra, sizeof extra, "%s | %s", holm, ctl);
    md_row(f, name, &r->secondary[k], extra);
  }
  if (r->has_control) md_row(f, "control - baseline (noise floor)", &r->control, "not in a family | -");
}

static void md_h3(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fprintf(f,
          "\n## H3, secondary: the other drift measures (Holm within the family over %s's slopes, at alpha %g; "
          "MDD at alpha %g)\n\n"
          "Each seed's %s checkpoint at L = %d, %ld batches. Per batch the least-squares slope of ln(measure) against "
          "the blocks crossed; a seed's value is the mean over its batches; the tests are over seeds. dW: one "
          "measure per projection kind, block i at L - 1 - i.\n\n| measure, recipe %s Holm / equivalence |\n%s\n",
          o->a, o->alpha, o->alpha, o->baseline, r->h3_layers, r->h3_batches, TABLE_HEAD, TABLE_RULE);
  for (int m = 0; m < r->n_h3_secondary; m++) {
    const ufp4_study_h3_measure *x = &r->h3_secondary[m];
    char name[160], holm[64], eq[96];
    holm_text(holm, sizeof holm, &x->a, &x->a);
    snprintf(name, sizeof name, "%s, %s", x->name, o->a);
    md_row(f, name, &x->a, holm);
    snprintf(name, sizeof name, "%s, %s", x->name, o->b);
    snprintf(eq, sizeof eq, "inside +-%.0f%% of %s's absolute mean: %s", 100 * o->margin, o->a, x->b_equivalent ? "yes" : "no");
    md_row(f, name, &x->b, eq);
    snprintf(name, sizeof name, "%s, %s - %s", x->name, o->a, o->b);
    md_row(f, name, &x->diff, "-");
  }
  fprintf(f, "\n### Each checkpoint's slopes over its batches (mean [95%% t interval over %ld batches])\n\n"
             "| seed | %s forward | %s dX | %s forward | %s dX |\n| --- | --- | --- | --- | --- |\n",
          r->h3_batches, o->a, o->a, o->b, o->b);
  for (size_t s = 0; s < r->n_seeds; s++) {
    const double *v = r->h3_seed_slopes + 12 * s;
    fprintf(f, "| %lld |", r->seeds[s]);
    for (int k = 0; k < 4; k++) {
      cellbuf b[3];
      fprintf(f, " %s [%s, %s] |", cell(&b[0], "%+.5f", v[3 * k]), cell(&b[1], "%+.5f", v[3 * k + 1]),
              cell(&b[2], "%+.5f", v[3 * k + 2]));
    }
    fputc('\n', f);
  }
  fprintf(f, "\nPer-block curves: h3_forward.svg and h3_backward.svg (the seeds' means with 95%% t intervals over "
             "seeds; data in h3_curves.dat); each seed's own curves with intervals over its batches are in its "
             "drift folder (drift.svg, drift_backward.svg).\n");
}

static void md(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *command,
               const char *commit) {
  fprintf(f, "# Depth study: analysis\n\n`%s`\n\nbinary commit of this analysis: %s\n\n", command ? command : "",
          commit ? commit : "unknown");
  fprintf(f, "Pair %s - %s against %s; %zu seeds at depths", o->a, o->b, o->baseline, r->n_seeds);
  for (int d = 0; d < r->n_depths; d++) fprintf(f, " %d", r->depth[d]);
  fprintf(f, ". Mean %s loss %.4f nats. Runs trained by the binaries %s.%s%s\n\n", o->baseline, r->mean_base,
          r->binaries[0] ? r->binaries : "(none recorded)", r->excluded[0] ? " Left out: " : "", r->excluded);
  if (r->unreadable[0]) fprintf(f, "A run could not be read (counted as unfinished): %s\n\n", r->unreadable);
  md_primary(f, r, o);
  md_depths(f, r, o);
  md_series(f, r, o);
  md_secondary(f, r, o);
  if (r->h3_seed_slopes) md_h3(f, r, o);
  fprintf(f,
          "\n## Seeds and power\n\n%zu seeds%s. sd of the H1 statistic %.4f pp; the registered target %.4g nats is "
          "%.4f pp at the mean %s loss; H1's MDD at this n (alpha %g/3, power %g) is %.4f pp.\n",
          r->n_seeds, o->seeds > 0 ? " (the registered n, checked by --seeds)" : "", r->sd_pp, o->target_nats,
          r->target_pp, o->baseline, o->alpha, o->power, r->h1.s.mdd);
  fprintf(f, "\nA test that does not reject is reported with its interval and MDD: effects above the MDD would have "
             "been detected with probability %g, at the level Holm applied for the MDD in its Holm cell; it is not "
             "evidence of no effect.\n",
          o->power);
}

/* depth_series.dat: per depth, log2 of it, then for each recipe of the series mean, ci_lo, ci_hi of
 * its relative error, then the same of D (a - b). */
static void fill_series(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                        const char *commit) {
  (void)cmd, (void)commit;
  fputs("# depth log2(depth); per recipe (", f);
  for (int m = 0; m < r->n_recipes; m++) fprintf(f, "%s%s", m ? ", " : "", r->recipe[m]);
  fprintf(f, ") the relative error's mean, 95%% interval low, high over seeds (pp); then D = %s - %s likewise\n", o->a,
          o->b);
  for (int d = 0; d < r->n_depths; d++) {
    fprintf(f, "%d %.6f", r->depth[d], log2(r->depth[d]));
    for (int m = 0; m <= r->n_recipes; m++) {
      const ufp4_study_test *t = m < r->n_recipes ? &r->rel_err[m][d] : &r->per_depth[d];
      fprintf(f, " %.9g %.9g %.9g", t->s.mean, t->s.lo, t->s.hi);
    }
    fputc('\n', f);
  }
}

/* depth_series: each recipe's relative error against depth, and D per depth, with intervals. */
static int plot_series(const char *dir, const ufp4_study_result *r, const ufp4_study_options *o) {
  char body[8192];
  size_t n = (size_t)snprintf(body, sizeof body,
                              "set key below horizontal\nset logscale x 2\nset xrange [%g:%g]\n"
                              "set multiplot layout 1,2 title 'The depth series: mean and 95%% t interval over "
                              "%zu seeds'\nset xlabel 'blocks L'\nset ylabel 'relative error vs %s (pp)'\nplot ",
                              r->depth[0] / 1.3, r->depth[r->n_depths - 1] * 1.3, r->n_seeds, o->baseline);
  for (int m = 0; m < r->n_recipes && n < sizeof body; m++) {
    const int col = 3 + 3 * m;
    const double nudge = 1 + 0.02 * (m - (r->n_recipes - 1) / 2.0); /* apart along x, on the log scale */
    n += (size_t)snprintf(body + n, sizeof body - n, "%s'depth_series.dat' using ($1*%.3f):%d:%d:%d with yerrorlines title '%s'",
                          m ? ", " : "", nudge, col, col + 1, col + 2, r->recipe[m]);
  }
  const int col = 3 + 3 * r->n_recipes;
  if (n < sizeof body)
    snprintf(body + n, sizeof body - n,
             "\nset ylabel 'D = %s - %s (pp)'\nplot 'depth_series.dat' using 1:%d:%d:%d with yerrorlines title 'D', 0 "
             "notitle with lines dt 2\nunset multiplot\n",
             o->a, o->b, col, col + 1, col + 2);
  const int rc = ufp4_plot_gnuplot(dir, "depth_series", body, 1100, 450);
  return rc < 0 ? rc : 0;
}

/* h3_curves.dat: per block, for each curve and recipe, mean, ci_lo, ci_hi (NaN as "nan"). */
static void fill_curves(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                        const char *commit) {
  (void)cmd, (void)commit;
  fprintf(f, "# block; then per curve (forward ratio, forward cosine, dX ratio, dX cosine) and recipe (%s, %s): "
             "mean over %zu seeds, 95%% t interval low, high\n",
          o->a, o->b, r->n_seeds);
  const int P = r->h3_layers + 1;
  for (int p = 0; p < P; p++) {
    fprintf(f, "%d", p);
    for (int c = 0; c < 4; c++)
      for (int role = 0; role < 2; role++) {
        const double *v = r->h3_curves + (((long)c * 2 + role) * P + p) * 3;
        fprintf(f, " %.9g %.9g %.9g", v[0], v[1], v[2]);
      }
    fputc('\n', f);
  }
}

/* h3_forward / h3_backward: ratio and cosine side by side, a and b with their intervals over seeds. */
static int plot_curves(const char *dir, const ufp4_study_result *r, const ufp4_study_options *o) {
  for (int back = 0; back < 2; back++) {
    char body[4096];
    size_t n = (size_t)snprintf(body, sizeof body,
                                "set key below horizontal\nset xrange [-0.5:%d.5]\nset multiplot layout 1,2 title "
                                "'%s at fixed weights (%s checkpoints, L = %d): mean and 95%% t interval over %zu "
                                "seeds'\nset xlabel '%s'\n",
                                r->h3_layers, back ? "dX at the input of block l" : "residual stream after block l",
                                o->baseline, r->h3_layers, r->n_seeds,
                                back ? "block l (L = from the head)" : "block l (0 = embeddings)");
    for (int k = 0; k < 2 && n < sizeof body; k++) {
      const int c = 2 * back + k;
      n += (size_t)snprintf(body + n, sizeof body - n, "set ylabel '%s'\nplot ", curve_name[c]);
      for (int role = 0; role < 2 && n < sizeof body; role++) {
        const int col = 2 + 3 * (2 * c + role);
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s'h3_curves.dat' using ($1%+.2f):%d:%d:%d with yerrorlines title '%s'", role ? ", " : "",
                              role ? 0.06 : -0.06, col, col + 1, col + 2, role ? o->b : o->a);
      }
      if (n < sizeof body) n += (size_t)snprintf(body + n, sizeof body - n, "\n");
    }
    if (n < sizeof body) snprintf(body + n, sizeof body - n, "unset multiplot\n");
    const int rc = ufp4_plot_gnuplot(dir, back ? "h3_backward" : "h3_forward", body, 1100, 450);
    if (rc < 0) return rc; /* 1 (gnuplot missing or failed) leaves the .dat and the script */
  }
  return 0;
}

typedef void (*fill_fn)(FILE *, const ufp4_study_result *, const ufp4_study_options *, const char *, const char *);

static void fill_json(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                      const char *commit) {
  json_head(f, r, o, cmd, commit, 0);
  json_body(f, r, o);
}

static void fill_stage2(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                        const char *commit) {
  json_head(f, r, o, cmd, commit, 1);
  fputs("}\n", f);
}

static int write_one(const char *dir, const char *name, fill_fn fill, const ufp4_study_result *r,
                     const ufp4_study_options *o, const char *cmd, const char *commit) {
  char *buf = NULL, path[4200];
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return ufp4_fail(UFP4_ENOMEM, "study: out of memory");
  fill(f, r, o, cmd, commit);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = ufp4_write_file_atomic(path, buf, n);
  free(buf);
  return rc;
}

int ufp4_study_write(const ufp4_study_result *r, const ufp4_study_options *o, int sd_only, const char *command,
                     const char *commit, const char *out_dir) {
  int rc = ufp4_mkdirs(out_dir);
  if (rc) return rc;
  if (sd_only) return write_one(out_dir, "stage2.json", fill_stage2, r, o, command, commit);
  rc = write_one(out_dir, "analysis.json", fill_json, r, o, command, commit);
  if (!rc) rc = write_one(out_dir, "analysis.md", md, r, o, command, commit);
  if (!rc) rc = write_one(out_dir, "depth_series.dat", fill_series, r, o, command, commit);
  if (!rc) rc = plot_series(out_dir, r, o);
  if (!rc && r->h3_curves) rc = write_one(out_dir, "h3_curves.dat", fill_curves, r, o, command, commit);
  if (!rc && r->h3_curves) rc = plot_curves(out_dir, r, o);
  return rc;
}
