/* sema_value.c - compile-time values: constructors, their names in
 * messages, error reporting, and the conversions every part of sema needs
 * (an integer argument, a value as a tensor node).  It calls nothing else
 * in sema, so sema.c and sema_builtins.c both build on it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fatal.h"
#include "sema_int.h"

void sema_err(sema *S, const ast_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(S->g->diags, DIAG_ERROR, S->src, n->span, fmt, ap);
    va_end(ap);
}

void sema_note(sema *S, const ast_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(S->g->diags, DIAG_NOTE, S->src, n->span, fmt, ap);
    va_end(ap);
}

value sema_value_num(double x, int is_int)
{
    value v = {.k = V_NUM, .num = x, .is_int = is_int};
    return v;
}

value sema_value_tensor(int node)
{
    value v = {.k = node < 0 ? V_ERR : V_TENSOR, .node = node};
    return v;
}

value sema_value_err(void)
{
    value v = {.k = V_ERR};
    return v;
}

const char *sema_value_kind(const value *v)
{
    static const char *names[] = {"an erroneous value",
                                  "none",
                                  "a number",
                                  "a boolean",
                                  "a string",
                                  "a list",
                                  "a tensor",
                                  "a function",
                                  "an op",
                                  "a builtin",
                                  "a data source",
                                  "an optimizer",
                                  "an initializer",
                                  "a learning-rate schedule"};
    if (v->k == V_NUM && v->is_int) return "an integer";
    return names[v->k];
}

void sema_stop(sema *S, const ast_node *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!S->stop) diag_vadd(S->g->diags, DIAG_ERROR, S->src, at->span, fmt, ap);
    va_end(ap);
    S->stop = 1;
}

int sema_budget(sema *S, const ast_node *at, long long more)
{
    if (S->stop) return -1;
    if (ir_budget(S->g, more, S->src, at->span) == 0) return 0;
    S->stop = 1;
    return -1;
}

int sema_check_type(sema *S, const ast_node *at, const char *what, const ir_type *t)
{
    char why[160], tb[160];
    if (!ir_type_problem(t, why, sizeof why)) return 0;
    sema_err(S, at, "%s: %s is too large: %s", what, ir_type_str(t, tb, sizeof tb), why);
    return -1;
}

/* Integers are doubles that stay exact (at most 2^53); anything else that
 * claims to be one (a --set value past the range) is refused, never cast. */
static int int_ok(double x)
{
    return fabs(x) <= (double)LIM_INT && x == floor(x);
}

const ast_node *sema_arg_at(const value *v, const ast_node *at)
{
    return v->arg_at ? v->arg_at : at;
}

const char *sema_arg_label(const value *v, char *buf, size_t n)
{
    if (!v->arg_name) return NULL;
    snprintf(buf, n, "%s(): '%s'", v->arg_fn ? v->arg_fn : "", v->arg_name);
    return buf;
}

int sema_int_arg(sema *S, const ast_node *at, value v, int64_t *out)
{
    char lb[96];
    const char *label = sema_arg_label(&v, lb, sizeof lb);
    at = sema_arg_at(&v, at);
    if (v.k == V_ERR) return -1;
    if (v.k != V_NUM || !v.is_int) {
        if (label)
            sema_err(S, at, "%s must be an integer, got %s", label, sema_value_kind(&v));
        else
            sema_err(S, at, "expected an integer, got %s", sema_value_kind(&v));
        return -1;
    }
    if (!int_ok(v.num)) {
        sema_err(S, at, "%s%sinteger %.17g is out of range (at most 2^53 = %lld in magnitude)",
                 label ? label : "", label ? ": " : "", v.num, LIM_INT);
        return -1;
    }
    *out = (int64_t)v.num;
    return 0;
}

