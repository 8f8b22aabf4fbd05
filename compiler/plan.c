/* plan.c - the schedule and the static memory plan for a set of roots.
 *
 * The schedule: a depth-first walk from the roots finds the nodes they need,
 * each gets a level (its longest distance from a source), and the order is
 * by level.  Nodes of one level are independent, so executors may run them
 * in parallel.  Every tensor that is not a variable gets an arena offset,
 * chosen first-fit by liveness measured in levels: a buffer is reused once
 * the level of its last consumer is over, never within a level.  Constants, data
 * batches and inputs live for the whole run.  A reshape is a view: it takes
 * its input's buffer, which then lives as long as the view's consumers.
 * Executors lay out their arena once from this plan, so a step allocates
 * nothing. */
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

#define PLAN_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + PLAN_ALIGN - 1) & ~(size_t)(PLAN_ALIGN - 1);
}

/* Variables live in the session; data batches stay in their reader's ring
 * and are bound per step. */
static int needs_arena(const ir_node *n)
{
    return !ops_has(n->op, OPF_EXTERNAL) && ir_nbytes(&n->type) > 0;
}

/* Constants and feeds are written once per run (or once ever) before any
 * level: they live for the whole run. */
static int pinned(const ir_node *n)
{
    return ops_has(n->op, OPF_SOURCE);
}

/* Longest-path depth from the sources: nodes of one level never depend on
 * each other, so an executor may run a level's nodes in parallel. */
static void assign_levels(plan_graph *p)
{
    const ir_graph *g = p->g;
    p->level = base_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
    IR_WORK(p->n);
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        int lv = 0;
        for (int k = 0; k < nd->n_in + nd->n_ctrl; k++) {
            int c = k < nd->n_in ? nd->in[k] : nd->ctrl[k - nd->n_in];
            if (p->level[c] + 1 > lv) lv = p->level[c] + 1;
        }
        p->level[p->order[i]] = lv;
        if (lv + 1 > p->n_levels) p->n_levels = lv + 1;
    }
}

static int by_level(const void *a, const void *b, void *levels)
{
    const int *lv = levels, x = *(const int *)a, y = *(const int *)b;
    if (lv[x] != lv[y]) return lv[x] - lv[y];
    return x - y;
}

/* Iterative DFS post-order over inputs and control deps. */
static int schedule(const ir_graph *g, const int *roots, int n_roots, int *order)
{
    unsigned char *state = base_xcalloc((size_t)g->n_nodes, 1); /* 0 new, 1 open, 2 done */
    int *stack = base_xmalloc(sizeof(int) * 2 * (size_t)(g->n_nodes + 1)), sp = 0, n = 0;
    IR_WORK(g->n_nodes + n_roots);
    for (int r = 0; r < n_roots; r++) {
        if (state[roots[r]]) continue;
        stack[sp++] = roots[r], stack[sp++] = 0;
        state[roots[r]] = 1;
        while (sp) {
            int id = stack[sp - 2], k = stack[sp - 1];
            IR_WORK(1);
            const ir_node *nd = &g->nodes[id];
            if (k < nd->n_in + nd->n_ctrl) {
                stack[sp - 1]++;
                int c = k < nd->n_in ? nd->in[k] : nd->ctrl[k - nd->n_in];
                if (!state[c]) state[c] = 1, stack[sp++] = c, stack[sp++] = 0;
                continue;
            }
            sp -= 2;
            state[id] = 2;
            order[n++] = id;
        }
    }
    free(state);
    free(stack);
    return n;
}

typedef struct live {
    int node, start, end;
    size_t bytes;
} live;

static int by_start(const void *a, const void *b)
{
    const live *x = a, *y = b;
    if (x->start != y->start) return x->start - y->start;
    return x->node - y->node;
}

