/* sema_builtins.c - what a .graph program can call besides its own fns:
 * registry ops (by name, arguments mapped to attribute slots), variable
 * initializers, data sources, optimizers and shape helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fatal.h"
#include "sema_int.h"

#define GR_DATASETS_DIR "/usr/share/datasets"

enum {
    B_ZEROS,
    B_ONES,
    B_CONSTANT,
    B_UNIFORM,
    B_NORMAL,
    B_GLOROT,
    B_HE,
    B_COLS,
    B_ROWS,
    B_SHARD,
    B_NONE,
    B_IDX,
    B_CSV,
    B_RAW,
    B_GAUSSIAN,
    B_TEXT,
    B_SGD,
    B_MOMENTUM,
    B_ADAM,
    B_ADAMW,
    B_RMSPROP,
    B_ADAGRAD,
    B_ADADELTA,
    B_COSINE,
    B_LINEAR,
    B_WARMUP,
    B_STEP_DECAY,
    B_EXPONENTIAL,
    B_BERNOULLI,
    B_CATEGORICAL,
    B_SAMPLE,
    B_GLOBAL_AVGPOOL,
    B_CLIP,
    B_LEAKY_RELU,
    B_SIGMOID_XENT,
    B_NLL,
    B_GROUPNORM,
    B_LSTM,
    B_LSTM_H,
    B_LSTM_C,
    B_GRU,
    B_LSTM_SEQ,
    B_GRU_SEQ,
    B_COUNT
};

static const char *const builtin_names[B_COUNT] = {
    "zeros",     "ones",        "constant",     "uniform",
    "normal",    "glorot",      "he",           "cols",
    "rows",      "shard",       "none",         "idx",
    "csv",       "raw",         "gaussian",     "text",
    "sgd",       "momentum",    "adam",         "adamw",
    "rmsprop",   "adagrad",     "adadelta",     "cosine",
    "linear",    "warmup",      "step_decay",   "exponential",
    "bernoulli", "categorical", "sample",       "global_avgpool",
    "clip",      "leaky_relu",  "sigmoid_xent", "nll",
    "groupnorm", "lstm",        "lstm_h",       "lstm_c",
    "gru",       "lstm_seq",    "gru_seq",
};

int sema_builtin_lookup(const char *name)
{
    for (int i = 0; i < B_COUNT; i++)
        if (builtin_names[i][0] == name[0] && strcmp(builtin_names[i], name) == 0) return i;
    return -1;
}

const char *sema_builtin_name(int i)
{
    return i >= 0 && i < B_COUNT ? builtin_names[i] : NULL;
}

const char *sema_optimizer_names(char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int b = B_SGD; b <= B_ADADELTA && len < n; b++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s",
                                b == B_SGD        ? ""
                                : b == B_ADADELTA ? " and "
                                                  : ", ",
                                builtin_names[b]);
    return buf;
}

/* A shape such as [784, 10] (or one number) as an f32 type, checked:
 * positive dimensions, within the limits of a tensor (for `what`). */
static int shape_arg(sema *S, const ast_node *at, const char *what, value v, ir_type *t)
{
    at = sema_arg_at(&v, at);
    if (v.k == V_NUM) v = (value){.k = V_LIST, .items = &v, .n_items = 1};
    if (v.k != V_LIST) {
        sema_err(S, at, "expected a shape such as [784, 10], got %s", sema_value_kind(&v));
        return -1;
    }
    if (v.n_items > IR_MAX_DIMS) {
        sema_err(S, at, "rank %d is above the limit of %d", v.n_items, IR_MAX_DIMS);
        return -1;
    }
    t->dtype = DT_F32;
    t->rank = v.n_items;
    for (int i = 0; i < v.n_items; i++) {
        if (sema_int_arg(S, at, v.items[i], &t->dim[i]) < 0) return -1;
        if (t->dim[i] <= 0) {
            sema_err(S, at, "dimension %d of the shape is %lld; it must be positive", i,
                     (long long)t->dim[i]);
            return -1;
        }
    }
    return sema_check_type(S, at, what, t);
}

/* ---- registry ops ---- */

/* A string attribute: the index of v among spec's choices. */
static int choice_value(sema *S, const ast_node *at, const op_attr *spec, value v, int64_t *out)
{
    char want[160] = "";
    size_t n = 0;
    for (int i = 0; spec->choices[i]; i++) {
        if (v.k == V_STR && strcmp(v.str, spec->choices[i]) == 0) {
            *out = i;
            return 0;
        }
        if (n < sizeof want)
            n += (size_t)snprintf(want + n, sizeof want - n, "%s\"%s\"", i ? ", " : "",
                                  spec->choices[i]);
    }
    if (v.k == V_STR)
        sema_err(S, at, "'%s' must be one of %s, got \"%s\"", spec->name, want, v.str);
    else
        sema_err(S, at, "'%s' must be one of %s, got %s", spec->name, want, sema_value_kind(&v));
    return -1;
}

static int op_attr_value(sema *S, const ast_node *at, const op_attr *spec, value v, int slot,
                         ir_attrs *a)
{
    int64_t iv;
    at = sema_arg_at(&v, at);
    switch (spec->kind) {
    case ATTR_INT:
        if (sema_int_arg(S, at, v, &iv) < 0) return -1;
        a->i[slot] = iv;
        return 0;
    case ATTR_BOOL: {
        int b;
        if (sema_bool_arg(S, at, v, 0, &b) < 0) return -1;
        a->i[slot] = b;
        return 0;
    }
    case ATTR_FLOAT:
        return sema_num_arg(S, at, v, 0, &a->f[slot]);
    case ATTR_DTYPE:
        if (v.k != V_STR || (strcmp(v.str, "f32") && strcmp(v.str, "i32"))) {
            sema_err(S, at, "'%s' must be \"f32\" or \"i32\"", spec->name);
            return -1;
        }
        a->i[slot] = strcmp(v.str, "i32") == 0 ? DT_I32 : DT_F32;
        return 0;
    case ATTR_CHOICE:
        return choice_value(S, at, spec, v, &a->i[slot]);
    case ATTR_PAD: /* "same", "valid" or a number of cells on each side */
        if (v.k == V_STR && (!strcmp(v.str, "same") || !strcmp(v.str, "valid"))) {
            a->i[slot] = strcmp(v.str, "same") == 0 ? OP_PAD_SAME : 0;
            return 0;
        }
        if (v.k == V_NUM && sema_int_arg(S, at, v, &iv) < 0) return -1;
        if (v.k == V_NUM && iv >= 0) {
            a->i[slot] = iv;
            return 0;
        }
        if (v.k == V_STR)
            sema_err(S, at, "'%s' must be \"same\", \"valid\" or an integer >= 0, got \"%s\"",
                     spec->name, v.str);
        else if (v.k == V_NUM)
            sema_err(S, at, "'%s' must be \"same\", \"valid\" or an integer >= 0, got %lld",
                     spec->name, (long long)iv);
        else if (v.k != V_ERR)
            sema_err(S, at, "'%s' must be \"same\", \"valid\" or an integer >= 0, got %s",
                     spec->name, sema_value_kind(&v));
        return -1;
    case ATTR_LIST:
        if (v.k != V_LIST || v.n_items > IR_MAX_DIMS) {
            sema_err(S, at, "'%s' must be a list of at most %d integers", spec->name, IR_MAX_DIMS);
            return -1;
        }
        a->n_list = v.n_items;
        for (int i = 0; i < v.n_items; i++) {
            value item = v.items[i];
            item.arg_fn = v.arg_fn, item.arg_name = v.arg_name, item.arg_at = at;
            if (sema_int_arg(S, at, item, &a->list[i]) < 0) return -1;
        }
        return 0;
    default:
        return -1;
    }
}

