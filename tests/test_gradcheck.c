/* test_gradcheck.c - every differentiable op's gradient rule against central
 * finite differences, through the whole pipeline (language, sema, autodiff,
 * plan, CPU kernels), in one table.
 *
 * Each case is a tiny program `y = op(x0, x1...)` trained on
 * loss = sum(y * y) / 2 with sgd(1.0): one step moves each variable by
 * exactly its gradient, so gradient = x - x_after (exact to f32 rounding).
 * The numeric side evaluates y in f32 and L = sum(y^2)/2 in double on the
 * host, with central differences of step EPS.  The error for a variable is
 * max_i |analytic_i - numeric_i| / max_i |numeric_i|, and must be < 1e-3.
 * A table entry exists for every public op with a gradient rule, which the
 * second test checks against the registry.  Internal ops that only a
 * builtin builds (batch normalisation) are checked on IR built by hand, at
 * the end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/compiler.h"
#include "compiler/ops_impl.h"
#include "devices/cpu/cpu.h"
#include "graphrun.h"
#include "gr_test.h"
#include "ir_fixture.h"

#define EPS       1e-2
#define TOL       1e-3
#define MAX_VARS  3
#define MAX_ELEMS 256

typedef enum fill { NORMAL, POSITIVE, SPACED } fill;

typedef struct gc_case {
    const char *op;   /* the registry name it covers */
    const char *vars; /* `var x0 = ...` declarations (and constants) */
    const char *expr; /* y = expr */
    fill fills[MAX_VARS];
} gc_case;

