/* The communicator without a launcher: a world of one whose collectives change nothing, and the
 * parameter fingerprint against a scalar reference. Runs in every build, MPI or not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/dist.h"
#include "ufp4/error.h"

/* Must run first: a build without MPI refuses a launch of several ranks (rather than running N
 * copies of one job), and the refusal leaves the communicator uninitialized. */
static void test_no_mpi_refuses_multi_rank_launch(void **state) {
  (void)state;
  if (ufp4_dist_have_mpi()) {
    skip(); /* with MPI the fake variables would make it call MPI_Init outside mpirun */
    return;
  }
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  assert_int_equal(ufp4_dist_launched(), 1);
  ufp4_dist *d;
  assert_int_equal(ufp4_dist_init(&d), UFP4_EINVAL);
  assert_non_null(strstr(ufp4_last_error(), "without MPI"));
  assert_non_null(strstr(ufp4_last_error(), "2 ranks"));
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

static void test_world_of_one(void **state) {
  (void)state;
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  unsetenv("PMIX_RANK");
  assert_int_equal(ufp4_dist_launched(), 0);
  ufp4_dist *d, *again;
  assert_int_equal(ufp4_dist_init(&d), 0);
  assert_int_equal(ufp4_dist_init(&again), 0);
  assert_ptr_equal(d, again); /* one communicator per process */
  assert_int_equal(ufp4_dist_rank(d), 0);
  assert_int_equal(ufp4_dist_world(d), 1);
  assert_int_equal(ufp4_dist_local_world(d), 1);

  float f[5] = {1.5f, -2.0f, 3e-39f, 0.1f, -0.0f};
  const float f0[5] = {1.5f, -2.0f, 3e-39f, 0.1f, -0.0f};
  double g[3] = {1.0 / 3, -7, 1e300};
  const double g0[3] = {1.0 / 3, -7, 1e300};
  assert_int_equal(ufp4_dist_sum_f32(d, f, 5), 0);
  assert_int_equal(ufp4_dist_sum_f64(d, g, 3), 0);
  assert_memory_equal(f, f0, sizeof f); /* the sum over one rank is the buffer, bit for bit */
  assert_memory_equal(g, g0, sizeof g);

  /* Agreement over one rank hands back the status and keeps this rank's own message. */
  assert_int_equal(ufp4_dist_agree(d, 0), 0);
  ufp4_fail(UFP4_EIO, "train.tok: read failed");
  assert_int_equal(ufp4_dist_agree(d, UFP4_EIO), UFP4_EIO);
  assert_string_equal(ufp4_last_error(), "train.tok: read failed");
  assert_int_equal(ufp4_dist_check_same(d, 42, "x"), 0);
  assert_int_equal(ufp4_dist_barrier(d), 0);
  assert_true(ufp4_dist_comm_seconds(d) == 0.0);

  assert_int_equal(ufp4_dist_set_bucket_elems(d, 7), 0);
  assert_int_equal(ufp4_dist_bucket_elems(d), 7);
  assert_int_equal(ufp4_dist_set_bucket_elems(d, 0), 0);
  assert_int_equal(ufp4_dist_bucket_elems(d), (size_t)1 << 20);
  ufp4_dist_finalize();
  ufp4_dist_finalize(); /* a second finalize does nothing */
}

/* Scalar reference of dist.h's fingerprint: FNV-1a over little-endian 8-byte words, the last
 * word zero-padded, starting from the offset basis xor n. */
static uint64_t ref_fingerprint(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8 && i + k < n; k++) w |= (uint64_t)p[i + k] << (8 * k);
    h ^= w;
    h *= 1099511628211ull;
  }
  return h;
}

static void test_fingerprint(void **state) {
  (void)state;
  unsigned char buf[67];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 37 + 11);
  for (size_t n = 0; n <= sizeof buf; n++) assert_true(ufp4_dist_fingerprint(buf, n) == ref_fingerprint(buf, n));
  /* Empty input: the offset basis itself (n = 0). */
  assert_true(ufp4_dist_fingerprint(buf, 0) == 0xcbf29ce484222325ull);
  /* One flipped bit anywhere changes it (parameters that drift apart by one ulp are caught). */
  const uint64_t h = ufp4_dist_fingerprint(buf, sizeof buf);
  for (size_t i = 0; i < sizeof buf; i++) {
    buf[i] ^= 1;
    assert_true(ufp4_dist_fingerprint(buf, sizeof buf) != h);
    buf[i] ^= 1;
  }
  /* Trailing zero bytes are not invisible: the length is part of it. */
  unsigned char z[16] = {0};
  assert_true(ufp4_dist_fingerprint(z, 9) != ufp4_dist_fingerprint(z, 10));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_mpi_refuses_multi_rank_launch),
      cmocka_unit_test(test_world_of_one),
      cmocka_unit_test(test_fingerprint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
