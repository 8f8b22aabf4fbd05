/* test_autodiff.c - structural tests of ad_minimize: which gradient nodes it
 * builds, how it sums and reduces them, the optimizer slots and updates it
 * adds, where it places them, and its errors.  The numeric check of every
 * gradient rule is test_gradcheck.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "compiler/compiler.h"
#include "ir_fixture.h"

static const char *text = "w = var\nloss = sum(x * w)\ntrain = sgd(0.1).minimize(loss)\n";
static const src_span line2 = {8, 26}, line3 = {27, 58};

/* Ops, inputs and variables claim line 2, the loss's line. */
static int setup(void **state)
{
    (void)state;
    return irfx_open(text, line2);
}

static int op1(op_kind op, int x, int64_t a0, int64_t a1)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[0] = a0;
    a.i[1] = a1;
    return ir_add(g, op, &x, 1, &a, src, line2);
}

static int op2(op_kind op, int x, int y)
{
    int in[2] = {x, y};
    return ir_add(g, op, in, 2, NULL, src, line2);
}

static int sum_all(int x)
{
    return op1(OP_SUM, x, OP_AXIS_ALL, 0);
}

static int minimize(int loss, ad_kind kind)
{
    ad_optimizer o = {.kind = kind,
                      .lr = 0.1,
                      .m = 0.9,
                      .b1 = 0.9,
                      .b2 = 0.999,
                      .eps = 1e-8,
                      .nesterov = 1,
                      .locking = 1};
    return ad_minimize(g, loss, &o, NULL, src, line3, NULL);
}

/* The update node of variable node v in the group, or -1. */
static int update_of(int group, int v)
{
    const ir_node *n = &g->nodes[group];
    for (int k = 0; k < n->n_in; k++)
        if (g->nodes[n->in[k]].in[0] == v) return n->in[k];
    return -1;
}

static int grad_of(int group, int v)
{
    int u = update_of(group, v);
    assert_true(u >= 0);
    return g->nodes[u].in[1];
}