int sema_int_in(sema *S, const ast_node *at, const char *what, value v, int64_t def, int64_t lo,
                int64_t hi, int64_t *out)
{
    at = sema_arg_at(&v, at);
    if (v.k == V_NONE) {
        *out = def;
        return 0;
    }
    if (v.k == V_BOOL) v = sema_value_num(v.num, 1);
    if (v.k == V_ERR) return -1;
    if (v.k != V_NUM) {
        sema_err(S, at, "'%s' must be an integer, got %s", what, sema_value_kind(&v));
        return -1;
    }
    if (!int_ok(v.num) || v.num < (double)lo || v.num > (double)hi) {
        sema_err(S, at, "'%s' must be an integer in [%lld, %lld], got %.17g", what, (long long)lo,
                 (long long)hi, v.num);
        return -1;
    }
    *out = (int64_t)v.num;
    return 0;
}

/* ---- tensors from values ---- */

/* The shape of a nested list of numbers; -1 if it is not rectangular, and
 * -2 once more than LIM_LITERAL_ELEMS leaves were seen (*seen counts them:
 * a list bound to a name can be nested many times over, so the walk is
 * bounded, not the source). */
static int list_shape(const value *v, ir_type *t, int depth, int64_t *seen)
{
    if (v->k != V_LIST) {
        if (++*seen > LIM_LITERAL_ELEMS) return -2;
        return v->k == V_NUM || v->k == V_BOOL ? 0 : -1;
    }
    if (depth >= IR_MAX_DIMS || v->n_items == 0) return -1;
    t->dim[depth] = v->n_items;
    if (t->rank < depth + 1) t->rank = depth + 1;
    for (int i = 0; i < v->n_items; i++) {
        ir_type sub = *t;
        int r = list_shape(&v->items[i], &sub, depth + 1, seen);
        if (r < 0) return r;
        if (i && sub.rank != t->rank) return -1;
        *t = sub;
    }
    return 0;
}

static int list_fill(const value *v, float *dst, int64_t *k, const ir_type *t, int depth)
{
    if (v->k != V_LIST) {
        dst[(*k)++] = (float)v->num;
        return 0;
    }
    if (v->n_items != t->dim[depth]) return -1;
    for (int i = 0; i < v->n_items; i++)
        if (list_fill(&v->items[i], dst, k, t, depth + 1) < 0) return -1;
    return 0;
}

static int list_const(sema *S, const ast_node *at, value v)
{
    ir_type t = {.dtype = DT_F32};
    int64_t seen = 0;
    int r = list_shape(&v, &t, 0, &seen);
    if (r == -2) {
        sema_err(S, at, "a tensor literal has more than %d elements, the limit", LIM_LITERAL_ELEMS);
        return -1;
    }
    if (r < 0) {
        sema_err(S, at, "a tensor literal must be a non-empty rectangular list of numbers");
        return -1;
    }
    size_t bytes = sizeof(float) * (size_t)seen; /* ir_numel(&t) if rectangular */
    if (sema_budget(S, at, (long long)bytes) < 0) return -1;
    float *data = ir_alloc(S->g, bytes);
    int64_t k = 0;
    if (seen != ir_dims_numel(t.dim, t.rank) || list_fill(&v, data, &k, &t, 0) < 0 || k != seen) {
        sema_err(S, at, "a tensor literal must be a non-empty rectangular list of numbers");
        return -1;
    }
    int node = ir_add_const(S->g, 0, &t, S->src, at->span);
    if (node >= 0) S->g->nodes[node].cdata = data;
    return node;
}

static int to_tensor(sema *S, const ast_node *at, value v, ir_dtype like, int depth);

/* A list of tensors is stacked along a new leading axis; each level of a
 * nested list adds one, so more than IR_MAX_DIMS levels cannot make a
 * tensor (and a list nested in itself a million times must not recurse a
 * million times). */
