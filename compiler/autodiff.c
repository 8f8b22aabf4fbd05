/* autodiff.c - ad_minimize: reverse-mode differentiation of a scalar loss
 * over the IR, then optimizer slots and update ops per trainable variable.
 *
 * Node ids are a topological order (ir_add only accepts existing inputs), so
 * one descending walk over the loss's ancestors visits every consumer of a
 * node before the node itself.  Only the ancestors are walked, with arrays
 * of their size (ir_walk maps a node to its place among them): a program
 * with a thousand small minimize() calls costs what each one reaches, not
 * a thousand times the graph. */
#include "compiler.h"

#include <stdlib.h>
#include <string.h>

typedef struct ad_ctx {
    ir_graph *g;
    const ad_optimizer *opt;
    const unsigned char *only; /* [n_vars] the variables to train, or NULL: all */
    const src_file *src;
    src_span span;
    int *anc; /* the loss and its ancestors, by id */
    int n_anc;
    char *path;   /* [n_anc] depends on a trainable variable and feeds the loss */
    int *grad;    /* [n_anc] gradient node of each node's output, or -1 */
    int *updates; /* update nodes, one per updated variable */
    int n_updates;
    int step_node;           /* adam, schedules: the step counter's VARIABLE node, or -1 */
    int barrier;             /* group over all gradients: updates wait for it */
    int step_inc;            /* adam, schedules: its ASSIGN_ADD node */
    int lr, gscale;          /* the f32[] learning rate and gradient scale every update reads */
    int *accum;              /* accumulate=k: [n_vars] each variable's accum slot node, or -1 */
    unsigned char *gathered; /* while updates are made: [n_gathered] nodes a gather reads */
    int n_gathered;
} ad_ctx;

