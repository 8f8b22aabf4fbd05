/* test_ir.c - IR construction: nodes, names, variables, inputs, data,
 * control deps, type helpers and the text dump; the checked size helpers
 * and the compile budget; and what the passes and the memory plan must
 * keep doing on graphs far larger than the examples (folding limits, CSE
 * and first-fit placement at scale). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "ir_fixture.h"

static const char *text = "x = input\ny = x @ w\n";

static src_span sp(uint32_t b, uint32_t e)
{
    src_span s = {b, e};
    return s;
}

/* Variables claim the "y" of line 2; the tests give other nodes their spans. */
static int setup(void **state)
{
    (void)state;
    return irfx_open(text, sp(10, 11));
}

static char *dump_to_string(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_dump(g, f);
    fclose(f);
    return buf;
}

static void test_type_str_formats_dims_and_scalars(void **state)
{
    (void)state;
    char b[64];
    ir_type t = {DT_F32, 2, {64, 784}};
    assert_string_equal(ir_type_str(&t, b, sizeof(b)), "f32[64,784]");
    t = (ir_type){DT_F32, 0, {0}};
    assert_string_equal(ir_type_str(&t, b, sizeof(b)), "f32[]");
    t = (ir_type){DT_I32, 1, {3}};
    assert_string_equal(ir_type_str(&t, b, sizeof(b)), "i32[3]");
    /* truncation stays NUL-terminated */
    t = (ir_type){DT_F32, 2, {64, 784}};
    assert_string_equal(ir_type_str(&t, b, 6), "f32[6");
}

static void test_numel_nbytes_and_equality(void **state)
{
    (void)state;
    ir_type a = irfx_type("f32[64,784]"), b = irfx_type("f32[64,784]"), s = irfx_type("i32[]");
    assert_int_equal(ir_numel(&a), 64 * 784);
    assert_int_equal(ir_nbytes(&a), 64 * 784 * 4);
    assert_int_equal(ir_numel(&s), 1);
    assert_true(ir_type_eq(&a, &b));
    b.dim[1] = 783;
    assert_false(ir_type_eq(&a, &b));
    b = a;
    b.dtype = DT_I32;
    assert_false(ir_type_eq(&a, &b));
    assert_string_equal(ir_dtype_name(DT_I32), "i32");
}

static void test_input_creates_node_and_entry(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[64,784]");
    int x = ir_add_input(g, "x", &t, src, sp(0, 1));
    assert_true(x >= 0);
    assert_int_equal(g->nodes[x].op, OP_INPUT);
    assert_int_equal(g->n_inputs, 1);
    assert_int_equal(g->inputs[0].node, x);
    assert_int_equal(g->nodes[x].data, 0);
    assert_string_equal(g->inputs[0].name, "x");
    assert_true(ir_type_eq(&g->nodes[x].type, &t));
    assert_int_equal(g->nodes[x].device, -1);
}

static void test_var_creates_variable_node(void **state)
{
    (void)state;
    char name[] = "model/fc1/w";
    int node = irfx_var(name, "f32[784,10]", IR_DEV(DEV_GPU, 1), 1);
    name[0] = 'X'; /* the graph keeps its own copy */
    assert_int_equal(g->n_vars, 1);
    const ir_var *v = &g->vars[0];
    const ir_node *n = &g->nodes[node];
    assert_int_equal(v->node, node);
    assert_int_equal(n->op, OP_VARIABLE);
    assert_int_equal(n->var, 0);
    assert_int_equal(n->device, IR_DEV(DEV_GPU, 1));
    assert_string_equal(n->name, "model/fc1/w");
    assert_string_equal(v->name, "model/fc1/w");
    assert_int_equal(n->type.dim[1], 10);
    assert_int_equal(ir_find_var(g, "model/fc1/w"), 0);
    assert_int_equal(ir_find_var(g, "model/fc1/b"), -1);
}

static void test_add_runs_shape_rule_and_copies_inputs(void **state)
{
    (void)state;
    ir_type ta = irfx_type("f32[64,784]");
    int x = ir_add_input(g, "x", &ta, src, sp(0, 1));
    int w = irfx_var("w", "f32[784,10]", IR_DEV(DEV_CPU, 0), 1);
    int in[2] = {x, w};
    int y = ir_add(g, OP_MATMUL, in, 2, NULL, src, sp(14, 19));
    in[0] = in[1] = 99; /* the node owns a copy */
    assert_true(y >= 0);
    assert_int_equal(g->nodes[y].in[0], x);
    assert_int_equal(g->nodes[y].in[1], w);
    assert_int_equal(g->nodes[y].type.rank, 2);
    assert_int_equal(g->nodes[y].type.dim[0], 64);
    assert_int_equal(g->nodes[y].type.dim[1], 10);
    assert_int_equal(g->nodes[y].var, -1);
    assert_int_equal(g->nodes[y].data, -1);
    assert_int_equal(diags.n_errors, 0);
}

static void test_add_rejects_bad_inputs_and_marks_dead(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[3]");
    int x = ir_add_input(g, "x", &t, src, sp(0, 1));
    int bad[2] = {x, 1234};
    assert_int_equal(ir_add(g, OP_ADD, bad, 2, NULL, src, sp(0, 1)), -1);
    assert_int_equal(ir_add(g, OP_ADD, &x, 1, NULL, src, sp(0, 1)), -1);
    assert_int_equal(diags.n_errors, 2);
    assert_string_equal(diags.v[1].msg, "add: expects 2 inputs, got 1");
    int in[2] = {x, x};
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = 5; /* axis out of range: the node exists but is dead */
    int n0 = g->n_nodes;
    assert_int_equal(ir_add(g, OP_CONCAT, in, 2, &a, src, sp(0, 1)), -1);
    assert_int_equal(g->n_nodes, n0 + 1);
    assert_true(g->nodes[n0].dead);
}

