/* ops_shape.c - compile-time shape and dtype rules, one per op family.
 * Each fills g->nodes[id].type or reports at the node's span and returns -1.
 * Rules also normalise attributes (negative axes, -1 in reshape, default
 * permutations, pool strides) so kernels see only resolved values. */
#include "ops_impl.h"

#include <math.h>
#include <string.h>

#define NODE(id)   (&g->nodes[id])
#define OPNAME(id) ops_name(g->nodes[id].op)

static int set_type(ir_graph *g, int id, ir_type t)
{
    g->nodes[id].type = t;
    return 0;
}

static ir_type make_type(ir_dtype dt, int rank, const int64_t *dims)
{
    ir_type t;
    memset(&t, 0, sizeof(t));
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; dims && i < rank; i++) t.dim[i] = dims[i];
    return t;
}

/* The 0-byte token that updates and groups produce. */
static ir_type token_type(void)
{
    int64_t zero = 0;
    return make_type(DT_F32, 1, &zero);
}

static int need_f32(ir_graph *g, int id, const ir_type *t, const char *what)
{
    if (t->dtype == DT_F32) return 0;
    return ops_error(g, id, "%s: %s must be f32, got %s", OPNAME(id), what, ops_ts(t).s);
}

/* Normalises *axis in place to [0, rank); reports against type t. */
static int norm_axis(ir_graph *g, int id, int64_t *axis, const ir_type *t)
{
    if (*axis < -t->rank || *axis >= t->rank) /* compared before adding: no overflow */
        return ops_error(g, id, "%s: axis %lld out of range for %s", OPNAME(id), (long long)*axis,
                         ops_ts(t).s);
    if (*axis < 0) *axis += t->rank;
    return 0;
}

/* numpy broadcast of a and b into o (dtype of a); -1 if incompatible. */
static int ops_broadcast(const ir_type *a, const ir_type *b, ir_type *o)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    ir_type t = make_type(a->dtype, r, NULL);
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - a->rank ? 1 : a->dim[i - (r - a->rank)];
        int64_t db = i < r - b->rank ? 1 : b->dim[i - (r - b->rank)];
        if (da != db && da != 1 && db != 1) return -1;
        t.dim[i] = da == 1 ? db : da;
    }
    *o = t;
    return 0;
}

/* ---- sources ---- */

int ops_shape_data(ir_graph *g, int id)
{
    ir_node *n = NODE(id);
    int64_t di = n->attr.i[ATTR_DATA_INDEX], which = n->attr.i[ATTR_DATA_WHICH];
    if (di < 0 || di >= g->n_data || (which != 0 && which != 1))
        return ops_error(g, id, "data: bad data source %lld.%lld", (long long)di, (long long)which);
    const ir_data *d = &g->data[di];
    if (which == 1 && d->y.rank < 0)
        return ops_error(g, id, "data: source '%s' has no labels (y)", d->name);
    n->data = (int)di;
    return set_type(g, id, which ? d->y : d->x);
}

/* ---- linear algebra ---- */

static int matmul_rank_ok(const ir_type *a, const ir_type *b, int batched)
{
    if (batched) return a->rank >= 2 && b->rank >= 2;
    return a->rank == 2 && b->rank == 2;
}

/* The type of in[k] @ in[k+1]: [..., M, K] @ [..., K, N] -> [..., M, N], the
 * last two axes of a (b) swapped when attr i[ATTR_TRANS_A] (i[ATTR_TRANS_B])
 * says so, or i[ATTR_SGDMM_TRANS_A] (_B) for apply_sgd_matmul (k = 1), the
 * leading (batch) axes broadcast like numpy.  The fused ops (`batched` 0)
 * take matrices only. */
static int matmul_type(ir_graph *g, int id, int k, int batched, ir_type *out)
{
    const ir_type *a = ops_in_type(g, id, k), *b = ops_in_type(g, id, k + 1);
    if (!matmul_rank_ok(a, b, batched))
        return ops_error(g, id, "%s: operands must %s, got %s @ %s", OPNAME(id),
                         batched ? "have rank >= 2 ([..., M, K] @ [..., K, N])" : "be rank 2",
                         ops_ts(a).s, ops_ts(b).s);
    if (a->dtype != DT_F32 || b->dtype != DT_F32)
        return ops_error(g, id, "%s: operands must be f32, got %s @ %s", OPNAME(id), ops_ts(a).s,
                         ops_ts(b).s);
    const int64_t *at = NODE(id)->attr.i;
    int ta = at[k ? ATTR_SGDMM_TRANS_A : ATTR_TRANS_A] != 0;
    int tb = at[k ? ATTR_SGDMM_TRANS_B : ATTR_TRANS_B] != 0;
    int ra = a->rank - 2, rb = b->rank - 2; /* the batch ranks */
    int64_t m = a->dim[ra + ta], ka = a->dim[ra + !ta], kb = b->dim[rb + tb], nn = b->dim[rb + !tb];
    if (ka != kb)
        return ops_error(g, id, "%s @ %s: inner dimensions %lld and %lld differ", ops_ts(a).s,
                         ops_ts(b).s, (long long)ka, (long long)kb);
    ir_type ba = make_type(DT_F32, ra, a->dim), bb = make_type(DT_F32, rb, b->dim), o;
    if (ops_broadcast(&ba, &bb, &o) < 0)
        return ops_error(g, id, "%s @ %s: batch dimensions %s and %s do not broadcast", ops_ts(a).s,
                         ops_ts(b).s, ops_list_str(a->dim, ra).s, ops_list_str(b->dim, rb).s);
    o.dim[o.rank++] = m;
    o.dim[o.rank++] = nn;
    *out = o;
    return 0;
}

int ops_shape_matmul(ir_graph *g, int id)
{
    ir_type t;
    return matmul_type(g, id, 0, 1, &t) < 0 ? -1 : set_type(g, id, t);
}

/* [M, K] @ [K, N], or [..., M, K] @ [K, N] (one GEMM over all the rows),
 * plus bias[N]. */
int ops_shape_matmul_bias(ir_graph *g, int id)
{
    ir_type t;
    if (matmul_type(g, id, 0, 1, &t) < 0) return -1;
    set_type(g, id, t);
    const ir_type *bias = ops_in_type(g, id, 2), *y = &NODE(id)->type;
    if (y->rank > 2 && (ops_in_type(g, id, 1)->rank != 2 || NODE(id)->attr.i[ATTR_TRANS_A]))
        return ops_error(g, id, "matmul_bias: batched a needs a 2-D b and a not transposed");
    int64_t n = y->dim[y->rank - 1];
    if (bias->dtype != DT_F32 || bias->rank != 1 || bias->dim[0] != n)
        return ops_error(g, id, "matmul_bias: bias must be f32[%lld], got %s", (long long)n,
                         ops_ts(bias).s);
    return 0;
}

/* ---- elementwise ---- */

