/* The report's matrix of paired differences, on run folders whose per-seed figures are known
 * exactly: each recipe's loss is the baseline's times (1 + e_s), so its relative error on seed s is
 * |e_s| and its signed gap e_s times the window mean of the baseline loss. Every cell (mean, 95% CI,
 * t, p, MDD, seeds for a target effect) is recomputed here by hand: t quantiles from a printed
 * table, p from the closed-form t CDF of 1 and 4 degrees of freedom, the MDD factor and the seed
 * count from SciPy's noncentral t (values below). Then the renderings: the verdict leads, the
 * matrix is in report.md, report.html and the printed table with the hand-computed cells, no NaN
 * is printed as a number, JSON holds null where there is no number, and the paired-gap plot's
 * data is the same-seed gap. */
#define _GNU_SOURCE /* strcasestr, M_PI */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "json_test_util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fixture.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/report.h"

static char root[] = "/tmp/ufp4_test_matrix_XXXXXX";
enum { N_SEEDS = 5, N_REC = 4, FINAL = 4, LAST_STEP = 100 };
static const char *names[N_REC] = {"bf16", "fp32", "e2m1", "ufp4"};
/* e per recipe and seed. e2m1 - ufp4 on relative error: d = {1, 3, -1, 3, 3} x 1e-3, so
 * mean 1.8e-3, sd = 0.8e-3 sqrt(5), se = 0.8e-3 exactly and t = 2.25 on 4 degrees of freedom. */
static const double E[N_REC][N_SEEDS] = {{0, 0, 0, 0, 0},
                                         {0.001, -0.001, 0.001, -0.001, 0.001},
                                         {0.012, 0.015, 0.011, 0.016, 0.013},
                                         {0.011, 0.012, 0.012, 0.013, 0.010}};

/* t_{0.975, df} from a printed table (to 16 digits: SciPy's stats.t.ppf). */
static double t975(size_t n) {
  switch (n - 1) {
  case 1: return 12.706204736432095;
  case 4: return 2.7764451051977987;
  default: fail_msg("no table entry for df = %zu", n - 1);
  }
  return NAN;
}
/* Two-sided p from the closed-form CDFs: df = 1 is Cauchy, F = 1/2 + atan(t)/pi; df = 4 has
 * F = 1/2 + (3/4) x (1 - x^2/3) with x = t / sqrt(4 + t^2). */
static double p_two_sided(double t, size_t n) {
  t = fabs(t);
  if (n == 2) return 1 - 2 * atan(t) / M_PI;
  const double x = t / sqrt(4 + t * t);
  return 1 - 1.5 * x * (1 - x * x / 3);
}
/* MDD / sd at alpha 0.05, power 0.8: ncp / sqrt(n), ncp solving the two-sided power of the
 * noncentral t (scipy.stats.nct, brentq to 1e-14). G*Power's dz for n = 5 is 1.68. */
static double mdd_factor(size_t n) { return n == 5 ? 1.6819969659555574 : 11.549888436114843; }

static double lb(int step) { return 2 + 10.0 / step; }
static double window_mean_lb(void) {
  double s = 0;
  for (int k = 0; k < FINAL; k++) s += lb(LAST_STEP - 10 * k);
  return s / FINAL;
}
/* Run (r, seed s) figures: metric 0 relative error, 1 signed gap. */
static double figure(int r, int s, int metric) { return metric ? E[r][s] * window_mean_lb() : fabs(E[r][s]); }

static void write_run(int r, int s) {
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/runs/%s_s%d", root, names[r], s + 1);
  assert_int_equal(ufp4_mkdirs(dir), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "{\"recipe\":\"%s\",\"seed\":%d,\"steps\":%d}\n", names[r], s + 1, LAST_STEP);
  fclose(f);
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  assert_non_null(f = fopen(path, "w"));
  for (int step = 10; step <= LAST_STEP; step += 10)
    fprintf(f, "{\"step\":%d,\"loss\":%.17g,\"lr\":0.001}\n", step, lb(step) * (1 + E[r][s]));
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(root)) return -1;
  for (int r = 0; r < N_REC; r++)
    for (int s = 0; s < N_SEEDS; s++) write_run(r, s);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ufp4_remove_tree(root);
  return 0;
}

