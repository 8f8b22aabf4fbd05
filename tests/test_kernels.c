/* test_kernels.c - every CPU kernel against a naive double-precision
 * reference written here, on random shapes with odd sizes; plus the thread
 * pool and the device vtable.  Nodes and types are built by hand, so this
 * test needs nothing from compiler/. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/conv_algo.h"
#include "devices/cpu/cpu.h"
#include "runtime/runtime.h"

#define TOL 1e-5

/* ---- helpers ---- */

static uint64_t rng_state = 0x1234567887654321ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() % 1000001) / 1e6f;
}

static const int64_t odd_sizes[] = {1, 3, 7, 13, 31, 2, 5};
static int64_t rsize(void)
{
    return odd_sizes[rnd() % 7];
}

static ir_type ty(ir_dtype dt, int rank, ...)
{
    ir_type t = {.dtype = dt, .rank = rank};
    va_list ap;
    va_start(ap, rank);
    for (int d = 0; d < rank; d++) t.dim[d] = va_arg(ap, int64_t);
    va_end(ap);
    return t;
}

static int64_t numel(const ir_type *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->dim[d];
    return n;
}

static float *falloc(const ir_type *t)
{
    int64_t n = numel(t);
    float *p = calloc((size_t)(n ? n : 1), 4);
    assert_non_null(p);
    return p;
}

static float *frandom(const ir_type *t, float lo, float hi)
{
    float *p = falloc(t);
    for (int64_t i = 0; i < numel(t); i++) p[i] = frand(lo, hi);
    return p;
}

static double *dalloc(int64_t n)
{
    return calloc((size_t)(n ? n : 1), sizeof(double));
}

/* A kernel call: node, types and buffers by hand. */
typedef struct call {
    ir_node node;
    ir_type out_t;
    void *out;
    int n_in;
    void *in[8];
    const ir_type *in_t[8];
    cpu_pool *pool;
    void *scratch;
    size_t task_bytes;
    int max_tasks;
    uint64_t seed, step;
    kern_fault fault;
} call;

static void call_init(call *c, op_kind op, const ir_type *out_t, void *out)
{
    memset(c, 0, sizeof *c);
    c->node.op = op;
    c->out_t = *out_t;
    c->out = out;
    c->max_tasks = 1;
}

static void call_in(call *c, void *buf, const ir_type *t)
{
    c->in[c->n_in] = buf;
    c->in_t[c->n_in] = t;
    c->n_in++;
    c->node.n_in = c->n_in;
}

/* Runs the kernel; returns its status (0, or -1 with c->fault.msg set). */
static int call_status(call *c)
{
    kern_args a = {.node = &c->node,
                   .out = c->out,
                   .out_t = &c->out_t,
                   .n_in = c->n_in,
                   .in = c->in,
                   .in_t = c->in_t,
                   .scratch = c->scratch,
                   .scratch_task_bytes = c->task_bytes,
                   .max_tasks = c->max_tasks,
                   .pool = c->pool,
                   .seed = c->seed,
                   .step = c->step,
                   .fault = &c->fault};
    kernel_fn k = cpu_kernels[c->node.op];
    assert_non_null(k);
    return k(&a);
}

static void call_run(call *c)
{
    if (call_status(c) != 0) fail_msg("%s faulted: %s", ops_name(c->node.op), c->fault.msg);
}

/* Fails with the first element that is off by more than tol relative to
 * max(1, |ref|, scale). */
static void check_close_s(const float *got, const double *ref, int64_t n, double tol, double scale,
                          const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double m = fabs(ref[i]) > 1.0 ? fabs(ref[i]) : 1.0;
        if (scale > m) m = scale;
        if (!(fabs((double)got[i] - ref[i]) <= tol * m)) {
            print_error("%s: element %lld got %.9g want %.9g\n", what, (long long)i, (double)got[i],
                        ref[i]);
            fail();
        }
    }
}

static void check_close(const float *got, const double *ref, int64_t n, const char *what)
{
    check_close_s(got, ref, n, TOL, 1.0, what);
}

/* Coordinates of flat index i in t, right-aligned into rank r. */
static void unravel(int64_t i, const ir_type *t, int64_t *c)
{
    for (int d = t->rank - 1; d >= 0; d--) {
        c[d] = i % t->dim[d];
        i /= t->dim[d];
    }
}

/* Flat index into t of output coordinates c (rank r), numpy broadcasting. */
static int64_t bindex(const int64_t *c, int r, const ir_type *t)
{
    int64_t idx = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t cd = c[d + r - t->rank];
        idx = idx * t->dim[d] + (t->dim[d] == 1 ? 0 : cd);
    }
    return idx;
}

static cpu_pool *pool2;

static int setup(void **state)
{
    (void)state;
    cpu_blas_init();
    pool2 = cpu_pool_new(2);
    return pool2 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cpu_pool_free(pool2);
    return 0;
}

/* ---- broadcasting binaries ---- */

static double ref_bin(op_kind op, double x, double y)
{
    switch (op) {
    case OP_ADD:
        return x + y;
    case OP_SUB:
        return x - y;
    case OP_MUL:
        return x * y;
    case OP_DIV:
        return x / y;
    case OP_MAXIMUM:
        return x > y ? x : y;
    case OP_MINIMUM:
        return x < y ? x : y;
    case OP_POW:
        return pow(x, y); /* check_binary gives pow a positive base */
    case OP_EQ:
        return x == y;
    case OP_NE:
        return x != y;
    case OP_LT:
        return x < y;
    case OP_GT:
        return x > y;
    case OP_LE:
        return x <= y;
    default:
        return x >= y;
    }
}

/* Output shape of numpy broadcasting a and b. */
static ir_type bshape(const ir_type *a, const ir_type *b, ir_dtype dt)
{
    ir_type o = {.dtype = dt, .rank = a->rank > b->rank ? a->rank : b->rank};
    for (int d = 0; d < o.rank; d++) {
        int da = d - (o.rank - a->rank), db = d - (o.rank - b->rank);
        int64_t x = da >= 0 ? a->dim[da] : 1, y = db >= 0 ? b->dim[db] : 1;
        o.dim[d] = x > y ? x : y;
    }
    return o;
}

/* Values from a small set so comparisons see ties; b never near 0. */
static void fill_operand(void *p, const ir_type *t, int is_b)
{
    for (int64_t i = 0; i < numel(t); i++) {
        if (t->dtype == DT_I32) {
            ((int32_t *)p)[i] = (int32_t)(rnd() % 7) - 3;
        } else {
            float v = (float)(int)(rnd() % 9) * 0.5f - 2.0f + (rnd() % 2 ? 0.0f : frand(0, 1));
            if (is_b && fabsf(v) < 0.25f) v = 0.75f;
            ((float *)p)[i] = v;
        }
    }
}

static double elem(const void *p, ir_dtype dt, int64_t i)
{
    return dt == DT_I32 ? (double)((const int32_t *)p)[i] : (double)((const float *)p)[i];
}

static void check_binary(op_kind op, const ir_type *at, const ir_type *bt, cpu_pool *pool)
{
    int cmp = op >= OP_EQ && op <= OP_GE;
    ir_type ot = bshape(at, bt, cmp ? DT_F32 : at->dtype);
    void *a = falloc(at), *b = falloc(bt), *out = falloc(&ot);
    fill_operand(a, at, 0);
    fill_operand(b, bt, 1);
    for (int64_t i = 0; op == OP_POW && i < numel(at); i++)
        ((float *)a)[i] = fabsf(((float *)a)[i]) + 0.5f;
    call c;
    call_init(&c, op, &ot, out);
    call_in(&c, a, at);
    call_in(&c, b, bt);
    c.pool = pool;
    call_run(&c);
    int64_t n = numel(&ot), co[IR_MAX_DIMS];
    double *ref = dalloc(n);
    float *got = falloc(&ot);
    for (int64_t i = 0; i < n; i++) {
        unravel(i, &ot, co);
        double x = elem(a, at->dtype, bindex(co, ot.rank, at));
        double y = elem(b, bt->dtype, bindex(co, ot.rank, bt));
        ref[i] = ref_bin(op, x, y);
        if (ot.dtype == DT_I32 && op == OP_DIV) ref[i] = y == 0 ? 0 : trunc(x / y);
        got[i] = (float)elem(out, ot.dtype, i);
    }
    check_close(got, ref, n, "binary");
    free(a), free(b), free(out), free(ref), free(got);
}

static void test_binary_all_broadcast_patterns(void **state)
{
    (void)state;
    for (op_kind op = OP_ADD; op <= OP_GE; op++) {
        for (int rep = 0; rep < 6; rep++) {
            int64_t m = rsize(), n = rsize(), N = rsize(), C = rsize(), H = rsize(), W = rsize();
            ir_type same = ty(DT_F32, 2, m, n), sc = ty(DT_F32, 0), row = ty(DT_F32, 1, n);
            ir_type x4 = ty(DT_F32, 4, N, C, H, W), ch = ty(DT_F32, 4, (int64_t)1, C, 1L, 1L);
            ir_type g1 = ty(DT_F32, 4, N, 1L, H, 1L), g2 = ty(DT_F32, 3, C, 1L, W);
            check_binary(op, &same, &same, NULL);
            check_binary(op, &same, &sc, NULL);
            check_binary(op, &sc, &same, NULL);
            check_binary(op, &same, &row, NULL);
            check_binary(op, &row, &same, NULL);
            check_binary(op, &x4, &ch, NULL);
            check_binary(op, &ch, &x4, NULL);
            check_binary(op, &g1, &g2, NULL);
            check_binary(op, &g2, &g1, NULL);
            check_binary(op, &sc, &sc, NULL);
        }
    }
}

static void test_binary_i32_and_comparisons(void **state)
{
    (void)state;
    for (op_kind op = OP_ADD; op <= OP_GE; op++) {
        if (op == OP_POW) continue; /* f32 only */
        ir_type a = ty(DT_I32, 3, 3L, 1L, 7L), b = ty(DT_I32, 2, 5L, 7L), s = ty(DT_I32, 0);
        check_binary(op, &a, &b, NULL);
        check_binary(op, &b, &s, NULL);
        check_binary(op, &a, &a, NULL);
    }
}

static void test_binary_large_split_over_pool(void **state)
{
    (void)state;
    ir_type x = ty(DT_F32, 4, 7L, 13L, 31L, 29L), ch = ty(DT_F32, 4, 1L, 13L, 1L, 1L);
    ir_type m = ty(DT_F32, 2, 301L, 331L), r = ty(DT_F32, 1, 331L), s = ty(DT_F32, 0);
    for (op_kind op = OP_ADD; op <= OP_DIV; op++) {
        check_binary(op, &x, &ch, pool2);
        check_binary(op, &m, &r, pool2);
        check_binary(op, &m, &m, pool2);
        check_binary(op, &s, &m, pool2);
    }
}

/* ---- unary and activation gradients ---- */

static double ref_unary(op_kind op, double x)
{
    switch (op) {
    case OP_NEG:
        return -x;
    case OP_EXP:
        return exp(x);
    case OP_LOG:
        return log(x);
    case OP_SQRT:
        return sqrt(x);
    case OP_RELU:
        return x > 0 ? x : 0;
    case OP_SIGMOID:
        return 1 / (1 + exp(-x));
    case OP_TANH:
        return tanh(x);
    case OP_GELU:
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case OP_ABS:
        return fabs(x);
    case OP_SIN:
        return sin(x);
    case OP_COS:
        return cos(x);
    case OP_SOFTPLUS: /* the naive forms, in double: fine at |x| <= 8 */
        return log(1 + exp(x));
    case OP_LOG_SIGMOID:
        return -log(1 + exp(-x));
    case OP_SILU:
        return x / (1 + exp(-x));
    case OP_ELU:
        return x > 0 ? x : exp(x) - 1;
    default:
        return x;
    }
}

/* The activation gradients' references; gelu's is the derivative of the
 * reference gelu, by central differences (error ~1e-10). */
static double ref_act_grad(op_kind op, double dy, double v)
{
    switch (op) {
    case OP_RELU_GRAD:
        return v > 0 ? dy : 0;
    case OP_SIGMOID_GRAD:
        return dy * v * (1 - v);
    case OP_TANH_GRAD:
        return dy * (1 - v * v);
    case OP_ABS_GRAD:
        return v > 0 ? dy : v < 0 ? -dy : 0;
    case OP_SOFTPLUS_GRAD:
        return dy / (1 + exp(-v));
    case OP_LOG_SIGMOID_GRAD:
        return dy / (1 + exp(v));
    case OP_SILU_GRAD: {
        double s = 1 / (1 + exp(-v));
        return dy * (s + v * s * (1 - s));
    }
    case OP_ELU_GRAD: /* v = y */
        return v > 0 ? dy : dy * (v + 1);
    default: /* gelu_grad: v = x */
        return dy * (ref_unary(OP_GELU, v + 1e-5) - ref_unary(OP_GELU, v - 1e-5)) / 2e-5;
    }
}

static void test_unary_ops(void **state)
{
    (void)state;
    op_kind ops[] = {OP_NEG,      OP_EXP,         OP_LOG,      OP_SQRT, OP_RELU, OP_SIGMOID,
                     OP_TANH,     OP_GELU,        OP_IDENTITY, OP_ABS,  OP_SIN,  OP_COS,
                     OP_SOFTPLUS, OP_LOG_SIGMOID, OP_SILU,     OP_ELU};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        for (int big = 0; big < 2; big++) {
            ir_type t = big ? ty(DT_F32, 2, 401L, 333L) : ty(DT_F32, 3, rsize(), rsize(), 3L);
            int pos = ops[k] == OP_LOG || ops[k] == OP_SQRT;
            float *x = frandom(&t, pos ? 0.01f : -8.0f, 8.0f), *y = falloc(&t);
            call c;
            call_init(&c, ops[k], &t, y);
            call_in(&c, x, &t);
            c.pool = big ? pool2 : NULL;
            call_run(&c);
            double *ref = dalloc(numel(&t));
            for (int64_t i = 0; i < numel(&t); i++) ref[i] = ref_unary(ops[k], x[i]);
            check_close(y, ref, numel(&t), "unary");
            free(x), free(y), free(ref);
        }
    }
}

/* The stable forms (devices/act.h) where the naive ones overflow:
 * log(1 + e^100) is inf in f32, softplus(100) is 100. */
static float unary_at(op_kind op, float x)
{
    ir_type t = ty(DT_F32, 1, 1L);
    float y = NAN;
    call c;
    call_init(&c, op, &t, &y);
    call_in(&c, &x, &t);
    call_run(&c);
    return y;
}

static void test_activations_stay_finite_at_large_inputs(void **state)
{
    (void)state;
    assert_float_equal(unary_at(OP_SOFTPLUS, 100.0f), 100.0f, 1e-5);
    assert_float_equal(unary_at(OP_SOFTPLUS, -100.0f), exp(-100.0), 1e-30);
    assert_float_equal(unary_at(OP_LOG_SIGMOID, -100.0f), -100.0f, 1e-5);
    assert_float_equal(unary_at(OP_LOG_SIGMOID, 100.0f), -exp(-100.0), 1e-30);
    assert_float_equal(unary_at(OP_SILU, -100.0f), 0.0f, 1e-30);
    assert_float_equal(unary_at(OP_SILU, 100.0f), 100.0f, 1e-5);
    assert_float_equal(unary_at(OP_ELU, -100.0f), -1.0f, 0);
}

static void test_activation_grads(void **state)
{
    (void)state;
    op_kind ops[] = {OP_RELU_GRAD,     OP_SIGMOID_GRAD,     OP_TANH_GRAD, OP_GELU_GRAD, OP_ABS_GRAD,
                     OP_SOFTPLUS_GRAD, OP_LOG_SIGMOID_GRAD, OP_SILU_GRAD, OP_ELU_GRAD};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ir_type t = ty(DT_F32, 2, 13L, 31L);
        float range = ops[k] == OP_GELU_GRAD ? 5 : 1;
        float *dy = frandom(&t, -2, 2), *v = frandom(&t, -range, range), *o = falloc(&t);
        call c;
        call_init(&c, ops[k], &t, o);
        call_in(&c, dy, &t);
        call_in(&c, v, &t);
        call_run(&c);
        double *ref = dalloc(numel(&t));
        for (int64_t i = 0; i < numel(&t); i++) ref[i] = ref_act_grad(ops[k], dy[i], v[i]);
        check_close(o, ref, numel(&t), ops_name(ops[k]));
        free(dy), free(v), free(o), free(ref);
    }
}

/* ---- reductions ---- */

/* Reference reduction of x over axis (or all) into ref; argmax into iref. */
static void ref_reduce(op_kind op, const float *x, const ir_type *t, int64_t axis, double *ref)
{
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < t->rank; d++) {
        if (axis == OP_AXIS_ALL)
            n *= t->dim[d];
        else if (d < axis)
            outer *= t->dim[d];
        else if (d == axis)
            n = t->dim[d];
        else
            inner *= t->dim[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            double s = 0, m = -INFINITY;
            int64_t arg = 0;
            for (int64_t k = 0; k < n; k++) {
                double v = x[(o * n + k) * inner + j];
                s += v;
                if (v > m) m = v, arg = k;
            }
            double r = op == OP_SUM    ? s
                       : op == OP_MEAN ? s / (double)n
                       : op == OP_MAX  ? m
                                       : (double)arg;
            ref[o * inner + j] = r;
        }
}

static ir_type reduced_type(const ir_type *t, int64_t axis, int keep, ir_dtype dt)
{
    ir_type o = {.dtype = dt, .rank = 0};
    for (int d = 0; d < t->rank; d++) {
        int red = axis == OP_AXIS_ALL || d == axis;
        if (red && !keep) continue;
        o.dim[o.rank++] = red ? 1 : t->dim[d];
    }
    return o;
}

