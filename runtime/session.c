/* session.c - sessions: the variable store, data readers, plans and their
 * executor pools, and the thread-safe gr_run / gr_eval entry points. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist.h"
#include "runtime.h"

/* Live sessions, by pointer and id.  Debug builds look a session up on
 * every call, so a call on a freed one gets a clear status instead of
 * touching freed memory; every build asks whether a thread's held view
 * (below) still has its session. */
typedef struct live_session {
    const gr_session *s;
    uint64_t id;
} live_session;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static live_session *live;
static int n_live, cap_live;

static void live_add(const gr_session *s)
{
    pthread_mutex_lock(&live_mu);
    if (n_live == cap_live) {
        cap_live = cap_live ? 2 * cap_live : 16;
        live = xreallocarray(live, (size_t)cap_live, sizeof *live);
    }
    live[n_live++] = (live_session){s, s->id};
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(const gr_session *s)
{
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < n_live; i++)
        if (live[i].s == s) {
            live[i] = live[--n_live];
            break;
        }
    pthread_mutex_unlock(&live_mu);
}

/* By pointer (s) or, with s NULL, by id. */
static int live_find(const gr_session *s, uint64_t id)
{
    int found = 0;
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < n_live && !found; i++) found = s ? live[i].s == s : live[i].id == id;
    pthread_mutex_unlock(&live_mu);
    return found;
}

#ifndef NDEBUG
static int live_has(const gr_session *s)
{
    return live_find(s, 0);
}
#else
static int live_has(const gr_session *s)
{
    return s != NULL;
}
#endif

/* NULL, freed (debug builds) or fine. */
static gr_code check_session(const gr_session *s, const char *fn, gr_status *st)
{
    if (!s) return rt_fail(st, GR_ERR_ARG, "%s: session is NULL\n", fn);
    if (!live_has(s))
        return rt_fail(st, GR_ERR_ARG, "%s: session was freed (or never created)\n", fn);
    return GR_OK;
}

device_obj *rt_device(const gr_session *s, int dev)
{
    for (int i = 0; i < s->n_devs; i++)
        if (s->devs[i]->id == dev) return s->devs[i];
    fatal("no device object for device %d", dev); /* compile.c placed nothing else */
}

static void add_device(gr_session *s, int dev)
{
    for (int i = 0; i < s->n_devs; i++)
        if (s->devs[i]->id == dev) return;
    device_obj *d = machine_device_new(&s->prog->machine, dev);
    if (!d) fatal("device %d has no implementation", dev); /* compile.c checked kernels */
    s->devs[s->n_devs++] = d;
}

/* One object per device a variable or a live node sits on. */
static void open_devices(gr_session *s)
{
    const ir_graph *g = s->g;
    s->devs = xcalloc((size_t)(g->n_vars + g->n_nodes) + 1, sizeof *s->devs);
    add_device(s, IR_DEV(DEV_CPU, 0)); /* the host: data sources, staging */
    for (int i = 0; i < g->n_vars; i++) add_device(s, g->vars[i].device);
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead) add_device(s, g->nodes[i].device);
}

/* Initialised on the host, then copied to the variable's device, so values
 * are the same bit for bit on every device. */
static gr_code init_var(gr_session *s, int i, gr_status *st)
{
    const ir_var *v = &s->g->vars[i];
    device_obj *d = rt_device(s, v->device);
    size_t n = ir_nbytes(&v->type);
    char h[32];
    if (!(s->var[i] = d->vt->alloc(d, n)))
        return rt_fail_at(st, GR_ERR_NOMEM, &s->g->nodes[v->node],
                          "cannot allocate variable '%s' on %s: %s", v->name, d->vt->name,
                          rt_human_bytes(n, h, sizeof h));
    if (!d->vt->async) {
        rt_init_var(v, s->var[i], s->opt.seed);
        return GR_OK;
    }
    float *host = malloc(n ? n : 1);
    if (!host)
        return rt_fail_at(st, GR_ERR_NOMEM, &s->g->nodes[v->node],
                          "cannot allocate the host copy of variable '%s': %s", v->name,
                          rt_human_bytes(n, h, sizeof h));
    rt_init_var(v, host, s->opt.seed);
    d->vt->to_device(d, s->var[i], host, n);
    free(host);
    return GR_OK;
}

