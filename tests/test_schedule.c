/* Recipe schedules (train.h): the grammar, the switch taking effect at its step and only there,
 * its event in metrics.jsonl, resume across a switch bit for bit, and the overrides and schedule
 * through the JSON config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grid_test_util.h"
#include "train_test_util.h"
#include "ufp4/compare.h"
#include "training/recipe_phase.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/report.h"

static const train_synth synth = {.batch = 4, .seq = 16, .vocab = 32, .seed = 7, .mul = 5, .add = 3};

static void test_parse(void **state) {
  (void)state;
  ufp4_recipe_schedule s;
  assert_int_equal(ufp4_schedule_parse("ufp4@0,bf16@0.9", 200, &s), 0);
  assert_int_equal(s.n, 2);
  assert_string_equal(s.spec[0], "ufp4");
  assert_string_equal(s.spec[1], "bf16");
  assert_int_equal(s.start[1], 180);
  /* Specs with their own commas; step numbers; a fraction rounds to the nearest step. */
  assert_int_equal(ufp4_schedule_parse("nvfp4,rht=none,sr=all@0,e2m1,fprop=bf16@7,bf16@0.95", 30, &s), 0);
  assert_int_equal(s.n, 3);
  assert_string_equal(s.spec[0], "nvfp4,rht=none,sr=all");
  assert_string_equal(s.spec[1], "e2m1,fprop=bf16");
  assert_int_equal(s.start[1], 7);
  assert_int_equal(s.start[2], 29); /* 28.5 rounds up */
  assert_int_equal(ufp4_schedule_phase(&s, 0), 0);
  assert_int_equal(ufp4_schedule_phase(&s, 6), 0);
  assert_int_equal(ufp4_schedule_phase(&s, 7), 1);
  assert_int_equal(ufp4_schedule_phase(&s, 28), 1);
  assert_int_equal(ufp4_schedule_phase(&s, 29), 2);
  /* A phase past the end is kept: a later sitting with more steps reaches it. */
  assert_int_equal(ufp4_schedule_parse("ufp4@0,bf16@50", 30, &s), 0);
  static const char *const bad[][2] = {
      {"ufp4@3,bf16@10", "must start at 0"}, {"ufp4@0,bf16@0.5,e2m1@10", "not after"},
      {"ufp4@0,bogus@10", "bogus"},           {"ufp4", "no '@STEP'"},
      {"ufp4@0,bf16", "no '@STEP'"},          {"ufp4@0,bf16@1.5", "fraction"},
      {"ufp4@0,bf16@x", "step number"},       {"@0", "no recipe"},
      {"", "empty"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(ufp4_schedule_parse(bad[i][0], 100, &s), UFP4_EINVAL);
    if (!strstr(ufp4_last_error(), bad[i][1]))
      fail_msg("'%s': error '%s' does not say '%s'", bad[i][0], ufp4_last_error(), bad[i][1]);
  }
}

static ufp4_train_config tiny(const char *dir, const char *recipe, const char *schedule, int steps) {
  ufp4_train_config c = train_tiny_config(dir, recipe, &synth, steps);
  c.model.n_layers = 2;
  c.optim.lr = 1e-2;
  c.optim.warmup_steps = 3;
  c.optim.total_steps = 24;
  snprintf(c.schedule, sizeof c.schedule, "%s", schedule);
  return c;
}

/* The text of DIR/NAME (malloc'ed); the test fails when it cannot be read. */
static char *read_in(const char *dir, const char *name) {
  char path[1024], *t;
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (ufp4_read_file(path, 1 << 24, &t, &n)) fail_msg("%s: %s", path, ufp4_last_error());
  return t;
}

/* metrics.jsonl without the timing fields: each line cut at ",\"tokens_per_s\"". */
static char *metrics(const char *dir) {
  char *t = read_in(dir, "metrics.jsonl");
  char *out = calloc(strlen(t) + 1, 1);
  assert_non_null(out);
  size_t k = 0;
  for (char *save = NULL, *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *cut = strstr(line, ",\"tokens_per_s\"");
    if (cut) *cut = '\0';
    k += (size_t)sprintf(out + k, "%s\n", line);
  }
  free(t);
  return out;
}