static int op_n_attrs(const op_info *info)
{
    int n = 0;
    while (n < IR_MAX_ATTRS && info->attrs[n].name) n++;
    return n;
}

/* The attributes: every argument after the op's `skip` tensor ones. */
static int op_attrs(sema *S, op_kind op, const sema_args *args, int skip, ir_attrs *a)
{
    const op_info *info = &ops_table[op];
    int na = op_n_attrs(info);
    value bound[IR_MAX_ATTRS];
    argspec spec[IR_MAX_ATTRS] = {{0}};
    for (int i = 0; i < na; i++)
        spec[i] = (argspec){info->attrs[i].name, isnan(info->attrs[i].def)};
    if (sema_bind_args(S, ops_name(op), spec, na, args, skip, bound) < 0) return -1;
    for (int i = 0; i < na; i++) {
        if (bound[i].k == V_NONE) {
            a->i[i] = (int64_t)info->attrs[i].def;
            a->f[i] = info->attrs[i].def;
        } else if (op_attr_value(S, args->call, &info->attrs[i], bound[i], i, a) < 0)
            return -1;
    }
    return 0;
}

/* dropout(x, rate) without training=: the identity in evaluation, its
 * training version (compiler/modes.c) draws the mask. */
static value auto_dropout(sema *S, const ast_node *call, int x, ir_attrs *a)
{
    a->i[ATTR_DROPOUT_TRAINING] = 0;
    int e = ir_add(S->g, OP_DROPOUT, &x, 1, a, S->src, call->span);
    a->i[ATTR_DROPOUT_TRAINING] = 1;
    int t = e < 0 ? -1 : ir_add(S->g, OP_DROPOUT, &x, 1, a, S->src, call->span);
    if (t >= 0) S->g->nodes[e].alt = t;
    return sema_value_tensor(t < 0 ? -1 : e);
}

value sema_call_op(sema *S, int op, const sema_args *args)
{
    const op_info *info = &ops_table[op];
    const ast_node *call = args->call;
    int arity = info->arity, in[IR_MAX_DIMS * 8];
    value *tensors = args->pos, *first = args->pos;
    int n_t = arity;
    if (arity < 0) { /* variadic: a list of tensors, e.g. concat([a, b], axis=1) */
        if (args->n_pos < 1 || first->k != V_LIST ||
            first->n_items > (int)(sizeof in / sizeof *in)) {
            sema_err(S, call, "%s() takes a list of tensors first", ops_name(op));
            return sema_value_err();
        }
        tensors = first->items;
        n_t = first->n_items;
        arity = 1;
    } else if (args->n_pos < arity) {
        sema_err(S, call, "%s() takes %d tensor argument%s, got %d", ops_name(op), arity,
                 arity == 1 ? "" : "s", args->n_pos);
        return sema_value_err();
    }
    ir_dtype like = DT_F32;
    for (int i = 0; i < n_t; i++)
        if (tensors[i].k == V_TENSOR) like = S->g->nodes[tensors[i].node].type.dtype;
    for (int i = 0; i < n_t; i++)
        if ((in[i] = sema_to_tensor(S, call, tensors[i], like)) < 0) return sema_value_err();
    value composed;
    if (sema_compose_op(S, op, args, in, &composed)) return composed;
    ir_attrs a = {0};
    if (op_attrs(S, op, args, arity, &a) < 0) return sema_value_err();
    if (op == OP_DROPOUT && a.i[ATTR_DROPOUT_TRAINING] < 0) return auto_dropout(S, call, in[0], &a);
    return sema_value_tensor(ir_add(S->g, (op_kind)op, in, n_t, &a, S->src, call->span));
}

/* ---- initializers ---- */

static value call_init(sema *S, int b, const sema_args *args)
{
    const ast_node *call = args->call;
    static const argspec spec[] = {{"shape", 1}, {"trainable", 0}};
    static const argspec cspec[] = {{"value", 1}, {"shape", 1}, {"trainable", 0}};
    static const argspec nspec[] = {{"shape", 1}, {"mean", 0}, {"std", 0}, {"trainable", 0}};
    static const argspec uspec[] = {{"shape", 1}, {"low", 0}, {"high", 0}, {"trainable", 0}};
    value bound[4];
    const argspec *sp = b == B_CONSTANT  ? cspec
                        : b == B_NORMAL  ? nspec
                        : b == B_UNIFORM ? uspec
                                         : spec;
    int ns = b == B_CONSTANT ? 3 : (b == B_NORMAL || b == B_UNIFORM) ? 4 : 2;
    if (sema_bind_args(S, builtin_names[b], sp, ns, args, 0, bound) < 0) return sema_value_err();
    value v = {.k = V_INIT};
    int trainable;
    if (sema_bool_arg(S, call, bound[ns - 1], 1, &trainable) < 0) return sema_value_err();
    v.init_frozen = !trainable; /* trainable=false: no optimizer updates it */
    static const ir_init kinds[] = {[B_ZEROS] = INIT_ZEROS,
                                    [B_ONES] = INIT_ONES,
                                    [B_CONSTANT] = INIT_CONSTANT,
                                    [B_UNIFORM] = INIT_UNIFORM,
                                    [B_NORMAL] = INIT_NORMAL,
                                    [B_GLOROT] = INIT_GLOROT,
                                    [B_HE] = INIT_HE};
    v.init = kinds[b];
    int shape_at = b == B_CONSTANT ? 1 : 0;
    if (shape_arg(S, call, builtin_names[b], bound[shape_at], &v.itype) < 0)
        return sema_value_err();
    if (b == B_CONSTANT && sema_num_arg(S, call, bound[0], 0, &v.ia) < 0) return sema_value_err();
    if (b == B_NORMAL && (sema_num_arg(S, call, bound[1], 0, &v.ia) < 0 ||
                          sema_num_arg(S, call, bound[2], 1, &v.ib) < 0))
        return sema_value_err();
    if (b == B_UNIFORM && (sema_num_arg(S, call, bound[1], -0.05, &v.ia) < 0 ||
                           sema_num_arg(S, call, bound[2], 0.05, &v.ib) < 0))
        return sema_value_err();
    return v;
}