static int binary_type(ir_graph *g, int id, ir_type *o)
{
    const ir_type *a = ops_in_type(g, id, 0), *b = ops_in_type(g, id, 1);
    if (a->dtype != b->dtype)
        return ops_error(g, id, "%s: dtype mismatch: %s and %s", OPNAME(id), ops_ts(a).s,
                         ops_ts(b).s);
    if (ops_broadcast(a, b, o) < 0)
        return ops_error(g, id, "%s: cannot broadcast %s with %s", OPNAME(id), ops_ts(a).s,
                         ops_ts(b).s);
    return 0;
}

int ops_shape_binary(ir_graph *g, int id)
{
    ir_type o;
    if (binary_type(g, id, &o) < 0) return -1;
    return set_type(g, id, o);
}

int ops_shape_binary_f32(ir_graph *g, int id)
{
    ir_type o;
    if (binary_type(g, id, &o) < 0) return -1;
    if (need_f32(g, id, ops_in_type(g, id, 0), "input") < 0) return -1;
    return set_type(g, id, o);
}

/* where(cond, a, b): sema has broadcast the three to one shape; cond is
 * f32 (a comparison's 0/1, or any value: nonzero picks a). */
int ops_shape_where(ir_graph *g, int id)
{
    const ir_type *c = ops_in_type(g, id, 0), *a = ops_in_type(g, id, 1),
                  *b = ops_in_type(g, id, 2);
    if (need_f32(g, id, c, "condition") < 0) return -1;
    if (a->dtype != b->dtype)
        return ops_error(g, id, "where: dtype mismatch: %s and %s", ops_ts(a).s, ops_ts(b).s);
    ir_type cd = *c;
    cd.dtype = a->dtype;
    if (!ir_type_eq(&cd, a) || !ir_type_eq(a, b))
        return ops_error(g, id, "where: condition %s and values %s, %s must have one shape",
                         ops_ts(c).s, ops_ts(a).s, ops_ts(b).s);
    return set_type(g, id, *a);
}

int ops_shape_compare(ir_graph *g, int id)
{
    ir_type o;
    if (binary_type(g, id, &o) < 0) return -1;
    o.dtype = DT_F32;
    return set_type(g, id, o);
}

int ops_shape_unary_any(ir_graph *g, int id)
{
    return set_type(g, id, *ops_in_type(g, id, 0));
}

int ops_shape_unary_f32(ir_graph *g, int id)
{
    if (need_f32(g, id, ops_in_type(g, id, 0), "input") < 0) return -1;
    return ops_shape_unary_any(g, id);
}

/* mask="causal" reads the last two axes as a square [..., T, T] of scores,
 * row i (a query) seeing columns j <= i (its keys up to itself). */
int ops_shape_softmax(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (x->rank < 1)
        return ops_error(g, id, "%s: input must have rank >= 1, got %s", OPNAME(id), ops_ts(x).s);
    if (NODE(id)->op == OP_SOFTMAX && NODE(id)->attr.i[ATTR_MASK] == OP_MASK_CAUSAL &&
        (x->rank < 2 || x->dim[x->rank - 1] != x->dim[x->rank - 2]))
        return ops_error(g, id,
                         "softmax: mask=\"causal\" needs scores [..., T, T], square in the last "
                         "two axes, got %s",
                         ops_ts(x).s);
    return set_type(g, id, *x);
}

int ops_shape_xent(ir_graph *g, int id)
{
    const ir_type *lg = ops_in_type(g, id, 0), *lb = ops_in_type(g, id, 1);
    if (lg->dtype != DT_F32 || lg->rank != 2)
        return ops_error(g, id, "softmax_xent: logits must be f32[N,C], got %s", ops_ts(lg).s);
    if (lb->dtype != DT_I32 || lb->rank != 1)
        return ops_error(g, id, "softmax_xent: labels must be i32[N], got %s", ops_ts(lb).s);
    if (lb->dim[0] != lg->dim[0])
        return ops_error(g, id, "softmax_xent: logits %s and labels %s disagree on N", ops_ts(lg).s,
                         ops_ts(lb).s);
    return set_type(g, id, make_type(DT_F32, 1, lg->dim));
}

int ops_shape_mse(ir_graph *g, int id)
{
    const ir_type *p = ops_in_type(g, id, 0), *t = ops_in_type(g, id, 1);
    if (need_f32(g, id, p, "prediction") < 0) return -1;
    if (!ir_type_eq(p, t))
        return ops_error(g, id, "mse: prediction %s and target %s must have the same type",
                         ops_ts(p).s, ops_ts(t).s);
    return set_type(g, id, make_type(DT_F32, 0, NULL));
}

/* ---- reductions ---- */

int ops_shape_reduce(ir_graph *g, int id)
{
    ir_node *n = NODE(id);
    const ir_type *x = ops_in_type(g, id, 0);
    /* f32 only: summing or comparing an i32's words as floats gave
     * nonsense, different on a GPU (NaN payloads) */
    if (need_f32(g, id, x, "input") < 0) return -1;
    int keep = n->attr.i[ATTR_KEEPDIMS] != 0;
    ir_type o = *x;
    if (n->attr.i[ATTR_AXIS] == OP_AXIS_ALL) {
        for (int i = 0; i < o.rank; i++) o.dim[i] = 1;
        if (!keep) o.rank = 0;
        return set_type(g, id, o);
    }
    if (norm_axis(g, id, &n->attr.i[ATTR_AXIS], x) < 0) return -1;
    int ax = (int)n->attr.i[ATTR_AXIS];
    if (keep) {
        o.dim[ax] = 1;
    } else {
        for (int i = ax; i + 1 < o.rank; i++) o.dim[i] = o.dim[i + 1];
        o.rank--;
    }
    return set_type(g, id, o);
}

int ops_shape_argmax(ir_graph *g, int id)
{
    ir_node *n = NODE(id);
    const ir_type *x = ops_in_type(g, id, 0);
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (norm_axis(g, id, &n->attr.i[ATTR_AXIS], x) < 0) return -1;
    ir_type o = *x;
    for (int i = (int)n->attr.i[ATTR_AXIS]; i + 1 < o.rank; i++) o.dim[i] = o.dim[i + 1];
    o.rank--;
    o.dtype = DT_I32;
    return set_type(g, id, o);
}

/* ---- shapes ---- */

static int check_list(ir_graph *g, int id)
{
    int nl = NODE(id)->attr.n_list;
    if (nl < 0 || nl > IR_MAX_DIMS)
        return ops_error(g, id, "%s: a shape has at most %d dimensions, got %d", OPNAME(id),
                         IR_MAX_DIMS, nl);
    return 0;
}

/* The product of the shape's known dimensions, with the hole (-1) at *hole
 * or -1; reports a bad or oversized shape. */
