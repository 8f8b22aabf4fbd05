/* dist_mpi.c - distributed training over MPI (dist.h), the heart of
 * libgraphrun-mpi.so: what it knows of its session comes in the dist_host
 * it is opened with (dist_module.h), and its one exported function,
 * grmod_mpi_entry, returns the vtable at the end.  Every collective goes
 * through dist_coll.c, which numbers it and never waits for ever. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fatal.h"
#include "dist_backup.h"
#include "dist_coll.h"
#include "dist_module.h"
#include "dist_shm.h"

struct rt_dist {
    kern_comm kc; /* first: the allreduce kernels hand it back */
    dist_host h;  /* the session */
    coll_sched sched;
    int rank, size;
    shm_reduce *shm; /* sync, every process on one node: the allreduce, else NULL */
    float *sum;      /* sync without shm: where apply_sgd_allreduce's sums land */
    bk_window *bk;   /* sync with backup workers (dist_backup.h), else NULL */
    uint8_t *state;  /* backup workers: every variable, packed (rank 0's, taken) */
    size_t state_bytes;
    uint64_t began; /* backup workers: the step this process's step started from */
    gr_distributed mode;
    int sync_every, backup;
    pthread_mutex_t mu; /* held from a train step's begin to its end, and around
                           every other sequence of MPI calls */
    int *shared;        /* indices of the trained variables (async, sync_every) */
    int n_shared;
    size_t *off, total; /* each one's place in the packed f32 vector, and its length */
    float *base, *cur;  /* async: the values a step started from; a packed staging copy */
    int use_win;        /* async without sync_every: rank 0's window holds the variables */
    MPI_Win win;
    uint8_t *win_mem; /* rank 0's: the words below, then the shared floats */
    int64_t seen;     /* async: the window's version the step's values were read at */
    int64_t *steps;   /* --max-staleness: every rank's steps done, as last read */
    int bounded, max_staleness, stale_lr;
    char *sharded; /* per data source: a train target reads it */
    uint64_t done; /* sync_every: steps since the session began */
    double comm_secs;
};

#define WHY 192 /* a failure's message (kern_fault's size) */
/* A collective that failed: a process left or went elsewhere, a timeout.
 * (A difference that every process finds, such as another option, is
 * GR_ERR_ARG, and the schedule goes on.) */
#define COLL_ERR GR_ERR_IO

/* The core's calls (core_calls.h), handed to grmod_mpi_entry. */
static const core_calls *core;

