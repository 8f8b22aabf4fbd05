/* dist_coll.c - the collective schedule and its waits (dist_coll.h). */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist_coll.h"
#include "base/fatal.h"

#define DEFAULT_TIMEOUT 600.0
#define MAX_TIMEOUT     1e9
#define ANNOUNCE_AFTER  0.1 /* seconds of waiting before telling the others */
#define YIELD_AFTER                                                                                \
    20e-6 /* then the core is given up between looks: a process the                                \
             wait is for may need it (more processes than cores) */

#define PREFIX "distributed: "

enum { MSG_WAIT = 1, MSG_BYE = 2, MSG_TAG = 23, MSG_LEN = 5 };

static const char *const kind_names[] = {"opening the session",
                                         "gr_session_dist_agree",
                                         "gradient allreduce",
                                         "averaging (sync_every)",
                                         "averaging before an evaluation",
                                         "evaluation total",
                                         "checkpoint save",
                                         "checkpoint restore",
                                         "publishing a restore"};
_Static_assert(sizeof kind_names / sizeof *kind_names == COLL_KINDS, "a name for every kind");

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* "collective 13 (gradient allreduce, step 4)" */
const char *coll_where_str(const coll_where *w, char *b, size_t n)
{
    const char *kind = w->kind >= 0 && w->kind < COLL_KINDS ? kind_names[w->kind] : "?";
    if (w->in_step)
        snprintf(b, n, "collective %lld (%s, step %lld)", (long long)w->seq, kind,
                 (long long)w->step + 1);
    else if (w->step)
        snprintf(b, n, "collective %lld (%s, after step %lld)", (long long)w->seq, kind,
                 (long long)w->step);
    else
        snprintf(b, n, "collective %lld (%s)", (long long)w->seq, kind);
    return b;
}

int coll_fail(coll_sched *c, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    if (!c->broken) snprintf(c->why, sizeof c->why, "%s", why);
    c->broken = 1;
    return -1;
}

int coll_timeout_env(double *seconds, char *why, size_t len)
{
    const char *s = getenv("GR_DIST_TIMEOUT");
    char *end = NULL;
    *seconds = DEFAULT_TIMEOUT;
    if (!s) return 0;
    double v = strtod(s, &end);
    if (*s && !*end && v > 0 && v <= MAX_TIMEOUT) {
        *seconds = v;
        return 0;
    }
    snprintf(why, len,
             "distributed: GR_DIST_TIMEOUT=%s: not a number of seconds above 0 and "
             "at most 1e9",
             s);
    return -1;
}

/* MPI may fill the handle before the duplicate is ready: *out is set after. */
static int open_comm(coll_sched *c, MPI_Comm from, MPI_Comm *out, char *why, size_t len)
{
    MPI_Request rq;
    MPI_Comm_idup(from, &c->opening, &rq);
    if (coll_wait(c, &rq, why, len)) return -1;
    *out = c->opening;
    return 0;
}

int coll_open(coll_sched *c, MPI_Comm user, double timeout, char *why, size_t len)
{
    c->comm = c->fast = c->ctl = MPI_COMM_NULL;
    c->timeout = timeout;
    c->now = (coll_where){.kind = COLL_OPEN};
    MPI_Comm_rank(user, &c->rank);
    MPI_Comm_size(user, &c->size);
    size_t p = (size_t)c->size;
    c->peers = base_xcalloc(p, sizeof *c->peers);
    for (size_t r = 0; r < p; r++) c->peers[r].bye_seq = -1;
    c->bufs = base_xcalloc(p + 2, sizeof *c->bufs);
    c->out = base_xcalloc(p, sizeof *c->out);
    c->sends = base_xcalloc(p, sizeof *c->sends);
    for (size_t r = 0; r < p; r++) c->sends[r] = MPI_REQUEST_NULL;
    if (open_comm(c, user, &c->comm, why, len) || open_comm(c, c->comm, &c->fast, why, len))
        return -1;
    return open_comm(c, c->comm, &c->ctl, why, len);
}

void coll_set_step(coll_sched *c, uint64_t done, int in_step)
{
    c->now.step = (int64_t)done;
    c->now.in_step = in_step;
}

int coll_enter(coll_sched *c, coll_kind kind, char *why, size_t len)
{
    if (c->broken)
        return coll_fail(c, why, len, "distributed: an earlier collective failed: %s",
                         c->why + (strncmp(c->why, PREFIX, strlen(PREFIX)) ? 0 : strlen(PREFIX)));
    c->now.seq++;
    c->now.kind = kind;
    return 0;
}

