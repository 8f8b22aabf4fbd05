/* passes.c - graph rewrites after autodiff.  Each pass maps IR to IR and can
 * be switched off (PASS_* bits) so tests can compare results with and
 * without it.  Pruning per target happens in plan.c (only what a target
 * reaches is scheduled).
 *
 *   cse:  identical pure nodes (op, inputs, attrs, type, device) merge
 *   fold: a pure node whose inputs are all constants becomes a constant,
 *         computed at compile time by the caller's evaluator (the runtime
 *         passes the CPU kernels); x / c by a scalar constant becomes
 *         x * (1/c)
 *   fuse: matmul followed by a bias add becomes one matmul_bias, and a relu
 *         after it joins too (relu_grad then reads the relu's output: x > 0
 *         exactly where relu(x) > 0); apply_sgd of a matmul (a weight
 *         gradient) becomes apply_sgd_matmul, one GEMM that accumulates
 *         -lr * a@b straight into the variable: the gradient is never
 *         stored, and the variable is read and written once */
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

#define FOLD_MAX_ELEMS 65536
/* Smaller weights keep a separate sgd pass: OpenBLAS's beta = 0 small-matrix
 * kernel beats its beta = 1 one there (784x10 += 784x32 @ 32x10: 10.9 us
 * fused vs 8.5 us separate), while from ~10K elements the fused GEMM wins
 * (784x512: 512 us vs 580 us). */
#define FUSE_SGD_MIN_ELEMS 8192

/* Ops with state or side effects never merge or fold, nor do nodes that must
 * wait for others (control dependencies). */
static int is_pure(const ir_node *n)
{
    return !ops_has(n->op, OPF_STATEFUL) && n->n_ctrl == 0;
}

/* Points every use of `from` (inputs, control deps, names, vars) at `to`. */
static void replace_uses(ir_graph *g, int from, int to)
{
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == from) n->in[j] = to;
        for (int j = 0; j < n->n_ctrl; j++)
            if (n->ctrl[j] == from) n->ctrl[j] = to;
    }
    for (int i = 0; i < g->n_names; i++)
        if (g->names[i].node == from) g->names[i].node = to;
    g->nodes[from].dead = 1;
}

static int same_node(const ir_node *a, const ir_node *b)
{
    if (a->op != b->op || a->n_in != b->n_in || a->device != b->device ||
        !ir_type_eq(&a->type, &b->type) || memcmp(&a->attr, &b->attr, sizeof a->attr))
        return 0;
    if (a->n_in && memcmp(a->in, b->in, sizeof(int) * (size_t)a->n_in)) return 0;
    if (a->cdata || b->cdata)
        return a->cdata && b->cdata && memcmp(a->cdata, b->cdata, ir_nbytes(&a->type)) == 0;
    return 1;
}

static uint64_t node_hash(const ir_node *n)
{
    uint64_t h = (uint64_t)n->op * 1000003u ^ (uint64_t)n->device;
    for (int j = 0; j < n->n_in; j++) h = h * 31 + (uint64_t)n->in[j];
    for (int j = 0; j < n->type.rank; j++) h = h * 17 + (uint64_t)n->type.dim[j];
    return h;
}

/* Nodes are in topological id order until fusion, so one forward sweep
 * merges whole duplicated subgraphs. */
static void pass_cse(ir_graph *g)
{
    int cap = 1;
    while (cap < 2 * g->n_nodes) cap <<= 1;
    int *table = xmalloc(sizeof(int) * (size_t)cap);
    memset(table, -1, sizeof(int) * (size_t)cap);
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead || !is_pure(n)) continue;
        size_t k = node_hash(n) & (size_t)(cap - 1);
        for (; table[k] >= 0; k = (k + 1) & (size_t)(cap - 1))
            if (same_node(&g->nodes[table[k]], n)) break;
        if (table[k] >= 0)
            replace_uses(g, i, table[k]);
        else
            table[k] = i;
    }
    free(table);
}