static char *train_dir(ufp4_train_config *c, char *dir, int resume) {
  ufp4_train_result r;
  int rc = ufp4_train(c, &(ufp4_data_source){train_synth_batch, (void *)&synth, NULL, NULL}, resume, &r);
  if (rc) fail_msg("train %s: %s", dir, ufp4_last_error());
  return metrics(dir);
}

/* The loss line of step `step` in a metrics text (without timings), or "". */
static void loss_line(const char *text, int step, char *out, size_t size) {
  char key[64];
  snprintf(key, sizeof key, "{\"step\":%d,\"loss\":", step);
  const char *p = strstr(text, key);
  const char *end = p ? strchr(p, '\n') : NULL;
  snprintf(out, size, "%.*s", p && end ? (int)(end - p) : 0, p ? p : "");
}

/* A report over the two runs (the plain one as the baseline) shows the scheduled run's
 * per-projection table, per phase, in report.md and report.html, and none for the plain run. */
static void report_shows_table(const char *plain, const char *scheduled) {
  ufp4_report_run runs[2] = {{.recipe = "bf16", .seed = -1}, {.recipe = "sched", .seed = -1}};
  snprintf(runs[0].dir, sizeof runs[0].dir, "%s", plain);
  snprintf(runs[1].dir, sizeof runs[1].dir, "%s", scheduled);
  ufp4_report_options o = ufp4_report_options_default();
  o.control = NULL;
  o.plots = 0;
  o.final_steps = 5;
  char out[] = "/tmp/ufp4_schedR_XXXXXX";
  assert_non_null(mkdtemp(out));
  ufp4_report *r = NULL;
  if (ufp4_report_make(runs, 2, &o, out, &r)) fail_msg("report: %s", ufp4_last_error());
  static const char *const files[] = {"report.md", "report.html"};
  for (int f = 0; f < 2; f++) {
    char *t = read_in(out, files[f]);
    const char *sec = strstr(t, "Recipes by projection");
    assert_non_null(sec);
    assert_non_null(strstr(sec, "sched"));
    assert_non_null(strstr(sec, "from step 0:\n  e2m1,grid=e2m1,"));
    assert_non_null(strstr(sec, "from step 12:\n  bf16,keep_first=0,keep_last=0: model.layers.*.self_attn.q_proj"));
    assert_null(strstr(sec + 1, "Recipes by projection")); /* one section; the plain run has no table */
    free(t);
  }
  ufp4_report_free(r);
  ufp4_remove_tree(out);
}

/* Under "e2m1,sr=all@0,bf16@12" the steps before 12 are e2m1's to the bit and those from 12 on are
 * not; the switch is logged once, as the first step under it; and a run resumed from a checkpoint
 * before the switch (step 8), at it (step 12) or after it (16) ends with the straight run's lines
 * and weights. */
/* ufp4_train_recipe_at: the phase that ran a checkpoint's last step, by the folder's name. */
static void test_recipe_at(void **state) {
  (void)state;
  ufp4_train_config cfg = ufp4_train_config_default();
  ufp4_recipe_schedule s;
  cfg.steps = 10;
  snprintf(cfg.recipe, sizeof cfg.recipe, "e2m1");
  assert_string_equal(ufp4_train_recipe_at(&cfg, "anything", &s), "e2m1"); /* no schedule: the recipe */
  snprintf(cfg.schedule, sizeof cfg.schedule, "e2m1@0,nvfp4@4,bf16@0.9");
  assert_string_equal(ufp4_train_recipe_at(&cfg, "run/ckpt/step_00000004", &s), "e2m1"); /* step 3 ran */
  assert_string_equal(ufp4_train_recipe_at(&cfg, "run/ckpt/step_00000005/", &s), "nvfp4");
  assert_string_equal(ufp4_train_recipe_at(&cfg, "step_9", &s), "nvfp4");
  assert_string_equal(ufp4_train_recipe_at(&cfg, "run/ckpt/step_00000010", &s), "bf16");
  assert_string_equal(ufp4_train_recipe_at(&cfg, "run/ckpt/step_00000000", &s), "e2m1");
  assert_null(ufp4_train_recipe_at(&cfg, "run/ckpt/latest", &s));
  assert_null(ufp4_train_recipe_at(&cfg, "run/ckpt/step_5x", &s));
  assert_null(ufp4_train_recipe_at(&cfg, "run/ckpt/step_-1", &s));
  snprintf(cfg.schedule, sizeof cfg.schedule, "e2m1@0,nonsense@4");
  assert_null(ufp4_train_recipe_at(&cfg, "run/ckpt/step_00000005", &s));
}