static void check_reduce(op_kind op, const ir_type *t, int64_t axis, int keep, cpu_pool *pool)
{
    ir_type ot = reduced_type(t, axis, keep, op == OP_ARGMAX ? DT_I32 : DT_F32);
    float *x = frandom(t, -3, 3), *out = falloc(&ot), *got = falloc(&ot);
    double *ref = dalloc(numel(&ot));
    call c;
    call_init(&c, op, &ot, out);
    c.node.attr.i[ATTR_AXIS] = axis;
    c.node.attr.i[ATTR_KEEPDIMS] = keep;
    call_in(&c, x, t);
    c.pool = pool;
    call_run(&c);
    ref_reduce(op, x, t, axis, ref);
    for (int64_t i = 0; i < numel(&ot); i++) got[i] = (float)elem(out, ot.dtype, i);
    /* sums of many terms: error relative to the sum of |x| over the axis */
    double scale = op == OP_SUM ? 3.0 * (double)numel(t) / (double)numel(&ot) : 1.0;
    check_close_s(got, ref, numel(&ot), TOL, scale, "reduce");
    free(x), free(out), free(got), free(ref);
}

static void test_reductions_every_axis_keepdims(void **state)
{
    (void)state;
    op_kind ops[] = {OP_SUM, OP_MEAN, OP_MAX, OP_ARGMAX};
    for (int k = 0; k < 4; k++)
        for (int rep = 0; rep < 8; rep++) {
            int rank = 1 + rep % 4;
            ir_type t = {.dtype = DT_F32, .rank = rank};
            for (int d = 0; d < rank; d++) t.dim[d] = rsize();
            for (int64_t ax = 0; ax < rank; ax++)
                for (int keep = 0; keep < 2; keep++) check_reduce(ops[k], &t, ax, keep, NULL);
            if (ops[k] != OP_ARGMAX) {
                check_reduce(ops[k], &t, OP_AXIS_ALL, 0, NULL);
                check_reduce(ops[k], &t, OP_AXIS_ALL, 1, NULL);
            }
        }
}

static void test_reductions_large_with_pool(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 3, 37L, 61L, 41L);
    op_kind ops[] = {OP_SUM, OP_MEAN, OP_MAX};
    for (int k = 0; k < 3; k++) {
        for (int64_t ax = 0; ax < 3; ax++) check_reduce(ops[k], &t, ax, 0, pool2);
        check_reduce(ops[k], &t, OP_AXIS_ALL, 0, pool2);
    }
}

static void test_argmax_first_max_wins(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 2L, 5L), ot = ty(DT_I32, 1, 2L);
    float x[10] = {1, 4, 4, 2, 4, 9, 9, 0, 9, 1};
    int32_t out[2];
    call c;
    call_init(&c, OP_ARGMAX, &ot, out);
    c.node.attr.i[ATTR_AXIS] = 1;
    call_in(&c, x, &t);
    call_run(&c);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
}

static void test_max_grad_routes_to_maxima(void **state)
{
    (void)state;
    for (int64_t ax = -1; ax < 3; ax++) {
        int64_t axis = ax < 0 ? OP_AXIS_ALL : ax;
        ir_type t = ty(DT_F32, 3, 3L, 5L, 7L), kt = reduced_type(&t, axis, 1, DT_F32);
        float *x = frandom(&t, -1, 1), *y = falloc(&kt), *dy = frandom(&kt, 1, 2);
        float *out = falloc(&t);
        x[4] = x[3]; /* a tie somewhere */
        double *ref = dalloc(numel(&t)), *ym = dalloc(numel(&kt));
        ref_reduce(OP_MAX, x, &t, axis, ym);
        for (int64_t i = 0; i < numel(&kt); i++) y[i] = (float)ym[i];
        call c;
        call_init(&c, OP_MAX_GRAD, &t, out);
        c.node.attr.i[ATTR_AXIS] = axis;
        call_in(&c, dy, &kt);
        call_in(&c, x, &t);
        call_in(&c, y, &kt);
        call_run(&c);
        int64_t co[IR_MAX_DIMS];
        for (int64_t i = 0; i < numel(&t); i++) {
            unravel(i, &t, co);
            int64_t j = bindex(co, 3, &kt);
            ref[i] = x[i] == y[j] ? dy[j] : 0.0;
        }
        check_close(out, ref, numel(&t), "max_grad");
        free(x), free(y), free(dy), free(out), free(ref), free(ym);
    }
}

/* ---- softmax family ---- */

static void ref_softmax_row(const float *x, int64_t c, double *p, double *lse)
{
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < c; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < c; i++) s += exp(x[i] - m);
    for (int64_t i = 0; i < c; i++) p[i] = exp(x[i] - m) / s;
    *lse = m + log(s);
}

static void check_softmax_forward(int64_t rows, int64_t cols, float range, int log_)
{
    ir_type t = ty(DT_F32, 2, rows, cols);
    float *x = frandom(&t, -range, range), *y = falloc(&t);
    double *ref = dalloc(numel(&t)), lse;
    call c;
    call_init(&c, log_ ? OP_LOG_SOFTMAX : OP_SOFTMAX, &t, y);
    call_in(&c, x, &t);
    c.pool = pool2;
    call_run(&c);
    for (int64_t r = 0; r < rows; r++) {
        ref_softmax_row(x + r * cols, cols, ref + r * cols, &lse);
        for (int64_t i = 0; log_ && i < cols; i++) ref[r * cols + i] = x[r * cols + i] - lse;
    }
    for (int64_t i = 0; i < numel(&t); i++) assert_true(isfinite(y[i]));
    /* log-softmax of logits ~1e4 has values ~1e4: relative error then */
    check_close_s(y, ref, numel(&t), TOL, 1.0, log_ ? "log_softmax" : "softmax");
    free(x), free(y), free(ref);
}

static void test_softmax_and_log_softmax_stable(void **state)
{
    (void)state;
    for (int log_ = 0; log_ < 2; log_++) {
        check_softmax_forward(7, 13, 5, log_);
        check_softmax_forward(1, 1, 5, log_);
        check_softmax_forward(31, 3, 5, log_);
        check_softmax_forward(13, 7, 1e4f, log_);
        check_softmax_forward(300, 301, 3, log_); /* over the pool */
    }
    /* the top log-probability of logits near 1e4 is near 0, and as exact as
     * there: (x - m) - log(s), where x - (m + log(s)) rounds to 1e-3 */
    ir_type t = ty(DT_F32, 2, 1, 2);
    float x[2] = {10000.0f, 9994.0f}, y[2];
    call c;
    call_init(&c, OP_LOG_SOFTMAX, &t, y);
    call_in(&c, x, &t);
    call_run(&c);
    assert_float_equal(y[0], -log1p(exp(-6.0)), 1e-7);
    assert_float_equal(y[1], -6.0 - log1p(exp(-6.0)), 1e-6);
    /* the cross-entropy of the same row, label 0: as small, as exact */
    ir_type lt = ty(DT_I32, 1, 1L), ft = ty(DT_F32, 1, 1L);
    int32_t label = 0;
    float loss = -1;
    call_init(&c, OP_SOFTMAX_XENT, &ft, &loss);
    call_in(&c, x, &t);
    call_in(&c, &label, &lt);
    call_run(&c);
    assert_float_equal(loss, log1p(exp(-6.0)), 1e-7);
}

/* The vectorised exp: scores far below the row's max give 0 (-inf
 * exactly), and a NaN score makes its row NaN, as expf would. */
static void test_softmax_edges(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 2, 4);
    float x[8] = {0.0f, -100.0f, -INFINITY, 1.0f, 0.0f, NAN, 1.0f, 2.0f}, y[8];
    call c;
    call_init(&c, OP_SOFTMAX, &t, y);
    call_in(&c, x, &t);
    call_run(&c);
    assert_true(y[1] >= 0.0f && y[1] < 1e-37f);
    assert_true(y[2] == 0.0f);
    assert_true(fabsf(y[0] - 1.0f / (1.0f + expf(1.0f))) < 1e-6f);
    for (int i = 4; i < 8; i++) assert_true(isnan(y[i]));
}

static void test_softmax_xent_and_grad(void **state)
{
    (void)state;
    float ranges[] = {4.0f, 1e4f};
    int64_t shapes[][2] = {{7, 13}, {1, 3}, {31, 10}, {5, 300}};
    for (int r = 0; r < 2; r++)
        for (int s = 0; s < 4; s++) {
            int64_t n = shapes[s][0], cc = shapes[s][1];
            ir_type lt = ty(DT_F32, 2, n, cc), vt = ty(DT_I32, 1, n), ft = ty(DT_F32, 1, n);
            float *x = frandom(&lt, -ranges[r], ranges[r]), *loss = falloc(&ft);
            float *dy = frandom(&ft, 0.5f, 2), *g = falloc(&lt);
            int32_t *lab = calloc((size_t)n, 4);
            for (int64_t i = 0; i < n; i++) lab[i] = (int32_t)(rnd() % (uint32_t)cc);
            call c;
            call_init(&c, OP_SOFTMAX_XENT, &ft, loss);
            call_in(&c, x, &lt);
            call_in(&c, lab, &vt);
            call_run(&c);
            call_init(&c, OP_XENT_GRAD, &lt, g);
            call_in(&c, x, &lt);
            call_in(&c, lab, &vt);
            call_in(&c, dy, &ft);
            call_run(&c);
            double *rl = dalloc(n), *rg = dalloc(n * cc), lse;
            for (int64_t i = 0; i < n; i++) {
                ref_softmax_row(x + i * cc, cc, rg + i * cc, &lse);
                rl[i] = lse - x[i * cc + lab[i]];
                rg[i * cc + lab[i]] -= 1.0;
                for (int64_t j = 0; j < cc; j++) rg[i * cc + j] *= dy[i];
            }
            /* lse - x[label] cancels: absolute error scales with the logits */
            check_close_s(loss, rl, n, TOL, ranges[r], "xent");
            check_close(g, rg, n * cc, "xent_grad");
            free(x), free(loss), free(dy), free(g), free(lab), free(rl), free(rg);
        }
}

static void test_softmax_grads(void **state)
{
    (void)state;
    for (int log_ = 0; log_ < 2; log_++) {
        ir_type t = ty(DT_F32, 2, 13L, 31L);
        float *x = frandom(&t, -3, 3), *dy = frandom(&t, -1, 1), *y = falloc(&t);
        float *g = falloc(&t);
        double *p = dalloc(31), *ref = dalloc(numel(&t)), lse;
        for (int64_t r = 0; r < 13; r++) {
            ref_softmax_row(x + r * 31, 31, p, &lse);
            double dot = 0, sum = 0;
            for (int j = 0; j < 31; j++) {
                y[r * 31 + j] = log_ ? (float)(x[r * 31 + j] - lse) : (float)p[j];
                dot += dy[r * 31 + j] * (double)y[r * 31 + j];
                sum += dy[r * 31 + j];
            }
            for (int j = 0; j < 31; j++) {
                double yy = y[r * 31 + j], d = dy[r * 31 + j];
                ref[r * 31 + j] = log_ ? d - exp(yy) * sum : yy * (d - dot);
            }
        }
        call c;
        call_init(&c, log_ ? OP_LOG_SOFTMAX_GRAD : OP_SOFTMAX_GRAD, &t, g);
        call_in(&c, dy, &t);
        call_in(&c, y, &t);
        call_run(&c);
        check_close(g, ref, numel(&t), "softmax grad");
        free(x), free(dy), free(y), free(g), free(p), free(ref);
    }
}

static void test_mse(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 13L, 7L), s = ty(DT_F32, 0);
    float *p = frandom(&t, -2, 2), *q = frandom(&t, -2, 2), out;
    call c;
    call_init(&c, OP_MSE, &s, &out);
    call_in(&c, p, &t);
    call_in(&c, q, &t);
    call_run(&c);
    double ref = 0;
    for (int i = 0; i < 91; i++) ref += ((double)p[i] - q[i]) * ((double)p[i] - q[i]);
    ref /= 91;
    check_close(&out, &ref, 1, "mse");
    free(p), free(q);
}

/* ---- matmul ---- */

static void ref_matmul(const float *a, const float *b, int64_t m, int64_t n, int64_t k, int ta,
                       int tb, double *c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (double)(ta ? a[l * m + i] : a[i * k + l]) *
                     (double)(tb ? b[j * k + l] : b[l * n + j]);
            c[i * n + j] = s;
        }
}

static float *run_matmul(int64_t m, int64_t n, int64_t k, int ta, int tb, const float *a,
                         const float *b, const float *bias, int relu, cpu_pool *pool)
{
    ir_type at = ta ? ty(DT_F32, 2, k, m) : ty(DT_F32, 2, m, k);
    ir_type bt = tb ? ty(DT_F32, 2, n, k) : ty(DT_F32, 2, k, n);
    ir_type ot = ty(DT_F32, 2, m, n), vt = ty(DT_F32, 1, n);
    float *out = falloc(&ot);
    call c;
    call_init(&c, bias ? OP_MATMUL_BIAS : OP_MATMUL, &ot, out);
    c.node.attr.i[ATTR_TRANS_A] = ta;
    c.node.attr.i[ATTR_TRANS_B] = tb;
    c.node.attr.i[ATTR_BIAS_RELU] = relu;
    call_in(&c, (void *)a, &at);
    call_in(&c, (void *)b, &bt);
    if (bias) call_in(&c, (void *)bias, &vt);
    c.pool = pool;
    call_run(&c);
    return out;
}

static void check_matmul(int64_t m, int64_t n, int64_t k, int ta, int tb, int bias_, int relu)
{
    ir_type at = ty(DT_F32, 1, m * k), bt = ty(DT_F32, 1, k * n), vt = ty(DT_F32, 1, n);
    float *a = frandom(&at, -1, 1), *b = frandom(&bt, -1, 1), *bias = frandom(&vt, -1, 1);
    double *ref = dalloc(m * n);
    ref_matmul(a, b, m, n, k, ta, tb, ref);
    for (int64_t i = 0; i < m * n; i++) {
        if (bias_) ref[i] += bias[i % n];
        if (relu && ref[i] < 0) ref[i] = 0;
    }
    float *o1 = run_matmul(m, n, k, ta, tb, a, b, bias_ ? bias : NULL, relu, NULL);
    float *o2 = run_matmul(m, n, k, ta, tb, a, b, bias_ ? bias : NULL, relu, pool2);
    check_close_s(o1, ref, m * n, TOL, sqrt((double)k), "matmul serial");
    check_close_s(o2, ref, m * n, TOL, sqrt((double)k), "matmul pool 2");
    /* Splitting changes the BLAS blocking, so the sums may round differently. */
    for (int64_t i = 0; i < m * n; i++)
        assert_float_equal(o1[i], o2[i], (float)TOL * (1 + fabsf(o1[i])));
    free(a), free(b), free(bias), free(ref), free(o1), free(o2);
}

static void test_matmul_transpose_combos_pool_1_and_2(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_matmul(rsize(), rsize(), rsize(), ta, tb, 0, 0);
            check_matmul(13, 7, 31, ta, tb, 0, 0);
            check_matmul(131, 67, 61, ta, tb, 0, 0); /* > 2e5: split rows */
            check_matmul(3, 401, 257, ta, tb, 0, 0); /* few rows: split columns */
            /* cpu_sgemm.c's panels (on CPUs where it runs): depth past
             * KC = 256, columns past NC = 768, rows not a multiple of 8 */
            check_matmul(21, 790, 300, ta, tb, 0, 0);
        }
}

static void test_matmul_bias_relu(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int relu = 0; relu < 2; relu++) {
                check_matmul(7, 13, 3, ta, tb, 1, relu);
                check_matmul(129, 65, 63, ta, tb, 1, relu);
            }
}

/* matmul_bias of a [3, 43, k] and a 2-D b: one GEMM of all 129 rows, the
 * bias and relu on each. */
static void test_matmul_bias_over_leading_axes(void **state)
{
    (void)state;
    int64_t rows = 129, n = 65, k = 63;
    ir_type at = ty(DT_F32, 3, 3, rows / 3, k), bt = ty(DT_F32, 2, k, n), vt = ty(DT_F32, 1, n);
    ir_type ot = ty(DT_F32, 3, 3, rows / 3, n);
    float *a = frandom(&at, -1, 1), *b = frandom(&bt, -1, 1), *bias = frandom(&vt, -1, 1);
    float *out = falloc(&ot);
    double *ref = dalloc(rows * n);
    ref_matmul(a, b, rows, n, k, 0, 0, ref);
    for (int64_t i = 0; i < rows * n; i++) ref[i] = fmax(ref[i] + bias[i % n], 0);
    call c;
    call_init(&c, OP_MATMUL_BIAS, &ot, out);
    c.node.attr.i[ATTR_BIAS_RELU] = 1;
    call_in(&c, a, &at);
    call_in(&c, b, &bt);
    call_in(&c, bias, &vt);
    c.pool = pool2;
    call_run(&c);
    check_close_s(out, ref, rows * n, TOL, sqrt((double)k), "matmul_bias [3,43,63]");
    free(a), free(b), free(bias), free(out), free(ref);
}

/* apply_sgd_matmul: var -= lr * a@b accumulated by the GEMM, serial and
 * split over the pool (rows, or columns when there are few rows). */
