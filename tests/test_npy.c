/* .npy: round trips, byte-identity with numpy's writer and reading numpy's files (when
 * /usr/bin/python3 has numpy), rejection of malformed files with the file named, atomic writes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ufp4/error.h"
#include "ufp4/npy.h"

static char dir[256];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, fp);
  fclose(fp);
  return b;
}

static void spit(const char *path, const void *p, size_t n) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(p, 1, n, fp), n);
  fclose(fp);
}

/* Files left in the test directory whose name starts with `prefix` (temporary leftovers). */
static int count_prefixed(const char *prefix) {
  DIR *d = opendir(dir);
  int k = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) k++;
  closedir(d);
  return k;
}

static void round_trip(const char *name, const size_t *shape, int ndim) {
  char p[512];
  path_in(p, sizeof p, name);
  size_t count = 1;
  for (int i = 0; i < ndim; ++i) count *= shape[i];
  float *x = malloc((count ? count : 1) * sizeof *x);
  for (size_t i = 0; i < count; ++i) x[i] = (float)i * 0.5f - 3.25f;
  assert_int_equal(ufp4_npy_write(p, x, shape, ndim), 0);
  size_t len;
  uint8_t *b = slurp(p, &len);
  assert_non_null(b);
  /* Header padded so the data starts at a multiple of 64; version 1.0; ends in '\n'. */
  size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
  assert_int_equal((10 + hlen) % 64, 0);
  assert_int_equal(b[6], 1);
  assert_int_equal(b[10 + hlen - 1], '\n');
  assert_int_equal(len, 10 + hlen + count * 4);
  free(b);
  ufp4_npy a;
  assert_int_equal(ufp4_npy_read(p, &a), 0);
  assert_int_equal(a.ndim, ndim);
  for (int i = 0; i < ndim; ++i) assert_int_equal(a.shape[i], shape[i]);
  assert_int_equal(a.count, count);
  assert_non_null(a.data);
  if (count) assert_memory_equal(a.data, x, count * sizeof *x);
  ufp4_npy_free(&a);
  assert_null(a.data);
  free(x);
}

static void test_round_trip(void **state) {
  (void)state;
  size_t s1[] = {7}, s2[] = {3, 5}, s0[] = {0}, s04[] = {0, 4}, s3[] = {2, 3, 4};
  round_trip("one.npy", s1, 1);
  round_trip("two.npy", s2, 2);
  round_trip("scalar.npy", NULL, 0);
  round_trip("empty1.npy", s0, 1);
  round_trip("empty2.npy", s04, 2);
  round_trip("three.npy", s3, 3);
  /* Overwriting an existing file replaces it. */
  round_trip("two.npy", s3, 3);
  assert_int_equal(count_prefixed("two.npy.tmp"), 0);
}

