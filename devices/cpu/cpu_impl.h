/* cpu_impl.h - the CPU device's math, one family per cpu_*.c file.
 *
 * kernels.c unpacks kern_args and calls these.  Every function takes plain
 * buffers, shapes and a pool (NULL = serial), so it knows nothing of the
 * graph.  All element types are 4 bytes (f32 or i32), so shape-only ops
 * (copy, transpose, concat, slice) move 4-byte words whatever the dtype.
 * Buffers never alias unless a function says so. */
#ifndef GR_CPU_IMPL_H
#define GR_CPU_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x in straight-line code that vectorises (libm's expf is a call):
 * x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, e^r by its Taylor
 * polynomial to r^7 (truncation below 1e-8), 2^n from the exponent bits.
 * Within 1e-7 of e^x relative; x is clamped to [-87, 80], so the result is
 * a normal float (a NaN x comes out as e^-87), and so is 1 / (1 + e^x): GCC
 * computes each clamp's case from its constant whatever x is, and a
 * denormal there (1 / e^88 is one) costs a microcode assist per vector, 3x
 * the time of gelu. */
static inline float cpu_exp_vec(float x)
{
    x = x > -87.0f ? x : -87.0f;
    x = x < 80.0f ? x : 80.0f;
    float n = (x * 1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;         /* round to nearest */
    float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f; /* ln2 in two parts */
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* e^x, a NaN passed on (act.h's sigmoid on the CPU). */
static inline float cpu_exp_nan(float x)
{
    return x != x ? x : cpu_exp_vec(x);
}

/* tanh(x) in straight-line code that vectorises: for |x| < 0.3 its odd
 * Taylor polynomial to x^11 (truncation below 1e-9 relative), beyond it
 * (1 - e) / (1 + e) with e = e^-2|x| <= 0.55 (no cancellation: within
 * 2e-7 relative), the sign of x, and a NaN passed on. */
static inline float cpu_tanh_vec(float x)
{
    float a = fabsf(x), x2 = x * x;
    float p = -1382.0f / 155925;
    p = p * x2 + 62.0f / 2835;
    p = p * x2 - 17.0f / 315;
    p = p * x2 + 2.0f / 15;
    p = p * x2 - 1.0f / 3;
    float small = x + x * x2 * p;
    float e = cpu_exp_vec(-2.0f * a), big = copysignf((1.0f - e) / (1.0f + e), x);
    float y = a < 0.3f ? small : big;
    return x != x ? x : y;
}

#define ACT_EXPF  cpu_exp_nan
#define ACT_TANHF cpu_tanh_vec
#include "../act.h"
#include "../bcast.h"
#include "../optim.h"
#include "base/fatal.h"
#include "cpu.h"

/* Below this many elements a loop is not worth splitting over the pool. */
#define CPU_PAR_MIN 65536

/* Elements of a type: ir_numel inline and without its check (every type a
 * kernel sees was checked when it was made). */
static inline int64_t cpu_numel(const ir_type *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->dim[d];
    return n;
}

/* ---- parallel helpers (pool.c) ---- */
typedef void (*cpu_range_fn)(void *ctx, int64_t lo, int64_t hi);
/* Splits [0, n) into chunks of at least `grain` over the pool and calls fn on
 * each; serial when the pool is NULL or n <= grain. */
void cpu_par_range(cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);

/* ---- broadcasting iterator (cpu_elementwise.c) ----
 * Output is contiguous; a and b are read with per-axis strides that are 0
 * on broadcast axes.  Axes are coalesced, so the common cases (same shape,
 * scalar, bias row, NCHW channel) become one or two flat loops whose inner
 * strides are 0 or 1. */
typedef bcast_axes cpu_bcast; /* made by bcast_plan (b may be NULL: a unary broadcast) */
/* Row callback: out offset, a offset, b offset, run length. */
typedef void (*cpu_row_fn)(void *ctx, int64_t o, int64_t ia, int64_t ib, int64_t len);
void cpu_bcast_walk(const cpu_bcast *bc, int64_t lo, int64_t hi, cpu_row_fn fn, void *ctx);

/* ---- elementwise (cpu_elementwise.c) ----
 * Each family is one list, one line per op.  The list generates the loops
 * (cpu_elementwise.c) and the op's row in the kernel table (kernels.c), so
 * no op can have a row without a loop, and nothing dispatches on op with a
 * fallback.  In the expressions x and y are the operands; dy and v are a
 * gradient and the forward value it needs. */
/* op, f32 expression, i32 expression (wrapping; i32 division by 0 is 0) */
#define CPU_ARITH(X)                                                                               \
    X(ADD, x + y, (int32_t)((uint32_t)x + (uint32_t)y))                                            \
    X(SUB, x - y, (int32_t)((uint32_t)x - (uint32_t)y))                                            \
    X(MUL, x *y, (int32_t)((uint32_t)x * (uint32_t)y))                                             \
    X(DIV, x / y, cpu_div_i32(x, y))                                                               \
    X(MAXIMUM, act_maximum(x, y), act_maximum_i32(x, y))                                           \
    X(MINIMUM, act_minimum(x, y), act_minimum_i32(x, y))
/* op, f32 expression: binaries defined on f32 only (ops_shape_binary_f32) */
#define CPU_ARITH_F32(X) X(POW, powf(x, y))
/* op, expression: f32 0/1 out for f32 and i32 operands */
#define CPU_COMPARE(X)                                                                             \
    X(EQ, x == y) X(NE, x != y) X(LT, x < y) X(GT, x > y) X(LE, x <= y) X(GE, x >= y)
/* op, f32 expression (neg also has an i32 loop: ops_shape_unary_any) */
#define CPU_UNARY(X)                                                                               \
    X(NEG, -x)                                                                                     \
    X(EXP, expf(x))                                                                                \
    X(LOG, logf(x))                                                                                \
    X(SQRT, sqrtf(x))                                                                              \
    X(RELU, x > 0.0f ? x : 0.0f)                                                                   \
    X(SIGMOID, act_sigmoid(x))                                                                     \
    X(TANH, cpu_tanh_vec(x))                                                                       \
    X(GELU, cpu_gelu(x))                                                                           \
    X(ABS, fabsf(x))                                                                               \
    X(SIN, sinf(x))                                                                                \
    X(COS, cosf(x))                                                                                \
    X(SOFTPLUS, act_softplus(x))                                                                   \
    X(LOG_SIGMOID, act_log_sigmoid(x))                                                             \
    X(SILU, act_silu(x))                                                                           \
    X(ELU, act_elu(x))
/* op, expression of dy and v (relu, gelu: v = x; sigmoid, tanh: v = the output) */
#define CPU_ACT_GRAD(X)                                                                            \
    X(RELU_GRAD, v > 0.0f ? dy : 0.0f)                                                             \
    X(SIGMOID_GRAD, dy *v *(1.0f - v))                                                             \
    X(TANH_GRAD, dy *(1.0f - v * v))                                                               \
    X(GELU_GRAD, dy *cpu_gelu_grad(v))                                                             \
    X(ABS_GRAD, act_abs_grad(dy, v))                                                               \
    X(SOFTPLUS_GRAD, act_softplus_grad(dy, v))                                                     \
    X(LOG_SIGMOID_GRAD, act_log_sigmoid_grad(dy, v))                                               \
    X(SILU_GRAD, act_silu_grad(dy, v))                                                             \
    X(ELU_GRAD, act_elu_grad(dy, v))

/* GPT-2's gelu, the tanh approximation 0.5 x (1 + tanh(u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3), computed as x * s, s = sigmoid(2u)
 * (1 + tanh(u) = 2 sigmoid(2u)): no cancellation, and it vectorises.  Its
 * derivative is s + x s (1 - s) 2u'. */
#define CPU_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
static inline float cpu_gelu(float x)
{
    float u = CPU_GELU_K * (x + 0.044715f * x * x * x);
    return x / (1.0f + cpu_exp_vec(-2.0f * u));
}
static inline float cpu_gelu_grad(float x)
{
    float u = CPU_GELU_K * (x + 0.044715f * x * x * x);
    float s = 1.0f / (1.0f + cpu_exp_vec(-2.0f * u));
    return s + 2.0f * x * s * (1.0f - s) * CPU_GELU_K * (1.0f + 0.134145f * x * x);
}

/* i32 division: x/0 and INT_MIN/-1 trap on x86, so define them as 0 / wrap. */
static inline int32_t cpu_div_i32(int32_t x, int32_t y)
{
    if (y == 0) return 0;
    if (y == -1) return (int32_t)(0u - (uint32_t)x);
    return x / y;
}

/* Broadcasting binaries (CPU_ARITH, CPU_COMPARE) by op; at is a's type (a
 * and b share a dtype). */
void cpu_binary(cpu_pool *p, op_kind op, void *out, const ir_type *ot, const void *a,
                const ir_type *at, const void *b, const ir_type *bt);
/* CPU_UNARY by op; dt: the element type (f32, or i32 for neg). */
void cpu_unary(cpu_pool *p, op_kind op, ir_dtype dt, void *out, const void *x, int64_t n);
/* CPU_ACT_GRAD by op: out = f(dy, v) elementwise. */
void cpu_act_grad(cpu_pool *p, op_kind op, float *out, const float *dy, const float *v, int64_t n);
/* out = c != 0 ? a : b, elementwise over n 4-byte elements (f32 or i32). */
void cpu_where(cpu_pool *p, void *out, const float *c, const void *a, const void *b, int64_t n);
void cpu_copy(cpu_pool *p, void *out, const void *in, int64_t n);
void cpu_fill_f32(float *out, float v, int64_t n);
/* x = max(x, 0), NaN -> 0 (as relu) */
void cpu_relu_inplace(float *x, int64_t n);
void cpu_cast_f32_i32(int32_t *out, const float *in, int64_t n);
void cpu_cast_i32_f32(float *out, const int32_t *in, int64_t n);
/* Dropout: the mask depends only on (seed, step, i), so forward and backward
 * agree without storing it. */
/* random's numbers (devices/dropout.h random_at) for the step's key. */
void cpu_random(cpu_pool *p, float *out, int64_t n, uint64_t key, int kind, float a, float b);
void cpu_dropout(cpu_pool *p, float *out, const float *x, int64_t n, float rate, uint64_t seed,
                 uint64_t step);

/* ---- draws (cpu_draw.c) ----
 * categorical's ids (devices/draw.h): out[r * per + j] for j < per from
 * row r of x f32[rows, k], weights or logits; scratch as
 * ops_scratch_categorical says. */
typedef struct cpu_draw_shape {
    int64_t rows, k, per;
    int logits;
} cpu_draw_shape;
void cpu_categorical(cpu_pool *p, int32_t *out, const float *x, const cpu_draw_shape *s,
                     uint64_t key, double *scratch);

/* ---- reductions (cpu_reduce.c) ----
 * An axis reduction views x as [outer, n, inner]. */
void cpu_reduce_dims(const ir_type *t, int64_t axis, int64_t *outer, int64_t *n, int64_t *inner);
void cpu_sum(cpu_pool *p, float *out, const float *x, int64_t outer, int64_t n, int64_t inner,
             int mean);
void cpu_max(cpu_pool *p, float *out, const float *x, int64_t outer, int64_t n, int64_t inner);
void cpu_argmax(int32_t *out, const float *x, int64_t outer, int64_t n, int64_t inner);
void cpu_max_grad(float *out, const float *dy, const float *x, const float *y, int64_t outer,
                  int64_t n, int64_t inner);
/* out (shape ot) = x (shape xt) summed over the axes that were broadcast. */
void cpu_sum_to(float *out, const ir_type *ot, const float *x, const ir_type *xt);
/* out (shape ot) = x (shape xt) broadcast; 4-byte elements. */
void cpu_broadcast(cpu_pool *p, void *out, const ir_type *ot, const void *x, const ir_type *xt);

/* ---- softmax family, rows of length c (cpu_softmax.c) ----
 * causal: the rows are [..., c, c] blocks of scores and row i of a block
 * keeps its first i + 1 entries; the rest come out 0 (softmax only: log
 * must be 0). */
void cpu_softmax(cpu_pool *p, float *out, const float *x, int64_t rows, int64_t c, int log,
                 int causal);
void cpu_softmax_grad(cpu_pool *p, float *out, const float *dy, const float *y, int64_t rows,
                      int64_t c, int log, int causal);
/* Sum and dot product of a row, 8 partial sums (vectorised), inline: the
 * row loops of softmax and layernorm call them once a row. */
static inline float cpu_row_sum(const float *restrict x, int64_t c)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= c; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (; i < c; i++) s += x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

static inline float cpu_row_dot(const float *restrict x, const float *restrict y, int64_t c)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= c; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j] * y[i + j];
    float s = 0.0f;
    for (; i < c; i++) s += x[i] * y[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

void cpu_xent(float *out, const float *logits, const int32_t *labels, int64_t rows, int64_t c);
void cpu_xent_grad(cpu_pool *p, float *out, const float *logits, const int32_t *labels,
                   const float *dy, int64_t rows, int64_t c);
float cpu_mse(const float *pred, const float *target, int64_t n);

/* ---- GEMM (cpu_gemm.c) ---- */
typedef struct cpu_gemm_args {
    int64_t m, n, k;
    int trans_a, trans_b;
    const float *a, *b;
    const float *bias; /* NULL: plain matmul */
    int relu;
    float *c;
    int accumulate; /* c += alpha * a@b (no bias, no relu) */
    float alpha;
} cpu_gemm_args;
void cpu_matmul(cpu_pool *p, const cpu_gemm_args *g);
/* AVX-512 GEMM (cpu_sgemm.c), row-major: c = alpha op(a) op(b), + c when
 * add; for the products cpu_sgemm_wanted gives it (a CPU with AVX-512
 * whose BLAS runs narrower kernels).  0, or -1 when memory ran out. */
int cpu_sgemm_wanted(int64_t m, int64_t n, int64_t k);
int cpu_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
              int64_t lda, const float *b, int64_t ldb, int add, float *c, int64_t ldc);
/* `batches` products [M,K] @ [K,N], g's operands being the first batch's:
 * output batch i reads a and b at the batch offsets bc gives (a plan of the
 * batch axes, in matrices). */
void cpu_matmul_batched(cpu_pool *p, const cpu_gemm_args *g, const cpu_bcast *bc, int64_t batches);

/* ---- layer normalisation along rows of length c (cpu_norm.c) ---- */
typedef struct cpu_norm_args {
    float *out;
    const float *x, *dy, *gain, *bias;
    int64_t rows, c;
    float eps;
    int rms;       /* rmsnorm: x is not centred and there is no bias */
    void *scratch; /* layernorm_grad_params: max_tasks slices of task_bytes */
    size_t task_bytes;
    int max_tasks;
} cpu_norm_args;
/* out = (x - mean) / sqrt(var + eps) * gain + bias, per row. */
void cpu_layernorm(cpu_pool *p, const cpu_norm_args *n);
/* out = dx, from dy, x and gain (rms: rmsnorm's). */
void cpu_layernorm_grad(cpu_pool *p, const cpu_norm_args *n);
/* out[0..c) = dgain, out[c..2c) = dbias: sums over the rows of dy. */
void cpu_layernorm_grad_params(cpu_pool *p, const cpu_norm_args *n);

/* ---- local response normalisation across axis 1 of [N, C, S...] (cpu_lrn.c) ---- */
typedef struct cpu_lrn_args {
    float *out;
    const float *x, *dy; /* dy: lrn_grad's */
    int64_t n, c, s;     /* images, channels, positions of a channel */
    int64_t r;           /* depth_radius: channels k - r .. k + r */
    float bias, alpha, beta;
    void *scratch; /* lrn_grad: max_tasks slices of task_bytes (ops_scratch_lrn_grad) */
    size_t task_bytes;
    int max_tasks;
} cpu_lrn_args;
/* out = x * (bias + alpha * the sum of the window's x^2)^-beta */
void cpu_lrn(cpu_pool *p, const cpu_lrn_args *l);
/* out = dx, from dy and x */
void cpu_lrn_grad(cpu_pool *p, const cpu_lrn_args *l);

/* ---- rotary position embeddings of [rows, t, d] (cpu_rope.c) ---- */
typedef struct cpu_rope_args {
    float *out;
    const float *x;
    int64_t rows, t, d; /* d even: the pairs (i, i + d/2) */
    double base;
    int inverse; /* rope_grad: the rotation back */
} cpu_rope_args;
void cpu_rope(cpu_pool *p, const cpu_rope_args *r);

/* ---- recurrent cells, a row of units at a time (cpu_rnn.c) ---- */
typedef struct cpu_lstm_args {
    float *out;
    const float *z, *s, *dy; /* z [b, 4h] (i, f, g, o), s [b, 2h] (h, c); dy: the gradient's */
    int64_t b, h;
} cpu_lstm_args;
/* out [b, 2h]: h', c' */
void cpu_lstm_cell(cpu_pool *p, const cpu_lstm_args *l);
/* out [b, 6h]: dz, then ds (its h half 0), from dy [b, 2h] */
void cpu_lstm_cell_grad(cpu_pool *p, const cpu_lstm_args *l);
typedef struct cpu_gru_args {
    float *out;
    const float *gx, *gh, *h, *dy; /* gx, gh [b, 3h] (r, z, n), h [b, h]; dy: the gradient's */
    int64_t b, hh;
} cpu_gru_args;
/* out [b, h]: h' */
void cpu_gru_cell(cpu_pool *p, const cpu_gru_args *g);
/* out [b, 7h]: dgx, dgh, dh, from dy [b, h] */
void cpu_gru_cell_grad(cpu_pool *p, const cpu_gru_args *g);

/* ---- batch normalisation per channel of x [n, c, s] (cpu_norm.c) ---- */
typedef struct cpu_bn_args {
    float *out;
    const float *x, *dy, *gain, *bias;
    const float *stats;  /* [2, c]: mean, biased variance */
    const float *params; /* [2, c]: dgain, dbias (cpu_bn_grad) */
    const float *y;      /* the grads' fused relu_grad: dy counts where y > 0 (NULL: all) */
    int64_t n, c, s;     /* s = H*W of [N,C,H,W], 1 for [N,C] */
    float eps;
    int batch; /* cpu_bn_grad: stats are x's own (a training step) */
    int relu;  /* cpu_batchnorm: a relu after it, fused */
} cpu_bn_args;
/* out [2, c] = the mean and biased variance of each channel of x. */
void cpu_bn_stats(cpu_pool *p, const cpu_bn_args *a);
/* out = (x - mean) / sqrt(var + eps) * gain + bias, per channel. */
void cpu_batchnorm(cpu_pool *p, const cpu_bn_args *a);
/* out [2, c] = dgain, dbias: sums of dy * xhat and dy per channel. */
void cpu_bn_grad_params(cpu_pool *p, const cpu_bn_args *a);
/* out = dx from dy, x, gain, stats and params. */
void cpu_bn_grad(cpu_pool *p, const cpu_bn_args *a);

/* ---- convolution and pooling, NCHW (cpu_conv.c) ---- */
typedef struct cpu_conv_shape {
    int64_t n, c, h, w; /* x */
    int64_t oc, kh, kw; /* w */
    int64_t oh, ow;     /* out */
    int64_t stride, pad;
} cpu_conv_shape;
typedef struct cpu_conv_ctx {
    cpu_pool *pool;
    void *scratch; /* max_tasks slices of task_bytes, or NULL (then malloc) */
    size_t task_bytes;
    int max_tasks;
} cpu_conv_ctx;
/* Up to `jobs` tasks (no more than the context allows), each with a
 * scratch slice of `need` bytes: the plan's, or our own when the plan gave
 * less (or none).  0, or -1 when memory ran out; close it either way
 * (pool.c). */
typedef struct cpu_tasks {
    char *scratch;
    size_t task_bytes;
    int n;
    void *own; /* our own scratch, freed by close */
} cpu_tasks;
int cpu_tasks_open(const cpu_conv_ctx *cx, int64_t jobs, size_t need, cpu_tasks *t);
/* The tasks cpu_tasks_open gives `jobs` jobs: at least 1. */
int cpu_tasks_count(const cpu_conv_ctx *cx, int64_t jobs);
void cpu_tasks_close(cpu_tasks *t);
static inline float *cpu_task_slice(const cpu_tasks *t, int k)
{
    return (float *)(t->scratch + t->task_bytes * (size_t)k);
}
/* bias: per output channel, or NULL; relu: max(out, 0) after it */
void cpu_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                const float *w, const float *bias, int relu);
void cpu_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx, const float *dy,
                       const float *w);
