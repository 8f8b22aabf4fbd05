/* cublas_v2.h - the CUDA stand-in's cuBLAS (tests/cuda_host/cublas.cc): the
 * calls devices/cuda/ opens by dlopen (blas_dl.cu), in a libcublas.so.13 of
 * the stand-in's own that runs each GEMM as one column-major cblas_sgemm
 * with the same arguments. */
#ifndef CUDA_HOST_CUBLAS_V2_H
#define CUDA_HOST_CUBLAS_V2_H

#include "cuda_runtime.h"

#define CUBLAS_VER_MAJOR 13

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

typedef struct cublasContext *cublasHandle_t;

#define cublasCreate         cublasCreate_v2
#define cublasDestroy        cublasDestroy_v2
#define cublasSetStream      cublasSetStream_v2
#define cublasSetWorkspace   cublasSetWorkspace_v2
#define cublasSgemm          cublasSgemm_v2
#define cublasSetPointerMode cublasSetPointerMode_v2

extern "C" {
cublasStatus_t cublasCreate_v2(cublasHandle_t *h);
cublasStatus_t cublasDestroy_v2(cublasHandle_t h);
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode);
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batch);
}

#endif
