/* dist_mpi.c - distributed training over MPI (dist.h). */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt_io.h"
#include "dist.h"
#include "dist_shm.h"
#include "runtime.h"

struct rt_dist {
    kern_comm kc; /* first: the allreduce kernels hand it back */
    MPI_Comm comm;
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

/* ---- counts over INT_MAX go in pieces ---- */

#define CHUNK ((size_t)1 << 30)

static void allreduce_sum(rt_dist *d, const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i += CHUNK) {
        int k = (int)(n - i < CHUNK ? n - i : CHUNK);
        MPI_Allreduce(in == out ? MPI_IN_PLACE : in + i, out + i, k, MPI_FLOAT, MPI_SUM, d->comm);
    }
}

static void bcast_bytes(rt_dist *d, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i += CHUNK) {
        int k = (int)(n - i < CHUNK ? n - i : CHUNK);
        MPI_Bcast(buf + i, k, MPI_BYTE, 0, d->comm);
    }
}

static int comm_allreduce_mean(kern_comm *kc, const float *in, float *out, size_t n, kern_fault *f)
{
    rt_dist *d = (rt_dist *)kc;
    (void)f; /* MPI's errors end the job (MPI_ERRORS_ARE_FATAL) */
    double t = now();
    if (d->shm) {
        shm_reduce_mean(d->shm, in, out, n);
    } else {
        allreduce_sum(d, in, out, n);
        float scale = 1.0f / (float)d->size;
        for (size_t i = 0; i < n; i++) out[i] *= scale;
    }
    d->comm_secs += now() - t;
    return 0;
}

static int comm_allreduce_sgd(kern_comm *kc, const float *in, float *var, size_t n, float step,
                              kern_fault *f)
{
    rt_dist *d = (rt_dist *)kc;
    (void)f;
    double t = now();
    if (d->shm) {
        shm_reduce_sgd(d->shm, in, var, n, step);
    } else {
        allreduce_sum(d, in, d->sum, n);
        float scale = 1.0f / (float)d->size;
        for (size_t i = 0; i < n; i++) var[i] -= step * (d->sum[i] * scale);
    }
    d->comm_secs += now() - t;
    return 0;
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
    rt_dist *d = s->dist;
    for (int k = 0; k < d->n_shared; k++) {
        int vi = d->shared[k];
        device_obj *dev = rt_device(s, s->g->vars[vi].device);
        dev->vt->to_host(dev, out + d->off[k], s->var[vi], ir_nbytes(&s->g->vars[vi].type));
    }
}

static void unpack_vars(gr_session *s, const float *in)
{
    rt_dist *d = s->dist;
    for (int k = 0; k < d->n_shared; k++) {
        int vi = d->shared[k];
        device_obj *dev = rt_device(s, s->g->vars[vi].device);
        dev->vt->to_device(dev, s->var[vi], in + d->off[k], ir_nbytes(&s->g->vars[vi].type));
    }
}

static void pick_shared(rt_dist *d, const ir_graph *g)
{
    d->shared = xcalloc((size_t)g->n_vars + 1, sizeof *d->shared);
    d->off = xcalloc((size_t)g->n_vars + 1, sizeof *d->off);
    for (int i = 0; i < g->n_vars; i++) {
        const ir_var *v = &g->vars[i];
        if (!v->trainable || v->slot_of >= 0 || v->type.dtype != DT_F32) continue;
        d->off[d->n_shared] = d->total;
        d->shared[d->n_shared++] = i;
        d->total += (size_t)ir_numel(&v->type);
    }
    d->base = xcalloc(d->total + 1, sizeof *d->base);
    d->cur = xcalloc(d->total + 1, sizeof *d->cur);
}

/* The data sources a train target reads, whose batches the processes split
 * (data_spec.shards); a source only evaluations read is read whole. */
