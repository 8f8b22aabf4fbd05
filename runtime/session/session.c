/* session.c - a session's life: gr_session_new checks its options and makes
 * what the session's other files keep (devices, variables, reader slots,
 * the processes of a distributed program, the TensorBoard file), and
 * gr_session_free ends them all; the distributed calls on a session; and
 * gr_session_scalar, a point of a curve in its TensorBoard file.
 * The top of runtime/session/ (session_int.h gives the order). */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/dist/dist.h"
#include "session_int.h"

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
        opt_out_of_range("sync_every", o->sync_every, 0, INT_MAX, st) ||
        opt_out_of_range("backup", o->backup, 0, INT_MAX, st) ||
        opt_out_of_range("bounded", o->bounded, 0, 1, st) ||
        opt_out_of_range("max_staleness", o->max_staleness, 0, INT_MAX, st))
        return GR_ERR_ARG;
    return GR_OK;
}

/* The session's locks: the pause lock prefers a waiting writer, so a
 * snapshot does not starve behind a stream of runs. */
static void init_locks(gr_session *s)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->readers_mu, NULL);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->pause, &ra);
    pthread_rwlockattr_destroy(&ra);
}

static gr_session *session_alloc(const gr_program *p, const gr_session_options *opt)
{
    static atomic_uint_fast64_t next_id = 1;
    gr_session *s = base_xcalloc(1, sizeof *s);
    s->id = atomic_fetch_add(&next_id, 1);
    s->prog = p;
    s->g = p->g;
    if (opt) s->opt = *opt;
    if (s->opt.threads <= 0) s->opt.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s->opt.threads <= 0) s->opt.threads = 1;
    if (s->opt.executors <= 0) s->opt.executors = 1;
    init_locks(s);
    sess_readers_alloc(s);
    return s;
}

/* What every executor is given (exec_env): set once the session has its
 * devices, variables and processes. */
static void set_env(gr_session *s)
{
    s->env = (exec_env){.opt = &s->opt,
                        .devs = &s->devs,
                        .var = s->var,
                        .var_lock = s->var_lock,
                        .readers = s->readers,
                        .steps = &s->steps,
                        .comm = dist_kern_comm(s->dist)};
}

/* What a distributed session's processes read and write of it (dist.h). */
static uint64_t host_step(void *s)
{
    return gr_session_step(s);
}

static void host_var_read(void *s, int vi, void *dst)
{
    rt_var_read(s, vi, dst);
}

static void host_var_write(void *s, int vi, const void *src)
{
    rt_var_write(s, vi, src);
}

static void host_set_step(void *s, uint64_t step)
{
    uint64_t done, runs;
    rt_session_counters(s, &done, &runs);
    rt_session_set_counters(s, step, runs);
}

static gr_code open_dist(gr_session *s, const gr_program *p, gr_status *st)
{
    dist_host h = {.ctx = s,
                   .g = s->g,
                   .mode = p->distributed,
                   .opt = &s->opt,
                   .step = host_step,
                   .var_read = host_var_read,
                   .var_write = host_var_write,
                   .set_step = host_set_step};
    return dist_open(&h, &s->dist, st);
}

gr_code gr_session_new(const gr_program *p, const gr_session_options *opt, gr_session **out,
                       gr_status *st)
{
    if (!out) return rt_null(st, "gr_session_new", "out");
    *out = NULL;
    if (!p) return rt_null(st, "gr_session_new", "program");
    if (opt && check_session_options(opt, st) != GR_OK) return GR_ERR_ARG;
    gr_session *s = session_alloc(p, opt);
    cpu_blas_init();
    gr_code c = machine_devices_open(&p->machine, s->g, &s->devs, st);
    if (c == GR_OK) c = sess_vars_init(s, st);
    if (c == GR_OK && p->distributed) c = open_dist(s, p, st);
    if (c == GR_OK && s->opt.tensorboard_dir)
        c = rt_summary_open(s->opt.tensorboard_dir, &s->summary, st);
    s->opt.tensorboard_dir = NULL; /* the caller's string: not kept */
    if (c != GR_OK) {
        gr_session_free(s);
        return c;
    }
    set_env(s);
    sess_live_add(s);
    *out = s;
    rt_ok(st);
    return GR_OK;
}

void gr_session_free(gr_session *s)
{
    if (!s) return;
    sess_live_remove(s);
    sess_plans_free(s);
    rt_summary_close(s->summary);
    dist_close(s->dist);
    sess_readers_close(s);
    sess_vars_free(s);
    machine_devices_close(&s->devs);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->readers_mu);
    pthread_rwlock_destroy(&s->pause);
    free(s);
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
    gr_code bad = sess_check(s, "gr_session_dist_agree", st);
    if (bad != GR_OK) return bad;
    if (!what || !value) return rt_null(st, "gr_session_dist_agree", what ? "value" : "what");
    if (s->dist) return dist_agree(s->dist, what, value, st);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_session_scalar_flush(gr_session *s, gr_status *st)
{
    if (!s) return rt_null(st, "gr_session_scalar_flush", "session");
    rt_summary *m = rt_session_summary(s);
    char err[512];
    if (m && rt_summary_sync(m, err, sizeof err) < 0)
        return rt_fail(st, GR_ERR_IO, "tensorboard: %s\n", err);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_session_scalar(gr_session *s, const char *tag, int64_t step, double value, gr_status *st)
{
    if (!s || !tag) return rt_null(st, "gr_session_scalar", s ? "tag" : "session");
    if (!*tag) return rt_fail(st, GR_ERR_ARG, "gr_session_scalar: tag is empty\n");
    rt_summary *m = rt_session_summary(s);
    if (!m)
        return rt_fail(st, GR_ERR_ARG,
                       "gr_session_scalar: the session has no tensorboard_dir (an option of "
                       "gr_session_new)\n");
    if (step < 0) step = (int64_t)gr_session_step(s);
    char err[512];
    if (rt_summary_scalar(m, tag, step, value, err, sizeof err) < 0)
        return rt_fail(st, GR_ERR_IO, "tensorboard: %s\n", err);
    rt_ok(st);
    return GR_OK;
}
