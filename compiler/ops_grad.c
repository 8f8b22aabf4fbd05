/* ops_grad.c - gradient rules: IR -> IR.  Each rule receives dy (the
 * gradient of node id's output) and writes the gradient of input k into
 * dx[k] (-1 = none).  New nodes come from ir_add_like(g, id, ...), so they
 * keep the forward node's span and device.  ir_add may move g->nodes, so
 * rules copy what they need out of a node before adding. */
#include "ops_impl.h"

#include <string.h>

#define IN(k) (g->nodes[id].in[k])

static ir_attrs no_attrs(void)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    return a;
}

static ir_attrs list_attrs(ir_attrs a, const ir_type *t)
{
    a.n_list = t->rank;
    for (int i = 0; i < t->rank; i++) a.list[i] = t->dim[i];
    return a;
}

/* add1/add2 pass a failed (-1) operand through, so rules can nest calls
 * without reporting a second, confusing error. */
static int add1(ir_graph *g, int id, op_kind op, int x, const ir_attrs *a)
{
    if (x < 0) return -1;
    return ir_add_like(g, id, op, &x, 1, a);
}

static int add2(ir_graph *g, int id, op_kind op, int x, int y)
{
    int in[2] = {x, y};
    ir_attrs a = no_attrs();
    if (x < 0 || y < 0) return -1;
    return ir_add_like(g, id, op, in, 2, &a);
}

static int scalar_const(ir_graph *g, int id, double v)
{
    ir_type t;
    memset(&t, 0, sizeof(t));
    return ir_add_const_like(g, id, v, &t);
}

static int same_shape(const ir_type *a, const ir_type *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}

/* Sums a broadcast gradient back to the shape of node x. */
static int reduce_to(ir_graph *g, int id, int grad, int x)
{
    if (grad < 0) return -1;
    ir_type t = g->nodes[x].type;
    if (same_shape(&g->nodes[grad].type, &t)) return grad;
    ir_attrs a = list_attrs(no_attrs(), &t);
    return add1(g, id, OP_SUM_TO, grad, &a);
}

static int reshape_to(ir_graph *g, int id, int v, const ir_type *t)
{
    if (same_shape(&g->nodes[v].type, t)) return v;
    ir_attrs a = list_attrs(no_attrs(), t);
    return add1(g, id, OP_RESHAPE, v, &a);
}

/* Both gradients of a binary op; fails if either failed. */
static int finish2(ir_graph *g, int id, int *dx, int ga, int gb)
{
    int a = IN(0), b = IN(1);
    dx[0] = reduce_to(g, id, ga, a);
    dx[1] = reduce_to(g, id, gb, b);
    return dx[0] < 0 || dx[1] < 0 ? -1 : 0;
}

static int finish1(int *dx, int v)
{
    dx[0] = v;
    return v < 0 ? -1 : 0;
}

int ops_grad_none(ir_graph *g, int id, int dy, int *dx)
{
    (void)dy;
    for (int k = 0; k < g->nodes[id].n_in; k++) dx[k] = -1;
    return 0;
}

int ops_grad_identity(ir_graph *g, int id, int dy, int *dx)
{
    (void)g, (void)id;
    return finish1(dx, dy);
}

/* Only a float-to-float cast passes a gradient; anything through an integer
 * is a step function. */
int ops_grad_cast(ir_graph *g, int id, int dy, int *dx)
{
    if (g->nodes[id].type.dtype == DT_F32 && ops_in_type(g, id, 0)->dtype == DT_F32)
        return finish1(dx, dy);
    dx[0] = -1;
    return 0;
}

/* ---- linear algebra ---- */

static int mm(ir_graph *g, int id, int x, int y, int tx, int ty)
{
    int in[2] = {x, y};
    ir_attrs a = no_attrs();
    a.i[ATTR_TRANS_A] = tx;
    a.i[ATTR_TRANS_B] = ty;
    return ir_add_like(g, id, OP_MATMUL, in, 2, &a);
}

/* C = op(A) op(B).  With dC = dy:  A B -> dA = dy B^T, dB = A^T dy;
 * A^T B -> dA = B dy^T, dB = A dy;  A B^T -> dA = dy B, dB = dy^T A;
 * A^T B^T -> dA = B^T dy^T, dB = dy^T A^T.  The same products over batch
 * axes give each batch's gradient. */
