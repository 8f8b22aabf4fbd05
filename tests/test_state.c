/* test_state.c - state that changes without a gradient and behaviour that
 * differs between training and evaluation, through the public API:
 * assign, assign_add, group, ema() of a variable and of a tensor, dropout
 * that a target's mode turns on.  tests/sim.cmake runs it again on the
 * simulated GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assign_and_assign_add_update_a_variable),
        cmocka_unit_test(test_ema_of_a_variable_follows_its_updates),
        cmocka_unit_test(test_ema_of_a_tensor_and_group),
        cmocka_unit_test(test_dropout_follows_the_target_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
