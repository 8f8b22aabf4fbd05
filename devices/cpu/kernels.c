/* kernels.c - the CPU kernel table: one thin wrapper per op that unpacks
 * kern_args and calls the math in cpu_*.c.  Shape rules (compiler/ops.c)
 * have already checked every shape, so nothing is validated here.  No
 * wrapper asks which op it runs for: one serving several ops (k_binary)
 * passes the op to a family whose rows come from the same list as its own
 * (cpu_impl.h). */
#include <string.h>

#include "../dropout.h"
#include "cpu_impl.h"
#include "devices/gemm.h"

#define IN(k)     (a->in[k])
#define INF(k)    ((const float *)a->in[k])
#define INI(k)    ((const int32_t *)a->in[k])
#define OUTF      ((float *)a->out)
#define ATTR_I(k) (a->node->attr.i[k])
#define ATTR_F(k) ((float)a->node->attr.f[k])

static int64_t in_numel(const kern_args *a, int k)
{
    return cpu_numel(a->in_t[k]);
}
static int64_t out_numel(const kern_args *a)
{
    return cpu_numel(a->out_t);
}

/* ---- faults: inputs no shape rule can check ---- */

/* Every id of input k (i32) in [0, limit), else a fault naming the first
 * that is not; `what` names them ("label", "id").  One pass over a batch's
 * ids: cheap beside the op itself. */
static int check_ids(const kern_args *a, int k, int64_t limit, const char *what)
{
    const int32_t *ids = a->in[k];
    int64_t n = cpu_numel(a->in_t[k]);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < limit) continue;
        dev_fault_id(a->fault, what, ids[i], a->in_t[k], i, limit);
        return -1;
    }
    return 0;
}

static int k_group(const kern_args *a)
{
    (void)a;
    return 0;
}

static int not_distributed(const kern_args *a)
{
    snprintf(a->fault->msg, sizeof a->fault->msg, "%s in a session that is not distributed",
             ops_name(a->node->op));
    return -1;
}

/* One gradient: its mean, straight into out.  More: packed back to back
 * into out, then averaged in place. */
static int k_allreduce(const kern_args *a)
{
    float *out = a->out;
    size_t off = 0;
    for (int k = 0; k < a->n_in && a->n_in > 1; k++) {
        size_t n = (size_t)in_numel(a, k);
        cpu_copy(a->pool, out + off, IN(k), (int64_t)n);
        off += n;
    }
    const float *in = a->n_in > 1 ? out : IN(0);
    if (a->comm) return a->comm->allreduce_mean(a->comm, in, out, (size_t)out_numel(a), a->fault);
    return not_distributed(a);
}

/* identity, and a reshape the plan did not make a view of its input */
static int k_copy(const kern_args *a)
{
    if (a->out != IN(0)) cpu_copy(a->pool, a->out, IN(0), out_numel(a));
    return 0;
}

static int k_binary(const kern_args *a)
{
    cpu_binary(a->pool, a->node->op, a->out, a->out_t, IN(0), a->in_t[0], IN(1), a->in_t[1]);
    return 0;
}

static int k_unary(const kern_args *a)
{
    cpu_unary(a->pool, a->node->op, a->out_t->dtype, a->out, IN(0), out_numel(a));
    return 0;
}

static int k_where(const kern_args *a)
{
    cpu_where(a->pool, a->out, INF(0), IN(1), IN(2), out_numel(a));
    return 0;
}

static int k_act_grad(const kern_args *a)
{
    cpu_act_grad(a->pool, a->node->op, OUTF, INF(0), INF(1), out_numel(a));
    return 0;
}

/* ---- linear algebra ---- */

/* The node's product (devices/gemm.h) into c; with batch axes, the first
 * batch's product. */
static cpu_gemm_args gemm_args(const kern_args *a, float *c)
{
    gemm_dims d = gemm_dims_of(a);
    return (cpu_gemm_args){.m = d.m,
                           .n = d.n,
                           .k = d.k,
                           .trans_a = d.ta,
                           .trans_b = d.tb,
                           .a = INF(d.a),
                           .b = INF(d.b),
                           .c = c};
}

static int k_matmul(const kern_args *a)
{
    cpu_gemm_args g = gemm_args(a, OUTF);
    if (a->out_t->rank == 2) {
        cpu_matmul(a->pool, &g);
        return 0;
    }
    ir_type ob = gemm_batch_type(a->out_t), ab = gemm_batch_type(a->in_t[0]),
            bb = gemm_batch_type(a->in_t[1]);
    cpu_bcast bc;
    bcast_plan(&bc, &ob, &ab, &bb);
    cpu_matmul_batched(a->pool, &g, &bc, cpu_numel(&ob));
    return 0;
}

/* [M, K] @ [K, N] + bias, or [..., M, K] @ [K, N] + bias as one GEMM of all
 * the rows (gemm_dims_of). */
