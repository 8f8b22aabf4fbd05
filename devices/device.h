/* device.h - what a device offers the runtime: memory, copies, queues,
 * events and a kernel table indexed by op_kind.
 *
 * Nothing outside a device dereferences its memory.  The runtime holds
 * device pointers only to hand them back to the device: to kernels (through
 * kern_args, run by the device), to copies and to free.  Host data crosses
 * with to_device / to_host (synchronous) or copy_async (on a queue).
 *
 * Two kinds of device:
 *  - synchronous (async == 0): the CPU.  Its memory is host memory, its
 *    kernels run on the calling thread when launched (the executor may also
 *    call them directly, over its thread pool), and its queues, events and
 *    syncs are trivial.
 *  - asynchronous (async == 1): the simulated GPU (devices/sim) and the
 *    CUDA device.  Work enqueued on a queue (launch, copy_async,
 *    event_record, event_wait) runs later, in the order it was enqueued;
 *    the host learns it has run only through queue_sync or event_sync.
 *    A synchronous copy (to_device, to_host) is ordered with nothing: the
 *    caller syncs the queues that touch the memory first.
 *
 * A queue is used by one thread at a time (an executor's partition); events
 * and the memory calls may be used from any thread. */
#ifndef GR_DEVICE_H
#define GR_DEVICE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../compiler/ir.h"

typedef struct cpu_pool cpu_pool;   /* devices/cpu/pool.c */
typedef struct dev_queue dev_queue; /* each device's own */
typedef struct device_obj device_obj;
typedef struct dev_event dev_event; /* each device's own */

typedef struct kern_fault {
    char msg[192];
} kern_fault;

/* The processes a distributed sync run averages over (runtime/dist/dist.h;
 * made over MPI by dist_mpi.c). */
typedef struct kern_comm kern_comm;
struct kern_comm {
    /* Every process passes its in[0..n); each gets the mean of them all in
     * out[0..n) (in == out: in place).  0, or -1 with why in f. */
    int (*allreduce_mean)(kern_comm *c, const float *in, float *out, size_t n, kern_fault *f);
    /* The same collective, whose mean m is never stored: var[i] -= step * m[i]
     * (apply_sgd_allreduce; step is lr * gscale). */
    int (*allreduce_sgd)(kern_comm *c, const float *in, float *var, size_t n, float step,
                         kern_fault *f);
};

/* Everything a kernel gets.  Types come from the graph, buffers (out, in,
 * scratch) from the executor's arena or the variable store: device memory
 * of the device that runs it.  Everything else is host memory. */
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
    uint64_t step;             /* run counter of this executor run (dropout, random ops) */
    /* Async devices: the same run counter in device memory (8 bytes,
     * runtime/exec/parts.c writes it on the queue before each step's calls),
     * or NULL.  Kernels of OPF_PER_RUN ops read it there, when it is set,
     * instead of step, so that a step graph, which replays the arguments it
     * recorded, still draws each step's numbers: CUDA's kernels read
     * *step_dev on the GPU, the simulated GPU loads it into step when the
     * call runs on its queue (docs/gpu.md, "Step graphs"). */
    const uint64_t *step_dev;
    /* An optimizer update under gr_session_options.stale_lr: its learning
     * rate's factor, 1 / max(1, staleness), in device memory (the runtime
     * sets it on the queue before the update, runtime/exec/stale.c), else
     * NULL.  The kernel reads it as it runs, as its lr: a step graph replays
     * the pointer.  CUDA's kernels turn it into the scaled lr in place. */
    float *lr_scale;
    struct dev_var_lock *lock; /* held around this update (locking=true), else
                                  NULL: dev_kern_run takes it */
    kern_fault *fault;         /* where a failing kernel says why */
    kern_comm *comm;           /* a distributed sync session's processes, else NULL */
    dev_queue *queue;          /* async devices: the queue the call is launched on (its
                                  stream, handles); NULL on the CPU */
} kern_args;

/* A kernel returns 0, or -1 when its inputs are bad in a way no shape rule
 * can see (a label outside the classes, an id outside its table), after
 * writing what was wrong into a->fault: the executor adds the op, the device
 * and the .graph line. */
typedef int (*kernel_fn)(const kern_args *a);

/* The staleness-aware learning rate's factor (Zhang et al. 2016) for an
 * update of staleness s: 1 / max(1, s).  runtime/exec/stale.c writes it
 * into kern_args.lr_scale; MPI async ranks scale their change by it
 * (runtime/dist/dist_mpi.c). */
static inline float kern_stale_factor(uint64_t s)
{
    return s > 1 ? 1.0f / (float)s : 1.0f;
}

/* A variable's lock, taken by its locking updates.  On a device whose
 * kernels enqueue (vt->enqueues) the mutex alone would order only the
 * enqueueing: ev (made on the variable's device dev) orders the updates
 * themselves, each waiting on the queue for the one before and recording ev
 * after it, under the mutex. */
