/* session.c - sessions: the variable store, data readers, plans and their
 * executor pools, and the thread-safe gr_run / gr_eval entry points. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

#ifndef NDEBUG
/* Debug builds remember live sessions, so a call on a freed one gets a
 * clear status instead of touching freed memory. */
#define MAX_LIVE 256
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static const gr_session *live[MAX_LIVE];

static void live_set(const gr_session *s, int on)
{
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == (on ? NULL : s)) {
            live[i] = on ? s : NULL;
            break;
        }
    pthread_mutex_unlock(&live_mu);
}

static int live_has(const gr_session *s)
{
    int found = 0;
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < MAX_LIVE && !found; i++) found = live[i] == s;
    pthread_mutex_unlock(&live_mu);
    return found;
}
#else
static void live_set(const gr_session *s, int on)
{
    (void)s, (void)on;
}
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

static gr_code init_vars(gr_session *s, gr_status *st)
{
    const ir_graph *g = s->g;
    s->var = calloc((size_t)g->n_vars + 1, sizeof *s->var);
    s->var_mu = calloc((size_t)g->n_vars + 1, sizeof *s->var_mu);
    for (int i = 0; i < g->n_vars; i++) {
        pthread_mutex_init(&s->var_mu[i], NULL);
        size_t n = ir_nbytes(&g->vars[i].type);
        if (posix_memalign(&s->var[i], 64, n ? n : 64))
            return rt_fail(st, GR_ERR_NOMEM, "cannot allocate variable %s\n", g->vars[i].name);
        rt_init_var(&g->vars[i], s->var[i], s->opt.seed);
    }
    return GR_OK;
}

gr_code gr_session_new(const gr_program *p, const gr_session_options *opt, gr_session **out,
                       gr_status *st)
{
    *out = NULL;
    if (!p) return rt_fail(st, GR_ERR_ARG, "gr_session_new: program is NULL\n");
    static atomic_uint_fast64_t next_id = 1;
    gr_session *s = calloc(1, sizeof *s);
    s->id = atomic_fetch_add(&next_id, 1);
    s->prog = p;
    s->g = p->g;
    if (opt) s->opt = *opt;
    if (s->opt.threads <= 0) s->opt.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s->opt.threads <= 0) s->opt.threads = 1;
    if (s->opt.executors <= 0) s->opt.executors = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* a waiting snapshot must not starve behind a stream of runs */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->pause, &ra);
    pthread_rwlockattr_destroy(&ra);
    s->readers = calloc((size_t)s->g->n_data + 1, sizeof *s->readers);
    cpu_blas_init();
    gr_code c = init_vars(s, st);
    if (c != GR_OK) {
        gr_session_free(s);
        return c;
    }
    live_set(s, 1);
    *out = s;
    rt_ok(st);
    return GR_OK;
}

static void forget_held(const gr_session *s);