void cpu_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw, const float *dy,
                       const float *x);
/* The same by Winograd (cpu_winograd.c), for the layers conv_wino_ok takes. */
void cpu_wino_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                     const float *w, const float *bias, int relu);
void cpu_wino_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx,
                            const float *dy, const float *w);
void cpu_wino_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw,
                            const float *dy, const float *x);
/* Direct 3x3 convolutions with AVX-512 (cpu_direct.c): whether this CPU
 * runs the layer's forward pass (grad 0), input gradient (1) or filter
 * gradient (2) that way (conv_algo.h's rules; never without AVX-512, nor
 * with GR_NO_AVX512 set in the environment). */
int cpu_direct_ok(const cpu_conv_shape *s, int grad);
/* This CPU has AVX-512 (valgrind hides it) and GR_NO_AVX512 is not set. */
int cpu_has_avx512(void);
void cpu_direct_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                       const float *w, const float *bias, int relu);
void cpu_direct_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx,
                              const float *dy, const float *w);
void cpu_direct_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw,
                              const float *dy, const float *x);
typedef struct cpu_pool_shape {
    int64_t planes, h, w; /* planes = N*C */
    int64_t oh, ow, size, stride;
    int64_t pad_h, pad_w; /* padding before the first row, column (ops_pool_pad_begin) */
} cpu_pool_shape;
void cpu_maxpool(cpu_pool *p, const cpu_pool_shape *s, float *out, const float *x);
void cpu_avgpool(cpu_pool *p, const cpu_pool_shape *s, float *out, const float *x);
/* relu: a window's dy passes only when its maximum is > 0 (a relu_grad fused in) */
void cpu_maxpool_grad(cpu_pool *p, const cpu_pool_shape *s, float *dx, const float *dy,
                      const float *x, int relu);
