/* dist_coll.h - private to runtime/dist/dist_mpi.c: the schedule of a
 * distributed session's collectives, and waits that never last for ever
 * (docs/distributed.md, "Failure"; built with MPI only).
 *
 * Every collective a session makes is numbered (its seq, the same on every
 * process that follows the schedule) and has a kind.  A process waits for
 * the others by polling, never inside a blocking MPI call that another
 * process might never join, and while it polls it:
 *   - reads the control messages of the others (a communicator of their
 *     own): "I left after my collective N" (gr_session_free) and "I have
 *     been waiting in collective M of kind K" (sent by a wait that lasts
 *     longer than a tenth of a second);
 *   - fails when a process left before this collective, or waits in
 *     another one (another seq, or the same seq of another kind);
 *   - fails after the timeout (GR_DIST_TIMEOUT seconds, 600 by default)
 *     without the collective completing.
 * The rare collectives (everything but the gradient allreduce) first
 * exchange a header, (seq, kind, step), so processes in different ones
 * fail at once; the gradient allreduce compares (seq, length) in its own
 * barrier (dist_shm.c) or in one small nonblocking allreduce before the
 * blocking MPI_Allreduce.  After a failure the schedule is broken: every
 * later collective fails at once, and gr_session_free leaves the MPI
 * objects behind (the job is to end with MPI_Abort). */
#ifndef GR_DIST_COLL_H
#define GR_DIST_COLL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef enum coll_kind {
    COLL_OPEN,     /* gr_session_new's checks */
    COLL_AGREE,    /* gr_session_dist_agree */
    COLL_GRADIENT, /* an allreduce node of a train step */
    COLL_AVERAGE,  /* sync_every: the variables averaged after a step */
    COLL_REFRESH,  /* sync_every: the variables averaged before an evaluation */
    COLL_EVAL,     /* an evaluation's total over the processes */
    COLL_SAVE,     /* a checkpoint written by rank 0 */
    COLL_RESTORE,  /* a checkpoint read by rank 0 and broadcast */
    COLL_RESTORED, /* async: rank 0's restored variables become the shared ones */
    COLL_KINDS
} coll_kind;

/* What a process says about where it is: (seq, kind) and the training
 * step (steps done; in_step: inside the next one). */
typedef struct coll_where {
    int64_t seq, kind, step, in_step;
} coll_where;

typedef struct coll_peer {
    coll_where wait; /* its last "waiting in" message (seq 0: none) */
    int64_t bye_seq; /* it left after this collective (-1: it has not left) */
    int64_t bye_step;
} coll_peer;

typedef struct coll_sched {
    MPI_Comm comm;    /* the session's: rare collectives */
    MPI_Comm fast;    /* the gradient allreduce (MPI_Allreduce path) */
    MPI_Comm ctl;     /* control messages */
    MPI_Comm opening; /* a duplicate on its way (coll_open) */
    int rank, size;
    double timeout;    /* seconds a wait may last */
    coll_where now;    /* the collective in progress, or the last one */
    int64_t announced; /* the seq whose wait this process announced */
    coll_peer *peers;
    int64_t (*bufs)[4]; /* what requests write into: headers (size) then scratch (one) */
    MPI_Request *sends; /* per peer: its last control message */
    int64_t (*out)[5];  /* per peer: that message */
    int broken;         /* a collective failed: later ones fail at once */
    int abandoned;      /* a request was left pending: its buffers are never freed */
    char why[192];      /* the first failure */
} coll_sched;

/* GR_DIST_TIMEOUT from the environment (600 s when unset): 0, or -1 with
 * why. */
int coll_timeout_env(double *seconds, char *why, size_t len);
/* Duplicates user into c->comm, then c->fast and c->ctl (nonblocking:
 * a process that never comes fails the wait).  0, or -1 with why. */
int coll_open(coll_sched *c, MPI_Comm user, double timeout, char *why, size_t len);
/* The training step the next collectives belong to. */
void coll_set_step(coll_sched *c, uint64_t done, int in_step);
/* Starts the next collective: a rare one exchanges and compares the header
 * (coll_begin), the gradient allreduce only counts (coll_enter).  0, or -1
 * with why (the same on every process for a header that differs). */
int coll_begin(coll_sched *c, coll_kind kind, char *why, size_t len);
int coll_enter(coll_sched *c, coll_kind kind, char *why, size_t len);
/* Waits for *rq, polling as above.  0, or -1 with why. */
int coll_wait(coll_sched *c, MPI_Request *rq, char *why, size_t len);
/* One look while waiting (waited seconds so far; missing: a process known
 * not to have come, or -1): 0 to go on, -1 with why to stop. */
int coll_poll(coll_sched *c, double waited, int missing, char *why, size_t len);
/* A wait outside the numbered collectives (backup workers' exchange,
 * dist_backup.h), for `what`: reads the control messages and fails when
 * rank `who` left (who < 0: when fewer than `need` of the others are still
 * there), or after the timeout.  It announces nothing: the others do not
 * wait for this process there.  0, or -1 with why. */
int coll_watch(coll_sched *c, double waited, int who, int need, const char *what, char *why,
               size_t len);
/* The gradient allreduce over c->fast of n floats: every process's (seq,
 * n) is compared first, in a nonblocking allreduce.  0, or -1 with why. */
int coll_fast_check(coll_sched *c, size_t n, char *why, size_t len);
/* n <= 4 int64s that rank 0 broadcasts to every process (a code, a
 * length), waiting as above.  0, or -1 with why. */
int coll_bcast_words(coll_sched *c, int64_t *words, int n, char *why, size_t len);
/* The scratch buffer requests may write into (4 int64s). */
int64_t *coll_scratch(coll_sched *c);
/* Says goodbye: tells the others this process left after its last
 * collective, and waits for theirs.  1 when every process left after the
 * same one (the MPI objects can be freed together), else 0. */
int coll_close(coll_sched *c);
/* Frees what coll_open made (the communicators when together). */
void coll_free(coll_sched *c, int together);
/* The first failure's message, once broken. */
const char *coll_failure(const coll_sched *c);
/* Fails the collective in progress: why = the message, and the schedule
 * is broken from now on.  Returns -1. */
int coll_fail(coll_sched *c, char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "collective 13 (gradient allreduce, step 4)" into b; returns b. */
const char *coll_where_str(const coll_where *w, char *b, size_t n);

#endif
