/* sim_queue.c - the simulated GPU's queues and events.  Step graphs are
 * recorded above them (sim_graph.c), which keeps its recording in a slot of
 * the queue (sim_queue_capture); nothing here calls up.
 *
 * A queue is a worker thread and a FIFO of entries (a launch, a copy, an
 * event record, an event wait), run in order.  The FIFO is a linked list
 * with a sentinel: the worker owns head (the entry it ran last), enqueuers own
 * tail; the worker frees an entry once it has taken the one after it, so a
 * freed entry is never the tail.
 *
 * What TSan sees.  Mutexes, condition variables and a semaphore make the
 * queue work, but every one of them would also tell TSan that the worker
 * and the host are ordered where the device contract says they are not:
 * the worker locking a mutex the host unlocked during queue_sync would make
 * a host read of stale data look ordered before the kernel that overwrites
 * it.  So under TSan these are made invisible (sim_quiet) and the contract's
 * edges, and only those, are declared on addresses of their own:
 *  - host -> worker: an entry's enqueue (released on the entry, acquired by
 *    the worker when it takes it: what the host did before the enqueue);
 *  - worker -> host: the work done before queue_sync (released on q->done)
 *    or queue_free (the join);
 *  - worker -> anyone: an event's record, to event_wait and event_sync
 *    (released on the event).
 * A host that forgets a sync or an event is then reported every time, not
 * only when the worker happened to be slow.  Fields that both sides read
 * and write are atomics (relaxed: the real ordering comes from the locks),
 * and the worker reads nothing the host writes except the entries. */
#include <errno.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_dev.h"
#include "sim_queue.h"

#if defined(__SANITIZE_THREAD__)
#define SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_TSAN 1
#endif
#endif

#ifdef SIM_TSAN
/* The TSan runtime's annotations (tsan_interface.h, dynamic_annotations). */
void AnnotateIgnoreSyncBegin(const char *file, int line);
void AnnotateIgnoreSyncEnd(const char *file, int line);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define SIM_QUIET(call)                                                                            \
    (AnnotateIgnoreSyncBegin(__FILE__, __LINE__), (call), AnnotateIgnoreSyncEnd(__FILE__, __LINE__))
#define SIM_RELEASE(addr) __tsan_release(addr)
#define SIM_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define SIM_QUIET(call)   (call)
#define SIM_RELEASE(addr) ((void)(addr))
#define SIM_ACQUIRE(addr) ((void)(addr))
#endif

typedef enum sim_op { SIM_LAUNCH, SIM_COPY, SIM_RECORD, SIM_WAIT, SIM_STOP } sim_op;

typedef struct sim_entry {
    struct sim_entry *_Atomic next;
    uint64_t seq; /* 1, 2, ... in enqueue order */
    uint64_t gen; /* the queue's sync generation when it was enqueued */
    sim_op op;
    /* launch */
    kernel_fn fn;
    const kern_args *orig; /* what the caller passed: queue_sync returns it */
    kern_args a;           /* orig with its buffers translated; a.in is in[] */
    /* copy: alias or host addresses */
    void *dst;
    const void *src;
    size_t n;
    /* record, wait */
    dev_event *ev;
    uint64_t ticket;
    void *in[]; /* launch: the n_in translated inputs */
} sim_entry;

/* A failed launch is remembered with the generation it was enqueued in:
 * the launches of that generation after it are skipped, and queue_sync,
 * which ends the generation, returns it.  A generation rather than a flag
 * the host clears, so that the worker never reads what the host writes. */
struct dev_queue {
    device_obj *d;
    dev_queue *next; /* in the device's list of open queues */
    pthread_t thread;
    /* Enqueuers' side. */
    pthread_mutex_t push_mu; /* guards tail, pushed and gen */
    sim_entry *tail;
    uint64_t pushed; /* seq of the last entry enqueued */
    uint64_t gen;    /* 1 + the number of queue_syncs */
    sem_t work;      /* one post per entry */
    /* The worker's side. */
    sim_entry *head;         /* the sentinel: the entry run last */
    pthread_mutex_t done_mu; /* with done_cv: queue_sync sleeps on done */
    pthread_cond_t done_cv;
    _Atomic uint64_t done;      /* seq of the last entry run */
    uint64_t fail_gen;          /* generation of the first failed launch, or 0 */
    const kern_args *fail_args; /* and its kern_args */
    dev_graph *capture;         /* sim_graph.c's (sim_queue_capture) */
};

