/* sim_queue.h - private to devices/sim: the simulated GPU's queues and
 * events (sim_queue.c), the primitives that run work.  They know nothing of
 * step graphs: sim_graph.c records on top of them, and replays through
 * them.  Included by sim_queue.c, sim_graph.c and sim.c. */
#ifndef GR_SIM_QUEUE_H
#define GR_SIM_QUEUE_H

#include <stddef.h>

#include "../device.h"

dev_queue *sim_queue_new(device_obj *d);
void sim_queue_free(device_obj *d, dev_queue *q);
/* Drains, stops and frees every queue of d still open (device close). */
void sim_queues_close(device_obj *d);
const kern_args *sim_queue_sync(device_obj *d, dev_queue *q);

/* Enqueue on q.  A launch runs fn on a copy of a with its buffers checked
 * and translated; queue_sync names orig when it fails. */
void sim_queue_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a,
                      const kern_args *orig);
void sim_queue_copy(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                    dev_copy_kind kind);
void sim_queue_record(device_obj *d, dev_queue *q, dev_event *e);
void sim_queue_wait(device_obj *d, dev_queue *q, dev_event *e);

/* A slot of q (a queue of d) that the queue keeps for sim_graph.c and
 * never reads: the step graph being recorded on q (NULL: none). */
dev_graph **sim_queue_capture(device_obj *d, dev_queue *q);

dev_event *sim_event_new(device_obj *d);
void sim_event_free(device_obj *d, dev_event *e);
void sim_event_sync(device_obj *d, dev_event *e);

#endif
