// blas_dl.cu - cuBLAS, opened when the first CUDA device object is made.
//
// Linking libcublas makes every process that loads graphrun map and
// relocate it (and libcublasLt) at start: 0.3 s and 215 MB for a
// `graphrun --help`, on machines with no GPU too.  So the library is not
// linked: cuda_device_new opens it with dlopen and takes the few calls the
// device makes with dlsym, once, under a pthread_once.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda_impl.cuh"

cuda_blas_api cuda_blas;

static char blas_error[512];
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

// The names are the macros' expansions (cublasSgemm is cublasSgemm_v2).
#define BLAS_NAME2(f) #f
#define BLAS_NAME(f)  BLAS_NAME2(f)

static int blas_sym(void *lib, void **to, const char *name)
{
    if ((*to = dlsym(lib, name))) return 0;
    snprintf(blas_error, sizeof blas_error, "cuBLAS has no %s", name);
    return -1;
}

// The toolkit's own copy first (GR_CUDA_LIBDIR: what an rpath would give a
// linked cuBLAS), then wherever the loader finds the soname.
static void *blas_dlopen(void)
{
    char name[64];
    snprintf(name, sizeof name, "libcublas.so.%d", CUBLAS_VER_MAJOR);
#ifdef GR_CUDA_LIBDIR
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GR_CUDA_LIBDIR, name);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
#endif
    void *any = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!any) snprintf(blas_error, sizeof blas_error, "cannot open %s: %s", name, dlerror());
    return any;
}

static void blas_open(void)
{
    void *lib = blas_dlopen();
    if (!lib) return;
    cuda_blas_api b;
    if (blas_sym(lib, (void **)&b.create, BLAS_NAME(cublasCreate)) ||
        blas_sym(lib, (void **)&b.destroy, BLAS_NAME(cublasDestroy)) ||
        blas_sym(lib, (void **)&b.set_stream, BLAS_NAME(cublasSetStream)) ||
        blas_sym(lib, (void **)&b.set_workspace, BLAS_NAME(cublasSetWorkspace)) ||
        blas_sym(lib, (void **)&b.set_pointer_mode, BLAS_NAME(cublasSetPointerMode)) ||
        blas_sym(lib, (void **)&b.sgemm, BLAS_NAME(cublasSgemm)) ||
        blas_sym(lib, (void **)&b.sgemm_strided, BLAS_NAME(cublasSgemmStridedBatched)))
        return; // the library stays open: unloading it buys nothing
    cuda_blas = b;
}

extern "C" const char *cuda_blas_load(void)
{
    pthread_once(&blas_once, blas_open);
    return cuda_blas.sgemm ? NULL : blas_error;
}
