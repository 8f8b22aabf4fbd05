/* dist_mpi.c - distributed training over MPI (dist.h).  Every collective
 * goes through dist_coll.c, which numbers it and never waits for ever. */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/ckpt/ckpt_io.h"
#include "dist.h"
#include "dist_coll.h"
#include "dist_shm.h"
#include "runtime/runtime.h"

struct rt_dist {
    kern_comm kc; /* first: the allreduce kernels hand it back */
    coll_sched sched;
    int rank, size;
    shm_reduce *shm; /* sync, every process on one node: the allreduce, else NULL */
    float *sum;      /* sync without shm: where apply_sgd_allreduce's sums land */
    gr_distributed mode;
    int sync_every;
    pthread_mutex_t mu; /* held from a train step's begin to its end, and around
                           every other sequence of MPI calls */
    int *shared;        /* indices of the trained variables (async, sync_every) */
    int n_shared;
    size_t *off, total; /* each one's place in the packed f32 vector, and its length */
    float *base, *cur;  /* async: the values a step started from; a packed staging copy */
    int use_win;        /* async without sync_every: rank 0's window holds the variables */
    MPI_Win win;
    float *win_mem;
    char *sharded; /* per data source: a train target reads it */
    uint64_t steps;
    double comm_secs;
};

#define WHY 192 /* a failure's message (kern_fault's size) */
/* A collective that failed: a process left or went elsewhere, a timeout.
 * (A difference that every process finds, such as another option, is
 * GR_ERR_ARG, and the schedule goes on.) */
#define COLL_ERR GR_ERR_IO

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
static void dist_lock(gr_session *s)
{
    rt_dist *d = rt_session_dist(s);
    pthread_mutex_lock(&d->mu);
    coll_set_step(&d->sched, gr_session_step(s), 0);
}

