/* dist_backup.h - backup workers for sync training (docs/distributed.md,
 * "Backup workers"; dist_backup.c; built with MPI only).
 *
 * With P processes and B backups, rank 0 is the one that updates: each
 * step it averages its own gradient with the first P - B - 1 others that
 * arrive for that step and applies the mean; the others' gradients (late
 * ones) are dropped.  After each step rank 0 publishes its variables (all
 * of them, optimizer slots included) with their step; every other rank,
 * after its own step, takes the newest published state and that step, so
 * every replica is rank 0's, bit for bit, and a slow rank skips the steps
 * it missed instead of replaying them.
 *
 * Everything goes through one MPI-3 shared-memory window (every process on
 * one node):
 *   - per rank, per gradient call of a step (the allreduce nodes, in the
 *     order every process calls them): a tag (the step its gradient was
 *     computed from, plus 1; 0 while being written) and the floats;
 *   - rank 0's state, double-buffered, each buffer with its step (a
 *     seqlock: a reader copies, then checks that the step did not move).
 * A rank writes its gradient for step s only after taking a state of step
 * s, which rank 0 publishes after it has read every gradient of step s - 1
 * it chose: a gradient is never overwritten while rank 0 reads it, and a
 * gradient of an old step never carries the tag rank 0 waits for. */
#ifndef GR_DIST_BACKUP_H
#define GR_DIST_BACKUP_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bk_window bk_window;

/* What a wait does while it spins: rank `missing` (-1: any of the
 * others) is waited for, after `waited` seconds; 0 to go on, nonzero to
 * stop the call (it returns -1). */
typedef struct bk_wait {
    int (*poll)(struct bk_wait *w, int missing, double waited);
} bk_wait;

/* For `calls` gradient calls a step of `floats` floats in all, and a
 * state of state_bytes; NULL when the processes are not all on one node.
 * Collective over comm. */
bk_window *bk_open(MPI_Comm comm, int backup, int calls, size_t floats, size_t state_bytes);
/* The first gradient call of a step comes next. */
void bk_step_begin(bk_window *w);
/* This process's gradient call of step `step` (steps done before it).
 * Rank 0: out = the mean of in and the chosen others' (step not NULL:
 * out -= *sgd * that mean, the variable of an apply_sgd_allreduce);
 * others: their gradient is posted, out = in (step NULL) or left as it is
 * (their variables are replaced after the step).  0, or -1 (stopped by the
 * wait's poll, or another length: *odd_rank set, *odd_n its length). */
int bk_gradient(bk_window *w, uint64_t step, const float *in, float *out, size_t n,
                const float *sgd, bk_wait *wt, int *odd_rank, uint64_t *odd_n);
/* After a restore (before the barrier that follows it): this process's
 * gradients, of steps the restore may bring back, are no longer posted. */
void bk_forget(bk_window *w);
/* Rank 0: where to write the state of step `step`, then bk_publish. */
void *bk_state_buffer(bk_window *w, uint64_t step);
void bk_publish(bk_window *w, uint64_t step);
/* Others: the newest state rank 0 published, once it is of a step after
 * `after`, copied into dst; its step into *step.  0, or -1 (the poll). */
int bk_take(bk_window *w, uint64_t after, void *dst, uint64_t *step, bk_wait *wt);
/* Collective: every process, after the same calls. */
void bk_close(bk_window *w);
/* This process's memory only (the others may not come to close it). */
void bk_abandon(bk_window *w);

#endif