static void test_grad_of_sum_x_times_w_is_x(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[3]");
    int w = irfx_var("w", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int loss = sum_all(op2(OP_MUL, x, w));
    int train = minimize(loss, AD_SGD);
    assert_true(train >= 0);
    assert_int_equal(g->nodes[train].op, OP_GROUP);
    assert_int_equal(g->nodes[train].n_in, 1);
    int u = g->nodes[train].in[0];
    assert_int_equal(g->nodes[u].op, OP_APPLY_SGD);
    assert_int_equal(g->nodes[u].in[0], w);
    assert_true(ir_const_scalar(g, g->nodes[u].in[2]) == (float)0.1); /* lr */
    assert_true(ir_const_scalar(g, g->nodes[u].in[3]) == 1.0);        /* no clipping */
    assert_int_equal(g->nodes[u].attr.i[ATTR_LOCKING], 1);
    /* dw = dy * x, dy = broadcast(1) over x's shape */
    const ir_node *dw = &g->nodes[g->nodes[u].in[1]];
    assert_int_equal(dw->op, OP_MUL);
    assert_int_equal(dw->in[1], x);
    assert_int_equal(dw->type.rank, 1);
    assert_int_equal(dw->type.dim[0], 3);
    const ir_node *dy = &g->nodes[dw->in[0]];
    assert_int_equal(dy->op, OP_BROADCAST);
    assert_int_equal(dy->type.dim[0], 3);
    assert_int_equal(diags.n_errors, 0);
}

static void test_gradients_from_two_consumers_are_added(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[4]");
    int w = irfx_var("w", "f32[4]", IR_DEV(DEV_CPU, 1), 1);
    int loss = sum_all(op2(OP_ADD, op2(OP_MUL, x, w), op1(OP_EXP, w, 0, 0)));
    int train = minimize(loss, AD_SGD);
    assert_true(train >= 0);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_int_equal(dw->op, OP_ADD);
    assert_int_equal(dw->device, IR_DEV(DEV_CPU, 1)); /* summed where w lives */
    int ops[2] = {g->nodes[dw->in[0]].op, g->nodes[dw->in[1]].op};
    assert_true(ops[0] == OP_MUL && ops[1] == OP_MUL); /* dy*x and dy*exp(w) */
}

static void test_broadcast_bias_gradient_uses_sum_to(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[64,10]");
    int b = irfx_var("b", "f32[10]", IR_DEV(DEV_CPU, 0), 1);
    int train = minimize(sum_all(op2(OP_ADD, x, b)), AD_SGD);
    assert_true(train >= 0);
    const ir_node *db = &g->nodes[grad_of(train, b)];
    assert_int_equal(db->op, OP_SUM_TO);
    assert_int_equal(db->attr.n_list, 1);
    assert_int_equal(db->attr.list[0], 10);
    assert_int_equal(db->type.rank, 1);
    assert_int_equal(db->type.dim[0], 10);
}

static void test_same_shape_binary_has_no_sum_to(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[10]");
    int b = irfx_var("b", "f32[10]", IR_DEV(DEV_CPU, 0), 1);
    int train = minimize(sum_all(op2(OP_SUB, x, b)), AD_SGD);
    const ir_node *db = &g->nodes[grad_of(train, b)];
    assert_int_equal(db->op, OP_NEG);
}

static void test_matmul_gradients_use_transpose_attrs(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[4,5]");
    int w = irfx_var("w", "f32[5,3]", IR_DEV(DEV_CPU, 0), 1);
    int w2 = irfx_var("w2", "f32[7,5]", IR_DEV(DEV_CPU, 0), 1);
    int in[2] = {x, w2};
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_TRANS_B] = 1; /* x @ w2^T : [4,7] */
    int y2 = ir_add(g, OP_MATMUL, in, 2, &a, src, line2);
    int loss = op2(OP_ADD, sum_all(op2(OP_MATMUL, x, w)), sum_all(y2));
    int train = minimize(loss, AD_SGD);
    assert_true(train >= 0);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_int_equal(dw->op, OP_MATMUL);
    assert_int_equal(dw->in[0], x); /* x^T @ dy */
    assert_int_equal(dw->attr.i[ATTR_TRANS_A], 1);
    assert_int_equal(dw->attr.i[ATTR_TRANS_B], 0);
    assert_int_equal(dw->type.dim[0], 5);
    assert_int_equal(dw->type.dim[1], 3);
    const ir_node *dw2 = &g->nodes[grad_of(train, w2)];
    assert_int_equal(dw2->in[1], x); /* dy^T @ x */
    assert_int_equal(dw2->attr.i[ATTR_TRANS_A], 1);
    assert_int_equal(dw2->attr.i[ATTR_TRANS_B], 0);
    assert_int_equal(dw2->type.dim[0], 7);
    assert_int_equal(dw2->type.dim[1], 5);
}

/* x @ w at a step of lstm_seq or gru_seq (ATTR_MM_STEP), or not. */
static int step_mm(int x, int w, int step)
{
    int in[2] = {x, w};
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_MM_STEP] = step;
    return ir_add(g, OP_MATMUL, in, 2, &a, src, line2);
}

/* sum of x_k @ w over three GEMMs, each a sequence's step or not. */
static int three_gemms(int w, int step, int *y)
{
    int loss = -1;
    for (int k = 0; k < 3; k++) {
        char name[4] = {'x', (char)('1' + k), 0};
        y[k] = step_mm(irfx_input(name, "f32[2,5]"), w, step);
        loss = loss < 0 ? sum_all(y[k]) : op2(OP_ADD, loss, sum_all(y[k]));
    }
    return loss;
}

/* A matrix used at three steps of a sequence gets its gradient from one
 * GEMM of their rows stacked, x1..x3 and dy1..dy3 in concats; used in
 * three GEMMs of the program's own (towers, a for loop) its gradients add,
 * so that their bits do not depend on where they are placed; and so do a
 * sequence's steps asked for on two devices. */
