/* test_optim.c - the optimizer options through the public API: AdamW's
 * decoupled weight decay, global-norm clipping and learning-rate schedules,
 * each checked against what it must do to the variables, plus a model
 * that trains with all three.  tests/sim.cmake runs it again on the
 * simulated GPU, whose recorded step graphs replay their arguments: a
 * learning rate that reached the kernels as a per-run argument instead of
 * a device value would stay frozen there. */
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

/* One step; its loss and learning rate (either may be NULL). */
static void step(run *r, float *loss, float *lr)
{
    float l, rate;
    gr_fetch f[2] = {{"train/loss", &l, sizeof l, NULL}, {"train/lr", &rate, sizeof rate, NULL}};
    assert_gr_ok(gr_run(r->s, "train", NULL, 0, f, 2, r->st), r->st);
    if (loss) *loss = l;
    if (lr) *lr = rate;
}

/* stop_gradient(x) is x with no gradient back: one sgd(1.0) step on
 * sum(x * stop_gradient(x)) moves x by x (to 0), where sum(x * x) moves it
 * by 2x (to -x); a loss that reaches its variables only through it is an
 * error. */
static void test_stop_gradient_blocks_its_input(void **state)
{
    (void)state;
    static const char *losses[] = {"sum(x * stop_gradient(x))", "sum(x * x)"};
    static const float moved[] = {0.0f, -1.0f};
    for (int k = 0; k < 2; k++) {
        char text[160];
        snprintf(text, sizeof text,
                 "var x = glorot([2, 3])\nloss = %s\ntrain = sgd(1.0).minimize(loss)\n", losses[k]);
        run r;
        run_open(&r, text);
        float x0[6], x1[6];
        read_var(&r, "x", x0, 6);
        step(&r, NULL, NULL);
        read_var(&r, "x", x1, 6);
        for (int i = 0; i < 6; i++) assert_float_equal(x1[i], moved[k] * x0[i], 1e-6);
        run_close(&r);
    }
    compile_fails("var x = zeros([2])\ntrain = sgd(1.0).minimize(sum(stop_gradient(x)))\n",
                  "does not depend on any trainable variable");
}

/* minimize(loss, vars=) trains only the variables it names: a scope, or a
 * list.  One sgd(1.0) step on sum(g * d) moves g by -d and leaves d. */
static void test_minimize_trains_only_the_vars_it_names(void **state)
{
    (void)state;
    static const char *forms[] = {"\"gen\"", "[g]", "g"};
    for (int k = 0; k < 3; k++) {
        char text[256];
        snprintf(text, sizeof text,
                 "scope gen {\n  var w = glorot([2, 3])\n  g = w\n}\nvar d = glorot([2, 3])\n"
                 "loss = sum(g * d)\ntrain = sgd(1.0).minimize(loss, vars=%s)\n",
                 forms[k]);
        run r;
        run_open(&r, text);
        float g0[6], d0[6], g1[6], d1[6];
        read_var(&r, "gen/w", g0, 6);
        read_var(&r, "d", d0, 6);
        step(&r, NULL, NULL);
        read_var(&r, "gen/w", g1, 6);
        read_var(&r, "d", d1, 6);
        for (int i = 0; i < 6; i++) {
            assert_float_equal(g1[i], g0[i] - d0[i], 1e-6);
            assert_true(d1[i] == d0[i]);
        }
        run_close(&r);
    }
    static const char *bad[][2] = {
        {"vars=\"nope\"", "vars=\"nope\" names no trainable variable"},
        {"vars=[x]", "vars= lists variables; this is"},
        {"vars=\"gen\", vars=\"gen\"", "minimize() takes the loss and, optionally, vars="},
        {"rate=1", "minimize() takes the loss and, optionally, vars="},
        {"vars=[d]", "loss does not depend on any variable of vars="},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[256];
        snprintf(text, sizeof text,
                 "input x: f32[2, 3]\nscope gen {\n  var w = glorot([2, 3])\n}\n"
                 "var d = glorot([2, 3])\ntrain = sgd(1.0).minimize(sum(x * w), %s)\n",
                 bad[k][0]);
        compile_fails(text, bad[k][1]);
    }
}