static int have_numpy(void) {
  if (access("/usr/bin/python3", X_OK) != 0) return 0;
  return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

static void test_numpy_files(void **state) {
  (void)state;
  if (!have_numpy()) {
    print_message("SKIP numpy cases: /usr/bin/python3 with numpy not available\n");
    skip();
  }
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && /usr/bin/python3 - <<'PY'\n"
           "import numpy as np\n"
           "from numpy.lib import format as F\n"
           "a = (np.arange(12, dtype=np.float32) * 0.5 - 3.25)\n"
           "np.save('py1.npy', a[:7])\n"
           "np.save('py2.npy', a.reshape(3, 4))\n"
           "np.save('py0.npy', np.float32(2.5))\n"
           "np.save('pye.npy', np.zeros((0, 4), np.float32))\n"
           "np.save('pyf.npy', np.asfortranarray(a[:5]))\n"
           "np.save('pyf2.npy', np.asfortranarray(a.reshape(3, 4)))\n"
           "np.save('py8.npy', a.astype(np.float64))\n"
           "np.save('pybig.npy', np.zeros((123456789012, 0), np.float32))\n"
           "for v in ((2, 0), (3, 0)):\n"
           "    with open('pyv%%d.npy' %% v[0], 'wb') as f: F.write_array(f, a.reshape(2, 6), version=v)\n"
           "PY",
           dir);
  assert_int_equal(system(cmd), 0);
  float ref[12];
  for (int i = 0; i < 12; ++i) ref[i] = (float)i * 0.5f - 3.25f;
  char p[512];
  ufp4_npy a;
  struct {
    const char *name;
    int ndim;
    size_t s0, s1, count;
  } ok[] = {{"py1.npy", 1, 7, 0, 7},   {"py2.npy", 2, 3, 4, 12}, {"py0.npy", 0, 0, 0, 1},
            {"pye.npy", 2, 0, 4, 0},   {"pyf.npy", 1, 5, 0, 5},  {"pyv2.npy", 2, 2, 6, 12},
            {"pyv3.npy", 2, 2, 6, 12}, {"pybig.npy", 2, 123456789012u, 0, 0}};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; ++k) {
    path_in(p, sizeof p, ok[k].name);
    if (ufp4_npy_read(p, &a) != 0) fail_msg("%s: %s", ok[k].name, ufp4_last_error());
    assert_int_equal(a.ndim, ok[k].ndim);
    if (a.ndim > 0) assert_int_equal(a.shape[0], ok[k].s0);
    if (a.ndim > 1) assert_int_equal(a.shape[1], ok[k].s1);
    assert_int_equal(a.count, ok[k].count);
    if (ok[k].ndim == 0) assert_true(a.data[0] == 2.5f);
    else if (ok[k].count) assert_memory_equal(a.data, ref, a.count * sizeof(float));
    ufp4_npy_free(&a);
  }
  /* numpy's own fortran 2-D file and float64 file are refused, naming the file. */
  const char *refused[] = {"pyf2.npy", "py8.npy"};
  for (int k = 0; k < 2; ++k) {
    path_in(p, sizeof p, refused[k]);
    assert_int_equal(ufp4_npy_read(p, &a), UFP4_EFORMAT);
    assert_non_null(strstr(ufp4_last_error(), p));
  }

  /* Our writer produces the bytes numpy 1.24 writes for the same arrays. */
  size_t s1[] = {7}, s2[] = {3, 4}, se[] = {0, 4};
  struct {
    const char *ours, *theirs;
    const size_t *shape;
    int ndim;
  } same[] = {{"us1.npy", "py1.npy", s1, 1},
              {"us2.npy", "py2.npy", s2, 2},
              {"use.npy", "pye.npy", se, 2}};
  for (int k = 0; k < 3; ++k) {
    char q[512];
    path_in(p, sizeof p, same[k].ours);
    path_in(q, sizeof q, same[k].theirs);
    assert_int_equal(ufp4_npy_write(p, ref, same[k].shape, same[k].ndim), 0);
    size_t la, lb;
    uint8_t *ba = slurp(p, &la), *bb = slurp(q, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    free(ba);
    free(bb);
  }
  float sc = 2.5f;
  path_in(p, sizeof p, "us0.npy");
  assert_int_equal(ufp4_npy_write(p, &sc, NULL, 0), 0);
  char q[512];
  path_in(q, sizeof q, "py0.npy");
  size_t la, lb;
  uint8_t *ba = slurp(p, &la), *bb = slurp(q, &lb);
  assert_int_equal(la, lb);
  assert_memory_equal(ba, bb, la);
  free(ba);
  free(bb);

  /* And numpy reads what we write. */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && /usr/bin/python3 -c \"import numpy as np; a = np.load('us2.npy'); "
           "assert a.dtype == np.float32 and a.shape == (3, 4) and a[2, 3] == 2.25\"",
           dir);
  assert_int_equal(system(cmd), 0);
}

/* Builds a .npy image: prefix for `version`, the header text as given (no padding), data. */
static uint8_t *make_npy(int major, const char *header, size_t ndata, size_t *len) {
  size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
  uint8_t *b = calloc(pre + hl + ndata * 4 + 1, 1);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (uint8_t)major;
  b[7] = 0;
  b[8] = (uint8_t)(hl & 0xff);
  b[9] = (uint8_t)(hl >> 8);
  if (major != 1) b[10] = b[11] = 0;
  memcpy(b + pre, header, hl);
  for (size_t i = 0; i < ndata; ++i) {
    float v = (float)i;
    memcpy(b + pre + hl + 4 * i, &v, 4);
  }
  *len = pre + hl + ndata * 4;
  return b;
}

static void expect_bad(const char *name, const uint8_t *b, size_t len, const char *needle) {
  ufp4_npy a;
  memset(&a, 0x5a, sizeof a);
  int st = ufp4_npy_parse(b, len, name, &a);
  if (st >= 0) fail_msg("%s accepted", name);
  if (!strstr(ufp4_last_error(), name)) fail_msg("%s: message '%s' lacks the name", name, ufp4_last_error());
  if (needle && !strstr(ufp4_last_error(), needle))
    fail_msg("%s: message '%s' lacks '%s'", name, ufp4_last_error(), needle);
  assert_null(a.data);
  /* Also from disk: the path is named. */
  char p[512];
  path_in(p, sizeof p, name);
  spit(p, b, len);
  assert_true(ufp4_npy_read(p, &a) < 0);
  if (!strstr(ufp4_last_error(), p)) fail_msg("%s: message '%s' lacks the path", name, ufp4_last_error());
}