static void test_a_matrix_used_in_gemms_gets_one_gemm_of_their_rows(void **state)
{
    (void)state;
    int w = irfx_var("w", "f32[5,3]", IR_DEV(DEV_CPU, 0), 1), y[3];
    int loss = three_gemms(w, 1, y);
    int train = minimize(loss, AD_SGD);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_int_equal(dw->op, OP_MATMUL);
    assert_int_equal(dw->attr.i[ATTR_TRANS_A], 1);
    assert_int_equal(dw->type.dim[0], 5);
    assert_int_equal(dw->type.dim[1], 3);
    for (int k = 0; k < 2; k++) {
        const ir_node *cat = &g->nodes[dw->in[k]];
        assert_int_equal(cat->op, OP_CONCAT);
        assert_int_equal(cat->n_in, 3);
        assert_int_equal(cat->type.dim[0], 6); /* every use's 2 rows */
    }
    for (int k = 0; k < 3; k++) /* x_k, in the order of the steps' gradients */
        assert_int_equal(g->nodes[dw->in[0]].in[k], g->nodes[y[2 - k]].in[0]);
}

static void test_program_gemms_add_their_gradients(void **state)
{
    (void)state;
    int w = irfx_var("w", "f32[5,3]", IR_DEV(DEV_CPU, 0), 1), y[3];
    int train = minimize(three_gemms(w, 0, y), AD_SGD);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_int_equal(dw->op, OP_ADD);
    assert_int_equal(g->nodes[dw->in[1]].op, OP_MATMUL);
}

static void test_steps_on_two_devices_add_their_gradients(void **state)
{
    (void)state;
    int w = irfx_var("w", "f32[5,3]", IR_DEV(DEV_CPU, 0), 1);
    int y1 = step_mm(irfx_input("x1", "f32[2,5]"), w, 1);
    int y2 = step_mm(irfx_input("x2", "f32[2,5]"), w, 1);
    g->nodes[y2].place_req = ir_add_place_req(g, &(ir_place_req){.dev = IR_DEV(DEV_GPU, 1)});
    int train = minimize(op2(OP_ADD, sum_all(y1), sum_all(y2)), AD_SGD);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_int_equal(dw->op, OP_ADD);
    assert_int_equal(g->nodes[dw->in[0]].op, OP_MATMUL);
    assert_int_equal(g->nodes[dw->in[1]].op, OP_MATMUL);
}

/* Autodiff decides no device: it records what goes with what, and the
 * placement pass (place.c) follows the records. */
