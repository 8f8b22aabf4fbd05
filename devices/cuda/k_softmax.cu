// k_softmax.cu - softmax, log-softmax, cross-entropy and their gradients
// along the last axis (rows of length c), computing what
// devices/cpu/cpu_softmax.c computes: every row subtracts its max before
// exponentiating, softmax is exp(x - m) * (1 / sum), log-softmax is
// x - (m + log(sum)), a label outside [0, c) contributes no target term
// (and is reported through cuda_check_ids, as the CPU faults on it).
//
// A row belongs to a group of G threads: one warp (G = 32) for short rows,
// eight rows to a block; a whole block (G = 256) for long ones.  Reductions
// run in a fixed order for a given G, so results are deterministic, though
// their float sums are ordered differently from the CPU's.  Each thread
// writes only the elements it read, after the row's reductions, so out may
// alias an input.
#include "cuda_impl.cuh"

// Rows at least this long get a block each.
enum { SM_LONG_ROW = 1024 };

struct op_max {
    // As the CPU's `x > m ? x : m`: a NaN max is order-dependent here, but a
    // row with a NaN comes out all NaN on both devices (its sum is NaN).
    __device__ float operator()(float m, float x) const { return x > m ? x : m; }
};
struct op_sum {
    __device__ float operator()(float s, float x) const { return s + x; }
};

// Every thread of the group gets the reduction of the group's v.  G = 256
// synchronises the block: its callers loop over rows uniformly per block.
template <int G, class Op> __device__ static float group_reduce(float v, Op op)
{
    for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if constexpr (G == 32) {
        return v;
    } else {
        __shared__ float part[G / 32];
        __syncthreads(); // the previous reduction's readers are done with part
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
        __syncthreads();
        v = part[0];
        for (int i = 1; i < G / 32; i++) v = op(v, part[i]);
        return v;
    }
}

template <int G> __device__ static int64_t group_row(void)
{
    return (int64_t)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
}
template <int G> __device__ static int64_t group_rows_stride(void)
{
    return (int64_t)gridDim.x * (blockDim.x / G);
}
template <int G> __device__ static int group_lane(void)
{
    return (int)(threadIdx.x % G);
}

// c >= 1.  Every thread starts from x[0], as the CPU's max does.
template <int G> __device__ static float row_max(const float *x, int64_t c)
{
    float m = x[0];
    for (int64_t i = group_lane<G>(); i < c; i += G) m = op_max()(m, x[i]);
    return group_reduce<G>(m, op_max());
}

// The sum over the row of f(i).
template <int G, class F> __device__ static float row_sum(int64_t c, F f)
{
    float s = 0.0f;
    for (int64_t i = group_lane<G>(); i < c; i += G) s += f(i);
    return group_reduce<G>(s, op_sum());
}

template <int G> __device__ static float row_sum_exp(const float *x, float m, int64_t c)
{
    return row_sum<G>(c, [=](int64_t i) { return expf(x[i] - m); });
}

template <int G>
__global__ static void softmax_kernel(float *out, const float *x, int64_t rows, int64_t c,
                                      int is_log)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float *o = out + r * c;
        float m = row_max<G>(xr, c);
        float s = row_sum_exp<G>(xr, m, c);
        if (is_log) {
            float lse = m + logf(s);
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = xr[i] - lse;
        } else {
            float inv = 1.0f / s;
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = expf(xr[i] - m) * inv;
        }
    }
}

// softmax: y * (dy - <dy, y>); log-softmax: dy - exp(y) * sum(dy).
template <int G>
__global__ static void softmax_grad_kernel(float *out, const float *dy, const float *y,
                                           int64_t rows, int64_t c, int is_log)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *dr = dy + r * c, *yr = y + r * c;
        float *o = out + r * c;
        if (is_log) {
            float s = row_sum<G>(c, [=](int64_t i) { return dr[i]; });
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = dr[i] - expf(yr[i]) * s;
        } else {
            float d = row_sum<G>(c, [=](int64_t i) { return dr[i] * yr[i]; });
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = yr[i] * (dr[i] - d);
        }
    }
}

__device__ static int label_ok(int32_t l, int64_t c)
{
    return l >= 0 && l < c;
}

// out[r] = logsumexp(row) - row[label].
template <int G>
__global__ static void xent_kernel(float *out, const float *x, const int32_t *labels, int64_t rows,
                                   int64_t c)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float m = row_max<G>(xr, c);
        float lse = m + logf(row_sum_exp<G>(xr, m, c));
        int32_t l = labels[r];
        if (group_lane<G>() == 0) out[r] = lse - (label_ok(l, c) ? xr[l] : 0.0f);
    }
}