/* rt_fail, through the core: st gets the message, the caller code. */
static gr_code dm_fail(gr_status *st, gr_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gr_code dm_fail(gr_status *st, gr_code code, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    va_end(ap);
    code = core->fail(st, code, "%s", msg ? msg : "distributed: out of memory\n");
    free(msg);
    return code;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Takes the session's MPI lock; the collectives that follow belong to the
 * step the session has reached. */
static void dist_lock(rt_dist *d)
{
    pthread_mutex_lock(&d->mu);
    coll_set_step(&d->sched, d->h.step(d->h.ctx), 0);
}

static void dist_unlock(rt_dist *d)
{
    pthread_mutex_unlock(&d->mu);
}

/* ---- counts over INT_MAX go in pieces ---- */

#define CHUNK ((size_t)1 << 30)

/* Blocking: only where every process is known to be in the same
 * collective (after its header, or its length check). */
static void allreduce_sum(MPI_Comm comm, const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i += CHUNK) {
        int k = (int)(n - i < CHUNK ? n - i : CHUNK);
        MPI_Allreduce(in == out ? MPI_IN_PLACE : in + i, out + i, k, MPI_FLOAT, MPI_SUM, comm);
    }
}

/* Rank 0's buf to every process; rank 0 may still be reading it, so the
 * others wait through coll_wait. */
static int bcast_bytes(rt_dist *d, uint8_t *buf, size_t n, char *why)
{
    for (size_t i = 0; i < n; i += CHUNK) {
        int k = (int)(n - i < CHUNK ? n - i : CHUNK);
        MPI_Request rq;
        MPI_Ibcast(buf + i, k, MPI_BYTE, 0, d->sched.comm, &rq);
        if (coll_wait(&d->sched, &rq, why, WHY)) return -1;
    }
    return 0;
}

/* ---- the gradient allreduce (kern_comm) ---- */

typedef struct grad_wait {
    shm_wait w; /* first */
    rt_dist *d;
    kern_fault *f;
} grad_wait;

static int grad_poll(shm_wait *w, int missing, double waited)
{
    grad_wait *g = (grad_wait *)w;
    if (waited >= 1e-3)
        return coll_poll(&g->d->sched, waited, missing, g->f->msg, sizeof g->f->msg);
    /* the usual wait, no MPI call; past a few microseconds the process
       waited for may need this core (more processes than cores) */
    if (waited > 20e-6) sched_yield();
    return 0;
}

/* The shm call's result: 0, or -1 with why in f. */
static int shm_result(rt_dist *d, int rc, const shm_wait *w, size_t n, kern_fault *f)
{
    char a[96];
    if (rc == SHM_MISMATCH)
        coll_fail(&d->sched, f->msg, sizeof f->msg,
                  "distributed: rank %d averages %llu floats in its collective %llu while rank %d "
                  "averages %zu in its %s",
                  w->odd_rank, (unsigned long long)w->odd_n, (unsigned long long)w->odd_seq,
                  d->rank, n, coll_where_str(&d->sched.now, a, sizeof a));
    return rc == SHM_OK ? 0 : -1;
}

/* ---- backup workers (dist_backup.h) ---- */

typedef struct backup_wait {
    bk_wait w; /* first */
    rt_dist *d;
    char *why;
    size_t len;
} backup_wait;

/* What a backup wait is for, into b. */
static const char *backup_what(const rt_dist *d, int missing, char *b, size_t n)
{
    unsigned long long step = (unsigned long long)d->h.step(d->h.ctx);
    if (d->rank != 0)
        snprintf(b, n, "rank 0's variables after a step past %llu (--backup %d)",
                 (unsigned long long)d->began, d->backup);
    else if (missing >= 0)
        snprintf(b, n, "rank %d's gradient for step %llu (--backup %d)", missing, step + 1,
                 d->backup);
    else
        snprintf(b, n, "the gradients of %d of the other %d ranks for step %llu (--backup %d)",
                 d->size - d->backup - 1, d->size - 1, step + 1, d->backup);
    return b;
}

static int backup_poll(bk_wait *w, int missing, double waited)
{
    backup_wait *b = (backup_wait *)w;
    char what[128];
    if (waited >= 1e-3)
        return coll_watch(&b->d->sched, waited, missing, b->d->size - b->d->backup - 1,
                          backup_what(b->d, missing, what, sizeof what), b->why, b->len);
    if (waited > 20e-6) sched_yield(); /* as grad_poll */
    return 0;
}

static int backup_gradient(rt_dist *d, const float *in, float *out, size_t n, const float *step,
                           kern_fault *f)
{
    backup_wait b = {.w = {.poll = backup_poll}, .d = d, .why = f->msg, .len = sizeof f->msg};
    int odd_rank = -1;
    uint64_t odd_n = 0;
    char a[128];
    if (d->sched.broken)
        return coll_fail(&d->sched, f->msg, sizeof f->msg,
                         "distributed: an earlier collective failed: %s", coll_failure(&d->sched));
    if (bk_gradient(d->bk, d->h.step(d->h.ctx), in, out, n, step, &b.w, &odd_rank, &odd_n) == 0)
        return 0;
    if (odd_rank >= 0)
        coll_fail(
            &d->sched, f->msg, sizeof f->msg,
            "distributed: rank %d averages %llu floats while rank 0 averages %zu, waiting for %s",
            odd_rank, (unsigned long long)odd_n, n, backup_what(d, odd_rank, a, sizeof a));
    return -1;
}

/* Every variable, optimizer slots included, into buf (or from it: in). */
static void state_copy(rt_dist *d, uint8_t *buf, int in)
{
    size_t at = 0;
    for (int i = 0; i < d->h.g->n_vars; i++) {
        if (in)
            d->h.var_write(d->h.ctx, i, buf + at);
        else
            d->h.var_read(d->h.ctx, i, buf + at);
        at += ir_nbytes(&d->h.g->vars[i].type);
    }
}

/* Rank 0: its variables become the newest state, of its step. */
static void publish_state(rt_dist *d)
{
    uint64_t step = d->h.step(d->h.ctx);
    state_copy(d, bk_state_buffer(d->bk, step), 0);
    bk_publish(d->bk, step);
}

/* After a step: rank 0 publishes its variables; the others take the
 * newest ones, of a step after the one they started from, and its step. */
static int backup_step_end(rt_dist *d, char *why)
{
    uint64_t step = 0;
    double t = now();
    if (d->rank == 0) {
        publish_state(d);
        return 0;
    }
    backup_wait b = {.w = {.poll = backup_poll}, .d = d, .why = why, .len = WHY};
    if (bk_take(d->bk, d->began, d->state, &step, &b.w)) return -1;
    d->comm_secs += now() - t;
    state_copy(d, d->state, 1);
    d->h.set_step(d->h.ctx, step);
    coll_set_step(&d->sched, step, 0); /* what a goodbye or a wait tells */
    return 0;
}

/* in[0..n)'s mean over the processes into out, or (step not NULL) var -= *step * mean. */
static int grad_allreduce(rt_dist *d, const float *in, float *out, size_t n, const float *step,
                          kern_fault *f)
{
    if (d->bk) return backup_gradient(d, in, out, n, step, f);
    if (coll_enter(&d->sched, COLL_GRADIENT, f->msg, sizeof f->msg)) return -1;
    if (d->shm) {
        grad_wait g = {.w = {.poll = grad_poll, .seq = (uint64_t)d->sched.now.seq}, .d = d, .f = f};
        int rc = step ? shm_reduce_sgd(d->shm, in, out, n, *step, &g.w)
                      : shm_reduce_mean(d->shm, in, out, n, &g.w);
        return shm_result(d, rc, &g.w, n, f);
    }
    if (coll_fast_check(&d->sched, n, f->msg, sizeof f->msg)) return -1;
    float scale = 1.0f / (float)d->size;
    if (!step) {
        allreduce_sum(d->sched.fast, in, out, n);
        for (size_t i = 0; i < n; i++) out[i] *= scale;
        return 0;
    }
    allreduce_sum(d->sched.fast, in, d->sum, n);
    for (size_t i = 0; i < n; i++) out[i] -= *step * (d->sum[i] * scale);
    return 0;
}

static int comm_allreduce_mean(kern_comm *kc, const float *in, float *out, size_t n, kern_fault *f)
{
    rt_dist *d = (rt_dist *)kc;
    double t = now();
    int rc = grad_allreduce(d, in, out, n, NULL, f);
    d->comm_secs += now() - t;
    return rc;
}

static int comm_allreduce_sgd(kern_comm *kc, const float *in, float *var, size_t n, float step,
                              kern_fault *f)
{
    rt_dist *d = (rt_dist *)kc;
    double t = now();
    int rc = grad_allreduce(d, in, var, n, &step, f);
    d->comm_secs += now() - t;
    return rc;
}

/* The most floats a node of op (allreduce, apply_sgd_allreduce) averages
 * (0: none). */
static size_t largest(const ir_graph *g, op_kind op)
{
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->dead || nd->op != op) continue;
        const ir_type *t = op == OP_ALLREDUCE ? &nd->type : &g->nodes[nd->in[1]].type;
        if ((size_t)ir_numel(t) > n) n = (size_t)ir_numel(t);
    }
    return n;
}