static void test_null_attrs_take_registry_defaults(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[4,5]");
    int x = ir_add_input(g, "x", &t, src, sp(0, 1));
    int s = ir_add(g, OP_SUM, &x, 1, NULL, src, sp(0, 1));
    assert_int_equal(g->nodes[s].attr.i[ATTR_AXIS], OP_AXIS_ALL);
    assert_int_equal(g->nodes[s].type.rank, 0);
    int a = ir_add(g, OP_ARGMAX, &x, 1, NULL, src, sp(0, 1));
    assert_int_equal(g->nodes[a].attr.i[ATTR_AXIS], 1); /* -1 normalised */
    assert_int_equal(g->nodes[a].type.dtype, DT_I32);
}

static void test_add_like_copies_span_and_device(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[3]");
    int x = ir_add_input(g, "x", &t, src, sp(12, 17));
    g->nodes[x].device = IR_DEV(DEV_CPU, 2);
    int n = ir_add_like(g, x, OP_NEG, &x, 1, NULL);
    assert_int_equal(g->nodes[n].device, IR_DEV(DEV_CPU, 2));
    assert_int_equal(g->nodes[n].span.begin, 12);
    assert_ptr_equal(g->nodes[n].src, src);
    int c = ir_add_const_like(g, x, 2.5, &t);
    assert_int_equal(g->nodes[c].device, IR_DEV(DEV_CPU, 2));
    assert_true(g->nodes[c].attr.f[ATTR_CONST_VALUE] == 2.5);
    assert_true(ir_type_eq(&g->nodes[c].type, &t));
}

static void test_const_scalar_and_tensor(void **state)
{
    (void)state;
    int c = ir_add_const(g, 3.0, NULL, src, sp(0, 1));
    assert_int_equal(g->nodes[c].op, OP_CONST);
    assert_int_equal(g->nodes[c].type.rank, 0);
    assert_true(g->nodes[c].attr.f[ATTR_CONST_VALUE] == 3.0);
    ir_type t = irfx_type("i32[2,3]");
    int d = ir_add_const(g, 0.0, &t, src, sp(0, 1));
    assert_true(ir_type_eq(&g->nodes[d].type, &t));
}

static void test_names_overwrite_and_find(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[]");
    int a = ir_add_const(g, 1, &t, src, sp(0, 1));
    int b = ir_add_const(g, 2, &t, src, sp(0, 1));
    int i = ir_set_name(g, "loss", a, 0);
    assert_int_equal(ir_find_name(g, "loss"), i);
    assert_int_equal(ir_set_name(g, "loss", b, 0), i);
    assert_int_equal(g->names[i].node, b);
    assert_int_equal(g->n_names, 1);
    assert_int_equal(ir_find_name(g, "nope"), -1);
    int j = ir_set_name(g, "train", b, 1);
    assert_true(g->names[j].is_train);
    assert_int_equal(g->default_target, j);
}

static void test_data_is_appended_with_copies(void **state)
{
    (void)state;
    ir_data d;
    memset(&d, 0, sizeof(d));
    char path[] = "/tmp/images.gz";
    d.name = "train";
    d.path[0] = path;
    d.batch = 64;
    d.x = irfx_type("f32[64,784]");
    d.y = irfx_type("i32[64]");
    int di = ir_add_data(g, &d);
    path[1] = 'X';
    assert_int_equal(di, 0);
    assert_string_equal(g->data[0].path[0], "/tmp/images.gz");
    assert_null(g->data[0].path[1]);
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_DATA_WHICH] = 1;
    a.i[ATTR_DATA_INDEX] = di;
    int n = ir_add(g, OP_DATA, NULL, 0, &a, src, sp(0, 1));
    assert_true(n >= 0);
    assert_int_equal(g->nodes[n].data, di);
    assert_int_equal(g->nodes[n].type.dtype, DT_I32);
}

static void test_ctrl_deps_deduplicate(void **state)
{
    (void)state;
    int a = ir_add_const(g, 1, NULL, src, sp(0, 1));
    int b = ir_add_const(g, 2, NULL, src, sp(0, 1));
    int c = ir_add_const(g, 3, NULL, src, sp(0, 1));
    ir_add_ctrl(g, c, a);
    ir_add_ctrl(g, c, b);
    ir_add_ctrl(g, c, a);
    assert_int_equal(g->nodes[c].n_ctrl, 2);
    assert_int_equal(g->nodes[c].ctrl[0], a);
    assert_int_equal(g->nodes[c].ctrl[1], b);
}

static void test_arena_survives_many_allocations(void **state)
{
    (void)state;
    const char *keep[2000];
    char buf[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(buf, sizeof(buf), "name_%d", i);
        keep[i] = ir_strdup(g, buf);
    }
    void *big = ir_alloc(g, 100000);
    assert_non_null(big);
    assert_string_equal(keep[0], "name_0");
    assert_string_equal(keep[1999], "name_1999");
    /* many nodes force the node array to grow; ids stay valid */
    int first = ir_add_const(g, 7, NULL, src, sp(0, 1));
    for (int i = 0; i < 1000; i++) ir_add_const(g, i, NULL, src, sp(0, 1));
    assert_true(g->nodes[first].attr.f[ATTR_CONST_VALUE] == 7);
}