static void bad_header(const char *name, const char *header, size_t ndata, const char *needle) {
  size_t len;
  uint8_t *b = make_npy(1, header, ndata, &len);
  expect_bad(name, b, len, needle);
  free(b);
}

static void test_malformed(void **state) {
  (void)state;
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n";
  size_t len;
  uint8_t *b = make_npy(1, good, 3, &len);
  ufp4_npy a;
  assert_int_equal(ufp4_npy_parse(b, len, "good", &a), 0); /* the base case parses */
  assert_int_equal(a.count, 3);
  assert_true(a.data[2] == 2.0f);
  ufp4_npy_free(&a);

  uint8_t *c = malloc(len + 4);
  memcpy(c, b, len);
  c[0] = 0x92;
  expect_bad("bad_magic.npy", c, len, "magic");
  memcpy(c, b, len);
  c[6] = 4;
  expect_bad("bad_version.npy", c, len, "version");
  memcpy(c, b, len);
  c[7] = 1;
  expect_bad("bad_minor.npy", c, len, "version");
  expect_bad("truncated_header.npy", b, 9, NULL);
  expect_bad("empty.npy", b, 0, NULL);
  memcpy(c, b, len);
  c[8] = 0xff;
  c[9] = 0x7f;
  expect_bad("hlen_past_eof.npy", c, len, "past the end");
  memcpy(c, b, len);
  expect_bad("truncated_data.npy", c, len - 1, "truncated");
  memcpy(c, b, len);
  memset(c + len, 0, 4);
  expect_bad("trailing_data.npy", c, len + 4, "trailing");
  free(c);
  free(b);
  /* version 2.0 with a header length past the end */
  b = make_npy(2, good, 3, &len);
  assert_int_equal(ufp4_npy_parse(b, len, "good2", &a), 0);
  ufp4_npy_free(&a);
  b[11] = 1;
  expect_bad("v2_hlen_past_eof.npy", b, len, "past the end");
  free(b);

  bad_header("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", 6, "<f8");
  bad_header("bigend.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }\n", 3, ">f4");
  bad_header("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", 3, "<i4");
  bad_header("fortran2d.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 4,
             "fortran");
  bad_header("missing_shape.npy", "{'descr': '<f4', 'fortran_order': False, }\n", 1, "shape");
  bad_header("missing_descr.npy", "{'fortran_order': False, 'shape': (3,), }\n", 3, "descr");
  bad_header("missing_fortran.npy", "{'descr': '<f4', 'shape': (3,), }\n", 3, "fortran_order");
  bad_header("extra_key.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}\n",
             3, "'x'");
  bad_header("dup_key.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n",
             3, "duplicate");
  bad_header("junk.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk\n", 3,
             "extra");
  bad_header("junk_inside.npy", "{'descr': '<f4' x, 'fortran_order': False, 'shape': (3,), }\n", 3,
             NULL);
  bad_header("negative.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }\n", 0,
             "negative");
  bad_header("huge_dim.npy",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }\n", 0,
             "large");
  bad_header("overflow.npy",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", 0,
             "overflow");
  bad_header("overflow4.npy",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }\n", 0,
             "overflow");
  bad_header("not_dict.npy", "['descr', '<f4', 'fortran_order', False, 'shape', (3,)]\n", 3, "dict");
  bad_header("not_tuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }\n", 3, "tuple");
  bad_header("list_shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }\n", 3, "tuple");
  bad_header("bool_word.npy", "{'descr': '<f4', 'fortran_order': false, 'shape': (3,), }\n", 3, NULL);
  bad_header("unclosed.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), \n", 3, NULL);
  bad_header("unterminated_str.npy", "{'descr: '<f4', 'fortran_order': False, 'shape': (3,)}\n", 3, NULL);
  bad_header("too_many_dims.npy",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }\n", 1,
             "dimensions");
  bad_header("shape_short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", 3,
             "truncated");

  /* Accepted variants: keys in any order, double quotes, no trailing comma, fortran 1-D, '|f4'. */
  const char *fine[] = {
      "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}\n",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}",
      "{'descr': '|f4', 'fortran_order': True, 'shape': (3,), }          \n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, ), }\n",
  };
  for (size_t k = 0; k < sizeof fine / sizeof fine[0]; ++k) {
    b = make_npy(1, fine[k], 3, &len);
    if (ufp4_npy_parse(b, len, "fine", &a) != 0) fail_msg("variant %zu: %s", k, ufp4_last_error());
    assert_int_equal(a.count, 3);
    ufp4_npy_free(&a);
    free(b);
  }
  /* Reading a missing file or a directory names the path. */
  char p[512];
  path_in(p, sizeof p, "does_not_exist.npy");
  assert_int_equal(ufp4_npy_read(p, &a), UFP4_EIO);
  assert_non_null(strstr(ufp4_last_error(), p));
  assert_int_equal(ufp4_npy_read(dir, &a), UFP4_EIO);
  assert_non_null(strstr(ufp4_last_error(), dir));
}

