/* sema_state.c - state that changes without a gradient, and what trains
 * differently from how it evaluates (docs/language.md, "State"):
 *
 *   assign(v, x), assign_add(v, x)  an update of variable v: a target
 *   ema(x, decay)                    x's moving average, a variable that
 *                                    every training step reaching x moves
 *   group(a, b, ...)                 one target that runs all of them (its
 *                                    value, when it does not train, is a's)
 *   batchnorm(x, gain, bias, ...)    batch statistics in training, running
 *                                    statistics in evaluation
 *
 * Training targets get the side updates (ir_side) in compiler/modes.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sema_int.h"

enum { ST_ASSIGN, ST_ASSIGN_ADD, ST_EMA, ST_GROUP, ST_BATCHNORM, ST_COUNT };

static const char *const state_names[ST_COUNT] = {"assign", "assign_add", "ema", "group",
                                                  "batchnorm"};

int sema_state_lookup(const char *name)
{
    for (int i = 0; i < ST_COUNT; i++)
        if (strcmp(state_names[i], name) == 0) return SEMA_STATE_BASE + i;
    return -1;
}

const char *sema_state_name(int i)
{
    return i >= 0 && i < ST_COUNT ? state_names[i] : NULL;
}

static const ir_node *node_of(const sema *S, int id)
{
    return &S->g->nodes[id];
}

/* The variable's node, else -1 after an error at `at`. */
static int var_arg(sema *S, const ast_node *at, const char *fn, value v)
{
    if (v.k == V_TENSOR && node_of(S, v.node)->op == OP_VARIABLE) return v.node;
    if (v.k != V_ERR)
        sema_err(S, at, "%s(): the first argument must be a variable (declared with `var`), got %s",
                 fn, v.k == V_TENSOR ? "a computed tensor" : sema_value_kind(&v));
    return -1;
}

/* x as a tensor for variable node `var`: a number fills the variable's
 * type. */
static int value_for(sema *S, const ast_node *at, value x, int var)
{
    const ir_type *t = &node_of(S, var)->type;
    if (x.k == V_NUM || x.k == V_BOOL) return ir_add_const(S->g, x.num, t, S->src, at->span);
    return sema_to_tensor(S, at, x, t->dtype);
}

/* An update op on variable node `var` (assign's decay in attr f0), placed
 * with it. */
static int add_update(sema *S, const ast_node *at, op_kind op, int var, int x, double decay)
{
    ir_attrs a = {0};
    a.f[ATTR_ASSIGN_DECAY] = decay;
    int in[2] = {var, x}, u = ir_add(S->g, op, in, 2, &a, S->src, at->span);
    if (u >= 0) S->g->nodes[u].coloc = var;
    return u;
}

static value call_assign(sema *S, int which, const sema_args *args)
{
    static const argspec spec[] = {{"var", 1}, {"value", 1}};
    const char *fn = state_names[which - SEMA_STATE_BASE];
    value b[2];
    if (sema_bind_args(S, fn, spec, 2, args, 0, b) < 0) return sema_value_err();
    int var = var_arg(S, args->call, fn, b[0]);
    int x = var < 0 ? -1 : value_for(S, args->call, b[1], var);
    if (x < 0) return sema_value_err();
    op_kind op = which == SEMA_STATE_BASE + ST_ASSIGN ? OP_ASSIGN : OP_ASSIGN_ADD;
    return sema_value_tensor(add_update(S, args->call, op, var, x, 0));
}

/* A new untrainable variable `name` of type t (its initial values those of
 * `like`'s initializer when like >= 0, else zeros); its node, or -1 after
 * an error at `at`. */
static int state_var(sema *S, const ast_node *at, const char *name, const ir_type *t, int like,
                     ir_init init)
{
    if (ir_find_var(S->g, name) >= 0) {
        sema_err(S, at, "variable '%s' already exists: each one gets one average", name);
        return -1;
    }
    ir_var v = {.name = ir_strdup(S->g, name),
                .type = *t,
                .init = init,
                .device = -1,
                .slot_of = -1,
                .src = S->src,
                .span = at->span};
    if (like >= 0) {
        const ir_var *o = &S->g->vars[like];
        v.init = o->init, v.a = o->a, v.b = o->b,
        v.seed_name = o->seed_name ? o->seed_name : o->name;
    }
    return S->g->vars[ir_add_var(S->g, &v)].node;
}

