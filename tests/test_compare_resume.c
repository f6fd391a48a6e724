/* compare and sweep in several sittings (report/run_resume.h): an interrupted grid, finished by a
 * second call, must equal an uninterrupted one bit for bit; a finished run is not touched again;
 * a folder of another binary or configuration is moved to OUT/stale and redone; a damaged folder
 * is an error naming the file. The interruptions are real partial runs: the run's own config.json
 * (from an uninterrupted grid) trained by ufp4_train on a batch source that fails part way, which
 * leaves the folder a killed or failed run leaves. Tiny models on synthetic byte shards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "json_test_util.h"
#include "grid_test_util.h"
#include "train_test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "core/build_info.h"
#include "ufp4/compare.h"
#include "ufp4/data_source.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/sweep.h"

static char *const work = grid_work, *const data = grid_data;

/* grid_test_tiny for 12 steps, with evaluations every 4, on one thread (a model this small gains
 * nothing from two, and the thread count changes no result). */
static ufp4_train_config tiny(ufp4_train_config c) {
  c = grid_test_tiny(c);
  c.steps = 12;
  c.eval_every = 4;
  c.threads = 1;
  return c;
}

/* bf16 and e2m1, one seed, no control: runs OUT/runs/{bf16,e2m1}/seed1 of 12 steps, a checkpoint
 * every 2 (the default ceil(steps / 10)), diagnostics every 3, evaluations at 4, 8, 12. */
static ufp4_compare_options compare_options(const char *out) {
  ufp4_compare_options o = ufp4_compare_options_default();
  o.data_dir = data;
  o.out_dir = out;
  o.recipes = "e2m1";
  o.seeds = 1;
  o.control = 0;
  o.train = tiny(o.train);
  return o;
}

/* Runs the call with its log captured into log[size]; returns its status. */
static int logged(int (*call)(const void *), const void *o, FILE **log_slot, char *log, size_t size) {
  FILE *f = tmpfile();
  assert_non_null(f);
  *log_slot = f;
  const int rc = call(o);
  fflush(f);
  rewind(f);
  const size_t n = fread(log, 1, size - 1, f);
  log[n] = '\0';
  fclose(f);
  *log_slot = NULL;
  return rc;
}

static int compare_call(const void *o) {
  ufp4_compare_result res;
  const int rc = ufp4_compare_run(o, &res);
  if (!rc) ufp4_compare_result_free(&res);
  return rc;
}

static int sweep_call(const void *o) {
  ufp4_sweep_result *res = malloc(sizeof *res);
  assert_non_null(res);
  const int rc = ufp4_sweep_run(o, res);
  free(res);
  return rc;
}

/* A compare into OUT that must succeed; its log in log[size]. */
static void compare(const char *out, char *log, size_t size) {
  ufp4_compare_options o = compare_options(out);
  const int rc = logged(compare_call, &o, &o.log, log, size);
  if (rc) fprintf(stderr, "compare %s: %s\nlog:\n%s", out, ufp4_last_error(), log);
  assert_int_equal(rc, 0);
}

static void assert_log_has(const char *log, const char *what) {
  if (!strstr(log, what)) fail_msg("the log lacks \"%s\":\n%s", what, log);
}

static char *read_text(const char *fmt, const char *a, const char *b) {
  char path[4096], *text;
  size_t n;
  snprintf(path, sizeof path, fmt, a, b);
  if (ufp4_read_file(path, 1 << 26, &text, &n)) fail_msg("%s", ufp4_last_error());
  return text;
}

static void write_text(const char *path, const char *text) {
  assert_ok(ufp4_write_file_atomic(path, text, strlen(text)));
}

/* A metrics line without its timings (tokens_per_s, ms_per_step): what must be the same bytes in
 * a resumed run as in an uninterrupted one. */