static int k_matmul_bias(const kern_args *a)
{
    cpu_gemm_args g = gemm_args(a, OUTF);
    g.bias = INF(2);
    g.relu = ATTR_I(ATTR_BIAS_RELU) != 0;
    cpu_matmul(a->pool, &g);
    return 0;
}

/* ---- along the last axis ---- */

static int64_t last_dim(const ir_type *t)
{
    return t->rank ? t->dim[t->rank - 1] : 1;
}

/* causal: softmax's mask (ATTR_MASK) is OP_MASK_CAUSAL. */
static void softmax(const kern_args *a, int log, int causal)
{
    int64_t c = last_dim(a->out_t), n = out_numel(a);
    cpu_softmax(a->pool, OUTF, INF(0), c ? n / c : 0, c, log, causal);
}

static void softmax_grad(const kern_args *a, int log, int causal)
{
    int64_t c = last_dim(a->out_t), n = out_numel(a);
    cpu_softmax_grad(a->pool, OUTF, INF(0), INF(1), c ? n / c : 0, c, log, causal);
}

static int k_softmax(const kern_args *a)
{
    softmax(a, 0, ATTR_I(ATTR_MASK) == OP_MASK_CAUSAL);
    return 0;
}

static int k_log_softmax(const kern_args *a)
{
    softmax(a, 1, 0);
    return 0;
}

static int k_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 0, ATTR_I(ATTR_MASK) == OP_MASK_CAUSAL);
    return 0;
}

static int k_log_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 1, 0);
    return 0;
}

/* ---- layer normalisation (in[0] is x, or dy for the gradients) ---- */

static cpu_norm_args norm_args(const kern_args *a, const ir_type *xt)
{
    int64_t c = last_dim(xt);
    return (cpu_norm_args){.out = OUTF,
                           .rows = c ? cpu_numel(xt) / c : 0,
                           .c = c,
                           .eps = ATTR_F(ATTR_NORM_EPS),
                           .scratch = a->scratch,
                           .task_bytes = a->scratch_task_bytes,
                           .max_tasks = a->max_tasks};
}

/* in: x, gain, bias */
static int k_layernorm(const kern_args *a)
{
    cpu_norm_args n = norm_args(a, a->in_t[0]);
    n.x = INF(0), n.gain = INF(1), n.bias = INF(2);
    cpu_layernorm(a->pool, &n);
    return 0;
}

/* in: dy, x, gain */
static int k_layernorm_grad(const kern_args *a)
{
    cpu_norm_args n = norm_args(a, a->in_t[1]);
    n.dy = INF(0), n.x = INF(1), n.gain = INF(2);
    cpu_layernorm_grad(a->pool, &n);
    return 0;
}

/* in: x, gain; rmsnorm_grad: dy, x, gain */
static int k_rmsnorm(const kern_args *a)
{
    int grad = a->node->op == OP_RMSNORM_GRAD;
    cpu_norm_args n = norm_args(a, a->in_t[grad]);
    n.rms = 1;
    n.dy = grad ? INF(0) : NULL, n.x = INF(grad), n.gain = INF(grad + 1);
    (grad ? cpu_layernorm_grad : cpu_layernorm)(a->pool, &n);
    return 0;
}

/* lrn (in: x) and lrn_grad (in: dy, x) of [N, C, ...] */
static int k_lrn(const kern_args *a)
{
    int grad = a->node->op == OP_LRN_GRAD;
    const ir_type *xt = a->in_t[grad];
    int64_t n = xt->dim[0], c = xt->dim[1];
    cpu_lrn_args l = {.out = OUTF,
                      .x = INF(grad),
                      .dy = grad ? INF(0) : NULL,
                      .n = n,
                      .c = c,
                      .s = n * c != 0 ? cpu_numel(xt) / (n * c) : 0,
                      .r = ATTR_I(ATTR_LRN_RADIUS),
                      .bias = ATTR_F(ATTR_LRN_BIAS),
                      .alpha = ATTR_F(ATTR_LRN_ALPHA),
                      .beta = ATTR_F(ATTR_LRN_BETA),
                      .scratch = a->scratch,
                      .task_bytes = a->scratch_task_bytes,
                      .max_tasks = a->max_tasks};
    (grad ? cpu_lrn_grad : cpu_lrn)(a->pool, &l);
    return 0;
}

/* rope and rope_grad (in: x) of [..., T, D] */
static int k_rope(const kern_args *a)
{
    const ir_type *xt = a->in_t[0];
    int64_t d = xt->dim[xt->rank - 1], t = xt->dim[xt->rank - 2];
    cpu_rope_args r = {.out = OUTF,
                       .x = INF(0),
                       .rows = t * d != 0 ? cpu_numel(xt) / (t * d) : 0,
                       .t = t,
                       .d = d,
                       .base = a->node->attr.f[ATTR_ROPE_BASE],
                       .inverse = a->node->op == OP_ROPE_GRAD};
    cpu_rope(a->pool, &r);
    return 0;
}

