/* dist.h - private to runtime/: a session's part in distributed training
 * (docs/distributed.md).
 *
 * A session of a program compiled with gr_compile_options.distributed
 * holds an rt_dist: its own duplicate of the caller's MPI communicator, its
 * rank and the number of processes.  Every collective below is called by
 * every process at the same point of the same sequence of calls; the
 * session serialises its own calls (one at a time per process, whatever
 * its threads do), so MPI_THREAD_SERIALIZED is enough.
 *
 *  - sync: the program's allreduce nodes average gradients (kern_comm).
 *  - async: rank 0 keeps the trained variables in an MPI window; each
 *    train step first reads them (MPI_Get) and afterwards adds its own
 *    change to them (MPI_Accumulate, MPI_SUM), waiting for nobody (but
 *    under bounded staleness); a version in the window counts each
 *    change's staleness (dist_staleness).  With
 *    sync_every K, there is no window: every K steps the variables are
 *    averaged (MPI_Allreduce).
 *
 * Every collective is numbered and waited for by polling (dist_coll.h): a
 * process that left the schedule (freed its session, or is in another
 * collective) or a wait past GR_DIST_TIMEOUT fails the call, with a
 * message naming the processes, the collectives and the step.
 *
 * The MPI side lives in libgraphrun-mpi.so (dist_mpi.c, dist_coll.c,
 * dist_shm.c; dist_module.h), opened when the first distributed session
 * is made; the calls below (dist.c) forward to it.  Without the module
 * (not built, or not installed beside the library), dist_open is an error
 * and nothing else is ever called. */
#ifndef GR_RUNTIME_DIST_H
#define GR_RUNTIME_DIST_H

#include <stdint.h>

#include "dist_module.h"

/* Joins the session h describes to its processes into *out: checks that
 * every process has the same options (mode, seed, sync_every, locking,
 * check_numerics), compiled the same graph and initialised the same
 * variables, and in async mode makes rank 0's window.  h is copied; its
 * ctx must outlive the rt_dist.  On error (the same on every process)
 * *out stays NULL. */
gr_code dist_open(const dist_host *h, rt_dist **out, gr_status *st);
/* Says goodbye to the others and waits for theirs (GR_DIST_TIMEOUT at
 * most); frees the MPI objects when every process left after the same
 * collective, else leaves them.  NULL: nothing. */
void dist_close(rt_dist *d);
/* gr_session_dist_agree on a distributed session. */
gr_code dist_agree(rt_dist *d, const char *what, const char *value, gr_status *st);
/* 0 and 1 for NULL (not distributed). */
int dist_rank(const rt_dist *d);
int dist_size(const rt_dist *d);
/* How many processes split data source di's batches: the number of
 * processes for a source a train target reads, else 1 (each process reads
 * it whole); this process takes share dist_rank. */
int dist_data_shards(const rt_dist *d, int di);
/* What the allreduce kernels call (NULL for NULL). */
kern_comm *dist_kern_comm(rt_dist *d);
/* Seconds this process has spent communicating (allreduce, window). */
double dist_comm_seconds(const rt_dist *d);
/* Async through rank 0's window: every rank's updates of the shared
 * variables and their staleness, as rank 0 counted them, into *out; 1.
 * Other modes (and NULL): 0, out untouched (the executors count). */
int dist_staleness(rt_dist *d, gr_staleness *out);

/* Around each train step (gr_run of a .minimize() target), outside the
 * pause lock: the async mode's read and write of the shared variables. */
gr_code dist_step_begin(rt_dist *d, gr_status *st);
/* ran: the step succeeded (else only the lock taken by begin is let go). */
gr_code dist_step_end(rt_dist *d, int ran, gr_status *st);
/* Before an evaluation: async, the local variables become the shared
 * ones; sync_every, they are averaged now (on every process). */
gr_code dist_refresh(rt_dist *d, gr_status *st);

/* A checkpoint's bytes, read by rank 0 with read and sent to every
 * process: all restore exactly what rank 0 read, or all fail. */
gr_code dist_read_file(rt_dist *d, const char *path, dist_reader read, uint8_t **buf, size_t *len,
                       gr_status *st);
/* After a restore changed the variables (async: rank 0's go to the window). */
gr_code dist_restored(rt_dist *d, gr_status *st);
/* Runs save(ctx, path, st) on rank 0 only (after the refresh dist_refresh
 * would do); every process returns its result. */
gr_code dist_save(rt_dist *d, const char *path, dist_saver save, void *ctx, gr_status *st);
/* An evaluation's sum and its count (of batch means and batches, or of
 * example values and examples when a partial batch is counted), summed
 * over the processes (each evaluated its own shard). */
gr_code dist_eval_total(rt_dist *d, double *sum, int64_t *batches, gr_status *st);

#endif