static void check_sgd_matmul(int64_t m, int64_t n, int64_t k, int ta, int tb, cpu_pool *pool)
{
    ir_type at = ty(DT_F32, 1, m * k), bt = ty(DT_F32, 1, k * n), vt = ty(DT_F32, 2, m, n);
    ir_type a2 = ta ? ty(DT_F32, 2, k, m) : ty(DT_F32, 2, m, k);
    ir_type b2 = tb ? ty(DT_F32, 2, n, k) : ty(DT_F32, 2, k, n), tok = ty(DT_F32, 0);
    float *a = frandom(&at, -1, 1), *b = frandom(&bt, -1, 1), *var = frandom(&vt, -1, 1);
    double *ref = dalloc(m * n);
    ref_matmul(a, b, m, n, k, ta, tb, ref);
    for (int64_t i = 0; i < m * n; i++) ref[i] = var[i] - 0.25 * ref[i];
    call c;
    call_init(&c, OP_APPLY_SGD_MATMUL, &tok, NULL);
    c.node.attr.f[ATTR_SGDMM_LR] = 0.25;
    c.node.attr.i[ATTR_SGDMM_TRANS_A] = ta;
    c.node.attr.i[ATTR_SGDMM_TRANS_B] = tb;
    call_in(&c, var, &vt);
    call_in(&c, a, &a2);
    call_in(&c, b, &b2);
    c.pool = pool;
    call_run(&c);
    check_close_s(var, ref, m * n, TOL, sqrt((double)k), "apply_sgd_matmul");
    free(a), free(b), free(var), free(ref);
}

static void test_apply_sgd_matmul(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_sgd_matmul(13, 7, 31, ta, tb, NULL);
            check_sgd_matmul(131, 67, 61, ta, tb, pool2); /* split rows */
            check_sgd_matmul(3, 401, 257, ta, tb, pool2); /* split columns */
            check_sgd_matmul(5, 6, 0, ta, tb, pool2);     /* k = 0: var unchanged */
        }
}

/* ---- batched matmul ---- */

/* batch axes t, then the matrix [r, c] ([c, r] when transposed). */
static ir_type with_matrix(ir_type t, int64_t r, int64_t c, int trans)
{
    t.dim[t.rank++] = trans ? c : r;
    t.dim[t.rank++] = trans ? r : c;
    return t;
}

/* [..ab, M, K] @ [..bb, K, N] against a naive product per output batch,
 * each reading the operands' batches by numpy broadcasting. */
static void check_matmul_batched(ir_type ab, ir_type bb, int64_t m, int64_t n, int64_t k, int ta,
                                 int tb, cpu_pool *pool)
{
    ir_type at = with_matrix(ab, m, k, ta), bt = with_matrix(bb, k, n, tb);
    ir_type ob = bshape(&ab, &bb, DT_F32), ot = with_matrix(ob, m, n, 0);
    float *a = frandom(&at, -1, 1), *b = frandom(&bt, -1, 1), *out = falloc(&ot);
    call c;
    call_init(&c, OP_MATMUL, &ot, out);
    c.node.attr.i[ATTR_TRANS_A] = ta;
    c.node.attr.i[ATTR_TRANS_B] = tb;
    call_in(&c, a, &at);
    call_in(&c, b, &bt);
    c.pool = pool;
    call_run(&c);
    double *ref = dalloc(numel(&ot));
    int64_t co[IR_MAX_DIMS];
    for (int64_t i = 0; i < numel(&ob); i++) {
        unravel(i, &ob, co);
        ref_matmul(a + bindex(co, ob.rank, &ab) * m * k, b + bindex(co, ob.rank, &bb) * k * n, m, n,
                   k, ta, tb, ref + i * m * n);
    }
    check_close_s(out, ref, numel(&ot), TOL, sqrt((double)k), "batched matmul");
    free(a), free(b), free(out), free(ref);
}

static void test_matmul_batched_broadcast_and_transposed(void **state)
{
    (void)state;
    ir_type none = ty(DT_F32, 0), b3 = ty(DT_F32, 1, 3L), b4 = ty(DT_F32, 1, 4L);
    ir_type b23 = ty(DT_F32, 2, 2L, 3L), b21 = ty(DT_F32, 2, 2L, 1L), b1 = ty(DT_F32, 1, 1L);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int p = 0; p < 2; p++) {
                cpu_pool *pool = p ? pool2 : NULL;
                /* [B, T, C] @ [C, N]: one GEMM of the rows when a is not transposed */
                check_matmul_batched(b3, none, 5, 4, 7, ta, tb, pool);
                check_matmul_batched(b4, none, 128, 96, 96, ta, tb, pool); /* each split */
                check_matmul_batched(b23, b23, 5, 7, 6, ta, tb, pool);
                check_matmul_batched(b21, b3, 5, 6, 4, ta, tb, pool); /* broadcast both */
                check_matmul_batched(none, b23, 6, 5, 3, ta, tb, pool);
                check_matmul_batched(b1, b1, 3, 2, 4, ta, tb, pool);
            }
}

/* ---- causal softmax and layer normalisation ---- */

/* y = softmax over the first i + 1 entries of row i of each [t, t] block, 0
 * after; its gradient y_j (dy_j - <dy, y>) over the same entries, 0 after. */
static void check_causal_softmax(int64_t blocks, int64_t t, cpu_pool *pool)
{
    ir_type xt = ty(DT_F32, 3, blocks, t, t);
    float *x = frandom(&xt, -4, 4), *y = falloc(&xt), *dy = frandom(&xt, -1, 1), *g = falloc(&xt);
    double *ry = dalloc(numel(&xt)), *rg = dalloc(numel(&xt)), lse;
    call c;
    call_init(&c, OP_SOFTMAX, &xt, y);
    c.node.attr.i[ATTR_MASK] = OP_MASK_CAUSAL;
    call_in(&c, x, &xt);
    c.pool = pool;
    call_run(&c);
    call_init(&c, OP_SOFTMAX_GRAD, &xt, g);
    c.node.attr.i[ATTR_MASK] = OP_MASK_CAUSAL;
    call_in(&c, dy, &xt);
    call_in(&c, y, &xt);
    c.pool = pool;
    call_run(&c);
    for (int64_t r = 0; r < blocks * t; r++) {
        int64_t kept = r % t + 1;
        double *p = ry + r * t, dot = 0;
        ref_softmax_row(x + r * t, kept, p, &lse);
        for (int64_t j = 0; j < kept; j++) dot += dy[r * t + j] * (double)y[r * t + j];
        for (int64_t j = 0; j < kept; j++) rg[r * t + j] = y[r * t + j] * (dy[r * t + j] - dot);
    }
    check_close(y, ry, numel(&xt), "causal softmax");
    check_close(g, rg, numel(&xt), "causal softmax grad");
    free(x), free(y), free(dy), free(g), free(ry), free(rg);
}

static void test_softmax_causal_mask_and_grad(void **state)
{
    (void)state;
    check_causal_softmax(3, 1, NULL);
    check_causal_softmax(5, 7, NULL);
    check_causal_softmax(2, 33, pool2);
    check_causal_softmax(4, 200, pool2); /* over the pool */
}

/* One row of layernorm and its gradients in double: dx through the
 * Jacobian d xhat_j / d x_i = rstd (delta_ij - 1/c - xhat_i xhat_j / c). */
static void ref_layernorm_row(const float *x, const float *gain, const float *bias, const float *dy,
                              int64_t c, double eps, double *y, double *dx, double *dgain,
                              double *dbias)
{
    double m = 0, v = 0;
    for (int64_t i = 0; i < c; i++) m += x[i] / (double)c;
    for (int64_t i = 0; i < c; i++) v += (x[i] - m) * (x[i] - m) / (double)c;
    double rs = 1 / sqrt(v + eps), *xh = dalloc(c);
    for (int64_t i = 0; i < c; i++) {
        xh[i] = (x[i] - m) * rs;
        y[i] = xh[i] * gain[i] + bias[i];
        dgain[i] += dy[i] * xh[i];
        dbias[i] += dy[i];
    }
    for (int64_t i = 0; i < c; i++) {
        dx[i] = 0;
        for (int64_t j = 0; j < c; j++)
            dx[i] +=
                dy[j] * gain[j] * rs * ((i == j) - 1.0 / (double)c - xh[i] * xh[j] / (double)c);
    }
    free(xh);
}

static void run_norm(op_kind op, const ir_type *ot, void *out, float **in, const ir_type **it,
                     int n_in, cpu_pool *pool, void *scratch, size_t task_bytes)
{
    call c;
    call_init(&c, op, ot, out);
    c.node.attr.i[ATTR_AXIS] = it[0]->rank - 1;
    c.node.attr.f[ATTR_NORM_EPS] = 1e-5;
    for (int k = 0; k < n_in; k++) call_in(&c, in[k], it[k]);
    c.pool = pool;
    c.scratch = scratch;
    c.task_bytes = task_bytes;
    c.max_tasks = pool ? cpu_pool_size(pool) : 1;
    call_run(&c);
}

static void check_layernorm(int64_t rows, int64_t cols, cpu_pool *pool)
{
    ir_type xt = ty(DT_F32, 2, rows, cols), vt = ty(DT_F32, 1, cols), pt = ty(DT_F32, 1, 2 * cols);
    float *x = frandom(&xt, 3, 5), *dy = frandom(&xt, -1, 1), *gain = frandom(&vt, 0.5f, 1.5f);
    float *bias = frandom(&vt, -1, 1), *y = falloc(&xt), *dx = falloc(&xt), *dp = falloc(&pt);
    size_t task_bytes = (size_t)(2 * cols + 2 * rows) * 4;
    /* rows of spread >= 2 about 4: the mean is far from 0, yet rstd stays
     * small, which keeps f32's cancellation in dx near one rounding */
    for (int64_t r = 0; cols > 1 && r < rows; r++) x[r * cols] = 3, x[r * cols + 1] = 5;
    void *scratch = calloc(2, task_bytes);
    const ir_type *fwd_t[3] = {&xt, &vt, &vt}, *grad_t[3] = {&xt, &xt, &vt};
    run_norm(OP_LAYERNORM, &xt, y, (float *[]){x, gain, bias}, fwd_t, 3, pool, NULL, 0);
    run_norm(OP_LAYERNORM_GRAD, &xt, dx, (float *[]){dy, x, gain}, grad_t, 3, pool, NULL, 0);
    run_norm(OP_LAYERNORM_GRAD_PARAMS, &pt, dp, (float *[]){dy, x}, grad_t, 2, pool, scratch,
             task_bytes);
    double *ry = dalloc(rows * cols), *rdx = dalloc(rows * cols), *rp = dalloc(2 * cols);
    for (int64_t r = 0; r < rows; r++)
        ref_layernorm_row(x + r * cols, gain, bias, dy + r * cols, cols, 1e-5, ry + r * cols,
                          rdx + r * cols, rp, rp + cols);
    check_close(y, ry, rows * cols, "layernorm");
    /* dx cancels sums over the row: error against the row's size */
    check_close_s(dx, rdx, rows * cols, TOL, sqrt((double)cols), "layernorm_grad");
    check_close_s(dp, rp, 2 * cols, TOL, sqrt((double)rows), "layernorm_grad_params");
    free(x), free(dy), free(gain), free(bias), free(y), free(dx), free(dp), free(scratch);
    free(ry), free(rdx), free(rp);
}

static void test_layernorm_and_grads(void **state)
{
    (void)state;
    check_layernorm(1, 1, NULL);
    check_layernorm(7, 13, NULL);
    check_layernorm(31, 3, pool2);
    check_layernorm(600, 257, pool2); /* rows over the pool, dgain/dbias per task */
}

/* ---- batch normalisation ---- */

/* x [n, c] (h = 0) or [n, c, h, w], seen as [n, c, s]; gain, bias [c]. */
typedef struct bn_data {
    ir_type xt, vt, pt; /* x, [c], [2, c] */
    int64_t n, c, s;
    float *x, *dy, *gain, *bias;
} bn_data;

static void bn_data_init(bn_data *d, int64_t n, int64_t c, int64_t h, int64_t w)
{
    d->xt = h ? ty(DT_F32, 4, n, c, h, w) : ty(DT_F32, 2, n, c);
    d->vt = ty(DT_F32, 1, c);
    d->pt = ty(DT_F32, 2, 2L, c);
    d->n = n, d->c = c, d->s = h ? h * w : 1;
    /* values about 4 with spread ~0.6: a mean far from 0 */
    d->x = frandom(&d->xt, 3, 5), d->dy = frandom(&d->xt, -1, 1);
    d->gain = frandom(&d->vt, 0.5f, 1.5f), d->bias = frandom(&d->vt, -1, 1);
}

static void bn_data_free(bn_data *d)
{
    free(d->x), free(d->dy), free(d->gain), free(d->bias);
}

static int64_t bn_at(const bn_data *d, int64_t i, int64_t j, int64_t k)
{
    return (i * d->c + j) * d->s + k;
}

static void run_bn(op_kind op, const ir_type *ot, float *out, float **in, const ir_type **it,
                   int n_in, cpu_pool *pool, int batch, int relu)
{
    call c;
    call_init(&c, op, ot, out);
    c.node.attr.i[ATTR_AXIS] = 1;
    c.node.attr.f[ATTR_NORM_EPS] = 1e-5;
    c.node.attr.i[ATTR_BN_BATCH] = batch;
    c.node.attr.i[ATTR_BN_RELU] = relu;
    for (int k = 0; k < n_in; k++) call_in(&c, in[k], it[k]);
    c.pool = pool;
    call_run(&c);
}

/* Channel j's mean and biased variance in double, two passes. */
static void ref_bn_stats(const bn_data *d, const float *x, int64_t j, double *m, double *v)
{
    double cnt = (double)(d->n * d->s), sm = 0, sv = 0;
    for (int64_t i = 0; i < d->n; i++)
        for (int64_t k = 0; k < d->s; k++) sm += x[bn_at(d, i, j, k)];
    *m = sm / cnt;
    for (int64_t i = 0; i < d->n; i++)
        for (int64_t k = 0; k < d->s; k++) sv += pow(x[bn_at(d, i, j, k)] - *m, 2);
    *v = sv / cnt;
}

/* The reference of all four ops: stats [2c], y, params [2c] (of dy), dx of
 * a training step (batch) and with fixed statistics. */
typedef struct bn_ref {
    double *stats, *y, *params, *dx_batch, *dx_fixed;
} bn_ref;

static void ref_bn_channel(const bn_data *d, int64_t j, bn_ref *r)
{
    double m, v, cnt = (double)(d->n * d->s), dg = 0, db = 0;
    ref_bn_stats(d, d->x, j, &m, &v);
    double rs = 1 / sqrt(v + 1e-5), g = d->gain[j];
    for (int64_t i = 0; i < d->n; i++)
        for (int64_t k = 0; k < d->s; k++) {
            int64_t e = bn_at(d, i, j, k);
            r->y[e] = (d->x[e] - m) * rs * g + d->bias[j];
            dg += d->dy[e] * (d->x[e] - m) * rs;
            db += d->dy[e];
        }
    for (int64_t i = 0; i < d->n; i++)
        for (int64_t k = 0; k < d->s; k++) {
            int64_t e = bn_at(d, i, j, k);
            r->dx_batch[e] = g * rs * (d->dy[e] - db / cnt - (d->x[e] - m) * rs * dg / cnt);
            r->dx_fixed[e] = g * rs * d->dy[e];
        }
    r->stats[j] = m, r->stats[d->c + j] = v;
    r->params[j] = dg, r->params[d->c + j] = db;
}

static void ref_bn(const bn_data *d, bn_ref *r)
{
    int64_t n = numel(&d->xt);
    *r = (bn_ref){dalloc(2 * d->c), dalloc(n), dalloc(2 * d->c), dalloc(n), dalloc(n)};
    for (int64_t j = 0; j < d->c; j++) ref_bn_channel(d, j, r);
}

static void bn_ref_free(bn_ref *r)
{
    free(r->stats), free(r->y), free(r->params), free(r->dx_batch), free(r->dx_fixed);
}