/* The report of the recipes in `use` (a mask) over the first n_seeds seeds. */
static ufp4_report *build(unsigned use, int n_seeds, const char *control, double target) {
  ufp4_report_run runs[N_REC * N_SEEDS];
  size_t n = 0;
  for (int r = 0; r < N_REC; r++)
    for (int s = 0; s < n_seeds && (use >> r & 1); s++) {
      memset(&runs[n], 0, sizeof runs[n]);
      runs[n].seed = -1;
      snprintf(runs[n].dir, sizeof runs[n].dir, "%s/runs/%s_s%d", root, names[r], s + 1);
      n++;
    }
  ufp4_report_options o = ufp4_report_options_default();
  o.final_steps = FINAL;
  o.control = control;
  o.target_effect = target;
  o.plots = 0;
  ufp4_report *rep = NULL;
  const int rc = ufp4_report_build(runs, n, &o, &rep);
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  assert_int_equal(rc, 0);
  return rep;
}

static int recipe_index(const ufp4_report *rep, const char *name) {
  for (size_t i = 0; i < rep->n_recipes; i++)
    if (!strcmp(rep->recipes[i].recipe, name)) return (int)i;
  fail_msg("no recipe %s", name);
  return -1;
}

typedef struct {
  double mean, sd, se, t, half, p, mdd;
} hand;

/* The cell (a - b, metric) over n seeds, by hand. */
static hand by_hand(int a, int b, int metric, size_t n) {
  hand h = {0};
  double d[N_SEEDS], ss = 0;
  for (size_t s = 0; s < n; s++) h.mean += (d[s] = figure(a, (int)s, metric) - figure(b, (int)s, metric)) / n;
  for (size_t s = 0; s < n; s++) ss += (d[s] - h.mean) * (d[s] - h.mean);
  h.sd = sqrt(ss / (n - 1));
  h.se = h.sd / sqrt((double)n);
  h.t = h.mean / h.se;
  h.half = t975(n) * h.se;
  h.p = p_two_sided(h.t, n);
  h.mdd = mdd_factor(n) * h.sd;
  return h;
}

static void near(double got, double want, double rel, const char *what) {
  if (!(fabs(got - want) <= rel * fabs(want) + 1e-15)) fail_msg("%s: got %.17g, want %.17g", what, got, want);
}

static void check_cell(const ufp4_report *rep, int a, int b, int metric, size_t n) {
  const ufp4_report_pair *p =
      ufp4_report_find_pair(rep, recipe_index(rep, names[a]), recipe_index(rep, names[b]), metric);
  assert_non_null(p);
  const hand h = by_hand(a, b, metric, n);
  char what[128];
  snprintf(what, sizeof what, "%s - %s, metric %d, %zu seeds", names[a], names[b], metric, n);
  assert_int_equal(p->n, n);
  assert_true(p->valid);
  near(p->mean, h.mean, 1e-9, what);
  near(p->s.sd, h.sd, 1e-9, what);
  near(p->s.lo, h.mean - h.half, 1e-9, what);
  near(p->s.hi, h.mean + h.half, 1e-9, what);
  near(p->s.t, h.t, 1e-9, what);
  near(p->s.p, h.p, 1e-9, what);
  near(p->s.mdd, h.mdd, 1e-9, what);
  assert_int_equal(p->significant, h.p < 0.05);
}

/* Every cell of the matrix, on 5 seeds (df = 4) and on 2 (df = 1); the headline cell also against
 * the literal figures of the fixture. */
