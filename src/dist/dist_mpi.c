/* The MPI transport of dist.c (built only with UFP4_HAVE_MPI). Only plain copies go through MPI:
 * the arithmetic of every sum happens in dist.c, in a fixed order. */
#ifdef UFP4_HAVE_MPI
#include <limits.h>
#include <mpi.h>

#include "dist/dist_internal.h"
#include "ufp4/error.h"

static int mpi_fail(int err, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, text, &len);
  return ufp4_fail(UFP4_EIO, "dist: %s failed: %.*s", what, len, text);
}

static int too_big(size_t bytes) {
  return bytes > (size_t)INT_MAX
             ? ufp4_fail(UFP4_EINVAL, "dist: a %zu-byte message is more than MPI's int count allows; use smaller buckets", bytes)
             : 0;
}

int ufp4_dist_backend_init(int *rank, int *world, int *local_world) {
  int done = 0, provided = 0, err;
  MPI_Initialized(&done);
  /* Only the main thread calls MPI; OpenMP threads stay inside compute kernels. */
  if (!done && (err = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
    return mpi_fail(err, "MPI_Init_thread");
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, world);
  MPI_Comm node;
  *local_world = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, local_world);
    MPI_Comm_free(&node);
  }
  return 0;
}

void ufp4_dist_backend_finalize(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

int ufp4_dist_backend_sendrecv(const void *sbuf, size_t sbytes, int dest, void *rbuf, size_t rbytes, int src) {
  int rc;
  if ((rc = too_big(sbytes)) || (rc = too_big(rbytes))) return rc;
  int err = MPI_Sendrecv(sbuf, (int)sbytes, MPI_BYTE, dest, 7, rbuf, (int)rbytes, MPI_BYTE, src, 7, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
  return err == MPI_SUCCESS ? 0 : mpi_fail(err, "MPI_Sendrecv");
}

int ufp4_dist_backend_allgather(const void *mine, void *all, size_t bytes) {
  int rc = too_big(bytes);
  if (rc) return rc;
  int err = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  return err == MPI_SUCCESS ? 0 : mpi_fail(err, "MPI_Allgather");
}

int ufp4_dist_backend_barrier(void) {
  int err = MPI_Barrier(MPI_COMM_WORLD);
  return err == MPI_SUCCESS ? 0 : mpi_fail(err, "MPI_Barrier");
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int ufp4_dist_mpi_unused;
#endif
