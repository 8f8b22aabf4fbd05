/* device.h - what a device offers the runtime: memory, copies, queues,
 * events and a kernel table indexed by op_kind.
 *
 * The CPU device (devices/cpu) runs kernels synchronously on the calling
 * executor thread, splitting big ones over a thread pool; its queue and event
 * calls are trivial.  The CUDA device (devices/cuda) maps queues to streams
 * and events to cudaEvent_t. */
#ifndef GR_DEVICE_H
#define GR_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "../compiler/ir.h"

typedef struct cpu_pool cpu_pool; /* devices/cpu/pool.h */

/* Everything a kernel gets.  Types come from the graph, buffers from the
 * executor's arena (or the variable store for VARIABLE nodes). */
typedef struct kern_args {
    const ir_graph *g;
    const ir_node *node;
    void *out;
    const ir_type *out_t;
    int n_in;
    void *const *in; /* n_in buffers */
    const ir_type *const *in_t;
    void *scratch;             /* max_tasks slices of scratch_task_bytes each, or NULL */
    size_t scratch_task_bytes; /* op_info.scratch(): bytes one task needs */
    int max_tasks;             /* scratch slices available (>= 1) */
    cpu_pool *pool;            /* intra-op threads; NULL = run serially */
    uint64_t seed;             /* session seed (dropout mixes in its mask key, attr i2) */
    uint64_t step;             /* run counter of this executor run (dropout) */
    void *lock;                /* executor's: a variable lock held around this
                                  update (locking=true), else NULL */
    struct kern_fault *fault;  /* where a failing kernel says why */
} kern_args;

typedef struct kern_fault {
    char msg[192];
} kern_fault;

/* A kernel returns 0, or -1 when its inputs are bad in a way no shape rule
 * can see (a label outside the classes, an id outside its table), after
 * writing what was wrong into a->fault: the executor adds the op, the device
 * and the .graph line. */
typedef int (*kernel_fn)(const kern_args *a);

typedef struct device_obj device_obj;
typedef struct device_vtable {
    const char *name; /* "cpu", "cuda" */
    void *(*alloc)(device_obj *d, size_t bytes);
    void (*free)(device_obj *d, void *p);
    void (*to_device)(device_obj *d, void *dst, const void *src, size_t n);
    void (*to_host)(device_obj *d, void *dst, const void *src, size_t n);
    void (*copy)(device_obj *d, void *dst, const void *src, size_t n);
    void *(*queue_new)(device_obj *d); /* one per executor */
    void (*queue_free)(device_obj *d, void *q);
    void (*queue_sync)(device_obj *d, void *q); /* wait until the queue is idle */
    const kernel_fn *kernels;                   /* [OP_COUNT], NULL = unsupported */
} device_vtable;

struct device_obj {
    const device_vtable *vt;
    int id; /* IR_DEV(kind, index) */
    void *impl;
};

#endif