/* ---- shape helpers ---- */

static value call_dim(sema *S, int b, const sema_args *args)
{
    const ast_node *call = args->call;
    int x = args->n_pos == 1 ? sema_to_tensor(S, call, args->pos[0], DT_F32) : -1;
    if (args->n_pos != 1) sema_err(S, call, "%s() takes one tensor", builtin_names[b]);
    if (x < 0) return sema_value_err();
    const ir_type *t = &S->g->nodes[x].type;
    if (t->rank < 1) {
        sema_err(S, call, "%s() needs a tensor of rank >= 1, got a scalar", builtin_names[b]);
        return sema_value_err();
    }
    return sema_value_num((double)(b == B_ROWS ? t->dim[0] : t->dim[t->rank - 1]), 1);
}

/* shard(x, i, n): the i-th of n equal slices along axis 0. */
static value call_shard(sema *S, const sema_args *args)
{
    const ast_node *call = args->call;
    const value *v = args->pos;
    int64_t i, n;
    if (args->n_pos != 3) {
        sema_err(S, call, "shard() takes (tensor, index, count)");
        return sema_value_err();
    }
    int x = sema_to_tensor(S, call, v[0], DT_F32);
    if (x < 0 || sema_int_arg(S, call, v[1], &i) < 0 || sema_int_arg(S, call, v[2], &n) < 0)
        return sema_value_err();
    const ir_type *t = &S->g->nodes[x].type;
    if (t->rank < 1 || n <= 0 || t->dim[0] % n || i < 0 || i >= n) {
        char buf[96];
        sema_err(S, call, "shard(%s, %lld, %lld): axis 0 must split into %lld equal parts",
                 ir_type_str(t, buf, sizeof buf), (long long)i, (long long)n, (long long)n);
        return sema_value_err();
    }
    int64_t step = t->dim[0] / n;
    ir_attrs a = {
        .i = {[ATTR_AXIS] = 0, [ATTR_SLICE_BEGIN] = i * step, [ATTR_SLICE_END] = (i + 1) * step}};
    return sema_value_tensor(ir_add(S->g, OP_SLICE, &x, 1, &a, S->src, call->span));
}

/* ---- optimizers ---- */

/* Every optimizer argument; each optimizer takes some, in its own order. */
enum {
    O_LR,
    O_M,
    O_NESTEROV,
    O_B1,
    O_B2,
    O_EPS,
    O_WD,
    O_DECAY_ALL,
    O_LOCKING,
    O_CLIP,
    O_RHO,
    O_CENTERED,
    O_INITIAL,
    O_N
};
static const char *const opt_names[O_N] = {
    "lr",        "m",       "nesterov", "b1",  "b2",       "eps",    "weight_decay",
    "decay_all", "locking", "clip",     "rho", "centered", "initial"};
static const double opt_defaults[O_N] = {1e-3, 0.9, 0, 0.9, 0.999, 1e-8, 0.01, 0, 0, 0, 0.99, 0, 0};
/* Per optimizer (B_SGD...), its arguments in positional order, ended by -1
 * (sgd's and momentum's weight_decay came later: after their others). */
static const signed char opt_args[][O_N + 1] = {
    {O_LR, O_LOCKING, O_CLIP, O_WD, O_DECAY_ALL, -1},
    {O_LR, O_M, O_NESTEROV, O_LOCKING, O_CLIP, O_WD, O_DECAY_ALL, -1},
    {O_LR, O_B1, O_B2, O_EPS, O_LOCKING, O_CLIP, -1},
    {O_LR, O_B1, O_B2, O_EPS, O_WD, O_DECAY_ALL, O_LOCKING, O_CLIP, -1},
    {O_LR, O_RHO, O_EPS, O_M, O_CENTERED, O_WD, O_DECAY_ALL, O_LOCKING, O_CLIP, -1},
    {O_LR, O_EPS, O_INITIAL, O_WD, O_DECAY_ALL, O_LOCKING, O_CLIP, -1},
    {O_LR, O_RHO, O_EPS, O_WD, O_DECAY_ALL, O_LOCKING, O_CLIP, -1},
};

/* PyTorch's defaults where an optimizer's differ from opt_defaults:
 * RMSprop(lr=0.01, alpha=0.99, eps=1e-8, momentum=0), Adagrad(lr=0.01,
 * eps=1e-10), Adadelta(lr=1.0, rho=0.9, eps=1e-6). */
static double opt_default(int b, int id)
{
    if (id == O_LR && (b == B_RMSPROP || b == B_ADAGRAD)) return 0.01;
    if (id == O_LR && b == B_ADADELTA) return 1.0;
    if (id == O_M && b == B_RMSPROP) return 0;
    if (id == O_EPS && b == B_ADAGRAD) return 1e-10;
    if (id == O_EPS && b == B_ADADELTA) return 1e-6;
    if (id == O_RHO && b == B_ADADELTA) return 0.9;
    if (id == O_WD) return 0;
    return opt_defaults[id];
}

/* Arguments checked where they are written: weight_decay >= 0 (every
 * optimizer); rmsprop's, adagrad's and adadelta's 0 <= rho < 1, eps > 0,
 * 0 <= m < 1 and initial >= 0. */
