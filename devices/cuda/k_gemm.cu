// k_gemm.cu - MATMUL (batched too), MATMUL_BIAS, APPLY_SGD_MATMUL and CONV2D with its
// two gradients, on cuBLAS, computing what devices/cpu/cpu_gemm.c and
// cpu_conv.c compute.
//
// Our tensors are row-major and cuBLAS is column-major: a row-major [M,N]
// matrix is, read column-major, its [N,M] transpose.  So C = op(A) @ op(B)
// is computed as C^T = op(B)^T @ op(A)^T: the operands swap places, and
// each keeps its own transpose flag and leading dimension (the row length
// it has in memory).  cuBLAS runs in its default math mode: full f32, no
// TF32.
//
// Convolutions are NCHW images and [OC, C, KH, KW] filters, lowered as on
// the CPU: per image, an im2col buffer [C*KH*KW, OH*OW] in the node's
// scratch (the executor gives CUDA one slice: max_tasks is 1) and one GEMM;
// 1x1, stride 1, unpadded convolutions use the images themselves, the whole
// batch in one strided-batched GEMM.
#include "cuda_impl.cuh"
#include "devices/bcast.h"
#include "devices/gemm.h"

#define IN_F(k)   ((const float *)a->in[k])
#define OUT_F     ((float *)a->out)
#define ATTR_I(k) (a->node->attr.i[k])

// Row-major C = alpha * op(A) @ op(B) + beta * C, `batch` times, the i-th
// at a + i * stride_a (and b, c likewise).  A is [M,K] ([K,M] when ta), B
// is [K,N] ([N,K] when tb), C is [M,N].
typedef struct gemm_rm {
    int64_t m, n, k;
    int ta, tb;
    const float *a, *b;
    float *c;
    float alpha, beta;
    int64_t batch, stride_a, stride_b, stride_c;
} gemm_rm;

// No products: C = beta * C, which is C (beta = 1) or 0 (beta = 0; BLAS
// does not read C then, so NaN in it does not survive).
static void gemm_empty(const kern_args *a, const gemm_rm *g)
{
    if (g->beta != 0.0f) return;
    size_t row = (size_t)(g->m * g->n) * sizeof(float);
    size_t pitch = g->batch > 1 ? (size_t)g->stride_c * sizeof(float) : row;
    CUDA_CHECK(cudaMemset2DAsync(g->c, pitch, 0, row, (size_t)g->batch, cuda_stream(a)), a);
}

// The GEMM itself, alpha and beta where the handle's pointer mode says.
static void gemm_blas(const kern_args *a, const gemm_rm *g, const float *alpha, const float *beta)
{
    cublasOperation_t opa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    int lda = g->ta ? m : k, ldb = g->tb ? k : n;
    if (g->batch == 1) {
        CUBLAS_CHECK(cuda_blas.sgemm(a->queue->blas, opb, opa, n, m, k, alpha, g->b, ldb, g->a, lda,
                                     beta, g->c, n),
                     a);
        return;
    }
    CUBLAS_CHECK(cuda_blas.sgemm_strided(a->queue->blas, opb, opa, n, m, k, alpha, g->b, ldb,
                                         g->stride_b, g->a, lda, g->stride_a, beta, g->c, n,
                                         g->stride_c, (int)g->batch),
                 a);
}

static void gemm_run(const kern_args *a, const gemm_rm *g)
{
    if (g->m == 0 || g->n == 0 || g->batch == 0) return;
    if (g->k == 0) {
        gemm_empty(a, g);
        return;
    }
    gemm_blas(a, g, &g->alpha, &g->beta);
}

// The node's product (devices/gemm.h) into c, alpha 1, beta 0; with batch
// axes, the first batch's product.
static gemm_rm gemm_args(const kern_args *a, float *c)
{
    gemm_dims d = gemm_dims_of(a);
    gemm_rm g = {};
    g.m = d.m;
    g.n = d.n;
    g.k = d.k;
    g.ta = d.ta;
    g.tb = d.tb;
    g.a = IN_F(d.a);
    g.b = IN_F(d.b);
    g.c = c;
    g.alpha = 1.0f;
    g.beta = 0.0f;
    g.batch = 1;
    return g;
}