static int mm_grad_a(ir_graph *g, int id, int b, int dy, int ta, int tb)
{
    if (!ta) return mm(g, id, dy, b, 0, !tb);
    return tb ? mm(g, id, b, dy, 1, 1) : mm(g, id, b, dy, 0, 1);
}

static int mm_grad_b(ir_graph *g, int id, int a, int dy, int ta, int tb)
{
    if (!tb) return mm(g, id, a, dy, !ta, 0);
    return ta ? mm(g, id, dy, a, 1, 1) : mm(g, id, dy, a, 1, 0);
}

/* [..., R, C] as [prod(...) * R, C]. */
static int flatten_rows(ir_graph *g, int id, int v)
{
    ir_type t = g->nodes[v].type;
    int64_t rows = 1;
    for (int d = 0; d + 1 < t.rank; d++) rows *= t.dim[d];
    t.dim[1] = t.dim[t.rank - 1];
    t.dim[0] = rows;
    t.rank = 2;
    return reshape_to(g, id, v, &t);
}

/* A batched a times a matrix b ([..., M, K] @ [K, N]): b's gradient sums
 * over every batch, which is one GEMM over the rows of a and dy seen as
 * [prod(...) * M, K] and [prod(...) * M, N], not a batch of products
 * summed afterwards.  Otherwise gradients broadcast over batch axes are
 * summed back to the operand's shape. */
int ops_grad_matmul(ir_graph *g, int id, int dy, int *dx)
{
    int a = IN(0), b = IN(1);
    int ta = g->nodes[id].attr.i[ATTR_TRANS_A] != 0, tb = g->nodes[id].attr.i[ATTR_TRANS_B] != 0;
    int ga = mm_grad_a(g, id, b, dy, ta, tb), gb;
    if (g->nodes[b].type.rank == 2 && g->nodes[a].type.rank > 2 && !ta) {
        int af = flatten_rows(g, id, a), dyf = flatten_rows(g, id, dy);
        gb = af < 0 || dyf < 0 ? -1 : mm_grad_b(g, id, af, dyf, 0, tb);
    } else {
        gb = mm_grad_b(g, id, a, dy, ta, tb);
    }
    if (gb >= 0 && g->nodes[id].attr.i[ATTR_MM_STEP]) g->nodes[gb].attr.i[ATTR_MM_STEP] = 1;
    return finish2(g, id, dx, ga, gb);
}

/* ---- elementwise binaries ---- */

int ops_grad_add(ir_graph *g, int id, int dy, int *dx)
{
    return finish2(g, id, dx, dy, dy);
}

int ops_grad_sub(ir_graph *g, int id, int dy, int *dx)
{
    return finish2(g, id, dx, dy, add1(g, id, OP_NEG, dy, NULL));
}

int ops_grad_mul(ir_graph *g, int id, int dy, int *dx)
{
    int a = IN(0), b = IN(1);
    int ga = add2(g, id, OP_MUL, dy, b);
    return finish2(g, id, dx, ga, add2(g, id, OP_MUL, dy, a));
}

/* y = a / b:  da = dy / b,  db = -dy a / b^2 = -(dy / b) * y. */
int ops_grad_div(ir_graph *g, int id, int dy, int *dx)
{
    int b = IN(1);
    int ga = add2(g, id, OP_DIV, dy, b);
    if (ga < 0) return -1;
    int gb = add1(g, id, OP_NEG, add2(g, id, OP_MUL, ga, id), NULL);
    return finish2(g, id, dx, ga, gb);
}

/* maximum(a, b): dy goes to a where a >= b (ties to a), the rest to b;
 * minimum alike with a <= b. */
int ops_grad_minmax(ir_graph *g, int id, int dy, int *dx)
{
    int a = IN(0), b = IN(1);
    op_kind pick = g->nodes[id].op == OP_MAXIMUM ? OP_GE : OP_LE;
    int ga = add2(g, id, OP_MUL, dy, add2(g, id, pick, a, b));
    return finish2(g, id, dx, ga, add2(g, id, OP_SUB, dy, ga));
}

/* y = a^b:  da = dy b a^(b - 1),  db = dy y log(a) (dropped with the rest
 * of the backward pass when b is a constant). */