static const gc_case cases[] = {
    {"matmul", "var x0 = zeros([3, 4])\nvar x1 = zeros([4, 5])", "matmul(x0, x1)", {0}},
    {"matmul",
     "var x0 = zeros([4, 3])\nvar x1 = zeros([4, 5])",
     "matmul(x0, x1, transpose_a=true)",
     {0}},
    {"matmul",
     "var x0 = zeros([3, 4])\nvar x1 = zeros([5, 4])",
     "matmul(x0, x1, transpose_b=true)",
     {0}},
    /* shared weights: two consumers' gradients are summed */
    {"matmul",
     "var x0 = zeros([2, 3])\nvar x1 = zeros([3, 3])",
     "matmul(tanh(matmul(x0, x1)), x1)",
     {0}},
    {"add", "var x0 = zeros([3, 4])\nvar x1 = zeros([4])", "add(x0, x1)", {0}},
    {"sub", "var x0 = zeros([3, 1])\nvar x1 = zeros([1, 4])", "sub(x0, x1)", {0}},
    {"mul", "var x0 = zeros([2, 3, 4])\nvar x1 = zeros([3, 1])", "mul(x0, x1)", {0}},
    {"div", "var x0 = zeros([3, 4])\nvar x1 = zeros([4])", "div(x0, x1)", {NORMAL, POSITIVE}},
    {"neg", "var x0 = zeros([3, 5])", "neg(x0)", {0}},
    {"exp", "var x0 = zeros([3, 5])", "exp(x0)", {0}},
    {"log", "var x0 = zeros([3, 5])", "log(x0)", {POSITIVE}},
    {"sqrt", "var x0 = zeros([3, 5])", "sqrt(x0)", {POSITIVE}},
    {"relu", "var x0 = zeros([3, 5])", "relu(x0)", {SPACED}},
    {"sigmoid", "var x0 = zeros([3, 5])", "sigmoid(x0)", {0}},
    {"tanh", "var x0 = zeros([3, 5])", "tanh(x0)", {0}},
    {"abs", "var x0 = zeros([3, 5])", "abs(x0)", {SPACED}},
    {"sin", "var x0 = zeros([3, 5])", "sin(x0)", {0}},
    {"cos", "var x0 = zeros([3, 5])", "cos(x0)", {0}},
    {"softplus", "var x0 = zeros([3, 5])", "softplus(x0 * 4.0)", {0}},
    {"log_sigmoid", "var x0 = zeros([3, 5])", "log_sigmoid(x0 * 4.0)", {0}},
    {"silu", "var x0 = zeros([3, 5])", "silu(x0 * 2.0)", {0}},
    {"elu", "var x0 = zeros([3, 5])", "elu(x0)", {SPACED}},
    {"maximum", "var x0 = zeros([3, 4])\nvar x1 = zeros([4])", "maximum(x0, x1)", {SPACED, NORMAL}},
    {"minimum",
     "var x0 = zeros([3, 1])\nvar x1 = zeros([1, 4])",
     "minimum(x0, x1)",
     {SPACED, NORMAL}},
    {"pow", "var x0 = zeros([3, 4])\nvar x1 = zeros([4])", "pow(x0, x1)", {POSITIVE, NORMAL}},
    {"pow", "var x0 = zeros([3, 4])", "pow(x0, 3.0)", {NORMAL}},
    {"rmsnorm", "var x0 = zeros([2, 3, 5])\nvar x1 = zeros([5])", "rmsnorm(x0, x1)", {0}},
    {"lrn",
     "var x0 = zeros([2, 5, 2, 3])",
     "lrn(x0, depth_radius=1, bias=1.5, alpha=0.5, beta=0.75)",
     {0}},
    {"lrn", "var x0 = zeros([2, 7, 3])", "lrn(x0, depth_radius=2, alpha=0.2)", {0}},
    /* groupnorm is layernorm of x regrouped, then a per-channel affine */
    {"layernorm",
     "var x0 = zeros([2, 4, 3])\nvar x1 = zeros([4])\nvar x2 = zeros([4])",
     "groupnorm(x0, x1 + 1.0, x2, groups=2)",
     {0}},
    {"layernorm",
     "var x0 = zeros([2, 6, 2, 2])\nvar x1 = zeros([6])\nvar x2 = zeros([6])",
     "groupnorm(x0, x1, x2, groups=3, eps=0.01)",
     {0}},
    /* a rotation keeps sum(y^2): + x0 makes the loss see the turn */
    {"rope", "var x0 = zeros([2, 2, 3, 4])", "rope(x0, base=10.0) + x0", {0}},
    {"rope", "var x0 = zeros([5, 6])\nvar x1 = zeros([5, 6])", "rope(x0) * x1", {0}},
    /* z [B, 4H] (i, f, g, o) and the state [B, 2H] = (h, c): dz, and dc (dh is 0) */
    {"lstm_cell", "var x0 = zeros([3, 8])\nvar x1 = zeros([3, 4])", "lstm_cell(x0 * 2.0, x1)", {0}},
    /* three steps of lstm() in a for loop: w [X + H, 4H], b [4H], the inputs x of each step
       (3 columns of x2 a step); the gradients flow back through h (the GEMM) and c */
    {"lstm_cell",
     "var x0 = zeros([5, 8])\nvar x1 = zeros([8])\nvar x2 = zeros([2, 9])\n"
     "s = [[0.5, -0.25, 0.1, 0.3], [-0.4, 0.2, -0.6, 0.05]]\n"
     "for t in 0..3 { s = lstm(slice(x2, axis=1, begin=3 * t, end=3 * t + 3), s, x0, x1) }",
     "s",
     {0}},
    /* the same steps written with lstm_cell on the user's one GEMM; only h' of the last */
    {"lstm_cell",
     "var x0 = zeros([5, 8])\nvar x1 = zeros([8])\nvar x2 = zeros([2, 9])\ns = zeros([2, 4])\n"
     "for t in 0..3 {\n  x = slice(x2, axis=1, begin=3 * t, end=3 * t + 3)\n"
     "  s = lstm_cell(concat([x, lstm_h(s)], axis=1) @ x0 + x1, s)\n}",
     "lstm_h(s) * 3.0",
     {0}},
    /* lstm_seq over 3 steps of x2 [B, T, X]: one GEMM of w's x rows for every step, then h's
       rows a step; the steps' gradients of x2 and of w's two row blocks meet in concats
       (autodiff's merge of slices); the last state's c and every h reach the loss */
    {"lstm_cell",
     "var x0 = zeros([5, 8])\nvar x1 = zeros([8])\nvar x2 = zeros([2, 3, 3])\n"
     "r = lstm_seq(x2, [[0.5, -0.25, 0.1, 0.3], [-0.4, 0.2, -0.6, 0.05]], x0, x1)",
     "concat([reshape(r[0], [2, 6]), lstm_c(r[1])], axis=1)",
     {0}},
    /* gx, gh [B, 3H] (r, z, n) and h [B, H]: dgx, dgh, dh */
    {"gru_cell",
     "var x0 = zeros([3, 6])\nvar x1 = zeros([3, 6])\nvar x2 = zeros([3, 2])",
     "gru_cell(x0 * 2.0, x1, x2)",
     {0}},
    /* three steps of gru() in a for loop: w_ih [X, 3H], w_hh [H, 3H], the inputs */
    {"gru_cell",
     "var x0 = zeros([3, 6])\nvar x1 = zeros([2, 6])\nvar x2 = zeros([2, 9])\n"
     "bi = [0.1, -0.2, 0.3, 0.05, -0.1, 0.2]\nbh = [-0.3, 0.2, 0.1, 0.4, 0.25, -0.5]\n"
     "h = [[0.5, -0.25], [0.1, 0.3]]\n"
     "for t in 0..3 { h = gru(slice(x2, axis=1, begin=3 * t, end=3 * t + 3), h, x0, x1, bi, bh) }",
     "h",
     {0}},
    /* the biases (b_hh's n part is gated by r) and the first state, weights fixed */
    {"gru_cell",
     "var x0 = zeros([6])\nvar x1 = zeros([6])\nvar x2 = zeros([2, 2])\n"
     "xs = [[0.5, -1.0, 0.3], [0.2, 0.7, -0.4]]\nh = x2\n"
     "for t in 0..3 { h = gru(xs * (t + 1.0), h, zeros([3, 6]) + 0.3, ones([2, 6]) - 1.5, x0, x1) "
     "}",
     "h * 2.0",
     {0}},
    /* gru_seq over 3 steps of x2 [B, T, X], gx of every step from one GEMM */
    {"gru_cell",
     "var x0 = zeros([3, 6])\nvar x1 = zeros([2, 6])\nvar x2 = zeros([2, 3, 3])\n"
     "bi = [0.1, -0.2, 0.3, 0.05, -0.1, 0.2]\nbh = [-0.3, 0.2, 0.1, 0.4, 0.25, -0.5]\n"
     "r = gru_seq(x2, [[0.5, -0.25], [0.1, 0.3]], x0, x1, bi, bh)",
     "r[0]",
     {0}},
    {"where",
     "var x0 = zeros([3, 4])\nvar x1 = zeros([4])",
     "where(x0 > 0.0, x0 * 2.0, x1)",
     {SPACED, NORMAL}},
    {"identity", "var x0 = zeros([3, 5])", "identity(x0)", {0}},
    {"softmax", "var x0 = zeros([3, 5])", "softmax(x0)", {0}},
    {"log_softmax", "var x0 = zeros([3, 5])", "log_softmax(x0)", {0}},
    {"softmax_xent",
     "var x0 = zeros([4, 5])\nlab = cast([1, 0, 4, 2], dtype=\"i32\")",
     "softmax_xent(x0, lab)",
     {0}},
    {"softmax_xent",
     "var x0 = zeros([4, 5])\nlab = cast([1, 0, 4, 2], dtype=\"i32\")",
     "softmax_xent(x0, lab, label_smoothing=0.2)",
     {0}},
    {"softplus",
     "var x0 = zeros([3, 4])\nvar x1 = zeros([3, 4])",
     "sigmoid_xent(x0 * 3.0, sigmoid(x1))",
     {0}},
    {"one_hot",
     "var x0 = zeros([4, 5])\nlab = cast([1, 0, 4, 2], dtype=\"i32\")",
     "nll(log_softmax(x0), lab)",
     {0}},
    {"mse", "var x0 = zeros([3, 4])\nvar x1 = zeros([3, 4])", "mse(x0, x1)", {0}},
    {"sum", "var x0 = zeros([3, 4])", "sum(x0)", {0}},
    {"sum", "var x0 = zeros([3, 4])", "sum(x0, axis=1)", {0}},
    {"mean", "var x0 = zeros([3, 4])", "mean(x0, axis=0, keepdims=true)", {0}},
    {"mean", "var x0 = zeros([2, 3, 4])", "mean(x0, axis=-1)", {0}},
    {"max", "var x0 = zeros([3, 4])", "max(x0, axis=1)", {SPACED}},
    {"max", "var x0 = zeros([3, 4])", "max(x0)", {SPACED}},
    /* several axes: runs of adjacent axes merged by a reshape, the rest in turn */
    {"sum", "var x0 = zeros([2, 3, 4])", "sum(x0, axis=[0, 2])", {0}},
    {"mean", "var x0 = zeros([2, 3, 2, 2])", "mean(x0, axis=[0, 2, 3], keepdims=true)", {0}},
    {"max", "var x0 = zeros([2, 3, 4])", "max(x0, axis=[1, -1])", {SPACED}},
    {"mean", "var x0 = zeros([2, 3, 2, 2])", "global_avgpool(x0)", {0}},
    {"reshape", "var x0 = zeros([3, 4])", "reshape(x0, [2, 6])", {0}},
    {"transpose", "var x0 = zeros([2, 3, 4])", "transpose(x0, perm=[2, 0, 1])", {0}},
    {"concat", "var x0 = zeros([2, 3])\nvar x1 = zeros([2, 2])", "concat([x0, x1], axis=1)", {0}},
    {"slice", "var x0 = zeros([4, 5])", "slice(x0, axis=1, begin=1, end=4)", {0}},
    {"gather",
     "var x0 = zeros([6, 3])\nids = cast([0, 5, 2, 2], dtype=\"i32\")",
     "gather(x0, ids)",
     {0}},
    {"cast", "var x0 = zeros([3, 4])", "cast(x0, dtype=\"f32\")", {0}},
    {"conv2d",
     "var x0 = zeros([2, 2, 5, 5])\nvar x1 = zeros([3, 2, 3, 3])",
     "conv2d(x0, x1, stride=1, padding=1)",
     {0}},
    {"conv2d",
     "var x0 = zeros([1, 2, 6, 6])\nvar x1 = zeros([2, 2, 3, 3])",
     "conv2d(x0, x1, stride=2, padding=0)",
     {0}},
    {"maxpool2d", "var x0 = zeros([1, 2, 4, 4])", "maxpool2d(x0, size=2)", {SPACED}},
    {"avgpool2d", "var x0 = zeros([1, 2, 4, 4])", "avgpool2d(x0, size=2, stride=1)", {0}},
    {"maxpool2d",
     "var x0 = zeros([1, 2, 5, 5])",
     "maxpool2d(x0, size=2, padding=\"same\")",
     {SPACED}},
    {"maxpool2d",
     "var x0 = zeros([1, 2, 5, 4])",
     "maxpool2d(x0, size=3, stride=2, padding=1)",
     {SPACED}},
    {"avgpool2d",
     "var x0 = zeros([1, 2, 5, 5])",
     "avgpool2d(x0, size=3, stride=2, padding=\"same\")",
     {0}},
    {"avgpool2d", "var x0 = zeros([1, 2, 4, 5])", "avgpool2d(x0, size=2, padding=1)", {0}},
    /* batch axes: a batched a times a matrix (b's gradient is one GEMM over
     * the rows), both batched, broadcast either way, transposed */
    {"matmul", "var x0 = zeros([2, 3, 4])\nvar x1 = zeros([4, 5])", "matmul(x0, x1)", {0}},
    {"matmul",
     "var x0 = zeros([2, 3, 4])\nvar x1 = zeros([5, 4])",
     "matmul(x0, x1, transpose_b=true)",
     {0}},
    {"matmul",
     "var x0 = zeros([2, 4, 3])\nvar x1 = zeros([2, 4, 5])",
     "matmul(x0, x1, transpose_a=true)",
     {0}},
    {"matmul", "var x0 = zeros([2, 1, 3, 4])\nvar x1 = zeros([3, 4, 2])", "x0 @ x1", {0}},
    {"matmul",
     "var x0 = zeros([4, 3])\nvar x1 = zeros([2, 5, 4])",
     "matmul(x0, x1, transpose_a=true, transpose_b=true)",
     {0}},
    {"softmax", "var x0 = zeros([2, 4, 4])", "softmax(x0, mask=\"causal\")", {0}},
    /* one attention head: softmax(q k^T, causal) v */
    {"softmax",
     "var x0 = zeros([2, 4, 3])\nvar x1 = zeros([2, 4, 3])\nvar x2 = zeros([2, 4, 3])",
     "softmax(matmul(x0, x1, transpose_b=true), mask=\"causal\") @ x2",
     {0}},
    {"layernorm",
     "var x0 = zeros([3, 8])\nvar x1 = zeros([8])\nvar x2 = zeros([8])",
     "layernorm(x0, x1, x2)",
     {0}},
    {"layernorm",
     "var x0 = zeros([2, 3, 5])\nvar x1 = zeros([5])\nvar x2 = zeros([5])",
     "layernorm(x0, x1, x2, eps=0.1) * x0",
     {0, POSITIVE}},
    {"gelu", "var x0 = zeros([3, 5])", "gelu(x0)", {0}},
};

