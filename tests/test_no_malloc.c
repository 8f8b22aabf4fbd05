/* test_no_malloc.c - a training step in steady state allocates nothing.
 *
 * This program counts allocations (alloc_count.h), in every thread, during
 * many gr_run calls of a session warmed up.  When a step allocates, the
 * first allocation's backtrace goes to stderr before the test fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc_count.h"
#include "graphrun.h"

static long steady_state_allocations_with(const char *path, int threads, const gr_param *params,
                                          int n_params)
{
    if (GR_SANITIZED) skip();
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    gr_session_options so = {.threads = threads};
    gr_compile_options co = {.params = params, .n_params = n_params};
    float loss;
    gr_fetch f = {"train/loss", &loss, sizeof loss, NULL};
    if (gr_compile_file(path, &co, &p, st) != GR_OK || gr_session_new(p, &so, &s, st) != GR_OK)
        fail_msg("%s", gr_status_message(st));
    for (int i = 0; i < 20; i++) /* warm-up: plans, executors, readers */
        if (gr_run(s, "train", NULL, 0, &f, 1, st) != GR_OK) fail_msg("%s", gr_status_message(st));
    alloc_count_start();
    for (int i = 0; i < 300; i++) gr_run(s, "train", NULL, 0, &f, 1, st);
    alloc_count_stop();
    if (atomic_load(&alloc_calls)) { /* which allocator, for a failure seen on CI only */
        char what[512];
        snprintf(what, sizeof what, "%s, %d thread(s), 300 steps", path, threads);
        alloc_count_report(what);
    }
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    return atomic_load(&alloc_calls);
}

static long steady_state_allocations(const char *path, int threads)
{
    return steady_state_allocations_with(path, threads, NULL, 0);
}

static void test_linear_regression_steps_do_not_allocate(void **state)
{
    (void)state;
    assert_int_equal(steady_state_allocations(GR_SOURCE_DIR "/examples/linear_regression.graph", 1),
                     0);
    assert_int_equal(steady_state_allocations(GR_SOURCE_DIR "/examples/linear_regression.graph", 2),
                     0);
}

static void test_mlp_steps_do_not_allocate(void **state)
{
    (void)state;
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK)) skip();
    assert_int_equal(steady_state_allocations(GR_SOURCE_DIR "/examples/fashion_mlp.graph", 2), 0);
}

/* Two partitions (towers on cpu:0 and cpu:1): transfers and the partition
 * thread hand-off allocate nothing either. */
static void test_partitioned_steps_do_not_allocate(void **state)
{
    (void)state;
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK)) skip();
    assert_int_equal(steady_state_allocations(GR_SOURCE_DIR "/examples/two_towers.graph", 2), 0);
}

/* LeNet: im2col convolutions (conv1) and Winograd ones (conv2), whose
 * scratch the plan must size as the CPU uses it (compiler/conv_algo.h). */
static void test_cnn_steps_do_not_allocate(void **state)
{
    (void)state;
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK)) skip();
    gr_param small = {"batch", "4"};
    for (int threads = 1; threads <= 2; threads++)
        assert_int_equal(steady_state_allocations_with(GR_SOURCE_DIR "/examples/fashion_cnn.graph",
                                                       threads, &small, 1),
                         0);
}

/* A transformer block: batched matmuls, layernorm, gelu, causal softmax. */
static void test_attention_steps_do_not_allocate(void **state)
{
    (void)state;
    assert_int_equal(steady_state_allocations(GR_SOURCE_DIR "/tests/models/attention.graph", 2), 0);
}

/* The counter itself works: otherwise 0 would prove nothing. */
static void test_the_counter_sees_allocations(void **state)
{
    (void)state;
    if (GR_SANITIZED) skip();
    alloc_count_start();
    free(malloc(16));
    gr_status_free(gr_status_new());
    alloc_count_stop();
    assert_int_equal(atomic_load(&alloc_calls), 2);
    assert_true(atomic_load(&alloc_first.ready)); /* the first one's backtrace */
    assert_true(alloc_first.depth > 1);
    assert_int_equal(alloc_first.bytes, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_counter_sees_allocations),
        cmocka_unit_test(test_linear_regression_steps_do_not_allocate),
        cmocka_unit_test(test_mlp_steps_do_not_allocate),
        cmocka_unit_test(test_partitioned_steps_do_not_allocate),
        cmocka_unit_test(test_cnn_steps_do_not_allocate),
        cmocka_unit_test(test_attention_steps_do_not_allocate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