static gr_code init_vars(gr_session *s, gr_status *st)
{
    const ir_graph *g = s->g;
    s->var = xcalloc((size_t)g->n_vars + 1, sizeof *s->var);
    s->var_mu = xcalloc((size_t)g->n_vars + 1, sizeof *s->var_mu);
    for (int i = 0; i < g->n_vars; i++) pthread_mutex_init(&s->var_mu[i], NULL);
    gr_code c = GR_OK;
    for (int i = 0; i < g->n_vars && c == GR_OK; i++) c = init_var(s, i, st);
    return c;
}

gr_code gr_session_new(const gr_program *p, const gr_session_options *opt, gr_session **out,
                       gr_status *st)
{
    *out = NULL;
    if (!p) return rt_fail(st, GR_ERR_ARG, "gr_session_new: program is NULL\n");
    static atomic_uint_fast64_t next_id = 1;
    gr_session *s = xcalloc(1, sizeof *s);
    s->id = atomic_fetch_add(&next_id, 1);
    s->prog = p;
    s->g = p->g;
    if (opt) s->opt = *opt;
    if (s->opt.threads <= 0) s->opt.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s->opt.threads <= 0) s->opt.threads = 1;
    if (s->opt.executors <= 0) s->opt.executors = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->readers_mu, NULL);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* a waiting snapshot must not starve behind a stream of runs */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->pause, &ra);
    pthread_rwlockattr_destroy(&ra);
    s->readers = xcalloc((size_t)s->g->n_data + 1, sizeof *s->readers);
    cpu_blas_init();
    open_devices(s);
    gr_code c = init_vars(s, st);
    if (c == GR_OK && p->distributed) c = dist_open(s, st);
    if (c == GR_OK && s->opt.tensorboard_dir) c = rt_summary_open(s, s->opt.tensorboard_dir, st);
    s->opt.tensorboard_dir = NULL; /* the caller's string: not kept */
    if (c != GR_OK) {
        gr_session_free(s);
        return c;
    }
    live_add(s);
    *out = s;
    rt_ok(st);
    return GR_OK;
}

static void forget_held(const gr_session *s);

void gr_session_free(gr_session *s)
{
    if (!s) return;
    live_remove(s);
    forget_held(s);
    rt_summary_close(s);
    for (int i = 0; i < s->n_plans; i++) {
        rt_plan_entry *pe = &s->plans[i];
        for (int k = 0; k < pe->n_all; k++) exec_free(pe->all[k]); /* views held too */
        free(pe->all);
        free(pe->free_execs);
        plan_free(pe->plan);
        for (int k = 0; k <= pe->n_fetches; k++) free(pe->names[k]);
        free(pe->names);
    }
    free(s->plans);
    dist_close(s->dist);
    for (int i = 0; i < s->g->n_data; i++) data_close(s->readers[i]);
    free((void *)s->readers);
    for (int i = 0; s->var && i < s->g->n_vars; i++) {
        device_obj *d = rt_device(s, s->g->vars[i].device);
        if (s->var[i]) d->vt->free(d, s->var[i]);
        pthread_mutex_destroy(&s->var_mu[i]);
    }
    free(s->var);
    free(s->var_mu);
    for (int i = 0; i < s->n_devs; i++) s->devs[i]->vt->close(s->devs[i]);
    free(s->devs);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->readers_mu);
    pthread_rwlock_destroy(&s->pause);
    free(s);
}

static void list_names(const ir_graph *g, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n_names && used + 2 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", g->names[i].name);
}

static int rt_find_tensor(const gr_session *s, const char *name, gr_status *st)
{
    int k = name ? ir_find_name(s->g, name) : -1;
    if (k >= 0) return s->g->names[k].node;
    int v = name ? ir_find_var(s->g, name) : -1;
    if (v >= 0) return s->g->vars[v].node;
    char names[512];
    list_names(s->g, names, sizeof names);
    rt_fail(st, GR_ERR_ARG, "no target or tensor named '%s' (the program has: %s)\n",
            name ? name : "(null)", names);
    return -1;
}

/* Loading a data set can take seconds: it happens under readers_mu, never
 * s->mu, so runs of plans that are ready go on meanwhile. */