/* "<scope>/<leaf>", or "<var>/<leaf>" for a variable's own state. */
static const char *state_name(sema *S, const ast_node *at, int of_var, const char *leaf, char *buf,
                              size_t n)
{
    const char *base = of_var >= 0 ? S->g->vars[of_var].name : S->scope->path;
    if (strlen(base) + strlen(leaf) + 2 > n) {
        sema_err(S, at, "the name of %s's %s is longer than %d bytes, the limit", base, leaf,
                 LIM_NAME);
        return NULL;
    }
    snprintf(buf, n, "%s%s%s", base, *base ? "/" : "", leaf);
    return buf;
}

/* ema(x, decay): TF's ExponentialMovingAverage.  The average starts as x's
 * initial value when x is a variable (zeros otherwise) and moves after
 * every training step that reaches x: avg -= (1 - decay) * (avg - x). */
static value call_ema(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"x", 1}, {"decay", 1}};
    value b[2];
    double decay;
    if (sema_bind_args(S, "ema", spec, 2, args, 0, b) < 0 ||
        sema_num_arg(S, args->call, b[1], 0, &decay) < 0)
        return sema_value_err();
    if (!(decay > 0 && decay < 1)) {
        sema_err(S, args->call, "ema(): decay=%g must be in (0, 1), such as 0.999", decay);
        return sema_value_err();
    }
    int x = sema_to_tensor(S, args->call, b[0], DT_F32);
    if (x < 0) return sema_value_err();
    const ir_node *xn = node_of(S, x);
    int of_var = xn->op == OP_VARIABLE ? xn->var : -1;
    char buf[LIM_NAME + 1];
    ir_type t = xn->type;
    const char *name = state_name(S, args->call, of_var, "ema", buf, sizeof buf);
    int avg = name ? state_var(S, args->call, name, &t, of_var, INIT_ZEROS) : -1;
    if (avg < 0) return sema_value_err();
    if (of_var >= 0) S->g->nodes[avg].coloc = x;
    int u = add_update(S, args->call, OP_ASSIGN, avg, x, decay);
    if (u < 0) return sema_value_err();
    ir_add_side(S->g, &(ir_side){.anchor = x, .update = u, .after_var = of_var, .warn = 1});
    return sema_value_tensor(avg);
}

/* group(a, b, ...): one target.  A training target among them comes
 * first, so the group trains (its loss and lr are the group's). */
/* The training record whose group node is grp, or -1. */
static int train_record_of(const sema *S, int grp)
{
    for (int r = 0; r < S->n_trains; r++)
        if (S->train_group[r] == grp) return r;
    return -1;
}

/* Each assign or assign_add that member m is, or that a group m holds,
 * waits for node `after`. */
static void updates_wait_for(sema *S, int m, int after)
{
    const ir_node *n = node_of(S, m);
    if (n->op == OP_ASSIGN || n->op == OP_ASSIGN_ADD) ir_add_ctrl(S->g, m, after);
    for (int k = 0; n->op == OP_GROUP && k < n->n_in; k++) {
        const ir_node *u = node_of(S, n->in[k]);
        if (u->op == OP_ASSIGN || u->op == OP_ASSIGN_ADD) ir_add_ctrl(S->g, n->in[k], after);
        n = node_of(S, m); /* ir_add_ctrl may move the nodes */
    }
}

/* Member node m of a group that trains with train (its minimize's group):
 * its training version (the loss's dropout masks, batchnorm's batch
 * statistics), and each assign or assign_add in it waits for train's
 * updates, so that no op of the step (its backward pass included) reads
 * a variable the assign has already written.  -1 on error. */
static int group_member_in_step(sema *S, int m, int train)
{
    int r = train_record_of(S, train);
    if (r >= 0 && (m = mode_train_copy(S->g, &S->train_copy[r], m)) < 0) return -1;
    updates_wait_for(S, m, train);
    return m;
}

/* A group that does not train and starts with a value (not a token): the
 * value is the group's (gr_eval averages it), and each assign or
 * assign_add among the other members waits for it, so the value reads
 * every variable as it was before the run, as a training step does. */
static void group_after_value(sema *S, const int *in, int n)
{
    if (ir_numel(&node_of(S, in[0])->type) == 0) return;
    for (int i = 1; i < n; i++) updates_wait_for(S, in[i], in[0]);
}