/* An initializer's trainable=false makes a variable no optimizer updates
 * (a frozen or pretrained layer); naming it in vars= is an error. */
static void test_trainable_false_is_never_updated(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var w = glorot([2, 3], trainable=false)\nvar d = normal([2, 3], std=0.5)\n"
                 "loss = sum(w * d)\ntrain = sgd(1.0).minimize(loss)\n");
    float w0[6], d0[6], w1[6], d1[6];
    read_var(&r, "w", w0, 6);
    read_var(&r, "d", d0, 6);
    step(&r, NULL, NULL);
    read_var(&r, "w", w1, 6);
    read_var(&r, "d", d1, 6);
    for (int i = 0; i < 6; i++) {
        assert_true(w1[i] == w0[i]);
        assert_float_equal(d1[i], d0[i] - w0[i], 1e-6);
    }
    run_close(&r);
    static const char *bad[][2] = {
        {"train = sgd(1.0).minimize(sum(w * w))", "does not depend on any trainable variable"},
        {"train = sgd(1.0).minimize(sum(w * d), vars=[w])", "lists 'w', which is not trainable"},
        {"var e = zeros([2], trainable=[1])",
         "zeros(): 'trainable' must be true or false, got a list"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[256];
        snprintf(text, sizeof text,
                 "var w = glorot([2, 3], trainable=false)\nvar d = zeros([2, 3])\n%s\n", bad[k][0]);
        compile_fails(text, bad[k][1]);
    }
}

/* The schedules of docs/language.md, step by step, as the updates read
 * them (train/lr), against the formula written out here (kinds 3 and 4,
 * step_decay and exponential, take their factor as min and their period
 * as steps). */
static double want_lr(int kind, double lr, double min, double warmup, double steps, double t)
{
    if (t < warmup) return lr * t / warmup;
    if (kind == 0) return lr;
    if (kind >= 3) {
        double d = fmax(0.0, t - 1 - warmup) / steps;
        return lr * pow(min, kind == 3 ? floor(d) : d);
    }
    double p = fmin(1.0, (t - warmup) / (steps - warmup));
    return kind == 1 ? lr + (min - lr) * p : min + (lr - min) * 0.5 * (1 + cos(M_PI * p));
}

static void check_schedule(const char *sched, int kind, double lr, double min, double warmup,
                           double steps)
{
    char text[512];
    snprintf(text, sizeof text,
             "data d = gaussian(n=64, dims=[2], batch=8, seed=1)\n"
             "var w = zeros([2, 1])\n"
             "loss = mse(d.x @ w, d.x @ [[1.0], [2.0]])\n"
             "train = %s.minimize(loss)\n",
             sched);
    run r;
    run_open(&r, text);
    for (int t = 1; t <= 40; t++) {
        float got;
        step(&r, NULL, &got);
        double w = want_lr(kind, lr, min, warmup, steps, t);
        if (fabs(got - w) > 1e-6 * lr)
            fail_msg("%s at step %d: lr %.9g, want %.9g", sched, t, got, w);
    }
    run_close(&r);
}

static void test_lr_follows_each_schedule_step_by_step(void **state)
{
    (void)state;
    check_schedule("adamw(cosine(3e-3, warmup=5, steps=30, min=3e-4))", 2, 3e-3, 3e-4, 5, 30);
    check_schedule("sgd(linear(0.1, warmup=3, steps=25, min=0.01))", 1, 0.1, 0.01, 3, 25);
    check_schedule("momentum(warmup(0.05, steps=10), 0.9)", 0, 0.05, 0, 10, 10);
    check_schedule("adam(cosine(1e-3, steps=20))", 2, 1e-3, 0, 0, 20);
    check_schedule("sgd(0.25)", 0, 0.25, 0, 0, 0); /* a constant is fetchable too */
    check_schedule("sgd(step_decay(0.1, every=7, gamma=0.5))", 3, 0.1, 0.5, 0, 7);
    check_schedule("momentum(step_decay(0.1, every=4, gamma=0.9, warmup=3))", 3, 0.1, 0.9, 3, 4);
    check_schedule("adam(exponential(1e-3, decay=0.5, every=10))", 4, 1e-3, 0.5, 0, 10);
}