gr_code rt_open_reader(gr_session *s, int di, gr_status *st)
{
    if (s->readers[di]) return GR_OK;
    const ir_data *d = &s->g->data[di];
    data_spec spec;
    char err[512];
    rt_data_spec(d, &spec);
    spec.seed ^= s->opt.seed;
    spec.shards = dist_data_shards(s->dist, di);
    spec.shard = spec.shards > 1 ? dist_rank(s->dist) : 0;
    pthread_mutex_lock(&s->readers_mu);
    data_reader *r = s->readers[di] ? s->readers[di] : data_open(&spec, err, sizeof err);
    if (r) s->readers[di] = r;
    pthread_mutex_unlock(&s->readers_mu);
    if (r) return GR_OK;
    int line = 0, col = 0;
    src_linecol(d->src, d->span.begin, &line, &col);
    return rt_fail(st, GR_ERR_DATA, "%s:%d:%d: error: data '%s': %s\n", d->src->name, line, col,
                   d->name, err);
}

static gr_code open_readers(gr_session *s, const plan_graph *p, gr_status *st)
{
    gr_code c = GR_OK;
    for (int k = 0; k < p->n_data_used && c == GR_OK; k++)
        c = rt_open_reader(s, p->data_used[k], st);
    return c;
}

/* FNV-1a over the target and fetch names, each ended by its NUL, so that
 * ("ab") and ("a", "b") differ. */
static uint64_t plan_hash(const char *target, const gr_fetch *fetches, int n_fetches)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = -1; i < n_fetches; i++) {
        const unsigned char *c = (const unsigned char *)(i < 0 ? target : fetches[i].name);
        do h = (h ^ *c) * 0x100000001b3ull;
        while (*c++);
    }
    return h;
}

static int plan_matches(const rt_plan_entry *pe, uint64_t h, const char *target,
                        const gr_fetch *fetches, int n_fetches)
{
    if (pe->hash != h || pe->n_fetches != n_fetches || strcmp(pe->names[0], target)) return 0;
    for (int i = 0; i < n_fetches; i++)
        if (strcmp(pe->names[i + 1], fetches[i].name)) return 0;
    return 1;
}

/* Root 0 is the target, root k + 1 fetch k: the executor copies fetches
 * out by these ids, so names are looked up only here. */
static plan_graph *new_plan(gr_session *s, const char *target, const gr_fetch *fetches,
                            int n_fetches, gr_status *st)
{
    int *roots = xcalloc((size_t)n_fetches + 1, sizeof *roots);
    plan_graph *p = NULL;
    int ok = (roots[0] = rt_find_tensor(s, target, st)) >= 0;
    for (int i = 0; ok && i < n_fetches; i++) {
        if (!fetches[i].name) ok = rt_fail(st, GR_ERR_ARG, "fetch %d has no name\n", i) == GR_OK;
        ok = ok && (roots[i + 1] = rt_find_tensor(s, fetches[i].name, st)) >= 0;
    }
    if (ok) p = plan_build(s->g, roots, n_fetches + 1);
    free(roots);
    return p;
}

static int find_plan(const gr_session *s, uint64_t h, const char *target, const gr_fetch *fetches,
                     int n_fetches)
{
    for (int i = 0; i < s->n_plans; i++)
        if (plan_matches(&s->plans[i], h, target, fetches, n_fetches)) return i;
    return -1;
}

/* Under s->mu: p becomes plan entry *pi, unless another thread added the
 * same request meanwhile (then p is freed and that one is used). */
static void insert_plan(gr_session *s, uint64_t h, plan_graph *p, const char *target,
                        const gr_fetch *fetches, int n_fetches, int *pi)
{
    if ((*pi = find_plan(s, h, target, fetches, n_fetches)) >= 0) {
        plan_free(p);
        return;
    }
    if (s->n_plans == s->cap_plans) {
        s->cap_plans = s->cap_plans ? 2 * s->cap_plans : 4;
        s->plans = xreallocarray(s->plans, (size_t)s->cap_plans, sizeof *s->plans);
    }
    int k = ir_find_name(s->g, target);
    rt_plan_entry *pe = &s->plans[ *pi = s->n_plans++];
    *pe = (rt_plan_entry){.hash = h,
                          .names = xcalloc((size_t)n_fetches + 1, sizeof(char *)),
                          .n_fetches = n_fetches,
                          .plan = p,
                          .is_train = k >= 0 && s->g->names[k].is_train};
    pe->names[0] = xstrdup(target);
    for (int i = 0; i < n_fetches; i++) pe->names[i + 1] = xstrdup(fetches[i].name);
}

/* The plan for (target, fetches): found by hash under s->mu, or made
 * outside it (planning and opening data sources take time) and added.
 * Plans are never removed, but the array may move: *pi is an index. */