static value call_group(sema *S, const sema_args *args)
{
    int n = args->n_pos, *in = ir_alloc(S->g, sizeof(int) * (size_t)(n + 1)), train = -1;
    if (n < 1 || args->n_kw) {
        sema_err(S, args->call, "group() takes targets or tensors, by position");
        return sema_value_err();
    }
    for (int i = 0; i < n; i++) {
        if ((in[i] = sema_to_tensor(S, args->pos_at[i], args->pos[i], DT_F32)) < 0)
            return sema_value_err();
        if (args->pos[i].every > 1) {
            sema_err(S, args->pos_at[i],
                     "group(): a minimize(accumulate=) target runs alone (it alternates plans)");
            return sema_value_err();
        }
        if (args->pos[i].is_train && train < 0) train = i;
    }
    if (train > 0) {
        int t = in[train];
        memmove(in + 1, in, sizeof(int) * (size_t)train);
        in[0] = t;
    }
    for (int i = 1; train >= 0 && i < n; i++)
        if ((in[i] = group_member_in_step(S, in[i], in[0])) < 0) return sema_value_err();
    if (train < 0) group_after_value(S, in, n);
    value v = sema_value_tensor(ir_add(S->g, OP_GROUP, in, n, NULL, S->src, args->call->span));
    if (train >= 0 && v.k == V_TENSOR) v.is_train = 1, v.id = args->pos[train].id;
    return v;
}

/* ---- batchnorm ---- */

typedef struct bn_call {
    const ast_node *at;
    int x, gain, bias, axis;
    double momentum, eps;
} bn_call;

static int bn_node(sema *S, const bn_call *b, op_kind op, const int *in, int n)
{
    ir_attrs a = {0};
    a.i[ATTR_AXIS] = b->axis;
    a.f[ATTR_NORM_EPS] = b->eps;
    return ir_add(S->g, op, in, n, &a, S->src, b->at->span);
}

static int reshaped(sema *S, const ast_node *at, int x, int64_t d0, int64_t d1, int rank)
{
    ir_attrs a = {0};
    a.n_list = rank;
    a.list[0] = d0;
    a.list[1] = d1;
    return ir_add(S->g, OP_RESHAPE, &x, 1, &a, S->src, at->span);
}

/* Running statistic `leaf` ([C], initial value init) beside the gain: a
 * call that shares its gain (a scope with reuse) shares it. */
