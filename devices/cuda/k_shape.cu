// k_shape.cu - CUDA kernels of the shape family (rows for kernels.cu):
// TRANSPOSE, CONCAT, SLICE(_GRAD), GATHER(_GRAD), ONE_HOT and the pooling
// ops with their gradients.  The math is devices/cpu/cpu_shape.c's and
// cpu_conv.c's pooling.
//
// Data movement is by 4-byte words whatever the dtype, as on the CPU.  Ids
// are checked on the GPU first (cuda_check_ids: the step fails); the
// kernels then skip a bad id, so nothing is read or written out of bounds.
//
// Pooling gradients gather: each input element adds the windows that hold
// it in the CPU's window order, so they are the CPU's bit for bit with no
// atomics.  GATHER_GRAD scatters with atomicAdd: rows of repeated ids add
// in whatever order the GPU runs them (equal to the CPU's up to rounding,
// and not bitwise the same from run to run).
#include "cu_c_walk.cuh"

namespace
{

static unsigned grid_cap(int64_t units, int64_t cap)
{
    return (unsigned)(units < 1 ? 1 : units > cap ? cap : units);
}

// ---- TRANSPOSE ----

enum { TILE = 32, TILE_ROWS = 8 };

// Batches of [A, B] outputs whose A axis is contiguous in the input
// (stride 1) and B axis strided (sb): through a shared tile so that reads
// run along A and writes along B.  batch gives each batch's input offset.
__global__ static void transpose_tiles(uint32_t *out, const uint32_t *in,
                                       const __grid_constant__ cuda_walk batch, int64_t nbatch,
                                       int64_t A, int64_t B, int64_t sb)
{
    __shared__ uint32_t tile[TILE][TILE + 1]; // +1: columns fall in different banks
    int tx = threadIdx.x, ty = threadIdx.y;
    // Trips depend on the block only: every thread reaches __syncthreads.
    for (int64_t q = blockIdx.z; q < nbatch; q += gridDim.z) {
        const uint32_t *src = in + cuda_walk_offset(batch, q);
        uint32_t *dst = out + q * A * B;
        for (int64_t ta = (int64_t)blockIdx.y * TILE; ta < A; ta += (int64_t)gridDim.y * TILE)
            for (int64_t tb = (int64_t)blockIdx.x * TILE; tb < B; tb += (int64_t)gridDim.x * TILE) {
                for (int j = ty; j < TILE; j += TILE_ROWS)
                    if (ta + tx < A && tb + j < B) tile[j][tx] = src[ta + tx + (tb + j) * sb];
                __syncthreads();
                for (int j = ty; j < TILE; j += TILE_ROWS)
                    if (ta + j < A && tb + tx < B) dst[(ta + j) * B + tb + tx] = tile[tx][j];
                __syncthreads();
            }
    }
}

// w walks the output with the input's strides (axes merged).
static void transpose_launch(const kern_args *a, const cuda_walk &w, int64_t total)
{
    cudaStream_t st = cuda_stream(a);
    int nd = w.nd;
    if (nd >= 2 && w.stride[nd - 2] == 1) {
        cuda_walk batch = {};
        for (int d = 0; d < nd - 2; d++) cuda_walk_push(&batch, w.dim[d], w.stride[d]);
        int64_t A = w.dim[nd - 2], B = w.dim[nd - 1], nbatch = total / (A * B);
        dim3 grid(grid_cap((B + TILE - 1) / TILE, 65535 * 8),
                  grid_cap((A + TILE - 1) / TILE, 65535), grid_cap(nbatch, 65535));
        CUDA_LAUNCH(grid, dim3(TILE, TILE_ROWS), 0, st, transpose_tiles)
        ((uint32_t *)a->out, (const uint32_t *)a->in[0], batch, nbatch, A, B, w.stride[nd - 1]);
    } else {
        CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, st, cuda_walk_words)
        ((uint32_t *)a->out, (const uint32_t *)a->in[0], w, total);
    }
    CUDA_LAUNCHED(a);
}