static void drop_timings(char *text) {
  static const char *const keys[] = {",\"tokens_per_s\":", ",\"ms_per_step\":"};
  for (int k = 0; k < 2; k++)
    for (char *p; (p = strstr(text, keys[k]));) {
      const char *end = p + strlen(keys[k]);
      while (*end && *end != ',' && *end != '}') end++;
      memmove(p, end, strlen(end) + 1);
    }
}

/* RUN of grid A and of grid B hold the same run: metrics (timings aside), diagnostics and the
 * result in run.json, to the bit; B's record names binary b_commit. */
static void assert_same_run_by(const char *a, const char *b, const char *run, const char *b_commit) {
  char *ma = read_text("%s/%s/metrics.jsonl", a, run), *mb = read_text("%s/%s/metrics.jsonl", b, run);
  drop_timings(ma);
  drop_timings(mb);
  assert_string_equal(ma, mb);
  assert_non_null(strstr(ma, "\"step\":12,\"loss\"")); /* the whole run is there */
  assert_non_null(strstr(ma, "\"step\":12,\"val_loss\""));
  free(ma);
  free(mb);
  char *da = read_text("%s/%s/diagnostics.jsonl", a, run),
       *db = read_text("%s/%s/diagnostics.jsonl", b, run);
  assert_string_equal(da, db);
  free(da);
  free(db);
  char dir[4096];
  ufp4_run_record ra, rb;
  snprintf(dir, sizeof dir, "%s/%s", a, run);
  assert_ok(ufp4_run_record_read(dir, &ra));
  snprintf(dir, sizeof dir, "%s/%s", b, run);
  assert_ok(ufp4_run_record_read(dir, &rb));
  assert_int_equal(ra.state, UFP4_RUN_FINISHED);
  assert_int_equal(rb.state, UFP4_RUN_FINISHED);
  assert_string_equal(rb.commit, b_commit);
  assert_int_equal(ra.result.steps_done, rb.result.steps_done);
  assert_int_equal(ra.result.skipped_steps, rb.result.skipped_steps);
  assert_memory_equal(&ra.result.final_loss, &rb.result.final_loss, sizeof(double));
  assert_memory_equal(&ra.result.final_val_loss, &rb.result.final_val_loss, sizeof(double));
}

static void assert_same_run(const char *a, const char *b, const char *run) {
  assert_same_run_by(a, b, run, ufp4_build_commit());
}

typedef struct {
  ufp4_shard_source *src;
  uint64_t fail_at;
} failing_source;

/* The shard batches, until batch fail_at: there the run stops, as if it had been interrupted. */
static int failing_batch(void *ctx, uint64_t index, int32_t *tokens) {
  const failing_source *f = ctx;
  if (index >= f->fail_at)
    return ufp4_fail(UFP4_EIO, "test: interrupted at batch %llu", (unsigned long long)index);
  return ufp4_shard_source_batch(f->src, index, tokens);
}

/* Trains the run that REF_RUN/config.json records into DIR, interrupted at batch fail_at, with
 * another ckpt_every and thread count (which change no result) when they are >= 0. */
static void train_partially(const char *ref_run, const char *dir, uint64_t fail_at, int ckpt_every,
                            int threads) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", ref_run);
  ufp4_train_config cfg = ufp4_train_config_default();
  assert_ok(ufp4_train_config_load(path, &cfg));
  assert_ok(ufp4_train_set_out_dir(&cfg, dir));
  cfg.progress = 0;
  if (ckpt_every >= 0) cfg.ckpt_every = ckpt_every;
  if (threads >= 0) cfg.threads = threads;
  ufp4_shard_data d;
  assert_ok(ufp4_shard_data_open(&d, cfg.data_desc, cfg.batch, cfg.model.seq_len, cfg.seed, 0, 1));
  failing_source f = {&d.train, fail_at};
  ufp4_data_source src = {failing_batch, &f, ufp4_shard_source_batch, &d.val};
  ufp4_train_result r;
  assert_int_equal(ufp4_train(&cfg, &src, 0, &r), UFP4_EIO);
  ufp4_shard_data_close(&d);
  ufp4_run_record rec;
  assert_ok(ufp4_run_record_read(dir, &rec));
  assert_int_equal(rec.state, UFP4_RUN_FAILED);
  assert_non_null(strstr(rec.error, "interrupted at batch"));
}

