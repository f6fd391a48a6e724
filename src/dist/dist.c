/* The communicator of dist.h: launch detection, the deterministic ring sums, status agreement.
 * The transport is dist_mpi.c; without MPI the stubs at the end stand in (world 1 never calls them). */
#include "ufp4/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "ufp4/error.h"
#include "core/timer.h"

#define DEFAULT_BUCKET ((size_t)1 << 20)
/* One status record per rank in ufp4_dist_agree: the status and the failing rank's message. */
#define AGREE_MSG 1020

struct ufp4_dist {
  int rank, world, local_world;
  size_t bucket;
  double comm_s;
  void *tmp; /* one chunk of received partial sums */
  size_t tmp_bytes;
};

static ufp4_dist the_dist;
static int initialized, backend_up, finalized;

int ufp4_dist_have_mpi(void) {
#ifdef UFP4_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

long ufp4_dist_launched_ranks(void) {
  const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return strtol(v, NULL, 10);
  }
  return 0;
}

int ufp4_dist_launched(void) {
  const char *pmix = getenv("PMIX_RANK");
  return ufp4_dist_launched_ranks() > 0 || (pmix && *pmix);
}

static int reserve_tmp(ufp4_dist *d, size_t bytes) {
  if (bytes <= d->tmp_bytes) return 0;
  void *p = realloc(d->tmp, bytes);
  if (!p) return ufp4_fail(UFP4_ENOMEM, "dist: out of memory for a %zu-byte reduction buffer", bytes);
  d->tmp = p;
  d->tmp_bytes = bytes;
  return 0;
}

/* Room for one chunk of doubles (the wider element) of a full bucket. */
static int reserve_for_bucket(ufp4_dist *d) { return reserve_tmp(d, (d->bucket / (size_t)d->world + 1) * sizeof(double)); }

int ufp4_dist_set_bucket_elems(ufp4_dist *d, size_t n) {
  const size_t old = d->bucket;
  d->bucket = n ? n : DEFAULT_BUCKET;
  int rc = d->world > 1 ? reserve_for_bucket(d) : 0;
  if (rc) d->bucket = old;
  return rc;
}

int ufp4_dist_init(ufp4_dist **out) {
  if (initialized) {
    *out = &the_dist;
    return 0;
  }
  if (finalized) return ufp4_fail(UFP4_EINVAL, "dist: the communicator was already finalized");
  memset(&the_dist, 0, sizeof the_dist);
  the_dist.world = the_dist.local_world = 1;
  the_dist.bucket = DEFAULT_BUCKET;
  if (ufp4_dist_launched()) {
    if (!ufp4_dist_have_mpi()) {
      long n = ufp4_dist_launched_ranks();
      if (n > 1)
        return ufp4_fail(UFP4_EINVAL,
                         "dist: launched as one of %ld ranks, but this ufp4 was built without MPI "
                         "(install libopenmpi-dev and rebuild with -DUFP4_MPI=ON)",
                         n);
    } else {
      int rc = ufp4_dist_backend_init(&the_dist.rank, &the_dist.world, &the_dist.local_world);
      if (rc) return rc;
      backend_up = 1;
      if (the_dist.world > 1 && (rc = reserve_for_bucket(&the_dist))) return rc;
    }
  }
  initialized = 1;
  *out = &the_dist;
  return 0;
}

void ufp4_dist_finalize(void) {
  if (backend_up && !finalized) ufp4_dist_backend_finalize();
  if (initialized) finalized = 1;
  initialized = 0;
  backend_up = 0;
  free(the_dist.tmp);
  the_dist.tmp = NULL;
  the_dist.tmp_bytes = 0;
}

int ufp4_dist_rank(const ufp4_dist *d) { return d->rank; }
int ufp4_dist_world(const ufp4_dist *d) { return d->world; }
int ufp4_dist_local_world(const ufp4_dist *d) { return d->local_world; }

size_t ufp4_dist_bucket_elems(const ufp4_dist *d) { return d->bucket; }

double ufp4_dist_comm_seconds(const ufp4_dist *d) { return d->comm_s; }
void ufp4_dist_reset_comm_seconds(ufp4_dist *d) { d->comm_s = 0; }

static size_t chunk_lo(size_t m, int c, int w) { return (size_t)((unsigned __int128)m * (unsigned)c / (unsigned)w); }

static int mod(int a, int w) { return ((a % w) + w) % w; }

/* The ring over one bucket: W - 1 reduce-scatter steps (chunk c travels c -> c+1 -> ..., each
 * rank adding its own part to the partial sum it received), then W - 1 allgather steps that pass
 * the finished chunks on unchanged. `add` is dst[i] = src[i] + dst[i] over n elements. */
