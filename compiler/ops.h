/* ops.h - the op registry: the single source of truth for every op.
 *
 * OPS_LIST below names every op once; the enum and the name table are
 * generated from it.  One entry per op in ops.c holds its arity, flags,
 * attributes, shape/dtype rule, gradient rule, scratch and cost rules.  Each
 * device has one kernel table indexed by op_kind (devices/cpu/kernels.c,
 * devices/cuda/k_*.cu); an op without a kernel on the device it is placed on
 * is a compile error (placement, compiler/place.c).  No table holds a count
 * to bump: tests walk OP_COUNT and fail for an op without its registry
 * entry (test_shapes), CPU kernel (test_kernels) or CUDA row
 * (test_cuda_rows, in the CPU suite).
 *
 * Conventions used by every op below ("in" = inputs by position, "attr" =
 * attribute slots by position, named by enum op_attr_slot below):
 *  - elementwise binaries broadcast like numpy; output dtype = input dtype
 *  - reductions: attr0 axis (OP_AXIS_ALL = all axes -> scalar; a negative
 *    axis in the source is normalised to [0,rank) by the shape rule, so
 *    kernels only ever see OP_AXIS_ALL or 0..rank-1), attr1 keepdims
 *  - images are NCHW, filters are [OC, IC, KH, KW]
 */
#ifndef GR_OPS_H
#define GR_OPS_H

#include <stddef.h>

#define OP_AXIS_ALL (-100)

