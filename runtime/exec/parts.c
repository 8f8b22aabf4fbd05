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
    if ((*n & (*n - 1)) == 0)
        *list = base_xreallocarray(*list, *n ? 2 * (size_t)*n : 1, sizeof(int));
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
    e->xfers = base_xcalloc((size_t)p->n_xfers + 1, sizeof *e->xfers);
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

/* The producer's copy (see the top of this file); xfer_flag follows. */
static void xfer_copy_out(rt_exec *e, int x)
{
    const plan_xfer *t = &e->p->xfers[x];
    const exec_xfer *xs = &e->xfers[x];
    device_obj *d = e->parts[e->p->part[t->src]].dev;
    dev_queue *q = e->parts[e->p->part[t->src]].q;
    char *recv = t->bytes ? exec_addr(e, t->dst_part, t->offset) : NULL;
    if (xs->mode == XFER_HOST_HOST && t->bytes) memcpy(recv, e->buf[t->src], t->bytes);
    if (xs->mode == XFER_HOST_DEV && t->bytes) memcpy(xs->staging, e->buf[t->src], t->bytes);
    if (xs->mode == XFER_DEV_HOST || xs->mode == XFER_DEV_DEV) {
        void *dst = xs->mode == XFER_DEV_HOST ? (void *)recv : xs->staging;
        if (t->bytes) d->vt->copy_async(d, q, dst, e->buf[t->src], t->bytes, DEV_D2H);
        d->vt->event_record(d, xs->done, q);
    }
}

