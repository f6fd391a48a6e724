/* A full disk and an unwritable run folder give a clear error (the path and the OS's reason) and
 * lose nothing already saved. The suite runs as root in CI, where permissions do not stop writes,
 * so the faults are real but made differently: RLIMIT_FSIZE in a child process (SIGXFSZ ignored,
 * so writes past the limit fail with EFBIG) stands for a full disk; /dev/full for a device that
 * refuses every write; a run folder under a regular file; and, as root, a child that drops to
 * uid 65534 (nobody), else a folder without write permission. Children are this program
 * re-executed, so they start without the parent's OpenMP threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train_test_util.h"
#include "ufp4/checkpoint.h"
#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/npy.h"

#define FSIZE_LIMIT 16384 /* bytes: above config.json and metrics.jsonl, below a checkpoint */

static const train_synth synth = {.batch = 2, .seq = 16, .vocab = 32, .seed = 5, .mul = 7, .add = 2};

static ufp4_train_config tiny(const char *dir, int steps) {
  ufp4_train_config c = train_tiny_config(dir, "fp32", &synth, steps);
  c.ckpt_every = 1;
  c.keep_ckpts = 10;
  c.optim.total_steps = 10;
  return c;
}

static int train(const char *dir, int steps, int resume) {
  ufp4_train_config c = tiny(dir, steps);
  ufp4_data_source src = {train_synth_batch, (void *)&synth, NULL, NULL};
  ufp4_train_result r;
  return ufp4_train(&c, &src, resume, &r);
}

static ufp4_model *make_model(uint64_t seed) {
  ufp4_train_config c = tiny("/nonexistent", 1);
  ufp4_model *m;
  assert_int_equal(ufp4_model_create(&m, &c.model, 1), 0);
  ufp4_model_init(m, seed);
  return m;
}

static void limit_file_size(void) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {FSIZE_LIMIT, FSIZE_LIMIT};
  if (setrlimit(RLIMIT_FSIZE, &rl)) {
    perror("setrlimit");
    _exit(3);
  }
}

/* Child modes. Each prints ufp4_last_error() on stderr and exits 1 on a ufp4 failure. */
static int child(int argc, char **argv) {
  int rc;
  if (argc == 3 && !strcmp(argv[1], "--child-save")) {
    limit_file_size();
    ufp4_model *m = make_model(99);
    rc = ufp4_checkpoint_save(argv[2], m, NULL, NULL, NULL);
    ufp4_model_free(m);
  } else if (argc == 3 && !strcmp(argv[1], "--child-train")) {
    limit_file_size();
    rc = train(argv[2], 4, 1);
  } else if (argc == 3 && !strcmp(argv[1], "--child-npy")) {
    limit_file_size();
    static float big[8192];
    size_t shape[1] = {8192};
    rc = ufp4_npy_write(argv[2], big, shape, 1);
  } else if (argc == 3 && !strcmp(argv[1], "--child-nobody")) {
    if (setgid(65534) || setuid(65534)) {
      perror("setuid");
      return 3;
    }
    rc = train(argv[2], 4, 1);
  } else {
    return 2;
  }
  if (rc) fprintf(stderr, "%s\n", ufp4_last_error());
  return rc ? 1 : 0;
}

static char self[4096];

/* Runs a child mode; returns its exit status with its stderr in err. */
static int run_child(const char *mode, const char *arg, char *err, size_t size) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    execl(self, self, mode, arg, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < size && (r = read(fds[0], err + n, size - 1 - n)) > 0) n += (size_t)r;
  err[n] = '\0';
  close(fds[0]);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st)) fail_msg("%s: child did not exit normally (status %d): %s", mode, st, err);
  return WEXITSTATUS(st);
}

static void expect_message(const char *err, const char *path, const char *reason) {
  if (!strstr(err, path) || !strstr(err, reason))
    fail_msg("message should name %s and say \"%s\", got: %s", path, reason, err);
}

static void load_checkpoint(const char *dir, ufp4_model *m) {
  ufp4_model_config mc;
  if (ufp4_checkpoint_config(dir, &mc) || ufp4_checkpoint_load_params(dir, m))
    fail_msg("%s does not load: %s", dir, ufp4_last_error());
}

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* A checkpoint save that runs out of space: the message names the file and EFBIG, the old
 * checkpoint keeps its exact bits, and no temporary folder is left behind. */
