/* sim.c - the simulated GPU: a device object, its vtable and its
 * synchronous calls.  Memory is in sim_mem.c, queues and events in
 * sim_queue.c, step graphs in sim_graph.c.  The calls run one way: sim.c
 * names the other three; the device's enqueueing calls go to sim_graph.c,
 * which records them while a queue captures and otherwise, as when it
 * replays, hands them to sim_queue.c, which checks their pointers with
 * sim_mem.c.
 *
 * Design.  The sim exists to make host code that forgets it talks to a
 * device fail loudly on a machine without one, in four ways:
 *
 * Memory the host cannot touch.  Each device owns one memfd of a large,
 * sparse size, mapped twice.  The "handle" view is PROT_NONE: alloc returns
 * addresses in it, so a host dereference of device memory is a SIGSEGV,
 * every time, not a silent read that works only because the CPU and the
 * "GPU" share RAM.  The "alias" view is read-write and only the device's own
 * calls (copies, kernels on the worker) use it: alias + (p - handle).  Two
 * mappings of one memfd rather than mprotect around each call: toggling
 * protection would race between the worker and the host, and the handle
 * view would be readable while any call ran.  The allocator's bookkeeping
 * lives outside the region, and every pointer the device is handed is
 * checked against a live allocation (a copy or kernel buffer that runs past
 * the end of one is a fatal() naming it).  Fresh allocations are filled
 * with SIM_POISON, so reading what nobody wrote gives NaN, not zero.
 *
 * A queue that runs later, on its own thread.  Entries run in order on a
 * worker thread; kernels are the CPU's, run serially (pool = NULL) on the
 * alias addresses of their buffers.  The host learns what ran only through
 * queue_sync and event_sync.  Under TSan the queue's own locks are hidden
 * and only the contract's edges are declared (enqueue, sync, event), so no
 * other path orders the worker's writes and the host's reads either way
 * (sim_queue.c).
 *
 * Synchronous copies ordered with nothing.  to_device and to_host copy
 * through the alias on the calling thread at once, whatever is queued, as
 * on a non-blocking CUDA stream: a host that reads without syncing reads
 * stale data, and TSan sees the worker's write and the host's read of the
 * same alias address race.
 *
 * A hostile delay.  sim_set_delay_us (or GR_SIM_DELAY_US) makes the worker
 * sleep before every entry, so that work the host did not wait for has
 * certainly not run yet when it looks: a missing sync or event is a wrong
 * value in a plain build, deterministically, not only a TSan report.
 *
 * Step graphs that replay what was recorded.  As CUDA graphs do, a
 * recording runs nothing and a replay uses the arguments of the recording;
 * the sim also stops the program when the caller changed them since
 * (sim_graph.c). */
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "sim.h"
#include "sim_dev.h"
#include "sim_graph.h"
#include "sim_queue.h"

static void *sim_alloc(device_obj *d, size_t bytes)
{
    return sim_region_alloc(&sim_of(d)->mem, bytes);
}

static void sim_free(device_obj *d, void *p)
{
    sim_region_free(&sim_of(d)->mem, p);
}

/* Pinned memory has no meaning here: the CPU's aligned host memory. */
static void *sim_host_alloc(device_obj *d, size_t bytes)
{
    return cpu_vtable.host_alloc(d, bytes);
}

static void sim_host_free(device_obj *d, void *p)
{
    cpu_vtable.host_free(d, p);
}

static void sim_to_device(device_obj *d, void *dst, const void *src, size_t n)
{
    if (n) memcpy(sim_region_at(&sim_of(d)->mem, dst, n, "to_device destination"), src, n);
}

static void sim_to_host(device_obj *d, void *dst, const void *src, size_t n)
{
    if (n) memcpy(dst, sim_region_at(&sim_of(d)->mem, src, n, "to_host source"), n);
}

static void sim_close(device_obj *d)
{
    if (!d) return;
    sim_dev *s = sim_of(d);
    sim_queues_close(d);
    sim_region_fini(&s->mem);
    pthread_mutex_destroy(&s->queues_mu);
    free(s);
    free(d);
}

const device_vtable sim_vtable = {
    .name = "sim",
    .async = 1,
    .alloc = sim_alloc,
    .free = sim_free,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .to_device = sim_to_device,
    .to_host = sim_to_host,
    .queue_new = sim_queue_new,
    .queue_free = sim_queue_free,
    .launch = sim_launch,
    .copy_async = sim_copy_async,
    .queue_sync = sim_queue_sync,
    .event_new = sim_event_new,
    .event_free = sim_event_free,
    .event_record = sim_event_record,
    .event_wait = sim_event_wait,
    .event_sync = sim_event_sync,
    .capture_begin = sim_capture_begin,
    .capture_end = sim_capture_end,
    .graph_launch = sim_graph_launch,
    .graph_free = sim_graph_free,
    .close = sim_close,
    .kernels = cpu_kernels,
};

/* GR_SIM_DELAY_US as a number of microseconds; absent or malformed: 0. */
static unsigned sim_env_delay_us(void)
{
    const char *v = getenv("GR_SIM_DELAY_US");
    if (!v || !*v) return 0;
    char *end;
    unsigned long us = strtoul(v, &end, 10);
    return *end || us > 60000000ul ? 0 : (unsigned)us;
}

device_obj *sim_device_new_sized(int id, size_t region_bytes)
{
    sim_dev *s = base_xcalloc(1, sizeof *s);
    if (sim_region_init(&s->mem, region_bytes) != 0) {
        free(s);
        return NULL;
    }
    atomic_init(&s->delay_us, sim_env_delay_us());
    pthread_mutex_init(&s->queues_mu, NULL);
    device_obj *d = base_xcalloc(1, sizeof *d);
    *d = (device_obj){.vt = &sim_vtable, .id = id, .impl = s};
    return d;
}

device_obj *sim_device_new(int id)
{
    return sim_device_new_sized(id, SIM_REGION_DEFAULT);
}

void sim_set_delay_us(device_obj *d, unsigned us)
{
    atomic_store_explicit(&sim_of(d)->delay_us, us, memory_order_relaxed);
}

uint64_t sim_graph_launches(device_obj *d)
{
    return atomic_load(&sim_of(d)->graph_launches);
}