/* dropout's mask changes every run (it is keyed by the step), so finite
 * differences cannot see one function; test_kernels checks that its
 * gradient reuses the forward mask. */
static const char *const exempt[] = {"dropout"};

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* SPACED: a shuffled grid 0.05 apart, never within 0.025 of 0, so no kink or
 * tie of relu/max lies within EPS of a point. */
static void fill_values(float *x, int n, fill f)
{
    for (int i = 0; i < n; i++) {
        if (f == SPACED)
            x[i] = (float)(0.05 * (i - n / 2) + 0.025);
        else if (f == POSITIVE)
            x[i] = (float)(0.5 + uniform());
        else
            x[i] = (float)(2 * uniform() - 1);
    }
    for (int i = n - 1; f == SPACED && i > 0; i--) {
        int j = (int)(uniform() * (i + 1));
        float t = x[i];
        x[i] = x[j], x[j] = t;
    }
}

typedef struct gc_run {
    gr_program *p;
    gr_session *s;
    gr_status *st;
    int n_vars;
    char names[MAX_VARS][16];
    size_t bytes[MAX_VARS];
    float x[MAX_VARS][MAX_ELEMS];
    size_t y_bytes;
} gc_run;

#define ok(call, r)                                                                                \
    do {                                                                                           \
        if ((call) != GR_OK) fail_msg("%s: %s", #call, gr_status_message((r)->st));                \
    } while (0)

/* L = sum(y^2) / 2 in double, with the variables as they are now. */
static double loss_now(gc_run *r)
{
    float y[MAX_ELEMS * 4];
    gr_fetch f = {"y", y, r->y_bytes, NULL};
    ok(gr_run(r->s, "y", NULL, 0, &f, 1, r->st), r);
    double l = 0;
    for (size_t i = 0; i < r->y_bytes / sizeof(float); i++) l += 0.5 * (double)y[i] * y[i];
    return l;
}

static void write_var(gc_run *r, int v)
{
    ok(gr_variable_write(r->s, r->names[v], r->x[v], r->bytes[v], r->st), r);
}

static void setup_case(const gc_case *c, gc_run *r)
{
    char text[1024];
    snprintf(text, sizeof text,
             "%s\ny = %s\nloss = sum(y * y) / 2\ntrain = sgd(1.0).minimize(loss)\n", c->vars,
             c->expr);
    r->st = gr_status_new();
    ok(gr_compile_string("gradcheck.graph", text, strlen(text), gr_test_options(), &r->p, r->st),
       r);
    ok(gr_session_new(r->p, NULL, &r->s, r->st), r);
    for (r->n_vars = 0; r->n_vars < MAX_VARS; r->n_vars++) {
        int v = r->n_vars;
        snprintf(r->names[v], sizeof r->names[v], "x%d", v);
        if (!strstr(c->vars, r->names[v])) break;
        gr_tensor *t = NULL;
        ok(gr_variable_get(r->s, r->names[v], &t, r->st), r);
        r->bytes[v] = gr_tensor_bytes(t);
        gr_tensor_free(t);
        assert_true(r->bytes[v] <= sizeof r->x[v]);
        fill_values(r->x[v], (int)(r->bytes[v] / 4), c->fills[v]);
        write_var(r, v);
    }
    gr_tensor *y = NULL;
    ok(gr_program_tensor(r->p, "y", &y, r->st), r);
    r->y_bytes = gr_tensor_bytes(y);
    assert_true(r->y_bytes <= MAX_ELEMS * 4 * sizeof(float));
    gr_tensor_free(y);
}

static double check_var(const gc_case *c, gc_run *r, int v, const float *analytic)
{
    double max_err = 0, max_num = 1e-6;
    for (size_t i = 0; i < r->bytes[v] / 4; i++) {
        float save = r->x[v][i];
        r->x[v][i] = (float)(save + EPS);
        write_var(r, v);
        double lp = loss_now(r);
        r->x[v][i] = (float)(save - EPS);
        write_var(r, v);
        double lm = loss_now(r);
        r->x[v][i] = save;
        write_var(r, v);
        double num = (lp - lm) / (2 * EPS);
        if (fabs(num) > max_num) max_num = fabs(num);
        if (fabs(num - analytic[i]) > max_err) max_err = fabs(num - analytic[i]);
    }
    double rel = max_err / max_num;
    if (rel >= TOL)
        print_error("%s: y = %s: d/d%s relative error %.2e (max |grad| %.3g)\n", c->op, c->expr,
                    r->names[v], rel, max_num);
    return rel;
}

static int check_case(const gc_case *c)
{
    gc_run r = {0};
    float after[MAX_VARS][MAX_ELEMS], grad[MAX_ELEMS];
    int bad = 0;
    setup_case(c, &r);
    ok(gr_run(r.s, "train", NULL, 0, NULL, 0, r.st), &r);
    for (int v = 0; v < r.n_vars; v++)
        ok(gr_variable_read(r.s, r.names[v], after[v], r.bytes[v], r.st), &r);
    for (int v = 0; v < r.n_vars; v++) write_var(&r, v);
    for (int v = 0; v < r.n_vars; v++) {
        for (size_t i = 0; i < r.bytes[v] / 4; i++) grad[i] = r.x[v][i] - after[v][i];
        bad += check_var(c, &r, v, grad) >= TOL;
    }
    gr_session_free(r.s);
    gr_program_free(r.p);
    gr_status_free(r.st);
    return bad;
}

static void test_every_gradient_matches_finite_differences(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) bad += check_case(&cases[k]);
    assert_int_equal(bad, 0);
}