static void test_cells_by_hand(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    const size_t n = k ? 2 : N_SEEDS;
    ufp4_report *rep = build(0xF, (int)n, "fp32", 0);
    assert_int_equal(rep->n_pairs, 3 * 2 * 2); /* ordered pairs of fp32, e2m1, ufp4; two metrics */
    for (int a = 1; a < N_REC; a++)
      for (int b = 1; b < N_REC; b++)
        for (int metric = 0; metric < 2; metric++)
          if (a != b) check_cell(rep, a, b, metric, n);
    const int bf = recipe_index(rep, "bf16");
    assert_null(ufp4_report_find_pair(rep, bf, recipe_index(rep, "e2m1"), 0));
    assert_null(ufp4_report_find_pair(rep, 2, 2, 0));
    ufp4_report_free(rep);
  }
  ufp4_report *rep = build(0xF, N_SEEDS, "fp32", 0);
  const ufp4_report_pair *p = ufp4_report_find_pair(rep, recipe_index(rep, "e2m1"), recipe_index(rep, "ufp4"), 0);
  near(p->mean, 0.0018, 1e-9, "mean");
  near(p->s.se, 0.0008, 1e-9, "se");
  near(p->s.t, 2.25, 1e-9, "t");
  near(p->s.hi - p->mean, 2.7764451051977987 * 0.0008, 1e-9, "CI half-width");
  near(p->s.p, 0.08764517650339462, 1e-9, "p (SciPy: 2 t.sf(2.25, 4))");
  near(p->s.mdd, 1.6819969659555574 * 0.0008 * sqrt(5.0), 1e-9, "MDD");
  assert_int_equal(p->need, UFP4_REPORT_NEED_NONE); /* no target effect asked */
  ufp4_report_free(rep);
}

/* The seeds a target effect needs: 0.1 pp of relative error (1e-3 as a fraction) with the
 * headline sd 0.8e-3 sqrt(5) needs 28 seeds (SciPy: power 0.7984 at 27, 0.8137 at 28). */
static void test_target_effect(void **state) {
  (void)state;
  ufp4_report *rep = build(0xF, N_SEEDS, "fp32", 0.1);
  const int e2m1 = recipe_index(rep, "e2m1"), ufp4 = recipe_index(rep, "ufp4");
  const ufp4_report_pair *p = ufp4_report_find_pair(rep, e2m1, ufp4, 0);
  assert_int_equal(p->need, UFP4_REPORT_NEED_OK);
  assert_int_equal(p->seeds_needed, 28);
  assert_int_equal(ufp4_report_find_pair(rep, ufp4, e2m1, 0)->seeds_needed, 28);
  assert_int_equal(ufp4_report_find_pair(rep, e2m1, ufp4, 1)->need, UFP4_REPORT_NEED_NONE); /* pp, not nats */
  ufp4_report_free(rep);
  /* a tiny effect needs more than the limit, and says so */
  rep = build(0xF, N_SEEDS, "fp32", 1e-6);
  assert_int_equal(ufp4_report_find_pair(rep, e2m1, ufp4, 0)->need, UFP4_REPORT_NEED_TOO_MANY);
  ufp4_report_free(rep);
  ufp4_report_options o = ufp4_report_options_default();
  o.target_effect = -1;
  ufp4_report_run run = {.seed = -1};
  snprintf(run.dir, sizeof run.dir, "%s/runs/bf16_s1", root);
  assert_int_equal(ufp4_report_build(&run, 1, &o, &rep), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "target effect"));
}

static char *slurp(const char *dir, const char *file) {
  char path[700], *text = NULL;
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  assert_int_equal(ufp4_read_file(path, 1 << 26, &text, &n), 0);
  return text;
}

static void contains(const char *text, const char *want, const char *where) {
  if (!strstr(text, want)) fail_msg("%s does not contain \"%s\"", where, want);
}

/* No NaN printed as a number ("nan", "-nan", "NaN" as a word). */
static void no_nan(const char *text, const char *where) {
  for (const char *p = text; (p = strcasestr(p, "nan")); p++)
    if ((p == text || !isalpha((unsigned char)p[-1])) && !isalpha((unsigned char)p[3]))
      fail_msg("%s prints a NaN: ...%.40s", where, p > text + 20 ? p - 20 : text);
}

static char *printed(const ufp4_report *rep) {
  char path[600];
  snprintf(path, sizeof path, "%s/printed.txt", root);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  ufp4_report_print_table(rep, f);
  fclose(f);
  return slurp(root, "printed.txt");
}