int ops_grad_pow(ir_graph *g, int id, int dy, int *dx)
{
    int a = IN(0), b = IN(1);
    int bm1 = add2(g, id, OP_SUB, b, scalar_const(g, id, 1.0));
    int ga = add2(g, id, OP_MUL, add2(g, id, OP_MUL, dy, b), add2(g, id, OP_POW, a, bm1));
    int gb = add2(g, id, OP_MUL, add2(g, id, OP_MUL, dy, id), add1(g, id, OP_LOG, a, NULL));
    return finish2(g, id, dx, ga, gb);
}

/* where(c, a, b): dy goes to a where c is nonzero, the rest to b. */
int ops_grad_where(ir_graph *g, int id, int dy, int *dx)
{
    int pick = add2(g, id, OP_NE, IN(0), scalar_const(g, id, 0.0));
    int ga = add2(g, id, OP_MUL, dy, pick);
    dx[0] = -1;
    dx[1] = ga;
    dx[2] = add2(g, id, OP_SUB, dy, ga);
    return ga < 0 || dx[2] < 0 ? -1 : 0;
}

/* ---- elementwise unaries ---- */

int ops_grad_neg(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add1(g, id, OP_NEG, dy, NULL));
}

int ops_grad_exp(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_MUL, dy, id));
}

int ops_grad_log(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_DIV, dy, IN(0)));
}

/* d sqrt(x) = dy / (2 y) = (dy / y) * 0.5 */
int ops_grad_sqrt(ir_graph *g, int id, int dy, int *dx)
{
    int q = add2(g, id, OP_DIV, dy, id);
    int half = scalar_const(g, id, 0.5);
    if (q < 0 || half < 0) return -1;
    return finish1(dx, add2(g, id, OP_MUL, q, half));
}

int ops_grad_relu(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_RELU_GRAD, dy, IN(0)));
}

int ops_grad_sigmoid(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_SIGMOID_GRAD, dy, id));
}

int ops_grad_tanh(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_TANH_GRAD, dy, id));
}

/* Activations whose gradient is one helper of (dy, x), or (dy, y). */
int ops_grad_act(ir_graph *g, int id, int dy, int *dx)
{
    static const struct {
        op_kind op, grad;
        int of_y;
    } rules[] = {{OP_ABS, OP_ABS_GRAD, 0},
                 {OP_SOFTPLUS, OP_SOFTPLUS_GRAD, 0},
                 {OP_LOG_SIGMOID, OP_LOG_SIGMOID_GRAD, 0},
                 {OP_SILU, OP_SILU_GRAD, 0},
                 {OP_ELU, OP_ELU_GRAD, 1}};
    size_t k = 0;
    while (rules[k].op != g->nodes[id].op) k++; /* the registry names only these */
    return finish1(dx, add2(g, id, rules[k].grad, dy, rules[k].of_y ? id : IN(0)));
}

int ops_grad_sin(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_MUL, dy, add1(g, id, OP_COS, IN(0), NULL)));
}

int ops_grad_cos(ir_graph *g, int id, int dy, int *dx)
{
    int s = add2(g, id, OP_MUL, dy, add1(g, id, OP_SIN, IN(0), NULL));
    return finish1(dx, add1(g, id, OP_NEG, s, NULL));
}

/* The masked scores' outputs are 0, so their gradients are too; the mask
 * only lets the kernel skip them. */
int ops_grad_softmax(ir_graph *g, int id, int dy, int *dx)
{
    int in[2] = {dy, id};
    ir_attrs a = no_attrs();
    a.i[ATTR_MASK] = g->nodes[id].attr.i[ATTR_MASK];
    return finish1(dx, ir_add_like(g, id, OP_SOFTMAX_GRAD, in, 2, &a));
}

int ops_grad_log_softmax(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_LOG_SOFTMAX_GRAD, dy, id));
}

int ops_grad_gelu(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, add2(g, id, OP_GELU_GRAD, dy, IN(0)));
}

int ops_grad_dropout(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr; /* i[2], the mask key, makes the kernel
                                       regenerate the forward node's mask */
    return finish1(dx, add1(g, id, OP_DROPOUT_GRAD, dy, &a));
}

/* ---- losses ---- */

int ops_grad_xent(ir_graph *g, int id, int dy, int *dx)
{
    int in[3] = {IN(0), IN(1), dy};
    ir_attrs a = no_attrs();
    dx[1] = -1;
    dx[0] = ir_add_like(g, id, OP_XENT_GRAD, in, 3, &a);
    return dx[0] < 0 ? -1 : 0;
}

