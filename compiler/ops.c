/* ops.c - the op registry: one entry per op (arity, flags, attributes and the
 * rules in ops_shape.c / ops_grad.c), the names, ops_lookup and the scratch
 * and cost rules.
 *
 * Attribute slot j of an op is attrs[j]; its value lives in ir_attrs.i[j]
 * (ints, bools, dtypes), f[j] (floats) or list[] (the one list).  The table
 * places each attribute at its named slot (enum op_attr_slot, ops.h). */
#include "conv_algo.h"
#include "ops_impl.h"

#include "base/fatal.h"

#include <math.h>
#include <string.h>

/* The table reads best one op per line. */
/* clang-format off */
#define REQ NAN
#define A_INT(n, d) {n, ATTR_INT, d}
#define A_BOOL(n, d) {n, ATTR_BOOL, d}
#define A_FLT(n, d) {n, ATTR_FLOAT, d}
#define A_LIST(n, d) {n, ATTR_LIST, d}

/* Attribute sets shared by an op and its gradient helpers. */
#define ATTRS_MATMUL {[ATTR_TRANS_A] = A_BOOL("transpose_a", 0), [ATTR_TRANS_B] = A_BOOL("transpose_b", 0)}
#define ATTRS_REDUCE {[ATTR_AXIS] = A_INT("axis", OP_AXIS_ALL), [ATTR_KEEPDIMS] = A_BOOL("keepdims", 0)}
#define ATTRS_SLICE {[ATTR_AXIS] = A_INT("axis", REQ), [ATTR_SLICE_BEGIN] = A_INT("begin", REQ), \
                     [ATTR_SLICE_END] = A_INT("end", REQ), A_LIST("shape", REQ)}
#define ATTRS_CONV {[ATTR_CONV_STRIDE] = A_INT("stride", 1), [ATTR_CONV_PAD] = A_INT("padding", 0), A_LIST("shape", REQ)}
#define A_POOL [ATTR_POOL_SIZE] = A_INT("size", REQ), [ATTR_POOL_STRIDE] = A_INT("stride", 0), [ATTR_POOL_PAD] = {"padding", ATTR_PAD, 0}
#define ATTRS_POOL {A_POOL, A_LIST("shape", REQ)}
#define ATTRS_SHAPE {A_LIST("shape", REQ)}
#define LOCK [ATTR_LOCKING] = A_BOOL("locking", 0)
#define WD   [ATTR_WD] = A_FLT("weight_decay", 0)
#define ATTRS_RMSPROP                                                                              \
    {[ATTR_RMS_CENTERED] = A_BOOL("centered", 0), [ATTR_RHO] = A_FLT("rho", 0.99),                 \
     [ATTR_RMS_M] = A_FLT("m", 0), [ATTR_EPS] = A_FLT("eps", 1e-8), WD, LOCK}
#define A_MASK [ATTR_MASK] = {"mask", ATTR_CHOICE, OP_MASK_NONE, ops_mask_names}
#define ATTRS_NORM {[ATTR_AXIS] = A_INT("axis", -1), [ATTR_NORM_EPS] = A_FLT("eps", 1e-5)}
#define ATTRS_LRN {[ATTR_LRN_RADIUS] = A_INT("depth_radius", 5), [ATTR_LRN_BIAS] = A_FLT("bias", 1), \
                   [ATTR_LRN_ALPHA] = A_FLT("alpha", 1), [ATTR_LRN_BETA] = A_FLT("beta", 0.5)}
#define ATTRS_ROPE {[ATTR_ROPE_BASE] = A_FLT("base", 10000)}
#define A_BN_RELU [ATTR_BN_RELU] = A_BOOL("relu", 0)
#define ATTRS_NORM_BN {[ATTR_AXIS] = A_INT("axis", 1), [ATTR_NORM_EPS] = A_FLT("eps", 1e-5), A_BN_RELU}

