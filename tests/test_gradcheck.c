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
 * last test checks against the registry. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/ops_impl.h"
#include "graphrun.h"
#include "gr_test.h"

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
    {"identity", "var x0 = zeros([3, 5])", "identity(x0)", {0}},
    {"softmax", "var x0 = zeros([3, 5])", "softmax(x0)", {0}},
    {"log_softmax", "var x0 = zeros([3, 5])", "log_softmax(x0)", {0}},
    {"softmax_xent",
     "var x0 = zeros([4, 5])\nlab = cast([1, 0, 4, 2], dtype=\"i32\")",
     "softmax_xent(x0, lab)",
     {0}},
    {"mse", "var x0 = zeros([3, 4])\nvar x1 = zeros([3, 4])", "mse(x0, x1)", {0}},
    {"sum", "var x0 = zeros([3, 4])", "sum(x0)", {0}},
    {"sum", "var x0 = zeros([3, 4])", "sum(x0, axis=1)", {0}},
    {"mean", "var x0 = zeros([3, 4])", "mean(x0, axis=0, keepdims=true)", {0}},
    {"mean", "var x0 = zeros([2, 3, 4])", "mean(x0, axis=-1)", {0}},
    {"max", "var x0 = zeros([3, 4])", "max(x0, axis=1)", {SPACED}},
    {"max", "var x0 = zeros([3, 4])", "max(x0)", {SPACED}},
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_gradient_matches_finite_differences),
        cmocka_unit_test(test_every_differentiable_op_has_a_case),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