static int covered(const char *name)
{
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        if (strcmp(cases[k].op, name) == 0) return 1;
    for (size_t k = 0; k < sizeof exempt / sizeof *exempt; k++)
        if (strcmp(exempt[k], name) == 0) return 1;
    return 0;
}

static void test_every_differentiable_op_has_a_case(void **state)
{
    (void)state;
    int missing = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        const op_info *o = &ops_table[op];
        if (!ops_has(op, OPF_PUBLIC) || !o->grad || o->grad == ops_grad_none ||
            covered(ops_name(op)))
            continue;
        print_error("op %s has a gradient rule but no gradcheck case\n", ops_name(op));
        missing++;
    }
    assert_int_equal(missing, 0);
}

/* ---- IR built by hand: ops the language reaches only through a builtin ----
 * The batch normalisation ops are internal (the language's batchnorm()
 * builds them), so their training step is built here: y =
 * batchnorm_apply(x, gain, bias, batchnorm_stats(x)), loss = sum(y * w)
 * with w a fed input.  The gradient nodes ad_minimize adds are run with
 * the CPU kernels, node by node, and checked against central differences
 * of the loss, as the table's cases are. */

typedef struct ir_run {
    float **buf;        /* per node id, NULL until run */
    unsigned char *own; /* buf[id] allocated here */
} ir_run;

static void ir_run_init(ir_run *r, int *bound, float **vals, int n_bound)
{
    r->buf = calloc((size_t)g->n_nodes, sizeof *r->buf);
    r->own = calloc((size_t)g->n_nodes, 1);
    for (int k = 0; k < n_bound; k++) r->buf[bound[k]] = vals[k];
}

static void ir_run_free(ir_run *r)
{
    for (int id = 0; id < g->n_nodes; id++)
        if (r->own[id]) free(r->buf[id]);
    free(r->buf), free(r->own);
}

static void run_kernel(const ir_node *n, int id, float *out, void **in)
{
    const ir_type *in_t[8];
    for (int k = 0; k < n->n_in; k++) in_t[k] = &g->nodes[n->in[k]].type;
    size_t sb = ops_table[n->op].scratch ? ops_table[n->op].scratch(g, id) : 0;
    void *scratch = sb ? calloc(1, sb) : NULL;
    kern_fault fault = {{0}};
    kern_args a = {.g = g,
                   .node = n,
                   .out = out,
                   .out_t = &n->type,
                   .n_in = n->n_in,
                   .in = in,
                   .in_t = in_t,
                   .scratch = scratch,
                   .scratch_task_bytes = sb,
                   .max_tasks = 1,
                   .fault = &fault};
    if (cpu_kernels[n->op](&a) != 0) fail_msg("%s: %s", ops_name(n->op), fault.msg);
    free(scratch);
}

/* Node id's value (f32), its inputs run first. */
static float *run_node(ir_run *r, int id)
{
    if (r->buf[id]) return r->buf[id];
    const ir_node *n = &g->nodes[id];
    int64_t ne = ir_numel(&n->type);
    float *out = calloc((size_t)(ne ? ne : 1), 4);
    r->buf[id] = out, r->own[id] = 1;
    if (n->op == OP_CONST) {
        for (int64_t i = 0; i < ne; i++)
            out[i] = n->cdata ? ((const float *)n->cdata)[i] : (float)n->attr.f[ATTR_CONST_VALUE];
        return out;
    }
    void *in[8];
    assert_true(n->n_in <= 8);
    for (int k = 0; k < n->n_in; k++) in[k] = run_node(r, n->in[k]);
    run_kernel(n, id, out, in);
    return out;
}

/* x, gain and bias are variables; w is fed. */
typedef struct bn_graph {
    int node[4]; /* x, gain, bias, w */
    float *val[4];
    int64_t n[4];
    int loss, train, stats;
} bn_graph;

static int bn_add(op_kind op, const int *in, int n_in)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = 1;
    a.f[ATTR_NORM_EPS] = 1e-5;
    return ir_add(g, op, in, n_in, &a, src, irfx_at);
}

static int bn_sum_all(int x)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = OP_AXIS_ALL;
    return ir_add(g, OP_SUM, &x, 1, &a, src, irfx_at);
}

static void bn_graph_build(bn_graph *b, const char *xt, const char *ct)
{
    b->node[0] = irfx_var("x", xt, IR_DEV(DEV_CPU, 0), 1);
    b->node[1] = irfx_var("gain", ct, IR_DEV(DEV_CPU, 0), 1);
    b->node[2] = irfx_var("bias", ct, IR_DEV(DEV_CPU, 0), 1);
    b->node[3] = irfx_input("w", xt);
    b->stats = bn_add(OP_BN_STATS, b->node, 1);
    int in[4] = {b->node[0], b->node[1], b->node[2], b->stats};
    int y = bn_add(OP_BATCHNORM, in, 4), yw[2] = {y, b->node[3]};
    b->loss = bn_sum_all(ir_add(g, OP_MUL, yw, 2, NULL, src, irfx_at));
    ad_optimizer o = {.kind = AD_SGD, .lr = 1.0};
    b->train = ad_minimize(g, b->loss, &o, NULL, src, irfx_at, NULL);
    if (diags.n_errors) fail_msg("%s", diags.v[0].msg);
    for (int k = 0; k < 4; k++) {
        b->n[k] = ir_numel(&g->nodes[b->node[k]].type);
        b->val[k] = calloc((size_t)b->n[k], 4);
        fill_values(b->val[k], (int)b->n[k], k == 1 ? POSITIVE : NORMAL);
    }
}

static double bn_graph_loss(bn_graph *b)
{
    ir_run r;
    ir_run_init(&r, b->node, b->val, 4);
    double l = run_node(&r, b->loss)[0];
    ir_run_free(&r);
    return l;
}

/* The gradient autodiff feeds variable node v's update (apply_sgd's in[1]). */
static int bn_grad_node(const bn_graph *b, int v)
{
    const ir_node *grp = &g->nodes[b->train];
    for (int k = 0; k < grp->n_in; k++)
        if (g->nodes[grp->in[k]].in[0] == v) return g->nodes[grp->in[k]].in[1];
    fail_msg("no update of node %d", v);
    return -1;
}