/* E(op, arity, flags, shape, grad); the name comes from OPS_LIST (ops.h). */
#define E(op, ar, fl, sh, gr) [op] = {.arity = ar, .flags = fl, .shape = sh, .grad = gr
#define PUB OPF_PUBLIC
#define EW (OPF_PUBLIC | OPF_ELEMENTWISE)
#define UPD (OPF_UPDATE | OPF_STATEFUL)
#define BIN(op, gr) E(op, 2, EW, ops_shape_binary, gr) }
#define CMP(op) E(op, 2, EW, ops_shape_compare, ops_grad_none) }
#define UN(op, sh, gr) E(op, 1, EW, sh, gr) }
#define HELPER(op, ar, sh) E(op, ar, 0, sh, NULL) }

const op_info ops_table[OP_COUNT] = {
    E(OP_CONST, 0, OPF_SOURCE, NULL, NULL), .attrs = {[ATTR_CONST_VALUE] = A_FLT("value", 0)}},
    E(OP_INPUT, 0, OPF_SOURCE | OPF_STATEFUL, NULL, NULL)},
    E(OP_DATA, 0, OPF_SOURCE | OPF_EXTERNAL | OPF_STATEFUL, ops_shape_data, NULL),
        .attrs = {[ATTR_DATA_WHICH] = A_INT("which", 0), [ATTR_DATA_INDEX] = A_INT("index", 0)}},
    E(OP_VARIABLE, 0, OPF_SOURCE | OPF_EXTERNAL | OPF_STATEFUL, NULL, NULL)},
    E(OP_MATMUL, 2, PUB, ops_shape_matmul, ops_grad_matmul), .attrs = ATTRS_MATMUL, .cost = ops_cost_matmul},
    BIN(OP_ADD, ops_grad_add),
    BIN(OP_SUB, ops_grad_sub),
    BIN(OP_MUL, ops_grad_mul),
    BIN(OP_DIV, ops_grad_div),
    BIN(OP_MAXIMUM, ops_grad_minmax),
    BIN(OP_MINIMUM, ops_grad_minmax),
    E(OP_POW, 2, EW, ops_shape_binary_f32, ops_grad_pow)},
    E(OP_WHERE, 3, PUB, ops_shape_where, ops_grad_where)},
    CMP(OP_EQ),
    CMP(OP_NE),
    CMP(OP_LT),
    CMP(OP_GT),
    CMP(OP_LE),
    CMP(OP_GE),
    UN(OP_NEG, ops_shape_unary_any, ops_grad_neg),
    UN(OP_EXP, ops_shape_unary_f32, ops_grad_exp),
    UN(OP_LOG, ops_shape_unary_f32, ops_grad_log),
    UN(OP_SQRT, ops_shape_unary_f32, ops_grad_sqrt),
    UN(OP_RELU, ops_shape_unary_f32, ops_grad_relu),
    UN(OP_SIGMOID, ops_shape_unary_f32, ops_grad_sigmoid),
    UN(OP_TANH, ops_shape_unary_f32, ops_grad_tanh),
    UN(OP_ABS, ops_shape_unary_f32, ops_grad_act),
    UN(OP_SIN, ops_shape_unary_f32, ops_grad_sin),
    UN(OP_COS, ops_shape_unary_f32, ops_grad_cos),
    UN(OP_SOFTPLUS, ops_shape_unary_f32, ops_grad_act),
    UN(OP_LOG_SIGMOID, ops_shape_unary_f32, ops_grad_act),
    UN(OP_SILU, ops_shape_unary_f32, ops_grad_act),
    UN(OP_ELU, ops_shape_unary_f32, ops_grad_act),
    /* not elementwise for fusion: identity is the stop that keeps it apart */
    E(OP_IDENTITY, 1, PUB, ops_shape_unary_any, ops_grad_identity)},
    E(OP_STOP_GRADIENT, 1, PUB, ops_shape_unary_any, ops_grad_none)},
    E(OP_SOFTMAX, 1, PUB, ops_shape_softmax, ops_grad_softmax), .attrs = {A_MASK}},
    E(OP_LOG_SOFTMAX, 1, PUB, ops_shape_softmax, ops_grad_log_softmax)},
    E(OP_SOFTMAX_XENT, 2, PUB, ops_shape_xent, ops_grad_xent)},
    E(OP_MSE, 2, PUB, ops_shape_mse, ops_grad_mse)},
    E(OP_SUM, 1, PUB, ops_shape_reduce, ops_grad_sum_mean), .attrs = ATTRS_REDUCE},
    E(OP_MEAN, 1, PUB, ops_shape_reduce, ops_grad_sum_mean), .attrs = ATTRS_REDUCE},
    E(OP_MAX, 1, PUB, ops_shape_reduce, ops_grad_max), .attrs = ATTRS_REDUCE},
    E(OP_ARGMAX, 1, PUB, ops_shape_argmax, ops_grad_none), .attrs = {[ATTR_AXIS] = A_INT("axis", -1)}},
    E(OP_RESHAPE, 1, PUB, ops_shape_reshape, ops_grad_reshape), .attrs = ATTRS_SHAPE},
    E(OP_TRANSPOSE, 1, PUB, ops_shape_transpose, ops_grad_transpose), .attrs = {A_LIST("perm", 0)}},
    E(OP_CONCAT, -1, PUB, ops_shape_concat, ops_grad_concat), .attrs = {[ATTR_AXIS] = A_INT("axis", 0)}},
    E(OP_SLICE, 1, PUB, ops_shape_slice, ops_grad_slice),
        .attrs = {[ATTR_AXIS] = A_INT("axis", REQ), [ATTR_SLICE_BEGIN] = A_INT("begin", REQ), [ATTR_SLICE_END] = A_INT("end", REQ)}},
    E(OP_GATHER, 2, PUB, ops_shape_gather, ops_grad_gather)},
    E(OP_CAST, 1, PUB, ops_shape_cast, ops_grad_cast), .attrs = {[ATTR_CAST_DTYPE] = {"dtype", ATTR_DTYPE, REQ}}},
    E(OP_ONE_HOT, 1, PUB, ops_shape_one_hot, ops_grad_none), .attrs = {[ATTR_DEPTH] = A_INT("depth", REQ)}},
    E(OP_BROADCAST, 1, 0, ops_shape_broadcast, ops_grad_broadcast), .attrs = ATTRS_SHAPE},
    E(OP_SUM_TO, 1, 0, ops_shape_sum_to, ops_grad_sum_to), .attrs = ATTRS_SHAPE},
    E(OP_CONV2D, 2, PUB, ops_shape_conv2d, ops_grad_conv2d),
        .attrs = {[ATTR_CONV_STRIDE] = A_INT("stride", 1), [ATTR_CONV_PAD] = A_INT("padding", 0)}, .scratch = ops_scratch_conv2d,
        .cost = ops_cost_conv},
    E(OP_MAXPOOL2D, 1, PUB, ops_shape_pool, ops_grad_maxpool), .attrs = {A_POOL}},
    E(OP_AVGPOOL2D, 1, PUB, ops_shape_pool, ops_grad_avgpool), .attrs = {A_POOL}},
    /* stateful: the mask depends on the run's step */
    /* training= absent (-1): sema builds both modes (compiler/modes.c) */
    E(OP_DROPOUT, 1, PUB | OPF_STATEFUL | OPF_PER_RUN, ops_shape_dropout, ops_grad_dropout),
        .attrs = {[ATTR_DROPOUT_RATE] = A_FLT("rate", REQ), [ATTR_DROPOUT_TRAINING] = A_BOOL("training", -1)}},
    E(OP_LAYERNORM, 3, PUB, ops_shape_layernorm, ops_grad_layernorm), .attrs = ATTRS_NORM},
    E(OP_LAYERNORM_GRAD, 3, 0, ops_shape_layernorm_grad, NULL), .attrs = ATTRS_NORM},
    E(OP_LAYERNORM_GRAD_PARAMS, 2, 0, ops_shape_layernorm_grad, NULL), .attrs = ATTRS_NORM,
        .scratch = ops_scratch_layernorm_grad_params},
    E(OP_RMSNORM, 2, PUB, ops_shape_layernorm, ops_grad_rmsnorm), .attrs = ATTRS_NORM},
    E(OP_RMSNORM_GRAD, 3, 0, ops_shape_layernorm_grad, NULL), .attrs = ATTRS_NORM},
    E(OP_LRN, 1, PUB, ops_shape_lrn, ops_grad_lrn), .attrs = ATTRS_LRN},
    E(OP_LRN_GRAD, 2, 0, ops_shape_lrn, NULL), .attrs = ATTRS_LRN, .scratch = ops_scratch_lrn_grad},
    E(OP_ROPE, 1, PUB, ops_shape_rope, ops_grad_rope), .attrs = ATTRS_ROPE},
    E(OP_ROPE_GRAD, 1, 0, ops_shape_rope, NULL), .attrs = ATTRS_ROPE},
    E(OP_LSTM_CELL, 2, PUB, ops_shape_lstm_cell, ops_grad_lstm_cell)},
    E(OP_LSTM_CELL_GRAD, 3, 0, ops_shape_lstm_cell, NULL)},
    E(OP_GRU_CELL, 3, PUB, ops_shape_gru_cell, ops_grad_gru_cell)},
    E(OP_GRU_CELL_GRAD, 4, 0, ops_shape_gru_cell, NULL)},
    E(OP_BN_STATS, 1, 0, ops_shape_bn_stats, ops_grad_none), .attrs = {[ATTR_AXIS] = A_INT("axis", 1)}},
    E(OP_BATCHNORM, 4, 0, ops_shape_batchnorm, ops_grad_batchnorm), .attrs = ATTRS_NORM_BN},
    /* the grads: one more input, y, with their relu (ops_shape_bn_grad) */
    E(OP_BN_GRAD_PARAMS, -1, 0, ops_shape_bn_grad, NULL), .attrs = ATTRS_NORM_BN},
    E(OP_BN_GRAD, -1, 0, ops_shape_bn_grad, NULL),
        .attrs = {[ATTR_AXIS] = A_INT("axis", 1), [ATTR_NORM_EPS] = A_FLT("eps", 1e-5), [ATTR_BN_BATCH] = A_BOOL("batch", 1), A_BN_RELU}},
    UN(OP_GELU, ops_shape_unary_f32, ops_grad_gelu),
    HELPER(OP_GELU_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_RELU_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_SIGMOID_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_TANH_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_ABS_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_SOFTPLUS_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_LOG_SIGMOID_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_SILU_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_ELU_GRAD, 2, ops_shape_grad_pair),
    E(OP_SOFTMAX_GRAD, 2, 0, ops_shape_grad_pair, NULL), .attrs = {A_MASK}},
    HELPER(OP_LOG_SOFTMAX_GRAD, 2, ops_shape_grad_pair),
    HELPER(OP_XENT_GRAD, 3, ops_shape_xent_grad),
    E(OP_MAX_GRAD, 3, 0, ops_shape_like_in1, NULL), .attrs = ATTRS_REDUCE},
    E(OP_CONV2D_GRAD_X, 2, 0, ops_shape_from_list, NULL), .attrs = ATTRS_CONV,
        .scratch = ops_scratch_conv2d, .cost = ops_cost_conv},
    E(OP_CONV2D_GRAD_W, 2, 0, ops_shape_from_list, NULL), .attrs = ATTRS_CONV,
        .scratch = ops_scratch_conv2d_grad_w, .cost = ops_cost_conv},
    E(OP_MAXPOOL_GRAD, 2, 0, ops_shape_like_in1, NULL),
        .attrs = {A_POOL, [ATTR_POOL_RELU] = A_BOOL("relu", 0), A_LIST("shape", REQ)}},
    E(OP_AVGPOOL_GRAD, 1, 0, ops_shape_from_list, NULL), .attrs = ATTRS_POOL},
    E(OP_DROPOUT_GRAD, 1, OPF_STATEFUL | OPF_PER_RUN, ops_shape_like_in0, NULL),
        .attrs = {[ATTR_DROPOUT_RATE] = A_FLT("rate", REQ), [ATTR_DROPOUT_TRAINING] = A_BOOL("training", 1), [ATTR_DROPOUT_KEY] = A_INT("forward", REQ)}},
    E(OP_RANDOM, 1, OPF_STATEFUL | OPF_PER_RUN, ops_shape_random, ops_grad_none),
        .attrs = {[ATTR_RANDOM_KIND] = A_INT("kind", REQ), [ATTR_RANDOM_KEY] = A_INT("key", 0),
                  [ATTR_RANDOM_A] = A_FLT("a", REQ), [ATTR_RANDOM_B] = A_FLT("b", REQ)}},
    E(OP_CATEGORICAL, 1, OPF_STATEFUL | OPF_PER_RUN, ops_shape_categorical, ops_grad_none),
        .attrs = {[ATTR_RANDOM_KIND] = A_INT("kind", REQ), [ATTR_RANDOM_KEY] = A_INT("key", 0), A_LIST("shape", REQ)},
        .scratch = ops_scratch_categorical},
    E(OP_GATHER_GRAD, 2, 0, ops_shape_from_list, NULL), .attrs = ATTRS_SHAPE},
    E(OP_SLICE_GRAD, 1, 0, ops_shape_from_list, NULL), .attrs = ATTRS_SLICE},
    /* lr and gscale are inputs (ops.h), read on the device each run */
    E(OP_APPLY_SGD, 4, UPD, ops_shape_update, NULL),
        .attrs = {WD, LOCK}},
    /* the scratch groups a repeated id's rows when a weight decay reads the row */
    E(OP_APPLY_SGD_ROWS, 5, UPD, ops_shape_update_rows, NULL),
        .attrs = {WD, LOCK}, .scratch = ops_scratch_rows},
    E(OP_APPLY_MOMENTUM, 5, UPD, ops_shape_update, NULL),
        .attrs = {[ATTR_MOMENTUM_M] = A_FLT("m", REQ), [ATTR_NESTEROV] = A_BOOL("nesterov", 0), WD, LOCK}},
    E(OP_APPLY_MOMENTUM_ROWS, 6, UPD, ops_shape_update_rows, NULL),
        .attrs = {[ATTR_MOMENTUM_M] = A_FLT("m", REQ), [ATTR_NESTEROV] = A_BOOL("nesterov", 0), WD, LOCK},
        .scratch = ops_scratch_rows},
    E(OP_APPLY_ADAM, 7, UPD, ops_shape_update, NULL),
        .attrs = {[ATTR_ADAM_B1] = A_FLT("b1", 0.9), [ATTR_ADAM_B2] = A_FLT("b2", 0.999), [ATTR_ADAM_EPS] = A_FLT("eps", 1e-8),
                  [ATTR_ADAM_WD] = A_FLT("weight_decay", 0), LOCK}},
    E(OP_APPLY_ADAM_ROWS, 8, UPD, ops_shape_update_rows, NULL),
        .attrs = {[ATTR_ADAM_B1] = A_FLT("b1", 0.9), [ATTR_ADAM_B2] = A_FLT("b2", 0.999), [ATTR_ADAM_EPS] = A_FLT("eps", 1e-8),
                  [ATTR_ADAM_WD] = A_FLT("weight_decay", 0), LOCK},
        .scratch = ops_scratch_rows},
    /* rmsprop's slots: v, then mom when m != 0, then mg when centered (ops_shape_update) */
    E(OP_APPLY_RMSPROP, -1, UPD, ops_shape_update, NULL), .attrs = ATTRS_RMSPROP},
    E(OP_APPLY_RMSPROP_ROWS, -1, UPD, ops_shape_update_rows, NULL), .attrs = ATTRS_RMSPROP,
        .scratch = ops_scratch_rows},
    E(OP_APPLY_ADAGRAD, 5, UPD, ops_shape_update, NULL),
        .attrs = {[ATTR_EPS] = A_FLT("eps", 1e-10), WD, LOCK}},
    E(OP_APPLY_ADAGRAD_ROWS, 6, UPD, ops_shape_update_rows, NULL),
        .attrs = {[ATTR_EPS] = A_FLT("eps", 1e-10), WD, LOCK}, .scratch = ops_scratch_rows},
    E(OP_APPLY_ADADELTA, 6, UPD, ops_shape_update, NULL),
        .attrs = {[ATTR_RHO] = A_FLT("rho", 0.9), [ATTR_EPS] = A_FLT("eps", 1e-6), WD, LOCK}},
    E(OP_APPLY_ADADELTA_ROWS, 7, UPD, ops_shape_update_rows, NULL),
        .attrs = {[ATTR_RHO] = A_FLT("rho", 0.9), [ATTR_EPS] = A_FLT("eps", 1e-6), WD, LOCK},
        .scratch = ops_scratch_rows},
    E(OP_ASSIGN_ADD, 2, UPD, ops_shape_assign, NULL),
        .attrs = {LOCK}},
    /* a barrier: merging two would merge the targets they end */
    E(OP_GROUP, -1, OPF_STATEFUL, ops_shape_token, NULL)},
    E(OP_ASSIGN, 2, UPD, ops_shape_assign, NULL),
        .attrs = {[ATTR_ASSIGN_DECAY] = A_FLT("decay", 0), LOCK}},
    /* a collective: every process must run the same ones in the same order */
    E(OP_ALLREDUCE, -1, OPF_STATEFUL, ops_shape_allreduce, NULL), .attrs = {[ATTR_BUCKET] = A_INT("bucket", 0)}},
    E(OP_LR_SCHEDULE, 1, 0, ops_shape_lr_schedule, NULL),
        .attrs = {[ATTR_LR_KIND] = A_INT("kind", 0), [ATTR_LR_LR] = A_FLT("lr", REQ), [ATTR_LR_MIN] = A_FLT("min", 0),
                  [ATTR_LR_WARMUP] = A_INT("warmup", 0), [ATTR_LR_STEPS] = A_INT("steps", 0)}},
    E(OP_CLIP_SCALE, -1, 0, ops_shape_clip_scale, NULL), .attrs = {[ATTR_CLIP] = A_FLT("clip", REQ)},
        .scratch = ops_scratch_clip_scale},
    E(OP_ROWS_SUM, 2, 0, ops_shape_rows_sum, NULL), .scratch = ops_scratch_rows},
    E(OP_MATMUL_BIAS, 3, 0, ops_shape_matmul_bias, NULL),
        .attrs = {[ATTR_TRANS_A] = A_BOOL("transpose_a", 0), [ATTR_TRANS_B] = A_BOOL("transpose_b", 0), [ATTR_BIAS_RELU] = A_BOOL("relu", 0)},
        .cost = ops_cost_matmul},
    E(OP_CONV2D_BIAS, 3, 0, ops_shape_conv2d_bias, NULL),
        .attrs = {[ATTR_CONV_STRIDE] = A_INT("stride", 1), [ATTR_CONV_PAD] = A_INT("padding", 0), [ATTR_BIAS_RELU] = A_BOOL("relu", 0)},
        .scratch = ops_scratch_conv2d, .cost = ops_cost_conv},
    E(OP_APPLY_SGD_MATMUL, 3, UPD, ops_shape_update_matmul, NULL),
        .attrs = {[ATTR_SGDMM_LR] = A_FLT("lr", REQ), [ATTR_SGDMM_TRANS_A] = A_BOOL("transpose_a", 0), [ATTR_SGDMM_TRANS_B] = A_BOOL("transpose_b", 0), LOCK},
        .cost = ops_cost_matmul},
    /* a collective too: it keeps the allreduce's place in the sequence */
    E(OP_APPLY_SGD_ALLREDUCE, 4, UPD, ops_shape_update, NULL),
        .attrs = {[ATTR_BUCKET] = A_INT("bucket", 0), LOCK}},
};
/* clang-format on */