static void dist_unlock(gr_session *s)
{
    pthread_mutex_unlock(&rt_session_dist(s)->mu);
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

/* in[0..n)'s mean over the processes into out, or (step not NULL) var -= *step * mean. */
static int grad_allreduce(rt_dist *d, const float *in, float *out, size_t n, const float *step,
                          kern_fault *f)
{
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

static void pack_vars(gr_session *s, float *out)
{
    rt_dist *d = rt_session_dist(s);
    for (int k = 0; k < d->n_shared; k++) rt_var_read(s, d->shared[k], out + d->off[k]);
}

static void unpack_vars(gr_session *s, const float *in)
{
    rt_dist *d = rt_session_dist(s);
    for (int k = 0; k < d->n_shared; k++) rt_var_write(s, d->shared[k], in + d->off[k]);
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
static uint64_t graph_fingerprint(const gr_session *s)
{
    const ir_graph *g = rt_session_graph(s);
    uint64_t h = 14695981039346656037ull;
    int mode = (int)rt_session_program(s)->distributed;
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

static uint64_t vars_fingerprint(gr_session *s)
{
    uint64_t h = 14695981039346656037ull;
    const ir_graph *g = rt_session_graph(s);
    for (int i = 0; i < g->n_vars; i++) {
        size_t n = ir_nbytes(&g->vars[i].type);
        void *host = base_xmalloc(n + 1);
        rt_var_read(s, i, host);
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

static gr_code check_same(gr_session *s, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    char which[256], why[WHY];
    int n = differing_ranks(d, graph_fingerprint(s), which, sizeof which, why);
    if (n > 0)
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: rank %s compiled a different graph than rank 0 (another "
                       ".graph file, --set value or --devices, or another mode); every process "
                       "must run the same program\n",
                       which);
    if (n == 0) n = differing_ranks(d, vars_fingerprint(s), which, sizeof which, why);
    if (n > 0)
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: rank %s initialised its variables differently from rank 0\n",
                       which);
    return n < 0 ? rt_fail(st, COLL_ERR, "%s\n", why) : GR_OK;
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
        rt_ok(st);
        return GR_OK;
    }
    const char *w = all + at[first], *v = w + strlen(w) + 1;
    char extra[48] = "";
    if (more) snprintf(extra, sizeof extra, " (and %d more rank%s)", more, more > 1 ? "s" : "");
    if (strcmp(w, w0) != 0)
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: rank %d compares %s while rank 0 compares %s%s: every "
                       "process must call gr_session_dist_agree in the same order\n",
                       first, w, w0, extra);
    return rt_fail(st, GR_ERR_ARG,
                   "distributed: rank %d: %s %s differs from rank 0's %s %s%s; every process "
                   "must run the same schedule\n",
                   first, w, v, w0, v0, extra);
}

gr_code dist_agree(gr_session *s, const char *what, const char *value, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    size_t lw = strlen(what), lv = strlen(value);
    if (lw + lv + 2 > AGREE_MAX)
        return rt_fail(st, GR_ERR_ARG, "gr_session_dist_agree: %.40s: over %d bytes\n", what,
                       AGREE_MAX);
    char text[AGREE_MAX], why[WHY];
    memcpy(text, what, lw + 1);
    memcpy(text + lw + 1, value, lv + 1);
    int *at = NULL;
    char *all = NULL;
    dist_lock(s);
    int rc = coll_begin(&d->sched, COLL_AGREE, why, sizeof why);
    if (rc == 0) all = gather_texts(d, text, (int)(lw + lv + 2), &at);
    dist_unlock(s);
    if (rc != 0) return rt_fail(st, COLL_ERR, "%s\n", why);
    gr_code c = compare_texts(d, all, at, st);
    free(all);
    free(at);
    return c;
}

/* What the sessions' own options must agree on, named as the CLI's flags. */
static gr_code agree_options(gr_session *s, gr_status *st)
{
    static const char *const modes[] = {"none", "sync", "async"};
    const gr_session_options *o = rt_session_options(s);
    char seed[24], every[16];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(every, sizeof every, "%d", o->sync_every);
    const char *pairs[][2] = {{"--distributed", modes[rt_session_program(s)->distributed]},
                              {"--seed", seed},
                              {"--sync-every", every},
                              {"--locking", o->locking ? "on" : "off"},
                              {"--check-numerics", o->check_numerics ? "on" : "off"}};
    gr_code c = GR_OK;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs && c == GR_OK; i++)
        c = dist_agree(s, pairs[i][0], pairs[i][1], st);
    return c;
}

/* ---- async: rank 0's window ---- */

static void window_open(gr_session *s)
{
    rt_dist *d = rt_session_dist(s);
    MPI_Aint bytes = d->rank == 0 ? (MPI_Aint)(d->total * sizeof(float)) : 0;
    MPI_Win_allocate(bytes, sizeof(float), MPI_INFO_NULL, d->sched.comm, &d->win_mem, &d->win);
    d->use_win = 1;
}

/* Rank 0's variables become the shared ones (at the start, after a
 * restore); the header that follows is the barrier after which the others
 * read them. */
static gr_code window_fill(gr_session *s, coll_kind kind, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    char why[WHY];
    if (d->rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, d->win);
        pack_vars(s, d->win_mem);
        MPI_Win_unlock(0, d->win);
    }
    if (coll_begin(&d->sched, kind, why, sizeof why)) return rt_fail(st, COLL_ERR, "%s\n", why);
    return GR_OK;
}

/* Passive-target reads and updates of rank 0's window: not collectives. */
static void window_rma(rt_dist *d, float *buf, int get)
{
    double t = now();
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, d->win);
    for (size_t i = 0; i < d->total; i += CHUNK) {
        int k = (int)(d->total - i < CHUNK ? d->total - i : CHUNK);
        if (get)
            MPI_Get(buf + i, k, MPI_FLOAT, 0, (MPI_Aint)i, k, MPI_FLOAT, d->win);
        else
            MPI_Accumulate(buf + i, k, MPI_FLOAT, 0, (MPI_Aint)i, k, MPI_FLOAT, MPI_SUM, d->win);
    }
    MPI_Win_unlock(0, d->win);
    d->comm_secs += now() - t;
}

/* Local variables <- the shared ones (async). */
static void pull_shared(gr_session *s)
{
    rt_dist *d = rt_session_dist(s);
    window_rma(d, d->base, 1);
    unpack_vars(s, d->base);
}

/* sync_every: every process's variables become their mean (after the
 * collective's header). */
static void average_vars(gr_session *s)
{
    rt_dist *d = rt_session_dist(s);
    pack_vars(s, d->cur);
    double t = now();
    allreduce_sum(d->sched.comm, d->cur, d->cur, d->total);
    d->comm_secs += now() - t;
    float scale = 1.0f / (float)d->size;
    for (size_t i = 0; i < d->total; i++) d->cur[i] *= scale;
    unpack_vars(s, d->cur);
}

