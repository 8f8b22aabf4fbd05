/* test_compile_linear.c - compiling, planning and preparing a run cost
 * O(nodes + edges) in work and in memory, checked without a clock (no unit
 * test times anything).
 *
 * Each program shape is built at two sizes, 4x apart.  At each, the work
 * counter (ir_work: the nodes each sweep visits and the probes of each
 * lookup, in the compiler, the plan and the executor's set-up) and the
 * bytes and calls allocated (alloc_count.h) are divided by the graph's
 * nodes + edges; the larger size may cost at most RATIO times the smaller
 * one per node and edge.  Linear work keeps that near 1; a sweep per node
 * or per replacement, a lookup by a scan, or a list grown by one realloc
 * per item makes it about 4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_count.h"
#include "runtime/runtime.h"

#define RATIO 1.5

/* What building and preparing one program cost, per node and edge. */
typedef struct cost {
    long units; /* live nodes + their input and control edges */
    double work, bytes, calls;
} cost;

typedef void (*shape_fn)(FILE *f, int n);

static const char *dense_fn = "fn dense(x, units, act=relu) {\n"
                              "  var w = glorot([cols(x), units])\n"
                              "  var b = zeros([units])\n"
                              "  return act(x @ w + b)\n"
                              "}\n";

/* bench/gen_deep.py's net: n dense layers of width 16, one loss, one sgd. */
static void deep(FILE *f, int n, int devices)
{
    fprintf(f, "data d = gaussian(n=256, dims=[16], batch=16, seed=1)\n%sh0 = d.x\n", dense_fn);
    for (int i = 1; i < n; i++) fprintf(f, "h%d = dense(h%d, 16) @cpu:%d\n", i, i - 1, i % devices);
    fprintf(f, "loss = mse(dense(h%d, 16, act=none), d.x)\ntrain = sgd(0.01).minimize(loss)\n",
            n - 1);
}

static void deep_one_device(FILE *f, int n)
{
    deep(f, n, 1);
}

/* Every layer crosses between cpu:0 and cpu:1: a transfer per edge. */
static void deep_two_devices(FILE *f, int n)
{
    deep(f, n, 2);
}

/* n small nets, each with its own minimize (momentum: slot variables);
 * `train` groups them. */
static void many_minimizes(FILE *f, int n)
{
    fprintf(f, "data d = gaussian(n=256, dims=[16], batch=16, seed=1)\n%s", dense_fn);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "l%d = mse(dense(dense(d.x, 16), 16), d.x)\nt%d = momentum(0.01).minimize(l%d)\n",
                i, i, i);
    fprintf(f, "train = sgd(0.01).minimize(l0)\n");
}

/* n functions, each called once in the same scope. */
static void many_functions(FILE *f, int n)
{
    fprintf(f, "data d = gaussian(n=256, dims=[16], batch=16, seed=1)\nh0 = d.x\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "fn f%d(x) {\n  var w = glorot([cols(x), 16])\n  return x @ w\n}\n", i);
    for (int i = 0; i < n; i++) fprintf(f, "h%d = f%d(h%d)\n", i + 1, i, i);
    fprintf(f, "train = sgd(0.01).minimize(mse(h%d, d.x))\n", n);
}

static long graph_units(const ir_graph *g)
{
    long u = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead) u += 1 + g->nodes[i].n_in + g->nodes[i].n_ctrl;
    return u;
}

/* Compiles shape(n) for cpu:0 and cpu:1, opens a session with one thread
 * per device and prepares `train`: plan, data sources, one executor. */
static cost measure(shape_fn shape, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    shape(f, n);
    fclose(f);
    gr_compile_options co = {.devices = "cpu:0-1"};
    gr_session_options so = {.threads = 2};
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    unsigned long long w0 = ir_work;
    alloc_count_start();
    if (gr_compile_string("shape.graph", text, len, &co, &p, st) != GR_OK ||
        gr_session_new(p, &so, &s, st) != GR_OK || gr_prepare(s, "train", NULL, 0, st) != GR_OK)
        fail_msg("%s", gr_status_message(st));
    alloc_count_stop();
    cost c = {.units = graph_units(p->g)};
    c.work = (double)(ir_work - w0) / (double)c.units;
    c.bytes = (double)atomic_load(&alloc_bytes) / (double)c.units;
    c.calls = (double)atomic_load(&alloc_calls) / (double)c.units;
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    free(text);
    return c;
}

typedef struct shape_case {
    const char *name;
    shape_fn fn;
    int n; /* the small size; the large one is 4n */
} shape_case;

static const shape_case cases[] = {
    {"deep net on one device", deep_one_device, 300},
    {"deep net across two devices", deep_two_devices, 300},
    {"many minimize() calls", many_minimizes, 128},
    {"many functions", many_functions, 300},
};

static void check(const char *shape, const char *what, double small, double large)
{
    print_message("%-28s %-18s %10.2f %10.2f per node and edge\n", shape, what, small, large);
    if (large > RATIO * small)
        fail_msg("%s: %s grows %.2fx faster than nodes + edges at 4x the size", shape, what,
                 large / small);
}

static void test_work_grows_with_nodes_and_edges(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        cost a = measure(cases[k].fn, cases[k].n), b = measure(cases[k].fn, 4 * cases[k].n);
        assert_true(b.units > 3 * a.units);
        check(cases[k].name, "work", a.work, b.work);
    }
}

static void test_memory_grows_with_nodes_and_edges(void **state)
{
    (void)state;
    if (GR_SANITIZED) skip();
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        cost a = measure(cases[k].fn, cases[k].n), b = measure(cases[k].fn, 4 * cases[k].n);
        check(cases[k].name, "bytes allocated", a.bytes, b.bytes);
        check(cases[k].name, "allocations", a.calls, b.calls);
    }
}

/* The instruments see work and memory: otherwise a ratio of 0 / 0 would
 * prove nothing. */
static void test_the_counters_count(void **state)
{
    (void)state;
    cost c = measure(deep_one_device, 10);
    assert_true(c.work >= 1);
    if (!GR_SANITIZED) assert_true(c.bytes >= 1 && c.calls > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_counters_count),
        cmocka_unit_test(test_work_grows_with_nodes_and_edges),
        cmocka_unit_test(test_memory_grows_with_nodes_and_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
