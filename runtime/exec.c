/* exec.c - an executor: one plan's per-run state.
 *
 * Everything a step needs is laid out once in exec_new: the arena (from the
 * memory plan), constants (filled once), and a flat array of prepared kernel
 * calls with their buffer pointers resolved.  A step is then: bind feeds,
 * take one batch per data source, run the partitions (parts.c; a plan on one
 * device is one partition, run on the caller's thread), copy fetches out.
 * No allocation happens per step. */
#include <stdlib.h>
#include <string.h>

#include "exec_int.h"

static void *aligned(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
    return p;
}

static void bind_buffers(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    for (int i = 0; i < e->p->n; i++) {
        int id = e->p->order[i];
        const ir_node *n = &g->nodes[id];
        if (n->op == OP_VARIABLE)
            e->buf[id] = e->s->var[n->var];
        else if (e->p->offset[id] != PLAN_NONE)
            e->buf[id] = e->arena + e->p->offset[id];
    }
}

/* Updates write their in[0] variable; with locking (the optimizer's
 * locking=true, attr i5, or the session option) they hold its lock.  Each
 * update takes exactly one lock, so no order between locks can deadlock. */
static void *update_lock(const rt_exec *e, const ir_node *n)
{
    if (!ops_has(n->op, OPF_UPDATE) || !(n->attr.i[5] || e->s->opt.locking)) return NULL;
    return &e->s->var_mu[e->p->g->nodes[n->in[0]].var];
}

/* Input j of node id: the producer's buffer, or, across partitions, the
 * receive buffer of its transfer.  An update's variable is always its own. */
static void *input_buffer(const rt_exec *e, int id, int j)
{
    const plan_graph *p = e->p;
    const ir_node *n = &p->g->nodes[id];
    int u = n->in[j];
    if (p->part[u] == p->part[id] || (j == 0 && ops_has(n->op, OPF_UPDATE))) return e->buf[u];
    const plan_xfer *t = &p->xfers[plan_xfer_find(p, u, p->part[id])];
    return t->bytes ? e->arena + t->offset : NULL; /* a 0-byte token carries nothing */
}

static void prepare_call(rt_exec *e, int id, kernel_fn fn, int *used_in)
{
    const ir_graph *g = e->p->g;
    const ir_node *n = &g->nodes[id];
    const exec_part *part = &e->parts[e->p->part[id]];
    kern_args *a = &e->args[e->n_calls];
    void **inp = e->in_ptrs + *used_in;
    const ir_type **int_ = e->in_types + *used_in;
    for (int j = 0; j < n->n_in; j++) {
        inp[j] = input_buffer(e, id, j);
        int_[j] = &g->nodes[n->in[j]].type;
    }
    *used_in += n->n_in;
    size_t sb = ops_table[n->op].scratch ? ops_table[n->op].scratch(g, id) : 0;
    *a = (kern_args){.g = g,
                     .node = n,
                     .out = e->buf[id],
                     .out_t = &n->type,
                     .n_in = n->n_in,
                     .in = inp,
                     .in_t = int_,
                     .scratch = sb ? part->scratch : NULL,
                     .scratch_task_bytes = sb,
                     .max_tasks = pool_size(part->pool),
                     .pool = part->pool,
                     .seed = e->s->opt.seed};
    a->lock = update_lock(e, n);
    a->fault = &e->faults[e->n_calls];
    e->fn[e->n_calls++] = fn;
}

/* The device a node runs on.  Only the CPU has a runtime so far: sema
 * rejects nodes on other devices (or moves them, with --soft-placement). */
static const device_vtable *node_device(const ir_node *n)
{
    return IR_DEV_KIND(n->device) == DEV_CPU ? &cpu_vtable : NULL;
}

static gr_code prepare_calls(rt_exec *e, gr_status *st)
{
    const ir_graph *g = e->p->g;
    int total_in = 0, used_in = 0;
    for (int i = 0; i < e->p->n; i++) total_in += g->nodes[e->p->order[i]].n_in;
    e->args = xcalloc((size_t)e->p->n + 1, sizeof *e->args);
    e->fn = xcalloc((size_t)e->p->n + 1, sizeof *e->fn);
    e->in_ptrs = xcalloc((size_t)total_in + 1, sizeof *e->in_ptrs);
    e->in_types = xcalloc((size_t)total_in + 1, sizeof *e->in_types);
    e->faults = xcalloc((size_t)e->p->n + 1, sizeof *e->faults);
    for (int i = 0; i < e->p->n * e->n_parts; i++) { /* partition by partition */
        int id = e->p->order[i % e->p->n];
        if (e->p->part[id] != i / e->p->n) continue;
        const ir_node *n = &g->nodes[id];
        if (n->op == OP_CONST) ir_const_fill(n, e->buf[id]); /* once, for every run */
        if (ops_has(n->op, OPF_SOURCE)) continue;
        const device_vtable *dev = node_device(n);
        if (!dev || !dev->kernels[n->op]) /* compile.c rejects these; a bug if reached */
            return rt_fail(st, GR_ERR_INTERNAL, "op '%s' has no kernel on its device\n",
                           ops_name(n->op));
        prepare_call(e, id, dev->kernels[n->op], &used_in);
    }
    return GR_OK;
}