static void fold_node(ir_graph *g, int id, const pass_evaluator *ev)
{
    ir_node *n = &g->nodes[id];
    void *in[PASS_EVAL_MAX_IN];
    if (n->n_in > PASS_EVAL_MAX_IN) return;
    for (int j = 0; j < n->n_in; j++) {
        ir_node *c = &g->nodes[n->in[j]];
        if (!c->cdata) { /* materialise a filled constant */
            void *d = ir_alloc(g, ir_nbytes(&c->type) + 1);
            ir_const_fill(c, d);
            c->cdata = d;
        }
        in[j] = (void *)c->cdata;
    }
    void *out = ir_alloc(g, ir_nbytes(&n->type) + 1);
    char err[256];
    if (ev->eval(ev->ctx, g, id, out, in, err, sizeof err) < 0) {
        diag_error(g->diags, n->src, n->span, "%s: %s", ops_name(n->op), err);
        return;
    }
    n = &g->nodes[id];
    n->op = OP_CONST;
    n->n_in = 0;
    n->cdata = out;
}

/* x / c -> x * (1/c) for a scalar f32 constant c (not 0): a multiply is
 * several times cheaper, and `x / 255` runs every step. */
static void reciprocal(ir_graph *g, int id)
{
    ir_node *n = &g->nodes[id];
    if (n->op != OP_DIV) return;
    const ir_node *c = &g->nodes[n->in[1]];
    if (c->op != OP_CONST || c->cdata || c->type.rank != 0 || c->type.dtype != DT_F32 ||
        c->attr.f[0] == 0)
        return;
    ir_type t = c->type;
    int r = ir_add_const(g, 1.0 / c->attr.f[0], &t, c->src, c->span);
    if (r < 0) return;
    n = &g->nodes[id]; /* ir_add_const may have moved the array */
    n->in[1] = r;
    n->op = OP_MUL;
    g->nodes[r].device = g->nodes[id].device;
}

static void pass_fold(ir_graph *g, const pass_evaluator *ev)
{
    for (int i = 0, n0 = g->n_nodes; i < n0; i++)
        if (!g->nodes[i].dead) reciprocal(g, i);
    if (!ev) return;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead || n->n_in == 0 || !is_pure(n) || !ev->can_eval(ev->ctx, n->op) ||
            ops_table[n->op].scratch || ir_numel(&n->type) > FOLD_MAX_ELEMS)
            continue;
        int all_const = 1;
        for (int j = 0; j < n->n_in; j++) all_const &= g->nodes[n->in[j]].op == OP_CONST;
        if (all_const) fold_node(g, i, ev);
    }
}

static int *use_counts(const ir_graph *g)
{
    int *uses = xcalloc((size_t)g->n_nodes + 1, sizeof *uses);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++) uses[n->in[j]]++;
    }
    for (int i = 0; i < g->n_names; i++) uses[g->names[i].node]++;
    return uses;
}

/* add(matmul(a, b), bias[N]) with the matmul used only there. */
static int fusable_bias(const ir_graph *g, const ir_node *n, const int *uses, int *mm, int *bias)
{
    if (n->op != OP_ADD || n->n_in != 2) return 0;
    for (int k = 0; k < 2; k++) {
        const ir_node *m = &g->nodes[n->in[k]], *b = &g->nodes[n->in[1 - k]];
        if (m->op == OP_MATMUL && uses[n->in[k]] == 1 && m->device == n->device &&
            b->type.rank == 1 && b->type.dtype == DT_F32 && m->type.rank == 2 &&
            b->type.dim[0] == m->type.dim[1] && ir_type_eq(&m->type, &n->type)) {
            *mm = n->in[k];
            *bias = n->in[1 - k];
            return 1;
        }
    }
    return 0;
}

/* Whether node `like`'s device runs op, the fused op that would replace it. */
static int can_make(const ir_graph *g, const pass_evaluator *ev, op_kind op, int like)
{
    return !ev || !ev->implements || ev->implements(ev->implements_ctx, op, g->nodes[like].device);
}

static void pass_fuse(ir_graph *g, const pass_evaluator *ev)
{
    int *uses = use_counts(g), n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        int mm, bias;
        if (g->nodes[i].dead || !fusable_bias(g, &g->nodes[i], uses, &mm, &bias) ||
            !can_make(g, ev, OP_MATMUL_BIAS, i))
            continue;
        ir_attrs a = g->nodes[mm].attr;
        a.i[2] = 0;
        int in[3] = {g->nodes[mm].in[0], g->nodes[mm].in[1], bias};
        int f = ir_add_like(g, i, OP_MATMUL_BIAS, in, 3, &a);
        if (f < 0) continue;
        replace_uses(g, i, f);
        g->nodes[mm].dead = 1;
    }
    free(uses);
}