/* ---- first-fit over the live buffers, O(log n) per buffer ----
 *
 * The live buffers of a partition never overlap, so sorted by offset each
 * has a gap before it: from the previous buffer's end, or from the end of
 * the pinned buffers (live for the whole run, packed from 0 first, where
 * first-fit would put them too).  First-fit takes the gap of the lowest
 * buffer that holds the new one, else the space after the last.  A treap
 * keyed by offset keeps each subtree's largest gap, so the search, and the
 * insertions and removals that change one neighbour's gap, cost O(log n)
 * rather than a scan of every live buffer: the plan of an unrolled loop
 * with thousands of live tensors stays fast. */
typedef struct fit_node {
    size_t off, end, gap, max_gap;
    uint32_t prio;
    int l, r;
} fit_node;

typedef struct plan_alloc {
    fit_node *t; /* by the buffer's index in the sorted lifetimes */
    int root;
    size_t pinned_top;
    uint32_t seed;
} plan_alloc;

static void fit_update(fit_node *t, int x)
{
    size_t m = t[x].gap;
    if (t[x].l >= 0 && t[t[x].l].max_gap > m) m = t[t[x].l].max_gap;
    if (t[x].r >= 0 && t[t[x].r].max_gap > m) m = t[t[x].r].max_gap;
    t[x].max_gap = m;
}

/* Splits x into the buffers below `off` (*a) and the rest (*b). */
static void fit_split(fit_node *t, int x, size_t off, int *a, int *b)
{
    if (x < 0) {
        *a = *b = -1;
    } else if (t[x].off < off) {
        fit_split(t, t[x].r, off, &t[x].r, b);
        *a = x;
        fit_update(t, x);
    } else {
        fit_split(t, t[x].l, off, a, &t[x].l);
        *b = x;
        fit_update(t, x);
    }
}

/* Every buffer of a lies below every buffer of b. */
static int fit_merge(fit_node *t, int a, int b)
{
    if (a < 0) return b;
    if (b < 0) return a;
    if (t[a].prio > t[b].prio) {
        t[a].r = fit_merge(t, t[a].r, b);
        fit_update(t, a);
        return a;
    }
    t[b].l = fit_merge(t, a, t[b].l);
    fit_update(t, b);
    return b;
}

/* The end of the highest buffer in x, or `none` when x is empty. */
static size_t fit_last_end(const fit_node *t, int x, size_t none)
{
    if (x < 0) return none;
    while (t[x].r >= 0) x = t[x].r;
    return t[x].end;
}

/* The lowest buffer of x now follows a buffer ending at `from`. */
static void fit_first_gap(fit_node *t, int x, size_t from)
{
    if (x < 0) return;
    if (t[x].l >= 0)
        fit_first_gap(t, t[x].l, from);
    else
        t[x].gap = t[x].off - from;
    fit_update(t, x);
}

/* The lowest buffer of x with a gap of at least `bytes` before it, or -1. */
static int fit_find(const fit_node *t, int x, size_t bytes)
{
    while (x >= 0 && t[x].max_gap >= bytes) {
        if (t[x].l >= 0 && t[t[x].l].max_gap >= bytes)
            x = t[x].l;
        else if (t[x].gap >= bytes)
            return x;
        else
            x = t[x].r;
    }
    return -1;
}

/* Places buffer i (bytes long) first-fit; returns its offset. */
static size_t fit_insert(plan_alloc *a, int i, size_t bytes)
{
    fit_node *t = a->t;
    int at = fit_find(t, a->root, bytes), lo, hi;
    size_t off = at >= 0 ? t[at].off - t[at].gap : fit_last_end(t, a->root, a->pinned_top);
    fit_split(t, a->root, off, &lo, &hi);
    a->seed = a->seed * 1664525u + 1013904223u; /* priorities: any fixed sequence */
    size_t prev = fit_last_end(t, lo, a->pinned_top);
    t[i] = (fit_node){.off = off, .end = off + bytes, .gap = off - prev, .prio = a->seed};
    t[i].l = t[i].r = -1;
    fit_update(t, i);
    fit_first_gap(t, hi, off + bytes);
    a->root = fit_merge(t, fit_merge(t, lo, i), hi);
    return off;
}

