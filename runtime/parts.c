/* parts.c - running a plan that spans several devices.
 *
 * Each partition (compiler/plan.c) runs its own levels, in global level
 * order, on its own thread: partition 0 on the caller's, the others on
 * threads the executor keeps for its lifetime.  Partitions meet only at
 * transfers: after the level that computes a tensor, its partition copies
 * it into the receive buffer the consumer's partition owns and marks the
 * transfer filled for this step; before a level, a partition waits for the
 * transfers its calls read.  A receive at level l waits for a send made
 * right after a level below l, so by induction on the level no two
 * partitions can wait on each other: no deadlock.  The rendezvous is keyed
 * by (generation, transfer): a flag holds the generation (the executor's own
 * count of its steps, which never rewinds, unlike the session's step that a
 * restore sets back) that last filled it, and a step ends only when every
 * partition is done, so one buffer per transfer suffices.  A plan on one
 * device is one partition: it runs on the caller's thread and nothing
 * waits.
 *
 * How a transfer moves its bytes depends on whether each side's device is
 * the host's memory (the CPU: synchronous) or not (async: its work runs
 * later on its queue).  The flag above only says that the producer has
 * done or enqueued its part; events and queue order do the rest:
 *   host -> host: the producer copies into the receive buffer.
 *   host -> dev:  the producer copies into pinned staging; the consumer
 *                 enqueues staging -> receive buffer on its queue, before
 *                 the calls that read it.
 *   dev -> host:  the producer enqueues its copy into the receive buffer
 *                 (host memory) and records an event; the consumer's thread
 *                 waits for the event.
 *   dev -> dev:   the producer enqueues its copy into staging and records an
 *                 event; the consumer's queue waits for the event (its
 *                 thread, when the two devices are of different kinds) and
 *                 then copies staging -> receive buffer.
 * Each async partition syncs its queue at the end of the step, so staging
 * is free again when the next step writes it. */
#include <stdlib.h>
#include <string.h>

#include "exec_int.h"

/* Appends x to a list whose capacity is the next power of two of *n. */
static void list_push(int **list, int *n, int x)
{
    if ((*n & (*n - 1)) == 0) *list = xreallocarray(*list, *n ? 2 * (size_t)*n : 1, sizeof(int));
    (*list)[(*n)++] = x;
}

static int call_node(const rt_exec *e, int call)
{
    return (int)(e->args[call].node - e->p->g->nodes);
}

/* The transfers node id (on partition k) reads: data and control edges,
 * each once per level (waited[x] holds the last level l + 1 that added x). */
static void add_waits(const rt_exec *e, int id, int l, int *waited)
{
    const plan_graph *p = e->p;
    const ir_node *n = &p->g->nodes[id];
    exec_level *L = &e->levels[l];
    for (int j = 0; j < n->n_in + n->n_ctrl; j++) {
        int u = j < n->n_in ? n->in[j] : n->ctrl[j - n->n_in];
        if (p->part[u] == L->part || (j == 0 && ops_has(n->op, OPF_UPDATE))) continue;
        int x = plan_xfer_find(p, u, L->part);
        if (waited[x] == l + 1) continue;
        waited[x] = l + 1;
        list_push(&L->wait, &L->n_wait, x);
    }
}

static xfer_mode mode_of(const exec_part *from, const exec_part *to)
{
    int a = from->dev->vt->async, b = to->dev->vt->async;
    return a ? (b ? XFER_DEV_DEV : XFER_DEV_HOST) : (b ? XFER_HOST_DEV : XFER_HOST_HOST);
}

/* Each transfer's mode, staging (pinned, from an async side) and event
 * (the producer's, when its copy is async). */
static gr_code link_xfers(rt_exec *e, gr_status *st)
{
    const plan_graph *p = e->p;
    e->xfers = xcalloc((size_t)p->n_xfers + 1, sizeof *e->xfers);
    for (int x = 0; x < p->n_xfers; x++) {
        const plan_xfer *t = &p->xfers[x];
        exec_part *from = &e->parts[p->part[t->src]], *to = &e->parts[t->dst_part];
        exec_xfer *xs = &e->xfers[x];
        xs->mode = mode_of(from, to);
        if (from->dev->vt->async) xs->done = from->dev->vt->event_new(from->dev);
        if ((xs->mode == XFER_HOST_DEV || xs->mode == XFER_DEV_DEV) && t->bytes) {
            xs->sd = xs->mode == XFER_HOST_DEV ? to->dev : from->dev;
            if (!(xs->staging = xs->sd->vt->host_alloc(xs->sd, t->bytes)))
                return rt_fail(st, GR_ERR_NOMEM, "cannot allocate %zu bytes of staging\n",
                               t->bytes);
        }
    }
    return GR_OK;
}

