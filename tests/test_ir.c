/* test_ir.c - IR construction: nodes, names, variables, inputs, data,
 * control deps, type helpers and the text dump. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "compiler/ir.h"
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
    a.i[0] = 5; /* axis out of range: the node exists but is dead */
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
    assert_int_equal(g->nodes[s].attr.i[0], OP_AXIS_ALL);
    assert_int_equal(g->nodes[s].type.rank, 0);
    int a = ir_add(g, OP_ARGMAX, &x, 1, NULL, src, sp(0, 1));
    assert_int_equal(g->nodes[a].attr.i[0], 1); /* -1 normalised */
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
    assert_true(g->nodes[c].attr.f[0] == 2.5);
    assert_true(ir_type_eq(&g->nodes[c].type, &t));
}

static void test_const_scalar_and_tensor(void **state)
{
    (void)state;
    int c = ir_add_const(g, 3.0, NULL, src, sp(0, 1));
    assert_int_equal(g->nodes[c].op, OP_CONST);
    assert_int_equal(g->nodes[c].type.rank, 0);
    assert_true(g->nodes[c].attr.f[0] == 3.0);
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
    a.i[0] = 1;
    a.i[1] = di;
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
    assert_true(g->nodes[first].attr.f[0] == 7);
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
    a.i[0] = -1; /* normalised to 1 before it is printed */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