static void assert_file_is(const char *p, const uint8_t *want, size_t n) {
  size_t len;
  uint8_t *b = slurp(p, &len);
  assert_non_null(b);
  assert_int_equal(len, n);
  assert_memory_equal(b, want, n);
  free(b);
}

static void test_failed_write_keeps_file(void **state) {
  (void)state;
  char sub[512], p[600];
  snprintf(sub, sizeof sub, "%s/ro", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  snprintf(p, sizeof p, "%s/keep.npy", sub);
  float x[4] = {1, 2, 3, 4};
  size_t shape[1] = {4};
  assert_int_equal(ufp4_npy_write(p, x, shape, 1), 0);
  size_t n0;
  uint8_t *orig = slurp(p, &n0);
  float y[4] = {9, 9, 9, 9};

  /* 1. Unwritable directory. root ignores the permission bits, so this case only runs as a user. */
  if (geteuid() != 0) {
    assert_int_equal(chmod(sub, 0555), 0);
    int st = ufp4_npy_write(p, y, shape, 1);
    chmod(sub, 0755);
    assert_int_equal(st, UFP4_EIO);
    assert_non_null(strstr(ufp4_last_error(), p));
    assert_file_is(p, orig, n0);
  } else {
    print_message("note: running as root, the read-only directory case is replaced by the two below\n");
  }

  /* 2. The write itself fails half-way (file size limit, EFBIG): the temporary file is removed
   * and the old file is untouched. Works as root too. */
  {
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    size_t big = 1 << 18;
    float *z = calloc(big, sizeof *z);
    lim = old;
    lim.rlim_cur = 100000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    size_t bshape[1] = {big};
    int st = ufp4_npy_write(p, z, bshape, 1);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    free(z);
    assert_int_equal(st, UFP4_EIO);
    assert_non_null(strstr(ufp4_last_error(), p));
    assert_file_is(p, orig, n0);
    DIR *d = opendir(sub);
    struct dirent *e;
    int others = 0;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "keep.npy")) others++;
    closedir(d);
    assert_int_equal(others, 0);
  }

  /* 3. The rename fails (the target is a non-empty directory): no temporary is left behind. */
  {
    char target[600], inner[700];
    snprintf(target, sizeof target, "%s/adir.npy", sub);
    snprintf(inner, sizeof inner, "%s/x", target);
    assert_int_equal(mkdir(target, 0755), 0);
    spit(inner, "x", 1);
    assert_int_equal(ufp4_npy_write(target, y, shape, 1), UFP4_EIO);
    assert_non_null(strstr(ufp4_last_error(), target));
    assert_non_null(strstr(ufp4_last_error(), "rename"));
    DIR *d = opendir(sub);
    struct dirent *e;
    while ((e = readdir(d))) assert_null(strstr(e->d_name, ".tmp."));
    closedir(d);
  }

  /* 4. The directory does not exist. */
  snprintf(p, sizeof p, "%s/no/such/dir/f.npy", dir);
  assert_int_equal(ufp4_npy_write(p, y, shape, 1), UFP4_EIO);
  assert_non_null(strstr(ufp4_last_error(), p));
  free(orig);

  /* Bad arguments. */
  assert_int_equal(ufp4_npy_write(p, y, shape, -1), UFP4_EINVAL);
  assert_int_equal(ufp4_npy_write(p, y, shape, UFP4_NPY_MAX_DIMS + 1), UFP4_EINVAL);
  assert_int_equal(ufp4_npy_write(p, NULL, shape, 1), UFP4_EINVAL);
  size_t huge[2] = {SIZE_MAX / 2, 4};
  assert_int_equal(ufp4_npy_write(p, y, huge, 2), UFP4_EINVAL);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ufp4_test_npy.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_numpy_files),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_failed_write_keeps_file),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