// perm: attr list, or the reversed axes when its length is not the rank
// (kernels.c's k_transpose; the shape rule fills an empty list anyway).
static int k_transpose(const kern_args *a)
{
    const ir_type *it = a->in_t[0];
    int64_t total = ir_numel(it), st[IR_MAX_DIMS];
    if (total <= 0) return 0;
    ir_row_strides(it, st);
    cuda_walk w = {};
    for (int d = 0; d < it->rank; d++) {
        int64_t p = a->node->attr.n_list == it->rank ? a->node->attr.list[d] : it->rank - 1 - d;
        cuda_walk_push(&w, it->dim[p], st[p]);
    }
    if (w.nd == 0 || (w.nd == 1 && w.stride[0] == 1)) { // the identity: the words as they are
        CUDA_CHECK(cudaMemcpyAsync(a->out, a->in[0], (size_t)total * 4, cudaMemcpyDeviceToDevice,
                                   cuda_stream(a)),
                   a);
        return 0;
    }
    transpose_launch(a, w, total);
    return 0;
}

// ---- CONCAT, SLICE, SLICE_GRAD: blocks of rows ----

// rows x width words from src (rows spitch apart) to dst (dpitch apart).
__global__ static void copy_rows(uint32_t *dst, int64_t dpitch, const uint32_t *src, int64_t spitch,
                                 int64_t rows, int64_t width)
{
    int64_t total = rows * width;
    CUDA_FOR(i, total)
    {
        int64_t r = i / width, c = i - r * width;
        dst[r * dpitch + c] = src[r * spitch + c];
    }
}

static void copy_rows_launch(const kern_args *a, uint32_t *dst, int64_t dpitch, const uint32_t *src,
                             int64_t spitch, int64_t rows, int64_t width)
{
    int64_t total = rows * width;
    if (total <= 0) return;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), copy_rows)
    (dst, dpitch, src, spitch, rows, width);
    CUDA_LAUNCHED(a);
}

// Products of the dims before and after axis.
static void outer_inner(const ir_type *t, int64_t axis, int64_t *outer, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < t->rank; d++) {
        if (d < axis) *outer *= t->dim[d];
        if (d > axis) *inner *= t->dim[d];
    }
}

// The output as [outer, sum of the inputs' axis * inner]: input k fills
// its band of columns; one launch per input (no pointer table to upload).
static int k_concat(const kern_args *a)
{
    int64_t axis = a->node->attr.i[ATTR_AXIS], outer, inner;
    outer_inner(a->out_t, axis, &outer, &inner);
    int64_t total = a->out_t->dim[axis] * inner, col = 0;
    for (int k = 0; k < a->n_in; k++) {
        int64_t len = a->in_t[k]->dim[axis] * inner;
        copy_rows_launch(a, (uint32_t *)a->out + col, total, (const uint32_t *)a->in[k], len, outer,
                         len);
        col += len;
    }
    return 0;
}

// ATTR_AXIS, ATTR_SLICE_BEGIN; the output's axis gives the length.
static int k_slice(const kern_args *a)
{
    const ir_type *it = a->in_t[0];
    int64_t axis = a->node->attr.i[ATTR_AXIS], begin = a->node->attr.i[ATTR_SLICE_BEGIN], outer,
            inner;
    int64_t len = a->out_t->dim[axis], n = it->dim[axis];
    outer_inner(it, axis, &outer, &inner);
    copy_rows_launch(a, (uint32_t *)a->out, len * inner, (const uint32_t *)a->in[0] + begin * inner,
                     n * inner, outer, len * inner);
    return 0;
}

// dx (x's shape, the output) is 0 but for dy copied back into the slice.
static int k_slice_grad(const kern_args *a)
{
    const ir_type *xt = a->out_t;
    int64_t axis = a->node->attr.i[ATTR_AXIS], begin = a->node->attr.i[ATTR_SLICE_BEGIN], outer,
            inner;
    int64_t len = a->in_t[0]->dim[axis], n = xt->dim[axis], total = ir_numel(xt);
    outer_inner(xt, axis, &outer, &inner);
    if (total <= 0) return 0;
    CUDA_CHECK(cudaMemsetAsync(a->out, 0, (size_t)total * 4, cuda_stream(a)), a);
    copy_rows_launch(a, (uint32_t *)a->out + begin * inner, n * inner, (const uint32_t *)a->in[0],
                     len * inner, outer, len * inner);
    return 0;
}

