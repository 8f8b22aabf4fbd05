/* place.c - placement: the one pass that decides every node's device.
 *
 * It runs once, after sema and autodiff (sema_compile) and before the
 * passes (passes.c) and partitioning (plan.c).  Sema and autodiff only
 * record what the program asks for: each node's innermost open annotation
 * (ir_node.place_req into g->place_reqs; a variable's node takes the one on
 * its initializer first) and the node it goes with (ir_node.coloc).  The
 * machine and what each device implements come from the caller
 * (place_options; runtime/compile.c passes the machine's kernel tables).
 * The rules, in the order they apply (docs/architecture.md, "Placement"):
 *   1-4. place_asked, per node in id order: the device of the innermost
 *        annotation open when the node was made (1), which is also what an
 *        annotated block gives what is made inside it (2); but a node that
 *        goes with another takes its device (3), and a data source or an
 *        allreduce (MPI) runs on the host (4); else cpu:0.
 *   5.   place_missing: a device the machine lacks is an error, or with
 *        soft placement cpu:0 and one warning per device.
 *   6.   place_cpu_as_gpu: cpu:N runs on gpu:(N mod GPUs), what runs on
 *        the host (4) excepted (after 5, so a missing cpu:N stays an error).
 *   7.   place_kernels: an op its device has no kernel for is an error, or
 *        with soft placement cpu:0 and a warning (an update stays with its
 *        variable: an error); then the record fusion reads.
 *   8.   place_warn_unused: an annotation that placed nothing, a warning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

#define PLACE_HOST IR_DEV(DEV_CPU, 0)

/* Data sources read files, and allreduce runs MPI: on the host. */
static int runs_on_host(op_kind op)
{
    return op == OP_DATA || op == OP_ALLREDUCE;
}

/* Rules 1, 2 and 4 for a node that goes with no other. */
static int asked_alone(const ir_graph *g, const ir_node *n)
{
    if (runs_on_host(n->op) || n->place_req < 0) return PLACE_HOST;
    return g->place_reqs[n->place_req].dev;
}

/* Rules 1-4 for node i; used[site] notes an annotation that placed it. */
static int place_asked(const ir_graph *g, int i, unsigned char *used)
{
    const ir_node *n = &g->nodes[i];
    if (n->coloc >= 0 && !runs_on_host(n->op)) {
        GR_ASSERT(n->coloc < i);
        return g->nodes[n->coloc].device;
    }
    if (!runs_on_host(n->op) && n->place_req >= 0) used[g->place_reqs[n->place_req].site] = 1;
    return asked_alone(g, n);
}

int place_requested(const ir_graph *g, int i)
{
    while (g->nodes[i].coloc >= 0 && !runs_on_host(g->nodes[i].op)) i = g->nodes[i].coloc;
    return asked_alone(g, &g->nodes[i]);
}

static void describe(const ir_graph *g, const ir_node *n, char *what, size_t len)
{
    if (n->op == OP_VARIABLE)
        snprintf(what, len, "variable '%s'", g->vars[n->var].name);
    else if (n->op == OP_GROUP) /* only minimize() makes them */
        snprintf(what, len, "the step of minimize() (its group of updates)");
    else
        snprintf(what, len, "'%s'", ops_name(n->op));
}

static void missing_error(const ir_graph *g, const ir_node *n, int have, const char *no_gpu_why)
{
    int kind = IR_DEV_KIND(n->device), idx = IR_DEV_INDEX(n->device);
    const char *kn = kind == DEV_GPU ? "gpu" : "cpu";
    char what[LIM_NAME + 16];
    describe(g, n, what, sizeof what);
    if (have == 0 && kind == DEV_GPU && no_gpu_why)
        diag_error(g->diags, n->src, n->span,
                   "%s is placed on %s:%d, but this machine has no GPU: %s (use --soft-placement "
                   "to run it on the CPU)",
                   what, kn, idx, no_gpu_why);
    else if (have == 0)
        diag_error(g->diags, n->src, n->span,
                   "%s is placed on %s:%d, but this machine has no GPU (use --soft-placement to "
                   "run it on the CPU)",
                   what, kn, idx);
    else if (have == 1)
        diag_error(g->diags, n->src, n->span,
                   "%s is placed on %s:%d, but this machine has only %s:0 (use "
                   "--soft-placement to run it on cpu:0)",
                   what, kn, idx, kn);
    else
        diag_error(g->diags, n->src, n->span,
                   "%s is placed on %s:%d, but this machine has only %s:0 to %s:%d (use "
                   "--soft-placement to run it on cpu:0)",
                   what, kn, idx, kn, kn, have - 1);
}

/* The missing devices met so far, each reported once: at most every cpu:N
 * and gpu:N an annotation can name. */
typedef struct place_seen {
    int dev[2 * LIM_DEVICES];
    int n;
} place_seen;

/* Rule 5 for one node: 0 when its device exists (after soft placement),
 * else -1, reported at the first node on each missing device. */
