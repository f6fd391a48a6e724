/* kill -9 during checkpoint saves, for real. A child process (this program re-executed, so it
 * starts clean of the parent's OpenMP threads) trains a model big enough that a save takes a
 * noticeable time, checkpointing every step; the parent waits until a step_N.tmp folder appears,
 * waits a different delay each round, and SIGKILLs it. After every kill each folder named step_N
 * must be a complete, loadable checkpoint of step N, the newest complete step never goes back,
 * and the next round resumes from it. At the end the run is resumed to completion and must equal,
 * bit for bit, a run that was never interrupted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "train_test_util.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"

static const train_synth synth = {.batch = 2, .seq = 16, .vocab = 256, .seed = 11, .mul = 17, .add = 5};

/* About 1.1 M parameters: 4.3 MB of weights and 8.7 MB of AdamW state per checkpoint, which
 * with the fsyncs takes a good fraction of a second to save here. */
static ufp4_train_config big(const char *dir, int steps, int ckpt_every) {
  ufp4_train_config c = train_tiny_config(dir, "fp32", &synth, steps);
  c.model.n_layers = 4;
  c.model.d_model = 128;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 4;
  c.model.ffn_dim = 512;
  c.optim.lr = 1e-3;
  c.optim.warmup_steps = 2;
  c.optim.total_steps = 1000;
  c.ckpt_every = ckpt_every;
  c.keep_ckpts = 2;
  return c;
}

static int train(const char *dir, int steps, int ckpt_every, int resume) {
  ufp4_train_config c = big(dir, steps, ckpt_every);
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result r;
  int rc = ufp4_train(&c, &src, resume, &r);
  if (rc) fprintf(stderr, "train %s: %s\n", dir, ufp4_last_error());
  return rc;
}

static int parse_step(const char *name, int *step, int *tmp) {
  int n = -1;
  if (sscanf(name, "step_%d%n", step, &n) != 1 || n != 13) return 0;
  *tmp = !strcmp(name + n, ".tmp");
  return name[n] == '\0' || *tmp;
}

/* Checks every step_N folder; returns the newest complete step (-1 if none). */
static int check_all(const char *run) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/ckpt", run);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int newest = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    int step, tmp;
    if (!parse_step(e->d_name, &step, &tmp) || tmp) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ufp4_model_config mc;
    if (ufp4_checkpoint_config(path, &mc)) fail_msg("%s is not complete: %s", path, ufp4_last_error());
    ufp4_model *m;
    assert_int_equal(ufp4_model_create(&m, &mc, 1), 0);
    size_t n = ufp4_model_num_params(m);
    float *ms = malloc(n * sizeof *ms), *vs = malloc(n * sizeof *vs);
    char *trainer = NULL;
    assert_non_null(ms);
    assert_non_null(vs);
    if (ufp4_checkpoint_load_params(path, m) || ufp4_checkpoint_load_optimizer(path, n, ms, vs, &trainer))
      fail_msg("%s is not complete: %s", path, ufp4_last_error());
    char want[64];
    snprintf(want, sizeof want, "\"step\":%d,", step);
    if (!trainer || !strstr(trainer, want)) fail_msg("%s: trainer state %s is not step %d", path, trainer, step);
    free(trainer);
    free(ms);
    free(vs);
    ufp4_model_free(m);
    if (step > newest) newest = step;
  }
  closedir(d);
  return newest;
}

/* A save in progress: a step_N.tmp folder with N > after. */
static int saving(const char *run, int after) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/ckpt", run);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    int step, tmp;
    found = parse_step(e->d_name, &step, &tmp) && tmp && step > after;
  }
  closedir(d);
  return found;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts)) {
  }
}

static char self[4096];

static void test_kill_during_save(void **state) {
  (void)state;
  char run[] = "/tmp/ufp4_kill_XXXXXX", ref[] = "/tmp/ufp4_killref_XXXXXX";
  assert_non_null(mkdtemp(run));
  assert_non_null(mkdtemp(ref));
  const double t_train = now_s();
  assert_int_equal(train(run, 1, 1, 0), 0); /* something to resume from */
  int newest = check_all(run);
  assert_int_equal(newest, 1);
  /* Kill moments spread over one save: the time of this first run (setup, a step and a save)
   * bounds a save from above, so fractions of it land at once (config.json), inside the weights,
   * inside the optimizer state, around the renames, and after the save (the next one begins). */
  const double span_us = (now_s() - t_train) * 1e6;
  const double frac[] = {0, 0.02, 0.1, 0.3, 0.6, 1.2};
  long delay_us[sizeof frac / sizeof *frac];
  for (size_t i = 0; i < sizeof frac / sizeof *frac; i++) delay_us[i] = (long)(frac[i] * span_us);
  int killed_mid_save = 0, advanced = 0;
  for (size_t round = 0; round < sizeof delay_us / sizeof *delay_us; round++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      execl(self, self, "--child", run, (char *)NULL);
      _exit(127);
    }
    const double t0 = now_s();
    /* The save after the current newest step (the first step the child runs). */
    while (!saving(run, newest)) {
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("round %zu: the child exited (status %d) before saving", round, st);
      if (now_s() - t0 > 300) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("round %zu: no save started within 300 s", round);
      }
      sleep_us(500);
    }
    sleep_us(delay_us[round]);
    killed_mid_save += saving(run, newest);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    int after = check_all(run);
    if (after < newest) fail_msg("round %zu: newest complete checkpoint went back from %d to %d", round, newest, after);
    print_message("round %zu: killed %ld us after step_%d.tmp appeared; newest complete checkpoint %d\n", round,
                  delay_us[round], newest + 1, after);
    advanced += after > newest;
    newest = after;
  }
  /* At least the zero-delay kill lands inside a save; if none did, the model is too small to
   * test anything. */
  assert_true(killed_mid_save >= 1);
  print_message("%d kills inside a save, %d after one completed\n", killed_mid_save, advanced);
  /* Resume to completion; compare with a run that was never interrupted. */
  const int final = newest + 2;
  assert_int_equal(train(run, final, 1, 1), 0);
  assert_int_equal(train(ref, final, 0, 0), 0);
  char pa[512], pb[512];
  snprintf(pa, sizeof pa, "%s/ckpt/step_%08d/model.safetensors", run, final);
  snprintf(pb, sizeof pb, "%s/ckpt/step_%08d/model.safetensors", ref, final);
  train_files_equal(pa, pb);
  ufp4_remove_tree(run);
  ufp4_remove_tree(ref);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--child")) return train(argv[2], 1000000, 1, 1) ? 1 : 0;
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "skipped: /proc/self/exe is not readable, so the child cannot be started\n");
    return 77;
  }
  self[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill_during_save),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
