/* device.c - the CPU device: host memory, memcpy, and queues that run what
 * they are given at once, on the calling thread. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

/* 64 bytes: one cache line, and a full AVX-512 vector, so aligned loads are
 * always possible at the start of a buffer. */
#define CPU_ALIGN 64

/* A queue remembers the first call that failed since its last sync. */
struct dev_queue {
    const kern_args *failed;
};

static void *cpu_alloc(device_obj *d, size_t bytes)
{
    (void)d;
    size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p = NULL;
    if (n < bytes || posix_memalign(&p, CPU_ALIGN, n ? n : CPU_ALIGN) != 0) return NULL;
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

static dev_queue *cpu_queue_new(device_obj *d)
{
    (void)d;
    return base_xcalloc(1, sizeof(dev_queue));
}

static void cpu_queue_free(device_obj *d, dev_queue *q)
{
    (void)d;
    free(q);
}

static void cpu_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a)
{
    (void)d;
    if (!q->failed && dev_kern_run(fn, a) != 0) q->failed = a;
}

static void cpu_copy_async(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                           dev_copy_kind kind)
{
    (void)q, (void)kind;
    cpu_memcpy(d, dst, src, n);
}

static const kern_args *cpu_queue_sync(device_obj *d, dev_queue *q)
{
    (void)d;
    const kern_args *failed = q->failed;
    q->failed = NULL;
    return failed;
}

/* Work is done when it is enqueued, so an event has always fired. */
static dev_event *cpu_event_new(device_obj *d)
{
    (void)d;
    return base_xcalloc(1, 1);
}

static void cpu_event_free(device_obj *d, dev_event *e)
{
    (void)d;
    free(e);
}

static void cpu_event_record(device_obj *d, dev_event *e, dev_queue *q)
{
    (void)d, (void)e, (void)q;
}

static void cpu_event_wait(device_obj *d, dev_queue *q, dev_event *e)
{
    (void)d, (void)e, (void)q;
}

static void cpu_event_sync(device_obj *d, dev_event *e)
{
    (void)d, (void)e;
}

static void cpu_close(device_obj *d)
{
    free(d);
}

const device_vtable cpu_vtable = {
    .name = "cpu",
    .async = 0,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .to_device = cpu_memcpy,
    .to_host = cpu_memcpy,
    .queue_new = cpu_queue_new,
    .queue_free = cpu_queue_free,
    .launch = cpu_launch,
    .copy_async = cpu_copy_async,
    .queue_sync = cpu_queue_sync,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .close = cpu_close,
    .kernels = cpu_kernels,
};

device_obj *cpu_device_new(int id)
{
    device_obj *d = base_xcalloc(1, sizeof *d);
    *d = (device_obj){.vt = &cpu_vtable, .id = id};
    return d;
}

void cpu_blas_init(void)
{
    openblas_set_num_threads(1);
}

const char *cpu_blas_core(void)
{
    return openblas_get_corename();
}

/* OpenBLAS chooses its kernels by CPU model when it loads.  A model it does
 * not know (0.3.21 on recent Xeons) gets the generic "Prescott" kernels,
 * measured 31 GFLOP/s against 129 for SkylakeX on one core here. */
const char *cpu_blas_better_core(void)
{
#if defined(__x86_64__)
    const char *now = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE") || !now || strcmp(now, "Prescott") != 0) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}
