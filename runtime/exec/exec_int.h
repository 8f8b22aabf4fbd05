/* exec_int.h - private to the executor's files: its state, shared by
 * runtime/exec/exec.c (setup, a step's feeds, batches and fetches), parts.c
 * (partitions and transfers) and schedule.c (levels and running them).
 * Calls go exec.c -> parts.c -> schedule.c, never back. */
#ifndef GR_EXEC_INT_H
#define GR_EXEC_INT_H

#include "runtime/runtime.h"

/* One level of mutually independent calls of one partition (schedule.c). */
typedef struct exec_level {
    int first, n;    /* calls [first, first + n) */
    int n_tasks;     /* 1: run in order with intra-op threads */
    int *task_first; /* n_tasks + 1 call offsets, one group per task */
    int part;
    int *wait, n_wait; /* transfers received before the level (parts.c) */
    int *send, n_send; /* transfers sent after it */
} exec_level;

/* A stretch of a partition's step that waits for all its transfers before
 * it and signals all its sends after it (parts.c): what it enqueues is the
 * same every step, so an async device may record it once as a step graph
 * and replay it. */
typedef struct exec_seg {
    int send0;        /* the partition's send0 transfers, and no level */
    int first, n;     /* levels [first, first + n) */
    int record;       /* may be recorded (the partition and its copies allow it) */
    int runs;         /* steps run before it is recorded */
    dev_graph *graph; /* the recording, or NULL */
} exec_seg;

/* A partition: the calls of one device, run by its own thread (the caller's
 * for partition 0) with its own region of the arena, scratch and, on a
 * synchronous device (the CPU), intra-op pool; on an asynchronous one, a
 * queue the thread enqueues the calls on. */
typedef struct exec_part {
    device_obj *dev;
    dev_queue *q;    /* async devices only */
    char *arena;     /* the plan's region [base, base + part_bytes) of this partition */
    size_t base;     /* the plan offset of arena[0] */
    cpu_pool *pool;  /* sync devices only */
    char *scratch;   /* device memory */
    float *host_out; /* async, --check-numerics: a host copy of one output */
    int first_level, n_levels;
    int *send0, n_send0; /* transfers of sources (variables, data...), sent first */
    exec_seg *segs;      /* the step in stretches, in order */
    int n_segs;
    /* Async, with calls that read the run counter (OPF_PER_RUN): the
     * counter in device memory (kern_args.step_dev) and the pinned word it
     * is copied from on the queue as each step starts (parts.c); else NULL. */
    uint64_t *step_dev, *step_host;
    /* --stale-lr: the learning-rate factors of its updates (stale.c), in
     * device memory, and on an async device the pinned words they are
     * copied from; else NULL. */
    float *scale_dev, *scale_host;
    pthread_t thread;
    int started;
    gr_status *st; /* a NaN found by check_numerics on this partition's thread */
} exec_part;

/* How a transfer moves its bytes, by the kinds of its two devices: host
 * memory (the CPU) or not (async).  See parts.c. */
typedef enum xfer_mode { XFER_HOST_HOST, XFER_HOST_DEV, XFER_DEV_HOST, XFER_DEV_DEV } xfer_mode;

typedef struct exec_xfer {
    xfer_mode mode;
    void *staging;   /* pinned host memory between the two devices, or NULL */
    device_obj *sd;  /* the device that allocated it */
    dev_event *done; /* recorded on the producer's queue after its copy */
} exec_xfer;

/* A data source the plan reads: each step takes a batch in place from the
 * reader's ring and points the consumers' input slots at it. */
typedef struct exec_data {
    data_reader *r;
    int node[2];   /* the plan's DATA nodes for x and y, or -1 */
    void ***patch; /* kern_args input slots that read x or y */
    int *patch_y;  /* per patch: 1 when it reads y */
    int n_patch;
    data_batch batch; /* taken for a step, given back after it */
} exec_data;

/* Staleness of this executor's updates (stale.c): the variables its plan
 * updates, their versions when the running step began, and the counts of
 * what it found at the step's end, read by other threads
 * (gr_session_staleness) while it runs. */