/* Two variables whose gradients are [3, 0] and [4] (norm 5): clip=1 scales
 * both by 1/5, so the step is lr * [0.6, 0] and lr * [0.8]; clip=10 does
 * nothing. */
static void check_clip(double clip, double scale)
{
    char text[512];
    snprintf(text, sizeof text,
             "var a = zeros([2])\nvar b = zeros([1])\n"
             "loss = sum(a * [3.0, 0.0]) + sum(b * 4.0)\n"
             "train = sgd(0.5, clip=%g).minimize(loss)\n",
             clip);
    run r;
    run_open(&r, text);
    step(&r, NULL, NULL);
    float a[2], b;
    read_var(&r, "a", a, 2);
    read_var(&r, "b", &b, 1);
    assert_float_equal(a[0], -0.5 * 3 * scale, 1e-6);
    assert_float_equal(a[1], 0, 0);
    assert_float_equal(b, -0.5 * 4 * scale, 1e-6);
    run_close(&r);
}

static void test_clip_scales_every_gradient_by_the_global_norm(void **state)
{
    (void)state;
    check_clip(1.0, 0.2);
    check_clip(10.0, 1.0);
}

/* An id looked up twice has a gradient row of 2: its norm is 2, not the
 * sqrt(2) of its rows, so clip=1 moves it by exactly lr. */
static void test_clip_sees_the_dense_gradient_of_a_lookup(void **state)
{
    (void)state;
    run r;
    run_open(&r, "var table = ones([4, 1])\n"
                 "loss = sum(gather(table, cast(constant(1, [2]), dtype=\"i32\")))\n"
                 "train = sgd(1.0, clip=1.0).minimize(loss)\n");
    step(&r, NULL, NULL);
    float t[4];
    read_var(&r, "table", t, 4);
    assert_float_equal(t[1], 0.0, 1e-6);
    assert_float_equal(t[0], 1.0, 0);
    run_close(&r);
}

/* A loss with zero gradients: Adam's step is 0, so what moves is the
 * decay alone, var *= 1 - lr * wd, on matrices only unless decay_all. */
static void check_decay(const char *opt, float want_w, float want_b)
{
    char text[512];
    snprintf(text, sizeof text,
             "var w = ones([2, 2])\nvar b = ones([2])\n"
             "loss = (sum(w) + sum(b)) * 0.0\n"
             "train = %s.minimize(loss)\n",
             opt);
    run r;
    run_open(&r, text);
    step(&r, NULL, NULL);
    float w[4], b[2];
    read_var(&r, "w", w, 4);
    read_var(&r, "b", b, 2);
    for (int i = 0; i < 4; i++) assert_float_equal(w[i], want_w, 1e-7);
    for (int i = 0; i < 2; i++) assert_float_equal(b[i], want_b, 1e-7);
    run_close(&r);
}

static void test_adamw_decays_matrices_not_biases(void **state)
{
    (void)state;
    check_decay("adamw(0.1, weight_decay=0.5)", 0.95f, 1.0f);
    check_decay("adamw(0.1, weight_decay=0.5, decay_all=true)", 0.95f, 0.95f);
    check_decay("adamw(0.1, weight_decay=0.0)", 1.0f, 1.0f);
    check_decay("adam(0.1)", 1.0f, 1.0f);
    /* the decay follows the schedule: lr at step 1 of a 4-step warmup is 0.025 */
    check_decay("adamw(warmup(0.1, steps=4), weight_decay=0.5)", 1.0f - 0.025f * 0.5f, 1.0f);
}

/* A two-layer net with AdamW, clipping and warmup-then-cosine: the loss
 * falls to a tenth, and the same seed gives the same bits. */