void gr_session_free(gr_session *s)
{
    if (!s) return;
    live_set(s, 0);
    forget_held(s);
    for (int i = 0; i < s->n_plans; i++) {
        rt_plan_entry *pe = &s->plans[i];
        for (int k = 0; k < pe->n_all; k++) exec_free(pe->all[k]); /* views held too */
        free(pe->all);
        free(pe->free_execs);
        plan_free(pe->plan);
        free(pe->key);
    }
    free(s->plans);
    for (int i = 0; i < s->g->n_data; i++) data_close(s->readers[i]);
    free(s->readers);
    for (int i = 0; s->var && i < s->g->n_vars; i++) free(s->var[i]);
    for (int i = 0; s->var_mu && i < s->g->n_vars; i++) pthread_mutex_destroy(&s->var_mu[i]);
    free(s->var);
    free(s->var_mu);
    pthread_mutex_destroy(&s->mu);
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

int rt_find_tensor(const gr_session *s, const char *name, gr_status *st)
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

gr_code rt_open_reader(gr_session *s, int di, gr_status *st)
{
    if (s->readers[di]) return GR_OK;
    const ir_data *d = &s->g->data[di];
    data_spec spec;
    char err[512];
    rt_data_spec(d, &spec);
    spec.seed ^= s->opt.seed;
    if ((s->readers[di] = data_open(&spec, err, sizeof err))) return GR_OK;
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

/* "target|fetch|fetch" into buf (no allocation on the run path); returns
 * -1 when it does not fit. */
static int plan_key(char *buf, size_t n, const char *target, const char *const *fetch, int n_fetch)
{
    size_t used = (size_t)snprintf(buf, n, "%s", target);
    for (int i = 0; i < n_fetch && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "|%s", fetch[i]);
    return used < n ? 0 : -1;
}

static gr_code add_plan(gr_session *s, char *key, const char *target, const char *const *fetch,
                        int n_fetch, rt_plan_entry **out, gr_status *st)
{
    int *roots = malloc(sizeof(int) * (size_t)(n_fetch + 1)), nr = 0;
    roots[nr] = rt_find_tensor(s, target, st);
    if (roots[nr++] < 0) goto fail;
    for (int i = 0; i < n_fetch; i++)
        if ((roots[nr++] = rt_find_tensor(s, fetch[i], st)) < 0) goto fail;
    plan_graph *p = plan_build(s->g, roots, nr);
    free(roots);
    gr_code c = open_readers(s, p, st);
    if (c != GR_OK) {
        plan_free(p);
        free(key);
        return c;
    }
    if (s->n_plans == s->cap_plans) {
        s->cap_plans = s->cap_plans ? 2 * s->cap_plans : 4;
        s->plans = realloc(s->plans, sizeof *s->plans * (size_t)s->cap_plans);
    }
    int k = ir_find_name(s->g, target);
    s->plans[s->n_plans] =
        (rt_plan_entry){.key = key, .plan = p, .is_train = k >= 0 && s->g->names[k].is_train};
    *out = &s->plans[s->n_plans++];
    return GR_OK;
fail:
    free(roots);
    free(key);
    return GR_ERR_ARG;
}

/* Plans are never removed, but the array may move: callers hold s->mu. */
gr_code rt_session_plan(gr_session *s, const char *target, const char *const *fetch, int n_fetch,
                        rt_plan_entry **out, gr_status *st)
{
    char key[1024];
    if (plan_key(key, sizeof key, target, fetch, n_fetch) < 0)
        return rt_fail(st, GR_ERR_ARG, "target and fetch names are too long\n");
    for (int i = 0; i < s->n_plans; i++)
        if (strcmp(s->plans[i].key, key) == 0) {
            *out = &s->plans[i];
            return GR_OK;
        }
    return add_plan(s, strdup(key), target, fetch, n_fetch, out, st);
}

rt_exec *rt_exec_take(gr_session *s, rt_plan_entry *pe, gr_status *st)
{
    if (pe->n_free) return pe->free_execs[--pe->n_free];
    rt_exec *e = exec_new(s, pe->plan, st);
    if (!e) return NULL;
    if (pe->n_all == pe->cap_all) {
        pe->cap_all = pe->cap_all ? 2 * pe->cap_all : 4;
        pe->all = realloc(pe->all, sizeof *pe->all * (size_t)pe->cap_all);
    }
    pe->all[pe->n_all++] = e;
    return e;
}

void rt_exec_give(gr_session *s, rt_plan_entry *pe, rt_exec *e)
{
    (void)s;
    if (pe->n_free == pe->cap_free) {
        pe->cap_free = pe->cap_free ? 2 * pe->cap_free : 4;
        pe->free_execs = realloc(pe->free_execs, sizeof *pe->free_execs * (size_t)pe->cap_free);
    }
    pe->free_execs[pe->n_free++] = e;
}

/* Finds the plan and takes an executor, under the session lock. */
static gr_code acquire(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                       rt_exec **e, int *plan_index, int *is_train, gr_status *st)
{
    const char *names[16];
    *e = NULL;
    if (n_fetches > 16) return rt_fail(st, GR_ERR_ARG, "at most 16 fetches per run\n");
    for (int i = 0; i < n_fetches; i++) names[i] = fetches[i].name;
    pthread_mutex_lock(&s->mu);
    rt_plan_entry *pe = NULL;
    gr_code c = rt_session_plan(s, target, names, n_fetches, &pe, st);
    if (c == GR_OK) {
        *e = rt_exec_take(s, pe, st);
        *plan_index = (int)(pe - s->plans);
        *is_train = pe->is_train;
        if (!*e) c = GR_ERR_NOMEM;
    }
    pthread_mutex_unlock(&s->mu);
    return c;
}

static void release(gr_session *s, int plan_index, rt_exec *e)
{
    pthread_mutex_lock(&s->mu);
    rt_exec_give(s, &s->plans[plan_index], e);
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

static int keep_held(gr_session *s, int plan_index, rt_exec *e)
{
    for (int i = 0; i < HELD_SLOTS; i++)
        if (!held[i].e) {
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
    int views = 0;
    pthread_rwlock_rdlock(&s->pause);
    c = exec_run(e, feeds, n_feeds, fetches, n_fetches, &views, st);
    /* counted under the pause lock: a checkpoint's step matches its variables */
    if (c == GR_OK && is_train) atomic_fetch_add(&s->train_steps, 1);
    pthread_rwlock_unlock(&s->pause);
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
        int64_t b = d->n / d->batch;
        if (nb == 0 || b < nb) nb = b;
    }
    return nb ? nb : 1;
}

/* An evaluation reads its sources from the start, then puts each cursor
 * back, so evaluating on the training source does not disturb training. */
static void eval_cursors(gr_session *s, const plan_graph *p, uint64_t (*saved)[2], int restore)
{
    for (int k = 0; k < p->n_data_used && k < 16; k++) {
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
    int64_t nb = eval_batches(s, plan);
    uint64_t saved[16][2];
    /* no run holds a batch while the cursors move: seeks under the pause lock */
    pthread_rwlock_wrlock(&s->pause);
    eval_cursors(s, plan, saved, 0);
    pthread_rwlock_unlock(&s->pause);
    double sum = 0;
    pthread_rwlock_rdlock(&s->pause);
    for (int64_t b = 0; b < nb && c == GR_OK; b++) {
        int views = 0;
        c = exec_run(e, NULL, 0, &f, 1, &views, st);
        sum += x;
    }
    pthread_rwlock_unlock(&s->pause);
    pthread_rwlock_wrlock(&s->pause);
    eval_cursors(s, plan, saved, 1);
    pthread_rwlock_unlock(&s->pause);
    release(s, pi, e);
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
    memcpy(data, s->var[vi], bytes);
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
    memcpy(gr_tensor_data(*out), s->var[vi], gr_tensor_bytes(*out));
    rt_ok(st);
    return GR_OK;
}

gr_code gr_variable_write(gr_session *s, const char *name, const void *data, size_t bytes,
                          gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, name, bytes, &vi, st);
    if (c != GR_OK) return c;
    memcpy(s->var[vi], data, bytes);
    rt_ok(st);
    return GR_OK;
}
