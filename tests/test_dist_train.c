/* Data-parallel training end to end under mpirun, on a synthetic shard (no corpus needed):
 * np=2 with batch B follows the 1-process batch-2B loss curve; np=2 repeats bit for bit under the
 * SR recipe; resume works at the same np and is refused at another; a failing rank stops every
 * rank with its message; a killed rank ends the job and leaves only complete checkpoints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_test_util.h"
#include "ufp4/dist.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/train.h"

static char work[] = "/tmp/ufp4_disttrain_XXXXXX";
static const char *cli;
static char self[PATH_MAX], np1[64], np2[512];
static char out[1 << 17];

static const char *tiny =
    "--layers 1 --d-model 32 --heads 2 --ffn 64 --seq-len 32 --lr 3e-3 --warmup 2 --threads 1 --no-progress";

/* ---- worker: run under mpirun by test_failing_rank_stops_all ---- */

/* Rank 1's batch 3 fails, the way a shard read would. */
static int failing_batch(void *ctx, uint64_t index, int32_t *tokens) {
  const int rank = *(const int *)ctx;
  if (rank == 1 && index == 3) return ufp4_fail(UFP4_EIO, "shard read failed at batch 3 (injected)");
  for (int i = 0; i < 4 * 33; i++) tokens[i] = (int32_t)((index * 7 + (uint64_t)i * 3 + (uint64_t)rank) % 64);
  return 0;
}

static int data_worker(const char *dir) {
  ufp4_dist *d;
  if (ufp4_dist_init(&d)) return 1;
  ufp4_train_config c = ufp4_train_config_default();
  c.model.n_layers = 1, c.model.d_model = 32, c.model.n_heads = 2, c.model.ffn_dim = 64, c.model.seq_len = 32;
  c.model.vocab = 64;
  c.batch = 4, c.steps = 10, c.eval_every = 0, c.eval_batches = 0, c.progress = 0, c.threads = 1;
  c.rank = ufp4_dist_rank(d), c.world = ufp4_dist_world(d);
  snprintf(c.out_dir, sizeof c.out_dir, "%s", dir);
  int rank = c.rank;
  ufp4_data_source src = {failing_batch, &rank, NULL, NULL};
  ufp4_train_result res;
  int rc = ufp4_train(&c, &src, 0, &res);
  printf("worker rank %d rc %d msg [%s]\n", rank, rc, rc ? ufp4_last_error() : "");
  ufp4_dist_finalize();
  return 0;
}

/* ---- helpers ---- */

static int setup(void **state) {
  if (dist_fixture_setup(state, work, &cli)) return -1;
  dist_launcher(np2, sizeof np2, 2);
  np1[0] = '\0';
  return 0;
}

/* Trains RUN (under work/) with the launcher prefix; returns the exit status, output in `out`. */
static int train(const char *launch, const char *run, const char *flags) {
  return cli_run(out, sizeof out, "%s %s train --data %s/data --out %s/%s %s", launch, cli, work, work, run, flags);
}

typedef struct {
  int n;
  int step[256];
  int kind[256]; /* 0 train, 1 validation */
  double value[256], gnorm[256];
} curve;

static void read_curve(const char *run, curve *c) {
  char path[PATH_MAX], *text;
  size_t len;
  snprintf(path, sizeof path, "%s/%s/metrics.jsonl", work, run);
  if (ufp4_read_file(path, 1 << 24, &text, &len)) fail_msg("%s", ufp4_last_error());
  c->n = 0;
  for (char *line = strtok(text, "\n"); line && c->n < 256; line = strtok(NULL, "\n")) {
    cJSON *j = cJSON_Parse(line);
    assert_non_null(j);
    const cJSON *st = cJSON_GetObjectItem(j, "step"), *l = cJSON_GetObjectItem(j, "loss");
    const cJSON *v = cJSON_GetObjectItem(j, "val_loss"), *g = cJSON_GetObjectItem(j, "grad_norm");
    assert_true(cJSON_IsNumber(st) && (cJSON_IsNumber(l) || cJSON_IsNumber(v)));
    c->step[c->n] = st->valueint;
    c->kind[c->n] = cJSON_IsNumber(v);
    c->value[c->n] = cJSON_IsNumber(v) ? v->valuedouble : l->valuedouble;
    c->gnorm[c->n] = cJSON_IsNumber(g) ? g->valuedouble : 0;
    c->n++;
    cJSON_Delete(j);
  }
  free(text);
}