static const char *net = "data d = gaussian(n=1024, dims=[8], batch=32, seed=2)\n"
                         "var w1 = glorot([8, 32])\nvar b1 = zeros([32])\n"
                         "var w2 = glorot([32, 1])\n"
                         "target = sum(d.x * [1.0, -2.0, 0.5, 0.0, 3.0, -1.0, 0.25, 2.0], axis=1, "
                         "keepdims=true)\n"
                         "loss = mse(tanh(d.x @ w1 + b1) @ w2, target)\n"
                         "train = adamw(cosine(0.02, warmup=20, steps=400, min=0.002), "
                         "weight_decay=0.01, clip=1.0).minimize(loss)\n";

static float train_net(float *w2)
{
    run r;
    run_open(&r, net);
    float first = 0, loss = 0, sum = 0;
    step(&r, &first, NULL);
    for (int t = 2; t <= 400; t++) {
        step(&r, &loss, NULL);
        if (t > 380) sum += loss;
    }
    read_var(&r, "w2", w2, 32);
    run_close(&r);
    if (!(sum / 20 < first / 10)) fail_msg("loss %g -> %g: did not fall", first, sum / 20);
    return sum;
}

static void test_adamw_clip_and_cosine_train_a_net(void **state)
{
    (void)state;
    float a[32], b[32];
    float la = train_net(a), lb = train_net(b);
    assert_true(la == lb);
    assert_memory_equal(a, b, sizeof a);
}

/* A schedule is state: the step counter is in the checkpoint, so a resumed
 * run reads the learning rate the uninterrupted one would. */
static void test_schedule_resumes_from_a_checkpoint(void **state)
{
    (void)state;
    const char *text = "data d = gaussian(n=64, dims=[2], batch=8, seed=1)\n"
                       "var w = zeros([2, 1])\n"
                       "loss = mse(d.x @ w, d.x @ [[1.0], [2.0]])\n"
                       "train = adamw(cosine(1e-2, warmup=3, steps=12)).minimize(loss)\n";
    char path[] = "/tmp/gr_optim_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    float whole[12], lr;
    run a, b;
    run_open(&a, text);
    for (int t = 0; t < 12; t++) step(&a, NULL, &whole[t]);
    run_close(&a);
    run_open(&a, text);
    for (int t = 0; t < 7; t++) step(&a, NULL, NULL);
    assert_gr_ok(gr_session_save(a.s, path, a.st), a.st);
    run_close(&a);
    run_open(&b, text);
    assert_gr_ok(gr_session_restore(b.s, path, NULL, b.st), b.st);
    for (int t = 7; t < 12; t++) {
        step(&b, NULL, &lr);
        assert_true(lr == whole[t]);
    }
    run_close(&b);
    unlink(path);
}

/* ---- rmsprop, adagrad, adadelta and L2 weight decay, step by step ---- */

/* An optimizer as PyTorch writes it, in double: its kind (0 sgd, 1
 * momentum, 2 rmsprop, 3 adagrad, 4 adadelta) and hyperparameters. */
typedef struct opt_ref {
    int kind;
    double lr, m, rho, eps, wd, initial;
    int nesterov, centered, decay_all;
} opt_ref;

/* One step of element w with gradient g and slots s[3] (PyTorch's SGD,
 * RMSprop, Adagrad, Adadelta); decay: the weight decay applies. */
static double ref_step(const opt_ref *o, double w, double g, double *s, int decay)
{
    if (decay) g += o->wd * w;
    double d;
    switch (o->kind) {
    case 0:
        return w - o->lr * g;
    case 1:
        s[0] = o->m * s[0] + g;
        return w - o->lr * (o->nesterov ? g + o->m * s[0] : s[0]);
    case 2: {
        s[0] = o->rho * s[0] + (1 - o->rho) * g * g;
        double v = s[0];
        if (o->centered) {
            s[2] = o->rho * s[2] + (1 - o->rho) * g;
            v -= s[2] * s[2];
        }
        d = g / (sqrt(v) + o->eps);
        if (o->m != 0) d = s[1] = o->m * s[1] + d;
        return w - o->lr * d;
    }
    case 3:
        s[0] += g * g;
        return w - o->lr * g / (sqrt(s[0]) + o->eps);
    default:
        s[0] = o->rho * s[0] + (1 - o->rho) * g * g;
        d = sqrt(s[1] + o->eps) / sqrt(s[0] + o->eps) * g;
        s[1] = o->rho * s[1] + (1 - o->rho) * d * d;
        return w - o->lr * d;
    }
}

