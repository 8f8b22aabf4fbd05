/* session.c - sessions: the variable store, data readers, plans and their
 * executor pools, and the thread-safe gr_run / gr_eval entry points. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/dist/dist.h"
#include "runtime/eval_rows.h"
#include "runtime/runtime.h"

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
        live = base_xreallocarray(live, (size_t)cap_live, sizeof *live);
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

/* The program may have been compiled for another machine (--devices):
 * a device this one lacks is an error here. */
static gr_code add_device(gr_session *s, int dev, gr_status *st)
{
    for (int i = 0; i < s->n_devs; i++)
        if (s->devs[i]->id == dev) return GR_OK;
    gr_code c = machine_device_new(&s->prog->machine, dev, &s->devs[s->n_devs], st);
    if (c == GR_OK) s->n_devs++;
    return c;
}

/* One object per device a variable or a live node sits on. */
static gr_code open_devices(gr_session *s, gr_status *st)
{
    const ir_graph *g = s->g;
    s->devs = base_xcalloc((size_t)(g->n_vars + g->n_nodes) + 1, sizeof *s->devs);
    gr_code c = add_device(s, IR_DEV(DEV_CPU, 0), st); /* the host: data sources, staging */
    for (int i = 0; c == GR_OK && i < g->n_vars; i++) c = add_device(s, g->vars[i].device, st);
    for (int i = 0; c == GR_OK && i < g->n_nodes; i++)
        if (!g->nodes[i].dead) c = add_device(s, g->nodes[i].device, st);
    return c;
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
    s->var = base_xcalloc((size_t)g->n_vars + 1, sizeof *s->var);
    s->var_mu = base_xcalloc((size_t)g->n_vars + 1, sizeof *s->var_mu);
    for (int i = 0; i < g->n_vars; i++) pthread_mutex_init(&s->var_mu[i], NULL);
    gr_code c = GR_OK;
    for (int i = 0; i < g->n_vars && c == GR_OK; i++) c = init_var(s, i, st);
    return c;
}

/* gr_session_options.threads and .executors (graphrun.h) */
#define SESSION_MAX_THREADS 1024

/* A field of gr_session_options outside [lo, hi], reported; 0 when inside. */
static int opt_out_of_range(const char *field, int v, int lo, int hi, gr_status *st)
{
    if (v >= lo && v <= hi) return 0;
    rt_fail(st, GR_ERR_ARG, "gr_session_new: options.%s is %d, outside [%d, %d]\n", field, v, lo,
            hi);
    return 1;
}

static gr_code check_session_options(const gr_session_options *o, gr_status *st)
{
    if (opt_out_of_range("threads", o->threads, 0, SESSION_MAX_THREADS, st) ||
        opt_out_of_range("executors", o->executors, 0, SESSION_MAX_THREADS, st) ||
        opt_out_of_range("sync_every", o->sync_every, 0, INT_MAX, st))
        return GR_ERR_ARG;
    return GR_OK;
}

gr_code gr_session_new(const gr_program *p, const gr_session_options *opt, gr_session **out,
                       gr_status *st)
{
    if (!out) return rt_null(st, "gr_session_new", "out");
    *out = NULL;
    if (!p) return rt_null(st, "gr_session_new", "program");
    if (opt && check_session_options(opt, st) != GR_OK) return GR_ERR_ARG;
    static atomic_uint_fast64_t next_id = 1;
    gr_session *s = base_xcalloc(1, sizeof *s);
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
    s->readers = base_xcalloc((size_t)s->g->n_data + 1, sizeof *s->readers);
    cpu_blas_init();
    gr_code c = open_devices(s, st);
    if (c == GR_OK) c = init_vars(s, st);
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
static gr_code new_plan(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                        plan_graph **p, gr_status *st)
{
    int *roots = base_xcalloc((size_t)n_fetches + 1, sizeof *roots);
    int ok = (roots[0] = rt_find_tensor(s, target, st)) >= 0;
    for (int i = 0; ok && i < n_fetches; i++)
        ok = (roots[i + 1] = rt_find_tensor(s, fetches[i].name, st)) >= 0;
    *p = ok ? rt_plan_build(s->g, roots, n_fetches + 1, st) : NULL;
    free(roots);
    return !ok ? GR_ERR_ARG : *p ? GR_OK : GR_ERR_NOMEM;
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
        s->plans = base_xreallocarray(s->plans, (size_t)s->cap_plans, sizeof *s->plans);
    }
    int k = ir_find_name(s->g, target);
    rt_plan_entry *pe = &s->plans[ *pi = s->n_plans++];
    *pe = (rt_plan_entry){.hash = h,
                          .names = base_xcalloc((size_t)n_fetches + 1, sizeof(char *)),
                          .n_fetches = n_fetches,
                          .plan = p,
                          .is_train = k >= 0 && s->g->names[k].is_train};
    pe->names[0] = base_xstrdup(target);
    for (int i = 0; i < n_fetches; i++) pe->names[i + 1] = base_xstrdup(fetches[i].name);
}

