/* test_step_graphs.c - step graphs (CUDA graphs' form in device.h) on the
 * simulated GPU, whose recordings replay the arguments they were recorded
 * with and stop the program if the runtime changed them since
 * (devices/sim/sim_graph.c); built on the CUDA stand-in (GR_TEST_CUDA_HOST,
 * tests/cuda_host.cmake), on the CUDA device's own stream capture.
 *
 * Each model trains twice on gpu:0 (sim:0, or CUDA) from the same seed and feeds:
 * with step graphs (the default) and with no_step_graphs.  The losses of
 * every step and the final weights must be the same bits, and the sim's
 * count of graph launches says whether the recordings were really replayed:
 * a runtime that recorded and then forgot to launch, replayed a stale
 * argument (a run counter that random nodes read: the sim stops the
 * program when such a call's recorded step is replayed), or recorded what
 * it must not fails here.  Random nodes (dropout, normal, bernoulli,
 * sample) are recorded too: they read the run counter from device memory,
 * which the runtime sets before each step (runtime/exec/parts.c), so a
 * replay draws each step's numbers, the same as call by call and as the
 * CPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "devices/sim/sim.h"
#include "gr_test.h"
#include "runtime/runtime.h"

/* Graph launches so far: of the session's gpu:0, or (the stand-in) of the
 * process. */
#ifdef GR_TEST_CUDA_HOST
#include "cuda_host/cuda_host.h"
#define GPU_DEVICES "cpu:0,gpu:0"
static uint64_t graph_launches(gr_session *s)
{
    (void)s;
    return cuda_host_graph_launches();
}
#else
#define GPU_DEVICES "cpu:0,sim:0"
static uint64_t graph_launches(gr_session *s)
{
    return sim_graph_launches(rt_device(s, IR_DEV(DEV_GPU, 0)));
}
#endif

#define STEPS 8
#define BATCH 8

/* Everything on gpu:0 but the fed inputs (cpu:0): a transfer in, then the
 * whole step on the device. */
static const char *mlp = "input x: f32[8, 4]\n"
                         "input y: i32[8]\n"
                         "scope m @gpu:0 {\n"
                         "  var w1 = glorot([4, 16])\n"
                         "  var b1 = zeros([16])\n"
                         "  var w2 = glorot([16, 3])\n"
                         "  h = relu(x @ w1 + b1)\n"
                         "  loss = mean(softmax_xent(h @ w2, y))\n"
                         "}\n"
                         "train = adam(0.01).minimize(loss) @gpu:0\n";

/* The learning rate of a schedule and the clipping scale are computed on
 * the device each step: a replay reads their new values, not recorded
 * ones (with a frozen rate the weights would differ from call by call). */
static const char *scheduled = "input x: f32[8, 4]\n"
                               "input y: i32[8]\n"
                               "scope m @gpu:0 {\n"
                               "  var w1 = glorot([4, 16])\n"
                               "  var w2 = glorot([16, 3])\n"
                               "  loss = mean(softmax_xent(relu(x @ w1) @ w2, y))\n"
                               "}\n"
                               "train = adamw(cosine(0.05, warmup=3, steps=8), clip=0.5)"
                               ".minimize(loss) @gpu:0\n";

/* Dropout reads the run counter, from device memory: replays draw each
 * step's mask. */
static const char *dropout = "input x: f32[8, 4]\n"
                             "input y: i32[8]\n"
                             "scope m @gpu:0 {\n"
                             "  var w1 = glorot([4, 16])\n"
                             "  var w2 = glorot([16, 3])\n"
                             "  h = dropout(relu(x @ w1), rate=0.5)\n"
                             "  loss = mean(softmax_xent(h @ w2, y))\n"
                             "}\n"
                             "train = sgd(0.1).minimize(loss) @gpu:0\n";

/* Two towers, cpu:0 and gpu:0, one set of weights: transfers both ways,
 * and a dev -> host send that must run call by call. */
static const char *towers = "input x: f32[8, 4]\n"
                            "input y: i32[8]\n"
                            "scope m @cpu:0 {\n"
                            "  var w = glorot([4, 3])\n"
                            "  l0 = mean(softmax_xent(shard(x, 0, 2) @ w, shard(y, 0, 2)))\n"
                            "}\n"
                            "scope m reuse(true) @gpu:0 {\n"
                            "  var w = glorot([4, 3])\n"
                            "  l1 = mean(softmax_xent(shard(x, 1, 2) @ w, shard(y, 1, 2)))\n"
                            "}\n"
                            "loss = (l0 + l1) / 2\n"
                            "train = momentum(0.1, 0.9).minimize(loss) @gpu:0\n";

/* The transformer ops (layernorm, batched matmul, causal softmax, gelu
 * and their gradients) launch nothing that changes from step to step. */