static int reshape_known(ir_graph *g, int id, int *hole, int64_t *known)
{
    const ir_attrs *a = &NODE(id)->attr;
    ir_type want = make_type(ops_in_type(g, id, 0)->dtype, a->n_list, a->list);
    char why[160];
    *hole = -1;
    for (int i = 0; i < a->n_list; i++) {
        if (a->list[i] == -1 && *hole < 0)
            want.dim[ *hole = i] = 1;
        else if (a->list[i] <= 0)
            return ops_error(g, id, "reshape: bad dimension %lld in %s (one -1 allowed)",
                             (long long)a->list[i], ops_list_str(a->list, a->n_list).s);
    }
    if (ir_type_problem(&want, why, sizeof why))
        return ops_error(g, id, "reshape: cannot reshape %s to %s, too large: %s",
                         ops_ts(ops_in_type(g, id, 0)).s, ops_list_str(a->list, a->n_list).s, why);
    *known = ir_numel(&want);
    return 0;
}

int ops_shape_reshape(ir_graph *g, int id)
{
    ir_attrs *a = &NODE(id)->attr;
    const ir_type *x = ops_in_type(g, id, 0);
    if (check_list(g, id) < 0) return -1;
    int64_t known = 1;
    int hole;
    ops_tstr want = ops_list_str(a->list, a->n_list);
    if (reshape_known(g, id, &hole, &known) < 0) return -1;
    int64_t total = ir_numel(x);
    if (hole >= 0 && known > 0 && total % known == 0) a->list[hole] = total / known;
    ir_type o = make_type(x->dtype, a->n_list, a->list);
    if (hole >= 0 ? total % known != 0 : known != total)
        return ops_error(g, id, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                         ops_ts(x).s, (long long)total, want.s, (long long)known);
    return set_type(g, id, o);
}

int ops_shape_transpose(ir_graph *g, int id)
{
    ir_attrs *a = &NODE(id)->attr;
    const ir_type *x = ops_in_type(g, id, 0);
    if (a->n_list == 0) {
        a->n_list = x->rank;
        for (int i = 0; i < x->rank; i++) a->list[i] = x->rank - 1 - i;
    }
    int seen[IR_MAX_DIMS] = {0};
    ir_type o = *x;
    int ok = a->n_list == x->rank;
    for (int i = 0; ok && i < a->n_list; i++) {
        int64_t p = a->list[i];
        ok = p >= -x->rank && p < x->rank; /* compared before adding: no overflow */
        if (p < 0) p += x->rank;
        ok = ok && !seen[p];
        if (ok) seen[p] = 1, a->list[i] = p, o.dim[i] = x->dim[p];
    }
    if (!ok)
        return ops_error(g, id, "transpose: perm %s is not a permutation of the axes of %s",
                         ops_list_str(a->list, a->n_list).s, ops_ts(x).s);
    return set_type(g, id, o);
}

static int concat_compatible(const ir_type *a, const ir_type *b, int ax)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (i != ax && a->dim[i] != b->dim[i]) return 0;
    return 1;
}

int ops_shape_concat(ir_graph *g, int id)
{
    ir_node *n = NODE(id);
    if (n->n_in < 1) return ops_error(g, id, "concat: needs at least one input");
    const ir_type *a = ops_in_type(g, id, 0);
    if (norm_axis(g, id, &n->attr.i[ATTR_AXIS], a) < 0) return -1;
    int ax = (int)n->attr.i[ATTR_AXIS];
    ir_type o = *a;
    for (int k = 1; k < n->n_in; k++) {
        const ir_type *b = ops_in_type(g, id, k);
        if (!concat_compatible(a, b, ax))
            return ops_error(g, id, "concat: input %d %s does not match %s along axis %d", k,
                             ops_ts(b).s, ops_ts(a).s, ax);
        /* no overflow: each is at most LIM_DIM; ir_add checks the sum */
        o.dim[ax] += b->dim[ax];
    }
    return set_type(g, id, o);
}

int ops_shape_slice(ir_graph *g, int id)
{
    ir_attrs *a = &NODE(id)->attr;
    const ir_type *x = ops_in_type(g, id, 0);
    if (norm_axis(g, id, &a->i[ATTR_AXIS], x) < 0) return -1;
    int64_t ax = a->i[ATTR_AXIS], d = x->dim[ax];
    int64_t *begin = &a->i[ATTR_SLICE_BEGIN], *end = &a->i[ATTR_SLICE_END];
    /* begin and end come from the source: bound them before adding */
    int in_range = *begin >= -d && *begin <= d && *end >= -d && *end <= d;
    int64_t b = *begin < 0 && in_range ? *begin + d : *begin;
    int64_t e = *end < 0 && in_range ? *end + d : *end;
    if (!in_range || b < 0 || e > d || b >= e)
        return ops_error(g, id,
                         "slice: range [%lld, %lld) is empty or out of bounds for axis %lld of %s",
                         (long long)*begin, (long long)*end, (long long)ax, ops_ts(x).s);
    *begin = b;
    *end = e;
    ir_type o = *x;
    o.dim[ax] = e - b;
    return set_type(g, id, o);
}

int ops_shape_gather(ir_graph *g, int id)
{
    const ir_type *t = ops_in_type(g, id, 0), *ids = ops_in_type(g, id, 1);
    if (t->rank != 2)
        return ops_error(g, id, "gather: table must be rank 2 [V,D], got %s", ops_ts(t).s);
    if (ids->dtype != DT_I32)
        return ops_error(g, id, "gather: ids must be i32, got %s", ops_ts(ids).s);
    if (ids->rank >= IR_MAX_DIMS)
        return ops_error(g, id, "gather: ids %s have too many dimensions", ops_ts(ids).s);
    ir_type o = *ids;
    o.dtype = t->dtype;
    o.dim[o.rank++] = t->dim[1];
    return set_type(g, id, o);
}

int ops_shape_cast(ir_graph *g, int id)
{
    int64_t dt = NODE(id)->attr.i[ATTR_CAST_DTYPE];
    if (dt < 0 || dt >= DT_COUNT)
        return ops_error(g, id, "cast: unknown dtype %lld", (long long)dt);
    ir_type o = *ops_in_type(g, id, 0);
    o.dtype = (ir_dtype)dt;
    return set_type(g, id, o);
}

int ops_shape_one_hot(ir_graph *g, int id)
{
    const ir_type *ids = ops_in_type(g, id, 0);
    int64_t depth = NODE(id)->attr.i[ATTR_DEPTH];
    if (ids->dtype != DT_I32 || ids->rank >= IR_MAX_DIMS)
        return ops_error(g, id, "one_hot: ids must be i32 of rank < %d, got %s", IR_MAX_DIMS,
                         ops_ts(ids).s);
    if (depth < 1)
        return ops_error(g, id, "one_hot: depth must be >= 1, got %lld", (long long)depth);
    ir_type o = *ids;
    o.dtype = DT_F32;
    o.dim[o.rank++] = depth;
    return set_type(g, id, o);
}