/* Events count in tickets: record n hands out ticket n when it is enqueued
 * and sets fired to n when it runs.  A waiter waits for the ticket that was
 * the latest when it asked, so a later record does not hold it up, and an
 * event never recorded (ticket 0) has fired.  When one event is recorded on
 * two queues at once, fired keeps the highest ticket run; one recording
 * queue per event, as the runtime uses them, is exact. */
struct dev_event {
    _Atomic uint64_t recorded; /* the last ticket handed out */
    pthread_mutex_t mu;        /* with cv: waiters sleep on fired */
    pthread_cond_t cv;
    _Atomic uint64_t fired;
};

/* ---- locks that TSan does not see (see the top) ---- */

static void sim_lock(pthread_mutex_t *m)
{
    SIM_QUIET(pthread_mutex_lock(m));
}

static void sim_unlock(pthread_mutex_t *m)
{
    SIM_QUIET(pthread_mutex_unlock(m));
}

static void sim_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    SIM_QUIET(pthread_cond_wait(c, m));
}

/* ---- entries ---- */

static sim_entry *sim_entry_new(sim_op op, int n_in)
{
    sim_entry *e = base_xcalloc(1, sizeof *e + (size_t)n_in * sizeof e->in[0]);
    e->op = op;
    return e;
}

static void sim_push(dev_queue *q, sim_entry *e)
{
    atomic_store_explicit(&e->next, NULL, memory_order_relaxed);
    sim_lock(&q->push_mu);
    e->seq = ++q->pushed;
    e->gen = q->gen;
    atomic_store_explicit(&q->tail->next, e, memory_order_relaxed);
    q->tail = e;
    /* After the link (the worker frees the entry that holds it), before
     * the unlock (an enqueuer on another thread may post first). */
    SIM_RELEASE(e);
    sim_unlock(&q->push_mu);
    SIM_QUIET(sem_post(&q->work));
}

/* ---- events ---- */

static void sim_fire(dev_event *ev, uint64_t ticket)
{
    SIM_RELEASE(ev);
    sim_lock(&ev->mu);
    if (ticket > atomic_load_explicit(&ev->fired, memory_order_relaxed))
        atomic_store_explicit(&ev->fired, ticket, memory_order_relaxed);
    pthread_cond_broadcast(&ev->cv);
    sim_unlock(&ev->mu);
}

static void sim_await(dev_event *ev, uint64_t ticket)
{
    if (ticket == 0) return; /* never recorded: fired, and nothing to order with */
    sim_lock(&ev->mu);
    while (atomic_load_explicit(&ev->fired, memory_order_relaxed) < ticket)
        sim_cond_wait(&ev->cv, &ev->mu);
    sim_unlock(&ev->mu);
    SIM_ACQUIRE(ev);
}

/* ---- the worker ---- */

static void sim_sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Runs a launch unless one before it failed in its generation: a device
 * that has faulted runs nothing more of that step. */
static void sim_run_launch(dev_queue *q, sim_entry *e)
{
    if (e->gen == q->fail_gen) return;
    /* The run counter as a GPU kernel reads it: from device memory, when
     * the call runs (kern_args.step_dev; the CPU's kernel reads step). */
    if (e->a.step_dev) e->a.step = *e->a.step_dev;
    if (dev_kern_run(e->fn, &e->a) == 0) return;
    q->fail_gen = e->gen;
    q->fail_args = e->orig;
}

static void sim_run(dev_queue *q, sim_entry *e)
{
    switch (e->op) {
    case SIM_LAUNCH:
        sim_run_launch(q, e);
        break;
    case SIM_COPY:
        if (e->n && e->dst != e->src) memcpy(e->dst, e->src, e->n);
        break;
    case SIM_RECORD:
        sim_fire(e->ev, e->ticket);
        break;
    case SIM_WAIT:
        sim_await(e->ev, e->ticket);
        break;
    case SIM_STOP:
        break;
    }
}

