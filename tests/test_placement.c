/* test_placement.c - the program means what it says about devices:
 * a var's annotation places it and its slots and updates; an annotated
 * minimize leaves gradients with their ops and updates with their
 * variables; soft placement moves a variable with its node; a session of
 * a program compiled for devices this machine lacks fails cleanly; and
 * device indices have one limit (LIM_DEVICES) in the language, in
 * gr_compile_options.devices and in the machine probe; a var on a missing
 * GPU is an error (a warning with soft placement); whatever autodiff
 * colocates ends together; cpu_as_gpu moves all but the data sources; and
 * the environment (GR_TEST_ON_GPU) places nothing.  The golden
 * diagnostics of the same rules are tests/compile/device_*.graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gr_test.h"
#include "runtime/runtime.h"
#ifdef GR_HAVE_CUDA
#include "devices/cuda/cuda.h"
#endif

static gr_program *compile_with(const char *src, const gr_compile_options *o, gr_status *st)
{
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("place.graph", src, strlen(src), o, &p, st), st);
    return p;
}

static gr_program *compile(const char *src, const char *devices, int soft, gr_status *st)
{
    gr_compile_options o = {.devices = devices, .soft_placement = soft};
    return compile_with(src, &o, st);
}

static gr_code compile_code(const char *src, const char *devices, gr_status *st)
{
    gr_compile_options o = {.devices = devices};
    gr_program *p = NULL;
    gr_code c = gr_compile_string("place.graph", src, strlen(src), &o, &p, st);
    gr_program_free(p);
    return c;
}

static int var_device(const gr_program *p, const char *name)
{
    int vi = ir_find_var(p->g, name);
    if (vi < 0) fail_msg("no variable %s", name);
    return p->g->vars[vi].device;
}

/* Two steps of target train, x fed with ones. */
static void run_two_steps(const gr_program *p, gr_status *st)
{
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = 1;
    gr_feed in = {"x", x, sizeof x};
    for (int step = 0; step < 2; step++) assert_gr_ok(gr_run(s, "train", &in, 1, NULL, 0, st), st);
    gr_session_free(s);
}

static void test_var_annotation_places_the_variable_its_slots_and_updates(void **state)
{
    (void)state;
    const char *src = "input x: f32[4, 3]\n"
                      "var w = zeros([3, 2]) @gpu:0\n"
                      "loss = mean(x @ w)\n"
                      "train = adam(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, "cpu:0,sim:0", 0, st);
    const int gpu0 = IR_DEV(DEV_GPU, 0);
    assert_int_equal(var_device(p, "w"), gpu0);
    assert_int_equal(var_device(p, "w/adam_m"), gpu0);
    assert_int_equal(var_device(p, "w/adam_v"), gpu0);
    int updates = 0;
    for (int i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == OP_APPLY_ADAM) {
            assert_int_equal(p->g->nodes[i].device, gpu0);
            updates++;
        }
    assert_int_equal(updates, 1);
    assert_string_equal(gr_program_warnings(p), "");
    run_two_steps(p, st);
    gr_program_free(p);
    gr_status_free(st);
}

/* Every update is on its variable's device; every other node but the
 * step's groups on `dev`. */
static void assert_all_on(const ir_graph *g, int dev)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || n->op == OP_GROUP) continue;
        int want = ops_has(n->op, OPF_UPDATE) ? g->nodes[n->in[0]].device : dev;
        if (n->device != want)
            fail_msg("node %d (%s, line %u) is on device %#x, not %#x", i, ops_name(n->op),
                     n->span.begin, n->device, want);
    }
}

static void test_annotated_minimize_keeps_gradients_and_updates_with_their_nodes(void **state)
{
    (void)state;
    const char *src = "input x: f32[4, 3]\n"
                      "var w = ones([3, 2])\n"
                      "loss = mean(x @ w)\n"
                      "train = momentum(0.1).minimize(loss) @gpu:0\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, "cpu:0,sim:0", 0, st);
    assert_int_equal(var_device(p, "w"), IR_DEV(DEV_CPU, 0));
    assert_int_equal(var_device(p, "w/momentum"), IR_DEV(DEV_CPU, 0));
    assert_all_on(p->g, IR_DEV(DEV_CPU, 0));
    run_two_steps(p, st); /* an update on gpu:0 of a cpu:0 variable: the sim stops the process */
    gr_program_free(p);
    gr_status_free(st);
}

