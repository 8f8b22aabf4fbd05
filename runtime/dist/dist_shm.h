/* dist_shm.h - the allreduce of processes that share one machine, through
 * an MPI-3 shared-memory window (dist_shm.c; built with MPI only).
 *
 * Open MPI's MPI_Allreduce between two processes of one node copies the
 * vector through its shared-memory transport in fragments, several times
 * (1.7 ms for the MLP's 2.1 MB here, most of a 4.6 ms step).  With a
 * window every process can read, each one sums its 1/P of the vector
 * straight from the others' copies and everyone copies the P sums out:
 * about 4 passes over the vector per process and 2 barriers.
 *
 * The barriers are the window's own (a counter per process, spun on), so a
 * waiting process can look elsewhere: every 64 spins it calls the
 * caller's poll, which may stop the call (a process that left, a timeout:
 * dist_coll.h).  The first barrier also compares every process's length
 * and collective number. */
#ifndef GR_DIST_SHM_H
#define GR_DIST_SHM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct shm_reduce shm_reduce;

/* What a call does while it waits, and what it found wrong. */
typedef struct shm_wait {
    /* rank `missing` has not come yet after `waited` seconds: 0 to go on,
       nonzero to stop the call (it returns SHM_STOPPED) */
    int (*poll)(struct shm_wait *w, int missing, double waited);
    uint64_t seq; /* this call's collective number, compared with the others' */
    int odd_rank; /* SHM_MISMATCH: a process whose length or number differs */
    uint64_t odd_n, odd_seq;
} shm_wait;

enum { SHM_OK = 0, SHM_STOPPED = -1, SHM_MISMATCH = -2 };

/* For allreduces of at most max_n floats over comm: NULL when the
 * processes are not all on one node (or there is only one), or one of them
 * does not want it (wanted 0), then MPI's allreduce is the way.
 * Collective over comm. */
shm_reduce *shm_reduce_open(MPI_Comm comm, size_t max_n, int wanted);
/* Every process of comm on one node, more than one, and each wants it:
 * 1 with the node's communicator in *node, else 0.  Collective. */
int shm_one_node(MPI_Comm comm, int wanted, MPI_Comm *node);
/* out[0..n) = the mean of every process's in[0..n) (in == out allowed),
 * the same bits on every process.  Collective; n <= max_n.  SHM_OK, or
 * SHM_STOPPED / SHM_MISMATCH (see shm_wait): r is then of no more use,
 * and only shm_reduce_abandon may follow (the others may be in a barrier). */
int shm_reduce_mean(shm_reduce *r, const float *in, float *out, size_t n, shm_wait *w);
/* var[0..n) -= step * that mean, the mean never stored (the variable of an
 * apply_sgd_allreduce: each process applies its own part as it sums it, the
 * others' from their segments).  in and var do not overlap. */
int shm_reduce_sgd(shm_reduce *r, const float *in, float *var, size_t n, float step, shm_wait *w);
/* Collective: every process, after the same calls. */
void shm_reduce_close(shm_reduce *r);
/* Frees this process's own memory and leaves the window (the processes
 * did not all come to close it). */
void shm_reduce_abandon(shm_reduce *r);

#endif