static float *to_f32(const double *v, int64_t n)
{
    float *f = calloc((size_t)(n ? n : 1), 4);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

/* Each op against the reference, fed the reference's stats and params (in
 * f32), so each is checked on its own. */
static void check_batchnorm(int64_t n, int64_t c, int64_t h, int64_t w, cpu_pool *pool)
{
    bn_data d;
    bn_ref r;
    bn_data_init(&d, n, c, h, w);
    ref_bn(&d, &r);
    int64_t ne = numel(&d.xt);
    float *st = falloc(&d.pt), *y = falloc(&d.xt), *pr = falloc(&d.pt), *dx = falloc(&d.xt);
    float *rst = to_f32(r.stats, 2 * c), *rpr = to_f32(r.params, 2 * c);
    const ir_type *xt = &d.xt, *vt = &d.vt, *pt = &d.pt;
    run_bn(OP_BN_STATS, pt, st, (float *[]){d.x}, (const ir_type *[]){xt}, 1, pool, 0, 0);
    check_close(st, r.stats, 2 * c, "batchnorm_stats");
    run_bn(OP_BATCHNORM, xt, y, (float *[]){d.x, d.gain, d.bias, rst},
           (const ir_type *[]){xt, vt, vt, pt}, 4, pool, 0, 0);
    check_close(y, r.y, ne, "batchnorm_apply");
    run_bn(OP_BN_GRAD_PARAMS, pt, pr, (float *[]){d.dy, d.x, rst}, (const ir_type *[]){xt, xt, pt},
           3, pool, 0, 0);
    check_close_s(pr, r.params, 2 * c, TOL, sqrt((double)(n * d.s)), "batchnorm_grad_params");
    for (int batch = 0; batch < 2; batch++) {
        run_bn(OP_BN_GRAD, xt, dx, (float *[]){d.dy, d.x, d.gain, rst, rpr},
               (const ir_type *[]){xt, xt, vt, pt, pt}, 5, pool, batch, 0);
        check_close(dx, batch ? r.dx_batch : r.dx_fixed, ne, "batchnorm_grad");
    }
    free(st), free(y), free(pr), free(dx), free(rst), free(rpr);
    bn_ref_free(&r);
    bn_data_free(&d);
}

static void test_batchnorm_ops_match_a_double_reference(void **state)
{
    (void)state;
    check_batchnorm(1, 1, 0, 0, NULL);
    check_batchnorm(7, 3, 0, 0, NULL);
    check_batchnorm(5, 3, 1, 7, NULL);     /* C = 3, H*W = 7 */
    check_batchnorm(33, 130, 0, 0, pool2); /* [N,C]: blocks of channels over the pool */
    check_batchnorm(3, 70, 3, 5, pool2);
    check_batchnorm(6, 16, 14, 14, pool2);
}

/* The grads given dy and y (their relu flag) against the plain grads given
 * dy masked as relu_grad writes it (dy where y > 0), bit for bit. */
static void check_bn_grads_relu(const bn_data *d, const float *y, const float *st, const float *pr,
                                cpu_pool *pool)
{
    int64_t ne = numel(&d->xt), c = d->c;
    const ir_type *xt = &d->xt, *vt = &d->vt, *pt = &d->pt;
    float *dym = falloc(xt), *p0 = falloc(pt), *p1 = falloc(pt), *dx0 = falloc(xt),
          *dx1 = falloc(xt);
    for (int64_t e = 0; e < ne; e++) dym[e] = y[e] > 0 ? d->dy[e] : 0.0f;
    run_bn(OP_BN_GRAD_PARAMS, pt, p0, (float *[]){dym, d->x, (float *)st},
           (const ir_type *[]){xt, xt, pt}, 3, pool, 0, 0);
    run_bn(OP_BN_GRAD_PARAMS, pt, p1, (float *[]){d->dy, d->x, (float *)st, (float *)y},
           (const ir_type *[]){xt, xt, pt, xt}, 4, pool, 0, 1);
    assert_memory_equal(p0, p1, sizeof(float) * (size_t)(2 * c));
    for (int batch = 0; batch < 2; batch++) {
        run_bn(OP_BN_GRAD, xt, dx0, (float *[]){dym, d->x, d->gain, (float *)st, (float *)pr},
               (const ir_type *[]){xt, xt, vt, pt, pt}, 5, pool, batch, 0);
        run_bn(OP_BN_GRAD, xt, dx1,
               (float *[]){d->dy, d->x, d->gain, (float *)st, (float *)pr, (float *)y},
               (const ir_type *[]){xt, xt, vt, pt, pt, xt}, 6, pool, batch, 1);
        assert_memory_equal(dx0, dx1, sizeof(float) * (size_t)ne);
    }
    free(dym), free(p0), free(p1), free(dx0), free(dx1);
}

/* batchnorm_apply with its relu flag writes relu of what it writes
 * without, and the grads with theirs mask dy by that output. */
static void check_batchnorm_relu(int64_t n, int64_t c, int64_t h, int64_t w, cpu_pool *pool)
{
    bn_data d;
    bn_ref r;
    bn_data_init(&d, n, c, h, w);
    ref_bn(&d, &r);
    int64_t ne = numel(&d.xt);
    float *y = falloc(&d.xt), *yr = falloc(&d.xt);
    float *rst = to_f32(r.stats, 2 * c), *rpr = to_f32(r.params, 2 * c);
    const ir_type *xt = &d.xt, *vt = &d.vt, *pt = &d.pt;
    for (int relu = 0; relu < 2; relu++)
        run_bn(OP_BATCHNORM, xt, relu ? yr : y, (float *[]){d.x, d.gain, d.bias, rst},
               (const ir_type *[]){xt, vt, vt, pt}, 4, pool, 0, relu);
    for (int64_t e = 0; e < ne; e++) y[e] = y[e] > 0 ? y[e] : 0.0f;
    assert_memory_equal(y, yr, sizeof(float) * (size_t)ne);
    check_bn_grads_relu(&d, yr, rst, rpr, pool);
    free(y), free(yr), free(rst), free(rpr);
    bn_ref_free(&r);
    bn_data_free(&d);
}

static void test_batchnorm_relu_flags_match_the_separate_relu(void **state)
{
    (void)state;
    check_batchnorm_relu(7, 3, 0, 0, NULL);
    check_batchnorm_relu(5, 3, 1, 7, NULL);
    check_batchnorm_relu(33, 130, 0, 0, pool2);
    check_batchnorm_relu(6, 16, 14, 14, pool2);
}

/* L = sum(w * y), y = batchnorm_apply(x, gain, bias, batchnorm_stats(x)),
 * in double: the function the training gradients must differentiate. */
static double bn_loss(const bn_data *d, const float *w)
{
    double l = 0;
    for (int64_t j = 0; j < d->c; j++) {
        double m, v;
        ref_bn_stats(d, d->x, j, &m, &v);
        for (int64_t i = 0; i < d->n; i++)
            for (int64_t k = 0; k < d->s; k++) {
                int64_t e = bn_at(d, i, j, k);
                l += w[e] * ((d->x[e] - m) / sqrt(v + 1e-5) * d->gain[j] + d->bias[j]);
            }
    }
    return l;
}

/* Central difference of bn_loss in element i of v (one of d's arrays). */
static double bn_numeric(const bn_data *d, float *v, int64_t i, const float *w)
{
    const float h = 1e-2f, save = v[i];
    v[i] = save + h;
    double lp = bn_loss(d, w);
    v[i] = save - h;
    double lm = bn_loss(d, w);
    v[i] = save;
    return (lp - lm) / (double)((save + h) - (save - h));
}

static void check_bn_fd(const float *got, const bn_data *d, float *v, int64_t n, const float *w,
                        const char *what)
{
    double *num = dalloc(n), big = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        num[i] = bn_numeric(d, v, i, w);
        big = fabs(num[i]) > big ? fabs(num[i]) : big;
    }
    check_close_s(got, num, n, 1e-3, big, what);
    free(num);
}

/* The training-step gradients, as autodiff wires them (ops_grad_batchnorm):
 * params = batchnorm_grad_params(dy, x, stats), dx = batchnorm_grad(dy, x,
 * gain, stats, params, batch=1), stats = batchnorm_stats(x), against
 * finite differences of the loss through the statistics. */
static void check_bn_training_grads(int64_t n, int64_t c, int64_t h, int64_t w)
{
    bn_data d;
    bn_data_init(&d, n, c, h, w);
    for (int64_t i = 0; i < numel(&d.xt); i++) d.x[i] = frand(-1, 1); /* to feel x's moments */
    const ir_type *xt = &d.xt, *vt = &d.vt, *pt = &d.pt;
    float *st = falloc(pt), *pr = falloc(pt), *dx = falloc(xt);
    run_bn(OP_BN_STATS, pt, st, (float *[]){d.x}, (const ir_type *[]){xt}, 1, NULL, 0, 0);
    run_bn(OP_BN_GRAD_PARAMS, pt, pr, (float *[]){d.dy, d.x, st}, (const ir_type *[]){xt, xt, pt},
           3, NULL, 0, 0);
    run_bn(OP_BN_GRAD, xt, dx, (float *[]){d.dy, d.x, d.gain, st, pr},
           (const ir_type *[]){xt, xt, vt, pt, pt}, 5, NULL, 1, 0);
    check_bn_fd(dx, &d, d.x, numel(xt), d.dy, "d/dx");
    check_bn_fd(pr, &d, d.gain, c, d.dy, "d/dgain");
    check_bn_fd(pr + c, &d, d.bias, c, d.dy, "d/dbias");
    free(st), free(pr), free(dx);
    bn_data_free(&d);
}

static void test_batchnorm_training_grads_match_finite_differences(void **state)
{
    (void)state;
    check_bn_training_grads(6, 3, 0, 0);
    check_bn_training_grads(3, 2, 2, 3);
    check_bn_training_grads(2, 5, 1, 7);
}

/* ---- convolution ---- */

typedef struct conv_case {
    int64_t n, c, h, w, oc, kh, kw, s, p;
} conv_case;

static int64_t conv_out(int64_t x, int64_t k, int64_t s, int64_t p)
{
    return (x + 2 * p - k) / s + 1;
}

static double xat(const float *x, const conv_case *q, int64_t n, int64_t c, int64_t ih, int64_t iw)
{
    if (ih < 0 || ih >= q->h || iw < 0 || iw >= q->w) return 0;
    return x[((n * q->c + c) * q->h + ih) * q->w + iw];
}

/* The naive convolution; dy != NULL turns it into both adjoints. */
static void ref_conv(const conv_case *q, const float *x, const float *w, double *y)
{
    int64_t oh = conv_out(q->h, q->kh, q->s, q->p), ow = conv_out(q->w, q->kw, q->s, q->p);
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t o = 0; o < q->oc; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < q->c; c++)
                        for (int64_t a = 0; a < q->kh; a++)
                            for (int64_t b = 0; b < q->kw; b++)
                                s += xat(x, q, n, c, i * q->s - q->p + a, j * q->s - q->p + b) *
                                     w[((o * q->c + c) * q->kh + a) * q->kw + b];
                    y[((n * q->oc + o) * oh + i) * ow + j] = s;
                }
}

static void ref_conv_grads(const conv_case *q, const float *x, const float *w, const float *dy,
                           double *dx, double *dw)
{
    int64_t oh = conv_out(q->h, q->kh, q->s, q->p), ow = conv_out(q->w, q->kw, q->s, q->p);
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t o = 0; o < q->oc; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double g = dy[((n * q->oc + o) * oh + i) * ow + j];
                    for (int64_t c = 0; c < q->c; c++)
                        for (int64_t a = 0; a < q->kh; a++)
                            for (int64_t b = 0; b < q->kw; b++) {
                                int64_t ih = i * q->s - q->p + a, iw = j * q->s - q->p + b;
                                int64_t wi = ((o * q->c + c) * q->kh + a) * q->kw + b;
                                if (ih < 0 || ih >= q->h || iw < 0 || iw >= q->w) continue;
                                dx[((n * q->c + c) * q->h + ih) * q->w + iw] += g * w[wi];
                                dw[wi] += g * xat(x, q, n, c, ih, iw);
                            }
                }
}

static void conv_call(call *c, op_kind op, const conv_case *q, void *out, const ir_type *ot,
                      int threads, void **scratch)
{
    int64_t oh = conv_out(q->h, q->kh, q->s, q->p), ow = conv_out(q->w, q->kw, q->s, q->p);
    int grad = op == OP_CONV2D_GRAD_X ? 1 : op == OP_CONV2D_GRAD_W ? 2 : 0;
    size_t per = conv_task_bytes(grad, q->n, q->c, q->h, q->w, q->oc, q->kh, q->kw, q->s, q->p, oh,
                                 ow); /* the plan's scratch, as ops.c gives it */
    call_init(c, op, ot, out);
    c->node.attr.i[ATTR_CONV_STRIDE] = q->s;
    c->node.attr.i[ATTR_CONV_PAD] = q->p;
    c->pool = threads > 1 ? pool2 : NULL;
    c->max_tasks = threads;
    c->task_bytes = per;
    *scratch = threads > 0 ? malloc(per * (size_t)threads) : NULL;
    c->scratch = *scratch; /* threads == 0: NULL scratch, the kernel's fallback */
    if (threads == 0) c->max_tasks = 1;
}

/* conv2d_bias (the fusion of conv2d, a per-channel bias and a relu) against
 * ry, the naive convolution, with relu off and on. */
static void check_conv_bias(const conv_case *q, float *x, float *w, const double *ry, int threads,
                            double sc)
{
    int64_t oh = conv_out(q->h, q->kh, q->s, q->p), ow = conv_out(q->w, q->kw, q->s, q->p);
    ir_type xt = ty(DT_F32, 4, q->n, q->c, q->h, q->w),
            wt = ty(DT_F32, 4, q->oc, q->c, q->kh, q->kw);
    ir_type yt = ty(DT_F32, 4, q->n, q->oc, oh, ow), bt = ty(DT_F32, 4, 1, q->oc, 1, 1);
    float *b = frandom(&bt, -1, 1), *y = falloc(&yt);
    double *want = dalloc(numel(&yt));
    for (int relu = 0; relu <= 1; relu++) {
        void *scratch;
        call c;
        conv_call(&c, OP_CONV2D_BIAS, q, y, &yt, threads, &scratch);
        c.node.attr.i[ATTR_BIAS_RELU] = relu;
        call_in(&c, x, &xt);
        call_in(&c, w, &wt);
        call_in(&c, b, &bt);
        call_run(&c);
        free(scratch);
        for (int64_t i = 0; i < numel(&yt); i++) {
            double v = ry[i] + b[i / (oh * ow) % q->oc];
            want[i] = relu && v < 0 ? 0 : v;
        }
        check_close_s(y, want, numel(&yt), TOL, sc, relu ? "conv2d_bias relu" : "conv2d_bias");
    }
    free(b), free(y), free(want);
}

static void check_conv(const conv_case *q, int threads)
{
    int64_t oh = conv_out(q->h, q->kh, q->s, q->p), ow = conv_out(q->w, q->kw, q->s, q->p);
    ir_type xt = ty(DT_F32, 4, q->n, q->c, q->h, q->w),
            wt = ty(DT_F32, 4, q->oc, q->c, q->kh, q->kw);
    ir_type yt = ty(DT_F32, 4, q->n, q->oc, oh, ow);
    float *x = frandom(&xt, -1, 1), *w = frandom(&wt, -1, 1), *dy = frandom(&yt, -1, 1);
    float *y = falloc(&yt), *dx = frandom(&xt, 5, 6), *dw = frandom(&wt, 5, 6);
    double *ry = dalloc(numel(&yt)), *rdx = dalloc(numel(&xt)), *rdw = dalloc(numel(&wt));
    void *scratch;
    call c;
    conv_call(&c, OP_CONV2D, q, y, &yt, threads, &scratch);
    call_in(&c, x, &xt);
    call_in(&c, w, &wt);
    call_run(&c);
    free(scratch);
    conv_call(&c, OP_CONV2D_GRAD_X, q, dx, &xt, threads, &scratch);
    call_in(&c, dy, &yt);
    call_in(&c, w, &wt);
    call_run(&c);
    free(scratch);
    conv_call(&c, OP_CONV2D_GRAD_W, q, dw, &wt, threads, &scratch);
    call_in(&c, dy, &yt);
    call_in(&c, x, &xt);
    call_run(&c);
    free(scratch);
    ref_conv(q, x, w, ry);
    ref_conv_grads(q, x, w, dy, rdx, rdw);
    double sc = sqrt((double)(q->c * q->kh * q->kw));
    check_conv_bias(q, x, w, ry, threads, sc);
    check_close_s(y, ry, numel(&yt), TOL, sc, "conv2d");
    check_close_s(dx, rdx, numel(&xt), TOL, sc, "conv2d_grad_x");
    check_close_s(dw, rdw, numel(&wt), TOL, sqrt((double)(q->n * oh * ow)), "conv2d_grad_w");
    /* adjoint consistency: <dy, conv(x)> == <dx, x> == <dw, w>, within the
     * kernels' rounding of each term: measured against the sum of the
     * terms' magnitudes, as the sum of random signs may cancel to near 0 */
    double a1 = 0, a2 = 0, a3 = 0, mag = 0;
    for (int64_t i = 0; i < numel(&yt); i++) a1 += dy[i] * ry[i], mag += fabs(dy[i] * ry[i]);
    for (int64_t i = 0; i < numel(&xt); i++) a2 += (double)dx[i] * x[i];
    for (int64_t i = 0; i < numel(&wt); i++) a3 += (double)dw[i] * w[i];
    if (!(fabs(a1 - a2) <= 1e-5 * (1 + mag) && fabs(a1 - a3) <= 1e-5 * (1 + mag)))
        fail_msg("adjoints: %.9g %.9g %.9g (terms' magnitude %.9g)", a1, a2, a3, mag);
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(ry), free(rdx), free(rdw);
}