static void test_soft_placement_moves_a_variable_with_its_node(void **state)
{
    (void)state;
    const char *src = "input x: f32[4, 3]\n"
                      "scope s @gpu:0 { var w = ones([3, 2]) }\n"
                      "loss = mean(x @ w)\n"
                      "train = adam(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, "cpu:0", 1, st);
    assert_non_null(strstr(gr_program_warnings(p), "gpu:0 is not available"));
    assert_int_equal(var_device(p, "s/w"), IR_DEV(DEV_CPU, 0));
    assert_int_equal(var_device(p, "s/w/adam_m"), IR_DEV(DEV_CPU, 0));
    assert_all_on(p->g, IR_DEV(DEV_CPU, 0));
    run_two_steps(p, st);
    gr_program_free(p);
    gr_status_free(st);
}

/* A program compiled for gpu:15 (--devices): on this machine (no CUDA, or
 * fewer than 16 GPUs) the compile refuses it in a build without CUDA, and
 * gr_session_new in one with CUDA; neither aborts. */
static void test_a_device_the_machine_lacks_is_an_error_not_an_abort(void **state)
{
    (void)state;
    const char *src = "input x: f32[4]\ny = relu(x) @gpu:15\n";
    gr_status *st = gr_status_new();
#ifndef GR_HAVE_CUDA
    assert_int_equal(compile_code(src, "cpu:0,gpu:0-15", st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "gpu:N needs CUDA"));
#else
    gr_program *p = compile(src, "cpu:0,gpu:0-15", 0, st);
    gr_session *s = NULL;
    gr_code c = gr_session_new(p, NULL, &s, st);
    if (c == GR_OK) { /* a machine with 16 GPUs */
        gr_session_free(s);
    } else {
        assert_int_equal(c, GR_ERR_ARG);
        assert_null(s);
        const char *msg = gr_status_message(st);
        assert_non_null(
            strstr(msg, "gr_session_new: the program uses gpu:15, but this machine has"));
    }
    gr_program_free(p);
#endif
    gr_status_free(st);
}

/* gpu:0 in a CUDA build on a machine without a GPU (the stand-in's
 * CUDA_HOST_DEVICES=0, tests/cuda_host.cmake): a clear error from
 * gr_session_new, not an abort.  Skipped where a GPU is. */
static void test_gpu0_without_a_gpu_is_an_error(void **state)
{
    (void)state;
#ifdef GR_HAVE_CUDA
    if (cuda_device_count() > 0) skip();
    gr_status *st = gr_status_new();
    gr_program *p = compile("input x: f32[4]\ny = relu(x) @gpu:0\n", "cpu:0,gpu:0", 0, st);
    gr_session *s = NULL;
    assert_int_equal(gr_session_new(p, NULL, &s, st), GR_ERR_ARG);
    assert_null(s);
    assert_non_null(
        strstr(gr_status_message(st), "the program uses gpu:0, but this machine has no GPU"));
    gr_program_free(p);
    gr_status_free(st);
#else
    skip();
#endif
}

static void test_device_indices_stop_at_the_limit_everywhere(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    char src[128];
    /* the language: cpu:15 and gpu:15 compile, 16 is an error */
    snprintf(src, sizeof src, "input x: f32[4]\na = relu(x) @cpu:%d\nb = relu(x) @gpu:%d\n",
             LIM_DEVICES - 1, LIM_DEVICES - 1);
    assert_gr_ok(compile_code(src, "cpu:0-15,sim:0-15", st), st);
    snprintf(src, sizeof src, "input x: f32[4]\na = relu(x) @gpu:%d\n", LIM_DEVICES);
    assert_int_equal(compile_code(src, "cpu:0-15,sim:0-15", st), GR_ERR_COMPILE);
    assert_non_null(strstr(gr_status_message(st), "device index 16 is out of range: devices are "
                                                  "numbered 0 to 15"));
    /* gr_compile_options.devices: 0-15 is the most, for every kind */
    const char *too_many[] = {"cpu:0-16", "cpu:0,sim:0-16", "cpu:0,sim:16", "cpu:0-99999999999"};
    for (size_t i = 0; i < sizeof too_many / sizeof *too_many; i++) {
        assert_int_equal(compile_code("input x: f32[4]\n", too_many[i], st), GR_ERR_ARG);
        assert_non_null(strstr(gr_status_message(st), "devices are numbered 0 to 15"));
    }
    /* the probe (GR_SIM_GPU=99, set in main): at most LIM_DEVICES of a kind */
    const rt_machine *m = machine_probe();
    assert_int_equal(m->n_cpu, LIM_DEVICES);
    assert_int_equal(m->n_gpu, LIM_DEVICES);
    gr_status_free(st);
}