static int is_trained(const ad_ctx *c, int vi)
{
    const ir_var *v = &c->g->vars[vi];
    return v->trainable && v->slot_of < 0 && (!c->only || c->only[vi]);
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

/* Node id's index in c->anc (id is the loss or one of its ancestors). */
static int at(const ad_ctx *c, int id)
{
    return ir_walk_get(c->g, id);
}

static int by_id(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* c->anc: the loss and every node it reads, directly or not, by id. */
static void collect_ancestors(ad_ctx *c, int loss)
{
    ir_graph *g = c->g;
    int cap = 64, n = 0;
    int *anc = base_xmalloc(sizeof(int) * (size_t)cap);
    ir_walk_begin(g);
    ir_walk_set(g, loss, 0);
    anc[n++] = loss;
    for (int i = 0; i < n; i++) { /* anc is its own worklist */
        const ir_node *nd = &g->nodes[anc[i]];
        IR_WORK(1 + nd->n_in);
        for (int k = 0; k < nd->n_in; k++) {
            if (ir_walk_get(g, nd->in[k]) >= 0) continue;
            ir_walk_set(g, nd->in[k], 0);
            if (n == cap) anc = base_xreallocarray(anc, (size_t)(cap *= 2), sizeof(int));
            anc[n++] = nd->in[k];
        }
    }
    qsort(anc, (size_t)n, sizeof(int), by_id);
    for (int i = 0; i < n; i++) ir_walk_set(g, anc[i], i);
    c->anc = anc;
    c->n_anc = n;
}

/* path[i] = anc[i] depends on a trainable variable and the loss depends on
 * it. */
static void mark_path(ad_ctx *c)
{
    ir_graph *g = c->g;
    char *dep = base_xcalloc((size_t)c->n_anc, 1);
    IR_WORK(2 * c->n_anc);
    for (int i = 0; i < c->n_anc; i++) {
        const ir_node *nd = &g->nodes[c->anc[i]];
        if (nd->dead) continue;
        if (nd->op == OP_VARIABLE && nd->var >= 0) dep[i] = (char)is_trained(c, nd->var);
        for (int k = 0; k < nd->n_in; k++) dep[i] |= dep[at(c, nd->in[k])];
    }
    c->path[c->n_anc - 1] = dep[c->n_anc - 1];
    for (int i = c->n_anc - 1; i >= 0; i--) {
        if (!c->path[i]) continue;
        const ir_node *nd = &g->nodes[c->anc[i]];
        for (int k = 0; k < nd->n_in; k++) c->path[at(c, nd->in[k])] = dep[at(c, nd->in[k])];
    }
    free(dep);
}

/* x's node flattened to [-1] (d = 0) or [-1, d], placed with x's table. */
static int flat(ad_ctx *c, int x, int like, int64_t d)
{
    ir_attrs a = {.n_list = d ? 2 : 1, .list = {-1, d}};
    return ir_add_like(c->g, like, OP_RESHAPE, &x, 1, &a);
}

/* Two gather_grads of one table become one: their rows and their ids back
 * to back, so the table's gradient stays rows (sparse_grad) however many
 * gathers read it. */
static int merge_gather_grads(ad_ctx *c, int x, int ga, int gb)
{
    ir_graph *g = c->g;
    ir_node a = g->nodes[ga], b = g->nodes[gb];
    int64_t d = a.attr.list[1];
    int dys[2] = {flat(c, a.in[0], x, d), flat(c, b.in[0], x, d)};
    int ids[2] = {flat(c, a.in[1], x, 0), flat(c, b.in[1], x, 0)};
    if (dys[0] < 0 || dys[1] < 0 || ids[0] < 0 || ids[1] < 0) return -1;
    ir_attrs cat;
    memset(&cat, 0, sizeof(cat));
    int in[2] = {ir_add_like(g, x, OP_CONCAT, dys, 2, &cat),
                 ir_add_like(g, x, OP_CONCAT, ids, 2, &cat)};
    if (in[0] < 0 || in[1] < 0) return -1;
    return ir_add_like(g, x, OP_GATHER_GRAD, in, 2, &a.attr);
}

static int is_gather_grad(const ad_ctx *c, int n)
{
    return c->g->nodes[n].op == OP_GATHER_GRAD && c->g->nodes[n].attr.n_list == 2;
}

/* The pieces of a slice_grad's dy along axis: a concat's inputs on that
 * axis (a merge of earlier slices), else dy itself; appended to parts. */
static int slice_pieces(const ir_graph *g, int dy, int64_t axis, int *parts, int n)
{
    const ir_node *d = &g->nodes[dy];
    int64_t a = d->attr.i[ATTR_AXIS];
    if (d->op != OP_CONCAT || (a < 0 ? a + d->type.rank : a) != axis) {
        parts[n] = dy;
        return n + 1;
    }
    memcpy(parts + n, d->in, sizeof(int) * (size_t)d->n_in);
    return n + d->n_in;
}

/* Two slice_grads of x along one axis whose ranges meet become one, of
 * their gradients concatenated: the T slices of an unrolled sequence
 * (lstm_seq, or a for loop over slice()) give x's gradient in one concat
 * of T pieces, not T adds of x-sized tensors (the concat alone once they
 * cover the axis).  0 when they do not meet. */
static int merge_slice_grads(ad_ctx *c, int x, int ga, int gb)
{
    ir_graph *g = c->g;
    ir_node a = g->nodes[ga], b = g->nodes[gb];
    int rank = g->nodes[x].type.rank;
    int64_t ax = a.attr.i[ATTR_AXIS] < 0 ? a.attr.i[ATTR_AXIS] + rank : a.attr.i[ATTR_AXIS];
    int64_t bx = b.attr.i[ATTR_AXIS] < 0 ? b.attr.i[ATTR_AXIS] + rank : b.attr.i[ATTR_AXIS];
    if (ax != bx) return 0;
    if (b.attr.i[ATTR_SLICE_END] == a.attr.i[ATTR_SLICE_BEGIN]) {
        ir_node t = a;
        a = b, b = t;
    }
    if (a.attr.i[ATTR_SLICE_END] != b.attr.i[ATTR_SLICE_BEGIN]) return 0;
    int na = g->nodes[a.in[0]].op == OP_CONCAT ? g->nodes[a.in[0]].n_in : 1;
    int nb = g->nodes[b.in[0]].op == OP_CONCAT ? g->nodes[b.in[0]].n_in : 1;
    int *parts = base_xmalloc(sizeof(int) * (size_t)(na + nb));
    int n = slice_pieces(g, b.in[0], ax, parts, slice_pieces(g, a.in[0], ax, parts, 0));
    ir_attrs cat = {.i = {[ATTR_AXIS] = ax}}, sg = a.attr;
    sg.i[ATTR_SLICE_END] = b.attr.i[ATTR_SLICE_END];
    int dy = ir_add_like(g, x, OP_CONCAT, parts, n, &cat);
    free(parts);
    if (dy < 0 || (sg.i[ATTR_SLICE_BEGIN] == 0 && sg.i[ATTR_SLICE_END] == sg.list[ax])) return dy;
    return ir_add_like(g, x, OP_SLICE_GRAD, &dy, 1, &sg);
}

/* The gradient a^T dy of a matrix's use in a @ w at a step of lstm_seq or
 * gru_seq (ATTR_MM_STEP, which ops_grad_matmul passes on), both of rank 2. */
static int is_weight_grad(const ir_graph *g, int n)
{
    const ir_node *m = &g->nodes[n];
    return m->op == OP_MATMUL && m->attr.i[ATTR_MM_STEP] && m->attr.i[ATTR_TRANS_A] &&
           !m->attr.i[ATTR_TRANS_B] && g->nodes[m->in[0]].type.rank == 2 &&
           g->nodes[m->in[1]].type.rank == 2;
}

/* Two such gradients of one matrix on one device, a1^T dy1 + a2^T dy2,
 * become one GEMM of their rows stacked, [a1; a2]^T [dy1; dy2]: the
 * matrix a sequence uses at every step gets its gradient from one GEMM over
 * all the steps' rows, not a thin GEMM and an add of matrix-sized tensors
 * per step.  Only for the steps of one lstm_seq or gru_seq, which are on
 * one device wherever it is: a matrix used in GEMMs the program places
 * (towers, a for loop) keeps its adds, so its bits do not depend on the
 * placement.  0 when they do not go together. */
static int merge_weight_grads(ad_ctx *c, int ga, int gb)
{
    ir_graph *g = c->g;
    const ir_node *a = &g->nodes[ga], *b = &g->nodes[gb];
    if (place_requested(g, ga) != place_requested(g, gb) || !ir_type_eq(&a->type, &b->type))
        return 0;
    int cat[2];
    ir_attrs rows = {.i = {[ATTR_AXIS] = 0}}, t = a->attr;
    for (int k = 0; k < 2; k++) {
        const ir_node *pa = &g->nodes[a->in[k]], *pb = &g->nodes[b->in[k]];
        if (pa->type.dtype != pb->type.dtype || pa->type.dim[1] != pb->type.dim[1]) return 0;
        int na = pa->op == OP_CONCAT ? pa->n_in : 1, nb = pb->op == OP_CONCAT ? pb->n_in : 1;
        int *parts = base_xmalloc(sizeof(int) * (size_t)(na + nb));
        int n = slice_pieces(g, b->in[k], 0, parts, slice_pieces(g, a->in[k], 0, parts, 0));
        cat[k] = ir_add_like(g, ga, OP_CONCAT, parts, n, &rows);
        free(parts);
        if (cat[k] < 0) return -1;
        a = &g->nodes[ga], b = &g->nodes[gb]; /* ir_add may move the nodes */
    }
    return ir_add_like(g, ga, OP_MATMUL, cat, 2, &t);
}

/* Adds gradient gx into grad[x]; several consumers sum with ADD, which goes
 * with x (a variable's gradients meet where the variable lives), several
 * gathers' rows merge (merge_gather_grads), so do a matrix's uses in
 * GEMMs (merge_weight_grads) and slices that meet (merge_slice_grads). */
static int accumulate(ad_ctx *c, int x, int gx)
{
    int *gr = &c->grad[at(c, x)];
    if (*gr < 0) {
        *gr = gx;
        return 0;
    }
    if (is_gather_grad(c, *gr) && is_gather_grad(c, gx)) {
        *gr = merge_gather_grads(c, x, *gr, gx);
        return *gr < 0 ? -1 : 0;
    }
    if (is_weight_grad(c->g, *gr) && is_weight_grad(c->g, gx)) {
        int m = merge_weight_grads(c, *gr, gx);
        if (m < 0) return -1;
        if (m > 0) {
            *gr = m;
            return 0;
        }
    }
    if (c->g->nodes[*gr].op == OP_SLICE_GRAD && c->g->nodes[gx].op == OP_SLICE_GRAD) {
        int m = merge_slice_grads(c, x, *gr, gx);
        if (m < 0) return -1;
        if (m > 0) {
            *gr = m;
            return 0;
        }
    }
    int in[2] = {*gr, gx};
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    *gr = ir_add_like(c->g, x, OP_ADD, in, 2, &a);
    return *gr < 0 ? -1 : 0;
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
    int *dx = base_xmalloc(sizeof(int) * (size_t)n_in);
    for (int k = 0; k < n_in; k++) dx[k] = -1;
    int rc = ops_table[op].grad(g, n, c->grad[at(c, n)], dx);
    for (int k = 0; rc == 0 && k < n_in; k++) {
        int x = g->nodes[n].in[k];
        if (dx[k] >= 0 && c->path[at(c, x)]) rc = accumulate(c, x, dx[k]);
    }
    free(dx);
    return rc;
}

static int backprop(ad_ctx *c, int loss)
{
    int *gl = &c->grad[at(c, loss)];
    if ((*gl = ir_add_const_like(c->g, loss, 1.0, &c->g->nodes[loss].type)) < 0) return -1;
    IR_WORK(c->n_anc);
    for (int i = c->n_anc - 1; i >= 0; i--)
        if (c->path[i] && c->grad[i] >= 0 && backprop_node(c, c->anc[i]) < 0) return -1;
    return 0;
}

/* base, or base_1, base_2, ... : the first name no variable has yet. */
static const char *unique_var_name(ir_graph *g, const char *base)
{
    size_t n = strlen(base) + 24;
    char *buf = base_xmalloc(n);
    snprintf(buf, n, "%s", base);
    for (int i = 1; IR_WORK(1), ir_find_var(g, buf) >= 0; i++) snprintf(buf, n, "%s_%d", base, i);
    const char *s = ir_strdup(g, buf);
    free(buf);
    return s;
}

/* Node id (id < 0: the error it is), now placed with node `with`: autodiff
 * records where what it makes goes, the placement pass (place.c) decides. */
static int colocated(ad_ctx *c, int id, int with)
{
    if (id >= 0) c->g->nodes[id].coloc = with;
    return id;
}

/* A zero-initialised, untrainable variable, placed with node `with`;
 * returns its node. */
static int new_state_var(ad_ctx *c, const char *name, const ir_type *t, int with, int slot_of,
                         const src_file *src, src_span span)
{
    ir_var v;
    memset(&v, 0, sizeof(v));
    v.name = unique_var_name(c->g, name);
    v.type = *t;
    v.init = INIT_ZEROS;
    v.device = -1;
    v.slot_of = slot_of;
    v.trainable = 0;
    v.opt_state = 1;
    v.src = src;
    v.span = span;
    int vi = ir_add_var(c->g, &v);
    return colocated(c, c->g->vars[vi].node, with);
}

static int make_slot(ad_ctx *c, int vi, const char *suffix)
{
    const ir_var *v = &c->g->vars[vi];
    size_t n = strlen(v->name) + strlen(suffix) + 2;
    char *name = base_xmalloc(n);
    snprintf(name, n, "%s/%s", v->name, suffix);
    int node = new_state_var(c, name, &v->type, v->node, vi, v->src, v->span);
    free(name);
    return node;
}

/* A slot that starts at `value` (adagrad's initial accumulator). */
static int make_slot_at(ad_ctx *c, int vi, const char *suffix, double value)
{
    int node = make_slot(c, vi, suffix);
    if (node >= 0 && value != 0) {
        ir_var *v = &c->g->vars[c->g->nodes[node].var];
        v->init = INIT_CONSTANT;
        v->a = value;
    }
    return node;
}

/* The step counter of Adam and of schedules: one per minimize, incremented
 * once per run before any apply_adam or lr_schedule reads it (control
 * dependencies). */
static int make_step(ad_ctx *c, int with)
{
    ir_type scalar;
    memset(&scalar, 0, sizeof(scalar));
    c->step_node = new_state_var(c, "global_step", &scalar, with, -1, c->src, c->span);
    int one = colocated(c, ir_add_const(c->g, 1.0, &scalar, c->src, c->span), with);
    int in[2] = {c->step_node, one};
    if (one < 0) return -1;
    c->step_inc = colocated(c, ir_add(c->g, OP_ASSIGN_ADD, in, 2, NULL, c->src, c->span), with);
    if (c->step_inc < 0) return -1;
    c->g->nodes[c->step_inc].attr.i[ATTR_LOCKING] = c->opt->locking;
    return 0;
}

static ir_attrs update_attrs(const ad_optimizer *o)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    if (o->kind == AD_MOMENTUM) {
        a.f[ATTR_MOMENTUM_M] = o->m;
        a.i[ATTR_NESTEROV] = o->nesterov;
    } else if (o->kind == AD_ADAM) {
        a.f[ATTR_ADAM_B1] = o->b1;
        a.f[ATTR_ADAM_B2] = o->b2;
        a.f[ATTR_ADAM_EPS] = o->eps;
    } else if (o->kind == AD_RMSPROP || o->kind == AD_ADAGRAD || o->kind == AD_ADADELTA) {
        a.f[ATTR_EPS] = o->eps;
        if (o->kind != AD_ADAGRAD) a.f[ATTR_RHO] = o->rho;
        if (o->kind == AD_RMSPROP) {
            a.f[ATTR_RMS_M] = o->m;
            a.i[ATTR_RMS_CENTERED] = o->centered;
        }
    }
    a.i[ATTR_LOCKING] = o->locking;
    return a;
}

static int var_grad(const ad_ctx *c, int vi)
{
    return c->grad[at(c, c->g->vars[vi].node)];
}

/* A variable reached only through gathers gets its gradient as rows (the
 * gather_grad's dy and ids, never a dense table) and a row update: returns
 * that gather_grad node, else -1.  Clipping reads the rows through
 * rows_sum (trained_grads); distributed training averages dense gradients
 * (the allreduce's output is no gather_grad). */
static int sparse_grad(const ad_ctx *c, int vi)
{
    int gn = var_grad(c, vi);
    return c->g->nodes[gn].op == OP_GATHER_GRAD ? gn : -1;
}

/* The first reader of variable vi's node in the loss's ancestors that is
 * no gather of it and has a gradient path, or -1. */
static int dense_reader(const ad_ctx *c, int vi, int *gathered)
{
    const ir_graph *g = c->g;
    int vn = g->vars[vi].node, other = -1;
    *gathered = 0;
    for (int i = at(c, vn) + 1; i < c->n_anc; i++) {
        const ir_node *nd = &g->nodes[c->anc[i]];
        for (int k = 0; k < nd->n_in; k++) {
            if (nd->in[k] != vn || !c->path[i]) continue;
            if (nd->op == OP_GATHER && k == 0)
                *gathered = 1;
            else if (other < 0)
                other = c->anc[i];
        }
    }
    return other;
}

/* A gathered table whose update is dense anyway: a warning at what made it
 * so (a reader that is no gather, else the minimize of a sync run). */
static void warn_dense(ad_ctx *c, int vi)
{
    int vn = c->g->vars[vi].node;
    if (vn >= c->n_gathered || !c->gathered[vn]) return; /* one scan per gathered table only */
    int gathered, r = dense_reader(c, vi, &gathered);
    if (!gathered) return;
    const ir_node *nd = r >= 0 ? &c->g->nodes[r] : NULL;
    const char *name = c->g->vars[vi].name;
    if (nd)
        diag_add(c->g->diags, DIAG_WARNING, nd->src, nd->span,
                 "minimize: '%s' is gathered, but '%s' reads it here too: its gradient and "
                 "update are dense [V,D] tables, not rows",
                 name, ops_name(nd->op));
    else
        diag_add(c->g->diags, DIAG_WARNING, c->src, c->span,
                 "minimize: '%s' is gathered, but allreduce averages dense gradients: its "
                 "update is a dense [V,D] table, not rows",
                 name);
}

/* AdamW decays matrices and filters, not biases and gains (rank < 2),
 * unless decay_all. */
static double decay_of(const ad_ctx *c, int vi)
{
    return c->opt->decay_all || c->g->vars[vi].type.rank >= 2 ? c->opt->weight_decay : 0;
}

/* A row update's op and its inputs from gather_grad sp: var, dy, ids; the
 * slots (made by the caller) come after them. */
static op_kind rows_inputs(ad_ctx *c, int sp, int *in, int *n_in)
{
    in[1] = c->g->nodes[sp].in[0];
    in[(*n_in)++] = c->g->nodes[sp].in[1];
    static const op_kind rows[] = {
        [AD_SGD] = OP_APPLY_SGD_ROWS,         [AD_MOMENTUM] = OP_APPLY_MOMENTUM_ROWS,
        [AD_ADAM] = OP_APPLY_ADAM_ROWS,       [AD_RMSPROP] = OP_APPLY_RMSPROP_ROWS,
        [AD_ADAGRAD] = OP_APPLY_ADAGRAD_ROWS, [AD_ADADELTA] = OP_APPLY_ADADELTA_ROWS};
    return rows[c->opt->kind];
}

/* The slots of rmsprop (rms, then momentum when m != 0, then mean_grad when
 * centered), adagrad (accumulator) and adadelta (rms, delta), into in. */
static void adaptive_slots(ad_ctx *c, int vi, int *in, int *n_in)
{
    const ad_optimizer *o = c->opt;
    if (o->kind == AD_ADAGRAD) {
        in[(*n_in)++] = make_slot_at(c, vi, "adagrad", o->initial);
    } else if (o->kind == AD_ADADELTA) {
        in[(*n_in)++] = make_slot(c, vi, "adadelta_v");
        in[(*n_in)++] = make_slot(c, vi, "adadelta_u");
    } else if (o->kind == AD_RMSPROP) {
        in[(*n_in)++] = make_slot(c, vi, "rms");
        if (o->m != 0) in[(*n_in)++] = make_slot(c, vi, "momentum");
        if (o->centered) in[(*n_in)++] = make_slot(c, vi, "mean_grad");
    }
}

static int make_update(ad_ctx *c, int vi)
{
    static const op_kind dense[] = {
        [AD_SGD] = OP_APPLY_SGD,         [AD_MOMENTUM] = OP_APPLY_MOMENTUM,
        [AD_ADAM] = OP_APPLY_ADAM,       [AD_RMSPROP] = OP_APPLY_RMSPROP,
        [AD_ADAGRAD] = OP_APPLY_ADAGRAD, [AD_ADADELTA] = OP_APPLY_ADADELTA};
    int with = c->g->vars[vi].node;
    int in[8] = {c->g->vars[vi].node, var_grad(c, vi), -1, -1, -1, -1, -1, -1}, n_in = 2;
    int sp = sparse_grad(c, vi), adam = c->opt->kind == AD_ADAM;
    op_kind op = sp >= 0 ? rows_inputs(c, sp, in, &n_in) /* the gather_grad goes unused */
                         : dense[c->opt->kind];
    if (sp < 0) warn_dense(c, vi);
    if (c->opt->kind == AD_MOMENTUM) in[n_in++] = make_slot(c, vi, "momentum");
    adaptive_slots(c, vi, in, &n_in);
    if (adam) {
        if (c->step_node < 0 && make_step(c, with) < 0) return -1;
        in[n_in++] = make_slot(c, vi, "adam_m");
        in[n_in++] = make_slot(c, vi, "adam_v");
        in[n_in++] = c->step_node;
    }
    in[n_in++] = c->lr;
    in[n_in++] = c->gscale;
    ir_attrs a = update_attrs(c->opt);
    a.f[ATTR_WD] = decay_of(c, vi); /* ATTR_ADAM_WD for adam */
    int u = colocated(c, ir_add(c->g, op, in, n_in, &a, c->src, c->span), with);
    if (u < 0) return -1;
    if (adam) ir_add_ctrl(c->g, u, c->step_inc);
    ir_add_ctrl(c->g, u, c->barrier);
    c->updates[c->n_updates++] = u;
    return 0;
}

/* Distributed sync training: each trained variable's gradient is averaged
 * over the processes (OP_ALLREDUCE, which placement puts on cpu:0, where
 * MPI runs) before any
 * update reads it.  A large gradient (AD_ALONE_BYTES or more) has its own
 * allreduce, which writes the mean straight into its output; smaller ones
 * are packed into buckets of at most AD_BUCKET_BYTES, one allreduce each,
 * and each gradient becomes its slice of its bucket, so a step makes few
 * calls.  Calls go from the last layer's gradients, computed first, to the
 * first layer's; each waits for the one before, so every process calls the
 * collectives in the same order whatever its threads do.  A gradient of a
 * gather is then a dense table, so row updates do not apply (sparse_grad,
 * warn_dense). */
#define AD_ALONE_BYTES  ((size_t)256 << 10)
#define AD_BUCKET_BYTES ((size_t)4 << 20)

typedef struct ad_buckets {
    int *idx; /* the ancestors whose gradients the open bucket holds */
    int n, number, prev;
    size_t bytes;
} ad_buckets;

static int allreduce_node(ad_ctx *c, ad_buckets *b, const int *in, int n)
{
    ir_graph *g = c->g;
    ir_attrs a = {.i = {[ATTR_BUCKET] = b->number++}};
    int r = ir_add(g, OP_ALLREDUCE, in, n, &a, c->src, c->span);
    if (r < 0) return -1;
    if (b->prev >= 0) ir_add_ctrl(g, r, b->prev);
    b->prev = r;
    return r;
}

static int unpack_grad(ad_ctx *c, int i, int bucket, int64_t *off)
{
    ir_graph *g = c->g;
    const ir_type t = g->nodes[c->grad[i]].type;
    int64_t n = ir_numel(&t);
    ir_attrs sa = {.i = {[ATTR_AXIS] = 0, [ATTR_SLICE_BEGIN] = *off, [ATTR_SLICE_END] = *off + n}},
             ra = {.n_list = t.rank};
    for (int d = 0; d < t.rank; d++) ra.list[d] = t.dim[d];
    *off += n;
    int sl = colocated(c, ir_add(g, OP_SLICE, &bucket, 1, &sa, c->src, c->span), bucket);
    if (sl < 0) return -1;
    int r = colocated(c, ir_add(g, OP_RESHAPE, &sl, 1, &ra, c->src, c->span), bucket);
    if (r < 0) return -1;
    c->grad[i] = r;
    return 0;
}

/* anc[i]'s gradient becomes its own allreduce's output. */
static int allreduce_alone(ad_ctx *c, ad_buckets *b, int i)
{
    c->grad[i] = allreduce_node(c, b, &c->grad[i], 1);
    return c->grad[i] < 0 ? -1 : 0;
}

/* A bucket of one gradient is averaged alone: an allreduce of one input
 * keeps its type, there is nothing to slice. */
static int flush_bucket(ad_ctx *c, ad_buckets *b)
{
    if (b->n == 0) return 0;
    if (b->n == 1) {
        b->n = 0, b->bytes = 0;
        return allreduce_alone(c, b, b->idx[0]);
    }
    int *in = base_xmalloc(sizeof(int) * (size_t)b->n), rc = 0;
    for (int k = 0; k < b->n; k++) in[k] = c->grad[b->idx[k]];
    int r = allreduce_node(c, b, in, b->n);
    free(in);
    int64_t off = 0;
    for (int k = 0; k < b->n && rc == 0; k++) rc = r < 0 ? -1 : unpack_grad(c, b->idx[k], r, &off);
    b->n = 0, b->bytes = 0;
    return r < 0 ? -1 : rc;
}

static int allreduce_grad(ad_ctx *c, ad_buckets *b, int i)
{
    size_t bytes = ir_nbytes(&c->g->nodes[c->grad[i]].type);
    if (bytes >= AD_ALONE_BYTES) return allreduce_alone(c, b, i);
    if (b->bytes + bytes > AD_BUCKET_BYTES && flush_bucket(c, b) < 0) return -1;
    b->idx[b->n++] = i;
    b->bytes += bytes;
    return 0;
}

static int trained_here(const ad_ctx *c, int i);

static int allreduce_grads(ad_ctx *c)
{
    ad_buckets b = {.idx = base_xmalloc(sizeof(int) * (size_t)(c->n_anc + 1)), .prev = -1};
    int rc = 0;
    IR_WORK(c->n_anc);
    for (int i = c->n_anc - 1; i >= 0 && rc == 0; i--)
        if (trained_here(c, i) >= 0) rc = allreduce_grad(c, &b, i);
    if (rc == 0) rc = flush_bucket(c, &b);
    free(b.idx);
    return rc;
}

/* The variable of anc[i] when minimize updates it (trainable, not a slot,
 * with a gradient), else -1.  Variables' nodes are made with them, so
 * ancestors by id are these variables by index. */
static int trained_here(const ad_ctx *c, int i)
{
    const ir_node *nd = &c->g->nodes[c->anc[i]];
    if (nd->op != OP_VARIABLE || nd->var < 0 || !is_trained(c, nd->var)) return -1;
    return c->grad[i] >= 0 ? nd->var : -1;
}

/* The rows of gather_grad sp made exact for the global norm: a repeated
 * id's rows summed before they are squared (rows_sum), with variable vi. */
static int clip_rows(ad_ctx *c, int vi, int sp)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    int id = ir_add(c->g, OP_ROWS_SUM, c->g->nodes[sp].in, 2, &a, c->src, c->span);
    return colocated(c, id, c->g->vars[vi].node);
}