static void test_conv2d_and_grads_against_naive(void **state)
{
    (void)state;
    conv_case cases[] = {
        {1, 1, 5, 5, 1, 3, 3, 1, 0},
        {2, 3, 7, 7, 4, 3, 3, 1, 1},
        {3, 2, 13, 11, 5, 5, 5, 2, 2},
        {5, 3, 7, 9, 2, 1, 1, 1, 0},
        {4, 2, 8, 8, 3, 2, 3, 2, 0},
        {1, 3, 3, 3, 7, 3, 3, 1, 1},
        {3, 4, 31, 13, 3, 3, 1, 3, 1},
        {7, 1, 6, 6, 2, 2, 2, 2, 0},
        /* im2col of several images a GEMM (conv_algo.h): 6 of 100 output
         * positions, so chunks of 6, 6 and 1 on one task */
        {13, 2, 20, 20, 3, 3, 3, 2, 1},
        /* "same" padding at stride 1 (the block path), also with a kernel
         * wider than the image */
        {3, 2, 9, 6, 4, 5, 5, 1, 2},
        {2, 1, 2, 3, 2, 5, 5, 1, 2},
        {4, 3, 8, 8, 2, 3, 5, 1, 1},
        /* Winograd F(2x2, kxk) (conv_algo.h): odd and even sizes, "same",
         * "valid" and wider padding, chunks of several images with a
         * partial last one, more tasks than chunks */
        {3, 8, 14, 14, 9, 5, 5, 1, 2},
        {5, 9, 7, 10, 8, 5, 5, 1, 0},
        {2, 8, 6, 5, 8, 5, 5, 1, 4},
        {7, 8, 9, 9, 10, 3, 3, 1, 1},
        {2, 12, 5, 8, 8, 3, 3, 1, 0},
        {1, 8, 3, 4, 8, 3, 3, 1, 2},
        /* direct 3x3 (conv_algo.h, on CPUs with AVX-512): strides 1 and 2,
         * paddings 0-2, channels that fill no tile evenly, the filter
         * gradient in chunks of 4, 4 and 1 images */
        {5, 17, 9, 11, 19, 3, 3, 2, 0},
        {3, 10, 12, 7, 33, 3, 3, 2, 2},
        {2, 9, 11, 10, 8, 3, 3, 1, 2},
        {9, 16, 28, 28, 16, 3, 3, 1, 1},
        /* the ResNet's strided layers (padding 1), and a source row of two
         * vectors at stride 2 with an input gradient of several per row */
        {4, 16, 14, 14, 32, 3, 3, 2, 1},
        {2, 8, 40, 37, 9, 3, 3, 2, 1},
        /* padding 1 at stride 1 reads x itself (cpu_direct.c's implicit
         * tiles): not square, 5 vectors of outputs, 11 output channels */
        {3, 9, 5, 13, 11, 3, 3, 1, 1},
        /* ... and one too large for its masks (IMPLICIT_MAX): a source */
        {1, 8, 66, 70, 9, 3, 3, 1, 1},
        /* 1x1 layers wide enough for the AVX-512 GEMM (cpu_conv.c's
         * conv_gemm), strided as the ResNet's projections and not */
        {3, 16, 14, 13, 32, 1, 1, 2, 0},
        {2, 32, 9, 9, 40, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int threads = 0; threads <= 2; threads++) check_conv(&cases[i], threads);
}

/* ---- pooling ---- */

/* pad: OP_PAD_SAME (TensorFlow's, the extra cell after) or p on each side;
 * a window is its cells inside the input, an average divides by their
 * count (TF's SAME, PyTorch's count_include_pad=False). */
static void check_pool(int64_t n, int64_t ch, int64_t h, int64_t w, int64_t size, int64_t stride,
                       int64_t pad)
{
    int64_t s = stride ? stride : size, oh, ow, ph, pw;
    if (pad == OP_PAD_SAME) {
        oh = (h + s - 1) / s, ow = (w + s - 1) / s;
        ph = (oh - 1) * s + size - h, pw = (ow - 1) * s + size - w;
        ph = ph > 0 ? ph / 2 : 0, pw = pw > 0 ? pw / 2 : 0;
    } else {
        oh = (h + 2 * pad - size) / s + 1, ow = (w + 2 * pad - size) / s + 1;
        ph = pw = pad;
    }
    ir_type xt = ty(DT_F32, 4, n, ch, h, w), yt = ty(DT_F32, 4, n, ch, oh, ow);
    float *x = frandom(&xt, -1, 1), *dy = frandom(&yt, -1, 1);
    float *ym = falloc(&yt), *ya = falloc(&yt), *gm = frandom(&xt, 3, 4), *ga = frandom(&xt, 3, 4);
    double *rm = dalloc(numel(&yt)), *ra = dalloc(numel(&yt));
    double *rgm = dalloc(numel(&xt)), *rga = dalloc(numel(&xt));
    for (int64_t p = 0; p < n * ch; p++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t yi = (p * oh + i) * ow + j, best = -1, cells = 0;
                double sum = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int64_t a = i * s - ph; a < i * s - ph + size; a++)
                        for (int64_t b = j * s - pw; b < j * s - pw + size; b++) {
                            if (a < 0 || a >= h || b < 0 || b >= w) continue;
                            int64_t xi = (p * h + a) * w + b;
                            if (pass) {
                                rga[xi] += dy[yi] / (double)cells;
                                continue;
                            }
                            sum += x[xi], cells++;
                            if (best < 0 || x[xi] > x[best]) best = xi;
                        }
                assert_true(cells > 0);
                rm[yi] = x[best];
                ra[yi] = sum / (double)cells;
                rgm[best] += dy[yi];
            }
    op_kind ops[4] = {OP_MAXPOOL2D, OP_AVGPOOL2D, OP_MAXPOOL_GRAD, OP_AVGPOOL_GRAD};
    float *outs[4] = {ym, ya, gm, ga};
    for (int k = 0; k < 4; k++) {
        call c;
        call_init(&c, ops[k], k < 2 ? &yt : &xt, outs[k]);
        c.node.attr.i[ATTR_POOL_SIZE] = size;
        c.node.attr.i[ATTR_POOL_STRIDE] = stride;
        c.node.attr.i[ATTR_POOL_PAD] = pad;
        call_in(&c, k < 2 ? x : dy, k < 2 ? &xt : &yt);
        if (k == 2) call_in(&c, x, &xt);
        c.pool = pool2;
        call_run(&c);
    }
    check_close(ym, rm, numel(&yt), "maxpool");
    check_close(ya, ra, numel(&yt), "avgpool");
    check_close(gm, rgm, numel(&xt), "maxpool_grad");
    check_close(ga, rga, numel(&xt), "avgpool_grad");
    free(x), free(dy), free(ym), free(ya), free(gm), free(ga);
    free(rm), free(ra), free(rgm), free(rga);
}

static void test_pools_and_grads(void **state)
{
    (void)state;
    check_pool(2, 3, 8, 8, 2, 0, 0);
    check_pool(1, 1, 7, 7, 2, 0, 0);   /* odd: last row/col dropped */
    check_pool(3, 2, 13, 11, 3, 2, 0); /* overlapping windows */
    check_pool(2, 5, 5, 5, 5, 1, 0);
    check_pool(1, 3, 9, 31, 1, 1, 0);
    check_pool(64, 32, 24, 24, 2, 0, 0); /* big enough to split over the pool */
    /* padding="same": 2x2/2 on odd sizes pads one after (the 2x2 path must
     * not take it), 3x3/1 one each side, 3x3/2 and 5x5/3 uneven */
    check_pool(2, 3, 7, 9, 2, 2, OP_PAD_SAME);
    check_pool(2, 3, 8, 8, 2, 2, OP_PAD_SAME); /* no padding at all */
    check_pool(1, 2, 6, 5, 3, 1, OP_PAD_SAME);
    check_pool(2, 2, 9, 10, 3, 2, OP_PAD_SAME);
    check_pool(1, 2, 11, 7, 5, 3, OP_PAD_SAME);
    check_pool(1, 1, 2, 3, 4, 1, OP_PAD_SAME);     /* a window wider than the image */
    check_pool(32, 16, 15, 15, 3, 2, OP_PAD_SAME); /* split over the pool */
    /* explicit padding, PyTorch's (at most half the window) */
    check_pool(2, 3, 8, 8, 2, 2, 1);
    check_pool(2, 2, 7, 6, 3, 2, 1);
    check_pool(1, 2, 5, 5, 5, 1, 2);
    check_pool(1, 1, 1, 1, 3, 1, 1);
}

static void test_maxpool_grad_first_max_in_window(void **state)
{
    (void)state;
    ir_type xt = ty(DT_F32, 4, 1L, 1L, 2L, 2L), yt = ty(DT_F32, 4, 1L, 1L, 1L, 1L);
    float x[4] = {1, 3, 3, 2}, dy[1] = {5}, dx[4];
    call c;
    call_init(&c, OP_MAXPOOL_GRAD, &xt, dx);
    c.node.attr.i[ATTR_POOL_SIZE] = 2;
    call_in(&c, dy, &yt);
    call_in(&c, x, &xt);
    call_run(&c);
    assert_true(dx[0] == 0 && dx[1] == 5 && dx[2] == 0 && dx[3] == 0);
}

/* ---- max pooling: ties, signed zeros and the fused relu ---- */

/* maxpool2d and maxpool2d_grad (relu 0 and 1) of x [n, ch, h, w] with many
 * ties (cells of -1, -0, 0, 1, 2), exactly against the rule: a window's
 * maximum and gradient are its first cell in row-major order that no later
 * one exceeds, its dy added window after window (and under relu only when
 * the maximum is > 0). */
static void check_maxpool_ties(int64_t n, int64_t ch, int64_t h, int64_t w, int64_t size,
                               int64_t stride, int64_t pad)
{
    int64_t oh = pad == OP_PAD_SAME ? (h + stride - 1) / stride : (h + 2 * pad - size) / stride + 1;
    int64_t ow = pad == OP_PAD_SAME ? (w + stride - 1) / stride : (w + 2 * pad - size) / stride + 1;
    int64_t ph = ops_pool_pad_begin(pad, h, oh, size, stride);
    int64_t pw = ops_pool_pad_begin(pad, w, ow, size, stride);
    static const float cells[5] = {-1.0f, -0.0f, 0.0f, 1.0f, 2.0f};
    ir_type xt = ty(DT_F32, 4, n, ch, h, w), yt = ty(DT_F32, 4, n, ch, oh, ow);
    float *x = falloc(&xt), *dy = frandom(&yt, -1, 1), *y = falloc(&yt), *ry = falloc(&yt);
    for (int64_t i = 0; i < numel(&xt); i++) x[i] = cells[rnd() % 5];
    for (int relu = 0; relu < 2; relu++) {
        float *dx = frandom(&xt, 3, 4), *rdx = falloc(&xt);
        for (int64_t p = 0; p < n * ch; p++)
            for (int64_t yi = p * oh * ow; yi < (p + 1) * oh * ow; yi++) {
                int64_t best = -1, i0 = yi / ow % oh * stride - ph, j0 = yi % ow * stride - pw;
                for (int64_t a = i0 > 0 ? i0 : 0; a < i0 + size && a < h; a++)
                    for (int64_t b = j0 > 0 ? j0 : 0; b < j0 + size && b < w; b++)
                        if (best < 0 || x[(p * h + a) * w + b] > x[best])
                            best = (p * h + a) * w + b;
                ry[yi] = x[best];
                if (!relu || x[best] > 0.0f) rdx[best] += dy[yi];
            }
        call c;
        for (int k = 0; k < 2; k++) {
            call_init(&c, k ? OP_MAXPOOL_GRAD : OP_MAXPOOL2D, k ? &xt : &yt, k ? dx : y);
            c.node.attr.i[ATTR_POOL_SIZE] = size;
            c.node.attr.i[ATTR_POOL_STRIDE] = stride;
            c.node.attr.i[ATTR_POOL_PAD] = pad;
            c.node.attr.i[ATTR_POOL_RELU] = k ? relu : 0;
            call_in(&c, k ? dy : x, k ? &yt : &xt);
            if (k) call_in(&c, x, &xt);
            c.pool = pool2;
            call_run(&c);
        }
        assert_memory_equal(y, ry, (size_t)numel(&yt) * sizeof *y);
        assert_memory_equal(dx, rdx, (size_t)numel(&xt) * sizeof *dx);
        free(dx), free(rdx);
    }
    free(x), free(dy), free(y), free(ry);
}

static void test_maxpool_ties_and_relu(void **state)
{
    (void)state;
    check_maxpool_ties(4, 8, 28, 28, 3, 2, OP_PAD_SAME); /* cifar_towers' pools */
    check_maxpool_ties(4, 8, 14, 14, 3, 2, OP_PAD_SAME);
    check_maxpool_ties(2, 3, 10, 10, 3, 2, 1);             /* padding before: a left edge */
    check_maxpool_ties(2, 3, 12, 8, 4, 2, OP_PAD_SAME);    /* 4x4, one padded each side */
    check_maxpool_ties(2, 3, 6, 5, 3, 1, OP_PAD_SAME);     /* stride 1 */
    check_maxpool_ties(1, 2, 5, 5, 5, 1, 2);               /* a window as wide as the row */
    check_maxpool_ties(1, 2, 100, 128, 3, 2, OP_PAD_SAME); /* bands of rows */
    check_maxpool_ties(2, 3, 9, 9, 3, 2, OP_PAD_SAME);     /* w != stride * ow */
    check_maxpool_ties(2, 3, 8, 8, 2, 2, 0);               /* 2x2 */
    check_maxpool_ties(2, 3, 7, 6, 3, 2, 0);               /* valid, a row's last cells unread */
}

/* ---- local response normalisation ---- */

/* lrn (grad 0) or lrn_grad (grad 1) of x [n, c, sp] (and dy) into out. */
static void run_lrn(int grad, const ir_type *xt, float *out, float *x, float *dy, int64_t r,
                    const float f[3], cpu_pool *pool)
{
    call c;
    call_init(&c, grad ? OP_LRN_GRAD : OP_LRN, xt, out);
    c.node.attr.i[ATTR_LRN_RADIUS] = r;
    c.node.attr.f[ATTR_LRN_BIAS] = f[0];
    c.node.attr.f[ATTR_LRN_ALPHA] = f[1];
    c.node.attr.f[ATTR_LRN_BETA] = f[2];
    if (grad) call_in(&c, dy, xt);
    call_in(&c, x, xt);
    c.pool = pool;
    c.max_tasks = pool ? cpu_pool_size(pool) : 1;
    c.task_bytes = (size_t)(2 * xt->dim[1] * OP_LRN_CHUNK) * sizeof(float);
    c.scratch = grad ? calloc((size_t)c.max_tasks, c.task_bytes) : NULL;
    call_run(&c);
    free(c.scratch);
}

/* TF's lrn and its gradient in double, across the channels of [n, c, sp]:
 * s_k = bias + alpha sum_j x_j^2 over j in [k - r, k + r] inside [0, c),
 * y_k = x_k s_k^-beta, dx_k = dy_k s_k^-beta - 2 alpha beta x_k sum_j dy_j
 * x_j s_j^(-beta - 1), against the kernels serial and on 2 threads. */
static void check_lrn(int64_t n, int64_t ch, int64_t sp, int64_t r, float bias, float alpha,
                      float beta)
{
    ir_type xt = ty(DT_F32, 3, n, ch, sp);
    int64_t total = n * ch * sp;
    float *x = frandom(&xt, -2, 2), *dy = frandom(&xt, -1, 1), *y = falloc(&xt), *dx = falloc(&xt);
    double *ss = dalloc(total), *ry = dalloc(total), *rdx = dalloc(total);
    const float f[3] = {bias, alpha, beta};
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < total; i++) {
            int64_t k = i / sp % ch, img = i / (sp * ch), p = i % sp;
            double acc = 0;
            for (int64_t j = k - r; j <= k + r; j++) {
                if (j < 0 || j >= ch) continue;
                int64_t ij = (img * ch + j) * sp + p;
                acc += pass ? dy[ij] * (double)x[ij] * pow(ss[ij], -beta - 1.0)
                            : (double)x[ij] * x[ij];
            }
            if (!pass) ss[i] = bias + alpha * acc;
            ry[i] = x[i] * pow(ss[i], -beta);
            rdx[i] = dy[i] * pow(ss[i], -beta) - 2.0 * alpha * beta * x[i] * acc;
        }
    for (int threads = 0; threads < 2; threads++) {
        run_lrn(0, &xt, y, x, NULL, r, f, threads ? pool2 : NULL);
        run_lrn(1, &xt, dx, x, dy, r, f, threads ? pool2 : NULL);
        check_close(y, ry, total, "lrn");
        check_close(dx, rdx, total, "lrn_grad");
    }
    free(x), free(dy), free(y), free(dx), free(ss), free(ry), free(rdx);
}

static void test_lrn_and_grad(void **state)
{
    (void)state;
    check_lrn(2, 3, 5, 4, 1.0f, 0.5f, 0.75f);     /* fewer channels than the window */
    check_lrn(3, 64, 196, 4, 1.0f, 0.1f, 0.75f);  /* cifar_towers' window */
    check_lrn(1, 7, 300, 2, 2.0f, 0.3f, 0.5f);    /* blocks of positions and a partial one */
    check_lrn(2, 5, 1, 0, 0.5f, 1.0f, 1.0f);      /* one position, a window of one */
    check_lrn(2, 6, 33, 1, 1.0f, 0.4f, -0.5f);    /* a negative power */
    check_lrn(2, 9, 37, 3, 1e-3f, 2.0f, 2.0f);    /* s far from 1 */
    check_lrn(16, 16, 300, 2, 1.0f, 0.2f, 0.75f); /* split over the pool */
}

/* With bias 0, a position whose window is all zeros has s = 0: powf's
 * 0^-beta = inf, so y and dx are NaN there (0 * inf), as before the
 * vector power (lrn_pow's fallback); the other positions are finite. */
static void test_lrn_zero_scale_is_powf(void **state)
{
    (void)state;
    ir_type xt = ty(DT_F32, 3, 1L, 3L, 300L);
    float *x = frandom(&xt, 0.5f, 1), *dy = frandom(&xt, -1, 1), *y = falloc(&xt);
    float *dx = falloc(&xt);
    const float f[3] = {0.0f, 1.0f, 0.75f};
    for (int64_t k = 0; k < 3; k++) x[k * 300 + 7] = 0.0f;
    run_lrn(0, &xt, y, x, NULL, 1, f, NULL);
    run_lrn(1, &xt, dx, x, dy, 1, f, NULL);
    for (int64_t i = 0; i < 900; i++) {
        double s = 0;
        for (int64_t j = 0; j < 3; j++)
            s += abs((int)(j - i / 300)) <= 1 ? (double)x[j * 300 + i % 300] * x[j * 300 + i % 300]
                                              : 0.0;
        if (i % 300 == 7)
            assert_true(isnan(y[i]) && isnan(dx[i]));
        else
            assert_float_equal(y[i], x[i] * pow(s, -0.75), 1e-5 * fabs(x[i] * pow(s, -0.75)));
    }
    free(x), free(dy), free(y), free(dx);
}

/* ---- shape ops ---- */