typedef struct dev_var_lock {
    pthread_mutex_t mu;
    device_obj *dev;
    dev_event *ev; /* NULL on a synchronous device */
    /* Steps that updated the variable so far, locked or not: what the
     * staleness of an update is counted against (runtime/exec/stale.c).
     * Read and written with __atomic builtins only (this header is C++'s
     * too, which has no _Atomic). */
    uint64_t version;
} dev_var_lock;

/* The fault of an id outside [0, limit) at flat index i of a tensor of
 * type t, in the words every device uses: "label 3 at [1,0] is outside
 * [0, 3)" (what: "label" or "id"). */
void dev_fault_id(kern_fault *f, const char *what, int id, const ir_type *t, int64_t i,
                  int64_t limit);

/* Runs one kernel call, holding its variable lock if it has one: what every
 * device does to run a call, on whatever thread it runs it. */
int dev_kern_run(kernel_fn fn, const kern_args *a);

typedef struct dev_graph dev_graph; /* each device's own */

typedef enum dev_copy_kind {
    DEV_H2D, /* host memory -> this device */
    DEV_D2H, /* this device -> host memory */
    DEV_D2D  /* within this device */
} dev_copy_kind;

typedef struct device_vtable {
    const char *name; /* "cpu", "sim", "cuda" */
    int async;        /* see the top of this file */
    int enqueues;     /* its kernels enqueue their work when called (CUDA), where the
                         simulated GPU calls them on its queue's thread: a lock held
                         around the call then orders only the enqueueing
                         (dev_var_lock) */
    /* Memory of this device; NULL when it does not fit. */
    void *(*alloc)(device_obj *d, size_t bytes);
    void (*free)(device_obj *d, void *p);
    /* Host memory the device copies to and from fastest (pinned). */
    void *(*host_alloc)(device_obj *d, size_t bytes);
    void (*host_free)(device_obj *d, void *p);
    /* Synchronous copies between host memory and this device's. */
    void (*to_device)(device_obj *d, void *dst, const void *src, size_t n);
    void (*to_host)(device_obj *d, void *dst, const void *src, size_t n);
    /* Queues.  launch keeps a (and what it points to) until the queue is
     * synced; copy_async keeps its host buffer as long. */
    dev_queue *(*queue_new)(device_obj *d);
    void (*queue_free)(device_obj *d, dev_queue *q);
    void (*launch)(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a);
    void (*copy_async)(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                       dev_copy_kind kind);
    /* Waits until everything enqueued on q has run.  Returns the first call
     * whose kernel failed since the last sync (its kern_args; later calls on
     * q were skipped), or NULL. */
    const kern_args *(*queue_sync)(device_obj *d, dev_queue *q);
    /* Events: record marks a point in q; wait makes q's later work wait for
     * it (an event of this device); sync makes the host wait for it. */
    dev_event *(*event_new)(device_obj *d);
    void (*event_free)(device_obj *d, dev_event *e);
    void (*event_record)(device_obj *d, dev_event *e, dev_queue *q);
    void (*event_wait)(device_obj *d, dev_queue *q, dev_event *e);
    void (*event_sync)(device_obj *d, dev_event *e);
    /* Step graphs (optional: NULL on a device without them).  Between
     * capture_begin and capture_end, what is enqueued on q (launches,
     * copies, event records and waits) is recorded, not run; capture_end
     * returns the recording (NULL: the device could not make one, and q is
     * as before) and graph_launch enqueues it on q again, in one call, as
     * if each recorded call were made anew with the arguments it had when
     * recorded: kern_args are not read again, events are recorded and
     * waited for anew.  Between two queue_syncs, a queue's recordings are
     * launched in the order in which they were recorded after a sync (so
     * queue_sync can name a failing call of one as if it had been
     * enqueued alone). */
    void (*capture_begin)(device_obj *d, dev_queue *q);
    dev_graph *(*capture_end)(device_obj *d, dev_queue *q);
    void (*graph_launch)(device_obj *d, dev_queue *q, dev_graph *g);
    void (*graph_free)(device_obj *d, dev_graph *g);
    /* The device object's end (a device may hold threads or a mapping). */
    void (*close)(device_obj *d);
    const kernel_fn *kernels; /* [OP_COUNT]; NULL: the op is not implemented here */
} device_vtable;

struct device_obj {
    const device_vtable *vt;
    int id; /* IR_DEV(kind, index) */
    void *impl;
};

/* Whether d runs op: sources need no kernel. */
static inline int device_implements(const device_vtable *vt, op_kind op)
{
    return ops_has(op, OPF_SOURCE) || vt->kernels[op] != NULL;
}

#endif
