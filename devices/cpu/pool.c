/* pool.c - the intra-op thread pool.
 *
 * A job is published by bumping a generation number under the mutex.  Tasks
 * are claimed from one 64-bit ticket holding (generation << 32 | next task),
 * so a worker that wakes late for an old job can never claim a task of the
 * new one: its compare-and-swap fails on the generation.  Workers and the
 * caller spin briefly before sleeping on a condvar, because kernels call
 * cpu_pool_for back to back and a futex round trip per call would dominate small
 * ops; an idle pool sleeps and burns no CPU.
 *
 * cpu_pool_for never deadlocks on misuse: a call from inside a task, or from a
 * second thread while the pool is busy, simply runs its tasks serially on
 * the calling thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_impl.h"

#define POOL_SPIN 4000

/* > 0 while this thread runs a pool task (nested cpu_pool_for runs serially). */
static _Thread_local int pool_depth;

typedef void (*pool_fn)(void *arg, int task);

struct cpu_pool {
    int n; /* threads including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t wake, done_cv;
    _Atomic uint32_t gen;
    _Atomic uint64_t ticket;
    _Atomic int done;
    atomic_flag busy; /* held by the thread inside cpu_pool_for */
    int stop;         /* under mu */
    pool_fn fn;       /* under mu */
    void *arg;        /* under mu */
    int n_tasks;      /* under mu */
};

/* Returns the next task of generation gen, or -1 when there is none. */
static int pool_claim(cpu_pool *p, uint32_t gen, int n_tasks)
{
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(t >> 32) != gen || (uint32_t)t >= (uint32_t)n_tasks) return -1;
        if (atomic_compare_exchange_weak(&p->ticket, &t, t + 1)) return (int)(uint32_t)t;
    }
}

static void pool_run_tasks(cpu_pool *p, uint32_t gen, pool_fn fn, void *arg, int n_tasks)
{
    int t;
    while ((t = pool_claim(p, gen, n_tasks)) >= 0) {
        pool_depth++;
        fn(arg, t);
        pool_depth--;
        if (atomic_fetch_add(&p->done, 1) + 1 == n_tasks) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Waits for a generation other than seen; returns 0 when told to stop. */
static int pool_wait_job(cpu_pool *p, uint32_t seen, uint32_t *gen, pool_fn *fn, void **arg,
                         int *n_tasks)
{
    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_relaxed) != seen) break;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (!p->stop && atomic_load(&p->gen) == seen) pthread_cond_wait(&p->wake, &p->mu);
    int go = !p->stop;
    *gen = atomic_load(&p->gen);
    *fn = p->fn;
    *arg = p->arg;
    *n_tasks = p->n_tasks;
    pthread_mutex_unlock(&p->mu);
    return go;
}

static void *pool_worker(void *vp)
{
    cpu_pool *p = vp;
    uint32_t seen = 0, gen;
    pool_fn fn;
    void *arg;
    int n_tasks;
    while (pool_wait_job(p, seen, &gen, &fn, &arg, &n_tasks)) {
        seen = gen;
        pool_run_tasks(p, gen, fn, arg, n_tasks);
    }
    return NULL;
}

cpu_pool *cpu_pool_new(int nthreads)
{
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = nthreads < 1 ? 1 : nthreads;
    atomic_flag_clear(&p->busy);
    p->th = calloc((size_t)p->n, sizeof *p->th);
    if (!p->th) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (int i = 1; i < p->n; i++) {
        if (pthread_create(&p->th[i], NULL, pool_worker, p) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}

int cpu_pool_size(const cpu_pool *p)
{
    return p ? p->n : 1;
}

static void pool_wait_done(cpu_pool *p, int n_tasks)
{
    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load_explicit(&p->done, memory_order_acquire) == n_tasks) return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->done) != n_tasks) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void cpu_pool_for(cpu_pool *p, int n_tasks, void (*fn)(void *arg, int task), void *arg)
{
    if (n_tasks <= 0) return;
    if (!p || p->n == 1 || n_tasks == 1 || pool_depth > 0 || atomic_flag_test_and_set(&p->busy)) {
        for (int t = 0; t < n_tasks; t++) fn(arg, t);
        return;
    }
    pthread_mutex_lock(&p->mu);
    uint32_t gen = atomic_load(&p->gen) + 1;
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->done, 0);
    atomic_store(&p->ticket, (uint64_t)gen << 32);
    atomic_store(&p->gen, gen);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pool_run_tasks(p, gen, fn, arg, n_tasks);
    pool_wait_done(p, n_tasks);
    atomic_flag_clear(&p->busy);
}

/* ---- range splitting on top of cpu_pool_for ---- */

typedef struct par_range {
    cpu_range_fn fn;
    void *ctx;
    int64_t n;
    int ntasks;
} par_range;

static void par_range_task(void *arg, int t)
{
    const par_range *r = arg;
    int64_t lo = r->n * t / r->ntasks, hi = r->n * (t + 1) / r->ntasks;
    if (lo < hi) r->fn(r->ctx, lo, hi);
}

/* Tasks worth using for `work` units when one task should get >= min_work. */
static int cpu_ntasks(const cpu_pool *p, int64_t work, int64_t min_work)
{
    int64_t t = min_work > 0 ? work / min_work : work;
    if (t > cpu_pool_size(p)) t = cpu_pool_size(p);
    return t < 1 ? 1 : (int)t;
}

void cpu_par_range(cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    int nt = cpu_ntasks(p, n, grain);
    if (nt == 1) {
        fn(ctx, 0, n);
        return;
    }
    par_range r = {fn, ctx, n, nt};
    cpu_pool_for(p, nt, par_range_task, &r);
}

/* ---- tasks with scratch (cpu_impl.h) ---- */

int cpu_tasks_count(const cpu_conv_ctx *cx, int64_t jobs)
{
    int nt = cpu_pool_size(cx->pool);
    if (nt > cx->max_tasks) nt = cx->max_tasks;
    if (nt > jobs) nt = (int)jobs;
    return nt < 1 ? 1 : nt;
}

int cpu_tasks_open(const cpu_conv_ctx *cx, int64_t jobs, size_t need, cpu_tasks *t)
{
    *t = (cpu_tasks){
        .scratch = cx->scratch, .task_bytes = cx->task_bytes, .n = cpu_tasks_count(cx, jobs)};
    if (need == 0 || (cx->scratch && cx->task_bytes >= need)) return 0;
    /* The plan gave less than we need (or nothing): use our own. */
    t->own = t->scratch = malloc(need * (size_t)t->n);
    t->task_bytes = need;
    return t->own ? 0 : -1;
}

void cpu_tasks_close(cpu_tasks *t)
{
    free(t->own);
    t->own = NULL;
}