/* The headline cell as each writer must show it, from the hand figures. */
static void test_renderings(void **state) {
  (void)state;
  ufp4_report *rep = build(0xF, N_SEEDS, "fp32", 0.1);
  char out[600];
  snprintf(out, sizeof out, "%s/out", root);
  assert_int_equal(ufp4_report_write(rep, out), 0);
  char *md = slurp(out, "report.md"), *html = slurp(out, "report.html"), *txt = printed(rep);
  ufp4_report_free(rep);
  const hand h = by_hand(2, 3, 0, N_SEEDS), g = by_hand(2, 1, 0, N_SEEDS);
  char cell[512];
  snprintf(cell, sizeof cell, "| `e2m1` | **%+.4f** [%+.4f, %+.4f]; p = %.3g; MDD %.4f", 100 * g.mean,
           100 * (g.mean - g.half), 100 * (g.mean + g.half), g.p, 100 * g.mdd);
  contains(md, cell, "report.md (row e2m1, column fp32)");
  snprintf(cell, sizeof cell, "| — | %+.4f [%+.4f, %+.4f]; p = %.3g; MDD %.4f; 28 seeds for 0.1 pp |\n", 100 * h.mean,
           100 * (h.mean - h.half), 100 * (h.mean + h.half), h.p, 100 * h.mdd);
  contains(md, cell, "report.md (row e2m1, column ufp4)");
  contains(md, "| row − column | `fp32` | `e2m1` | `ufp4` |", "report.md");
  snprintf(cell, sizeof cell, "<td class=\"cell\"><b>%+.4f</b> [%+.4f, %+.4f]<br>p = %.3g<br>MDD %.4f<br>28 seeds for 0.1 pp</td>",
           100 * h.mean, 100 * (h.mean - h.half), 100 * (h.mean + h.half), h.p, 100 * h.mdd);
  contains(html, cell, "report.html");
  snprintf(cell, sizeof cell, "%+.4f±%.4f p=%.2g mdd=%.4f n=28", 100 * h.mean, 100 * h.half, h.p, 100 * h.mdd);
  contains(txt, cell, "the printed table");
  /* The verdict names the significant pair with its figures, and comes first. */
  snprintf(cell, sizeof cell, "e2m1 has a larger relative error than fp32: %+.4f pp [95%% CI %+.4f, %+.4f], p = %.3g, 5 seeds.",
           100 * g.mean, 100 * (g.mean - g.half), 100 * (g.mean + g.half), g.p);
  contains(md, cell, "report.md verdict");
  contains(html, cell, "report.html verdict");
  contains(txt, cell, "printed verdict");
  assert_true(strstr(md, "## Verdict") < strstr(md, "### Relative error"));
  assert_true(strstr(md, "### Signed gap") < strstr(md, "## Summary"));
  assert_true(strstr(html, "Verdict") < strstr(html, "<h3>Relative error") &&
              strstr(html, "<h3>Relative error") < strstr(html, "<h2>Summary"));
  free(md);
  free(html);
  free(txt);
  /* The gap plot's data: e2m1's same-seed gap at the last step, mean and min..max over seeds
   * (10 points per run: the smoothing window is 1). */
  char *dat = slurp(out, "plots/gap_r2.dat");
  double mean = 0, lo = INFINITY, hi = -INFINITY;
  for (int s = 0; s < N_SEEDS; s++) {
    const double v = lb(LAST_STEP) * (1 + E[2][s]) - lb(LAST_STEP);
    mean += v / N_SEEDS;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
  }
  const char *last = strstr(dat, "\n100 ");
  assert_non_null(last);
  double step, m, l, u;
  assert_int_equal(sscanf(last + 1, "%lf %lf %lf %lf", &step, &m, &l, &u), 4);
  near(m, mean, 1e-8, "gap mean");
  near(l, lo, 1e-8, "gap min");
  near(u, hi, 1e-8, "gap max");
  free(dat);
  char *gp = slurp(out, "plots/gap.gp");
  contains(gp, "'gap_r2.dat' using 1:3:4 with filledcurves", "gap.gp");
  free(gp);
}

/* One seed: no interval, test or MDD, said in words; JSON null. No recipe pair significant:
 * said plainly, with the MDDs. */