/* mse = mean((p - t)^2):  dp = 2 (p - t) / numel * dy,  dt = -dp. */
int ops_grad_mse(ir_graph *g, int id, int dy, int *dx)
{
    int p = IN(0), t = IN(1);
    double scale = 2.0 / (double)ir_numel(&g->nodes[p].type);
    int d = add2(g, id, OP_SUB, p, t);
    int c = scalar_const(g, id, scale);
    if (d < 0 || c < 0) return -1;
    dx[0] = add2(g, id, OP_MUL, add2(g, id, OP_MUL, d, c), dy);
    if (dx[0] < 0) return -1;
    dx[1] = add1(g, id, OP_NEG, dx[0], NULL);
    return dx[1] < 0 ? -1 : 0;
}

/* ---- reductions ---- */

/* x's type with the reduced axis (or every axis) kept as 1. */
static ir_type keep_type(const ir_type *x, int64_t axis)
{
    ir_type t = *x;
    for (int i = 0; i < t.rank; i++)
        if (axis == OP_AXIS_ALL || i == axis) t.dim[i] = 1;
    return t;
}

int ops_grad_sum_mean(ir_graph *g, int id, int dy, int *dx)
{
    ir_node n = g->nodes[id];
    ir_type xt = g->nodes[n.in[0]].type;
    int64_t axis = n.attr.i[ATTR_AXIS];
    ir_type kt = keep_type(&xt, axis);
    int d = reshape_to(g, id, dy, &kt);
    ir_attrs a = list_attrs(no_attrs(), &xt);
    d = d < 0 ? -1 : add1(g, id, OP_BROADCAST, d, &a);
    if (d < 0 || n.op != OP_MEAN) return finish1(dx, d);
    int64_t count = axis == OP_AXIS_ALL ? ir_numel(&xt) : xt.dim[axis];
    int c = scalar_const(g, id, 1.0 / (double)count);
    return finish1(dx, c < 0 ? -1 : add2(g, id, OP_MUL, d, c));
}

int ops_grad_max(ir_graph *g, int id, int dy, int *dx)
{
    ir_node n = g->nodes[id];
    ir_type kt = keep_type(&g->nodes[n.in[0]].type, n.attr.i[ATTR_AXIS]);
    int dk = reshape_to(g, id, dy, &kt);
    int yk = reshape_to(g, id, id, &kt);
    if (dk < 0 || yk < 0) return -1;
    int in[3] = {dk, n.in[0], yk};
    ir_attrs a = n.attr;
    a.i[ATTR_KEEPDIMS] = 1;
    return finish1(dx, ir_add_like(g, id, OP_MAX_GRAD, in, 3, &a));
}

/* ---- shapes ---- */

int ops_grad_reshape(ir_graph *g, int id, int dy, int *dx)
{
    ir_type xt = *ops_in_type(g, id, 0);
    ir_attrs a = list_attrs(no_attrs(), &xt);
    return finish1(dx, add1(g, id, OP_RESHAPE, dy, &a));
}

int ops_grad_transpose(ir_graph *g, int id, int dy, int *dx)
{
    const ir_attrs *f = &g->nodes[id].attr;
    ir_attrs a = no_attrs();
    a.n_list = f->n_list;
    for (int i = 0; i < f->n_list; i++) a.list[f->list[i]] = i;
    return finish1(dx, add1(g, id, OP_TRANSPOSE, dy, &a));
}

int ops_grad_concat(ir_graph *g, int id, int dy, int *dx)
{
    int n_in = g->nodes[id].n_in;
    int64_t axis = g->nodes[id].attr.i[ATTR_AXIS], off = 0;
    for (int k = 0; k < n_in; k++) {
        ir_attrs a = no_attrs();
        int64_t len = ops_in_type(g, id, k)->dim[axis];
        a.i[ATTR_AXIS] = axis;
        a.i[ATTR_SLICE_BEGIN] = off;
        a.i[ATTR_SLICE_END] = off + len;
        off += len;
        dx[k] = add1(g, id, OP_SLICE, dy, &a);
        if (dx[k] < 0) return -1;
    }
    return 0;
}

int ops_grad_slice(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = list_attrs(g->nodes[id].attr, ops_in_type(g, id, 0));
    return finish1(dx, add1(g, id, OP_SLICE_GRAD, dy, &a));
}