static void pick_sharded(rt_dist *d, const ir_graph *g)
{
    char *seen = xcalloc((size_t)g->n_nodes + 1, 1);
    int *stack = xmalloc(sizeof(int) * ((size_t)g->n_nodes + 1)), n = 0;
    d->sharded = xcalloc((size_t)g->n_data + 1, 1);
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
    const ir_graph *g = s->g;
    uint64_t h = 14695981039346656037ull;
    int mode[2] = {(int)s->prog->distributed, s->opt.sync_every};
    h = fnv(h, mode, sizeof mode);
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
    for (int i = 0; i < s->g->n_vars; i++) {
        size_t n = ir_nbytes(&s->g->vars[i].type);
        void *host = xmalloc(n + 1);
        device_obj *dev = rt_device(s, s->g->vars[i].device);
        dev->vt->to_host(dev, host, s->var[i], n);
        h = fnv(h, host, n);
        free(host);
    }
    return h;
}

/* Every process's value of h; the ranks that differ from rank 0 into
 * `which` (as text).  Returns how many differ. */
static int differing_ranks(rt_dist *d, uint64_t h, char *which, size_t len)
{
    uint64_t *all = xcalloc((size_t)d->size, sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->comm);
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
    rt_dist *d = s->dist;
    char which[256];
    if (differing_ranks(d, graph_fingerprint(s), which, sizeof which))
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: rank %s compiled a different graph than rank 0 (another "
                       ".graph file, --set value or --devices, or another mode); every process "
                       "must run the same program\n",
                       which);
    if (differing_ranks(d, vars_fingerprint(s), which, sizeof which))
        return rt_fail(st, GR_ERR_ARG,
                       "distributed: rank %s initialised its variables differently from rank 0 "
                       "(another --seed?)\n",
                       which);
    return GR_OK;
}

/* ---- async: rank 0's window ---- */

static void window_open(gr_session *s)
{
    rt_dist *d = s->dist;
    MPI_Aint bytes = d->rank == 0 ? (MPI_Aint)(d->total * sizeof(float)) : 0;
    MPI_Win_allocate(bytes, sizeof(float), MPI_INFO_NULL, d->comm, &d->win_mem, &d->win);
    d->use_win = 1;
}

/* Rank 0's variables become the shared ones (at the start, after a restore). */
static void window_fill(gr_session *s)
{
    rt_dist *d = s->dist;
    if (d->rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, d->win);
        pack_vars(s, d->win_mem);
        MPI_Win_unlock(0, d->win);
    }
    MPI_Barrier(d->comm);
}

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

/* Local variables <- the shared ones (async), or <- their mean (sync_every). */
static void refresh(gr_session *s)
{
    rt_dist *d = s->dist;
    if (d->use_win) {
        window_rma(d, d->base, 1);
        unpack_vars(s, d->base);
    } else if (d->mode == GR_DIST_ASYNC) {
        pack_vars(s, d->cur);
        comm_allreduce_mean(&d->kc, d->cur, d->cur, d->total, NULL);
        unpack_vars(s, d->cur);
    }
}

/* ---- the interface ---- */

gr_code dist_open(gr_session *s, gr_status *st)
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
    rt_dist *d = xcalloc(1, sizeof *d);
    d->kc.allreduce_mean = comm_allreduce_mean;
    d->kc.allreduce_sgd = comm_allreduce_sgd;
    MPI_Comm_dup(s->opt.mpi_comm ? *(const MPI_Comm *)s->opt.mpi_comm : MPI_COMM_WORLD, &d->comm);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    d->mode = s->prog->distributed;
    d->sync_every = s->opt.sync_every;
    pthread_mutex_init(&d->mu, NULL);
    s->dist = d;
    pick_shared(d, s->g);
    pick_sharded(d, s->g);
    gr_code c = check_same(s, st);
    if (c == GR_OK && d->mode == GR_DIST_ASYNC && d->sync_every == 0) {
        window_open(s);
        window_fill(s);
    }
    if (c == GR_OK && d->mode == GR_DIST_SYNC && !getenv("GR_MPI_ALLREDUCE"))
        d->shm = shm_reduce_open(
            d->comm, max_size(largest(s->g, OP_ALLREDUCE), largest(s->g, OP_APPLY_SGD_ALLREDUCE)));
    if (c == GR_OK && d->mode == GR_DIST_SYNC && !d->shm)
        d->sum = xcalloc(largest(s->g, OP_APPLY_SGD_ALLREDUCE) + 1, sizeof *d->sum);
    if (c != GR_OK) {
        dist_close(d);
        s->dist = NULL;
    }
    return c;
}