static int args_check(sema *S, const ast_node *call, int b, const signed char *ids, int n,
                      const value *x, const double *val)
{
    int adaptive = b >= B_RMSPROP;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        double v = val[id];
        const char *bad = id == O_WD && !(v >= 0)                            ? "must be >= 0"
                          : !adaptive                                        ? NULL
                          : (id == O_RHO || id == O_M) && !(v >= 0 && v < 1) ? "must be in [0, 1)"
                          : id == O_EPS && !(v > 0)                          ? "must be positive"
                          : id == O_INITIAL && !(v >= 0)                     ? "must be >= 0"
                                                                             : NULL;
        if (bad) {
            sema_err(S, sema_arg_at(&x[i], call), "%s(): '%s' %s, got %g", builtin_names[b],
                     opt_names[id], bad, v);
            return -1;
        }
    }
    return 0;
}

/* A number, or a schedule whose peak becomes the lr. */
static int lr_arg(sema *S, const ast_node *at, value v, double def, ad_optimizer *o)
{
    if (v.k != V_SCHED) return sema_num_arg(S, at, v, def, &o->lr);
    o->lr = v.opt.lr;
    o->sched = v.opt.sched;
    return 0;
}

static int opt_check(sema *S, const ast_node *call, const ad_optimizer *o, int clip_given)
{
    if (!(o->lr > 0))
        sema_err(S, call, "learning rate must be positive, got %g", o->lr);
    else if (clip_given && !(o->clip > 0))
        sema_err(S, call, "'clip' must be positive, got %g", o->clip);
    else if (!(o->weight_decay >= 0))
        sema_err(S, call, "'weight_decay' must be >= 0, got %g", o->weight_decay);
    else
        return 0;
    return -1;
}

static value call_opt(sema *S, int b, const sema_args *args)
{
    const ast_node *call = args->call;
    const signed char *ids = opt_args[b - B_SGD];
    argspec spec[O_N] = {{0}};
    value x[O_N], v = {.k = V_OPT};
    double val[O_N];
    int n = 0;
    for (; ids[n] >= 0; n++) spec[n] = (argspec){opt_names[ids[n]], ids[n] == O_LR && b < B_ADAM};
    if (sema_bind_args(S, builtin_names[b], spec, n, args, 0, x) < 0) return sema_value_err();
    for (int i = 0; i < O_N; i++) val[i] = opt_default(b, i);
    for (int i = 0; i < n; i++)
        if (ids[i] == O_LR ? lr_arg(S, call, x[i], val[O_LR], &v.opt) < 0
                           : sema_num_arg(S, call, x[i], val[ids[i]], &val[ids[i]]) < 0)
            return sema_value_err();
    if (args_check(S, call, b, ids, n, x, val) < 0) return sema_value_err();
    ad_optimizer *o = &v.opt;
    static const ad_kind kinds[] = {AD_SGD,     AD_MOMENTUM, AD_ADAM,    AD_ADAM,
                                    AD_RMSPROP, AD_ADAGRAD,  AD_ADADELTA};
    o->kind = kinds[b - B_SGD];
    o->rho = val[O_RHO];
    o->centered = val[O_CENTERED] != 0;
    o->initial = val[O_INITIAL];
    o->m = val[O_M];
    o->nesterov = val[O_NESTEROV] != 0;
    o->b1 = val[O_B1];
    o->b2 = val[O_B2];
    o->eps = val[O_EPS];
    o->weight_decay = val[O_WD];
    o->decay_all = val[O_DECAY_ALL] != 0;
    o->locking = val[O_LOCKING] != 0;
    o->clip = val[O_CLIP];
    int clip_given = 0;
    for (int i = 0; i < n; i++) clip_given |= ids[i] == O_CLIP && x[i].k != V_NONE;
    return opt_check(S, call, o, clip_given) < 0 ? sema_value_err() : v;
}

/* ---- learning-rate schedules: cosine(lr, warmup=, steps=, min=),
 * linear(...), warmup(lr, steps=) ---- */

/* step_decay(lr, every=, gamma=0.1, warmup=0) and exponential(lr, decay=,
 * every=1, warmup=0): a factor per period of `every` runs. */
static int factor_args(sema *S, int b, const sema_args *args, value *v)
{
    static const argspec sd[] = {{"lr", 1}, {"every", 1}, {"gamma", 0}, {"warmup", 0}};
    static const argspec ex[] = {{"lr", 1}, {"decay", 1}, {"every", 0}, {"warmup", 0}};
    const ast_node *call = args->call;
    ad_schedule *s = &v->opt.sched;
    int step = b == B_STEP_DECAY;
    value x[4];
    if (sema_bind_args(S, builtin_names[b], step ? sd : ex, 4, args, 0, x) < 0 ||
        sema_num_arg(S, call, x[0], 0, &v->opt.lr) < 0 ||
        sema_num_arg(S, call, x[step ? 2 : 1], 0.1, &s->factor) < 0 ||
        sema_int_in(S, call, "every", x[step ? 1 : 2], 1, 1, LIM_INT, &s->steps) < 0 ||
        sema_int_in(S, call, "warmup", x[3], 0, 0, LIM_INT, &s->warmup) < 0)
        return -1;
    s->kind = step ? OP_LR_STEP : OP_LR_EXP;
    if (s->factor > 0 && s->factor <= 1) return 0;
    sema_err(S, sema_arg_at(&x[step ? 2 : 1], call), "%s(): '%s' must be in (0, 1], got %g",
             builtin_names[b], step ? "gamma" : "decay", s->factor);
    return -1;
}

/* cosine(lr, warmup=0, steps=, min=0) and linear(...) decay after their
 * warmup; warmup(lr, steps=) rises over its steps, then stays. */
static int schedule_args(sema *S, int b, const sema_args *args, value *v)
{
    if (b == B_STEP_DECAY || b == B_EXPONENTIAL) return factor_args(S, b, args, v);
    static const argspec decay[] = {{"lr", 1}, {"warmup", 0}, {"steps", 1}, {"min", 0}};
    static const argspec rise[] = {{"lr", 1}, {"steps", 1}};
    const ast_node *call = args->call;
    ad_schedule *s = &v->opt.sched;
    int rises = b == B_WARMUP;
    value x[4];
    if (sema_bind_args(S, builtin_names[b], rises ? rise : decay, rises ? 2 : 4, args, 0, x) < 0 ||
        sema_num_arg(S, call, x[0], 0, &v->opt.lr) < 0)
        return -1;
    if (rises) {
        s->kind = OP_LR_WARMUP;
        if (sema_int_in(S, call, "steps", x[1], 0, 1, LIM_INT, &s->steps) < 0) return -1;
        s->warmup = s->steps;
        return 0;
    }
    s->kind = b == B_LINEAR ? OP_LR_LINEAR : OP_LR_COSINE;
    return sema_int_in(S, call, "warmup", x[1], 0, 0, LIM_INT, &s->warmup) < 0 ||
                   sema_int_in(S, call, "steps", x[2], 0, 1, LIM_INT, &s->steps) < 0 ||
                   sema_num_arg(S, call, x[3], 0, &s->min) < 0
               ? -1
               : 0;
}