static gr_code session_plan(gr_session *s, const char *target, const gr_fetch *fetches,
                            int n_fetches, int *pi, gr_status *st)
{
    for (int i = 0; i < n_fetches; i++)
        if (!fetches[i].name) return rt_fail(st, GR_ERR_ARG, "fetch %d has no name\n", i);
    uint64_t h = plan_hash(target, fetches, n_fetches);
    pthread_mutex_lock(&s->mu);
    *pi = find_plan(s, h, target, fetches, n_fetches);
    pthread_mutex_unlock(&s->mu);
    if (*pi >= 0) return GR_OK;
    plan_graph *p = new_plan(s, target, fetches, n_fetches, st);
    if (!p) return GR_ERR_ARG;
    gr_code c = open_readers(s, p, st);
    if (c != GR_OK) {
        plan_free(p);
        return c;
    }
    pthread_mutex_lock(&s->mu);
    insert_plan(s, h, p, target, fetches, n_fetches, pi);
    pthread_mutex_unlock(&s->mu);
    return GR_OK;
}

/* A free executor of plan pi, or a new one, made outside s->mu. */
static gr_code exec_take(gr_session *s, int pi, rt_exec **out, gr_status *st)
{
    pthread_mutex_lock(&s->mu);
    rt_plan_entry *pe = &s->plans[pi];
    rt_exec *e = pe->n_free ? pe->free_execs[--pe->n_free] : NULL;
    const plan_graph *p = pe->plan;
    pthread_mutex_unlock(&s->mu);
    *out = e;
    if (e) return GR_OK;
    gr_code c = exec_new(s, p, &e, st);
    if (c != GR_OK) return c;
    *out = e;
    pthread_mutex_lock(&s->mu);
    pe = &s->plans[pi];
    if (pe->n_all == pe->cap_all) {
        pe->cap_all = pe->cap_all ? 2 * pe->cap_all : 4;
        pe->all = xreallocarray(pe->all, (size_t)pe->cap_all, sizeof *pe->all);
    }
    pe->all[pe->n_all++] = e;
    pthread_mutex_unlock(&s->mu);
    return GR_OK;
}

/* Finds (or makes) the plan and takes an executor for it. */
static gr_code acquire(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                       rt_exec **e, int *plan_index, int *is_train, gr_status *st)
{
    *e = NULL;
    if (n_fetches < 0 || (n_fetches > 0 && !fetches))
        return rt_fail(st, GR_ERR_ARG, "%d fetches, but no fetch array\n", n_fetches);
    gr_code c = session_plan(s, target, fetches, n_fetches, plan_index, st);
    if (c != GR_OK) return c;
    pthread_mutex_lock(&s->mu);
    *is_train = s->plans[*plan_index].is_train;
    pthread_mutex_unlock(&s->mu);
    return exec_take(s, *plan_index, e, st);
}

static void release(gr_session *s, int plan_index, rt_exec *e)
{
    pthread_mutex_lock(&s->mu);
    rt_plan_entry *pe = &s->plans[plan_index];
    if (pe->n_free == pe->cap_free) {
        pe->cap_free = pe->cap_free ? 2 * pe->cap_free : 4;
        pe->free_execs =
            xreallocarray(pe->free_execs, (size_t)pe->cap_free, sizeof *pe->free_execs);
    }
    pe->free_execs[pe->n_free++] = e;
    pthread_mutex_unlock(&s->mu);
}

/* Zero-copy fetches point into an executor's arena, so that executor stays
 * with the thread (out of the free list) until the thread's next call on
 * the session.  Slots are matched by session id, never by pointer alone: a
 * stale slot of a freed session is dropped untouched (gr_session_free freed
 * its executor already). */
#define HELD_SLOTS 8
typedef struct held_exec {
    uint64_t session_id;
    int plan_index;
    rt_exec *e;
} held_exec;
static _Thread_local held_exec held[HELD_SLOTS];

static void drop_held(gr_session *s)
{
    for (int i = 0; i < HELD_SLOTS; i++)
        if (held[i].e && held[i].session_id == s->id) {
            release(s, held[i].plan_index, held[i].e);
            held[i].e = NULL;
        }
}

/* The session is going away with all its executors: this thread's views of
 * it end here. */
static void forget_held(const gr_session *s)
{
    for (int i = 0; i < HELD_SLOTS; i++)
        if (held[i].session_id == s->id) held[i].e = NULL;
}

/* A free slot, or one whose session another thread has freed since (its
 * executor went with the session). */
