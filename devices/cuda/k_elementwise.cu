// k_elementwise.cu - CUDA kernels of the elementwise family (rows for
// kernels.cu): broadcasting binaries and comparisons, unaries, activation
// gradients, copies, casts and dropout, each computing what its CPU twin in
// devices/cpu/cpu_elementwise.c computes.  +, -, *, /, sqrt and the casts
// are IEEE-exact on both, so those results are bit-identical; expf, logf
// and tanhf are CUDA's (within 2 ulp of glibc's, not equal to them).
#include "../act.h"
#include "../bcast.h"
#include "../draw.h"
#include "../dropout.h"
#include "cu_a_args.cuh"

// ---- numpy broadcasting: bcast_plan's axes, walked on the GPU ----
// out is contiguous; a and b are read with per-axis strides that are 0 on
// broadcast axes (merged axes: the usual cases cost no division).
// I: the index type, 32 bits when the output allows (64-bit division is slow).

template <typename I> struct bcast {
    int nd;
    I dim[IR_MAX_DIMS], sa[IR_MAX_DIMS], sb[IR_MAX_DIMS];
};

// bcast_plan's axes in the index type I.
template <typename I>
static void bc_init(bcast<I> *bc, const ir_type *out, const ir_type *a, const ir_type *b)
{
    bcast_axes p;
    bcast_plan(&p, out, a, b);
    bc->nd = p.nd;
    for (int d = 0; d < p.nd; d++) {
        bc->dim[d] = (I)p.dim[d];
        bc->sa[d] = (I)p.sa[d];
        bc->sb[d] = (I)p.sb[d];
    }
}

// Where output element i reads a (*ia) and b (*ib).  The outermost axis needs
// no modulo: i < numel.
template <typename I> __device__ static inline void bc_at(const bcast<I> &bc, I i, I *ia, I *ib)
{
    I oa = 0, ob = 0;
#pragma unroll
    for (int d = IR_MAX_DIMS - 1; d > 0; d--) {
        if (d >= bc.nd) continue;
        I c = i % bc.dim[d];
        i /= bc.dim[d];
        oa += c * bc.sa[d];
        ob += c * bc.sb[d];
    }
    *ia = oa + i * bc.sa[0];
    *ib = ob + i * bc.sb[0];
}

// ---- binary ops: f32 and i32 (wrapping; i32 division by 0 is 0) ----

__device__ static inline int32_t wrap(uint32_t x)
{
    return (int32_t)x;
}

struct op_add {
    __device__ float operator()(float x, float y) const { return x + y; }
    __device__ int32_t operator()(int32_t x, int32_t y) const
    {
        return wrap((uint32_t)x + (uint32_t)y);
    }
};
struct op_sub {
    __device__ float operator()(float x, float y) const { return x - y; }
    __device__ int32_t operator()(int32_t x, int32_t y) const
    {
        return wrap((uint32_t)x - (uint32_t)y);
    }
};
struct op_mul {
    __device__ float operator()(float x, float y) const { return x * y; }
    __device__ int32_t operator()(int32_t x, int32_t y) const
    {
        return wrap((uint32_t)x * (uint32_t)y);
    }
};
// cpu_div_i32: x/0 is 0, INT_MIN/-1 wraps to INT_MIN.
struct op_div {
    __device__ float operator()(float x, float y) const { return x / y; }
    __device__ int32_t operator()(int32_t x, int32_t y) const
    {
        if (y == 0) return 0;
        if (y == -1) return wrap(0u - (uint32_t)x);
        return x / y;
    }
};

struct op_maximum {
    __device__ float operator()(float x, float y) const { return act_maximum(x, y); }
    __device__ int32_t operator()(int32_t x, int32_t y) const { return act_maximum_i32(x, y); }
};
struct op_minimum {
    __device__ float operator()(float x, float y) const { return act_minimum(x, y); }
    __device__ int32_t operator()(int32_t x, int32_t y) const { return act_minimum_i32(x, y); }
};
struct op_pow {
    __device__ float operator()(float x, float y) const { return powf(x, y); }
};

// Comparisons: f32 1/0 out for f32 and i32 operands.
#define COMPARE_OP(name, e)                                                                        \
    struct name {                                                                                  \
        template <typename T> __device__ float operator()(T x, T y) const                          \
        {                                                                                          \
            return (e) ? 1.0f : 0.0f;                                                              \
        }                                                                                          \
    };