static void test_gather_and_gather_grad(void **state)
{
    (void)state;
    int64_t v = 13, d = 7;
    ir_type tt = ty(DT_F32, 2, v, d), it = ty(DT_I32, 2, 3L, 5L), ot = ty(DT_F32, 3, 3L, 5L, d);
    float *table = frandom(&tt, -1, 1), *out = falloc(&ot), *dy = frandom(&ot, -1, 1);
    float *gt = falloc(&tt);
    int32_t ids[15];
    for (int i = 0; i < 15; i++) ids[i] = (int32_t)(rnd() % 13); /* out of range: a fault */
    ids[0] = 2, ids[1] = 2;                                      /* a repeat */
    call c;
    call_init(&c, OP_GATHER, &ot, out);
    call_in(&c, table, &tt);
    call_in(&c, ids, &it);
    call_run(&c);
    call_init(&c, OP_GATHER_GRAD, &tt, gt);
    call_in(&c, dy, &ot);
    call_in(&c, ids, &it);
    call_run(&c);
    double *ro = dalloc(15 * d), *rg = dalloc(v * d);
    for (int i = 0; i < 15; i++)
        for (int64_t j = 0; j < d; j++) {
            ro[i * d + j] = table[ids[i] * d + j];
            rg[ids[i] * d + j] += dy[i * d + j];
        }
    check_close(out, ro, 15 * d, "gather");
    check_close(gt, rg, v * d, "gather_grad");
    free(table), free(out), free(dy), free(gt), free(ro), free(rg);
}

static void test_one_hot(void **state)
{
    (void)state;
    ir_type it = ty(DT_I32, 2, 2L, 3L), ot = ty(DT_F32, 3, 2L, 3L, 4L);
    int32_t ids[6] = {0, 3, 3, 0, 2, 1};
    float out[24];
    call c;
    call_init(&c, OP_ONE_HOT, &ot, out);
    c.node.attr.i[ATTR_DEPTH] = 4;
    call_in(&c, ids, &it);
    call_run(&c);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) assert_true(out[i * 4 + j] == (ids[i] == j ? 1.0f : 0.0f));
}

static void test_slice_and_slice_grad(void **state)
{
    (void)state;
    ir_type xt = ty(DT_F32, 3, 3L, 7L, 5L);
    float *x = frandom(&xt, -1, 1);
    for (int ax = 0; ax < 3; ax++) {
        int64_t n = xt.dim[ax], b = n > 2 ? 1 : 0, e = n > 2 ? n - 1 : n;
        ir_type st = xt;
        st.dim[ax] = e - b;
        float *y = falloc(&st), *g = frandom(&xt, 7, 8), *dy = frandom(&st, -1, 1);
        call c;
        call_init(&c, OP_SLICE, &st, y);
        c.node.attr.i[ATTR_AXIS] = ax, c.node.attr.i[ATTR_SLICE_BEGIN] = b,
        c.node.attr.i[ATTR_SLICE_END] = e;
        call_in(&c, x, &xt);
        call_run(&c);
        call_init(&c, OP_SLICE_GRAD, &xt, g);
        c.node.attr.i[ATTR_AXIS] = ax, c.node.attr.i[ATTR_SLICE_BEGIN] = b,
        c.node.attr.i[ATTR_SLICE_END] = e;
        call_in(&c, dy, &st);
        call_run(&c);
        double *ry = dalloc(numel(&st)), *rg = dalloc(numel(&xt));
        int64_t co[IR_MAX_DIMS];
        for (int64_t i = 0; i < numel(&st); i++) {
            unravel(i, &st, co);
            co[ax] += b;
            int64_t xi = (co[0] * 7 + co[1]) * 5 + co[2];
            ry[i] = x[xi];
            rg[xi] = dy[i];
        }
        check_close(y, ry, numel(&st), "slice");
        check_close(g, rg, numel(&xt), "slice_grad");
        free(y), free(g), free(dy), free(ry), free(rg);
    }
    free(x);
}

static void test_concat_any_axis(void **state)
{
    (void)state;
    for (int ax = 0; ax < 3; ax++) {
        ir_type t[3];
        float *in[3];
        ir_type ot = ty(DT_F32, 3, 3L, 2L, 5L);
        ot.dim[ax] = 0;
        for (int k = 0; k < 3; k++) {
            t[k] = ty(DT_F32, 3, 3L, 2L, 5L);
            t[k].dim[ax] = k + 1;
            ot.dim[ax] += k + 1;
            in[k] = frandom(&t[k], -1, 1);
        }
        float *out = falloc(&ot);
        call c;
        call_init(&c, OP_CONCAT, &ot, out);
        c.node.attr.i[ATTR_AXIS] = ax;
        for (int k = 0; k < 3; k++) call_in(&c, in[k], &t[k]);
        call_run(&c);
        double *ref = dalloc(numel(&ot));
        int64_t co[IR_MAX_DIMS];
        for (int64_t i = 0; i < numel(&ot); i++) {
            unravel(i, &ot, co);
            int k = 0;
            while (co[ax] >= t[k].dim[ax]) co[ax] -= t[k].dim[ax], k++;
            ref[i] = in[k][(co[0] * t[k].dim[1] + co[1]) * t[k].dim[2] + co[2]];
        }
        check_close(out, ref, numel(&ot), "concat");
        for (int k = 0; k < 3; k++) free(in[k]);
        free(out), free(ref);
    }
}

static void test_transpose_permutations(void **state)
{
    (void)state;
    int64_t perms[][4] = {{1, 0, 2, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}, {2, 0, 3, 1}, {0, 1, 2, 3}};
    for (int p = 0; p < 5; p++) {
        ir_type it = ty(DT_F32, 4, 3L, 7L, 2L, 5L), ot = it;
        for (int d = 0; d < 4; d++) ot.dim[d] = it.dim[perms[p][d]];
        float *x = frandom(&it, -1, 1), *y = falloc(&ot);
        call c;
        call_init(&c, OP_TRANSPOSE, &ot, y);
        c.node.attr.n_list = 4;
        memcpy(c.node.attr.list, perms[p], sizeof perms[p]);
        call_in(&c, x, &it);
        call_run(&c);
        double *ref = dalloc(numel(&ot));
        int64_t co[IR_MAX_DIMS], ci[IR_MAX_DIMS];
        for (int64_t i = 0; i < numel(&ot); i++) {
            unravel(i, &ot, co);
            for (int d = 0; d < 4; d++) ci[perms[p][d]] = co[d];
            ref[i] = x[((ci[0] * 7 + ci[1]) * 2 + ci[2]) * 5 + ci[3]];
        }
        check_close(y, ref, numel(&ot), "transpose");
        free(x), free(y), free(ref);
    }
}

static void test_sum_to_and_broadcast(void **state)
{
    (void)state;
    ir_type pairs[][2] = {
        {ty(DT_F32, 2, 13L, 7L), ty(DT_F32, 1, 7L)},
        {ty(DT_F32, 4, 3L, 5L, 7L, 2L), ty(DT_F32, 4, 1L, 5L, 1L, 1L)},
        {ty(DT_F32, 3, 3L, 5L, 7L), ty(DT_F32, 0)},
        {ty(DT_F32, 3, 3L, 5L, 7L), ty(DT_F32, 3, 3L, 1L, 7L)},
        {ty(DT_F32, 3, 3L, 5L, 7L), ty(DT_F32, 2, 5L, 1L)},
        {ty(DT_F32, 2, 3L, 5L), ty(DT_F32, 2, 3L, 5L)},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        ir_type *big = &pairs[k][0], *sm = &pairs[k][1];
        float *x = frandom(big, -1, 1), *s = falloc(sm), *v = frandom(sm, -1, 1), *b = falloc(big);
        call c;
        call_init(&c, OP_SUM_TO, sm, s);
        call_in(&c, x, big);
        call_run(&c);
        call_init(&c, OP_BROADCAST, big, b);
        call_in(&c, v, sm);
        c.pool = pool2;
        call_run(&c);
        double *rs = dalloc(numel(sm)), *rb = dalloc(numel(big));
        int64_t co[IR_MAX_DIMS];
        for (int64_t i = 0; i < numel(big); i++) {
            unravel(i, big, co);
            int64_t j = bindex(co, big->rank, sm);
            rs[j] += x[i];
            rb[i] = v[j];
        }
        check_close(s, rs, numel(sm), "sum_to");
        check_close(b, rb, numel(big), "broadcast");
        free(x), free(s), free(v), free(b), free(rs), free(rb);
    }
}

static void test_reshape_identity_cast_const(void **state)
{
    (void)state;
    ir_type ft = ty(DT_F32, 2, 3L, 4L), it = ty(DT_I32, 2, 3L, 4L), rt = ty(DT_F32, 1, 12L);
    float x[12] = {-2.7f, -1.5f, -0.5f, 0, 0.5f, 1.5f, 2.7f, 3, 1e10f, -1e10f, 7.9f, -7.9f};
    int32_t want[12] = {-2, -1, 0, 0, 0, 1, 2, 3, 2147483520, INT32_MIN, 7, -7};
    int32_t xi[12];
    float back[12], y[12];
    call c;
    call_init(&c, OP_CAST, &it, xi);
    c.node.attr.i[ATTR_CAST_DTYPE] = DT_I32;
    call_in(&c, x, &ft);
    call_run(&c);
    for (int i = 0; i < 12; i++) assert_int_equal(xi[i], want[i]);
    call_init(&c, OP_CAST, &ft, back);
    call_in(&c, xi, &it);
    call_run(&c);
    for (int i = 0; i < 12; i++) assert_true(back[i] == (float)want[i]);
    op_kind copies[2] = {OP_RESHAPE, OP_IDENTITY};
    for (int k = 0; k < 2; k++) {
        call_init(&c, copies[k], &rt, y);
        call_in(&c, x, &ft);
        call_run(&c);
        assert_memory_equal(x, y, sizeof x);
        call_init(&c, copies[k], &ft, x); /* in place: a no-op */
        call_in(&c, x, &ft);
        call_run(&c);
    }
    /* constants are filled on the host, once per executor, not by a kernel */
    call_init(&c, OP_CONST, &ft, y);
    c.node.type = ft;
    c.node.attr.f[ATTR_CONST_VALUE] = 2.5;
    ir_const_fill(&c.node, y);
    for (int i = 0; i < 12; i++) assert_true(y[i] == 2.5f);
    call_init(&c, OP_CONST, &it, xi);
    c.node.type = it;
    c.node.attr.f[ATTR_CONST_VALUE] = 7;
    ir_const_fill(&c.node, xi);
    for (int i = 0; i < 12; i++) assert_int_equal(xi[i], 7);
    call_init(&c, OP_CONST, &ft, y);
    c.node.type = ft;
    c.node.cdata = x;
    ir_const_fill(&c.node, y);
    assert_memory_equal(x, y, sizeof x);
    call_init(&c, OP_GROUP, &ft, NULL);
    call_run(&c);
}

/* Every op on the CPU: a source has no kernel (the executor provides its
 * buffer), every other op has one.  The simulated GPU runs this table;
 * CUDA's rows are checked from their source by test_cuda_rows.c. */
static void test_every_op_has_a_cpu_kernel(void **state)
{
    (void)state;
    const device_vtable *devices[] = {&cpu_vtable};
    int holes = 0;
    for (size_t d = 0; d < sizeof devices / sizeof *devices; d++)
        for (int op = 0; op < OP_COUNT; op++) {
            int want = !ops_has(op, OPF_SOURCE), have = devices[d]->kernels[op] != NULL;
            if (want == have) continue;
            print_error("%s: %s %s\n", devices[d]->name, ops_name(op),
                        have ? "is a source but has a kernel" : "has no kernel");
            holes++;
        }
    assert_int_equal(holes, 0);
}

/* Ids and labels outside their range are faults naming the bad value and
 * where it is, for every op that reads them. */
static void test_ids_out_of_range_fault(void **state)
{
    (void)state;
    float table[3 * 2] = {0}, out[4 * 3] = {0}, dy[4 * 2] = {0}, logits[2 * 3] = {0};
    int32_t ids[4] = {0, 2, 3, 1}, labels[2] = {1, -1};
    ir_type tt = {DT_F32, 2, {3, 2}}, it = {DT_I32, 2, {2, 2}}, ot = {DT_F32, 3, {2, 2, 2}};
    ir_type lt = {DT_I32, 1, {2}}, xt = {DT_F32, 2, {2, 3}}, rt = {DT_F32, 1, {2}};
    call c;
    call_init(&c, OP_GATHER, &ot, out);
    call_in(&c, table, &tt);
    call_in(&c, ids, &it);
    assert_int_equal(call_status(&c), -1);
    assert_string_equal(c.fault.msg, "id 3 at [1,0] is outside [0, 3)");
    call_init(&c, OP_GATHER_GRAD, &tt, table);
    call_in(&c, dy, &ot);
    call_in(&c, ids, &it);
    assert_int_equal(call_status(&c), -1);
    call_init(&c, OP_APPLY_SGD_ROWS, &(ir_type){DT_F32, 1, {0}}, NULL);
    call_in(&c, table, &tt);
    call_in(&c, dy, &ot);
    call_in(&c, ids, &it);
    assert_int_equal(call_status(&c), -1);
    call_init(&c, OP_ONE_HOT, &(ir_type){DT_F32, 3, {2, 2, 3}}, out);
    call_in(&c, ids, &it);
    assert_int_equal(call_status(&c), -1);
    call_init(&c, OP_SOFTMAX_XENT, &rt, out);
    call_in(&c, logits, &xt);
    call_in(&c, labels, &lt);
    assert_int_equal(call_status(&c), -1);
    assert_string_equal(c.fault.msg, "label -1 at [1] is outside [0, 3)");
    labels[1] = 2; /* in range: no fault */
    assert_int_equal(call_status(&c), 0);
}

/* A device whose table lacks an op: placing that op there is a compile
 * error naming the op, the device and the line; --soft-placement moves the
 * node to cpu:0 with a warning. */
static kernel_fn holed[OP_COUNT];

static int holed_implements(void *ctx, op_kind op, int dev)
{
    (void)ctx;
    return (IR_DEV_KIND(dev) == DEV_CPU ? cpu_kernels : holed)[op] != NULL;
}

/* The placement pass again on p's graph, on cpu:0 and a GPU with `holed`. */
static int place_holed(gr_program *p, int soft)
{
    place_options po = {
        .n_cpu = 1, .n_gpu = 1, .soft_placement = soft, .implements = holed_implements};
    return place_run(p->g, &po);
}

static char *diags_text(const gr_program *p)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    diag_print(&p->diags, f);
    fclose(f);
    return out;
}

static void test_missing_kernel_is_a_compile_error(void **state)
{
    (void)state;
    const char *text = "input x: f32[2, 3]\nvar w = zeros([3, 4])\ny = sum(x @ w @gpu:0)\n";
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_compile_options o = {.devices = "cpu:0,sim:0"};
    assert_int_equal(gr_compile_string("hole.graph", text, strlen(text), &o, &p, st), GR_OK);
    memcpy(holed, cpu_kernels, sizeof holed);
    assert_int_equal(place_holed(p, 0), 0);
    holed[OP_MATMUL] = NULL;
    assert_int_equal(place_holed(p, 0), -1);
    char *out = diags_text(p);
    assert_non_null(strstr(out, "hole.graph:3:9: error: 'matmul' has no kernel on gpu:0\n"
                                "y = sum(x @ w @gpu:0)\n"));
    free(out);
    assert_int_equal(place_holed(p, 1), 0); /* soft: moved */
    out = diags_text(p);
    assert_non_null(strstr(out, "'matmul' has no kernel on gpu:0; it runs on cpu:0"));
    free(out);
    for (int i = 0; i < p->g->n_nodes; i++) /* now on cpu:0 */
        if (p->g->nodes[i].op == OP_MATMUL)
            assert_int_equal(p->g->nodes[i].device, IR_DEV(DEV_CPU, 0));
    gr_program_free(p);
    o = (gr_compile_options){.devices = "cpu:0,gpu:0-x"};
    assert_int_equal(gr_compile_string("hole.graph", text, strlen(text), &o, &p, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "--devices 'cpu:0,gpu:0-x'"));
    gr_status_free(st);
}

/* i32 neg negates integers (it once flipped the float sign bit of an i32). */
static void test_neg_i32(void **state)
{
    (void)state;
    int32_t x[4] = {1, -7, 0, INT32_MIN}, y[4];
    ir_type t = {.dtype = DT_I32, .rank = 1, .dim = {4}};
    call c;
    call_init(&c, OP_NEG, &t, y);
    call_in(&c, x, &t);
    call_run(&c);
    assert_int_equal(y[0], -1);
    assert_int_equal(y[1], 7);
    assert_int_equal(y[2], 0);
    assert_int_equal(y[3], INT32_MIN); /* wraps, like i32 arithmetic */
}

/* ---- dropout ---- */

static void run_dropout(op_kind op, float *y, const float *x, const ir_type *t, float rate,
                        int training, uint64_t step, cpu_pool *pool)
{
    call c;
    call_init(&c, op, t, y);
    c.node.attr.f[ATTR_DROPOUT_RATE] = rate;
    c.node.attr.i[ATTR_DROPOUT_TRAINING] = training;
    call_in(&c, (void *)x, t);
    c.seed = 42;
    c.step = step;
    c.pool = pool;
    call_run(&c);
}

static void test_dropout_mask_rate_grad_and_eval(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 311L, 331L);
    int64_t n = numel(&t);
    float *x = frandom(&t, 1, 2), *y = falloc(&t), *g = falloc(&t), *y2 = falloc(&t);
    float rate = 0.3f;
    run_dropout(OP_DROPOUT, y, x, &t, rate, 1, 5, pool2);
    run_dropout(OP_DROPOUT_GRAD, g, x, &t, rate, 1, 5, NULL);
    run_dropout(OP_DROPOUT, y2, x, &t, rate, 1, 6, NULL);
    int64_t dropped = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] == 0.0f)
            dropped++;
        else
            assert_float_equal(y[i], x[i] / (1 - rate), 1e-6);
        assert_true(g[i] == y[i]); /* same seed and step: same mask */
        differ += (y[i] == 0.0f) != (y2[i] == 0.0f);
    }
    double frac = (double)dropped / (double)n, sd = sqrt(rate * (1 - rate) / (double)n);
    assert_true(fabs(frac - rate) < 5 * sd);
    /* two independent masks disagree on about 2 p (1-p) of the elements */
    assert_true(fabs((double)differ / (double)n - 2 * rate * (1 - rate)) < 0.01);
    run_dropout(OP_DROPOUT, y, x, &t, rate, 0, 5, NULL);
    assert_memory_equal(x, y, (size_t)n * 4);
    free(x), free(y), free(g), free(y2);
}