// Where run q of the plan (every axis but the innermost) reads a and b,
// in matrices.
static void batch_run_at(const bcast_axes *bc, int64_t q, int64_t *ia, int64_t *ib)
{
    *ia = *ib = 0;
    for (int d = bc->nd - 2; d >= 0; d--) {
        int64_t i = q % bc->dim[d];
        q /= bc->dim[d];
        *ia += i * bc->sa[d];
        *ib += i * bc->sb[d];
    }
}

// [..., M, K] @ [..., K, N]: the batch axes planned as the CPU plans them
// (bcast_plan); the innermost is one strided-batched GEMM (stride 0
// where an operand is broadcast), or, when only a moves along it and is
// not transposed, one GEMM of len * M rows ([B, T, C] @ [C, N]); the outer
// axes are a loop of such calls, the same every step.
static void matmul_batched(const kern_args *a, gemm_rm g)
{
    ir_type ob = gemm_batch_type(a->out_t), ab = gemm_batch_type(a->in_t[0]),
            bb = gemm_batch_type(a->in_t[1]);
    bcast_axes bc;
    bcast_plan(&bc, &ob, &ab, &bb);
    int64_t len = bc.dim[bc.nd - 1], va = bc.sa[bc.nd - 1], vb = bc.sb[bc.nd - 1];
    int64_t sa = g.m * g.k, sb = g.k * g.n, sc = g.m * g.n, runs = len ? ir_numel(&ob) / len : 0;
    const float *a0 = g.a, *b0 = g.b;
    float *c0 = g.c;
    if (va == 1 && vb == 0 && !g.ta && g.m * len <= INT32_MAX) {
        g.m *= len;
    } else {
        g.batch = len;
        g.stride_a = va * sa;
        g.stride_b = vb * sb;
        g.stride_c = sc;
    }
    for (int64_t q = 0; q < runs; q++) {
        int64_t ia, ib;
        batch_run_at(&bc, q, &ia, &ib);
        g.a = a0 + ia * sa;
        g.b = b0 + ib * sb;
        g.c = c0 + q * len * sc;
        gemm_run(a, &g);
    }
}

static int k_matmul(const kern_args *a)
{
    gemm_rm g = gemm_args(a, OUT_F);
    if (a->out_t->rank > 2)
        matmul_batched(a, g);
    else
        gemm_run(a, &g);
    return 0;
}