/* lstm_cell (in: z, s) and lstm_cell_grad (in: dy, z, s) */
static int k_lstm_cell(const kern_args *a)
{
    int grad = a->node->op == OP_LSTM_CELL_GRAD;
    const ir_type *zt = a->in_t[grad];
    cpu_lstm_args l = {.out = OUTF,
                       .z = INF(grad),
                       .s = INF(grad + 1),
                       .dy = grad ? INF(0) : NULL,
                       .b = zt->dim[0],
                       .h = zt->dim[1] / 4};
    (grad ? cpu_lstm_cell_grad : cpu_lstm_cell)(a->pool, &l);
    return 0;
}

/* gru_cell (in: gx, gh, h) and gru_cell_grad (in: dy, gx, gh, h) */
static int k_gru_cell(const kern_args *a)
{
    int grad = a->node->op == OP_GRU_CELL_GRAD;
    const ir_type *ht = a->in_t[grad + 2];
    cpu_gru_args g = {.out = OUTF,
                      .gx = INF(grad),
                      .gh = INF(grad + 1),
                      .h = INF(grad + 2),
                      .dy = grad ? INF(0) : NULL,
                      .b = ht->dim[0],
                      .hh = ht->dim[1]};
    (grad ? cpu_gru_cell_grad : cpu_gru_cell)(a->pool, &g);
    return 0;
}

/* in: dy, x */
static int k_layernorm_grad_params(const kern_args *a)
{
    cpu_norm_args n = norm_args(a, a->in_t[1]);
    n.dy = INF(0), n.x = INF(1);
    cpu_layernorm_grad_params(a->pool, &n);
    return 0;
}

/* ---- batch normalisation: x is in[0], or in[1] after dy (the gradients) ---- */

/* in: x (stats); x, gain, bias, stats (batchnorm_apply); dy, x, stats
 * (grad_params); dy, x, gain, stats, params (grad); the grads' relu flag:
 * y last */
static cpu_bn_args bn_args(const kern_args *a)
{
    op_kind op = a->node->op;
    int grad = op == OP_BN_GRAD_PARAMS || op == OP_BN_GRAD;
    const ir_type *xt = a->in_t[grad];
    cpu_bn_args n = {.out = OUTF,
                     .x = INF(grad),
                     .dy = grad ? INF(0) : NULL,
                     .n = xt->dim[0],
                     .c = xt->dim[1],
                     .s = xt->rank == 4 ? xt->dim[2] * xt->dim[3] : 1,
                     .eps = ATTR_F(ATTR_NORM_EPS),
                     .batch = (int)ATTR_I(ATTR_BN_BATCH),
                     .relu = ATTR_I(ATTR_BN_RELU) != 0};
    if (grad && n.relu) n.y = INF(a->node->n_in - 1);
    if (op == OP_BATCHNORM) n.gain = INF(1), n.bias = INF(2), n.stats = INF(3);
    if (op == OP_BN_GRAD_PARAMS) n.stats = INF(2);
    if (op == OP_BN_GRAD) n.gain = INF(2), n.stats = INF(3), n.params = INF(4);
    return n;
}

static int k_bn_stats(const kern_args *a)
{
    cpu_bn_args n = bn_args(a);
    cpu_bn_stats(a->pool, &n);
    return 0;
}

static int k_batchnorm(const kern_args *a)
{
    cpu_bn_args n = bn_args(a);
    cpu_batchnorm(a->pool, &n);
    return 0;
}

static int k_bn_grad_params(const kern_args *a)
{
    cpu_bn_args n = bn_args(a);
    cpu_bn_grad_params(a->pool, &n);
    return 0;
}

static int k_bn_grad(const kern_args *a)
{
    cpu_bn_args n = bn_args(a);
    cpu_bn_grad(a->pool, &n);
    return 0;
}

static int k_xent(const kern_args *a)
{
    if (check_ids(a, 1, a->in_t[0]->dim[1], "label")) return -1;
    cpu_xent(OUTF, INF(0), INI(1), a->in_t[0]->dim[0], a->in_t[0]->dim[1]);
    return 0;
}

static int k_xent_grad(const kern_args *a)
{
    if (check_ids(a, 1, a->in_t[0]->dim[1], "label")) return -1;
    cpu_xent_grad(a->pool, OUTF, INF(0), INI(1), INF(2), a->in_t[0]->dim[0], a->in_t[0]->dim[1]);
    return 0;
}

static int k_mse(const kern_args *a)
{
    OUTF[0] = cpu_mse(INF(0), INF(1), in_numel(a, 0));
    return 0;
}

/* ---- reductions ---- */

