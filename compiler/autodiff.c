/* autodiff.c - ad_minimize: reverse-mode differentiation of a scalar loss
 * over the IR, then optimizer slots and update ops per trainable variable.
 *
 * Node ids are a topological order (ir_add only accepts existing inputs), so
 * one descending walk over the ids present before minimize visits every
 * consumer of a node before the node itself. */
#include "compiler.h"

#include <stdlib.h>
#include <string.h>

typedef struct ad_ctx {
    ir_graph *g;
    const ad_optimizer *opt;
    const src_file *src;
    src_span span;
    int n0;       /* nodes that existed before this minimize */
    char *path;   /* [n0] depends on a trainable variable and feeds the loss */
    int *grad;    /* [n0] gradient node of each node's output, or -1 */
    int *updates; /* update nodes, one per updated variable */
    int n_updates;
    int step_node; /* adam: the step counter's VARIABLE node, or -1 */
    int barrier;   /* group over all gradients: updates wait for it */
    int step_inc;  /* adam: its ASSIGN_ADD node */
} ad_ctx;

static int is_trained(const ir_graph *g, int vi)
{
    return g->vars[vi].trainable && g->vars[vi].slot_of < 0;
}

static int check_loss(ad_ctx *c, int loss)
{
    ir_graph *g = c->g;
    char tb[160];
    if (loss < 0 || loss >= g->n_nodes || g->nodes[loss].dead) {
        diag_error(g->diags, c->src, c->span, "minimize: invalid loss node %d", loss);
        return -1;
    }
    const ir_type *t = &g->nodes[loss].type;
    if (t->rank != 0 || t->dtype != DT_F32) {
        diag_error(g->diags, c->src, c->span, "minimize: loss must be a scalar%s, got %s",
                   t->rank == 0 ? " f32" : "", ir_type_str(t, tb, sizeof(tb)));
        return -1;
    }
    return 0;
}

/* path[n] = n depends on a trainable variable and the loss depends on n. */
static void mark_path(ad_ctx *c, int loss)
{
    ir_graph *g = c->g;
    char *dep = xcalloc((size_t)c->n0, 1);
    for (int n = 0; n <= loss; n++) {
        const ir_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        if (nd->op == OP_VARIABLE && nd->var >= 0) dep[n] = (char)is_trained(g, nd->var);
        for (int k = 0; k < nd->n_in; k++) dep[n] |= dep[nd->in[k]];
    }
    c->path[loss] = dep[loss];
    for (int n = loss; n >= 0; n--) {
        if (!c->path[n]) continue;
        const ir_node *nd = &g->nodes[n];
        for (int k = 0; k < nd->n_in; k++) c->path[nd->in[k]] = dep[nd->in[k]];
    }
    free(dep);
}

/* Adds gradient gx into grad[x]; several consumers sum with ADD, placed on
 * x's device (a variable's gradients meet where the variable lives). */
static int accumulate(ad_ctx *c, int x, int gx)
{
    if (c->grad[x] < 0) {
        c->grad[x] = gx;
        return 0;
    }
    int in[2] = {c->grad[x], gx};
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    c->grad[x] = ir_add_like(c->g, x, OP_ADD, in, 2, &a);
    return c->grad[x] < 0 ? -1 : 0;
}

static int no_grad_error(ad_ctx *c, int n)
{
    const ir_node *nd = &c->g->nodes[n];
    int line = 0, col = 0;
    if (nd->src) src_linecol(nd->src, nd->span.begin, &line, &col);
    diag_error(c->g->diags, nd->src, nd->span,
               "minimize: cannot differentiate through '%s' (line %d): the op has no gradient",
               ops_name(nd->op), line);
    return -1;
}

static int backprop_node(ad_ctx *c, int n)
{
    ir_graph *g = c->g;
    op_kind op = g->nodes[n].op;
    int n_in = g->nodes[n].n_in;
    if (op == OP_VARIABLE || n_in == 0) return 0;
    if (!ops_table[op].grad) return no_grad_error(c, n);
    int *dx = xmalloc(sizeof(int) * (size_t)n_in);
    for (int k = 0; k < n_in; k++) dx[k] = -1;
    int rc = ops_table[op].grad(g, n, c->grad[n], dx);
    for (int k = 0; rc == 0 && k < n_in; k++) {
        int x = g->nodes[n].in[k];
        if (dx[k] >= 0 && c->path[x]) rc = accumulate(c, x, dx[k]);
    }
    free(dx);
    return rc;
}