COMPARE_OP(op_eq, x == y)
COMPARE_OP(op_ne, x != y)
COMPARE_OP(op_lt, x < y)
COMPARE_OP(op_gt, x > y)
COMPARE_OP(op_le, x <= y)
COMPARE_OP(op_ge, x >= y)

template <class Op, typename TI, typename TO, typename I>
__global__ static void binary_kernel(TO *out, const TI *x, const TI *y, bcast<I> bc, I n)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        I ia, ib;
        bc_at(bc, i, &ia, &ib);
        out[i] = Op()(x[ia], y[ib]);
    }
}

template <class Op, typename TI, typename TO, typename I>
static void binary_as(const kern_args *a, int64_t n)
{
    bcast<I> bc;
    bc_init(&bc, a->out_t, a->in_t[0], a->in_t[1]);
    cua_launch(a, n, binary_kernel<Op, TI, TO, I>, (TO *)a->out, (const TI *)a->in[0],
               (const TI *)a->in[1], bc, (I)n);
}

// 32-bit indices when every offset fits: operands are no bigger than out.
template <class Op, typename TI, typename TO> static void binary(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    if (n <= INT32_MAX)
        binary_as<Op, TI, TO, uint32_t>(a, n);
    else
        binary_as<Op, TI, TO, int64_t>(a, n);
}

// a and b share a dtype (ops_shape_binary); i32 arithmetic writes i32.
template <class Op> static int k_arith(const kern_args *a)
{
    if (a->in_t[0]->dtype == DT_I32)
        binary<Op, int32_t, int32_t>(a);
    else
        binary<Op, float, float>(a);
    return 0;
}

// f32 only (ops_shape_binary_f32).
template <class Op> static int k_arith_f32(const kern_args *a)
{
    binary<Op, float, float>(a);
    return 0;
}

template <class Op> static int k_compare(const kern_args *a)
{
    if (a->in_t[0]->dtype == DT_I32)
        binary<Op, int32_t, float>(a);
    else
        binary<Op, float, float>(a);
    return 0;
}

// ---- unary ops (f32; neg also i32) ----