static int ring(ufp4_dist *d, char *buf, size_t m, size_t esize, void (*add)(void *dst, const void *src, size_t n)) {
  const int w = d->world, r = d->rank, right = mod(r + 1, w), left = mod(r - 1, w);
  for (int s = 0; s < w - 1; s++) {
    const int sc = mod(r - s, w), rc = mod(r - s - 1, w);
    const size_t slo = chunk_lo(m, sc, w), shi = chunk_lo(m, sc + 1, w);
    const size_t rlo = chunk_lo(m, rc, w), rhi = chunk_lo(m, rc + 1, w);
    int st = ufp4_dist_backend_sendrecv(buf + slo * esize, (shi - slo) * esize, right, d->tmp, (rhi - rlo) * esize, left);
    if (st) return st;
    add(buf + rlo * esize, d->tmp, rhi - rlo);
  }
  for (int s = 0; s < w - 1; s++) {
    const int sc = mod(r + 1 - s, w), rc = mod(r - s, w);
    const size_t slo = chunk_lo(m, sc, w), shi = chunk_lo(m, sc + 1, w);
    const size_t rlo = chunk_lo(m, rc, w), rhi = chunk_lo(m, rc + 1, w);
    int st = ufp4_dist_backend_sendrecv(buf + slo * esize, (shi - slo) * esize, right, buf + rlo * esize,
                                        (rhi - rlo) * esize, left);
    if (st) return st;
  }
  return 0;
}

static void add_f32(void *dst, const void *src, size_t n) {
  float *a = dst;
  const float *b = src;
  for (size_t i = 0; i < n; i++) a[i] = b[i] + a[i];
}

static void add_f64(void *dst, const void *src, size_t n) {
  double *a = dst;
  const double *b = src;
  for (size_t i = 0; i < n; i++) a[i] = b[i] + a[i];
}

static int sum_buckets(ufp4_dist *d, void *buf, size_t n, size_t esize, void (*add)(void *, const void *, size_t)) {
  if (d->world <= 1 || n == 0) return 0;
  const double t0 = ufp4_now_s();
  const size_t bucket = d->bucket;
  int rc = 0;
  for (size_t off = 0; off < n && !rc; off += bucket)
    rc = ring(d, (char *)buf + off * esize, n - off < bucket ? n - off : bucket, esize, add);
  d->comm_s += ufp4_now_s() - t0;
  return rc;
}

int ufp4_dist_sum_f32(ufp4_dist *d, float *buf, size_t n) { return sum_buckets(d, buf, n, sizeof(float), add_f32); }
int ufp4_dist_sum_f64(ufp4_dist *d, double *buf, size_t n) { return sum_buckets(d, buf, n, sizeof(double), add_f64); }

typedef struct {
  int32_t status;
  char msg[AGREE_MSG];
} agree_record;

int ufp4_dist_agree(ufp4_dist *d, int status) {
  if (d->world <= 1) return status;
  const double t0 = ufp4_now_s();
  agree_record mine = {.status = status}, *all = calloc((size_t)d->world, sizeof *all);
  if (!all) return ufp4_fail(UFP4_ENOMEM, "dist: out of memory");
  if (status) snprintf(mine.msg, sizeof mine.msg, "%s", ufp4_last_error());
  int rc = ufp4_dist_backend_allgather(&mine, all, sizeof mine);
  for (int r = 0; r < d->world && !rc; r++) {
    if (all[r].status) {
      all[r].msg[AGREE_MSG - 1] = '\0';
      rc = ufp4_fail(all[r].status < 0 ? all[r].status : UFP4_EINVAL, "rank %d failed: %s", r, all[r].msg);
    }
  }
  free(all);
  d->comm_s += ufp4_now_s() - t0;
  return rc;
}

int ufp4_dist_check_same(ufp4_dist *d, uint64_t value, const char *what) {
  if (d->world <= 1) return 0;
  const double t0 = ufp4_now_s();
  uint64_t *all = calloc((size_t)d->world, sizeof *all);
  if (!all) return ufp4_fail(UFP4_ENOMEM, "dist: out of memory");
  int rc = ufp4_dist_backend_allgather(&value, all, sizeof value);
  for (int r = 1; r < d->world && !rc; r++)
    if (all[r] != all[0])
      rc = ufp4_fail(UFP4_EINVAL, "%s differs across ranks (rank 0 %016llx, rank %d %016llx)", what,
                     (unsigned long long)all[0], r, (unsigned long long)all[r]);
  free(all);
  d->comm_s += ufp4_now_s() - t0;
  return rc;
}

int ufp4_dist_barrier(ufp4_dist *d) {
  if (d->world <= 1) return 0;
  const double t0 = ufp4_now_s();
  int rc = ufp4_dist_backend_barrier();
  d->comm_s += ufp4_now_s() - t0;
  return rc;
}

uint64_t ufp4_dist_fingerprint(const void *data, size_t n) {
  /* FNV-1a steps over 8-byte words (the tail zero-padded): byte steps would cost a multiply per
   * byte, which shows on parameter blocks of tens of megabytes. */
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h;
}

#ifndef UFP4_HAVE_MPI
static int no_mpi(void) { return ufp4_fail(UFP4_EINVAL, "dist: this ufp4 was built without MPI"); }
int ufp4_dist_backend_init(int *rank, int *world, int *local_world) {
  (void)rank, (void)world, (void)local_world;
  return no_mpi();
}
void ufp4_dist_backend_finalize(void) {}
int ufp4_dist_backend_sendrecv(const void *sbuf, size_t sbytes, int dest, void *rbuf, size_t rbytes, int src) {
  (void)sbuf, (void)sbytes, (void)dest, (void)rbuf, (void)rbytes, (void)src;
  return no_mpi();
}
int ufp4_dist_backend_allgather(const void *mine, void *all, size_t bytes) {
  (void)mine, (void)all, (void)bytes;
  return no_mpi();
}
int ufp4_dist_backend_barrier(void) { return no_mpi(); }
#endif