static value call_schedule(sema *S, int b, const sema_args *args)
{
    const ast_node *call = args->call;
    const char *name = builtin_names[b];
    value v = {.k = V_SCHED};
    const ad_schedule *s = &v.opt.sched;
    v.opt.sched.on = 1;
    if (schedule_args(S, b, args, &v) < 0) return sema_value_err();
    if (!(v.opt.lr > 0))
        sema_err(S, call, "%s(): the learning rate must be positive, got %g", name, v.opt.lr);
    else if (!(s->min >= 0 && s->min <= v.opt.lr))
        sema_err(S, call, "%s(): 'min' must be in [0, lr] = [0, %g], got %g", name, v.opt.lr,
                 s->min);
    else if (b != B_WARMUP && s->kind != OP_LR_STEP && s->kind != OP_LR_EXP &&
             s->steps <= s->warmup)
        sema_err(S, call, "%s(): 'steps' (%lld) must be more than 'warmup' (%lld)", name,
                 (long long)s->steps, (long long)s->warmup);
    else
        return v;
    return sema_value_err();
}

/* ---- data sources ---- */

typedef struct data_call {
    value paths[2], batch, shuffle, seed, shape, classes, label, n, dims, nonfinite;
} data_call;

static const char *resolve_path(sema *S, const char *p)
{
    if (!p || p[0] == '/') return p;
    const char *file = S->src->name, *slash = strrchr(file, '/');
    size_t n = strlen(p) + strlen(file) + strlen(GR_DATASETS_DIR) + 4;
    char *buf = ir_alloc(S->g, n);
    snprintf(buf, n, "%.*s%s", slash ? (int)(slash - file + 1) : 0, file, p);
    if (access(buf, R_OK) == 0) return buf;
    snprintf(buf, n, "%s/%s", GR_DATASETS_DIR, p);
    if (access(buf, R_OK) == 0) return buf;
    snprintf(buf, n, "%.*s%s", slash ? (int)(slash - file + 1) : 0, file, p);
    return buf; /* the reader reports it, with the path it tried */
}

static int str_or_none(sema *S, const ast_node *at, value v, const char **out)
{
    *out = NULL;
    if (v.k == V_NONE) return 0;
    if (v.k != V_STR) {
        sema_err(S, at, "expected a file path string, got %s", sema_value_kind(&v));
        return -1;
    }
    *out = resolve_path(S, v.str);
    return 0;
}

static int data_from_call(sema *S, const ast_node *call, int b, const data_call *c, ir_data *d)
{
    static const ir_data_kind kinds[] = {
        [B_IDX] = DATA_IDX, [B_CSV] = DATA_CSV, [B_RAW] = DATA_RAW, [B_GAUSSIAN] = DATA_GAUSSIAN};
    int shuffle, nonfinite;
    int64_t seed, classes, label, n;
    ir_type dims = {0};
    /* the readers take these as ints and counts: bounded here, never cast */
    if (str_or_none(S, call, c->paths[0], &d->path[0]) < 0 ||
        str_or_none(S, call, c->paths[1], &d->path[1]) < 0 ||
        sema_int_in(S, call, "batch", c->batch, 0, 1, LIM_DIM, &d->batch) < 0 ||
        sema_bool_arg(S, call, c->shuffle, 0, &shuffle) < 0 ||
        sema_bool_arg(S, call, c->nonfinite, 0, &nonfinite) < 0 ||
        sema_int_in(S, call, "seed", c->seed, 0, 0, LIM_INT, &seed) < 0 ||
        sema_int_in(S, call, "classes", c->classes, 0, 0, LIM_DIM, &classes) < 0 ||
        sema_int_in(S, call, "label", c->label, -1, -2, LIM_DIM, &label) < 0 ||
        sema_int_in(S, call, "n", c->n, 0, 0, LIM_INT, &n) < 0)
        return -1;
    if (c->dims.k != V_NONE && shape_arg(S, call, builtin_names[b], c->dims, &dims) < 0) return -1;
    if (dims.rank > 4) {
        sema_err(S, call, "per-example shape has rank %d; the limit is 4", dims.rank);
        return -1;
    }
    d->kind = kinds[b];
    d->shuffle = shuffle;
    d->nonfinite = nonfinite;
    d->seed = (uint64_t)seed;
    d->n_classes = classes;
    d->label_col = (int)label;
    d->gen_n = n;
    d->x_rank = dims.rank;
    for (int i = 0; i < dims.rank; i++) d->x_dims[i] = dims.dim[i];
    return 0;
}

/* x: f32[batch, features] by default, or f32[batch, shape...] with shape=. */
/* Values per example, from the data's header: checked, as any shape. */
static int data_per_example(sema *S, const ast_node *call, int b, const sema_data_shape *info,
                            int64_t *per)
{
    char why[160];
    ir_type ex = {.dtype = DT_F32, .rank = info->x_rank};
    for (int i = 0; i < info->x_rank && i < 4; i++) ex.dim[i] = info->x_dims[i];
    if (info->x_rank < 0 || info->x_rank > 4 || ir_type_problem(&ex, why, sizeof why)) {
        sema_err(S, call, "%s: the data's examples are too large: %s", builtin_names[b],
                 info->x_rank < 0 || info->x_rank > 4 ? "bad rank" : why);
        return -1;
    }
    if ((*per = ir_numel(&ex)) == 0) {
        sema_err(S, call, "%s: the data's examples have no values", builtin_names[b]);
        return -1;
    }
    return 0;
}