/* ---- the shared variables, packed ---- */

static void pack_vars(rt_dist *d, float *out)
{
    for (int k = 0; k < d->n_shared; k++) d->h.var_read(d->h.ctx, d->shared[k], out + d->off[k]);
}

static void unpack_vars(rt_dist *d, const float *in)
{
    for (int k = 0; k < d->n_shared; k++) d->h.var_write(d->h.ctx, d->shared[k], in + d->off[k]);
}

static void pick_shared(rt_dist *d, const ir_graph *g)
{
    d->shared = base_xcalloc((size_t)g->n_vars + 1, sizeof *d->shared);
    d->off = base_xcalloc((size_t)g->n_vars + 1, sizeof *d->off);
    for (int i = 0; i < g->n_vars; i++) {
        const ir_var *v = &g->vars[i];
        if (!v->trainable || v->slot_of >= 0 || v->type.dtype != DT_F32) continue;
        d->off[d->n_shared] = d->total;
        d->shared[d->n_shared++] = i;
        d->total += (size_t)ir_numel(&v->type);
    }
    d->base = base_xcalloc(d->total + 1, sizeof *d->base);
    d->cur = base_xcalloc(d->total + 1, sizeof *d->cur);
}

/* The data sources a train target reads, whose batches the processes split
 * (data_spec.shards); a source only evaluations read is read whole. */
static void pick_sharded(rt_dist *d, const ir_graph *g)
{
    char *seen = base_xcalloc((size_t)g->n_nodes + 1, 1);
    int *stack = base_xmalloc(sizeof(int) * ((size_t)g->n_nodes + 1)), n = 0;
    d->sharded = base_xcalloc((size_t)g->n_data + 1, 1);
    for (int k = 0; k < g->n_names; k++)
        if (g->names[k].is_train && !seen[g->names[k].node])
            seen[stack[n++] = g->names[k].node] = 1;
    while (n) {
        const ir_node *nd = &g->nodes[stack[--n]];
        if (nd->op == OP_DATA) d->sharded[nd->data] = 1;
        for (int j = 0; j < nd->n_in + nd->n_ctrl; j++) {
            int x = j < nd->n_in ? nd->in[j] : nd->ctrl[j - nd->n_in];
            if (!seen[x]) seen[stack[n++] = x] = 1;
        }
    }
    free(seen);
    free(stack);
}

/* ---- fingerprints: the same graph and the same start everywhere ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What the graph computes, not where its text was: ops, edges, attributes,
 * types, devices, variables and data sources, and the mode. */
static uint64_t graph_fingerprint(const rt_dist *d)
{
    const ir_graph *g = d->h.g;
    uint64_t h = 14695981039346656037ull;
    int mode = (int)d->h.mode;
    h = fnv(h, &mode, sizeof mode);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        int head[4] = {i, (int)n->op, n->n_in, n->device};
        h = fnv(h, head, sizeof head);
        h = fnv(h, n->in, sizeof *n->in * (size_t)n->n_in);
        /* fields, not the struct: its padding is not part of the graph */
        h = fnv(h, n->attr.i, sizeof n->attr.i);
        h = fnv(h, n->attr.f, sizeof n->attr.f);
        h = fnv(h, &n->attr.n_list, sizeof n->attr.n_list);
        h = fnv(h, n->attr.list, sizeof n->attr.list);
        h = fnv(h, &n->type, sizeof n->type);
    }
    for (int i = 0; i < g->n_vars; i++) {
        h = fnv(h, g->vars[i].name, strlen(g->vars[i].name) + 1);
        h = fnv(h, &g->vars[i].type, sizeof g->vars[i].type);
    }
    for (int i = 0; i < g->n_data; i++) {
        int64_t b[2] = {g->data[i].n, g->data[i].batch};
        h = fnv(h, b, sizeof b);
    }
    return h;
}

static uint64_t vars_fingerprint(rt_dist *d)
{
    uint64_t h = 14695981039346656037ull;
    const ir_graph *g = d->h.g;
    for (int i = 0; i < g->n_vars; i++) {
        size_t n = ir_nbytes(&g->vars[i].type);
        void *host = base_xmalloc(n + 1);
        d->h.var_read(d->h.ctx, i, host);
        h = fnv(h, host, n);
        free(host);
    }
    return h;
}

/* Every process's value of h (after a header); the ranks that differ
 * from rank 0 into `which` (as text).  Returns how many differ, or -1 with
 * why. */
static int differing_ranks(rt_dist *d, uint64_t h, char *which, size_t len, char *why)
{
    if (coll_begin(&d->sched, COLL_OPEN, why, WHY)) return -1;
    uint64_t *all = base_xcalloc((size_t)d->size, sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->sched.comm);
    int n = 0;
    size_t used = 0;
    which[0] = 0;
    for (int r = 1; r < d->size; r++) {
        if (all[r] == all[0]) continue;
        if (used < len)
            used += (size_t)snprintf(which + used, len - used, "%s%d", n ? ", " : "", r);
        n++;
    }
    free(all);
    return n;
}

