/* test_state.c - state that changes without a gradient and behaviour that
 * differs between training and evaluation, through the public API:
 * assign, assign_add, group, ema() of a variable and of a tensor, dropout
 * that a target's mode turns on, batchnorm, gradient accumulation.  tests/sim.cmake runs it again
 * on the simulated GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_run.h"
#include "gr_test.h"

static void run_target(run *r, const char *target, gr_fetch *f, int n)
{
    assert_gr_ok(gr_run(r->s, target, NULL, 0, f, (size_t)n, r->st), r->st);
}

/* assign and assign_add are targets of their own; a number fills the
 * variable; the first argument must be a variable. */
static void test_assign_and_assign_add_update_a_variable(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var c = zeros([3], trainable=false)\ninc = assign_add(c, 1.5)\n"
                 "reset = assign(c, [5, 6, 7])\nzero = assign(c, 0)\n");
    float c[3];
    run_target(&r, "inc", NULL, 0);
    run_target(&r, "inc", NULL, 0);
    read_var(&r, "c", c, 3);
    for (int i = 0; i < 3; i++) assert_float_equal(c[i], 3.0f, 0);
    run_target(&r, "reset", NULL, 0);
    read_var(&r, "c", c, 3);
    assert_true(c[0] == 5.0f && c[1] == 6.0f && c[2] == 7.0f);
    run_target(&r, "zero", NULL, 0);
    read_var(&r, "c", c, 3);
    assert_true(c[0] == 0.0f && c[2] == 0.0f);
    run_close(&r);
    compile_fails("var c = zeros([3])\nt = assign(c + 1, 2)\n",
                  "assign(): the first argument must be a variable");
    compile_fails("var c = zeros([3])\nt = assign(c, [1, 2])\n",
                  "assign: f32[2] does not match variable f32[3]");
    compile_fails("var w = zeros([3])\na = ema(w, 1.5)\n", "ema(): decay=1.5 must be in (0, 1)");
}

/* ema(w) starts at w's initial values and moves after each step that
 * updates w, with the updated w: avg -= (1 - decay) * (avg - w). */
static void test_ema_of_a_variable_follows_its_updates(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var w = glorot([4, 3])\navg = ema(w, 0.75)\n"
                 "loss = sum(w * [1, 2, 3])\ntrain = sgd(0.5).minimize(loss)\n");
    float w[12], avg[12], w0[12];
    read_var(&r, "w", w0, 12);
    read_var(&r, "w/ema", avg, 12);
    assert_memory_equal(w0, avg, sizeof w0);
    for (int s = 0; s < 3; s++) {
        run_target(&r, "train", NULL, 0);
        read_var(&r, "w", w, 12);
        for (int i = 0; i < 12; i++) {
            assert_float_equal(w[i], w0[i] - 0.5f * (float)(1 + i % 3) * (float)(s + 1), 1e-5);
            avg[i] -= 0.25f * (avg[i] - w[i]);
        }
        float got[12];
        gr_fetch f = {"avg", got, sizeof got, NULL};
        run_target(&r, "avg", &f, 1);
        for (int i = 0; i < 12; i++) assert_float_equal(got[i], avg[i], 1e-6);
    }
    run_close(&r);
}

/* ema(x) of a computed tensor starts at zero and moves with each training
 * step whose loss computes x; group() makes one target of several, and
 * trains when one of them does. */
static void test_ema_of_a_tensor_and_group(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var w = ones([2])\nvar steps = zeros([], trainable=false)\n"
                 "loss = sum(w * w)\nsmooth = ema(loss, 0.5)\n"
                 "train = group(assign_add(steps, 1), sgd(0.25).minimize(loss))\n");
    float want = 0, loss, got, steps;
    for (int s = 0; s < 3; s++) {
        gr_fetch f = {"train/loss", &loss, sizeof loss, NULL};
        run_target(&r, "train", &f, 1);
        want -= 0.5f * (want - loss);
        gr_fetch g = {"smooth", &got, sizeof got, NULL};
        run_target(&r, "smooth", &g, 1);
        assert_float_equal(got, want, 1e-6);
    }
    read_var(&r, "steps", &steps, 1);
    assert_float_equal(steps, 3.0f, 0);
    assert_float_equal(loss, 2.0f * 0.25f * 0.25f, 1e-6); /* w halves each step: 1, .5, .25 */
    run_close(&r);
}

