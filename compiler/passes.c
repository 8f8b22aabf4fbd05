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
 *   fuse: matmul followed by a bias add becomes one matmul_bias, conv2d
 *         followed by a per-channel bias add one conv2d_bias, and a relu
 *         after either joins too (relu_grad then reads the relu's output:
 *         x > 0 exactly where relu(x) > 0); a relu_grad of a maxpool2d_grad
 *         whose forward pooled that relu's output becomes the maxpool2d_grad
 *         with its relu flag (a window's maximum passes its gradient only
 *         when it is > 0); a relu after a batchnorm_apply joins it too, and
 *         a relu_grad(dy, y) that only batchnorm grads read as their dy
 *         joins them (they read dy and y, and pass dy where y > 0);
 *         apply_sgd of a matmul (a weight
 *         gradient) becomes apply_sgd_matmul, one GEMM that accumulates
 *         -lr * a@b straight into the variable: the gradient is never
 *         stored, and the variable is read and written once; apply_sgd
 *         of an allreduce (distributed sync) becomes apply_sgd_allreduce,
 *         which updates the variable as it copies the mean out */
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

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

/* Replacements a pass decides: to[from] = to.  They are applied to every
 * use (inputs, control deps, names) in one sweep when the pass ends, so
 * a pass stays linear in the graph however many nodes it replaces.  Until
 * then a replaced node is dead but still read by its old consumers: a pass
 * building a node resolves its inputs first (repl_find). */
typedef struct repl {
    int *to;
    int n;
} repl;

static repl repl_new(const ir_graph *g)
{
    repl r = {base_xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1)), g->n_nodes};
    IR_WORK(r.n);
    for (int i = 0; i < r.n; i++) r.to[i] = i;
    return r;
}

static int repl_find(const repl *r, int x)
{
    while (IR_WORK(1), x < r->n && r->to[x] != x) x = r->to[x];
    return x;
}

static void repl_set(ir_graph *g, repl *r, int from, int to)
{
    GR_ASSERT(from < r->n && repl_find(r, to) == to);
    r->to[from] = to;
    g->nodes[from].dead = 1;
}

static void repl_apply(ir_graph *g, repl *r)
{
    IR_WORK(g->n_nodes + g->n_names);
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) n->in[j] = repl_find(r, n->in[j]);
        for (int j = 0; j < n->n_ctrl; j++) n->ctrl[j] = repl_find(r, n->ctrl[j]);
    }
    for (int i = 0; i < g->n_names; i++) g->names[i].node = repl_find(r, g->names[i].node);
    free(r->to);
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

/* Everything same_node compares but the bulk of cdata (its first bytes):
 * constants that differ only in value must not share a bucket, or CSE over
 * many of them turns quadratic. */