/* ---- updates ---- */

/* An update of op on bufs (the variable, gradient, slots, step), then its
 * learning rate and gradient scale as f32[] inputs. */
static void run_update(op_kind op, const ir_type *t, void **bufs, int n, const double *f, int nest,
                       float lr, float gs)
{
    ir_type tok = ty(DT_F32, 0), sc = ty(DT_F32, 0);
    call c;
    call_init(&c, op, &tok, NULL);
    for (int k = 0; k < n; k++) call_in(&c, bufs[k], op == OP_APPLY_ADAM && k == 4 ? &sc : t);
    call_in(&c, &lr, &sc);
    call_in(&c, &gs, &sc);
    for (int k = 0; k < 5; k++) c.node.attr.f[k] = f[k];
    c.node.attr.i[ATTR_NESTEROV] = nest;
    c.pool = pool2;
    call_run(&c);
}

/* Adam's step on var/m/v (doubles) as the papers write it, with AdamW's
 * decoupled decay first: var -= lr * wd * var. */
static void adam_ref(double *rv, double *r1, double *r2, const float *var, const float *g,
                     const float *m, const float *v, int64_t n, const double *hp, double gs)
{
    double lr = hp[0], b1 = hp[1], b2 = hp[2], eps = hp[3], wd = hp[4], t = 3;
    for (int64_t i = 0; i < n; i++) {
        double gi = gs * g[i];
        r1[i] = b1 * m[i] + (1 - b1) * gi;
        r2[i] = b2 * v[i] + (1 - b2) * gi * gi;
        double mh = r1[i] / (1 - pow(b1, t)), vh = r2[i] / (1 - pow(b2, t));
        rv[i] = var[i] * (1 - lr * wd) - lr * mh / (sqrt(vh) + eps);
    }
}

static void test_update_rules_by_hand(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 313L, 257L); /* big enough to split */
    int64_t n = numel(&t);
    float *var = frandom(&t, -1, 1), *g = frandom(&t, -1, 1), *s1 = frandom(&t, -1, 1);
    float *s2 = frandom(&t, 0, 1), tstep = 3;
    double *rv = dalloc(n), *r1 = dalloc(n), *r2 = dalloc(n);
    for (int64_t i = 0; i < n; i++) rv[i] = var[i] - 0.1 * 0.5 * g[i];
    run_update(OP_APPLY_SGD, &t, (void *[]){var, g}, 2, (double[]){0, 0, 0, 0, 0}, 0, 0.1f, 0.5f);
    check_close(var, rv, n, "sgd");
    for (int nest = 0; nest < 2; nest++) {
        for (int64_t i = 0; i < n; i++) {
            double gi = 0.25 * g[i];
            r1[i] = 0.9 * s1[i] + gi;
            rv[i] = var[i] - 0.05 * (nest ? gi + 0.9 * r1[i] : r1[i]);
        }
        run_update(OP_APPLY_MOMENTUM, &t, (void *[]){var, g, s1}, 3, (double[]){0, 0.9, 0, 0, 0},
                   nest, 0.05f, 0.25f);
        check_close(var, rv, n, "momentum var");
        check_close(s1, r1, n, "momentum accum");
    }
    for (int w = 0; w < 2; w++) { /* adam, then adamw */
        double hp[5] = {0.01, 0.9, 0.999, 1e-8, w ? 0.1 : 0}, gs = w ? 0.5 : 1;
        adam_ref(rv, r1, r2, var, g, s1, s2, n, hp, gs);
        run_update(OP_APPLY_ADAM, &t, (void *[]){var, g, s1, s2, &tstep}, 5, hp, 0, 0.01f,
                   (float)gs);
        check_close(var, rv, n, w ? "adamw var" : "adam var");
        check_close(s1, r1, n, "adam m");
        check_close(s2, r2, n, "adam v");
    }
    free(var), free(g), free(s1), free(s2), free(rv), free(r1), free(r2);
}

/* An update with attrs f[0..4] and i[0] (rmsprop's centered). */
static void run_update_i0(op_kind op, const ir_type *t, void **bufs, int n, const double *f, int i0,
                          float lr, float gs)
{
    ir_type tok = ty(DT_F32, 0), sc = ty(DT_F32, 0);
    call c;
    call_init(&c, op, &tok, NULL);
    for (int k = 0; k < n; k++) call_in(&c, bufs[k], t);
    call_in(&c, &lr, &sc);
    call_in(&c, &gs, &sc);
    for (int k = 0; k < 5; k++) c.node.attr.f[k] = f[k];
    c.node.attr.i[0] = i0;
    c.pool = pool2;
    call_run(&c);
}

/* sgd and momentum with an L2 weight decay, rmsprop (plain; with momentum,
 * centered and a decay), adagrad and adadelta, against PyTorch's formulas
 * in double (g' = gs g + wd w). */
static void test_decay_and_adaptive_rules_by_hand(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 2, 313L, 257L); /* big enough to split */
    int64_t n = numel(&t);
    float *var = frandom(&t, -1, 1), *g = frandom(&t, -1, 1), *s1 = frandom(&t, 0.5, 1);
    float *s2 = frandom(&t, 0, 1), *s3 = frandom(&t, -0.1, 0.1);
    double *rv = dalloc(n), *r1 = dalloc(n), *r2 = dalloc(n), *r3 = dalloc(n);
    for (int64_t i = 0; i < n; i++) rv[i] = var[i] - 0.1 * (0.5 * g[i] + 0.01 * var[i]);
    run_update(OP_APPLY_SGD, &t, (void *[]){var, g}, 2, (double[]){0, 0, 0, 0, 0.01}, 0, 0.1f,
               0.5f);
    check_close(var, rv, n, "sgd weight_decay");
    for (int64_t i = 0; i < n; i++) {
        double gi = 0.25 * g[i] + 0.1 * var[i];
        r1[i] = 0.9 * s2[i] + gi;
        rv[i] = var[i] - 0.05 * (gi + 0.9 * r1[i]);
    }
    run_update(OP_APPLY_MOMENTUM, &t, (void *[]){var, g, s2}, 3, (double[]){0, 0.9, 0, 0, 0.1}, 1,
               0.05f, 0.25f);
    check_close(var, rv, n, "momentum weight_decay var");
    check_close(s2, r1, n, "momentum weight_decay accum");
    for (int64_t i = 0; i < n;
         i++) { /* rmsprop(0.01, rho=0.99): v, then w -= lr g / (sqrt(v) + eps) */
        double gi = 0.5 * g[i];
        r1[i] = 0.99 * s1[i] + 0.01 * gi * gi;
        rv[i] = var[i] - 0.01 * gi / (sqrt(r1[i]) + 1e-8);
    }
    run_update_i0(OP_APPLY_RMSPROP, &t, (void *[]){var, g, s1}, 3, (double[]){0, 0.99, 0, 1e-8, 0},
                  0, 0.01f, 0.5f);
    check_close(var, rv, n, "rmsprop var");
    check_close(s1, r1, n, "rmsprop v");
    for (int64_t i = 0; i < n; i++) { /* m = 0.9, centered, weight_decay = 0.1 */
        double gi = g[i] + 0.1 * var[i];
        r1[i] = 0.9 * s1[i] + 0.1 * gi * gi;
        r3[i] = 0.9 * s3[i] + 0.1 * gi;
        r2[i] = 0.9 * s2[i] + gi / (sqrt(r1[i] - r3[i] * r3[i]) + 1e-8);
        rv[i] = var[i] - 0.01 * r2[i];
    }
    run_update_i0(OP_APPLY_RMSPROP, &t, (void *[]){var, g, s1, s2, s3}, 5,
                  (double[]){0, 0.9, 0.9, 1e-8, 0.1}, 1, 0.01f, 1.0f);
    check_close(var, rv, n, "rmsprop centered var");
    check_close(s1, r1, n, "rmsprop centered v");
    check_close(s2, r2, n, "rmsprop momentum");
    check_close(s3, r3, n, "rmsprop mean gradient");
    for (int64_t i = 0; i < n; i++) { /* adagrad: s += g², w -= lr g / (sqrt(s) + eps) */
        double gi = 0.5 * g[i] + 0.01 * var[i];
        r1[i] = s1[i] + gi * gi;
        rv[i] = var[i] - 0.1 * gi / (sqrt(r1[i]) + 1e-10);
    }
    run_update_i0(OP_APPLY_ADAGRAD, &t, (void *[]){var, g, s1}, 3, (double[]){0, 0, 0, 1e-10, 0.01},
                  0, 0.1f, 0.5f);
    check_close(var, rv, n, "adagrad var");
    check_close(s1, r1, n, "adagrad sum");
    for (int64_t i = 0; i < n; i++) s2[i] = 0.01f * (float)(i % 5); /* u >= 0 */
    for (int64_t i = 0; i < n; i++) { /* adadelta(1.0, rho=0.9, eps=1e-6) */
        double gi = g[i];
        r1[i] = 0.9 * s1[i] + 0.1 * gi * gi;
        double d = sqrt(s2[i] + 1e-6) / sqrt(r1[i] + 1e-6) * gi;
        r2[i] = 0.9 * s2[i] + 0.1 * d * d;
        rv[i] = var[i] - 1.0 * d;
    }
    run_update_i0(OP_APPLY_ADADELTA, &t, (void *[]){var, g, s1, s2}, 4,
                  (double[]){0, 0.9, 0, 1e-6, 0}, 0, 1.0f, 1.0f);
    check_close(var, rv, n, "adadelta var");
    check_close(s1, r1, n, "adadelta v");
    check_close(s2, r2, n, "adadelta u");
    free(var), free(g), free(s1), free(s2), free(s3), free(rv), free(r1), free(r2), free(r3);
}

/* sgd_rows scales its rows by lr * gscale; a repeated id adds both rows. */
static void test_sgd_rows_scale_by_gscale(void **state)
{
    (void)state;
    ir_type vt = ty(DT_F32, 2, 3L, 2L), rt = ty(DT_F32, 2, 2L, 2L), it = ty(DT_I32, 1, 2L);
    ir_type sc = ty(DT_F32, 0), tok = ty(DT_F32, 0);
    float var[6] = {1, 1, 1, 1, 1, 1}, rows[4] = {1, 2, 3, 4}, lr = 0.5f, gs = 0.5f;
    int32_t ids[2] = {2, 2};
    call c;
    call_init(&c, OP_APPLY_SGD_ROWS, &tok, NULL);
    call_in(&c, var, &vt);
    call_in(&c, rows, &rt);
    call_in(&c, ids, &it);
    call_in(&c, &lr, &sc);
    call_in(&c, &gs, &sc);
    call_run(&c);
    float want[6] = {1, 1, 1, 1, 1 - 0.25f * 4, 1 - 0.25f * 6};
    assert_memory_equal(var, want, sizeof var);
}

/* ---- row updates against the dense update of the summed gradient ---- */

enum { RW_V = 5, RW_D = 3, RW_STEPS = 3 };

typedef struct rows_state {
    float var[RW_V * RW_D], s1[RW_V * RW_D], s2[RW_V * RW_D], s3[RW_V * RW_D], step;
} rows_state;

static int is_rows_op(op_kind op)
{
    return op == OP_APPLY_SGD_ROWS || op == OP_APPLY_MOMENTUM_ROWS || op == OP_APPLY_ADAM_ROWS ||
           op == OP_APPLY_RMSPROP_ROWS || op == OP_APPLY_ADAGRAD_ROWS ||
           op == OP_APPLY_ADADELTA_ROWS;
}

/* One step of op on st: dense (grad [V,D]) or rows (rows [n,D], ids). */
static void rows_step(op_kind op, rows_state *st, const float *g, const int32_t *ids, int64_t n)
{
    ir_type vt = ty(DT_F32, 2, (int64_t)RW_V, (int64_t)RW_D), sc = ty(DT_F32, 0),
            tok = ty(DT_F32, 1, 0L);
    ir_type rt = ty(DT_F32, 2, n, (int64_t)RW_D), it = ty(DT_I32, 1, n);
    float lr = 0.05f, gs = 0.7f;
    int rows = is_rows_op(op);
    int adam = op == OP_APPLY_ADAM || op == OP_APPLY_ADAM_ROWS;
    int sgd = op == OP_APPLY_SGD || op == OP_APPLY_SGD_ROWS;
    int rms = op == OP_APPLY_RMSPROP || op == OP_APPLY_RMSPROP_ROWS;
    int two = op == OP_APPLY_ADADELTA || op == OP_APPLY_ADADELTA_ROWS;
    uint64_t scratch[64];
    call c;
    call_init(&c, op, &tok, NULL);
    c.scratch = scratch;
    call_in(&c, st->var, &vt);
    call_in(&c, (void *)g, rows ? &rt : &vt);
    if (rows) call_in(&c, (void *)ids, &it);
    if (!sgd) call_in(&c, st->s1, &vt);
    if (adam) call_in(&c, st->s2, &vt), call_in(&c, &st->step, &sc);
    if (rms || two) call_in(&c, st->s2, &vt); /* rmsprop: m = ATTR_ADAM_B2's 0.999 */
    if (rms) call_in(&c, st->s3, &vt), c.node.attr.i[ATTR_RMS_CENTERED] = 1;
    call_in(&c, &lr, &sc);
    call_in(&c, &gs, &sc);
    c.node.attr.f[ATTR_MOMENTUM_M] = 0.9; /* ATTR_ADAM_B1 is the same slot */
    c.node.attr.i[ATTR_NESTEROV] = 1;
    c.node.attr.f[ATTR_ADAM_B2] = 0.999, c.node.attr.f[ATTR_ADAM_EPS] = 1e-8;
    c.node.attr.f[ATTR_ADAM_WD] = 0.1;
    call_run(&c);
}

/* Steps of the row op and the dense op (with gather_grad's table: rows of
 * a repeated id added in batch order) from the same state agree to 1e-6;
 * every row is touched each step. */
static void check_rows_match_dense(op_kind rows_op, op_kind dense_op, const int32_t *ids, int64_t n)
{
    rows_state a, b;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < RW_V * RW_D; i++) a.var[i] = 0.1f * (float)(i % 7) - 0.3f;
    b = a;
    float rows[16 * RW_D], dense[RW_V * RW_D];
    for (int t = 1; t <= RW_STEPS; t++) {
        for (int64_t i = 0; i < n * RW_D; i++) rows[i] = (float)sin((double)(t * 31 + i)) * 0.5f;
        memset(dense, 0, sizeof dense);
        for (int64_t r = 0; r < n; r++)
            for (int j = 0; j < RW_D; j++) dense[ids[r] * RW_D + j] += rows[r * RW_D + j];
        a.step = b.step = (float)t;
        rows_step(rows_op, &a, rows, ids, n);
        rows_step(dense_op, &b, dense, NULL, 0);
        for (int i = 0; i < RW_V * RW_D; i++) {
            assert_float_equal(a.var[i], b.var[i], 1e-6);
            assert_float_equal(a.s1[i], b.s1[i], 1e-6);
            assert_float_equal(a.s2[i], b.s2[i], 1e-6);
            assert_float_equal(a.s3[i], b.s3[i], 1e-6);
        }
    }
}

static const int32_t rw_perm[RW_V] = {3, 0, 4, 1, 2};
static const int32_t rw_dups[9] = {2, 0, 2, 4, 1, 3, 0, 2, 4};

static void test_momentum_rows_equal_dense_on_a_permutation(void **state)
{
    (void)state;
    check_rows_match_dense(OP_APPLY_MOMENTUM_ROWS, OP_APPLY_MOMENTUM, rw_perm, RW_V);
}

static void test_momentum_rows_sum_repeated_ids_first(void **state)
{
    (void)state;
    check_rows_match_dense(OP_APPLY_MOMENTUM_ROWS, OP_APPLY_MOMENTUM, rw_dups, 9);
}

static void test_adam_rows_equal_dense_on_a_permutation(void **state)
{
    (void)state;
    check_rows_match_dense(OP_APPLY_ADAM_ROWS, OP_APPLY_ADAM, rw_perm, RW_V);
}

static void test_adam_rows_sum_repeated_ids_first(void **state)
{
    (void)state;
    check_rows_match_dense(OP_APPLY_ADAM_ROWS, OP_APPLY_ADAM, rw_dups, 9);
}

/* Every row op (weight decay 0.1, rho 0.9, rmsprop with momentum and
 * centered) against its dense op, on a permutation and on repeated ids. */
static void test_new_rows_ops_equal_dense(void **state)
{
    (void)state;
    static const op_kind pairs[][2] = {{OP_APPLY_SGD_ROWS, OP_APPLY_SGD},
                                       {OP_APPLY_RMSPROP_ROWS, OP_APPLY_RMSPROP},
                                       {OP_APPLY_ADAGRAD_ROWS, OP_APPLY_ADAGRAD},
                                       {OP_APPLY_ADADELTA_ROWS, OP_APPLY_ADADELTA}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        check_rows_match_dense(pairs[k][0], pairs[k][1], rw_perm, RW_V);
        check_rows_match_dense(pairs[k][0], pairs[k][1], rw_dups, 9);
    }
}

