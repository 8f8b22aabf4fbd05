/* test_shapes.c - every op's shape rule on valid inputs (expected output
 * types and normalised attributes), the exact text of shape errors, the
 * registry table itself and the scratch rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "compiler/ir.h"
#include "ir_fixture.h"

/* Operands claim bytes 0..5 of the text; build() puts the op at 8..14. */
static int setup(void **state)
{
    (void)state;
    src_span operands = {0, 5};
    return irfx_open("model = net(x)\n", operands);
}

/* "f32[3]" makes an input of that type, "var:f32[3]" a variable. */
static int make_operand(const char *s)
{
    if (strncmp(s, "var:", 4) == 0) return irfx_var("v", s + 4, 0, 1);
    return irfx_input("in", s);
}

typedef struct shape_case {
    op_kind op;
    const char *in[8];
    int64_t i[6];
    double f0;
    int n_list;
    int64_t list[IR_MAX_DIMS];
    const char *want; /* output type, or the exact error message */
    double f1;
    double f2; /* rmsprop's m */
} shape_case;

/* Builds the case's node; returns its id or -1. */
static int build(const shape_case *c)
{
    int in[8], n = 0;
    while (n < 8 && c->in[n]) {
        in[n] = make_operand(c->in[n]);
        n++;
    }
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    memcpy(a.i, c->i, sizeof(c->i));
    a.f[0] = c->f0;
    a.f[1] = c->f1;
    a.f[2] = c->f2;
    a.n_list = c->n_list;
    memcpy(a.list, c->list, sizeof(c->list));
    src_span sp = {8, 14};
    return ir_add(g, c->op, in, n, &a, src, sp);
}

