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
 * the executor's own thread while gr_session_staleness may read them. */
#include <stdlib.h>

#include "exec_int.h"

static int has_var(const exec_stale *s, int v)
{
    for (int i = 0; i < s->n_var; i++)
        if (s->var[i] == v) return 1;
    return 0;
}

void stale_build(rt_exec *e)
{
    const ir_graph *g = e->p->g;
    exec_stale *s = &e->stale;
    s->var = base_xcalloc((size_t)e->n_calls + 1, sizeof *s->var);
    for (int i = 0; i < e->n_calls; i++) {
        const ir_node *n = e->args[i].node;
        if (!ops_has(n->op, OPF_UPDATE)) continue;
        int v = g->nodes[n->in[0]].var;
        if (v >= 0 && !has_var(s, v)) s->var[s->n_var++] = v;
    }
    s->seen = base_xcalloc((size_t)s->n_var + 1, sizeof *s->seen);
}

void stale_free(rt_exec *e)
{
    free(e->stale.var);
    free(e->stale.seen);
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
