/* sim_dev.h - private to devices/sim: the device object, the state that
 * every file of the sim reaches through the device_obj it is handed.  Its
 * memory is sim_mem.c's, its queues sim_queue.c's, its graph count
 * sim_graph.c's; sim.c makes and frees it. */
#ifndef GR_SIM_DEV_H
#define GR_SIM_DEV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../device.h"
#include "base/fatal.h"
#include "sim_mem.h"

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

#endif