void cpu_avgpool_grad(const cpu_pool_shape *s, float *dx, const float *dy);

/* ---- shape ops, 4-byte elements (cpu_shape.c) ---- */
void cpu_transpose(void *out, const void *in, const ir_type *it, const int64_t *perm);
/* Concatenates n inputs along axis; ot is the output type. */
void cpu_concat(void *out, const ir_type *ot, int n, const void *const *in,
                const ir_type *const *it, int64_t axis);
void cpu_slice(void *out, const void *in, const ir_type *it, int64_t axis, int64_t begin,
               int64_t len);
void cpu_slice_grad(float *dx, const ir_type *xt, const float *dy, int64_t axis, int64_t begin,
                    int64_t len);
/* Ids are in range (kernels.c checks them first: check_ids). */
void cpu_gather(float *out, const float *table, int64_t d, const int32_t *ids, int64_t n_ids);
void cpu_gather_grad(float *out, int64_t v, int64_t d, const float *dy, const int32_t *ids,
                     int64_t n_ids);
void cpu_one_hot(float *out, const int32_t *ids, int64_t n_ids, int64_t depth);

/* ---- variable updates, in place (cpu_update.c; the Hogwild! file) ----
 * lr and gs (the gradient's scale: global-norm clipping, else 1) are read
 * from the device each run by the kernels (kernels.c). */