static void test_one_seed_and_no_verdict(void **state) {
  (void)state;
  ufp4_report *rep = build(0xF, 1, "fp32", 0.1);
  const int e2m1 = recipe_index(rep, "e2m1"), ufp4 = recipe_index(rep, "ufp4");
  const ufp4_report_pair *p = ufp4_report_find_pair(rep, e2m1, ufp4, 0);
  assert_false(p->valid);
  assert_int_equal(p->n, 1);
  near(p->mean, E[2][0] - E[3][0], 1e-9, "one-seed difference");
  assert_true(isnan(p->s.lo) && isnan(p->s.p) && isnan(p->s.mdd));
  char out[600];
  snprintf(out, sizeof out, "%s/one", root);
  assert_int_equal(ufp4_report_write(rep, out), 0);
  char *md = slurp(out, "report.md"), *html = slurp(out, "report.html"), *txt = printed(rep);
  ufp4_report_free(rep);
  contains(md, "+0.1000 no CI: 1 common seed |", "report.md");
  contains(html, "<b>+0.1000</b> no CI: 1 common seed</td>", "report.html");
  contains(txt, "+0.1000 (1 seed)", "printed table");
  contains(md, "no significance test is possible", "report.md");
  no_nan(md, "report.md");
  no_nan(html, "report.html");
  no_nan(txt, "printed table");
  free(md);
  free(html);
  free(txt);
  cJSON *j = load_json("%s/report.json", out);
  const cJSON *it, *found = NULL;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "pairs")) {
    if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "a")->valuestring, "e2m1") &&
        !strcmp(cJSON_GetObjectItemCaseSensitive(it, "b")->valuestring, "ufp4") &&
        !strcmp(cJSON_GetObjectItemCaseSensitive(it, "metric")->valuestring, "rel_err"))
      found = it;
  }
  assert_non_null(found);
  static const char *const nulls[] = {"ci_lo", "ci_hi", "p", "mdd", "sd_diff", "seeds_needed"};
  for (size_t k = 0; k < sizeof nulls / sizeof nulls[0]; k++)
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(found, nulls[k])));
  near(cJSON_GetObjectItemCaseSensitive(found, "mean_diff")->valuedouble, E[2][0] - E[3][0], 1e-9, "json mean");
  cJSON_Delete(j);

  /* e2m1 and ufp4 alone (no control): p = 0.0876 on both metrics, so nothing is significant. */
  rep = build(0x1 | 0x4 | 0x8, N_SEEDS, NULL, 0);
  txt = printed(rep);
  const hand h = by_hand(2, 3, 0, N_SEEDS), g = by_hand(2, 3, 1, N_SEEDS);
  char want[512];
  snprintf(want, sizeof want,
           "No pair of recipes differs significantly (p < 0.05) on either metric, with 5 seeds. At 80%% power this "
           "run could detect differences of %.4f pp of relative error and %.5f nats of signed gap",
           100 * h.mdd, g.mdd);
  contains(txt, want, "printed verdict");
  ufp4_report_free(rep);
  free(txt);
}

/* `ufp4 report --target-effect` reaches the report (the compare flag: test_cli_compare). */
static void test_cli_flag(void **state) {
  (void)state;
  const char *cli = getenv("UFP4_CLI");
  if (!cli) skip();
  static char text[1 << 16];
  char args[4096] = "";
  for (int r = 0; r < N_REC; r++)
    for (int s = 0; s < N_SEEDS; s++) {
      const size_t len = strlen(args);
      snprintf(args + len, sizeof args - len, " %s/runs/%s_s%d", root, names[r], s + 1);
    }
  assert_int_equal(cli_run(text, sizeof text, "%s report --out %s/cli --no-plots --final-steps %d --target-effect 0.1%s",
                           cli, root, FINAL, args),
                   0);
  contains(text, "n=28", "ufp4 report output");
  cJSON *j = load_json("%s/cli/report.json", root);
  const cJSON *pw = cJSON_GetObjectItemCaseSensitive(j, "power");
  near(cJSON_GetObjectItemCaseSensitive(pw, "target_effect_pp")->valuedouble, 0.1, 0, "target_effect_pp");
  near(cJSON_GetObjectItemCaseSensitive(pw, "power")->valuedouble, 0.8, 0, "power");
  cJSON_Delete(j);
  assert_int_equal(cli_run(text, sizeof text, "%s report --out %s/cli2 --target-effect -1%s", cli, root, args), 2);
  contains(text, "--target-effect", "the error");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cells_by_hand),
      cmocka_unit_test(test_target_effect),
      cmocka_unit_test(test_renderings),
      cmocka_unit_test(test_one_seed_and_no_verdict),
      cmocka_unit_test(test_cli_flag),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