// out = (softmax(row) - onehot(label)) * dy[r], rounded as the CPU does:
// p = exp(x - m) * (1 / sum), then p - 1 at the label, then times dy[r].
template <int G>
__global__ static void xent_grad_kernel(float *out, const float *x, const int32_t *labels,
                                        const float *dy, int64_t rows, int64_t c)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float *o = out + r * c;
        float m = row_max<G>(xr, c);
        float inv = 1.0f / row_sum_exp<G>(xr, m, c);
        int32_t l = labels[r];
        int64_t at = label_ok(l, c) ? l : -1;
        float g = dy[r];
        for (int64_t i = group_lane<G>(); i < c; i += G) {
            float p = expf(xr[i] - m) * inv;
            if (i == at) p -= 1.0f;
            o[i] = p * g;
        }
    }
}

// Launches kern<32> (a warp per row) or kern<256> (a block per row) over
// `rows` rows of length c.
#define SM_LAUNCH(a, rows, c, kern, ...)                                                           \
    do {                                                                                           \
        if ((c) >= SM_LONG_ROW)                                                                    \
            kern<256><<<cuda_blocks((rows)*256), CUDA_BLOCK, 0, cuda_stream(a)>>>(__VA_ARGS__);    \
        else                                                                                       \
            kern<32><<<cuda_blocks((rows)*32), CUDA_BLOCK, 0, cuda_stream(a)>>>(__VA_ARGS__);      \
        CUDA_LAUNCHED(a);                                                                          \
    } while (0)

#define IN_F(k) ((const float *)a->in[k])
#define IN_I(k) ((const int32_t *)a->in[k])
#define OUT_F   ((float *)a->out)

static int64_t last_dim(const ir_type *t)
{
    return t->rank ? t->dim[t->rank - 1] : 1;
}

static void softmax(const kern_args *a, int is_log)
{
    int64_t c = last_dim(a->out_t), n = ir_numel(a->out_t);
    if (c <= 0 || n == 0) return;
    SM_LAUNCH(a, n / c, c, softmax_kernel, OUT_F, IN_F(0), n / c, c, is_log);
}

// in: dy, y (the forward's output).
static void softmax_grad(const kern_args *a, int is_log)
{
    int64_t c = last_dim(a->out_t), n = ir_numel(a->out_t);
    if (c <= 0 || n == 0) return;
    SM_LAUNCH(a, n / c, c, softmax_grad_kernel, OUT_F, IN_F(0), IN_F(1), n / c, c, is_log);
}

static int k_softmax(const kern_args *a)
{
    softmax(a, 0);
    return 0;
}

static int k_log_softmax(const kern_args *a)
{
    softmax(a, 1);
    return 0;
}

static int k_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 0);
    return 0;
}

static int k_log_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 1);
    return 0;
}

// in: logits f32[N,C], labels i32[N]; out f32[N].  With C = 0 every label
// is bad (the step fails): the output is only made defined.
static int k_xent(const kern_args *a)
{
    int64_t rows = a->in_t[0]->dim[0], c = a->in_t[0]->dim[1];
    cuda_check_ids(a, IN_I(1), rows, c, CUDA_FAULT_LABEL);
    if (rows == 0) return 0;
    if (c == 0) {
        CUDA_CHECK(cudaMemsetAsync(a->out, 0, (size_t)rows * sizeof(float), cuda_stream(a)), a);
        return 0;
    }
    SM_LAUNCH(a, rows, c, xent_kernel, OUT_F, IN_F(0), IN_I(1), rows, c);
    return 0;
}

// in: logits f32[N,C], labels i32[N], dy f32[N]; out f32[N,C].
static int k_xent_grad(const kern_args *a)
{
    int64_t rows = a->in_t[0]->dim[0], c = a->in_t[0]->dim[1];
    cuda_check_ids(a, IN_I(1), rows, c, CUDA_FAULT_LABEL);
    if (rows == 0 || c == 0) return 0;
    SM_LAUNCH(a, rows, c, xent_grad_kernel, OUT_F, IN_F(0), IN_I(1), IN_F(2), rows, c);
    return 0;
}

extern "C" const cuda_row cuda_rows_softmax[] = {
    {OP_SOFTMAX, k_softmax},
    {OP_LOG_SOFTMAX, k_log_softmax},
    {OP_SOFTMAX_GRAD, k_softmax_grad},
    {OP_LOG_SOFTMAX_GRAD, k_log_softmax_grad},
    {OP_SOFTMAX_XENT, k_xent},
    {OP_XENT_GRAD, k_xent_grad},
    {OP_COUNT, NULL},
};