/* wd: L2 weight decay, var -= lr * (gs * grad + wd * var); 0 for none. */
void cpu_apply_sgd(cpu_pool *p, float *var, const float *grad, int64_t n, float lr, float gs,
                   float wd);
/* g->c is the variable: c -= lr * a@b, one GEMM with beta = 1. */
void cpu_apply_sgd_matmul(cpu_pool *p, cpu_gemm_args *g, float lr);
/* var[ids[i]] -= lr * gs * rows[i] for the n ids, all in range (kernels.c). */
/* wd != 0: each id's rows summed (sc), its row stepped once, decayed. */
struct cpu_rows_scratch;
void cpu_apply_sgd_rows(float *var, const float *rows, const int32_t *ids, int64_t n, int64_t D,
                        float lr, float gs, float wd, struct cpu_rows_scratch *sc);
void cpu_apply_momentum(cpu_pool *p, float *var, const float *grad, float *accum, int64_t n,
                        float lr, float m, int nesterov, float gs, float wd);
typedef struct cpu_adam_hp {
    float lr, b1, b2, eps, t;
    float wd; /* decoupled weight decay: var *= 1 - lr * wd before the step (0: Adam) */
    float gs;
} cpu_adam_hp;
void cpu_apply_adam(cpu_pool *p, float *var, const float *grad, float *m, float *v, int64_t n,
                    const cpu_adam_hp *hp);