/* 1 if `small` broadcasts (numpy rules) to `big`. */
static int broadcasts_to(const ir_type *small, const ir_type *big)
{
    if (small->rank > big->rank) return 0;
    int off = big->rank - small->rank;
    for (int i = 0; i < small->rank; i++)
        if (small->dim[i] != 1 && small->dim[i] != big->dim[i + off]) return 0;
    return 1;
}

static ir_type list_type(const ir_graph *g, int id, ir_dtype dt)
{
    const ir_attrs *a = &g->nodes[id].attr;
    return make_type(dt, a->n_list, a->list);
}

int ops_shape_broadcast(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    if (check_list(g, id) < 0) return -1;
    ir_type o = list_type(g, id, x->dtype);
    if (!broadcasts_to(x, &o))
        return ops_error(g, id, "broadcast: cannot broadcast %s to %s", ops_ts(x).s, ops_ts(&o).s);
    return set_type(g, id, o);
}

int ops_shape_sum_to(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    if (check_list(g, id) < 0) return -1;
    ir_type o = list_type(g, id, x->dtype);
    if (!broadcasts_to(&o, x))
        return ops_error(g, id, "sum_to: cannot sum %s to %s", ops_ts(x).s, ops_ts(&o).s);
    return set_type(g, id, o);
}

/* ---- convolution and pooling ---- */

static int need_nchw(ir_graph *g, int id, const ir_type *x)
{
    if (x->rank != 4)
        return ops_error(g, id, "%s: input must be rank 4 (N,C,H,W), got %s", OPNAME(id),
                         ops_ts(x).s);
    return need_f32(g, id, x, "input");
}

/* What a channel mismatch most likely is: TensorFlow's layouts, a filter
 * [KH, KW, C, OC] (HWIO) or an input [N, H, W, C] (NHWC). */
static ops_tstr conv_layout_hint(const ir_type *x, const ir_type *w)
{
    ops_tstr r = {""};
    const int64_t *d = w->dim;
    if (d[2] == x->dim[1] && d[0] == d[1])
        snprintf(r.s, sizeof r.s,
                 " (inputs are [N, C, H, W] and filters [OC, C, KH, KW], not TensorFlow's "
                 "[KH, KW, C, OC]: write [%lld, %lld, %lld, %lld])",
                 (long long)d[3], (long long)d[2], (long long)d[0], (long long)d[1]);
    else if (x->dim[3] == d[1])
        snprintf(r.s, sizeof r.s,
                 " (inputs are [N, C, H, W]; this one looks like [N, H, W, C]: "
                 "transpose(x, perm=[0, 3, 1, 2]) turns it)");
    else
        snprintf(r.s, sizeof r.s, " (inputs are [N, C, H, W] and filters [OC, C, KH, KW])");
    return r;
}

static int conv_check(ir_graph *g, int id, const ir_type *x, const ir_type *w)
{
    if (need_nchw(g, id, x) < 0) return -1;
    if (w->rank != 4 || w->dtype != DT_F32)
        return ops_error(g, id, "conv2d: filter must be f32 rank 4 (OC,C,KH,KW), got %s",
                         ops_ts(w).s);
    if (x->dim[1] != w->dim[1])
        return ops_error(g, id, "conv2d: input %s has %lld channels but filter %s expects %lld%s",
                         ops_ts(x).s, (long long)x->dim[1], ops_ts(w).s, (long long)w->dim[1],
                         conv_layout_hint(x, w).s);
    return 0;
}

/* The kernel lowers a convolution to GEMMs of [C*KH*KW, OH*OW] im2col
 * buffers: BLAS takes both sizes as ints, and the buffer is scratch memory
 * of one tensor's size at most. */
static int conv_gemm_check(ir_graph *g, int id, const ir_type *x, const ir_type *w,
                           const int64_t *dims)
{
    /* the filter's type and the output's are valid (at most 2^38 elements
     * each), so neither product can overflow */
    int64_t ckk = w->dim[1] * w->dim[2] * w->dim[3], ohw = dims[2] * dims[3], cols;
    ir_type col = make_type(DT_F32, 2, (int64_t[]){ckk, ohw});
    if (ckk <= LIM_DIM && ohw <= LIM_DIM && ir_checked_mul(ckk, ohw, &cols) == 0 &&
        cols <= LIM_TENSOR_BYTES / 4)
        return 0;
    char why[160];
    if (!ir_type_problem(&col, why, sizeof why)) snprintf(why, sizeof why, "?");
    return ops_error(g, id, "conv2d: %s with filter %s needs an im2col buffer %s, too large: %s",
                     ops_ts(x).s, ops_ts(w).s, ops_ts(&col).s, why);
}

int ops_shape_conv2d(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0), *w = ops_in_type(g, id, 1);
    int64_t s = NODE(id)->attr.i[ATTR_CONV_STRIDE], p = NODE(id)->attr.i[ATTR_CONV_PAD];
    if (conv_check(g, id, x, w) < 0) return -1;
    if (s < 1 || p < 0 || s > LIM_DIM || p > LIM_DIM)
        return ops_error(g, id,
                         "conv2d: need stride in [1, %lld] and padding in [0, %lld], got %lld "
                         "and %lld",
                         LIM_DIM, LIM_DIM, (long long)s, (long long)p);
    int64_t h = x->dim[2] + 2 * p, wd = x->dim[3] + 2 * p; /* at most 3 * LIM_DIM */
    if (h < w->dim[2] || wd < w->dim[3])
        return ops_error(g, id, "conv2d: filter %s is larger than the padded input %lldx%lld",
                         ops_ts(w).s, (long long)h, (long long)wd);
    int64_t dims[4] = {x->dim[0], w->dim[0], (h - w->dim[2]) / s + 1, (wd - w->dim[3]) / s + 1};
    ir_type y = make_type(DT_F32, 4, dims);
    if (ir_type_problem(&y, NULL, 0)) return set_type(g, id, y); /* ir_add reports it */
    if (conv_gemm_check(g, id, x, w, dims) < 0) return -1;
    return set_type(g, id, y);
}

int ops_shape_conv2d_bias(ir_graph *g, int id)
{
    if (ops_shape_conv2d(g, id) < 0) return -1;
    const ir_type *bias = ops_in_type(g, id, 2), *y = &NODE(id)->type;
    if (bias->dtype != DT_F32 || bias->rank != 4 || ir_numel(bias) != y->dim[1] ||
        bias->dim[1] != y->dim[1])
        return ops_error(g, id, "conv2d_bias: bias must be f32[1, %lld, 1, 1], got %s",
                         (long long)y->dim[1], ops_ts(bias).s);
    return 0;
}

