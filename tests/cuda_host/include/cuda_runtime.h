/* cuda_runtime.h - the CUDA stand-in's runtime API and kernel language
 * (tests/cuda_host, docs/gpu.md): the subset devices/cuda/ uses, so that its
 * .cu files compile unchanged as C++ with the host compiler and run on the
 * CPU.  Device memory is the simulated GPU's (devices/sim/sim_mem.c): host
 * code that touches it outside a stand-in call faults.  Each stream runs on
 * a thread of its own; each block's threads run as cooperatively scheduled
 * fibers (host.h), so __syncthreads() is a real barrier and a warp's
 * shuffles exchange values among its 32 lanes.
 *
 * Not the real header: names the real runtime exports with C linkage are
 * C++ functions here, so that a program holding both never mixes them. */
#ifndef CUDA_HOST_RUNTIME_H
#define CUDA_HOST_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <utility>

#define CUDART_VERSION 13000

/* ---- the kernel language: qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
/* A block-scope thread_local is static: one copy per stream thread, and a
 * stream thread runs one block at a time, so each block sees its own. */
#define __shared__ thread_local

/* ---- types ---- */
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum {
    cudaStreamDefault = 0,
    cudaStreamNonBlocking = 1,
    cudaEventDefault = 0,
    cudaEventDisableTiming = 2,
    cudaEventRecordDefault = 0,
    cudaEventRecordExternal = 1,
    cudaEventWaitDefault = 0,
    cudaEventWaitExternal = 1,
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

/* ---- the runtime API (tests/cuda_host/runtime.cc) ---- */
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemset(void *dst, int value, size_t n);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s);
cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s);
template <class T> cudaError_t cudaMalloc(T **p, size_t bytes)
{
    return cudaMalloc((void **)p, bytes);
}
template <class T> cudaError_t cudaMallocHost(T **p, size_t bytes)
{
    return cudaMallocHost((void **)p, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s = 0, unsigned flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t g);

/* A kernel gets 48 KB of dynamic shared memory unless it opts in to more,
 * up to the H200's 227 KB (cudaFuncAttributeMaxDynamicSharedMemorySize). */
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};
namespace cuda_host
{
cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value);
}
template <class T> cudaError_t cudaFuncSetAttribute(T *fn, cudaFuncAttribute attr, int value)
{
    return cuda_host::func_set_attribute((const void *)fn, attr, value);
}

