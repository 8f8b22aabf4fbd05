// test_stand_in.cc - the CUDA stand-in's own rules, with kernels written
// for the purpose: barriers are real, shuffles exchange within a warp,
// streams run apart until an event orders them, graphs replay, and every
// rule it promises to enforce (docs/gpu.md) is an error when broken.  An
// error is sticky for the process, so each broken rule runs in a child
// process of its own (forked before any stream thread exists).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_runtime.h"

static int failures;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

// ---- kernels ----

// out[0] = the sum of 0..n-1 over one block: shared memory, then a tree
// with a barrier at each level.
__global__ static void block_sum(int *out, int n)
{
    __shared__ int part[1024];
    unsigned t = threadIdx.x;
    part[t] = (int)t < n ? (int)t : 0;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) part[t] += part[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = part[0];
}

// Each warp's lanes sum their lane numbers with shuffles; lane 0 writes.
__global__ static void warp_sum(int *out)
{
    int v = (int)(threadIdx.x % 32);
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned ballot = __ballot_sync(0xffffffffu, threadIdx.x % 2 == 1);
    if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v + (ballot == 0xaaaaaaaau ? 1000 : 0);
}

__global__ static void add_one(float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += 1.0f;
}

__global__ static void write_at(float *x, int64_t i)
{
    x[i] = 7.0f;
}

// Only the first half of the block reaches the barrier.
__global__ static void half_barrier(int *out)
{
    if (threadIdx.x < blockDim.x / 2) __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ static void shuffle_past_the_block(int *out)
{
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ static void nothing(int *) {}

// ---- what works ----

static void barriers_and_shared_memory(void)
{
    int *d, h[4];
    EXPECT(cudaMalloc(&d, sizeof h) == cudaSuccess);
    CUDA_HOST_LAUNCH(4, 256, 0, (cudaStream_t)0, block_sum)(d, 200);
    EXPECT(cudaGetLastError() == cudaSuccess);
    EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int b = 0; b < 4; b++) EXPECT(h[b] == 199 * 200 / 2);
    cudaFree(d);
}

static void shuffles_and_votes(void)
{
    int *d, h[8];
    EXPECT(cudaMalloc(&d, sizeof h) == cudaSuccess);
    CUDA_HOST_LAUNCH(1, 256, 0, (cudaStream_t)0, warp_sum)(d);
    EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int w = 0; w < 8; w++) EXPECT(h[w] == 31 * 32 / 2 + 1000);
    cudaFree(d);
}

// b waits for a's event: it sees a's writes.  Then a graph of both
// replays twice.
static void streams_events_and_graphs(void)
{
    const int64_t n = 1 << 16;
    float *d, *pinned;
    cudaStream_t a, b;
    cudaEvent_t e;
    EXPECT(cudaMalloc(&d, n * sizeof *d) == cudaSuccess);
    EXPECT(cudaMallocHost(&pinned, n * sizeof *pinned) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
    EXPECT(cudaMemsetAsync(d, 0, n * sizeof *d, a) == cudaSuccess);
    for (int k = 0; k < 5; k++) CUDA_HOST_LAUNCH(64, 256, 0, a, add_one)(d, n);
    EXPECT(cudaEventRecord(e, a) == cudaSuccess);
    EXPECT(cudaStreamWaitEvent(b, e, 0) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(pinned, d, n * sizeof *d, cudaMemcpyDeviceToHost, b) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(b) == cudaSuccess);
    EXPECT(pinned[0] == 5.0f && pinned[n - 1] == 5.0f);

    cudaGraph_t g;
    cudaGraphExec_t x;
    EXPECT(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CUDA_HOST_LAUNCH(64, 256, 0, a, add_one)(d, n);
    EXPECT(cudaMemcpyAsync(pinned, d, n * sizeof *d, cudaMemcpyDeviceToHost, a) == cudaSuccess);
    EXPECT(cudaStreamEndCapture(a, &g) == cudaSuccess);
    EXPECT(pinned[0] == 5.0f); // captured, not run
    EXPECT(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
    EXPECT(cudaGraphLaunch(x, a) == cudaSuccess);
    EXPECT(cudaGraphLaunch(x, a) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(a) == cudaSuccess);
    EXPECT(pinned[0] == 7.0f && pinned[n - 1] == 7.0f);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cudaEventDestroy(e);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFreeHost(pinned);
    cudaFree(d);
}

// ---- what is refused: each in a child ----

static int partial_barrier(void)
{
    int *d;
    cudaMalloc(&d, 256 * sizeof *d);
    CUDA_HOST_LAUNCH(1, 256, 0, (cudaStream_t)0, half_barrier)(d);
    return cudaGetLastError() == cudaErrorLaunchFailure;
}

static int shuffle_with_missing_lanes(void)
{
    int *d;
    cudaMalloc(&d, 16 * sizeof *d);
    CUDA_HOST_LAUNCH(1, 16, 0, (cudaStream_t)0, shuffle_past_the_block)(d);
    return cudaGetLastError() == cudaErrorLaunchFailure;
}

static int write_past_the_end(void)
{
    float *d;
    cudaMalloc(&d, 10 * sizeof *d);
    CUDA_HOST_LAUNCH(1, 1, 0, (cudaStream_t)0, write_at)(d, 10);
    return cudaGetLastError() == cudaErrorLaunchFailure;
}

static int host_pointer_argument(void)
{
    static float host[4];
    CUDA_HOST_LAUNCH(1, 1, 0, (cudaStream_t)0, write_at)(host, 0);
    return cudaGetLastError() == cudaErrorLaunchFailure;
}

static int block_too_big(void)
{
    int *d;
    cudaMalloc(&d, 4);
    CUDA_HOST_LAUNCH(1, 1025, 0, (cudaStream_t)0, nothing)(d);
    cudaError_t e = cudaGetLastError();
    CUDA_HOST_LAUNCH(1, dim3(8, 8, 65), 0, (cudaStream_t)0, nothing)(d);
    return e == cudaErrorInvalidConfiguration &&
           cudaGetLastError() == cudaErrorInvalidConfiguration;
}

// Dynamic shared memory: 48 KB without the opt-in, at most 227 KB with it.
static int shared_memory_too_big(void)
{
    int *d;
    cudaMalloc(&d, 4);
    CUDA_HOST_LAUNCH(1, 32, 48 * 1024 + 4, (cudaStream_t)0, nothing)(d);
    int ok = cudaGetLastError() == cudaErrorInvalidValue;
    ok &= cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               227 * 1024 + 1) == cudaErrorInvalidValue &&
          cudaGetLastError() == cudaErrorInvalidValue; // and clears it
    ok &= cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) ==
          cudaSuccess;
    CUDA_HOST_LAUNCH(1, 32, 64 * 1024, (cudaStream_t)0, nothing)(d);
    ok &= cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
    CUDA_HOST_LAUNCH(1, 32, 64 * 1024 + 4, (cudaStream_t)0, nothing)(d);
    ok &= cudaGetLastError() == cudaErrorInvalidValue;
    ok &= cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024) ==
          cudaSuccess;
    CUDA_HOST_LAUNCH(1, 32, 227 * 1024 + 4, (cudaStream_t)0, nothing)(d);
    return ok && cudaGetLastError() == cudaErrorInvalidValue;
}