static void sum(const kern_args *a, int mean)
{
    int64_t outer, n, inner;
    cpu_reduce_dims(a->in_t[0], ATTR_I(ATTR_AXIS), &outer, &n, &inner);
    cpu_sum(a->pool, OUTF, INF(0), outer, n, inner, mean);
}

static int k_sum(const kern_args *a)
{
    sum(a, 0);
    return 0;
}

static int k_mean(const kern_args *a)
{
    sum(a, 1);
    return 0;
}

static int k_max(const kern_args *a)
{
    int64_t outer, n, inner;
    cpu_reduce_dims(a->in_t[0], ATTR_I(ATTR_AXIS), &outer, &n, &inner);
    cpu_max(a->pool, OUTF, INF(0), outer, n, inner);
    return 0;
}

static int k_argmax(const kern_args *a)
{
    int64_t outer, n, inner;
    cpu_reduce_dims(a->in_t[0], ATTR_I(ATTR_AXIS), &outer, &n, &inner);
    cpu_argmax(a->out, INF(0), outer, n, inner);
    return 0;
}

static int k_max_grad(const kern_args *a)
{
    int64_t outer, n, inner;
    cpu_reduce_dims(a->in_t[1], ATTR_I(ATTR_AXIS), &outer, &n, &inner);
    cpu_max_grad(OUTF, INF(0), INF(1), INF(2), outer, n, inner);
    return 0;
}

static int k_sum_to(const kern_args *a)
{
    cpu_sum_to(OUTF, a->out_t, INF(0), a->in_t[0]);
    return 0;
}

static int k_broadcast(const kern_args *a)
{
    cpu_broadcast(a->pool, a->out, a->out_t, IN(0), a->in_t[0]);
    return 0;
}

/* ---- shapes ---- */

static int k_transpose(const kern_args *a)
{
    const ir_type *it = a->in_t[0];
    int64_t perm[IR_MAX_DIMS];
    for (int d = 0; d < it->rank; d++)
        perm[d] = a->node->attr.n_list == it->rank ? a->node->attr.list[d] : it->rank - 1 - d;
    cpu_transpose(a->out, IN(0), it, perm);
    return 0;
}

static int k_concat(const kern_args *a)
{
    cpu_concat(a->out, a->out_t, a->n_in, (const void *const *)a->in, a->in_t, ATTR_I(ATTR_AXIS));
    return 0;
}

static int k_slice(const kern_args *a)
{
    int64_t ax = ATTR_I(ATTR_AXIS);
    cpu_slice(a->out, IN(0), a->in_t[0], ax, ATTR_I(ATTR_SLICE_BEGIN), a->out_t->dim[ax]);
    return 0;
}

static int k_slice_grad(const kern_args *a)
{
    int64_t ax = ATTR_I(ATTR_AXIS);
    cpu_slice_grad(OUTF, a->out_t, INF(0), ax, ATTR_I(ATTR_SLICE_BEGIN), a->in_t[0]->dim[ax]);
    return 0;
}

static int k_gather(const kern_args *a)
{
    const ir_type *tt = a->in_t[0];
    if (check_ids(a, 1, tt->dim[0], "id")) return -1;
    cpu_gather(OUTF, INF(0), tt->dim[1], INI(1), in_numel(a, 1));
    return 0;
}

static int k_gather_grad(const kern_args *a)
{
    if (check_ids(a, 1, a->out_t->dim[0], "id")) return -1;
    cpu_gather_grad(OUTF, a->out_t->dim[0], a->out_t->dim[1], INF(0), INI(1), in_numel(a, 1));
    return 0;
}

static int k_one_hot(const kern_args *a)
{
    if (check_ids(a, 0, last_dim(a->out_t), "id")) return -1;
    cpu_one_hot(OUTF, INI(0), in_numel(a, 0), last_dim(a->out_t));
    return 0;
}

static int k_cast(const kern_args *a)
{
    ir_dtype from = a->in_t[0]->dtype, to = a->out_t->dtype;
    int64_t n = out_numel(a);
    if (from == to)
        cpu_copy(a->pool, a->out, IN(0), n);
    else if (to == DT_I32)
        cpu_cast_f32_i32(a->out, INF(0), n);
    else
        cpu_cast_i32_f32(OUTF, INI(0), n);
    return 0;
}

static int k_dropout(const kern_args *a)
{
    int64_t n = out_numel(a);
    if (!ATTR_I(ATTR_DROPOUT_TRAINING))
        cpu_copy(a->pool, a->out, IN(0), n);
    else
        cpu_dropout(a->pool, OUTF, INF(0), n, ATTR_F(ATTR_DROPOUT_RATE),
                    a->seed ^ ((uint64_t)ATTR_I(ATTR_DROPOUT_KEY) * 0x9e3779b97f4a7c15ull),
                    a->step);
    return 0;
}

