/* cuda_impl.cuh - private to devices/cuda: what every kernel family needs.
 *
 * A kernel_fn of the CUDA device (k_*.cu) runs on the host thread that
 * launches it: it reads shapes and attributes from kern_args (host memory),
 * and enqueues its work on the queue's stream, a->queue->stream (cuBLAS
 * calls through a->queue->blas, already bound to that stream).  It never
 * reads device memory on the host and never synchronises: queue_sync does.
 * Buffers (out, in, scratch) are device pointers.
 *
 * Bad input that only the data shows (a label outside the classes, an id
 * outside its table) is found on the GPU: the kernel reports it with
 * cuda_fault_report, naming the launch by a->queue->seq; queue_sync copies
 * the first report back, writes the message into that call's kern_fault
 * and returns its kern_args.  Unlike the CPU and the simulated GPU, calls
 * launched after the failing one still run (on bad data): the step fails
 * all the same. */
#ifndef GR_CUDA_IMPL_CUH
#define GR_CUDA_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "cuda.h"
}

/* The first bad id a queue's kernels met since its last sync. */
typedef struct cuda_fault {
    int seq;         /* the launch (dev_queue.seq when it ran), 0: none */
    int what;        /* CUDA_FAULT_* */
    int value;       /* the bad id */
    int input;       /* which input of the call held it */
    long long index; /* where it sits, flat */
    long long limit; /* ids must be in [0, limit) */
} cuda_fault;

enum { CUDA_FAULT_LABEL = 1, CUDA_FAULT_ID = 2 };

struct dev_queue {
    int device; /* cudaSetDevice index */
    cudaStream_t stream;
    cublasHandle_t blas;        /* bound to stream */
    cuda_fault *fault;          /* device memory: the first report */
    cuda_fault *fault_host;     /* pinned: where queue_sync reads it */
    int seq;                    /* the launch being enqueued: 1, 2, ... since the sync */
    const kern_args **launched; /* [seq]: which call each launch was */
    int cap_launched;
    int capture_seq; /* seq when the step graph being captured began */
    void *blas_ws;   /* cuBLAS's workspace, CUDA_BLAS_WORKSPACE bytes */
    float *one;      /* device memory: 1, a GEMM's beta in device pointer mode */
};

/* 32 MiB: what NVIDIA's cuBLAS notes advise for Hopper. */
#define CUDA_BLAS_WORKSPACE ((size_t)32 << 20)

/* The cuBLAS calls the device makes, opened by cuda_blas_load
 * (blas_dl.cu): the library is not linked. */
typedef struct cuda_blas_api {
    decltype(&cublasCreate) create;
    decltype(&cublasDestroy) destroy;
    decltype(&cublasSetStream) set_stream;
    decltype(&cublasSetWorkspace) set_workspace;
    decltype(&cublasSetPointerMode) set_pointer_mode;
    decltype(&cublasSgemm) sgemm;
    decltype(&cublasSgemmStridedBatched) sgemm_strided;
} cuda_blas_api;
extern cuda_blas_api cuda_blas; /* filled by cuda_blas_load (cuda.h) */

/* Checks a CUDA or cuBLAS call: a failure is fatal (the abort hook), naming
 * the call, file:line and, when a is given, the op and its .graph line. */
#define CUDA_CHECK(call, a)   cuda_check_rt((call), #call, __FILE__, __LINE__, (a))
#define CUBLAS_CHECK(call, a) cuda_check_blas((call), #call, __FILE__, __LINE__, (a))
void cuda_check_rt(cudaError_t e, const char *call, const char *file, int line, const kern_args *a);
void cuda_check_blas(cublasStatus_t e, const char *call, const char *file, int line,
                     const kern_args *a);

/* Launch geometry for a grid-stride loop over n elements. */
enum { CUDA_BLOCK = 256 };
static inline unsigned cuda_blocks(int64_t n)
{
    int64_t b = (n + CUDA_BLOCK - 1) / CUDA_BLOCK;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}
static inline cudaStream_t cuda_stream(const kern_args *a)
{
    return a->queue->stream;
}
/* i over [0, n) in a grid-stride loop (in a kernel). */
#define CUDA_FOR(i, n)                                                                             \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* The one way devices/cuda/ launches a kernel:
 *     CUDA_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...);
 * the kernel last, so a template's commas need no parentheses.  Under nvcc
 * it is the <<<...>>> launch; compiled as C++ against the CUDA stand-in
 * (tests/cuda_host, docs/gpu.md), the stand-in's launch: its one seam. */
#if defined(__CUDACC__)
#define CUDA_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#elif defined(CUDA_HOST_LAUNCH)
#define CUDA_LAUNCH(grid, block, smem, stream, ...)                                                \
    CUDA_HOST_LAUNCH(grid, block, smem, stream, __VA_ARGS__)
#else
#error "devices/cuda/ compiles with nvcc, or as C++ against the stand-in (tests/cuda_host)"
#endif

/* Checks the launch just made (CUDA_LAUNCH). */
#define CUDA_LAUNCHED(a) CUDA_CHECK(cudaGetLastError(), (a))

/* On the GPU: the first report of a queue's kernels wins. */
__device__ static inline void cuda_fault_report(cuda_fault *f, int seq, int what, int input,
                                                int value, long long index, long long limit)
{
    if (atomicCAS(&f->seq, 0, seq) != 0) return;
    f->what = what;
    f->input = input;
    f->value = value;
    f->index = index;
    f->limit = limit;
}

/* One family's rows of the kernel table (k_<family>.cu): {op, kernel}
 * pairs ended by {OP_COUNT, NULL}; kernels.cu merges them. */
typedef struct cuda_row {
    op_kind op;
    kernel_fn fn;
} cuda_row;
extern "C" const cuda_row cuda_rows_elementwise[], cuda_rows_reduce[], cuda_rows_softmax[],
    cuda_rows_norm[], cuda_rows_gemm[], cuda_rows_shape[], cuda_rows_update[];

/* Every id of ids (n of them, one of a's inputs) in [0, limit), else a
 * report: the check the kernels of gather, one_hot, softmax_xent and their
 * gradients run first. */
void cuda_check_ids(const kern_args *a, const int32_t *ids, int64_t n, int64_t limit, int what);

#endif