static void test_switch_and_exact_resume(void **state) {
  (void)state;
  const char *sched = "e2m1,sr=all@0,bf16@12";
  char straight[] = "/tmp/ufp4_schedA_XXXXXX", plain[] = "/tmp/ufp4_schedP_XXXXXX";
  assert_non_null(mkdtemp(straight));
  assert_non_null(mkdtemp(plain));
  ufp4_train_config ca = tiny(straight, "fp32", sched, 20);
  ca.ckpt_every = 4;
  char *ta = train_dir(&ca, straight, 0);
  ufp4_train_config cp = tiny(plain, "e2m1,sr=all", "", 20);
  char *tp = train_dir(&cp, plain, 0);
  char la[512], lp[512];
  for (int s = 1; s <= 20; s++) {
    loss_line(ta, s, la, sizeof la);
    loss_line(tp, s, lp, sizeof lp);
    assert_true(la[0] && lp[0]);
    if ((s <= 12) != !strcmp(la, lp)) fail_msg("step %d: scheduled %s, plain e2m1 %s", s, la, lp);
  }
  assert_null(strstr(tp, "\"event\""));
  const char *e0 = strstr(ta, "{\"step\":1,\"event\":\"recipe\",\"phase\":0,\"recipe\":\"e2m1,");
  const char *e1 = strstr(ta, "{\"step\":13,\"event\":\"recipe\",\"phase\":1,\"recipe\":\"bf16,keep_first=0,keep_last=0\"}");
  assert_non_null(e0);
  assert_non_null(e1);
  assert_null(strstr(strchr(e1, '\n'), "\"event\"")); /* logged once */
  /* config.json holds the schedule, and the first phase as the recipe. */
  char *cj = read_in(straight, "config.json");
  assert_non_null(strstr(cj, "\"schedule\":\t\"e2m1,sr=all@0,bf16@12\""));
  assert_non_null(strstr(cj, "\"recipe\":\t\"e2m1,grid=e2m1,"));
  assert_non_null(strstr(cj, "\"projection_recipes\""));
  free(cj);
  static const int first_leg[] = {8, 12, 16}; /* before, at and after the switch */
  for (size_t i = 0; i < 3; i++) {
    char b[] = "/tmp/ufp4_schedB_XXXXXX";
    assert_non_null(mkdtemp(b));
    ufp4_train_config cb = tiny(b, "fp32", sched, first_leg[i]);
    cb.ckpt_every = 4;
    free(train_dir(&cb, b, 0));
    cb.steps = 20;
    char *tb = train_dir(&cb, b, 1);
    if (strcmp(ta, tb)) fail_msg("resumed at %d:\n%s\nstraight:\n%s", first_leg[i], tb, ta);
    char ka[512], kb[512];
    snprintf(ka, sizeof ka, "%s/ckpt/step_00000020/model.safetensors", straight);
    snprintf(kb, sizeof kb, "%s/ckpt/step_00000020/model.safetensors", b);
    train_files_equal(ka, kb);
    free(tb);
    ufp4_remove_tree(b);
  }
  report_shows_table(plain, straight);
  free(ta);
  free(tp);
  ufp4_remove_tree(straight);
  ufp4_remove_tree(plain);
}

/* Removes DIR's checkpoints after step `keep`. */
static void drop_checkpoints_after(const char *dir, int keep, int last) {
  for (int s = keep + 4; s <= last; s += 4) {
    char p[1024];
    snprintf(p, sizeof p, "%s/ckpt/step_%08d", dir, s);
    assert_int_equal(ufp4_remove_tree(p), 0);
  }
}