/* x: f32[batch, features] by default, or f32[batch, shape...] with shape=. */
static int data_types(sema *S, const ast_node *call, int b, const data_call *c,
                      const sema_data_shape *info, ir_data *d)
{
    int64_t per;
    if (data_per_example(S, call, b, info, &per) < 0) return -1;
    d->x = (ir_type){.dtype = DT_F32, .rank = 2, .dim = {d->batch, per}};
    if (c->shape.k != V_NONE) {
        ir_type sh;
        if (shape_arg(S, call, builtin_names[b], c->shape, &sh) < 0) return -1;
        if (ir_numel(&sh) != per || sh.rank + 1 > IR_MAX_DIMS) {
            sema_err(S, call, "shape= has %lld elements per example, but the data has %lld",
                     (long long)ir_numel(&sh), (long long)per);
            return -1;
        }
        d->x.rank = sh.rank + 1;
        for (int i = 0; i < sh.rank; i++) d->x.dim[i + 1] = sh.dim[i];
    }
    if (sema_check_type(S, call, builtin_names[b], &d->x) < 0) return -1;
    d->y = (ir_type){.dtype = DT_I32, .rank = info->has_y ? 1 : -1, .dim = {d->batch}};
    d->n = info->n;
    return 0;
}

static int probe_data(sema *S, const ast_node *call, const ir_data *d, sema_data_shape *info)
{
    char err[512];
    if (!S->opt->probe_data) {
        sema_err(S, call, "cannot read data sources here: the compiler was given no data probe");
        return -1;
    }
    if (S->opt->probe_data(S->opt->probe_ctx, d, info, err, sizeof err) == 0) return 0;
    sema_err(S, call, "%s", err);
    return -1;
}

/* 0 while another data source fits within LIM_DATA. */
static int data_room(sema *S, const ast_node *call)
{
    if (S->g->n_data < LIM_DATA) return 0;
    sema_stop(S, call, "more than %d data sources, the limit", LIM_DATA);
    return -1;
}

static value call_data(sema *S, int b, const sema_args *args)
{
    const ast_node *call = args->call;
    static const argspec spec[] = {{"x", 0},    {"y", 0},     {"batch", 1},    {"shuffle", 0},
                                   {"seed", 0}, {"shape", 0}, {"classes", 0},  {"label", 0},
                                   {"n", 0},    {"dims", 0},  {"nonfinite", 0}};
    data_call c;
    if (sema_bind_args(S, builtin_names[b], spec, 11, args, 0, &c.paths[0]) < 0 ||
        data_room(S, call))
        return sema_value_err();
    ir_data d = {.src = S->src, .span = call->span};
    sema_data_shape info;
    if (data_from_call(S, call, b, &c, &d) < 0 || probe_data(S, call, &d, &info) < 0 ||
        data_types(S, call, b, &c, &info, &d) < 0)
        return sema_value_err();
    return (value){.k = V_DATA, .id = ir_add_data(S->g, &d)};
}

/* ---- text(path, block=, batch=, shuffle=true, seed=0, split=1.0,
 * part="train", stride=, vocab="chars", vocab_size=10000, streams=false) ---- */

/* Which of the n strings choices v is (def when absent), else -1 after
 * reporting. */
static int str_choice(sema *S, const ast_node *at, const char *what, value v,
                      const char *const *choices, int n)
{
    for (int i = 0; v.k == V_STR && i < n; i++)
        if (strcmp(v.str, choices[i]) == 0) return i;
    if (v.k == V_NONE) return 0;
    char list[96] = "";
    for (int i = 0, len = 0; i < n && len < (int)sizeof list; i++)
        len += snprintf(list + len, sizeof list - (size_t)len, "%s\"%s\"",
                        i == 0       ? ""
                        : i == n - 1 ? " or "
                                     : ", ",
                        choices[i]);
    sema_err(S, sema_arg_at(&v, at), "'%s' must be %s", what, list);
    return -1;
}

/* One path or a list of them, each resolved as data paths are. */
static int text_paths(sema *S, const ast_node *at, value v, ir_data *d)
{
    int n = v.k == V_LIST ? v.n_items : 1;
    const value *items = v.k == V_LIST ? v.items : &v;
    d->paths = ir_alloc(S->g, sizeof *d->paths * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        if (items[i].k != V_STR || str_or_none(S, at, items[i], &d->paths[i]) < 0) {
            if (items[i].k != V_STR)
                sema_err(S, at, "text() takes a path or a list of paths, got %s",
                         sema_value_kind(&items[i]));
            return -1;
        }
    d->n_paths = n;
    d->path[0] = n ? d->paths[0] : NULL;
    if (n) return 0;
    sema_err(S, at, "text() needs at least one path");
    return -1;
}

static int text_options(sema *S, const ast_node *call, const value *x, ir_data *d)
{
    static const char *const parts[] = {"train", "val"}, *const vocabs[] = {"chars", "bytes",
                                                                            "words"};
    double shuffle = 1;
    int64_t seed;
    int vocab;
    if (text_paths(S, call, x[0], d) < 0 ||
        sema_int_in(S, call, "block", x[1], 0, 1, LIM_DIM, &d->block) < 0 ||
        sema_int_in(S, call, "batch", x[2], 0, 1, LIM_DIM, &d->batch) < 0 ||
        sema_num_arg(S, call, x[3], 1, &shuffle) < 0 ||
        sema_int_in(S, call, "seed", x[4], 0, 0, LIM_INT, &seed) < 0 ||
        sema_num_arg(S, call, x[5], 1.0, &d->split) < 0 ||
        (d->val_part = str_choice(S, call, "part", x[6], parts, 2)) < 0 ||
        sema_int_in(S, call, "stride", x[7], d->val_part ? d->block : 1, 1, LIM_DIM, &d->stride) <
            0 ||
        (vocab = str_choice(S, call, "vocab", x[8], vocabs, 3)) < 0 ||
        sema_int_in(S, call, "vocab_size", x[9], 10000, 2, LIM_TEXT_WORDS, &d->word_vocab) < 0)
        return -1;
    d->byte_vocab = vocab == 1;
    if (vocab != 2 && x[9].k != V_NONE) {
        sema_err(S, sema_arg_at(&x[9], call), "'vocab_size' is for vocab=\"words\"");
        return -1;
    }
    if (vocab != 2) d->word_vocab = 0;
    d->shuffle = shuffle != 0;
    d->seed = (uint64_t)seed;
    if (d->split > 0 && d->split <= 1) return 0;
    sema_err(S, call, "'split' must be in (0, 1], got %g", d->split);
    return -1;
}

/* streams=true (x[10]): batch contiguous streams read in order, so it
 * sets stride = block and no shuffle; a stride or shuffle=true beside it is
 * an error at that argument. */
static int text_streams(sema *S, const ast_node *call, const value *x, ir_data *d)
{
    double on = 0;
    if (sema_num_arg(S, call, x[10], 0, &on) < 0) return -1;
    if (!(d->streams = on != 0)) return 0;
    if (x[7].k != V_NONE) {
        sema_err(S, sema_arg_at(&x[7], call),
                 "'stride' does not go with streams=true: a stream's windows follow each other "
                 "(stride = block)");
        return -1;
    }
    if (x[3].k != V_NONE && d->shuffle) {
        sema_err(S, sema_arg_at(&x[3], call),
                 "'shuffle=true' does not go with streams=true: row b of each batch continues "
                 "row b of the batch before, in order");
        return -1;
    }
    d->shuffle = 0;
    d->stride = d->block;
    return 0;
}

/* x and y: i32[batch, block]; the vocabulary moves into the graph. */
static int text_types(sema *S, const ast_node *call, sema_data_shape *info, ir_data *d)
{
    d->x = (ir_type){.dtype = DT_I32, .rank = 2, .dim = {d->batch, d->block}};
    d->y = d->x;
    d->n = info->n;
    d->vocab = info->vocab;
    d->vocab_chars = info->vocab_chars ? ir_strdup(S->g, info->vocab_chars) : NULL;
    free(info->vocab_chars);
    return sema_check_type(S, call, "text", &d->x);
}

static value call_text(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"path", 1},  {"block", 1},      {"batch", 1},  {"shuffle", 0},
                                   {"seed", 0},  {"split", 0},      {"part", 0},   {"stride", 0},
                                   {"vocab", 0}, {"vocab_size", 0}, {"streams", 0}};
    const ast_node *call = args->call;
    value x[11];
    ir_data d = {.src = S->src, .span = call->span, .kind = DATA_TEXT};
    sema_data_shape info = {0};
    if (sema_bind_args(S, "text", spec, 11, args, 0, x) < 0 || data_room(S, call) ||
        text_options(S, call, x, &d) < 0 || text_streams(S, call, x, &d) < 0 ||
        probe_data(S, call, &d, &info) < 0 || text_types(S, call, &info, &d) < 0)
        return sema_value_err();
    return (value){.k = V_DATA, .id = ir_add_data(S->g, &d)};
}

