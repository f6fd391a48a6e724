/* The communicator's collectives on 2 and 3 ranks: this program launches itself under mpirun
 * (--worker), and each rank checks the ring sums bit for bit against the order dist.h documents,
 * computed here from every rank's inputs, which any rank can regenerate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist_test_util.h"
#include "ufp4/dist.h"
#include "ufp4/error.h"

/* Rank r's element i: magnitudes over many binades, so that the summation order shows in the bits. */
static double input(int r, size_t i) {
  uint64_t s = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
  s ^= s >> 31;
  s *= 0x94d049bb133111ebull;
  s ^= s >> 29;
  const double u = (double)(s >> 11) / 9007199254740992.0;          /* [0, 1) */
  const int e = (int)(s & 31) - 16;                                 /* 2^-16 .. 2^15 */
  return (u - 0.5) * (double)(1u << (e + 16)) / 65536.0;
}

/* dist.h: in a bucket of m elements chunk c is [c*m/W, (c+1)*m/W), summed x[c] + x[c+1] + ...
 * left to right, ranks mod W. */
static int chunk_of(size_t j, size_t m, int w) {
  for (int c = 0; c < w; c++)
    if (j >= (size_t)c * m / (size_t)w && j < (size_t)(c + 1) * m / (size_t)w) return c;
  return -1;
}

static int worker(void) {
  ufp4_dist *d;
  if (ufp4_dist_init(&d)) {
    fprintf(stderr, "init: %s\n", ufp4_last_error());
    return 1;
  }
  const int r = ufp4_dist_rank(d), w = ufp4_dist_world(d);
  int bad = 0;
  /* Buckets of 1000 over 4567 elements: four full buckets and a short one, chunks of unequal size. */
  const size_t n = 4567, bucket = 1000;
  if (ufp4_dist_set_bucket_elems(d, bucket)) bad |= 1;
  float *f = malloc(n * sizeof *f);
  double *g = malloc(n * sizeof *g);
  for (size_t i = 0; i < n; i++) {
    f[i] = (float)input(r, i);
    g[i] = input(r, i);
  }
  if (ufp4_dist_sum_f32(d, f, n) || ufp4_dist_sum_f64(d, g, n)) bad |= 2;
  size_t order_matters = 0;
  for (size_t i = 0; i < n; i++) {
    const size_t b0 = i / bucket * bucket, m = n - b0 < bucket ? n - b0 : bucket;
    const int c = chunk_of(i - b0, m, w);
    float ef = (float)input(c, i);
    double eg = input(c, i);
    for (int k = 1; k < w; k++) {
      ef = ef + (float)input((c + k) % w, i);
      eg = eg + input((c + k) % w, i);
    }
    if (memcmp(&ef, &f[i], sizeof ef) || memcmp(&eg, &g[i], sizeof eg)) {
      if (!(bad & 4)) fprintf(stderr, "rank %d: element %zu is %.9g / %.17g, expected %.9g / %.17g\n", r, i, f[i], g[i], ef, eg);
      bad |= 4;
    }
    /* In rank order from 0 the bits would differ here: the reference is not a tautology. */
    double z = input(0, i);
    for (int k = 1; k < w; k++) z = z + input(k, i);
    order_matters += z != eg;
  }
  /* Every rank holds the same bits. */
  if (ufp4_dist_check_same(d, ufp4_dist_fingerprint(f, n * sizeof *f) ^ ufp4_dist_fingerprint(g, n * sizeof *g), "sums"))
    bad |= 8;

  /* Agreement: all fine, then rank 1 fails and every rank reports rank 1's message. */
  if (ufp4_dist_agree(d, 0)) bad |= 16;
  int st = 0;
  if (r == 1) st = ufp4_fail(UFP4_EIO, "data/train.tok: read failed (rank %d's own words)", r);
  if (r == 0) ufp4_fail(UFP4_EINVAL, "a stale message that must not leak");
  int a = ufp4_dist_agree(d, st);
  if (a != UFP4_EIO || strcmp(ufp4_last_error(), "rank 1 failed: data/train.tok: read failed (rank 1's own words)")) {
    fprintf(stderr, "rank %d: agree gave %d \"%s\"\n", r, a, ufp4_last_error());
    bad |= 32;
  }
  /* Two failing ranks: the lowest one is named. */
  st = r >= 1 ? ufp4_fail(r == 1 ? UFP4_ENOMEM : UFP4_EIO, "rank %d out of luck", r) : 0;
  a = ufp4_dist_agree(d, st);
  if (a != UFP4_ENOMEM || strcmp(ufp4_last_error(), "rank 1 failed: rank 1 out of luck")) bad |= 64;
  /* check_same: equal passes, any difference fails on every rank. */
  if (ufp4_dist_check_same(d, 12345, "a constant")) bad |= 128;
  a = ufp4_dist_check_same(d, r == w - 1 ? 2 : 1, "the parameters");
  if (a != UFP4_EINVAL || !strstr(ufp4_last_error(), "the parameters differs across ranks")) bad |= 256;
  if (ufp4_dist_barrier(d)) bad |= 512;
  if (!(ufp4_dist_comm_seconds(d) > 0)) bad |= 1024;
  printf("rank %d of %d: bad %d order_matters %zu\n", r, w, bad, order_matters);
  free(f);
  free(g);
  ufp4_dist_finalize();
  return 0;
}

static char self[PATH_MAX];

static void run_on(int np) {
  char launch[512];
  static char out[1 << 16];
  dist_launcher(launch, sizeof launch, np);
  int rc = cli_run(out, sizeof out, "%s %s --worker", launch, self);
  if (rc) fail_msg("%d ranks: exit %d: %s", np, rc, out);
  for (int r = 0; r < np; r++) {
    char want[64];
    snprintf(want, sizeof want, "rank %d of %d: bad 0 order_matters ", r, np);
    const char *p = strstr(out, want);
    if (!p) fail_msg("%d ranks: rank %d did not pass: %s", np, r, out);
    /* With 3 ranks the rotated order must differ from rank order somewhere (else the test is blind). */
    if (np == 3 && atol(p + strlen(want)) == 0) fail_msg("the inputs never expose the summation order: %s", out);
  }
}

static void test_two_ranks(void **state) {
  (void)state;
  run_on(2);
}

static void test_three_ranks(void **state) {
  (void)state;
  run_on(3);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--worker")) return worker();
  dist_require_mpi("test_dist_ring");
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_three_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