/* The classic case: a variable annotated with a GPU the machine lacks is
 * an error at its declaration, or with soft placement one warning, and the
 * variable runs on cpu:0. */
static void test_a_var_on_a_missing_gpu_is_an_error_or_soft_placed(void **state)
{
    (void)state;
    const char *src = "var w = zeros([2]) @gpu:3\ny = sum(w)\n";
    gr_status *st = gr_status_new();
    assert_int_equal(compile_code(src, "cpu:0,sim:0-1", st), GR_ERR_COMPILE);
    assert_non_null(strstr(gr_status_message(st),
                           "place.graph:1:1: error: variable 'w' is placed on gpu:3, but this "
                           "machine has only gpu:0 to gpu:1"));
    gr_program *p = compile(src, "cpu:0,sim:0-1", 1, st);
    assert_string_equal(gr_program_warnings(p),
                        "place.graph:1:1: warning: gpu:3 is not available; its nodes run on "
                        "cpu:0 (--soft-placement)\n"
                        "var w = zeros([2]) @gpu:3\n"
                        "^~~~~~~~~~~~~~~~~~~~~~~~~\n");
    assert_int_equal(var_device(p, "w"), IR_DEV(DEV_CPU, 0));
    gr_program_free(p);
    gr_status_free(st);
}

/* Each missing device is reported once however many devices are missing:
 * ten GPUs the machine lacks, two nodes on each, give ten warnings. */
static void test_each_missing_device_warns_once(void **state)
{
    (void)state;
    char src[1024];
    size_t len = 0;
    for (int k = 2; k < 12; k++)
        len += (size_t)snprintf(src + len, sizeof src - len,
                                "var w%d = zeros([2]) @gpu:%d\ny%d = sum(w%d) @gpu:%d\n", k, k, k,
                                k, k);
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, "cpu:0,sim:0-1", 1, st);
    int warned = 0;
    for (const char *w = gr_program_warnings(p); (w = strstr(w, "is not available")); w++) warned++;
    assert_int_equal(warned, 10);
    gr_program_free(p);
    gr_status_free(st);
}

/* Every node autodiff made to go with another (a gradient with the op it
 * differentiates, a slot or update with its variable) ends on that one's
 * device, whichever rule placed it. */
static void assert_colocated(const ir_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->coloc >= 0 && n->device != g->nodes[n->coloc].device)
            fail_msg("node %d (%s) is on %#x, not with node %d on %#x", i, ops_name(n->op),
                     n->device, n->coloc, g->nodes[n->coloc].device);
        if (ops_has(n->op, OPF_UPDATE) && n->device != g->nodes[n->in[0]].device)
            fail_msg("update %d is not on its variable's device", i);
    }
}

static void test_gradients_slots_and_updates_go_with_their_nodes(void **state)
{
    (void)state;
    const char *src = "input x: f32[4, 3]\n"
                      "var w = ones([3, 2]) @gpu:1\n"
                      "var b = zeros([2])\n"
                      "h = relu(x @ w + b) @gpu:0\n"
                      "loss = mean(h)\n"
                      "train = adam(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, "cpu:0,sim:0-1", 0, st);
    const ir_graph *g = p->g;
    assert_colocated(g);
    assert_int_equal(var_device(p, "w/adam_m"), IR_DEV(DEV_GPU, 1));
    assert_int_equal(var_device(p, "b/adam_v"), IR_DEV(DEV_CPU, 0));
    int relu_grads = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == OP_RELU_GRAD) {
            assert_int_equal(g->nodes[i].device, IR_DEV(DEV_GPU, 0));
            relu_grads++;
        }
    assert_int_equal(relu_grads, 1);
    run_two_steps(p, st);
    gr_program_free(p);
    gr_status_free(st);
}