static double bn_check_var(bn_graph *b, int k, const float *analytic)
{
    double max_err = 0, max_num = 1e-6;
    for (int64_t i = 0; i < b->n[k]; i++) {
        float save = b->val[k][i];
        b->val[k][i] = (float)(save + EPS);
        double lp = bn_graph_loss(b);
        b->val[k][i] = (float)(save - EPS);
        double lm = bn_graph_loss(b);
        b->val[k][i] = save;
        double num = (lp - lm) / (2 * EPS);
        max_num = fabs(num) > max_num ? fabs(num) : max_num;
        max_err = fabs(num - analytic[i]) > max_err ? fabs(num - analytic[i]) : max_err;
    }
    return max_err / max_num;
}

static void check_bn_training(const char *xt, const char *ct)
{
    static const char *const names[3] = {"x", "gain", "bias"};
    bn_graph b;
    bn_graph_build(&b, xt, ct);
    ir_run r;
    ir_run_init(&r, b.node, b.val, 4);
    int dx = bn_grad_node(&b, b.node[0]);
    assert_int_equal(g->nodes[dx].op, OP_BN_GRAD);
    assert_int_equal(g->nodes[dx].attr.i[ATTR_BN_BATCH], 1); /* the stats are x's own */
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        double rel = bn_check_var(&b, k, run_node(&r, bn_grad_node(&b, b.node[k])));
        if (rel >= TOL) print_error("batchnorm %s: d/d%s relative error %.2e\n", xt, names[k], rel);
        bad += rel >= TOL;
    }
    ir_run_free(&r);
    for (int k = 0; k < 4; k++) free(b.val[k]);
    assert_int_equal(bad, 0);
}

static int bn_setup(void **state)
{
    (void)state;
    return irfx_open("batchnorm\n", (src_span){0, 9});
}

static void test_batchnorm_training_gradients_on_n_c(void **state)
{
    (void)state;
    check_bn_training("f32[6,3]", "f32[3]");
}

static void test_batchnorm_training_gradients_on_n_c_h_w(void **state)
{
    (void)state;
    check_bn_training("f32[2,3,2,3]", "f32[3]");
}

/* With statistics fed (evaluation's running ones), x's gradient is gain *
 * rstd * dy: batchnorm_grad with batch 0, nothing into the statistics. */
static void test_batchnorm_fixed_statistics_gradient(void **state)
{
    (void)state;
    int x = irfx_var("x", "f32[4,3]", IR_DEV(DEV_CPU, 0), 1);
    int gain = irfx_var("gain", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int in[4] = {x, gain, irfx_var("bias", "f32[3]", IR_DEV(DEV_CPU, 0), 1),
                 irfx_input("stats", "f32[2,3]")};
    int loss = bn_sum_all(bn_add(OP_BATCHNORM, in, 4));
    ad_optimizer o = {.kind = AD_SGD, .lr = 1.0};
    bn_graph b = {.train = ad_minimize(g, loss, &o, NULL, src, irfx_at, NULL)};
    assert_true(b.train >= 0);
    const ir_node *dx = &g->nodes[bn_grad_node(&b, x)];
    assert_int_equal(dx->op, OP_BN_GRAD);
    assert_int_equal(dx->attr.i[ATTR_BN_BATCH], 0);
    assert_int_equal(dx->in[2], gain);
    assert_int_equal(dx->in[3], in[3]);
    assert_int_equal(g->nodes[dx->in[4]].op, OP_BN_GRAD_PARAMS);
}

/* sum, mean and max over several axes against loops over x's values:
 * y[c] of x[a, c, h, w] with axis=[0, 2, 3] (keepdims: [1, C, 1, 1]),
 * axis=[0, 2] of the same x, which reshapes nothing, and global_avgpool. */
/* A session of the program text (seed 3), for the forward-value tests. */
typedef struct inline_run {
    gr_status *st;
    gr_program *p;
    gr_session *s;
} inline_run;

static inline_run open_text(const char *name, const char *text)
{
    inline_run r = {gr_status_new(), NULL, NULL};
    assert_gr_ok(gr_compile_string(name, text, strlen(text), NULL, &r.p, r.st), r.st);
    assert_gr_ok(gr_session_new(r.p, &(gr_session_options){.seed = 3}, &r.s, r.st), r.st);
    return r;
}

static void close_text(inline_run *r)
{
    gr_session_free(r->s);
    gr_program_free(r->p);
    gr_status_free(r->st);
}

static void fetch_reduction(gr_session *s, const char *name, float *out, size_t n, gr_status *st)
{
    gr_fetch f = {name, out, n * sizeof *out, NULL};
    assert_gr_ok(gr_run(s, name, NULL, 0, &f, 1, st), st);
}

/* The losses built from other ops, against their formulas in double:
 * sigmoid_xent at logits of +-50 (where log(1 + e^x) overflows in f32),
 * nll of log_softmax equal to softmax_xent, and label smoothing; and
 * where(), which never lets the value it does not pick (a NaN) through. */
static void test_losses_against_their_formulas(void **state)
{
    (void)state;
    static const char text[] = "x = [[50.0, -50.0, 0.5], [-2.0, 3.0, 0.0]]\n"
                               "z = [[1.0, 0.0, 0.25], [0.0, 1.0, 0.5]]\n"
                               "lab = cast([2, 1], dtype=\"i32\")\n"
                               "s = sigmoid_xent(x, z)\n"
                               "n = nll(log_softmax(x), lab)\n"
                               "x1 = softmax_xent(x, lab)\n"
                               "ls = softmax_xent(x, lab, label_smoothing=0.3)\n"
                               "w = where(x > 0.0, log(x), [[-1.0], [-2.0]])\n"
                               "rn = rmsnorm(x, [1.0, 2.0, 0.5], eps=0.001)\n";
    static const double x[2][3] = {{50, -50, 0.5}, {-2, 3, 0}},
                        z[2][3] = {{1, 0, 0.25}, {0, 1, 0.5}};
    static const int lab[2] = {2, 1};
    inline_run run = open_text("losses.graph", text);
    gr_session *s = run.s;
    gr_status *st = run.st;
    float sx[6], n[2], xe[2], ls[2], w[6], rn[6];
    fetch_reduction(s, "s", sx, 6, st);
    fetch_reduction(s, "n", n, 2, st);
    fetch_reduction(s, "x1", xe, 2, st);
    fetch_reduction(s, "ls", ls, 2, st);
    fetch_reduction(s, "w", w, 6, st); /* log of x <= 0 is NaN, and not picked */
    fetch_reduction(s, "rn", rn, 6, st);
    for (int r = 0; r < 2; r++) {
        double m = fmax(fmax(x[r][0], x[r][1]), x[r][2]), lse = 0, mean_lp = 0;
        for (int c = 0; c < 3; c++) lse += exp(x[r][c] - m);
        lse = m + log(lse);
        for (int c = 0; c < 3; c++) {
            double want = fmax(x[r][c], 0) - x[r][c] * z[r][c] + log1p(exp(-fabs(x[r][c])));
            assert_float_equal(sx[r * 3 + c], want, 1e-5 * (1 + fabs(want)));
            mean_lp += (x[r][c] - lse) / 3;
            assert_float_equal(w[r * 3 + c], x[r][c] > 0 ? log(x[r][c]) : -1.0 - r, 1e-6);
        }
        double ms = (x[r][0] * x[r][0] + x[r][1] * x[r][1] + x[r][2] * x[r][2]) / 3;
        for (int c = 0; c < 3; c++)
            assert_float_equal(rn[r * 3 + c],
                               x[r][c] / sqrt(ms + 0.001) *
                                   (c == 0   ? 1
                                    : c == 1 ? 2
                                             : 0.5),
                               1e-5);
        double xent = lse - x[r][lab[r]];
        assert_float_equal(n[r], xent, 1e-5 * (1 + xent));
        assert_float_equal(xe[r], xent, 1e-5 * (1 + xent));
        assert_float_equal(ls[r], 0.7 * xent - 0.3 * mean_lp, 1e-5 * (1 + xent));
    }
    close_text(&run);
}

/* lrn against TF's formula in double, across the channels (axis 1):
 * x / (bias + alpha * the sum of x^2 over channels c - r .. c + r)^beta,
 * with its arguments and with TF's defaults (r 5, bias 1, alpha 1, beta
 * 0.5: every channel of the 6 in the window). */
static void test_lrn_against_its_formula(void **state)
{
    (void)state;
    static const char text[] = "var x = normal([2, 6, 3, 2])\n"
                               "l = lrn(x, depth_radius=1, bias=2.0, alpha=0.3, beta=0.75)\n"
                               "d = lrn(x)\n";
    inline_run run = open_text("lrn.graph", text);
    float x[2][6][3][2], l[72], d[72];
    assert_gr_ok(gr_variable_read(run.s, "x", x, sizeof x, run.st), run.st);
    fetch_reduction(run.s, "l", l, 72, run.st);
    fetch_reduction(run.s, "d", d, 72, run.st);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 6; c++)
            for (int p = 0; p < 6; p++) {
                double s1 = 0, s5 = 0, v = x[n][c][p / 2][p % 2];
                for (int j = 0; j < 6; j++) {
                    double sq = (double)x[n][j][p / 2][p % 2] * x[n][j][p / 2][p % 2];
                    s1 += abs(j - c) <= 1 ? sq : 0;
                    s5 += sq;
                }
                double want1 = v / pow(2.0 + 0.3 * s1, 0.75), want5 = v / sqrt(1.0 + s5);
                assert_float_equal(l[(n * 6 + c) * 6 + p], want1, 1e-5 * (1 + fabs(want1)));
                assert_float_equal(d[(n * 6 + c) * 6 + p], want5, 1e-5 * (1 + fabs(want5)));
            }
    close_text(&run);
}