/* The gradient of every trained variable (its rows, for a sparse one; for
 * clip, rows summed per id), into grads ([n_anc]), and the first variable's
 * node; returns how many, or -1. */
static int trained_grads(ad_ctx *c, int *grads, int *with, int for_clip)
{
    int n = 0;
    IR_WORK(c->n_anc);
    for (int i = 0, vi; i < c->n_anc; i++) {
        if ((vi = trained_here(c, i)) < 0) continue;
        if (n == 0) *with = c->g->vars[vi].node;
        int sp = sparse_grad(c, vi);
        grads[n] = sp < 0     ? var_grad(c, vi)
                   : for_clip ? clip_rows(c, vi, sp)
                              : c->g->nodes[sp].in[0];
        if (grads[n++] < 0) return -1;
    }
    return n;
}

static int scalar_const(ad_ctx *c, double v)
{
    ir_type scalar;
    memset(&scalar, 0, sizeof(scalar));
    return ir_add_const(c->g, v, &scalar, c->src, c->span);
}

/* The learning rate: a constant, or the schedule of the step counter, read
 * after its increment. */
static int make_lr(ad_ctx *c, int with)
{
    const ad_schedule *s = &c->opt->sched;
    if (!s->on) return c->lr = colocated(c, scalar_const(c, c->opt->lr), with);
    if (c->step_node < 0 && make_step(c, with) < 0) return -1;
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_LR_KIND] = s->kind;
    a.f[ATTR_LR_LR] = c->opt->lr;
    a.f[ATTR_LR_MIN] = s->min;
    a.i[ATTR_LR_WARMUP] = s->warmup;
    a.i[ATTR_LR_STEPS] = s->steps;
    a.f[ATTR_LR_FACTOR] = s->factor;
    c->lr = ir_add(c->g, OP_LR_SCHEDULE, &c->step_node, 1, &a, c->src, c->span);
    if (colocated(c, c->lr, with) < 0) return -1;
    ir_add_ctrl(c->g, c->lr, c->step_inc);
    return c->lr;
}