static int backprop(ad_ctx *c, int loss)
{
    c->grad[loss] = ir_add_const_like(c->g, loss, 1.0, &c->g->nodes[loss].type);
    if (c->grad[loss] < 0) return -1;
    for (int n = loss; n >= 0; n--)
        if (c->path[n] && c->grad[n] >= 0 && backprop_node(c, n) < 0) return -1;
    return 0;
}

/* base, or base_1, base_2, ... : the first name no variable has yet. */
static const char *unique_var_name(ir_graph *g, const char *base)
{
    size_t n = strlen(base) + 24;
    char *buf = xmalloc(n);
    snprintf(buf, n, "%s", base);
    for (int i = 1; ir_find_var(g, buf) >= 0; i++) snprintf(buf, n, "%s_%d", base, i);
    const char *s = ir_strdup(g, buf);
    free(buf);
    return s;
}

/* A zero-initialised, untrainable variable; returns its node. */
static int new_state_var(ad_ctx *c, const char *name, const ir_type *t, int device, int slot_of,
                         const src_file *src, src_span span)
{
    ir_var v;
    memset(&v, 0, sizeof(v));
    v.name = unique_var_name(c->g, name);
    v.type = *t;
    v.init = INIT_ZEROS;
    v.device = device;
    v.slot_of = slot_of;
    v.trainable = 0;
    v.src = src;
    v.span = span;
    int vi = ir_add_var(c->g, &v);
    return c->g->vars[vi].node;
}

static int make_slot(ad_ctx *c, int vi, const char *suffix)
{
    const ir_var *v = &c->g->vars[vi];
    size_t n = strlen(v->name) + strlen(suffix) + 2;
    char *name = xmalloc(n);
    snprintf(name, n, "%s/%s", v->name, suffix);
    int node = new_state_var(c, name, &v->type, v->device, vi, v->src, v->span);
    free(name);
    return node;
}

/* Adam's step counter: one per minimize, incremented once per run before
 * any apply_adam reads it (control dependencies). */
static int make_step(ad_ctx *c, int device)
{
    ir_type scalar;
    memset(&scalar, 0, sizeof(scalar));
    c->step_node = new_state_var(c, "global_step", &scalar, device, -1, c->src, c->span);
    int one = ir_add_const(c->g, 1.0, &scalar, c->src, c->span);
    int in[2] = {c->step_node, one};
    if (one < 0) return -1;
    c->g->nodes[one].device = device;
    c->step_inc = ir_add(c->g, OP_ASSIGN_ADD, in, 2, NULL, c->src, c->span);
    if (c->step_inc < 0) return -1;
    c->g->nodes[c->step_inc].device = device;
    c->g->nodes[c->step_inc].attr.i[5] = c->opt->locking;
    return 0;
}

static ir_attrs update_attrs(const ad_optimizer *o)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.f[0] = o->lr;
    if (o->kind == AD_MOMENTUM) {
        a.f[1] = o->m;
        a.i[2] = o->nesterov;
    } else if (o->kind == AD_ADAM) {
        a.f[1] = o->b1;
        a.f[2] = o->b2;
        a.f[3] = o->eps;
    }
    a.i[5] = o->locking;
    return a;
}

/* A variable reached only through gather gets its gradient as rows (the
 * gather_grad's dy and ids, never a dense table) when the optimizer is sgd:
 * returns that gather_grad node, else -1. */
static int sparse_grad(const ad_ctx *c, int vi)
{
    int gn = c->grad[c->g->vars[vi].node];
    return c->opt->kind == AD_SGD && c->g->nodes[gn].op == OP_GATHER_GRAD ? gn : -1;
}