static uint64_t node_hash(const ir_node *n)
{
    uint64_t h = (uint64_t)n->op * 1000003u ^ (uint64_t)n->device;
    for (int j = 0; j < n->n_in; j++) h = h * 31 + (uint64_t)n->in[j];
    for (int j = 0; j < n->type.rank; j++) h = h * 17 + (uint64_t)n->type.dim[j];
    for (int j = 0; j < IR_MAX_ATTRS; j++) {
        uint64_t f;
        memcpy(&f, &n->attr.f[j], sizeof f);
        h = (h * 31 + (uint64_t)n->attr.i[j]) * 31 + f;
    }
    if (n->cdata) {
        const unsigned char *c = n->cdata;
        for (size_t k = 0, len = ir_nbytes(&n->type); k < len && k < 64; k++) h = h * 31 + c[k];
    }
    /* the table uses the low bits, where small floats have only zeros: mix
     * the high ones down (murmur3's finaliser) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return h;
}

/* Merges node i into an identical one seen before, or records it. */
static void cse_node(ir_graph *g, int i, int *table, int cap, repl *r)
{
    ir_node *n = &g->nodes[i];
    for (int j = 0; j < n->n_in; j++) n->in[j] = repl_find(r, n->in[j]);
    for (int j = 0; j < n->n_ctrl; j++) n->ctrl[j] = repl_find(r, n->ctrl[j]);
    if (!is_pure(n)) return;
    size_t k = node_hash(n) & (size_t)(cap - 1);
    for (; IR_WORK(1), table[k] >= 0; k = (k + 1) & (size_t)(cap - 1))
        if (same_node(&g->nodes[table[k]], n)) break;
    if (table[k] >= 0)
        repl_set(g, r, i, table[k]);
    else
        table[k] = i;
}

/* One sweep in topological order merges whole duplicated subgraphs: a
 * node's inputs are resolved before it is hashed.  Ids are that order,
 * except for the constants folding appends (x / c -> x * (1/c)); sources
 * go first, so those are merged before what reads them. */
static void pass_cse(ir_graph *g)
{
    int cap = 1;
    while (cap < 2 * g->n_nodes) cap <<= 1;
    int *table = base_xmalloc(sizeof(int) * (size_t)cap);
    memset(table, -1, sizeof(int) * (size_t)cap);
    repl r = repl_new(g);
    IR_WORK(cap + 2 * g->n_nodes);
    for (int sources = 1; sources >= 0; sources--)
        for (int i = 0; i < g->n_nodes; i++)
            if (!g->nodes[i].dead && (g->nodes[i].n_in == 0) == sources)
                cse_node(g, i, table, cap, &r);
    repl_apply(g, &r);
    free(table);
}

/* Bytes folding would allocate for node n: its output, and its inputs that
 * are filled constants not yet materialised; -1 when n or an input is
 * above LIM_FOLD_ELEMS (folding computes every element at compile time,
 * however few the output has: sum(zeros([100000000])) stays unfolded). */
static long long fold_cost(const ir_graph *g, const ir_node *n)
{
    if (ir_numel(&n->type) > LIM_FOLD_ELEMS) return -1;
    long long bytes = (long long)ir_nbytes(&n->type) + 1;
    for (int j = 0; j < n->n_in; j++) {
        const ir_node *c = &g->nodes[n->in[j]];
        if (c->op != OP_CONST || ir_numel(&c->type) > LIM_FOLD_ELEMS) return -1;
        if (!c->cdata) bytes += (long long)ir_nbytes(&c->type) + 1;
    }
    return bytes;
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
        c->attr.f[ATTR_CONST_VALUE] == 0)
        return;
    ir_type t = c->type;
    int r = ir_add_const(g, 1.0 / c->attr.f[ATTR_CONST_VALUE], &t, c->src, c->span);
    if (r < 0) return;
    n = &g->nodes[id]; /* ir_add_const may have moved the array */
    n->in[1] = r;
    n->op = OP_MUL;
    g->nodes[r].device = g->nodes[id].device;
}

/* Folding is an optimisation: past LIM_FOLD_BYTES of folded values in one
 * compile, nodes are left to run instead. */
static void pass_fold(ir_graph *g, const pass_evaluator *ev)
{
    long long spent = 0, cost;
    IR_WORK(2 * g->n_nodes);
    for (int i = 0, n0 = g->n_nodes; i < n0; i++)
        if (!g->nodes[i].dead) reciprocal(g, i);
    if (!ev) return;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead || n->n_in == 0 || !is_pure(n) || !ev->can_eval(ev->ctx, n->op) ||
            ops_table[n->op].scratch || (cost = fold_cost(g, n)) < 0 ||
            spent + cost > LIM_FOLD_BYTES)
            continue;
        spent += cost;
        fold_node(g, i, ev);
    }
}

static int *use_counts(const ir_graph *g)
{
    int *uses = base_xcalloc((size_t)g->n_nodes + 1, sizeof *uses);
    IR_WORK(g->n_nodes + g->n_names);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++) uses[n->in[j]]++;
    }
    for (int i = 0; i < g->n_names; i++) uses[g->names[i].node]++;
    return uses;
}