/* Every process's header is rank 0's, else the same failure everywhere. */
static int headers_agree(coll_sched *c, char *why, size_t len)
{
    const coll_where *all = (const coll_where *)c->bufs;
    char a[96], b[96];
    for (int r = 1; r < c->size; r++)
        if (all[r].seq != all[0].seq || all[r].kind != all[0].kind)
            return coll_fail(c, why, len,
                             "distributed: rank %d is in its %s while rank 0 is in its %s: the "
                             "processes left their common schedule",
                             r, coll_where_str(&all[r], a, sizeof a),
                             coll_where_str(&all[0], b, sizeof b));
    return 0;
}

int coll_begin(coll_sched *c, coll_kind kind, char *why, size_t len)
{
    if (coll_enter(c, kind, why, len) || coll_poll(c, 0, -1, why, len)) return -1;
    int64_t *mine = c->bufs[c->size];
    memcpy(mine, &c->now, sizeof c->now);
    MPI_Request rq;
    MPI_Iallgather(mine, 4, MPI_INT64_T, c->bufs, 4, MPI_INT64_T, c->comm, &rq);
    return coll_wait(c, &rq, why, len) ? -1 : headers_agree(c, why, len);
}

int coll_wait(coll_sched *c, MPI_Request *rq, char *why, size_t len)
{
    double t0 = now();
    for (;;) {
        int done = 0;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return 0;
        if (coll_poll(c, now() - t0, -1, why, len)) {
            c->abandoned = 1; /* *rq stays pending: MPI may still write its buffers */
            return -1;
        }
    }
}

static void take_message(coll_sched *c, int from, const int64_t *m)
{
    coll_peer *p = &c->peers[from];
    if (m[0] == MSG_BYE) {
        p->bye_seq = m[1];
        p->bye_step = m[3];
    } else
        p->wait = (coll_where){m[1], m[2], m[3], m[4]};
}

static void drain(coll_sched *c)
{
    for (;;) {
        int flag = 0;
        MPI_Status ms;
        MPI_Iprobe(MPI_ANY_SOURCE, MSG_TAG, c->ctl, &flag, &ms);
        if (!flag) return;
        int64_t m[MSG_LEN];
        MPI_Recv(m, MSG_LEN, MPI_INT64_T, ms.MPI_SOURCE, MSG_TAG, c->ctl, MPI_STATUS_IGNORE);
        take_message(c, ms.MPI_SOURCE, m);
    }
}

/* Sends {type, where} to every other process; a peer whose last message is
 * still on its way is skipped (a wait's word is a hint), unless must. */
static void tell_all(coll_sched *c, int64_t type, const coll_where *w, int must)
{
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        int done = 1;
        if (must)
            MPI_Wait(&c->sends[r], MPI_STATUS_IGNORE); /* eager: long since sent */
        else
            MPI_Test(&c->sends[r], &done, MPI_STATUS_IGNORE);
        if (!done) continue;
        int64_t *m = c->out[r];
        m[0] = type, m[1] = w->seq, m[2] = w->kind, m[3] = w->step, m[4] = w->in_step;
        MPI_Isend(m, MSG_LEN, MPI_INT64_T, r, MSG_TAG, c->ctl, &c->sends[r]);
    }
}

/* A process known to be elsewhere: it left before this collective, or
 * waits in another one (one ahead is not yet known: this process may not
 * have seen its own collective complete). */
static int check_peers(coll_sched *c, char *why, size_t len)
{
    char a[96], b[96];
    for (int r = 0; r < c->size; r++) {
        const coll_peer *p = &c->peers[r];
        if (r == c->rank) continue;
        if (p->bye_seq >= 0 && p->bye_seq < c->now.seq)
            return coll_fail(
                c, why, len,
                "distributed: rank %d left (gr_session_free) after its collective %lld, "
                "at step %lld, while rank %d waits in its %s",
                r, (long long)p->bye_seq, (long long)p->bye_step, c->rank,
                coll_where_str(&c->now, a, sizeof a));
        if (p->wait.seq > c->now.seq + 1 ||
            (p->wait.seq == c->now.seq && p->wait.kind != c->now.kind))
            return coll_fail(c, why, len,
                             "distributed: rank %d waits in its %s while rank %d waits in its %s",
                             r, coll_where_str(&p->wait, a, sizeof a), c->rank,
                             coll_where_str(&c->now, b, sizeof b));
    }
    return 0;
}

/* The first process not known to wait in this collective, or -1. */
static int absent(const coll_sched *c)
{
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && c->peers[r].wait.seq < c->now.seq) return r;
    return -1;
}

int coll_poll(coll_sched *c, double waited, int missing, char *why, size_t len)
{
    if (c->ctl != MPI_COMM_NULL) {
        drain(c);
        if (check_peers(c, why, len)) return -1;
        if (waited > ANNOUNCE_AFTER && c->announced != c->now.seq) {
            tell_all(c, MSG_WAIT, &c->now, 0);
            c->announced = c->now.seq;
        }
    }
    if (waited > c->timeout) {
        char a[96], who[48] = "the other processes";
        if (missing < 0 && c->ctl != MPI_COMM_NULL) missing = absent(c);
        if (missing >= 0) snprintf(who, sizeof who, "rank %d", missing);
        return coll_fail(
            c, why, len,
            "distributed: rank %d waited %.3g s in its %s for %s, which stopped calling "
            "(GR_DIST_TIMEOUT)",
            c->rank, waited, coll_where_str(&c->now, a, sizeof a), who);
    }
    if (waited > YIELD_AFTER) sched_yield();
    return 0;
}

