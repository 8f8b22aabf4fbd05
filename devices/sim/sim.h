/* sim.h - the simulated GPU: an asynchronous device (device.h) that runs
 * the CPU kernels on memory the host cannot touch, from a queue that runs on
 * its own thread.  It stands in for gpu:N on machines without one, so that
 * runtime code written against device.h is proven to treat it as a device:
 *  - a host dereference of its memory is a SIGSEGV, every time;
 *  - a missing queue_sync, event_record or event_wait reads stale data
 *    (certainly with a delay set), and TSan reports it as a race whatever
 *    the timing: the queue's own locks order nothing for TSan, only the
 *    enqueue, the sync and the event do (sim_queue.c);
 *  - a pointer handed to it that is not inside one of its live allocations,
 *    or a copy or kernel buffer that runs past the end of one, is a fatal()
 *    naming the call.
 * The design is described at the top of sim.c.
 *
 * Not simulated: freeing memory or an event that queued work still uses, or
 * closing the device under a queue that waits for an event nobody records,
 * are the caller's bugs, as on CUDA, and are not detected. */
#ifndef GR_SIM_H
#define GR_SIM_H

#include <stddef.h>

#include "../device.h"

extern const device_vtable sim_vtable;

/* Address space each sim device reserves unless told otherwise: the most it
 * can allocate.  The memory is sparse: only what is touched is real. */
#define SIM_REGION_DEFAULT ((size_t)16 << 30)

/* A sim device object for device id (IR_DEV(DEV_GPU, n)) with
 * SIM_REGION_DEFAULT bytes of memory, or NULL when the system refuses the
 * mapping.  Its queue delay starts at GR_SIM_DELAY_US from the environment
 * (microseconds; absent or malformed: 0).  vt->close(d) drains and stops the
 * queues still open, unmaps the memory and frees d. */
device_obj *sim_device_new(int id);
/* The same with region_bytes of memory (rounded down to 64 bytes). */
device_obj *sim_device_new_sized(int id, size_t region_bytes);

/* Sleeps us microseconds before each entry of each of d's queues runs (0:
 * none), so that work the host forgot to wait for has certainly not run
 * when it looks.  Any thread, any time; entries already running keep the
 * delay they started with. */
void sim_set_delay_us(device_obj *d, unsigned us);

/* How many step graphs d has launched (tests: proof that a run replayed
 * recordings). */
uint64_t sim_graph_launches(device_obj *d);

#endif
