/* schedule.c - the executor's inter-op schedule, built once per executor.
 *
 * The plan orders nodes by level (compiler/plan.c): the nodes of one level
 * are independent and their buffers never alias.  Here each level of
 * kernel calls is set to run one of two ways:
 *   - sequentially on the executor thread, every kernel free to split
 *     itself over the intra-op pool: for a single call, or when one call
 *     dominates the level's work (a big GEMM beside a bias reduction);
 *   - in parallel: the calls are spread over the pool's threads, balanced
 *     by estimated cost (ops_cost; largest first onto the least-loaded
 *     thread), and each kernel runs single-threaded with its own scratch
 *     slice.  This is where a backward pass wins: dW and dX of a layer are
 *     independent.
 * Everything is decided here; a step only walks the levels (sched_run_level),
 * checking each level's outputs for NaN/Inf under --check-numerics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_int.h"

#define DOMINANT_SHARE 0.6
/* Below this much work (multiply-adds or elements) a level is over before
 * waking another thread would pay off. */
#define PARALLEL_MIN_COST 1e6
#define MAX_TASKS         64

static int by_cost_desc(const void *a, const void *b, void *costs)
{
    double x = ((double *)costs)[*(const int *)a], y = ((double *)costs)[*(const int *)b];
    return (x < y) - (x > y);
}

/* Orders one level's calls into `out`, grouped by task; fills L. */
static void plan_level(const rt_exec *e, const double *cost, int *calls, int n, int threads,
                       exec_level *L, int *out, int *task_of)
{
    double total = 0, max = 0;
    IR_WORK(n);
    for (int i = 0; i < n; i++) {
        total += cost[calls[i]];
        if (cost[calls[i]] > max) max = cost[calls[i]];
    }
    int serial = threads < 2 || n < 2 || max > DOMINANT_SHARE * total || total < PARALLEL_MIN_COST;
    L->n_tasks = serial ? 1 : (n < threads ? n : threads);
    qsort_r(calls, (size_t)n, sizeof(int), by_cost_desc, (void *)cost);
    double load[MAX_TASKS] = {0};
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int t = 1; t < L->n_tasks; t++)
            if (load[t] < load[best]) best = t;
        load[best] += cost[calls[i]];
        task_of[calls[i]] = best;
    }
    int k = L->first;
    IR_WORK(n * L->n_tasks);
    for (int t = 0; t < L->n_tasks; t++) {
        L->task_first[t] = k;
        for (int i = 0; i < n; i++)
            if (task_of[calls[i]] == t) out[k++] = calls[i];
    }
    L->task_first[L->n_tasks] = k;
    (void)e;
}

/* Calls in a parallel level run single-threaded on their task's scratch. */
static void bind_level_tasks(rt_exec *e, const exec_level *L)
{
    if (L->n_tasks < 2) return;
    for (int t = 0; t < L->n_tasks; t++)
        for (int i = L->task_first[t]; i < L->task_first[t + 1]; i++) {
            kern_args *a = &e->args[i];
            a->pool = NULL;
            a->max_tasks = 1;
            if (a->scratch)
                a->scratch = e->parts[L->part].scratch + (size_t)t * e->p->scratch_task_bytes;
        }
}

static void reorder_calls(rt_exec *e, const int *order)
{
    kern_args *args = base_xmalloc(sizeof *args * (size_t)(e->n_calls + 1));
    kernel_fn *fn = base_xmalloc(sizeof *fn * (size_t)(e->n_calls + 1));
    for (int i = 0; i < e->n_calls; i++) args[i] = e->args[order[i]], fn[i] = e->fn[order[i]];
    free(e->args);
    free(e->fn);
    e->args = args;
    e->fn = fn;
}

static int node_id(const rt_exec *e, int call)
{
    return (int)(e->args[call].node - e->p->g->nodes);
}

/* How many tasks a level of partition k may spread over: an async device
 * runs its queue's calls in order. */
static int part_threads(const rt_exec *e, int k)
{
    const exec_part *pt = &e->parts[k];
    int t = pt->pool ? cpu_pool_size(pt->pool) : 1;
    return t > MAX_TASKS ? MAX_TASKS : t;
}

