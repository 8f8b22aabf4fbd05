/* gr_test.h - what the cmocka tests of the public API share.  Include it
 * after <cmocka.h>. */
#ifndef GR_TEST_H
#define GR_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "graphrun.h"

/* Fails the test with the call, the code and the status message. */
#define assert_gr_ok(call, st)                                                                     \
    do {                                                                                           \
        gr_code c_ = (call);                                                                       \
        if (c_ != GR_OK) fail_msg("%s -> %s: %s", #call, gr_code_name(c_), gr_status_message(st)); \
    } while (0)

/* Whether the suite runs on a GPU: tests/sim.cmake (the simulated GPU)
 * and tests/cuda.cmake set GR_TEST_ON_GPU=1, and each test then compiles
 * with gr_compile_options.cpu_as_gpu (gr_test_options).  The environment
 * is read here, by the tests, never by the library. */
static inline int gr_test_on_gpu(void)
{
    const char *on = getenv("GR_TEST_ON_GPU");
    return on && on[0] == '1';
}

/* The compile options of a test that passes none: cpu_as_gpu when the
 * suite runs on a GPU (GR_TEST_ON_GPU=1, set by tests/sim.cmake and
 * tests/cuda.cmake).  A test with options of its own sets
 * .cpu_as_gpu = gr_test_on_gpu() in them. */
static inline const gr_compile_options *gr_test_options(void)
{
    static const gr_compile_options cpu = {0}, gpu = {.cpu_as_gpu = 1};
    return gr_test_on_gpu() ? &gpu : &cpu;
}

/* The device a test's cpu:N runs on: gpu:N when the suite runs on a GPU. */
static inline const char *gr_test_dev(int n)
{
    static const char *cpu[] = {"cpu:0", "cpu:1"}, *gpu[] = {"gpu:0", "gpu:1"};
    return (gr_test_on_gpu() ? gpu : cpu)[n & 1];
}

/* "OP on DEV" into buf, as runtime errors name a node's op and device. */
static inline const char *gr_test_on(char *buf, size_t n, const char *op, int dev)
{
    snprintf(buf, n, "%s on %s", op, gr_test_dev(dev));
    return buf;
}

#endif