static void sub(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", work, name); }

/* (1) Interrupted, then finished by a second call: the same bits as never interrupted. e2m1 was
 * cut after its checkpoint at step 6, with a torn line (a kill during a write) after it; bf16 was
 * cut at step 3 under ckpt_every 0, so it has no checkpoint and starts again. */
static void test_interrupted_compare_resumes_exactly(void **state) {
  (void)state;
  char ref[700], cut[700], a[1024], b[1024], log[8192];
  sub(ref, sizeof ref, "ref");
  sub(cut, sizeof cut, "cut");
  compare(ref, log, sizeof log);
  assert_log_has(log, "0 done, 0 to resume, 2 to run");

  snprintf(a, sizeof a, "%s/runs/e2m1/seed1", ref);
  snprintf(b, sizeof b, "%s/runs/e2m1/seed1", cut);
  train_partially(a, b, 6, -1, 1);
  assert_int_equal(ufp4_train_latest_checkpoint(b), 6);
  char path[1100];
  snprintf(path, sizeof path, "%s/metrics.jsonl", b);
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs("{\"ste", f); /* cut short: no newline */
  fclose(f);
  snprintf(a, sizeof a, "%s/runs/bf16/seed1", ref);
  snprintf(b, sizeof b, "%s/runs/bf16/seed1", cut);
  train_partially(a, b, 3, 0, -1);
  assert_int_equal(ufp4_train_latest_checkpoint(b), -1);

  compare(cut, log, sizeof log);
  assert_log_has(log, "0 done, 1 to resume, 1 to run");
  assert_null(strstr(log, "moved to"));
  assert_same_run(ref, cut, "runs/e2m1/seed1");
  assert_same_run(ref, cut, "runs/bf16/seed1");
  /* And so the report's figures. */
  cJSON *ja = load_json("%s/report.json", ref), *jb = load_json("%s/report.json", cut);
  const cJSON *xa = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ja, "runs"), 1);
  const cJSON *xb = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(jb, "runs"), 1);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(xb, "recipe")->valuestring, "e2m1");
  const double ea = cJSON_GetObjectItemCaseSensitive(xa, "rel_err")->valuedouble;
  const double eb = cJSON_GetObjectItemCaseSensitive(xb, "rel_err")->valuedouble;
  assert_true(ea > 0);
  assert_memory_equal(&ea, &eb, sizeof ea);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(jb, "commit")->valuestring,
                      ufp4_build_commit());
  cJSON_Delete(ja);
  cJSON_Delete(jb);
}

/* (2) A second call over finished runs trains nothing and rewrites none of their files. */
static void test_finished_runs_are_not_touched(void **state) {
  (void)state;
  char out[700], log[8192];
  sub(out, sizeof out, "done");
  compare(out, log, sizeof log);
  static const char *const files[] = {"run.json", "config.json", "metrics.jsonl",
                                      "diagnostics.jsonl", "ckpt/step_00000012/model.safetensors"};
  enum { NF = sizeof files / sizeof *files };
  struct stat before[2][NF];
  static const char *const runs[2] = {"bf16", "e2m1"};
  /* An mtime long past: any rewrite would give the file the present one. */
  const struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NF; i++) {
      char path[1200];
      snprintf(path, sizeof path, "%s/runs/%s/seed1/%s", out, runs[r], files[i]);
      assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
      assert_int_equal(stat(path, &before[r][i]), 0);
    }
  char *report = read_text("%s/%s", out, "report.json");
  compare(out, log, sizeof log);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NF; i++) {
      char path[1200];
      struct stat now;
      snprintf(path, sizeof path, "%s/runs/%s/seed1/%s", out, runs[r], files[i]);
      assert_int_equal(stat(path, &now), 0);
      if (now.st_ino != before[r][i].st_ino || now.st_mtime != 1000000000)
        fail_msg("%s was rewritten", path);
    }
  /* The report is made again from the same runs. */
  char *again = read_text("%s/%s", out, "report.json");
  assert_string_equal(report, again);
  free(report);
  free(again);
}