/* The op table stays one op per line, comments aligned. */
// clang-format off
#define OPS_LIST(X)                                                                                  \
    /* sources (no kernel work: the executor binds their buffers) */                               \
    X(CONST, "const")              /* out filled with attr f0, or copied from node->cdata */       \
    X(INPUT, "input")              /* fed by the caller */                                         \
    X(DATA, "data")                /* attr0: 0 = x, 1 = y; attr1: data index (-> node->data) */    \
    X(VARIABLE, "variable")        /* the variable's own buffer, read in place */                  \
    /* linear algebra */                                                                           \
    X(MATMUL, "matmul")            /* in: a[...,M,K] b[...,K,N]; attr0 trans_a, attr1 trans_b */   \
    /* elementwise binary (broadcasting) */                                                        \
    X(ADD, "add")                                                                                  \
    X(SUB, "sub")                                                                                  \
    X(MUL, "mul")                                                                                  \
    X(DIV, "div")                                                                                  \
    X(MAXIMUM, "maximum")           /* NaN from either side wins */                                \
    X(MINIMUM, "minimum")                                                                          \
    X(POW, "pow")                   /* f32 only */                                                 \
    /* comparisons: broadcasting, out f32 0/1 (works on f32 and i32) */                            \
    X(EQ, "equal")                                                                                 \
    X(NE, "not_equal")                                                                             \
    X(LT, "less")                                                                                  \
    X(GT, "greater")                                                                               \
    X(LE, "less_equal")                                                                            \
    X(GE, "greater_equal")                                                                         \
    /* elementwise unary, f32 */                                                                   \
    X(NEG, "neg")                                                                                  \
    X(EXP, "exp")                                                                                  \
    X(LOG, "log")                                                                                  \
    X(SQRT, "sqrt")                                                                                \
    X(RELU, "relu")                                                                                \
    X(SIGMOID, "sigmoid")                                                                          \
    X(TANH, "tanh")                                                                                \
    X(ABS, "abs")                                                                                  \
    X(SIN, "sin")                                                                                  \
    X(COS, "cos")                                                                                  \
    X(SOFTPLUS, "softplus")                                                                        \
    X(LOG_SIGMOID, "log_sigmoid")                                                                  \
    X(SILU, "silu")                                                                                \
    X(ELU, "elu")                                                                                  \
    X(WHERE, "where")               /* in: cond f32, a, b, one shape (sema broadcasts) */          \
    X(IDENTITY, "identity")        /* copy (act=none, and a stop for fusion) */                    \
    X(STOP_GRADIENT, "stop_gradient") /* a copy no gradient flows back through */                 \
    /* along the last axis */                                                                      \
    X(SOFTMAX, "softmax")          /* attr0 mask (OP_MASK_*) */                                    \
    X(LOG_SOFTMAX, "log_softmax")                                                                  \
    X(SOFTMAX_XENT, "softmax_xent") /* in: logits f32[N,C], labels i32[N]; out f32[N] */           \
    X(MSE, "mse")                  /* in: pred, target (same shape); out scalar mean sq err */     \
    /* reductions */                                                                               \
    X(SUM, "sum")                                                                                  \
    X(MEAN, "mean")                                                                                \
    X(MAX, "max")                                                                                  \
    X(ARGMAX, "argmax")            /* attr0 axis; out i32, axis removed */                         \
    /* shapes */                                                                                   \
    X(RESHAPE, "reshape")          /* attr list: new shape (one -1 allowed) */                     \
    X(TRANSPOSE, "transpose")      /* attr list: permutation (empty = reverse) */                  \
    X(CONCAT, "concat")            /* n inputs; attr0 axis */                                      \
    X(SLICE, "slice")              /* attr0 axis, attr1 begin, attr2 end */                        \
    X(GATHER, "gather")            /* in: table f32[V,D], ids i32[...]; out [..., D] */            \
    X(CAST, "cast")                /* attr0 target dtype (ir_dtype) */                             \
    X(ONE_HOT, "one_hot")          /* in: ids i32[...]; attr0 depth; out f32[..., depth] */        \
    X(BROADCAST, "broadcast")      /* in: x; out: shape in attr list (numpy rules) */              \
    X(SUM_TO, "sum_to")            /* in: x; out: shape in attr list; sums broadcast axes */       \
    /* convolution and pooling */                                                                  \
    X(CONV2D, "conv2d")            /* in: x[N,C,H,W] w[OC,C,KH,KW]; attr0 stride, attr1 pad */     \
    X(MAXPOOL2D, "maxpool2d")      /* in: x; attr0 size, attr1 stride (0 = size), attr2 padding */ \
    X(AVGPOOL2D, "avgpool2d")      /* same attrs as maxpool2d; padding is not counted */           \
    X(DROPOUT, "dropout")          /* attr f0 rate, attr i1 training (0 = identity) */             \
    /* transformer ops (softmax's mask="causal" is softmax's attr0) */                             \
    X(LAYERNORM, "layernorm")      /* in: x[...,C], gain[C], bias[C]; attr0 axis, f1 eps */        \
    X(LAYERNORM_GRAD, "layernorm_grad") /* in: dy, x, gain; out dx; attrs as layernorm */          \
    X(LAYERNORM_GRAD_PARAMS, "layernorm_grad_params") /* in: dy, x; out [2C]: dgain, dbias */      \
    X(RMSNORM, "rmsnorm")           /* in: x[...,C], gain[C]; attrs as layernorm */                \
    X(RMSNORM_GRAD, "rmsnorm_grad") /* in: dy, x, gain; out dx */                                  \
    /* local response normalisation across the channels (axis 1) of [N, C, ...], TF's:          \
       y = x / (bias + alpha * the sum of x^2 over channels c - r .. c + r)^beta */              \
    X(LRN, "lrn")                  /* in: x; i0 depth_radius r, f1 bias, f2 alpha, f3 beta */      \
    X(LRN_GRAD, "lrn_grad")        /* in: dy, x; out dx; attrs as lrn */                           \
    /* rotary position embeddings of [..., T, D] (D even), pairs (i, i + D/2), HF's Llama:       \
       angle t * base^(-2i/D) at position t of axis -2 */                                        \
    X(ROPE, "rope")                /* in: x; f0 base */                                            \
    X(ROPE_GRAD, "rope_grad")      /* in: dy; the inverse rotation; attrs as rope */               \
    /* recurrent cells, PyTorch's nn.LSTMCell gates i, f, g, o: c' = sig(f) c + sig(i) tanh(g),    \
       h' = sig(o) tanh(c'); the state s is [B, 2H] = [h, c] */                                    \
    X(LSTM_CELL, "lstm_cell")      /* in: z[B,4H], s[B,2H]; out [B,2H]: h', c' */                  \
    X(LSTM_CELL_GRAD, "lstm_cell_grad") /* in: dy[B,2H], z, s; out [B,6H]: dz, ds (dh 0) */        \
    /* PyTorch's nn.GRUCell, gates r, z, n: gx = x w_ih + b_ih, gh = h w_hh + b_hh [B, 3H];        \
       n = tanh(gx_n + sig(r) gh_n), h' = (1 - sig(z)) n + sig(z) h */                             \
    X(GRU_CELL, "gru_cell")        /* in: gx[B,3H], gh[B,3H], h[B,H]; out h' [B,H] */              \
    X(GRU_CELL_GRAD, "gru_cell_grad") /* in: dy[B,H], gx, gh, h; out [B,7H]: dgx, dgh, dh */       \
    /* batch normalisation over every axis but the channel axis 1 of [N,C] or [N,C,H,W] */         \
    X(BN_STATS, "batchnorm_stats") /* in: x; attr0 axis; out [2,C]: mean, biased variance */       \
    X(BATCHNORM, "batchnorm_apply") /* in: x, gain[C], bias[C], stats[2,C]; attr0 axis, f1 eps */  \
    X(BN_GRAD_PARAMS, "batchnorm_grad_params") /* in: dy, x, stats[, y]; out [2,C] dgain, dbias */\
    X(BN_GRAD, "batchnorm_grad")   /* in: dy, x, gain, stats, params[, y]; i2 batch */             \
    X(GELU, "gelu")                /* tanh approximation (GPT-2's) */                              \
    X(GELU_GRAD, "gelu_grad")      /* in: dy, x */                                                 \
    /* gradient helpers, created by autodiff only */                                               \
    X(RELU_GRAD, "relu_grad")      /* in: dy, x */                                                 \
    X(SIGMOID_GRAD, "sigmoid_grad") /* in: dy, y (the forward output) */                           \
    X(TANH_GRAD, "tanh_grad")      /* in: dy, y */                                                 \
    X(ABS_GRAD, "abs_grad")         /* in: dy, x (devices/act.h) */                                \
    X(SOFTPLUS_GRAD, "softplus_grad") /* in: dy, x */                                              \
    X(LOG_SIGMOID_GRAD, "log_sigmoid_grad") /* in: dy, x */                                        \
    X(SILU_GRAD, "silu_grad")       /* in: dy, x */                                                \
    X(ELU_GRAD, "elu_grad")         /* in: dy, y */                                                \
    X(SOFTMAX_GRAD, "softmax_grad") /* in: dy, y; attr0 mask, as softmax */                        \
    X(LOG_SOFTMAX_GRAD, "log_softmax_grad") /* in: dy, y (log-probs) */                            \
    X(XENT_GRAD, "softmax_xent_grad") /* in: logits, labels, dy[N]; out [N,C] */                   \
    X(MAX_GRAD, "max_grad")        /* in: dy(keepdims shape), x, y(keepdims); attr0 axis */        \
    X(CONV2D_GRAD_X, "conv2d_grad_x") /* in: dy, w; attrs as conv2d, list: x's shape */            \
    X(CONV2D_GRAD_W, "conv2d_grad_w") /* in: dy, x; attrs as conv2d, list: w's shape */            \
    X(MAXPOOL_GRAD, "maxpool2d_grad") /* in: dy, x; out x's type; attrs as maxpool2d; i3 relu */   \
    X(AVGPOOL_GRAD, "avgpool2d_grad") /* in: dy; attr list: x's shape; attrs as pool */            \
    X(DROPOUT_GRAD, "dropout_grad") /* in: dy; attrs as dropout, i2 = forward node id */           \
    X(RANDOM, "random")            /* in: any tensor, for its shape; fresh numbers each run */     \
    /* ids drawn afresh each run from rows of weights: in f32[K] (a table) or f32[R,K]           \
       (logits, softmax'd); out i32[list], its numel/R draws per row (devices/draw.h) */          \
    X(CATEGORICAL, "categorical")  /* i0 OP_DRAW_WEIGHTS or _LOGITS, i1 key, list: out shape */   \
    X(GATHER_GRAD, "gather_grad")  /* in: dy, ids; attr list: table shape; scatter-add */          \
    X(SLICE_GRAD, "slice_grad")    /* in: dy; attr list: x's shape; attrs as slice */              \
    /* updates: write in[0], a VARIABLE, in place; out is a 0-byte token f32[0];                   \
       attr i5 = locking (hold the variable's lock around the update).  Optimizer updates          \
       end with two f32[] inputs, read on the device each run: lr, and gscale (the gradient        \
       is used as gscale * grad: global-norm clipping, else a constant 1) */                       \
    X(APPLY_SGD, "apply_sgd")      /* in: var, grad, lr, gscale */                                 \
    /* gather's sparse gradient under sgd: var[ids[i]] -= lr * gscale * dy[i] */                   \
    X(APPLY_SGD_ROWS, "apply_sgd_rows") /* in: var[V,D], dy[...,D], ids i32[...], lr, gscale */    \
    X(APPLY_MOMENTUM, "apply_momentum") /* in: var, grad, slot, lr, gscale; f1 m, i2 nesterov */   \
    /* its rows (lazy, as TF's sparse momentum): only the ids' rows and slot rows move */          \
    X(APPLY_MOMENTUM_ROWS, "apply_momentum_rows") /* in: var, dy, ids, slot, lr, gscale */         \
    /* f4 weight decay (adamw): var -= lr * wd * var first, decoupled from the Adam step */        \
    X(APPLY_ADAM, "apply_adam")    /* in: var, grad, m, v, step, lr, gscale; f1 b1 f2 b2 f3 eps */ \
    /* its rows (lazy, as LazyAdam); a repeated id's rows are summed, then applied once */         \
    X(APPLY_ADAM_ROWS, "apply_adam_rows") /* in: var, dy, ids, m, v, step, lr, gscale */           \
    /* PyTorch's RMSprop: in: var, grad, v, then mom when f2 m != 0, then mg when i0 centered,    \
       lr, gscale; f1 rho, f3 eps, f4 weight decay (L2: g += wd * var first) */                   \
    X(APPLY_RMSPROP, "apply_rmsprop")                                                              \
    X(APPLY_RMSPROP_ROWS, "apply_rmsprop_rows") /* in: var, dy, ids, slots, lr, gscale */          \
    X(APPLY_ADAGRAD, "apply_adagrad") /* in: var, grad, s, lr, gscale; f3 eps, f4 wd */            \
    X(APPLY_ADAGRAD_ROWS, "apply_adagrad_rows") /* in: var, dy, ids, s, lr, gscale */              \
    X(APPLY_ADADELTA, "apply_adadelta") /* in: var, grad, v, u, lr, gscale; f1 rho f3 eps f4 wd */ \
    X(APPLY_ADADELTA_ROWS, "apply_adadelta_rows") /* in: var, dy, ids, v, u, lr, gscale */         \
    X(ASSIGN_ADD, "assign_add")    /* in: var, x; var += x (step counters, tests) */               \
    X(GROUP, "group")              /* waits for its inputs; out is a 0-byte token */               \
    X(ASSIGN, "assign")            /* in: var, x; var = f0 * var + (1 - f0) * x (f0 = 0: a copy) */ \
    /* distributed sync training: in: gradients; out: their mean over the processes              \
       (kern_args.comm), as the input's type for one, packed into f32[total] for more;          \
       attr0: its place in the sequence of calls; on the host only */                            \
    X(ALLREDUCE, "allreduce")                                                                      \
    /* optimizer helpers, created by autodiff only */                                              \
    /* the learning rate of step in[0] (f32[], the counter after its increment): i0 kind           \
       (0 warmup then constant, 1 linear, 2 cosine), f1 lr, f2 min, i3 warmup, i4 steps */         \
    X(LR_SCHEDULE, "lr_schedule")  /* in: step f32[]; out f32[] */                                 \
    X(CLIP_SCALE, "clip_scale")    /* in: gradients...; f0 clip; out f32[] min(1, clip / norm) */  \
    /* a row gradient made exact for clip_scale: out[r] = the sum of the rows of ids[r]            \
       at the id's first place r, 0 at its repeats (its squares: the dense table's) */             \
    X(ROWS_SUM, "rows_sum")        /* in: dy[...,D], ids i32[...]; out f32[n,D] */                 \
    /* fusions, created by passes only */                                                          \
    X(MATMUL_BIAS, "matmul_bias")  /* in: a, b, bias[N]; attr0/1 as matmul, attr2 relu */        \
    X(CONV2D_BIAS, "conv2d_bias")  /* in: x, w, bias[1,OC,1,1]; attr0/1 as conv2d, attr2 relu */   \
    /* apply_sgd(var, matmul(a, b)): var -= lr * a@b, one GEMM accumulating into the variable */  \
    X(APPLY_SGD_MATMUL, "apply_sgd_matmul") /* in: var, a, b; f0 lr, i1/i2 transpose_a/b */        \
    /* apply_sgd(var, allreduce(grad)): var -= lr * gscale * the mean of grad over the             \
       processes, applied as the allreduce copies the mean out; attr0 as allreduce's; host only */ \
    X(APPLY_SGD_ALLREDUCE, "apply_sgd_allreduce") /* in: var, grad, lr, gscale */
