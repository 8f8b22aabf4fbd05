/* host.h - private to tests/cuda_host: what the runtime (runtime.cc) and
 * the block scheduler (exec.cc) share. */
#ifndef CUDA_HOST_HOST_H
#define CUDA_HOST_HOST_H

#include <stddef.h>

#include "cuda_runtime.h"

namespace cuda_host
{
/* The H200's limits (cudaGetDeviceProperties on one, sm_90). */
enum {
    MAX_BLOCK_THREADS = 1024,
    MAX_BLOCK_X = 1024,
    MAX_BLOCK_Y = 1024,
    MAX_BLOCK_Z = 64,
    MAX_GRID_YZ = 65535,
    MAX_SHARED_BYTES = 227 * 1024,    /* sharedMemPerBlockOptin */
    DEFAULT_SHARED_BYTES = 48 * 1024, /* sharedMemPerBlock: without the opt-in */
    WARP = 32,
};

/* Runs every block of a launch on the calling (stream) thread, one block
 * at a time; false, with why, when a block broke a rule (a barrier only
 * some threads reached, a warp call with lanes missing). */
bool run_kernel(const launch_geom &g, kernel_call *c, char *why, size_t n);
} // namespace cuda_host

#endif