/* In a group with a minimize, assign runs after the step: every op of
 * the step reads the variable's old value, the backward pass too (the
 * gradient of tanh(tanh(w) * s) reads s after the forward pass), as a
 * state carried across batches (truncated BPTT) needs. */
static void test_assign_in_a_group_runs_after_the_step(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var s = ones([2], trainable=false)\nvar w = ones([2])\n"
                 "h = tanh(w)\nloss = sum(tanh(h * s))\n"
                 "train = group(sgd(1.0).minimize(loss), assign(s, s * 3))\n");
    float w[2], sv[2], h = tanhf(1.0f), z = tanhf(h);
    float want = 1.0f - (1.0f - z * z) * (1.0f - h * h);
    run_target(&r, "train", NULL, 0);
    read_var(&r, "w", w, 2);
    read_var(&r, "s", sv, 2);
    assert_float_equal(sv[0], 3.0f, 0);
    assert_float_equal(w[0], want, 1e-6);
    assert_float_equal(w[1], want, 1e-6);
    run_close(&r);
}

/* The other members of a group with a minimize are computed as its loss
 * is, in training mode: an assign of dropout(w) stores the step's mask
 * (about half zeros), not the identity of evaluation. */
static void test_group_members_run_in_training_mode(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var c = ones([4000], trainable=false)\nvar w = ones([4000])\n"
                 "z = dropout(w, 0.5)\nloss = mean(z * w)\n"
                 "train = group(sgd(1e-9).minimize(loss), assign(c, z))\n");
    static float c[4000];
    run_target(&r, "train", NULL, 0);
    read_var(&r, "c", c, 4000);
    int zeros = 0;
    for (int i = 0; i < 4000; i++) zeros += c[i] == 0;
    assert_true(zeros > 1800 && zeros < 2200);
    run_close(&r);
}

/* dropout without training= drops in a training target and is the
 * identity in every other; training= still forces either. */
static void test_dropout_follows_the_target_mode(void **state)
{
    (void)state;
    static const char *src =
        "var w = ones([4000])\nz = dropout(w, 0.5)\nzeros_frac = mean(z == 0)\n"
        "loss = mean(z * w) + zeros_frac\ntrain = sgd(1e-9).minimize(loss)\n"
        "forced = dropout(w, 0.5, training=true)\nforced_frac = mean(forced == 0)\n";
    run r;
    run_open(&r, src);
    float train_loss, eval_loss, forced;
    gr_fetch f = {"train/loss", &train_loss, sizeof train_loss, NULL};
    run_target(&r, "train", &f, 1);
    gr_fetch e = {"loss", &eval_loss, sizeof eval_loss, NULL};
    run_target(&r, "loss", &e, 1);
    gr_fetch g = {"forced_frac", &forced, sizeof forced, NULL};
    run_target(&r, "forced_frac", &g, 1);
    assert_float_equal(eval_loss, 1.0f, 1e-6); /* mean(w) + no zeros */
    /* training: mean(z) ~ 1 and half the elements zero */
    assert_true(fabsf(train_loss - 1.5f) < 0.1f);
    assert_true(fabsf(forced - 0.5f) < 0.05f);
    run_close(&r);
}

/* batchnorm in a training target: the batch's statistics normalise (each
 * channel of y has mean 0 and variance var / (var + eps)) and move the
 * running ones (unbiased variance); in evaluation the running ones
 * normalise. */