/* b is a per-channel bias of conv2d output y [N, C, H, W]: [1, C, 1, 1]. */
static int is_channel_bias(const ir_type *b, const ir_type *y)
{
    return b->rank == 4 && y->rank == 4 && b->dim[0] == 1 && b->dim[1] == y->dim[1] &&
           b->dim[2] == 1 && b->dim[3] == 1;
}

/* b is a bias of every row of matmul m's output [..., N]: [N], where the
 * product is one GEMM ([M, K] @ [K, N], or [..., M, K] @ [K, N]). */
static int is_rows_bias(const ir_graph *g, const ir_node *m, const ir_type *b)
{
    const ir_type *y = &m->type;
    int one_gemm = y->rank == 2 || (g->nodes[m->in[1]].type.rank == 2 && !m->attr.i[ATTR_TRANS_A]);
    return one_gemm && b->rank == 1 && b->dim[0] == y->dim[y->rank - 1];
}

/* add(matmul(a, b), bias[N]) or add(conv2d(x, w), bias[1, C, 1, 1]) with
 * the product used only there: the fused op's kind into *op. */
static int fusable_bias(const ir_graph *g, const ir_node *n, const int *uses, int *mm, int *bias,
                        op_kind *op)
{
    if (n->op != OP_ADD || n->n_in != 2) return 0;
    for (int k = 0; k < 2; k++) {
        const ir_node *m = &g->nodes[n->in[k]], *b = &g->nodes[n->in[1 - k]];
        if ((m->op != OP_MATMUL && m->op != OP_CONV2D) || uses[n->in[k]] != 1 ||
            m->device != n->device || b->type.dtype != DT_F32 || !ir_type_eq(&m->type, &n->type))
            continue;
        int ok =
            m->op == OP_MATMUL ? is_rows_bias(g, m, &b->type) : is_channel_bias(&b->type, &m->type);
        if (!ok) continue;
        *mm = n->in[k];
        *bias = n->in[1 - k];
        *op = m->op == OP_MATMUL ? OP_MATMUL_BIAS : OP_CONV2D_BIAS;
        return 1;
    }
    return 0;
}

/* The slot of the relu flag of the ops a relu joins, else -1. */
static int relu_flag(op_kind op)
{
    if (op == OP_MATMUL_BIAS || op == OP_CONV2D_BIAS) return ATTR_BIAS_RELU;
    return op == OP_BATCHNORM ? ATTR_BN_RELU : -1;
}

/* Whether node `like`'s device runs op, the fused op that would replace it
 * (as placement recorded it). */
static int can_make(const ir_graph *g, op_kind op, int like)
{
    return place_implements(g, op, g->nodes[like].device);
}

static void pass_fuse(ir_graph *g)
{
    int *uses = use_counts(g), n0 = g->n_nodes;
    repl r = repl_new(g);
    IR_WORK(n0);
    for (int i = 0; i < n0; i++) {
        int mm, bias;
        op_kind op;
        if (g->nodes[i].dead || !fusable_bias(g, &g->nodes[i], uses, &mm, &bias, &op) ||
            !can_make(g, op, i))
            continue;
        ir_attrs a = g->nodes[mm].attr;
        a.i[ATTR_BIAS_RELU] = 0;
        int in[3] = {repl_find(&r, g->nodes[mm].in[0]), repl_find(&r, g->nodes[mm].in[1]),
                     repl_find(&r, bias)};
        int f = ir_add_like(g, i, op, in, 3, &a);
        if (f < 0) continue;
        repl_set(g, &r, i, f);
        g->nodes[mm].dead = 1;
    }
    repl_apply(g, &r);
    free(uses);
}