void dist_close(rt_dist *d)
{
    if (!d) return;
    if (d->use_win) MPI_Win_free(&d->win);
    shm_reduce_close(d->shm);
    free(d->sum);
    MPI_Comm_free(&d->comm);
    pthread_mutex_destroy(&d->mu);
    free(d->shared);
    free(d->sharded);
    free(d->off);
    free(d->base);
    free(d->cur);
    free(d);
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
    rt_dist *d = s->dist;
    (void)st;
    pthread_mutex_lock(&d->mu);
    if (d->use_win) refresh(s);
    return GR_OK;
}

gr_code dist_step_end(gr_session *s, int ran, gr_status *st)
{
    rt_dist *d = s->dist;
    (void)st;
    if (ran && d->use_win) {
        pack_vars(s, d->cur);
        for (size_t i = 0; i < d->total; i++) d->cur[i] -= d->base[i];
        window_rma(d, d->cur, 0);
    } else if (ran && d->mode == GR_DIST_ASYNC && ++d->steps % (uint64_t)d->sync_every == 0)
        refresh(s);
    pthread_mutex_unlock(&d->mu);
    return GR_OK;
}

gr_code dist_read_file(gr_session *s, const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    rt_dist *d = s->dist;
    uint64_t head[2] = {0, 0}; /* code, length */
    *buf = NULL;
    pthread_mutex_lock(&d->mu);
    if (d->rank == 0) {
        head[0] = (uint64_t)ckio_read(path, buf, len, st);
        head[1] = head[0] == GR_OK ? (uint64_t)*len : 0;
    }
    MPI_Bcast(head, 2, MPI_UINT64_T, 0, d->comm);
    if (head[0] == GR_OK && d->rank != 0) *buf = xmalloc((size_t)head[1] + 1);
    if (head[0] == GR_OK) bcast_bytes(d, *buf, (size_t)head[1]);
    pthread_mutex_unlock(&d->mu);
    *len = (size_t)head[1];
    if (head[0] == GR_OK || d->rank == 0) return (gr_code)head[0];
    return rt_fail(st, (gr_code)head[0], "%s: rank 0 could not read the checkpoint\n", path);
}

gr_code dist_restored(gr_session *s, gr_status *st)
{
    rt_dist *d = s->dist;
    (void)st;
    pthread_mutex_lock(&d->mu);
    if (d->use_win) window_fill(s);
    pthread_mutex_unlock(&d->mu);
    return GR_OK;
}

void dist_refresh(gr_session *s)
{
    rt_dist *d = s->dist;
    pthread_mutex_lock(&d->mu);
    refresh(s);
    pthread_mutex_unlock(&d->mu);
}

gr_code dist_save(gr_session *s, const char *path,
                  gr_code (*save)(gr_session *s, const char *path, gr_status *st), gr_status *st)
{
    rt_dist *d = s->dist;
    dist_refresh(s);
    int code = d->rank == 0 ? (int)save(s, path, st) : GR_OK;
    pthread_mutex_lock(&d->mu);
    MPI_Bcast(&code, 1, MPI_INT, 0, d->comm);
    pthread_mutex_unlock(&d->mu);
    if (code == GR_OK || d->rank == 0) return (gr_code)code;
    return rt_fail(st, (gr_code)code, "%s: rank 0 could not save the checkpoint\n", path);
}

gr_code dist_eval_total(gr_session *s, double *sum, int64_t *batches, gr_status *st)
{
    rt_dist *d = s->dist;
    double v[2] = {*sum, (double)*batches};
    (void)st;
    pthread_mutex_lock(&d->mu);
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, d->comm);
    pthread_mutex_unlock(&d->mu);
    *sum = v[0];
    *batches = (int64_t)v[1];
    return GR_OK;
}