/* Every kernel input that reads data source k's x or y, so a step can point
 * them at the batch in the reader's ring (no copy).  Inputs on another
 * partition read their receive buffer instead. */
static void find_patches(rt_exec *e, exec_data *d)
{
    int cap = 4;
    d->patch = xreallocarray(NULL, (size_t)cap, sizeof *d->patch);
    d->patch_y = xreallocarray(NULL, (size_t)cap, sizeof *d->patch_y);
    for (int i = 0; i < e->n_calls; i++)
        for (int j = 0; j < e->args[i].n_in; j++) {
            int src = e->args[i].node->in[j], which = src == d->node[0]   ? 0
                                                      : src == d->node[1] ? 1
                                                                          : -1;
            int here = (int)(e->args[i].node - e->p->g->nodes);
            if (which < 0 || e->p->part[src] != e->p->part[here]) continue;
            if (d->n_patch == cap) {
                cap *= 2;
                d->patch = xreallocarray(d->patch, (size_t)cap, sizeof *d->patch);
                d->patch_y = xreallocarray(d->patch_y, (size_t)cap, sizeof *d->patch_y);
            }
            d->patch[d->n_patch] = (void **)&e->args[i].in[j];
            d->patch_y[d->n_patch++] = which;
        }
}

static void prepare_data(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    e->data = xcalloc((size_t)e->p->n_data_used + 1, sizeof *e->data);
    e->n_data = e->p->n_data_used;
    for (int k = 0; k < e->n_data; k++) {
        exec_data *d = &e->data[k];
        int di = e->p->data_used[k];
        d->r = e->s->readers[di];
        d->node[0] = d->node[1] = -1;
        for (int i = 0; i < e->p->n; i++) {
            const ir_node *n = &g->nodes[e->p->order[i]];
            if (n->op == OP_DATA && n->data == di) d->node[n->attr.i[0] ? 1 : 0] = e->p->order[i];
        }
        find_patches(e, d);
    }
}

/* Takes one batch per source, in plan order (sources sorted by index, so
 * concurrent executors never wait on each other in a cycle). */
static gr_code take_batches(rt_exec *e, gr_status *st)
{
    for (int k = 0; k < e->n_data; k++) {
        exec_data *d = &e->data[k];
        if (data_acquire(d->r, &d->held) < 0) {
            while (k-- > 0) data_release(e->data[k].r, &e->data[k].held);
            return rt_fail(st, GR_ERR_ARG, "data source closed while running\n");
        }
        const void *xy[2] = {d->held.x, d->held.y};
        for (int p = 0; p < d->n_patch; p++) *d->patch[p] = (void *)xy[d->patch_y[p]];
        for (int w = 0; w < 2; w++)
            if (d->node[w] >= 0) e->buf[d->node[w]] = (void *)xy[w];
    }
    return GR_OK;
}

static void give_batches(rt_exec *e)
{
    for (int k = 0; k < e->n_data; k++) data_release(e->data[k].r, &e->data[k].held);
}

/* An arena or scratch that does not fit in memory: named with its size,
 * at the line of the target that needs it. */
static gr_code no_room(const rt_exec *e, const char *what, size_t bytes, gr_status *st)
{
    char h[32];
    const ir_node *target = &e->p->g->nodes[e->p->roots[0]];
    return rt_fail_at(st, GR_ERR_NOMEM, target, "cannot allocate the %s of '%s': %s", what,
                      target->name ? target->name : ops_name(target->op),
                      rt_human_bytes(bytes, h, sizeof h));
}

static gr_code alloc_parts(rt_exec *e, gr_status *st)
{
    const plan_graph *p = e->p;
    /* The executor's share of the thread budget, split over its partitions
     * (each gets at least one thread). */
    int per = e->s->opt.threads / e->s->opt.executors / p->n_parts;
    e->parts = xcalloc((size_t)e->n_parts, sizeof *e->parts);
    if (!(e->arena = aligned(p->arena_bytes)))
        return no_room(e, "activation arena", p->arena_bytes, st);
    for (int k = 0; k < e->n_parts; k++) {
        exec_part *pt = &e->parts[k];
        if (!(pt->pool = pool_new(per > 0 ? per : 1)))
            return rt_fail(st, GR_ERR_INTERNAL, "cannot start the threads of partition %d\n", k);
        size_t bytes = p->scratch_task_bytes * (size_t)pool_size(pt->pool);
        if (!(pt->scratch = aligned(bytes))) return no_room(e, "kernel scratch", bytes, st);
    }
    return GR_OK;
}