/* The gradients' scale: 1, or min(1, clip / global norm) of them all. */
static int make_gscale(ad_ctx *c, int with, const int *grads, int n)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.f[ATTR_CLIP] = c->opt->clip;
    int id = c->opt->clip > 0 ? ir_add(c->g, OP_CLIP_SCALE, grads, n, &a, c->src, c->span)
                              : scalar_const(c, 1.0);
    return c->gscale = colocated(c, id, with);
}

/* Every update waits until every gradient is computed: a gradient that reads
 * a variable (matmul's da = dy @ w^T) must see it before any update.  The
 * barrier groups the gradients as they are now; in sync mode it is made
 * before the allreduces, over what they average: an allreduce reads no
 * variable, and an update fused with its allreduce (passes.c) must not wait
 * for the allreduces after its own. */
static int make_barrier(ad_ctx *c)
{
    int *grads = base_xmalloc(sizeof(int) * (size_t)(c->n_anc + 1)), with = -1;
    int n = trained_grads(c, grads, &with, 0);
    c->barrier = n > 0 ? ir_add(c->g, OP_GROUP, grads, n, NULL, c->src, c->span) : n;
    free(grads);
    return c->barrier;
}

/* The learning rate and gradient scale (of the gradients the updates read)
 * live with the first variable. */