/* Sets the "commit" of RUN/run.json. */
static void set_commit(const char *run, const char *commit) {
  cJSON *j = load_json("%s/run.json", run);
  cJSON_ReplaceItemInObjectCaseSensitive(j, "commit", cJSON_CreateString(commit));
  char *text = cJSON_Print(j), path[1100];
  snprintf(path, sizeof path, "%s/run.json", run);
  write_text(path, text);
  free(text);
  cJSON_Delete(j);
}

static void assert_record(const char *dir, ufp4_run_state state, const char *commit) {
  ufp4_run_record rec;
  assert_ok(ufp4_run_record_read(dir, &rec));
  assert_int_equal(rec.state, state);
  assert_string_equal(rec.commit, commit);
}

/* (3) Runs of another binary, of none recorded, or of another configuration are moved to
 * OUT/stale/COMMIT/... whole and redone; nothing is deleted. */
static void test_other_binary_is_moved_aside_and_redone(void **state) {
  (void)state;
  char out[700], log[8192], e2m1[1024], bf16[1024], path[1200];
  sub(out, sizeof out, "stale");
  compare(out, log, sizeof log);
  snprintf(e2m1, sizeof e2m1, "%s/runs/e2m1/seed1", out);
  snprintf(bf16, sizeof bf16, "%s/runs/bf16/seed1", out);
  char *metrics = read_text("%s/%s", e2m1, "metrics.jsonl");
  drop_timings(metrics);

  set_commit(e2m1, "0123456789ab");
  snprintf(path, sizeof path, "%s/run.json", bf16);
  assert_int_equal(remove(path), 0); /* a run folder from before run records */
  compare(out, log, sizeof log);
  assert_log_has(log, "runs/e2m1/seed1 was made by binary 0123456789ab");
  assert_log_has(log, "runs/bf16/seed1 was made by a binary that recorded no commit");
  assert_log_has(log, "0 done, 0 to resume, 2 to run");
  snprintf(path, sizeof path, "%s/stale/0123456789ab/runs/e2m1/seed1", out);
  assert_record(path, UFP4_RUN_FINISHED, "0123456789ab");
  snprintf(path, sizeof path, "%s/stale/unrecorded/runs/bf16/seed1/metrics.jsonl", out);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_record(e2m1, UFP4_RUN_FINISHED, ufp4_build_commit());
  char *redone = read_text("%s/%s", e2m1, "metrics.jsonl");
  drop_timings(redone);
  assert_string_equal(metrics, redone);
  free(redone);

  /* Again from the same binary: the first stale copy stays, the second goes beside it. */
  set_commit(e2m1, "0123456789ab");
  compare(out, log, sizeof log);
  assert_log_has(log, "1 done, 0 to resume, 1 to run");
  snprintf(path, sizeof path, "%s/stale/0123456789ab/runs/e2m1/seed1.2", out);
  assert_record(path, UFP4_RUN_FINISHED, "0123456789ab");

  /* A resume by another binary leaves both names in the record, and that too is not this run. */
  set_commit(e2m1, "0123456789ab+abcdef012345");
  compare(out, log, sizeof log);
  assert_log_has(log, "was made by binary 0123456789ab+abcdef012345");
  snprintf(path, sizeof path, "%s/stale/0123456789ab+abcdef012345/runs/e2m1/seed1", out);
  assert_record(path, UFP4_RUN_FINISHED, "0123456789ab+abcdef012345");

  /* Another configuration (here the learning rate) is another run; the thread count is not. */
  ufp4_compare_options o = compare_options(out);
  o.train.optim.lr = 2e-3;
  o.train.threads = 1;
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "was made with another configuration (\"optim.lr\" differs)");
  assert_log_has(log, "0 done, 0 to resume, 2 to run");
  o.train.threads = 2;
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");
  /* Nor is a health guard, which only watches (config.json has the key only when it is set). */
  snprintf(o.train.guard, sizeof o.train.guard, "sqnr>1");
  snprintf(o.train.guard_policy, sizeof o.train.guard_policy, "stop");
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");
  free(metrics);
}