/* A fractional switch ("bf16@0.6" of 20 steps: step 12) resumes exactly from before it; a resume
 * whose --steps would move a switch the run has already made fails, naming both; one that moves a
 * switch still ahead is allowed (the fraction follows --steps, as documented). */
static void test_fraction_resume(void **state) {
  (void)state;
  const char *sched = "e2m1,sr=all@0,bf16@0.6";
  char a[] = "/tmp/ufp4_schedF_XXXXXX", b[] = "/tmp/ufp4_schedG_XXXXXX";
  assert_non_null(mkdtemp(a));
  assert_non_null(mkdtemp(b));
  ufp4_train_config ca = tiny(a, "fp32", sched, 20);
  ca.ckpt_every = 4;
  char *ta = train_dir(&ca, a, 0);
  assert_non_null(strstr(ta, "{\"step\":13,\"event\":\"recipe\",\"phase\":1,"));
  ufp4_train_config cb = tiny(b, "fp32", sched, 20);
  cb.ckpt_every = 4;
  cb.keep_ckpts = 10;
  free(train_dir(&cb, b, 0));
  drop_checkpoints_after(b, 8, 20); /* as if killed after step 8 */
  char *tb = train_dir(&cb, b, 1);
  if (strcmp(ta, tb)) fail_msg("resumed at 8:\n%s\nstraight:\n%s", tb, ta);
  free(tb);
  drop_checkpoints_after(b, 16, 20); /* the newest is 16, after the switch at 12 */
  cb.steps = 40;                     /* 0.6 of 40 would be 24 */
  ufp4_train_result r;
  const int rc = ufp4_train(&cb, &(ufp4_data_source){train_synth_batch, (void *)&synth, NULL, NULL}, 1, &r);
  assert_int_not_equal(rc, 0);
  if (!strstr(ufp4_last_error(), "resuming at step 16, the run had entered phases starting at steps {0, 12}") ||
      !strstr(ufp4_last_error(), "starts them at {0}"))
    fail_msg("%s", ufp4_last_error());
  drop_checkpoints_after(b, 12, 16); /* at 12 the switch is due but no step ran under it: it may move */
  char *tm = train_dir(&cb, b, 1);
  assert_non_null(strstr(tm, "{\"step\":25,\"event\":\"recipe\",\"phase\":1,")); /* now at 24 */
  assert_null(strstr(tm, "{\"step\":13,\"event\""));
  free(tm);
  /* a checkpoint from before the starts were saved is not checked */
  ufp4_recipe_schedule one = {.n = 1};
  const int old_saved[1] = {0};
  assert_int_equal(train_check_resume_phases(&cb, &one, old_saved, 0, 16), 0);
  free(ta);
  ufp4_remove_tree(a);
  ufp4_remove_tree(b);
}

/* A bad schedule or override fails before the run folder is written, naming the problem. */
static void test_bad_config_fails_early(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_schedE_XXXXXX";
  assert_non_null(mkdtemp(dir));
  ufp4_train_config c = tiny(dir, "fp32", "ufp4@0,bf16@5,e2m1@5", 10);
  ufp4_train_result r;
  const ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  assert_int_equal(ufp4_train(&c, &src, 0, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "not after"));
  c = tiny(dir, "fp32", "", 10);
  snprintf(c.overrides, sizeof c.overrides, "model.layers.2.*=bf16");
  assert_int_equal(ufp4_train(&c, &src, 0, &r), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "model.layers.2.*"));
  char path[600];
  snprintf(path, sizeof path, "%s/config.json", dir);
  assert_int_equal(access(path, F_OK), -1);
  ufp4_remove_tree(dir);
}