// clang-format on

typedef enum op_kind {
#define OP_ENUM(id, name) OP_##id,
    OPS_LIST(OP_ENUM)
#undef OP_ENUM
        OP_COUNT
} op_kind;

/* The attribute slots, by name.  A node's attribute j lives in attr.i[j]
 * (ints, bools, dtypes, choices) or attr.f[j] (floats), as its op's
 * ops_table[op].attrs[j] says (ops.c); attr.list is the one list.  Code reads
 * a slot by its name here, never by its number.  Slots not named are unused.
 *   op (family)              slot                        holds
 *   const                    f ATTR_CONST_VALUE          the fill value (no cdata)
 *   data                     i ATTR_DATA_WHICH           0 = x, 1 = y
 *                            i ATTR_DATA_INDEX           the data source (-> node->data)
 *   matmul, matmul_bias      i ATTR_TRANS_A, ATTR_TRANS_B  transpose a, b
 *   matmul                   i ATTR_MM_STEP              a step of lstm_seq/gru_seq (internal:
 *                                                        autodiff merges such GEMMs' weight
 *                                                        gradients)
 *   matmul_bias, conv2d_bias i ATTR_BIAS_RELU            relu after the bias
 *   apply_sgd_matmul         f ATTR_SGDMM_LR             the learning rate
 *                            i ATTR_SGDMM_TRANS_A, _B    transpose a (in[1]), b (in[2])
 *   softmax, softmax_grad    i ATTR_MASK                 OP_MASK_*
 *   sum mean max max_grad    i ATTR_AXIS                 OP_AXIS_ALL or 0..rank-1
 *     argmax concat slice slice_grad layernorm(+_grad, _grad_params): ATTR_AXIS too
 *   sum mean max max_grad    i ATTR_KEEPDIMS             keep the reduced axis
 *   slice, slice_grad        i ATTR_SLICE_BEGIN, _END    [begin, end) along the axis
 *                            list                        slice_grad: x's shape
 *   cast                     i ATTR_CAST_DTYPE           the target ir_dtype
 *   one_hot                  i ATTR_DEPTH                classes
 *   conv2d and its family    i ATTR_CONV_STRIDE          stride (0 reads as 1)
 *                            i ATTR_CONV_PAD             zero padding
 *                            list                        grads: x's / w's shape
 *   maxpool2d avgpool2d (+_grad) i ATTR_POOL_SIZE        the window
 *                            i ATTR_POOL_STRIDE          stride (0 = size)
 *                            i ATTR_POOL_PAD             OP_PAD_SAME, or the padding of
 *                                                        each side (0: "valid")
 *                            list                        grads: x's shape
 *   maxpool2d_grad           i ATTR_POOL_RELU            a relu after the pool, fused
 *   dropout, dropout_grad    f ATTR_DROPOUT_RATE         the rate
 *                            i ATTR_DROPOUT_TRAINING     0 = identity
 *                            i ATTR_DROPOUT_KEY          the forward node's id: the mask
 *   random                   i ATTR_RANDOM_KIND          OP_RANDOM_UNIFORM, _NORMAL, _BERNOULLI
 *                            i ATTR_RANDOM_KEY           its node id: its numbers' key
 *                            f ATTR_RANDOM_A, _B         [low, high), mean and std, or p
 *   categorical              i ATTR_RANDOM_KIND          OP_DRAW_WEIGHTS or _LOGITS
 *                            i ATTR_RANDOM_KEY           its node id, as random's
 *                            list                        the output's shape
 *   layernorm (+_grad, _grad_params) f ATTR_NORM_EPS     eps
 *   lrn, lrn_grad            i ATTR_LRN_RADIUS           depth_radius: 2r + 1 channels
 *                            f ATTR_LRN_BIAS, _ALPHA, _BETA  the rest of the formula
 *   rope, rope_grad          f ATTR_ROPE_BASE            the base of the frequencies
 *   batchnorm_stats batchnorm_apply (+_grad, _grad_params) i ATTR_AXIS  1, the channels
 *   batchnorm_apply batchnorm_grad f ATTR_NORM_EPS       eps
 *   batchnorm_grad           i ATTR_BN_BATCH             1: stats are batchnorm_stats of x
 *   batchnorm_apply          i ATTR_BN_RELU              a relu after it, fused
 *   batchnorm_grad(_params)  i ATTR_BN_RELU              a relu_grad before them, fused: a
 *                                                        last input y, dy passed where y > 0
 *   reshape broadcast sum_to gather_grad  list           the output's shape
 *   transpose                list                        the permutation (empty: reverse)
 *   every update (OPF_UPDATE) i ATTR_LOCKING             hold the variable's lock
 *   apply_momentum           f ATTR_MOMENTUM_M           momentum
 *                            i ATTR_NESTEROV             Nesterov's variant
 *   apply_momentum_rows      as apply_momentum
 *   apply_adam (+_rows)      f ATTR_ADAM_B1, _B2, _EPS   betas and eps
 *                            f ATTR_ADAM_WD              decoupled weight decay
 *   apply_sgd apply_momentum (+_rows), and the three below f ATTR_WD  L2 weight decay
 *   apply_rmsprop (+_rows)   f ATTR_RHO, ATTR_RMS_M, ATTR_EPS  decay, momentum, eps
 *                            i ATTR_RMS_CENTERED         the centered variant
 *   apply_adagrad (+_rows)   f ATTR_EPS                  eps
 *   apply_adadelta (+_rows)  f ATTR_RHO, ATTR_EPS        decay and eps
 *   allreduce, apply_sgd_allreduce i ATTR_BUCKET         its place in the sequence
 *   lr_schedule              i ATTR_LR_KIND              op_lr_kind
 *                            f ATTR_LR_LR, ATTR_LR_MIN   peak and final rates
 *                            i ATTR_LR_WARMUP, _STEPS    warmup steps, total steps (the
 *                                                        period of step_decay, exponential)
 *                            f ATTR_LR_FACTOR            their factor per period
 *   clip_scale               f ATTR_CLIP                 the global-norm bound
 *   assign                   f ATTR_ASSIGN_DECAY         the moving average's decay (0: copy) */