/* Per op f a relu joins: the relu consuming it when f's only other consumers
 * are relu_grad nodes reading f as their x, else -1 (one sweep for all). */
static int *fusable_relus(const ir_graph *g)
{
    int *relu = base_xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1)); /* -2: not fusable */
    IR_WORK(2 * g->n_nodes + g->n_names);
    for (int i = 0; i < g->n_nodes; i++) relu[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++) {
            int f = n->in[j];
            if (relu_flag(g->nodes[f].op) < 0) continue;
            if (n->op == OP_RELU && relu[f] == -1)
                relu[f] = i;
            else if (!(n->op == OP_RELU_GRAD && j == 1 && n->in[0] != f))
                relu[f] = -2;
        }
    }
    for (int i = 0; i < g->n_names; i++) relu[g->names[i].node] = -2;
    return relu;
}

static void pass_fuse_relu(ir_graph *g)
{
    int *relu = fusable_relus(g);
    repl r = repl_new(g);
    IR_WORK(g->n_nodes);
    for (int f = 0; f < g->n_nodes; f++) {
        int flag = relu_flag(g->nodes[f].op);
        if (g->nodes[f].dead || flag < 0 || g->nodes[f].attr.i[flag] || relu[f] < 0) continue;
        g->nodes[f].attr.i[flag] = 1;
        repl_set(g, &r, relu[f], f);
    }
    repl_apply(g, &r);
    free(relu);
}

/* relu_grad(maxpool2d_grad(dy, p), x) where p, the pooled tensor, is x or
 * relu(x) (x may be a fused op with its relu), and nothing else reads the
 * maxpool2d_grad: a window's maximum m is > 0 exactly where x is, so the
 * relu_grad is the maxpool2d_grad passing dy only when m > 0 (attr i3). */
static int fusable_pool_relu(const ir_graph *g, const ir_node *n, const int *uses)
{
    if (n->op != OP_RELU_GRAD) return 0;
    const ir_node *m = &g->nodes[n->in[0]];
    if (m->op != OP_MAXPOOL_GRAD || uses[n->in[0]] != 1 || m->attr.i[ATTR_POOL_RELU] ||
        m->device != n->device)
        return 0;
    int p = m->in[1], x = n->in[1];
    return p == x || (g->nodes[p].op == OP_RELU && g->nodes[p].in[0] == x);
}

static void pass_fuse_pool_relu(ir_graph *g)
{
    int *uses = use_counts(g);
    repl r = repl_new(g);
    IR_WORK(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead || !fusable_pool_relu(g, &g->nodes[i], uses)) continue;
        int m = g->nodes[i].in[0];
        g->nodes[m].attr.i[ATTR_POOL_RELU] = 1;
        repl_set(g, &r, i, m);
    }
    repl_apply(g, &r);
    free(uses);
}

/* Per relu_grad node: 1 when its only readers are batchnorm_grad_params and
 * batchnorm_grad nodes without their relu, on its device, reading it as dy
 * (one sweep for all). */
static char *fusable_bn_relu_grads(const ir_graph *g)
{
    char *ok = base_xmalloc((size_t)g->n_nodes + 1);
    IR_WORK(2 * g->n_nodes + g->n_names);
    for (int i = 0; i < g->n_nodes; i++) ok[i] = g->nodes[i].op == OP_RELU_GRAD;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        int bn = (n->op == OP_BN_GRAD_PARAMS || n->op == OP_BN_GRAD) && !n->attr.i[ATTR_BN_RELU];
        for (int j = 0; j < n->n_in; j++)
            if (!(bn && j == 0 && g->nodes[n->in[0]].device == n->device)) ok[n->in[j]] = 0;
    }
    for (int i = 0; i < g->n_names; i++) ok[g->names[i].node] = 0;
    return ok;
}

/* batchnorm_grad(_params)(relu_grad(dy, y), ...) becomes
 * batchnorm_grad(_params)(dy, ..., y) with its relu flag: each passes dy
 * where y > 0 as it reads it, and the masked gradient is never stored. */