/* The relu consuming matmul_bias f, when f's only other consumers are
 * relu_grad nodes reading f as their x; else -1. */
static int fusable_relu(const ir_graph *g, int f)
{
    int relu = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != f) continue;
            if (n->op == OP_RELU && relu < 0)
                relu = i;
            else if (!(n->op == OP_RELU_GRAD && j == 1 && n->in[0] != f))
                return -1;
        }
    }
    for (int i = 0; i < g->n_names; i++)
        if (g->names[i].node == f) return -1;
    return relu;
}

static void pass_fuse_relu(ir_graph *g)
{
    for (int f = 0; f < g->n_nodes; f++) {
        if (g->nodes[f].dead || g->nodes[f].op != OP_MATMUL_BIAS || g->nodes[f].attr.i[2]) continue;
        int relu = fusable_relu(g, f);
        if (relu < 0) continue;
        g->nodes[f].attr.i[2] = 1;
        replace_uses(g, relu, f);
    }
}

/* apply_sgd(var, m) where m is a matmul that nothing else reads but groups
 * (the autodiff barrier waits on every gradient).  Its operands must not be
 * variables: the fused GEMM runs among the updates, after the barrier, and
 * would read a variable another update may already have moved. */
static int fusable_sgd(const ir_graph *g, const ir_node *u, const int *uses)
{
    if (u->op != OP_APPLY_SGD) return 0;
    int m = u->in[1], groups = 0;
    const ir_node *mm = &g->nodes[m];
    if (mm->op != OP_MATMUL || mm->device != u->device || mm->n_ctrl ||
        ir_numel(&mm->type) < FUSE_SGD_MIN_ELEMS || g->nodes[mm->in[0]].op == OP_VARIABLE ||
        g->nodes[mm->in[1]].op == OP_VARIABLE)
        return 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || n->op != OP_GROUP) continue;
        for (int j = 0; j < n->n_in; j++) groups += n->in[j] == m;
    }
    return uses[m] == 1 + groups;
}

/* A group waiting on matmul m now waits on its operands instead. */
static void regroup(ir_graph *g, int m)
{
    const ir_node *mm = &g->nodes[m];
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead || n->op != OP_GROUP) continue;
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != m) continue;
            n->in[j] = mm->in[0];
            ir_add_ctrl(g, i, mm->in[1]);
        }
    }
}

static void pass_fuse_sgd(ir_graph *g, const pass_evaluator *ev)
{
    int *uses = use_counts(g), n0 = g->n_nodes;
    for (int u = 0; u < n0; u++) {
        if (g->nodes[u].dead || !fusable_sgd(g, &g->nodes[u], uses) ||
            !can_make(g, ev, OP_APPLY_SGD_MATMUL, u))
            continue;
        int m = g->nodes[u].in[1];
        ir_attrs a = g->nodes[u].attr;
        a.i[1] = g->nodes[m].attr.i[0];
        a.i[2] = g->nodes[m].attr.i[1];
        int in[3] = {g->nodes[u].in[0], g->nodes[m].in[0], g->nodes[m].in[1]};
        int f = ir_add_like(g, u, OP_APPLY_SGD_MATMUL, in, 3, &a);
        if (f < 0) continue;
        for (int k = 0; k < g->nodes[u].n_ctrl; k++) ir_add_ctrl(g, f, g->nodes[u].ctrl[k]);
        regroup(g, m);
        replace_uses(g, u, f);
        g->nodes[m].dead = 1;
    }
    free(uses);
}

void pass_run_all(ir_graph *g, unsigned off, const pass_evaluator *ev)
{
    if (!(off & PASS_FOLD)) pass_fold(g, ev);
    if (!(off & PASS_CSE)) pass_cse(g);
    if (!(off & PASS_FUSE)) pass_fuse(g, ev), pass_fuse_relu(g), pass_fuse_sgd(g, ev);
}