/* loss = sum(w * w) / 2 + sum(w * k) + sum(b * b) / 2: the gradient is
 * w + k for the matrix w, b for the vector b.  Six steps of opt against
 * ref_step from the same start, to 1e-5; the weight decay reaches b only
 * with decay_all. */
static const char *formula_net = "var w = normal([2, 3])\nvar b = normal([3])\n"
                                 "loss = sum(w * w) * 0.5 + sum(w * [[0.5, -1.0, 2.0], "
                                 "[0.0, 0.25, -3.0]]) + sum(b * b) * 0.5\n"
                                 "train = %s.minimize(loss)\n";

static void check_formula(const char *opt, const opt_ref *o)
{
    static const double k[6] = {0.5, -1.0, 2.0, 0.0, 0.25, -3.0};
    char text[640];
    snprintf(text, sizeof text, formula_net, opt);
    run r;
    run_open(&r, text);
    float w[6], b[3];
    double rw[6], rb[3], sw[6][3], sb[3][3];
    read_var(&r, "w", w, 6);
    read_var(&r, "b", b, 3);
    for (int i = 0; i < 6; i++) rw[i] = w[i], sw[i][0] = o->initial, sw[i][1] = sw[i][2] = 0;
    for (int i = 0; i < 3; i++) rb[i] = b[i], sb[i][0] = o->initial, sb[i][1] = sb[i][2] = 0;
    for (int t = 1; t <= 6; t++) {
        step(&r, NULL, NULL);
        for (int i = 0; i < 6; i++) rw[i] = ref_step(o, rw[i], rw[i] + k[i], sw[i], 1);
        for (int i = 0; i < 3; i++) rb[i] = ref_step(o, rb[i], rb[i], sb[i], o->decay_all);
        read_var(&r, "w", w, 6);
        read_var(&r, "b", b, 3);
        for (int i = 0; i < 6; i++)
            if (!(fabs(w[i] - rw[i]) <= 1e-5 * (fabs(rw[i]) > 1 ? fabs(rw[i]) : 1)))
                fail_msg("%s: step %d w[%d] = %.9g, want %.9g", opt, t, i, w[i], rw[i]);
        for (int i = 0; i < 3; i++)
            if (!(fabs(b[i] - rb[i]) <= 1e-5 * (fabs(rb[i]) > 1 ? fabs(rb[i]) : 1)))
                fail_msg("%s: step %d b[%d] = %.9g, want %.9g", opt, t, i, b[i], rb[i]);
    }
    run_close(&r);
}