/* Buffer i's last consumer is done: its space may be reused. */
static void fit_remove(plan_alloc *a, int i)
{
    fit_node *t = a->t;
    int lo, mid, hi;
    fit_split(t, a->root, t[i].off, &lo, &mid);
    fit_split(t, mid, t[i].off + 1, &mid, &hi);
    GR_ASSERT(mid == i);
    fit_first_gap(t, hi, fit_last_end(t, lo, a->pinned_top));
    a->root = fit_merge(t, lo, hi);
}

static int by_end(const void *a, const void *b, void *ls)
{
    const live *l = ls;
    int x = *(const int *)a, y = *(const int *)b;
    if (l[x].end != l[y].end) return l[x].end - l[y].end;
    return x - y;
}

/* The buffer node id reads through a view: its own, or the one its chain of
 * reshapes views. */
static int buffer_of(const int *view, int id)
{
    return view[id] >= 0 ? view[id] : id;
}

/* A reshape of a tensor of partition k in the arena, in k too, views its
 * buffer (the executor's copy then has nothing to do: in == out). */
static int is_view(const plan_graph *p, int k_part, int id)
{
    const ir_node *nd = &p->g->nodes[id];
    return nd->op == OP_RESHAPE && p->part[id] == k_part && p->part[nd->in[0]] == k_part &&
           needs_arena(&p->g->nodes[nd->in[0]]);
}

/* Lifetimes of partition k's tensors, in its own levels' terms: a buffer is
 * kept for consumers in k only (a crossing edge reads its own receive
 * buffer, pinned for the run, which follows the nodes at ls[n_nodes..]),
 * and for its views' consumers (view[id]: the buffer's node, else -1). */
static void lifetimes(plan_graph *p, int k_part, live *ls, int *n_ls, int *pos, int *view)
{
    const ir_graph *g = p->g;
    IR_WORK(3 * p->n + p->n_roots + p->n_xfers);
    for (int i = 0; i < p->n; i++) pos[p->order[i]] = i, view[p->order[i]] = -1;
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        int lv = p->level[p->order[i]];
        if (is_view(p, k_part, p->order[i])) { /* inputs come first in the order */
            view[p->order[i]] = buffer_of(view, nd->in[0]);
            continue;
        }
        if (!needs_arena(nd) || p->part[p->order[i]] != k_part) continue;
        ls[n++] = (live){.node = p->order[i],
                         .start = pinned(nd) ? -1 : lv,
                         .end = lv,
                         .bytes = align_up(ir_nbytes(&nd->type))};
    }
    for (int k = 0; k < n; k++) pos[ls[k].node] = -(k + 2); /* live index, for consumers */
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        int lv = p->level[p->order[i]];
        if (p->part[p->order[i]] != k_part) continue;
        for (int j = 0; j < nd->n_in; j++) {
            int li = -pos[buffer_of(view, nd->in[j])] - 2;
            if (li >= 0 && ls[li].end < lv) ls[li].end = lv;
        }
    }
    for (int k = 0; k < n; k++)
        if (pinned(&g->nodes[ls[k].node])) ls[k].end = p->n_levels;
    for (int r = 0; r < p->n_roots; r++) {
        int li = -pos[buffer_of(view, p->roots[r])] - 2;
        if (li >= 0) ls[li].end = p->n_levels;
    }
    for (int x = 0; x < p->n_xfers; x++) /* node -(x + 1) names transfer x */
        if (p->xfers[x].dst_part == k_part && p->xfers[x].bytes)
            ls[n++] = (live){-(x + 1), -1, p->n_levels, align_up(p->xfers[x].bytes)};
    *n_ls = n;
}

/* Partition k's region starts at the arena's current end. */
/* Offsets for ls[0..n) (sorted by start) relative to the region's start:
 * a buffer dies once the level of its last consumer is over, that is
 * before the first buffer that starts after it. */