static int stack_tensors(sema *S, const ast_node *at, value v, int depth)
{
    if (depth >= IR_MAX_DIMS) {
        sema_err(S, at, "a list of tensors is nested more than %d deep (each level stacks an axis)",
                 IR_MAX_DIMS);
        return -1;
    }
    int *parts = base_xcalloc((size_t)v.n_items, sizeof *parts), node = -1;
    ir_type first;
    for (int i = 0; i < v.n_items; i++) {
        int x = to_tensor(S, at, v.items[i], DT_F32, depth + 1);
        if (x < 0) goto out;
        ir_attrs a = {0};
        const ir_type *t = &S->g->nodes[x].type;
        if (i == 0) first = *t;
        if (!ir_type_eq(t, &first)) {
            char ta[160], tb[160];
            sema_err(S, at,
                     "a list of tensors used as a tensor is stacked, but its items 0 and %d are "
                     "%s and %s; index the list to take one (l[0])",
                     i, ir_type_str(&first, ta, sizeof ta), ir_type_str(t, tb, sizeof tb));
            goto out;
        }
        a.n_list = t->rank + 1;
        a.list[0] = 1;
        for (int d = 0; d < t->rank; d++) a.list[d + 1] = t->dim[d];
        if ((parts[i] = ir_add(S->g, OP_RESHAPE, &x, 1, &a, S->src, at->span)) < 0) goto out;
    }
    node = v.n_items == 1
               ? parts[0]
               : ir_add(S->g, OP_CONCAT, parts, v.n_items, &(ir_attrs){0}, S->src, at->span);
out:
    free(parts);
    return node;
}

/* uniform(shape, low=, high=) or normal(shape, mean=, std=) in an
 * expression: numbers drawn afresh each run, from the session seed, the
 * node and the run (devices/dropout.h); the input is a constant of the
 * shape, for its type. */
static int random_tensor(sema *S, const ast_node *at, const value *v)
{
    int shape = ir_add_const(S->g, 0, &v->itype, S->src, at->span);
    if (shape < 0) return -1;
    ir_attrs a = {0};
    a.i[ATTR_RANDOM_KIND] = v->init == INIT_NORMAL ? OP_RANDOM_NORMAL : OP_RANDOM_UNIFORM;
    a.f[ATTR_RANDOM_A] = v->ia;
    a.f[ATTR_RANDOM_B] = v->ib;
    return ir_add(S->g, OP_RANDOM, &shape, 1, &a, S->src, at->span);
}

int sema_to_tensor(sema *S, const ast_node *at, value v, ir_dtype like)
{
    return to_tensor(S, at, v, like, 0);
}

static int to_tensor(sema *S, const ast_node *at, value v, ir_dtype like, int depth)
{
    ir_type scalar = {.dtype = DT_F32};
    switch (v.k) {
    case V_ERR:
        return -1;
    case V_TENSOR:
        return v.node;
    case V_BOOL:
    case V_NUM:
        if (like == DT_I32 && v.is_int) scalar.dtype = DT_I32;
        return ir_add_const(S->g, v.num, &scalar, S->src, at->span);
    case V_LIST:
        for (int i = 0; i < v.n_items; i++)
            if (v.items[i].k == V_TENSOR || v.items[i].k == V_NONE)
                return stack_tensors(S, at, v, depth);
        return list_const(S, at, v);
    case V_INIT:
        if (v.drawn) return v.drawn - 1;
        if (v.init <= INIT_CONSTANT) {
            double fill = v.init == INIT_ZEROS ? 0 : v.init == INIT_ONES ? 1 : v.ia;
            return ir_add_const(S->g, fill, &v.itype, S->src, at->span);
        }
        if (v.init == INIT_UNIFORM || v.init == INIT_NORMAL) return random_tensor(S, at, &v);
        sema_err(S, at,
                 "glorot and he can only initialize a var (in an expression, uniform() "
                 "and normal() draw fresh numbers each run)");
        return -1;
    default:
        sema_err(S, at, "expected a tensor, got %s", sema_value_kind(&v));
        return -1;
    }
}