/* Before an evaluation or a save (async): the shared values, or the mean. */
static int refresh(gr_session *s, coll_kind kind, char *why)
{
    rt_dist *d = rt_session_dist(s);
    if (d->use_win) {
        pull_shared(s);
    } else if (d->mode == GR_DIST_ASYNC) {
        if (coll_begin(&d->sched, kind, why, WHY)) return -1;
        average_vars(s);
    }
    return 0;
}

/* ---- the interface ---- */

/* The mode's own means: the window, the one-node allreduce. */
static gr_code open_mode(gr_session *s, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    if (d->mode == GR_DIST_ASYNC && d->sync_every == 0) {
        window_open(s);
        return window_fill(s, COLL_OPEN, st);
    }
    if (d->mode != GR_DIST_SYNC) return GR_OK;
    const ir_graph *g = rt_session_graph(s);
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
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: MPI is not initialised (call MPI_Init_thread before "
                       "gr_session_new; the graphrun CLI does with --distributed)\n");
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED)
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: MPI was initialised below MPI_THREAD_SERIALIZED\n");
    return GR_OK;
}

gr_code dist_open(gr_session *s, rt_dist **slot, gr_status *st)
{
    double timeout = 0;
    char why[WHY];
    gr_code c = check_mpi(st);
    if (c != GR_OK) return c;
    if (coll_timeout_env(&timeout, why, sizeof why)) return rt_fail(st, GR_ERR_ARG, "%s\n", why);
    rt_dist *d = base_xcalloc(1, sizeof *d);
    d->kc.allreduce_mean = comm_allreduce_mean;
    d->kc.allreduce_sgd = comm_allreduce_sgd;
    const gr_session_options *o = rt_session_options(s);
    d->mode = rt_session_program(s)->distributed;
    d->sync_every = o->sync_every;
    pthread_mutex_init(&d->mu, NULL);
    *slot = d; /* what follows reaches it through the session */
    pick_shared(d, rt_session_graph(s));
    pick_sharded(d, rt_session_graph(s));
    MPI_Comm user = o->mpi_comm ? *(const MPI_Comm *)o->mpi_comm : MPI_COMM_WORLD;
    if (coll_open(&d->sched, user, timeout, why, sizeof why))
        c = rt_fail(st, COLL_ERR, "%s\n", why);
    d->rank = d->sched.rank;
    d->size = d->sched.size;
    if (c == GR_OK) c = agree_options(s, st);
    if (c == GR_OK) c = check_same(s, st);
    if (c == GR_OK) c = open_mode(s, st);
    if (c != GR_OK) {
        dist_close(d);
        *slot = NULL;
    }
    return c;
}

/* Together (every process left after the same collective), the MPI
 * objects are freed; otherwise the others may still be inside them, and
 * this process leaves them (the job is to end with MPI_Abort). */
void dist_close(rt_dist *d)
{
    if (!d) return;
    int together = coll_close(&d->sched);
    if (together && d->use_win) MPI_Win_free(&d->win);
    if (together)
        shm_reduce_close(d->shm);
    else
        shm_reduce_abandon(d->shm);
    coll_free(&d->sched, together);
    pthread_mutex_destroy(&d->mu);
    free(d->sum);
    free(d->shared);
    free(d->sharded);
    free(d->off);
    free(d->base);
    free(d->cur);
    if (!d->sched.abandoned) free(d); /* else a pending duplicate may write d->sched */
}

int dist_rank(const rt_dist *d)
{
    return d ? d->rank : 0;
}

int dist_size(const rt_dist *d)
{
    return d ? d->size : 1;
}

int dist_data_shards(const rt_dist *d, int di)
{
    return d && d->sharded[di] ? d->size : 1;
}

kern_comm *dist_kern_comm(rt_dist *d)
{
    return d ? &d->kc : NULL;
}

double dist_comm_seconds(const rt_dist *d)
{
    return d ? d->comm_secs : 0;
}

gr_code dist_step_begin(gr_session *s, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    dist_lock(s);
    coll_set_step(&d->sched, gr_session_step(s), 1);
    if (d->sched.broken) /* the lock stays taken: dist_step_end lets it go */
        return rt_fail(st, COLL_ERR, "distributed: an earlier collective failed: %s\n",
                       coll_failure(&d->sched));
    if (d->use_win) pull_shared(s);
    return GR_OK;
}