static int make_update(ad_ctx *c, int vi)
{
    int device = c->g->vars[vi].device;
    int in[5] = {c->g->vars[vi].node, c->grad[c->g->vars[vi].node], -1, -1, -1}, n_in = 2;
    op_kind op = OP_APPLY_SGD;
    int sp = sparse_grad(c, vi);
    if (sp >= 0) { /* rows: dy and ids of the gather_grad, which then goes unused */
        op = OP_APPLY_SGD_ROWS;
        in[1] = c->g->nodes[sp].in[0];
        in[n_in++] = c->g->nodes[sp].in[1];
    } else if (c->opt->kind == AD_MOMENTUM) {
        op = OP_APPLY_MOMENTUM;
        in[n_in++] = make_slot(c, vi, "momentum");
    } else if (c->opt->kind == AD_ADAM) {
        op = OP_APPLY_ADAM;
        if (c->step_node < 0 && make_step(c, device) < 0) return -1;
        in[n_in++] = make_slot(c, vi, "adam_m");
        in[n_in++] = make_slot(c, vi, "adam_v");
        in[n_in++] = c->step_node;
    }
    ir_attrs a = update_attrs(c->opt);
    int u = ir_add(c->g, op, in, n_in, &a, c->src, c->span);
    if (u < 0) return -1;
    c->g->nodes[u].device = device;
    if (op == OP_APPLY_ADAM) ir_add_ctrl(c->g, u, c->step_inc);
    ir_add_ctrl(c->g, u, c->barrier);
    c->updates[c->n_updates++] = u;
    return 0;
}

static int trained_here(const ad_ctx *c, int vi)
{
    int node = c->g->vars[vi].node;
    return is_trained(c->g, vi) && node < c->n0 && c->grad[node] >= 0;
}

/* Every update waits until every gradient is computed: a gradient that reads
 * a variable (matmul's da = dy @ w^T) must see it before any update. */
static int make_barrier(ad_ctx *c, int n_vars)
{
    int *grads = xmalloc(sizeof(int) * (size_t)(n_vars + 1)), n = 0;
    for (int vi = 0; vi < n_vars; vi++) {
        if (!trained_here(c, vi)) continue;
        int sp = sparse_grad(c, vi);
        grads[n++] = sp >= 0 ? c->g->nodes[sp].in[0] : c->grad[c->g->vars[vi].node];
    }
    c->barrier = n ? ir_add(c->g, OP_GROUP, grads, n, NULL, c->src, c->span) : 0;
    free(grads);
    return c->barrier;
}

static int make_updates(ad_ctx *c)
{
    ir_graph *g = c->g;
    int n_vars = g->n_vars; /* slots appended below are not visited */
    c->updates = xmalloc(sizeof(int) * (size_t)(n_vars + 1));
    if (make_barrier(c, n_vars) < 0) return -1;
    for (int vi = 0; vi < n_vars; vi++) {
        if (trained_here(c, vi) && make_update(c, vi) < 0) return -1;
    }
    if (c->n_updates == 0) {
        diag_error(g->diags, c->src, c->span,
                   "minimize: loss does not depend on any trainable variable");
        return -1;
    }
    return ir_add(g, OP_GROUP, c->updates, c->n_updates, NULL, c->src, c->span);
}

int ad_minimize(ir_graph *g, int loss, const ad_optimizer *opt, const src_file *src, src_span span)
{
    ad_ctx c = {.g = g, .opt = opt, .src = src, .span = span, .step_node = -1, .step_inc = -1};
    if (check_loss(&c, loss) < 0) return -1;
    c.n0 = g->n_nodes;
    c.path = xcalloc((size_t)c.n0, 1);
    c.grad = xmalloc(sizeof(int) * (size_t)c.n0);
    for (int n = 0; n < c.n0; n++) c.grad[n] = -1;
    mark_path(&c, loss);
    int rc = -1;
    if (!c.path[loss])
        diag_error(g->diags, src, span, "minimize: loss does not depend on any trainable variable");
    else if (backprop(&c, loss) == 0)
        rc = make_updates(&c);
    free(c.path);
    free(c.grad);
    free(c.updates);
    return rc;
}
