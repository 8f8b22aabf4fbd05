/* sim_impl.h - what the simulated GPU's files share: the memory region
 * (sim_mem.c), the queues and events (sim_queue.c) and the device object
 * that holds them (sim.c). */
#ifndef GR_SIM_IMPL_H
#define GR_SIM_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "base/fatal.h"
#include "sim.h"

/* ---- memory (sim_mem.c) ---- */

/* 64 bytes, as the CPU device: kernels may assume aligned buffers. */
#define SIM_ALIGN 64

/* [off, off + len) of the region; a used block also keeps the bytes asked
 * for, so that a copy into the alignment padding is caught too. */
typedef struct sim_block {
    size_t off, len, asked;
} sim_block;

/* Blocks sorted by offset. */
typedef struct sim_blocks {
    sim_block *v;
    size_t n, cap;
} sim_blocks;

typedef struct sim_region {
    int fd;       /* the memfd both mappings show */
    size_t size;  /* bytes; a multiple of SIM_ALIGN */
    char *handle; /* PROT_NONE view: the addresses alloc returns */
    char *alias;  /* read-write view: what the device's own calls touch */
    /* Lookups take it shared, so that under TSan two host threads that
     * both name device memory are not ordered by it (readers of a rwlock
     * do not synchronise with each other there); alloc and free take it
     * exclusively. */
    pthread_rwlock_t lock;
    sim_blocks free; /* coalesced: no two touch */
    sim_blocks used; /* live allocations */
} sim_region;

int sim_region_init(sim_region *r, size_t bytes);
void sim_region_fini(sim_region *r);
void *sim_region_alloc(sim_region *r, size_t bytes);
void sim_region_free(sim_region *r, void *p);
/* The alias address of device pointer p when [p, p + n) lies in one live
 * allocation, else NULL. */
void *sim_region_find(sim_region *r, const void *p, size_t n);
/* The alias address of device pointer p, after checking that [p, p + n)
 * lies in one live allocation (else fatal, naming `what`).  NULL: NULL. */
void *sim_region_at(sim_region *r, const void *p, size_t n, const char *what);

/* ---- the device object ---- */

typedef struct sim_dev {
    sim_region mem;
    atomic_uint delay_us;
    _Atomic uint64_t graph_launches; /* sim_graph_launches */
    pthread_mutex_t queues_mu;       /* guards queues */
    dev_queue *queues;               /* open queues, closed with the device */
} sim_dev;

static inline sim_dev *sim_of(device_obj *d)
{
    return d->impl;
}

/* ---- queues and events (sim_queue.c) ---- */

dev_queue *sim_queue_new(device_obj *d);
void sim_queue_free(device_obj *d, dev_queue *q);
void sim_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a);
void sim_copy_async(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                    dev_copy_kind kind);
const kern_args *sim_queue_sync(device_obj *d, dev_queue *q);
dev_event *sim_event_new(device_obj *d);
void sim_event_free(device_obj *d, dev_event *e);
void sim_event_record(device_obj *d, dev_event *e, dev_queue *q);
void sim_event_wait(device_obj *d, dev_queue *q, dev_event *e);
void sim_event_sync(device_obj *d, dev_event *e);
/* Drains, stops and frees every queue of d still open (device close). */
void sim_queues_close(device_obj *d);
/* sim_launch with the kern_args to run (a) apart from the ones queue_sync
 * names when it fails (orig). */
void sim_launch_as(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a,
                   const kern_args *orig);
/* Where q keeps the step graph it is recording (NULL: none). */
dev_graph **sim_queue_rec(dev_queue *q);

/* ---- step graphs (sim_graph.c) ---- */

/* One recorded call: what was asked (a launch's kern_args are copied when
 * recorded, see sim_graph_add). */
typedef enum sim_call_op {
    SIM_CALL_LAUNCH,
    SIM_CALL_COPY,
    SIM_CALL_RECORD,
    SIM_CALL_WAIT
} sim_call_op;

typedef struct sim_call {
    sim_call_op op;
    kernel_fn fn;
    const kern_args *orig; /* the caller's kern_args */
    kern_args a;           /* *orig when recorded; a.in points at in */
    void **in;
    void *dst;
    const void *src;
    size_t n;
    dev_copy_kind kind;
    dev_event *ev;
} sim_call;

void sim_graph_add(dev_graph *g, const sim_call *c);
void sim_capture_begin(device_obj *d, dev_queue *q);
dev_graph *sim_capture_end(device_obj *d, dev_queue *q);
void sim_graph_launch(device_obj *d, dev_queue *q, dev_graph *g);
void sim_graph_free(device_obj *d, dev_graph *g);

#endif