static void test_gradient_ops_live_on_forward_device(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[3]");
    int w = irfx_var("w", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int y = op2(OP_MUL, x, w);
    int train = minimize(sum_all(y), AD_SGD);
    int u = update_of(train, w);
    assert_int_equal(g->nodes[u].coloc, w);                 /* with its variable */
    assert_int_equal(g->nodes[g->nodes[u].in[1]].coloc, y); /* dw = dy * x goes with y */
    g->nodes[y].place_req = ir_add_place_req(g, &(ir_place_req){.dev = IR_DEV(DEV_GPU, 1)});
    assert_int_equal(place_run(g, &(place_options){.n_cpu = 1, .n_gpu = 2}), 0);
    assert_int_equal(g->nodes[u].device, IR_DEV(DEV_CPU, 0));
    assert_int_equal(g->nodes[g->nodes[u].in[1]].device, IR_DEV(DEV_GPU, 1));
}

static void test_momentum_slots_named_typed_and_colocated(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[2,3]");
    int w = irfx_var("model/fc1/w", "f32[2,3]", IR_DEV(DEV_CPU, 2), 1);
    int n_vars = g->n_vars;
    int train = minimize(sum_all(op2(OP_MUL, x, w)), AD_MOMENTUM);
    assert_true(train >= 0);
    int si = ir_find_var(g, "model/fc1/w/momentum");
    assert_int_equal(si, n_vars);
    const ir_var *s = &g->vars[si];
    assert_true(ir_type_eq(&s->type, &g->nodes[w].type));
    assert_int_equal(g->nodes[s->node].coloc, w); /* placed with w */
    assert_int_equal(s->slot_of, g->nodes[w].var);
    assert_int_equal(s->trainable, 0);
    assert_int_equal(s->init, INIT_ZEROS);
    int u = update_of(train, w);
    assert_int_equal(g->nodes[u].op, OP_APPLY_MOMENTUM);
    assert_int_equal(g->nodes[u].in[2], s->node);
    assert_true(g->nodes[u].attr.f[ATTR_MOMENTUM_M] == 0.9);
    assert_int_equal(g->nodes[u].attr.i[ATTR_NESTEROV], 1);
    assert_int_equal(g->nodes[u].coloc, w);
}

static void test_adam_creates_slots_and_one_step_counter(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[3]");
    int w = irfx_var("w", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int b = irfx_var("b", "f32[]", IR_DEV(DEV_CPU, 0), 1);
    int loss = sum_all(op2(OP_ADD, op2(OP_MUL, x, w), b));
    int train = minimize(loss, AD_ADAM);
    assert_true(train >= 0);
    assert_true(ir_find_var(g, "w/adam_m") >= 0);
    assert_true(ir_find_var(g, "w/adam_v") >= 0);
    assert_true(ir_find_var(g, "b/adam_m") >= 0);
    int st = ir_find_var(g, "global_step");
    assert_true(st >= 0);
    assert_int_equal(g->vars[st].type.rank, 0);
    assert_int_equal(g->vars[st].trainable, 0);
    int uw = update_of(train, w), ub = update_of(train, b);
    assert_int_equal(g->nodes[uw].op, OP_APPLY_ADAM);
    assert_int_equal(g->nodes[uw].in[4], g->vars[st].node);
    assert_int_equal(g->nodes[ub].in[4], g->vars[st].node);
    /* control deps: the step increment, then the all-gradients barrier */
    assert_int_equal(g->nodes[uw].n_ctrl, 2);
    assert_int_equal(g->nodes[g->nodes[uw].ctrl[1]].op, OP_GROUP);
    const ir_node *inc = &g->nodes[g->nodes[uw].ctrl[0]];
    assert_int_equal(inc->op, OP_ASSIGN_ADD);
    assert_int_equal(inc->in[0], g->vars[st].node);
    assert_true(g->nodes[inc->in[1]].attr.f[ATTR_CONST_VALUE] == 1.0);
    assert_int_equal(g->nodes[ub].ctrl[0], g->nodes[uw].ctrl[0]);
    assert_true(g->nodes[uw].attr.f[ATTR_ADAM_EPS] == 1e-8);
    /* the slots are not trained by a second minimize; a new step counter is */
    int train2 = minimize(loss, AD_ADAM);
    assert_true(train2 >= 0);
    assert_int_equal(g->nodes[train2].n_in, 2);
    assert_true(ir_find_var(g, "global_step_1") >= 0);
    assert_true(ir_find_var(g, "w/adam_m_1") >= 0);
}

static void test_unreached_variable_gets_no_update(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[3]");
    int w = irfx_var("w", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int unused = irfx_var("unused", "f32[3]", IR_DEV(DEV_CPU, 0), 1);
    int frozen = irfx_var("frozen", "f32[3]", IR_DEV(DEV_CPU, 0), 0);
    int loss = sum_all(op2(OP_MUL, op2(OP_MUL, x, w), frozen));
    int train = minimize(loss, AD_MOMENTUM);
    assert_int_equal(g->nodes[train].n_in, 1);
    assert_int_equal(update_of(train, unused), -1);
    assert_int_equal(update_of(train, frozen), -1);
    assert_int_equal(ir_find_var(g, "unused/momentum"), -1);
}

static void test_every_differentiable_op_on_a_path(void **state)
{
    (void)state;
    /* a chain through many ops: every rule must produce well-typed IR */
    int w = irfx_var("w", "f32[4,6]", IR_DEV(DEV_CPU, 0), 1);
    int lab = irfx_input("lab", "i32[4]");
    int h = op1(OP_RELU, op1(OP_TANH, op1(OP_SIGMOID, w, 0, 0), 0, 0), 0, 0);
    h = op2(OP_DIV, op1(OP_SQRT, op1(OP_EXP, h, 0, 0), 0, 0),
            op1(OP_LOG, op1(OP_EXP, w, 0, 0), 0, 0));
    h = op1(OP_NEG, op1(OP_IDENTITY, h, 0, 0), 0, 0);
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.n_list = 2;
    a.list[0] = 6;
    a.list[1] = 4;
    int r = ir_add(g, OP_RESHAPE, &h, 1, &a, src, line2);
    memset(&a, 0, sizeof(a));
    int t = ir_add(g, OP_TRANSPOSE, &r, 1, &a, src, line2); /* [4,6] */
    int in[2] = {t, w};
    a.i[ATTR_AXIS] = 1;
    int c = ir_add(g, OP_CONCAT, in, 2, &a, src, line2); /* [4,12] */
    memset(&a, 0, sizeof(a));
    a.i[ATTR_AXIS] = 1, a.i[ATTR_SLICE_BEGIN] = 2, a.i[ATTR_SLICE_END] = 12;
    int s = ir_add(g, OP_SLICE, &c, 1, &a, src, line2); /* [4,10] */
    int m = op1(OP_MAX, s, 1, 1);                       /* [4,1] */
    int sm = op1(OP_SOFTMAX, op2(OP_SUB, s, m), 0, 0);
    int ls = op1(OP_LOG_SOFTMAX, sm, 0, 0);
    int xent = op2(OP_SOFTMAX_XENT, ls, lab);
    int mse = op2(OP_MSE, op1(OP_MEAN, s, 0, 0), op1(OP_MAX, s, 0, 0));
    int loss = op2(OP_ADD, op1(OP_MEAN, xent, OP_AXIS_ALL, 0), mse);
    assert_int_equal(diags.n_errors, 0);
    int train = minimize(loss, AD_SGD);
    if (diags.n_errors) print_error("%s\n", diags.v[0].msg);
    assert_true(train >= 0);
    const ir_node *dw = &g->nodes[grad_of(train, w)];
    assert_true(ir_type_eq(&dw->type, &g->nodes[w].type));
}

static void test_conv_pool_gather_gradients(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[2,3,8,8]");
    int k = irfx_var("k", "f32[4,3,3,3]", IR_DEV(DEV_CPU, 0), 1);
    int emb = irfx_var("emb", "f32[10,4]", IR_DEV(DEV_CPU, 0), 1);
    int ids = irfx_input("ids", "i32[5]");
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_CONV_STRIDE] = 1;
    a.i[ATTR_CONV_PAD] = 1;
    int in[2] = {x, k};
    int y = ir_add(g, OP_CONV2D, in, 2, &a, src, line2); /* [2,4,8,8] */
    int p = op1(OP_MAXPOOL2D, y, 2, 0);                  /* [2,4,4,4] */
    int q = op1(OP_AVGPOOL2D, p, 2, 2);                  /* [2,4,2,2] */
    int e = op2(OP_GATHER, emb, ids);                    /* [5,4] */
    int loss = op2(OP_ADD, sum_all(q), sum_all(e));
    int train = minimize(loss, AD_SGD);
    assert_true(train >= 0);
    const ir_node *dk = &g->nodes[grad_of(train, k)];
    assert_int_equal(dk->op, OP_CONV2D_GRAD_W);
    assert_int_equal(dk->in[1], x);
    assert_true(ir_type_eq(&dk->type, &g->nodes[k].type));
    /* sgd updates only the looked-up rows: dy [5,4] and the ids, no dense table */
    const ir_node *ue = &g->nodes[update_of(train, emb)];
    assert_int_equal(ue->op, OP_APPLY_SGD_ROWS);
    assert_int_equal(ue->in[2], ids);
    assert_int_equal(ir_numel(&g->nodes[ue->in[1]].type), 5 * 4);
}

/* A table gathered twice (word2vec's output table: context and negative
 * ids): one row update over both gathers' rows, whatever the optimizer. */
static void check_gathered_twice(ad_kind kind, double clip, op_kind want)
{
    int emb = irfx_var("emb", "f32[10,4]", IR_DEV(DEV_CPU, 0), 1);
    int a = irfx_input("a", "i32[5]"), b = irfx_input("b", "i32[3,2]");
    int loss = op2(OP_ADD, sum_all(op2(OP_GATHER, emb, a)), sum_all(op2(OP_GATHER, emb, b)));
    ad_optimizer o = {
        .kind = kind, .lr = 0.1, .m = 0.9, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .clip = clip};
    int train = ad_minimize(g, loss, &o, NULL, src, line3, NULL);
    assert_true(train >= 0);
    assert_int_equal(diags.n, 0); /* no dense-update warning */
    const ir_node *ue = &g->nodes[update_of(train, emb)];
    assert_int_equal(ue->op, want);
    assert_int_equal(ir_numel(&g->nodes[ue->in[1]].type), 11 * 4);
    assert_int_equal(ir_numel(&g->nodes[ue->in[2]].type), 11);
    int n_updates = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (ops_has(g->nodes[i].op, OPF_UPDATE) && g->nodes[i].in[0] == emb) n_updates++;
    assert_int_equal(n_updates, 1);
    if (clip > 0) { /* the norm reads the rows summed per id, not a [10,4] table */
        const ir_node *cs = &g->nodes[ue->in[ue->n_in - 1]];
        assert_int_equal(cs->op, OP_CLIP_SCALE);
        assert_int_equal(g->nodes[cs->in[0]].op, OP_ROWS_SUM);
    }
}

static void test_sgd_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_SGD, 0, OP_APPLY_SGD_ROWS);
}