static void place_all(live *ls, int n, size_t *off)
{
    plan_alloc a = {.t = base_xmalloc(sizeof(fit_node) * (size_t)(n + 1)), .root = -1};
    int *dying = base_xmalloc(sizeof(int) * (size_t)(n + 1)), n_dying = 0, d = 0;
    IR_WORK(2 * n);
    for (int k = 0; k < n; k++)
        if (ls[k].start >= 0) dying[n_dying++] = k;
    qsort_r(dying, (size_t)n_dying, sizeof(int), by_end, ls);
    for (int k = 0; k < n; k++) {
        if (ls[k].start < 0) { /* pinned: sorted first */
            off[k] = a.pinned_top;
            a.pinned_top += ls[k].bytes;
            continue;
        }
        for (; d < n_dying && ls[dying[d]].end < ls[k].start; d++) fit_remove(&a, dying[d]);
        off[k] = fit_insert(&a, k, ls[k].bytes);
    }
    free(dying);
    free(a.t);
}

/* Partition k's region starts at the arena's current end. */
static void assign_offsets(plan_graph *p, int k_part)
{
    int n_ls;
    size_t base = align_up(p->arena_bytes), top = base;
    live *ls = base_xmalloc(sizeof *ls * (size_t)(p->n + p->n_xfers + 1));
    size_t *off = base_xmalloc(sizeof *off * (size_t)(p->n + p->n_xfers + 1));
    int *pos = base_xmalloc(sizeof(int) * (size_t)(p->g->n_nodes + 1));
    int *view = base_xmalloc(sizeof(int) * (size_t)(p->g->n_nodes + 1));
    IR_WORK(2 * p->n + p->n_xfers);
    lifetimes(p, k_part, ls, &n_ls, pos, view);
    qsort(ls, (size_t)n_ls, sizeof *ls, by_start);
    place_all(ls, n_ls, off);
    for (int k = 0; k < n_ls; k++) {
        if (ls[k].node >= 0)
            p->offset[ls[k].node] = base + off[k];
        else
            p->xfers[-ls[k].node - 1].offset = base + off[k];
        if (base + off[k] + ls[k].bytes > top) top = base + off[k] + ls[k].bytes;
    }
    for (int i = 0; i < p->n; i++)
        if (view[p->order[i]] >= 0) p->offset[p->order[i]] = p->offset[view[p->order[i]]];
    p->part_base[k_part] = base;
    p->part_bytes[k_part] = top - base;
    p->arena_bytes = top;
    free(ls);
    free(off);
    free(pos);
    free(view);
}

/* ---- partitions ---- */

static int by_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* One partition per device, in device order (cpu:0 first). */
static void assign_parts(plan_graph *p)
{
    const ir_graph *g = p->g;
    p->part = base_xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    p->part_dev = base_xmalloc(sizeof(int) * (size_t)(p->n + 1));
    IR_WORK(g->n_nodes + 2 * p->n);
    for (int i = 0; i < g->n_nodes; i++) p->part[i] = -1;
    for (int i = 0; i < p->n; i++) {
        int dev = g->nodes[p->order[i]].device, seen = 0;
        for (int k = 0; k < p->n_parts; k++) seen |= p->part_dev[k] == dev;
        if (!seen) p->part_dev[p->n_parts++] = dev;
    }
    qsort(p->part_dev, (size_t)p->n_parts, sizeof(int), by_int);
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < p->n_parts; k++)
            if (p->part_dev[k] == g->nodes[p->order[i]].device) p->part[p->order[i]] = k;
}

/* Binary search: the transfers are sorted by (src, dst_part). */
int plan_xfer_find(const plan_graph *p, int src, int dst_part)
{
    int lo = 0, hi = p->n_xfers;
    while (IR_WORK(1), lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const plan_xfer *t = &p->xfers[mid];
        if (t->src < src || (t->src == src && t->dst_part < dst_part))
            lo = mid + 1;
        else
            hi = mid;
    }
    const plan_xfer *t = &p->xfers[lo];
    return lo < p->n_xfers && t->src == src && t->dst_part == dst_part ? lo : -1;
}