/* rope against HF's Llama in double: q * cos + rotate_half(q) * sin, with
 * rotate_half(q) = [-q[D/2:], q[:D/2]] and the angles t * inv_freq
 * repeated over both halves, inv_freq = base^(-arange(0, D, 2) / D), t the
 * position on axis -2; with base= and with its default 10000. */
static void test_rope_against_its_formula(void **state)
{
    (void)state;
    static const char text[] = "var q = normal([2, 3, 5, 6])\n"
                               "r = rope(q, base=100.0)\n"
                               "d = rope(q)\n";
    inline_run run = open_text("rope.graph", text);
    float q[2][3][5][6], r[180], d[180];
    assert_gr_ok(gr_variable_read(run.s, "q", q, sizeof q, run.st), run.st);
    fetch_reduction(run.s, "r", r, 180, run.st);
    fetch_reduction(run.s, "d", d, 180, run.st);
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 3; h++)
            for (int t = 0; t < 5; t++)
                for (int i = 0; i < 6; i++) {
                    const float *x = q[b][h][t];
                    double rot = i < 3 ? -(double)x[i + 3] : x[i - 3];
                    double a1 = t * pow(100.0, -(2.0 * (i % 3)) / 6);
                    double a2 = t * pow(10000.0, -(2.0 * (i % 3)) / 6);
                    double w1 = x[i] * cos(a1) + rot * sin(a1), w2 = x[i] * cos(a2) + rot * sin(a2);
                    int k = ((b * 3 + h) * 5 + t) * 6 + i;
                    assert_float_equal(r[k], w1, 1e-5 * (1 + fabs(w1)));
                    assert_float_equal(d[k], w2, 1e-5 * (1 + fabs(w2)));
                }
    close_text(&run);
}

/* groupnorm against PyTorch's GroupNorm in double: each example's group of
 * channels (2 of the 6 here), at every position, normalised with its mean
 * and biased variance, then gain and bias per channel. */
static void test_groupnorm_against_its_formula(void **state)
{
    (void)state;
    static const char text[] = "var x = normal([2, 6, 2, 3])\n"
                               "g = groupnorm(x, [1.0, 2.0, 0.5, -1.0, 1.5, 0.25],\n"
                               "              [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], groups=3, eps=0.01)\n"
                               "i = groupnorm(x, ones([6]), zeros([6]), groups=6)\n";
    static const double gain[6] = {1, 2, 0.5, -1, 1.5, 0.25}, bias[6] = {.1, .2, .3, .4, .5, .6};
    inline_run run = open_text("groupnorm.graph", text);
    float x[2][6][6], gn[72], in[72];
    assert_gr_ok(gr_variable_read(run.s, "x", x, sizeof x, run.st), run.st);
    fetch_reduction(run.s, "g", gn, 72, run.st);
    fetch_reduction(run.s, "i", in, 72, run.st);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 6; c++) {
            double m = 0, v = 0, mi = 0, vi = 0;
            for (int k = c / 2 * 2; k < c / 2 * 2 + 2; k++)
                for (int p = 0; p < 6; p++) m += x[n][k][p] / 12.0;
            for (int k = c / 2 * 2; k < c / 2 * 2 + 2; k++)
                for (int p = 0; p < 6; p++) v += (x[n][k][p] - m) * (x[n][k][p] - m) / 12.0;
            for (int p = 0; p < 6; p++) mi += x[n][c][p] / 6.0;
            for (int p = 0; p < 6; p++) vi += (x[n][c][p] - mi) * (x[n][c][p] - mi) / 6.0;
            for (int p = 0; p < 6; p++) {
                double want = (x[n][c][p] - m) / sqrt(v + 0.01) * gain[c] + bias[c];
                double inst = (x[n][c][p] - mi) / sqrt(vi + 1e-5); /* groups=C: instance norm */
                assert_float_equal(gn[(n * 6 + c) * 6 + p], want, 1e-5 * (1 + fabs(want)));
                assert_float_equal(in[(n * 6 + c) * 6 + p], inst, 1e-4 * (1 + fabs(inst)));
            }
        }
    close_text(&run);
}

/* Unit j of a PyTorch nn.LSTMCell step in double: gates = x W_ih^T + b_ih +
 * h W_hh^T + b_hh, chunked i, f, g, o; here W_ih^T = w[0:X], W_hh^T =
 * w[X:X+H], b_ih = b and b_hh = 0. */
enum { LX = 3, LH = 3, LB = 2, LT = 4 };
static void lstm_ref_step(const float w[LX + LH][4 * LH], const float *b, const double *x,
                          double h[LB][LH], double c[LB][LH])
{
    double hn[LB][LH];
    for (int r = 0; r < LB; r++)
        for (int j = 0; j < LH; j++) {
            double z[4];
            for (int k = 0; k < 4; k++) {
                z[k] = b[k * LH + j];
                for (int q = 0; q < LX; q++) z[k] += x[r * LX + q] * w[q][k * LH + j];
                for (int q = 0; q < LH; q++) z[k] += h[r][q] * w[LX + q][k * LH + j];
            }
            double i = 1 / (1 + exp(-z[0])), f = 1 / (1 + exp(-z[1])), gt = tanh(z[2]),
                   o = 1 / (1 + exp(-z[3]));
            c[r][j] = f * c[r][j] + i * gt;
            hn[r][j] = o * tanh(c[r][j]);
        }
    memcpy(h, hn, sizeof hn);
}

