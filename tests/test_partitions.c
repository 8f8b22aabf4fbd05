/* test_partitions.c - plans that span several CPU devices: one partition
 * per device, each on its own thread, with transfers at every crossing
 * edge.  Partitioned runs must compute exactly what one device computes,
 * never hang (transfers both ways, three devices, concurrent executors, a
 * NaN on a partition's thread), and the plan must show the partitions. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

/* Two towers on cpu:0 and cpu:1 share their weights (reuse); the mean of
 * their losses trains on cpu:0.  DEV is "@cpu:t" or "" (one device). */
#define TOWERS(DEV, DEV0)                                                                          \
    "data d = gaussian(n=512, dims=[8], batch=16, seed=3)\n"                                       \
    "fn layer(x) {\n"                                                                              \
    "  var w = glorot([8, 4])\n"                                                                   \
    "  var b = zeros([4])\n"                                                                       \
    "  return tanh(x @ w + b)\n"                                                                   \
    "}\n"                                                                                          \
    "for t in 0..2 {\n"                                                                            \
    "  scope tower " DEV " {\n"                                                                    \
    "    scope m reuse(t > 0) { l[t] = mean(layer(shard(d.x, t, 2)) * layer(shard(d.x, t, 2))) "   \
    "}\n"                                                                                          \
    "  }\n"                                                                                        \
    "}\n"                                                                                          \
    "loss = mean(l)\n"                                                                             \
    "train = sgd(0.1).minimize(loss) " DEV0 "\n"

static gr_program *compile(const char *text, gr_status *st)
{
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("parts.graph", text, strlen(text), gr_test_options(), &p, st),
                 st);
    return p;
}