static const char *attention =
    "input x: f32[2, 4, 4]\n"
    "input y: i32[8]\n"
    "scope m @gpu:0 {\n"
    "  var wq = glorot([4, 4])\n"
    "  var wk = glorot([4, 4])\n"
    "  var wv = glorot([4, 4])\n"
    "  var g = ones([4])\n"
    "  var b = zeros([4])\n"
    "  var w = glorot([4, 3])\n"
    "  h = layernorm(x, g, b)\n"
    "  a = softmax(matmul(h @ wq, h @ wk, transpose_b=true), mask=\"causal\") @ (h @ wv)\n"
    "  loss = mean(softmax_xent(reshape(gelu(a + x), [8, 4]) @ w, y))\n"
    "}\n"
    "train = sgd(0.1).minimize(loss) @gpu:0\n";

typedef struct run_out {
    float loss[STEPS];
    float w[64];
    uint64_t launches;
} run_out;

static void feeds_for(int step, float *x, int32_t *y)
{
    for (int i = 0; i < BATCH * 4; i++) x[i] = (float)((i * 7 + step * 3) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < BATCH; i++) y[i] = (i + step) % 3;
}

static gr_program *compile(const char *src, gr_status *st)
{
    gr_compile_options o = {.devices = GPU_DEVICES};
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("inline.graph", src, strlen(src), &o, &p, st), st);
    return p;
}

/* STEPS steps; the losses, the first 64 bytes' worth of weight var, and the
 * sim's graph launches. */
static void train(const char *src, const char *var, size_t var_bytes, int no_graphs, run_out *out)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile(src, st);
    gr_session_options so = {.seed = 7, .threads = 1, .no_step_graphs = no_graphs};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    uint64_t launched = graph_launches(s);
    float x[BATCH * 4];
    int32_t y[BATCH];
    gr_feed feeds[2] = {{"x", x, sizeof x}, {"y", y, sizeof y}};
    for (int k = 0; k < STEPS; k++) {
        feeds_for(k, x, y);
        gr_fetch f = {"loss", &out->loss[k], sizeof(float), NULL};
        assert_gr_ok(gr_run(s, "train", feeds, 2, &f, 1, st), st);
    }
    assert_true(var_bytes <= sizeof out->w);
    assert_gr_ok(gr_variable_read(s, var, out->w, var_bytes, st), st);
    out->launches = graph_launches(s) - launched;
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void same_with_and_without(const char *src, const char *var, size_t var_bytes, run_out *with)
{
    run_out without = {0};
    train(src, var, var_bytes, 0, with);
    train(src, var, var_bytes, 1, &without);
    assert_int_equal(without.launches, 0);
    assert_memory_equal(with->loss, without.loss, sizeof with->loss);
    assert_memory_equal(with->w, without.w, var_bytes);
    /* it trained: the losses moved */
    assert_true(with->loss[0] != with->loss[STEPS - 1]);
}

/* Step 1 runs call by call, step 2 records and launches, steps 2..STEPS
 * replay: one launch per step from the second, per recorded stretch. */
static void test_replayed_steps_match_steps_enqueued_call_by_call(void **state)
{
    (void)state;
    run_out with = {0};
    same_with_and_without(mlp, "m/w2", 16 * 3 * sizeof(float), &with);
    assert_true(with.launches >= STEPS - 1);
}

static void test_scheduled_rate_and_clipping_replay_with_new_values(void **state)
{
    (void)state;
    run_out with = {0};
    same_with_and_without(scheduled, "m/w2", 16 * 3 * sizeof(float), &with);
    assert_true(with.launches >= STEPS - 1);
}

static void test_dropout_replays_with_each_steps_mask(void **state)
{
    (void)state;
    run_out with = {0};
    same_with_and_without(dropout, "m/w2", 16 * 3 * sizeof(float), &with);
    assert_true(with.launches >= STEPS - 1);
}

/* Random numbers and sampled ids in a trained model, on DEV (twice). */
static const char *random_src = "input x: f32[8, 4]\n"
                                "input y: i32[8]\n"
                                "scope m @%s {\n"
                                "  var w1 = glorot([4, 16])\n"
                                "  var w2 = glorot([16, 3])\n"
                                "  jitter = 0.1 * normal([8, 16])\n"
                                "  keep = bernoulli(0.5, [8, 16])\n"
                                "  ids = sample([1.0, 2.0, 3.0, 4.0, 0.0, 6.0], [8, 4])\n"
                                "  h = relu(x @ w1 + jitter) * keep\n"
                                "  loss = mean(softmax_xent(h @ w2, y))\n"
                                "}\n"
                                "train = sgd(0.1).minimize(loss) @%s\n";

typedef struct draws {
    float noise[STEPS][8 * 16], keep[STEPS][8 * 16], loss[STEPS];
    int32_t ids[STEPS][8 * 4];
    uint64_t launches;
} draws;

/* STEPS training steps of random_src on dev (of devices), fetching each
 * step's draws; on_gpu: count the graph launches. */