static void test_dump_lists_nodes_vars_and_data(void **state)
{
    (void)state;
    ir_type tx = irfx_type("f32[64,784]");
    int x = ir_add_input(g, "x", &tx, src, sp(0, 1));
    int w = irfx_var("model/fc1/w", "f32[784,512]", IR_DEV(DEV_CPU, 0), 1);
    int in[2] = {x, w};
    int y = ir_add(g, OP_MATMUL, in, 2, NULL, src, sp(14, 19));
    g->nodes[y].device = IR_DEV(DEV_CPU, 0);
    ir_set_name(g, "model/fc1", y, 0);
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = -1; /* normalised to 1 before it is printed */
    ir_add(g, OP_SUM, &y, 1, &a, src, sp(14, 19));
    ir_add_const(g, 0.5, NULL, src, sp(0, 1));
    ir_data d;
    memset(&d, 0, sizeof(d));
    d.name = "train";
    d.batch = 64;
    d.x = tx;
    d.y.rank = -1;
    ir_add_data(g, &d);
    char *s = dump_to_string();
    char want[128];
    snprintf(want, sizeof(want), "%%%d = matmul(%%%d, %%%d) f32[64,512] @cpu:0  ; model/fc1 line 2",
             y, x, w);
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "= input() f32[64,784] @?  ; x line 1"));
    assert_non_null(strstr(s, "= sum(%"));
    assert_non_null(strstr(s, ") {axis=1} f32[64] @?  ; line 2"));
    assert_non_null(strstr(s, "= const(0.5) f32[] @?  ; line 1"));
    assert_non_null(strstr(s, "var model/fc1/w f32[784,512] glorot"));
    assert_non_null(strstr(s, "data train idx batch=64 x=f32[64,784]"));
    free(s);
}

/* ---- sizes: one checked computation ---- */

static void test_dims_numel_checks_every_dimension_and_product(void **state)
{
    (void)state;
    int64_t ok1[] = {LIM_DIM}, ok2[] = {1 << 19, 1 << 19}, zero[] = {0, LIM_DIM};
    int64_t big[] = {LIM_DIM + 1}, neg[] = {4, -1}, over[] = {1 << 19, 1 << 19, 2};
    int64_t wrap[] = {LIM_DIM, LIM_DIM, LIM_DIM, LIM_DIM, LIM_DIM, LIM_DIM};
    assert_int_equal(ir_dims_numel(ok1, 1), LIM_DIM);
    assert_int_equal(ir_dims_numel(ok2, 2), LIM_TENSOR_BYTES / 4); /* exactly the limit */
    assert_int_equal(ir_dims_numel(zero, 2), 0);
    assert_int_equal(ir_dims_numel(ok1, 0), 1);
    assert_int_equal(ir_dims_numel(big, 1), -1);
    assert_int_equal(ir_dims_numel(neg, 2), -1);
    assert_int_equal(ir_dims_numel(over, 3), -1);
    assert_int_equal(ir_dims_numel(wrap, 6), -1); /* 2^186: would wrap int64 */
    assert_int_equal(ir_dims_numel(wrap, 7), -1); /* rank above IR_MAX_DIMS */
    int64_t r;
    assert_int_equal(ir_checked_mul(INT64_MAX, 2, &r), -1);
    assert_int_equal(ir_checked_add(INT64_MAX, 1, &r), -1);
    assert_int_equal(ir_checked_mul(1 << 20, 1 << 20, &r), 0);
    assert_int_equal(r, 1LL << 40);
}

static void test_type_problem_says_which_limit(void **state)
{
    (void)state;
    char b[160];
    ir_type t = irfx_type("f32[64,784]");
    assert_null(ir_type_problem(&t, b, sizeof b));
    t = irfx_type("f32[3,2147483648]");
    assert_string_equal(ir_type_problem(&t, b, sizeof b),
                        "dimension 1 is 2147483648, above the limit of 2147483647");
    t = irfx_type("f32[4,-2]");
    assert_string_equal(ir_type_problem(&t, b, sizeof b), "dimension 1 is -2, below 0");
    t = irfx_type("f32[1048576,1048576]");
    assert_string_equal(ir_type_problem(&t, b, sizeof b),
                        "4398046511104 bytes, above the limit of 1099511627776 bytes (1 TiB) "
                        "per tensor");
    t = irfx_type("f32[2147483647,2147483647,2147483647]");
    assert_string_equal(ir_type_problem(&t, b, sizeof b),
                        "more than 2^63 bytes, above the limit of 1099511627776 bytes (1 TiB) "
                        "per tensor");
    assert_non_null(ir_type_problem(&t, NULL, 0));
}

/* A gradient seed is shaped like its loss: the type pointer may point into
 * g->nodes, which adding the constant grows (a use after free before). */
static void test_const_type_may_point_into_the_node_array(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[3,5]");
    int x = ir_add_const(g, 1, &t, src, sp(0, 1));
    while (g->n_nodes < g->cap_nodes || g->cap_nodes < 4096)
        ir_add_const(g, 2, NULL, src, sp(0, 1));
    int c = ir_add_const_like(g, x, 1.0, &g->nodes[x].type);
    assert_true(c >= 0);
    assert_true(ir_type_eq(&g->nodes[c].type, &t));
}

/* ---- the compile budget ---- */

static void test_node_budget_is_reported_once_at_the_node(void **state)
{
    (void)state;
    int last = 0, failed = 0;
    for (int i = 0; i < LIM_NODES + 10; i++) {
        int id = ir_add_const(g, i, NULL, src, sp(2, 7));
        if (id < 0)
            failed++;
        else
            last = id;
    }
    assert_int_equal(last, LIM_NODES - 1);
    assert_int_equal(failed, 10);
    assert_int_equal(diags.n_errors, 1);
    assert_string_equal(diags.v[0].msg, "the graph has more than 200000 nodes, the limit");
    assert_int_equal(ir_budget(g, 0, src, sp(0, 1)), -1);
    assert_int_equal(diags.n_errors, 1);
}