const char *const ops_mask_names[] = {"none", "causal", NULL};

static const char *const op_names[OP_COUNT] = {
#define OP_NAME(id, name) [OP_##id] = name,
    OPS_LIST(OP_NAME)
#undef OP_NAME
};

const char *ops_name(op_kind op)
{
    GR_ASSERT((unsigned)op < OP_COUNT);
    return op_names[op];
}

int ops_has(op_kind op, unsigned flag)
{
    GR_ASSERT((unsigned)op < OP_COUNT);
    return (ops_table[op].flags & flag) != 0;
}

int ops_has_lr(op_kind op)
{
    return ops_has(op, OPF_UPDATE) && op != OP_ASSIGN && op != OP_ASSIGN_ADD;
}

int ops_lookup(const char *name)
{
    if (!name) return -1;
    for (int op = 0; op < OP_COUNT; op++)
        if (op_names[op][0] == name[0] && ops_has(op, OPF_PUBLIC) &&
            strcmp(op_names[op], name) == 0)
            return op;
    return -1;
}

/* ---- helpers shared by the rule files ---- */

ops_tstr ops_ts(const ir_type *t)
{
    ops_tstr r;
    ir_type_str(t, r.s, sizeof(r.s));
    return r;
}

ops_tstr ops_list_str(const int64_t *v, int n)
{
    ops_tstr r;
    size_t len = 0;
    r.s[len++] = '[';
    for (int i = 0; i < n && len < sizeof(r.s) - 24; i++)
        len +=
            (size_t)snprintf(r.s + len, sizeof(r.s) - len, "%s%lld", i ? "," : "", (long long)v[i]);
    snprintf(r.s + len, sizeof(r.s) - len, "]");
    return r;
}