static void test_batchnorm_trains_on_the_batch_and_evaluates_on_running_stats(void **state)
{
    (void)state;
    run r;
    run_open(&r, "input x: f32[8, 3]\nvar gain = ones([3])\nvar bias = zeros([3])\n"
                 "y = batchnorm(x, gain, bias, momentum=0.5, eps=0.001)\n"
                 "loss = sum(y * y)\ntrain = sgd(0.01).minimize(loss)\n");
    float x[24], mean[3] = {0}, var[3] = {0}, rm[3], rv[3], gain[3], loss, y[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11) - 3.0f * (float)(i % 3);
    for (int i = 0; i < 24; i++) mean[i % 3] += x[i] / 8;
    for (int i = 0; i < 24; i++) var[i % 3] += (x[i] - mean[i % 3]) * (x[i] - mean[i % 3]) / 8;
    gr_feed feed = {"x", x, sizeof x};
    gr_fetch f = {"train/loss", &loss, sizeof loss, NULL};
    assert_gr_ok(gr_run(r.s, "train", &feed, 1, &f, 1, r.st), r.st);
    double want = 0;
    for (int c = 0; c < 3; c++) want += 8 * var[c] / (var[c] + 0.001);
    assert_float_equal(loss, want, 1e-4);
    read_var(&r, "moving_mean", rm, 3);
    read_var(&r, "moving_variance", rv, 3);
    read_var(&r, "gain", gain, 3);
    for (int c = 0; c < 3; c++) {
        assert_float_equal(rm[c], 0.5 * mean[c], 1e-5);
        assert_float_equal(rv[c], 0.5 + 0.5 * var[c] * 8 / 7, 1e-4);
        /* d loss / d gain = 2 sum(xhat^2) gain, with gain 1 */
        assert_float_equal(gain[c], 1 - 0.01 * 2 * 8 * var[c] / (var[c] + 0.001), 1e-4);
    }
    gr_fetch e = {"y", y, sizeof y, NULL};
    assert_gr_ok(gr_run(r.s, "y", &feed, 1, &e, 1, r.st), r.st);
    for (int i = 0; i < 24; i++) {
        int c = i % 3;
        assert_float_equal(y[i], (x[i] - rm[c]) / sqrtf(rv[c] + 0.001f) * gain[c], 1e-4);
    }
    run_close(&r);
    compile_fails("input x: f32[8, 3]\nvar g = ones([3])\ny = batchnorm(x, g, g, momentum=1)\n",
                  "batchnorm(): momentum=1 must be in [0, 1)");
    compile_fails("input x: f32[8, 3]\nvar g = ones([4])\ny = batchnorm(x, g, g)\n", "batchnorm");
}

/* w after `runs` runs of a linear model trained on batches of `batch`
 * rows of one fixed data set, with minimize(accumulate=k). */
static void train_linear(const char *opt, int batch, int k, int runs, float *w)
{
    char text[512];
    snprintf(text, sizeof text,
             "input x: f32[%d, 3]\ninput y: f32[%d, 1]\nvar w = zeros([3, 1])\n"
             "loss = mse(x @ w, y)\ntrain = %s.minimize(loss, accumulate=%d)\n",
             batch, batch, opt, k);
    run r;
    run_open(&r, text);
    static float x[64 * 3], y[64];
    for (int i = 0; i < 64 * 3; i++) x[i] = (float)((i * 5) % 4);
    for (int i = 0; i < 64; i++) y[i] = (float)(i % 3) - 1.0f;
    for (int s = 0; s < runs; s++) {
        int at = (s * batch) % 64;
        gr_feed f[2] = {{"x", x + at * 3, sizeof(float) * 3 * (size_t)batch},
                        {"y", y + at, sizeof(float) * (size_t)batch}};
        assert_gr_ok(gr_run(r.s, "train", f, 2, NULL, 0, r.st), r.st);
        read_var(&r, "w", w, 3);
        if (k > 1 && s == 0) assert_true(w[0] == 0 && w[1] == 0 && w[2] == 0);
    }
    run_close(&r);
}

/* Accumulating k micro-batches is the batch k times larger: to the bit
 * with sgd on numbers that add exactly, to 1e-6 with momentum over 3. */
static void test_accumulate_equals_the_large_batch(void **state)
{
    (void)state;
    float a[3], b[3];
    train_linear("sgd(0.125)", 8, 4, 8, a);
    train_linear("sgd(0.125)", 32, 1, 2, b);
    assert_memory_equal(a, b, sizeof a);
    assert_true(a[0] != 0);
    train_linear("momentum(0.05)", 4, 3, 9, a);
    train_linear("momentum(0.05)", 12, 1, 3, b);
    for (int i = 0; i < 3; i++) assert_float_equal(a[i], b[i], 1e-6 * (1 + fabsf(b[i])));
    compile_fails("var w = ones([2])\ntrain = sgd(0.1).minimize(sum(w), accumulate=0)\n",
                  "accumulate");
}

/* --init-from (weights_only) loads the model's state too: batchnorm's
 * running statistics and an ema() average, not the optimizer's slots. */