static gr_code check_same(rt_dist *d, gr_status *st)
{
    char which[256], why[WHY];
    int n = differing_ranks(d, graph_fingerprint(d), which, sizeof which, why);
    if (n > 0)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: rank %s compiled a different graph than rank 0 (another "
                       ".graph file, --set value or --devices, or another mode); every process "
                       "must run the same program\n",
                       which);
    if (n == 0) n = differing_ranks(d, vars_fingerprint(d), which, sizeof which, why);
    if (n > 0)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: rank %s initialised its variables differently from rank 0\n",
                       which);
    return n < 0 ? dm_fail(st, COLL_ERR, "%s\n", why) : GR_OK;
}

/* ---- gr_session_dist_agree: one text, compared ---- */

#define AGREE_MAX 4096

/* Every process's text (what, NUL, value, NUL) into one buffer, rank r's
 * at (*at)[r].  Blocking: after the header. */
static char *gather_texts(rt_dist *d, const char *text, int len, int **at)
{
    int *lens = base_xcalloc((size_t)d->size, sizeof *lens);
    *at = base_xcalloc((size_t)d->size, sizeof **at);
    MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, d->sched.comm);
    int total = 0;
    for (int r = 0; r < d->size; r++) (*at)[r] = total, total += lens[r];
    char *all = base_xmalloc((size_t)total + 1);
    MPI_Allgatherv(text, len, MPI_CHAR, all, lens, *at, MPI_CHAR, d->sched.comm);
    free(lens);
    return all;
}

static int same_text(const char *a, const char *b)
{
    return strcmp(a, b) == 0 && strcmp(a + strlen(a) + 1, b + strlen(b) + 1) == 0;
}

/* The first process whose text is not rank 0's fails everywhere, named. */
static gr_code compare_texts(const rt_dist *d, const char *all, const int *at, gr_status *st)
{
    const char *w0 = all + at[0], *v0 = w0 + strlen(w0) + 1;
    int first = -1, more = 0;
    for (int r = 1; r < d->size; r++) {
        if (same_text(all + at[r], w0)) continue;
        if (first < 0)
            first = r;
        else
            more++;
    }
    if (first < 0) {
        core->ok(st);
        return GR_OK;
    }
    const char *w = all + at[first], *v = w + strlen(w) + 1;
    char extra[48] = "";
    if (more) snprintf(extra, sizeof extra, " (and %d more rank%s)", more, more > 1 ? "s" : "");
    if (strcmp(w, w0) != 0)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: rank %d compares %s while rank 0 compares %s%s: every "
                       "process must call gr_session_dist_agree in the same order\n",
                       first, w, w0, extra);
    return dm_fail(st, GR_ERR_ARG,
                   "distributed: rank %d: %s %s differs from rank 0's %s %s%s; every process "
                   "must run the same schedule\n",
                   first, w, v, w0, v0, extra);
}

static gr_code mpi_agree(rt_dist *d, const char *what, const char *value, gr_status *st)
{
    size_t lw = strlen(what), lv = strlen(value);
    if (lw + lv + 2 > AGREE_MAX)
        return dm_fail(st, GR_ERR_ARG, "gr_session_dist_agree: %.40s: over %d bytes\n", what,
                       AGREE_MAX);
    char text[AGREE_MAX], why[WHY];
    memcpy(text, what, lw + 1);
    memcpy(text + lw + 1, value, lv + 1);
    int *at = NULL;
    char *all = NULL;
    dist_lock(d);
    int rc = coll_begin(&d->sched, COLL_AGREE, why, sizeof why);
    if (rc == 0) all = gather_texts(d, text, (int)(lw + lv + 2), &at);
    dist_unlock(d);
    if (rc != 0) return dm_fail(st, COLL_ERR, "%s\n", why);
    gr_code c = compare_texts(d, all, at, st);
    free(all);
    free(at);
    return c;
}

/* What the sessions' own options must agree on, named as the CLI's flags. */
static gr_code agree_options(rt_dist *d, gr_status *st)
{
    static const char *const modes[] = {"none", "sync", "async"};
    const gr_session_options *o = d->h.opt;
    char seed[24], every[16], backup[16], bound[16] = "(none)";
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(every, sizeof every, "%d", o->sync_every);
    snprintf(backup, sizeof backup, "%d", o->backup);
    if (o->bounded) snprintf(bound, sizeof bound, "%d", o->max_staleness);
    const char *pairs[][2] = {{"--distributed", modes[d->h.mode]},
                              {"--seed", seed},
                              {"--sync-every", every},
                              {"--backup", backup},
                              {"--max-staleness", bound},
                              {"--stale-lr", o->stale_lr ? "on" : "off"},
                              {"--locking", o->locking ? "on" : "off"},
                              {"--check-numerics", o->check_numerics ? "on" : "off"}};
    gr_code c = GR_OK;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs && c == GR_OK; i++)
        c = mpi_agree(d, pairs[i][0], pairs[i][1], st);
    return c;
}

/* ---- async: rank 0's window ---- */

/* Its first words (int64): the updates applied so far (the version), their
 * staleness (gr_staleness's sum and count[], of variables: each update
 * counts once per shared variable), and each rank's steps done
 * (--max-staleness).  The shared floats follow. */
