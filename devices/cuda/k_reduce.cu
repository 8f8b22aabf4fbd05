// k_reduce.cu - CUDA kernels of the reduce family (rows for kernels.cu):
// SUM, MEAN, MAX, ARGMAX over one axis or all, MAX_GRAD, SUM_TO, BROADCAST
// and MSE.  The math is devices/cpu/cpu_reduce.c's (and cpu_mse's).
//
// Every reduction is a plan: a walk over the kept axes (one output each)
// and a walk over the reduced axes (n elements per output).  An axis
// reduction of x viewed as [outer, n, inner] keeps {outer, inner} and
// reduces {n}; SUM_TO keeps the axes its output has and reduces the ones
// that were broadcast.
//
// Orders of float sums.  One thread per output adds its n elements in
// order, as the CPU does when it adds whole rows (an axis reduction with
// inner > 1, SUM_TO whose last axis is kept): there the result is the CPU's
// bit for bit.  A warp or a block per output (few outputs, long rows, or a
// reduced last axis, where the CPU uses 16 partial sums) adds in a fixed
// tree order of its own: deterministic, equal to the CPU's up to rounding.
// No atomics, so every reduction here gives the same bits on every run.
//
// Max and argmax follow the CPU's comparisons exactly: a running maximum
// starts at the first element and takes v only when v > it (argmax: ties
// keep the lower index).  So a NaN first element wins and any other NaN is
// ignored, on both devices.  Every reduction reads f32 (the shape rules
// refuse i32: its words summed as floats differed by NaN payload).
#include "cu_c_walk.cuh"

static_assert(CUDA_BLOCK % 64 == 0 && CUDA_BLOCK <= 1024,
              "block_join joins CUDA_BLOCK / 32 warps in one warp");

namespace
{

// kept: one output per element, in output order; red: the elements each
// output reduces, at offsets added to its kept offset.
struct red_plan {
    cuda_walk kept, red;
    int64_t outputs, n;
};

struct arg_acc {
    float v;
    int64_t i;
};

// Each op: the accumulator of one output, its start (from the output's
// first element), how it takes element k, how two partials join (in any
// order of indices: argmax compares them), and the store.
struct sum_op {
    typedef float acc;
    typedef float out_t;
    __device__ static acc seed(float) { return 0.0f; }
    __device__ static acc take(acc a, float v, int64_t) { return a + v; }
    __device__ static acc join(acc a, acc b) { return a + b; }
    // MEAN multiplies by 1/n as the CPU does (not a division); SUM by 1.
    __device__ static void store(out_t *o, acc a, float scale) { *o = a * scale; }
};

struct max_op {
    typedef float acc;
    typedef float out_t;
    __device__ static acc seed(float first) { return first; }
    __device__ static acc take(acc a, float v, int64_t) { return v > a ? v : a; }
    __device__ static acc join(acc a, acc b) { return b > a ? b : a; }
    __device__ static void store(out_t *o, acc a, float) { *o = a; }
};

struct argmax_op {
    typedef arg_acc acc;
    typedef int32_t out_t;
    __device__ static acc seed(float first) { return {first, 0}; }
    __device__ static acc take(acc a, float v, int64_t k) { return v > a.v ? acc{v, k} : a; }
    // Equal values: the lower index, so the first maximum wins wherever the
    // partials met it.  Partials all start at element 0, so a NaN there
    // stays in every one of them and index 0 wins, as on the CPU.
    __device__ static acc join(acc a, acc b)
    {
        return b.v > a.v || (b.v == a.v && b.i < a.i) ? b : a;
    }
    __device__ static void store(out_t *o, acc a, float) { *o = (int32_t)a.i; }
};

__device__ static inline float shfl_down(float v, int off)
{
    return __shfl_down_sync(0xffffffffu, v, off);
}
__device__ static inline arg_acc shfl_down(arg_acc a, int off)
{
    return {__shfl_down_sync(0xffffffffu, a.v, off),
            (int64_t)__shfl_down_sync(0xffffffffu, (long long)a.i, off)};
}

// Lane 0 gets the join of its warp, lower lanes on the left.
template <class Op> __device__ static typename Op::acc warp_join(typename Op::acc a)
{
    for (int off = 16; off > 0; off /= 2) a = Op::join(a, shfl_down(a, off));
    return a;
}

// Thread 0 gets the join of the block (CUDA_BLOCK threads).
template <class Op> __device__ static typename Op::acc block_join(typename Op::acc a)
{
    __shared__ typename Op::acc part[CUDA_BLOCK / 32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    a = warp_join<Op>(a);
    if (lane == 0) part[warp] = a;
    __syncthreads();
    if (warp == 0) {
        a = part[lane < CUDA_BLOCK / 32 ? lane : 0]; // lanes past the warps never reach lane 0
        for (int off = CUDA_BLOCK / 64; off > 0; off /= 2) a = Op::join(a, shfl_down(a, off));
    }
    __syncthreads(); // part[] is reused by the next output
    return a;
}

// One thread per output, its elements in order (the CPU's order).
template <class Op>
__global__ static void reduce_serial(typename Op::out_t *out, const float *x,
                                     const __grid_constant__ red_plan p, float scale)
{
    CUDA_FOR(r, p.outputs)
    {
        const float *base = x + cuda_walk_offset(p.kept, r);
        typename Op::acc a = Op::seed(base[0]);
        for (int64_t k = 0; k < p.n; k++) a = Op::take(a, base[cuda_walk_offset(p.red, k)], k);
        Op::store(out + r, a, scale);
    }
}

// G threads per output (a warp, or the whole block): thread t takes
// elements t, t+G, ... in order, then the partials join in a fixed tree.
template <class Op, int G>
__global__ static void reduce_groups(typename Op::out_t *out, const float *x,
                                     const __grid_constant__ red_plan p, float scale)
{
    int lane = threadIdx.x % G, groups = CUDA_BLOCK / G;
    // Every thread of a block runs the same trips when G is the block
    // (block_join synchronises): r depends on the block only then.
    for (int64_t r = (int64_t)blockIdx.x * groups + threadIdx.x / G; r < p.outputs;
         r += (int64_t)gridDim.x * groups) {
        const float *base = x + cuda_walk_offset(p.kept, r);
        typename Op::acc a = Op::seed(base[0]);
        for (int64_t k = lane; k < p.n; k += G)
            a = Op::take(a, base[cuda_walk_offset(p.red, k)], k);
        if constexpr (G == 32)
            a = warp_join<Op>(a);
        else
            a = block_join<Op>(a);
        if (lane == 0) Op::store(out + r, a, scale);
    }
}

static unsigned grid_for(int64_t units)
{
    return (unsigned)(units < 1 ? 1 : units > 65535 * 8 ? 65535 * 8 : units);
}

// Serial where it reads coalesced (the kept walk's last stride is 1: its
// neighbours are neighbours in memory) and each output has not too much to
// do, or where there are so many outputs that one thread each fills the
// GPU; a warp per output for short rows; a block for long ones.
template <class Op>
static void reduce_launch(const kern_args *a, typename Op::out_t *out, const float *x,
                          const red_plan &p, float scale)
{
    cudaStream_t st = cuda_stream(a);
    if (p.outputs <= 0) return;
    if (p.n <= 0) { // the CPU's rule: sums of nothing are 0, and so is "max of nothing"
        CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)p.outputs * sizeof *out, st), a);
        return;
    }
    int kept_inner = p.kept.nd > 0 && p.kept.stride[p.kept.nd - 1] == 1;
    if (kept_inner && (p.n <= 1024 || p.outputs >= 8192)) {
        CUDA_LAUNCH(cuda_blocks(p.outputs), CUDA_BLOCK, 0, st, reduce_serial<Op>)(out, x, p, scale);
    } else if (p.n <= 1024) {
        unsigned grid = grid_for((p.outputs + CUDA_BLOCK / 32 - 1) / (CUDA_BLOCK / 32));
        CUDA_LAUNCH(grid, CUDA_BLOCK, 0, st, reduce_groups<Op, 32>)(out, x, p, scale);
    } else {
        unsigned grid = grid_for(p.outputs);
        CUDA_LAUNCH(grid, CUDA_BLOCK, 0, st, reduce_groups<Op, CUDA_BLOCK>)(out, x, p, scale);
    }
    CUDA_LAUNCHED(a);
}