static int malloc_or_pageable_copy_in_a_capture(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    float *d, host[4];
    cudaMalloc(&d, sizeof host);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    int ok = cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s) ==
             cudaErrorStreamCaptureUnsupported;
    ok &= cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && !g;
    void *p;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    ok &= cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported;
    ok &= cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated;
    return ok;
}

static int replay_after_free(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    float *d;
    cudaMalloc(&d, 64 * sizeof *d);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    CUDA_HOST_LAUNCH(1, 64, 0, s, add_one)(d, 64);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&x, g, 0);
    cudaFree(d);
    cudaGraphLaunch(x, s);
    return cudaStreamSynchronize(s) == cudaErrorLaunchFailure;
}

static int wrong_copy_kind(void)
{
    float *d, host[4];
    cudaMalloc(&d, sizeof host);
    return cudaMemcpy(host, d, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue;
}

struct refused {
    const char *name;
    int (*run)(void);
    const char *says; // in the child's stderr
};

static const refused refusals[] = {
    {"partial barrier", partial_barrier, "__syncthreads() reached by 128 of the block's 256"},
    {"shuffle with missing lanes", shuffle_with_missing_lanes, "which has only 16 threads"},
    {"write past the end", write_past_the_end, "wrote past the end of the 40-byte"},
    {"host pointer argument", host_pointer_argument, "a GPU cannot read it"},
    {"block too big", block_too_big, "outside the H200's limits"},
    {"shared memory too big", shared_memory_too_big, "the H200 has at most 232448"},
    {"shared memory not opted in", shared_memory_too_big,
     "unless cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) raised it"},
    {"capture refuses", malloc_or_pageable_copy_in_a_capture, "pageable host memory"},
    {"replay after free", replay_after_free, "not allocated (freed before the launch ran?)"},
    {"wrong copy kind", wrong_copy_kind,
     "asked for a host to device copy, but it is device to host"},
};

// Runs r in a child with stderr in a pipe: it must return 1 and say r->says.
static void expect_refused(const refused *r)
{
    int fd[2];
    if (pipe(fd) != 0) abort();
    fflush(stdout); // or the child's exit prints it again
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        _exit(r->run() ? 0 : 1);
    }
    close(fd[1]);
    char buf[8192];
    size_t got = 0;
    ssize_t k;
    while (got + 1 < sizeof buf && (k = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    buf[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(buf, r->says);
    printf("  %-28s %s\n", r->name, ok ? "refused" : "NOT REFUSED");
    if (!ok) {
        fprintf(stderr, "%s: want an error saying '%s'; the child said:\n%s\n", r->name, r->says,
                buf);
        failures++;
    }
}

int main(void)
{
    for (const refused &r : refusals) expect_refused(&r);
    barriers_and_shared_memory();
    shuffles_and_votes();
    streams_events_and_graphs();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
