/* exec.c - an executor: one plan's per-run state.
 *
 * Everything a step needs is laid out once in exec_new: the arena (from the
 * memory plan), constants (filled once), and a flat array of prepared kernel
 * calls with their buffer pointers resolved.  A step is then: bind feeds,
 * take one batch per data source, run the partitions (parts.c; a plan on one
 * device is one partition, run on the caller's thread), copy fetches out.
 * No allocation happens per step.  What the executor uses of its session
 * (devices, variables, readers, options) comes in its exec_env (runtime.h)
 * when it is made: nothing here calls back into runtime/session/. */
#include <stdlib.h>
#include <string.h>

#include "exec_int.h"

static void bind_buffers(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    IR_WORK(e->p->n);
    for (int i = 0; i < e->p->n; i++) {
        int id = e->p->order[i];
        const ir_node *n = &g->nodes[id];
        if (n->op == OP_VARIABLE)
            e->buf[id] = e->env->var[n->var];
        else if (e->p->offset[id] != PLAN_NONE)
            e->buf[id] = exec_addr(e, e->p->part[id], e->p->offset[id]);
    }
}

/* Updates write their in[0] variable; with locking (the optimizer's
 * locking=true, attr i5, or the session option) they hold its lock.  Each
 * update takes exactly one lock, so no order between locks can deadlock. */
static dev_var_lock *update_lock(const rt_exec *e, const ir_node *n)
{
    if (!ops_has(n->op, OPF_UPDATE) || !(n->attr.i[ATTR_LOCKING] || e->env->opt->locking))
        return NULL;
    return &e->env->var_lock[e->p->g->nodes[n->in[0]].var];
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
    return t->bytes ? exec_addr(e, p->part[id], t->offset) : NULL; /* a 0-byte token: nothing */
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
                     .max_tasks = part->pool ? cpu_pool_size(part->pool) : 1,
                     .pool = part->pool,
                     .seed = e->env->opt->seed,
                     .comm = e->env->comm,
                     .queue = part->q};
    a->lock = update_lock(e, n);
    a->fault = &e->faults[e->n_calls];
    e->fn[e->n_calls++] = fn;
}

/* A constant's value, filled once on the host and copied to its device. */
static gr_code fill_const(rt_exec *e, int id, gr_status *st)
{
    const ir_node *n = &e->p->g->nodes[id];
    device_obj *d = e->parts[e->p->part[id]].dev;
    if (!d->vt->async) {
        ir_const_fill(n, e->buf[id]);
        return GR_OK;
    }
    size_t bytes = ir_nbytes(&n->type);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) return rt_fail_at(st, GR_ERR_NOMEM, n, "cannot stage a constant on the host");
    ir_const_fill(n, host);
    d->vt->to_device(d, e->buf[id], host, bytes);
    free(host);
    return GR_OK;
}

static gr_code prepare_calls(rt_exec *e, gr_status *st)
{
    const ir_graph *g = e->p->g;
    int total_in = 0, used_in = 0;
    IR_WORK(e->p->n * (1 + e->n_parts));
    for (int i = 0; i < e->p->n; i++) total_in += g->nodes[e->p->order[i]].n_in;
    e->args = base_xcalloc((size_t)e->p->n + 1, sizeof *e->args);
    e->fn = base_xcalloc((size_t)e->p->n + 1, sizeof *e->fn);
    e->in_ptrs = base_xcalloc((size_t)total_in + 1, sizeof *e->in_ptrs);
    e->in_types = base_xcalloc((size_t)total_in + 1, sizeof *e->in_types);
    e->faults = base_xcalloc((size_t)e->p->n + 1, sizeof *e->faults);
    gr_code c = GR_OK;
    for (int i = 0; i < e->p->n * e->n_parts && c == GR_OK; i++) { /* partition by partition */
        int id = e->p->order[i % e->p->n];
        if (e->p->part[id] != i / e->p->n) continue;
        const ir_node *n = &g->nodes[id];
        if (n->op == OP_CONST) c = fill_const(e, id, st); /* once, for every run */
        if (ops_has(n->op, OPF_SOURCE)) continue;
        const kernel_fn *k = e->parts[e->p->part[id]].dev->vt->kernels;
        GR_ASSERT(k[n->op]); /* placement rejects a node whose device lacks its kernel */
        prepare_call(e, id, k[n->op], &used_in);
    }
    return c;
}

/* Every kernel input that reads data source k's x or y, so a step can point
 * them at the batch in the reader's ring (no copy).  Inputs on another
 * partition read their receive buffer instead. */