/* The rank whose goodbye ends a watch: who, or (who < 0) the last of the
 * others to have left once fewer than need are still there; -1 none. */
static int gone(const coll_sched *c, int who, int need)
{
    if (who >= 0) return c->peers[who].bye_seq >= 0 ? who : -1;
    int here = 0, last = -1;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        if (c->peers[r].bye_seq >= 0)
            last = r;
        else
            here++;
    }
    return here < need ? last : -1;
}

int coll_watch(coll_sched *c, double waited, int who, int need, const char *what, char *why,
               size_t len)
{
    drain(c);
    int r = gone(c, who, need);
    if (r >= 0)
        return coll_fail(c, why, len,
                         "distributed: rank %d left (gr_session_free) at step %lld while rank %d "
                         "waits for %s",
                         r, (long long)c->peers[r].bye_step, c->rank, what);
    if (waited > c->timeout)
        return coll_fail(c, why, len,
                         "distributed: rank %d waited %.3g s for %s, which stopped coming "
                         "(GR_DIST_TIMEOUT)",
                         c->rank, waited, what);
    if (waited > YIELD_AFTER) sched_yield();
    return 0;
}

int coll_fast_check(coll_sched *c, size_t n, char *why, size_t len)
{
    int64_t *v = coll_scratch(c), seq = c->now.seq;
    v[0] = (int64_t)n, v[1] = -(int64_t)n, v[2] = seq, v[3] = -seq;
    MPI_Request rq;
    MPI_Iallreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MAX, c->fast, &rq);
    if (coll_wait(c, &rq, why, len)) return -1;
    char a[96];
    if (v[0] != -v[1])
        return coll_fail(
            c, why, len,
            "distributed: the processes average different lengths (%lld to %lld floats) "
            "in their %s",
            (long long)-v[1], (long long)v[0], coll_where_str(&c->now, a, sizeof a));
    if (v[2] != -v[3])
        return coll_fail(
            c, why, len,
            "distributed: the processes are in different collectives (%lld to %lld) of "
            "kind %s",
            (long long)-v[3], (long long)v[2], kind_names[c->now.kind]);
    return 0;
}

int64_t *coll_scratch(coll_sched *c)
{
    return c->bufs[c->size + 1];
}

int coll_bcast_words(coll_sched *c, int64_t *words, int n, char *why, size_t len)
{
    int64_t *v = coll_scratch(c);
    MPI_Request rq;
    GR_ASSERT(n >= 1 && n <= 4);
    memcpy(v, words, sizeof *v * (size_t)n);
    MPI_Ibcast(v, n, MPI_INT64_T, 0, c->comm, &rq);
    if (coll_wait(c, &rq, why, len)) return -1;
    memcpy(words, v, sizeof *v * (size_t)n);
    return 0;
}

/* Every other process said goodbye, and every goodbye went out. */
static int all_gone(coll_sched *c)
{
    int sent = 0;
    MPI_Testall(c->size, c->sends, &sent, MPI_STATUSES_IGNORE);
    for (int r = 0; r < c->size && sent; r++)
        if (r != c->rank && c->peers[r].bye_seq < 0) return 0;
    return sent;
}

int coll_close(coll_sched *c)
{
    if (c->ctl == MPI_COMM_NULL) return 0;
    coll_where last = c->now;
    if (c->broken) last.seq--; /* the collective that failed did not complete */
    tell_all(c, MSG_BYE, &last, 1);
    if (c->broken) { /* the others may never say goodbye: no waiting */
        int sent = 0;
        MPI_Testall(c->size, c->sends, &sent, MPI_STATUSES_IGNORE);
        c->abandoned |= !sent;
        return 0;
    }
    for (double t0 = now(); !all_gone(c);) {
        drain(c);
        double waited = now() - t0;
        if (waited > c->timeout) {
            c->abandoned = 1;
            return 0;
        }
        if (waited > YIELD_AFTER) sched_yield();
    }
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && c->peers[r].bye_seq != last.seq) return 0;
    return 1;
}

void coll_free(coll_sched *c, int together)
{
    if (together) {
        MPI_Comm_free(&c->ctl);
        MPI_Comm_free(&c->fast);
        MPI_Comm_free(&c->comm);
    }
    free(c->peers);
    if (c->abandoned) return; /* pending requests may still write these */
    free(c->bufs);
    free(c->out);
    free(c->sends);
}

const char *coll_failure(const coll_sched *c)
{
    return c->why;
}