static void test_memory_budget_counts_the_arena(void **state)
{
    (void)state;
    long long before = g->mem_bytes;
    ir_alloc(g, 1 << 20);
    assert_true(g->mem_bytes >= before + (1 << 20));
    assert_int_equal(ir_budget(g, 0, src, sp(0, 1)), 0);
    assert_int_equal(ir_budget(g, LIM_COMPILE_BYTES, src, sp(2, 7)), -1);
    assert_int_equal(diags.n_errors, 1);
    assert_non_null(strstr(diags.v[0].msg, "more than 256 MiB of memory"));
}

static void test_names_and_vars_are_found_among_thousands(void **state)
{
    (void)state;
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "scope/v%d", i);
        irfx_var(name, "f32[2]", 0, 1);
        snprintf(name, sizeof name, "n%d", i);
        ir_set_name(g, name, 0, 0);
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(name, sizeof name, "scope/v%d", i);
        assert_int_equal(ir_find_var(g, name), i);
        snprintf(name, sizeof name, "n%d", i);
        assert_int_equal(ir_find_name(g, name), i);
    }
    assert_int_equal(ir_find_var(g, "scope/v5000"), -1);
    assert_int_equal(ir_find_name(g, "n-1"), -1);
    assert_int_equal(ir_set_name(g, "n42", 0, 0), 42); /* an existing name is overwritten */
    assert_int_equal(g->n_names, 5000);
}

static void test_ctrl_deps_grow_in_order(void **state)
{
    (void)state;
    int c = ir_add_const(g, 0, NULL, src, sp(0, 1));
    for (int i = 0; i < 1000; i++) ir_add_const(g, i, NULL, src, sp(0, 1));
    for (int i = 1; i <= 1000; i++) ir_add_ctrl(g, c, i);
    for (int i = 1; i <= 1000; i += 3) ir_add_ctrl(g, c, i);
    assert_int_equal(g->nodes[c].n_ctrl, 1000);
    for (int i = 0; i < 1000; i++) assert_int_equal(g->nodes[c].ctrl[i], i + 1);
}

/* ---- folding: what it may compute at compile time ---- */

static int evals;

/* An evaluator that folds sums and adds to zeros and counts its calls. */
static int zeros_can_eval(void *ctx, op_kind op)
{
    (void)ctx;
    return op == OP_SUM || op == OP_ADD;
}

static int zeros_eval(void *ctx, const ir_graph *gr, int node, void *out, void *const *in,
                      char *err, size_t errlen)
{
    (void)ctx, (void)in, (void)err, (void)errlen;
    evals++;
    memset(out, 0, ir_nbytes(&gr->nodes[node].type));
    return 0;
}

static const pass_evaluator zeros = {.can_eval = zeros_can_eval, .eval = zeros_eval};

static int sum_all(int x)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = OP_AXIS_ALL;
    return ir_add(g, OP_SUM, &x, 1, &a, src, sp(0, 1));
}

/* sum(zeros([100000000])) has a scalar output, but folding it would fill
 * 400 MB at compile time. */
static void test_fold_skips_large_inputs_not_just_large_outputs(void **state)
{
    (void)state;
    ir_type big = irfx_type("f32[100000000]"), small = irfx_type("f32[4]");
    int s_big = sum_all(ir_add_const(g, 0, &big, src, sp(0, 1)));
    int s_small = sum_all(ir_add_const(g, 1, &small, src, sp(0, 1)));
    long long before = g->mem_bytes;
    evals = 0;
    pass_run_all(g, PASS_CSE | PASS_FUSE, &zeros);
    assert_int_equal(evals, 1);
    assert_int_equal(g->nodes[s_big].op, OP_SUM);
    assert_int_equal(g->nodes[s_small].op, OP_CONST);
    assert_true(g->mem_bytes - before < (1 << 20));
}

/* Every fold allocates its output: past LIM_FOLD_BYTES the rest runs. */
static void test_fold_stops_at_its_byte_budget(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[65536]");
    int n = (int)(LIM_FOLD_BYTES / (2 * 65536 * 4)) + 50, in[2];
    for (int i = 0; i < n; i++) {
        in[0] = in[1] = ir_add_const(g, i, &t, src, sp(0, 1));
        ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1));
    }
    long long before = g->mem_bytes;
    evals = 0;
    pass_run_all(g, PASS_CSE | PASS_FUSE, &zeros);
    assert_true(evals > 0 && evals < n);
    assert_true(g->mem_bytes - before <= LIM_FOLD_BYTES + (1 << 20));
}

/* ---- fusing the CNN layer ---- */

static int add_op(op_kind op, int a, int b, int64_t i0, int64_t i1)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.i[0] = i0, at.i[1] = i1;
    int in[2] = {a, b};
    return ir_add(g, op, in, b < 0 ? 1 : 2, &at, src, sp(0, 1));
}

/* maxpool(relu(conv2d(x, w) + b)), named p, and by hand its backward
 * through the pool and the relu, named da; *mgrad: the maxpool2d_grad. */