static void test_weights_only_restore_keeps_running_stats_and_averages(void **state)
{
    (void)state;
    static const char *src = "input x: f32[4, 2]\nvar gain = ones([2])\nvar bias = zeros([2])\n"
                             "avg = ema(gain, 0.5)\nloss = sum(batchnorm(x, gain, bias) * [1, 3])"
                             " + sum(gain * gain)\ntrain = momentum(0.1).minimize(loss)\n";
    float x[8] = {1, 2, 3, 5, -1, 0, 4, 4}, a[2], b[2], m[2];
    char path[] = "/tmp/gr_state_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    run r;
    run_open(&r, src);
    gr_feed feed = {"x", x, sizeof x};
    for (int i = 0; i < 3; i++) assert_gr_ok(gr_run(r.s, "train", &feed, 1, NULL, 0, r.st), r.st);
    assert_gr_ok(gr_session_save(r.s, path, r.st), r.st);
    read_var(&r, "moving_variance", a, 2);
    read_var(&r, "gain/ema", b, 2);
    run_close(&r);
    run_open(&r, src);
    gr_restore_options o = {.weights_only = 1};
    assert_gr_ok(gr_session_restore(r.s, path, &o, r.st), r.st);
    float got[2];
    read_var(&r, "moving_variance", got, 2);
    assert_memory_equal(got, a, sizeof a);
    read_var(&r, "gain/ema", got, 2);
    assert_memory_equal(got, b, sizeof b);
    read_var(&r, "gain/momentum", m, 2);
    assert_true(m[0] == 0 && m[1] == 0);
    assert_true(a[0] != 1.0f && b[0] != 1.0f);
    run_close(&r);
    unlink(path);
}

/* opt.gradients(loss) (or the free gradients(loss)) then opt.apply(pairs):
 * the gradients between the two can be changed (here halved, then doubled);
 * the pairs are [gradient, variable]. */
static void test_gradients_then_apply(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var w = glorot([2, 3])\nvar b = zeros([3])\nloss = sum(w * [1, 2, 3]) + sum(b)\n"
                 "gv = sgd(0.5).gradients(loss)\n"
                 "half = [[gv[0][0] * 0.5, gv[0][1]], gv[1]]\ntrain = sgd(0.5).apply(half)\n");
    float w0[6], w[6], b[3], loss;
    read_var(&r, "w", w0, 6);
    gr_fetch f = {"train/loss", &loss, sizeof loss, NULL};
    run_target(&r, "train", &f, 1);
    read_var(&r, "w", w, 6);
    read_var(&r, "b", b, 3);
    for (int i = 0; i < 6; i++) assert_float_equal(w[i], w0[i] - 0.25f * (float)(1 + i % 3), 1e-6);
    for (int i = 0; i < 3; i++) assert_float_equal(b[i], -0.5f, 1e-6);
    run_close(&r);
    /* the free function (tf.gradients), with vars=: b is not trained */
    run_open(&r, "var w = glorot([2, 3])\nvar b = zeros([3])\nloss = sum(w * [1, 2, 3]) + sum(b)\n"
                 "gv = gradients(loss, vars=[w])\ntrain = sgd(0.5).apply([[gv[0][0] * 2, w]])\n");
    read_var(&r, "w", w0, 6);
    run_target(&r, "train", &f, 1);
    read_var(&r, "w", w, 6);
    read_var(&r, "b", b, 3);
    for (int i = 0; i < 6; i++) assert_float_equal(w[i], w0[i] - 1.0f * (float)(1 + i % 3), 1e-6);
    for (int i = 0; i < 3; i++) assert_true(b[i] == 0.0f);
    run_close(&r);
    compile_fails("var w = ones([2])\ngv = gradients()\n",
                  "gradients() takes the loss and, optionally, vars=");
    compile_fails("var w = ones([2])\ngv = sgd(1.0).gradients(sum(w))\n"
                  "t = sgd(1.0).apply([[gv[0][0], w], [gv[0][0], w]])\n",
                  "apply(): variable 'w' is in the list twice");
    compile_fails("var w = ones([2])\ngv = sgd(1.0).gradients(sum(w))\n"
                  "t = sgd(1.0).apply([[sum(gv[0][0]), w]])\n",
                  "apply(): the gradient of 'w' is f32[], but the variable is f32[2]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assign_and_assign_add_update_a_variable),
        cmocka_unit_test(test_ema_of_a_variable_follows_its_updates),
        cmocka_unit_test(test_ema_of_a_tensor_and_group),
        cmocka_unit_test(test_assign_in_a_group_runs_after_the_step),
        cmocka_unit_test(test_group_members_run_in_training_mode),
        cmocka_unit_test(test_dropout_follows_the_target_mode),
        cmocka_unit_test(test_batchnorm_trains_on_the_batch_and_evaluates_on_running_stats),
        cmocka_unit_test(test_accumulate_equals_the_large_batch),
        cmocka_unit_test(test_gradients_then_apply),
        cmocka_unit_test(test_weights_only_restore_keeps_running_stats_and_averages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