/* ---- kernels: launches (the stand-in's side of CUDA_LAUNCH) ---- */
namespace cuda_host
{
/* The block and thread a fiber runs (host.h keeps the rest). */
struct block_ctx {
    uint3 block_idx;
    dim3 block_dim, grid_dim;
};
extern thread_local const block_ctx *cur_block;
extern thread_local uint3 cur_thread;

/* One launch's kernel and arguments, as the launch made them.  prepare()
 * turns the device pointers among the arguments (top-level pointers, and
 * pointer-sized words of structs that point into device memory) into the
 * addresses the stand-in reads them at, checking the pointers; run() is
 * one thread's call. */
struct kernel_call {
    const char *name;
    virtual ~kernel_call() {}
    virtual bool prepare(char *why, size_t n) = 0;
    virtual void run() = 0;
};

/* What prepare() does to one argument (runtime.cc). */
bool map_pointer(void **p, int arg, const char *name, char *why, size_t n);
/* A struct's aligned words that point into a live device allocation: its
 * members may be unused and hold anything, so nothing else is touched. */
void map_words(void *bytes, size_t size);

template <class T> bool map_arg(T &v, int arg, const char *name, char *why, size_t n)
{
    static_assert(std::is_trivially_copyable<T>::value, "kernel arguments are copied as bytes");
    if constexpr (std::is_pointer<T>::value) {
        void *p = (void *)v;
        if (!map_pointer(&p, arg, name, why, n)) return false;
        v = (T)p;
        return true;
    } else if constexpr (std::is_class<T>::value && alignof(T) >= alignof(void *)) {
        map_words(&v, sizeof v);
        return true;
    } else {
        return true;
    }
}

template <class... P> struct kernel_call_of : kernel_call {
    void (*fn)(P...);
    std::tuple<std::decay_t<P>...> args, mapped;
    template <class... A>
    kernel_call_of(const char *nm, void (*f)(P...), A &&...a) : fn(f), args(std::forward<A>(a)...)
    {
        name = nm;
    }
    bool prepare(char *why, size_t n) override
    {
        mapped = args;
        return prepare_all(why, n, std::index_sequence_for<P...>{});
    }
    template <size_t... I> bool prepare_all(char *why, size_t n, std::index_sequence<I...>)
    {
        return (map_arg(std::get<I>(mapped), (int)I, name, why, n) && ... && true);
    }
    void run() override { std::apply(fn, mapped); }
};

struct launch_geom {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    const char *name;
    const void *fn; // the kernel: its cudaFuncSetAttribute opt-in
};
/* Checks the geometry against the H200's limits and enqueues the call (it
 * takes c); errors are the next cudaGetLastError's. */
void launch(const launch_geom &g, kernel_call *c);

template <class... P> struct launcher {
    launch_geom g;
    void (*fn)(P...);
    template <class... A> void operator()(A &&...a) const
    {
        launch(g, new kernel_call_of<P...>(g.name, fn, std::forward<A>(a)...));
    }
};
template <class... P>
launcher<P...> make_launcher(dim3 grid, dim3 block, size_t smem, cudaStream_t s, const char *name,
                             void (*fn)(P...))
{
    return launcher<P...>{launch_geom{grid, block, smem, s, name, (const void *)fn}, fn};
}

/* Warp-synchronous calls and the block barrier (exec.cc). */
void syncthreads(void);
unsigned warp_lane(void);
/* Every lane of mask deposits mine; returns what lane `from` deposited
 * (from: a lane of the calling thread's warp). */
uint64_t warp_exchange(unsigned mask, uint64_t mine, unsigned from, const char *what);
/* Every lane of mask gives one bit; returns the mask of lanes that gave 1. */
unsigned warp_vote(unsigned mask, int bit, const char *what);

template <class T> uint64_t bits_of(T v)
{
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T> T of_bits(uint64_t b)
{
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}
} // namespace cuda_host

#define CUDA_HOST_LAUNCH(grid, block, smem, stream, ...)                                           \
    ::cuda_host::make_launcher((grid), (block), (smem), (stream), #__VA_ARGS__, __VA_ARGS__)

#define threadIdx (::cuda_host::cur_thread)
#define blockIdx  (::cuda_host::cur_block->block_idx)
#define blockDim  (::cuda_host::cur_block->block_dim)
#define gridDim   (::cuda_host::cur_block->grid_dim)
#define warpSize  32

static inline void __syncthreads(void)
{
    ::cuda_host::syncthreads();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    ::cuda_host::warp_vote(mask, 0, "__syncwarp");
}

/* Lane l of a segment of `width` lanes (a power of two, at most 32). */
static inline unsigned cuda_host_seg(unsigned lane, int width)
{
    return lane & ~(unsigned)(width - 1);
}
template <class T> T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    unsigned lane = ::cuda_host::warp_lane(), seg = cuda_host_seg(lane, width);
    unsigned from = seg + ((unsigned)src & (unsigned)(width - 1));
    return ::cuda_host::of_bits<T>(
        ::cuda_host::warp_exchange(mask, ::cuda_host::bits_of(v), from, "__shfl_sync"));
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    unsigned lane = ::cuda_host::warp_lane(), seg = cuda_host_seg(lane, width);
    unsigned from = lane + delta < seg + (unsigned)width ? lane + delta : lane;
    return ::cuda_host::of_bits<T>(
        ::cuda_host::warp_exchange(mask, ::cuda_host::bits_of(v), from, "__shfl_down_sync"));
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    unsigned lane = ::cuda_host::warp_lane(), seg = cuda_host_seg(lane, width);
    unsigned from = lane >= seg + delta ? lane - delta : lane;
    return ::cuda_host::of_bits<T>(
        ::cuda_host::warp_exchange(mask, ::cuda_host::bits_of(v), from, "__shfl_up_sync"));
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    unsigned lane = ::cuda_host::warp_lane(), seg = cuda_host_seg(lane, width);
    unsigned from = lane ^ (unsigned)lane_mask;
    if (from < seg || from >= seg + (unsigned)width) from = lane;
    return ::cuda_host::of_bits<T>(
        ::cuda_host::warp_exchange(mask, ::cuda_host::bits_of(v), from, "__shfl_xor_sync"));
}
static inline unsigned __ballot_sync(unsigned mask, int pred)
{
    return ::cuda_host::warp_vote(mask, pred != 0, "__ballot_sync");
}
static inline int __any_sync(unsigned mask, int pred)
{
    return ::cuda_host::warp_vote(mask, pred != 0, "__any_sync") != 0;
}
static inline int __all_sync(unsigned mask, int pred)
{
    return ::cuda_host::warp_vote(mask, pred != 0, "__all_sync") == mask;
}

/* ---- atomics: atomic on the host too (blocks of kernels on different
 * streams run at once) ---- */
static inline int atomicCAS(int *p, int expected, int desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long expected,
                                           unsigned long long desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline int atomicAdd(int *p, int v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <class F, class U> static inline F cuda_host_atomic_float(F *p, F v)
{
    U old = __atomic_load_n((U *)p, __ATOMIC_SEQ_CST), want;
    F was;
    do {
        memcpy(&was, &old, sizeof was);
        F now = was + v;
        memcpy(&want, &now, sizeof want);
    } while (!__atomic_compare_exchange_n((U *)p, &old, want, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    return was;
}
static inline float atomicAdd(float *p, float v)
{
    return cuda_host_atomic_float<float, uint32_t>(p, v);
}
static inline double atomicAdd(double *p, double v)
{
    return cuda_host_atomic_float<double, uint64_t>(p, v);
}
/* ---- math: rounded as written (the host build does not contract) ---- */
static inline float __fadd_rn(float a, float b)
{
    return a + b;
}
static inline float __fsub_rn(float a, float b)
{
    return a - b;
}
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}
static inline float __fdiv_rn(float a, float b)
{
    return a / b;
}
static inline float rsqrtf(float x)
{
    return 1.0f / sqrtf(x);
}
static inline float __int_as_float(int v)
{
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}
static inline int __float_as_int(float f)
{
    int v;
    memcpy(&v, &f, sizeof v);
    return v;
}
template <class T> static inline T __ldg(const T *p)
{
    return *p;
}
using std::max;
using std::min;

#endif