static void conv_layer(int *mgrad)
{
    ir_type xt = irfx_type("f32[2,3,8,8]"), wt = irfx_type("f32[4,3,3,3]"),
            bt = irfx_type("f32[1,4,1,1]"), dt = irfx_type("f32[2,4,4,4]");
    int x = ir_add_input(g, "x", &xt, src, sp(0, 1)), w = ir_add_input(g, "w", &wt, src, sp(0, 1));
    int b = ir_add_input(g, "b", &bt, src, sp(0, 1)),
        dp = ir_add_input(g, "dp", &dt, src, sp(0, 1));
    int a = add_op(OP_ADD, add_op(OP_CONV2D, x, w, 1, 1), b, 0, 0);
    int r = add_op(OP_RELU, a, -1, 0, 0);
    *mgrad = add_op(OP_MAXPOOL_GRAD, dp, r, 2, 2);
    ir_set_name(g, "p", add_op(OP_MAXPOOL2D, r, -1, 2, 2), 0);
    ir_set_name(g, "da", add_op(OP_RELU_GRAD, *mgrad, a, 0, 0), 0);
}

/* conv2d + bias + relu become one conv2d_bias with its relu, and the
 * relu_grad joins the maxpool2d_grad (its relu flag). */
static void test_fuse_conv_bias_relu_and_pool_grad(void **state)
{
    (void)state;
    int mg;
    conv_layer(&mg);
    pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
    int fused = g->nodes[g->names[0].node].in[0];
    const ir_node *f = &g->nodes[fused], *d = &g->nodes[g->names[1].node];
    assert_int_equal(f->op, OP_CONV2D_BIAS);
    assert_int_equal(f->attr.i[ATTR_CONV_STRIDE], 1);
    assert_int_equal(f->attr.i[ATTR_CONV_PAD], 1);
    assert_int_equal(f->attr.i[ATTR_BIAS_RELU], 1);
    assert_int_equal(d->op, OP_MAXPOOL_GRAD);
    assert_int_equal(d->attr.i[ATTR_POOL_RELU], 1);
    assert_int_equal(d->in[1], fused);
}

/* x @ w + b for x [2, 5, 6]: w [6, 7] makes one GEMM of all rows, which
 * fuses with the bias (and the relu); a batched w does not. */
static void test_fuse_batched_matmul_bias_only_with_a_2d_b(void **state)
{
    (void)state;
    ir_type xt = irfx_type("f32[2,5,6]"), wt = irfx_type("f32[6,7]"), bt = irfx_type("f32[7]"),
            w3t = irfx_type("f32[2,6,7]");
    int x = ir_add_input(g, "x", &xt, src, sp(0, 1)), w = ir_add_input(g, "w", &wt, src, sp(0, 1));
    int b = ir_add_input(g, "b", &bt, src, sp(0, 1)),
        w3 = ir_add_input(g, "w3", &w3t, src, sp(0, 1));
    ir_set_name(g, "y",
                add_op(OP_RELU, add_op(OP_ADD, add_op(OP_MATMUL, x, w, 0, 0), b, 0, 0), -1, 0, 0),
                0);
    ir_set_name(g, "z", add_op(OP_ADD, add_op(OP_MATMUL, x, w3, 0, 0), b, 0, 0), 0);
    pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
    const ir_node *y = &g->nodes[g->names[0].node], *z = &g->nodes[g->names[1].node];
    assert_int_equal(y->op, OP_MATMUL_BIAS);
    assert_int_equal(y->attr.i[ATTR_BIAS_RELU], 1);
    assert_int_equal(y->type.rank, 3);
    assert_int_equal(z->op, OP_ADD);
    assert_int_equal(g->nodes[z->in[0]].op, OP_MATMUL);
}

/* A maxpool2d_grad that something else reads keeps its value: no relu. */
static void test_pool_grad_read_elsewhere_keeps_its_relu_grad(void **state)
{
    (void)state;
    int mg;
    conv_layer(&mg);
    ir_set_name(g, "dr", mg, 0);
    pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
    assert_int_equal(g->nodes[g->names[1].node].op, OP_RELU_GRAD);
    assert_int_equal(g->nodes[g->names[2].node].op, OP_MAXPOOL_GRAD);
    assert_int_equal(g->nodes[g->names[2].node].attr.i[ATTR_POOL_RELU], 0);
}

/* ---- fusing a relu into batchnorm ---- */

static int bn_op(op_kind op, const int *in, int n_in)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    at.i[ATTR_AXIS] = 1;
    at.f[ATTR_NORM_EPS] = 1e-5;
    at.i[ATTR_BN_BATCH] = op == OP_BN_GRAD;
    return ir_add(g, op, in, n_in, &at, src, sp(0, 1));
}

/* relu(batchnorm_apply(x, gain, bias, batchnorm_stats(x))), named r, and
 * its backward as autodiff builds it: relu_grad(dr, y) into
 * batchnorm_grad_params and batchnorm_grad (named dx); *rg: the
 * relu_grad. */
static void bn_layer(int *rg)
{
    ir_type xt = irfx_type("f32[4,3,2,2]"), ct = irfx_type("f32[3]");
    int x = ir_add_input(g, "x", &xt, src, sp(0, 1)),
        dr = ir_add_input(g, "dr", &xt, src, sp(0, 1));
    int gain = ir_add_input(g, "gain", &ct, src, sp(0, 1)),
        bias = ir_add_input(g, "bias", &ct, src, sp(0, 1));
    int st = bn_op(OP_BN_STATS, (int[]){x}, 1),
        y = bn_op(OP_BATCHNORM, (int[]){x, gain, bias, st}, 4);
    ir_set_name(g, "r", add_op(OP_RELU, y, -1, 0, 0), 0);
    *rg = add_op(OP_RELU_GRAD, dr, y, 0, 0);
    int p = bn_op(OP_BN_GRAD_PARAMS, (int[]){*rg, x, st}, 3);
    ir_set_name(g, "dx", bn_op(OP_BN_GRAD, (int[]){*rg, x, gain, st, p}, 5), 0);
}