static void test_momentum_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_MOMENTUM, 0, OP_APPLY_MOMENTUM_ROWS);
}

static void test_adam_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_ADAM, 0, OP_APPLY_ADAM_ROWS);
}

static void test_clipped_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_ADAM, 1.0, OP_APPLY_ADAM_ROWS);
}

/* rmsprop (m = 0.9: its momentum slot too), adagrad (clipped) and adadelta
 * have row updates, and their slots are named after the variable. */
static void test_rmsprop_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_RMSPROP, 0, OP_APPLY_RMSPROP_ROWS);
    assert_true(ir_find_var(g, "emb/rms") >= 0 && ir_find_var(g, "emb/momentum") >= 0);
    assert_true(ir_find_var(g, "emb/mean_grad") < 0);
}

static void test_adagrad_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_ADAGRAD, 1.0, OP_APPLY_ADAGRAD_ROWS);
    assert_true(ir_find_var(g, "emb/adagrad") >= 0);
}

static void test_adadelta_table_gathered_twice_gets_one_row_update(void **state)
{
    (void)state;
    check_gathered_twice(AD_ADADELTA, 0, OP_APPLY_ADADELTA_ROWS);
    assert_true(ir_find_var(g, "emb/adadelta_v") >= 0 && ir_find_var(g, "emb/adadelta_u") >= 0);
}

