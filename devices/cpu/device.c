/* device.c - the CPU device vtable: host memory, memcpy, no queues. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

/* 64 bytes: one cache line, and a full AVX-512 vector, so aligned loads are
 * always possible at the start of a buffer. */
#define CPU_ALIGN 64

static void *cpu_alloc(device_obj *d, size_t bytes)
{
    (void)d;
    size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, CPU_ALIGN, n ? n : CPU_ALIGN) != 0) return NULL;
    return p;
}

static void cpu_free(device_obj *d, void *p)
{
    (void)d;
    free(p);
}

static void cpu_memcpy(device_obj *d, void *dst, const void *src, size_t n)
{
    (void)d;
    if (n && dst != src) memcpy(dst, src, n);
}

const device_vtable cpu_vtable = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_memcpy,
    .to_host = cpu_memcpy,
    .copy = cpu_memcpy,
    .queue_new = NULL,
    .queue_free = NULL,
    .queue_sync = NULL,
    .kernels = cpu_kernels,
};

void cpu_blas_init(void)
{
    openblas_set_num_threads(1);
}