// x viewed as [outer, n, inner] (cpu_reduce_dims): axis OP_AXIS_ALL
// reduces everything to one value.
static red_plan axis_plan(const ir_type *t, int64_t axis)
{
    red_plan p = {};
    int64_t outer = 1, n = 1, inner = 1;
    if (axis == OP_AXIS_ALL) {
        n = ir_numel(t);
    } else {
        for (int d = 0; d < t->rank; d++) {
            if (d < axis)
                outer *= t->dim[d];
            else if (d == axis)
                n = t->dim[d];
            else
                inner *= t->dim[d];
        }
    }
    p.outputs = outer * inner;
    p.n = n;
    if (p.outputs <= 0 || n <= 0) return p; // nothing to walk
    cuda_walk_push(&p.kept, outer, n * inner);
    cuda_walk_push(&p.kept, inner, 1);
    cuda_walk_push(&p.red, n, inner);
    return p;
}

template <class Op> static int reduce_axis(const kern_args *a, float scale_mean)
{
    red_plan p = axis_plan(a->in_t[0], a->node->attr.i[ATTR_AXIS]);
    float scale = scale_mean && p.n > 0 ? 1.0f / (float)p.n : 1.0f;
    reduce_launch<Op>(a, (typename Op::out_t *)a->out, (const float *)a->in[0], p, scale);
    return 0;
}

static int k_sum(const kern_args *a)
{
    return reduce_axis<sum_op>(a, 0);
}

static int k_mean(const kern_args *a)
{
    return reduce_axis<sum_op>(a, 1);
}

static int k_max(const kern_args *a)
{
    return reduce_axis<max_op>(a, 0);
}

static int k_argmax(const kern_args *a)
{
    return reduce_axis<argmax_op>(a, 0);
}

// ---- SUM_TO: the adjoint of broadcasting ----