int ops_error(ir_graph *g, int id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(g->diags, DIAG_ERROR, g->nodes[id].src, g->nodes[id].span, fmt, ap);
    va_end(ap);
    return -1;
}

const ir_type *ops_in_type(const ir_graph *g, int id, int k)
{
    return &g->nodes[g->nodes[id].in[k]].type;
}

/* ---- scratch rules: per task, for the CPU's algorithm (conv_algo.h) ---- */

/* x [N, C, H, W], w [OC, C, K, K], y [N, OC, OH, OW]; grad: 1 the input
 * gradient, 2 the filter's (conv_algo.h). */
static size_t conv_scratch(const ir_node *n, const ir_type *x, const ir_type *w, const ir_type *y,
                           int grad)
{
    int64_t stride = n->attr.i[ATTR_CONV_STRIDE] > 0 ? n->attr.i[ATTR_CONV_STRIDE] : 1;
    return conv_task_bytes(grad, x->dim[0], x->dim[1], x->dim[2], x->dim[3], y->dim[1], w->dim[2],
                           w->dim[3], stride, n->attr.i[ATTR_CONV_PAD], y->dim[2], y->dim[3]);
}

size_t ops_scratch_conv2d(const ir_graph *g, int id)
{
    const ir_node *n = &g->nodes[id];
    const ir_type *w = ops_in_type(g, id, 1);
    if (n->op != OP_CONV2D_GRAD_X) return conv_scratch(n, ops_in_type(g, id, 0), w, &n->type, 0);
    /* conv2d_grad_x: in dy[N,OC,OH,OW], w; out dx */
    return conv_scratch(n, &n->type, w, ops_in_type(g, id, 0), 1);
}