static void pass_fuse_bn_relu_grad(ir_graph *g)
{
    char *ok = fusable_bn_relu_grads(g);
    int n0 = g->n_nodes;
    repl r = repl_new(g);
    IR_WORK(n0);
    for (int i = 0; i < n0; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || (n->op != OP_BN_GRAD_PARAMS && n->op != OP_BN_GRAD) || !ok[n->in[0]])
            continue;
        int rg = n->in[0], k = n->n_in, in[6];
        for (int j = 1; j < k; j++) in[j] = repl_find(&r, n->in[j]);
        in[0] = repl_find(&r, g->nodes[rg].in[0]), in[k] = repl_find(&r, g->nodes[rg].in[1]);
        ir_attrs a = n->attr;
        a.i[ATTR_BN_RELU] = 1;
        int f = ir_add_like(g, i, n->op, in, k + 1, &a);
        if (f < 0) continue;
        g->nodes[rg].dead = 1;
        repl_set(g, &r, i, f);
    }
    repl_apply(g, &r);
    free(ok);
}

/* Group nodes' input edges by the node they read, kept current as regroup
 * moves them: fusing sgd asks, per update, which groups wait on its
 * matmul. */
typedef struct group_edges {
    int *head;                /* per node: first edge reading it, -1 none */
    int *next, *group, *slot; /* per edge */
    int *count;               /* per node: edges reading it */
    int n, cap;
} group_edges;

static void edge_add(group_edges *e, int node, int group, int slot)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->next = base_xreallocarray(e->next, (size_t)e->cap, sizeof(int));
        e->group = base_xreallocarray(e->group, (size_t)e->cap, sizeof(int));
        e->slot = base_xreallocarray(e->slot, (size_t)e->cap, sizeof(int));
    }
    e->next[e->n] = e->head[node];
    e->group[e->n] = group;
    e->slot[e->n] = slot;
    e->head[node] = e->n++;
    e->count[node]++;
}

static group_edges group_edges_build(const ir_graph *g)
{
    group_edges e = {0};
    e.head = base_xmalloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    e.count = base_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
    IR_WORK(2 * g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) e.head[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || n->op != OP_GROUP) continue;
        for (int j = 0; j < n->n_in; j++) edge_add(&e, n->in[j], i, j);
    }
    return e;
}

static void group_edges_free(group_edges *e)
{
    free(e->head);
    free(e->next);
    free(e->group);
    free(e->slot);
    free(e->count);
}

/* apply_sgd(var, m, lr, 1) where m is a matmul of matrices (no batch axes)
 * that nothing else reads but groups (the autodiff barrier waits on every
 * gradient) and lr a constant (the GEMM takes it as its alpha, not from the
 * device).  Its operands must not be variables: the fused GEMM runs among
 * the updates, after the barrier, and would read a variable another update
 * may already have moved. */
static int fusable_sgd(const ir_graph *g, const ir_node *u, const int *uses, const group_edges *e)
{
    if (u->op != OP_APPLY_SGD || u->attr.f[ATTR_WD] != 0 ||
        ir_const_scalar(g, u->in[2]) != ir_const_scalar(g, u->in[2]) ||
        ir_const_scalar(g, u->in[3]) != 1.0)
        return 0;
    int m = u->in[1];
    const ir_node *mm = &g->nodes[m];
    if (mm->op != OP_MATMUL || mm->type.rank != 2 || mm->device != u->device || mm->n_ctrl ||
        ir_numel(&mm->type) < FUSE_SGD_MIN_ELEMS || g->nodes[mm->in[0]].op == OP_VARIABLE ||
        g->nodes[mm->in[1]].op == OP_VARIABLE)
        return 0;
    return uses[m] == 1 + e->count[m];
}