int ops_grad_gather(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = list_attrs(no_attrs(), ops_in_type(g, id, 0));
    int in[2] = {dy, IN(1)};
    dx[1] = -1;
    dx[0] = ir_add_like(g, id, OP_GATHER_GRAD, in, 2, &a);
    return dx[0] < 0 ? -1 : 0;
}

int ops_grad_broadcast(ir_graph *g, int id, int dy, int *dx)
{
    return finish1(dx, reduce_to(g, id, dy, IN(0)));
}

int ops_grad_sum_to(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = list_attrs(no_attrs(), ops_in_type(g, id, 0));
    return finish1(dx, add1(g, id, OP_BROADCAST, dy, &a));
}

/* ---- convolution and pooling ---- */

int ops_grad_conv2d(ir_graph *g, int id, int dy, int *dx)
{
    int x = IN(0), w = IN(1);
    ir_attrs ax = list_attrs(g->nodes[id].attr, &g->nodes[x].type);
    ir_attrs aw = list_attrs(g->nodes[id].attr, &g->nodes[w].type);
    int in_x[2] = {dy, w}, in_w[2] = {dy, x};
    dx[0] = ir_add_like(g, id, OP_CONV2D_GRAD_X, in_x, 2, &ax);
    dx[1] = ir_add_like(g, id, OP_CONV2D_GRAD_W, in_w, 2, &aw);
    return dx[0] < 0 || dx[1] < 0 ? -1 : 0;
}

int ops_grad_maxpool(ir_graph *g, int id, int dy, int *dx)
{
    int in[2] = {dy, IN(0)};
    ir_attrs a = g->nodes[id].attr;
    return finish1(dx, ir_add_like(g, id, OP_MAXPOOL_GRAD, in, 2, &a));
}

int ops_grad_avgpool(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = list_attrs(g->nodes[id].attr, ops_in_type(g, id, 0));
    return finish1(dx, add1(g, id, OP_AVGPOOL_GRAD, dy, &a));
}

/* ---- layer normalisation ---- */

/* dgain and dbias: the two halves [0, c) and [c, 2c) of p, a [2c] node. */
static int split_params(ir_graph *g, int id, int p, int64_t c, int *dx)
{
    for (int k = 0; k < 2 && p >= 0; k++) {
        ir_attrs s = no_attrs();
        s.i[ATTR_SLICE_BEGIN] = k * c;
        s.i[ATTR_SLICE_END] = (k + 1) * c;
        dx[k] = add1(g, id, OP_SLICE, p, &s);
    }
    return p < 0 || dx[0] < 0 || dx[1] < 0 ? -1 : 0;
}

/* y = (x - mean) * rstd * gain + bias along the last axis.  The backward
 * needs each row's mean and rstd = 1 / sqrt(var + eps); an IR node has one
 * output, so rather than a second output (or a helper op whose [rows, 2]
 * result would live from the forward pass to the backward one), both
 * gradient kernels recompute them from x: one extra pass over a row that
 * is in cache anyway.  dgain = sum over rows of dy * xhat and dbias = sum of
 * dy come from one kernel (one pass over dy and x) as [2C], then two
 * slices of C floats each. */
int ops_grad_layernorm(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr;
    int x = IN(0), in[3] = {dy, x, IN(1)};
    int64_t c = g->nodes[x].type.dim[g->nodes[x].type.rank - 1];
    dx[0] = ir_add_like(g, id, OP_LAYERNORM_GRAD, in, 3, &a);
    int p = ir_add_like(g, id, OP_LAYERNORM_GRAD_PARAMS, in, 2, &a);
    return dx[0] < 0 || split_params(g, id, p, c, dx + 1) < 0 ? -1 : 0;
}

/* y = x * rstd * gain, rstd = 1 / sqrt(mean(x^2) + eps) per row: dx from
 * one kernel (rmsnorm_grad), dgain = the sum over rows of dy * x * rstd,
 * that is of dy * rmsnorm(x, ones). */
int ops_grad_rmsnorm(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr;
    int x = IN(0), gain = IN(1), in[3] = {dy, x, gain};
    ir_type gt = g->nodes[gain].type;
    dx[0] = ir_add_like(g, id, OP_RMSNORM_GRAD, in, 3, &a);
    int ones = ir_add_const_like(g, id, 1.0, &gt);
    int unit[2] = {x, ones};
    int xhat = ones < 0 ? -1 : ir_add_like(g, id, OP_RMSNORM, unit, 2, &a);
    dx[1] = reduce_to(g, id, add2(g, id, OP_MUL, dy, xhat), gain);
    return dx[0] < 0 || dx[1] < 0 ? -1 : 0;
}