enum op_attr_slot {
    ATTR_CONST_VALUE = 0,
    ATTR_DATA_WHICH = 0,
    ATTR_DATA_INDEX = 1,
    ATTR_TRANS_A = 0,
    ATTR_TRANS_B = 1,
    ATTR_BIAS_RELU = 2,
    ATTR_MM_STEP = 2,
    ATTR_SGDMM_LR = 0,
    ATTR_SGDMM_TRANS_A = 1,
    ATTR_SGDMM_TRANS_B = 2,
    ATTR_MASK = 0,
    ATTR_AXIS = 0,
    ATTR_KEEPDIMS = 1,
    ATTR_SLICE_BEGIN = 1,
    ATTR_SLICE_END = 2,
    ATTR_CAST_DTYPE = 0,
    ATTR_DEPTH = 0,
    ATTR_CONV_STRIDE = 0,
    ATTR_CONV_PAD = 1,
    ATTR_POOL_SIZE = 0,
    ATTR_POOL_STRIDE = 1,
    ATTR_POOL_PAD = 2,
    ATTR_POOL_RELU = 3,
    ATTR_DROPOUT_RATE = 0,
    ATTR_DROPOUT_TRAINING = 1,
    ATTR_DROPOUT_KEY = 2,
    ATTR_RANDOM_KIND = 0,
    ATTR_RANDOM_KEY = 1,
    ATTR_RANDOM_A = 2,
    ATTR_RANDOM_B = 3,
    ATTR_NORM_EPS = 1,
    ATTR_LRN_RADIUS = 0,
    ATTR_LRN_BIAS = 1,
    ATTR_LRN_ALPHA = 2,
    ATTR_LRN_BETA = 3,
    ATTR_ROPE_BASE = 0,
    ATTR_BN_BATCH = 2,
    ATTR_BN_RELU = 3,
    ATTR_LOCKING = 5,
    ATTR_MOMENTUM_M = 1,
    ATTR_NESTEROV = 2,
    ATTR_ADAM_B1 = 1,
    ATTR_ADAM_B2 = 2,
    ATTR_ADAM_EPS = 3,
    ATTR_ADAM_WD = 4,
    ATTR_WD = 4, /* sgd, momentum, rmsprop, adagrad, adadelta (+_rows): L2, g += wd * var */
    ATTR_RMS_CENTERED = 0,
    ATTR_RHO = 1,
    ATTR_RMS_M = 2,
    ATTR_EPS = 3,
    ATTR_BUCKET = 0,
    ATTR_LR_KIND = 0,
    ATTR_LR_LR = 1,
    ATTR_LR_MIN = 2,
    ATTR_LR_WARMUP = 3,
    ATTR_LR_STEPS = 4, /* step_decay, exponential: the period */
    ATTR_LR_FACTOR = 5,
    ATTR_CLIP = 0,
    ATTR_ASSIGN_DECAY = 0,
};

