/* test_train.c - end-to-end training through the public API: models
 * converge, runs are deterministic, passes do not change results, and
 * misuse gives a clear status. */
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

#define EX      GR_SOURCE_DIR "/examples/"
#define FASHION "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

static gr_program *compile_str(const char *text, const gr_compile_options *o, gr_status *st)
{
    gr_program *p = NULL;
    assert_gr_ok(
        gr_compile_string("inline.graph", text, strlen(text), o ? o : gr_test_options(), &p, st),
        st);
    return p;
}

static void train_steps(gr_session *s, const char *target, int steps, float *loss, gr_status *st)
{
    gr_fetch f = {"train/loss", loss, sizeof *loss, NULL};
    for (int i = 0; i < steps; i++) assert_gr_ok(gr_run(s, target, NULL, 0, &f, 1, st), st);
}

static void test_linear_regression_recovers_true_weights(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    float loss, w[3], b;
    assert_gr_ok(gr_compile_file(EX "linear_regression.graph", gr_test_options(), &p, st), st);
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    train_steps(s, "train", 500, &loss, st);
    assert_gr_ok(gr_variable_read(s, "w", w, sizeof w, st), st);
    assert_gr_ok(gr_variable_read(s, "b", &b, sizeof b, st), st);
    assert_true(fabsf(w[0] - 2.0f) < 1e-2f && fabsf(w[1] + 3.0f) < 1e-2f);
    assert_true(fabsf(w[2] - 0.5f) < 1e-2f && fabsf(b - 1.0f) < 1e-2f);
    assert_true(loss < 1e-4f);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* y = 3x - 1 with each optimizer; all must get close. */
static void check_optimizer(const char *opt)
{
    char text[1024];
    snprintf(text, sizeof text,
             "data d = gaussian(n=512, dims=[1], batch=16, seed=3)\n"
             "var w = zeros([1, 1])\nvar b = zeros([1])\n"
             "loss = mse(d.x @ w + b, d.x * 3.0 - 1.0)\n"
             "train = %s.minimize(loss)\n",
             opt);
    gr_status *st = gr_status_new();
    gr_program *p = compile_str(text, NULL, st);
    gr_session *s = NULL;
    float loss, w, b;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    train_steps(s, "train", 1500, &loss, st);
    assert_gr_ok(gr_variable_read(s, "w", &w, sizeof w, st), st);
    assert_gr_ok(gr_variable_read(s, "b", &b, sizeof b, st), st);
    if (fabsf(w - 3.0f) > 2e-2f || fabsf(b + 1.0f) > 2e-2f)
        fail_msg("%s: w=%f b=%f loss=%g", opt, (double)w, (double)b, (double)loss);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_every_optimizer_converges(void **state)
{
    (void)state;
    check_optimizer("sgd(0.1)");
    check_optimizer("momentum(0.05, 0.9)");
    check_optimizer("momentum(0.05, 0.9, nesterov=true)");
    check_optimizer("adam(0.05)");
}

/* tests/models/attention.graph, one transformer block (batched matmuls,
 * layernorm, gelu, causal softmax): its loss falls to under half of the
 * first step's in 40 SGD steps. */
static void test_attention_block_loss_falls(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    float first, loss, last5 = 0;
    assert_gr_ok(
        gr_compile_file(GR_SOURCE_DIR "/tests/models/attention.graph", gr_test_options(), &p, st),
        st);
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    train_steps(s, "train", 1, &first, st);
    train_steps(s, "train", 34, &loss, st);
    for (int i = 0; i < 5; i++) {
        train_steps(s, "train", 1, &loss, st);
        last5 += loss / 5;
    }
    if (!(isfinite(first) && last5 < 0.5f * first))
        fail_msg("loss %g at the first step, %g over the last five", (double)first, (double)last5);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void run_mlp_threads(uint64_t seed, unsigned passes_off, int threads, int steps,
                            float *w_out, size_t n, double *acc)
{
    gr_status *st = gr_status_new();
    gr_compile_options co = {.passes_off = passes_off, .cpu_as_gpu = gr_test_on_gpu()};
    gr_session_options so = {.seed = seed, .threads = threads};
    gr_program *p = NULL;
    gr_session *s = NULL;
    float loss;
    assert_gr_ok(gr_compile_file(EX "fashion_mlp.graph", &co, &p, st), st);
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    train_steps(s, "train", steps, &loss, st);
    assert_gr_ok(gr_variable_read(s, "model/out/w", w_out, n * sizeof *w_out, st), st);
    if (acc) assert_gr_ok(gr_eval(s, "accuracy", acc, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void run_mlp(uint64_t seed, unsigned passes_off, int steps, float *w_out, size_t n,
                    double *acc)
{
    run_mlp_threads(seed, passes_off, 1, steps, w_out, n, acc);
}

/* Parallel levels and split GEMMs only reorder float sums. */
static void test_threads_do_not_change_results(void **state)
{
    (void)state;
    if (access(FASHION, R_OK) != 0) skip();
    static float a[2560], b[2560], c[2560];
    run_mlp_threads(3, 0, 1, 50, a, 2560, NULL);
    run_mlp_threads(3, 0, 2, 50, b, 2560, NULL);
    run_mlp_threads(3, 0, 3, 50, c, 2560, NULL);
    for (int i = 0; i < 2560; i++) {
        if (fabsf(a[i] - b[i]) > 1e-4f || fabsf(a[i] - c[i]) > 1e-4f)
            fail_msg("w[%d]: %g (1 thread) vs %g (2) vs %g (3)", i, (double)a[i], (double)b[i],
                     (double)c[i]);
    }
}

static void test_fashion_mlp_reaches_82_percent(void **state)
{
    (void)state;
    if (access(FASHION, R_OK) != 0) skip();
    float w[2560];
    double acc = 0;
    run_mlp(0, 0, 2000, w, 2560, &acc);
    if (acc < 0.82) fail_msg("test accuracy %.4f < 0.82", acc);
}

static void test_same_seed_same_weights_and_passes_do_not_change_results(void **state)
{
    (void)state;
    if (access(FASHION, R_OK) != 0) skip();
    static float a[2560], b[2560], c[2560], d[2560];
    run_mlp(7, 0, 50, a, 2560, NULL);
    run_mlp(7, 0, 50, b, 2560, NULL);
    assert_memory_equal(a, b, sizeof a);
    run_mlp(8, 0, 50, c, 2560, NULL);
    assert_memory_not_equal(a, c, sizeof a);
    run_mlp(7, GR_PASS_CSE | GR_PASS_FOLD | GR_PASS_FUSE, 50, d, 2560, NULL);
    for (int i = 0; i < 2560; i++) assert_true(fabsf(a[i] - d[i]) <= 1e-4f);
}

/* tests/models/<model> compiled with co, and a session on it. */
static gr_session *open_model(const char *model, const gr_compile_options *co,
                              const gr_session_options *so, gr_program **p, gr_status *st)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/models/%s", GR_SOURCE_DIR, model);
    gr_session *s = NULL;
    assert_gr_ok(gr_compile_file(path, co, p, st), st);
    assert_gr_ok(gr_session_new(*p, so, &s, st), st);
    return s;
}

static gr_session *open_tiny_cnn(const gr_compile_options *co, const gr_session_options *so,
                                 gr_program **p, gr_status *st)
{
    return open_model("tiny_cnn.graph", co, so, p, st);
}

/* The CNN learns: every layer kind of the LeNet example (convolution,
 * pooling, dropout, dense, momentum) on tiny_cnn's 96 rows, 200 steps,
 * above 0.9 (0.96 on the CPU). */
static void test_cnn_reaches_90_percent(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_compile_options co = {.cpu_as_gpu = gr_test_on_gpu()};
    gr_session_options so = {.seed = 1};
    gr_program *p = NULL;
    gr_session *s = open_tiny_cnn(&co, &so, &p, st);
    float loss;
    double acc = 0;
    train_steps(s, "train", 200, &loss, st);
    assert_gr_ok(gr_eval(s, "accuracy", &acc, st), st);
    if (acc < 0.9) fail_msg("accuracy %.4f < 0.9 after 200 steps", acc);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* The first `n` numbers of target z on the k-th run of a fresh session
 * seeded `seed` (k from 0). */
static void random_run(uint64_t seed, int k, float *out, int n)
{
    static const char *src = "input x: f32[4096]\nz = x + normal([4096], mean=1.0, std=2.0)\n"
                             "u = x + uniform([4096], low=-1, high=3)\n";
    gr_status *st = gr_status_new();
    gr_program *p = compile_str(src, NULL, st);
    gr_session_options so = {.seed = seed};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    static float x[4096], z[4096], u[4096];
    gr_feed feed = {"x", x, sizeof x};
    for (int i = 0; i <= k; i++) {
        gr_fetch f[2] = {{"z", z, sizeof z, NULL}, {"u", u, sizeof u, NULL}};
        assert_gr_ok(gr_run(s, "z", &feed, 1, f, 2, st), st);
    }
    double zm = 0, zv = 0, um = 0;
    for (int i = 0; i < 4096; i++) {
        zm += z[i] / 4096.0, um += u[i] / 4096.0;
        assert_true(u[i] >= -1.0f && u[i] < 3.0f);
    }
    for (int i = 0; i < 4096; i++) zv += (z[i] - zm) * (z[i] - zm) / 4096.0;
    if (fabs(zm - 1.0) > 0.15 || fabs(sqrt(zv) - 2.0) > 0.15 || fabs(um - 1.0) > 0.1)
        fail_msg("normal: mean %.3f std %.3f (want 1, 2); uniform: mean %.3f (want 1)", zm,
                 sqrt(zv), um);
    memcpy(out, z, sizeof(float) * (size_t)n);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* normal() and uniform() in an expression draw afresh each run, with the
 * asked mean, spread and range; the same seed draws the same numbers. */
static void test_random_tensors_are_fresh_each_run_and_seeded(void **state)
{
    (void)state;
    float a[64], b[64], c[64], d[64];
    random_run(3, 0, a, 64);
    random_run(3, 0, b, 64);
    random_run(3, 1, c, 64);
    random_run(4, 0, d, 64);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    assert_memory_not_equal(a, d, sizeof a);
    const char *bad = "input x: f32[2]\ny = x + glorot([2])\n";
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_int_equal(gr_compile_string("inline.graph", bad, strlen(bad), NULL, &p, st),
                     GR_ERR_COMPILE);
    assert_non_null(strstr(gr_status_message(st), "glorot and he can only initialize a var"));
    gr_status_free(st);
}

/* Variable var of a model after 40 steps, with the passes in passes_off
 * off. */
static void run_tiny(const char *model, const char *var, unsigned passes_off, float *w, size_t n)
{
    gr_status *st = gr_status_new();
    gr_compile_options co = {.passes_off = passes_off, .cpu_as_gpu = gr_test_on_gpu()};
    gr_session_options so = {.seed = 11, .threads = 2};
    gr_program *p = NULL;
    gr_session *s = open_model(model, &co, &so, &p, st);
    float loss;
    train_steps(s, "train", 40, &loss, st);
    assert_gr_ok(gr_variable_read(s, var, w, n * sizeof *w, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* conv2d_bias (bias and relu in the convolution) and maxpool2d_grad with
 * the relu_grad folded in train the weights the separate ops do. */
static void test_cnn_fusions_do_not_change_results(void **state)
{
    (void)state;
    float a[36], b[36], c[36];
    run_tiny("tiny_cnn.graph", "model/conv1/w", 0, a, 36);
    run_tiny("tiny_cnn.graph", "model/conv1/w", GR_PASS_FUSE, b, 36);
    run_tiny("tiny_cnn.graph", "model/conv1/w", GR_PASS_FUSE, c, 36);
    assert_memory_equal(b, c, sizeof b);
    for (int i = 0; i < 36; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * fmaxf(1.0f, fabsf(b[i])))
            fail_msg("w[%d]: %g fused vs %g separate", i, (double)a[i], (double)b[i]);
}

/* batchnorm_apply with its relu, and its grads with the relu_grad folded
 * in, train the weights the separate ops do: the stem's filters (before
 * every fused op) and the second batchnorm's gain. */
static void test_batchnorm_relu_fusions_do_not_change_results(void **state)
{
    (void)state;
    static const char *vars[] = {"model/stem/w", "model/bn1/gain", "model/w"};
    static const size_t n[] = {36, 4, 192};
    for (int v = 0; v < 3; v++) {
        float a[192], b[192];
        run_tiny("tiny_resnet.graph", vars[v], 0, a, n[v]);
        run_tiny("tiny_resnet.graph", vars[v], GR_PASS_FUSE, b, n[v]);
        for (size_t i = 0; i < n[v]; i++)
            if (fabsf(a[i] - b[i]) > 1e-5f * fmaxf(1.0f, fabsf(b[i])))
                fail_msg("%s[%zu]: %g fused vs %g separate", vars[v], i, (double)a[i],
                         (double)b[i]);
    }
}

/* gr_session_profile: a row per node that ran, costliest first, with its
 * calls, op, line and source; nothing without the option. */
static void test_profile_counts_every_call(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_session_options so = {.seed = 1, .threads = 2, .profile = 1};
    gr_compile_options co = {.devices = "cpu:0"}; /* a GPU's calls are not timed */
    gr_program *p = NULL;
    gr_session *s = open_tiny_cnn(&co, &so, &p, st);
    float loss;
    train_steps(s, "train", 7, &loss, st);
    gr_profile_row rows[64];
    int n = gr_session_profile(s, rows, 64), conv = 0;
    assert_true(n > 10 && n <= 64);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rows[i].calls, 7);
        if (i) assert_true(rows[i].seconds <= rows[i - 1].seconds);
        if (strcmp(rows[i].op, "conv2d_bias")) continue;
        conv++;
        assert_int_equal(rows[i].line, 9);
        assert_string_equal(rows[i].type, "f32[8,4,4,4]");
        assert_string_equal(rows[i].device, "cpu:0");
        assert_non_null(strstr(rows[i].source, "return maxpool2d(relu(conv2d(x, w, padding=1)"));
        assert_true(rows[i].seconds > 0);
    }
    assert_int_equal(conv, 1);
    assert_int_equal(gr_session_profile(s, rows, 1), n); /* the count, whatever the room */
    gr_session_free(s);
    so.profile = 0;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    train_steps(s, "train", 2, &loss, st);
    assert_int_equal(gr_session_profile(s, rows, 64), 0);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_unknown_target_and_bad_feed_give_clear_status(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p =
        compile_str("input z: f32[2, 3]\nvar w = ones([3, 1])\ny = sum(z @ w)\n", NULL, st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    assert_int_equal(gr_run(s, "nope", NULL, 0, NULL, 0, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "no target or tensor named 'nope'"));
    assert_int_equal(gr_run(s, "y", NULL, 0, NULL, 0, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "input 'z' must be fed"));
    float z[5] = {0}, y = 0, z6[6] = {1, 2, 3, 4, 5, 6};
    gr_feed bad = {"z", z, sizeof z};
    assert_int_equal(gr_run(s, "y", &bad, 1, NULL, 0, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "needs 24"));
    gr_feed good = {"z", z6, sizeof z6};
    gr_fetch f = {"y", &y, sizeof y, NULL};
    assert_gr_ok(gr_run(s, "y", &good, 1, &f, 1, st), st);
    assert_true(y == 21.0f);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_tensors_describe_inputs_variables_and_results(void **state)
{
    (void)state;
    assert_null(gr_tensor_new(GR_F32, GR_MAX_RANK + 1, (int64_t[GR_MAX_RANK + 1]){0}));
    assert_null(gr_tensor_new(GR_I32, 2, (int64_t[]){3, -1}));
    assert_null(gr_tensor_new(GR_F32, 2, (int64_t[]){INT64_C(1) << 30, INT64_C(1) << 30}));
    assert_null(gr_tensor_new((gr_dtype)7, 0, NULL));
    assert_int_equal(gr_tensor_bytes(NULL) + (size_t)gr_tensor_rank(NULL), 0);
    assert_null(gr_tensor_data(NULL));
    gr_status *st = gr_status_new();
    gr_program *p = compile_str("input z: f32[2, 3]\nvar w = ones([3, 1])\ny = z @ w\n"
                                "n = argmax(y, 0)\n",
                                NULL, st);
    gr_tensor *z = NULL, *y = NULL, *n = NULL, *w = NULL;
    assert_gr_ok(gr_program_tensor(p, "z", &z, st), st);
    assert_gr_ok(gr_program_tensor(p, "y", &y, st), st);
    assert_gr_ok(gr_program_tensor(p, "n", &n, st), st);
    assert_int_equal(gr_tensor_rank(z), 2);
    assert_int_equal(gr_tensor_dim(z, 0) * 10 + gr_tensor_dim(z, 1), 23);
    assert_int_equal(gr_tensor_dim(z, 2), 0);
    assert_int_equal(gr_tensor_bytes(y), 2 * 1 * sizeof(float));
    assert_int_equal(gr_tensor_dtype(n), GR_I32);
    assert_int_equal(gr_tensor_rank(n), 1);
    assert_int_equal(gr_program_tensor(p, "nope", &w, st), GR_ERR_ARG);
    assert_null(w);
    assert_non_null(strstr(gr_status_message(st), "no input, variable or tensor named 'nope'"));
    assert_int_equal(gr_program_variable_count(p), 1);
    assert_string_equal(gr_program_variable_name(p, 0), "w");
    assert_null(gr_program_variable_name(p, 1));

    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    float *zd = gr_tensor_data(z);
    for (int i = 0; i < 6; i++) assert_true(zd[i] == 0.0f); /* made zeroed */
    for (int i = 0; i < 6; i++) zd[i] = (float)i;
    gr_feed feed = {"z", zd, gr_tensor_bytes(z)};
    gr_fetch fetch = {"y", gr_tensor_data(y), gr_tensor_bytes(y), NULL};
    assert_gr_ok(gr_run(s, "y", &feed, 1, &fetch, 1, st), st);
    const float *yd = gr_tensor_data(y);
    assert_true(yd[0] == 3.0f && yd[1] == 12.0f);
    assert_gr_ok(gr_variable_get(s, "w", &w, st), st);
    assert_int_equal(gr_tensor_numel(w), 3);
    assert_true(((float *)gr_tensor_data(w))[2] == 1.0f);
    gr_tensor_free(w);
    assert_int_equal(gr_variable_get(s, "z", &w, st), GR_ERR_ARG);
    assert_null(w);
    gr_session_free(s);
    gr_tensor_free(z), gr_tensor_free(y), gr_tensor_free(n);
    gr_tensor_free(NULL);
    gr_program_free(p);
    gr_status_free(st);
}

typedef struct feeder {
    gr_session *s;
    int failures;
} feeder;

static void *feed_other_values(void *arg)
{
    feeder *f = arg;
    float z[6] = {9, 9, 9, 9, 9, 9}, y[2];
    gr_feed in = {"z", z, sizeof z};
    gr_fetch out = {"y", y, sizeof y, NULL};
    for (int i = 0; i < 200; i++) f->failures += gr_run(f->s, "y", &in, 1, &out, 1, NULL) != GR_OK;
    return NULL;
}

/* A view stays put while other threads run the same target: its executor
 * stays with this thread until the thread's next call. */
static void test_zero_copy_fetch_is_a_stable_view(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile_str("input z: f32[2, 3]\nvar w = ones([3, 1])\ny = z @ w\n", NULL, st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    float z[6] = {1, 2, 3, 4, 5, 6};
    gr_feed in = {"z", z, sizeof z};
    gr_fetch view = {"y", NULL, 0, NULL};
    assert_gr_ok(gr_run(s, "y", &in, 1, &view, 1, st), st);
    const float *y = view.view;
    assert_non_null(y);
    assert_true(y[0] == 6.0f && y[1] == 15.0f);
    pthread_t th;
    feeder f = {s, 0};
    pthread_create(&th, NULL, feed_other_values, &f);
    pthread_join(th, NULL);
    assert_int_equal(f.failures, 0);
    assert_true(y[0] == 6.0f && y[1] == 15.0f);
    assert_gr_ok(gr_run(s, "y", &in, 1, NULL, 0, st), st); /* releases the view */
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Debug builds only: release builds skip the registry of live sessions. */
static void test_session_used_after_free_gives_status(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    gr_status *st = gr_status_new();
    gr_program *p = compile_str("var w = ones([2])\ny = sum(w)\n", NULL, st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    gr_session_free(s);
    assert_int_equal(gr_run(s, "y", NULL, 0, NULL, 0, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "session was freed"));
    assert_int_equal(gr_run(NULL, "y", NULL, 0, NULL, 0, st), GR_ERR_ARG);
    gr_program_free(p);
    gr_status_free(st);
#endif
}

static void test_compile_error_has_location(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    const char *text = "var w = zeros([4, 3])\nx = ones([2, 5])\ny = x @ w\n";
    assert_int_equal(gr_compile_string("m.graph", text, strlen(text), gr_test_options(), &p, st),
                     GR_ERR_COMPILE);
    assert_null(p);
    const char *file;
    int line, col;
    assert_true(gr_status_location(st, &file, &line, &col));
    assert_string_equal(file, "m.graph");
    assert_int_equal(line, 3);
    assert_int_equal(col, 5);
    assert_non_null(strstr(gr_status_message(st), "inner dimensions 5 and 4 differ"));
    gr_status_free(st);
}

static void test_check_numerics_names_the_op_and_line(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile_str("var w = constant(-1.0, [3])\n\ny = sum(log(w))\n", NULL, st);
    gr_session_options so = {.check_numerics = 1};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    assert_int_equal(gr_run(s, "y", NULL, 0, NULL, 0, st), GR_ERR_NUMERIC);
    assert_non_null(strstr(gr_status_message(st), "inline.graph:3:"));
    char on[64];
    assert_non_null(strstr(gr_status_message(st), gr_test_on(on, sizeof on, "log", 0)));
    assert_non_null(strstr(gr_status_message(st), " produced NaN"));
    assert_non_null(strstr(gr_status_message(st), "y = sum(log(w))\n"));
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A new temporary file holding the n bytes at data; free the name. */
static char *temp_file(const void *data, size_t n)
{
    char *path = strdup("/tmp/gr_labels_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    return path;
}

/* A label outside [0, classes) is an error naming the op, the device, the
 * line, where the label sits and its value: fed, or read from a file.  The
 * session goes on working with good labels. */
static void test_label_out_of_range_is_an_error_at_its_line(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile_str("input x: f32[2, 3]\ninput y: i32[2]\nvar w = zeros([3, 3])\n"
                                "loss = mean(softmax_xent(x @ w, y))\n"
                                "train = sgd(0.1).minimize(loss)\n",
                                NULL, st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    float x[6] = {0};
    int32_t y[2] = {1, 3};
    gr_feed feeds[2] = {{"x", x, sizeof x}, {"y", y, sizeof y}};
    assert_int_equal(gr_run(s, "train", feeds, 2, NULL, 0, st), GR_ERR_DATA);
    const char *m = gr_status_message(st);
    /* the forward op or its gradient, whichever runs first, at the line */
    assert_non_null(strstr(m, "inline.graph:4:13: error: softmax_xent"));
    char want[128];
    snprintf(want, sizeof want, " on %s: label 3 at [1] is outside [0, 3)\n", gr_test_dev(0));
    assert_non_null(strstr(m, want));
    assert_non_null(strstr(m, "loss = mean(softmax_xent(x @ w, y))\n            ^"));
    const char *file = NULL;
    int line = 0, col = 0;
    assert_int_equal(gr_status_location(st, &file, &line, &col), 1);
    assert_int_equal(line, 4);
    y[1] = 2;
    assert_gr_ok(gr_run(s, "train", feeds, 2, NULL, 0, st), st);
    gr_session_free(s);
    gr_program_free(p);

    /* the same from every kind of data source: csv, raw, idx */
    static const unsigned char idx_x[] = {0, 0, 8, 2, 0, 0, 0, 4, 0, 0, 0, 1, 1, 2, 3, 4};
    static const unsigned char idx_y[] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 0, 9, 1};
    const float raw_x[4] = {1, 2, 3, 4};
    const int32_t raw_y[4] = {1, 0, 9, 1};
    char *csv = temp_file("1,1\n2,0\n3,9\n4,1\n", 16), *rx = temp_file(raw_x, sizeof raw_x);
    char *ry = temp_file(raw_y, sizeof raw_y), *ix = temp_file(idx_x, sizeof idx_x);
    char *iy = temp_file(idx_y, sizeof idx_y);
    char src[3][512];
    snprintf(src[0], sizeof src[0], "csv(\"%s\", batch=4)", csv);
    snprintf(src[1], sizeof src[1], "raw(\"%s\", \"%s\", batch=4, dims=[1])", rx, ry);
    snprintf(src[2], sizeof src[2], "idx(\"%s\", \"%s\", batch=4)", ix, iy);
    for (int k = 0; k < 3; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "data d = %s\nvar w = zeros([1, 2])\nloss = mean(softmax_xent(d.x @ w, d.y))\n",
                 src[k]);
        p = compile_str(text, NULL, st);
        assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
        assert_int_equal(gr_run(s, "loss", NULL, 0, NULL, 0, st), GR_ERR_DATA);
        if (!strstr(gr_status_message(st), "label 9 at [2] is outside [0, 2)"))
            fail_msg("source %d: %s", k, gr_status_message(st));
        gr_session_free(s);
        gr_program_free(p);
    }
    char *files[] = {csv, rx, ry, ix, iy};
    for (int k = 0; k < 5; k++) unlink(files[k]), free(files[k]);
    gr_status_free(st);
}

static void test_set_overrides_params_and_rejects_unknown(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    const char *text = "param n = 2\nvar w = ones([n])\ny = sum(w)\n";
    gr_param ok = {"n", "5"}, unknown = {"m", "1"}, bad = {"n", "two"};
    gr_compile_options o = {.params = &ok, .n_params = 1, .cpu_as_gpu = gr_test_on_gpu()};
    gr_program *p = compile_str(text, &o, st);
    gr_session *s = NULL;
    float y;
    gr_fetch f = {"y", &y, sizeof y, NULL};
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    assert_gr_ok(gr_run(s, "y", NULL, 0, &f, 1, st), st);
    assert_true(y == 5.0f);
    gr_session_free(s);
    gr_program_free(p);
    o.params = &unknown;
    assert_int_equal(gr_compile_string("i.graph", text, strlen(text), &o, &p, st), GR_ERR_COMPILE);
    assert_non_null(strstr(gr_status_message(st), "--set m=1: there is no param named 'm'"));
    o.params = &bad;
    assert_int_equal(gr_compile_string("i.graph", text, strlen(text), &o, &p, st), GR_ERR_COMPILE);
    assert_non_null(strstr(gr_status_message(st), "--set n=two: expected an integer"));
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_regression_recovers_true_weights),
        cmocka_unit_test(test_every_optimizer_converges),
        cmocka_unit_test(test_attention_block_loss_falls),
        cmocka_unit_test(test_fashion_mlp_reaches_82_percent),
        cmocka_unit_test(test_cnn_reaches_90_percent),
        cmocka_unit_test(test_random_tensors_are_fresh_each_run_and_seeded),
        cmocka_unit_test(test_same_seed_same_weights_and_passes_do_not_change_results),
        cmocka_unit_test(test_threads_do_not_change_results),
        cmocka_unit_test(test_cnn_fusions_do_not_change_results),
        cmocka_unit_test(test_batchnorm_relu_fusions_do_not_change_results),
        cmocka_unit_test(test_profile_counts_every_call),
        cmocka_unit_test(test_unknown_target_and_bad_feed_give_clear_status),
        cmocka_unit_test(test_tensors_describe_inputs_variables_and_results),
        cmocka_unit_test(test_compile_error_has_location),
        cmocka_unit_test(test_session_used_after_free_gives_status),
        cmocka_unit_test(test_zero_copy_fetch_is_a_stable_view),
        cmocka_unit_test(test_check_numerics_names_the_op_and_line),
        cmocka_unit_test(test_label_out_of_range_is_an_error_at_its_line),
        cmocka_unit_test(test_set_overrides_params_and_rejects_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
