// module.cu - the entry of libgraphrun-cuda.so: the one symbol it exports
// (cmake/module.map), through which the core finds the device.
#include <string.h>

#include "cuda_impl.cuh"

static const cuda_module cuda_entry = {cuda_device_count, cuda_kernels, cuda_blas_load,
                                       cuda_device_new};

extern "C" const cuda_module *grmod_cuda_entry(const core_calls *core, int abi, const char *version)
{
    if (abi != CORE_CALLS_ABI || strcmp(version, GR_VERSION_STRING) != 0) return NULL;
    core_calls_bind(core);
    return &cuda_entry;
}