static int keep_held(gr_session *s, int plan_index, rt_exec *e)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < HELD_SLOTS; i++)
            if (!held[i].e || (pass && !live_find(NULL, held[i].session_id))) {
                held[i] = (held_exec){s->id, plan_index, e};
                return 0;
            }
    return -1;
}

gr_code gr_prepare(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                   gr_status *st)
{
    gr_code bad = check_session(s, "gr_prepare", st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target) return rt_fail(st, GR_ERR_ARG, "gr_prepare: target is NULL\n");
    int pi = 0, is_train;
    rt_exec *e;
    gr_code c = acquire(s, target, fetches, n_fetches, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    release(s, pi, e);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_run(gr_session *s, const char *target, const gr_feed *feeds, int n_feeds,
               gr_fetch *fetches, int n_fetches, gr_status *st)
{
    gr_code bad = check_session(s, "gr_run", st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target) return rt_fail(st, GR_ERR_ARG, "gr_run: target is NULL\n");
    int pi = 0, is_train = 0;
    rt_exec *e;
    gr_code c = acquire(s, target, fetches, n_fetches, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    int views = 0, dist = is_train && s->dist;
    if (dist) c = dist_step_begin(s, st);
    pthread_rwlock_rdlock(&s->pause);
    if (c == GR_OK) c = exec_run(e, feeds, n_feeds, fetches, n_fetches, &views, st);
    /* counted under the pause lock: a checkpoint's step matches its variables */
    if (c == GR_OK && is_train) atomic_fetch_add(&s->train_steps, 1);
    pthread_rwlock_unlock(&s->pause);
    if (dist) {
        gr_code end = dist_step_end(s, c == GR_OK, st);
        if (c == GR_OK) c = end;
    }
    if (c == GR_OK && views && keep_held(s, pi, e) < 0)
        c = rt_fail(st, GR_ERR_ARG,
                    "gr_run: this thread holds zero-copy views on %d sessions "
                    "already\n",
                    HELD_SLOTS);
    else if (c == GR_OK && views)
        e = NULL;
    if (e) release(s, pi, e);
    if (c == GR_OK) rt_ok(st);
    return c;
}

/* Batches in one pass over the data a plan reads (1 if it reads none). */
static int64_t eval_batches(gr_session *s, const plan_graph *p)
{
    int64_t nb = 0;
    for (int k = 0; k < p->n_data_used; k++) {
        const ir_data *d = &s->g->data[p->data_used[k]];
        int64_t b = d->n / (d->batch * dist_data_shards(s->dist, p->data_used[k]));
        if (nb == 0 || b < nb) nb = b;
    }
    return nb ? nb : 1;
}

/* Whether the processes each evaluate a share of the data (so the mean is
 * theirs together), not all of it. */
static int eval_sharded(const gr_session *s, const plan_graph *p)
{
    for (int k = 0; k < p->n_data_used; k++)
        if (dist_data_shards(s->dist, p->data_used[k]) > 1) return 1;
    return 0;
}

/* An evaluation reads its sources from the start, then puts each cursor
 * back, so evaluating on the training source does not disturb training. */
static void eval_cursors(gr_session *s, const plan_graph *p, uint64_t (*saved)[2], int restore)
{
    for (int k = 0; k < p->n_data_used; k++) {
        data_reader *r = s->readers[p->data_used[k]];
        if (restore) {
            data_seek(r, saved[k][0], saved[k][1]);
            continue;
        }
        data_cursor(r, &saved[k][0], &saved[k][1]);
        data_seek(r, 0, 0);
    }
}

gr_code gr_eval(gr_session *s, const char *target, double *value, gr_status *st)
{
    gr_code bad = check_session(s, "gr_eval", st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target || !value) return rt_fail(st, GR_ERR_ARG, "gr_eval: NULL argument\n");
    int id = rt_find_tensor(s, target, st);
    if (id < 0) return GR_ERR_ARG;
    const ir_type *t = &s->g->nodes[id].type;
    if (ir_numel(t) != 1 || t->dtype != DT_F32) {
        char b[96];
        return rt_fail(st, GR_ERR_ARG, "gr_eval: '%s' is %s, not a scalar\n", target,
                       ir_type_str(t, b, sizeof b));
    }
    float x;
    gr_fetch f = {target, &x, sizeof x, NULL};
    int pi = 0;
    rt_exec *e;
    int is_train;
    gr_code c = acquire(s, target, &f, 1, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    const plan_graph *plan = exec_plan(e); /* s->plans may move: not read unlocked */
    if (s->dist) dist_refresh(s);
    int64_t nb = eval_batches(s, plan);
    uint64_t(*saved)[2] = xcalloc((size_t)plan->n_data_used + 1, sizeof *saved);
    /* The whole pass holds the pause lock: no run takes a batch from a
     * cursor the pass has moved (training beside it once re-read the epoch's
     * first batches), and the pass sees one set of weights. */
    pthread_rwlock_wrlock(&s->pause);
    eval_cursors(s, plan, saved, 0);
    double sum = 0;
    for (int64_t b = 0; b < nb && c == GR_OK; b++) {
        int views = 0;
        c = exec_run(e, NULL, 0, &f, 1, &views, st);
        sum += x;
    }
    eval_cursors(s, plan, saved, 1);
    pthread_rwlock_unlock(&s->pause);
    free(saved);
    release(s, pi, e);
    if (c == GR_OK && eval_sharded(s, plan)) c = dist_eval_total(s, &sum, &nb, st);
    *value = sum / (double)nb;
    if (c == GR_OK) rt_ok(st);
    return c;
}

static gr_code var_find(gr_session *s, const char *name, int *vi, gr_status *st)
{
    gr_code bad = check_session(s, "variable access", st);
    if (bad != GR_OK) return bad;
    if (!name) return rt_fail(st, GR_ERR_ARG, "variable access: name is NULL\n");
    *vi = ir_find_var(s->g, name);
    if (*vi < 0) return rt_fail(st, GR_ERR_ARG, "no variable named '%s'\n", name);
    return GR_OK;
}

static gr_code var_lookup(gr_session *s, const char *name, size_t bytes, int *vi, gr_status *st)
{
    gr_code c = var_find(s, name, vi, st);
    if (c != GR_OK) return c;
    size_t want = ir_nbytes(&s->g->vars[*vi].type);
    if (bytes != want)
        return rt_fail(st, GR_ERR_ARG, "variable '%s' has %zu bytes, not %zu\n", name, want, bytes);
    return GR_OK;
}

gr_code gr_variable_read(gr_session *s, const char *name, void *data, size_t bytes, gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, name, bytes, &vi, st);
    if (c != GR_OK) return c;
    device_obj *d = rt_device(s, s->g->vars[vi].device);
    pthread_rwlock_wrlock(&s->pause);
    d->vt->to_host(d, data, s->var[vi], bytes);
    pthread_rwlock_unlock(&s->pause);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_variable_get(gr_session *s, const char *name, gr_tensor **out, gr_status *st)
{
    if (!out) return rt_fail(st, GR_ERR_ARG, "gr_variable_get: out is NULL\n");
    *out = NULL;
    int vi = -1;
    gr_code c = var_find(s, name, &vi, st);
    if (c == GR_OK) c = rt_tensor_like(&s->g->vars[vi].type, out, st);
    if (c != GR_OK) return c;
    device_obj *d = rt_device(s, s->g->vars[vi].device);
    pthread_rwlock_wrlock(&s->pause);
    d->vt->to_host(d, gr_tensor_data(*out), s->var[vi], gr_tensor_bytes(*out));
    pthread_rwlock_unlock(&s->pause);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_variable_write(gr_session *s, const char *name, const void *data, size_t bytes,
                          gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, name, bytes, &vi, st);
    if (c != GR_OK) return c;
    device_obj *d = rt_device(s, s->g->vars[vi].device);
    pthread_rwlock_wrlock(&s->pause);
    d->vt->to_device(d, s->var[vi], data, bytes);
    pthread_rwlock_unlock(&s->pause);
    rt_ok(st);
    return GR_OK;
}

void gr_session_dist_info(const gr_session *s, int *rank, int *size, double *comm_secs)
{
    const rt_dist *d = s ? s->dist : NULL;
    if (rank) *rank = dist_rank(d);
    if (size) *size = dist_size(d);
    if (comm_secs) *comm_secs = dist_comm_seconds(d);
}

gr_code gr_session_dist_agree(gr_session *s, const char *what, const char *value, gr_status *st)
{
    gr_code bad = check_session(s, "gr_session_dist_agree", st);
    if (bad != GR_OK) return bad;
    if (!what || !value) return rt_fail(st, GR_ERR_ARG, "gr_session_dist_agree: NULL argument\n");
    if (s->dist) return dist_agree(s, what, value, st);
    rt_ok(st);
    return GR_OK;
}