/* The overrides and the schedule survive config.json; a run without them writes neither key. */
static void test_config_round_trip(void **state) {
  (void)state;
  ufp4_train_config c = tiny("/tmp/unused", "nvfp4", "nvfp4@0,bf16@0.9", 10);
  snprintf(c.overrides, sizeof c.overrides, "%s", "lm_head=ufp4;model.layers.*.mlp.down_proj=fprop=bf16,rht=none");
  char *json = ufp4_train_config_json(&c);
  assert_non_null(json);
  assert_non_null(strstr(json, "\"overrides\":\t[\"lm_head=ufp4\", \"model.layers.*.mlp.down_proj=fprop=bf16,rht=none\"]"));
  char path[] = "/tmp/ufp4_schedcfg_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(ufp4_write_file_atomic(path, json, strlen(json)), 0);
  ufp4_train_config back = ufp4_train_config_default();
  assert_int_equal(ufp4_train_config_load(path, &back), 0);
  assert_string_equal(back.overrides, c.overrides);
  assert_string_equal(back.schedule, c.schedule);
  char *again = ufp4_train_config_json(&back);
  assert_string_equal(json, again);
  free(again);
  free(json);
  /* Items must be PATTERN=SPEC strings. */
  static const char *const bad[] = {"{\"overrides\": \"lm_head=ufp4\"}", "{\"overrides\": [\"lm_head\"]}",
                                    "{\"overrides\": [3]}", "{\"overrides\": [\"a=b;c=d\"]}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(ufp4_write_file_atomic(path, bad[i], strlen(bad[i])), 0);
    back = ufp4_train_config_default();
    assert_int_equal(ufp4_train_config_load(path, &back), UFP4_EFORMAT);
    assert_non_null(strstr(ufp4_last_error(), "overrides"));
  }
  unlink(path);
  c = tiny("/tmp/unused", "nvfp4", "", 10);
  json = ufp4_train_config_json(&c);
  assert_null(strstr(json, "overrides"));
  assert_null(strstr(json, "schedule"));
  assert_null(strstr(json, "projection_recipes"));
  free(json);
}

/* compare takes a schedule as a recipe entry: its runs are labelled by the entry, sit in their own
 * folders beside those of the schedule's first recipe, and a second call finds every run finished
 * (their config.json, arrays included, is the planned one) instead of redoing them as stale. */
/* One compare call whose log goes into log[size]; it must give n_recipes recipes. */
static void compare_logged(ufp4_compare_options *o, int n_recipes, char *log, size_t size) {
  FILE *f = tmpfile();
  assert_non_null(f);
  o->log = f;
  ufp4_compare_result res;
  assert_ok(ufp4_compare_run(o, &res));
  assert_int_equal(res.n_recipes, n_recipes);
  ufp4_compare_result_free(&res);
  rewind(f);
  log[fread(log, 1, size - 1, f)] = '\0';
  fclose(f);
}

static void test_compare_entry(void **state) {
  (void)state;
  char out[700], log[4096], path[800];
  snprintf(out, sizeof out, "%s/cmp", grid_work);
  ufp4_compare_options o = ufp4_compare_options_default();
  o.data_dir = grid_data;
  o.out_dir = out;
  o.recipes = "e2m1;e2m1@0,bf16@6";
  o.seeds = 1;
  o.control = 0;
  o.train = grid_test_tiny(o.train);
  o.train.steps = 8;
  for (int call = 0; call < 2; call++) {
    compare_logged(&o, 3, log, sizeof log);
    if (call == 1 && !strstr(log, "3 done, 0 to resume, 0 to run")) fail_msg("second call: %s", log);
  }
  snprintf(path, sizeof path, "%s/runs/e2m1_0_bf16_6/seed1/config.json", out);
  assert_int_equal(access(path, F_OK), 0);
  char *t = read_in(out, "report.md");
  assert_non_null(strstr(t, "| `e2m1@0,bf16@6` |"));
  assert_non_null(strstr(t, "| `e2m1` |"));
  assert_non_null(strstr(t, "from step 6:"));
  free(t);
  /* a schedule alone needs no ';': the same run, found done */
  o.recipes = "e2m1@0,bf16@6";
  compare_logged(&o, 2, log, sizeof log);
  if (!strstr(log, "2 done, 0 to resume, 0 to run")) fail_msg("a lone schedule: %s", log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_recipe_at),
      cmocka_unit_test(test_bad_config_fails_early),
      cmocka_unit_test(test_config_round_trip),
      cmocka_unit_test(test_switch_and_exact_resume), cmocka_unit_test(test_fraction_resume),
      cmocka_unit_test(test_compare_entry),
  };
  return cmocka_run_group_tests(tests, grid_test_setup, grid_test_teardown);
}