static int make_lr_gscale(ad_ctx *c)
{
    int *grads = base_xmalloc(sizeof(int) * (size_t)(c->n_anc + 1)), with = -1, rc = 0;
    int n = trained_grads(c, grads, &with, c->opt->clip > 0);
    if (n < 0 || (n && (make_lr(c, with) < 0 || make_gscale(c, with, grads, n) < 0))) rc = -1;
    free(grads);
    return rc;
}

static int make_updates(ad_ctx *c)
{
    ir_graph *g = c->g;
    c->updates = base_xmalloc(sizeof(int) * (size_t)(c->n_anc + 1));
    if ((!c->opt->allreduce && make_barrier(c) < 0) || make_lr_gscale(c) < 0) return -1;
    IR_WORK(c->n_anc);
    c->n_gathered = g->n_nodes;
    c->gathered = base_xcalloc((size_t)g->n_nodes + 1, 1);
    for (int i = 0; i < c->n_anc; i++)
        if (g->nodes[c->anc[i]].op == OP_GATHER && c->path[i])
            c->gathered[g->nodes[c->anc[i]].in[0]] = 1;
    int rc = 0;
    for (int i = 0, vi; rc == 0 && i < c->n_anc; i++) /* slots appended here are not ancestors */
        if ((vi = trained_here(c, i)) >= 0) rc = make_update(c, vi);
    free(c->gathered);
    c->gathered = NULL;
    if (rc < 0) return -1;
    if (c->n_updates == 0) {
        diag_error(g->diags, c->src, c->span,
                   c->only ? "minimize: loss does not depend on any variable of vars="
                           : "minimize: loss does not depend on any trainable variable");
        return -1;
    }
    return ir_add(g, OP_GROUP, c->updates, c->n_updates, NULL, c->src, c->span);
}