static int by_src(const void *a, const void *b)
{
    const plan_xfer *x = a, *y = b;
    return x->src != y->src ? x->src - y->src : x->dst_part - y->dst_part;
}

/* Sorted, one transfer per (src, dst_part) carries the most bytes any of
 * its edges needs (a data edge beats a control-only one). */
static void merge_xfers(plan_graph *p)
{
    qsort(p->xfers, (size_t)p->n_xfers, sizeof *p->xfers, by_src);
    IR_WORK(p->n_xfers);
    int n = 0;
    for (int x = 0; x < p->n_xfers; x++) {
        plan_xfer *last = n ? &p->xfers[n - 1] : NULL;
        if (last && by_src(last, &p->xfers[x]) == 0) {
            if (p->xfers[x].bytes > last->bytes) last->bytes = p->xfers[x].bytes;
            continue;
        }
        p->xfers[n++] = p->xfers[x];
    }
    p->n_xfers = n;
}

/* Every edge between partitions, data or control.  An update's variable
 * (in[0]) is written in place, so it never travels: sema keeps an update
 * with its variable. */
static void collect_xfers(plan_graph *p)
{
    const ir_graph *g = p->g;
    int cap = 0;
    IR_WORK(2 * p->n);
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        cap += nd->n_in + nd->n_ctrl;
    }
    p->xfers = base_xcalloc((size_t)cap + 1, sizeof *p->xfers);
    for (int i = 0; i < p->n && p->n_parts > 1; i++) {
        int v = p->order[i];
        const ir_node *nd = &g->nodes[v];
        for (int j = 0; j < nd->n_in + nd->n_ctrl; j++) {
            int u = j < nd->n_in ? nd->in[j] : nd->ctrl[j - nd->n_in];
            if (p->part[u] == p->part[v] || (j == 0 && ops_has(nd->op, OPF_UPDATE))) continue;
            size_t bytes = j < nd->n_in ? ir_nbytes(&g->nodes[u].type) : 0;
            p->xfers[p->n_xfers++] = (plan_xfer){u, p->part[v], PLAN_NONE, bytes};
        }
    }
    merge_xfers(p);
}

static void collect_data(plan_graph *p)
{
    p->data_used = base_xcalloc((size_t)p->g->n_data + 1, sizeof(int));
    IR_WORK(p->n);
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &p->g->nodes[p->order[i]];
        if (nd->op != OP_DATA) continue;
        int seen = 0;
        for (int k = 0; k < p->n_data_used; k++) seen |= p->data_used[k] == nd->data;
        if (!seen) p->data_used[p->n_data_used++] = nd->data;
    }
    qsort(p->data_used, (size_t)p->n_data_used, sizeof(int), by_int); /* the take order */
}

plan_graph *plan_build(const ir_graph *g, const int *roots, int n_roots)
{
    plan_graph *p = base_xcalloc(1, sizeof *p);
    p->g = g;
    p->order = base_xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    p->offset = base_xmalloc(sizeof(size_t) * (size_t)(g->n_nodes + 1));
    IR_WORK(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) p->offset[i] = PLAN_NONE;
    p->roots = base_xmalloc(sizeof(int) * (size_t)(n_roots + 1));
    memcpy(p->roots, roots, sizeof(int) * (size_t)n_roots);
    p->n_roots = n_roots;
    p->n = schedule(g, roots, n_roots, p->order);
    assign_levels(p);
    qsort_r(p->order, (size_t)p->n, sizeof(int), by_level, p->level);
    assign_parts(p);
    collect_xfers(p);
    p->part_base = base_xcalloc((size_t)p->n_parts + 1, sizeof *p->part_base);
    p->part_bytes = base_xcalloc((size_t)p->n_parts + 1, sizeof *p->part_bytes);
    for (int k = 0; k < p->n_parts; k++) assign_offsets(p, k);
    IR_WORK(p->n);
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        size_t s = ops_table[nd->op].scratch ? ops_table[nd->op].scratch(g, p->order[i]) : 0;
        if (s > p->scratch_task_bytes) p->scratch_task_bytes = align_up(s);
    }
    collect_data(p);
    return p;
}