static void test_each_optimizer_follows_its_formula(void **state)
{
    (void)state;
    check_formula("sgd(0.1, weight_decay=0.5)", &(opt_ref){0, .lr = 0.1, .wd = 0.5});
    check_formula("sgd(0.1, weight_decay=0.5, decay_all=true)",
                  &(opt_ref){0, .lr = 0.1, .wd = 0.5, .decay_all = 1});
    check_formula("momentum(0.05, m=0.8, nesterov=true, weight_decay=0.1)",
                  &(opt_ref){1, .lr = 0.05, .m = 0.8, .wd = 0.1, .nesterov = 1});
    check_formula("momentum(0.05, weight_decay=0.1, decay_all=true)",
                  &(opt_ref){1, .lr = 0.05, .m = 0.9, .wd = 0.1, .decay_all = 1});
    /* PyTorch's defaults: RMSprop(lr=0.01, alpha=0.99, eps=1e-8) */
    check_formula("rmsprop()", &(opt_ref){2, .lr = 0.01, .rho = 0.99, .eps = 1e-8});
    check_formula(
        "rmsprop(0.02, rho=0.9, m=0.5, centered=true, weight_decay=0.1)",
        &(opt_ref){2, .lr = 0.02, .rho = 0.9, .eps = 1e-8, .m = 0.5, .wd = 0.1, .centered = 1});
    check_formula("adagrad(0.1)", &(opt_ref){3, .lr = 0.1, .eps = 1e-10});
    check_formula("adagrad(0.1, initial=0.1, eps=1e-3, weight_decay=0.2, decay_all=true)",
                  &(opt_ref){3, .lr = 0.1, .eps = 1e-3, .initial = 0.1, .wd = 0.2, .decay_all = 1});
    /* Adadelta(lr=1.0, rho=0.9, eps=1e-6), pytorch/examples' MNIST, with its StepLR */
    check_formula("adadelta()", &(opt_ref){4, .lr = 1.0, .rho = 0.9, .eps = 1e-6});
    check_formula("adadelta(0.5, rho=0.95, eps=1e-4, weight_decay=0.01)",
                  &(opt_ref){4, .lr = 0.5, .rho = 0.95, .eps = 1e-4, .wd = 0.01});
}

/* A gathered table is updated by rows, lazily: under every optimizer a row
 * no id names keeps its value (a dense update with weight_decay would
 * shrink it) and a repeated id's rows are summed, so the rows that move
 * follow the dense formula. */