int sema_data_stmt(sema *S, const ast_node *stmt, value v)
{
    if (v.k == V_ERR) return -1;
    if (v.k != V_DATA) {
        sema_err(S, stmt->a,
                 "a data statement needs a source such as idx(...), csv(...), "
                 "raw(...), gaussian(...) or text(...), got %s",
                 sema_value_kind(&v));
        return -1;
    }
    S->g->data[v.id].name = ir_strdup(S->g, stmt->name);
    return 0;
}

/* d.vocab: a text source's vocabulary size, an integer (for shapes). */
static value data_vocab(sema *S, const ast_node *at, const ir_data *d)
{
    if (d->kind == DATA_TEXT) return sema_value_num((double)d->vocab, 1);
    sema_err(S, at, "data source '%s' has no vocabulary (only text(...) sources do)",
             d->name ? d->name : "?");
    return sema_value_err();
}

value sema_data_field(sema *S, const ast_node *at, int data, const char *field)
{
    int which = strcmp(field, "x") == 0 ? 0 : strcmp(field, "y") == 0 ? 1 : -1;
    if (strcmp(field, "vocab") == 0) return data_vocab(S, at, &S->g->data[data]);
    if (which < 0) {
        sema_err(S, at, "a data source has fields x, y and (text) vocab, not '%s'", field);
        return sema_value_err();
    }
    if (which == 1 && S->g->data[data].y.rank < 0) {
        sema_err(S, at, "data source '%s' has no labels", S->g->data[data].name);
        return sema_value_err();
    }
    if (data >= S->n_data_cache) {
        int n = data + 8;
        S->data_x = base_xreallocarray(S->data_x, (size_t)n, sizeof(int));
        S->data_y = base_xreallocarray(S->data_y, (size_t)n, sizeof(int));
        for (int i = S->n_data_cache; i < n; i++) S->data_x[i] = S->data_y[i] = -1;
        S->n_data_cache = n;
    }
    int *slot = which ? &S->data_y[data] : &S->data_x[data];
    ir_attrs a = {.i = {[ATTR_DATA_WHICH] = which, [ATTR_DATA_INDEX] = data}};
    if (*slot < 0) *slot = ir_add(S->g, OP_DATA, NULL, 0, &a, S->src, at->span);
    return sema_value_tensor(*slot);
}

/* ---- sampling: bernoulli(p, shape), categorical(logits, n),
 * sample(weights, n): drawn afresh each run from the session seed, the node
 * and the run, as normal() and uniform() are (devices/dropout.h, draw.h) ---- */

/* The expression of argument i (named name), for a caret under it. */
static const ast_node *arg_at(const sema_args *args, int i, const char *name)
{
    if (i < args->n_pos) return args->pos_at[i];
    for (int k = 0; k < args->n_kw; k++)
        if (strcmp(args->kw_at[k]->name, name) == 0) return args->kw_at[k];
    return args->call;
}

/* Argument i as an f32 tensor of rank `rank` (any, when -1), or -1
 * after an error. */
static int draw_input(sema *S, const sema_args *args, const value *v, int i, const char *name,
                      int rank, const char *want)
{
    const ast_node *at = arg_at(args, i, name);
    int x = sema_to_tensor(S, at, *v, DT_F32);
    if (x < 0) return -1;
    const ir_type *t = &S->g->nodes[x].type;
    if (t->dtype == DT_F32 && (rank < 0 || t->rank == rank)) return x;
    char tb[160];
    sema_err(S, at, "'%s' must be %s, got %s", name, want, ir_type_str(t, tb, sizeof tb));
    return -1;
}

/* The count of draws n: a positive integer. */
static int draw_count(sema *S, const sema_args *args, value v, int64_t *n)
{
    const ast_node *at = arg_at(args, 1, "n");
    if (sema_int_arg(S, at, v, n) < 0) return -1;
    if (*n > 0) return 0;
    sema_err(S, at, "'n' must be a positive number of draws, got %lld", (long long)*n);
    return -1;
}

/* A constant table's weights, checked where they are known: none
 * negative, not all zero. */