static int op_device(const ir_graph *g, op_kind op)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == op) return g->nodes[i].device;
    fail_msg("no live %s", ops_name(op));
    return -1;
}

/* A data source stays on the host under an annotation and under
 * cpu_as_gpu; cpu_as_gpu moves every other node and every variable from
 * cpu:N to gpu:(N mod GPUs), and does nothing on a machine without GPUs. */
static void test_cpu_as_gpu_moves_all_but_the_data_sources(void **state)
{
    (void)state;
    const char *src = "data d = gaussian(n=8, dims=[3], batch=2)\n"
                      "var w = ones([3, 2])\n"
                      "var v = ones([2]) @cpu:1\n"
                      "scope s @gpu:0 { h = relu(d.x @ w) }\n"
                      "loss = mean(h * v) @cpu:1\n"
                      "train = sgd(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_compile_options o = {.devices = "cpu:0-1,sim:0-1"};
    gr_program *p = compile_with(src, &o, st);
    assert_int_equal(op_device(p->g, OP_DATA), IR_DEV(DEV_CPU, 0));
    assert_int_equal(op_device(p->g, OP_RELU), IR_DEV(DEV_GPU, 0));
    assert_int_equal(op_device(p->g, OP_MEAN), IR_DEV(DEV_CPU, 1));
    assert_int_equal(var_device(p, "w"), IR_DEV(DEV_CPU, 0));
    gr_program_free(p);
    o.cpu_as_gpu = 1;
    p = compile_with(src, &o, st);
    assert_int_equal(op_device(p->g, OP_DATA), IR_DEV(DEV_CPU, 0));
    assert_int_equal(op_device(p->g, OP_RELU), IR_DEV(DEV_GPU, 0));
    assert_int_equal(op_device(p->g, OP_MEAN), IR_DEV(DEV_GPU, 1));
    assert_int_equal(var_device(p, "w"), IR_DEV(DEV_GPU, 0));
    assert_int_equal(var_device(p, "v"), IR_DEV(DEV_GPU, 1));
    assert_colocated(p->g);
    gr_program_free(p);
    const char *cpu1 = "input x: f32[2]\ny = relu(x) @cpu:1\n";
    o.devices = "cpu:0-1,sim:0";
    p = compile_with(cpu1, &o, st);
    assert_int_equal(op_device(p->g, OP_RELU), IR_DEV(DEV_GPU, 0)); /* 1 mod 1 */
    gr_program_free(p);
    o.devices = "cpu:0-1"; /* no GPU: no effect */
    p = compile_with(cpu1, &o, st);
    assert_int_equal(op_device(p->g, OP_RELU), IR_DEV(DEV_CPU, 1));
    gr_program_free(p);
    gr_status_free(st);
}

/* The library reads no GR_TEST_ON_GPU: only the option moves nodes. */
static void test_the_environment_does_not_place(void **state)
{
    (void)state;
    setenv("GR_TEST_ON_GPU", "1", 1);
    gr_status *st = gr_status_new();
    gr_program *p = compile("input x: f32[2]\ny = relu(x)\n", "cpu:0,sim:0", 0, st);
    assert_int_equal(op_device(p->g, OP_RELU), IR_DEV(DEV_CPU, 0));
    gr_program_free(p);
    gr_status_free(st);
    unsetenv("GR_TEST_ON_GPU");
}

int main(void)
{
    setenv("GR_SIM_GPU", "99", 1); /* before the process probes its machine */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_var_annotation_places_the_variable_its_slots_and_updates),
        cmocka_unit_test(test_annotated_minimize_keeps_gradients_and_updates_with_their_nodes),
        cmocka_unit_test(test_soft_placement_moves_a_variable_with_its_node),
        cmocka_unit_test(test_a_device_the_machine_lacks_is_an_error_not_an_abort),
        cmocka_unit_test(test_gpu0_without_a_gpu_is_an_error),
        cmocka_unit_test(test_device_indices_stop_at_the_limit_everywhere),
        cmocka_unit_test(test_a_var_on_a_missing_gpu_is_an_error_or_soft_placed),
        cmocka_unit_test(test_each_missing_device_warns_once),
        cmocka_unit_test(test_gradients_slots_and_updates_go_with_their_nodes),
        cmocka_unit_test(test_cpu_as_gpu_moves_all_but_the_data_sources),
        cmocka_unit_test(test_the_environment_does_not_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
