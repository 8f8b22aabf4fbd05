/* cuda.h - the CUDA device: an asynchronous device (devices/device.h) on
 * one NVIDIA GPU, with cuBLAS for GEMMs and our own kernels (one .cu file
 * per op family) for the rest.  Built when nvcc is found (GR_CUDA=AUTO);
 * compiled, not run, on machines without a GPU.  C API. */
#ifndef GR_CUDA_H
#define GR_CUDA_H

#include "../core_calls.h"
#include "../device.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const device_vtable cuda_vtable;
/* The kernel table, filled from the op families when the library loads;
 * NULL rows: ops the CUDA device does not implement. */
extern kernel_fn cuda_kernels[OP_COUNT];
/* The ops besides the sources that have no CUDA row, and why: allreduce
 * runs MPI on the host (autodiff places it on cpu:0), and
 * apply_sgd_allreduce, its fusion with an update, is made only where a row
 * is.  Every other op has one; tests/test_cuda_rows.c reads the k_*.cu
 * files and checks it, without nvcc or a GPU. */
#define CUDA_NO_ROW(X) X(ALLREDUCE) X(APPLY_SGD_ALLREDUCE)

/* Usable CUDA devices: 0 when there is no GPU or no driver. */
int cuda_device_count(void);
/* A device object for gpu:N (id = IR_DEV(DEV_GPU, N)), NULL when the GPU
 * cannot be used; vt->close frees it. */
device_obj *cuda_device_new(int id);
/* Opens cuBLAS (not linked: cuda_device_new opens it); NULL, or why it
 * could not.  Once per process. */
const char *cuda_blas_load(void);

/* The module libgraphrun-cuda.so (runtime/modules.c opens it): its one
 * exported function hands the core these, or NULL when version is not the
 * GR_VERSION_STRING the module was built as. */
typedef struct cuda_module {
    int (*device_count)(void);
    const kernel_fn *kernels;
    const char *(*blas_load)(void);
    device_obj *(*device_new)(int id);
} cuda_module;
#define CUDA_MODULE_ENTRY "grmod_cuda_entry"
const cuda_module *grmod_cuda_entry(const core_calls *core, int abi, const char *version);

#ifdef __cplusplus
}
#endif

#endif
