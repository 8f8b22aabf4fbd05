/* dist_shm.h - the allreduce of processes that share one machine, through
 * an MPI-3 shared-memory window (dist_shm.c; built with MPI only).
 *
 * Open MPI's MPI_Allreduce between two processes of one node copies the
 * vector through its shared-memory transport in fragments, several times
 * (1.7 ms for the MLP's 2.1 MB here, most of a 4.6 ms step).  With a
 * window every process can read, each one sums its 1/P of the vector
 * straight from the others' copies and everyone copies the P sums out:
 * about 4 passes over the vector per process and 2 barriers. */
#ifndef GR_DIST_SHM_H
#define GR_DIST_SHM_H

#include <mpi.h>
#include <stddef.h>

typedef struct shm_reduce shm_reduce;

/* For allreduces of at most max_n floats over comm: NULL when the
 * processes are not all on one node (or there is only one), then MPI's
 * allreduce is the way.  Collective over comm. */
shm_reduce *shm_reduce_open(MPI_Comm comm, size_t max_n);
/* out[0..n) = the mean of every process's in[0..n) (in == out allowed),
 * the same bits on every process.  Collective; n <= max_n. */
void shm_reduce_mean(shm_reduce *r, const float *in, float *out, size_t n);
/* var[0..n) -= step * that mean, the mean never stored (the variable of an
 * apply_sgd_allreduce: each process applies its own part as it sums it, the
 * others' from their segments).  in and var do not overlap. */
void shm_reduce_sgd(shm_reduce *r, const float *in, float *var, size_t n, float step);
void shm_reduce_close(shm_reduce *r);

#endif