/* minimize(accumulate=k): each trained variable's gradient adds into its
 * slot <var>/accum on the runs of *partial (a group); the k-th run's
 * updates read (accum + gradient) / k instead, and zero_accums empties the
 * slots after them. */
static int accumulate_grads(ad_ctx *c, int *partial)
{
    ir_graph *g = c->g;
    int *adds = base_xmalloc(sizeof(int) * (size_t)(c->n_anc + 1)), n = 0, rc = 0;
    c->accum = base_xmalloc(sizeof(int) * (size_t)(g->n_vars + 1));
    for (int vi = 0; vi < g->n_vars; vi++) c->accum[vi] = -1;
    for (int i = 0, vi; i < c->n_anc && rc == 0; i++) {
        if ((vi = trained_here(c, i)) < 0) continue;
        int with = g->vars[vi].node, acc = c->accum[vi] = make_slot(c, vi, "accum");
        int in[2] = {acc, c->grad[i]}, sum[2] = {-1, scalar_const(c, 1.0 / c->opt->accumulate)};
        adds[n] = colocated(c, ir_add(g, OP_ASSIGN_ADD, in, 2, NULL, c->src, c->span), with);
        sum[0] = colocated(c, ir_add(g, OP_ADD, in, 2, NULL, c->src, c->span), with);
        if (adds[n++] < 0 || sum[0] < 0 || colocated(c, sum[1], with) < 0) rc = -1;
        if (rc == 0)
            c->grad[i] = colocated(c, ir_add(g, OP_MUL, sum, 2, NULL, c->src, c->span), with);
        if (rc == 0 && c->grad[i] < 0) rc = -1;
    }
    if (rc == 0) *partial = ir_add(g, OP_GROUP, adds, n, NULL, c->src, c->span);
    free(adds);
    return rc == 0 && *partial >= 0 ? 0 : -1;
}

