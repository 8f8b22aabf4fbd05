/* plans.c - a session's plan cache: one plan per distinct (target, fetches)
 * request, found by hash, with its pool of executors; the executors a
 * thread holds for zero-copy views; and the entry points that run a plan,
 * gr_prepare and gr_run.  Any number of threads call them at once: the
 * cache and the pools are under s->mu, held only briefly. */
#include <stdlib.h>
#include <string.h>

#include "runtime/dist/dist.h"
#include "session_int.h"

static void list_names(const ir_graph *g, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n_names && used + 2 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", g->names[i].name);
}

int sess_find_tensor(const gr_session *s, const char *name, gr_status *st)
{
    int k = name ? ir_find_name(s->g, name) : -1;
    if (k >= 0) return s->g->names[k].node;
    int v = name ? ir_find_var(s->g, name) : -1;
    if (v >= 0) return s->g->vars[v].node;
    char names[512];
    list_names(s->g, names, sizeof names);
    const char *near = name ? ir_near_name(s->g, name) : NULL;
    if (near)
        rt_fail(st, GR_ERR_ARG,
                "no target or tensor named '%s'; did you mean '%s'? (the program "
                "has: %s)\n",
                name, near, names);
    else
        rt_fail(st, GR_ERR_ARG, "no target or tensor named '%s' (the program has: %s)\n",
                name ? name : "(null)", names);
    return -1;
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

/* Root 0 is the target, root k + 1 fetch k (a group's value, its first
 * member's: ir_value_node): the executor copies fetches out by these ids,
 * so names are looked up only here. */
static gr_code new_plan(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                        plan_graph **p, gr_status *st)
{
    int *roots = base_xcalloc((size_t)n_fetches + 1, sizeof *roots);
    int ok = (roots[0] = sess_find_tensor(s, target, st)) >= 0;
    for (int i = 0; ok && i < n_fetches; i++) {
        ok = (roots[i + 1] = sess_find_tensor(s, fetches[i].name, st)) >= 0;
        if (ok) roots[i + 1] = ir_value_node(s->g, roots[i + 1]);
    }
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
    c = sess_readers_open(s, p, st);
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
    gr_code c = exec_new(&s->env, p, &e, st);
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
gr_code sess_acquire(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
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

void sess_release(gr_session *s, int plan_index, rt_exec *e)
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

void sess_drop_held(gr_session *s)
{
    for (int i = 0; i < HELD_SLOTS; i++)
        if (held[i].e && held[i].session_id == s->id) {
            sess_release(s, held[i].plan_index, held[i].e);
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
            if (!held[i].e || (pass && !sess_live_id(held[i].session_id))) {
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
    gr_code bad = sess_check(s, "gr_prepare", st);
    if (bad != GR_OK) return bad;
    sess_drop_held(s);
    if (!target) return rt_null(st, "gr_prepare", "target");
    if (check_fetches("gr_prepare", fetches, n_fetches, st) != GR_OK) return GR_ERR_ARG;
    int pi = 0, is_train;
    rt_exec *e;
    gr_code c = sess_acquire(s, target, fetches, n_fetches, &e, &pi, &is_train, st);
    if (c != GR_OK) return c;
    sess_release(s, pi, e);
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

/* A target that accumulates its gradients over k runs (minimize's
 * accumulate=k) applies them on every k-th run of the session, counted
 * from its step (so a restored session keeps the phase), and runs
 * <target>/accumulate on the others. */
static const char *run_phase(gr_session *s, const char *target, char *buf, size_t n)
{
    int k = ir_find_name(s->g, target);
    int every = k >= 0 ? s->g->names[k].every : 0;
    if (every < 2 || atomic_fetch_add(&s->accum_runs, 1) % (uint64_t)every == (uint64_t)every - 1)
        return target;
    snprintf(buf, n, "%s/accumulate", target);
    return buf;
}

gr_code gr_run(gr_session *s, const char *target, const gr_feed *feeds, int n_feeds,
               gr_fetch *fetches, int n_fetches, gr_status *st)
{
    gr_code bad = sess_check(s, "gr_run", st);
    if (bad != GR_OK) return bad;
    sess_drop_held(s);
    if (!target) return rt_null(st, "gr_run", "target");
    if (check_feeds(feeds, n_feeds, st) != GR_OK ||
        check_fetches("gr_run", fetches, n_fetches, st) != GR_OK)
        return GR_ERR_ARG;
    int pi = 0, is_train = 0;
    rt_exec *e;
    char phase[LIM_NAME + 16];
    gr_code c = sess_acquire(s, run_phase(s, target, phase, sizeof phase), fetches, n_fetches, &e,
                             &pi, &is_train, st);
    if (c != GR_OK) return c;
    if (is_train) c = step_room(s, st);
    int views = 0, dist = is_train && s->dist && c == GR_OK;
    if (dist) c = dist_step_begin(s->dist, st);
    pthread_rwlock_rdlock(&s->pause);
    if (c == GR_OK) c = exec_run(e, feeds, n_feeds, fetches, n_fetches, &views, st);
    /* counted under the pause lock: a checkpoint's step matches its variables */
    if (c == GR_OK && is_train) atomic_fetch_add(&s->train_steps, 1);
    pthread_rwlock_unlock(&s->pause);
    if (dist) {
        gr_code end = dist_step_end(s->dist, c == GR_OK, st);
        if (c == GR_OK) c = end;
    }
    if (c == GR_OK && views && keep_held(s, pi, e) < 0)
        c = rt_fail(st, GR_ERR_ARG,
                    "gr_run: this thread holds zero-copy views on %d sessions "
                    "already\n",
                    HELD_SLOTS);
    else if (c == GR_OK && views)
        e = NULL;
    if (e) sess_release(s, pi, e);
    if (c == GR_OK) rt_ok(st);
    return c;
}

void rt_plans_each_exec(gr_session *s, void (*fn)(const rt_exec *e, void *ctx), void *ctx)
{
    pthread_mutex_lock(&s->mu);
    for (int p = 0; p < s->n_plans; p++)
        for (int k = 0; k < s->plans[p].n_all; k++) fn(s->plans[p].all[k], ctx);
    pthread_mutex_unlock(&s->mu);
}

void sess_plans_free(gr_session *s)
{
    forget_held(s);
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
    s->plans = NULL;
    s->n_plans = s->cap_plans = 0;
}