int ops_shape_pool(ir_graph *g, int id)
{
    ir_attrs *a = &NODE(id)->attr;
    const ir_type *x = ops_in_type(g, id, 0);
    if (need_nchw(g, id, x) < 0) return -1;
    if (a->i[ATTR_POOL_STRIDE] == 0) a->i[ATTR_POOL_STRIDE] = a->i[ATTR_POOL_SIZE];
    int64_t k = a->i[ATTR_POOL_SIZE], s = a->i[ATTR_POOL_STRIDE];
    if (k < 1 || s < 1)
        return ops_error(g, id, "%s: need size >= 1 and stride >= 1, got %lld and %lld", OPNAME(id),
                         (long long)k, (long long)s);
    int64_t p = a->i[ATTR_POOL_PAD], dims[4] = {x->dim[0], x->dim[1], 0, 0};
    if (k > LIM_DIM || s > LIM_DIM)
        return ops_error(g, id, "%s: need size and stride in [1, %lld], got %lld and %lld",
                         OPNAME(id), LIM_DIM, (long long)k, (long long)s);
    if (p == OP_PAD_SAME) { /* every window holds a cell of the input */
        dims[2] = (x->dim[2] + s - 1) / s, dims[3] = (x->dim[3] + s - 1) / s;
        return set_type(g, id, make_type(DT_F32, 4, dims));
    }
    if (p < 0 || 2 * p > k) /* a window of padding only would have no value */
        return ops_error(g, id,
                         "%s: padding %lld must be \"same\", \"valid\" or in [0, %lld] (at most "
                         "half the window %lld)",
                         OPNAME(id), (long long)p, (long long)(k / 2), (long long)k);
    if (x->dim[2] + 2 * p < k || x->dim[3] + 2 * p < k)
        return ops_error(g, id, "%s: window %lld is larger than the %sinput %s%s", OPNAME(id),
                         (long long)k, p ? "padded " : "", ops_ts(x).s,
                         p ? "" : " (padding=\"same\" pads it)");
    dims[2] = (x->dim[2] + 2 * p - k) / s + 1, dims[3] = (x->dim[3] + 2 * p - k) / s + 1;
    return set_type(g, id, make_type(DT_F32, 4, dims));
}

/* f32 of its input's shape; its key is its id, as dropout's. */
int ops_shape_random(ir_graph *g, int id)
{
    ir_type o = *ops_in_type(g, id, 0);
    o.dtype = DT_F32;
    NODE(id)->attr.i[ATTR_RANDOM_KEY] = id;
    return set_type(g, id, o);
}

/* i32 of its list's shape, drawn from a table f32[K] (weights) or from
 * rows f32[R,K] (logits: the list is [R, draws]); its key is its id. */
int ops_shape_categorical(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    int logits = NODE(id)->attr.i[ATTR_RANDOM_KIND] == OP_DRAW_LOGITS;
    if (need_f32(g, id, x, "its input") < 0 || check_list(g, id) < 0) return -1;
    ir_type o = list_type(g, id, DT_I32);
    if (x->rank != 1 + logits || x->dim[x->rank - 1] < 1 || x->dim[x->rank - 1] > INT32_MAX)
        return ops_error(g, id, "categorical: its input must be f32[%s] with K >= 1, got %s",
                         logits ? "R,K" : "K", ops_ts(x).s);
    if (logits && (o.rank != 2 || o.dim[0] != x->dim[0]))
        return ops_error(g, id, "categorical: %s rows cannot draw %s", ops_ts(x).s, ops_ts(&o).s);
    NODE(id)->attr.i[ATTR_RANDOM_KEY] = id;
    return set_type(g, id, o);
}

int ops_shape_dropout(ir_graph *g, int id)
{
    double r = NODE(id)->attr.f[ATTR_DROPOUT_RATE];
    if (!(r >= 0 && r < 1)) return ops_error(g, id, "dropout: rate must be in [0, 1), got %g", r);
    NODE(id)->attr.i[ATTR_DROPOUT_KEY] = id; /* the mask key; dropout_grad copies it */
    return ops_shape_unary_f32(g, id);
}

/* ---- layer normalisation ---- */

/* A gradient dy must have the type of the x it is the gradient of. */
static int need_grad_like(ir_graph *g, int id, const ir_type *dy, const ir_type *x)
{
    if (ir_type_eq(dy, x)) return 0;
    return ops_error(g, id, "%s: gradient %s does not match %s", OPNAME(id), ops_ts(dy).s,
                     ops_ts(x).s);
}

/* gain or bias (input k) must be f32[C], C the last axis of x. */
static int need_row_param(ir_graph *g, int id, int k, const ir_type *x, const char *what)
{
    const ir_type *p = ops_in_type(g, id, k);
    int64_t c = x->dim[x->rank - 1];
    if (p->dtype == DT_F32 && p->rank == 1 && p->dim[0] == c) return 0;
    return ops_error(g, id, "%s: %s must be f32[%lld] (the last axis of %s), got %s", OPNAME(id),
                     what, (long long)c, ops_ts(x).s, ops_ts(p).s);
}

/* Only the last axis: the kernels normalise contiguous rows. */
static int need_last_axis(ir_graph *g, int id, const ir_type *x)
{
    ir_node *n = NODE(id);
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (x->rank < 1)
        return ops_error(g, id, "%s: input must have rank >= 1, got %s", OPNAME(id), ops_ts(x).s);
    if (norm_axis(g, id, &n->attr.i[ATTR_AXIS], x) < 0) return -1;
    if (n->attr.i[ATTR_AXIS] != x->rank - 1)
        return ops_error(g, id,
                         "%s: only the last axis can be normalised (axis=-1), got axis %lld of %s",
                         OPNAME(id), (long long)n->attr.i[ATTR_AXIS], ops_ts(x).s);
    if (!(n->attr.f[ATTR_NORM_EPS] > 0))
        return ops_error(g, id, "%s: eps must be > 0, got %g", OPNAME(id),
                         n->attr.f[ATTR_NORM_EPS]);
    return 0;
}

/* in: x, gain, bias (rmsnorm: x, gain) */
int ops_shape_layernorm(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    if (need_last_axis(g, id, x) < 0 || need_row_param(g, id, 1, x, "gain") < 0 ||
        (NODE(id)->op == OP_LAYERNORM && need_row_param(g, id, 2, x, "bias") < 0))
        return -1;
    return set_type(g, id, *x);
}

/* layernorm_grad and rmsnorm_grad (in: dy, x, gain; out like x) and
 * layernorm_grad_params (in: dy, x; out [2C], dgain then dbias). */
int ops_shape_layernorm_grad(ir_graph *g, int id)
{
    const ir_type *dy = ops_in_type(g, id, 0), *x = ops_in_type(g, id, 1);
    if (need_last_axis(g, id, x) < 0 || need_grad_like(g, id, dy, x) < 0) return -1;
    if (NODE(id)->op != OP_LAYERNORM_GRAD_PARAMS)
        return need_row_param(g, id, 2, x, "gain") < 0 ? -1 : set_type(g, id, *x);
    int64_t two_c = 2 * x->dim[x->rank - 1];
    return set_type(g, id, make_type(DT_F32, 1, &two_c));
}

