// cu_rows.cuh - private to the kernels that work along the last axis
// (k_softmax.cu, k_norm.cu): a row belongs to a group of G threads, one
// warp (G = 32) for short rows, eight rows to a block, or a whole block
// (G = 256) for long ones; reductions over a row run in a fixed order for
// a given G, so results are deterministic.
#ifndef GR_CU_ROWS_CUH
#define GR_CU_ROWS_CUH

#include "cuda_impl.cuh"

// Rows at least this long get a block each.
enum { ROW_LONG = 1024 };

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

// Launches kern<32> (a warp per row) or kern<256> (a block per row) over
// `rows` rows of length c.
#define ROW_LAUNCH(a, rows, c, kern, ...)                                                          \
    do {                                                                                           \
        int row_long_ = (c) >= ROW_LONG;                                                           \
        unsigned row_grid_ = cuda_blocks((rows) * (row_long_ ? 256 : 32));                         \
        if (row_long_)                                                                             \
            CUDA_LAUNCH(row_grid_, CUDA_BLOCK, 0, cuda_stream(a), kern<256>)(__VA_ARGS__);         \
        else                                                                                       \
            CUDA_LAUNCH(row_grid_, CUDA_BLOCK, 0, cuda_stream(a), kern<32>)(__VA_ARGS__);          \
        CUDA_LAUNCHED(a);                                                                          \
    } while (0)

#endif
