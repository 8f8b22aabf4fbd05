// cublas.cc - the stand-in's libcublas.so.13: the calls devices/cuda/
// opens (blas_dl.cu), each GEMM run on its stream as column-major
// cblas_sgemm with the very transposes, m n k, leading dimensions, alpha
// and beta it was given, so a wrong argument in our calls gives a wrong
// result here too.  Arguments are checked as cuBLAS checks them (leading
// dimensions at least the rows stored), and each matrix must lie inside
// one live device allocation: the span a leading dimension implies.  In
// device pointer mode alpha and beta are device memory, read as the GEMM
// runs on its stream (as cuBLAS reads them), not when it is called.
// Linked against nothing of the runtime: it reaches its stream through the
// table every stream starts with (host_abi.h).
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "host_abi.h"

using cuda_host::abi;
using cuda_host::host_work;
using cuda_host::stream_head;

struct cublasContext {
    cudaStream_t stream;
    void *ws;
    size_t ws_bytes;
    cublasPointerMode_t mode;
};

namespace
{
struct gemm {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    float alpha, beta;
    const float *A, *B;
    float *C;
    long long sa, sb, sc;
    const abi *ops;
    const float *alpha_dev, *beta_dev; /* device pointer mode: read when it runs; else NULL */
};

CBLAS_TRANSPOSE cblas_op(cublasOperation_t t)
{
    return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

// Elements a column-major rows x cols matrix with leading dimension ld
// spans, for batch matrices stride apart.
size_t extent(int rows, int cols, int ld, long long stride, int batch)
{
    if (rows == 0 || cols == 0) return 0;
    return (size_t)(batch - 1) * (size_t)stride + (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

const float *at(const gemm *g, const float *p, size_t elems, const char *which, char *why, size_t n)
{
    if (!elems) return p;
    const float *q = (const float *)g->ops->device_span(p, elems * sizeof(float));
    if (!q)
        snprintf(why, n,
                 "cublasSgemm (m %d, n %d, k %d, lda %d, ldb %d, ldc %d, batch %d): %s at %p, "
                 "%zu floats by its leading dimension, is not inside one live device allocation",
                 g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->batch, which, (const void *)p, elems);
    return q;
}

// Device pointer mode: alpha and beta from device memory, now.
bool read_scalars(gemm *g, char *why, size_t n)
{
    if (!g->alpha_dev) return true;
    const float *al = (const float *)g->ops->device_span(g->alpha_dev, sizeof(float));
    const float *be = (const float *)g->ops->device_span(g->beta_dev, sizeof(float));
    if (!al || !be) {
        snprintf(why, n,
                 "cublasSgemm (pointer mode device): alpha %p or beta %p not in device memory",
                 (const void *)g->alpha_dev, (const void *)g->beta_dev);
        return false;
    }
    g->alpha = *al, g->beta = *be;
    return true;
}

bool gemm_run(void *ctx, char *why, size_t n)
{
    gemm *g = (gemm *)ctx;
    if (!read_scalars(g, why, n)) return false;
    int ar = g->ta == CUBLAS_OP_N ? g->m : g->k, ac = g->ta == CUBLAS_OP_N ? g->k : g->m;
    int br = g->tb == CUBLAS_OP_N ? g->k : g->n, bc = g->tb == CUBLAS_OP_N ? g->n : g->k;
    const float *A = at(g, g->A, extent(ar, ac, g->lda, g->sa, g->batch), "A", why, n);
    if (!A) return false;
    const float *B = at(g, g->B, extent(br, bc, g->ldb, g->sb, g->batch), "B", why, n);
    if (!B) return false;
    float *C = (float *)at(g, g->C, extent(g->m, g->n, g->ldc, g->sc, g->batch), "C", why, n);
    if (!C) return false;
    for (int b = 0; b < g->batch; b++)
        cblas_sgemm(CblasColMajor, cblas_op(g->ta), cblas_op(g->tb), g->m, g->n, g->k, g->alpha,
                    A + b * g->sa, g->lda, B + b * g->sb, g->ldb, g->beta, C + b * g->sc, g->ldc);
    return true;
}

void *gemm_clone(const void *ctx)
{
    gemm *c = (gemm *)malloc(sizeof *c);
    if (c) memcpy(c, ctx, sizeof *c);
    return c;
}

// cuBLAS's own checks: CUBLAS_STATUS_INVALID_VALUE for what it refuses.
bool valid(const gemm &g)
{
    int ar = g.ta == CUBLAS_OP_N ? g.m : g.k, br = g.tb == CUBLAS_OP_N ? g.k : g.n;
    bool ops_ok = (g.ta == CUBLAS_OP_N || g.ta == CUBLAS_OP_T) &&
                  (g.tb == CUBLAS_OP_N || g.tb == CUBLAS_OP_T);
    return ops_ok && g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0 &&
           g.lda >= (ar > 1 ? ar : 1) && g.ldb >= (br > 1 ? br : 1) && g.ldc >= (g.m > 1 ? g.m : 1);
}

// alpha and beta as h's pointer mode says: their values now, or device
// pointers read as the GEMM runs.
void set_scalars(cublasHandle_t h, gemm &g, const float *alpha, const float *beta)
{
    if (h && h->mode == CUBLAS_POINTER_MODE_DEVICE)
        g.alpha_dev = alpha, g.beta_dev = beta;
    else
        g.alpha = *alpha, g.beta = *beta;
}

cublasStatus_t submit(cublasHandle_t h, const gemm &g0, const char *name)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!valid(g0)) {
        fprintf(stderr,
                "cuda_host: %s: invalid value (m %d, n %d, k %d, lda %d, ldb %d, ldc %d): a "
                "leading dimension is below the rows its matrix stores\n",
                name, g0.m, g0.n, g0.k, g0.lda, g0.ldb, g0.ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!h->stream) {
        fprintf(stderr, "cuda_host: %s on the legacy default stream: set a stream first\n", name);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (g0.m == 0 || g0.n == 0 || g0.batch == 0) return CUBLAS_STATUS_SUCCESS;
    const abi *ops = ((const stream_head *)h->stream)->ops;
    gemm *g = (gemm *)gemm_clone(&g0);
    if (!g) return CUBLAS_STATUS_ALLOC_FAILED;
    g->ops = ops;
    host_work w = {name, gemm_run, gemm_clone, free, g};
    return ops->enqueue(h->stream, &w) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                      : CUBLAS_STATUS_EXECUTION_FAILED;
}
} // namespace

extern "C" {
cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = (cublasHandle_t)calloc(1, sizeof **h);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ws && h->stream && !((const stream_head *)h->stream)->ops->is_device(ws)) {
        fprintf(stderr, "cuda_host: cublasSetWorkspace: %p is not device memory\n", ws);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->ws = ws;
    h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    gemm g = {ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, A, B, C, 0, 0, 0, NULL, NULL, NULL};
    set_scalars(h, g, alpha, beta);
    return submit(h, g, "cublasSgemm");
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batch)
{
    gemm g = {ta, tb, m, n, k,       lda,     ldb,     ldc,  batch, 0,
              0,  A,  B, C, strideA, strideB, strideC, NULL, NULL,  NULL};
    set_scalars(h, g, alpha, beta);
    return submit(h, g, "cublasSgemmStridedBatched");
}
}