static void test_full_disk_checkpoint_save(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_full_XXXXXX", ck[256], tmp[300];
  assert_non_null(mkdtemp(dir));
  snprintf(ck, sizeof ck, "%s/ckpt", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", ck);
  ufp4_model *a = make_model(1), *back = make_model(2);
  assert_int_equal(ufp4_checkpoint_save(ck, a, NULL, NULL, NULL), 0);
  char err[4096];
  assert_int_equal(run_child("--child-save", ck, err, sizeof err), 1);
  expect_message(err, ck, strerror(EFBIG));
  load_checkpoint(ck, back);
  size_t n = ufp4_model_num_params(a);
  assert_memory_equal(ufp4_model_params(a), ufp4_model_params(back), n * sizeof(float));
  assert_false(exists(tmp));
  ufp4_model_free(a);
  ufp4_model_free(back);
  ufp4_remove_tree(dir);
}

/* The same during training: the resumed run stops at its first checkpoint with a clear error,
 * the previous checkpoint still loads, and a later resume with space continues the run. */
static void test_full_disk_during_training(void **state) {
  (void)state;
  char run[] = "/tmp/ufp4_fullrun_XXXXXX", p[512];
  assert_non_null(mkdtemp(run));
  assert_int_equal(train(run, 2, 0), 0);
  char err[4096];
  assert_int_equal(run_child("--child-train", run, err, sizeof err), 1);
  snprintf(p, sizeof p, "%s/ckpt/step_00000003", run);
  expect_message(err, p, strerror(EFBIG));
  assert_false(exists(p));
  snprintf(p, sizeof p, "%s/ckpt/step_00000002", run);
  ufp4_model *m = make_model(3);
  load_checkpoint(p, m);
  ufp4_model_free(m);
  assert_int_equal(train(run, 4, 1), 0);
  snprintf(p, sizeof p, "%s/ckpt/step_00000004/optimizer.safetensors", run);
  assert_true(exists(p));
  ufp4_remove_tree(run);
}

/* An atomic single-file write (.npy) that runs out of space leaves the old file as it was. */
static void test_full_disk_npy(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_fullnpy_XXXXXX", path[256];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/x.npy", dir);
  const float old[3] = {1, 2, 3};
  size_t shape[1] = {3};
  assert_int_equal(ufp4_npy_write(path, old, shape, 1), 0);
  char err[4096];
  assert_int_equal(run_child("--child-npy", path, err, sizeof err), 1);
  expect_message(err, path, strerror(EFBIG));
  ufp4_npy a;
  assert_int_equal(ufp4_npy_read(path, &a), 0);
  assert_int_equal(a.count, 3);
  assert_memory_equal(a.data, old, sizeof old);
  ufp4_npy_free(&a);
  ufp4_remove_tree(dir);
}

/* metrics.jsonl on a device that refuses every write (/dev/full, ENOSPC): the run must stop and
 * say so, not train on while the log silently loses lines. */
static void test_metrics_on_full_device(void **state) {
  (void)state;
  if (access("/dev/full", W_OK)) {
    print_message("skipped: /dev/full is not writable here\n");
    skip();
  }
  char run[] = "/tmp/ufp4_devfull_XXXXXX", p[512];
  assert_non_null(mkdtemp(run));
  snprintf(p, sizeof p, "%s/metrics.jsonl", run);
  assert_int_equal(symlink("/dev/full", p), 0);
  int rc = train(run, 3, 0);
  assert_int_equal(rc, UFP4_EIO);
  expect_message(ufp4_last_error(), "metrics.jsonl", strerror(ENOSPC));
  ufp4_remove_tree(run);
}

/* A run folder whose parent is a regular file cannot be created: the message names it. */
static void test_run_dir_under_a_file(void **state) {
  (void)state;
  char dir[] = "/tmp/ufp4_notdir_XXXXXX", file[256], run[300];
  assert_non_null(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/file", dir);
  int fd = open(file, O_CREAT | O_WRONLY, 0644);
  assert_true(fd >= 0);
  close(fd);
  snprintf(run, sizeof run, "%s/run", file);
  assert_int_not_equal(train(run, 1, 0), 0);
  expect_message(ufp4_last_error(), file, strerror(ENOTDIR));
  ufp4_model *m = make_model(1);
  snprintf(run, sizeof run, "%s/ckpt", file);
  assert_int_equal(ufp4_checkpoint_save(run, m, NULL, NULL, NULL), UFP4_EIO);
  expect_message(ufp4_last_error(), file, strerror(ENOTDIR));
  ufp4_model_free(m);
  ufp4_remove_tree(dir);
}

/* A run folder this user may not write: resume fails naming the file it could not write, and the
 * checkpoint it would have continued from is intact. */
static void test_unwritable_run_dir(void **state) {
  (void)state;
  char run[] = "/tmp/ufp4_ro_XXXXXX", p[512], err[4096];
  assert_non_null(mkdtemp(run));
  assert_int_equal(train(run, 2, 0), 0);
  /* nobody must be able to enter the folder to read the checkpoint, not to write it */
  assert_int_equal(chmod(run, 0755), 0);
  int rc;
  if (geteuid() == 0) {
    rc = run_child("--child-nobody", run, err, sizeof err);
  } else {
    assert_int_equal(chmod(run, 0555), 0);
    snprintf(p, sizeof p, "%s/ckpt", run);
    assert_int_equal(chmod(p, 0555), 0);
    rc = train(run, 4, 1) ? 1 : 0;
    snprintf(err, sizeof err, "%s", ufp4_last_error());
    chmod(p, 0755);
    chmod(run, 0755);
  }
  assert_int_equal(rc, 1);
  expect_message(err, run, strerror(EACCES));
  snprintf(p, sizeof p, "%s/ckpt/step_00000002", run);
  ufp4_model *m = make_model(4);
  load_checkpoint(p, m);
  ufp4_model_free(m);
  snprintf(p, sizeof p, "%s/ckpt/step_00000003", run);
  assert_false(exists(p));
  ufp4_remove_tree(run);
}

int main(int argc, char **argv) {
  if (argc > 1) return child(argc, argv);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "skipped: /proc/self/exe is not readable, so the children cannot be started\n");
    return 77;
  }
  self[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_disk_checkpoint_save), cmocka_unit_test(test_full_disk_during_training),
      cmocka_unit_test(test_full_disk_npy),             cmocka_unit_test(test_metrics_on_full_device),
      cmocka_unit_test(test_run_dir_under_a_file),      cmocka_unit_test(test_unwritable_run_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