/* The producer says the transfer is filled (or enqueued) for step gen. */
static void xfer_flag(rt_exec *e, int x, uint64_t gen)
{
    pthread_mutex_lock(&e->mu);
    atomic_store_explicit(&e->xfer_ready[x], gen, memory_order_release);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* The consumer's thread waits for the flag, and for the producer's device
 * where its own queue cannot wait for it. */
static void xfer_wait(rt_exec *e, int x, uint64_t gen)
{
    const exec_xfer *xs = &e->xfers[x];
    device_obj *from = e->parts[e->p->part[e->p->xfers[x].src]].dev;
    device_obj *to = e->parts[e->p->xfers[x].dst_part].dev;
    if (!spin_for(e, &e->xfer_ready[x], gen, 1)) {
        pthread_mutex_lock(&e->mu);
        while (atomic_load(&e->xfer_ready[x]) != gen) pthread_cond_wait(&e->cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    if (xs->mode == XFER_DEV_HOST || (xs->mode == XFER_DEV_DEV && from->vt != to->vt))
        from->vt->event_sync(from, xs->done);
}

/* The consumer's queue: waits for the producer's event where it can, then
 * copies staging -> receive buffer. */
static void xfer_copy_in(rt_exec *e, int x)
{
    const plan_xfer *t = &e->p->xfers[x];
    const exec_xfer *xs = &e->xfers[x];
    device_obj *from = e->parts[e->p->part[t->src]].dev;
    const exec_part *to = &e->parts[t->dst_part];
    if (xs->mode == XFER_DEV_DEV && from->vt == to->dev->vt)
        to->dev->vt->event_wait(to->dev, to->q, xs->done);
    if ((xs->mode == XFER_HOST_DEV || xs->mode == XFER_DEV_DEV) && t->bytes)
        to->dev->vt->copy_async(to->dev, to->q, exec_addr(e, t->dst_part, t->offset), xs->staging,
                                t->bytes, DEV_H2D);
}

/* ---- a partition's step, stretch by stretch ---- */

/* The transfers a stretch receives before it and sends after it. */
static const exec_level *seg_first(const rt_exec *e, const exec_seg *sg)
{
    return sg->n ? &e->levels[sg->first] : NULL;
}

static void seg_sends(const rt_exec *e, const exec_part *pt, const exec_seg *sg, const int **x,
                      int *n)
{
    const exec_level *last = sg->n ? &e->levels[sg->first + sg->n - 1] : NULL;
    *x = sg->send0 ? pt->send0 : last ? last->send : NULL;
    *n = sg->send0 ? pt->n_send0 : last ? last->n_send : 0;
}

/* A new stretch starts at a level that receives; one ends at a level that
 * sends.  Sources' sends are a stretch of their own, first: a partition
 * must not wait before it sends them (the no-deadlock argument at the top
 * of this file needs every send as early as before). */
static void build_segs(rt_exec *e, exec_part *pt)
{
    pt->segs = base_xcalloc((size_t)pt->n_levels + 2, sizeof *pt->segs);
    if (pt->n_send0) pt->segs[pt->n_segs++] = (exec_seg){.send0 = 1, .first = pt->first_level};
    exec_seg *cur = NULL;
    for (int l = pt->first_level; l < pt->first_level + pt->n_levels; l++) {
        const exec_level *L = &e->levels[l];
        if (!cur || L->n_wait || e->levels[l - 1].n_send) {
            cur = &pt->segs[pt->n_segs++];
            *cur = (exec_seg){.first = l};
        }
        cur->n++;
    }
}

/* The run counter on an async device.  Its kernels that read the counter
 * (OPF_PER_RUN: dropout, random numbers, sampling) read it from device
 * memory (kern_args.step_dev), which run_part sets on the queue before
 * anything else of the step: a copy from a pinned word, outside every step
 * graph, so that a recorded stretch, which replays the arguments it was
 * recorded with, still draws this step's numbers.  The host writes the
 * pinned word only at the start of a step, after the end-of-step sync of
 * the one before, when the previous copy has certainly run. */
static gr_code link_step(rt_exec *e, exec_part *pt, gr_status *st)
{
    int per_run = 0;
    for (int l = pt->first_level; pt->q && l < pt->first_level + pt->n_levels; l++)
        for (int i = e->levels[l].first; i < e->levels[l].first + e->levels[l].n; i++)
            per_run |= ops_has(e->args[i].node->op, OPF_PER_RUN);
    if (!per_run) return GR_OK;
    device_obj *d = pt->dev;
    if (!(pt->step_dev = d->vt->alloc(d, sizeof(uint64_t))) ||
        !(pt->step_host = d->vt->host_alloc(d, sizeof(uint64_t))))
        return rt_fail(st, GR_ERR_NOMEM, "cannot allocate the run counter on %s\n", d->vt->name);
    for (int l = pt->first_level; l < pt->first_level + pt->n_levels; l++)
        for (int i = e->levels[l].first; i < e->levels[l].first + e->levels[l].n; i++)
            if (ops_has(e->args[i].node->op, OPF_PER_RUN)) e->args[i].step_dev = pt->step_dev;
    return GR_OK;
}

static void unlink_step(exec_part *pt)
{
    if (pt->step_dev) pt->dev->vt->free(pt->dev, pt->step_dev);
    if (pt->step_host) pt->dev->vt->host_free(pt->dev, pt->step_host);
    pt->step_dev = pt->step_host = NULL;
}

/* The step's run counter (exec_run gives every call the same one) into
 * device memory, first on the queue. */
static void set_step(rt_exec *e, exec_part *pt)
{
    if (!pt->step_dev) return;
    *pt->step_host = e->args[0].step;
    pt->dev->vt->copy_async(pt->dev, pt->q, pt->step_dev, pt->step_host, sizeof(uint64_t), DEV_H2D);
}

/* Whether the stretches of partition pt may be recorded: an async device
 * with step graphs, no --check-numerics (it syncs inside the step), no
 * locking update (a replay would run it without its variable's lock,
 * racing another executor's), and, per stretch, no copy into host memory
 * that is not pinned (a dev -> host send writes the CPU's arena).  Calls
 * that read the run counter are recorded: they read it from device memory
 * (link_step), as updates read their learning-rate factor (stale.c). */
static void mark_recordable(rt_exec *e, exec_part *pt)
{
    if (!pt->q || !pt->dev->vt->capture_begin || e->env->opt->check_numerics ||
        e->env->opt->no_step_graphs)
        return;
    for (int l = pt->first_level; l < pt->first_level + pt->n_levels; l++)
        for (int i = e->levels[l].first; i < e->levels[l].first + e->levels[l].n; i++) {
            if (e->args[i].lock) return;
            GR_ASSERT(!ops_has(e->args[i].node->op, OPF_PER_RUN) || e->args[i].step_dev);
        }
    for (int s = 0; s < pt->n_segs; s++) {
        const int *x;
        int n, ok = 1;
        seg_sends(e, pt, &pt->segs[s], &x, &n);
        for (int i = 0; i < n; i++) ok &= e->xfers[x[i]].mode != XFER_DEV_HOST;
        pt->segs[s].record = ok;
    }
}

static void free_segs(exec_part *pt)
{
    for (int s = 0; s < pt->n_segs; s++)
        if (pt->segs[s].graph) pt->dev->vt->graph_free(pt->dev, pt->segs[s].graph);
    free(pt->segs);
    pt->segs = NULL;
    pt->n_segs = 0;
}

/* What a stretch enqueues (or, on the CPU, runs).  After a failing kernel
 * or a NaN anywhere the levels left are skipped, unless it is being
 * recorded: a recording must hold every call (a failed step's results are
 * dropped anyway). */
static void seg_enqueue(rt_exec *e, int k, const exec_seg *sg, int recording)
{
    exec_part *pt = &e->parts[k];
    for (int i = 0; sg->send0 && i < pt->n_send0; i++) xfer_copy_out(e, pt->send0[i]);
    for (int l = sg->first; l < sg->first + sg->n; l++) {
        const exec_level *L = &e->levels[l];
        for (int i = 0; i < L->n_wait; i++) xfer_copy_in(e, L->wait[i]);
        if (recording || !atomic_load(&e->failed)) {
            if (!pt->q) stale_scale(e, pt, L); /* the CPU: as the level runs */
            if (sched_run_level(e, L, pt->st) != GR_OK || sched_check_level(e, L, pt->st) != GR_OK)
                atomic_store(&e->failed, k + 1);
        }
        for (int i = 0; i < L->n_send; i++) xfer_copy_out(e, L->send[i]);
    }
}

/* The first step of a recordable stretch runs call by call (first calls
 * may set things up: cuBLAS does), the second records it; from then on
 * each step replays the recording.  On an async device the stretch's
 * learning-rate factors (--stale-lr) are copied first, outside any
 * recording, as the run counter is. */
static void seg_run(rt_exec *e, int k, exec_seg *sg)
{
    exec_part *pt = &e->parts[k];
    const device_vtable *vt = pt->dev->vt;
    for (int l = sg->first; pt->q && l < sg->first + sg->n; l++) stale_scale(e, pt, &e->levels[l]);
    if (sg->record && !sg->graph && sg->runs++ == 1) {
        vt->capture_begin(pt->dev, pt->q);
        seg_enqueue(e, k, sg, 1);
        sg->graph = vt->capture_end(pt->dev, pt->q);
        sg->record = sg->graph != NULL;
    }
    if (sg->graph)
        vt->graph_launch(pt->dev, pt->q, sg->graph);
    else
        seg_enqueue(e, k, sg, 0);
}

/* One partition's step.  Every transfer is marked even after a failure, so
 * no partition waits forever. */
static void run_part(rt_exec *e, int k, uint64_t gen)
{
    exec_part *pt = &e->parts[k];
    set_step(e, pt);
    for (int s = 0; s < pt->n_segs; s++) {
        exec_seg *sg = &pt->segs[s];
        const exec_level *L = seg_first(e, sg);
        for (int i = 0; !sg->send0 && L && i < L->n_wait; i++) xfer_wait(e, L->wait[i], gen);
        seg_run(e, k, sg);
        const int *x;
        int n;
        seg_sends(e, pt, sg, &x, &n);
        for (int i = 0; i < n; i++) xfer_flag(e, x[i], gen);
    }
    if (sched_sync(e, k, pt->st) != GR_OK) atomic_store(&e->failed, k + 1);
}

gr_code parts_link(rt_exec *e, gr_status *st)
{
    const plan_graph *p = e->p;
    int *sent_at = base_xmalloc(sizeof(int) * (size_t)(p->g->n_nodes + 1)); /* level of each call */
    int *waited = base_xcalloc((size_t)p->n_xfers + 1, sizeof(int));
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
    for (int k = 0; c == GR_OK && k < e->n_parts; k++) {
        build_segs(e, &e->parts[k]);
        if ((c = link_step(e, &e->parts[k], st)) == GR_OK &&
            (c = stale_link(e, &e->parts[k], st)) == GR_OK)
            mark_recordable(e, &e->parts[k]);
    }
    if (c == GR_OK) /* parts_stop's sign that parts_start ran */
        e->xfer_ready = base_xcalloc((size_t)p->n_xfers + 1, sizeof *e->xfer_ready);
    return c;
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
    e->spin = e->env->opt->threads >= e->env->opt->executors * e->n_parts;
    for (int k = 0; k < e->n_parts; k++) {
        exec_part *pt = &e->parts[k];
        if (!(pt->st = gr_status_new())) return rt_fail(st, GR_ERR_NOMEM, "out of memory\n");
        if (k == 0) continue; /* the caller's thread */
        part_arg *a = base_xmalloc(sizeof *a);
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
    for (int k = 0; e->parts && k < e->n_parts; k++) {
        free_segs(&e->parts[k]);
        unlink_step(&e->parts[k]);
        stale_unlink(&e->parts[k]);
    }
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