/* lr_schedule's attr i0: the shape of the schedule (devices/optim.h). */
typedef enum op_lr_kind {
    OP_LR_WARMUP,
    OP_LR_LINEAR,
    OP_LR_COSINE,
    OP_LR_STEP, /* step_decay: times the factor after every period */
    OP_LR_EXP   /* exponential: the factor per period, continuously */
} op_lr_kind;
/* clip_scale's kernels sum squares in chunks of this many elements of one
 * gradient, whatever the threads, then add the chunks' sums (doubles, in
 * its scratch) in order: the same bits on every run. */
#define OP_CLIP_CHUNK 16384

struct ir_graph;
struct ir_node;

typedef enum attr_kind {
    ATTR_NONE,
    ATTR_INT,
    ATTR_FLOAT,
    ATTR_BOOL,
    ATTR_LIST,
    ATTR_DTYPE,
    ATTR_CHOICE, /* a string of the language, one of `choices`; the slot holds its index */
    ATTR_PAD     /* "same" (OP_PAD_SAME), "valid" (0) or an integer >= 0 */
} attr_kind;

typedef struct op_attr {
    const char *name; /* keyword in the language, e.g. "axis" */
    attr_kind kind;
    double def;                 /* default (ints too); NAN = required */
    const char *const *choices; /* ATTR_CHOICE: the strings, NULL-ended */
} op_attr;

