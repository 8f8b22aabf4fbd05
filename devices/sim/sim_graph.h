/* sim_graph.h - private to devices/sim: the simulated GPU's step graphs
 * (sim_graph.c).  The device's enqueueing calls go through here: while a
 * queue captures they record, otherwise they hand the work to the queue
 * (sim_queue.h).  Included by sim_graph.c and sim.c, whose vtable names
 * these. */
#ifndef GR_SIM_GRAPH_H
#define GR_SIM_GRAPH_H

#include <stddef.h>

#include "../device.h"

/* device.h's launch, copy_async, event_record and event_wait. */
void sim_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a);
void sim_copy_async(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                    dev_copy_kind kind);
void sim_event_record(device_obj *d, dev_event *e, dev_queue *q);
void sim_event_wait(device_obj *d, dev_queue *q, dev_event *e);

void sim_capture_begin(device_obj *d, dev_queue *q);
dev_graph *sim_capture_end(device_obj *d, dev_queue *q);
void sim_graph_launch(device_obj *d, dev_queue *q, dev_graph *g);
void sim_graph_free(device_obj *d, dev_graph *g);

#endif