static int place_missing_node(ir_graph *g, ir_node *n, const place_options *o, place_seen *s)
{
    int kind = IR_DEV_KIND(n->device), idx = IR_DEV_INDEX(n->device);
    int have = kind == DEV_GPU ? o->n_gpu : o->n_cpu;
    if (idx < have) return 0;
    int seen = 0;
    for (int i = 0; i < s->n; i++) seen |= s->dev[i] == n->device;
    if (!seen) {
        GR_ASSERT(s->n < 2 * LIM_DEVICES);
        s->dev[s->n++] = n->device;
    }
    if (o->soft_placement) {
        if (!seen)
            diag_add(g->diags, DIAG_WARNING, n->src, n->span,
                     "%s:%d is not available; its nodes run on cpu:0 (--soft-placement)",
                     kind == DEV_GPU ? "gpu" : "cpu", idx);
        n->device = PLACE_HOST;
        return 0;
    }
    if (!seen) missing_error(g, n, have, o->no_gpu_why);
    return -1;
}

/* Rule 5; constants last, so an error names the op the user wrote. */
static int place_missing(ir_graph *g, const place_options *o)
{
    place_seen s = {.n = 0};
    int rc = 0;
    IR_WORK(2 * g->n_nodes);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            ir_node *n = &g->nodes[i];
            if (!n->dead && (n->op == OP_CONST) == pass && place_missing_node(g, n, o, &s) < 0)
                rc = -1;
        }
    return rc;
}

/* Rule 6: how CI runs the CPU suite on a GPU (no effect without one). */
static void place_cpu_as_gpu(ir_graph *g, const place_options *o)
{
    if (!o->cpu_as_gpu || o->n_gpu == 0) return;
    IR_WORK(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (IR_DEV_KIND(n->device) == DEV_CPU && !runs_on_host(n->op))
            n->device = IR_DEV(DEV_GPU, IR_DEV_INDEX(n->device) % o->n_gpu);
    }
}

static int has_kernel(const place_options *o, op_kind op, int dev)
{
    return ops_has(op, OPF_SOURCE) || !o->implements || o->implements(o->ctx, op, dev);
}

/* Rule 7 for node n, whose op its device lacks: 0 when soft placement
 * moved it, else -1. */
static int kernel_missing(ir_graph *g, ir_node *n, int soft)
{
    char dev[32];
    ir_dev_str(n->device, dev, sizeof dev);
    if (!soft || ops_has(n->op, OPF_UPDATE)) {
        diag_error(g->diags, n->src, n->span, "'%s' has no kernel on %s", ops_name(n->op), dev);
        return -1;
    }
    diag_add(g->diags, DIAG_WARNING, n->src, n->span,
             "'%s' has no kernel on %s; it runs on cpu:0 (--soft-placement)", ops_name(n->op), dev);
    n->device = PLACE_HOST;
    return 0;
}

/* What device dev implements, into the record fusion reads. */
static void record_ops(ir_graph *g, const place_options *o, int dev)
{
    for (int k = 0; k < g->n_dev_ops; k++)
        if (g->dev_ops[k].dev == dev) return;
    g->dev_ops = base_xreallocarray(g->dev_ops, (size_t)g->n_dev_ops + 1, sizeof *g->dev_ops);
    ir_dev_ops *d = &g->dev_ops[g->n_dev_ops++];
    d->dev = dev;
    for (int op = 0; op < OP_COUNT; op++) d->has[op] = (unsigned char)has_kernel(o, op, dev);
}

/* Rule 7, then the record of every device the graph now uses. */
static int place_kernels(ir_graph *g, const place_options *o)
{
    int rc = 0;
    IR_WORK(2 * g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (!n->dead && !has_kernel(o, n->op, n->device) &&
            kernel_missing(g, n, o->soft_placement) < 0)
            rc = -1;
    }
    g->n_dev_ops = 0;
    for (int i = 0; o->implements && i < g->n_nodes; i++)
        if (!g->nodes[i].dead) record_ops(g, o, g->nodes[i].device);
    return rc;
}

/* Rule 8: an annotation that placed no node or variable anywhere it was
 * evaluated does nothing, which its author should know. */
static void place_warn_unused(ir_graph *g, const unsigned char *used)
{
    IR_WORK(g->n_place_reqs);
    for (int i = 0; i < g->n_place_reqs; i++) {
        const ir_place_req *r = &g->place_reqs[i];
        if (r->site != i || used[i]) continue;
        const char *text = r->src->text + r->span.begin, *nl;
        size_t len = r->span.end - r->span.begin;
        if ((nl = memchr(text, '\n', len))) len = (size_t)(nl - text); /* its first line */
        diag_add(g->diags, DIAG_WARNING, r->src, r->span,
                 "'%.*s' places nothing: no node made here takes its device from it", (int)len,
                 text);
    }
}

int place_run(ir_graph *g, const place_options *o)
{
    unsigned char *used = base_xcalloc((size_t)g->n_place_reqs + 1, 1);
    IR_WORK(g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].device = place_asked(g, i, used);
    int rc = place_missing(g, o);
    if (rc == 0) {
        place_cpu_as_gpu(g, o);
        rc = place_kernels(g, o);
    }
    place_warn_unused(g, used);
    free(used);
    IR_WORK(g->n_vars);
    for (int i = 0; i < g->n_vars; i++) g->vars[i].device = g->nodes[g->vars[i].node].device;
    return rc;
}

int place_implements(const ir_graph *g, op_kind op, int dev)
{
    for (int k = 0; k < g->n_dev_ops; k++)
        if (g->dev_ops[k].dev == dev) return g->dev_ops[k].has[op];
    return g->n_dev_ops == 0;
}