// Output (ot) axes are x's (xt) right-aligned; an x axis the output has as
// 1 (or lacks) was broadcast and is reduced.
static red_plan sum_to_plan(const ir_type *ot, const ir_type *xt)
{
    red_plan p = {};
    int64_t st[IR_MAX_DIMS];
    int off = xt->rank - ot->rank;
    ir_row_strides(xt, st);
    p.outputs = ir_numel(ot);
    p.n = p.outputs ? ir_numel(xt) / p.outputs : 0;
    if (p.outputs <= 0 || p.n <= 0) return p;
    for (int d = 0; d < xt->rank; d++) {
        int64_t od = d - off >= 0 ? ot->dim[d - off] : 1;
        cuda_walk_push(od == xt->dim[d] ? &p.kept : &p.red, xt->dim[d], st[d]);
    }
    return p;
}

// Order: one thread per output adds in x's order, as the CPU, when the last
// axis is kept (a bias gradient); otherwise a tree (see the top).
static int k_sum_to(const kern_args *a)
{
    red_plan p = sum_to_plan(a->out_t, a->in_t[0]);
    reduce_launch<sum_op>(a, (float *)a->out, (const float *)a->in[0], p, 1.0f);
    return 0;
}

// ---- MAX_GRAD ----

// dy and y have the keepdims shape [outer, 1, inner]: every element equal
// to its maximum gets the whole dy (ties all do, as on the CPU); a NaN is
// equal to nothing and gets 0.
__global__ static void max_grad_kernel(float *out, const float *dy, const float *x, const float *y,
                                       int64_t total, int64_t n, int64_t inner)
{
    CUDA_FOR(i, total)
    {
        int64_t r = i / (n * inner) * inner + i % inner;
        out[i] = x[i] == y[r] ? dy[r] : 0.0f;
    }
}

static int k_max_grad(const kern_args *a)
{
    const ir_type *xt = a->in_t[1];
    int64_t axis = a->node->attr.i[ATTR_AXIS], n = ir_numel(xt), inner = 1;
    if (axis != OP_AXIS_ALL) {
        n = xt->dim[axis];
        for (int d = (int)axis + 1; d < xt->rank; d++) inner *= xt->dim[d];
    }
    int64_t total = ir_numel(xt);
    if (total <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), max_grad_kernel)
    ((float *)a->out, (const float *)a->in[0], (const float *)a->in[1], (const float *)a->in[2],
     total, n, inner);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- BROADCAST: 4-byte words (f32 or i32) ----

// Walks the output with x's strides, 0 on the axes x has as 1 or lacks.
static int k_broadcast(const kern_args *a)
{
    const ir_type *ot = a->out_t, *xt = a->in_t[0];
    int64_t total = ir_numel(ot), st[IR_MAX_DIMS];
    if (total <= 0) return 0;
    if (ir_numel(xt) == total) { // nothing broadcast: the same words in the same order
        CUDA_CHECK(cudaMemcpyAsync(a->out, a->in[0], (size_t)total * 4, cudaMemcpyDeviceToDevice,
                                   cuda_stream(a)),
                   a);
        return 0;
    }
    cuda_walk w = {};
    int off = ot->rank - xt->rank;
    ir_row_strides(xt, st);
    for (int d = 0; d < ot->rank; d++) {
        int64_t xd = d - off >= 0 ? xt->dim[d - off] : 1;
        cuda_walk_push(&w, ot->dim[d], xd == 1 ? 0 : st[d - off]);
    }
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), cuda_walk_words)
    ((uint32_t *)a->out, (const uint32_t *)a->in[0], w, total);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- MSE ----

// One block: sum((p - t)^2) in a fixed tree, then / n as the CPU (a
// division, not a multiply by 1/n).  The square is rounded before it is
// added (__fmul_rn: no fused multiply-add), as the CPU's separate ops.
__global__ static void mse_kernel(float *out, const float *pred, const float *target, int64_t n)
{
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += CUDA_BLOCK) {
        float d = pred[i] - target[i];
        s += __fmul_rn(d, d);
    }
    s = block_join<sum_op>(s);
    if (threadIdx.x == 0) out[0] = s / (float)n;
}

static int k_mse(const kern_args *a)
{
    int64_t n = ir_numel(a->in_t[0]);
    cudaStream_t st = cuda_stream(a);
    if (n <= 0) {
        CUDA_CHECK(cudaMemsetAsync(a->out, 0, sizeof(float), st), a);
        return 0;
    }
    CUDA_LAUNCH(1, CUDA_BLOCK, 0, st, mse_kernel)
    ((float *)a->out, (const float *)a->in[0], (const float *)a->in[1], n);
    CUDA_LAUNCHED(a);
    return 0;
}

} // namespace

extern "C" const cuda_row cuda_rows_reduce[] = {
    {OP_SUM, k_sum},
    {OP_MEAN, k_mean},
    {OP_MAX, k_max},
    {OP_ARGMAX, k_argmax},
    {OP_MAX_GRAD, k_max_grad},
    {OP_SUM_TO, k_sum_to},
    {OP_BROADCAST, k_broadcast},
    {OP_MSE, k_mse},
    {OP_COUNT, NULL},
};