/* The control edges of groups, as a set: regroup adds one in O(1) even to
 * a barrier that gathers thousands (ir_add_ctrl's own check is a scan). */
typedef struct ctrl_set {
    uint64_t *key; /* (group << 32 | dep) + 1; 0 = empty */
    int cap, n;
} ctrl_set;

static int ctrl_set_put(ctrl_set *c, uint64_t key)
{
    size_t mask = (size_t)c->cap - 1, h = (size_t)(key * 0x9E3779B97F4A7C15u) & mask;
    while (IR_WORK(1), c->key[h] && c->key[h] != key) h = (h + 1) & mask;
    if (c->key[h]) return 0;
    c->key[h] = key;
    c->n++;
    return 1;
}

/* 1 when (group, dep) was not in the set and now is; the set doubles
 * before it is half full. */
static int ctrl_set_add(ctrl_set *c, int group, int dep)
{
    if (2 * (c->n + 1) > c->cap) {
        ctrl_set big = {base_xcalloc((size_t)c->cap * 2, sizeof *c->key), c->cap * 2, 0};
        IR_WORK(c->cap);
        for (int i = 0; i < c->cap; i++)
            if (c->key[i]) ctrl_set_put(&big, c->key[i]);
        free(c->key);
        *c = big;
    }
    return ctrl_set_put(c, ((uint64_t)(uint32_t)group << 32 | (uint32_t)dep) + 1);
}

static ctrl_set ctrl_set_build(const ir_graph *g)
{
    ctrl_set c = {base_xcalloc(64, sizeof(uint64_t)), 64, 0};
    IR_WORK(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && g->nodes[i].op == OP_GROUP && k < g->nodes[i].n_ctrl;
             k++)
            ctrl_set_add(&c, i, g->nodes[i].ctrl[k]);
    return c;
}

static int by_edge(const void *a, const void *b, void *ctx)
{
    const group_edges *e = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (e->group[x] != e->group[y]) return e->group[x] - e->group[y];
    return e->slot[x] - e->slot[y];
}

/* A group waiting on matmul m now waits on its operands instead: a reads
 * in m's slot, b as a control edge.  Groups in id order, as they were
 * made. */
static void regroup(ir_graph *g, int m, group_edges *e, ctrl_set *c)
{
    int a = g->nodes[m].in[0], b = g->nodes[m].in[1], n = 0;
    int *edges = base_xmalloc(sizeof(int) * (size_t)(e->count[m] + 1));
    IR_WORK(e->count[m]);
    for (int k = e->head[m]; k >= 0; k = e->next[k]) edges[n++] = k;
    qsort_r(edges, (size_t)n, sizeof(int), by_edge, e);
    e->head[m] = -1;
    e->count[m] = 0;
    for (int i = 0; i < n; i++) {
        int gi = e->group[edges[i]], slot = e->slot[edges[i]];
        g->nodes[gi].in[slot] = a;
        edge_add(e, a, gi, slot);
        if (ctrl_set_add(c, gi, b)) ir_append_ctrl(g, gi, b);
    }
    free(edges);
}

static void pass_fuse_sgd(ir_graph *g)
{
    int *uses = use_counts(g), n0 = g->n_nodes;
    group_edges e = group_edges_build(g);
    ctrl_set c = ctrl_set_build(g);
    repl r = repl_new(g);
    IR_WORK(n0);
    for (int u = 0; u < n0; u++) {
        if (g->nodes[u].dead || !fusable_sgd(g, &g->nodes[u], uses, &e) ||
            !can_make(g, OP_APPLY_SGD_MATMUL, u))
            continue;
        int m = g->nodes[u].in[1];
        ir_attrs a = g->nodes[u].attr;
        a.f[ATTR_SGDMM_LR] = ir_const_scalar(g, g->nodes[u].in[2]);
        a.i[ATTR_SGDMM_TRANS_A] = g->nodes[m].attr.i[ATTR_TRANS_A];
        a.i[ATTR_SGDMM_TRANS_B] = g->nodes[m].attr.i[ATTR_TRANS_B];
        int in[3] = {g->nodes[u].in[0], g->nodes[m].in[0], g->nodes[m].in[1]};
        int f = ir_add_like(g, u, OP_APPLY_SGD_MATMUL, in, 3, &a);
        if (f < 0) continue;
        for (int k = 0; k < g->nodes[u].n_ctrl; k++) ir_add_ctrl(g, f, g->nodes[u].ctrl[k]);
        regroup(g, m, &e, &c);
        repl_set(g, &r, u, f);
        g->nodes[m].dead = 1;
    }
    repl_apply(g, &r);
    free(c.key);
    group_edges_free(&e);
    free(uses);
}