/* The relu joins batchnorm_apply (its relu flag); both grads read dr and
 * the fused output y, with their relu flag, and the relu_grad goes. */
static void test_fuse_batchnorm_relu_forward_and_backward(void **state)
{
    (void)state;
    int rg;
    bn_layer(&rg);
    pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
    int y = g->names[0].node;
    const ir_node *f = &g->nodes[y], *dx = &g->nodes[g->names[1].node];
    const ir_node *p = &g->nodes[dx->in[4]];
    int dr = g->nodes[rg].in[0];
    assert_int_equal(f->op, OP_BATCHNORM);
    assert_int_equal(f->attr.i[ATTR_BN_RELU], 1);
    assert_true(g->nodes[rg].dead);
    assert_int_equal(dx->op, OP_BN_GRAD);
    assert_int_equal(dx->attr.i[ATTR_BN_RELU], 1);
    assert_int_equal(dx->attr.i[ATTR_BN_BATCH], 1);
    assert_int_equal(dx->n_in, 6);
    assert_int_equal(dx->in[0], dr);
    assert_int_equal(dx->in[5], y);
    assert_int_equal(p->op, OP_BN_GRAD_PARAMS);
    assert_int_equal(p->attr.i[ATTR_BN_RELU], 1);
    assert_int_equal(p->n_in, 4);
    assert_int_equal(p->in[0], dr);
    assert_int_equal(p->in[3], y);
}

/* A relu_grad something else reads keeps its value: the grads read it. */
static void test_bn_relu_grad_read_elsewhere_stays(void **state)
{
    (void)state;
    int rg;
    bn_layer(&rg);
    ir_set_name(g, "drg", rg, 0);
    pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
    const ir_node *dx = &g->nodes[g->names[1].node];
    assert_int_equal(g->nodes[g->names[0].node].attr.i[ATTR_BN_RELU], 1);
    assert_int_equal(dx->attr.i[ATTR_BN_RELU], 0);
    assert_int_equal(dx->n_in, 5);
    assert_int_equal(dx->in[0], rg);
    assert_int_equal(g->nodes[dx->in[4]].in[0], rg);
}

/* ---- the data scale ---- */

/* A data source's x node (as sema makes it) and mul(x, c). */
static int data_x(void)
{
    ir_data d;
    memset(&d, 0, sizeof d);
    d.name = "train";
    d.batch = 4;
    d.x = irfx_type("f32[4,3]");
    d.y = irfx_type("i32[4]");
    ir_attrs a;
    memset(&a, 0, sizeof a);
    a.i[ATTR_DATA_INDEX] = ir_add_data(g, &d);
    return ir_add(g, OP_DATA, NULL, 0, &a, src, sp(0, 1));
}

static int mul_by(int x, double c)
{
    int in[2] = {x, ir_add_const(g, c, NULL, src, sp(0, 1))};
    return ir_add(g, OP_MUL, in, 2, NULL, src, sp(0, 1));
}

/* x / 4 read by two ops (once CSE has merged the two muls): the reader
 * scales, the muls go, both readers read the data node. */
static void test_data_scale_moves_a_common_scale_into_the_reader(void **state)
{
    (void)state;
    int x = data_x(), m[2] = {mul_by(x, 0.25), mul_by(x, 0.25)};
    int in[2] = {m[0], m[1]};
    int s = ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1));
    ir_set_name(g, "s", s, 0);
    pass_data_scale(g);
    assert_true(g->data[0].x_scale == 0.25f);
    assert_true(g->nodes[m[0]].dead && g->nodes[m[1]].dead);
    assert_int_equal(g->nodes[s].in[0], x);
    assert_int_equal(g->nodes[s].in[1], x);
}

/* What would tell: another scale, another use, or a name on x itself. */
static void test_data_scale_leaves_x_that_is_seen_unscaled(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        int x = data_x(), m = mul_by(x, 0.25);
        ir_set_name(g, "m", m, 0);
        if (k == 0) ir_set_name(g, "other", mul_by(x, 0.5), 0);
        if (k == 1) {
            int in[2] = {x, x};
            ir_set_name(g, "sum", ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1)), 0);
        }
        if (k == 2) ir_set_name(g, "raw", x, 0);
        pass_data_scale(g);
        assert_true(g->data[g->nodes[x].data].x_scale == 0.0f);
        assert_false(g->nodes[m].dead);
        assert_int_equal(g->names[0].node, m);
        ir_free(g);
        g = ir_new(&diags);
    }
}

/* ---- fusing an update with its allreduce ---- */

static int on_cpu(int id)
{
    g->nodes[id].device = IR_DEV(DEV_CPU, 0);
    return id;
}

/* What autodiff makes for sync sgd: allreduce k of gradient gr waits for
 * allreduce k - 1 (prev), its update for the barrier, allreduce k + 1
 * (*next) for it.  Returns the update. */
static int sync_sgd(int gr, int prev, int barrier, int *next)
{
    int w = irfx_var("w", "f32[4,3]", IR_DEV(DEV_CPU, 0), 1);
    ir_attrs a = {.i = {1}}, b = {.i = {2}};
    int r = on_cpu(ir_add(g, OP_ALLREDUCE, &gr, 1, &a, src, sp(0, 1)));
    ir_add_ctrl(g, r, prev);
    int in[4] = {w, r, on_cpu(ir_add_const(g, 0.1, NULL, src, sp(0, 1))),
                 on_cpu(ir_add_const(g, 1, NULL, src, sp(0, 1)))};
    int u = on_cpu(ir_add(g, OP_APPLY_SGD, in, 4, NULL, src, sp(0, 1)));
    ir_add_ctrl(g, u, barrier);
    *next = on_cpu(ir_add(g, OP_ALLREDUCE, &gr, 1, &b, src, sp(0, 1)));
    ir_add_ctrl(g, *next, r);
    ir_set_name(g, "train", u, 0);
    return u;
}