/* (3b) --same-bits-as: the runs of a listed binary are kept when finished and resumed when not
 * (the record then names both), a chain with an unlisted binary or a mere prefix of a listed
 * commit is still another binary's; and the report says whose runs it kept. */
static void test_same_bits_as_keeps_and_resumes(void **state) {
  (void)state;
  char ref[700], out[700], log[8192], e2m1[1024], path[1200], both[600];
  sub(ref, sizeof ref, "samebits_ref");
  sub(out, sizeof out, "samebits");
  compare(ref, log, sizeof log);
  compare(out, log, sizeof log);
  snprintf(e2m1, sizeof e2m1, "%s/runs/e2m1/seed1", out);
  ufp4_compare_options o = compare_options(out);
  o.same_bits_as = "fedcba987654,0123456789ab";

  set_commit(e2m1, "0123456789ab");
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");
  assert_record(e2m1, UFP4_RUN_FINISHED, "0123456789ab");
  cJSON *j = load_json("%s/report.json", out);
  snprintf(both, sizeof both, "%s (runs of fedcba987654,0123456789ab kept: the same bits)", ufp4_build_commit());
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "commit")->valuestring, both);
  cJSON_Delete(j);

  snprintf(both, sizeof both, "0123456789ab+%s", ufp4_build_commit());
  set_commit(e2m1, both);
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");

  set_commit(e2m1, "0123456789ab+abcdef012345");
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "was made by binary 0123456789ab+abcdef012345");
  assert_log_has(log, "1 done, 0 to resume, 1 to run");

  o.same_bits_as = "0123456789";
  set_commit(e2m1, "0123456789ab");
  assert_int_equal(logged(compare_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "was made by binary 0123456789ab");

  /* Interrupted after its checkpoint at step 6 by the listed binary: resumed, and the same bits
   * as the run never interrupted. */
  char cutdir[700], ref_run[1024], cut_run[1024];
  sub(cutdir, sizeof cutdir, "samebits_cut");
  snprintf(ref_run, sizeof ref_run, "%s/runs/e2m1/seed1", ref);
  snprintf(cut_run, sizeof cut_run, "%s/runs/e2m1/seed1", cutdir);
  train_partially(ref_run, cut_run, 6, -1, -1);
  set_commit(cut_run, "0123456789ab");
  ufp4_compare_options oc = compare_options(cutdir);
  oc.same_bits_as = "0123456789ab";
  assert_int_equal(logged(compare_call, &oc, &oc.log, log, sizeof log), 0);
  assert_log_has(log, "0 done, 1 to resume, 1 to run");
  snprintf(both, sizeof both, "0123456789ab+%s", ufp4_build_commit());
  assert_same_run_by(ref, cutdir, "runs/e2m1/seed1", both);
  snprintf(path, sizeof path, "%s/stale", cutdir);
  struct stat st;
  assert_int_not_equal(stat(path, &st), 0);
}

