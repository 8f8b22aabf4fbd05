// cu_c_walk.cuh - private to k_reduce.cu and k_shape.cu: strided walks over
// a tensor, the GPU's form of the CPU's broadcasting iterator (cpu_bcast).
//
// A walk maps a flat index i over dims dim[0..nd) (row-major) to an element
// offset sum(coord[d] * stride[d]).  Transpose walks the output with the
// input's strides, broadcast with strides that are 0 on broadcast axes, and
// a reduction walks its kept axes and its reduced axes with two walks.
// Axes of size 1 are dropped and neighbours that step as one are merged, so
// the common cases need one or two axes (one divmod per element at most).
#ifndef GR_CU_C_WALK_CUH
#define GR_CU_C_WALK_CUH

#include "cuda_impl.cuh"

typedef struct cuda_walk {
    int nd;
    int64_t dim[IR_MAX_DIMS];
    int64_t stride[IR_MAX_DIMS];
} cuda_walk;

// Appends an axis (outermost first).  Callers handle empty tensors before
// building walks: no dim is 0 here.
static inline void cuda_walk_push(cuda_walk *w, int64_t dim, int64_t stride)
{
    if (dim == 1) return;
    int k = w->nd - 1;
    if (k >= 0 && (w->stride[k] == stride * dim || (w->stride[k] == 0 && stride == 0))) {
        w->dim[k] *= dim;
        w->stride[k] = stride;
        return;
    }
    w->dim[w->nd] = dim;
    w->stride[w->nd] = stride;
    w->nd++;
}

// The offset of flat index i (i < the walk's count); the outermost axis
// needs no modulo.
__device__ static inline int64_t cuda_walk_offset(const cuda_walk &w, int64_t i)
{
    int64_t off = 0;
    for (int d = w.nd - 1; d > 0; d--) {
        int64_t dim = w.dim[d];
        off += (i % dim) * w.stride[d];
        i /= dim;
    }
    return w.nd ? off + i * w.stride[0] : 0;
}

// out[i] = in[offset of i]: transpose and broadcast, 4-byte words.
__global__ static void cuda_walk_words(uint32_t *out, const uint32_t *in,
                                       const __grid_constant__ cuda_walk w, int64_t total)
{
    CUDA_FOR(i, total)
    out[i] = in[cuda_walk_offset(w, i)];
}

#endif