/* A gathered table also read by a matmul has a dense update: a warning at
 * the matmul. */
static void test_gathered_table_read_densely_warns(void **state)
{
    (void)state;
    int emb = irfx_var("emb", "f32[10,4]", IR_DEV(DEV_CPU, 0), 1);
    int a = irfx_input("a", "i32[5]"), x = irfx_input("x", "f32[2,10]");
    int mm = op2(OP_MATMUL, x, emb);
    g->nodes[mm].span = line2;
    int loss = op2(OP_ADD, sum_all(op2(OP_GATHER, emb, a)), sum_all(mm));
    int train = minimize(loss, AD_MOMENTUM);
    assert_true(train >= 0);
    assert_int_equal(g->nodes[update_of(train, emb)].op, OP_APPLY_MOMENTUM);
    assert_int_equal(diags.n, 1);
    assert_int_equal(diags.v[0].sev, DIAG_WARNING);
    assert_int_equal(diags.v[0].span.begin, line2.begin);
    assert_string_equal(diags.v[0].msg, "minimize: 'emb' is gathered, but 'matmul' reads it here "
                                        "too: its gradient and update are dense [V,D] tables, "
                                        "not rows");
}

static void test_non_scalar_loss_is_an_error(void **state)
{
    (void)state;
    int w = irfx_var("w", "f32[64]", IR_DEV(DEV_CPU, 0), 1);
    assert_int_equal(minimize(op1(OP_EXP, w, 0, 0), AD_SGD), -1);
    assert_int_equal(diags.n_errors, 1);
    assert_string_equal(diags.v[0].msg, "minimize: loss must be a scalar, got f32[64]");
    assert_int_equal(diags.v[0].span.begin, line3.begin);
}