/* lrn (in: x) and lrn_grad (in: dy, x): [N, C, ...], channels on axis 1;
 * bias > 0 and alpha >= 0 keep every s = bias + alpha * sum x^2 > 0. */
int ops_shape_lrn(ir_graph *g, int id)
{
    int grad = NODE(id)->op == OP_LRN_GRAD;
    const ir_type *x = ops_in_type(g, id, grad);
    const ir_attrs *a = &NODE(id)->attr;
    double bias = a->f[ATTR_LRN_BIAS], alpha = a->f[ATTR_LRN_ALPHA], beta = a->f[ATTR_LRN_BETA];
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (x->rank < 2)
        return ops_error(g, id, "%s: input must be [N, C, ...] (channels on axis 1), got %s",
                         OPNAME(id), ops_ts(x).s);
    if (grad && need_grad_like(g, id, ops_in_type(g, id, 0), x) < 0) return -1;
    if (a->i[ATTR_LRN_RADIUS] < 0)
        return ops_error(g, id, "%s: depth_radius must be >= 0, got %lld", OPNAME(id),
                         (long long)a->i[ATTR_LRN_RADIUS]);
    if (!(bias > 0) || !isfinite(bias))
        return ops_error(g, id, "%s: bias must be > 0, got %g", OPNAME(id), bias);
    if (!(alpha >= 0) || !isfinite(alpha))
        return ops_error(g, id, "%s: alpha must be >= 0, got %g", OPNAME(id), alpha);
    if (!isfinite(beta))
        return ops_error(g, id, "%s: beta must be finite, got %g", OPNAME(id), beta);
    return set_type(g, id, *x);
}

/* rope and rope_grad (in: x): [..., T, D] with D even. */
int ops_shape_rope(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    double base = NODE(id)->attr.f[ATTR_ROPE_BASE];
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (x->rank < 2 || x->dim[x->rank - 1] % 2)
        return ops_error(g, id,
                         "%s: input must be [..., T, D] with D even (it turns the pairs (i, i + "
                         "D/2)), got %s",
                         OPNAME(id), ops_ts(x).s);
    if (!(base > 0) || !isfinite(base))
        return ops_error(g, id, "%s: base must be > 0, got %g", OPNAME(id), base);
    return set_type(g, id, *x);
}

/* lstm_cell (in: z, s) and lstm_cell_grad (in: dy, z, s): z f32[B, 4H]
 * (the gates i, f, g, o), s f32[B, 2H] (h, then c); out [B, 2H] (h', c'),
 * the gradient's [B, 6H] (dz, then ds). */
int ops_shape_lstm_cell(ir_graph *g, int id)
{
    int grad = NODE(id)->op == OP_LSTM_CELL_GRAD;
    const ir_type *z = ops_in_type(g, id, grad), *s = ops_in_type(g, id, grad + 1);
    if (need_f32(g, id, z, "gates") < 0 || need_f32(g, id, s, "state") < 0) return -1;
    if (z->rank != 2 || z->dim[1] % 4 || z->dim[1] == 0)
        return ops_error(
            g, id, "%s: gates must be [B, 4H] (i, f, g, o: concat([x, h], axis=1) @ w + b), got %s",
            OPNAME(id), ops_ts(z).s);
    int64_t h = z->dim[1] / 4;
    if (s->rank != 2 || s->dim[0] != z->dim[0] || s->dim[1] != 2 * h)
        return ops_error(g, id,
                         "%s: state must be [B, 2H] = [%lld, %lld] (h, then c) for gates %s, "
                         "got %s",
                         OPNAME(id), (long long)z->dim[0], (long long)(2 * h), ops_ts(z).s,
                         ops_ts(s).s);
    if (grad && need_grad_like(g, id, ops_in_type(g, id, 0), s) < 0) return -1;
    int64_t dims[2] = {z->dim[0], (grad ? 6 : 2) * h};
    return set_type(g, id, make_type(DT_F32, 2, dims));
}

/* gru_cell (in: gx, gh, h) and gru_cell_grad (in: dy, gx, gh, h): gx and
 * gh f32[B, 3H] (the gates r, z, n of x and of h), h f32[B, H]; out
 * [B, H] (h'), the gradient's [B, 7H] (dgx, dgh, dh). */
int ops_shape_gru_cell(ir_graph *g, int id)
{
    int grad = NODE(id)->op == OP_GRU_CELL_GRAD;
    const ir_type *gx = ops_in_type(g, id, grad), *gh = ops_in_type(g, id, grad + 1);
    const ir_type *h = ops_in_type(g, id, grad + 2);
    if (need_f32(g, id, gx, "gates") < 0 || need_f32(g, id, gh, "gates") < 0 ||
        need_f32(g, id, h, "state") < 0)
        return -1;
    if (gx->rank != 2 || gx->dim[1] % 3 || gx->dim[1] == 0 || gh->rank != 2 ||
        gh->dim[0] != gx->dim[0] || gh->dim[1] != gx->dim[1])
        return ops_error(g, id,
                         "%s: gates must be two [B, 3H] (r, z, n: x @ w_ih + b_ih, then h @ w_hh "
                         "+ b_hh), got %s and %s",
                         OPNAME(id), ops_ts(gx).s, ops_ts(gh).s);
    int64_t hh = gx->dim[1] / 3;
    if (h->rank != 2 || h->dim[0] != gx->dim[0] || h->dim[1] != hh)
        return ops_error(g, id, "%s: state must be [B, H] = [%lld, %lld] for gates %s, got %s",
                         OPNAME(id), (long long)gx->dim[0], (long long)hh, ops_ts(gx).s,
                         ops_ts(h).s);
    if (grad && need_grad_like(g, id, ops_in_type(g, id, 0), h) < 0) return -1;
    int64_t dims[2] = {gx->dim[0], (grad ? 7 : 1) * hh};
    return set_type(g, id, make_type(DT_F32, 2, dims));
}

/* ---- batch normalisation: channels on axis 1 of [N,C] or [N,C,H,W] ---- */

/* x: f32 [N,C] or [N,C,H,W], axis 1 (-1 of [N,C], -3 of [N,C,H,W]); eps > 0
 * for all but batchnorm_stats. */
static int need_bn_input(ir_graph *g, int id, const ir_type *x)
{
    ir_node *n = NODE(id);
    if (need_f32(g, id, x, "input") < 0) return -1;
    if (x->rank != 2 && x->rank != 4)
        return ops_error(g, id, "%s: input must be [N,C] or [N,C,H,W], got %s", OPNAME(id),
                         ops_ts(x).s);
    if (norm_axis(g, id, &n->attr.i[ATTR_AXIS], x) < 0) return -1;
    if (n->attr.i[ATTR_AXIS] != 1)
        return ops_error(g, id, "%s: the channels must be axis 1, got axis %lld of %s", OPNAME(id),
                         (long long)n->attr.i[ATTR_AXIS], ops_ts(x).s);
    if (n->op != OP_BN_STATS && !(n->attr.f[ATTR_NORM_EPS] > 0))
        return ops_error(g, id, "%s: eps must be > 0, got %g", OPNAME(id),
                         n->attr.f[ATTR_NORM_EPS]);
    return 0;
}

