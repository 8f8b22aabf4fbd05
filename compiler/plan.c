/* plan.c - the schedule and the static memory plan for a set of roots.
 *
 * The schedule: a depth-first walk from the roots finds the nodes they need,
 * each gets a level (its longest distance from a source), and the order is
 * by level.  Nodes of one level are independent, so executors may run them
 * in parallel.  Every tensor that is not a variable gets an arena offset,
 * chosen first-fit by liveness measured in levels: a buffer is reused once
 * the level of its last consumer is over, never within a level.  Constants, data
 * batches and inputs live for the whole run.  Executors lay out their arena
 * once from this plan, so a step allocates nothing. */
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
    p->level = xcalloc((size_t)g->n_nodes + 1, sizeof(int));
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
    unsigned char *state = xcalloc((size_t)g->n_nodes, 1); /* 0 new, 1 open, 2 done */
    int *stack = xmalloc(sizeof(int) * 2 * (size_t)(g->n_nodes + 1)), sp = 0, n = 0;
    for (int r = 0; r < n_roots; r++) {
        if (state[roots[r]]) continue;
        stack[sp++] = roots[r], stack[sp++] = 0;
        state[roots[r]] = 1;
        while (sp) {
            int id = stack[sp - 2], k = stack[sp - 1];
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

/* First-fit: the lowest offset whose gap, between buffers still live at
 * `l->start`, holds l->bytes. `act` is kept sorted by offset. */
static size_t place(live *act, size_t *act_off, int *n_act, const live *l)
{
    int w = 0;
    for (int i = 0; i < *n_act; i++)
        if (act[i].end >= l->start) act[w] = act[i], act_off[w++] = act_off[i];
    *n_act = w;
    size_t off = 0;
    int at = 0;
    for (; at < w; at++) {
        if (act_off[at] >= off + l->bytes) break;
        size_t e = act_off[at] + act[at].bytes;
        if (e > off) off = e;
    }
    memmove(act + at + 1, act + at, sizeof *act * (size_t)(w - at));
    memmove(act_off + at + 1, act_off + at, sizeof *act_off * (size_t)(w - at));
    act[at] = *l;
    act_off[at] = off;
    (*n_act)++;
    return off;
}

/* Lifetimes of partition k's tensors, in its own levels' terms: a buffer is
 * kept for consumers in k only (a crossing edge reads its own receive
 * buffer, pinned for the run, which follows the nodes at ls[n_nodes..]). */
static void lifetimes(plan_graph *p, int k_part, live *ls, int *n_ls, int *pos)
{
    const ir_graph *g = p->g;
    for (int i = 0; i < p->n; i++) pos[p->order[i]] = i;
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        int lv = p->level[p->order[i]];
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
            int li = -pos[nd->in[j]] - 2;
            if (li >= 0 && ls[li].end < lv) ls[li].end = lv;
        }
    }
    for (int k = 0; k < n; k++) {
        if (pinned(&g->nodes[ls[k].node])) ls[k].end = p->n_levels;
        for (int r = 0; r < p->n_roots; r++)
            if (p->roots[r] == ls[k].node) ls[k].end = p->n_levels;
    }
    for (int x = 0; x < p->n_xfers; x++) /* node -(x + 1) names transfer x */
        if (p->xfers[x].dst_part == k_part && p->xfers[x].bytes)
            ls[n++] = (live){-(x + 1), -1, p->n_levels, align_up(p->xfers[x].bytes)};
    *n_ls = n;
}