/* After the k-th run's update of each variable: its accum slot back to 0. */
static int zero_accums(ad_ctx *c, int group)
{
    ir_graph *g = c->g;
    for (int k = 0, n = c->n_updates; k < n; k++) {
        int u = c->updates[k], acc = c->accum[g->nodes[g->nodes[u].in[0]].var];
        int in[2] = {acc,
                     colocated(c, ir_add_const(g, 0, &g->nodes[acc].type, c->src, c->span), acc)};
        int z = in[1] < 0 ? -1 : ir_add(g, OP_ASSIGN, in, 2, NULL, c->src, c->span);
        if (colocated(c, z, acc) < 0) return -1;
        ir_add_ctrl(g, z, u);
        ir_group_append(g, group, z);
    }
    return 0;
}

/* The backward pass of c's loss: c->grad holds each ancestor's gradient.
 * -1 on error (reported). */
static int ad_begin(ad_ctx *c, int loss)
{
    if (check_loss(c, loss) < 0) return -1;
    collect_ancestors(c, loss);
    c->path = base_xcalloc((size_t)c->n_anc, 1);
    c->grad = base_xmalloc(sizeof(int) * (size_t)c->n_anc);
    for (int i = 0; i < c->n_anc; i++) c->grad[i] = -1;
    mark_path(c);
    if (!c->path[c->n_anc - 1]) {
        diag_error(c->g->diags, c->src, c->span,
                   c->only ? "minimize: loss does not depend on any variable of vars="
                           : "minimize: loss does not depend on any trainable variable");
        return -1;
    }
    return backprop(c, loss);
}