#define ALL OP_AXIS_ALL
static const shape_case valid[] = {
    {OP_MATMUL, {"f32[64,784]", "f32[784,10]"}, .want = "f32[64,10]"},
    {OP_MATMUL, {"f32[784,64]", "f32[784,10]"}, {1, 0}, .want = "f32[64,10]"},
    {OP_MATMUL, {"f32[64,784]", "f32[10,784]"}, {0, 1}, .want = "f32[64,10]"},
    {OP_MATMUL, {"f32[784,64]", "f32[10,784]"}, {1, 1}, .want = "f32[64,10]"},
    /* batch axes broadcast like numpy; the last two are the matrices */
    {OP_MATMUL, {"f32[8,64,128]", "f32[128,384]"}, .want = "f32[8,64,384]"},
    {OP_MATMUL, {"f32[2,4,16,8]", "f32[2,4,16,8]"}, {0, 1}, .want = "f32[2,4,16,16]"},
    {OP_MATMUL, {"f32[5,1,3,4]", "f32[6,4,2]"}, .want = "f32[5,6,3,2]"},
    {OP_MATMUL, {"f32[4,3]", "f32[7,4,2]"}, {1, 0}, .want = "f32[7,3,2]"},
    {OP_ADD, {"f32[64,10]", "f32[10]"}, .want = "f32[64,10]"},
    {OP_SUB, {"f32[64,1]", "f32[1,10]"}, .want = "f32[64,10]"},
    {OP_MUL, {"f32[]", "f32[3]"}, .want = "f32[3]"},
    {OP_DIV, {"i32[2,3]", "i32[2,3]"}, .want = "i32[2,3]"},
    {OP_MAXIMUM, {"f32[2,3]", "f32[3]"}, .want = "f32[2,3]"},
    {OP_MINIMUM, {"i32[2,1]", "i32[1,4]"}, .want = "i32[2,4]"},
    {OP_POW, {"f32[2,3]", "f32[]"}, .want = "f32[2,3]"},
    {OP_WHERE, {"f32[2,3]", "i32[2,3]", "i32[2,3]"}, .want = "i32[2,3]"},
    {OP_EQ, {"i32[64]", "i32[64]"}, .want = "f32[64]"},
    {OP_NE, {"f32[64]", "f32[]"}, .want = "f32[64]"},
    {OP_LT, {"f32[4,1]", "f32[5]"}, .want = "f32[4,5]"},
    {OP_GT, {"i32[3]", "i32[3]"}, .want = "f32[3]"},
    {OP_LE, {"f32[3]", "f32[3]"}, .want = "f32[3]"},
    {OP_GE, {"f32[3]", "f32[3]"}, .want = "f32[3]"},
    {OP_NEG, {"i32[4]"}, .want = "i32[4]"},
    {OP_EXP, {"f32[2,3]"}, .want = "f32[2,3]"},
    {OP_LOG, {"f32[2,3]"}, .want = "f32[2,3]"},
    {OP_SQRT, {"f32[]"}, .want = "f32[]"},
    {OP_RELU, {"f32[8,4]"}, .want = "f32[8,4]"},
    {OP_SIGMOID, {"f32[8]"}, .want = "f32[8]"},
    {OP_TANH, {"f32[8]"}, .want = "f32[8]"},
    {OP_ABS, {"f32[8]"}, .want = "f32[8]"},
    {OP_SIN, {"f32[8]"}, .want = "f32[8]"},
    {OP_COS, {"f32[8]"}, .want = "f32[8]"},
    {OP_SOFTPLUS, {"f32[2,8]"}, .want = "f32[2,8]"},
    {OP_LOG_SIGMOID, {"f32[8]"}, .want = "f32[8]"},
    {OP_SILU, {"f32[8]"}, .want = "f32[8]"},
    {OP_ELU, {"f32[8]"}, .want = "f32[8]"},
    {OP_IDENTITY, {"i32[8]"}, .want = "i32[8]"},
    {OP_STOP_GRADIENT, {"f32[2,3]"}, .want = "f32[2,3]"},
    {OP_SOFTMAX, {"f32[4,10]"}, .want = "f32[4,10]"},
    {OP_SOFTMAX, {"f32[2,3,5,5]"}, {OP_MASK_CAUSAL}, .want = "f32[2,3,5,5]"},
    {OP_LOG_SOFTMAX, {"f32[4,10]"}, .want = "f32[4,10]"},
    {OP_SOFTMAX_XENT, {"f32[64,10]", "i32[64]"}, .want = "f32[64]"},
    {OP_MSE, {"f32[64,1]", "f32[64,1]"}, .want = "f32[]"},
    {OP_SUM, {"f32[64,10]"}, {ALL, 0}, .want = "f32[]"},
    {OP_SUM, {"f32[64,10]"}, {ALL, 1}, .want = "f32[1,1]"},
    {OP_SUM, {"f32[64,10]"}, {1, 0}, .want = "f32[64]"},
    {OP_MEAN, {"f32[64,10]"}, {-1, 1}, .want = "f32[64,1]"},
    {OP_MAX, {"f32[64,10]"}, {0, 0}, .want = "f32[10]"},
    {OP_ARGMAX, {"f32[64,10]"}, {-1}, .want = "i32[64]"},
    {OP_ARGMAX, {"f32[64,10]"}, {0}, .want = "i32[10]"},
    {OP_RESHAPE, {"f32[64,784]"}, .n_list = 3, .list = {-1, 28, 28}, .want = "f32[64,28,28]"},
    {OP_RESHAPE, {"f32[1,1]"}, .n_list = 0, .want = "f32[]"},
    {OP_TRANSPOSE, {"f32[2,3,4]"}, .want = "f32[4,3,2]"},
    {OP_TRANSPOSE, {"f32[2,3,4]"}, .n_list = 3, .list = {0, -1, 1}, .want = "f32[2,4,3]"},
    {OP_CONCAT, {"f32[2,3]", "f32[2,5]", "f32[2,1]"}, {1}, .want = "f32[2,9]"},
    {OP_CONCAT, {"f32[2,3]", "f32[4,3]"}, {-2}, .want = "f32[6,3]"},
    {OP_SLICE, {"f32[4,10]"}, {1, 2, 5}, .want = "f32[4,3]"},
    {OP_SLICE, {"f32[4,10]"}, {0, -2, 4}, .want = "f32[2,10]"},
    {OP_GATHER, {"f32[100,16]", "i32[4,7]"}, .want = "f32[4,7,16]"},
    {OP_CAST, {"i32[5]"}, {DT_F32}, .want = "f32[5]"},
    {OP_CAST, {"f32[5]"}, {DT_I32}, .want = "i32[5]"},
    {OP_ONE_HOT, {"i32[64]"}, {10}, .want = "f32[64,10]"},
    {OP_BROADCAST, {"f32[10]"}, .n_list = 2, .list = {64, 10}, .want = "f32[64,10]"},
    {OP_BROADCAST, {"f32[]"}, .n_list = 2, .list = {2, 3}, .want = "f32[2,3]"},
    {OP_SUM_TO, {"f32[64,10]"}, .n_list = 1, .list = {10}, .want = "f32[10]"},
    {OP_SUM_TO, {"f32[64,10]"}, .n_list = 2, .list = {64, 1}, .want = "f32[64,1]"},
    {OP_CONV2D, {"f32[8,3,32,32]", "f32[16,3,5,5]"}, {1, 2}, .want = "f32[8,16,32,32]"},
    {OP_CONV2D, {"f32[8,3,32,32]", "f32[16,3,5,5]"}, {2, 0}, .want = "f32[8,16,14,14]"},
    {OP_MAXPOOL2D, {"f32[8,16,32,32]"}, {2, 0}, .want = "f32[8,16,16,16]"},
    {OP_AVGPOOL2D, {"f32[8,16,32,32]"}, {3, 2}, .want = "f32[8,16,15,15]"},
    {OP_MAXPOOL2D, {"f32[1,2,7,9]"}, {2, 2, OP_PAD_SAME}, .want = "f32[1,2,4,5]"},
    {OP_MAXPOOL2D, {"f32[1,1,2,2]"}, {3, 1, OP_PAD_SAME}, .want = "f32[1,1,2,2]"},
    {OP_AVGPOOL2D, {"f32[1,2,7,8]"}, {3, 2, 1}, .want = "f32[1,2,4,4]"},
    {OP_AVGPOOL2D, {"f32[1,2,1,1]"}, {2, 1, 1}, .want = "f32[1,2,2,2]"},
    {OP_DROPOUT, {"f32[4,4]"}, {0, 1}, 0.5, .want = "f32[4,4]"},
    {OP_LAYERNORM, {"f32[4,8,16]", "f32[16]", "f32[16]"}, {-1}, .want = "f32[4,8,16]", .f1 = 1e-5},
    {OP_RMSNORM, {"f32[2,3,8]", "f32[8]"}, {-1}, .want = "f32[2,3,8]", .f1 = 1e-5},
    {OP_LRN, {"f32[2,6,3,3]"}, {2}, .want = "f32[2,6,3,3]", .f1 = 1, .f2 = 1},
    {OP_LRN, {"f32[4,3]"}, {5}, .want = "f32[4,3]", .f1 = 2, .f2 = 1e-4},
    {OP_LRN_GRAD, {"f32[2,6,5]", "f32[2,6,5]"}, {1}, .want = "f32[2,6,5]", .f1 = 1},
    {OP_ROPE, {"f32[2,4,8,16]"}, .f0 = 10000, .want = "f32[2,4,8,16]"},
    {OP_ROPE, {"f32[8,2]"}, .f0 = 10, .want = "f32[8,2]"},
    {OP_ROPE_GRAD, {"f32[2,4,8,16]"}, .f0 = 10000, .want = "f32[2,4,8,16]"},
    {OP_LSTM_CELL, {"f32[3,20]", "f32[3,10]"}, .want = "f32[3,10]"},
    {OP_LSTM_CELL_GRAD, {"f32[3,10]", "f32[3,20]", "f32[3,10]"}, .want = "f32[3,30]"},
    {OP_GRU_CELL, {"f32[3,15]", "f32[3,15]", "f32[3,5]"}, .want = "f32[3,5]"},
    {OP_GRU_CELL_GRAD, {"f32[3,5]", "f32[3,15]", "f32[3,15]", "f32[3,5]"}, .want = "f32[3,35]"},
    {OP_RMSNORM_GRAD, {"f32[4,8]", "f32[4,8]", "f32[8]"}, {-1}, .want = "f32[4,8]", .f1 = 1e-5},
    {OP_LAYERNORM_GRAD,
     {"f32[4,16]", "f32[4,16]", "f32[16]"},
     {1},
     .want = "f32[4,16]",
     .f1 = 1e-5},
    {OP_LAYERNORM_GRAD_PARAMS, {"f32[4,8,16]", "f32[4,8,16]"}, {2}, .want = "f32[32]", .f1 = 1e-5},
    {OP_BN_STATS, {"f32[8,3,5,5]"}, {1}, .want = "f32[2,3]"},
    {OP_BN_STATS, {"f32[16,10]"}, {-1}, .want = "f32[2,10]"}, /* -1 of [N,C] is axis 1 */
    {OP_BATCHNORM,
     {"f32[8,3,5,5]", "f32[3]", "f32[3]", "f32[2,3]"},
     {-3},
     .want = "f32[8,3,5,5]",
     .f1 = 1e-5},
    {OP_BN_GRAD_PARAMS,
     {"f32[8,3,5,5]", "f32[8,3,5,5]", "f32[2,3]"},
     {1},
     .want = "f32[2,3]",
     .f1 = 1e-5},
    {OP_BN_GRAD,
     {"f32[16,10]", "f32[16,10]", "f32[10]", "f32[2,10]", "f32[2,10]"},
     {1, 0, 1},
     .want = "f32[16,10]",
     .f1 = 1e-5},
    {OP_BN_GRAD_PARAMS, /* with their relu flag the grads take y last */
     {"f32[8,3,5,5]", "f32[8,3,5,5]", "f32[2,3]", "f32[8,3,5,5]"},
     {1, 0, 0, 1},
     .want = "f32[2,3]",
     .f1 = 1e-5},
    {OP_GELU, {"f32[4,8]"}, .want = "f32[4,8]"},
    {OP_GELU_GRAD, {"f32[4,8]", "f32[4,8]"}, .want = "f32[4,8]"},
    {OP_RELU_GRAD, {"f32[4,4]", "f32[4,4]"}, .want = "f32[4,4]"},
    {OP_SIGMOID_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_TANH_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_ABS_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_SOFTPLUS_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_LOG_SIGMOID_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_SILU_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_ELU_GRAD, {"f32[4]", "f32[4]"}, .want = "f32[4]"},
    {OP_SOFTMAX_GRAD, {"f32[2,4]", "f32[2,4]"}, .want = "f32[2,4]"},
    {OP_LOG_SOFTMAX_GRAD, {"f32[2,4]", "f32[2,4]"}, .want = "f32[2,4]"},
    {OP_XENT_GRAD, {"f32[64,10]", "i32[64]", "f32[64]"}, .want = "f32[64,10]"},
    {OP_MAX_GRAD, {"f32[64,1]", "f32[64,10]", "f32[64,1]"}, {1, 1}, .want = "f32[64,10]"},
    {OP_CONV2D_GRAD_X,
     {"f32[8,16,32,32]", "f32[16,3,5,5]"},
     {1, 2},
     .n_list = 4,
     .list = {8, 3, 32, 32},
     .want = "f32[8,3,32,32]"},
    {OP_CONV2D_GRAD_W,
     {"f32[8,16,32,32]", "f32[8,3,32,32]"},
     {1, 2},
     .n_list = 4,
     .list = {16, 3, 5, 5},
     .want = "f32[16,3,5,5]"},
    {OP_MAXPOOL_GRAD, {"f32[8,16,16,16]", "f32[8,16,32,32]"}, {2, 2}, .want = "f32[8,16,32,32]"},
    {OP_AVGPOOL_GRAD,
     {"f32[8,16,16,16]"},
     {2, 2},
     .n_list = 4,
     .list = {8, 16, 32, 32},
     .want = "f32[8,16,32,32]"},
    {OP_DROPOUT_GRAD, {"f32[4,4]"}, {0, 1, 0}, 0.5, .want = "f32[4,4]"},
    {OP_RANDOM, {"i32[2,3]"}, {OP_RANDOM_NORMAL}, .want = "f32[2,3]"}, /* the shape, in f32 */
    {OP_RANDOM, {"f32[5]"}, {OP_RANDOM_BERNOULLI}, .want = "f32[5]"},
    /* categorical: i32 ids of its list's shape, from a table or rows of logits */
    {OP_CATEGORICAL,
     {"f32[50000]"},
     {OP_DRAW_WEIGHTS},
     .n_list = 2,
     .list = {20, 128},
     .want = "i32[20,128]"},
    {OP_CATEGORICAL,
     {"f32[4,10]"},
     {OP_DRAW_LOGITS},
     .n_list = 2,
     .list = {4, 3},
     .want = "i32[4,3]"},
    {OP_GATHER_GRAD,
     {"f32[4,7,16]", "i32[4,7]"},
     .n_list = 2,
     .list = {100, 16},
     .want = "f32[100,16]"},
    {OP_SLICE_GRAD, {"f32[4,3]"}, {1, 2, 5}, .n_list = 2, .list = {4, 10}, .want = "f32[4,10]"},
    {OP_APPLY_SGD, {"var:f32[3,4]", "f32[3,4]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_APPLY_SGD_ROWS, {"var:f32[6,4]", "f32[3,4]", "i32[3]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_APPLY_MOMENTUM, {"var:f32[3]", "f32[3]", "var:f32[3]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_APPLY_MOMENTUM_ROWS,
     {"var:f32[6,4]", "f32[2,3,4]", "i32[2,3]", "var:f32[6,4]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_ADAM,
     {"var:f32[3]", "f32[3]", "var:f32[3]", "var:f32[3]", "var:f32[]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_ADAM_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "var:f32[6,4]", "var:f32[]", "f32[]",
      "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_RMSPROP, {"var:f32[3]", "f32[3]", "var:f32[3]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_APPLY_RMSPROP, /* m != 0 and centered: the momentum, then the mean gradient */
     {"var:f32[3]", "f32[3]", "var:f32[3]", "var:f32[3]", "var:f32[3]", "f32[]", "f32[]"},
     {1},
     .f2 = 0.9,
     .want = "f32[0]"},
    {OP_APPLY_RMSPROP_ROWS,
     {"var:f32[6,4]", "f32[2,3,4]", "i32[2,3]", "var:f32[6,4]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_ADAGRAD, {"var:f32[3]", "f32[3]", "var:f32[3]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_APPLY_ADAGRAD_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_ADADELTA,
     {"var:f32[3]", "f32[3]", "var:f32[3]", "var:f32[3]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_APPLY_ADADELTA_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "var:f32[6,4]", "f32[]", "f32[]"},
     .want = "f32[0]"},
    {OP_ROWS_SUM, {"f32[2,3,4]", "i32[2,3]"}, .want = "f32[6,4]"},
    {OP_ASSIGN_ADD, {"var:f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_ASSIGN, {"var:f32[3]", "f32[3]"}, .want = "f32[0]"},
    {OP_ASSIGN, {"var:i32[3]", "i32[3]"}, .want = "f32[0]"},
    {OP_ASSIGN, {"var:f32[3]", "f32[3]"}, .want = "f32[0]", .f0 = 0.99},
    {OP_GROUP, {"f32[3]", "f32[2]"}, .want = "f32[0]"},
    {OP_ALLREDUCE, {"f32[3]", "f32[2,2]", "f32[]"}, .want = "f32[8]"},
    {OP_ALLREDUCE, {"f32[3,2]"}, .want = "f32[3,2]"},
    {OP_APPLY_SGD_ALLREDUCE, {"var:f32[3,4]", "f32[3,4]", "f32[]", "f32[]"}, .want = "f32[0]"},
    {OP_LR_SCHEDULE, {"var:f32[]"}, .want = "f32[]"},
    {OP_CLIP_SCALE, {"f32[3,4]", "f32[7]"}, .want = "f32[]"},
    {OP_MATMUL_BIAS, {"f32[64,784]", "f32[784,10]", "f32[10]"}, .want = "f32[64,10]"},
    {OP_MATMUL_BIAS, {"f32[2,5,6]", "f32[6,7]", "f32[7]"}, .want = "f32[2,5,7]"},
    {OP_CONV2D_BIAS,
     {"f32[8,3,32,32]", "f32[16,3,5,5]", "f32[1,16,1,1]"},
     {1, 2, 1},
     .want = "f32[8,16,32,32]"},
    {OP_APPLY_SGD_MATMUL,
     {"var:f32[784,10]", "f32[64,784]", "f32[64,10]"},
     {0, 1, 0},
     0.1,
     .want = "f32[0]"},
};

static void test_every_valid_case_gets_expected_type(void **state)
{
    (void)state;
    char b[160];
    for (size_t k = 0; k < sizeof(valid) / sizeof(valid[0]); k++) {
        int id = build(&valid[k]);
        if (id < 0) print_error("case %zu (%s): %s\n", k, ops_name(valid[k].op), diags.v[0].msg);
        assert_true(id >= 0);
        const char *got = ir_type_str(&g->nodes[id].type, b, sizeof(b));
        if (strcmp(got, valid[k].want) != 0)
            print_error("case %zu (%s)\n", k, ops_name(valid[k].op));
        assert_string_equal(got, valid[k].want);
    }
    assert_int_equal(diags.n_errors, 0);
}

static void test_every_shaped_op_has_a_valid_case(void **state)
{
    (void)state;
    int covered[OP_COUNT] = {0};
    for (size_t k = 0; k < sizeof(valid) / sizeof(valid[0]); k++) covered[valid[k].op] = 1;
    for (int op = 0; op < OP_COUNT; op++) {
        if (!ops_table[op].shape || op == OP_DATA) continue;
        if (!covered[op]) print_error("no valid shape case for %s\n", ops_name(op));
        assert_true(covered[op]);
    }
}

static void test_attributes_are_normalised(void **state)
{
    (void)state;
    shape_case mean = {OP_MEAN, {"f32[64,10]"}, {-1, 0}, .want = ""};
    int id = build(&mean);
    assert_int_equal(g->nodes[id].attr.i[ATTR_AXIS], 1);
    shape_case rs = {OP_RESHAPE, {"f32[64,784]"}, .n_list = 2, .list = {-1, 28}};
    id = build(&rs);
    assert_int_equal(g->nodes[id].attr.list[0], 64 * 28);
    shape_case tr = {OP_TRANSPOSE, {"f32[2,3,4]"}, .want = NULL};
    id = build(&tr);
    const ir_attrs *a = &g->nodes[id].attr;
    assert_int_equal(a->n_list, 3);
    assert_int_equal(a->list[0], 2);
    assert_int_equal(a->list[1], 1);
    assert_int_equal(a->list[2], 0);
    shape_case pool = {OP_MAXPOOL2D, {"f32[1,1,8,8]"}, {2, 0}, .want = NULL};
    id = build(&pool);
    assert_int_equal(g->nodes[id].attr.i[ATTR_POOL_STRIDE], 2);
    shape_case sl = {OP_SLICE, {"f32[4,10]"}, {-1, -3, -1}, .want = NULL};
    id = build(&sl);
    a = &g->nodes[id].attr;
    assert_int_equal(a->i[ATTR_AXIS], 1);
    assert_int_equal(a->i[ATTR_SLICE_BEGIN], 7);
    assert_int_equal(a->i[ATTR_SLICE_END], 9);
    shape_case ln = {OP_LAYERNORM, {"f32[2,3,4]", "f32[4]", "f32[4]"}, {-1}, .f1 = 1e-5};
    id = build(&ln);
    assert_int_equal(g->nodes[id].attr.i[ATTR_AXIS], 2);
}

static const shape_case errors[] = {
    /* categorical: rows of logits draw [R, n]; a table is 1-D f32 */
    {OP_CATEGORICAL,
     {"f32[4,10]"},
     {OP_DRAW_LOGITS},
     .n_list = 2,
     .list = {5, 3},
     .want = "categorical: f32[4,10] rows cannot draw i32[5,3]"},
    {OP_CATEGORICAL,
     {"f32[4,10]"},
     {OP_DRAW_WEIGHTS},
     .n_list = 1,
     .list = {3},
     .want = "categorical: its input must be f32[K] with K >= 1, got f32[4,10]"},
    {OP_CATEGORICAL,
     {"i32[10]"},
     {OP_DRAW_WEIGHTS},
     .n_list = 1,
     .list = {3},
     .want = "categorical: its input must be f32, got i32[10]"},
    {OP_MATMUL,
     {"f32[64,784]", "f32[256,10]"},
     .want = "f32[64,784] @ f32[256,10]: inner dimensions 784 and 256 differ"},
    {OP_MATMUL,
     {"f32[64,784]", "f32[784]"},
     .want = "matmul: operands must have rank >= 2 ([..., M, K] @ [..., K, N]), got f32[64,784] "
             "@ f32[784]"},
    {OP_MATMUL,
     {"f32[4,3,5,6]", "f32[2,6,7]"},
     .want = "f32[4,3,5,6] @ f32[2,6,7]: batch dimensions [4,3] and [2] do not broadcast"},
    {OP_MATMUL,
     {"f32[2,5,6]", "f32[2,5,7]"},
     .want = "f32[2,5,6] @ f32[2,5,7]: inner dimensions 6 and 5 differ"},
    {OP_MATMUL_BIAS,
     {"f32[2,5,6]", "f32[2,6,7]", "f32[7]"},
     .want = "matmul_bias: batched a needs a 2-D b and a not transposed"},
    {OP_MATMUL_BIAS,
     {"f32[2,6,5]", "f32[6,7]", "f32[7]"},
     {1, 0},
     .want = "matmul_bias: batched a needs a 2-D b and a not transposed"},
    {OP_MATMUL_BIAS,
     {"f32[2,5,6]", "f32[6,7]", "f32[5]"},
     .want = "matmul_bias: bias must be f32[7], got f32[5]"},
    {OP_SOFTMAX,
     {"f32[4,5,6]"},
     {OP_MASK_CAUSAL},
     .want = "softmax: mask=\"causal\" needs scores [..., T, T], square in the last two axes, "
             "got f32[4,5,6]"},
    {OP_SOFTMAX,
     {"f32[5]"},
     {OP_MASK_CAUSAL},
     .want = "softmax: mask=\"causal\" needs scores [..., T, T], square in the last two axes, "
             "got f32[5]"},
    {OP_LAYERNORM,
     {"f32[4,16]", "f32[8]", "f32[16]"},
     {-1},
     .f1 = 1e-5,
     .want = "layernorm: gain must be f32[16] (the last axis of f32[4,16]), got f32[8]"},
    {OP_LAYERNORM,
     {"f32[4,16]", "f32[16]", "f32[1,16]"},
     {-1},
     .f1 = 1e-5,
     .want = "layernorm: bias must be f32[16] (the last axis of f32[4,16]), got f32[1,16]"},
    {OP_LAYERNORM,
     {"f32[4,16]", "f32[16]", "f32[16]"},
     {0},
     .f1 = 1e-5,
     .want = "layernorm: only the last axis can be normalised (axis=-1), got axis 0 of f32[4,16]"},
    {OP_LAYERNORM,
     {"f32[4,16]", "f32[16]", "f32[16]"},
     {2},
     .want = "layernorm: axis 2 out of range for f32[4,16]"},
    {OP_LAYERNORM,
     {"i32[4,16]", "f32[16]", "f32[16]"},
     {-1},
     .f1 = 1e-5,
     .want = "layernorm: input must be f32, got i32[4,16]"},
    {OP_LAYERNORM,
     {"f32[4,16]", "f32[16]", "f32[16]"},
     {-1},
     .want = "layernorm: eps must be > 0, got 0"},
    {OP_BN_STATS,
     {"f32[8,3,5]"},
     {1},
     .want = "batchnorm_stats: input must be [N,C] or [N,C,H,W], got f32[8,3,5]"},
    {OP_BN_STATS,
     {"f32[8,3,5,5]"},
     {2},
     .want = "batchnorm_stats: the channels must be axis 1, got axis 2 of f32[8,3,5,5]"},
    {OP_BN_STATS, {"i32[8,3]"}, {1}, .want = "batchnorm_stats: input must be f32, got i32[8,3]"},
    {OP_BATCHNORM,
     {"f32[8,3,5,5]", "f32[4]", "f32[3]", "f32[2,3]"},
     {1},
     .f1 = 1e-5,
     .want = "batchnorm_apply: gain must be f32[3] (the channels of f32[8,3,5,5]), got f32[4]"},
    {OP_BATCHNORM,
     {"f32[8,3,5,5]", "f32[3]", "f32[3]", "f32[3,2]"},
     {1},
     .f1 = 1e-5,
     .want = "batchnorm_apply: stats must be f32[2,3] (the channels of f32[8,3,5,5]), got "
             "f32[3,2]"},
    {OP_BATCHNORM,
     {"f32[8,3]", "f32[3]", "f32[3]", "f32[2,3]"},
     {1},
     .want = "batchnorm_apply: eps must be > 0, got 0"},
    {OP_BN_GRAD,
     {"f32[8,3]", "f32[8,3]", "f32[3]", "f32[2,3]", "f32[3]"},
     {1},
     .f1 = 1e-5,
     .want = "batchnorm_grad: params must be f32[2,3] (the channels of f32[8,3]), got f32[3]"},
    {OP_BN_GRAD_PARAMS,
     {"f32[8,4]", "f32[8,3]", "f32[2,3]"},
     {1},
     .f1 = 1e-5,
     .want = "batchnorm_grad_params: gradient f32[8,4] does not match f32[8,3]"},
    /* with their relu flag (i3) the grads take y last, like x */
    {OP_BN_GRAD_PARAMS,
     {"f32[8,3]", "f32[8,3]", "f32[2,3]"},
     {1, 0, 0, 1},
     .f1 = 1e-5,
     .want = "batchnorm_grad_params: takes 4 inputs with its relu, got 3"},
    {OP_BN_GRAD_PARAMS,
     {"f32[8,3]", "f32[8,3]", "f32[2,3]", "f32[8,3]"},
     {1},
     .f1 = 1e-5,
     .want = "batchnorm_grad_params: takes 3 inputs, got 4"},
    {OP_BN_GRAD,
     {"f32[8,3]", "f32[8,3]", "f32[3]", "f32[2,3]", "f32[2,3]", "f32[8,4]"},
     {1, 0, 1, 1},
     .f1 = 1e-5,
     .want = "batchnorm_grad: the relu's y f32[8,4] does not match x f32[8,3]"},
    {OP_GELU, {"i32[3]"}, .want = "gelu: input must be f32, got i32[3]"},
    {OP_ASSIGN, {"var:f32[3]", "f32[4]"}, .want = "assign: f32[4] does not match variable f32[3]"},
    {OP_ASSIGN, {"var:f32[3]", "f32[3]"}, .f0 = 1, .want = "assign: decay=1 is outside [0, 1)"},
    {OP_ASSIGN,
     {"var:i32[3]", "i32[3]"},
     .f0 = 0.5,
     .want = "assign: a moving average needs f32, not i32[3]"},
    {OP_ADD,
     {"f32[64,10]", "f32[32,10]"},
     .want = "add: cannot broadcast f32[64,10] with f32[32,10]"},
    {OP_ADD, {"f32[64]", "i32[64]"}, .want = "add: dtype mismatch: f32[64] and i32[64]"},
    {OP_EQ, {"f32[3]", "i32[3]"}, .want = "equal: dtype mismatch: f32[3] and i32[3]"},
    {OP_EXP, {"i32[3]"}, .want = "exp: input must be f32, got i32[3]"},
    {OP_ALLREDUCE, {"f32[3]", "i32[2]"}, .want = "allreduce: input 1 is i32[2], expected f32"},
    {OP_RESHAPE,
     {"f32[64,784]"},
     .n_list = 2,
     .list = {64, 700},
     .want = "reshape: cannot reshape f32[64,784] (50176 elements) to [64,700] (44800 elements)"},
    {OP_RESHAPE,
     {"f32[64,784]"},
     .n_list = 2,
     .list = {-1, -1},
     .want = "reshape: bad dimension -1 in [-1,-1] (one -1 allowed)"},
    {OP_RESHAPE,
     {"f32[10]"},
     .n_list = 2,
     .list = {-1, 3},
     .want = "reshape: cannot reshape f32[10] (10 elements) to [-1,3] (3 elements)"},
    {OP_CONV2D,
     {"f32[64,784]", "f32[16,1,5,5]"},
     {1, 0},
     .want = "conv2d: input must be rank 4 (N,C,H,W), got f32[64,784]"},
    {OP_CONV2D_BIAS,
     {"f32[8,3,32,32]", "f32[16,3,5,5]", "f32[16]"},
     {1, 2},
     .want = "conv2d_bias: bias must be f32[1, 16, 1, 1], got f32[16]"},
    {OP_CONV2D,
     {"f32[8,3,32,32]", "f32[16,1,5,5]"},
     {1, 0},
     .want = "conv2d: input f32[8,3,32,32] has 3 channels but filter f32[16,1,5,5] expects 1 "
             "(inputs are [N, C, H, W] and filters [OC, C, KH, KW])"},
    {OP_SUM, {"f32[64,10]"}, {2, 0}, .want = "sum: axis 2 out of range for f32[64,10]"},
    {OP_SUM, {"i32[5]"}, {ALL, 0}, .want = "sum: input must be f32, got i32[5]"},
    {OP_ARGMAX, {"i32[5,2]"}, {1}, .want = "argmax: input must be f32, got i32[5,2]"},
    {OP_ARGMAX, {"f32[64,10]"}, {-3}, .want = "argmax: axis -3 out of range for f32[64,10]"},
    {OP_SOFTMAX_XENT,
     {"f32[64,10]", "f32[64]"},
     .want = "softmax_xent: labels must be i32[N], got f32[64]"},
    {OP_SOFTMAX_XENT,
     {"f32[64]", "i32[64]"},
     .want = "softmax_xent: logits must be f32[N,C], got f32[64]"},
    {OP_SOFTMAX_XENT,
     {"f32[64,10]", "i32[32]"},
     .want = "softmax_xent: logits f32[64,10] and labels i32[32] disagree on N"},
    {OP_MSE,
     {"f32[3]", "f32[4]"},
     .want = "mse: prediction f32[3] and target f32[4] must have the same type"},
    {OP_TRANSPOSE,
     {"f32[2,3]"},
     .n_list = 2,
     .list = {0, 0},
     .want = "transpose: perm [0,0] is not a permutation of the axes of f32[2,3]"},
    {OP_CONCAT,
     {"f32[2,3]", "f32[3,3]"},
     {1},
     .want = "concat: input 1 f32[3,3] does not match f32[2,3] along axis 1"},
    {OP_SLICE,
     {"f32[4,10]"},
     {1, 5, 11},
     .want = "slice: range [5, 11) is empty or out of bounds for axis 1 of f32[4,10]"},
    {OP_GATHER, {"f32[100,16]", "f32[4]"}, .want = "gather: ids must be i32, got f32[4]"},
    {OP_CAST, {"f32[3]"}, {7}, .want = "cast: unknown dtype 7"},
    {OP_ONE_HOT, {"i32[3]"}, {0}, .want = "one_hot: depth must be >= 1, got 0"},
    {OP_SUM_TO,
     {"f32[64,10]"},
     .n_list = 1,
     .list = {3},
     .want = "sum_to: cannot sum f32[64,10] to f32[3]"},
    {OP_MAXPOOL2D,
     {"f32[1,1,2,2]"},
     {3, 0},
     .want =
         "maxpool2d: window 3 is larger than the input f32[1,1,2,2] (padding=\"same\" pads it)"},
    {OP_AVGPOOL2D,
     {"f32[1,1,2,2]"},
     {5, 1, 1},
     .want = "avgpool2d: window 5 is larger than the padded input f32[1,1,2,2]"},
    {OP_MAXPOOL2D,
     {"f32[1,1,8,8]"},
     {2, 0, 2},
     .want = "maxpool2d: padding 2 must be \"same\", \"valid\" or in [0, 1] (at most half the "
             "window 2)"},
    {OP_DROPOUT, {"f32[3]"}, {0, 1}, 1.5, .want = "dropout: rate must be in [0, 1), got 1.5"},
    {OP_LRN,
     {"f32[6]"},
     {2},
     .f1 = 1,
     .want = "lrn: input must be [N, C, ...] (channels on axis 1), got f32[6]"},
    {OP_LRN, {"f32[2,6]"}, {-1}, .f1 = 1, .want = "lrn: depth_radius must be >= 0, got -1"},
    {OP_ROPE,
     {"f32[2,3,5]"},
     .f0 = 10000,
     .want = "rope: input must be [..., T, D] with D even (it turns the pairs (i, i + D/2)), "
             "got f32[2,3,5]"},
    {OP_ROPE,
     {"f32[6]"},
     .f0 = 10000,
     .want = "rope: input must be [..., T, D] with D even (it turns the pairs (i, i + D/2)), "
             "got f32[6]"},
    {OP_ROPE, {"f32[4,6]"}, .f0 = 0, .want = "rope: base must be > 0, got 0"},
    {OP_LSTM_CELL,
     {"f32[3,10]", "f32[3,5]"},
     .want = "lstm_cell: gates must be [B, 4H] (i, f, g, o: concat([x, h], axis=1) @ w + b), got "
             "f32[3,10]"},
    {OP_LSTM_CELL,
     {"f32[3,20]", "f32[3,5]"},
     .want = "lstm_cell: state must be [B, 2H] = [3, 10] (h, then c) for gates f32[3,20], got "
             "f32[3,5]"},
    {OP_LSTM_CELL,
     {"f32[3,20]", "f32[2,10]"},
     .want = "lstm_cell: state must be [B, 2H] = [3, 10] (h, then c) for gates f32[3,20], got "
             "f32[2,10]"},
    {OP_LSTM_CELL,
     {"f32[3,20]", "i32[3,10]"},
     .want = "lstm_cell: state must be f32, got i32[3,10]"},
    {OP_GRU_CELL,
     {"f32[3,15]", "f32[3,12]", "f32[3,5]"},
     .want = "gru_cell: gates must be two [B, 3H] (r, z, n: x @ w_ih + b_ih, then h @ w_hh + "
             "b_hh), got f32[3,15] and f32[3,12]"},
    {OP_GRU_CELL,
     {"f32[3,15]", "f32[3,15]", "f32[3,15]"},
     .want = "gru_cell: state must be [B, H] = [3, 5] for gates f32[3,15], got f32[3,15]"},
    {OP_GRU_CELL_GRAD,
     {"f32[3,15]", "f32[3,15]", "f32[3,15]", "f32[3,5]"},
     .want = "gru_cell_grad: gradient f32[3,15] does not match f32[3,5]"},
    {OP_LSTM_CELL_GRAD,
     {"f32[3,20]", "f32[3,20]", "f32[3,10]"},
     .want = "lstm_cell_grad: gradient f32[3,20] does not match f32[3,10]"},
    {OP_LRN, {"f32[2,6]"}, {2}, .f1 = 0, .want = "lrn: bias must be > 0, got 0"},
    {OP_LRN, {"f32[2,6]"}, {2}, .f1 = 1, .f2 = -1, .want = "lrn: alpha must be >= 0, got -1"},
    {OP_LRN_GRAD,
     {"f32[2,5]", "f32[2,6]"},
     {2},
     .f1 = 1,
     .want = "lrn_grad: gradient f32[2,5] does not match f32[2,6]"},
    {OP_APPLY_SGD,
     {"f32[3]", "f32[3]", "f32[]", "f32[]"},
     .want = "apply_sgd: first input must be a variable, got input"},
    {OP_APPLY_SGD,
     {"var:f32[3]", "f32[4]", "f32[]", "f32[]"},
     .want = "apply_sgd: input 1 f32[4] does not match variable f32[3]"},
    {OP_APPLY_SGD,
     {"var:f32[3]", "f32[3]", "f32[3]", "f32[]"},
     .want = "apply_sgd: lr (input 2) must be f32[], got f32[3]"},
    {OP_APPLY_ADAM,
     {"var:f32[3]", "f32[3]", "var:f32[3]", "var:f32[3]", "var:f32[]", "f32[]", "i32[]"},
     .want = "apply_adam: gscale (input 6) must be f32[], got i32[]"},
    {OP_LR_SCHEDULE, {"f32[2]"}, .want = "lr_schedule: the step must be f32[], got f32[2]"},
    {OP_CLIP_SCALE,
     {"f32[3]", "i32[2]"},
     .want = "clip_scale: every gradient must be f32, got i32[2]"},
    {OP_APPLY_SGD_MATMUL,
     {"var:f32[784,10]", "f32[64,784]", "f32[64,10]"},
     .want = "f32[64,784] @ f32[64,10]: inner dimensions 784 and 64 differ"},
    {OP_APPLY_SGD_MATMUL,
     {"var:f32[10,784]", "f32[64,784]", "f32[64,10]"},
     {0, 1, 0},
     .want = "apply_sgd_matmul: product f32[784,10] does not match variable f32[10,784]"},
    {OP_NEG, {"f32[3]", "f32[3]"}, .want = "neg: expects 1 input, got 2"},
    /* sizes: every result is checked after its rule, and no rule's own
     * arithmetic on dims or attributes from the source may overflow */
    {OP_ADD,
     {"f32[1048576,1]", "f32[1,1048576]"},
     .want = "add: f32[1048576,1] and f32[1,1048576] give f32[1048576,1048576], too large: "
             "4398046511104 bytes, above the limit of 1099511627776 bytes (1 TiB) per tensor"},
    {OP_MATMUL,
     {"f32[2147483647,2]", "f32[2,2147483647]"},
     .want = "matmul: f32[2147483647,2] and f32[2,2147483647] give f32[2147483647,2147483647], "
             "too large: more than 2^63 bytes, above the limit of 1099511627776 bytes (1 TiB) per "
             "tensor"},
    {OP_CONCAT,
     {"f32[2000000000]", "f32[2000000000]"},
     {0},
     .want = "concat: f32[2000000000] and f32[2000000000] give f32[4000000000], too large: "
             "dimension 0 is 4000000000, above the limit of 2147483647"},
    {OP_RESHAPE,
     {"f32[4]"},
     .n_list = 2,
     .list = {INT64_MAX, 4},
     .want = "reshape: cannot reshape f32[4] to [9223372036854775807,4], too large: dimension 0 "
             "is 9223372036854775807, above the limit of 2147483647"},
    {OP_RESHAPE,
     {"f32[4]"},
     .n_list = 3,
     .list = {2147483647, 2147483647, 2147483647},
     .want = "reshape: cannot reshape f32[4] to [2147483647,2147483647,2147483647], too large: "
             "more than 2^63 bytes, above the limit of 1099511627776 bytes (1 TiB) per tensor"},
    {OP_RESHAPE,
     {"f32[2147483647,4]"},
     .n_list = 1,
     .list = {-1},
     .want = "reshape: f32[2147483647,4] gives f32[8589934588], too large: dimension 0 is "
             "8589934588, above the limit of 2147483647"},
    {OP_ONE_HOT,
     {"i32[1000]"},
     {INT64_MAX},
     .want = "one_hot: i32[1000] gives f32[1000,9223372036854775807], too large: dimension 1 is "
             "9223372036854775807, above the limit of 2147483647"},
    {OP_GATHER,
     {"f32[10,1048576]", "i32[1048576]"},
     .want = "gather: f32[10,1048576] and i32[1048576] give f32[1048576,1048576], too large: "
             "4398046511104 bytes, above the limit of 1099511627776 bytes (1 TiB) per tensor"},
    {OP_CONV2D,
     {"f32[1,4096,4096,4096]", "f32[1,4096,4096,1]"},
     {1, 2048},
     .want = "conv2d: f32[1,4096,4096,4096] with filter f32[1,4096,4096,1] needs an im2col "
             "buffer f32[16777216,33562624], too large: 2252349569499136 bytes, above the limit "
             "of 1099511627776 bytes (1 TiB) per tensor"},
    {OP_CONV2D, /* the kernel hands C*KH*KW to BLAS as an int */
     {"f32[1,2048,2048,1024]", "f32[1,2048,2048,1024]"},
     {1, 0},
     .want = "conv2d: f32[1,2048,2048,1024] with filter f32[1,2048,2048,1024] needs an im2col "
             "buffer f32[4294967296,1], too large: dimension 0 is 4294967296, above the limit of "
             "2147483647"},
    {OP_CONV2D, /* found by fuzz_compile: OH * OW overflowed before the output was checked */
     {"f32[1,1,4,4]", "f32[1,1,2,2]"},
     {1, 2147483647},
     .want = "conv2d: f32[1,1,4,4] and f32[1,1,2,2] give f32[1,1,4294967297,4294967297], too "
             "large: dimension 2 is 4294967297, above the limit of 2147483647"},
    {OP_CONV2D,
     {"f32[1,1,4,4]", "f32[1,1,2,2]"},
     {1, INT64_MAX},
     .want = "conv2d: need stride in [1, 2147483647] and padding in [0, 2147483647], got 1 and "
             "9223372036854775807"},
    {OP_SUM,
     {"f32[4,4]"},
     {INT64_MIN, 0},
     .want = "sum: axis -9223372036854775808 out of range for f32[4,4]"},
    {OP_SLICE,
     {"f32[4,10]"},
     {1, INT64_MIN, 2},
     .want = "slice: range [-9223372036854775808, 2) is empty or out of bounds for axis 1 of "
             "f32[4,10]"},
    {OP_SLICE,
     {"f32[4,10]"},
     {1, 0, INT64_MIN},
     .want = "slice: range [0, -9223372036854775808) is empty or out of bounds for axis 1 of "
             "f32[4,10]"},
    {OP_TRANSPOSE,
     {"f32[2,3]"},
     .n_list = 2,
     .list = {INT64_MIN, 0},
     .want = "transpose: perm [-9223372036854775808,0] is not a permutation of the axes of "
             "f32[2,3]"},
    {OP_APPLY_SGD_ROWS,
     {"var:f32[6,2147483647]", "f32[3,4]", "i32[2147483647,128]", "f32[]", "f32[]"},
     .want = "apply_sgd_rows: rows f32[3,4] and ids i32[2147483647,128] do not fit variable "
             "f32[6,2147483647]"},
    {OP_APPLY_MOMENTUM_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,5]", "f32[]", "f32[]"},
     .want = "apply_momentum_rows: input 3 f32[6,5] does not match variable f32[6,4]"},
    {OP_APPLY_ADAM_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "var:f32[6,4]", "f32[2]", "f32[]",
      "f32[]"},
     .want = "apply_adam_rows: step (input 5) must be f32[], got f32[2]"},
    {OP_APPLY_RMSPROP, /* m != 0 wants its momentum slot */
     {"var:f32[3]", "f32[3]", "var:f32[3]", "f32[]", "f32[]"},
     .f2 = 0.9,
     .want = "apply_rmsprop: takes 6 inputs with m=0.9, centered=0, got 5"},
    {OP_APPLY_RMSPROP_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "f32[]", "f32[]"},
     {1},
     .want = "apply_rmsprop_rows: takes 7 inputs with m=0, centered=1, got 6"},
    {OP_APPLY_ADAGRAD,
     {"var:f32[3]", "f32[3]", "var:f32[4]", "f32[]", "f32[]"},
     .want = "apply_adagrad: input 2 f32[4] does not match variable f32[3]"},
    {OP_APPLY_ADAGRAD_ROWS,
     {"var:f32[6,4]", "f32[3,5]", "i32[3]", "var:f32[6,4]", "f32[]", "f32[]"},
     .want = "apply_adagrad_rows: rows f32[3,5] and ids i32[3] do not fit variable f32[6,4]"},
    {OP_APPLY_ADADELTA_ROWS,
     {"var:f32[6,4]", "f32[3,4]", "i32[3]", "var:f32[6,4]", "var:f32[6,4]", "f32[2]", "f32[]"},
     .want = "apply_adadelta_rows: lr (input 5) must be f32[], got f32[2]"},
    {OP_ROWS_SUM, {"f32[3,4]", "i32[2]"}, .want = "rows_sum: rows f32[3,4] do not fit ids i32[2]"},
};

static char *printed(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    diag_print(&diags, f);
    fclose(f);
    return buf;
}

static void test_errors_have_exact_text(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(errors) / sizeof(errors[0]); k++) {
        diag_free(&diags);
        diag_init(&diags);
        int n0 = g->n_nodes;
        assert_int_equal(build(&errors[k]), -1);
        assert_int_equal(diags.n_errors, 1);
        assert_string_equal(diags.v[0].msg, errors[k].want);
        char *out = printed();
        char want[512];
        snprintf(want, sizeof(want), "t.graph:1:9: error: %s", errors[k].want);
        if (!strstr(out, want)) print_error("printed: %s\nwanted: %s\n", out, want);
        assert_non_null(strstr(out, want));
        free(out);
        for (int n = n0; n < g->n_nodes; n++) /* no live node of the failed op */
            assert_true(g->nodes[n].op != errors[k].op || g->nodes[n].dead);
    }
}

/* Every op of OPS_LIST has its entry in ops_table (ops.c): a source
 * (OPF_SOURCE), or an op with a shape rule.  The table has no count to
 * bump; an op added to OPS_LIST without its entry is a zero row, caught
 * here. */
static void test_every_op_has_a_registry_entry(void **state)
{
    (void)state;
    int missing = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        if (ops_has(op, OPF_SOURCE) || ops_table[op].shape) continue;
        print_error("%s has no entry in ops_table (compiler/ops.c)\n", ops_name(op));
        missing++;
    }
    assert_int_equal(missing, 0);
}

/* Names come from OPS_LIST; each is set and no two ops share one (a
 * lookup by name would find only the first). */
static void test_registry_names_are_unique(void **state)
{
    (void)state;
    for (int op = 0; op < OP_COUNT; op++) {
        assert_non_null(ops_name(op));
        assert_true(ops_name(op)[0] != 0);
        for (int other = 0; other < op; other++)
            if (strcmp(ops_name(op), ops_name(other)) == 0) fail_msg("'%s' twice", ops_name(op));
    }
}

static void test_lookup_finds_public_ops_only(void **state)
{
    (void)state;
    static const char *pub[] = {
        "matmul",      "add",           "sub",         "mul",          "div",           "neg",
        "exp",         "log",           "sqrt",        "relu",         "sigmoid",       "tanh",
        "identity",    "softmax",       "log_softmax", "softmax_xent", "mse",           "sum",
        "mean",        "max",           "argmax",      "reshape",      "transpose",     "concat",
        "slice",       "gather",        "cast",        "one_hot",      "conv2d",        "maxpool2d",
        "avgpool2d",   "dropout",       "equal",       "not_equal",    "less",          "greater",
        "less_equal",  "greater_equal", "layernorm",   "gelu",         "stop_gradient", "maximum",
        "minimum",     "pow",           "abs",         "sin",          "cos",           "softplus",
        "log_sigmoid", "silu",          "elu",         "where",        "rmsnorm",       "lrn",
        "rope",        "lstm_cell",     "gru_cell"};
    int n_pub = 0;
    for (size_t k = 0; k < sizeof(pub) / sizeof(pub[0]); k++) {
        int op = ops_lookup(pub[k]);
        assert_true(op >= 0);
        assert_string_equal(ops_name(op), pub[k]);
    }
    for (int op = 0; op < OP_COUNT; op++) n_pub += ops_has(op, OPF_PUBLIC);
    assert_int_equal(n_pub, (int)(sizeof(pub) / sizeof(pub[0])));
    static const char *hidden[] = {
        "const",     "input",      "data",           "variable",
        "broadcast", "sum_to",     "relu_grad",      "no_grad",
        "apply_sgd", "assign_add", "group",          "matmul_bias",
        "bogus",     "",           "layernorm_grad", "layernorm_grad_params",
        "gelu_grad"};
    for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++)
        assert_int_equal(ops_lookup(hidden[k]), -1);
    static const char *batchnorm[] = {"batchnorm_stats", "batchnorm_apply", "batchnorm_grad_params",
                                      "batchnorm_grad"}; /* the language's batchnorm builds them */
    for (size_t k = 0; k < sizeof(batchnorm) / sizeof(batchnorm[0]); k++)
        assert_int_equal(ops_lookup(batchnorm[k]), -1);
    assert_int_equal(ops_lookup(NULL), -1);
}

static void test_language_attribute_names_and_defaults(void **state)
{
    (void)state;
    const op_attr *a = ops_table[OP_MATMUL].attrs;
    assert_string_equal(a[0].name, "transpose_a");
    assert_string_equal(a[1].name, "transpose_b");
    a = ops_table[OP_SUM].attrs;
    assert_string_equal(a[0].name, "axis");
    assert_true(a[0].def == OP_AXIS_ALL);
    assert_string_equal(a[1].name, "keepdims");
    assert_true(ops_table[OP_ARGMAX].attrs[0].def == -1);
    assert_int_equal(ops_table[OP_RESHAPE].attrs[0].kind, ATTR_LIST);
    assert_true(ops_table[OP_RESHAPE].attrs[0].def !=
                ops_table[OP_RESHAPE].attrs[0].def); /* required */
    assert_int_equal(ops_table[OP_CAST].attrs[0].kind, ATTR_DTYPE);
    a = ops_table[OP_SOFTMAX].attrs;
    assert_string_equal(a[0].name, "mask");
    assert_int_equal(a[0].kind, ATTR_CHOICE);
    assert_true(a[0].def == OP_MASK_NONE);
    assert_string_equal(a[0].choices[OP_MASK_NONE], "none");
    assert_string_equal(a[0].choices[OP_MASK_CAUSAL], "causal");
    assert_null(a[0].choices[2]);
    a = ops_table[OP_LAYERNORM].attrs;
    assert_string_equal(a[0].name, "axis");
    assert_true(a[0].def == -1);
    assert_string_equal(a[1].name, "eps");
    assert_true(a[1].def == 1e-5);
    assert_true(ops_has(OP_GELU, OPF_ELEMENTWISE));
    assert_string_equal(ops_table[OP_CONV2D].attrs[1].name, "padding");
    assert_true(ops_table[OP_CONV2D].attrs[0].def == 1);
    assert_string_equal(ops_table[OP_DROPOUT].attrs[0].name, "rate");
    assert_int_equal(ops_table[OP_DROPOUT].attrs[0].kind, ATTR_FLOAT);
    assert_true(ops_table[OP_DROPOUT].attrs[1].def == -1); /* training: per target */
    assert_string_equal(ops_table[OP_APPLY_ADAM].attrs[5].name, "locking");
    assert_int_equal(ops_table[OP_CONCAT].arity, -1);
    assert_true(ops_has(OP_ADD, OPF_ELEMENTWISE));
    assert_false(ops_has(OP_MATMUL, OPF_ELEMENTWISE));
}

static void test_scratch_sizes_for_convolution(void **state)
{
    (void)state;
    shape_case c = {OP_CONV2D, {"f32[8,3,32,32]", "f32[16,3,5,5]"}, {2, 0}, .want = NULL};
    int id = build(&c); /* out [8,16,14,14] */
    /* im2col of 3 images a GEMM (588 columns, conv_algo.h), with room for
     * their 16 output rows */
    const int chunk = (3 * 5 * 5 + 16) * 3 * 14 * 14 * 4;
    assert_int_equal(ops_table[OP_CONV2D].scratch(g, id), chunk);
    shape_case cb = {
        OP_CONV2D_BIAS, {"f32[8,3,32,32]", "f32[16,3,5,5]", "f32[1,16,1,1]"}, {2, 0}, .want = NULL};
    id = build(&cb);
    assert_int_equal(ops_table[OP_CONV2D_BIAS].scratch(g, id), chunk);
    shape_case gx = {OP_CONV2D_GRAD_X,
                     {"f32[8,16,14,14]", "f32[16,3,5,5]"},
                     {2, 0},
                     .n_list = 4,
                     .list = {8, 3, 32, 32}};
    id = build(&gx);
    assert_int_equal(ops_table[OP_CONV2D_GRAD_X].scratch(g, id), chunk);
    shape_case gw = {OP_CONV2D_GRAD_W,
                     {"f32[8,16,14,14]", "f32[8,3,32,32]"},
                     {2, 0},
                     .n_list = 4,
                     .list = {16, 3, 5, 5}};
    id = build(&gw);
    assert_int_equal(ops_table[OP_CONV2D_GRAD_W].scratch(g, id), chunk + 16 * 3 * 5 * 5 * 4);
    /* layernorm_grad_params: 2C partial sums per task, or 2 floats a row */
    shape_case ln = {OP_LAYERNORM_GRAD_PARAMS, {"f32[4,8,16]", "f32[4,8,16]"}, {2}, .f1 = 1e-5};
    id = build(&ln);
    assert_int_equal(ops_table[OP_LAYERNORM_GRAD_PARAMS].scratch(g, id), (2 * 16 + 2 * 32) * 4);
    assert_null(ops_table[OP_MATMUL].scratch);
    assert_null(ops_table[OP_ADD].scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_valid_case_gets_expected_type, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_every_shaped_op_has_a_valid_case, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_attributes_are_normalised, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_errors_have_exact_text, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_every_op_has_a_registry_entry, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_registry_names_are_unique, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_lookup_finds_public_ops_only, setup, irfx_teardown),
        cmocka_unit_test_setup_teardown(test_language_attribute_names_and_defaults, setup,
                                        irfx_teardown),
        cmocka_unit_test_setup_teardown(test_scratch_sizes_for_convolution, setup, irfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