static int has_ctrl(const ir_node *n, int dep)
{
    for (int k = 0; k < n->n_ctrl; k++)
        if (n->ctrl[k] == dep) return 1;
    return 0;
}

static int no_sgd_allreduce(void *ctx, op_kind op, int dev)
{
    (void)ctx, (void)dev;
    return op != OP_APPLY_SGD_ALLREDUCE;
}

/* The fused update reads the gradient, keeps the allreduce's place in the
 * sequence (attr, the edge to the one before, the next one's edge to it)
 * and the update's wait for the barrier; where the device lacks the op
 * (as placement recorded it), nothing fuses. */
static void test_sgd_fuses_into_its_allreduce_in_sequence(void **state)
{
    (void)state;
    for (int lacks = 0; lacks < 2; lacks++) {
        int gr = on_cpu(irfx_input("g", "f32[4,3]")), next;
        int prev = on_cpu(ir_add(g, OP_ALLREDUCE, &gr, 1, NULL, src, sp(0, 1)));
        int barrier = on_cpu(ir_add(g, OP_GROUP, &gr, 1, NULL, src, sp(0, 1)));
        int u = sync_sgd(gr, prev, barrier, &next);
        place_options po = {.n_cpu = 1, .implements = no_sgd_allreduce};
        if (lacks) assert_int_equal(place_run(g, &po), 0); /* the record fusion reads */
        pass_run_all(g, PASS_CSE | PASS_FOLD, NULL);
        const ir_node *f = &g->nodes[g->names[0].node];
        if (lacks) {
            assert_int_equal(g->names[0].node, u);
        } else {
            assert_int_equal(f->op, OP_APPLY_SGD_ALLREDUCE);
            assert_int_equal(f->in[1], gr);
            assert_int_equal(f->attr.i[ATTR_BUCKET], 1);
            assert_true(has_ctrl(f, prev) && has_ctrl(f, barrier));
            assert_true(has_ctrl(&g->nodes[next], g->names[0].node));
        }
        ir_free(g);
        g = ir_new(&diags);
    }
}

/* ---- CSE ---- */

static void test_cse_merges_equal_constants_only(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[3]");
    int x = ir_add_input(g, "x", &t, src, sp(0, 1)), y[2000];
    for (int i = 0; i < 2000; i++) { /* x + 0, x + 1, ..., twice each */
        int in[2] = {x, ir_add_const(g, i % 1000, NULL, src, sp(0, 1))};
        y[i] = ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1));
        char name[16];
        snprintf(name, sizeof name, "y%d", i);
        ir_set_name(g, name, y[i], 0);
    }
    pass_run_all(g, PASS_FOLD | PASS_FUSE, NULL);
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].dead;
    assert_int_equal(live, 1 + 2 * 1000);
    for (int i = 0; i < 2000; i++) {
        int k = g->names[i].node;
        assert_false(g->nodes[k].dead);
        assert_false(g->nodes[g->nodes[k].in[1]].dead);
        assert_true(g->nodes[g->nodes[k].in[1]].attr.f[ATTR_CONST_VALUE] == i % 1000);
        assert_int_equal(k, g->names[i % 1000].node);
    }
}

/* x / 2 becomes x * 0.5 with 0.5 a constant added after every node: CSE
 * must still merge the two reciprocals and what reads them. */
static void test_cse_resolves_constants_added_by_folding(void **state)
{
    (void)state;
    ir_type t = irfx_type("f32[3]");
    int x = ir_add_input(g, "x", &t, src, sp(0, 1)), d[2];
    for (int k = 0; k < 2; k++) {
        int in[2] = {x, ir_add_const(g, 2, NULL, src, sp(0, 1))};
        d[k] = ir_add(g, OP_DIV, in, 2, NULL, src, sp(0, 1));
    }
    int in[2] = {d[0], d[1]};
    int s = ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1));
    ir_set_name(g, "s", s, 0);
    pass_run_all(g, PASS_FUSE, NULL);
    const ir_node *n = &g->nodes[g->names[0].node];
    assert_int_equal(n->op, OP_ADD);
    assert_int_equal(n->in[0], n->in[1]);
    const ir_node *m = &g->nodes[n->in[0]];
    assert_int_equal(m->op, OP_MUL);
    assert_false(m->dead);
    assert_false(g->nodes[m->in[1]].dead);
    assert_true(g->nodes[m->in[1]].attr.f[ATTR_CONST_VALUE] == 0.5);
}

/* ---- the memory plan at scale ---- */

/* The plan's rule written out plainly, O(n^2), to check the plan's
 * O(n log n) one: lifetimes in levels (sources and roots live throughout;
 * a reshape is a view, its buffer its input's, which lives as long as the
 * view's consumers), then in (start, id) order each buffer takes the
 * lowest offset that overlaps no buffer placed before it and still live at
 * its start. */