/* Partition k's region starts at the arena's current end. */
static void assign_offsets(plan_graph *p, int k_part)
{
    int n_ls, n_act = 0;
    size_t base = align_up(p->arena_bytes), top = base;
    live *ls = xmalloc(sizeof *ls * (size_t)(p->n + p->n_xfers + 1));
    live *act = xmalloc(sizeof *act * (size_t)(p->n + p->n_xfers + 1));
    size_t *act_off = xmalloc(sizeof *act_off * (size_t)(p->n + p->n_xfers + 1));
    int *pos = xmalloc(sizeof(int) * (size_t)(p->g->n_nodes + 1));
    lifetimes(p, k_part, ls, &n_ls, pos);
    qsort(ls, (size_t)n_ls, sizeof *ls, by_start);
    for (int k = 0; k < n_ls; k++) {
        size_t off = base + place(act, act_off, &n_act, &ls[k]);
        if (ls[k].node >= 0)
            p->offset[ls[k].node] = off;
        else
            p->xfers[-ls[k].node - 1].offset = off;
        if (off + ls[k].bytes > top) top = off + ls[k].bytes;
    }
    p->part_base[k_part] = base;
    p->part_bytes[k_part] = top - base;
    p->arena_bytes = top;
    free(ls);
    free(act);
    free(act_off);
    free(pos);
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
    p->part = xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    p->part_dev = xmalloc(sizeof(int) * (size_t)(p->n + 1));
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

int plan_xfer_find(const plan_graph *p, int src, int dst_part)
{
    for (int x = 0; x < p->n_xfers; x++)
        if (p->xfers[x].src == src && p->xfers[x].dst_part == dst_part) return x;
    return -1;
}

static void add_xfer(plan_graph *p, int src, int dst_part, size_t bytes)
{
    int x = plan_xfer_find(p, src, dst_part);
    if (x >= 0) {
        if (bytes > p->xfers[x].bytes) p->xfers[x].bytes = bytes;
        return;
    }
    p->xfers[p->n_xfers++] = (plan_xfer){src, dst_part, PLAN_NONE, bytes};
}

static int by_src(const void *a, const void *b)
{
    const plan_xfer *x = a, *y = b;
    return x->src != y->src ? x->src - y->src : x->dst_part - y->dst_part;
}

/* Every edge between partitions, data or control.  An update's variable
 * (in[0]) is written in place, so it never travels: sema keeps an update
 * with its variable. */
static void collect_xfers(plan_graph *p)
{
    const ir_graph *g = p->g;
    int cap = 0;
    for (int i = 0; i < p->n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        cap += nd->n_in + nd->n_ctrl;
    }
    p->xfers = xcalloc((size_t)cap + 1, sizeof *p->xfers);
    for (int i = 0; i < p->n && p->n_parts > 1; i++) {
        int v = p->order[i];
        const ir_node *nd = &g->nodes[v];
        for (int j = 0; j < nd->n_in + nd->n_ctrl; j++) {
            int u = j < nd->n_in ? nd->in[j] : nd->ctrl[j - nd->n_in];
            if (p->part[u] == p->part[v] || (j == 0 && ops_has(nd->op, OPF_UPDATE))) continue;
            add_xfer(p, u, p->part[v], j < nd->n_in ? ir_nbytes(&g->nodes[u].type) : 0);
        }
    }
    qsort(p->xfers, (size_t)p->n_xfers, sizeof *p->xfers, by_src);
}

static void collect_data(plan_graph *p)
{
    p->data_used = xcalloc((size_t)p->g->n_data + 1, sizeof(int));
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
    plan_graph *p = xcalloc(1, sizeof *p);
    p->g = g;
    p->order = xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    p->offset = xmalloc(sizeof(size_t) * (size_t)(g->n_nodes + 1));
    for (int i = 0; i < g->n_nodes; i++) p->offset[i] = PLAN_NONE;
    p->roots = xmalloc(sizeof(int) * (size_t)(n_roots + 1));
    memcpy(p->roots, roots, sizeof(int) * (size_t)n_roots);
    p->n_roots = n_roots;
    p->n = schedule(g, roots, n_roots, p->order);
    assign_levels(p);
    qsort_r(p->order, (size_t)p->n, sizeof(int), by_level, p->level);
    assign_parts(p);
    collect_xfers(p);
    p->part_base = xcalloc((size_t)p->n_parts + 1, sizeof *p->part_base);
    p->part_bytes = xcalloc((size_t)p->n_parts + 1, sizeof *p->part_bytes);
    for (int k = 0; k < p->n_parts; k++) assign_offsets(p, k);
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

/* Partitions and their transfers, when there is more than one. */
static void dump_parts(const plan_graph *p, FILE *out)
{
    char a[32], b[32];
    for (int x = 0; x < p->n_xfers; x++) {
        const plan_xfer *t = &p->xfers[x];
        fprintf(out, "  send %%%-5d %s -> %s", t->src,
                ir_dev_str(p->part_dev[p->part[t->src]], a, sizeof a),
                ir_dev_str(p->part_dev[t->dst_part], b, sizeof b));
        if (t->bytes)
            fprintf(out, "  recv arena[%zu..%zu)\n", t->offset, t->offset + t->bytes);
        else
            fprintf(out, "  (control only)\n");
    }
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