size_t ops_scratch_conv2d_grad_w(const ir_graph *g, int id)
{
    /* in dy, x; out dw */
    return conv_scratch(&g->nodes[id], ops_in_type(g, id, 1), &g->nodes[id].type,
                        ops_in_type(g, id, 0), 2);
}

/* layernorm_grad_params: 2C floats of partial sums per CPU task (rows are
 * split over the tasks); the CUDA kernel keeps each row's mean and 1/std
 * (2 floats a row) there instead.  Room for both. */
size_t ops_scratch_layernorm_grad_params(const ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 1);
    int64_t c = x->dim[x->rank - 1];
    return (size_t)(2 * c + 2 * (c ? ir_numel(x) / c : 0)) * 4;
}

/* lrn_grad: s^-beta and dy * x * s^(-beta-1) of OP_LRN_CHUNK positions of
 * every channel (devices/cpu/cpu_norm.c). */
size_t ops_scratch_lrn_grad(const ir_graph *g, int id)
{
    return (size_t)(2 * ops_in_type(g, id, 1)->dim[1] * OP_LRN_CHUNK) * 4;
}

/* A double per OP_CLIP_CHUNK elements of each gradient. */
size_t ops_scratch_clip_scale(const ir_graph *g, int id)
{
    size_t chunks = 0;
    for (int k = 0; k < g->nodes[id].n_in; k++)
        chunks += (size_t)((ir_numel(ops_in_type(g, id, k)) + OP_CLIP_CHUNK - 1) / OP_CLIP_CHUNK);
    return chunks * sizeof(double);
}