/* softmax's mask= (ATTR_CHOICE): causal masks the scores of the last axis
 * past the position on the axis before it (j > i in a [..., T, T] block). */
enum { OP_MASK_NONE, OP_MASK_CAUSAL };
/* A pool's padding= "same": TensorFlow's, the output ceil(in / stride)
 * and the padding max((out - 1) * stride + size - in, 0) split with the
 * extra one after (bottom, right).  A padding p >= 0 pads p on every side
 * (PyTorch's, p <= size / 2), and "valid" is 0.  Padded cells are never
 * read: a max is over the window's cells inside the input, an average
 * divides by their count. */
#define OP_PAD_SAME (-1)
/* The padding before the first row (column) of a pool whose input has `in`
 * of them and its output `out`: for the shape rule and every device. */
static inline long long ops_pool_pad_begin(long long pad, long long in, long long out,
                                           long long size, long long stride)
{
    long long total = (out - 1) * stride + size - in;
    return pad != OP_PAD_SAME ? pad : total > 0 ? total / 2 : 0;
}
/* lrn and lrn_grad on the CPU take the positions of an image this many at
 * a time (a 14x14 image in one: contiguous rows of every channel), lrn_grad
 * with two [C, OP_LRN_CHUNK] floats of scratch per task (ops.c). */