/* random: the same numbers on every device (devices/dropout.h). */
static int k_random(const kern_args *a)
{
    int64_t n = out_numel(a);
    cpu_random(a->pool, OUTF, n, random_key(a->seed, ATTR_I(ATTR_RANDOM_KEY), a->step),
               (int)ATTR_I(ATTR_RANDOM_KIND), ATTR_F(ATTR_RANDOM_A), ATTR_F(ATTR_RANDOM_B));
    return 0;
}

/* categorical: ids from rows of weights or logits (devices/draw.h). */
static int k_categorical(const kern_args *a)
{
    const ir_type *x = a->in_t[0];
    cpu_draw_shape s = {.k = x->dim[x->rank - 1],
                        .logits = ATTR_I(ATTR_RANDOM_KIND) == OP_DRAW_LOGITS};
    s.rows = cpu_numel(x) / s.k;
    s.per = out_numel(a) / s.rows;
    cpu_categorical(a->pool, a->out, INF(0), &s,
                    random_key(a->seed, ATTR_I(ATTR_RANDOM_KEY), a->step), a->scratch);
    return 0;
}

/* ---- convolution and pooling ---- */

/* x, w and y: the forward input, filter and output, wherever they are. */
static void conv_shape(const kern_args *a, const ir_type *xt, const ir_type *wt, const ir_type *yt,
                       cpu_conv_shape *s)
{
    *s = (cpu_conv_shape){.n = xt->dim[0],
                          .c = xt->dim[1],
                          .h = xt->dim[2],
                          .w = xt->dim[3],
                          .oc = wt->dim[0],
                          .kh = wt->dim[2],
                          .kw = wt->dim[3],
                          .oh = yt->dim[2],
                          .ow = yt->dim[3],
                          .stride = ATTR_I(ATTR_CONV_STRIDE) > 0 ? ATTR_I(ATTR_CONV_STRIDE) : 1,
                          .pad = ATTR_I(ATTR_CONV_PAD)};
}

static cpu_conv_ctx conv_ctx(const kern_args *a)
{
    return (cpu_conv_ctx){a->pool, a->scratch, a->scratch_task_bytes,
                          a->max_tasks > 0 ? a->max_tasks : 1};
}

/* conv2d, and conv2d_bias: in[2] a per-channel bias, ATTR_BIAS_RELU. */
static int k_conv2d(const kern_args *a)
{
    cpu_conv_shape s;
    cpu_conv_ctx cx = conv_ctx(a);
    conv_shape(a, a->in_t[0], a->in_t[1], a->out_t, &s);
    int fused = a->node->op == OP_CONV2D_BIAS;
    cpu_conv2d(&cx, &s, OUTF, INF(0), INF(1), fused ? INF(2) : NULL,
               fused && ATTR_I(ATTR_BIAS_RELU));
    return 0;
}

static int k_conv2d_grad_x(const kern_args *a)
{
    cpu_conv_shape s;
    cpu_conv_ctx cx = conv_ctx(a);
    conv_shape(a, a->out_t, a->in_t[1], a->in_t[0], &s);
    cpu_conv2d_grad_x(&cx, &s, OUTF, INF(0), INF(1));
    return 0;
}

static int k_conv2d_grad_w(const kern_args *a)
{
    cpu_conv_shape s;
    cpu_conv_ctx cx = conv_ctx(a);
    conv_shape(a, a->in_t[1], a->out_t, a->in_t[0], &s);
    cpu_conv2d_grad_w(&cx, &s, OUTF, INF(0), INF(1));
    return 0;
}

/* x is the forward input (xt), y the pooled output (yt). */
static void pool_shape(const kern_args *a, const ir_type *xt, const ir_type *yt, cpu_pool_shape *s)
{
    int64_t size = ATTR_I(ATTR_POOL_SIZE), stride = ATTR_I(ATTR_POOL_STRIDE);
    int64_t pad = ATTR_I(ATTR_POOL_PAD);
    if (stride <= 0) stride = size;
    *s = (cpu_pool_shape){.planes = xt->dim[0] * xt->dim[1],
                          .h = xt->dim[2],
                          .w = xt->dim[3],
                          .oh = yt->dim[2],
                          .ow = yt->dim[3],
                          .size = size,
                          .stride = stride,
                          .pad_h = ops_pool_pad_begin(pad, xt->dim[2], yt->dim[2], size, stride),
                          .pad_w = ops_pool_pad_begin(pad, xt->dim[3], yt->dim[3], size, stride)};
}

static int k_maxpool(const kern_args *a)
{
    cpu_pool_shape s;
    pool_shape(a, a->in_t[0], a->out_t, &s);
    cpu_maxpool(a->pool, &s, OUTF, INF(0));
    return 0;
}

static int k_avgpool(const kern_args *a)
{
    cpu_pool_shape s;
    pool_shape(a, a->in_t[0], a->out_t, &s);
    cpu_avgpool(a->pool, &s, OUTF, INF(0));
    return 0;
}