/* categorical: a row's running sums, its chunks' offsets and maxima, and
 * its total, all doubles (devices/draw.h). */
size_t ops_scratch_categorical(const ir_graph *g, int id)
{
    const ir_type *x = ops_in_type(g, id, 0);
    int64_t k = x->rank ? x->dim[x->rank - 1] : 1, rows = k ? ir_numel(x) / k : 0;
    int64_t chunks = (k + OP_CDF_CHUNK - 1) / OP_CDF_CHUNK;
    return (size_t)(rows * (k + 2 * chunks + 1)) * sizeof(double);
}

/* Row ops (rows_sum, apply_*_rows) group the ids: an (id, place) pair a
 * row to sort, and one summed row of D floats. */
size_t ops_scratch_rows(const ir_graph *g, int id)
{
    int rows_sum = g->nodes[id].op == OP_ROWS_SUM;
    const ir_type *dy = ops_in_type(g, id, rows_sum ? 0 : 1);
    int64_t n = ir_numel(ops_in_type(g, id, rows_sum ? 1 : 2));
    return (size_t)n * sizeof(int64_t) + (size_t)dy->dim[dy->rank - 1] * sizeof(float);
}

/* ---- cost rules: multiply-adds ---- */

/* M*N*K per batch: the output is [...,M,N]; K is a's other last-two
 * dimension.  apply_sgd_matmul multiplies in[1] @ in[2] into its variable
 * in[0]. */