gr_code dist_step_end(gr_session *s, int ran, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    char why[WHY];
    gr_code c = GR_OK;
    coll_set_step(&d->sched, gr_session_step(s), 0);
    if (ran && d->use_win) {
        pack_vars(s, d->cur);
        for (size_t i = 0; i < d->total; i++) d->cur[i] -= d->base[i];
        window_rma(d, d->cur, 0);
    } else if (ran && d->mode == GR_DIST_ASYNC && ++d->steps % (uint64_t)d->sync_every == 0) {
        if (coll_begin(&d->sched, COLL_AVERAGE, why, sizeof why))
            c = rt_fail(st, COLL_ERR, "%s\n", why);
        else
            average_vars(s);
    }
    dist_unlock(s);
    return c;
}

gr_code dist_read_file(gr_session *s, const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    int64_t head[2] = {GR_OK, 0}; /* code, length */
    char why[WHY];
    *buf = NULL;
    dist_lock(s);
    int rc = coll_begin(&d->sched, COLL_RESTORE, why, sizeof why);
    if (rc == 0 && d->rank == 0) {
        head[0] = ckio_read(path, buf, len, st);
        head[1] = head[0] == GR_OK ? (int64_t)*len : 0;
    }
    if (rc == 0) rc = coll_bcast_words(&d->sched, head, 2, why, sizeof why);
    if (rc == 0 && head[0] == GR_OK && d->rank != 0) *buf = base_xmalloc((size_t)head[1] + 1);
    if (rc == 0 && head[0] == GR_OK) rc = bcast_bytes(d, *buf, (size_t)head[1], why);
    dist_unlock(s);
    if (rc != 0) {
        if (!d->sched.abandoned) free(*buf); /* else the broadcast may still write it */
        *buf = NULL;
        return rt_fail(st, COLL_ERR, "%s: %s\n", path, why);
    }
    *len = (size_t)head[1];
    if (head[0] == GR_OK || d->rank == 0) return (gr_code)head[0];
    return rt_fail(st, (gr_code)head[0], "%s: rank 0 could not read the checkpoint\n", path);
}

gr_code dist_restored(gr_session *s, gr_status *st)
{
    if (!rt_session_dist(s)->use_win) return GR_OK;
    dist_lock(s);
    gr_code c = window_fill(s, COLL_RESTORED, st);
    dist_unlock(s);
    return c;
}

gr_code dist_refresh(gr_session *s, gr_status *st)
{
    char why[WHY];
    dist_lock(s);
    int rc = refresh(s, COLL_REFRESH, why);
    dist_unlock(s);
    return rc == 0 ? GR_OK : rt_fail(st, COLL_ERR, "%s\n", why);
}

gr_code dist_save(gr_session *s, const char *path,
                  gr_code (*save)(gr_session *s, const char *path, gr_status *st), gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    int64_t code = GR_OK;
    char why[WHY];
    dist_lock(s);
    int rc = coll_begin(&d->sched, COLL_SAVE, why, sizeof why);
    if (rc == 0 && d->use_win) pull_shared(s);
    if (rc == 0 && !d->use_win && d->mode == GR_DIST_ASYNC) average_vars(s);
    if (rc == 0 && d->rank == 0) code = save(s, path, st);
    if (rc == 0) rc = coll_bcast_words(&d->sched, &code, 1, why, sizeof why);
    dist_unlock(s);
    if (rc != 0) return rt_fail(st, COLL_ERR, "%s: %s\n", path, why);
    if (code == GR_OK || d->rank == 0) return (gr_code)code;
    return rt_fail(st, (gr_code)code, "%s: rank 0 could not save the checkpoint\n", path);
}

gr_code dist_eval_total(gr_session *s, double *sum, int64_t *batches, gr_status *st)
{
    rt_dist *d = rt_session_dist(s);
    double v[2] = {*sum, (double)*batches};
    char why[WHY];
    dist_lock(s);
    int rc = coll_begin(&d->sched, COLL_EVAL, why, sizeof why);
    if (rc == 0) MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, d->sched.comm);
    dist_unlock(s);
    if (rc != 0) return rt_fail(st, COLL_ERR, "%s\n", why);
    *sum = v[0];
    *batches = (int64_t)v[1];
    return GR_OK;
}