static char *read_whole(const char *fmt, const char *a, const char *b, size_t *len) {
  char path[PATH_MAX], *data;
  snprintf(path, sizeof path, fmt, a, b);
  if (ufp4_read_file(path, 1 << 26, &data, len)) fail_msg("%s", ufp4_last_error());
  return data;
}

static void assert_same_file(const char *run_a, const char *run_b, const char *file) {
  char pa[PATH_MAX], pb[PATH_MAX];
  snprintf(pa, sizeof pa, "%s/%s", run_a, file);
  snprintf(pb, sizeof pb, "%s/%s", run_b, file);
  size_t na, nb;
  char *a = read_whole("%s/%s", work, pa, &na), *b = read_whole("%s/%s", work, pb, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a);
  free(b);
}

/* ---- tests ---- */

static void test_two_ranks_match_one_process_double_batch(void **state) {
  (void)state;
  const char *f = "--recipe fp32 --steps 30 --eval-every 10 --eval-batches 4";
  char flags[1024];
  snprintf(flags, sizeof flags, "%s %s --batch 4", tiny, f);
  if (train(np2, "eq2", flags)) fail_msg("np=2: %s", out);
  snprintf(flags, sizeof flags, "%s %s --batch 8", tiny, f);
  if (train(np1, "eq1", flags)) fail_msg("np=1: %s", out);
  static curve a, b;
  read_curve("eq2", &a);
  read_curve("eq1", &b);
  assert_int_equal(a.n, 33); /* 30 steps and 3 evaluations */
  assert_int_equal(a.n, b.n);
  for (int i = 0; i < a.n; i++) {
    assert_int_equal(a.step[i], b.step[i]);
    assert_int_equal(a.kind[i], b.kind[i]);
    const double rel = fabs(a.value[i] - b.value[i]) / fabs(b.value[i]);
    if (!(rel <= 1e-5))
      fail_msg("step %d %s: np=2 %.9g vs np=1 %.9g (relative %.3g)", a.step[i], a.kind[i] ? "val_loss" : "loss",
               a.value[i], b.value[i], rel);
  }
  /* It learned something: the final validation loss is well under ln 64 = 4.16. */
  assert_true(a.value[a.n - 1] < 0.8 * log(64.0));
  /* The resolved config states the world and the global batch (2 ranks x 4 x 32 tokens). */
  size_t len;
  char *cfg = read_whole("%s/%s/config.json", work, "eq2", &len);
  cJSON *j = cJSON_Parse(cfg);
  assert_non_null(j);
  assert_int_equal(cJSON_GetObjectItem(j, "world")->valueint, 2);
  assert_int_equal(cJSON_GetObjectItem(j, "global_batch_tokens")->valueint, 256);
  cJSON_Delete(j);
  free(cfg);
  /* Rank 0 logs the communication time of each step. */
  cfg = read_whole("%s/%s/metrics.jsonl", work, "eq2", &len);
  assert_non_null(strstr(cfg, "\"comm_ms\":"));
  free(cfg);
}