double ops_cost_matmul(const ir_graph *g, int id)
{
    const ir_node *n = &g->nodes[id];
    int upd = n->op == OP_APPLY_SGD_MATMUL;
    const ir_type *a = ops_in_type(g, id, upd), *c = upd ? ops_in_type(g, id, 0) : &n->type;
    int ta = n->attr.i[upd ? ATTR_SGDMM_TRANS_A : ATTR_TRANS_A] != 0;
    return (double)ir_numel(c) * (double)a->dim[a->rank - (ta ? 2 : 1)];
}

/* Every conv2d-family op does one multiply-add per (dy element, C*KH*KW). */
double ops_cost_conv(const ir_graph *g, int id)
{
    const ir_node *n = &g->nodes[id];
    const ir_type *w = n->op == OP_CONV2D_GRAD_W ? &n->type : ops_in_type(g, id, 1);
    const ir_type *y =
        n->op == OP_CONV2D || n->op == OP_CONV2D_BIAS ? &n->type : ops_in_type(g, id, 0);
    return (double)ir_numel(y) * (double)(w->dim[1] * w->dim[2] * w->dim[3]);
}

double ops_cost(const ir_graph *g, int id)
{
    const ir_node *n = &g->nodes[id];
    if (ops_table[n->op].cost) return ops_table[n->op].cost(g, id);
    double c = (double)ir_numel(&n->type);
    for (int k = 0; k < n->n_in; k++) c += (double)ir_numel(ops_in_type(g, id, k));
    return c;
}