static void ad_end(ad_ctx *c)
{
    free(c->anc);
    free(c->path);
    free(c->grad);
    free(c->updates);
    free(c->accum);
}

/* The updates of c's trained variables from c->grad: the train target's
 * group, or -1. */
static int ad_updates(ad_ctx *c, int *partial)
{
    const ad_optimizer *opt = c->opt;
    if ((opt->allreduce && (make_barrier(c) < 0 || allreduce_grads(c) != 0)) ||
        (opt->accumulate > 1 && accumulate_grads(c, partial) != 0))
        return -1;
    int rc = make_updates(c);
    if (rc >= 0 && opt->accumulate > 1 && zero_accums(c, rc) < 0) rc = -1;
    return rc;
}

int ad_minimize(ir_graph *g, int loss, const ad_optimizer *opt, const unsigned char *only,
                const src_file *src, src_span span, int *partial)
{
    ad_ctx c = {.g = g,
                .opt = opt,
                .only = only,
                .src = src,
                .span = span,
                .step_node = -1,
                .step_inc = -1};
    int rc = ad_begin(&c, loss) == 0 ? ad_updates(&c, partial) : -1;
    ad_end(&c);
    return rc;
}

int ad_gradients(ir_graph *g, int loss, const unsigned char *only, const src_file *src,
                 src_span span, int *vars, int *grads)
{
    static const ad_optimizer none = {.kind = AD_SGD};
    ad_ctx c = {.g = g, .opt = &none, .only = only, .src = src, .span = span};
    int n = -1;
    if (ad_begin(&c, loss) == 0) {
        n = 0;
        for (int i = 0, vi; i < c.n_anc; i++)
            if ((vi = trained_here(&c, i)) >= 0) vars[n] = vi, grads[n++] = c.grad[i];
    }
    ad_end(&c);
    return n;
}

/* (variable node, gradient) pairs by node id: the order of ancestors. */
static int by_node(const void *a, const void *b)
{
    return ((const int *)a)[0] - ((const int *)b)[0];
}

int ad_apply(ir_graph *g, const int *vars, const int *grads, int n, const ad_optimizer *opt,
             const src_file *src, src_span span)
{
    ad_ctx c = {
        .g = g, .opt = opt, .src = src, .span = span, .step_node = -1, .step_inc = -1, .n_anc = n};
    int *pairs = base_xmalloc(sizeof(int) * 2 * (size_t)(n + 1));
    for (int i = 0; i < n; i++) pairs[2 * i] = g->vars[vars[i]].node, pairs[2 * i + 1] = grads[i];
    qsort(pairs, (size_t)n, 2 * sizeof(int), by_node);
    c.anc = base_xmalloc(sizeof(int) * (size_t)(n + 1));
    c.grad = base_xmalloc(sizeof(int) * (size_t)(n + 1));
    c.path = base_xmalloc((size_t)n + 1);
    ir_walk_begin(g);
    for (int i = 0; i < n; i++) {
        c.anc[i] = pairs[2 * i];
        c.grad[i] = pairs[2 * i + 1];
        c.path[i] = 1;
        ir_walk_set(g, c.anc[i], i);
    }
    free(pairs);
    int rc = ad_updates(&c, NULL);
    ad_end(&c);
    return rc;
}

int ad_lr_of(const ir_graph *g, int train)
{
    while (g->nodes[train].op == OP_GROUP) train = g->nodes[train].in[0]; /* group() first */
    const ir_node *u = &g->nodes[train];
    return u->in[u->n_in - 2];
}
