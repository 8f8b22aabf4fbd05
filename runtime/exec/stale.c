/* stale.c - the staleness of an executor's updates (docs/api.md,
 * gr_session_staleness).
 *
 * Every variable carries a version: the steps that updated it so far
 * (dev_var_lock.version, shared by all the session's executors).  A step
 * reads the versions of the variables its plan updates as it begins, before
 * any kernel reads a variable; as it ends, each such variable's version is
 * advanced by one, and what it was just before, less what the step read,
 * is the number of other steps' updates that landed between this step's
 * read and its write: the update's staleness.  One executor alone, and
 * synchronous towers (one step updates each variable once), count 0;
 * Hogwild! executors count the updates that raced theirs.
 *
 * The counters are relaxed atomics: a version is one fetch-add per updated
 * variable per step, on no lock, and the counts are only ever added to by
 * the executor's own thread while gr_session_staleness may read them.
 *
 * The staleness-aware learning rate (gr_session_options.stale_lr, Zhang et
 * al. 2016) scales each optimizer update's learning rate by 1 / max(1, s),
 * s its staleness as the runtime knows it when it issues the update: its
 * variable's version then, less what the step read as it began.  A
 * partition's updates get one word each in its device's memory
 * (kern_args.lr_scale), which the kernel reads as it runs.  The CPU's word
 * is written just before the update's level runs; an async device's is
 * copied on the queue from a pinned word written as the update's stretch
 * is enqueued or its step graph launched, before it and outside the
 * recording (parts.c, seg_run), as the run counter is.  The pinned word is
 * written once a step, after the end-of-step sync of the one before, so
 * the copy before has always run. */
#include <stdlib.h>

#include "exec_int.h"

/* v's index in s->var, or -1. */
static int var_index(const exec_stale *s, int v)
{
    for (int i = 0; i < s->n_var; i++)
        if (s->var[i] == v) return i;
    return -1;
}

void stale_build(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    exec_stale *s = &e->stale;
    s->var = base_xcalloc((size_t)e->n_calls + 1, sizeof *s->var);
    s->call_var = base_xcalloc((size_t)e->n_calls + 1, sizeof *s->call_var);
    for (int i = 0; i < e->n_calls; i++) {
        const ir_node *n = e->args[i].node;
        s->call_var[i] = -1;
        if (!ops_has(n->op, OPF_UPDATE)) continue;
        int v = g->nodes[n->in[0]].var, j = v >= 0 ? var_index(s, v) : -1;
        if (v >= 0 && j < 0) s->var[j = s->n_var++] = v;
        if (e->env->opt->stale_lr && ops_has_lr(n->op)) s->call_var[i] = j;
    }
    s->seen = base_xcalloc((size_t)s->n_var + 1, sizeof *s->seen);
}

void stale_free(rt_exec *e)
{
    free(e->stale.var);
    free(e->stale.seen);
    free(e->stale.call_var);
}

/* Gives partition pt's scaled updates a word each of words, in order;
 * returns how many there are (words NULL: only counts them). */
static int give_words(rt_exec *e, const exec_part *pt, float *words)
{
    int n = 0;
    for (int l = pt->first_level; l < pt->first_level + pt->n_levels; l++)
        for (int i = e->levels[l].first; i < e->levels[l].first + e->levels[l].n; i++) {
            if (e->stale.call_var[i] < 0) continue;
            if (words) e->args[i].lr_scale = words + n;
            n++;
        }
    return n;
}

gr_code stale_link(rt_exec *e, exec_part *pt, gr_status *st)
{
    int n = give_words(e, pt, NULL);
    if (!n) return GR_OK;
    device_obj *d = pt->dev;
    size_t bytes = (size_t)n * sizeof(float);
    if (!(pt->scale_dev = d->vt->alloc(d, bytes)) ||
        (pt->q && !(pt->scale_host = d->vt->host_alloc(d, bytes))))
        return rt_fail(st, GR_ERR_NOMEM, "cannot allocate the learning-rate scales on %s\n",
                       d->vt->name);
    give_words(e, pt, pt->scale_dev);
    return GR_OK;
}

void stale_unlink(exec_part *pt)
{
    if (pt->scale_dev) pt->dev->vt->free(pt->dev, pt->scale_dev);
    if (pt->scale_host) pt->dev->vt->host_free(pt->dev, pt->scale_host);
    pt->scale_dev = pt->scale_host = NULL;
}

/* 1 / max(1, s), s the updates of variable j since the step began. */
static float scale_of(const rt_exec *e, int j)
{
    const exec_stale *s = &e->stale;
    uint64_t now = __atomic_load_n(&e->env->var_lock[s->var[j]].version, __ATOMIC_RELAXED);
    return kern_stale_factor(now - s->seen[j]);
}

void stale_scale(const rt_exec *e, const exec_part *pt, const exec_level *L)
{
    for (int i = L->first; pt->scale_dev && i < L->first + L->n; i++) {
        float *w = e->args[i].lr_scale;
        if (!w) continue;
        float f = scale_of(e, e->stale.call_var[i]);
        if (!pt->q) {
            *w = f;
            continue;
        }
        float *h = pt->scale_host + (w - pt->scale_dev);
        *h = f;
        pt->dev->vt->copy_async(pt->dev, pt->q, w, h, sizeof *w, DEV_H2D);
    }
}

void stale_begin(rt_exec *e)
{
    exec_stale *s = &e->stale;
    for (int i = 0; i < s->n_var; i++)
        s->seen[i] = __atomic_load_n(&e->env->var_lock[s->var[i]].version, __ATOMIC_RELAXED);
}

void stale_end(rt_exec *e)
{
    exec_stale *s = &e->stale;
    for (int i = 0; i < s->n_var; i++) {
        uint64_t was =
            __atomic_fetch_add(&e->env->var_lock[s->var[i]].version, 1, __ATOMIC_RELAXED);
        uint64_t k = was - s->seen[i];
        atomic_fetch_add_explicit(&s->sum, k, memory_order_relaxed);
        atomic_fetch_add_explicit(
            &s->count[k < GR_STALENESS_BUCKETS ? k : GR_STALENESS_BUCKETS - 1], 1,
            memory_order_relaxed);
    }
}