/* lrn: dx from one fused kernel (lrn_grad) that makes each s again from x. */
int ops_grad_lrn(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr;
    int in[2] = {dy, IN(0)};
    return finish1(dx, ir_add_like(g, id, OP_LRN_GRAD, in, 2, &a));
}

/* rope turns each pair by an angle of its position: its gradient turns dy
 * back (rope_grad, the transposed rotation). */
int ops_grad_rope(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr;
    return finish1(dx, add1(g, id, OP_ROPE_GRAD, dy, &a));
}

/* lstm_cell: dz and ds from one fused kernel (lstm_cell_grad) that makes
 * the gates and c' again from z and s, as [B, 6H] = [dz, ds]; ds's h half
 * is 0 (h reaches the cell only through z), its c half dc' sig(f) plus
 * what flows through h'. */
int ops_grad_lstm_cell(ir_graph *g, int id, int dy, int *dx)
{
    int in[3] = {dy, IN(0), IN(1)};
    int64_t h4 = ops_in_type(g, id, 0)->dim[1];
    ir_attrs a = no_attrs();
    int d = ir_add_like(g, id, OP_LSTM_CELL_GRAD, in, 3, &a);
    for (int k = 0; k < 2; k++) {
        ir_attrs s = no_attrs();
        s.i[ATTR_AXIS] = 1;
        s.i[ATTR_SLICE_BEGIN] = k ? h4 : 0;
        s.i[ATTR_SLICE_END] = k ? h4 + h4 / 2 : h4;
        dx[k] = add1(g, id, OP_SLICE, d, &s);
    }
    return dx[0] < 0 || dx[1] < 0 ? -1 : 0;
}

/* gru_cell: dgx, dgh and dh from one fused kernel (gru_cell_grad) that
 * makes the gates again, as [B, 7H] = [dgx, dgh, dh], then three slices. */
int ops_grad_gru_cell(ir_graph *g, int id, int dy, int *dx)
{
    int in[4] = {dy, IN(0), IN(1), IN(2)};
    int64_t h = ops_in_type(g, id, 2)->dim[1], at[4] = {0, 3 * h, 6 * h, 7 * h};
    ir_attrs a = no_attrs();
    int d = ir_add_like(g, id, OP_GRU_CELL_GRAD, in, 4, &a);
    for (int k = 0; k < 3; k++) {
        ir_attrs s = no_attrs();
        s.i[ATTR_AXIS] = 1;
        s.i[ATTR_SLICE_BEGIN] = at[k];
        s.i[ATTR_SLICE_END] = at[k + 1];
        dx[k] = add1(g, id, OP_SLICE, d, &s);
    }
    return dx[0] < 0 || dx[1] < 0 || dx[2] < 0 ? -1 : 0;
}

/* ---- batch normalisation ---- */

/* y = (x - mean) * rstd * gain + bias per channel, mean and var the rows of
 * stats (in[3]).  dgain and dbias come from one pass (batchnorm_grad_params,
 * [2,C]), dx from another.  When stats is batchnorm_stats of this x (a
 * training step) its dependence on x is folded into dx (batch = 1) and no
 * gradient flows into stats; otherwise stats is fixed (running statistics,
 * not trained) and dx = gain * rstd * dy. */
int ops_grad_batchnorm(ir_graph *g, int id, int dy, int *dx)
{
    ir_attrs a = g->nodes[id].attr;
    int x = IN(0), st = IN(3), in[5] = {dy, x, st};
    int64_t c = g->nodes[x].type.dim[1];
    int p = ir_add_like(g, id, OP_BN_GRAD_PARAMS, in, 3, &a);
    if (p < 0) return -1;
    a.i[ATTR_BN_BATCH] = g->nodes[st].op == OP_BN_STATS && g->nodes[st].in[0] == x;
    in[2] = IN(1), in[3] = st, in[4] = p;
    dx[0] = ir_add_like(g, id, OP_BN_GRAD, in, 5, &a);
    dx[3] = -1;
    ir_attrs flat = list_attrs(no_attrs(), &(ir_type){DT_F32, 1, {2 * c}});
    int f = add1(g, id, OP_RESHAPE, p, &flat);
    return dx[0] < 0 || f < 0 || split_params(g, id, f, c, dx + 1) < 0 ? -1 : 0;
}
