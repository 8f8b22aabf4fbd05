// probe.cu - the CUDA toolchain check: one trivial kernel and a device count.
#include <cuda_runtime.h>

#include "cuda.h"

__global__ static void probe_fill(float *p, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

extern "C" int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    if (n > 0) {
        // Prove a kernel launches: fill 32 floats and read one back.
        float *d = nullptr, h = 0;
        if (cudaMalloc(&d, 32 * sizeof(float)) != cudaSuccess) return 0;
        probe_fill<<<1, 32>>>(d, 1.0f, 32);
        cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
        cudaFree(d);
        if (h != 1.0f) return 0;
    }
    return n;
}