static void test_two_ranks_repeat_bit_identical_and_resume(void **state) {
  (void)state;
  char flags[1024];
  snprintf(flags, sizeof flags, "%s --recipe ufp4 --batch 4 --steps 20 --ckpt-every 10 --eval-every 0 --eval-batches 2", tiny);
  if (train(np2, "rep_a", flags)) fail_msg("np=2 run a: %s", out);
  if (train(np2, "rep_b", flags)) fail_msg("np=2 run b: %s", out);
  static curve a, b;
  read_curve("rep_a", &a);
  read_curve("rep_b", &b);
  assert_int_equal(a.n, b.n);
  for (int i = 0; i < a.n; i++) {
    assert_true(a.value[i] == b.value[i]);
    assert_true(a.gnorm[i] == b.gnorm[i]);
  }
  assert_same_file("rep_a", "rep_b", "ckpt/step_00000020/model.safetensors");

  /* Stop at 10 of 20 steps, then resume at np=2: the same bits as the uninterrupted run. */
  snprintf(flags, sizeof flags, "%s --recipe ufp4 --batch 4 --steps 10 --total-steps 20 --eval-every 0 --eval-batches 2", tiny);
  if (train(np2, "part", flags)) fail_msg("np=2 part: %s", out);
  char cmd[PATH_MAX];
  snprintf(cmd, sizeof cmd, "%s train --out %s/part --resume --steps 20", cli, work);
  /* A resume at another rank count is refused, naming the count it needs. */
  int rc = cli_run(out, sizeof out, "%s", cmd);
  assert_int_equal(rc, 1);
  if (!strstr(out, "mpirun -np 2")) fail_msg("np=1 resume of an np=2 run: %s", out);
  rc = cli_run(out, sizeof out, "%s %s", np2, cmd);
  if (rc) fail_msg("np=2 resume: %s", out);
  assert_same_file("rep_a", "part", "ckpt/step_00000020/model.safetensors");
  assert_same_file("rep_a", "part", "ckpt/step_00000020/optimizer.safetensors");
  /* Going the other way: an np=1 run resumed under np=2 is refused on every rank. */
  snprintf(flags, sizeof flags, "%s --recipe fp32 --batch 4 --steps 2 --eval-every 0 --eval-batches 2", tiny);
  if (train(np1, "one", flags)) fail_msg("np=1: %s", out);
  rc = cli_run(out, sizeof out, "%s %s train --out %s/one --resume --steps 4", np2, cli, work);
  assert_true(rc != 0);
  if (!strstr(out, "rank 0 failed:") || !strstr(out, "written by a run of 1 rank"))
    fail_msg("np=2 resume of an np=1 run: %s", out);
}

static void test_failing_rank_stops_all(void **state) {
  (void)state;
  /* A data read failing on rank 1 mid-run: both ranks return rank 1's message, nothing hangs,
   * and rank 0 logged only the steps before it. */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/datafail", work);
  int rc = cli_run(out, sizeof out, "timeout 300 %s %s --data-worker %s", np2, self, dir);
  if (rc) fail_msg("worker job: exit %d: %s", rc, out);
  for (int r = 0; r < 2; r++) {
    char want[256];
    snprintf(want, sizeof want, "worker rank %d rc %d msg [rank 1 failed: shard read failed at batch 3 (injected)]", r, UFP4_EIO);
    if (!strstr(out, want)) fail_msg("rank %d: %s", r, out);
  }
  static curve c;
  read_curve("datafail", &c);
  assert_int_equal(c.n, 3);
  assert_int_equal(c.step[2], 3);

  /* A checkpoint save failing on rank 0 (ckpt is a file, not a folder): every rank stops with it. */
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/savefail", work);
  assert_int_equal(ufp4_mkdirs(path), 0);
  snprintf(path, sizeof path, "%s/savefail/ckpt", work);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  char flags[1024];
  snprintf(flags, sizeof flags, "%s --recipe fp32 --batch 4 --steps 10 --ckpt-every 5 --eval-every 0 --eval-batches 2", tiny);
  rc = train(np2, "savefail", flags);
  assert_true(rc != 0);
  if (!strstr(out, "rank 0 failed:") || !strstr(out, "savefail/ckpt")) fail_msg("save failure: %s", out);
  read_curve("savefail", &c);
  assert_int_equal(c.step[c.n - 1], 5); /* stopped at the first save */
}

/* The pid of the ufp4 process of `rank` whose command line mentions `tag`, or -1. */
static pid_t find_rank(int rank, const char *tag) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  pid_t found = -1;
  struct dirent *e;
  char want[64];
  snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
  while (found < 0 && (e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    char path[64], buf[1 << 15];
    int hit = 0;
    for (int part = 0; part < 2; part++) {
      snprintf(path, sizeof path, "/proc/%ld/%s", pid, part ? "environ" : "cmdline");
      int fd = open(path, O_RDONLY);
      if (fd < 0) break;
      ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; i++)
        if (!buf[i]) buf[i] = '\n';
      buf[n] = '\0';
      if (!strstr(buf, part ? want : tag) || (!part && !strstr(buf, " train") && !strstr(buf, "\ntrain"))) break;
      hit += 1;
    }
    if (hit == 2) found = (pid_t)pid;
  }
  closedir(d);
  return found;
}