static int k_maxpool_grad(const kern_args *a)
{
    cpu_pool_shape s;
    pool_shape(a, a->out_t, a->in_t[0], &s);
    cpu_maxpool_grad(a->pool, &s, OUTF, INF(0), INF(1), ATTR_I(ATTR_POOL_RELU) != 0);
    return 0;
}

static int k_avgpool_grad(const kern_args *a)
{
    cpu_pool_shape s;
    pool_shape(a, a->out_t, a->in_t[0], &s);
    cpu_avgpool_grad(&s, OUTF, INF(0));
    return 0;
}

/* ---- updates: in[0] is the variable, written in place ---- */

/* An optimizer update's learning rate, by its staleness factor
 * (kern_args.lr_scale) when it has one: lr * 1 is lr exactly. */
static float lr_factor(const kern_args *a)
{
    return a->lr_scale ? *a->lr_scale : 1.0f;
}

/* An optimizer update's last two inputs: its lr and its gradient scale. */
#define LR (INF(a->n_in - 2)[0] * lr_factor(a))
#define GS (INF(a->n_in - 1)[0])

static int k_apply_sgd(const kern_args *a)
{
    cpu_apply_sgd(a->pool, (float *)IN(0), INF(1), in_numel(a, 0), LR, GS, ATTR_F(ATTR_WD));
    return 0;
}

static int k_apply_sgd_matmul(const kern_args *a)
{
    cpu_gemm_args g = gemm_args(a, (float *)IN(0));
    cpu_apply_sgd_matmul(a->pool, &g, ATTR_F(ATTR_SGDMM_LR) * lr_factor(a));
    return 0;
}

/* lr * gscale is one rounding, as apply_sgd's. */
static int k_apply_sgd_allreduce(const kern_args *a)
{
    if (!a->comm) return not_distributed(a);
    return a->comm->allreduce_sgd(a->comm, INF(1), (float *)IN(0), (size_t)in_numel(a, 1), LR * GS,
                                  a->fault);
}

static cpu_rows_scratch rows_scratch(const kern_args *a, int64_t n);

static int k_apply_sgd_rows(const kern_args *a)
{
    const ir_type *v = a->in_t[0];
    int64_t n = in_numel(a, 2);
    if (check_ids(a, 2, v->dim[0], "id")) return -1;
    cpu_rows_scratch sc = rows_scratch(a, n);
    cpu_apply_sgd_rows((float *)IN(0), INF(1), (const int32_t *)IN(2), n, v->dim[1], LR, GS,
                       ATTR_F(ATTR_WD), &sc);
    return 0;
}

static int k_apply_momentum(const kern_args *a)
{
    cpu_apply_momentum(a->pool, (float *)IN(0), INF(1), (float *)IN(2), in_numel(a, 0), LR,
                       ATTR_F(ATTR_MOMENTUM_M), ATTR_I(ATTR_NESTEROV) != 0, GS, ATTR_F(ATTR_WD));
    return 0;
}

/* Adam's hyperparameters, with the step counter at input `step`. */
static cpu_adam_hp adam_hp(const kern_args *a, int step)
{
    cpu_adam_hp hp = {LR,
                      ATTR_F(ATTR_ADAM_B1),
                      ATTR_F(ATTR_ADAM_B2),
                      ATTR_F(ATTR_ADAM_EPS),
                      INF(step)[0],
                      ATTR_F(ATTR_ADAM_WD),
                      GS};
    return hp;
}

static int k_apply_adam(const kern_args *a)
{
    cpu_adam_hp hp = adam_hp(a, 4);
    cpu_apply_adam(a->pool, (float *)IN(0), INF(1), (float *)IN(2), (float *)IN(3), in_numel(a, 0),
                   &hp);
    return 0;
}

/* The row ops' scratch (ops_scratch_rows): n keys, then D floats. */
static cpu_rows_scratch rows_scratch(const kern_args *a, int64_t n)
{
    cpu_rows_scratch sc = {a->scratch, (float *)((uint64_t *)a->scratch + n)};
    return sc;
}

static int k_apply_momentum_rows(const kern_args *a)
{
    const ir_type *v = a->in_t[0];
    int64_t n = in_numel(a, 2);
    if (check_ids(a, 2, v->dim[0], "id")) return -1;
    cpu_momentum_hp hp = {LR, ATTR_F(ATTR_MOMENTUM_M), GS, ATTR_I(ATTR_NESTEROV) != 0,
                          ATTR_F(ATTR_WD)};
    cpu_rows_scratch sc = rows_scratch(a, n);
    cpu_apply_momentum_rows((float *)IN(0), INF(1), (const int32_t *)IN(2), (float *)IN(3), n,
                            v->dim[1], &hp, &sc);
    return 0;
}