gr_code exec_new(gr_session *s, const plan_graph *p, rt_exec **out, gr_status *st)
{
    rt_exec *e = xcalloc(1, sizeof *e);
    e->s = s;
    e->p = p;
    e->n_parts = p->n_parts;
    e->buf = xcalloc((size_t)p->g->n_nodes + 1, sizeof *e->buf);
    gr_code c = alloc_parts(e, st);
    if (c == GR_OK) {
        bind_buffers(e);
        c = prepare_calls(e, st);
    }
    if (c == GR_OK) {
        sched_build(e, pool_size(e->parts[0].pool));
        prepare_data(e);
        parts_link(e);
        c = parts_start(e, st);
    }
    if (c != GR_OK) {
        exec_free(e);
        e = NULL;
    }
    *out = e;
    return c;
}

void exec_free(rt_exec *e)
{
    if (!e) return;
    parts_stop(e);
    sched_free(e);
    for (int k = 0; e->parts && k < e->n_parts; k++) {
        pool_free(e->parts[k].pool);
        free(e->parts[k].scratch);
        free(e->parts[k].send0);
    }
    free(e->parts);
    free(e->arena);
    free(e->buf);
    free(e->args);
    free(e->fn);
    free(e->in_ptrs);
    free(e->in_types);
    free(e->faults);
    for (int k = 0; e->data && k < e->n_data; k++) {
        free(e->data[k].patch);
        free(e->data[k].patch_y);
    }
    free(e->data);
    free(e);
}

const plan_graph *exec_plan(const rt_exec *e)
{
    return e->p;
}

static gr_code bind_feeds(rt_exec *e, const gr_feed *feeds, int n_feeds, gr_status *st)
{
    const ir_graph *g = e->p->g;
    for (int i = 0; i < g->n_inputs; i++) {
        int node = g->inputs[i].node, k = 0;
        if (e->p->offset[node] == PLAN_NONE) continue;
        while (k < n_feeds && strcmp(feeds[k].name, g->inputs[i].name) != 0) k++;
        if (k == n_feeds)
            return rt_fail(st, GR_ERR_ARG, "input '%s' must be fed to run this target\n",
                           g->inputs[i].name);
        size_t want = ir_nbytes(&g->inputs[i].type);
        if (feeds[k].bytes != want || !feeds[k].data) {
            char t[96];
            return rt_fail(st, GR_ERR_ARG, "feed '%s': got %zu bytes, but %s needs %zu\n",
                           feeds[k].name, feeds[k].bytes,
                           ir_type_str(&g->inputs[i].type, t, sizeof t), want);
        }
        memcpy(e->buf[node], feeds[k].data, want);
    }
    for (int k = 0; k < n_feeds; k++) {
        int found = 0;
        for (int i = 0; i < g->n_inputs; i++)
            found |= strcmp(feeds[k].name, g->inputs[i].name) == 0;
        if (!found)
            return rt_fail(st, GR_ERR_ARG, "feed '%s': no input has that name\n", feeds[k].name);
    }
    return GR_OK;
}

/* Fetch k is the plan's root k + 1 (root 0 is the target): its name was
 * resolved once, when the plan was made. */
static gr_code copy_fetches(rt_exec *e, gr_fetch *fetches, int n_fetches, int *views, gr_status *st)
{
    GR_ASSERT(n_fetches == e->p->n_roots - 1);
    for (int k = 0; k < n_fetches; k++) {
        int id = e->p->roots[k + 1];
        const ir_type *t = &e->p->g->nodes[id].type;
        if (!fetches[k].data && e->p->g->nodes[id].op == OP_DATA)
            return rt_fail(st, GR_ERR_ARG,
                           "fetch '%s': a data batch goes back to its reader "
                           "after the run; give a buffer to copy it into\n",
                           fetches[k].name);
        if (!fetches[k].data && e->buf[id]) { /* zero-copy: the caller reads it in place */
            fetches[k].view = e->buf[id];
            *views = 1;
            continue;
        }
        if (fetches[k].bytes != ir_nbytes(t) || !e->buf[id]) {
            char b[96];
            return rt_fail(st, GR_ERR_ARG, "fetch '%s': got %zu bytes, but %s needs %zu\n",
                           fetches[k].name, fetches[k].bytes, ir_type_str(t, b, sizeof b),
                           ir_nbytes(t));
        }
        memcpy(fetches[k].data, e->buf[id], fetches[k].bytes);
    }
    return GR_OK;
}

gr_code exec_run(rt_exec *e, const gr_feed *feeds, int n_feeds, gr_fetch *fetches, int n_fetches,
                 int *views, gr_status *st)
{
    gr_code c = bind_feeds(e, feeds, n_feeds, st);
    if (c == GR_OK) c = take_batches(e, st);
    if (c != GR_OK) return c;
    uint64_t step = atomic_fetch_add(&e->s->steps, 1);
    for (int i = 0; i < e->n_calls; i++) e->args[i].step = step; /* dropout's mask */
    c = parts_run(e, st);
    if (c == GR_OK) c = copy_fetches(e, fetches, n_fetches, views, st);
    give_batches(e);
    return c;
}
