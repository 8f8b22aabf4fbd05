/* profile.c - what the executors measured, summed over every plan and
 * executor of the session: gr_session_profile, the per-call times
 * (schedule.c's run_call, under gr_session_options.profile) per graph node,
 * and gr_session_staleness, the staleness of their updates (stale.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime/dist/dist.h"
#include "runtime/exec/exec_int.h"

typedef struct node_time {
    int node;
    uint64_t ns, calls;
} node_time;

static int by_time_desc(const void *a, const void *b)
{
    const node_time *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : x->node - y->node;
}

/* Adds executor e's calls into per-node sums ctx (indexed by node id). */
static void add_exec(const rt_exec *e, void *ctx)
{
    node_time *t = ctx;
    for (int i = 0; e->prof && i < e->n_calls; i++) {
        int id = (int)(e->args[i].node - e->p->g->nodes);
        t[id].ns += atomic_load_explicit(&e->prof[i].ns, memory_order_relaxed);
        t[id].calls += atomic_load_explicit(&e->prof[i].calls, memory_order_relaxed);
    }
}

/* The source line of node n, trimmed, into out. */
static void source_line(const ir_node *n, gr_profile_row *r)
{
    int col;
    r->file = NULL, r->line = 0, r->source[0] = 0;
    if (!n->src) return;
    src_linecol(n->src, n->span.begin, &r->line, &col);
    r->file = n->src->name;
    if (r->line < 1 || (size_t)r->line > n->src->n_lines) return;
    const char *p = n->src->text + n->src->lines[r->line - 1], *end = n->src->text + n->src->len;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    size_t k = 0;
    while (p + k < end && p[k] != '\n' && p[k] != '\r' && k + 1 < sizeof r->source) k++;
    memcpy(r->source, p, k);
    r->source[k] = 0;
}

static void fill_row(const gr_session *s, const node_time *t, gr_profile_row *r)
{
    const ir_graph *g = rt_session_graph(s);
    const ir_node *n = &g->nodes[t->node];
    r->op = ops_name(n->op);
    /* an update's output is a token: show the variable it writes */
    const ir_type *ty = ops_has(n->op, OPF_UPDATE) ? &g->nodes[n->in[0]].type : &n->type;
    ir_type_str(ty, r->type, sizeof r->type);
    ir_dev_str(n->device, r->device, sizeof r->device);
    source_line(n, r);
    r->calls = t->calls;
    r->seconds = (double)t->ns * 1e-9;
}

int gr_session_profile(gr_session *s, gr_profile_row *rows, int cap)
{
    if (!s || !rt_session_options(s)->profile) return 0;
    const ir_graph *g = rt_session_graph(s);
    node_time *t = base_xcalloc((size_t)g->n_nodes + 1, sizeof *t);
    rt_plans_each_exec(s, add_exec, t);
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (t[i].calls) t[n] = t[i], t[n++].node = i;
    qsort(t, (size_t)n, sizeof *t, by_time_desc);
    for (int i = 0; rows && i < n && i < cap; i++) fill_row(s, &t[i], &rows[i]);
    free(t);
    return n;
}

/* ---- staleness (runtime/exec/stale.c counts it) ---- */

static void add_stale(const rt_exec *e, void *ctx)
{
    gr_staleness *o = ctx;
    for (int k = 0; k < GR_STALENESS_BUCKETS; k++) {
        uint64_t c = atomic_load_explicit(&e->stale.count[k], memory_order_relaxed);
        o->count[k] += c;
        o->updates += c;
    }
    o->sum += atomic_load_explicit(&e->stale.sum, memory_order_relaxed);
}

void gr_session_staleness(gr_session *s, gr_staleness *out)
{
    memset(out, 0, sizeof *out);
    if (s && !dist_staleness(rt_session_dist(s), out)) rt_plans_each_exec(s, add_stale, out);
}

void gr_staleness_between(const gr_staleness *now, const gr_staleness *before, double *mean,
                          uint64_t *p99, uint64_t *max)
{
    uint64_t n = now->updates - before->updates, hi = 0, at99 = 0, seen = 0;
    /* the smallest k with at least 99% of the updates at k or below */
    uint64_t need = n - n / 100;
    for (int k = 0; k < GR_STALENESS_BUCKETS; k++) {
        uint64_t c = now->count[k] - before->count[k];
        if (c) hi = (uint64_t)k;
        if (seen < need && seen + c >= need) at99 = (uint64_t)k;
        seen += c;
    }
    if (mean) *mean = n ? (double)(now->sum - before->sum) / (double)n : 0.0;
    if (p99) *p99 = at99;
    if (max) *max = hi;
}
