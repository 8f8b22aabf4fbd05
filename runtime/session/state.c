/* state.c - a session as the other files read it: the registry of live
 * sessions (is this handle one?), and the accessors of runtime.h through
 * which the rest of runtime/ reads a session without seeing its struct.
 * The lowest of the session's files: it calls none of the others. */
#include "session_int.h"

typedef struct live_session {
    const gr_session *s;
    uint64_t id;
} live_session;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static live_session *live;
static int n_live, cap_live;

void sess_live_add(const gr_session *s)
{
    pthread_mutex_lock(&live_mu);
    if (n_live == cap_live) {
        cap_live = cap_live ? 2 * cap_live : 16;
        live = base_xreallocarray(live, (size_t)cap_live, sizeof *live);
    }
    live[n_live++] = (live_session){s, s->id};
    pthread_mutex_unlock(&live_mu);
}

void sess_live_remove(const gr_session *s)
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

int sess_live_id(uint64_t id)
{
    return live_find(NULL, id);
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

gr_code sess_check(const gr_session *s, const char *fn, gr_status *st)
{
    if (!s) return rt_fail(st, GR_ERR_ARG, "%s: session is NULL\n", fn);
    if (!live_has(s))
        return rt_fail(st, GR_ERR_ARG, "%s: session was freed (or never created)\n", fn);
    return GR_OK;
}

const gr_program *rt_session_program(const gr_session *s)
{
    return s->prog;
}

const ir_graph *rt_session_graph(const gr_session *s)
{
    return s->g;
}

const gr_session_options *rt_session_options(const gr_session *s)
{
    return &s->opt;
}

rt_dist *rt_session_dist(const gr_session *s)
{
    return s->dist;
}

rt_summary *rt_session_summary(const gr_session *s)
{
    return s->summary;
}

device_obj *rt_device(const gr_session *s, int dev)
{
    return machine_devices_find(&s->devs, dev);
}

void rt_session_pause(gr_session *s)
{
    pthread_rwlock_wrlock(&s->pause);
}

void rt_session_resume(gr_session *s)
{
    pthread_rwlock_unlock(&s->pause);
}

void rt_session_counters(const gr_session *s, uint64_t *train_steps, uint64_t *runs)
{
    gr_session *m = (gr_session *)s; /* atomic_load takes no const */
    *train_steps = atomic_load(&m->train_steps);
    *runs = atomic_load(&m->steps);
}

void rt_session_set_counters(gr_session *s, uint64_t train_steps, uint64_t runs)
{
    atomic_store(&s->train_steps, train_steps);
    atomic_store(&s->accum_runs, train_steps);
    atomic_store(&s->steps, runs);
}

void rt_session_set_runs(gr_session *s, uint64_t runs)
{
    atomic_store(&s->steps, runs);
}

uint64_t gr_session_step(const gr_session *s)
{
    return s ? atomic_load(&((gr_session *)s)->train_steps) : 0;
}