static void test_loss_without_variables_is_an_error(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[3]");
    irfx_var("frozen", "f32[3]", IR_DEV(DEV_CPU, 0), 0);
    assert_int_equal(minimize(sum_all(x), AD_ADAM), -1);
    assert_string_equal(diags.v[0].msg, "minimize: loss does not depend on any trainable variable");
    assert_int_equal(ir_find_var(g, "global_step"), -1);
}

static void test_op_without_gradient_is_named_with_its_line(void **state)
{
    (void)state;
    int x = irfx_input("x", "f32[2,3]");
    int w = irfx_var("w", "f32[3,4]", IR_DEV(DEV_CPU, 0), 1);
    int bias = irfx_var("bias", "f32[4]", IR_DEV(DEV_CPU, 0), 1);
    int in[3] = {x, w, bias};
    int y = ir_add(g, OP_MATMUL_BIAS, in, 3, NULL, src, line2);
    assert_int_equal(minimize(sum_all(y), AD_SGD), -1);
    assert_int_equal(diags.n_errors, 1);
    assert_string_equal(
        diags.v[0].msg,
        "minimize: cannot differentiate through 'matmul_bias' (line 2): the op has no gradient");
}

static void test_argmax_path_stops_gradient(void **state)
{
    (void)state;
    int w = irfx_var("w", "f32[5]", IR_DEV(DEV_CPU, 0), 1);
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.i[ATTR_CAST_DTYPE] = DT_F32;
    int am = op1(OP_ARGMAX, w, 0, 0);
    int c = ir_add(g, OP_CAST, &am, 1, &a, src, line2);
    assert_int_equal(minimize(c, AD_SGD), -1);
    assert_string_equal(diags.v[0].msg, "minimize: loss does not depend on any trainable variable");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grad_of_sum_x_times_w_is_x, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_gradients_from_two_consumers_are_added, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_bias_gradient_uses_sum_to, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_same_shape_binary_has_no_sum_to, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_a_matrix_used_in_gemms_gets_one_gemm_of_their_rows,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_program_gemms_add_their_gradients, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_steps_on_two_devices_add_their_gradients, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_gradients_use_transpose_attrs, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_gradient_ops_live_on_forward_device, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_momentum_slots_named_typed_and_colocated, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_adam_creates_slots_and_one_step_counter, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_unreached_variable_gets_no_update, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_every_differentiable_op_on_a_path, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_sgd_table_gathered_twice_gets_one_row_update, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_momentum_table_gathered_twice_gets_one_row_update,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_adam_table_gathered_twice_gets_one_row_update, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_clipped_table_gathered_twice_gets_one_row_update,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_rmsprop_table_gathered_twice_gets_one_row_update,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_adagrad_table_gathered_twice_gets_one_row_update,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_adadelta_table_gathered_twice_gets_one_row_update,
                                        setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_gathered_table_read_densely_warns, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_conv_pool_gather_gradients, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_non_scalar_loss_is_an_error, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_loss_without_variables_is_an_error, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_op_without_gradient_is_named_with_its_line, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_argmax_path_stops_gradient, setup, irfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