/* The plan for (target, fetches): found by hash under s->mu, or made
 * outside it (planning and opening data sources take time) and added.
 * Plans are never removed, but the array may move: *pi is an index. */
static gr_code session_plan(gr_session *s, const char *target, const gr_fetch *fetches,
                            int n_fetches, int *pi, gr_status *st)
{
    uint64_t h = plan_hash(target, fetches, n_fetches);
    pthread_mutex_lock(&s->mu);
    *pi = find_plan(s, h, target, fetches, n_fetches);
    pthread_mutex_unlock(&s->mu);
    if (*pi >= 0) return GR_OK;
    plan_graph *p;
    gr_code c = new_plan(s, target, fetches, n_fetches, &p, st);
    if (c != GR_OK) return c;
    c = open_readers(s, p, st);
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
        pe->all = base_xreallocarray(pe->all, (size_t)pe->cap_all, sizeof *pe->all);
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
            base_xreallocarray(pe->free_execs, (size_t)pe->cap_free, sizeof *pe->free_execs);
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

/* The arguments gr_run and gr_prepare share: the target, the counts, the
 * arrays and the names in them; a feed given twice. */
static gr_code check_fetches(const char *fn, const gr_fetch *fetches, int n_fetches, gr_status *st)
{
    if (n_fetches < 0) return rt_fail(st, GR_ERR_ARG, "%s: n_fetches is %d\n", fn, n_fetches);
    if (n_fetches > 0 && !fetches) return rt_null(st, fn, "fetches");
    for (int k = 0; k < n_fetches; k++)
        if (!fetches[k].name)
            return rt_fail(st, GR_ERR_ARG, "%s: fetches[%d].name is NULL\n", fn, k);
    return GR_OK;
}

static gr_code check_feeds(const gr_feed *feeds, int n_feeds, gr_status *st)
{
    if (n_feeds < 0) return rt_fail(st, GR_ERR_ARG, "gr_run: n_feeds is %d\n", n_feeds);
    if (n_feeds > 0 && !feeds) return rt_null(st, "gr_run", "feeds");
    for (int k = 0; k < n_feeds; k++) {
        if (!feeds[k].name || !feeds[k].data)
            return rt_fail(st, GR_ERR_ARG, "gr_run: feeds[%d].%s is NULL\n", k,
                           feeds[k].name ? "data" : "name");
        for (int j = 0; j < k; j++)
            if (strcmp(feeds[j].name, feeds[k].name) == 0)
                return rt_fail(st, GR_ERR_ARG,
                               "gr_run: feeds[%d] feeds '%s' again (feeds[%d] did)\n", k,
                               feeds[k].name, j);
    }
    return GR_OK;
}

gr_code gr_prepare(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                   gr_status *st)
{
    gr_code bad = check_session(s, "gr_prepare", st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target) return rt_null(st, "gr_prepare", "target");
    if (check_fetches("gr_prepare", fetches, n_fetches, st) != GR_OK) return GR_ERR_ARG;
    int pi = 0, is_train;
    rt_exec *e;
    gr_code c = acquire(s, target, fetches, n_fetches, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    release(s, pi, e);
    rt_ok(st);
    return GR_OK;
}

/* A train run may start below GR_MAX_STEPS only: the step counters cannot
 * overflow, and every step a session reaches restores from its checkpoint. */
static gr_code step_room(gr_session *s, gr_status *st)
{
    uint64_t n = atomic_load(&s->train_steps);
    if (n < GR_MAX_STEPS) return GR_OK;
    return rt_fail(st, GR_ERR_ARG,
                   "gr_run: the session is at step %llu, GR_MAX_STEPS (2^53): no further "
                   "training step is counted\n",
                   (unsigned long long)n);
}

gr_code gr_run(gr_session *s, const char *target, const gr_feed *feeds, int n_feeds,
               gr_fetch *fetches, int n_fetches, gr_status *st)
{
    gr_code bad = check_session(s, "gr_run", st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target) return rt_null(st, "gr_run", "target");
    if (check_feeds(feeds, n_feeds, st) != GR_OK ||
        check_fetches("gr_run", fetches, n_fetches, st) != GR_OK)
        return GR_ERR_ARG;
    int pi = 0, is_train = 0;
    rt_exec *e;
    gr_code c = acquire(s, target, fetches, n_fetches, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    if (is_train) c = step_room(s, st);
    int views = 0, dist = is_train && s->dist && c == GR_OK;
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

/* One pass over the data an evaluation reads: its full batches, then, when
 * the data is not a multiple of batch * shards, the tail batch (data.h,
 * data_seek_tail), of which only the real examples are counted. */
typedef struct eval_pass {
    const ir_data *d;  /* the first source read (NULL: none) */
    int64_t batches;   /* full batches */
    int64_t shards;    /* processes that split the source */
    int tail;          /* the data leaves a tail (on some process) */
    eval_rows rows;    /* tail: the tensors the target sums, fetched from it */
    int64_t tail_rows; /* the real examples in this process's tail batch */
} eval_pass;

static int64_t eval_shards(const gr_session *s, int di)
{
    return dist_data_shards(s->dist, di);
}

/* The largest batch up to d's whose multiples of shards divide its size
 * (0: none does), for messages. */
static int64_t eval_divisor(const ir_data *d, int64_t shards)
{
    for (int64_t b = d->batch; b > 0; b--)
        if (d->n % (b * shards) == 0) return b;
    return 0;
}

/* Two sources whose batches do not pair up over one pass. */
static gr_code eval_mismatch(const char *target, const ir_data *a, const ir_data *b, gr_status *st)
{
    return rt_fail(st, GR_ERR_ARG,
                   "gr_eval: '%s' reads data sources '%s' (%lld examples, batch %lld) and '%s' "
                   "(%lld examples, batch %lld), which one pass cannot read in step; evaluate "
                   "a target that reads one source, or give them the same size and batch\n",
                   target, a->name, (long long)a->n, (long long)a->batch, b->name, (long long)b->n,
                   (long long)b->batch);
}

/* A tail that the target's value cannot count exactly. */
static gr_code eval_no_tail(const char *target, const eval_pass *ep, const char *why, gr_status *st)
{
    const ir_data *d = ep->d;
    int64_t per = d->batch * ep->shards, div = eval_divisor(d, ep->shards);
    char hint[96] = "";
    if (div) snprintf(hint, sizeof hint, ", such as %lld", (long long)div);
    return rt_fail(st, GR_ERR_ARG,
                   "gr_eval: '%s' cannot cover all %lld examples of '%s' in batches of %lld: "
                   "the last batch would hold %lld of them, but %s: only a mean over the batch "
                   "of a value per example (as mean(softmax_xent(...)) or mean(argmax(...) == "
                   "y)) can count those alone; use a batch that divides %lld%s%s\n",
                   target, (long long)d->n, d->name, (long long)per, (long long)(d->n % per), why,
                   (long long)d->n, ep->shards > 1 ? " (times the processes)" : "", hint);
}

/* The pass over the sources plan p reads, for target (node id), checked. */
static gr_code eval_pass_of(const gr_session *s, const plan_graph *p, const char *target, int id,
                            eval_pass *ep, gr_status *st)
{
    *ep = (eval_pass){.batches = 1, .shards = 1};
    for (int k = 0; k < p->n_data_used; k++) {
        const ir_data *d = &s->g->data[p->data_used[k]];
        int64_t shards = eval_shards(s, p->data_used[k]), per = d->batch * shards;
        int tail = d->n % per != 0;
        if (k == 0) {
            *ep = (eval_pass){.d = d, .batches = d->n / per, .shards = shards, .tail = tail};
            continue;
        }
        int same = d->n == ep->d->n && d->batch == ep->d->batch && shards == ep->shards;
        if (!same && (tail || ep->tail || d->n / per != ep->batches))
            return eval_mismatch(target, ep->d, d, st);
    }
    char why[256];
    if (ep->tail && eval_rows_find(s->g, id, ep->d->batch, &ep->rows, why, sizeof why) < 0)
        return eval_no_tail(target, ep, why, st);
    if (ep->tail) ep->tail_rows = data_tail_rows(s->readers[p->data_used[0]]);
    return GR_OK;
}

/* What the tail batch needs: a plan for the target and the tensors it
 * sums, an executor, and host buffers for the fetches. */
typedef struct eval_tail {
    plan_graph *plan;
    rt_exec *e;
    gr_fetch *f; /* one per ep->rows.fetch */
    const void **vals;
} eval_tail;

static void eval_tail_free(eval_tail *t, eval_rows *rows)
{
    if (t->e) exec_free(t->e);
    if (t->plan) plan_free(t->plan);
    for (int k = 0; t->f && k < rows->n_fetch; k++) free(t->f[k].data);
    free(t->f);
    free(t->vals);
}

static gr_code eval_tail_open(gr_session *s, const char *target, int id, const eval_pass *ep,
                              eval_tail *t, gr_status *st)
{
    int n = ep->rows.n_fetch, *roots = base_xcalloc((size_t)n + 1, sizeof *roots);
    t->f = base_xcalloc((size_t)n, sizeof *t->f);
    t->vals = base_xcalloc((size_t)n, sizeof *t->vals);
    roots[0] = id;
    for (int k = 0; k < n; k++) {
        roots[k + 1] = ep->rows.fetch[k].node;
        size_t bytes = ir_nbytes(&s->g->nodes[roots[k + 1]].type);
        t->f[k] = (gr_fetch){target, base_xmalloc(bytes ? bytes : 1), bytes, NULL};
        t->vals[k] = t->f[k].data;
    }
    t->plan = rt_plan_build(s->g, roots, n + 1, st);
    free(roots);
    if (!t->plan) return GR_ERR_NOMEM;
    gr_code c = open_readers(s, t->plan, st);
    return c == GR_OK ? exec_new(s, t->plan, &t->e, st) : c;
}

/* Under the pause lock, the cursors at the start: the full batches (the
 * sum of their values into *sum), then the tail (what its real examples
 * add, times the batch, into *tail_sum). */
static gr_code eval_run_pass(gr_session *s, const plan_graph *p, rt_exec *e, gr_fetch *f,
                             const eval_pass *ep, eval_tail *t, double *sum, double *tail_sum,
                             gr_status *st)
{
    gr_code c = GR_OK;
    int views = 0;
    for (int64_t b = 0; b < ep->batches && c == GR_OK; b++) {
        c = exec_run(e, NULL, 0, f, 1, &views, st);
        *sum += *(const float *)f->data;
    }
    if (c != GR_OK || ep->tail_rows == 0) return c;
    for (int k = 0; k < p->n_data_used; k++) data_seek_tail(s->readers[p->data_used[k]], 0);
    c = exec_run(t->e, NULL, 0, t->f, ep->rows.n_fetch, &views, st);
    if (c == GR_OK)
        *tail_sum = eval_rows_sum(s->g, &ep->rows, ep->d->batch, t->vals, ep->tail_rows);
    return c;
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

/* The pass itself: the pause lock held throughout, so no run takes a batch
 * from a cursor the pass has moved (training beside it once re-read the
 * epoch's first batches), and the pass sees one set of weights. */
static gr_code eval_locked(gr_session *s, const plan_graph *p, rt_exec *e, gr_fetch *f,
                           const eval_pass *ep, eval_tail *t, double *sum, double *tail_sum,
                           gr_status *st)
{
    uint64_t(*saved)[2] = base_xcalloc((size_t)p->n_data_used + 1, sizeof *saved);
    pthread_rwlock_wrlock(&s->pause);
    eval_cursors(s, p, saved, 0);
    gr_code c = eval_run_pass(s, p, e, f, ep, t, sum, tail_sum, st);
    eval_cursors(s, p, saved, 1);
    pthread_rwlock_unlock(&s->pause);
    free(saved);
    return c;
}

/* The mean: of the batch means when the batches cover the data exactly
 * (as before tails were counted), else over examples, each batch weighted
 * by the examples it holds; summed over the processes that split it. */
static gr_code eval_mean(gr_session *s, const plan_graph *p, const eval_pass *ep, double sum,
                         double tail_sum, double *value, gr_status *st)
{
    int64_t count = ep->batches;
    if (ep->tail) {
        sum = sum * (double)ep->d->batch + tail_sum;
        count = ep->batches * ep->d->batch + ep->tail_rows;
    }
    gr_code c = eval_sharded(s, p) ? dist_eval_total(s, &sum, &count, st) : GR_OK;
    *value = sum / (double)count;
    return c;
}

/* An evaluation under way: its fetch, an executor of its plan and its
 * pass over the data. */
typedef struct eval_call {
    float x;
    gr_fetch f;
    int id, pi;
    rt_exec *e;
    eval_pass ep;
} eval_call;

/* What gr_eval and gr_eval_check start with: the target, a scalar, an
 * executor fetching it, and a pass over its data it can count (eval_end
 * ends it). */
static gr_code eval_begin(gr_session *s, const char *fn, const char *target, eval_call *ec,
                          gr_status *st)
{
    gr_code bad = check_session(s, fn, st);
    if (bad != GR_OK) return bad;
    drop_held(s);
    if (!target) return rt_null(st, fn, "target");
    if ((ec->id = rt_find_tensor(s, target, st)) < 0) return GR_ERR_ARG;
    const ir_type *t = &s->g->nodes[ec->id].type;
    if (ir_numel(t) != 1 || t->dtype != DT_F32) {
        char b[96];
        return rt_fail(st, GR_ERR_ARG, "%s: '%s' is %s, not a scalar\n", fn, target,
                       ir_type_str(t, b, sizeof b));
    }
    int is_train;
    ec->f = (gr_fetch){target, &ec->x, sizeof ec->x, NULL};
    gr_code c = acquire(s, target, &ec->f, 1, &ec->e, &ec->pi, &is_train, st);
    if (c != GR_OK) return c;
    c = eval_pass_of(s, exec_plan(ec->e), target, ec->id, &ec->ep, st);
    if (c != GR_OK) release(s, ec->pi, ec->e);
    return c;
}

static void eval_end(gr_session *s, eval_call *ec)
{
    eval_rows_free(&ec->ep.rows);
    release(s, ec->pi, ec->e);
}

gr_code gr_eval(gr_session *s, const char *target, double *value, gr_status *st)
{
    if (!value) return rt_null(st, "gr_eval", "value");
    eval_call ec;
    gr_code c = eval_begin(s, "gr_eval", target, &ec, st);
    if (c != GR_OK) return c;
    const plan_graph *plan = exec_plan(ec.e); /* s->plans may move: not read unlocked */
    eval_tail tail = {0};
    double sum = 0, tail_sum = 0;
    if (ec.ep.tail_rows > 0) c = eval_tail_open(s, target, ec.id, &ec.ep, &tail, st);
    if (c == GR_OK && s->dist) c = dist_refresh(s, st);
    if (c == GR_OK) c = eval_locked(s, plan, ec.e, &ec.f, &ec.ep, &tail, &sum, &tail_sum, st);
    eval_tail_free(&tail, &ec.ep.rows);
    eval_end(s, &ec);
    if (c == GR_OK) c = eval_mean(s, plan, &ec.ep, sum, tail_sum, value, st);
    if (c == GR_OK) rt_ok(st);
    return c;
}

gr_code gr_eval_check(gr_session *s, const char *target, gr_status *st)
{
    eval_call ec;
    gr_code c = eval_begin(s, "gr_eval_check", target, &ec, st);
    if (c != GR_OK) return c;
    eval_end(s, &ec);
    rt_ok(st);
    return GR_OK;
}

static gr_code var_find(gr_session *s, const char *fn, const char *name, int *vi, gr_status *st)
{
    gr_code bad = check_session(s, fn, st);
    if (bad != GR_OK) return bad;
    if (!name) return rt_null(st, fn, "name");
    *vi = ir_find_var(s->g, name);
    if (*vi < 0) return rt_fail(st, GR_ERR_ARG, "%s: no variable named '%s'\n", fn, name);
    return GR_OK;
}

/* gr_variable_read and _write: the variable, and a buffer of its size. */
static gr_code var_lookup(gr_session *s, const char *fn, const char *name, const void *data,
                          size_t bytes, int *vi, gr_status *st)
{
    gr_code c = var_find(s, fn, name, vi, st);
    if (c != GR_OK) return c;
    if (!data) return rt_null(st, fn, "data");
    size_t want = ir_nbytes(&s->g->vars[*vi].type);
    if (bytes != want)
        return rt_fail(st, GR_ERR_ARG, "%s: variable '%s' has %zu bytes, not %zu\n", fn, name, want,
                       bytes);
    return GR_OK;
}

gr_code gr_variable_read(gr_session *s, const char *name, void *data, size_t bytes, gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, "gr_variable_read", name, data, bytes, &vi, st);
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
    if (!out) return rt_null(st, "gr_variable_get", "out");
    *out = NULL;
    int vi = -1;
    gr_code c = var_find(s, "gr_variable_get", name, &vi, st);
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
    gr_code c = var_lookup(s, "gr_variable_write", name, data, bytes, &vi, st);
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
    if (!what || !value) return rt_null(st, "gr_session_dist_agree", what ? "value" : "what");
    if (s->dist) return dist_agree(s, what, value, st);
    rt_ok(st);
    return GR_OK;
}