#define OP_LRN_CHUNK 256
/* random's attr i0. */
enum { OP_RANDOM_UNIFORM, OP_RANDOM_NORMAL, OP_RANDOM_BERNOULLI };
/* categorical's attr i0: a table of non-negative weights, or logits. */
enum { OP_DRAW_WEIGHTS, OP_DRAW_LOGITS };
/* categorical sums a row's weights in chunks of this many (devices/draw.h). */
#define OP_CDF_CHUNK 256
extern const char *const ops_mask_names[];

/* Shape rule: fills g->nodes[id].type from its inputs and attrs, or reports
 * an error at the node's span and returns -1. */
typedef int (*op_shape_fn)(struct ir_graph *g, int id);
/* Gradient rule: given dy (the gradient of the node's output), writes the
 * gradient node for input k into dx[k] (-1: no gradient).  Returns -1 on
 * error. NULL in the table = not differentiable. */
typedef int (*op_grad_fn)(struct ir_graph *g, int id, int dy, int *dx);
/* Extra per-node temporary memory the kernel needs (im2col buffers...). */
typedef size_t (*op_scratch_fn)(const struct ir_graph *g, int id);

/* Estimated work of a node (multiply-adds for GEMM-like ops), used by the
 * executor to balance independent nodes across threads. */