static int k_apply_adam_rows(const kern_args *a)
{
    const ir_type *v = a->in_t[0];
    int64_t n = in_numel(a, 2);
    if (check_ids(a, 2, v->dim[0], "id")) return -1;
    cpu_adam_hp hp = adam_hp(a, 5);
    cpu_rows_scratch sc = rows_scratch(a, n);
    cpu_apply_adam_rows((float *)IN(0), INF(1), (const int32_t *)IN(2), (float *)IN(3),
                        (float *)IN(4), n, v->dim[1], &hp, &sc);
    return 0;
}

/* rmsprop, adagrad, adadelta: the op's optim_kind, hyperparameters and
 * slots (from input `first`: rmsprop's mom and mg only when it has them). */
static int adaptive_args(const kern_args *a, int first, optim_hp *hp, float **slots)
{
    op_kind op = a->node->op;
    int kind = op == OP_APPLY_RMSPROP || op == OP_APPLY_RMSPROP_ROWS   ? OPTIM_RMSPROP
               : op == OP_APPLY_ADAGRAD || op == OP_APPLY_ADAGRAD_ROWS ? OPTIM_ADAGRAD
                                                                       : OPTIM_ADADELTA;
    *hp = (optim_hp){LR,
                     GS,
                     (float)ATTR_F(ATTR_WD),
                     (float)ATTR_F(ATTR_RHO),
                     (float)ATTR_F(ATTR_RMS_M),
                     (float)ATTR_F(ATTR_EPS)};
    int k = first;
    slots[0] = (float *)IN(k++);
    slots[1] = slots[2] = NULL;
    if (kind == OPTIM_ADADELTA) slots[1] = (float *)IN(k++);
    if (kind == OPTIM_RMSPROP && a->node->attr.f[ATTR_RMS_M] != 0) slots[1] = (float *)IN(k++);
    if (kind == OPTIM_RMSPROP && ATTR_I(ATTR_RMS_CENTERED)) slots[2] = (float *)IN(k++);
    return kind;
}

static int k_apply_adaptive(const kern_args *a)
{
    optim_hp hp;
    float *slots[3];
    int kind = adaptive_args(a, 2, &hp, slots);
    cpu_apply_adaptive(a->pool, kind, (float *)IN(0), INF(1), slots, in_numel(a, 0), &hp);
    return 0;
}

static int k_apply_adaptive_rows(const kern_args *a)
{
    const ir_type *v = a->in_t[0];
    int64_t n = in_numel(a, 2);
    if (check_ids(a, 2, v->dim[0], "id")) return -1;
    optim_hp hp;
    float *slots[3];
    int kind = adaptive_args(a, 3, &hp, slots);
    cpu_rows_scratch sc = rows_scratch(a, n);
    cpu_apply_adaptive_rows(kind, (float *)IN(0), INF(1), (const int32_t *)IN(2), slots, n,
                            v->dim[1], &hp, &sc);
    return 0;
}

static int k_rows_sum(const kern_args *a)
{
    int64_t n = in_numel(a, 1);
    cpu_rows_scratch sc = rows_scratch(a, n);
    cpu_rows_sum(OUTF, INF(0), (const int32_t *)IN(1), n, a->out_t->dim[1], &sc);
    return 0;
}

static int k_assign_add(const kern_args *a)
{
    cpu_assign_add(a->pool, IN(0), a->in_t[0]->dtype, IN(1), in_numel(a, 0), in_numel(a, 1));
    return 0;
}

static int k_assign(const kern_args *a)
{
    cpu_assign(a->pool, IN(0), IN(1), in_numel(a, 0), 4, a->node->attr.f[ATTR_ASSIGN_DECAY]);
    return 0;
}

static int k_lr_schedule(const kern_args *a)
{
    cpu_lr_schedule(OUTF, &a->node->attr, INF(0)[0]);
    return 0;
}

static int k_clip_scale(const kern_args *a)
{
    cpu_clip_scale(a->pool, OUTF, a->in, a->in_t, a->n_in, ATTR_F(ATTR_CLIP), a->scratch);
    return 0;
}

/* Sources (OPF_SOURCE) have no row: the executor provides their buffers.
 * Every other op has one, which tests/test_kernels.c checks for every op of
 * OPS_LIST (no count to bump here); placement (compiler/place.c) rejects a
 * node placed on a device whose table lacks its op. */