// ---- GATHER, GATHER_GRAD, ONE_HOT ----

// out[r, c] = table[ids[r], c]; a row of a bad id is 0.
__global__ static void gather_rows(uint32_t *out, const uint32_t *table, int64_t v, int64_t d,
                                   const int32_t *ids, int64_t n_ids)
{
    int64_t total = n_ids * d;
    CUDA_FOR(i, total)
    {
        int64_t r = i / d, c = i - r * d;
        int64_t id = ids[r];
        out[i] = id >= 0 && id < v ? table[id * d + c] : 0u;
    }
}

// in: table [V, D] (any 4-byte dtype, like the CPU's word copy), ids.
static int k_gather(const kern_args *a)
{
    const ir_type *tt = a->in_t[0];
    const int32_t *ids = (const int32_t *)a->in[1];
    int64_t n_ids = ir_numel(a->in_t[1]), v = tt->dim[0], d = tt->dim[1];
    cuda_check_ids(a, ids, n_ids, v, CUDA_FAULT_ID);
    if (n_ids * d <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(n_ids * d), CUDA_BLOCK, 0, cuda_stream(a), gather_rows)
    ((uint32_t *)a->out, (const uint32_t *)a->in[0], v, d, ids, n_ids);
    CUDA_LAUNCHED(a);
    return 0;
}

// out[ids[r], c] += dy[r, c]: atomics, so repeated ids add in any order.
__global__ static void scatter_add_rows(float *out, int64_t v, int64_t d, const float *dy,
                                        const int32_t *ids, int64_t n_ids)
{
    int64_t total = n_ids * d;
    CUDA_FOR(i, total)
    {
        int64_t r = i / d, c = i - r * d;
        int64_t id = ids[r];
        if (id >= 0 && id < v) atomicAdd(&out[id * d + c], dy[i]);
    }
}

// in: dy [..., D], ids; out: the table's shape [V, D] (attr list).
static int k_gather_grad(const kern_args *a)
{
    const int32_t *ids = (const int32_t *)a->in[1];
    int64_t n_ids = ir_numel(a->in_t[1]), v = a->out_t->dim[0], d = a->out_t->dim[1];
    cudaStream_t st = cuda_stream(a);
    cuda_check_ids(a, ids, n_ids, v, CUDA_FAULT_ID);
    if (v * d <= 0) return 0;
    CUDA_CHECK(cudaMemsetAsync(a->out, 0, (size_t)(v * d) * sizeof(float), st), a);
    if (n_ids * d <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(n_ids * d), CUDA_BLOCK, 0, st, scatter_add_rows)
    ((float *)a->out, v, d, (const float *)a->in[0], ids, n_ids);
    CUDA_LAUNCHED(a);
    return 0;
}

// Every element written: 1 where the column is the row's id (none for a
// bad id).
__global__ static void one_hot_rows(float *out, const int32_t *ids, int64_t n_ids, int64_t depth)
{
    int64_t total = n_ids * depth;
    CUDA_FOR(i, total)
    {
        int64_t r = i / depth;
        out[i] = ids[r] == i - r * depth ? 1.0f : 0.0f;
    }
}