struct op_neg {
    __device__ float operator()(float x) const { return -x; }
    __device__ int32_t operator()(int32_t x) const { return wrap(0u - (uint32_t)x); }
};
struct op_exp {
    __device__ float operator()(float x) const { return expf(x); }
};
struct op_log {
    __device__ float operator()(float x) const { return logf(x); }
};
struct op_sqrt {
    __device__ float operator()(float x) const { return sqrtf(x); }
};
// NaN and -0 give +0, as the CPU's x > 0 ? x : 0.
struct op_relu {
    __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct op_sigmoid {
    __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct op_tanh {
    __device__ float operator()(float x) const { return tanhf(x); }
};
// GPT-2's tanh approximation, as cpu_gelu: 0.5 x (1 + tanh(u)) =
// x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
#define GELU_K 0.7978845608028654f
__device__ static inline float gelu_exp(float x) // e^(-2u)
{
    return expf(-2.0f * GELU_K * (x + 0.044715f * x * x * x));
}
struct op_gelu {
    __device__ float operator()(float x) const { return x / (1.0f + gelu_exp(x)); }
};

// The ops of devices/act.h, and libm's.
#define ACT_UNARY(name, e)                                                                         \
    struct name {                                                                                  \
        __device__ float operator()(float x) const { return e; }                                   \
    };
ACT_UNARY(op_abs, fabsf(x))
ACT_UNARY(op_sin, sinf(x))
ACT_UNARY(op_cos, cosf(x))
ACT_UNARY(op_softplus, act_softplus(x))
ACT_UNARY(op_log_sigmoid, act_log_sigmoid(x))
ACT_UNARY(op_silu, act_silu(x))
ACT_UNARY(op_elu, act_elu(x))

template <class Op, typename T> __global__ static void unary_kernel(T *out, const T *x, int64_t n)
{
    CUDA_FOR(i, n) out[i] = Op()(x[i]);
}

template <class Op, typename T> static void unary(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    cua_launch(a, n, unary_kernel<Op, T>, (T *)a->out, (const T *)a->in[0], n);
}

template <class Op> static int k_unary(const kern_args *a)
{
    unary<Op, float>(a);
    return 0;
}

static int k_neg(const kern_args *a)
{
    if (a->out_t->dtype == DT_I32)
        unary<op_neg, int32_t>(a);
    else
        unary<op_neg, float>(a);
    return 0;
}

// ---- activation gradients: out = f(dy, v); relu, gelu: v = x, sigmoid and tanh: v = y ----

struct op_relu_grad {
    __device__ float operator()(float dy, float v) const { return v > 0.0f ? dy : 0.0f; }
};
struct op_sigmoid_grad {
    __device__ float operator()(float dy, float v) const
    {
        return cua_mul(cua_mul(dy, v), 1.0f - v);
    }
};
struct op_tanh_grad {
    __device__ float operator()(float dy, float v) const
    {
        return cua_mul(dy, cua_sub(1.0f, cua_mul(v, v)));
    }
};

// v = x: dy * (s + x s (1 - s) 2u'), s = sigmoid(2u), as cpu_gelu_grad.
struct op_gelu_grad {
    __device__ float operator()(float dy, float x) const
    {
        float s = 1.0f / (1.0f + gelu_exp(x));
        return dy * (s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 0.134145f * x * x));
    }
};

#define ACT_GRAD(name, fn)                                                                         \
    struct name {                                                                                  \
        __device__ float operator()(float dy, float v) const { return fn(dy, v); }                 \
    };
ACT_GRAD(op_abs_grad, act_abs_grad)
ACT_GRAD(op_softplus_grad, act_softplus_grad)
ACT_GRAD(op_log_sigmoid_grad, act_log_sigmoid_grad)
ACT_GRAD(op_silu_grad, act_silu_grad)
ACT_GRAD(op_elu_grad, act_elu_grad)

template <class Op>
__global__ static void act_grad_kernel(float *out, const float *dy, const float *v, int64_t n)
{
    CUDA_FOR(i, n) out[i] = Op()(dy[i], v[i]);
}

template <class Op> static int k_act_grad(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    cua_launch(a, n, act_grad_kernel<Op>, (float *)a->out, (const float *)a->in[0],
               (const float *)a->in[1], n);
    return 0;
}

// ---- where: out = cond != 0 ? a : b, 4-byte elements of either dtype ----

__global__ static void where_kernel(uint32_t *out, const float *c, const uint32_t *x,
                                    const uint32_t *y, int64_t n)
{
    CUDA_FOR(i, n) out[i] = c[i] != 0.0f ? x[i] : y[i];
}

static int k_where(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    cua_launch(a, n, where_kernel, (uint32_t *)a->out, (const float *)a->in[0],
               (const uint32_t *)a->in[1], (const uint32_t *)a->in[2], n);
    return 0;
}

// ---- copies and casts (every element is 4 bytes) ----

static void copy(const kern_args *a, void *out, const void *in, int64_t n)
{
    if (out == in || n <= 0) return;
    CUDA_CHECK(cudaMemcpyAsync(out, in, (size_t)n * 4, cudaMemcpyDeviceToDevice, cuda_stream(a)),
               a);
}

// identity and reshape: the same words (a reshape only renames the shape).
static int k_copy(const kern_args *a)
{
    copy(a, a->out, a->in[0], ir_numel(a->out_t));
    return 0;
}

// cpu_cast_f32_i32: truncates toward zero, saturates (2147483520 is the
// largest float below 2^31) and maps NaN to 0.
__global__ static void cast_f32_i32_kernel(int32_t *out, const float *in, int64_t n)
{
    CUDA_FOR(i, n)
    {
        float x = in[i];
        x = x >= 2147483520.0f ? 2147483520.0f : x;
        x = x <= -2147483648.0f ? -2147483648.0f : x;
        out[i] = x == x ? (int32_t)x : 0;
    }
}

// Rounds to nearest even, as the CPU's conversion does.
__global__ static void cast_i32_f32_kernel(float *out, const int32_t *in, int64_t n)
{
    CUDA_FOR(i, n) out[i] = (float)in[i];
}

static int k_cast(const kern_args *a)
{
    ir_dtype from = a->in_t[0]->dtype, to = a->out_t->dtype;
    int64_t n = ir_numel(a->out_t);
    if (from == to)
        copy(a, a->out, a->in[0], n);
    else if (to == DT_I32)
        cua_launch(a, n, cast_f32_i32_kernel, (int32_t *)a->out, (const float *)a->in[0], n);
    else
        cua_launch(a, n, cast_i32_f32_kernel, (float *)a->out, (const int32_t *)a->in[0], n);
    return 0;
}

// ---- the run counter: dropout, random and categorical read it on the GPU
// (kern_args.step_dev, set on the stream before each step: a step graph
// replays the arguments it recorded), or, where the runtime gives none
// (a call made outside an executor), take it as an argument ----

// The step's key of a seed (the node's key mixed in): dropout_key of the
// run counter in device memory, or of step.
__device__ static inline uint64_t cua_step_key(uint64_t seed, const uint64_t *step_dev,
                                               uint64_t step)
{
    return dropout_key(seed, step_dev ? *step_dev : step);
}

// ---- dropout and its gradient (same mask: devices/dropout.h) ----

__global__ static void dropout_kernel(float *out, const float *x, int64_t n, uint64_t seed,
                                      const uint64_t *step_dev, uint64_t step, float rate,
                                      float scale)
{
    uint64_t key = cua_step_key(seed, step_dev, step);
    CUDA_FOR(i, n) out[i] = x[i] * (dropout_u(key, i) >= rate ? scale : 0.0f); /* as the CPU */
}

// dropout: in[0] = x; dropout_grad: in[0] = dy, with the forward's attrs
// (rate f0, training i1, mask key i2), so both drop the same elements.
static int k_dropout(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    if (!cua_attr_i(a, ATTR_DROPOUT_TRAINING)) {
        copy(a, a->out, a->in[0], n);
        return 0;
    }
    float rate = cua_attr_f(a, ATTR_DROPOUT_RATE);
    uint64_t seed = a->seed ^ ((uint64_t)cua_attr_i(a, ATTR_DROPOUT_KEY) * 0x9e3779b97f4a7c15ull);
    cua_launch(a, n, dropout_kernel, (float *)a->out, (const float *)a->in[0], n, seed, a->step_dev,
               a->step, rate, dropout_scale(rate));
    return 0;
}

__global__ static void random_kernel(float *out, int64_t n, uint64_t seed, const uint64_t *step_dev,
                                     uint64_t step, int kind, float a, float b)
{
    uint64_t key = cua_step_key(seed, step_dev, step);
    CUDA_FOR(i, n) out[i] = random_at(key, i, kind, a, b);
}

// The seed of a random node's key (random_key, devices/dropout.h, without
// its step).
static uint64_t random_seed(const kern_args *a)
{
    return a->seed ^ ((uint64_t)cua_attr_i(a, ATTR_RANDOM_KEY) * 0x9e3779b97f4a7c15ull);
}

// random: the CPU's numbers (devices/dropout.h), element by element.
static int k_random(const kern_args *a)
{
    int64_t n = ir_numel(a->out_t);
    int kind = (int)cua_attr_i(a, ATTR_RANDOM_KIND);
    cua_launch(a, n, random_kernel, (float *)a->out, n, random_seed(a), a->step_dev, a->step, kind,
               cua_attr_f(a, ATTR_RANDOM_A), cua_attr_f(a, ATTR_RANDOM_B));
    return 0;
}

// ---- categorical: the CPU's phases (cpu_draw.c), each a grid-stride
// kernel; the scratch holds the running sums, the chunks' offsets (their
// totals first) and maxima, and the rows' totals (devices/draw.h) ----

typedef struct draw_bufs {
    const float *x;
    int64_t rows, k, chunks;
    double *local, *off, *max, *total;
} draw_bufs;

// The maximum of each chunk of logits (exact, so any order is the CPU's).
__global__ static void draw_chunk_max(draw_bufs b)
{
    CUDA_FOR(q, b.rows * b.chunks)
    {
        int64_t r = q / b.chunks, lo = q % b.chunks * OP_CDF_CHUNK;
        int64_t hi = lo + OP_CDF_CHUNK < b.k ? lo + OP_CDF_CHUNK : b.k;
        float m = -INFINITY;
        for (int64_t j = lo; j < hi; j++) m = b.x[r * b.k + j] > m ? b.x[r * b.k + j] : m;
        b.max[q] = m;
    }
}

__global__ static void draw_row_max(draw_bufs b)
{
    CUDA_FOR(r, b.rows)
    {
        double m = b.max[r * b.chunks];
        for (int64_t c = 1; c < b.chunks; c++)
            m = b.max[r * b.chunks + c] > m ? b.max[r * b.chunks + c] : m;
        b.max[r * b.chunks] = m;
    }
}

__global__ static void draw_chunk_sums(draw_bufs b, int logits)
{
    CUDA_FOR(q, b.rows * b.chunks)
    {
        int64_t r = q / b.chunks;
        b.off[q] = draw_chunk(b.x + r * b.k, b.k, q % b.chunks, logits ? b.max[r * b.chunks] : 0,
                              logits, b.local + r * b.k);
    }
}

__global__ static void draw_row_offsets(draw_bufs b)
{
    CUDA_FOR(r, b.rows) b.total[r] = draw_offsets(b.off + r * b.chunks, b.chunks);
}

__global__ static void draw_search_kernel(int32_t *out, draw_bufs b, int64_t per, uint64_t seed,
                                          const uint64_t *step_dev, uint64_t step)
{
    uint64_t key = cua_step_key(seed, step_dev, step);
    CUDA_FOR(i, b.rows * per)
    {
        int64_t r = i / per;
        double t = draw_u(key, i) * b.total[r];
        out[i] = draw_search(b.local + r * b.k, b.off + r * b.chunks, b.k, t);
    }
}

static int k_categorical(const kern_args *a)
{
    draw_bufs b;
    b.x = (const float *)a->in[0];
    b.k = a->in_t[0]->dim[a->in_t[0]->rank - 1];
    b.rows = cua_in_numel(a, 0) / b.k;
    b.chunks = draw_chunks(b.k);
    b.local = (double *)a->scratch;
    b.off = b.local + b.rows * b.k;
    b.max = b.off + b.rows * b.chunks;
    b.total = b.max + b.rows * b.chunks;
    int logits = cua_attr_i(a, ATTR_RANDOM_KIND) == OP_DRAW_LOGITS;
    if (logits) {
        cua_launch(a, b.rows * b.chunks, draw_chunk_max, b);
        cua_launch(a, b.rows, draw_row_max, b);
    }
    cua_launch(a, b.rows * b.chunks, draw_chunk_sums, b, logits);
    cua_launch(a, b.rows, draw_row_offsets, b);
    int64_t per = ir_numel(a->out_t) / b.rows;
    cua_launch(a, b.rows * per, draw_search_kernel, (int32_t *)a->out, b, per, random_seed(a),
               a->step_dev, a->step);
    return 0;
}

extern "C" const cuda_row cuda_rows_elementwise[] = {
    {OP_ADD, k_arith<op_add>},
    {OP_SUB, k_arith<op_sub>},
    {OP_MUL, k_arith<op_mul>},
    {OP_MAXIMUM, k_arith<op_maximum>},
    {OP_MINIMUM, k_arith<op_minimum>},
    {OP_POW, k_arith_f32<op_pow>},
    {OP_WHERE, k_where},
    {OP_DIV, k_arith<op_div>},
    {OP_EQ, k_compare<op_eq>},
    {OP_NE, k_compare<op_ne>},
    {OP_LT, k_compare<op_lt>},
    {OP_GT, k_compare<op_gt>},
    {OP_LE, k_compare<op_le>},
    {OP_GE, k_compare<op_ge>},
    {OP_NEG, k_neg},
    {OP_EXP, k_unary<op_exp>},
    {OP_LOG, k_unary<op_log>},
    {OP_SQRT, k_unary<op_sqrt>},
    {OP_RELU, k_unary<op_relu>},
    {OP_SIGMOID, k_unary<op_sigmoid>},
    {OP_TANH, k_unary<op_tanh>},
    {OP_GELU, k_unary<op_gelu>},
    {OP_ABS, k_unary<op_abs>},
    {OP_SIN, k_unary<op_sin>},
    {OP_COS, k_unary<op_cos>},
    {OP_SOFTPLUS, k_unary<op_softplus>},
    {OP_LOG_SIGMOID, k_unary<op_log_sigmoid>},
    {OP_SILU, k_unary<op_silu>},
    {OP_ELU, k_unary<op_elu>},
    {OP_ABS_GRAD, k_act_grad<op_abs_grad>},
    {OP_SOFTPLUS_GRAD, k_act_grad<op_softplus_grad>},
    {OP_LOG_SIGMOID_GRAD, k_act_grad<op_log_sigmoid_grad>},
    {OP_SILU_GRAD, k_act_grad<op_silu_grad>},
    {OP_ELU_GRAD, k_act_grad<op_elu_grad>},
    {OP_IDENTITY, k_copy},
    {OP_STOP_GRADIENT, k_copy},
    {OP_RESHAPE, k_copy},
    {OP_RELU_GRAD, k_act_grad<op_relu_grad>},
    {OP_SIGMOID_GRAD, k_act_grad<op_sigmoid_grad>},
    {OP_TANH_GRAD, k_act_grad<op_tanh_grad>},
    {OP_GELU_GRAD, k_act_grad<op_gelu_grad>},
    {OP_CAST, k_cast},
    {OP_DROPOUT, k_dropout},
    {OP_DROPOUT_GRAD, k_dropout},
    {OP_RANDOM, k_random},
    {OP_CATEGORICAL, k_categorical},
    {OP_COUNT, NULL},
};