/* apply_sgd(var, allreduce(g), lr, gscale) where the allreduce averages g
 * alone, on the update's device (cpu:0, where MPI runs), and nothing else
 * reads the mean: apply_sgd_allreduce averages g and steps var as it
 * copies the mean out, never storing it.  The update's control deps (the
 * barrier) must be older than the allreduce, so they cannot wait for it:
 * autodiff groups a sync minimize's gradients before averaging them. */
static int fusable_allreduce_sgd(const ir_graph *g, const ir_node *u, const int *uses)
{
    if (u->op != OP_APPLY_SGD || u->attr.f[ATTR_WD] != 0) return 0; /* a decay reads var */
    int r = u->in[1];
    const ir_node *ar = &g->nodes[r];
    if (ar->op != OP_ALLREDUCE || ar->n_in != 1 || ar->device != u->device || uses[r] != 1)
        return 0;
    for (int k = 0; k < u->n_ctrl; k++)
        if (u->ctrl[k] > r) return 0;
    return 1;
}

/* The fused node keeps the allreduce's place in the sequence of collectives
 * (its attr and its control edge to the one before; the next one's edge
 * moves to it) and the update's wait for the barrier. */
static void pass_fuse_allreduce_sgd(ir_graph *g)
{
    int *uses = use_counts(g), n0 = g->n_nodes;
    repl r = repl_new(g);
    IR_WORK(n0);
    for (int u = 0; u < n0; u++) {
        if (g->nodes[u].dead || !fusable_allreduce_sgd(g, &g->nodes[u], uses) ||
            !can_make(g, OP_APPLY_SGD_ALLREDUCE, u))
            continue;
        const ir_node *un = &g->nodes[u];
        int ar = un->in[1];
        ir_attrs a = un->attr;
        a.i[ATTR_BUCKET] = g->nodes[ar].attr.i[ATTR_BUCKET];
        int in[4] = {un->in[0], g->nodes[ar].in[0], un->in[2], un->in[3]};
        int f = ir_add_like(g, u, OP_APPLY_SGD_ALLREDUCE, in, 4, &a);
        if (f < 0) continue;
        for (int k = 0; k < g->nodes[ar].n_ctrl; k++) ir_add_ctrl(g, f, g->nodes[ar].ctrl[k]);
        for (int k = 0; k < g->nodes[u].n_ctrl; k++) ir_add_ctrl(g, f, g->nodes[u].ctrl[k]);
        repl_set(g, &r, u, f);
        repl_set(g, &r, ar, f);
    }
    repl_apply(g, &r);
    free(uses);
}

void pass_run_all(ir_graph *g, unsigned off, const pass_evaluator *ev)
{
    if (!(off & PASS_FOLD)) pass_fold(g, ev);
    if (!(off & PASS_CSE)) pass_cse(g);
    if (!(off & PASS_FUSE)) {
        pass_data_scale(g), pass_fuse(g), pass_fuse_relu(g);
        pass_fuse_pool_relu(g), pass_fuse_bn_relu_grad(g), pass_fuse_sgd(g);
        pass_fuse_allreduce_sgd(g);
    }
}