static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0, ch;
  while ((ch = fgetc(f)) != EOF) n += ch == '\n';
  fclose(f);
  return n;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void test_killed_rank_ends_job(void **state) {
  (void)state;
  char cmd[8192], run[PATH_MAX], metrics[PATH_MAX + 32];
  snprintf(run, sizeof run, "%s/killed", work);
  snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run);
  /* Long enough (thousands of steps) that it is still running when rank 1 is killed. */
  snprintf(cmd, sizeof cmd,
           "exec %s %s train --data %s/data --out %s --recipe fp32 --layers 2 --d-model 128 --heads 4 --ffn 256 "
           "--seq-len 64 --batch 8 --steps 5000 --ckpt-every 5 --eval-every 0 --eval-batches 2 --threads 1 "
           "--no-progress >%s/killed.log 2>&1",
           np2, cli, work, run, work);
  pid_t job = fork();
  assert_true(job >= 0);
  if (job == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  setpgid(job, job);
  /* Wait for a dozen logged steps (two checkpoints), then SIGKILL rank 1. */
  pid_t victim = -1;
  for (int i = 0; i < 1200 && victim < 0; i++) {
    if (waitpid(job, NULL, WNOHANG) == job) fail_msg("the job ended before it could be killed");
    if (count_lines(metrics) >= 12) victim = find_rank(1, run);
    if (victim < 0) sleep_ms(50);
  }
  if (victim < 0) {
    kill(-job, SIGKILL);
    waitpid(job, NULL, 0);
    fail_msg("rank 1 of the job was not found");
  }
  assert_int_equal(kill(victim, SIGKILL), 0);
  /* mpirun must end the job by itself; the wait is a hang guard, not a timing measure. */
  int status = 0, ended = 0;
  for (int i = 0; i < 1200 && !ended; i++) {
    ended = waitpid(job, &status, WNOHANG) == job;
    if (!ended) sleep_ms(100);
  }
  if (!ended) {
    kill(-job, SIGKILL);
    waitpid(job, NULL, 0);
    fail_msg("mpirun did not end the job within 120 s of killing rank 1");
  }
  assert_true(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  const int logged = count_lines(metrics);
  assert_true(logged < 5000);
  /* Only complete checkpoints under their final names (a .tmp leftover is ignored by resume). */
  char ck[PATH_MAX + 64];
  snprintf(ck, sizeof ck, "%s/ckpt", run);
  DIR *d = opendir(ck);
  assert_non_null(d);
  int complete = 0, latest = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int step;
    char tail;
    if (sscanf(e->d_name, "step_%d%c", &step, &tail) != 1) continue;
    const char *files[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
    for (int k = 0; k < 3; k++) {
      char p[PATH_MAX + 400];
      struct stat st;
      snprintf(p, sizeof p, "%s/%s/%s", ck, e->d_name, files[k]);
      if (stat(p, &st) || st.st_size == 0) fail_msg("%s: incomplete checkpoint (no %s)", e->d_name, files[k]);
    }
    complete++;
    if (step > latest) latest = step;
  }
  closedir(d);
  assert_true(complete >= 1);
  /* Every rank resumes from it. */
  int rc = cli_run(out, sizeof out, "%s %s train --out %s --resume --steps %d --no-progress", np2, cli, run, latest + 5);
  if (rc) fail_msg("resume after the kill: %s", out);
  snprintf(ck, sizeof ck, "%s/ckpt/step_%08d/optimizer.safetensors", run, latest + 5);
  struct stat st;
  assert_int_equal(stat(ck, &st), 0);
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--data-worker")) return data_worker(argv[2]);
  dist_require_mpi("test_dist_train");
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks_match_one_process_double_batch),
      cmocka_unit_test(test_two_ranks_repeat_bit_identical_and_resume),
      cmocka_unit_test(test_failing_rank_stops_all),
      cmocka_unit_test(test_killed_rank_ends_job),
  };
  return cmocka_run_group_tests(tests, setup, cli_fixture_teardown);
}