typedef struct exec_stale {
    int *var, n_var;
    uint64_t *seen;
    int *call_var; /* per call: its variable's index in var when its lr is scaled, else -1 */
    _Atomic uint64_t sum, count[GR_STALENESS_BUCKETS];
} exec_stale;

/* gr_session_options.profile: one per call, summed over this executor's runs. */
typedef struct exec_prof {
    _Atomic uint64_t ns, calls;
} exec_prof;

struct rt_exec {
    const exec_env *env; /* its session's, given to exec_new */
    const plan_graph *p;
    exec_part *parts;
    int n_parts;
    /* Several partitions (parts.c): the rendezvous and the step hand-off. */
    exec_xfer *xfers;             /* per transfer of the plan */
    _Atomic uint64_t *xfer_ready; /* per transfer: the generation that last filled it */
    _Atomic uint64_t go;          /* the generation the partition threads should run */
    uint64_t gen;                 /* steps this executor ran; never rewinds */
    int n_done, stop;
    int spin; /* wait by spinning first: the budget has a core per partition thread */
    atomic_int failed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void **buf;      /* per graph node id */
    kern_args *args; /* prepared calls, schedule order */
    kernel_fn *fn;
    kern_fault *faults; /* one per call, args[].fault points here */
    int n_calls;
    void **in_ptrs;           /* backing store for args[].in */
    const ir_type **in_types; /* backing store for args[].in_t */
    exec_data *data;
    int n_data;
    exec_level *levels;
    int n_levels;
    void **views;    /* per fetch on an async device: the host copy a view shows */
    exec_prof *prof; /* per call (schedule order), when the session profiles; else NULL */
    exec_stale stale;
};

/* exec.c: where plan offset off of partition k lives. */
static inline char *exec_addr(const rt_exec *e, int k, size_t off)
{
    return e->parts[k].arena + (off - e->parts[k].base);
}

/* schedule.c: levels over e->args (reorders them, within each partition),
 * spread over each partition's pool (an async device's calls go in order). */
void sched_build(rt_exec *e);
void sched_free(rt_exec *e);

/* stale.c: the variables the plan updates (once, by exec_new); around each
 * step that ran them, their versions read as it begins and, as it ends,
 * each one's staleness counted and its version advanced. */
void stale_build(rt_exec *e);
void stale_free(rt_exec *e);
void stale_begin(rt_exec *e);
void stale_end(rt_exec *e);
/* --stale-lr: a word per scaled update of partition pt (kern_args.lr_scale)
 * and its release; each step, the factors of level L's updates written
 * before it runs (an async device's: copied on its queue). */
gr_code stale_link(rt_exec *e, exec_part *pt, gr_status *st);
void stale_unlink(exec_part *pt);
void stale_scale(const rt_exec *e, const exec_part *pt, const exec_level *L);

/* One level's calls, in order or over the partition's pool, or enqueued on
 * its queue: GR_OK, or the error of a kernel that failed (at its node's
 * line).  Then, under --check-numerics, their outputs checked for NaN/Inf
 * (an async partition syncs its queue first). */
gr_code sched_run_level(const rt_exec *e, const exec_level *L, gr_status *st);
gr_code sched_check_level(const rt_exec *e, const exec_level *L, gr_status *st);
/* An async partition's end of step: waits for its queue; the error of a
 * kernel that failed on it, or GR_OK. */
gr_code sched_sync(const rt_exec *e, int k, gr_status *st);

/* parts.c: running the partitions of a step.  Every plan has at least one;
 * partition 0 runs on the caller's thread, the others on threads the
 * executor keeps. */
gr_code parts_link(rt_exec *e, gr_status *st);  /* per level: transfers to receive and send */
gr_code parts_start(rt_exec *e, gr_status *st); /* threads for partitions 1.. */
void parts_stop(rt_exec *e);
gr_code parts_run(rt_exec *e, gr_status *st);

#endif