// c[i, j] += bias[j], then max(c, 0) when relu (NaN -> 0, as the CPU's
// `c > 0 ? c : 0`).  The CPU adds the bias as BLAS's beta * C; the sum is
// the same up to rounding.
__global__ static void bias_relu_kernel(float *c, const float *bias, int64_t m, int64_t n, int relu)
{
    CUDA_FOR(i, m * n)
    {
        float v = c[i] + bias[i % n];
        c[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

// in: a, b, bias[N]; ATTR_BIAS_RELU.  [..., M, K] @ [K, N] is one GEMM of
// all the rows (gemm_dims_of).
static int k_matmul_bias(const kern_args *a)
{
    gemm_rm g = gemm_args(a, OUT_F);
    gemm_run(a, &g);
    if (g.m * g.n == 0) return 0;
    CUDA_LAUNCH(cuda_blocks(g.m * g.n), CUDA_BLOCK, 0, cuda_stream(a), bias_relu_kernel)
    (g.c, IN_F(2), g.m, g.n, ATTR_I(ATTR_BIAS_RELU) != 0);
    CUDA_LAUNCHED(a);
    return 0;
}

// --stale-lr: alpha, -lr times the update's staleness factor, into the
// factor's word (which the runtime sets on the stream before the update).
__global__ static void neg_lr_kernel(float *scale, float lr)
{
    *scale = __fmul_rn(-lr, *scale);
}

// in[0] (the variable) -= lr * in[1] @ in[2]: one GEMM with beta = 1.
// Under --stale-lr (a->lr_scale) cuBLAS reads alpha from the factor's word
// and beta from the queue's 1 (device pointer mode): a step graph replays
// no alpha of the host's.
static int k_apply_sgd_matmul(const kern_args *a)
{
    gemm_rm g = gemm_args(a, (float *)a->in[0]);
    g.alpha = -(float)a->node->attr.f[ATTR_SGDMM_LR];
    g.beta = 1.0f;
    if (!a->lr_scale || g.m == 0 || g.n == 0 || g.k == 0) {
        gemm_run(a, &g);
        return 0;
    }
    CUDA_LAUNCH(1, 1, 0, cuda_stream(a), neg_lr_kernel)(a->lr_scale, -g.alpha);
    CUDA_LAUNCHED(a);
    CUBLAS_CHECK(cuda_blas.set_pointer_mode(a->queue->blas, CUBLAS_POINTER_MODE_DEVICE), a);
    gemm_blas(a, &g, a->lr_scale, a->queue->one);
    CUBLAS_CHECK(cuda_blas.set_pointer_mode(a->queue->blas, CUBLAS_POINTER_MODE_HOST), a);
    return 0;
}

// ---- convolution ----

typedef struct conv_shape {
    int64_t n, c, h, w; // the forward input x
    int64_t oc, kh, kw; // the filter (its C is c)
    int64_t oh, ow;     // the forward output y
    int64_t stride, pad;
} conv_shape;

// x, w and y: the forward input, filter and output, wherever they are.
static conv_shape conv_shape_of(const kern_args *a, const ir_type *xt, const ir_type *wt,
                                const ir_type *yt)
{
    conv_shape s;
    s.n = xt->dim[0];
    s.c = xt->dim[1];
    s.h = xt->dim[2];
    s.w = xt->dim[3];
    s.oc = wt->dim[0];
    s.kh = wt->dim[2];
    s.kw = wt->dim[3];
    s.oh = yt->dim[2];
    s.ow = yt->dim[3];
    s.stride = ATTR_I(ATTR_CONV_STRIDE) > 0 ? ATTR_I(ATTR_CONV_STRIDE) : 1;
    s.pad = ATTR_I(ATTR_CONV_PAD);
    return s;
}

static int64_t conv_ckk(const conv_shape *s)
{
    return s->c * s->kh * s->kw;
}
static int64_t conv_ohw(const conv_shape *s)
{
    return s->oh * s->ow;
}
static int64_t conv_img(const conv_shape *s)
{
    return s->c * s->h * s->w;
}
// A 1x1, stride 1, unpadded convolution's im2col is the image itself.
static int conv_is_pointwise(const conv_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->stride == 1 && s->pad == 0;
}

// The im2col buffer of one image: the node's scratch, which the registry
// sizes for it (ops_scratch_conv2d, ops_scratch_conv2d_grad_w); none when
// the buffer is empty (no channels), which nothing then reads or writes.
static float *conv_col(const kern_args *a, const conv_shape *s)
{
    size_t need = (size_t)(conv_ckk(s) * conv_ohw(s)) * sizeof(float);
    if (need == 0) return NULL;
    GR_ASSERT(a->scratch && a->scratch_task_bytes >= need);
    return (float *)a->scratch;
}

// col[(c*KH+kh)*KW+kw, oh*OW+ow] = x[c, oh*S-P+kh, ow*S-P+kw], 0 outside.
__global__ static void im2col_kernel(float *col, const float *x, conv_shape s)
{
    int64_t ohw = s.oh * s.ow, total = s.c * s.kh * s.kw * ohw;
    CUDA_FOR(i, total)
    {
        int64_t r = i / ohw, p = i % ohw;
        int64_t c = r / (s.kh * s.kw), kh = r / s.kw % s.kh, kw = r % s.kw;
        int64_t ih = p / s.ow * s.stride - s.pad + kh, iw = p % s.ow * s.stride - s.pad + kw;
        col[i] = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w ? x[(c * s.h + ih) * s.w + iw] : 0.0f;
    }
}

// The adjoint of im2col as a gather: each dx element sums the column
// entries that read it, in the CPU's order (kh, then kw, from 0), so with
// the same col the result is the CPU's bit for bit, without atomics.
__global__ static void col2im_kernel(float *dx, const float *col, conv_shape s)
{
    int64_t ohw = s.oh * s.ow, hw = s.h * s.w, total = s.c * hw;
    CUDA_FOR(i, total)
    {
        int64_t c = i / hw, ih = i % hw / s.w, iw = i % s.w;
        float acc = 0.0f;
        for (int64_t kh = 0; kh < s.kh; kh++) {
            int64_t th = ih + s.pad - kh; // = oh * stride
            if (th < 0 || th % s.stride || th / s.stride >= s.oh) continue;
            for (int64_t kw = 0; kw < s.kw; kw++) {
                int64_t tw = iw + s.pad - kw;
                if (tw < 0 || tw % s.stride || tw / s.stride >= s.ow) continue;
                acc +=
                    col[((c * s.kh + kh) * s.kw + kw) * ohw + th / s.stride * s.ow + tw / s.stride];
            }
        }
        dx[i] = acc;
    }
}

static void im2col(const kern_args *a, const conv_shape *s, float *col, const float *x)
{
    int64_t total = conv_ckk(s) * conv_ohw(s);
    if (total == 0) return;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), im2col_kernel)(col, x, *s);
    CUDA_LAUNCHED(a);
}

static void col2im(const kern_args *a, const conv_shape *s, float *dx, const float *col)
{
    if (conv_img(s) == 0) return;
    CUDA_LAUNCH(cuda_blocks(conv_img(s)), CUDA_BLOCK, 0, cuda_stream(a), col2im_kernel)
    (dx, col, *s);
    CUDA_LAUNCHED(a);
}

// A GEMM over the whole batch: image i's operands at i * stride_a/b/c.
static gemm_rm conv_gemm(int64_t m, int64_t n, int64_t k, int ta, int tb, const float *pa,
                         const float *pb, float *pc)
{
    gemm_rm g = {};
    g.m = m;
    g.n = n;
    g.k = k;
    g.ta = ta;
    g.tb = tb;
    g.a = pa;
    g.b = pb;
    g.c = pc;
    g.alpha = 1.0f;
    g.beta = 0.0f;
    g.batch = 1;
    return g;
}

// y[n] = W[OC, CKK] @ col(x[n])[CKK, OHW].
static void conv2d_run(const kern_args *a)
{
    conv_shape s = conv_shape_of(a, a->in_t[0], a->in_t[1], a->out_t);
    int64_t ckk = conv_ckk(&s), ohw = conv_ohw(&s), y_img = s.oc * ohw;
    const float *x = IN_F(0), *w = IN_F(1);
    gemm_rm g = conv_gemm(s.oc, ohw, ckk, 0, 0, w, x, OUT_F);
    if (conv_is_pointwise(&s)) { // W shared by every image: stride 0
        g.batch = s.n;
        g.stride_b = conv_img(&s);
        g.stride_c = y_img;
        gemm_run(a, &g);
        return;
    }
    float *col = s.n ? conv_col(a, &s) : NULL;
    g.b = col;
    for (int64_t n = 0; n < s.n; n++, g.c += y_img) {
        im2col(a, &s, col, x + n * conv_img(&s));
        gemm_run(a, &g);
    }
    return;
}

// y[i] += bias[its channel], then max(y, 0) when relu, over [N, C, HW].
__global__ static void chan_bias_relu_kernel(float *y, const float *bias, int64_t total, int64_t hw,
                                             int64_t c, int relu)
{
    CUDA_FOR(i, total)
    {
        float v = y[i] + bias[i / hw % c];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

// conv2d, and conv2d_bias: in[2] a bias per output channel, ATTR_BIAS_RELU.
static int k_conv2d(const kern_args *a)
{
    conv2d_run(a);
    int64_t total = ir_numel(a->out_t);
    if (a->node->op != OP_CONV2D_BIAS || total == 0) return 0;
    CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), chan_bias_relu_kernel)
    (OUT_F, IN_F(2), total, a->out_t->dim[2] * a->out_t->dim[3], a->out_t->dim[1],
     ATTR_I(ATTR_BIAS_RELU) != 0);
    CUDA_LAUNCHED(a);
    return 0;
}

// in: dy [N,OC,OH,OW], w.  dx[n] = col2im(W^T[CKK, OC] @ dy[n][OC, OHW]).
static int k_conv2d_grad_x(const kern_args *a)
{
    conv_shape s = conv_shape_of(a, a->out_t, a->in_t[1], a->in_t[0]);
    int64_t ckk = conv_ckk(&s), ohw = conv_ohw(&s), y_img = s.oc * ohw;
    const float *dy = IN_F(0), *w = IN_F(1);
    float *dx = OUT_F;
    gemm_rm g = conv_gemm(ckk, ohw, s.oc, 1, 0, w, dy, dx);
    if (conv_is_pointwise(&s)) {
        g.batch = s.n;
        g.stride_b = y_img;
        g.stride_c = conv_img(&s);
        gemm_run(a, &g);
        return 0;
    }
    float *col = s.n ? conv_col(a, &s) : NULL;
    g.c = col;
    for (int64_t n = 0; n < s.n; n++, g.b += y_img) {
        gemm_run(a, &g);
        col2im(a, &s, dx + n * conv_img(&s), col);
    }
    return 0;
}

// in: dy [N,OC,OH,OW], x.  dW[OC, CKK] = sum over n of dy[n] @ col(x[n])^T,
// accumulated image by image in order (beta = 1 after the first), as one
// CPU task does; no batch: dW = 0.
static int k_conv2d_grad_w(const kern_args *a)
{
    conv_shape s = conv_shape_of(a, a->in_t[1], a->out_t, a->in_t[0]);
    int64_t ckk = conv_ckk(&s), ohw = conv_ohw(&s), y_img = s.oc * ohw;
    const float *dy = IN_F(0), *x = IN_F(1);
    if (s.n == 0 || ohw == 0) {
        size_t bytes = (size_t)(s.oc * ckk) * sizeof(float);
        if (bytes) CUDA_CHECK(cudaMemsetAsync(a->out, 0, bytes, cuda_stream(a)), a);
        return 0;
    }
    int pointwise = conv_is_pointwise(&s);
    float *col = pointwise ? NULL : conv_col(a, &s);
    gemm_rm g = conv_gemm(s.oc, ckk, ohw, 0, 1, dy, col, OUT_F);
    for (int64_t n = 0; n < s.n; n++, g.a += y_img) {
        const float *xn = x + n * conv_img(&s);
        if (pointwise)
            g.b = xn;
        else
            im2col(a, &s, col, xn);
        g.beta = n ? 1.0f : 0.0f;
        gemm_run(a, &g);
    }
    return 0;
}

extern "C" const cuda_row cuda_rows_gemm[] = {
    {OP_MATMUL, k_matmul},
    {OP_MATMUL_BIAS, k_matmul_bias},
    {OP_APPLY_SGD_MATMUL, k_apply_sgd_matmul},
    {OP_CONV2D, k_conv2d},
    {OP_CONV2D_BIAS, k_conv2d},
    {OP_CONV2D_GRAD_X, k_conv2d_grad_x},
    {OP_CONV2D_GRAD_W, k_conv2d_grad_w},
    {OP_COUNT, NULL},
};