void sched_build(rt_exec *e)
{
    int n = e->n_calls;
    int *order = base_xmalloc(sizeof(int) * (size_t)(n + 1)),
        *task_of = base_xcalloc((size_t)n + 1, sizeof(int));
    int *calls = base_xmalloc(sizeof(int) * (size_t)(n + 1));
    double *cost = base_xmalloc(sizeof(double) * (size_t)(n + 1));
    IR_WORK(2 * n);
    for (int i = 0; i < n; i++) cost[i] = ops_cost(e->p->g, node_id(e, i));
    e->levels = base_xcalloc((size_t)n + 1, sizeof *e->levels);
    for (int i = 0; i < n;) { /* calls come partition by partition, by level in each */
        int lv = e->p->level[node_id(e, i)], pt = e->p->part[node_id(e, i)], m = 0;
        exec_level *L = &e->levels[e->n_levels++];
        L->first = i;
        L->part = pt;
        if (e->parts[pt].n_levels++ == 0) e->parts[pt].first_level = e->n_levels - 1;
        while (i < n && e->p->level[node_id(e, i)] == lv && e->p->part[node_id(e, i)] == pt)
            calls[m++] = i++;
        L->n = m;
        int threads = part_threads(e, pt);
        L->task_first = base_xmalloc(sizeof(int) * (size_t)(threads + 2));
        plan_level(e, cost, calls, m, threads, L, order, task_of);
    }
    reorder_calls(e, order);
    for (int l = 0; l < e->n_levels; l++) bind_level_tasks(e, &e->levels[l]);
    if (e->env->opt->profile) e->prof = base_xcalloc((size_t)n + 1, sizeof *e->prof);
    free(order), free(task_of), free(calls), free(cost);
}

void sched_free(rt_exec *e)
{
    free(e->prof);
    for (int l = 0; l < e->n_levels; l++) {
        free(e->levels[l].task_first);
        free(e->levels[l].wait);
        free(e->levels[l].send);
    }
    free(e->levels);
}

/* ---- running a level ---- */

typedef struct level_job {
    const rt_exec *e;
    const exec_level *L;
    atomic_int faulted; /* a call whose kernel failed, or -1 */
} level_job;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Under a profile the call's wall time, lock wait included. */
static int run_call(const rt_exec *e, int i)
{
    uint64_t t0 = e->prof ? now_ns() : 0;
    int r = dev_kern_run(e->fn[i], &e->args[i]);
    if (e->prof) {
        atomic_fetch_add_explicit(&e->prof[i].ns, now_ns() - t0, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->prof[i].calls, 1, memory_order_relaxed);
    }
    return r;
}

/* One task of a parallel level: its group of calls, in order, up to a
 * failing one. */
static void level_task(void *arg, int t)
{
    level_job *j = arg;
    for (int i = j->L->task_first[t]; i < j->L->task_first[t + 1]; i++)
        if (run_call(j->e, i) != 0) {
            int none = -1;
            atomic_compare_exchange_strong(&j->faulted, &none, i);
            return;
        }
}

static gr_code fault(const rt_exec *e, int i, gr_status *st)
{
    const kern_args *a = &e->args[i];
    char dev[32];
    return rt_fail_at(st, GR_ERR_DATA, a->node, "%s on %s: %s", ops_name(a->node->op),
                      ir_dev_str(a->node->device, dev, sizeof dev), a->fault->msg);
}

gr_code sched_run_level(const rt_exec *e, const exec_level *L, gr_status *st)
{
    const exec_part *pt = &e->parts[L->part];
    if (pt->q) { /* an async device: enqueued, run later, faults found at a sync */
        for (int i = L->first; i < L->first + L->n; i++)
            pt->dev->vt->launch(pt->dev, pt->q, e->fn[i], &e->args[i]);
        return GR_OK;
    }
    level_job job = {e, L, -1};
    if (L->n_tasks > 1)
        cpu_pool_for(e->parts[L->part].pool, L->n_tasks, level_task, &job);
    else
        for (int i = L->first; i < L->first + L->n && job.faulted < 0; i++)
            if (run_call(e, i) != 0) job.faulted = i;
    return job.faulted < 0 ? GR_OK : fault(e, job.faulted, st);
}

gr_code sched_sync(const rt_exec *e, int k, gr_status *st)
{
    const exec_part *pt = &e->parts[k];
    if (!pt->q) return GR_OK;
    const kern_args *bad = pt->dev->vt->queue_sync(pt->dev, pt->q);
    return bad ? fault(e, (int)(bad - e->args), st) : GR_OK;
}

/* x: the output, in host memory (an async device's was copied to pt->host_out). */
static gr_code check_numerics(const kern_args *a, const float *x, gr_status *st)
{
    int64_t n = ir_numel(a->out_t);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            char dev[32];
            return rt_fail_at(st, GR_ERR_NUMERIC, a->node, "%s on %s produced %s (element %lld)",
                              ops_name(a->node->op), ir_dev_str(a->node->device, dev, sizeof dev),
                              isnan(x[i]) ? "NaN" : "Inf", (long long)i);
        }
    return GR_OK;
}

gr_code sched_check_level(const rt_exec *e, const exec_level *L, gr_status *st)
{
    if (!e->env->opt->check_numerics) return GR_OK;
    const exec_part *pt = &e->parts[L->part];
    gr_code c = sched_sync(e, L->part, st);
    for (int i = L->first; c == GR_OK && i < L->first + L->n; i++) {
        const kern_args *a = &e->args[i];
        if (a->out_t->dtype != DT_F32 || !a->out) continue;
        const float *x = a->out;
        if (pt->q) {
            pt->dev->vt->to_host(pt->dev, pt->host_out, a->out, ir_nbytes(a->out_t));
            x = pt->host_out;
        }
        c = check_numerics(a, x, st);
    }
    return c;
}