enum { W_VERSION, W_SUM, W_COUNT, W_STEPS = W_COUNT + GR_STALENESS_BUCKETS };

static MPI_Aint word_at(int w)
{
    return (MPI_Aint)w * (MPI_Aint)sizeof(int64_t);
}

static MPI_Aint floats_at(const rt_dist *d)
{
    return word_at(W_STEPS + d->size);
}

static void window_open(rt_dist *d)
{
    MPI_Aint bytes = d->rank == 0 ? floats_at(d) + (MPI_Aint)(d->total * sizeof(float)) : 0;
    MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, d->sched.comm, &d->win_mem, &d->win);
    d->steps = base_xcalloc((size_t)d->size, sizeof *d->steps);
    d->use_win = 1;
}

/* Rank 0's variables become the shared ones (at the start, after a
 * restore, when every rank is at rank 0's step); the header that follows
 * is the barrier after which the others read them. */
static gr_code window_fill(rt_dist *d, coll_kind kind, gr_status *st)
{
    char why[WHY];
    if (d->rank == 0) {
        int64_t *w = (int64_t *)(void *)d->win_mem;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, d->win);
        if (kind == COLL_OPEN) memset(w, 0, (size_t)word_at(W_STEPS));
        for (int r = 0; r < d->size; r++) w[W_STEPS + r] = (int64_t)d->h.step(d->h.ctx);
        pack_vars(d, (float *)(void *)(d->win_mem + floats_at(d)));
        MPI_Win_unlock(0, d->win);
    }
    if (coll_begin(&d->sched, kind, why, sizeof why)) return dm_fail(st, COLL_ERR, "%s\n", why);
    return GR_OK;
}

/* The shared floats read from (get) or added to rank 0's window, in a
 * passive-target epoch already open (not a collective). */
static void window_floats(rt_dist *d, float *buf, int get)
{
    for (size_t i = 0; i < d->total; i += CHUNK) {
        int k = (int)(d->total - i < CHUNK ? d->total - i : CHUNK);
        MPI_Aint at = floats_at(d) + (MPI_Aint)(i * sizeof(float));
        if (get)
            MPI_Get(buf + i, k, MPI_FLOAT, 0, at, k, MPI_FLOAT, d->win);
        else
            MPI_Accumulate(buf + i, k, MPI_FLOAT, 0, at, k, MPI_FLOAT, MPI_SUM, d->win);
    }
}

/* n words of the window from w on, read atomically (as others add to them). */
static void window_words(rt_dist *d, int w, int64_t *out, int n)
{
    MPI_Get_accumulate(NULL, 0, MPI_INT64_T, out, n, MPI_INT64_T, 0, word_at(w), n, MPI_INT64_T,
                       MPI_NO_OP, d->win);
}

/* Local variables <- the shared ones, and the version they are of (async). */
static void pull_shared(rt_dist *d)
{
    double t = now();
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, d->win);
    window_words(d, W_VERSION, &d->seen, 1);
    window_floats(d, d->base, 1);
    MPI_Win_unlock(0, d->win);
    d->comm_secs += now() - t;
    unpack_vars(d, d->base);
}

/* This step's update (after its window's fetch-and-add): its staleness,
 * one per shared variable, and this rank's steps done. */
static void count_update(rt_dist *d, uint64_t k, int64_t *words)
{
    words[0] = (int64_t)k * d->n_shared;
    words[1] = d->n_shared;
    words[2] = (int64_t)d->h.step(d->h.ctx);
    int bucket = k < GR_STALENESS_BUCKETS ? (int)k : GR_STALENESS_BUCKETS - 1;
    MPI_Accumulate(&words[0], 1, MPI_INT64_T, 0, word_at(W_SUM), 1, MPI_INT64_T, MPI_SUM, d->win);
    MPI_Accumulate(&words[1], 1, MPI_INT64_T, 0, word_at(W_COUNT + bucket), 1, MPI_INT64_T, MPI_SUM,
                   d->win);
    MPI_Accumulate(&words[2], 1, MPI_INT64_T, 0, word_at(W_STEPS + d->rank), 1, MPI_INT64_T,
                   MPI_REPLACE, d->win);
}

/* After a step (async): this rank's change, new values less the ones it
 * read, added to the shared ones as one update, whose staleness is the
 * updates other ranks added since that read (the version's advance);
 * --stale-lr scales the change by kern_stale_factor of it. */
static void push_change(rt_dist *d)
{
    int64_t one = 1, was = 0, words[3];
    pack_vars(d, d->cur);
    for (size_t i = 0; i < d->total; i++) d->cur[i] -= d->base[i];
    double t = now();
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, d->win);
    MPI_Fetch_and_op(&one, &was, MPI_INT64_T, 0, word_at(W_VERSION), MPI_SUM, d->win);
    MPI_Win_flush(0, d->win);
    uint64_t k = was > d->seen ? (uint64_t)(was - d->seen) : 0;
    float f = d->stale_lr ? kern_stale_factor(k) : 1.0f;
    for (size_t i = 0; f != 1.0f && i < d->total; i++) d->cur[i] *= f;
    window_floats(d, d->cur, 0);
    count_update(d, k, words);
    MPI_Win_unlock(0, d->win);
    d->comm_secs += now() - t;
}

/* sync_every: every process's variables become their mean (after the
 * collective's header). */
static void average_vars(rt_dist *d)
{
    pack_vars(d, d->cur);
    double t = now();
    allreduce_sum(d->sched.comm, d->cur, d->cur, d->total);
    d->comm_secs += now() - t;
    float scale = 1.0f / (float)d->size;
    for (size_t i = 0; i < d->total; i++) d->cur[i] *= scale;
    unpack_vars(d, d->cur);
}