/* Input k must be f32[C] (rows 0: gain, bias) or f32[2,C] (rows 2: stats,
 * params), C axis 1 of x. */
static int need_bn_param(ir_graph *g, int id, int k, const ir_type *x, int rows, const char *what)
{
    const ir_type *p = ops_in_type(g, id, k);
    int64_t dims[2] = {rows, x->dim[1]};
    ir_type want = rows ? make_type(DT_F32, 2, dims) : make_type(DT_F32, 1, dims + 1);
    if (ir_type_eq(p, &want)) return 0;
    return ops_error(g, id, "%s: %s must be %s (the channels of %s), got %s", OPNAME(id), what,
                     ops_ts(&want).s, ops_ts(x).s, ops_ts(p).s);
}

static int set_bn_pair(ir_graph *g, int id, const ir_type *x)
{
    int64_t dims[2] = {2, x->dim[1]};
    return set_type(g, id, make_type(DT_F32, 2, dims));
}

/* in: x; out [2,C] */
int ops_shape_bn_stats(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    return need_bn_input(g, id, x) < 0 ? -1 : set_bn_pair(g, id, x);
}

/* in: x, gain, bias, stats; out like x */
int ops_shape_batchnorm(ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    if (need_bn_input(g, id, x) < 0 || need_bn_param(g, id, 1, x, 0, "gain") < 0 ||
        need_bn_param(g, id, 2, x, 0, "bias") < 0 || need_bn_param(g, id, 3, x, 2, "stats") < 0)
        return -1;
    return set_type(g, id, *x);
}

/* A batchnorm grad takes n_in inputs, and with its relu flag one more, y
 * (the relu's input or output), last and like x. */
static int need_bn_grad_inputs(ir_graph *g, int id, int n_in)
{
    const ir_node *n = NODE(id);
    int relu = n->attr.i[ATTR_BN_RELU] != 0;
    if (n->n_in != n_in + relu)
        return ops_error(g, id, "%s: takes %d inputs%s, got %d", OPNAME(id), n_in + relu,
                         relu ? " with its relu" : "", n->n_in);
    const ir_type *x = ops_in_type(g, id, 1), *y = relu ? ops_in_type(g, id, n_in) : x;
    if (ir_type_eq(y, x)) return 0;
    return ops_error(g, id, "%s: the relu's y %s does not match x %s", OPNAME(id), ops_ts(y).s,
                     ops_ts(x).s);
}

/* batchnorm_grad_params (in: dy, x, stats[, y]; out [2,C]) and
 * batchnorm_grad (in: dy, x, gain, stats, params[, y]; out like x). */
int ops_shape_bn_grad(ir_graph *g, int id)
{
    if (need_bn_grad_inputs(g, id, NODE(id)->op == OP_BN_GRAD_PARAMS ? 3 : 5) < 0) return -1;
    const ir_type *dy = ops_in_type(g, id, 0), *x = ops_in_type(g, id, 1);
    if (need_bn_input(g, id, x) < 0 || need_grad_like(g, id, dy, x) < 0) return -1;
    if (NODE(id)->op == OP_BN_GRAD_PARAMS)
        return need_bn_param(g, id, 2, x, 2, "stats") < 0 ? -1 : set_bn_pair(g, id, x);
    if (need_bn_param(g, id, 2, x, 0, "gain") < 0 || need_bn_param(g, id, 3, x, 2, "stats") < 0 ||
        need_bn_param(g, id, 4, x, 2, "params") < 0)
        return -1;
    return set_type(g, id, *x);
}

/* ---- gradient helpers (built by autodiff; errors here are compiler bugs,
 * but are still reported rather than asserted) ---- */

int ops_shape_grad_pair(ir_graph *g, int id)
{
    const ir_type *dy = ops_in_type(g, id, 0), *y = ops_in_type(g, id, 1);
    if (!ir_type_eq(dy, y))
        return ops_error(g, id, "%s: gradient %s does not match %s", OPNAME(id), ops_ts(dy).s,
                         ops_ts(y).s);
    return set_type(g, id, *dy);
}

int ops_shape_xent_grad(ir_graph *g, int id)
{
    const ir_type *lg = ops_in_type(g, id, 0), *dy = ops_in_type(g, id, 2);
    if (lg->rank != 2 || dy->rank != 1 || dy->dim[0] != lg->dim[0])
        return ops_error(g, id, "softmax_xent_grad: gradient %s does not match logits %s",
                         ops_ts(dy).s, ops_ts(lg).s);
    return set_type(g, id, *lg);
}

int ops_shape_like_in0(ir_graph *g, int id)
{
    return set_type(g, id, *ops_in_type(g, id, 0));
}

int ops_shape_like_in1(ir_graph *g, int id)
{
    return set_type(g, id, *ops_in_type(g, id, 1));
}

int ops_shape_from_list(ir_graph *g, int id)
{
    if (check_list(g, id) < 0) return -1;
    return set_type(g, id, list_type(g, id, ops_in_type(g, id, 0)->dtype));
}

/* ---- updates ---- */

static int need_var(ir_graph *g, int id)
{
    const ir_node *v = &g->nodes[NODE(id)->in[0]];
    if (v->op != OP_VARIABLE)
        return ops_error(g, id, "%s: first input must be a variable, got %s", OPNAME(id),
                         ops_name(v->op));
    return 0;
}

/* Inputs k >= from (adam's step, lr, gscale) are f32 scalars. */
static int need_scalars(ir_graph *g, int id, int from)
{
    static const char *const what[] = {"step", "lr", "gscale"};
    int n_in = NODE(id)->n_in;
    for (int k = from; k < n_in; k++) {
        const ir_type *t = ops_in_type(g, id, k);
        if (t->rank != 0 || t->dtype != DT_F32)
            return ops_error(g, id, "%s: %s (input %d) must be f32[], got %s", OPNAME(id),
                             what[k - n_in + 3], k, ops_ts(t).s);
    }
    return 0;
}

/* rmsprop's inputs are counted by its attributes: `first` inputs (var,
 * grad or var, dy, ids), v, mom when m != 0, mg when centered, lr, gscale. */