static void reference_offsets(const plan_graph *p, size_t *want)
{
    int n = p->n, *start = calloc((size_t)n, sizeof(int)), *end = calloc((size_t)n, sizeof(int));
    int *at = malloc(sizeof(int) * (size_t)g->n_nodes), *buf = malloc(sizeof(int) * (size_t)n);
    size_t *bytes = calloc((size_t)n, sizeof(size_t));
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        int pinned = ops_has(nd->op, OPF_SOURCE);
        at[p->order[i]] = i;
        buf[i] = nd->op == OP_RESHAPE ? buf[at[nd->in[0]]] : i;
        want[i] = PLAN_NONE;
        start[i] = pinned ? -1 : p->level[p->order[i]];
        end[i] = pinned ? p->n_levels : p->level[p->order[i]];
        if (!ops_has(nd->op, OPF_EXTERNAL) && buf[i] == i)
            bytes[i] = (ir_nbytes(&nd->type) + 63) / 64 * 64;
        for (int r = 0; r < p->n_roots; r++)
            if (p->roots[r] == p->order[i]) end[buf[i]] = p->n_levels;
    }
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[p->order[i]];
        for (int j = 0; j < nd->n_in; j++) {
            int k = buf[at[nd->in[j]]];
            if (end[k] < p->level[p->order[i]]) end[k] = p->level[p->order[i]];
        }
    }
    for (int pass = 0; pass < 2; pass++) /* pinned first, then by (level, id) = order */
        for (int i = 0; i < n; i++) {
            if (!bytes[i] || (start[i] < 0) != (pass == 0)) continue;
            size_t off = 0;
            for (int moved = 1; moved;) {
                moved = 0;
                for (int k = 0; k < n; k++)
                    if (want[k] != PLAN_NONE && end[k] >= start[i] && want[k] < off + bytes[i] &&
                        off < want[k] + bytes[k])
                        off = want[k] + bytes[k], moved = 1;
            }
            want[i] = off;
        }
    for (int i = 0; i < n; i++) want[i] = want[buf[i]];
    free(start);
    free(end);
    free(at);
    free(buf);
    free(bytes);
}

/* A random DAG of adds, broadcasts, sums and reshapes (views, chains of
 * them too) over many sizes, with many buffers live at once: the plan's
 * offsets are exactly first-fit's. */
static void test_plan_places_first_fit_at_scale(void **state)
{
    (void)state;
    unsigned rnd = 12345;
    ir_type one = irfx_type("f32[1]");
    int n0 = ir_add_input(g, "x", &one, src, sp(0, 1)), roots[8];
    for (int i = 0; i < 3000; i++) {
        rnd = rnd * 1103515245u + 12345u;
        int a = n0 + (int)((rnd >> 8) % (unsigned)(g->n_nodes - n0));
        ir_attrs at;
        memset(&at, 0, sizeof at);
        if ((rnd >> 4) % 3 == 0 && g->nodes[a].type.rank == 1 && g->nodes[a].type.dim[0] == 1) {
            at.n_list = 1;
            at.list[0] = 1 + (int64_t)((rnd >> 12) % 300);
            ir_add(g, OP_BROADCAST, &a, 1, &at, src, sp(0, 1));
        } else if ((rnd >> 4) % 3 == 1) {
            at.n_list = 1;
            at.list[0] = 1;
            ir_add(g, OP_SUM_TO, &a, 1, &at, src, sp(0, 1));
        } else if ((rnd >> 20) % 4 == 0) {
            at.n_list = 1;
            at.list[0] = ir_numel(&g->nodes[a].type);
            ir_add(g, OP_RESHAPE, &a, 1, &at, src, sp(0, 1));
        } else {
            int in[2] = {a, a};
            ir_add(g, OP_ADD, in, 2, NULL, src, sp(0, 1));
        }
    }
    for (int r = 0; r < 8; r++) roots[r] = g->n_nodes - 1 - 97 * r;
    plan_graph *p = plan_build(g, roots, 8);
    size_t *want = malloc(sizeof(size_t) * (size_t)p->n);
    reference_offsets(p, want);
    for (int i = 0; i < p->n; i++)
        if (p->offset[p->order[i]] != want[i])
            fail_msg("node %d: offset %zu, first-fit says %zu", p->order[i], p->offset[p->order[i]],
                     want[i]);
    free(want);
    plan_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_type_str_formats_dims_and_scalars, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_numel_nbytes_and_equality, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_input_creates_node_and_entry, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_var_creates_variable_node, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_add_runs_shape_rule_and_copies_inputs, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_add_rejects_bad_inputs_and_marks_dead, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_null_attrs_take_registry_defaults, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_add_like_copies_span_and_device, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_const_scalar_and_tensor, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_names_overwrite_and_find, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_data_is_appended_with_copies, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_ctrl_deps_deduplicate, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_arena_survives_many_allocations, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_dump_lists_nodes_vars_and_data, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_dims_numel_checks_every_dimension_and_product, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_type_problem_says_which_limit, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_const_type_may_point_into_the_node_array, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_node_budget_is_reported_once_at_the_node, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_memory_budget_counts_the_arena, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_names_and_vars_are_found_among_thousands, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_ctrl_deps_grow_in_order, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_fold_skips_large_inputs_not_just_large_outputs, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_fold_stops_at_its_byte_budget, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_fuse_batched_matmul_bias_only_with_a_2d_b, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_fuse_conv_bias_relu_and_pool_grad, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_sgd_fuses_into_its_allreduce_in_sequence, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_pool_grad_read_elsewhere_keeps_its_relu_grad, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_fuse_batchnorm_relu_forward_and_backward, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_bn_relu_grad_read_elsewhere_stays, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_data_scale_moves_a_common_scale_into_the_reader, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_data_scale_leaves_x_that_is_seen_unscaled, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_cse_merges_equal_constants_only, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_cse_resolves_constants_added_by_folding, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_plan_places_first_fit_at_scale, setup, irfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