static void sim_mark_done(dev_queue *q, uint64_t seq)
{
    SIM_RELEASE(&q->done); /* before done can be seen: a syncer acquires after */
    sim_lock(&q->done_mu);
    atomic_store_explicit(&q->done, seq, memory_order_relaxed);
    pthread_cond_broadcast(&q->done_cv);
    sim_unlock(&q->done_mu);
}

/* The next entry, once it is enqueued; the one before it is freed. */
static sim_entry *sim_take(dev_queue *q)
{
    int r;
    do SIM_QUIET(r = sem_wait(&q->work));
    while (r != 0); /* EINTR */
    sim_entry *e = atomic_load_explicit(&q->head->next, memory_order_relaxed);
    SIM_ACQUIRE(e);
    free(q->head);
    q->head = e;
    return e;
}

static void *sim_worker(void *arg)
{
    dev_queue *q = arg;
    sim_dev *s = sim_of(q->d);
    for (;;) {
        sim_entry *e = sim_take(q);
        if (e->op == SIM_STOP) return NULL;
        unsigned us = atomic_load_explicit(&s->delay_us, memory_order_relaxed);
        if (us) sim_sleep_us(us);
        sim_run(q, e);
        sim_mark_done(q, e->seq);
    }
}

/* ---- queues ---- */

dev_graph **sim_queue_capture(device_obj *d, dev_queue *q)
{
    GR_ASSERT(q->d == d);
    return &q->capture;
}

dev_queue *sim_queue_new(device_obj *d)
{
    dev_queue *q = base_xcalloc(1, sizeof *q);
    q->d = d;
    q->head = q->tail = sim_entry_new(SIM_STOP, 0); /* the first sentinel */
    q->gen = 1;
    pthread_mutex_init(&q->push_mu, NULL);
    pthread_mutex_init(&q->done_mu, NULL);
    pthread_cond_init(&q->done_cv, NULL);
    sem_init(&q->work, 0, 0);
    if (pthread_create(&q->thread, NULL, sim_worker, q) != 0)
        fatal("sim: cannot start a queue thread");
    pthread_setname_np(q->thread, "gr-sim-queue");
    sim_dev *s = sim_of(d);
    pthread_mutex_lock(&s->queues_mu);
    q->next = s->queues;
    s->queues = q;
    pthread_mutex_unlock(&s->queues_mu);
    return q;
}

/* Runs what is enqueued, then stops the worker and frees q. */
static void sim_queue_stop(dev_queue *q)
{
    sim_push(q, sim_entry_new(SIM_STOP, 0));
    pthread_join(q->thread, NULL);
    free(q->head);
    sem_destroy(&q->work);
    pthread_cond_destroy(&q->done_cv);
    pthread_mutex_destroy(&q->done_mu);
    pthread_mutex_destroy(&q->push_mu);
    free(q);
}

void sim_queue_free(device_obj *d, dev_queue *q)
{
    if (!q) return;
    GR_ASSERT(q->d == d);
    sim_dev *s = sim_of(d);
    pthread_mutex_lock(&s->queues_mu);
    dev_queue **at = &s->queues;
    while (*at != q) at = &(*at)->next;
    *at = q->next;
    pthread_mutex_unlock(&s->queues_mu);
    sim_queue_stop(q);
}

void sim_queues_close(device_obj *d)
{
    sim_dev *s = sim_of(d);
    pthread_mutex_lock(&s->queues_mu);
    dev_queue *q = s->queues;
    s->queues = NULL;
    pthread_mutex_unlock(&s->queues_mu);
    while (q) {
        dev_queue *next = q->next;
        sim_queue_stop(q);
        q = next;
    }
}