typedef double (*op_cost_fn)(const struct ir_graph *g, int id);

/* What code elsewhere may ask of an op; no list of ops is written anywhere
 * but in the registry. */
enum op_flag {
    OPF_PUBLIC = 1 << 0,      /* callable from the language by name (ops_lookup) */
    OPF_SOURCE = 1 << 1,      /* no inputs and no kernel: the executor provides its buffer
                                 (a constant filled once, a feed, a data batch, a variable) */
    OPF_EXTERNAL = 1 << 2,    /* its buffer lives outside the arena (variable store, reader ring) */
    OPF_STATEFUL = 1 << 3,    /* depends on or changes state beyond its inputs (variables,
                                 feeds, data cursors, the step for dropout, a barrier): never
                                 folded or merged */
    OPF_UPDATE = 1 << 4,      /* writes in[0], a variable, in place (ATTR_LOCKING) */
    OPF_ELEMENTWISE = 1 << 5, /* fusable unary/binary elementwise */
    OPF_PER_RUN = 1 << 6,     /* its kernel reads the run counter (dropout's mask, random
                                 draws): kern_args.step, or on an async device *step_dev,
                                 which the executor sets each step, so that a step graph
                                 (replaying the arguments it recorded) draws anew */
};

typedef struct op_info {
    int arity; /* -1: variadic (concat, group) */
    unsigned flags;
    op_attr attrs[6];
    op_shape_fn shape;
    op_grad_fn grad;
    op_scratch_fn scratch;
    op_cost_fn cost; /* NULL: elements read and written */
} op_info;

extern const op_info ops_table[OP_COUNT];
/* The op's name in the language and in dumps ("matmul"). */
const char *ops_name(op_kind op);
/* ops_table[op].flags & flag, as 0 or 1. */
int ops_has(op_kind op, unsigned flag);
/* Whether op steps its variable by a learning rate: an update but assign
 * and assign_add (step counters, averages). */
int ops_has_lr(op_kind op);
/* Op callable from the language by name, or -1. Only ops whose name is
 * public (not the gradient helpers) are found. */
int ops_lookup(const char *name);
/* ops_table[op].cost, or elements read plus written. */
double ops_cost(const struct ir_graph *g, int id);

#endif