static void find_patches(rt_exec *e, exec_data *d)
{
    int cap = 4;
    d->patch = base_xreallocarray(NULL, (size_t)cap, sizeof *d->patch);
    d->patch_y = base_xreallocarray(NULL, (size_t)cap, sizeof *d->patch_y);
    IR_WORK(e->n_calls);
    for (int i = 0; i < e->n_calls; i++)
        for (int j = 0; j < e->args[i].n_in; j++) {
            int src = e->args[i].node->in[j], which = src == d->node[0]   ? 0
                                                      : src == d->node[1] ? 1
                                                                          : -1;
            int here = (int)(e->args[i].node - e->p->g->nodes);
            if (which < 0 || e->p->part[src] != e->p->part[here]) continue;
            if (d->n_patch == cap) {
                cap *= 2;
                d->patch = base_xreallocarray(d->patch, (size_t)cap, sizeof *d->patch);
                d->patch_y = base_xreallocarray(d->patch_y, (size_t)cap, sizeof *d->patch_y);
            }
            d->patch[d->n_patch] = (void **)&e->args[i].in[j];
            d->patch_y[d->n_patch++] = which;
        }
}

static void prepare_data(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    e->data = base_xcalloc((size_t)e->p->n_data_used + 1, sizeof *e->data);
    e->n_data = e->p->n_data_used;
    for (int k = 0; k < e->n_data; k++) {
        exec_data *d = &e->data[k];
        int di = e->p->data_used[k];
        d->r = e->env->readers[di];
        d->node[0] = d->node[1] = -1;
        IR_WORK(e->p->n);
        for (int i = 0; i < e->p->n; i++) {
            const ir_node *n = &g->nodes[e->p->order[i]];
            if (n->op == OP_DATA && n->data == di)
                d->node[n->attr.i[ATTR_DATA_WHICH] ? 1 : 0] = e->p->order[i];
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
        if (data_acquire(d->r, &d->batch) < 0) {
            while (k-- > 0) data_release(e->data[k].r, &e->data[k].batch);
            return rt_fail(st, GR_ERR_ARG, "data source closed while running\n");
        }
        const void *xy[2] = {d->batch.x, d->batch.y};
        for (int p = 0; p < d->n_patch; p++) *d->patch[p] = (void *)xy[d->patch_y[p]];
        for (int w = 0; w < 2; w++)
            if (d->node[w] >= 0) e->buf[d->node[w]] = (void *)xy[w];
    }
    return GR_OK;
}

static void give_batches(rt_exec *e)
{
    for (int k = 0; k < e->n_data; k++) data_release(e->data[k].r, &e->data[k].batch);
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

/* The largest output of partition k's calls: the host copy --check-numerics
 * reads an async device's outputs into. */
static size_t largest_output(const rt_exec *e, int k)
{
    size_t most = 0;
    for (int i = 0; i < e->p->n; i++) {
        int id = e->p->order[i];
        size_t b = ir_nbytes(&e->p->g->nodes[id].type);
        if (e->p->part[id] == k && b > most) most = b;
    }
    return most;
}

/* Partition k's region of the arena, scratch and pool (synchronous
 * devices) or queue (asynchronous ones), from its device. */
static gr_code alloc_part(rt_exec *e, int k, int threads, gr_status *st)
{
    const plan_graph *p = e->p;
    exec_part *pt = &e->parts[k];
    device_obj *d = pt->dev = machine_devices_find(e->env->devs, p->part_dev[k]);
    pt->base = p->part_base[k];
    if (!(pt->arena = d->vt->alloc(d, p->part_bytes[k])))
        return no_room(e, "activation arena", p->part_bytes[k], st);
    if (d->vt->async) {
        pt->q = d->vt->queue_new(d);
        if (e->env->opt->check_numerics && !(pt->host_out = malloc(largest_output(e, k) + 4)))
            return no_room(e, "host copy for --check-numerics", largest_output(e, k), st);
    } else if (!(pt->pool = cpu_pool_new(threads > 0 ? threads : 1))) {
        return rt_fail(st, GR_ERR_INTERNAL, "cannot start the threads of partition %d\n", k);
    }
    size_t bytes = p->scratch_task_bytes * (size_t)(pt->pool ? cpu_pool_size(pt->pool) : 1);
    if (!(pt->scratch = d->vt->alloc(d, bytes))) return no_room(e, "kernel scratch", bytes, st);
    return GR_OK;
}

/* The executor's share of the thread budget is split over its partitions
 * (each gets at least one thread). */
static gr_code alloc_parts(rt_exec *e, gr_status *st)
{
    int per = e->env->opt->threads / e->env->opt->executors / e->p->n_parts;
    e->parts = base_xcalloc((size_t)e->n_parts, sizeof *e->parts);
    gr_code c = GR_OK;
    for (int k = 0; k < e->n_parts && c == GR_OK; k++) c = alloc_part(e, k, per, st);
    return c;
}

/* A view of a tensor on an async device is a host copy the executor keeps
 * (valid as long as a view of host memory is). */
static gr_code alloc_views(rt_exec *e, gr_status *st)
{
    e->views = base_xcalloc((size_t)e->p->n_roots + 1, sizeof *e->views);
    for (int r = 1; r < e->p->n_roots; r++) {
        int id = e->p->roots[r];
        size_t bytes = ir_nbytes(&e->p->g->nodes[id].type);
        if (!e->parts[e->p->part[id]].dev->vt->async) continue;
        if (!(e->views[r] = malloc(bytes ? bytes : 1)))
            return no_room(e, "host copy of a fetch", bytes, st);
    }
    return GR_OK;
}

gr_code exec_new(const exec_env *env, const plan_graph *p, rt_exec **out, gr_status *st)
{
    rt_exec *e = base_xcalloc(1, sizeof *e);
    e->env = env;
    e->p = p;
    e->n_parts = p->n_parts;
    e->buf = base_xcalloc((size_t)p->g->n_nodes + 1, sizeof *e->buf);
    gr_code c = alloc_parts(e, st);
    if (c == GR_OK) c = alloc_views(e, st);
    if (c == GR_OK) {
        bind_buffers(e);
        c = prepare_calls(e, st);
    }
    if (c == GR_OK) {
        sched_build(e);
        stale_build(e);
        prepare_data(e);
        c = parts_link(e, st);
    }
    if (c == GR_OK) c = parts_start(e, st);
    if (c != GR_OK) {
        exec_free(e);
        e = NULL;
    }
    *out = e;
    return c;
}

static void free_part(exec_part *pt)
{
    device_obj *d = pt->dev;
    if (!d) return;
    if (pt->q) d->vt->queue_free(d, pt->q);
    cpu_pool_free(pt->pool);
    if (pt->scratch) d->vt->free(d, pt->scratch);
    if (pt->arena) d->vt->free(d, pt->arena);
    free(pt->host_out);
    free(pt->send0);
}

void exec_free(rt_exec *e)
{
    if (!e) return;
    parts_stop(e);
    sched_free(e);
    stale_free(e);
    for (int k = 0; e->parts && k < e->n_parts; k++) free_part(&e->parts[k]);
    for (int r = 0; e->views && r < e->p->n_roots; r++) free(e->views[r]);
    free(e->views);
    free(e->parts);
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
        device_obj *d = e->parts[e->p->part[node]].dev; /* queues are idle between steps */
        d->vt->to_device(d, e->buf[node], feeds[k].data, want);
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
        device_obj *d = e->parts[e->p->part[id]].dev; /* every queue is synced */
        if (!fetches[k].data && e->buf[id]) {         /* a view: the arena, or a host copy */
            if (d->vt->async) d->vt->to_host(d, e->views[k + 1], e->buf[id], ir_nbytes(t));
            fetches[k].view = d->vt->async ? e->views[k + 1] : e->buf[id];
            *views = 1;
            continue;
        }
        if (fetches[k].bytes != ir_nbytes(t) || !e->buf[id]) {
            char b[96];
            return rt_fail(st, GR_ERR_ARG, "fetch '%s': got %zu bytes, but %s needs %zu\n",
                           fetches[k].name, fetches[k].bytes, ir_type_str(t, b, sizeof b),
                           ir_nbytes(t));
        }
        d->vt->to_host(d, fetches[k].data, e->buf[id], fetches[k].bytes);
    }
    return GR_OK;
}

gr_code exec_run(rt_exec *e, const gr_feed *feeds, int n_feeds, gr_fetch *fetches, int n_fetches,
                 int *views, gr_status *st)
{
    gr_code c = bind_feeds(e, feeds, n_feeds, st);
    if (c == GR_OK) c = take_batches(e, st);
    if (c != GR_OK) return c;
    uint64_t step = atomic_fetch_add(e->env->steps, 1);
    for (int i = 0; i < e->n_calls; i++) e->args[i].step = step; /* dropout's mask */
    stale_begin(e);
    c = parts_run(e, st);
    if (c == GR_OK) stale_end(e);
    if (c == GR_OK) c = copy_fetches(e, fetches, n_fetches, views, st);
    give_batches(e);
    return c;
}