/* Row updates (apply_*_rows) and rows_sum group the ids in their scratch
 * (ops_scratch_rows): n sort keys, then one summed row of D floats. */
typedef struct cpu_rows_scratch {
    uint64_t *keys;
    float *sum;
} cpu_rows_scratch;
typedef struct cpu_momentum_hp {
    float lr, m, gs;
    int nesterov;
    float wd; /* L2 weight decay, on the rows that move */
} cpu_momentum_hp;
/* The dense update of each id's row (its slot rows too) with the sum of its
 * rows, once per id; ids in range (kernels.c). */
void cpu_apply_momentum_rows(float *var, const float *rows, const int32_t *ids, float *accum,
                             int64_t n, int64_t D, const cpu_momentum_hp *hp, cpu_rows_scratch *sc);
void cpu_apply_adam_rows(float *var, const float *rows, const int32_t *ids, float *m, float *v,
                         int64_t n, int64_t D, const cpu_adam_hp *hp, cpu_rows_scratch *sc);
/* rmsprop, adagrad, adadelta (kind: optim_kind): optim_step on every
 * element; slots[0..2] as optim_step's s1..s3 (NULL where it has none). */
void cpu_apply_adaptive(cpu_pool *p, int kind, float *var, const float *grad, float *const *slots,
                        int64_t n, const optim_hp *hp);
void cpu_apply_adaptive_rows(int kind, float *var, const float *rows, const int32_t *ids,
                             float *const *slots, int64_t n, int64_t D, const optim_hp *hp,
                             cpu_rows_scratch *sc);
/* out[n, D]: each id's rows summed at its first place, 0 at its repeats. */
void cpu_rows_sum(float *out, const float *rows, const int32_t *ids, int64_t n, int64_t D,
                  cpu_rows_scratch *sc);
/* x_n == 1: x is a scalar added to every element. */
void cpu_assign_add(cpu_pool *p, void *var, ir_dtype dt, const void *x, int64_t n, int64_t x_n);
void cpu_assign(cpu_pool *p, void *var, const void *x, int64_t n, size_t elt, double decay);
/* *out = min(1, clip / global norm) of the n gradients (f32, of types[k]);
 * part: a double per OP_CLIP_CHUNK elements of each (the op's scratch). */
void cpu_clip_scale(cpu_pool *p, float *out, void *const *grads, const ir_type *const *types, int n,
                    float clip, double *part);
/* *out = the learning rate at step t of lr_schedule's attributes a
 * (devices/optim.h). */
void cpu_lr_schedule(float *out, const ir_attrs *a, float t);

#endif