#define ROW(op, ...) [OP_##op] = ROW_FN,
const kernel_fn cpu_kernels[OP_COUNT] = {
#define ROW_FN k_binary
    CPU_ARITH(ROW) CPU_ARITH_F32(ROW) CPU_COMPARE(ROW)
#undef ROW_FN
#define ROW_FN k_unary
        CPU_UNARY(ROW)
#undef ROW_FN
#define ROW_FN k_act_grad
            CPU_ACT_GRAD(ROW)
#undef ROW_FN
                [OP_MATMUL] = k_matmul,
    [OP_IDENTITY] = k_copy,
    [OP_STOP_GRADIENT] = k_copy,
    [OP_SOFTMAX] = k_softmax,
    [OP_LOG_SOFTMAX] = k_log_softmax,
    [OP_SOFTMAX_XENT] = k_xent,
    [OP_MSE] = k_mse,
    [OP_SUM] = k_sum,
    [OP_MEAN] = k_mean,
    [OP_MAX] = k_max,
    [OP_ARGMAX] = k_argmax,
    [OP_RESHAPE] = k_copy,
    [OP_TRANSPOSE] = k_transpose,
    [OP_CONCAT] = k_concat,
    [OP_SLICE] = k_slice,
    [OP_GATHER] = k_gather,
    [OP_CAST] = k_cast,
    [OP_ONE_HOT] = k_one_hot,
    [OP_BROADCAST] = k_broadcast,
    [OP_SUM_TO] = k_sum_to,
    [OP_CONV2D] = k_conv2d,
    [OP_MAXPOOL2D] = k_maxpool,
    [OP_AVGPOOL2D] = k_avgpool,
    [OP_DROPOUT] = k_dropout,
    [OP_RANDOM] = k_random,
    [OP_CATEGORICAL] = k_categorical,
    [OP_LAYERNORM] = k_layernorm,
    [OP_LAYERNORM_GRAD] = k_layernorm_grad,
    [OP_LAYERNORM_GRAD_PARAMS] = k_layernorm_grad_params,
    [OP_RMSNORM] = k_rmsnorm,
    [OP_RMSNORM_GRAD] = k_rmsnorm,
    [OP_LRN] = k_lrn,
    [OP_LRN_GRAD] = k_lrn,
    [OP_ROPE] = k_rope,
    [OP_ROPE_GRAD] = k_rope,
    [OP_LSTM_CELL] = k_lstm_cell,
    [OP_LSTM_CELL_GRAD] = k_lstm_cell,
    [OP_GRU_CELL] = k_gru_cell,
    [OP_GRU_CELL_GRAD] = k_gru_cell,
    [OP_BN_STATS] = k_bn_stats,
    [OP_BATCHNORM] = k_batchnorm,
    [OP_BN_GRAD_PARAMS] = k_bn_grad_params,
    [OP_BN_GRAD] = k_bn_grad,
    [OP_SOFTMAX_GRAD] = k_softmax_grad,
    [OP_LOG_SOFTMAX_GRAD] = k_log_softmax_grad,
    [OP_XENT_GRAD] = k_xent_grad,
    [OP_MAX_GRAD] = k_max_grad,
    [OP_CONV2D_GRAD_X] = k_conv2d_grad_x,
    [OP_CONV2D_GRAD_W] = k_conv2d_grad_w,
    [OP_MAXPOOL_GRAD] = k_maxpool_grad,
    [OP_AVGPOOL_GRAD] = k_avgpool_grad,
    [OP_DROPOUT_GRAD] = k_dropout,
    [OP_GATHER_GRAD] = k_gather_grad,
    [OP_SLICE_GRAD] = k_slice_grad,
    [OP_APPLY_SGD] = k_apply_sgd,
    [OP_APPLY_SGD_ROWS] = k_apply_sgd_rows,
    [OP_APPLY_MOMENTUM] = k_apply_momentum,
    [OP_APPLY_MOMENTUM_ROWS] = k_apply_momentum_rows,
    [OP_APPLY_ADAM] = k_apply_adam,
    [OP_APPLY_ADAM_ROWS] = k_apply_adam_rows,
    [OP_APPLY_RMSPROP] = k_apply_adaptive,
    [OP_APPLY_RMSPROP_ROWS] = k_apply_adaptive_rows,
    [OP_APPLY_ADAGRAD] = k_apply_adaptive,
    [OP_APPLY_ADAGRAD_ROWS] = k_apply_adaptive_rows,
    [OP_APPLY_ADADELTA] = k_apply_adaptive,
    [OP_APPLY_ADADELTA_ROWS] = k_apply_adaptive_rows,
    [OP_ASSIGN_ADD] = k_assign_add,
    [OP_GROUP] = k_group,
    [OP_ASSIGN] = k_assign,
    [OP_ALLREDUCE] = k_allreduce,
    [OP_LR_SCHEDULE] = k_lr_schedule,
    [OP_WHERE] = k_where,
    [OP_CLIP_SCALE] = k_clip_scale,
    [OP_ROWS_SUM] = k_rows_sum,
    [OP_MATMUL_BIAS] = k_matmul_bias,
    [OP_CONV2D_BIAS] = k_conv2d,
    [OP_APPLY_SGD_MATMUL] = k_apply_sgd_matmul,
    [OP_APPLY_SGD_ALLREDUCE] = k_apply_sgd_allreduce,
};