/* Before an evaluation or a save (async): the shared values, or the mean. */
static int refresh(rt_dist *d, coll_kind kind, char *why)
{
    if (d->use_win) {
        pull_shared(d);
    } else if (d->mode == GR_DIST_ASYNC) {
        if (coll_begin(&d->sched, kind, why, WHY)) return -1;
        average_vars(d);
    }
    return 0;
}

/* ---- the interface ---- */

/* The gradient calls of a step at most (every allreduce node), and their floats. */
static int gradient_calls(const ir_graph *g, size_t *floats)
{
    int calls = 0;
    *floats = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->dead || (nd->op != OP_ALLREDUCE && nd->op != OP_APPLY_SGD_ALLREDUCE)) continue;
        calls++;
        *floats += (size_t)ir_numel(nd->op == OP_ALLREDUCE ? &nd->type : &g->nodes[nd->in[1]].type);
    }
    return calls;
}

/* Backup workers: the same error on every process, or the window. */
static gr_code open_backup(rt_dist *d, gr_status *st)
{
    if (d->backup >= d->size)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: --backup %d with %d processes: B must be below P (each "
                       "step averages P - B gradients)\n",
                       d->backup, d->size);
    size_t floats = 0;
    int calls = gradient_calls(d->h.g, &floats);
    for (int i = 0; i < d->h.g->n_vars; i++) d->state_bytes += ir_nbytes(&d->h.g->vars[i].type);
    d->bk = bk_open(d->sched.comm, d->backup, calls, floats, d->state_bytes);
    if (!d->bk)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: --backup needs every process on one machine (its "
                       "gradients and rank 0's variables go through shared memory)\n");
    d->state = base_xmalloc(d->state_bytes + 1);
    return GR_OK;
}

/* The mode's own means: the window, the one-node allreduce. */
static gr_code open_mode(rt_dist *d, gr_status *st)
{
    if (d->backup && d->mode != GR_DIST_SYNC)
        return dm_fail(st, GR_ERR_ARG, "distributed: backup workers need sync mode\n");
    if ((d->bounded || d->stale_lr) && (d->mode != GR_DIST_ASYNC || d->sync_every))
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: bounded staleness and the staleness-aware learning rate "
                       "need async mode without sync_every (sync ranks never apply a stale "
                       "update; periodic averaging waits for every rank every K steps)\n");
    if (d->mode == GR_DIST_ASYNC && d->sync_every == 0) {
        window_open(d);
        return window_fill(d, COLL_OPEN, st);
    }
    if (d->mode != GR_DIST_SYNC) return GR_OK;
    if (d->backup) return open_backup(d, st);
    const ir_graph *g = d->h.g;
    size_t max_n = max_size(largest(g, OP_ALLREDUCE), largest(g, OP_APPLY_SGD_ALLREDUCE));
    d->shm = shm_reduce_open(d->sched.comm, max_n, !getenv("GR_MPI_ALLREDUCE"));
    if (!d->shm) d->sum = base_xcalloc(largest(g, OP_APPLY_SGD_ALLREDUCE) + 1, sizeof *d->sum);
    return GR_OK;
}

static gr_code check_mpi(gr_status *st)
{
    int init = 0, level = 0;
    MPI_Initialized(&init);
    if (!init)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: MPI is not initialised (call MPI_Init_thread before "
                       "gr_session_new; the graphrun CLI does with --distributed)\n");
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED)
        return dm_fail(st, GR_ERR_ARG,
                       "distributed: MPI was initialised below MPI_THREAD_SERIALIZED\n");
    return GR_OK;
}

static void mpi_close(rt_dist *d);

static gr_code mpi_open(const dist_host *h, rt_dist **out, gr_status *st)
{
    double timeout = 0;
    char why[WHY];
    *out = NULL;
    gr_code c = check_mpi(st);
    if (c != GR_OK) return c;
    if (coll_timeout_env(&timeout, why, sizeof why)) return dm_fail(st, GR_ERR_ARG, "%s\n", why);
    rt_dist *d = base_xcalloc(1, sizeof *d);
    d->h = *h;
    d->kc.allreduce_mean = comm_allreduce_mean;
    d->kc.allreduce_sgd = comm_allreduce_sgd;
    const gr_session_options *o = h->opt;
    d->mode = h->mode;
    d->sync_every = o->sync_every;
    d->backup = o->backup;
    d->bounded = o->bounded;
    d->max_staleness = o->max_staleness;
    d->stale_lr = o->stale_lr;
    pthread_mutex_init(&d->mu, NULL);
    pick_shared(d, h->g);
    pick_sharded(d, h->g);
    MPI_Comm user = o->mpi_comm ? *(const MPI_Comm *)o->mpi_comm : MPI_COMM_WORLD;
    if (coll_open(&d->sched, user, timeout, why, sizeof why))
        c = dm_fail(st, COLL_ERR, "%s\n", why);
    d->rank = d->sched.rank;
    d->size = d->sched.size;
    if (c == GR_OK) c = agree_options(d, st);
    if (c == GR_OK) c = check_same(d, st);
    if (c == GR_OK) c = open_mode(d, st);
    if (c != GR_OK)
        mpi_close(d);
    else
        *out = d;
    return c;
}

/* Together (every process left after the same collective), the MPI
 * objects are freed; otherwise the others may still be inside them, and
 * this process leaves them (the job is to end with MPI_Abort). */