static void draw(const char *devices, const char *dev, int on_gpu, int no_graphs, draws *out)
{
    char src[1024];
    snprintf(src, sizeof src, random_src, dev, dev);
    gr_status *st = gr_status_new();
    gr_compile_options o = {.devices = devices};
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("inline.graph", src, strlen(src), &o, &p, st), st);
    gr_session_options so = {.seed = 7, .threads = 1, .no_step_graphs = no_graphs};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    uint64_t launched = on_gpu ? graph_launches(s) : 0;
    float x[BATCH * 4];
    int32_t y[BATCH];
    gr_feed feeds[2] = {{"x", x, sizeof x}, {"y", y, sizeof y}};
    for (int k = 0; k < STEPS; k++) {
        feeds_for(k, x, y);
        gr_fetch f[4] = {{"loss", &out->loss[k], sizeof out->loss[k], NULL},
                         {"jitter", out->noise[k], sizeof out->noise[k], NULL},
                         {"keep", out->keep[k], sizeof out->keep[k], NULL},
                         {"ids", out->ids[k], sizeof out->ids[k], NULL}};
        assert_gr_ok(gr_run(s, "train", feeds, 2, f, 4, st), st);
    }
    out->launches = on_gpu ? graph_launches(s) - launched : 0;
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A replayed step draws that step's numbers: other bits than the step
 * before (a frozen counter would repeat them), the bits a run call by call
 * draws, and the CPU's (an off-by-one counter would shift them by a step;
 * normal's Box-Muller may round differently where a compiler contracts, so
 * its numbers are compared to 1e-6). */
static void test_random_ops_replay_with_each_steps_counter(void **state)
{
    (void)state;
    static draws with, without, cpu;
    draw(GPU_DEVICES, "gpu:0", 1, 0, &with);
    draw(GPU_DEVICES, "gpu:0", 1, 1, &without);
    draw("cpu:0", "cpu:0", 0, 0, &cpu);
    assert_true(with.launches >= STEPS - 1);
    assert_int_equal(without.launches, 0);
    assert_memory_equal(&with, &without, offsetof(draws, launches));
    for (int k = 1; k < STEPS; k++) {
        assert_memory_not_equal(with.noise[k], with.noise[k - 1], sizeof with.noise[k]);
        assert_memory_not_equal(with.keep[k], with.keep[k - 1], sizeof with.keep[k]);
        assert_memory_not_equal(with.ids[k], with.ids[k - 1], sizeof with.ids[k]);
    }
    assert_memory_equal(with.keep, cpu.keep, sizeof with.keep);
    assert_memory_equal(with.ids, cpu.ids, sizeof with.ids);
    for (int k = 0; k < STEPS; k++)
        for (int i = 0; i < 8 * 16; i++) {
            float a = with.noise[k][i], b = cpu.noise[k][i];
            if (!(a - b <= 1e-6f && b - a <= 1e-6f))
                fail_msg("noise at step %d [%d]: %.9g on gpu:0, %.9g on cpu:0", k, i, a, b);
        }
    for (int k = 0; k < STEPS; k++) /* the id of weight 0 is never drawn */
        for (int i = 0; i < 8 * 4; i++) assert_true(with.ids[k][i] != 4);
}

static void test_towers_across_cpu_and_gpu_replay_what_they_can(void **state)
{
    (void)state;
    run_out with = {0};
    same_with_and_without(towers, "m/w", 4 * 3 * sizeof(float), &with);
    assert_true(with.launches >= STEPS - 1);
}

static void test_transformer_ops_replay(void **state)
{
    (void)state;
    run_out with = {0};
    same_with_and_without(attention, "m/wq", 4 * 4 * sizeof(float), &with);
    assert_true(with.launches >= STEPS - 1);
}

/* A bad label met in a replayed step is still named at its op and line. */
static void test_fault_in_a_replayed_step_names_its_op_and_line(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile(mlp, st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    float x[BATCH * 4];
    int32_t y[BATCH];
    gr_feed feeds[2] = {{"x", x, sizeof x}, {"y", y, sizeof y}};
    for (int k = 0; k < 4; k++) {
        feeds_for(k, x, y);
        assert_gr_ok(gr_run(s, "train", feeds, 2, NULL, 0, st), st);
    }
    uint64_t before = graph_launches(s);
    y[5] = 3;
    assert_int_equal(gr_run(s, "train", feeds, 2, NULL, 0, st), GR_ERR_DATA);
    assert_true(graph_launches(s) > before);
    const char *m = gr_status_message(st);
    assert_non_null(strstr(m, "inline.graph:8:15: error: softmax_xent"));
    assert_non_null(strstr(m, " on gpu:0: label 3 at [5] is outside [0, 3)\n"));
    y[5] = 2; /* and the next step is fine */
    assert_gr_ok(gr_run(s, "train", feeds, 2, NULL, 0, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replayed_steps_match_steps_enqueued_call_by_call),
        cmocka_unit_test(test_scheduled_rate_and_clipping_replay_with_new_values),
        cmocka_unit_test(test_dropout_replays_with_each_steps_mask),
        cmocka_unit_test(test_random_ops_replay_with_each_steps_counter),
        cmocka_unit_test(test_towers_across_cpu_and_gpu_replay_what_they_can),
        cmocka_unit_test(test_transformer_ops_replay),
        cmocka_unit_test(test_fault_in_a_replayed_step_names_its_op_and_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