/* (4) A damaged run folder stops the call with an error that names the file; nothing is moved. */
static void test_damaged_folder_is_named(void **state) {
  (void)state;
  char out[700], log[8192], run[1024], path[1200];
  sub(out, sizeof out, "damaged");
  compare(out, log, sizeof log);
  snprintf(run, sizeof run, "%s/runs/e2m1/seed1", out);
  static const char *const names[] = {"config.json", "run.json", "metrics.jsonl"};
  for (int i = 0; i < 3; i++) {
    char *orig = read_text("%s/%s", run, names[i]);
    snprintf(path, sizeof path, "%s/%s", run, names[i]);
    if (i < 2) {
      write_text(path, "{\"truncated\": ");
    } else { /* a broken line in the middle of the log */
      char *damaged = malloc(strlen(orig) + 32);
      assert_non_null(damaged);
      char *second = strchr(orig, '\n') + 1;
      snprintf(damaged, strlen(orig) + 32, "%.*s{\"step\":2,\"lo\n%s", (int)(second - orig), orig,
               second);
      write_text(path, damaged);
      free(damaged);
    }
    ufp4_compare_options o = compare_options(out);
    const int rc = logged(compare_call, &o, &o.log, log, sizeof log);
    assert_true(rc < 0);
    if (!strstr(ufp4_last_error(), path)) fail_msg("the error does not name %s: %s", path, ufp4_last_error());
    if (i == 2) assert_non_null(strstr(ufp4_last_error(), "metrics.jsonl:2"));
    assert_null(strstr(log, "moved to"));
    write_text(path, orig);
    free(orig);
  }
  compare(out, log, sizeof log);
  assert_log_has(log, "2 done, 0 to resume, 0 to run");
}

/* A resumed run whose log was damaged before its checkpoint's step: the resume stops, naming the
 * line, rather than keep a log that the report could not read. */
static void test_damaged_log_of_interrupted_run(void **state) {
  (void)state;
  char ref[700], cut[700], a[1024], b[1024], log[8192], path[1200];
  sub(ref, sizeof ref, "ref2");
  sub(cut, sizeof cut, "cut2");
  compare(ref, log, sizeof log);
  snprintf(a, sizeof a, "%s/runs/e2m1/seed1", ref);
  snprintf(b, sizeof b, "%s/runs/e2m1/seed1", cut);
  train_partially(a, b, 6, -1, -1);
  snprintf(path, sizeof path, "%s/metrics.jsonl", b);
  char *text = read_text("%s/%s", b, "metrics.jsonl");
  text[3] = '#'; /* line 1 */
  write_text(path, text);
  free(text);
  ufp4_compare_options o = compare_options(cut);
  assert_true(logged(compare_call, &o, &o.log, log, sizeof log) < 0);
  assert_log_has(log, "1 to resume");
  char want[1300];
  snprintf(want, sizeof want, "%s:1:", path);
  if (!strstr(ufp4_last_error(), want)) fail_msg("expected %s in: %s", want, ufp4_last_error());
}

/* (5) sweep: an interrupted run resumes to the sweep's exact figures, with its checkpoint in the
 * middle of the last metrics window (log_every 5: lines at 5, 10, 12; a checkpoint at 11) and no
 * evaluation, so that the loss is the mean train loss of steps 11 and 12, and step 11's is known
 * only from the checkpoint; a second call reads every run back unchanged. */
static ufp4_sweep_options sweep_options(const char *out) {
  ufp4_sweep_options o = ufp4_sweep_options_default();
  o.data_dir = data;
  o.out_dir = out;
  o.sizes = "1x32,2x32";
  o.recipes = "bf16,e2m1";
  o.train = tiny(o.train);
  o.train.log_every = 5;
  o.train.ckpt_every = 11;
  o.train.eval_batches = 0;
  return o;
}