static int check_weights(sema *S, const ast_node *at, int x)
{
    const ir_node *n = &S->g->nodes[x];
    if (n->op != OP_CONST) return 0;
    int64_t k = ir_numel(&n->type), pos = 0;
    const float *w = n->cdata;
    for (int64_t i = 0; i < k; i++) {
        double v = w ? w[i] : n->attr.f[ATTR_CONST_VALUE];
        if (!(v >= 0)) {
            sema_err(S, at, "'weights' must not be negative, got %g at [%lld]", v, (long long)i);
            return -1;
        }
        pos += v > 0;
    }
    if (pos) return 0;
    sema_err(S, at, "'weights' are all zero: no id can be drawn");
    return -1;
}

static int add_categorical(sema *S, const ast_node *at, int x, int kind, const ir_type *t)
{
    if (sema_check_type(S, at, builtin_names[kind ? B_CATEGORICAL : B_SAMPLE], t) < 0) return -1;
    ir_attrs a = {.i = {[ATTR_RANDOM_KIND] = kind}, .n_list = t->rank};
    for (int d = 0; d < t->rank; d++) a.list[d] = t->dim[d];
    return ir_add(S->g, OP_CATEGORICAL, &x, 1, &a, S->src, at->span);
}

/* categorical(logits f32[B, K], n) -> i32[B, n] */
static value call_categorical(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"logits", 1}, {"n", 1}};
    value v[2];
    int64_t n;
    if (sema_bind_args(S, "categorical", spec, 2, args, 0, v) < 0) return sema_value_err();
    int x = draw_input(S, args, &v[0], 0, "logits", 2, "f32[B, K], a row of logits per draw");
    if (x < 0 || draw_count(S, args, v[1], &n) < 0) return sema_value_err();
    ir_type t = {.dtype = DT_I32, .rank = 2, .dim = {S->g->nodes[x].type.dim[0], n}};
    return sema_value_tensor(add_categorical(S, args->call, x, OP_DRAW_LOGITS, &t));
}

/* sample(weights f32[V], n or a shape) -> i32[n] or i32[shape] */
static value call_sample(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"weights", 1}, {"n", 1}};
    value v[2];
    ir_type t;
    if (sema_bind_args(S, "sample", spec, 2, args, 0, v) < 0) return sema_value_err();
    int x = draw_input(S, args, &v[0], 0, "weights", 1, "f32[V], a table of weights");
    if (x < 0 || check_weights(S, arg_at(args, 0, "weights"), x) < 0) return sema_value_err();
    if (v[1].k == V_LIST) {
        if (shape_arg(S, arg_at(args, 1, "n"), "sample", v[1], &t) < 0) return sema_value_err();
    } else {
        t = (ir_type){.rank = 1};
        if (draw_count(S, args, v[1], &t.dim[0]) < 0) return sema_value_err();
    }
    t.dtype = DT_I32;
    return sema_value_tensor(add_categorical(S, args->call, x, OP_DRAW_WEIGHTS, &t));
}

/* p broadcasts to t, and t is the broadcast's shape (numpy's rules). */
static int broadcasts_into(const ir_type *p, const ir_type *t)
{
    if (p->rank > t->rank) return 0;
    for (int d = 1; d <= p->rank; d++) {
        int64_t pd = p->dim[p->rank - d];
        if (pd != 1 && pd != t->dim[t->rank - d]) return 0;
    }
    return 1;
}

/* bernoulli(p, shape) -> f32[shape] of 0/1: uniform(shape) < p, one node
 * (OP_RANDOM_BERNOULLI) for a number p, a comparison for a tensor. */
static value call_bernoulli(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"p", 1}, {"shape", 1}};
    value v[2];
    ir_type t;
    if (sema_bind_args(S, "bernoulli", spec, 2, args, 0, v) < 0 ||
        shape_arg(S, arg_at(args, 1, "shape"), "bernoulli", v[1], &t) < 0)
        return sema_value_err();
    const ast_node *at = arg_at(args, 0, "p");
    int tensor = v[0].k == V_TENSOR || v[0].k == V_LIST;
    if (!tensor && (v[0].k != V_NUM || !(v[0].num >= 0 && v[0].num <= 1))) {
        if (v[0].k == V_NUM)
            sema_err(S, at, "'p' must be in [0, 1], got %g", v[0].num);
        else
            sema_err(S, at, "'p' must be a number in [0, 1] or a tensor, got %s",
                     sema_value_kind(&v[0]));
        return sema_value_err();
    }
    int shape = ir_add_const(S->g, 0, &t, S->src, args->call->span);
    ir_attrs a = {.i = {[ATTR_RANDOM_KIND] = tensor ? OP_RANDOM_UNIFORM : OP_RANDOM_BERNOULLI},
                  .f = {[ATTR_RANDOM_A] = tensor ? 0 : v[0].num, [ATTR_RANDOM_B] = 1}};
    int u = shape < 0 ? -1 : ir_add(S->g, OP_RANDOM, &shape, 1, &a, S->src, args->call->span);
    if (u < 0 || !tensor) return sema_value_tensor(u);
    int p = draw_input(S, args, &v[0], 0, "p", -1, "f32");
    if (p < 0 || !broadcasts_into(&S->g->nodes[p].type, &t)) {
        char tb[160], ub[160];
        if (p >= 0)
            sema_err(S, at, "'p' of type %s does not broadcast to the shape %s",
                     ir_type_str(&S->g->nodes[p].type, tb, sizeof tb),
                     ir_type_str(&t, ub, sizeof ub));
        return sema_value_err();
    }
    int in[2] = {u, p};
    return sema_value_tensor(ir_add(S->g, OP_LT, in, 2, &(ir_attrs){0}, S->src, args->call->span));
}

value sema_call_builtin(sema *S, int b, const sema_args *args)
{
    if (b >= B_GLOBAL_AVGPOOL && b <= B_GRU_SEQ)
        return sema_compose_call(S, builtin_names[b], args);
    if (b == B_BERNOULLI) return call_bernoulli(S, args);
    if (b == B_CATEGORICAL) return call_categorical(S, args);
    if (b == B_SAMPLE) return call_sample(S, args);
    if (b <= B_HE) return call_init(S, b, args);
    if (b == B_COLS || b == B_ROWS) return call_dim(S, b, args);
    if (b == B_SHARD) return call_shard(S, args);
    if (b == B_NONE) {
        if (args->n_pos == 1 && args->n_kw == 0) return args->pos[0];
        sema_err(S, args->call, "none() takes one argument");
        return sema_value_err();
    }
    if (b == B_TEXT) return call_text(S, args);
    if (b <= B_GAUSSIAN) return call_data(S, b, args);
    if (b <= B_ADADELTA) return call_opt(S, b, args);
    return call_schedule(S, b, args);
}
