/* Writing the depth study's analysis: analysis.json, analysis.md, or stage2.json (ufp4/study.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/study.h"

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
  jnum(f, "holm_level", t->p_holm);
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

static void json_head(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *command,
                      const char *commit) {
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
  jnum(f, "mean_baseline_loss", r->mean_base), fputs(",\"stage2\":{", f);
  jnum(f, "sd_pp", r->sd_pp), fputc(',', f);
  jnum(f, "target_nats", o->target_nats), fputc(',', f);
  jnum(f, "target_pp", r->target_pp);
  fprintf(f, ",\"n_min\":%d,\"n_cap\":%d,\"n_needed\":%zu,\"capped\":%s,", o->n_min, o->n_cap, r->n_needed,
          r->capped ? "true" : "false");
  jnum(f, "mdd_at_cap_pp", r->mdd_at_cap);
  fputc('}', f);
}

static void json_body(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o) {
  fputs(",\"units\":\"percentage points of BF16-relative loss (slopes: per doubling of depth)\",", f);
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
    jstr(f, "reference", o->secondary_ref ? o->secondary_ref : o->a), fputc(',', f);
    jtest(f, "d", &r->secondary[k]);
    fputc('}', f);
  }
  fprintf(f, "],\"h3_detail\":{\"seeds\":%zu,", r->h3_seeds);
  const char *dir[2] = {"forward", "backward_dx"};
  for (int k = 0; k < 2; k++) {
    fprintf(f, "%s\"%s\":{", k ? "," : "", dir[k]);
    jtest(f, "a", &r->h3_a[k]), fputc(',', f);
    jtest(f, "b", &r->h3_b[k]), fputc(',', f);
    jtest(f, "a_minus_b", &r->h3_diff[k]);
    fprintf(f, ",\"b_equivalent\":%s}", r->h3_equivalent[k] ? "true" : "false");
  }
  fputs("}}\n", f);
}

static void md_row(FILE *f, const char *name, const ufp4_study_test *t, const char *extra) {
  if (!t->valid) {
    fprintf(f, "| %s | %zu | - | - | - | - | - | %s |\n", name, t->s.n, extra);
    return;
  }
  fprintf(f, "| %s | %zu | %+.4f | %.4f | [%+.4f, %+.4f] | %.3g | %.4f | %s |\n", name, t->s.n, t->s.mean, t->s.sd,
          t->s.lo, t->s.hi, t->s.p, t->s.mdd, extra);
}

static const char *holm_word(const ufp4_study_test *t) {
  return t->rejected ? "rejected" : isfinite(t->p_holm) ? "not rejected" : "not reached";
}

static void md(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *command,
               const char *commit) {
  fprintf(f, "# Depth study: analysis\n\n`%s`\n\nbinary commit of this analysis: %s\n\n", command ? command : "",
          commit ? commit : "unknown");
  fprintf(f, "Pair %s - %s against %s; %zu seeds at depths", o->a, o->b, o->baseline, r->n_seeds);
  for (int d = 0; d < r->n_depths; d++) fprintf(f, " %d", r->depth[d]);
  fprintf(f, ". Mean %s loss %.4f nats.%s%s\n\n", o->baseline, r->mean_base, r->excluded[0] ? " Left out: " : "",
          r->excluded);
  if (r->unreadable[0]) fprintf(f, "A run could not be read (counted as unfinished): %s\n\n", r->unreadable);
  fprintf(f,
          "## Primary hypotheses (Holm over H1-H3 at alpha %g)\n\nUnits: percentage points (pp) of "
          "BF16-relative loss; H2 pp per doubling of depth; H3 log-ratio slope per block. MDD at %g%% power "
          "and alpha %g/3.\n\n| test | n | mean | sd | 95%% CI | p | MDD | Holm |\n| --- | --- | --- | --- | --- | --- "
          "| --- | --- |\n",
          o->alpha, 100 * o->power, o->alpha);
  char buf[160];
  snprintf(buf, sizeof buf, "%s at level %.4g; %s", holm_word(&r->h1), r->h1.p_holm,
           r->h1_supported ? "**supported**" : "not supported");
  md_row(f, "H1: mean over depths of D", &r->h1, buf);
  snprintf(buf, sizeof buf, "%s at level %.4g; %s", holm_word(&r->h2), r->h2.p_holm,
           r->h2_supported ? "**supported**" : "not supported");
  md_row(f, "H2: slope of D vs log2 L", &r->h2, buf);
  const char *dir[2] = {"forward ratio", "backward dX ratio"};
  for (int k = 0; k < 2 && r->has_h3; k++) {
    snprintf(buf, sizeof buf, "IUT p = %.3g, %s; %s", r->h3_p, holm_word(&r->h3),
             r->h3_supported ? "**supported**" : "not supported");
    char name[96];
    snprintf(name, sizeof name, "H3(a): %s slope, %s", o->a, dir[k]);
    md_row(f, name, &r->h3_a[k], buf);
    snprintf(name, sizeof name, "H3(b): %s slope, %s", o->b, dir[k]);
    snprintf(buf, sizeof buf, "inside +-%.0f%% of |%s|: %s", 100 * o->margin, o->a, r->h3_equivalent[k] ? "yes" : "no");
    md_row(f, name, &r->h3_b[k], buf);
    snprintf(name, sizeof name, "%s - %s slope, %s", o->a, o->b, dir[k]);
    md_row(f, name, &r->h3_diff[k], "secondary");
  }
  if (!r->has_h3) fputs("\nH3: no drift measurements were given; it counts as not rejected (p = 1).\n", f);
  if (r->has_control)
    fprintf(f, "\nNoise floor (|mean| of the %s control's relative error): %.4f pp; H1's estimate is %s it.\n",
            o->control, r->noise_floor, r->h1_below_noise ? "**below**" : "above");
  fputs("\n## Per depth (secondary, Holm over depths) and settledness\n\n| depth | n | mean D | sd | 95% CI | p | MDD "
        "| Holm | G1 | G2 | G3 | G4 (nats) | G4-G3 95% CI | settled |\n| --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- | --- | --- | --- | --- |\n",
        f);
  for (int d = 0; d < r->n_depths; d++) {
    const ufp4_study_test *t = &r->per_depth[d], *g = &r->settle[d];
    fprintf(f, "| %d | %zu | %+.4f | %.4f | [%+.4f, %+.4f] | %.3g | %.4f | %s | %+.4f | %+.4f | %+.4f | %+.4f | [%+.4f, %+.4f] | %s |\n",
            r->depth[d], t->s.n, t->s.mean, t->s.sd, t->s.lo, t->s.hi, t->s.p, t->s.mdd, holm_word(t), r->g_mean[d][0],
            r->g_mean[d][1], r->g_mean[d][2], r->g_mean[d][3], g->s.lo, g->s.hi, r->settled[d] ? "yes" : "**no**");
  }
  fputs("\n## Secondary recipes (mean over depths, Holm within the family)\n\n| recipe - reference | n | mean | sd | 95% "
        "CI | p | MDD | Holm |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
        f);
  for (int k = 0; k < r->n_secondary; k++) {
    char name[300];
    snprintf(name, sizeof name, "%s - %s", o->secondary[k], o->secondary_ref ? o->secondary_ref : o->a);
    md_row(f, name, &r->secondary[k], holm_word(&r->secondary[k]));
  }
  if (r->has_control) md_row(f, "control - baseline (noise floor)", &r->control, "not in a family");
  fprintf(f, "\n## Seeds\n\nsd of the H1 statistic %.4f pp; target %.4g nats = %.4f pp; seeds needed %zu%s.\n",
          r->sd_pp, o->target_nats, r->target_pp, r->n_needed,
          r->capped ? " (the cap binds: the MDD reached is given instead of the target)" : "");
  if (r->capped) fprintf(f, "MDD at %d seeds: %.4f pp.\n", o->n_cap, r->mdd_at_cap);
  fprintf(f, "\nA test that does not reject is reported with its interval and MDD: effects above the MDD would have "
             "been detected with probability %g; it is not evidence of no effect.\n",
          o->power);
}

typedef void (*fill_fn)(FILE *, const ufp4_study_result *, const ufp4_study_options *, const char *, const char *);

static void fill_json(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                      const char *commit) {
  json_head(f, r, o, cmd, commit);
  json_body(f, r, o);
}

static void fill_stage2(FILE *f, const ufp4_study_result *r, const ufp4_study_options *o, const char *cmd,
                        const char *commit) {
  json_head(f, r, o, cmd, commit);
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
  return rc;
}