const kern_args *sim_queue_sync(device_obj *d, dev_queue *q)
{
    GR_ASSERT(q->d == d);
    sim_lock(&q->push_mu);
    uint64_t target = q->pushed, gen = q->gen++;
    sim_unlock(&q->push_mu);
    sim_lock(&q->done_mu);
    while (atomic_load_explicit(&q->done, memory_order_relaxed) < target)
        sim_cond_wait(&q->done_cv, &q->done_mu);
    SIM_ACQUIRE(&q->done);
    const kern_args *failed = q->fail_gen == gen ? q->fail_args : NULL;
    sim_unlock(&q->done_mu);
    return failed;
}

/* ---- launches and copies ---- */

/* The alias address of one of a call's buffers, checked against its type:
 * a kernel must not run past the allocation it was given. */
static void *sim_kernel_buf(device_obj *d, const kern_args *a, const char *role, int j,
                            const void *p, size_t n)
{
    void *at = sim_region_find(&sim_of(d)->mem, p, n);
    if (p && !at)
        fatal("sim: %s %d of kernel %s, [%p, +%zu bytes), is not inside one live allocation of "
              "this sim device",
              role, j, a->node ? ops_name(a->node->op) : "?", p, n);
    return at;
}

void sim_queue_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a,
                      const kern_args *orig)
{
    GR_ASSERT(q->d == d);
    sim_entry *e = sim_entry_new(SIM_LAUNCH, a->n_in);
    e->fn = fn;
    e->orig = orig;
    e->a = *a;
    e->a.out = sim_kernel_buf(d, a, "output", 0, a->out, a->out_t ? ir_nbytes(a->out_t) : 0);
    for (int j = 0; j < a->n_in; j++)
        e->in[j] = sim_kernel_buf(d, a, "input", j, a->in[j], ir_nbytes(a->in_t[j]));
    e->a.in = e->in;
    e->a.scratch = sim_kernel_buf(d, a, "scratch", 0, a->scratch,
                                  a->scratch_task_bytes * (size_t)a->max_tasks);
    e->a.step_dev = sim_kernel_buf(d, a, "run counter", 0, a->step_dev, sizeof *a->step_dev);
    e->a.lr_scale = sim_kernel_buf(d, a, "learning-rate scale", 0, a->lr_scale, sizeof(float));
    e->a.pool = NULL; /* the sim runs a kernel on its worker alone */
    sim_push(q, e);
}

void sim_queue_copy(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                    dev_copy_kind kind)
{
    GR_ASSERT(q->d == d);
    sim_region *r = &sim_of(d)->mem;
    sim_entry *e = sim_entry_new(SIM_COPY, 0);
    e->dst = kind == DEV_D2H ? dst : sim_region_at(r, dst, n, "copy_async destination");
    e->src = kind == DEV_H2D ? src : sim_region_at(r, src, n, "copy_async source");
    e->n = n;
    sim_push(q, e);
}

/* ---- events ---- */

dev_event *sim_event_new(device_obj *d)
{
    (void)d;
    dev_event *ev = base_xcalloc(1, sizeof *ev);
    atomic_init(&ev->recorded, 0);
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cv, NULL);
    return ev;
}

void sim_event_free(device_obj *d, dev_event *ev)
{
    (void)d;
    if (!ev) return;
    pthread_cond_destroy(&ev->cv);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}

void sim_queue_record(device_obj *d, dev_queue *q, dev_event *ev)
{
    GR_ASSERT(q->d == d);
    sim_entry *e = sim_entry_new(SIM_RECORD, 0);
    e->ev = ev;
    e->ticket = atomic_fetch_add_explicit(&ev->recorded, 1, memory_order_relaxed) + 1;
    sim_push(q, e);
}

void sim_queue_wait(device_obj *d, dev_queue *q, dev_event *ev)
{
    GR_ASSERT(q->d == d);
    sim_entry *e = sim_entry_new(SIM_WAIT, 0);
    e->ev = ev;
    e->ticket = atomic_load_explicit(&ev->recorded, memory_order_relaxed);
    sim_push(q, e);
}

void sim_event_sync(device_obj *d, dev_event *ev)
{
    (void)d;
    sim_await(ev, atomic_load_explicit(&ev->recorded, memory_order_relaxed));
}
