/* Data-parallel communicator: the few collectives the trainer needs, over MPI when ufp4 was built
 * with it (UFP4_HAVE_MPI, cmake/mpi.cmake) and launched by mpirun, and a world of one otherwise.
 *
 * Launch detection: MPI is initialized only when the environment says a launcher started this
 * process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), so a plain `ufp4 train` pays nothing. A
 * launch of more than one rank by a build without MPI is an error, not N copies of one run.
 *
 * Determinism: the sums never use MPI_Allreduce, whose summation order OpenMPI chooses per call
 * (and which may leave ranks with different bits for np > 2). Each buffer is cut into buckets of
 * ufp4_dist_bucket_elems() elements; each bucket of m elements is cut into W chunks, chunk c holding
 * [c*m/W, (c+1)*m/W) (integer division), and reduced by a ring of MPI_Sendrecv (reduce-scatter, then
 * allgather). Every element of chunk c is summed in the fixed order
 *     ((x[c] + x[c+1]) + x[c+2]) + ... + x[c+W-1]        (rank indices mod W)
 * by one rank and copied to the others, so every rank holds the same bits and a repeated run is
 * bit-identical. For W = 1 the buffer is left untouched.
 *
 * Failure policy: a collective that MPI cannot complete aborts the job (MPI_ERRORS_ARE_FATAL), and
 * a rank killed by a signal makes mpirun end the job. Failures a rank can report (a data read, a
 * checkpoint save) go through ufp4_dist_agree, which every rank calls at the same point: when any
 * rank brings a nonzero status, all of them return it with the message "rank R failed: <R's
 * message>" (R the lowest failing rank). */
#ifndef UFP4_DIST_H
#define UFP4_DIST_H

#include <stddef.h>
#include <stdint.h>
#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef struct ufp4_dist ufp4_dist;

/* 1 when this build has MPI. */
int ufp4_dist_have_mpi(void);
/* 1 when the environment says a launcher started this process (whether or not it has MPI). */
int ufp4_dist_launched(void);
/* The number of ranks the launcher announces (OMPI_COMM_WORLD_SIZE or PMI_SIZE), 0 when it says
 * none: lets a program refuse a multi-rank launch before joining it. */
long ufp4_dist_launched_ranks(void);

/* The process's communicator, initialized on the first call (later calls return the same one):
 * MPI's world when launched by mpirun, otherwise rank 0 of 1. Fails when launched as more than one
 * rank by a build without MPI. */
int ufp4_dist_init(ufp4_dist **out);
/* Ends MPI (once; later calls do nothing). No collective may follow. */
void ufp4_dist_finalize(void);

int ufp4_dist_rank(const ufp4_dist *d);
int ufp4_dist_world(const ufp4_dist *d);
/* Ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE; 1 when unknown): to share the cores out. */
int ufp4_dist_local_world(const ufp4_dist *d);

/* In place: buf becomes the elementwise sum over ranks, in buckets, in the order given above. */
int ufp4_dist_sum_f32(ufp4_dist *d, float *buf, size_t n);
int ufp4_dist_sum_f64(ufp4_dist *d, double *buf, size_t n);
/* Elements per bucket (default 1 << 20, 4 MiB of floats); n = 0 restores the default. The receive
 * buffer is sized here (and by init), so that a sum never allocates: a rank that could not would
 * leave its peers waiting. Call it on every rank alike. */
int ufp4_dist_set_bucket_elems(ufp4_dist *d, size_t n);
size_t ufp4_dist_bucket_elems(const ufp4_dist *d);

/* Collective status agreement: returns 0 when every rank brings 0; otherwise every rank returns
 * the lowest failing rank's status with ufp4_last_error() = "rank R failed: <its message>" (the
 * failing rank's own message is taken from its ufp4_last_error()). With W = 1 returns `status`
 * unchanged, message untouched. */
int ufp4_dist_agree(ufp4_dist *d, int status);
/* Collective: fails on every rank (UFP4_EINVAL, "<what> differs across ranks ...") unless every
 * rank brings the same `value`. */
int ufp4_dist_check_same(ufp4_dist *d, uint64_t value, const char *what);
int ufp4_dist_barrier(ufp4_dist *d);

/* Wall seconds spent inside this communicator's collectives since the last reset. */
double ufp4_dist_comm_seconds(const ufp4_dist *d);
void ufp4_dist_reset_comm_seconds(ufp4_dist *d);

/* A 64-bit fingerprint of n bytes (FNV-1a steps over 8-byte words, seeded with n): cheap enough to
 * compare the parameters across ranks with ufp4_dist_check_same. */
uint64_t ufp4_dist_fingerprint(const void *data, size_t n);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