static void mpi_close(rt_dist *d)
{
    if (!d) return;
    int together = coll_close(&d->sched);
    if (together && d->use_win) MPI_Win_free(&d->win);
    if (together) {
        shm_reduce_close(d->shm);
        bk_close(d->bk);
    } else {
        shm_reduce_abandon(d->shm);
        bk_abandon(d->bk);
    }
    coll_free(&d->sched, together);
    pthread_mutex_destroy(&d->mu);
    free(d->sum);
    free(d->state);
    free(d->shared);
    free(d->sharded);
    free(d->off);
    free(d->base);
    free(d->cur);
    free(d->steps);
    if (!d->sched.abandoned) free(d); /* else a pending duplicate may write d->sched */
}

static int mpi_rank(const rt_dist *d)
{
    return d->rank;
}

static int mpi_size(const rt_dist *d)
{
    return d->size;
}

static int mpi_data_shards(const rt_dist *d, int di)
{
    return d->sharded[di] ? d->size : 1;
}

static kern_comm *mpi_kern_comm(rt_dist *d)
{
    return &d->kc;
}

static double mpi_comm_seconds(const rt_dist *d)
{
    return d->comm_secs;
}

/* The slowest rank still training but this one (-1: none), its steps done
 * into *at: a rank that left, or waits in a collective this one has not
 * reached (it takes no step before this one joins), stops counting. */
static int slowest(const rt_dist *d, int64_t *at)
{
    const coll_sched *c = &d->sched;
    int who = -1;
    for (int r = 0; r < d->size; r++) {
        const coll_peer *p = &c->peers[r];
        if (r == d->rank || p->bye_seq >= 0 || p->wait.seq > c->now.seq) continue;
        if (who < 0 || d->steps[r] < d->steps[who]) who = r;
    }
    if (who >= 0) *at = d->steps[who];
    return who;
}

/* --max-staleness S: waits while this rank is more than S steps ahead of
 * the slowest rank still training (which never waits itself), as long as
 * GR_DIST_TIMEOUT allows.  0, or -1 with why. */
static int bound_wait(rt_dist *d, char *why)
{
    int64_t mine = (int64_t)d->h.step(d->h.ctx), at = 0;
    char what[128];
    double t0 = now();
    for (;;) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, d->win);
        window_words(d, W_STEPS, d->steps, d->size);
        MPI_Win_unlock(0, d->win);
        int who = slowest(d, &at);
        double waited = now() - t0;
        if (who < 0 || mine - at <= d->max_staleness) {
            d->comm_secs += waited; /* not busy: --slow does not count it */
            return 0;
        }
        snprintf(what, sizeof what,
                 "rank %d, at step %lld, to start step %lld (--max-staleness %d)", who,
                 (long long)at, (long long)mine + 1, d->max_staleness);
        if (coll_watch(&d->sched, waited, -1, 0, what, why, WHY)) return -1;
        if (waited > 1e-3) nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    }
}

static int mpi_staleness(rt_dist *d, gr_staleness *out)
{
    int64_t w[W_STEPS];
    if (!d->use_win) return 0;
    dist_lock(d);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, d->win);
    window_words(d, 0, w, W_STEPS);
    MPI_Win_unlock(0, d->win);
    dist_unlock(d);
    memset(out, 0, sizeof *out);
    out->sum = (uint64_t)w[W_SUM];
    for (int k = 0; k < GR_STALENESS_BUCKETS; k++) {
        out->count[k] = (uint64_t)w[W_COUNT + k];
        out->updates += out->count[k];
    }
    return 1;
}

static gr_code mpi_step_begin(rt_dist *d, gr_status *st)
{
    dist_lock(d);
    coll_set_step(&d->sched, d->h.step(d->h.ctx), 1);
    if (d->sched.broken) /* the lock stays taken: mpi_step_end lets it go */
        return dm_fail(st, COLL_ERR, "distributed: an earlier collective failed: %s\n",
                       coll_failure(&d->sched));
    char why[WHY];
    if (d->bounded && bound_wait(d, why)) return dm_fail(st, COLL_ERR, "%s\n", why);
    if (d->use_win) pull_shared(d);
    if (d->bk) bk_step_begin(d->bk);
    d->began = d->h.step(d->h.ctx);
    return GR_OK;
}

static gr_code mpi_step_end(rt_dist *d, int ran, gr_status *st)
{
    char why[WHY];
    gr_code c = GR_OK;
    coll_set_step(&d->sched, d->h.step(d->h.ctx), 0);
    if (ran && d->bk && backup_step_end(d, why)) {
        c = dm_fail(st, COLL_ERR, "%s\n", why);
    } else if (ran && d->use_win) {
        push_change(d);
    } else if (ran && d->mode == GR_DIST_ASYNC && ++d->done % (uint64_t)d->sync_every == 0) {
        if (coll_begin(&d->sched, COLL_AVERAGE, why, sizeof why))
            c = dm_fail(st, COLL_ERR, "%s\n", why);
        else
            average_vars(d);
    }
    dist_unlock(d);
    return c;
}