static void unlink_xfers(rt_exec *e)
{
    for (int x = 0; e->xfers && x < e->p->n_xfers; x++) {
        exec_xfer *xs = &e->xfers[x];
        device_obj *from = e->parts[e->p->part[e->p->xfers[x].src]].dev;
        if (xs->done) from->vt->event_free(from, xs->done);
        if (xs->staging) xs->sd->vt->host_free(xs->sd, xs->staging);
    }
    free(e->xfers);
}

gr_code parts_link(rt_exec *e, gr_status *st)
{
    const plan_graph *p = e->p;
    int *sent_at = xmalloc(sizeof(int) * (size_t)(p->g->n_nodes + 1)); /* level of each call */
    int *waited = xcalloc((size_t)p->n_xfers + 1, sizeof(int));
    IR_WORK(p->g->n_nodes + e->n_calls + p->n_xfers);
    for (int i = 0; i < p->g->n_nodes; i++) sent_at[i] = -1;
    for (int l = 0; l < e->n_levels; l++) {
        const exec_level *L = &e->levels[l];
        for (int i = L->first; i < L->first + L->n; i++) {
            add_waits(e, call_node(e, i), l, waited);
            sent_at[call_node(e, i)] = l;
        }
    }
    for (int x = 0; x < p->n_xfers; x++) {
        int src = p->xfers[x].src, l = sent_at[src];
        if (l >= 0)
            list_push(&e->levels[l].send, &e->levels[l].n_send, x);
        else { /* a source (variable, data, constant, input): sent as the step starts */
            exec_part *pt = &e->parts[p->part[src]];
            list_push(&pt->send0, &pt->n_send0, x);
        }
    }
    free(waited);
    free(sent_at);
    gr_code c = link_xfers(e, st);
    if (c == GR_OK) /* parts_stop's sign that parts_start ran */
        e->xfer_ready = xcalloc((size_t)p->n_xfers + 1, sizeof *e->xfer_ready);
    return c;
}

/* Waits a little before sleeping when every partition thread of every
 * executor has a core of the budget (e->spin): a transfer or the next step
 * usually comes within microseconds, and waking a sleeping thread costs
 * more.  Measured on examples/two_towers.graph, 2 threads: sync towers
 * (1 executor x 2 partitions) 2,100 -> 2,390 steps/s with spinning; async
 * towers (2 executors, one of them with 2 partitions) fall from 4,990 to
 * 3,990 if they spin too, since spinning threads then take cores from
 * working ones. */
#define SPIN 4000

/* Spins until *flag == want (or, with !eq, until it differs from want). */
static int spin_for(const rt_exec *e, _Atomic uint64_t *flag, uint64_t want, int eq)
{
    for (int i = 0; e->spin && i < SPIN; i++) {
        if ((atomic_load_explicit(flag, memory_order_acquire) == want) == eq) return 1;
        cpu_relax();
    }
    return 0;
}