/* Four steps of lstm() unrolled by a for loop, and the same steps with
 * lstm_cell on the user's own GEMM, against PyTorch's LSTMCell formula in
 * double (a nonzero first state; the gates i, f, g, o in that order). */
static void test_lstm_against_its_formula(void **state)
{
    (void)state;
    static const char text[] = "var w = normal([6, 12], std=0.6)\nvar b = normal([12], std=0.5)\n"
                               "var xs = normal([4, 2, 3])\nvar s0 = normal([2, 6])\n"
                               "s = s0\nu = s0\n"
                               "for t in 0..4 {\n"
                               "  x = reshape(slice(xs, axis=0, begin=t, end=t + 1), [2, 3])\n"
                               "  s = lstm(x, s, w, b)\n"
                               "  u = lstm_cell(concat([x, lstm_h(u)], axis=1) @ w + b, u)\n"
                               "  hs[t] = lstm_h(s)\n"
                               "}\n"
                               "h = reshape(hs, [4, 2, 3])\nc = lstm_c(s)\nsu = u\n";
    inline_run run = open_text("lstm.graph", text);
    float w[LX + LH][4 * LH], b[4 * LH], xs[LT][LB][LX], s0[LB][2 * LH];
    float h[LT][LB][LH], c[LB][LH], su[LB][2 * LH];
    assert_gr_ok(gr_variable_read(run.s, "w", w, sizeof w, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "b", b, sizeof b, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "xs", xs, sizeof xs, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "s0", s0, sizeof s0, run.st), run.st);
    fetch_reduction(run.s, "h", &h[0][0][0], LT * LB * LH, run.st);
    fetch_reduction(run.s, "c", &c[0][0], LB * LH, run.st);
    fetch_reduction(run.s, "su", &su[0][0], LB * 2 * LH, run.st);
    double rh[LB][LH], rc[LB][LH], x[LB * LX];
    for (int r = 0; r < LB; r++)
        for (int j = 0; j < LH; j++) rh[r][j] = s0[r][j], rc[r][j] = s0[r][LH + j];
    for (int t = 0; t < LT; t++) {
        for (int k = 0; k < LB * LX; k++) x[k] = xs[t][k / LX][k % LX];
        lstm_ref_step(w, b, x, rh, rc);
        for (int r = 0; r < LB; r++)
            for (int j = 0; j < LH; j++)
                assert_float_equal(h[t][r][j], rh[r][j], 1e-5 * (1 + fabs(rh[r][j])));
    }
    for (int r = 0; r < LB; r++)
        for (int j = 0; j < LH; j++) {
            assert_float_equal(c[r][j], rc[r][j], 1e-5 * (1 + fabs(rc[r][j])));
            assert_float_equal(su[r][j], rh[r][j], 1e-5 * (1 + fabs(rh[r][j])));
            assert_float_equal(su[r][LH + j], rc[r][j], 1e-5 * (1 + fabs(rc[r][j])));
        }
    close_text(&run);
}

/* A step of PyTorch's nn.GRUCell in double: gx = x W_ih^T + b_ih, gh = h
 * W_hh^T + b_hh chunked r, z, n; n = tanh(gx_n + r gh_n), h' = (1 - z) n +
 * z h.  Here W_ih^T = w_ih [X, 3H], W_hh^T = w_hh [H, 3H]. */
static void gru_ref_step(const float wi[LX][3 * LH], const float wh[LH][3 * LH], const float *bi,
                         const float *bh, const double *x, double h[LB][LH])
{
    double hn[LB][LH];
    for (int r = 0; r < LB; r++)
        for (int j = 0; j < LH; j++) {
            double gx[3], gh[3];
            for (int k = 0; k < 3; k++) {
                gx[k] = bi[k * LH + j];
                gh[k] = bh[k * LH + j];
                for (int q = 0; q < LX; q++) gx[k] += x[r * LX + q] * wi[q][k * LH + j];
                for (int q = 0; q < LH; q++) gh[k] += h[r][q] * wh[q][k * LH + j];
            }
            double rr = 1 / (1 + exp(-(gx[0] + gh[0]))), z = 1 / (1 + exp(-(gx[1] + gh[1])));
            double n = tanh(gx[2] + rr * gh[2]);
            hn[r][j] = (1 - z) * n + z * h[r][j];
        }
    memcpy(h, hn, sizeof hn);
}

/* Four steps of gru() unrolled by a for loop against PyTorch's GRUCell
 * formula in double (a nonzero first state, both biases). */
static void test_gru_against_its_formula(void **state)
{
    (void)state;
    static const char text[] =
        "var wi = normal([3, 9], std=0.6)\nvar wh = normal([3, 9], std=0.6)\n"
        "var bi = normal([9], std=0.5)\nvar bh = normal([9], std=0.5)\n"
        "var xs = normal([4, 2, 3])\nvar h0 = normal([2, 3])\n"
        "h = h0\n"
        "for t in 0..4 {\n"
        "  h = gru(reshape(slice(xs, axis=0, begin=t, end=t + 1), [2, 3]), h, wi, wh, bi, bh)\n"
        "  hs[t] = h\n"
        "}\n"
        "all = reshape(hs, [4, 2, 3])\n";
    inline_run run = open_text("gru.graph", text);
    float wi[LX][3 * LH], wh[LH][3 * LH], bi[3 * LH], bh[3 * LH], xs[LT][LB][LX], h0[LB][LH];
    float got[LT][LB][LH];
    assert_gr_ok(gr_variable_read(run.s, "wi", wi, sizeof wi, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "wh", wh, sizeof wh, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "bi", bi, sizeof bi, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "bh", bh, sizeof bh, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "xs", xs, sizeof xs, run.st), run.st);
    assert_gr_ok(gr_variable_read(run.s, "h0", h0, sizeof h0, run.st), run.st);
    fetch_reduction(run.s, "all", &got[0][0][0], LT * LB * LH, run.st);
    double rh[LB][LH], x[LB * LX];
    for (int r = 0; r < LB; r++)
        for (int j = 0; j < LH; j++) rh[r][j] = h0[r][j];
    for (int t = 0; t < LT; t++) {
        for (int k = 0; k < LB * LX; k++) x[k] = xs[t][k / LX][k % LX];
        gru_ref_step(wi, wh, bi, bh, x, rh);
        for (int r = 0; r < LB; r++)
            for (int j = 0; j < LH; j++)
                assert_float_equal(got[t][r][j], rh[r][j], 1e-5 * (1 + fabs(rh[r][j])));
    }
    close_text(&run);
}

/* Program text's targets seq_NAME and loop_NAME, for each of names[] (of
 * sizes[] values), equal to f32 rounding: a sequence form (its GEMMs
 * split w's rows) against the for loop it replaces, not bit for bit. */