static void test_interrupted_sweep_resumes_exactly(void **state) {
  (void)state;
  char ref[700], cut[700], a[1024], b[1024], log[8192];
  sub(ref, sizeof ref, "sweep_ref");
  sub(cut, sizeof cut, "sweep_cut");
  ufp4_sweep_options o = sweep_options(ref);
  assert_int_equal(logged(sweep_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "0 done, 0 to resume, 4 to run");
  snprintf(a, sizeof a, "%s/runs/2x32/e2m1/seed1", ref);
  snprintf(b, sizeof b, "%s/runs/2x32/e2m1/seed1", cut);
  train_partially(a, b, 11, -1, -1);
  assert_int_equal(ufp4_train_latest_checkpoint(b), 11);
  o = sweep_options(cut);
  assert_int_equal(logged(sweep_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "0 done, 1 to resume, 3 to run");
  ufp4_run_record ra, rb;
  assert_ok(ufp4_run_record_read(a, &ra));
  assert_ok(ufp4_run_record_read(b, &rb));
  assert_true(isnan(ra.result.final_val_loss));
  assert_memory_equal(&ra.result.final_loss, &rb.result.final_loss, sizeof(double));
  char *ja = read_text("%s/%s", ref, "sweep.json"), *jb = read_text("%s/%s", cut, "sweep.json");
  assert_string_equal(ja, jb);
  assert_int_equal(logged(sweep_call, &o, &o.log, log, sizeof log), 0);
  assert_log_has(log, "4 done, 0 to resume, 0 to run");
  char *again = read_text("%s/%s", cut, "sweep.json");
  assert_string_equal(ja, again);
  free(ja);
  free(jb);
  free(again);
}

/* The trainer alone: a run killed after its final checkpoint, before run.json said "finished",
 * resumes with no step left and still returns the uninterrupted result. */
static void test_resume_after_final_checkpoint(void **state) {
  (void)state;
  static const train_synth synth = {.batch = 2, .seq = 8, .vocab = 64, .seed = 3, .mul = 5, .add = 1};
  char dir[700];
  sub(dir, sizeof dir, "final");
  ufp4_train_config c = train_tiny_config(dir, "e2m1", &synth, 7);
  c.log_every = 3; /* the last window is step 7 alone */
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result ref, again;
  assert_ok(ufp4_train(&c, &src, 0, &ref));
  assert_record(dir, UFP4_RUN_FINISHED, ufp4_build_commit());
  char path[800];
  snprintf(path, sizeof path, "%s/run.json", dir);
  write_text(path, "{\"commit\":\"0123456789ab\",\"state\":\"running\",\"steps_done\":0}");
  assert_ok(ufp4_train(&c, &src, 1, &again));
  assert_int_equal(again.steps_done, 7);
  assert_memory_equal(&ref.final_loss, &again.final_loss, sizeof(double));
  /* Resumed by this binary after another: the record names both. */
  char both[600];
  snprintf(both, sizeof both, "0123456789ab+%s", ufp4_build_commit());
  assert_record(dir, UFP4_RUN_FINISHED, both);
  ufp4_run_record rec;
  assert_ok(ufp4_run_record_read(dir, &rec));
  assert_memory_equal(&ref.final_loss, &rec.result.final_loss, sizeof(double));
}

/* The commit the build compiled in: a git name, with a digest when dirty, or "unknown" outside
 * git; never "unknown" when the source tree is a git checkout. */
static void test_build_commit(void **state) {
  (void)state;
  const char *c = ufp4_build_commit();
  assert_true(c[0] != '\0');
  for (const char *p = c; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-", *p))
      fail_msg("commit %s holds '%c'", c, *p);
  const char *dirty = strstr(c, "-dirty");
  if (dirty) {
    assert_int_equal(strlen(dirty), strlen("-dirty-") + 8);
    assert_int_equal(strspn(dirty + 7, "0123456789abcdef"), 8);
  }
  const char *src = getenv("UFP4_SOURCE_DIR");
  char git[4200];
  struct stat st;
  snprintf(git, sizeof git, "%s/.git", src ? src : ".");
  if (src && stat(git, &st) == 0 && system("git --version >/dev/null 2>&1") == 0)
    assert_string_not_equal(c, "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interrupted_compare_resumes_exactly),
      cmocka_unit_test(test_finished_runs_are_not_touched),
      cmocka_unit_test(test_other_binary_is_moved_aside_and_redone),
      cmocka_unit_test(test_same_bits_as_keeps_and_resumes),
      cmocka_unit_test(test_damaged_folder_is_named),
      cmocka_unit_test(test_damaged_log_of_interrupted_run),
      cmocka_unit_test(test_interrupted_sweep_resumes_exactly),
      cmocka_unit_test(test_resume_after_final_checkpoint),
      cmocka_unit_test(test_build_commit),
  };
  return cmocka_run_group_tests(tests, grid_test_setup, grid_test_teardown);
}