static void test_rows_update_only_the_rows_looked_up(void **state)
{
    (void)state;
    static const struct {
        const char *opt;
        opt_ref ref;
    } cases[] = {
        {"sgd(0.1, weight_decay=0.5, decay_all=true)", {0, .lr = 0.1, .wd = 0.5}},
        {"momentum(0.1, weight_decay=0.5, decay_all=true)", {1, .lr = 0.1, .m = 0.9, .wd = 0.5}},
        {"rmsprop(0.01, m=0.5, centered=true, weight_decay=0.5, decay_all=true)",
         {2, .lr = 0.01, .rho = 0.99, .eps = 1e-8, .m = 0.5, .wd = 0.5, .centered = 1}},
        {"adagrad(0.1, initial=0.1, weight_decay=0.5, decay_all=true)",
         {3, .lr = 0.1, .eps = 1e-10, .initial = 0.1, .wd = 0.5}},
        {"adadelta(weight_decay=0.5, decay_all=true)",
         {4, .lr = 1.0, .rho = 0.9, .eps = 1e-6, .wd = 0.5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char text[512];
        snprintf(text, sizeof text,
                 "var e = normal([4, 2])\n"
                 "loss = sum(gather(e, cast([[0, 2], [0, 3]], dtype=\"i32\")) * [[[1.0, -1.0], "
                 "[0.5, 2.0]], "
                 "[[0.25, 0.0], [-2.0, 1.0]]])\n"
                 "train = %s.minimize(loss)\n",
                 cases[c].opt);
        /* row 0: 1 - 1, 0.25 - ... summed; row 1 never looked up */
        static const double g[4][2] = {{1.25, -1.0}, {0, 0}, {0.5, 2.0}, {-2.0, 1.0}};
        run r;
        run_open(&r, text);
        float e[8], e0[8];
        read_var(&r, "e", e0, 8);
        double re[8], s[8][3];
        for (int i = 0; i < 8; i++)
            re[i] = e0[i], s[i][0] = cases[c].ref.initial, s[i][1] = s[i][2] = 0;
        for (int t = 1; t <= 4; t++) {
            step(&r, NULL, NULL);
            for (int i = 0; i < 8; i++)
                if (i / 2 != 1) re[i] = ref_step(&cases[c].ref, re[i], g[i / 2][i % 2], s[i], 1);
            read_var(&r, "e", e, 8);
            for (int i = 0; i < 8; i++)
                if (!(fabs(e[i] - re[i]) <= 1e-5 * (fabs(re[i]) > 1 ? fabs(re[i]) : 1)))
                    fail_msg("%s: step %d e[%d] = %.9g, want %.9g", cases[c].opt, t, i, e[i],
                             re[i]);
        }
        assert_true(e[2] == e0[2] && e[3] == e0[3]);
        run_close(&r);
    }
}

/* The slots are variables: a run restored from a checkpoint after 5 steps
 * continues as the uninterrupted one, to the bit (adagrad's accumulator
 * starts at initial, and the checkpoint keeps what it has become). */
static void test_adaptive_slots_resume_from_a_checkpoint(void **state)
{
    (void)state;
    static const char *opts[] = {"rmsprop(0.01, m=0.5, centered=true, weight_decay=0.01)",
                                 "adagrad(0.1, initial=0.1)", "adadelta(weight_decay=0.01)",
                                 "momentum(0.05, weight_decay=0.1)"};
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) {
        char text[640], path[] = "/tmp/gr_optim_XXXXXX";
        snprintf(text, sizeof text,
                 "data d = gaussian(n=64, dims=[2], batch=8, seed=1)\n"
                 "var w = zeros([2, 1])\nvar e = normal([5, 2])\n"
                 "loss = mse(d.x @ w, d.x @ [[1.0], [2.0]]) + sum(gather(e, cast([1, 3, 1], "
                 "dtype=\"i32\")))\n"
                 "train = %s.minimize(loss)\n",
                 opts[k]);
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        float whole[2], we[10], got[2], ge[10];
        run a, b;
        run_open(&a, text);
        if (k == 1) {
            float acc[2];
            read_var(&a, "w/adagrad", acc, 2);
            assert_true(acc[0] == 0.1f && acc[1] == 0.1f);
        }
        for (int t = 0; t < 10; t++) step(&a, NULL, NULL);
        read_var(&a, "w", whole, 2);
        read_var(&a, "e", we, 10);
        run_close(&a);
        run_open(&a, text);
        for (int t = 0; t < 5; t++) step(&a, NULL, NULL);
        assert_gr_ok(gr_session_save(a.s, path, a.st), a.st);
        run_close(&a);
        run_open(&b, text);
        assert_gr_ok(gr_session_restore(b.s, path, NULL, b.st), b.st);
        for (int t = 5; t < 10; t++) step(&b, NULL, NULL);
        read_var(&b, "w", got, 2);
        read_var(&b, "e", ge, 10);
        run_close(&b);
        unlink(path);
        assert_memory_equal(got, whole, sizeof got);
        assert_memory_equal(ge, we, sizeof ge);
        assert_true(whole[0] != 0.0f);
    }
}

/* How many `op` nodes the plan of train has, compiled for dist (w1's
 * gradient, 256 KiB, is averaged alone in sync mode; b1's and w2's in a
 * bucket). */
static int in_plan(const char *opt, gr_distributed dist, const char *op)
{
    char text[512], *buf = NULL, pat[64];
    size_t len = 0;
    snprintf(text, sizeof text,
             "input x: f32[64, 512]\ninput y: i32[64]\n"
             "var w1 = glorot([512, 128])\nvar b1 = zeros([128])\nvar w2 = glorot([128, 10])\n"
             "loss = mean(softmax_xent(relu(x @ w1 + b1) @ w2, y))\n"
             "train = %s.minimize(loss)\n",
             opt);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_compile_options co = {.distributed = dist, .cpu_as_gpu = gr_test_on_gpu()};
    assert_gr_ok(gr_compile_string("inline.graph", text, strlen(text), &co, &p, st), st);
    FILE *f = open_memstream(&buf, &len);
    assert_gr_ok(gr_program_emit(p, "plan", "train", f, st), st);
    fclose(f);
    int n = 0;
    snprintf(pat, sizeof pat, " %s ", op);
    for (const char *at = buf; (at = strstr(at, pat)); at++) n++;
    free(buf);
    gr_program_free(p);
    gr_status_free(st);
    return n;
}

/* The weight gradient's GEMM takes a constant lr as its alpha; a scheduled
 * or clipped sgd keeps its update apart (the rate is read on the device,
 * the norm needs the gradient). */
static void test_sgd_fuses_into_its_gemm_only_with_a_constant_rate(void **state)
{
    (void)state;
    assert_int_equal(in_plan("sgd(0.1)", GR_DIST_NONE, "apply_sgd_matmul"), 1);
    assert_int_equal(in_plan("sgd(warmup(0.1, steps=10))", GR_DIST_NONE, "apply_sgd_matmul"), 0);
    assert_int_equal(in_plan("sgd(0.1, clip=1.0)", GR_DIST_NONE, "apply_sgd_matmul"), 0);
}

/* Sync training: sgd's update of a gradient averaged alone joins its
 * allreduce, whatever its rate (read on the device like apply_sgd's); a
 * bucket's slices, momentum and clipping (whose norm reads the mean) keep
 * the allreduce apart.  The weight gradient's GEMM then writes the
 * gradient for the allreduce: no apply_sgd_matmul.  On a GPU the variables
 * are there and allreduce on the host (MPI): nothing fuses. */
static void test_sync_sgd_fuses_into_its_allreduce(void **state)
{
    (void)state;
    const char *sgd = "sgd(0.1)", *warm = "sgd(warmup(0.1, steps=10))";
    int fused = !gr_test_on_gpu();
    assert_int_equal(in_plan(sgd, GR_DIST_SYNC, "apply_sgd_allreduce"), fused);
    if (fused) /* on a GPU the plan names it in its transfers too */
        assert_int_equal(in_plan(sgd, GR_DIST_SYNC, "allreduce"), 1);
    assert_int_equal(in_plan(sgd, GR_DIST_SYNC, "apply_sgd_matmul"), 0);
    assert_int_equal(in_plan(warm, GR_DIST_SYNC, "apply_sgd_allreduce"), fused);
    assert_int_equal(in_plan("momentum(0.1, 0.9)", GR_DIST_SYNC, "apply_sgd_allreduce"), 0);
    if (fused) assert_int_equal(in_plan("momentum(0.1, 0.9)", GR_DIST_SYNC, "allreduce"), 2);
    assert_int_equal(in_plan("sgd(0.1, clip=1.0)", GR_DIST_SYNC, "apply_sgd_allreduce"), 0);
}

/* A bucket of one small gradient is averaged alone: its allreduce keeps
 * the gradient's type, which has no packed vector to slice (it used to fail
 * to compile). */
static void test_sync_averages_a_lone_small_gradient(void **state)
{
    (void)state;
    const char *text = "input x: f32[4, 3]\ninput y: i32[4]\nvar w = glorot([3, 2])\n"
                       "train = sgd(0.1).minimize(mean(softmax_xent(x @ w, y)))\n";
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_compile_options co = {.distributed = GR_DIST_SYNC, .cpu_as_gpu = gr_test_on_gpu()};
    assert_gr_ok(gr_compile_string("inline.graph", text, strlen(text), &co, &p, st), st);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_gradient_blocks_its_input),
        cmocka_unit_test(test_minimize_trains_only_the_vars_it_names),
        cmocka_unit_test(test_trainable_false_is_never_updated),
        cmocka_unit_test(test_lr_follows_each_schedule_step_by_step),
        cmocka_unit_test(test_clip_scales_every_gradient_by_the_global_norm),
        cmocka_unit_test(test_clip_sees_the_dense_gradient_of_a_lookup),
        cmocka_unit_test(test_adamw_decays_matrices_not_biases),
        cmocka_unit_test(test_adamw_clip_and_cosine_train_a_net),
        cmocka_unit_test(test_schedule_resumes_from_a_checkpoint),
        cmocka_unit_test(test_each_optimizer_follows_its_formula),
        cmocka_unit_test(test_rows_update_only_the_rows_looked_up),
        cmocka_unit_test(test_adaptive_slots_resume_from_a_checkpoint),
        cmocka_unit_test(test_sgd_fuses_into_its_gemm_only_with_a_constant_rate),
        cmocka_unit_test(test_sync_sgd_fuses_into_its_allreduce),
        cmocka_unit_test(test_sync_averages_a_lone_small_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