/* The producer's part (see the top of this file), then the flag. */
static void xfer_send(rt_exec *e, int x, uint64_t gen)
{
    const plan_xfer *t = &e->p->xfers[x];
    const exec_xfer *xs = &e->xfers[x];
    const exec_part *from = &e->parts[e->p->part[t->src]];
    device_obj *d = from->dev;
    char *recv = t->bytes ? exec_addr(e, t->dst_part, t->offset) : NULL;
    if (xs->mode == XFER_HOST_HOST && t->bytes) memcpy(recv, e->buf[t->src], t->bytes);
    if (xs->mode == XFER_HOST_DEV && t->bytes) memcpy(xs->staging, e->buf[t->src], t->bytes);
    if (xs->mode == XFER_DEV_HOST || xs->mode == XFER_DEV_DEV) {
        void *dst = xs->mode == XFER_DEV_HOST ? (void *)recv : xs->staging;
        if (t->bytes) d->vt->copy_async(d, from->q, dst, e->buf[t->src], t->bytes, DEV_D2H);
        d->vt->event_record(d, xs->done, from->q);
    }
    pthread_mutex_lock(&e->mu);
    atomic_store_explicit(&e->xfer_ready[x], gen, memory_order_release);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void xfer_wait_flag(rt_exec *e, int x, uint64_t gen)
{
    if (spin_for(e, &e->xfer_ready[x], gen, 1)) return;
    pthread_mutex_lock(&e->mu);
    while (atomic_load(&e->xfer_ready[x]) != gen) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

/* The consumer's part (see the top of this file), after the flag. */
static void xfer_receive(rt_exec *e, int x, uint64_t gen)
{
    const plan_xfer *t = &e->p->xfers[x];
    const exec_xfer *xs = &e->xfers[x];
    device_obj *from = e->parts[e->p->part[t->src]].dev;
    const exec_part *to = &e->parts[t->dst_part];
    xfer_wait_flag(e, x, gen);
    if (xs->mode == XFER_DEV_HOST) from->vt->event_sync(from, xs->done);
    if (xs->mode == XFER_DEV_DEV && from->vt == to->dev->vt)
        to->dev->vt->event_wait(to->dev, to->q, xs->done);
    else if (xs->mode == XFER_DEV_DEV)
        from->vt->event_sync(from, xs->done);
    if ((xs->mode == XFER_HOST_DEV || xs->mode == XFER_DEV_DEV) && t->bytes)
        to->dev->vt->copy_async(to->dev, to->q, exec_addr(e, t->dst_part, t->offset), xs->staging,
                                t->bytes, DEV_H2D);
}

/* One partition's step.  After a failing kernel or a NaN (check_numerics)
 * anywhere, the levels left are skipped, but every transfer is still
 * marked, so no partition waits forever. */
static void run_part(rt_exec *e, int k, uint64_t gen)
{
    exec_part *pt = &e->parts[k];
    for (int i = 0; i < pt->n_send0; i++) xfer_send(e, pt->send0[i], gen);
    for (int l = pt->first_level; l < pt->first_level + pt->n_levels; l++) {
        const exec_level *L = &e->levels[l];
        for (int i = 0; i < L->n_wait; i++) xfer_receive(e, L->wait[i], gen);
        if (!atomic_load(&e->failed) &&
            (sched_run_level(e, L, pt->st) != GR_OK || sched_check_level(e, L, pt->st) != GR_OK))
            atomic_store(&e->failed, k + 1);
        for (int i = 0; i < L->n_send; i++) xfer_send(e, L->send[i], gen);
    }
    if (sched_sync(e, k, pt->st) != GR_OK) atomic_store(&e->failed, k + 1);
}

typedef struct part_arg {
    rt_exec *e;
    int k;
} part_arg;

static void *part_main(void *arg)
{
    part_arg a = *(part_arg *)arg;
    free(arg);
    rt_exec *e = a.e;
    uint64_t done = 0;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        pthread_mutex_unlock(&e->mu);
        spin_for(e, &e->go, done, 0);
        pthread_mutex_lock(&e->mu);
        while (!e->stop && atomic_load(&e->go) == done) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stop) break;
        done = atomic_load(&e->go);
        pthread_mutex_unlock(&e->mu);
        run_part(e, a.k, done);
        pthread_mutex_lock(&e->mu);
        e->n_done++;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

gr_code parts_start(rt_exec *e, gr_status *st)
{
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->spin = e->s->opt.threads >= e->s->opt.executors * e->n_parts;
    for (int k = 0; k < e->n_parts; k++) {
        exec_part *pt = &e->parts[k];
        if (!(pt->st = gr_status_new())) return rt_fail(st, GR_ERR_NOMEM, "out of memory\n");
        if (k == 0) continue; /* the caller's thread */
        part_arg *a = xmalloc(sizeof *a);
        *a = (part_arg){e, k};
        if (pthread_create(&pt->thread, NULL, part_main, a) != 0) {
            free(a);
            return rt_fail(st, GR_ERR_INTERNAL, "cannot start the thread of partition %d\n", k);
        }
        pt->started = 1;
    }
    return GR_OK;
}

void parts_stop(rt_exec *e)
{
    unlink_xfers(e);
    if (!e->xfer_ready) return; /* parts_link never ran */
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (int k = 0; k < e->n_parts; k++) {
        if (e->parts[k].started) pthread_join(e->parts[k].thread, NULL);
        gr_status_free(e->parts[k].st);
    }
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->xfer_ready);
}

/* Wakes the partition threads for generation gen; the caller runs
 * partition 0 meanwhile. */
static void parts_go(rt_exec *e, uint64_t gen)
{
    pthread_mutex_lock(&e->mu);
    e->go = gen;
    e->n_done = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void parts_wait(rt_exec *e)
{
    pthread_mutex_lock(&e->mu);
    while (e->n_done < e->n_parts - 1) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

/* The rendezvous counts the executor's own generations, which start above
 * the fresh flags' 0 and never come back to a value they had. */
gr_code parts_run(rt_exec *e, gr_status *st)
{
    uint64_t gen = ++e->gen;
    atomic_store(&e->failed, 0);
    if (e->n_parts > 1) parts_go(e, gen);
    run_part(e, 0, gen);
    if (e->n_parts > 1) parts_wait(e);
    int bad = atomic_load(&e->failed);
    if (!bad) return GR_OK;
    return rt_status_copy(st, e->parts[bad - 1].st);
}