static gr_code mpi_read_file(rt_dist *d, const char *path, dist_reader read, uint8_t **buf,
                             size_t *len, gr_status *st)
{
    int64_t head[2] = {GR_OK, 0}; /* code, length */
    char why[WHY];
    *buf = NULL;
    dist_lock(d);
    int rc = coll_begin(&d->sched, COLL_RESTORE, why, sizeof why);
    if (rc == 0 && d->rank == 0) {
        head[0] = read(path, buf, len, st);
        head[1] = head[0] == GR_OK ? (int64_t)*len : 0;
    }
    if (rc == 0) rc = coll_bcast_words(&d->sched, head, 2, why, sizeof why);
    if (rc == 0 && head[0] == GR_OK && d->rank != 0) *buf = base_xmalloc((size_t)head[1] + 1);
    if (rc == 0 && head[0] == GR_OK) rc = bcast_bytes(d, *buf, (size_t)head[1], why);
    dist_unlock(d);
    if (rc != 0) {
        if (!d->sched.abandoned) free(*buf); /* else the broadcast may still write it */
        *buf = NULL;
        return dm_fail(st, COLL_ERR, "%s: %s\n", path, why);
    }
    *len = (size_t)head[1];
    if (head[0] == GR_OK || d->rank == 0) return (gr_code)head[0];
    return dm_fail(st, (gr_code)head[0], "%s: rank 0 could not read the checkpoint\n", path);
}

/* Backup workers: rank 0's restored variables are the newest state
 * before any process takes one (the header is the barrier). */
static gr_code backup_restored(rt_dist *d, gr_status *st)
{
    char why[WHY];
    bk_forget(d->bk);
    if (d->rank == 0) publish_state(d);
    if (coll_begin(&d->sched, COLL_RESTORED, why, sizeof why))
        return dm_fail(st, COLL_ERR, "%s\n", why);
    return GR_OK;
}

static gr_code mpi_restored(rt_dist *d, gr_status *st)
{
    if (!d->use_win && !d->bk) return GR_OK;
    dist_lock(d);
    gr_code c = d->bk ? backup_restored(d, st) : window_fill(d, COLL_RESTORED, st);
    dist_unlock(d);
    return c;
}

static gr_code mpi_refresh(rt_dist *d, gr_status *st)
{
    char why[WHY];
    dist_lock(d);
    int rc = refresh(d, COLL_REFRESH, why);
    dist_unlock(d);
    return rc == 0 ? GR_OK : dm_fail(st, COLL_ERR, "%s\n", why);
}

static gr_code mpi_save(rt_dist *d, const char *path, dist_saver save, void *ctx, gr_status *st)
{
    int64_t code = GR_OK;
    char why[WHY];
    dist_lock(d);
    int rc = coll_begin(&d->sched, COLL_SAVE, why, sizeof why);
    if (rc == 0 && d->use_win) pull_shared(d);
    if (rc == 0 && !d->use_win && d->mode == GR_DIST_ASYNC) average_vars(d);
    if (rc == 0 && d->rank == 0) code = save(ctx, path, st);
    if (rc == 0) rc = coll_bcast_words(&d->sched, &code, 1, why, sizeof why);
    dist_unlock(d);
    if (rc != 0) return dm_fail(st, COLL_ERR, "%s: %s\n", path, why);
    if (code == GR_OK || d->rank == 0) return (gr_code)code;
    return dm_fail(st, (gr_code)code, "%s: rank 0 could not save the checkpoint\n", path);
}

static gr_code mpi_eval_total(rt_dist *d, double *sum, int64_t *batches, gr_status *st)
{
    double v[2] = {*sum, (double)*batches};
    char why[WHY];
    dist_lock(d);
    int rc = coll_begin(&d->sched, COLL_EVAL, why, sizeof why);
    if (rc == 0) MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, d->sched.comm);
    dist_unlock(d);
    if (rc != 0) return dm_fail(st, COLL_ERR, "%s\n", why);
    *sum = v[0];
    *batches = (int64_t)v[1];
    return GR_OK;
}

/* ---- MPI itself, for a program that leaves it to graphrun (gr_mpi_init) ---- */

static gr_code mpi_init(int *argc, char ***argv, int *rank, int *size, gr_status *st)
{
    int level = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level) != MPI_SUCCESS)
        return dm_fail(st, GR_ERR_ARG, "MPI_Init_thread failed\n");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (level >= MPI_THREAD_SERIALIZED) {
        core->ok(st);
        return GR_OK;
    }
    return dm_fail(st, GR_ERR_IO,
                   "rank %d: this MPI gives thread level %d, below "
                   "MPI_THREAD_SERIALIZED\n",
                   *rank, level);
}

/* A failed process ends the whole job at once: the others would otherwise
 * wait for it in their next collective. */
static void mpi_finalize(int abort_code)
{
    if (abort_code != 0) MPI_Abort(MPI_COMM_WORLD, abort_code);
    MPI_Finalize();
}

static const dist_module mpi_module = {
    .open = mpi_open,
    .close = mpi_close,
    .agree = mpi_agree,
    .rank = mpi_rank,
    .size = mpi_size,
    .data_shards = mpi_data_shards,
    .kern_comm = mpi_kern_comm,
    .comm_seconds = mpi_comm_seconds,
    .staleness = mpi_staleness,
    .step_begin = mpi_step_begin,
    .step_end = mpi_step_end,
    .refresh = mpi_refresh,
    .read_file = mpi_read_file,
    .restored = mpi_restored,
    .save = mpi_save,
    .eval_total = mpi_eval_total,
    .mpi_init = mpi_init,
    .mpi_finalize = mpi_finalize,
};

const dist_module *grmod_mpi_entry(const core_calls *c, int abi, const char *version)
{
    if (abi != CORE_CALLS_ABI || strcmp(version, GR_VERSION_STRING) != 0) return NULL;
    core_calls_bind(c);
    core = c;
    return &mpi_module;
}