static int rmsprop_arity(ir_graph *g, int id, int first)
{
    const ir_node *n = NODE(id);
    if (n->op != OP_APPLY_RMSPROP && n->op != OP_APPLY_RMSPROP_ROWS) return 0;
    int want = first + 3 + (n->attr.f[ATTR_RMS_M] != 0) + (n->attr.i[ATTR_RMS_CENTERED] != 0);
    if (n->n_in == want) return 0;
    return ops_error(g, id, "%s: takes %d inputs with m=%g, centered=%d, got %d", OPNAME(id), want,
                     n->attr.f[ATTR_RMS_M], (int)n->attr.i[ATTR_RMS_CENTERED], n->n_in);
}

int ops_shape_update(ir_graph *g, int id)
{
    if (rmsprop_arity(g, id, 2) < 0 || need_var(g, id) < 0) return -1;
    const ir_node *n = NODE(id);
    const ir_type *v = ops_in_type(g, id, 0);
    int n_same = n->op == OP_APPLY_ADAM ? 4 : n->n_in - 2; /* adam's step, lr, gscale: scalars */
    for (int k = 1; k < n_same; k++)
        if (!ir_type_eq(ops_in_type(g, id, k), v))
            return ops_error(g, id, "%s: input %d %s does not match variable %s", OPNAME(id), k,
                             ops_ts(ops_in_type(g, id, k)).s, ops_ts(v).s);
    if (need_scalars(g, id, n_same) < 0) return -1;
    return set_type(g, id, token_type());
}

/* var[V,D], dy[..., D] with one row per id, ids i32[...] */
int ops_shape_update_matmul(ir_graph *g, int id)
{
    ir_type t;
    if (need_var(g, id) < 0 || matmul_type(g, id, 1, 0, &t) < 0) return -1;
    const ir_type *v = ops_in_type(g, id, 0);
    if (!ir_type_eq(&t, v))
        return ops_error(g, id, "apply_sgd_matmul: product %s does not match variable %s",
                         ops_ts(&t).s, ops_ts(v).s);
    return set_type(g, id, token_type());
}

/* dy[..., D] holds one row of D per id of ids i32[...]; *rows = their count. */
static int rows_fit(const ir_type *dy, const ir_type *ids, int64_t d, int64_t *rows)
{
    return ids->dtype == DT_I32 && dy->dtype == DT_F32 && dy->rank >= 1 &&
           dy->dim[dy->rank - 1] == d && ir_checked_mul(ir_numel(ids), d, rows) == 0 &&
           ir_numel(dy) == *rows;
}

/* in: var[V,D], dy, ids, then the slots (like var), then adam's step, lr
 * and gscale (scalars). */
int ops_shape_update_rows(ir_graph *g, int id)
{
    if (rmsprop_arity(g, id, 3) < 0 || need_var(g, id) < 0) return -1;
    const ir_type *v = ops_in_type(g, id, 0), *dy = ops_in_type(g, id, 1),
                  *ids = ops_in_type(g, id, 2);
    int64_t rows;
    if (v->rank != 2 || !rows_fit(dy, ids, v->dim[1], &rows))
        return ops_error(g, id, "%s: rows %s and ids %s do not fit variable %s", OPNAME(id),
                         ops_ts(dy).s, ops_ts(ids).s, ops_ts(v).s);
    int n_same = NODE(id)->op == OP_APPLY_ADAM_ROWS ? 5 : NODE(id)->n_in - 2;
    for (int k = 3; k < n_same; k++)
        if (!ir_type_eq(ops_in_type(g, id, k), v))
            return ops_error(g, id, "%s: input %d %s does not match variable %s", OPNAME(id), k,
                             ops_ts(ops_in_type(g, id, k)).s, ops_ts(v).s);
    if (need_scalars(g, id, n_same) < 0) return -1;
    return set_type(g, id, token_type());
}

/* assign_add and assign: x matches the variable; a moving average
 * (assign's decay) is of floats. */
int ops_shape_assign(ir_graph *g, int id)
{
    if (need_var(g, id) < 0) return -1;
    const ir_type *v = ops_in_type(g, id, 0), *x = ops_in_type(g, id, 1);
    const char *op = OPNAME(id);
    if (!ir_type_eq(v, x))
        return ops_error(g, id, "%s: %s does not match variable %s", op, ops_ts(x).s, ops_ts(v).s);
    double d = NODE(id)->op == OP_ASSIGN ? NODE(id)->attr.f[ATTR_ASSIGN_DECAY] : 0;
    if (!(d >= 0 && d < 1)) return ops_error(g, id, "%s: decay=%g is outside [0, 1)", op, d);
    if (d > 0 && v->dtype != DT_F32)
        return ops_error(g, id, "%s: a moving average needs f32, not %s", op, ops_ts(v).s);
    return set_type(g, id, token_type());
}

/* One input: its type.  More: f32[total], every input flattened, back to back. */
int ops_shape_allreduce(ir_graph *g, int id)
{
    ir_type o = {.dtype = DT_F32, .rank = 1};
    if (NODE(id)->n_in == 1 && ops_in_type(g, id, 0)->dtype == DT_F32)
        return set_type(g, id, *ops_in_type(g, id, 0));
    for (int k = 0; k < NODE(id)->n_in; k++) {
        const ir_type *t = ops_in_type(g, id, k);
        if (t->dtype != DT_F32)
            return ops_error(g, id, "allreduce: input %d is %s, expected f32", k, ops_ts(t).s);
        o.dim[0] += ir_numel(t); /* ir_add checks the total */
    }
    return set_type(g, id, o);
}

int ops_shape_token(ir_graph *g, int id)
{
    return set_type(g, id, token_type());
}

/* ---- optimizer helpers ---- */

int ops_shape_lr_schedule(ir_graph *g, int id)
{
    const ir_type *t = ops_in_type(g, id, 0);
    if (t->rank != 0 || t->dtype != DT_F32)
        return ops_error(g, id, "lr_schedule: the step must be f32[], got %s", ops_ts(t).s);
    return set_type(g, id, make_type(DT_F32, 0, NULL));
}

int ops_shape_clip_scale(ir_graph *g, int id)
{
    for (int k = 0; k < NODE(id)->n_in; k++)
        if (need_f32(g, id, ops_in_type(g, id, k), "every gradient") < 0) return -1;
    if (NODE(id)->n_in == 0) return ops_error(g, id, "clip_scale: no gradients");
    return set_type(g, id, make_type(DT_F32, 0, NULL));
}

/* in: dy[..., D], ids i32[...] (one row each); out f32[n, D]. */
int ops_shape_rows_sum(ir_graph *g, int id)
{
    const ir_type *dy = ops_in_type(g, id, 0), *ids = ops_in_type(g, id, 1);
    int64_t rows, d = dy->rank ? dy->dim[dy->rank - 1] : 0;
    if (!rows_fit(dy, ids, d, &rows))
        return ops_error(g, id, "rows_sum: rows %s do not fit ids %s", ops_ts(dy).s, ops_ts(ids).s);
    int64_t dims[2] = {ir_numel(ids), d};
    return set_type(g, id, make_type(DT_F32, 2, dims));
}
