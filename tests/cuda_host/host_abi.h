/* host_abi.h - private to tests/cuda_host: what the stand-in's libcublas
 * (cublas.cc, opened by dlopen, linked against nothing of the runtime)
 * reaches through a stream.  Every CUstream_st starts with a pointer to
 * this table. */
#ifndef CUDA_HOST_ABI_H
#define CUDA_HOST_ABI_H

#include <stddef.h>

#include "cuda_runtime.h"

namespace cuda_host
{
/* Work the stream runs in its order: run(ctx, why, n) on the stream's
 * thread, false with a message in why on failure (a sticky error, as a
 * faulting kernel's); free(ctx) after, and again for each copy a step graph
 * made with clone(ctx). */
struct host_work {
    const char *name;
    bool (*run)(void *ctx, char *why, size_t n);
    void *(*clone)(const void *ctx);
    void (*free)(void *ctx);
    void *ctx;
};

struct abi {
    int version;
    cudaError_t (*enqueue)(cudaStream_t s, const host_work *w);
    /* The address the stand-in's own code reads [p, p + bytes) of device
     * memory at, when that span lies in one live allocation; else NULL. */
    void *(*device_span)(const void *p, size_t bytes);
    /* Whether p is device memory (live or not). */
    bool (*is_device)(const void *p);
};

enum { ABI_VERSION = 1 };

struct stream_head {
    const abi *ops;
};
} // namespace cuda_host

#endif
