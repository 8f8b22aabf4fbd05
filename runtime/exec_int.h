/* exec_int.h - private to runtime/exec.c and runtime/schedule.c: the
 * executor's state. */
#ifndef GR_EXEC_INT_H
#define GR_EXEC_INT_H

#include "runtime.h"

/* One level of mutually independent calls (schedule.c). */
typedef struct exec_level {
    int first, n;    /* calls [first, first + n) */
    int n_tasks;     /* 1: run in order with intra-op threads */
    int *task_first; /* n_tasks + 1 call offsets, one group per task */
} exec_level;

/* A data source the plan reads: each step takes a batch in place from the
 * reader's ring and points the consumers' input slots at it. */
typedef struct exec_data {
    data_reader *r;
    int node[2];   /* the plan's DATA nodes for x and y, or -1 */
    void ***patch; /* kern_args input slots that read x or y */
    int *patch_y;  /* per patch: 1 when it reads y */
    int n_patch;
    data_batch held; /* during a step */
} exec_data;

struct rt_exec {
    gr_session *s;
    const gr_plan *p;
    char *arena;
    char *scratch;
    gr_pool *pool;
    void **buf;      /* per graph node id */
    kern_args *args; /* prepared calls, schedule order */
    kernel_fn *fn;
    int n_calls;
    void **in_ptrs;           /* backing store for args[].in */
    const ir_type **in_types; /* backing store for args[].in_t */
    exec_data *data;
    int n_data;
    exec_level *levels;
    int n_levels;
};

/* schedule.c: levels over e->args (reorders them); threads = pool size. */
void sched_build(rt_exec *e, int threads);
void sched_free(rt_exec *e);

#endif