static void train(const char *text, int threads, int steps, float *w, size_t wbytes, float *loss)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile(text, st);
    gr_session_options o = {.threads = threads, .seed = 11, .executors = 1};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    gr_fetch f = {"loss", loss, sizeof *loss, NULL};
    for (int i = 0; i < steps; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
    assert_gr_ok(gr_variable_read(s, gr_program_variable_name(p, 0), w, wbytes, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static char *emit_plan(const char *text)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile(text, st);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_gr_ok(gr_program_emit(p, "plan", "train", f, st), st);
    fclose(f);
    gr_program_free(p);
    gr_status_free(st);
    return buf;
}

static void test_towers_on_two_devices_match_one_device(void **state)
{
    (void)state;
    float w2[32], w1[32], l2 = 0, l1 = 0;
    /* one thread per partition vs one thread: the same kernels, so the
       same bits, and transfers are exact copies */
    train(TOWERS("@cpu:t", "@cpu:0"), 2, 60, w2, sizeof w2, &l2);
    train(TOWERS("", ""), 1, 60, w1, sizeof w1, &l1);
    assert_memory_equal(w2, w1, sizeof w1);
    assert_true(l1 == l2);
    if (gr_test_on_gpu()) return; /* the plans below name the CPU devices */
    char *plan = emit_plan(TOWERS("@cpu:t", "@cpu:0"));
    assert_non_null(strstr(plan, "in 2 partitions (cpu:0, cpu:1)"));
    assert_non_null(strstr(plan, "cpu:0 -> cpu:1"));
    assert_non_null(strstr(plan, "cpu:1 -> cpu:0"));
    free(plan);
    plan = emit_plan(TOWERS("", ""));
    assert_null(strstr(plan, "partitions"));
    free(plan);
}

/* Each tower owns its variables, so updates (momentum, with slots) run on
 * both devices and their tokens cross to the train group on cpu:0. */
#define OWN_TOWERS(D0, D1)                                                                         \
    "data d = gaussian(n=512, dims=[8], batch=16, seed=3)\n"                                       \
    "fn layer(x) {\n"                                                                              \
    "  var w = glorot([8, 4])\n"                                                                   \
    "  return tanh(x @ w)\n"                                                                       \
    "}\n"                                                                                          \
    "scope a " D0 " { l0 = mean(layer(shard(d.x, 0, 2)) * layer(shard(d.x, 0, 2))) }\n"            \
    "scope b " D1 " { l1 = mean(layer(shard(d.x, 1, 2)) * layer(shard(d.x, 1, 2))) }\n"            \
    "loss = (l0 + l1) / 2\n"                                                                       \
    "train = momentum(0.1, 0.9).minimize(loss)\n"

static void all_vars_after(const char *text, int threads, float *out, int cap, int *n_out)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile(text, st);
    gr_session_options o = {.threads = threads, .seed = 2, .executors = 1};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    for (int i = 0; i < 40; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, NULL, 0, st), st);
    *n_out = 0;
    for (int k = 0; k < gr_program_variable_count(p); k++) {
        gr_tensor *t = NULL;
        assert_gr_ok(gr_variable_get(s, gr_program_variable_name(p, k), &t, st), st);
        assert_true(*n_out + gr_tensor_numel(t) <= cap);
        memcpy(out + *n_out, gr_tensor_data(t), gr_tensor_bytes(t));
        *n_out += (int)gr_tensor_numel(t);
        gr_tensor_free(t);
    }
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_updates_on_both_devices_match_one_device(void **state)
{
    (void)state;
    static float a[512], b[512];
    int na = 0, nb = 0;
    all_vars_after(OWN_TOWERS("@cpu:0", "@cpu:1"), 2, a, 512, &na);
    all_vars_after(OWN_TOWERS("", ""), 1, b, 512, &nb);
    assert_int_equal(na, nb);
    assert_true(na >= 4 * 32); /* 4 weights and their momentum slots */
    assert_memory_equal(a, b, sizeof(float) * (size_t)na);
}

/* cpu:0 -> cpu:1 -> cpu:2 -> cpu:0, forward and backward. */
static const char *CHAIN = "data d = gaussian(n=256, dims=[6], batch=8, seed=5)\n"
                           "var w1 = glorot([6, 5]) @cpu:1\n"
                           "var w2 = glorot([5, 3]) @cpu:2\n"
                           "h = relu(d.x @ w1) @cpu:1\n"
                           "y = (h @ w2) @cpu:2\n"
                           "loss = mean(y * y)\n"
                           "train = sgd(0.05).minimize(loss)\n";

typedef struct runner {
    gr_session *s;
    int steps, failures;
} runner;

static void *run_train(void *arg)
{
    runner *r = arg;
    for (int i = 0; i < r->steps; i++)
        r->failures += gr_run(r->s, "train", NULL, 0, NULL, 0, NULL) != GR_OK;
    return NULL;
}

static void test_three_devices_and_concurrent_executors_never_hang(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile(CHAIN, st);
    gr_session_options o = {.threads = 2, .seed = 1, .executors = 2};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    float l0 = 0, l1 = 0;
    gr_fetch f = {"loss", &l0, sizeof l0, NULL};
    assert_gr_ok(gr_run(s, "loss", NULL, 0, &f, 1, st), st);
    runner r[3] = {{s, 300, 0}, {s, 300, 0}, {s, 300, 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&t[i], NULL, run_train, &r[i]), 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++) assert_int_equal(r[i].failures, 0);
    f.data = &l1;
    assert_gr_ok(gr_run(s, "loss", NULL, 0, &f, 1, st), st);
    assert_true(isfinite(l1) && l1 < l0);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A NaN made on cpu:1's thread stops the step with the op and line, and
 * the next runs neither hang nor fail. */
static void test_nan_on_another_partition_is_reported(void **state)
{
    (void)state;
    const char *text = "input z: f32[4]\n"
                       "a = log(z) @cpu:1\n"
                       "y = sum(a * 2)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(text, st);
    gr_session_options o = {.threads = 2, .check_numerics = 1};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    float bad[4] = {1, 2, -3, 4}, good[4] = {1, 1, 1, 1}, y = 1;
    gr_feed in = {"z", bad, sizeof bad};
    gr_fetch f = {"y", &y, sizeof y, NULL};
    assert_int_equal(gr_run(s, "y", &in, 1, &f, 1, st), GR_ERR_NUMERIC);
    assert_non_null(strstr(gr_status_message(st), "parts.graph:2:"));
    char on[64];
    assert_non_null(strstr(gr_status_message(st), gr_test_on(on, sizeof on, "log", 1)));
    assert_non_null(strstr(gr_status_message(st), " produced NaN"));
    in.data = good;
    for (int i = 0; i < 20; i++) assert_gr_ok(gr_run(s, "y", &in, 1, &f, 1, st), st);
    assert_true(y == 0.0f);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Restoring a checkpoint sets the session's step back; the transfers
 * between partitions must not take a flag left by a step run before the
 * restore as this step's (they once did, and a partition read the previous
 * run's values).  save -> run(A) -> restore -> run(B) must compute on B. */
static void test_restore_does_not_confuse_transfers(void **state)
{
    (void)state;
    const char *text = "input z: f32[4]\n"
                       "var w = ones([4])\n"
                       "a = (z * w) @cpu:1\n"
                       "y = sum(a + 1)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile(text, st);
    gr_session_options o = {.threads = 2};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    char path[] = "/tmp/gr_parts_restore_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_gr_ok(gr_session_save(s, path, st), st);
    float A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40}, y = 0;
    gr_fetch f = {"y", &y, sizeof y, NULL};
    for (int i = 0; i < 200; i++) {
        gr_feed in = {"z", A, sizeof A};
        assert_gr_ok(gr_run(s, "y", &in, 1, &f, 1, st), st);
        assert_true(y == 14.0f);
        assert_gr_ok(gr_session_restore(s, path, NULL, st), st);
        in.data = B;
        assert_gr_ok(gr_run(s, "y", &in, 1, &f, 1, st), st);
        if (y != 104.0f) fail_msg("run %d after a restore computed %g, not 104", i, y);
    }
    unlink(path);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_towers_on_two_devices_match_one_device),
        cmocka_unit_test(test_updates_on_both_devices_match_one_device),
        cmocka_unit_test(test_three_devices_and_concurrent_executors_never_hang),
        cmocka_unit_test(test_nan_on_another_partition_is_reported),
        cmocka_unit_test(test_restore_does_not_confuse_transfers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