static void assert_seq_is_loop(const char *text, const char *const *names, const size_t *sizes,
                               int n)
{
    inline_run run = open_text("seq.graph", text);
    for (int k = 0; k < n; k++) {
        float x[MAX_ELEMS], y[MAX_ELEMS];
        char a[32], b[32];
        assert_true(sizes[k] <= MAX_ELEMS);
        snprintf(a, sizeof a, "seq_%s", names[k]);
        snprintf(b, sizeof b, "loop_%s", names[k]);
        fetch_reduction(run.s, a, x, sizes[k], run.st);
        fetch_reduction(run.s, b, y, sizes[k], run.st);
        for (size_t i = 0; i < sizes[k]; i++)
            assert_float_equal(x[i], y[i], 1e-5 * (1 + fabs(y[i])));
    }
    close_text(&run);
}

/* lstm_seq(xs, s0, w, b) against the for loop of lstm() it replaces: every
 * h, the last state, and the gradients of a loss of both with respect to
 * w, b, xs and s0. */
static void test_lstm_seq_equals_the_for_loop(void **state)
{
    (void)state;
    static const char text[] =
        "var w = normal([6, 12], std=0.6)\nvar b = normal([12], std=0.5)\n"
        "var xs = normal([2, 4, 3])\nvar s0 = normal([2, 6])\n"
        "s = s0\n"
        "for t in 0..4 {\n"
        "  s = lstm(reshape(slice(xs, axis=1, begin=t, end=t + 1), [2, 3]), s, w, b)\n"
        "  hs[t] = lstm_h(s)\n"
        "}\n"
        "loop_h = transpose(hs, perm=[1, 0, 2])\nloop_s = s\n"
        "r = lstm_seq(xs, s0, w, b)\nseq_h = r[0]\nseq_s = r[1]\n"
        "gl = gradients(sum(loop_h * loop_h) + sum(lstm_c(loop_s)), vars=[w, b, xs, s0])\n"
        "gs = gradients(sum(seq_h * seq_h) + sum(lstm_c(seq_s)), vars=[w, b, xs, s0])\n"
        "loop_w = gl[0][0]\nloop_b = gl[1][0]\nloop_x = gl[2][0]\nloop_s0 = gl[3][0]\n"
        "seq_w = gs[0][0]\nseq_b = gs[1][0]\nseq_x = gs[2][0]\nseq_s0 = gs[3][0]\n";
    static const char *const names[] = {"h", "s", "w", "b", "x", "s0"};
    static const size_t sizes[] = {2 * 4 * 3, 2 * 6, 6 * 12, 12, 2 * 4 * 3, 2 * 6};
    assert_seq_is_loop(text, names, sizes, 6);
}

/* gru_seq(xs, h0, ...) against its for loop of gru(): every h, the last,
 * and the gradients with respect to the weights, a bias, xs and h0. */
static void test_gru_seq_equals_the_for_loop(void **state)
{
    (void)state;
    static const char text[] =
        "var wi = normal([3, 9], std=0.6)\nvar wh = normal([3, 9], std=0.6)\n"
        "var bi = normal([9], std=0.5)\nvar bh = normal([9], std=0.5)\n"
        "var xs = normal([2, 4, 3])\nvar h0 = normal([2, 3])\n"
        "h = h0\n"
        "for t in 0..4 {\n"
        "  h = gru(reshape(slice(xs, axis=1, begin=t, end=t + 1), [2, 3]), h, wi, wh, bi, bh)\n"
        "  hs[t] = h\n"
        "}\n"
        "loop_h = transpose(hs, perm=[1, 0, 2])\nloop_last = h\n"
        "r = gru_seq(xs, h0, wi, wh, bi, bh)\nseq_h = r[0]\nseq_last = r[1]\n"
        "gl = gradients(sum(loop_h * loop_h), vars=[wi, wh, bh, xs, h0])\n"
        "gs = gradients(sum(seq_h * seq_h), vars=[wi, wh, bh, xs, h0])\n"
        "loop_wi = gl[0][0]\nloop_wh = gl[1][0]\nloop_bh = gl[2][0]\n"
        "loop_x = gl[3][0]\nloop_h0 = gl[4][0]\n"
        "seq_wi = gs[0][0]\nseq_wh = gs[1][0]\nseq_bh = gs[2][0]\n"
        "seq_x = gs[3][0]\nseq_h0 = gs[4][0]\n";
    static const char *const names[] = {"h", "last", "wi", "wh", "bh", "x", "h0"};
    static const size_t sizes[] = {2 * 4 * 3, 2 * 3, 3 * 9, 3 * 9, 9, 2 * 4 * 3, 2 * 3};
    assert_seq_is_loop(text, names, sizes, 7);
}

static void test_reductions_over_several_axes(void **state)
{
    (void)state;
    static const char text[] = "var x = normal([2, 3, 4, 5])\n"
                               "a = mean(x, axis=[0, 2, 3], keepdims=true)\n"
                               "b = sum(x, axis=[0, 2])\n"
                               "c = max(x, axis=[3, 0])\n"
                               "d = global_avgpool(x)\n";
    inline_run run = open_text("axes.graph", text);
    gr_session *s = run.s;
    gr_status *st = run.st;
    float x[2][3][4][5], a[3], b[3 * 5], c[3 * 4], d[2 * 3];
    assert_gr_ok(gr_variable_read(s, "x", x, sizeof x, st), st);
    fetch_reduction(s, "a", a, 3, st);
    fetch_reduction(s, "b", b, 15, st);
    fetch_reduction(s, "c", c, 12, st);
    fetch_reduction(s, "d", d, 6, st);
    for (int k = 0; k < 3; k++) {
        double m = 0, sb[5] = {0}, mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int n = 0; n < 2; n++)
            for (int h = 0; h < 4; h++)
                for (int w = 0; w < 5; w++) {
                    m += x[n][k][h][w] / 40.0;
                    sb[w] += x[n][k][h][w];
                    mx[h] = fmax(mx[h], x[n][k][h][w]);
                }
        assert_float_equal(a[k], m, 1e-5);
        for (int w = 0; w < 5; w++) assert_float_equal(b[k * 5 + w], sb[w], 1e-5);
        for (int h = 0; h < 4; h++) assert_float_equal(c[k * 4 + h], mx[h], 0);
        for (int n = 0; n < 2; n++) {
            double plane = 0;
            for (int h = 0; h < 4; h++)
                for (int w = 0; w < 5; w++) plane += x[n][k][h][w] / 20.0;
            assert_float_equal(d[n * 3 + k], plane, 1e-5);
        }
    }
    close_text(&run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reductions_over_several_axes),
        cmocka_unit_test(test_losses_against_their_formulas),
        cmocka_unit_test(test_lrn_against_its_formula),
        cmocka_unit_test(test_rope_against_its_formula),
        cmocka_unit_test(test_groupnorm_against_its_formula),
        cmocka_unit_test(test_lstm_against_its_formula),
        cmocka_unit_test(test_gru_against_its_formula),
        cmocka_unit_test(test_lstm_seq_equals_the_for_loop),
        cmocka_unit_test(test_gru_seq_equals_the_for_loop),
        cmocka_unit_test(test_every_gradient_matches_finite_differences),
        cmocka_unit_test(test_every_differentiable_op_has_a_case),
        cmocka_unit_test_setup_teardown(test_batchnorm_training_gradients_on_n_c, bn_setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_batchnorm_training_gradients_on_n_c_h_w, bn_setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_batchnorm_fixed_statistics_gradient, bn_setup,
                                        irfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
