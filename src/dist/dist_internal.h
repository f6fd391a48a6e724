/* What src/dist/dist.c needs from a transport: src/dist/dist_mpi.c over MPI, or the stubs at the
 * end of dist.c in a build without MPI (where world is always 1 and these are never reached). */
#ifndef UFP4_DIST_INTERNAL_H
#define UFP4_DIST_INTERNAL_H

#include <stddef.h>

/* Initializes the transport; fills rank, world and local world. Returns 0 or a ufp4_status. */
int ufp4_dist_backend_init(int *rank, int *world, int *local_world);
void ufp4_dist_backend_finalize(void);
/* Sends `sbytes` to `dest` while receiving `rbytes` from `src` (tag fixed: the ring is lockstep). */
int ufp4_dist_backend_sendrecv(const void *sbuf, size_t sbytes, int dest, void *rbuf, size_t rbytes, int src);
/* Every rank's `bytes` bytes, in rank order, into all[world * bytes]. */
int ufp4_dist_backend_allgather(const void *mine, void *all, size_t bytes);
int ufp4_dist_backend_barrier(void);

#endif