/* Lazy adagrad: a row no id names keeps its value and its sum. */
static void test_adagrad_rows_leave_other_rows_alone(void **state)
{
    (void)state;
    rows_state a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < RW_V * RW_D; i++) a.var[i] = 1.0f, a.s1[i] = 0.5f;
    int32_t ids[2] = {3, 3};
    float rows[2 * RW_D] = {1, 2, 3, 4, 5, 6};
    rows_step(OP_APPLY_ADAGRAD_ROWS, &a, rows, ids, 2);
    for (int i = 0; i < RW_V * RW_D; i++) {
        int moved = i / RW_D == 3;
        assert_true((a.var[i] != 1.0f) == moved);
        assert_true((a.s1[i] != 0.5f) == moved);
    }
}

/* Lazy: a row no id names keeps its value and its slots. */
static void test_adam_rows_leave_other_rows_alone(void **state)
{
    (void)state;
    rows_state a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < RW_V * RW_D; i++) a.var[i] = 1.0f, a.s1[i] = 0.5f, a.s2[i] = 0.25f;
    a.step = 4;
    int32_t ids[2] = {1, 1};
    float rows[2 * RW_D] = {1, 2, 3, 4, 5, 6};
    rows_step(OP_APPLY_ADAM_ROWS, &a, rows, ids, 2);
    for (int i = 0; i < RW_V * RW_D; i++) {
        int moved = i / RW_D == 1;
        assert_true((a.var[i] != 1.0f) == moved);
        assert_true((a.s1[i] != 0.5f) == moved);
    }
}

/* rows_sum: each id's rows summed at its first place, 0 at its repeats, so
 * its squares are the dense gradient's. */
static void test_rows_sum_puts_each_ids_sum_at_its_first_place(void **state)
{
    (void)state;
    ir_type rt = ty(DT_F32, 2, 4L, 2L), it = ty(DT_I32, 1, 4L);
    float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    int32_t ids[4] = {3, 1, 3, 3};
    uint64_t scratch[8];
    call c;
    call_init(&c, OP_ROWS_SUM, &rt, out);
    c.scratch = scratch;
    call_in(&c, rows, &rt);
    call_in(&c, ids, &it);
    call_run(&c);
    float want[8] = {1 + 5 + 7, 2 + 6 + 8, 3, 4, 0, 0, 0, 0};
    assert_memory_equal(out, want, sizeof want);
}

/* The schedules at the steps that pin their shape: the warmup's line, the
 * peak at the end of warmup, the middle of the decay and its end. */
static float lr_factor_at(int kind, double lr, double min, int64_t warmup, int64_t steps,
                          double factor, float t)
{
    ir_type sc = ty(DT_F32, 0);
    float out = -1;
    call c;
    call_init(&c, OP_LR_SCHEDULE, &sc, &out);
    call_in(&c, &t, &sc);
    c.node.attr.i[ATTR_LR_KIND] = kind;
    c.node.attr.f[ATTR_LR_LR] = lr;
    c.node.attr.f[ATTR_LR_MIN] = min;
    c.node.attr.i[ATTR_LR_WARMUP] = warmup;
    c.node.attr.i[ATTR_LR_STEPS] = steps;
    c.node.attr.f[ATTR_LR_FACTOR] = factor;
    call_run(&c);
    return out;
}

static float lr_at(int kind, double lr, double min, int64_t warmup, int64_t steps, float t)
{
    return lr_factor_at(kind, lr, min, warmup, steps, 0, t);
}

static void test_lr_schedules_by_hand(void **state)
{
    (void)state;
    for (int kind = OP_LR_WARMUP; kind <= OP_LR_COSINE; kind++) {
        assert_float_equal(lr_at(kind, 1e-3, 1e-4, 10, 110, 1), 1e-4, 1e-9); /* 1/10 of the peak */
        assert_float_equal(lr_at(kind, 1e-3, 1e-4, 10, 110, 5), 5e-4, 1e-9);
        assert_float_equal(lr_at(kind, 1e-3, 1e-4, 10, 110, 10), 1e-3, 1e-9); /* the peak */
    }
    assert_float_equal(lr_at(OP_LR_WARMUP, 1e-3, 0, 10, 10, 1e6f), 1e-3, 1e-9);
    assert_float_equal(lr_at(OP_LR_LINEAR, 1e-3, 1e-4, 10, 110, 60), 5.5e-4, 1e-9);
    assert_float_equal(lr_at(OP_LR_COSINE, 1e-3, 1e-4, 10, 110, 60), 5.5e-4, 1e-9);
    /* a quarter of the way: the cosine is still above the line */
    double q = 1e-4 + 0.5 * 9e-4 * (1 + cos(M_PI / 4));
    assert_float_equal(lr_at(OP_LR_COSINE, 1e-3, 1e-4, 10, 110, 35), q, 1e-9);
    assert_float_equal(lr_at(OP_LR_LINEAR, 1e-3, 1e-4, 10, 110, 35), 7.75e-4, 1e-9);
    for (int kind = OP_LR_LINEAR; kind <= OP_LR_COSINE; kind++) {
        assert_float_equal(lr_at(kind, 1e-3, 1e-4, 10, 110, 110), 1e-4, 1e-9); /* the end */
        assert_float_equal(lr_at(kind, 1e-3, 1e-4, 10, 110, 5000), 1e-4, 1e-9);
        assert_float_equal(lr_at(kind, 1e-3, 0, 0, 100, 0), 1e-3, 1e-9); /* no warmup */
    }
    /* step_decay(0.1, every=3, gamma=0.5): runs 1-3 at 0.1, 4-6 at 0.05 */
    assert_float_equal(lr_factor_at(OP_LR_STEP, 0.1, 0, 0, 3, 0.5, 3), 0.1, 1e-9);
    assert_float_equal(lr_factor_at(OP_LR_STEP, 0.1, 0, 0, 3, 0.5, 4), 0.05, 1e-9);
    assert_float_equal(lr_factor_at(OP_LR_STEP, 0.1, 0, 0, 3, 0.5, 7), 0.025, 1e-9);
    /* exponential(0.1, decay=0.5, every=2): half a period is sqrt(0.5) */
    assert_float_equal(lr_factor_at(OP_LR_EXP, 0.1, 0, 0, 2, 0.5, 1), 0.1, 1e-9);
    assert_float_equal(lr_factor_at(OP_LR_EXP, 0.1, 0, 0, 2, 0.5, 2), 0.1 * sqrt(0.5), 1e-8);
    assert_float_equal(lr_factor_at(OP_LR_EXP, 0.1, 0, 0, 2, 0.5, 5), 0.025, 1e-9);
    /* after a warmup of 4 the decay counts from the peak */
    for (int kind = OP_LR_STEP; kind <= OP_LR_EXP; kind++) {
        assert_float_equal(lr_factor_at(kind, 0.1, 0, 4, 2, 0.5, 2), 0.05, 1e-9);
        assert_float_equal(lr_factor_at(kind, 0.1, 0, 4, 2, 0.5, 5), 0.1, 1e-9);
        assert_float_equal(lr_factor_at(kind, 0.1, 0, 4, 2, 0.5, 7), 0.05, 1e-9);
    }
}

/* clip_scale of gradients of odd sizes, some of several chunks: min(1,
 * clip / norm) against a norm in double, and the same bits whether one
 * thread or two sum the chunks. */
static float clip_of(void **g, const ir_type **t, int n, float clip, cpu_pool *pool)
{
    ir_type sc = ty(DT_F32, 0);
    size_t chunks = 0;
    for (int k = 0; k < n; k++) chunks += (size_t)((numel(t[k]) + 16383) / 16384);
    double *part = calloc(chunks + 1, sizeof(double));
    float out = -1;
    call c;
    call_init(&c, OP_CLIP_SCALE, &sc, &out);
    for (int k = 0; k < n; k++) call_in(&c, g[k], t[k]);
    c.node.attr.f[ATTR_CLIP] = clip;
    c.scratch = part;
    c.task_bytes = chunks * sizeof(double);
    c.pool = pool;
    call_run(&c);
    free(part);
    return out;
}

static void test_clip_scale_is_the_global_norm(void **state)
{
    (void)state;
    ir_type t[4] = {ty(DT_F32, 2, 7L, 13L), ty(DT_F32, 1, 40001L), ty(DT_F32, 0),
                    ty(DT_F32, 2, 313L, 257L)};
    const ir_type *tp[4] = {&t[0], &t[1], &t[2], &t[3]};
    void *g[4];
    double ss = 0;
    for (int k = 0; k < 4; k++) {
        g[k] = frandom(&t[k], -1, 1);
        for (int64_t i = 0; i < numel(&t[k]); i++)
            ss += (double)((float *)g[k])[i] * ((float *)g[k])[i];
    }
    double norm = sqrt(ss);
    float one = clip_of(g, tp, 4, 1.0f, NULL), two = clip_of(g, tp, 4, 1.0f, pool2);
    assert_float_equal(one, 1.0 / norm, 1e-6 / norm);
    assert_memory_equal(&one, &two, sizeof one);
    assert_true(clip_of(g, tp, 4, (float)(2 * norm), pool2) == 1.0f); /* under the clip */
    ((float *)g[1])[5] = NAN;
    assert_true(isnan(clip_of(g, tp, 4, 1.0f, pool2)));
    for (int k = 0; k < 4; k++) free(g[k]);
}

static void test_assign_add_tensor_scalar_i32(void **state)
{
    (void)state;
    ir_type t = ty(DT_F32, 1, 5L), s = ty(DT_F32, 0), it = ty(DT_I32, 0), tok = ty(DT_F32, 0);
    float v[5] = {1, 2, 3, 4, 5}, x[5] = {1, 1, 2, 2, 3}, one = 0.5f;
    int32_t step = 41, inc = 1;
    call c;
    call_init(&c, OP_ASSIGN_ADD, &tok, NULL);
    call_in(&c, v, &t);
    call_in(&c, x, &t);
    call_run(&c);
    call_init(&c, OP_ASSIGN_ADD, &tok, NULL);
    call_in(&c, v, &t);
    call_in(&c, &one, &s);
    call_run(&c);
    float want[5] = {2.5f, 3.5f, 5.5f, 6.5f, 8.5f};
    assert_memory_equal(v, want, sizeof v);
    call_init(&c, OP_ASSIGN_ADD, &tok, NULL);
    call_in(&c, &step, &it);
    call_in(&c, &inc, &it);
    call_run(&c);
    assert_int_equal(step, 42);
}

/* ---- thread pool and vtable ---- */

typedef struct count_ctx {
    int64_t hits[8];
} count_ctx;

static void count_task(void *arg, int t)
{
    ((count_ctx *)arg)->hits[t]++;
}

static void test_pool_for_repeated_tiny_calls(void **state)
{
    (void)state;
    int sizes[] = {1, 2, 4};
    for (int s = 0; s < 3; s++) {
        cpu_pool *p = cpu_pool_new(sizes[s]);
        assert_int_equal(cpu_pool_size(p), sizes[s]);
        count_ctx c = {{0}};
        int64_t want[8] = {0};
        for (int i = 0; i < 100000; i++) {
            int nt = 1 + i % 5;
            cpu_pool_for(p, nt, count_task, &c);
            for (int t = 0; t < nt; t++) want[t]++;
        }
        for (int t = 0; t < 8; t++) assert_int_equal(c.hits[t], want[t]);
        cpu_pool_free(p);
    }
    count_ctx c = {{0}};
    cpu_pool_for(NULL, 3, count_task, &c); /* NULL pool: serial */
    cpu_pool_for(pool2, 0, count_task, &c);
    assert_true(c.hits[0] == 1 && c.hits[2] == 1 && c.hits[3] == 0);
}

typedef struct nest_ctx {
    cpu_pool *pool;
    count_ctx inner[4];
} nest_ctx;

static void nest_task(void *arg, int t)
{
    nest_ctx *n = arg;
    cpu_pool_for(n->pool, 3, count_task, &n->inner[t]); /* runs serially inside a task */
}

static void *hammer_pool(void *arg)
{
    nest_ctx *n = arg;
    for (int i = 0; i < 20000; i++) cpu_pool_for(n->pool, 2, count_task, &n->inner[0]);
    return NULL;
}

static void test_pool_for_nested_and_concurrent_callers(void **state)
{
    (void)state;
    nest_ctx n = {.pool = pool2};
    cpu_pool_for(pool2, 4, nest_task, &n);
    for (int t = 0; t < 4; t++)
        assert_true(n.inner[t].hits[0] == 1 && n.inner[t].hits[2] == 1 && n.inner[t].hits[3] == 0);
    /* two threads share one pool: the loser of the race runs serially */
    nest_ctx a = {.pool = pool2}, b = {.pool = pool2};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hammer_pool, &a), 0);
    hammer_pool(&b);
    pthread_join(th, NULL);
    assert_true(a.inner[0].hits[0] == 20000 && a.inner[0].hits[1] == 20000);
    assert_true(b.inner[0].hits[0] == 20000 && b.inner[0].hits[1] == 20000);
}

static void test_cpu_vtable_alloc_aligned_and_copy(void **state)
{
    (void)state;
    assert_string_equal(cpu_vtable.name, "cpu");
    assert_ptr_equal(cpu_vtable.kernels, cpu_kernels);
    size_t sizes[] = {0, 1, 63, 64, 1000003};
    for (int i = 0; i < 5; i++) {
        char *p = cpu_vtable.alloc(NULL, sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        char src[64];
        memset(src, 7, sizeof src);
        size_t n = sizes[i] < 64 ? sizes[i] : 64;
        cpu_vtable.to_device(NULL, p, src, n);
        char back[64] = {0};
        cpu_vtable.to_host(NULL, back, p, n);
        assert_memory_equal(back, src, n);
        cpu_vtable.free(NULL, p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_all_broadcast_patterns),
        cmocka_unit_test(test_binary_i32_and_comparisons),
        cmocka_unit_test(test_binary_large_split_over_pool),
        cmocka_unit_test(test_unary_ops),
        cmocka_unit_test(test_activation_grads),
        cmocka_unit_test(test_activations_stay_finite_at_large_inputs),
        cmocka_unit_test(test_reductions_every_axis_keepdims),
        cmocka_unit_test(test_reductions_large_with_pool),
        cmocka_unit_test(test_argmax_first_max_wins),
        cmocka_unit_test(test_max_grad_routes_to_maxima),
        cmocka_unit_test(test_softmax_and_log_softmax_stable),
        cmocka_unit_test(test_softmax_edges),
        cmocka_unit_test(test_softmax_xent_and_grad),
        cmocka_unit_test(test_softmax_grads),
        cmocka_unit_test(test_mse),
        cmocka_unit_test(test_matmul_transpose_combos_pool_1_and_2),
        cmocka_unit_test(test_matmul_bias_relu),
        cmocka_unit_test(test_matmul_bias_over_leading_axes),
        cmocka_unit_test(test_apply_sgd_matmul),
        cmocka_unit_test(test_matmul_batched_broadcast_and_transposed),
        cmocka_unit_test(test_softmax_causal_mask_and_grad),
        cmocka_unit_test(test_layernorm_and_grads),
        cmocka_unit_test(test_conv2d_and_grads_against_naive),
        cmocka_unit_test(test_pools_and_grads),
        cmocka_unit_test(test_maxpool_grad_first_max_in_window),
        cmocka_unit_test(test_maxpool_ties_and_relu),
        cmocka_unit_test(test_lrn_and_grad),
        cmocka_unit_test(test_lrn_zero_scale_is_powf),
        cmocka_unit_test(test_gather_and_gather_grad),
        cmocka_unit_test(test_one_hot),
        cmocka_unit_test(test_slice_and_slice_grad),
        cmocka_unit_test(test_concat_any_axis),
        cmocka_unit_test(test_transpose_permutations),
        cmocka_unit_test(test_sum_to_and_broadcast),
        cmocka_unit_test(test_reshape_identity_cast_const),
        cmocka_unit_test(test_dropout_mask_rate_grad_and_eval),
        cmocka_unit_test(test_update_rules_by_hand),
        cmocka_unit_test(test_sgd_rows_scale_by_gscale),
        cmocka_unit_test(test_momentum_rows_equal_dense_on_a_permutation),
        cmocka_unit_test(test_momentum_rows_sum_repeated_ids_first),
        cmocka_unit_test(test_adam_rows_equal_dense_on_a_permutation),
        cmocka_unit_test(test_adam_rows_sum_repeated_ids_first),
        cmocka_unit_test(test_adam_rows_leave_other_rows_alone),
        cmocka_unit_test(test_decay_and_adaptive_rules_by_hand),
        cmocka_unit_test(test_new_rows_ops_equal_dense),
        cmocka_unit_test(test_adagrad_rows_leave_other_rows_alone),
        cmocka_unit_test(test_rows_sum_puts_each_ids_sum_at_its_first_place),
        cmocka_unit_test(test_lr_schedules_by_hand),
        cmocka_unit_test(test_clip_scale_is_the_global_norm),
        cmocka_unit_test(test_assign_add_tensor_scalar_i32),
        cmocka_unit_test(test_pool_for_repeated_tiny_calls),
        cmocka_unit_test(test_pool_for_nested_and_concurrent_callers),
        cmocka_unit_test(test_cpu_vtable_alloc_aligned_and_copy),
        cmocka_unit_test(test_every_op_has_a_cpu_kernel),
        cmocka_unit_test(test_neg_i32),
        cmocka_unit_test(test_missing_kernel_is_a_compile_error),
        cmocka_unit_test(test_ids_out_of_range_fault),
        /* last: the numbers they draw leave the other tests' data as it was */
        cmocka_unit_test(test_batchnorm_ops_match_a_double_reference),
        cmocka_unit_test(test_batchnorm_relu_flags_match_the_separate_relu),
        cmocka_unit_test(test_batchnorm_training_grads_match_finite_differences),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