static int bn_state(sema *S, const bn_call *b, const char *leaf, int64_t c, ir_init init)
{
    const ir_node *g = node_of(S, b->gain);
    const char *gname = g->op == OP_VARIABLE ? S->g->vars[g->var].name : NULL;
    const char *slash = gname ? strrchr(gname, '/') : NULL;
    char buf[LIM_NAME + 1];
    int n = gname ? (slash ? (int)(slash - gname) : 0) : (int)strlen(S->scope->path);
    const char *dir = gname ? gname : S->scope->path;
    if (n + strlen(leaf) + 2 > sizeof buf) {
        sema_err(S, b->at, "batchnorm(): the name of its %s is longer than %d bytes, the limit",
                 leaf, LIM_NAME);
        return -1;
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", n, dir, n ? "/" : "", leaf);
    int old = ir_find_var(S->g, buf);
    ir_type t = {.dtype = DT_F32, .rank = 1, .dim = {c}};
    if (old >= 0) {
        const ir_var *o = &S->g->vars[old];
        if (o->span.begin == b->at->span.begin && ir_type_eq(&o->type, &t)) return o->node;
        sema_err(S, b->at,
                 "batchnorm(): '%s' already exists: give each batchnorm a gain of its own scope",
                 buf);
        return -1;
    }
    int node = state_var(S, b->at, buf, &t, -1, init);
    if (node >= 0 && g->op == OP_VARIABLE) S->g->nodes[node].coloc = b->gain;
    return node;
}

/* Row `row` of the batch's stats [2, C], as [C]; the variance unbiased
 * (M / (M - 1), as PyTorch's and TF's running variance). */
static int bn_row(sema *S, const bn_call *b, int stats, int row, int64_t c)
{
    ir_attrs a = {0};
    a.i[ATTR_AXIS] = 0;
    a.i[ATTR_SLICE_BEGIN] = row;
    a.i[ATTR_SLICE_END] = row + 1;
    int s = ir_add(S->g, OP_SLICE, &stats, 1, &a, S->src, b->at->span);
    int r = s < 0 ? -1 : reshaped(S, b->at, s, c, 0, 1);
    int64_t m = ir_numel(&node_of(S, b->x)->type) / c;
    if (r < 0 || row == 0 || m < 2) return r;
    ir_type scalar = {.dtype = DT_F32};
    int k = ir_add_const(S->g, (double)m / (double)(m - 1), &scalar, S->src, b->at->span);
    int in[2] = {r, k};
    return k < 0 ? -1 : ir_add(S->g, OP_MUL, in, 2, NULL, S->src, b->at->span);
}

/* The running statistics: their variables, the evaluation's stats [2, C]
 * from them, and their moving averages as side updates of training. */
static int bn_running(sema *S, const bn_call *b, int batch_stats, int64_t c)
{
    int mean = bn_state(S, b, "moving_mean", c, INIT_ZEROS);
    int var = mean < 0 ? -1 : bn_state(S, b, "moving_variance", c, INIT_ONES);
    if (var < 0) return -1;
    int vars[2] = {mean, var}, rows[2];
    for (int k = 0; k < 2; k++) {
        int r = bn_row(S, b, batch_stats, k, c);
        int u = r < 0 ? -1 : add_update(S, b->at, OP_ASSIGN, vars[k], r, b->momentum);
        if (u < 0) return -1;
        ir_add_side(S->g, &(ir_side){.anchor = -1, .update = u, .after_var = -1});
        rows[k] = reshaped(S, b->at, vars[k], 1, c, 2);
        if (rows[k] < 0) return -1;
    }
    ir_attrs a = {0};
    a.i[ATTR_AXIS] = 0;
    return ir_add(S->g, OP_CONCAT, rows, 2, &a, S->src, b->at->span);
}

static int bn_args(sema *S, const sema_args *args, bn_call *b)
{
    static const argspec spec[] = {{"x", 1},    {"gain", 1},     {"bias", 1},
                                   {"axis", 0}, {"momentum", 0}, {"eps", 0}};
    value v[6];
    double axis;
    b->at = args->call;
    if (sema_bind_args(S, "batchnorm", spec, 6, args, 0, v) < 0 ||
        sema_num_arg(S, b->at, v[3], 1, &axis) < 0 ||
        sema_num_arg(S, b->at, v[4], 0.9, &b->momentum) < 0 ||
        sema_num_arg(S, b->at, v[5], 1e-5, &b->eps) < 0)
        return -1;
    if (!(b->momentum >= 0 && b->momentum < 1)) {
        sema_err(S, b->at,
                 "batchnorm(): momentum=%g must be in [0, 1): the running statistics keep that "
                 "much of themselves each step (0.9 is PyTorch's momentum=0.1)",
                 b->momentum);
        return -1;
    }
    b->axis = (int)axis;
    int *in[3] = {&b->x, &b->gain, &b->bias};
    for (int k = 0; k < 3; k++)
        if ((*in[k] = sema_to_tensor(S, b->at, v[k], DT_F32)) < 0) return -1;
    return 0;
}

/* batchnorm(x, gain, bias, axis=1, momentum=0.9, eps=1e-5): the batch's
 * statistics in training, which move the running ones; the running ones in
 * evaluation (compiler/modes.c). */
static value call_batchnorm(sema *S, const sema_args *args)
{
    bn_call b;
    if (bn_args(S, args, &b) < 0) return sema_value_err();
    int st = bn_node(S, &b, OP_BN_STATS, &b.x, 1);
    if (st < 0) return sema_value_err();
    int64_t c = node_of(S, st)->type.dim[1];
    int first_side = S->g->n_sides, run = bn_running(S, &b, st, c);
    int tin[4] = {b.x, b.gain, b.bias, st}, ein[4] = {b.x, b.gain, b.bias, run};
    int t = run < 0 ? -1 : bn_node(S, &b, OP_BATCHNORM, tin, 4);
    int e = t < 0 ? -1 : bn_node(S, &b, OP_BATCHNORM, ein, 4);
    if (e < 0) return sema_value_err();
    S->g->nodes[e].alt = t;
    for (int i = first_side; i < S->g->n_sides; i++) S->g->sides[i].anchor = e;
    return sema_value_tensor(e);
}

value sema_call_state(sema *S, int which, const sema_args *args)
{
    switch (which - SEMA_STATE_BASE) {
    case ST_ASSIGN:
    case ST_ASSIGN_ADD:
        return call_assign(S, which, args);
    case ST_EMA:
        return call_ema(S, args);
    case ST_GROUP:
        return call_group(S, args);
    default:
        return call_batchnorm(S, args);
    }
}