void plan_free(plan_graph *p)
{
    if (!p) return;
    free(p->order);
    free(p->level);
    free(p->offset);
    free(p->roots);
    free(p->data_used);
    free(p->part);
    free(p->part_dev);
    free(p->part_base);
    free(p->part_bytes);
    free(p->xfers);
    free(p);
}

static size_t vars_bytes(const ir_graph *g)
{
    size_t n = 0;
    for (int i = 0; i < g->n_vars; i++) n += ir_nbytes(&g->vars[i].type);
    return n;
}

/* Partitions and their transfers, when there is more than one: each
 * value sent, from where to where, and the bytes it carries every step. */
static void dump_parts(const plan_graph *p, FILE *out)
{
    char a[32], b[32], t[96];
    size_t total = 0;
    for (int x = 0; x < p->n_xfers; x++) {
        const plan_xfer *tr = &p->xfers[x];
        const ir_node *n = &p->g->nodes[tr->src];
        fprintf(out, "  send %%%-5d %-18s %-20s %s -> %s", tr->src, ops_name(n->op),
                ir_type_str(&n->type, t, sizeof t),
                ir_dev_str(p->part_dev[p->part[tr->src]], a, sizeof a),
                ir_dev_str(p->part_dev[tr->dst_part], b, sizeof b));
        if (tr->bytes)
            fprintf(out, "  %zu bytes/step, recv arena[%zu..%zu)\n", tr->bytes, tr->offset,
                    tr->offset + tr->bytes);
        else
            fprintf(out, "  (control only)\n");
        total += tr->bytes;
    }
    fprintf(out, "transfers: %d, %zu bytes per step\n", p->n_xfers, total);
}

void plan_dump(const plan_graph *p, FILE *out)
{
    const ir_graph *g = p->g;
    size_t naive = 0;
    char dn[32];
    fprintf(out, "plan: %d nodes", p->n);
    if (p->n_parts > 1) {
        fprintf(out, " in %d partitions (", p->n_parts);
        for (int k = 0; k < p->n_parts; k++)
            fprintf(out, "%s%s", k ? ", " : "", ir_dev_str(p->part_dev[k], dn, sizeof dn));
        fprintf(out, "), %d transfers", p->n_xfers);
    }
    fputc('\n', out);
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        char t[96];
        fprintf(out, "  %4d  %%%-5d %-18s %-20s", i, p->order[i], ops_name(nd->op),
                ir_type_str(&nd->type, t, sizeof t));
        if (p->n_parts > 1) fprintf(out, " %-6s", ir_dev_str(nd->device, dn, sizeof dn));
        if (p->offset[p->order[i]] != PLAN_NONE) {
            fprintf(out, " arena[%zu..%zu)", p->offset[p->order[i]],
                    p->offset[p->order[i]] + ir_nbytes(&nd->type));
            if (nd->op == OP_RESHAPE && p->offset[nd->in[0]] == p->offset[p->order[i]])
                fprintf(out, " view of %%%d", nd->in[0]);
            else
                naive += align_up(ir_nbytes(&nd->type));
        } else if (nd->op == OP_VARIABLE)
            fprintf(out, " var %s", g->vars[nd->var].name);
        fputc('\n', out);
    }
    if (p->n_parts > 1) dump_parts(p, out);
    fprintf(out, "arena: %zu bytes (%zu without reuse)\n", p->arena_bytes, naive);
    fprintf(out, "scratch per task: %zu bytes\n", p->scratch_task_bytes);
    fprintf(out, "variables: %d, %zu bytes\n", g->n_vars, vars_bytes(g));
}