// depth: the output's last dim.
static int k_one_hot(const kern_args *a)
{
    const int32_t *ids = (const int32_t *)a->in[0];
    const ir_type *ot = a->out_t;
    int64_t n_ids = ir_numel(a->in_t[0]), depth = ot->rank ? ot->dim[ot->rank - 1] : 1;
    cuda_check_ids(a, ids, n_ids, depth, CUDA_FAULT_ID);
    if (n_ids * depth <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(n_ids * depth), CUDA_BLOCK, 0, cuda_stream(a), one_hot_rows)
    ((float *)a->out, ids, n_ids, depth);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- pooling: NCHW; a window is its cells inside the input (padding is
// never read; an average divides by the count of those cells) ----

struct pool_shape {
    int64_t planes, h, w; // planes = N*C
    int64_t oh, ow, size, stride;
    int64_t pad_h, pad_w; // padding before the first row, column
};

// x is the forward input (xt), y the pooled output (yt); ATTR_POOL_SIZE,
// ATTR_POOL_STRIDE (0 = size), ATTR_POOL_PAD, as kernels.c's pool_shape.
static pool_shape pool_shape_of(const kern_args *a, const ir_type *xt, const ir_type *yt)
{
    int64_t size = a->node->attr.i[ATTR_POOL_SIZE], stride = a->node->attr.i[ATTR_POOL_STRIDE];
    int64_t pad = a->node->attr.i[ATTR_POOL_PAD];
    stride = stride > 0 ? stride : size;
    return pool_shape{xt->dim[0] * xt->dim[1],
                      xt->dim[2],
                      xt->dim[3],
                      yt->dim[2],
                      yt->dim[3],
                      size,
                      stride,
                      ops_pool_pad_begin(pad, xt->dim[2], yt->dim[2], size, stride),
                      ops_pool_pad_begin(pad, xt->dim[3], yt->dim[3], size, stride)};
}

// Window (oh, ow): rows [r[0], r[1]) and columns [r[2], r[3]) of the input,
// as cpu_conv.c's pool_window.
__device__ static inline void pool_window(const pool_shape &s, int64_t oh, int64_t ow, int64_t r[4])
{
    int64_t h0 = oh * s.stride - s.pad_h, w0 = ow * s.stride - s.pad_w;
    r[0] = h0 > 0 ? h0 : 0;
    r[1] = h0 + s.size < s.h ? h0 + s.size : s.h;
    r[2] = w0 > 0 ? w0 : 0;
    r[3] = w0 + s.size < s.w ? w0 + s.size : s.w;
}

// 1 / the count of window (oh, ow)'s cells, rounded as the CPU's.
__device__ static inline float pool_inv(const pool_shape &s, int64_t oh, int64_t ow)
{
    int64_t r[4];
    pool_window(s, oh, ow, r);
    return __fdiv_rn(1.0f, (float)((r[1] - r[0]) * (r[3] - r[2])));
}

// Windows scanned row by row as the CPU: max starts at the window's first
// element and takes v only when v > it (a NaN there wins, others lose);
// avg adds from 0 and multiplies by 1/count.
template <int AVG>
__global__ static void pool_fwd(float *out, const float *x, const __grid_constant__ pool_shape s)
{
    int64_t total = s.planes * s.oh * s.ow;
    CUDA_FOR(i, total)
    {
        int64_t ow = i % s.ow, oh = i / s.ow % s.oh, pl = i / (s.ow * s.oh), r[4];
        pool_window(s, oh, ow, r);
        const float *xp = x + pl * s.h * s.w;
        float acc = AVG ? 0.0f : xp[r[0] * s.w + r[2]];
        for (int64_t y = r[0]; y < r[1]; y++)
            for (int64_t c = r[2]; c < r[3]; c++) {
                float v = xp[y * s.w + c];
                acc = AVG ? acc + v : (v > acc ? v : acc);
            }
        out[i] = AVG ? __fmul_rn(acc, pool_inv(s, oh, ow)) : acc;
    }
}

template <int AVG> static int pool_launch(const kern_args *a)
{
    pool_shape s = pool_shape_of(a, a->in_t[0], a->out_t);
    int64_t total = s.planes * s.oh * s.ow;
    if (total <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), pool_fwd<AVG>)
    ((float *)a->out, (const float *)a->in[0], s);
    CUDA_LAUNCHED(a);
    return 0;
}

static int k_maxpool(const kern_args *a)
{
    return pool_launch<0>(a);
}

static int k_avgpool(const kern_args *a)
{
    return pool_launch<1>(a);
}

// The windows along one axis that hold input coordinate i (pad before the
// first): [*lo, *hi], possibly empty.
__device__ static inline void windows_of(int64_t i, int64_t size, int64_t stride, int64_t pad,
                                         int64_t count, int64_t *lo, int64_t *hi)
{
    int64_t ip = i + pad;
    *lo = ip >= size ? (ip - size) / stride + 1 : 0;
    *hi = ip / stride < count - 1 ? ip / stride : count - 1;
}

// The flat plane offset of a window's first maximum: strict '>' in row
// order, as the CPU (both its 2x2 and its generic loops).
__device__ static inline int64_t window_argmax(const float *xp, const pool_shape &s, int64_t oh,
                                               int64_t ow)
{
    int64_t r[4];
    pool_window(s, oh, ow, r);
    int64_t best = r[0] * s.w + r[2];
    for (int64_t y = r[0]; y < r[1]; y++)
        for (int64_t c = r[2]; c < r[3]; c++)
            if (xp[y * s.w + c] > xp[best]) best = y * s.w + c;
    return best;
}

// dx[e] = the sum, over the windows holding e in (oh, ow) order, of their
// dy where e is the window's first maximum (and, with relu, > 0; avg:
// dy / count, every element): the order in which the CPU adds them into
// its zeroed dx.
template <int AVG>
__global__ static void pool_grad(float *dx, const float *dy, const float *x,
                                 const __grid_constant__ pool_shape s, int relu)
{
    int64_t total = s.planes * s.h * s.w;
    CUDA_FOR(i, total)
    {
        int64_t iw = i % s.w, ih = i / s.w % s.h, pl = i / (s.w * s.h), e = ih * s.w + iw;
        int64_t h_lo, h_hi, w_lo, w_hi;
        windows_of(ih, s.size, s.stride, s.pad_h, s.oh, &h_lo, &h_hi);
        windows_of(iw, s.size, s.stride, s.pad_w, s.ow, &w_lo, &w_hi);
        const float *g = dy + pl * s.oh * s.ow, *xp = AVG ? x : x + pl * s.h * s.w;
        float acc = 0.0f;
        for (int64_t oh = h_lo; oh <= h_hi; oh++)
            for (int64_t ow = w_lo; ow <= w_hi; ow++) {
                if (AVG) // the CPU rounds g first
                    acc += __fmul_rn(g[oh * s.ow + ow], pool_inv(s, oh, ow));
                else if (window_argmax(xp, s, oh, ow) == e && (!relu || xp[e] > 0.0f))
                    acc += g[oh * s.ow + ow];
            }
        dx[i] = acc;
    }
}

// in: dy, and x for max; out: x's shape.
template <int AVG> static int pool_grad_launch(const kern_args *a)
{
    pool_shape s = pool_shape_of(a, a->out_t, a->in_t[0]);
    int64_t total = s.planes * s.h * s.w;
    if (total <= 0) return 0;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), pool_grad<AVG>)
    ((float *)a->out, (const float *)a->in[0], AVG ? NULL : (const float *)a->in[1], s,
     AVG ? 0 : a->node->attr.i[ATTR_POOL_RELU] != 0);
    CUDA_LAUNCHED(a);
    return 0;
}

static int k_maxpool_grad(const kern_args *a)
{
    return pool_grad_launch<0>(a);
}

static int k_avgpool_grad(const kern_args *a)
{
    return pool_grad_launch<1>(a);
}

} // namespace

extern "C" const cuda_row cuda_rows_shape[] = {
    {OP_TRANSPOSE, k_transpose},
    {OP_CONCAT, k_concat},
    {OP_SLICE, k_slice},
    {OP_SLICE_GRAD, k_slice_grad},
    {OP_GATHER, k_gather},
    {OP_GATHER_GRAD, k_gather_grad},
    {OP_ONE_HOT, k_one_hot},
    {OP_MAXPOOL2D, k_maxpool},
    {OP_AVGPOOL2D, k_avgpool},
    {OP_MAXPOOL_GRAD, k_maxpool_grad},
    {OP_AVGPOOL_GRAD, k_avgpool_grad},
    {OP_COUNT, NULL},
};
