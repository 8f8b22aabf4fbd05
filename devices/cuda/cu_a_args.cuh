// cu_a_args.cuh - private to k_elementwise.cu and k_update.cu: reading
// kern_args the way devices/cpu/kernels.c does, launching a grid-stride
// kernel over n elements, and float arithmetic the compiler may not fuse.
#ifndef GR_CU_A_ARGS_CUH
#define GR_CU_A_ARGS_CUH

#include "cuda_impl.cuh"

// A float attribute as the CPU reads it (ATTR_F: the double narrowed to f32).
static inline float cua_attr_f(const kern_args *a, int k)
{
    return (float)a->node->attr.f[k];
}

static inline int64_t cua_attr_i(const kern_args *a, int k)
{
    return a->node->attr.i[k];
}

static inline int64_t cua_in_numel(const kern_args *a, int k)
{
    return ir_numel(a->in_t[k]);
}

// Launches kernel over n elements on a's stream and checks the launch;
// nothing to do when n == 0.
template <typename... P, typename... A>
static void cua_launch(const kern_args *a, int64_t n, void (*kernel)(P...), A... args)
{
    if (n <= 0) return;
    CUDA_LAUNCH(cuda_blocks(n), CUDA_BLOCK, 0, cuda_stream(a), kernel)(args...);
    CUDA_LAUNCHED(a);
}

// x*y, x+y, x-y rounded one at a time.  nvcc contracts a*b+c into an FMA
// (one rounding); the CPU is built as ISO C11, where GCC never contracts.
// Where an expression mixes a product with a sum, these keep the GPU's
// result bit-identical to the CPU's.
__device__ static inline float cua_mul(float x, float y)
{
    return __fmul_rn(x, y);
}
__device__ static inline float cua_add(float x, float y)
{
    return __fadd_rn(x, y);
}
__device__ static inline float cua_sub(float x, float y)
{
    return __fsub_rn(x, y);
}

#endif
