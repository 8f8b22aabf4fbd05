/* cpu.h - the CPU device: OpenBLAS GEMM plus loops written to vectorise.
 * Kernels are in kernels.c (one table indexed by op_kind), the math they call
 * in cpu_*.c, the intra-op thread pool in pool.c. */
#ifndef GR_CPU_H
#define GR_CPU_H

#include "../device.h"

extern const device_vtable cpu_vtable;
/* A CPU device object for device id (IR_DEV(DEV_CPU, n)); vt->close frees it. */
device_obj *cpu_device_new(int id);
extern const kernel_fn cpu_kernels[OP_COUNT];

/* Intra-op thread pool.  cpu_pool_new(n) starts n-1 workers (the caller is the
 * n-th); cpu_pool_for runs fn(arg, 0..n_tasks-1) across them and returns when all
 * are done.  Safe to call cpu_pool_for with p == NULL (runs serially). One pool is
 * used by one executor at a time. */
cpu_pool *cpu_pool_new(int nthreads);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);
void cpu_pool_for(cpu_pool *p, int n_tasks, void (*fn)(void *arg, int task), void *arg);

/* The hint for a spin-wait loop: lets the core's sibling thread run and
 * saves power while waiting. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Forces the BLAS to one thread per caller; we split GEMMs ourselves. */
void cpu_blas_init(void);
/* The kernels OpenBLAS runs ("SkylakeX", "Haswell", "Prescott"...). */
const char *cpu_blas_core(void);
/* When OpenBLAS fell back to its generic kernels on a CPU that has better
 * ones, and OPENBLAS_CORETYPE is not set: the value for it that picks them
 * (it is read when OpenBLAS loads, so only a new process can use it);
 * else NULL. */
const char *cpu_blas_better_core(void);

#endif
