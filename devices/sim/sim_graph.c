/* sim_graph.c - the simulated GPU's step graphs (device.h: capture_begin,
 * capture_end, graph_launch), recorded by wrapping the queue: the device's
 * launch, copy_async, event_record and event_wait come here first, and go
 * on to sim_queue.c unless the queue captures.  As hostile as CUDA graphs
 * are:
 *  - while a queue records, nothing it is given runs: a caller that records
 *    a step and forgets to launch the recording computes nothing;
 *  - a launch replays the kern_args as they were when recorded, never as
 *    they are now: a caller that changes an argument between steps and
 *    expects the replay to see it (a step counter, a pointer it patches) is
 *    wrong on a GPU.  The sim says so at the launch, by comparing what it
 *    recorded with what the caller's kern_args hold now: any difference is
 *    a fatal() naming the op and the field, but the run counter's (step)
 *    of a kernel that does not read it, or that reads it from device memory
 *    (step_dev, which the sim loads into step when the call runs, as a GPU
 *    kernel reads it: the runtime sets it on the queue before each step);
 *  - every pointer of a replayed call is checked again against the live
 *    allocations, as on its first enqueue. */
#include <stdlib.h>
#include <string.h>

#include "sim_dev.h"
#include "sim_graph.h"
#include "sim_queue.h"

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

struct dev_graph {
    dev_queue *q; /* recorded on, and launched on */
    sim_call *calls;
    int n, cap;
};

static void sim_graph_add(dev_graph *g, const sim_call *c)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->calls = base_xreallocarray(g->calls, (size_t)g->cap, sizeof *g->calls);
    }
    sim_call *r = &g->calls[g->n++];
    *r = *c;
    if (c->op != SIM_CALL_LAUNCH) return;
    r->a = *c->orig;
    r->in = base_xmalloc(sizeof *r->in * (size_t)(r->a.n_in + 1));
    for (int j = 0; j < r->a.n_in; j++) r->in[j] = c->orig->in[j];
    r->a.in = r->in;
}

/* ---- the device's enqueueing calls: recorded while q captures ---- */

void sim_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a)
{
    dev_graph *g = *sim_queue_capture(d, q);
    if (g)
        sim_graph_add(g, &(sim_call){.op = SIM_CALL_LAUNCH, .fn = fn, .orig = a});
    else
        sim_queue_launch(d, q, fn, a, a);
}

void sim_copy_async(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                    dev_copy_kind kind)
{
    dev_graph *g = *sim_queue_capture(d, q);
    if (g)
        sim_graph_add(
            g, &(sim_call){.op = SIM_CALL_COPY, .dst = dst, .src = src, .n = n, .kind = kind});
    else
        sim_queue_copy(d, q, dst, src, n, kind);
}

void sim_event_record(device_obj *d, dev_event *ev, dev_queue *q)
{
    dev_graph *g = *sim_queue_capture(d, q);
    if (g)
        sim_graph_add(g, &(sim_call){.op = SIM_CALL_RECORD, .ev = ev});
    else
        sim_queue_record(d, q, ev);
}

void sim_event_wait(device_obj *d, dev_queue *q, dev_event *ev)
{
    dev_graph *g = *sim_queue_capture(d, q);
    if (g)
        sim_graph_add(g, &(sim_call){.op = SIM_CALL_WAIT, .ev = ev});
    else
        sim_queue_wait(d, q, ev);
}

/* ---- recording and replay ---- */

void sim_capture_begin(device_obj *d, dev_queue *q)
{
    dev_graph **rec = sim_queue_capture(d, q);
    GR_ASSERT(*rec == NULL);
    *rec = base_xcalloc(1, sizeof **rec);
    (*rec)->q = q;
}

dev_graph *sim_capture_end(device_obj *d, dev_queue *q)
{
    dev_graph **rec = sim_queue_capture(d, q), *g = *rec;
    GR_ASSERT(g != NULL);
    *rec = NULL;
    return g;
}

/* The first field in which the caller's kern_args differ from the
 * recording, or NULL. */
static const char *changed_field(const sim_call *c)
{
    const kern_args *now = c->orig, *was = &c->a;
    if (now->out != was->out) return "out";
    if (now->n_in != was->n_in) return "n_in";
    for (int j = 0; j < was->n_in; j++)
        if (now->in[j] != was->in[j]) return "in[]";
    if (now->scratch != was->scratch || now->max_tasks != was->max_tasks) return "scratch";
    if (now->seed != was->seed) return "seed";
    if (now->step_dev != was->step_dev) return "step_dev";
    if (now->lr_scale != was->lr_scale) return "lr_scale";
    if (now->step != was->step && !was->step_dev && was->node &&
        ops_has(was->node->op, OPF_PER_RUN))
        return "step";
    if (now->lock != was->lock) return "lock";
    if (now->queue != was->queue) return "queue";
    if (now->node != was->node || now->out_t != was->out_t || now->in_t != was->in_t) return "node";
    return NULL;
}

void sim_graph_launch(device_obj *d, dev_queue *q, dev_graph *g)
{
    GR_ASSERT(g->q == q && *sim_queue_capture(d, q) == NULL);
    atomic_fetch_add(&sim_of(d)->graph_launches, 1);
    for (int i = 0; i < g->n; i++) {
        const sim_call *c = &g->calls[i];
        const char *field;
        switch (c->op) {
        case SIM_CALL_LAUNCH:
            if ((field = changed_field(c)))
                fatal("sim: a step graph replays %s with the arguments it was recorded with, "
                      "but the caller has changed its %s since: on a GPU the replay would use "
                      "the old value",
                      c->a.node ? ops_name(c->a.node->op) : "a kernel", field);
            sim_queue_launch(d, q, c->fn, &c->a, c->orig);
            break;
        case SIM_CALL_COPY:
            sim_queue_copy(d, q, c->dst, c->src, c->n, c->kind);
            break;
        case SIM_CALL_RECORD:
            sim_queue_record(d, q, c->ev);
            break;
        case SIM_CALL_WAIT:
            sim_queue_wait(d, q, c->ev);
            break;
        }
    }
}

void sim_graph_free(device_obj *d, dev_graph *g)
{
    (void)d;
    if (!g) return;
    for (int i = 0; i < g->n; i++) free(g->calls[i].in);
    free(g->calls);
    free(g);
}
