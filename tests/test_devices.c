/* test_devices.c - an asynchronous device (the simulated GPU, or CUDA)
 * against the CPU, op by op, in one table, as ggml's test-backend-ops does:
 *
 *  - every op with a kernel on the device under test runs on random inputs
 *    of shapes valid for it (letters in the table's shapes are drawn afresh
 *    for each repetition) once with cpu_kernels[op] on host buffers and once
 *    with the device's kernel through its vtable: alloc, to_device,
 *    queue_new, launch with device buffers and .queue, queue_sync, to_host.
 *    The outputs, and the variables an update writes, must agree within the
 *    op's tolerance (op_tolerance below says why each is what it is), and
 *    every other input must come back untouched;
 *  - ids and labels out of range are faults the device reports from
 *    queue_sync, naming the failing call, as the CPU's kernels do;
 *  - gradients of programs placed @gpu:0 (compiled with
 *    gr_compile_options.devices) match central finite differences and the
 *    CPU's gradients, through the public API.
 *
 * Which device:
 *   test_devices          the simulated GPU.  It runs the CPU's kernels, so
 *                         the comparison proves the harness itself (buffer
 *                         sizes, shapes, attributes, the queue and copies);
 *                         always runs.
 *   test_devices cuda     the CUDA device (CTest gpu_devices, label gpu).
 *   test_devices --gpu    only says whether a CUDA GPU is usable: exit 0.
 *                         The other gpu tests run it first.
 * Without a usable GPU `cuda` and `--gpu` exit 77, which CTest reports as a
 * skip (SKIP_RETURN_CODE, tests/cuda.cmake); with GR_REQUIRE_GPU=1 in the
 * environment they exit 1 instead, so a GPU machine that lost its GPU
 * fails.  GR_TEST_SEED=N changes the random shapes and values;
 * GR_TEST_FILTER and GR_TEST_SKIP (cmocka patterns) choose the tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/ir.h"
#include "devices/cpu/cpu.h"
#include "devices/sim/sim.h"
#include "graphrun.h"
#ifdef GR_HAVE_CUDA
#include "devices/cuda/cuda.h"
#endif

#define SKIP_CODE 77
#define MAX_IN    40 /* clip_scale: more gradients than its CUDA kernel takes at once */
#define REPS      3  /* draws of the letters for a case that has some */

/* ---- the device under test ---- */

typedef struct dut {
    const char *name;    /* argv[1] */
    const char *devices; /* gr_compile_options.devices that make gpu:0 this device */
    device_obj *(*open)(void);
} dut;

static device_obj *open_sim(void)
{
    device_obj *d = sim_device_new(IR_DEV(DEV_GPU, 0));
    if (d) sim_set_delay_us(d, 0);
    return d;
}

#ifdef GR_HAVE_CUDA
static device_obj *open_cuda(void)
{
    return cuda_device_new(IR_DEV(DEV_GPU, 0));
}
#endif

static const dut duts[] = {
    {"sim", "cpu:0,sim:0", open_sim},
#ifdef GR_HAVE_CUDA
    {"cuda", "cpu:0,gpu:0", open_cuda},
#endif
};

static const dut *the;
static device_obj *dev;
static dev_queue *queue;
static src_file *src;
static const kernel_fn *table; /* the kernels launched; NULL: the device's */
static float lr_factor;        /* updates get kern_args.lr_scale = this (0: none) */

/* Why there is no usable CUDA GPU, or NULL when there is one. */
static const char *no_gpu_reason(void)
{
#ifdef GR_HAVE_CUDA
    return cuda_device_count() > 0 ? NULL : "no usable CUDA GPU (cudaGetDeviceCount found none)";
#else
    return "this build has no CUDA device (GR_CUDA=OFF, or nvcc was not found)";
#endif
}

/* 77 (CTest: skipped), or 1 when GR_REQUIRE_GPU=1 says a GPU must be here. */
static int no_gpu(const char *why)
{
    const char *req = getenv("GR_REQUIRE_GPU");
    if (req && strcmp(req, "1") == 0) {
        fprintf(stderr, "test_devices: GR_REQUIRE_GPU=1 but %s\n", why);
        return 1;
    }
    printf("test_devices: %s: skipped\n", why);
    return SKIP_CODE;
}

/* ---- random values ---- */

static uint64_t rng = 0x853c49e6748fea9bull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() % 1000001) / 1e6f;
}

/* ---- the table ---- */

/* How an input is filled. */
typedef enum fill {
    ANY,      /* f32 in [-2, 2]; i32 in [-3, 3] (i32 div sees zeros) */
    POS,      /* f32 in [0.5, 2.5]: log, sqrt, denominators, adam's v */
    IDS,      /* i32 in [0, limit): the op's table rows, classes or depth */
    TIES,     /* a few values, so comparisons see equal operands */
    DISTINCT, /* no two equal: max, argmax and pooling have one answer */
    STEP,     /* 3: adam's step counter */
    LR,       /* f32 in [0.001, 0.1]: a learning rate */
    MAXOF     /* max_grad's y: max(x) over the axis, keepdims */
} fill;

/* One call.  Types read as they print, with letters a..h standing for
 * sizes drawn per repetition ("f32[a,b]", "i32[]"); "var:" makes the input
 * a variable (what updates write).  list: the attribute list, also with
 * letters ("a,b,8,8"). */
typedef struct dev_case {
    op_kind op;
    const char *in[MAX_IN];
    int64_t i[IR_MAX_ATTRS];
    double f[IR_MAX_ATTRS];
    const char *list;
    fill fills[MAX_IN];
} dev_case;

#define ALL OP_AXIS_ALL

/* The broadcasting patterns of every binary op: same shape, scalar either
 * side, a row, an outer product, a channel of NCHW, i32, and one big
 * enough for many blocks.  fb fills the second operand. */
// clang-format off
#define BINARY(o, fa, fb)                                                                          \
    {.op = o, {"f32[a,b]", "f32[a,b]"}, .fills = {fa, fb}},                                        \
    {.op = o, {"f32[a,b]", "f32[]"}, .fills = {fa, fb}},                                           \
    {.op = o, {"f32[]", "f32[a,b]"}, .fills = {fa, fb}},                                           \
    {.op = o, {"f32[a,b]", "f32[b]"}, .fills = {fa, fb}},                                          \
    {.op = o, {"f32[a,1]", "f32[1,b]"}, .fills = {fa, fb}},                                        \
    {.op = o, {"f32[a,b,c,d]", "f32[1,b,1,1]"}, .fills = {fa, fb}},                                \
    {.op = o, {"f32[c,1,d]", "f32[a,c,1,1]"}, .fills = {fa, fb}},                                  \
    {.op = o, {"i32[a,b]", "i32[b]"}, .fills = {fa == POS ? ANY : fa, fb == POS ? ANY : fb}},      \
    {.op = o, {"f32[301,1031]", "f32[1031]"}, .fills = {fa, fb}}

/* The four batch normalisation ops on x f32[X] of C channels (training
 * statistics for batchnorm_grad). */
#define BN_ROWS(X, C)                                                                              \
    {.op = OP_BN_STATS, {"f32[" X "]"}, {1}},                                                      \
    {.op = OP_BATCHNORM, {"f32[" X "]", "f32[" C "]", "f32[" C "]", "f32[2," C "]"}, {1},          \
     {0, 1e-5}, .fills = {ANY, ANY, ANY, POS}},                                                    \
    {.op = OP_BN_GRAD_PARAMS, {"f32[" X "]", "f32[" X "]", "f32[2," C "]"}, {1}, {0, 1e-5},        \
     .fills = {ANY, ANY, POS}},                                                                    \
    {.op = OP_BN_GRAD, {"f32[" X "]", "f32[" X "]", "f32[" C "]", "f32[2," C "]", "f32[2," C "]"}, \
     {1, 0, 1}, {0, 1e-5}, .fills = {ANY, ANY, ANY, POS, ANY}}

/* The same with their relu flags (i3): batchnorm_apply's relu after it, the
 * grads' y last (dy passed where y > 0). */
#define BN_RELU_ROWS(X, C)                                                                         \
    {.op = OP_BATCHNORM, {"f32[" X "]", "f32[" C "]", "f32[" C "]", "f32[2," C "]"}, {1, 0, 0, 1}, \
     {0, 1e-5}, .fills = {ANY, ANY, ANY, POS}},                                                    \
    {.op = OP_BN_GRAD_PARAMS, {"f32[" X "]", "f32[" X "]", "f32[2," C "]", "f32[" X "]"},          \
     {1, 0, 0, 1}, {0, 1e-5}, .fills = {ANY, ANY, POS, ANY}},                                      \
    {.op = OP_BN_GRAD,                                                                             \
     {"f32[" X "]", "f32[" X "]", "f32[" C "]", "f32[2," C "]", "f32[2," C "]", "f32[" X "]"},     \
     {1, 0, 1, 1}, {0, 1e-5}, .fills = {ANY, ANY, ANY, POS, ANY, ANY}}

#define UNARY(o, fx)                                                                               \
    {.op = o, {"f32[a,b,c]"}, .fills = {fx}},                                                      \
    {.op = o, {"f32[1001,257]"}, .fills = {fx}}

/* Every reduction's axes, with and without keepdims. */
#define REDUCE(o, fx)                                                                              \
    {.op = o, {"f32[a,b,c]"}, {0, 0}, .fills = {fx}},                                              \
    {.op = o, {"f32[a,b,c]"}, {1, 0}, .fills = {fx}},                                              \
    {.op = o, {"f32[a,b,c]"}, {2, 0}, .fills = {fx}},                                              \
    {.op = o, {"f32[a,b,c]"}, {ALL, 0}, .fills = {fx}},                                            \
    {.op = o, {"f32[a,b,c]"}, {0, 1}, .fills = {fx}},                                              \
    {.op = o, {"f32[a,b,c]"}, {2, 1}, .fills = {fx}},                                              \
    {.op = o, {"f32[a,b,c]"}, {ALL, 1}, .fills = {fx}},                                            \
    {.op = o, {"f32[513,1031]"}, {ALL, 0}, .fills = {fx}},                                         \
    {.op = o, {"f32[513,1031]"}, {0, 0}, .fills = {fx}},                                           \
    {.op = o, {"f32[3,70001]"}, {1, 0}, .fills = {fx}}
// clang-format on

static const dev_case cases[] = {
    /* linear algebra */
    {.op = OP_MATMUL, {"f32[a,b]", "f32[b,c]"}},
    {.op = OP_MATMUL, {"f32[b,a]", "f32[b,c]"}, {1, 0}},
    {.op = OP_MATMUL, {"f32[a,b]", "f32[c,b]"}, {0, 1}},
    {.op = OP_MATMUL, {"f32[b,a]", "f32[c,b]"}, {1, 1}},
    {.op = OP_MATMUL, {"f32[129,257]", "f32[257,67]"}},
    {.op = OP_MATMUL, {"f32[300,64]", "f32[10,300]"}, {1, 1}},
    /* batch axes: a shared b (one GEMM of the rows), both batched, broadcast
     * either side, transposed */
    {.op = OP_MATMUL, {"f32[d,a,b]", "f32[b,c]"}},
    {.op = OP_MATMUL, {"f32[d,b,a]", "f32[b,c]"}, {1, 0}},
    {.op = OP_MATMUL, {"f32[d,a,b]", "f32[d,b,c]"}},
    {.op = OP_MATMUL, {"f32[b,a]", "f32[d,c,b]"}, {1, 1}},
    {.op = OP_MATMUL, {"f32[e,1,a,b]", "f32[d,c,b]"}, {0, 1}},
    {.op = OP_MATMUL, {"f32[4,8,64,32]", "f32[4,8,64,32]"}, {0, 1}},
    {.op = OP_MATMUL, {"f32[16,64,128]", "f32[128,384]"}},
    {.op = OP_MATMUL_BIAS, {"f32[a,b]", "f32[b,c]", "f32[c]"}},
    {.op = OP_MATMUL_BIAS, {"f32[b,a]", "f32[c,b]", "f32[c]"}, {1, 1, 1}},
    {.op = OP_MATMUL_BIAS, {"f32[64,784]", "f32[784,128]", "f32[128]"}, {0, 0, 1}},
    {.op = OP_MATMUL_BIAS, {"f32[784,64]", "f32[10,784]", "f32[10]"}, {1, 1, 0}},
    {.op = OP_MATMUL_BIAS, {"f32[4,a,b]", "f32[b,c]", "f32[c]"}, {0, 0, 1}},
    {.op = OP_MATMUL_BIAS, {"f32[3,2,64,128]", "f32[512,128]", "f32[512]"}, {0, 1, 0}},
    {.op = OP_APPLY_SGD_MATMUL, {"var:f32[a,c]", "f32[a,b]", "f32[b,c]"}, {0, 0, 0}, {0.25}},
    {.op = OP_APPLY_SGD_MATMUL, {"var:f32[b,c]", "f32[a,b]", "f32[a,c]"}, {0, 1, 0}, {0.25}},
    {.op = OP_APPLY_SGD_MATMUL, {"var:f32[a,c]", "f32[a,b]", "f32[c,b]"}, {0, 0, 1}, {0.25}},
    {.op = OP_APPLY_SGD_MATMUL, {"var:f32[b,c]", "f32[a,b]", "f32[c,a]"}, {0, 1, 1}, {0.25}},
    {.op = OP_APPLY_SGD_MATMUL,
     {"var:f32[784,128]", "f32[64,784]", "f32[64,128]"},
     {0, 1, 0},
     {0.05}},
    /* elementwise */
    BINARY(OP_ADD, ANY, ANY),
    BINARY(OP_SUB, ANY, ANY),
    BINARY(OP_MUL, ANY, ANY),
    BINARY(OP_DIV, ANY, POS),
    BINARY(OP_EQ, TIES, TIES),
    BINARY(OP_NE, TIES, TIES),
    BINARY(OP_LT, TIES, TIES),
    BINARY(OP_GT, TIES, TIES),
    BINARY(OP_LE, TIES, TIES),
    BINARY(OP_GE, TIES, TIES),
    UNARY(OP_NEG, ANY),
    UNARY(OP_EXP, ANY),
    UNARY(OP_LOG, POS),
    UNARY(OP_SQRT, POS),
    UNARY(OP_RELU, ANY),
    UNARY(OP_SIGMOID, ANY),
    UNARY(OP_TANH, ANY),
    UNARY(OP_IDENTITY, ANY),
    UNARY(OP_STOP_GRADIENT, ANY),
    {.op = OP_NEG, {"i32[a,b]"}},
    {.op = OP_IDENTITY, {"i32[a,b]"}},
    {.op = OP_RELU_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_RELU_GRAD, {"f32[1001,257]", "f32[1001,257]"}},
    {.op = OP_SIGMOID_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_SIGMOID_GRAD, {"f32[1001,257]", "f32[1001,257]"}},
    {.op = OP_TANH_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_TANH_GRAD, {"f32[1001,257]", "f32[1001,257]"}},
    UNARY(OP_GELU, ANY),
    BINARY(OP_MAXIMUM, TIES, TIES),
    BINARY(OP_MINIMUM, TIES, TIES),
    {.op = OP_POW, {"f32[a,b]", "f32[a,b]"}, .fills = {POS, ANY}},
    {.op = OP_POW, {"f32[a,b]", "f32[]"}, .fills = {POS, ANY}},
    {.op = OP_POW, {"f32[1001,257]", "f32[257]"}, .fills = {POS, ANY}},
    {.op = OP_WHERE, {"f32[a,b]", "f32[a,b]", "f32[a,b]"}, .fills = {TIES, ANY, ANY}},
    {.op = OP_WHERE,
     {"f32[1001,257]", "i32[1001,257]", "i32[1001,257]"},
     .fills = {TIES, ANY, ANY}},
    UNARY(OP_ABS, ANY),
    UNARY(OP_SIN, ANY),
    UNARY(OP_COS, ANY),
    UNARY(OP_SOFTPLUS, ANY),
    UNARY(OP_LOG_SIGMOID, ANY),
    UNARY(OP_SILU, ANY),
    UNARY(OP_ELU, ANY),
    {.op = OP_ABS_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_SOFTPLUS_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_LOG_SIGMOID_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_SILU_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_ELU_GRAD, {"f32[1001,257]", "f32[1001,257]"}},
    {.op = OP_GELU_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_GELU_GRAD, {"f32[1001,257]", "f32[1001,257]"}},
    /* along the last axis */
    {.op = OP_SOFTMAX, {"f32[a,b]"}},
    {.op = OP_SOFTMAX, {"f32[a,b,c]"}},
    {.op = OP_SOFTMAX, {"f32[67,1000]"}},
    {.op = OP_SOFTMAX, {"f32[3,5000]"}},
    {.op = OP_SOFTMAX, {"f32[a,b,b]"}, {OP_MASK_CAUSAL}},
    {.op = OP_SOFTMAX, {"f32[2,3,64,64]"}, {OP_MASK_CAUSAL}},
    {.op = OP_SOFTMAX, {"f32[1100,1100]"}, {OP_MASK_CAUSAL}},
    {.op = OP_LOG_SOFTMAX, {"f32[a,b]"}},
    {.op = OP_LOG_SOFTMAX, {"f32[a,b,c]"}},
    {.op = OP_LOG_SOFTMAX, {"f32[67,1000]"}},
    {.op = OP_LOG_SOFTMAX, {"f32[3,5000]"}},
    {.op = OP_SOFTMAX_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_SOFTMAX_GRAD, {"f32[64,1000]", "f32[64,1000]"}},
    {.op = OP_SOFTMAX_GRAD, {"f32[a,b,b]", "f32[a,b,b]"}, {OP_MASK_CAUSAL}},
    {.op = OP_SOFTMAX_GRAD, {"f32[1100,1100]", "f32[1100,1100]"}, {OP_MASK_CAUSAL}},
    /* layer normalisation: axis -1, eps 1e-5 */
    {.op = OP_LAYERNORM, {"f32[a,b,c]", "f32[c]", "f32[c]"}, {-1}, {0, 1e-5}},
    {.op = OP_LAYERNORM, {"f32[7,1500]", "f32[1500]", "f32[1500]"}, {-1}, {0, 1e-5}},
    {.op = OP_LAYERNORM_GRAD, {"f32[a,b,c]", "f32[a,b,c]", "f32[c]"}, {-1}, {0, 1e-5}},
    {.op = OP_LAYERNORM_GRAD, {"f32[7,1500]", "f32[7,1500]", "f32[1500]"}, {-1}, {0, 1e-5}},
    {.op = OP_LAYERNORM_GRAD_PARAMS, {"f32[a,b,c]", "f32[a,b,c]"}, {-1}, {0, 1e-5}},
    {.op = OP_LAYERNORM_GRAD_PARAMS, {"f32[2048,128]", "f32[2048,128]"}, {-1}, {0, 1e-5}},
    {.op = OP_RMSNORM, {"f32[a,b,c]", "f32[c]"}, {-1}, {0, 1e-5}},
    {.op = OP_RMSNORM, {"f32[7,1500]", "f32[1500]"}, {-1}, {0, 1e-6}},
    {.op = OP_RMSNORM_GRAD, {"f32[a,b,c]", "f32[a,b,c]", "f32[c]"}, {-1}, {0, 1e-5}},
    {.op = OP_RMSNORM_GRAD, {"f32[7,1500]", "f32[7,1500]", "f32[1500]"}, {-1}, {0, 1e-5}},
    /* lrn: i0 depth_radius, f1 bias, f2 alpha, f3 beta; channels on axis 1 */
    {.op = OP_LRN, {"f32[a,b,c,d]"}, {2}, {0, 1.0, 0.5, 0.75}},
    {.op = OP_LRN, {"f32[a,7,c]"}, {5}, {0, 2.0, 1e-4, 0.75}},
    {.op = OP_LRN, {"f32[16,64,12,12]"}, {4}, {0, 1.0, 0.001 / 9, 0.75}},
    {.op = OP_LRN_GRAD, {"f32[a,b,c,d]", "f32[a,b,c,d]"}, {2}, {0, 1.0, 0.5, 0.75}},
    {.op = OP_LRN_GRAD, {"f32[a,7,c]", "f32[a,7,c]"}, {5}, {0, 2.0, 0.3, 0.5}},
    {.op = OP_LRN_GRAD, {"f32[8,64,12,12]", "f32[8,64,12,12]"}, {4}, {0, 1.0, 0.001 / 9, 0.75}},
    /* rope: f0 base; positions on axis -2 (up to 299 radians here) */
    {.op = OP_ROPE, {"f32[a,b,c,8]"}, .f = {10000}},
    {.op = OP_ROPE, {"f32[a,6]"}, .f = {10}},
    {.op = OP_ROPE, {"f32[2,4,300,64]"}, .f = {10000}},
    {.op = OP_ROPE_GRAD, {"f32[a,b,c,8]"}, .f = {10000}},
    {.op = OP_ROPE_GRAD, {"f32[2,4,300,64]"}, .f = {500000}},
    /* lstm_cell: z [B, 4H] (i, f, g, o), s [B, 2H] (h, c); the gradient's dy [B, 2H] */
    {.op = OP_LSTM_CELL, {"f32[a,4]", "f32[a,2]"}},
    {.op = OP_LSTM_CELL, {"f32[a,20]", "f32[a,10]"}},
    {.op = OP_LSTM_CELL, {"f32[64,2048]", "f32[64,1024]"}},
    {.op = OP_LSTM_CELL_GRAD, {"f32[a,2]", "f32[a,4]", "f32[a,2]"}},
    {.op = OP_LSTM_CELL_GRAD, {"f32[a,10]", "f32[a,20]", "f32[a,10]"}},
    {.op = OP_LSTM_CELL_GRAD, {"f32[64,1024]", "f32[64,2048]", "f32[64,1024]"}},
    /* gru_cell: gx, gh [B, 3H] (r, z, n), h [B, H]; the gradient's dy [B, H] */
    {.op = OP_GRU_CELL, {"f32[a,3]", "f32[a,3]", "f32[a,1]"}},
    {.op = OP_GRU_CELL, {"f32[a,21]", "f32[a,21]", "f32[a,7]"}},
    {.op = OP_GRU_CELL, {"f32[64,3072]", "f32[64,3072]", "f32[64,1024]"}},
    {.op = OP_GRU_CELL_GRAD, {"f32[a,1]", "f32[a,3]", "f32[a,3]", "f32[a,1]"}},
    {.op = OP_GRU_CELL_GRAD, {"f32[a,7]", "f32[a,21]", "f32[a,21]", "f32[a,7]"}},
    {.op = OP_GRU_CELL_GRAD, {"f32[64,1024]", "f32[64,3072]", "f32[64,3072]", "f32[64,1024]"}},
    /* batch normalisation: channels on axis 1, eps 1e-5; stats' variances > 0 */
    BN_ROWS("a,b", "b"),
    BN_ROWS("a,b,c,d", "b"),
    BN_ROWS("5,3,1,7", "3"),
    BN_ROWS("32,64,14,14", "64"),
    BN_ROWS("2048,96", "96"),
    BN_RELU_ROWS("a,b", "b"),
    BN_RELU_ROWS("a,b,c,d", "b"),
    BN_RELU_ROWS("32,64,14,14", "64"),
    {.op = OP_BN_GRAD,
     {"f32[a,b,c,d]", "f32[a,b,c,d]", "f32[b]", "f32[2,b]", "f32[2,b]"},
     {1, 0, 0},
     {0, 1e-5},
     .fills = {ANY, ANY, ANY, POS, ANY}},
    {.op = OP_LOG_SOFTMAX_GRAD, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_LOG_SOFTMAX_GRAD, {"f32[64,1000]", "f32[64,1000]"}},
    {.op = OP_SOFTMAX_XENT, {"f32[a,b]", "i32[a]"}, .fills = {ANY, IDS}},
    {.op = OP_SOFTMAX_XENT, {"f32[64,10]", "i32[64]"}, .fills = {ANY, IDS}},
    {.op = OP_SOFTMAX_XENT, {"f32[5,3000]", "i32[5]"}, .fills = {ANY, IDS}},
    {.op = OP_XENT_GRAD, {"f32[a,b]", "i32[a]", "f32[a]"}, .fills = {ANY, IDS, ANY}},
    {.op = OP_XENT_GRAD, {"f32[64,10]", "i32[64]", "f32[64]"}, .fills = {ANY, IDS, ANY}},
    {.op = OP_MSE, {"f32[a,b]", "f32[a,b]"}},
    {.op = OP_MSE, {"f32[300,1000]", "f32[300,1000]"}},
    /* reductions */
    REDUCE(OP_SUM, ANY),
    REDUCE(OP_MEAN, ANY),
    REDUCE(OP_MAX, DISTINCT),
    {.op = OP_ARGMAX, {"f32[a,b,c]"}, {0}, .fills = {DISTINCT}},
    {.op = OP_ARGMAX, {"f32[a,b,c]"}, {1}, .fills = {DISTINCT}},
    {.op = OP_ARGMAX, {"f32[a,b,c]"}, {2}, .fills = {DISTINCT}},
    {.op = OP_ARGMAX, {"f32[64,1000]"}, {1}, .fills = {DISTINCT}},
    {.op = OP_ARGMAX, {"f32[1000,64]"}, {0}, .fills = {DISTINCT}},
    {.op = OP_MAX_GRAD,
     {"f32[a,1,c]", "f32[a,b,c]", "f32[a,1,c]"},
     {1, 1},
     .fills = {ANY, DISTINCT, MAXOF}},
    {.op = OP_MAX_GRAD,
     {"f32[1,b,c]", "f32[a,b,c]", "f32[1,b,c]"},
     {0, 1},
     .fills = {ANY, DISTINCT, MAXOF}},
    {.op = OP_MAX_GRAD,
     {"f32[1,1]", "f32[a,b]", "f32[1,1]"},
     {ALL, 1},
     .fills = {ANY, DISTINCT, MAXOF}},
    {.op = OP_MAX_GRAD,
     {"f32[64,1]", "f32[64,1000]", "f32[64,1]"},
     {1, 1},
     .fills = {ANY, DISTINCT, MAXOF}},
    /* shapes */
    {.op = OP_RESHAPE, {"f32[a,b,c]"}, .list = "c,a,b"},
    {.op = OP_RESHAPE, {"i32[a,b]"}, .list = "-1"},
    {.op = OP_TRANSPOSE, {"f32[a,b,c]"}},
    {.op = OP_TRANSPOSE, {"f32[a,b,c]"}, .list = "0,2,1"},
    {.op = OP_TRANSPOSE, {"f32[a,b,c]"}, .list = "2,0,1"},
    {.op = OP_TRANSPOSE, {"f32[a,b,c,d]"}, .list = "0,2,3,1"},
    {.op = OP_TRANSPOSE, {"i32[a,b]"}},
    {.op = OP_TRANSPOSE, {"f32[301,517]"}},
    {.op = OP_CONCAT, {"f32[a,b]", "f32[a,c]", "f32[a,d]"}, {1}},
    {.op = OP_CONCAT, {"f32[a,b]", "f32[c,b]"}, {0}},
    {.op = OP_CONCAT, {"f32[a,b,c]", "f32[a,d,c]"}, {1}},
    {.op = OP_CONCAT, {"i32[a,b]", "i32[a,c]"}, {1}},
    {.op = OP_SLICE, {"f32[a,9,c]"}, {1, 2, 7}},
    {.op = OP_SLICE, {"f32[9,b]"}, {0, 0, 4}},
    {.op = OP_SLICE, {"f32[a,b,11]"}, {2, 3, 11}},
    {.op = OP_SLICE_GRAD, {"f32[a,5,c]"}, {1, 2, 7}, .list = "a,9,c"},
    {.op = OP_SLICE_GRAD, {"f32[4,b]"}, {0, 0, 4}, .list = "9,b"},
    {.op = OP_GATHER, {"f32[a,b]", "i32[c,d]"}, .fills = {ANY, IDS}},
    {.op = OP_GATHER, {"f32[1000,64]", "i32[512]"}, .fills = {ANY, IDS}},
    {.op = OP_GATHER_GRAD, {"f32[c,d,b]", "i32[c,d]"}, .list = "a,b", .fills = {ANY, IDS}},
    {.op = OP_GATHER_GRAD, {"f32[512,64]", "i32[512]"}, .list = "100,64", .fills = {ANY, IDS}},
    {.op = OP_CAST, {"f32[a,b]"}, {DT_I32}},
    {.op = OP_CAST, {"i32[a,b]"}, {DT_F32}},
    {.op = OP_CAST, {"f32[a,b]"}, {DT_F32}},
    {.op = OP_ONE_HOT, {"i32[a,b]"}, {7}, .fills = {IDS}},
    {.op = OP_ONE_HOT, {"i32[300]"}, {1000}, .fills = {IDS}},
    {.op = OP_BROADCAST, {"f32[b]"}, .list = "a,b"},
    {.op = OP_BROADCAST, {"f32[]"}, .list = "a,b"},
    {.op = OP_BROADCAST, {"f32[a,1,c]"}, .list = "a,b,c"},
    {.op = OP_SUM_TO, {"f32[a,b]"}, .list = "b"},
    {.op = OP_SUM_TO, {"f32[a,b]"}, .list = "a,1"},
    {.op = OP_SUM_TO, {"f32[a,b,c]"}, .list = "b,1"},
    {.op = OP_SUM_TO, {"f32[512,1024]"}, .list = "1024"},
    /* convolution and pooling */
    {.op = OP_CONV2D, {"f32[a,3,9,9]", "f32[4,3,3,3]"}, {1, 1}},
    {.op = OP_CONV2D, {"f32[a,3,9,9]", "f32[4,3,3,3]"}, {2, 0}},
    {.op = OP_CONV2D, {"f32[3,2,8,7]", "f32[5,2,5,5]"}, {1, 2}},
    {.op = OP_CONV2D, {"f32[3,2,8,7]", "f32[5,2,5,5]"}, {2, 2}},
    {.op = OP_CONV2D, {"f32[8,1,28,28]", "f32[32,1,5,5]"}, {1, 2}},
    {.op = OP_CONV2D, {"f32[4,32,14,14]", "f32[64,32,5,5]"}, {1, 2}},
    {.op = OP_CONV2D_GRAD_X, {"f32[a,4,9,9]", "f32[4,3,3,3]"}, {1, 1}, .list = "a,3,9,9"},
    {.op = OP_CONV2D_GRAD_X, {"f32[a,4,4,4]", "f32[4,3,3,3]"}, {2, 0}, .list = "a,3,9,9"},
    {.op = OP_CONV2D_GRAD_X, {"f32[3,5,4,4]", "f32[5,2,5,5]"}, {2, 2}, .list = "3,2,8,7"},
    {.op = OP_CONV2D_GRAD_X, {"f32[4,64,14,14]", "f32[64,32,5,5]"}, {1, 2}, .list = "4,32,14,14"},
    {.op = OP_CONV2D_GRAD_W, {"f32[a,4,9,9]", "f32[a,3,9,9]"}, {1, 1}, .list = "4,3,3,3"},
    {.op = OP_CONV2D_GRAD_W, {"f32[a,4,4,4]", "f32[a,3,9,9]"}, {2, 0}, .list = "4,3,3,3"},
    {.op = OP_CONV2D_GRAD_W, {"f32[3,5,4,4]", "f32[3,2,8,7]"}, {2, 2}, .list = "5,2,5,5"},
    {.op = OP_CONV2D_GRAD_W, {"f32[4,64,14,14]", "f32[4,32,14,14]"}, {1, 2}, .list = "64,32,5,5"},
    {.op = OP_CONV2D_BIAS, {"f32[3,2,8,7]", "f32[5,2,5,5]", "f32[1,5,1,1]"}, {1, 2, 0}},
    {.op = OP_CONV2D_BIAS, {"f32[a,3,9,9]", "f32[4,3,3,3]", "f32[1,4,1,1]"}, {2, 0, 1}},
    {.op = OP_CONV2D_BIAS, {"f32[4,32,14,14]", "f32[64,32,5,5]", "f32[1,64,1,1]"}, {1, 2, 1}},
    {.op = OP_MAXPOOL2D, {"f32[a,b,8,8]"}, {2, 0}, .fills = {DISTINCT}},
    {.op = OP_MAXPOOL2D, {"f32[a,b,9,7]"}, {3, 2}, .fills = {DISTINCT}},
    {.op = OP_MAXPOOL2D, {"f32[2,3,7,7]"}, {2, 1}, .fills = {DISTINCT}},
    {.op = OP_MAXPOOL2D, {"f32[64,32,28,28]"}, {2, 2}, .fills = {DISTINCT}},
    {.op = OP_AVGPOOL2D, {"f32[a,b,8,8]"}, {2, 0}},
    {.op = OP_AVGPOOL2D, {"f32[a,b,9,7]"}, {3, 2}},
    {.op = OP_AVGPOOL2D, {"f32[2,3,7,7]"}, {2, 1}},
    {.op = OP_MAXPOOL_GRAD, {"f32[a,b,4,4]", "f32[a,b,8,8]"}, {2, 2}, .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD, {"f32[a,b,4,3]", "f32[a,b,9,7]"}, {3, 2}, .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD, {"f32[2,3,6,6]", "f32[2,3,7,7]"}, {2, 1}, .fills = {ANY, DISTINCT}},
    /* relu (i3): a window passes dy only when its maximum is > 0 */
    {.op = OP_MAXPOOL_GRAD,
     {"f32[a,b,4,4]", "f32[a,b,8,8]"},
     {2, 2, 0, 1},
     .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD,
     {"f32[a,b,4,3]", "f32[a,b,9,7]"},
     {3, 2, 0, 1},
     .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD,
     {"f32[64,32,14,14]", "f32[64,32,28,28]"},
     {2, 2},
     .fills = {ANY, DISTINCT}},
    {.op = OP_AVGPOOL_GRAD, {"f32[a,b,4,4]"}, {2, 2}, .list = "a,b,8,8"},
    {.op = OP_AVGPOOL_GRAD, {"f32[a,b,4,3]"}, {3, 2}, .list = "a,b,9,7"},
    {.op = OP_AVGPOOL_GRAD, {"f32[2,3,6,6]"}, {2, 1}, .list = "2,3,7,7"},
    /* padding (i2): "same" pads the extra cell after; p on each side */
    {.op = OP_MAXPOOL2D, {"f32[a,b,9,7]"}, {2, 2, OP_PAD_SAME}, .fills = {DISTINCT}},
    {.op = OP_MAXPOOL2D, {"f32[2,3,7,8]"}, {3, 2, 1}, .fills = {DISTINCT}},
    {.op = OP_MAXPOOL2D, {"f32[64,32,27,27]"}, {3, 2, OP_PAD_SAME}, .fills = {DISTINCT}},
    {.op = OP_AVGPOOL2D, {"f32[a,b,9,7]"}, {3, 2, OP_PAD_SAME}},
    {.op = OP_AVGPOOL2D, {"f32[2,3,7,8]"}, {3, 1, 1}},
    {.op = OP_MAXPOOL_GRAD,
     {"f32[a,b,5,4]", "f32[a,b,9,7]"},
     {2, 2, OP_PAD_SAME},
     .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD, {"f32[2,3,4,4]", "f32[2,3,7,8]"}, {3, 2, 1}, .fills = {ANY, DISTINCT}},
    {.op = OP_MAXPOOL_GRAD,
     {"f32[a,b,5,4]", "f32[a,b,9,7]"},
     {3, 2, OP_PAD_SAME, 1},
     .fills = {ANY, DISTINCT}},
    {.op = OP_AVGPOOL_GRAD, {"f32[a,b,5,4]"}, {3, 2, OP_PAD_SAME}, .list = "a,b,9,7"},
    {.op = OP_AVGPOOL_GRAD, {"f32[2,3,7,8]"}, {3, 1, 1}, .list = "2,3,7,8"},
    /* dropout: the mask key (i2) and the step select the mask */
    {.op = OP_DROPOUT, {"f32[a,b]"}, {0, 1, 5}, {0.3}},
    {.op = OP_DROPOUT, {"f32[313,1031]"}, {0, 1, 9}, {0.5}},
    {.op = OP_DROPOUT, {"f32[a,b]"}, {0, 0, 5}, {0.3}},
    {.op = OP_DROPOUT, {"f32[a,b]"}, {0, 1, 5}, {0.0}},
    {.op = OP_DROPOUT, {"f32[a,b]"}, {0, 1, 5}, {0.95}},
    {.op = OP_DROPOUT_GRAD, {"f32[a,b]"}, {0, 1, 5}, {0.3}},
    {.op = OP_DROPOUT_GRAD, {"f32[313,1031]"}, {0, 1, 9}, {0.5}},
    /* random: i0 kind, f2 and f3 its parameters; the input gives the shape */
    {.op = OP_RANDOM, {"f32[a,b]"}, {OP_RANDOM_UNIFORM}, {0, 0, -1.0, 2.0}},
    {.op = OP_RANDOM, {"f32[a,b]"}, {OP_RANDOM_NORMAL}, {0, 0, 0.5, 2.0}},
    {.op = OP_RANDOM, {"f32[313,1031]"}, {OP_RANDOM_NORMAL}, {0, 0, 0.0, 1.0}},
    {.op = OP_RANDOM, {"f32[a,b]"}, {OP_RANDOM_BERNOULLI}, {0, 0, 0.3}},
    /* categorical: i0 weights or logits; the list is the output's shape.
       ANY weights are negative too (they weigh 0) */
    {.op = OP_CATEGORICAL, {"f32[b]"}, {OP_DRAW_WEIGHTS}, .list = "a,c"},
    {.op = OP_CATEGORICAL, {"f32[50000]"}, {OP_DRAW_WEIGHTS}, .list = "2560", .fills = {POS}},
    {.op = OP_CATEGORICAL, {"f32[a,b]"}, {OP_DRAW_LOGITS}, .list = "a,c"},
    {.op = OP_CATEGORICAL, {"f32[7,3001]"}, {OP_DRAW_LOGITS}, .list = "7,64"},
    /* updates: the last two inputs are the learning rate and the gradient scale */
    {.op = OP_APPLY_SGD,
     {"var:f32[a,b]", "f32[a,b]", "f32[]", "f32[]"},
     .fills = {ANY, ANY, LR, POS}},
    {.op = OP_APPLY_SGD,
     {"var:f32[1001,257]", "f32[1001,257]", "f32[]", "f32[]"},
     .fills = {ANY, ANY, LR, POS}},
    {.op = OP_APPLY_SGD_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "f32[]", "f32[]"},
     .fills = {ANY, ANY, IDS, LR, POS}},
    {.op = OP_APPLY_SGD_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "f32[]", "f32[]"},
     .fills = {ANY, ANY, IDS, LR, POS}},
    {.op = OP_APPLY_MOMENTUM,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     {0, 0, 0},
     {0, 0.9},
     .fills = {ANY, ANY, ANY, LR, POS}},
    {.op = OP_APPLY_MOMENTUM,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     {0, 0, 1},
     {0, 0.9},
     .fills = {ANY, ANY, ANY, LR, POS}},
    {.op = OP_APPLY_MOMENTUM,
     {"var:f32[1001,257]", "f32[1001,257]", "var:f32[1001,257]", "f32[]", "f32[]"},
     {0, 0, 1},
     {0, 0.9},
     .fills = {ANY, ANY, ANY, LR, POS}},
    {.op = OP_APPLY_ADAM,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "var:f32[a,b]", "var:f32[]", "f32[]", "f32[]"},
     .f = {0, 0.9, 0.999, 1e-8},
     .fills = {ANY, ANY, ANY, POS, STEP, LR, POS}},
    {.op = OP_APPLY_ADAM, /* adamw: decoupled weight decay */
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "var:f32[a,b]", "var:f32[]", "f32[]", "f32[]"},
     .f = {0, 0.9, 0.95, 1e-8, 0.1},
     .fills = {ANY, ANY, ANY, POS, STEP, LR, POS}},
    {.op = OP_APPLY_ADAM,
     {"var:f32[1001,257]", "f32[1001,257]", "var:f32[1001,257]", "var:f32[1001,257]", "var:f32[]",
      "f32[]", "f32[]"},
     .f = {0, 0.9, 0.999, 1e-8, 0.01},
     .fills = {ANY, ANY, ANY, POS, STEP, LR, POS}},
    /* row updates: a repeated id's rows summed, then one dense step of its row */
    {.op = OP_APPLY_MOMENTUM_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "f32[]", "f32[]"},
     {0, 0, 1},
     {0, 0.9},
     .fills = {ANY, ANY, IDS, ANY, LR, POS}},
    {.op = OP_APPLY_MOMENTUM_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "var:f32[100,64]", "f32[]", "f32[]"},
     {0, 0, 0},
     {0, 0.9},
     .fills = {ANY, ANY, IDS, ANY, LR, POS}},
    {.op = OP_APPLY_ADAM_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "var:f32[a,b]", "var:f32[]",
      "f32[]", "f32[]"},
     .f = {0, 0.9, 0.95, 1e-8, 0.1},
     .fills = {ANY, ANY, IDS, ANY, POS, STEP, LR, POS}},
    {.op = OP_APPLY_ADAM_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "var:f32[100,64]", "var:f32[100,64]",
      "var:f32[]", "f32[]", "f32[]"},
     .f = {0, 0.9, 0.999, 1e-8},
     .fills = {ANY, ANY, IDS, ANY, POS, STEP, LR, POS}},
    /* L2 weight decay (f4): g + wd * var; sgd's rows then sum a repeated id's rows first */
    {.op = OP_APPLY_SGD,
     {"var:f32[a,b]", "f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 0, 0.01},
     .fills = {ANY, ANY, LR, POS}},
    {.op = OP_APPLY_SGD_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 0, 0.1},
     .fills = {ANY, ANY, IDS, LR, POS}},
    {.op = OP_APPLY_SGD_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 0, 0.01},
     .fills = {ANY, ANY, IDS, LR, POS}},
    {.op = OP_APPLY_MOMENTUM,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     {0, 0, 1},
     {0, 0.9, 0, 0, 0.01},
     .fills = {ANY, ANY, ANY, LR, POS}},
    {.op = OP_APPLY_MOMENTUM_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "f32[]", "f32[]"},
     {0, 0, 0},
     {0, 0.9, 0, 0, 0.1},
     .fills = {ANY, ANY, IDS, ANY, LR, POS}},
    /* rmsprop: v; with m the momentum slot, centered the mean gradient (small: v - mg² > 0) */
    {.op = OP_APPLY_RMSPROP,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0.99, 0, 1e-8},
     .fills = {ANY, ANY, POS, LR, POS}},
    {.op = OP_APPLY_RMSPROP,
     {"var:f32[1001,257]", "f32[1001,257]", "var:f32[1001,257]", "var:f32[1001,257]",
      "var:f32[1001,257]", "f32[]", "f32[]"},
     {1},
     {0, 0.9, 0.9, 1e-8, 0.01},
     .fills = {ANY, ANY, POS, ANY, LR, LR, POS}},
    {.op = OP_APPLY_RMSPROP_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0.99, 0.5, 1e-8},
     .fills = {ANY, ANY, IDS, POS, ANY, LR, POS}},
    {.op = OP_APPLY_RMSPROP_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "var:f32[100,64]", "var:f32[100,64]", "f32[]",
      "f32[]"},
     {1},
     {0, 0.9, 0, 1e-8, 0.1},
     .fills = {ANY, ANY, IDS, POS, LR, LR, POS}},
    {.op = OP_APPLY_ADAGRAD,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 1e-10},
     .fills = {ANY, ANY, POS, LR, POS}},
    {.op = OP_APPLY_ADAGRAD,
     {"var:f32[1001,257]", "f32[1001,257]", "var:f32[1001,257]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 1e-10, 0.01},
     .fills = {ANY, ANY, POS, LR, POS}},
    {.op = OP_APPLY_ADAGRAD_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 1e-10},
     .fills = {ANY, ANY, IDS, POS, LR, POS}},
    {.op = OP_APPLY_ADAGRAD_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "var:f32[100,64]", "f32[]", "f32[]"},
     .f = {0, 0, 0, 1e-10, 0.01},
     .fills = {ANY, ANY, IDS, POS, LR, POS}},
    {.op = OP_APPLY_ADADELTA,
     {"var:f32[a,b]", "f32[a,b]", "var:f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0.9, 0, 1e-6},
     .fills = {ANY, ANY, POS, POS, LR, POS}},
    {.op = OP_APPLY_ADADELTA,
     {"var:f32[1001,257]", "f32[1001,257]", "var:f32[1001,257]", "var:f32[1001,257]", "f32[]",
      "f32[]"},
     .f = {0, 0.95, 0, 1e-6, 0.01},
     .fills = {ANY, ANY, POS, POS, LR, POS}},
    {.op = OP_APPLY_ADADELTA_ROWS,
     {"var:f32[a,b]", "f32[c,d,b]", "i32[c,d]", "var:f32[a,b]", "var:f32[a,b]", "f32[]", "f32[]"},
     .f = {0, 0.9, 0, 1e-6},
     .fills = {ANY, ANY, IDS, POS, POS, LR, POS}},
    {.op = OP_APPLY_ADADELTA_ROWS,
     {"var:f32[100,64]", "f32[512,64]", "i32[512]", "var:f32[100,64]", "var:f32[100,64]", "f32[]",
      "f32[]"},
     .f = {0, 0.9, 0, 1e-6, 0.01},
     .fills = {ANY, ANY, IDS, POS, POS, LR, POS}},
    {.op = OP_ROWS_SUM, {"f32[c,d,b]", "i32[c,d]"}, .fills = {ANY, IDS}},
    {.op = OP_ROWS_SUM, {"f32[512,64]", "i32[512]"}, .fills = {ANY, IDS}},
    /* optimizer helpers: the schedule at step 3 (warming up, or past it) */
    {.op = OP_LR_SCHEDULE, {"f32[]"}, {OP_LR_WARMUP, 0, 0, 5}, {0, 1e-3}, .fills = {STEP}},
    {.op = OP_LR_SCHEDULE,
     {"f32[]"},
     {OP_LR_LINEAR, 0, 0, 1, 10},
     {0, 1e-3, 1e-4},
     .fills = {STEP}},
    {.op = OP_LR_SCHEDULE, {"f32[]"}, {OP_LR_COSINE, 0, 0, 2, 7}, {0, 3e-4, 3e-5}, .fills = {STEP}},
    {.op = OP_LR_SCHEDULE,
     {"f32[]"},
     {OP_LR_STEP, 0, 0, 1, 2},
     {0, 1e-3, 0, 0, 0, 0.5},
     .fills = {STEP}},
    {.op = OP_LR_SCHEDULE,
     {"f32[]"},
     {OP_LR_EXP, 0, 0, 0, 3},
     {0, 1e-3, 0, 0, 0, 0.9},
     .fills = {STEP}},
    {.op = OP_CLIP_SCALE, {"f32[a,b]", "f32[c]", "f32[313,1031]"}, .f = {1.0}},
    {.op = OP_CLIP_SCALE, {"f32[a,b]", "f32[c]"}, .f = {1e6}},
    {.op = OP_ASSIGN_ADD, {"var:f32[a,b]", "f32[a,b]"}},
    {.op = OP_ASSIGN_ADD, {"var:f32[]", "f32[]"}},
    {.op = OP_ASSIGN_ADD, {"var:i32[]", "i32[]"}},
    {.op = OP_ASSIGN, {"var:f32[a,b]", "f32[a,b]"}},
    {.op = OP_ASSIGN, {"var:i32[a]", "i32[a]"}},
    {.op = OP_ASSIGN, {"var:f32[a,b]", "f32[a,b]"}, .f = {0.9}},
    {.op = OP_ASSIGN, {"var:f32[313,1031]", "f32[313,1031]"}, .f = {0.999}},
    {.op = OP_GROUP, {"f32[a]", "f32[b]"}},
    {.op = OP_ALLREDUCE, {"f32[a,b]", "f32[b]", "f32[]"}},
    {.op = OP_ALLREDUCE, {"f32[a,b]"}},
    {.op = OP_APPLY_SGD_ALLREDUCE,
     {"var:f32[a,b]", "f32[a,b]", "f32[]", "f32[]"},
     .fills = {ANY, ANY, LR, POS}},
};

/* How close the device must come to the CPU, per op.  Every op is listed
 * (no default: -Wswitch names a new op that has no tolerance yet). */
typedef enum tol_kind {
    T_NONE,  /* sources: no kernel */
    T_EXACT, /* equal values: copies, selections, comparisons, i32 */
    T_MASK,  /* dropout: the same elements dropped, kept ones within 1e-6 */
    T_ELEM,  /* |d| <= rtol * max(1, |want|): one rounding per element */
    T_LOOSE  /* |d| <= rtol * max(|want|, max |want| of the buffer) */
} tol_kind;

typedef struct tolerance {
    tol_kind kind;
    double rtol;
} tolerance;

static tolerance op_tolerance(op_kind op)
{
    switch (op) {
    case OP_CONST:
    case OP_INPUT:
    case OP_DATA:
    case OP_VARIABLE:
        return (tolerance){T_NONE, 0};
    /* Copies, selections, comparisons and index arithmetic compute nothing
     * that could round: any difference is a bug.  (i32 buffers are always
     * compared exactly, whatever the op.) */
    case OP_NEG:
    case OP_RELU:
    case OP_IDENTITY:
    case OP_STOP_GRADIENT:
    case OP_EQ:
    case OP_NE:
    case OP_LT:
    case OP_GT:
    case OP_LE:
    case OP_GE:
    case OP_MAXIMUM:
    case OP_MINIMUM:
    case OP_WHERE:
    case OP_ABS:
    case OP_ABS_GRAD:
    case OP_MAX:
    case OP_ARGMAX:
    case OP_RESHAPE:
    case OP_TRANSPOSE:
    case OP_CONCAT:
    case OP_SLICE:
    case OP_GATHER:
    case OP_CAST:
    case OP_ONE_HOT:
    case OP_BROADCAST:
    case OP_MAXPOOL2D:
    case OP_RELU_GRAD:
    case OP_MAX_GRAD:
    case OP_SLICE_GRAD:
    case OP_GROUP:
    case OP_ALLREDUCE: /* packing; over one process the mean is the value */
    /* Sums in doubles in one order on every device (devices/draw.h); a
     * GPU's exp may differ in the last bit of a double, which moves a draw
     * only when it falls within ~1e-16 of a boundary. */
    case OP_CATEGORICAL:
        return (tolerance){T_EXACT, 0};
    /* dropout.h is the one mask of every device: the same elements must be
     * dropped; a kept element is x * scale, one rounding. */
    case OP_DROPOUT:
    case OP_DROPOUT_GRAD:
        return (tolerance){T_MASK, 1e-6};
    /* A few roundings per element: IEEE + - * / are exact, but a GPU may
     * contract a*b+c into an FMA, and its expf/logf/tanhf are within 2 ulp
     * of the CPU's libm, not equal to it.  Average pools and the max-pool
     * gradient add a handful of terms, adam divides by a square root. */
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_DIV:
    case OP_EXP:
    case OP_LOG:
    case OP_SQRT:
    case OP_SIGMOID:
    case OP_TANH:
    case OP_SIGMOID_GRAD:
    case OP_TANH_GRAD:
    case OP_GELU:
    case OP_GELU_GRAD:
    case OP_POW:
    case OP_SIN:
    case OP_COS:
    case OP_SOFTPLUS:
    case OP_LOG_SIGMOID:
    case OP_SILU:
    case OP_ELU:
    case OP_ROPE: /* the same cos and sin (made in double), 2 products and a sum */
    case OP_ROPE_GRAD:
    case OP_LSTM_CELL: /* act.h's expf and tanhf (2 ulp on a GPU), products a GPU may fuse */
    case OP_LSTM_CELL_GRAD:
    case OP_GRU_CELL:
    case OP_GRU_CELL_GRAD:
    case OP_SOFTPLUS_GRAD:
    case OP_LOG_SIGMOID_GRAD:
    case OP_SILU_GRAD:
    case OP_ELU_GRAD:
    case OP_AVGPOOL2D:
    case OP_AVGPOOL_GRAD:
    case OP_MAXPOOL_GRAD:
    case OP_APPLY_SGD:
    case OP_APPLY_SGD_ALLREDUCE: /* over one process: apply_sgd */
    case OP_APPLY_MOMENTUM:
    case OP_APPLY_ADAM:
    case OP_ASSIGN_ADD:
    case OP_ASSIGN: /* a moving average: a GPU may fuse its multiply-add */
    case OP_RANDOM: /* normal's logf and cosf: within 2 ulp of libm on a GPU */
    case OP_LR_SCHEDULE:
    case OP_CLIP_SCALE: /* a sum of squares, added in another order */
    /* a repeated id's rows are added in batch order on every device */
    case OP_APPLY_MOMENTUM_ROWS:
    case OP_APPLY_ADAM_ROWS:
    case OP_ROWS_SUM:
    /* optim_step (devices/optim.h): a GPU may fuse its multiply-adds */
    case OP_APPLY_RMSPROP:
    case OP_APPLY_RMSPROP_ROWS:
    case OP_APPLY_ADAGRAD:
    case OP_APPLY_ADAGRAD_ROWS:
    case OP_APPLY_ADADELTA:
    case OP_APPLY_ADADELTA_ROWS:
        return (tolerance){T_ELEM, 1e-5};
    /* Sums of many terms in another order: a GPU reduces in a tree (and
     * scatter-adds with atomics, in any order), cuBLAS blocks K differently
     * from OpenBLAS.  The error of each element grows with the terms summed
     * and their magnitudes, not with the element itself (a sum may cancel to
     * near 0), so it is measured against the largest element of the
     * buffer.  1e-4 holds for K up to ~1e4 in f32; TF32 GEMMs (10-bit
     * mantissa, ~1e-3) would fail it, on purpose: the CPU has none, and
     * training on the GPU must give what it gives on the CPU. */
    case OP_MATMUL:
    case OP_MATMUL_BIAS:
    case OP_APPLY_SGD_MATMUL:
    case OP_CONV2D:
    case OP_CONV2D_BIAS:
    case OP_CONV2D_GRAD_X:
    case OP_CONV2D_GRAD_W:
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
    case OP_SOFTMAX_XENT:
    case OP_MSE:
    case OP_SUM:
    case OP_MEAN:
    case OP_SUM_TO:
    case OP_SOFTMAX_GRAD:
    case OP_LOG_SOFTMAX_GRAD:
    case OP_XENT_GRAD:
    case OP_GATHER_GRAD:
    case OP_APPLY_SGD_ROWS:
    case OP_LAYERNORM:
    case OP_LAYERNORM_GRAD:
    case OP_LAYERNORM_GRAD_PARAMS:
    case OP_RMSNORM:
    case OP_RMSNORM_GRAD:
    case OP_LRN:      /* powf within 2 ulp; sums in the CPU's order */
    case OP_LRN_GRAD: /* dy s^-beta less a sum: it may cancel */
    case OP_BN_STATS:
    case OP_BATCHNORM:
    case OP_BN_GRAD_PARAMS:
    case OP_BN_GRAD:
        return (tolerance){T_LOOSE, 1e-4};
    case OP_COUNT:
        break;
    }
    return (tolerance){T_NONE, 0};
}

/* ---- building one call ---- */

static const int64_t letter_sizes[] = {1, 2, 3, 5, 7, 13, 17};
static int64_t sym[8]; /* the sizes of a..h in this repetition */

static int has_letters(const dev_case *c)
{
    for (int j = 0; j < MAX_IN && c->in[j]; j++)
        if (strpbrk(c->in[j], "abcdefgh")) return 1;
    return c->list && strpbrk(c->list, "abcdefgh");
}

/* A number or a letter at *p; advances *p. */
static int64_t read_dim(const char **p)
{
    if (**p >= 'a' && **p <= 'h') return sym[*(*p)++ - 'a'];
    char *end;
    int64_t v = strtoll(*p, &end, 10);
    *p = end;
    return v;
}

static ir_type read_type(const char *s, int *is_var)
{
    ir_type t = {.dtype = DT_F32};
    *is_var = strncmp(s, "var:", 4) == 0;
    if (*is_var) s += 4;
    if (strncmp(s, "i32", 3) == 0) t.dtype = DT_I32;
    const char *p = strchr(s, '[') + 1;
    while (*p && *p != ']') {
        t.dim[t.rank++] = read_dim(&p);
        if (*p == ',') p++;
    }
    return t;
}

static void read_list(const char *s, ir_attrs *a)
{
    const char *p = s;
    while (p && *p) {
        a->list[a->n_list++] = read_dim(&p);
        if (*p == ',') p++;
    }
}

/* One call of an op on both sides: the node, host buffers (the CPU's, and
 * copies of what the device returned) and device buffers. */
typedef struct op_run {
    const dev_case *c;
    diag_list diags;
    ir_graph *g;
    const ir_node *n;
    int n_in;
    const ir_type *in_t[MAX_IN];
    size_t in_bytes[MAX_IN], out_bytes, scratch_bytes;
    void *h_in[MAX_IN], *h_out, *h_scratch; /* the CPU's */
    void *d_in[MAX_IN], *d_out, *d_scratch; /* the device's */
    void *back_in[MAX_IN], *back_out;       /* the device's, copied back */
    kern_fault h_fault, d_fault;
    kern_args ha, da;
    float h_scale, *d_scale; /* kern_args.lr_scale (lr_factor), or 0 and NULL */
} op_run;

static void *xmalloc0(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return p;
}

/* The node of case c with the letters as drawn; fails the test when the
 * op's shape rule rejects it (a bad table entry). */
static void opr_build(op_run *r, const dev_case *c)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    diag_init(&r->diags);
    r->g = ir_new(&r->diags);
    src_span at = {0, 1};
    int in[MAX_IN];
    for (; r->n_in < MAX_IN && c->in[r->n_in]; r->n_in++) {
        int j = r->n_in, is_var;
        char name[24];
        snprintf(name, sizeof name, "x%d", j);
        ir_type t = read_type(c->in[j], &is_var);
        if (!is_var) {
            in[j] = ir_add_input(r->g, name, &t, src, at);
            continue;
        }
        ir_var v = {.name = name,
                    .type = t,
                    .init = INIT_ZEROS,
                    .device = IR_DEV(DEV_CPU, 0),
                    .slot_of = -1,
                    .trainable = 1,
                    .src = src,
                    .span = at};
        int vi = ir_add_var(r->g, &v); /* before g->vars is read: adding may move it */
        in[j] = r->g->vars[vi].node;
    }
    ir_attrs a = {.n_list = 0};
    memcpy(a.i, c->i, sizeof c->i);
    for (int k = 0; k < 5; k++) a.f[k] = c->f[k];
    read_list(c->list, &a);
    int id = ir_add(r->g, c->op, in, r->n_in, &a, src, at);
    if (id < 0)
        fail_msg("table entry for %s is not valid: %s", ops_name(c->op),
                 r->diags.n ? r->diags.v[0].msg : "?");
    r->n = &r->g->nodes[id];
    for (int j = 0; j < r->n_in; j++) {
        r->in_t[j] = &r->g->nodes[r->n->in[j]].type;
        r->in_bytes[j] = ir_nbytes(r->in_t[j]);
    }
    r->out_bytes = ir_nbytes(&r->n->type);
    r->scratch_bytes = ops_table[c->op].scratch ? ops_table[c->op].scratch(r->g, id) : 0;
}

/* The exclusive bound of the ids input of the node. */
static int64_t ids_limit(const op_run *r)
{
    const ir_node *n = r->n;
    switch (n->op) {
    case OP_ONE_HOT:
        return n->attr.i[ATTR_DEPTH];
    case OP_SOFTMAX_XENT:
    case OP_XENT_GRAD:
        return r->in_t[0]->dim[r->in_t[0]->rank - 1];
    case OP_GATHER_GRAD:
        return n->attr.list[0];
    default: /* gather, apply_sgd_rows: the table's rows */
        return r->in_t[0]->dim[0];
    }
}

/* y = max(x) over the node's axis with keepdims: the CPU's max kernel. */
static void fill_maxof(op_run *r, int j)
{
    ir_node mx = {.op = OP_MAX};
    mx.attr.i[ATTR_AXIS] = r->n->attr.i[ATTR_AXIS];
    mx.attr.i[ATTR_KEEPDIMS] = 1;
    void *in[1] = {r->h_in[1]};
    const ir_type *in_t[1] = {r->in_t[1]};
    kern_fault f = {{0}};
    kern_args a = {.node = &mx,
                   .out = r->h_in[j],
                   .out_t = r->in_t[j],
                   .n_in = 1,
                   .in = in,
                   .in_t = in_t,
                   .max_tasks = 1,
                   .fault = &f};
    assert_int_equal(cpu_kernels[OP_MAX](&a), 0);
}

static void fill_input(op_run *r, int j)
{
    fill how = r->c->fills[j];
    int64_t n = ir_numel(r->in_t[j]);
    int32_t *iv = r->h_in[j];
    float *fv = r->h_in[j];
    int is_i32 = r->in_t[j]->dtype == DT_I32;
    static const float ties[] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f};
    for (int64_t i = 0; i < n; i++) {
        if (how == IDS)
            iv[i] = (int32_t)(rnd() % (uint32_t)ids_limit(r));
        else if (is_i32)
            iv[i] = (int32_t)(rnd() % (how == TIES ? 5 : 7)) - (how == TIES ? 2 : 3);
        else if (how == POS)
            fv[i] = frand(0.5f, 2.5f);
        else if (how == TIES)
            fv[i] = ties[rnd() % 5];
        else if (how == DISTINCT)
            fv[i] = 0.01f * (float)(i - n / 2) + 0.005f;
        else if (how == STEP)
            fv[i] = 3.0f;
        else if (how == LR)
            fv[i] = frand(0.001f, 0.1f);
        else
            fv[i] = frand(-2.0f, 2.0f);
    }
    for (int64_t i = n - 1; how == DISTINCT && i > 0; i--) {
        int64_t k = (int64_t)(rnd() % (uint32_t)(i + 1));
        float t = fv[i];
        fv[i] = fv[k], fv[k] = t;
    }
}

static void opr_fill(op_run *r)
{
    for (int j = 0; j < r->n_in; j++) {
        r->h_in[j] = xmalloc0(r->in_bytes[j]);
        if (r->c->fills[j] != MAXOF) fill_input(r, j);
    }
    for (int j = 0; j < r->n_in; j++)
        if (r->c->fills[j] == MAXOF) fill_maxof(r, j);
}

/* Device buffers holding the host inputs; the outputs on both sides start
 * as 0xff bytes (NaN, -1), so an element a kernel forgets shows. */
static void opr_upload(op_run *r)
{
    const device_vtable *vt = dev->vt;
    for (int j = 0; j < r->n_in; j++) {
        r->d_in[j] = vt->alloc(dev, r->in_bytes[j]);
        assert_non_null(r->d_in[j]);
        vt->to_device(dev, r->d_in[j], r->h_in[j], r->in_bytes[j]);
    }
    if (r->out_bytes) {
        r->h_out = xmalloc0(r->out_bytes);
        memset(r->h_out, 0xff, r->out_bytes);
        r->d_out = vt->alloc(dev, r->out_bytes);
        assert_non_null(r->d_out);
        vt->to_device(dev, r->d_out, r->h_out, r->out_bytes);
    }
    if (r->scratch_bytes) {
        r->h_scratch = xmalloc0(r->scratch_bytes);
        r->d_scratch = vt->alloc(dev, r->scratch_bytes);
        assert_non_null(r->d_scratch);
    }
    if (lr_factor != 0 && ops_has_lr(r->c->op)) {
        r->h_scale = lr_factor;
        r->d_scale = vt->alloc(dev, sizeof(float));
        assert_non_null(r->d_scale);
        vt->to_device(dev, r->d_scale, &r->h_scale, sizeof(float));
    }
}

/* The processes of an allreduce: here one (tests/mpi.cmake runs more). */
static int one_process_mean(kern_comm *c, const float *in, float *out, size_t n, kern_fault *f)
{
    (void)c, (void)f;
    memmove(out, in, n * sizeof *out);
    return 0;
}
static int one_process_sgd(kern_comm *c, const float *in, float *var, size_t n, float step,
                           kern_fault *f)
{
    (void)c, (void)f;
    for (size_t i = 0; i < n; i++) var[i] -= step * in[i];
    return 0;
}
static kern_comm one_process = {one_process_mean, one_process_sgd};

static kern_args opr_args(op_run *r, void *out, void **in, void *scratch, kern_fault *f)
{
    return (kern_args){.g = r->g,
                       .node = r->n,
                       .out = out,
                       .out_t = &r->n->type,
                       .n_in = r->n_in,
                       .in = in,
                       .in_t = r->in_t,
                       .scratch = scratch,
                       .scratch_task_bytes = r->scratch_bytes,
                       .max_tasks = 1,
                       .seed = 42,
                       .step = 5,
                       .comm = &one_process,
                       .fault = f};
}

/* The CPU's kernel on the host buffers: its status. */
static int opr_cpu(op_run *r)
{
    r->ha = opr_args(r, r->h_out, r->h_in, r->h_scratch, &r->h_fault);
    r->ha.lr_scale = r->d_scale ? &r->h_scale : NULL;
    return dev_kern_run(cpu_kernels[r->c->op], &r->ha);
}

/* The device's kernel on its buffers, on the queue (not synced). */
static void opr_launch(op_run *r)
{
    r->da = opr_args(r, r->d_out, r->d_in, r->d_scratch, &r->d_fault);
    r->da.queue = queue;
    r->da.lr_scale = r->d_scale;
    dev->vt->launch(dev, queue, (table ? table : dev->vt->kernels)[r->c->op], &r->da);
}

static void opr_download(op_run *r)
{
    for (int j = 0; j < r->n_in; j++) {
        r->back_in[j] = xmalloc0(r->in_bytes[j]);
        dev->vt->to_host(dev, r->back_in[j], r->d_in[j], r->in_bytes[j]);
    }
    if (r->out_bytes) {
        r->back_out = xmalloc0(r->out_bytes);
        dev->vt->to_host(dev, r->back_out, r->d_out, r->out_bytes);
    }
}

static void opr_free(op_run *r)
{
    for (int j = 0; j < r->n_in; j++) {
        if (r->d_in[j]) dev->vt->free(dev, r->d_in[j]);
        free(r->h_in[j]);
        free(r->back_in[j]);
    }
    if (r->d_out) dev->vt->free(dev, r->d_out);
    if (r->d_scratch) dev->vt->free(dev, r->d_scratch);
    if (r->d_scale) dev->vt->free(dev, r->d_scale);
    free(r->h_out);
    free(r->back_out);
    free(r->h_scratch);
    ir_free(r->g);
    diag_free(&r->diags);
}

/* ---- comparing ---- */

/* The case as it ran: "matmul(f32[13,7], f32[7,5]) -> f32[13,5] {0,1}". */
static const char *opr_str(const op_run *r, char *buf, size_t n)
{
    char t[96];
    size_t k = (size_t)snprintf(buf, n, "%s(", ops_name(r->c->op));
    for (int j = 0; j < r->n_in && k < n; j++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? ", " : "",
                              ir_type_str(r->in_t[j], t, sizeof t));
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, ") -> %s", ir_type_str(&r->n->type, t, sizeof t));
    if (k < n)
        snprintf(buf + k, n - k, " i={%lld,%lld,%lld} f0=%g", (long long)r->n->attr.i[0],
                 (long long)r->n->attr.i[1], (long long)r->n->attr.i[2], r->n->attr.f[0]);
    return buf;
}

static int f32_close(float got, float want, tolerance tl, double norm)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    double d = fabs((double)got - want), w = fabs((double)want);
    switch (tl.kind) {
    case T_MASK:
        return (got == 0.0f) == (want == 0.0f) && d <= tl.rtol * w;
    case T_ELEM:
        return d <= tl.rtol * (w > 1 ? w : 1);
    case T_LOOSE:
        return d <= tl.rtol * (w > norm ? w : norm);
    default:
        return got == want;
    }
}

/* 0 when got matches want (what: "output", "input 2"); else 1, after
 * printing the first element that does not.  T_LOOSE measures against
 * the largest |want| of the buffer, or floor if that is larger. */
static int compare(const op_run *r, const char *what, const ir_type *t, const void *got,
                   const void *want, tolerance tl, double floor)
{
    int64_t n = ir_numel(t), bad = -1, n_bad = 0;
    double norm = floor > 1e-30 ? floor : 1e-30, g = 0, w = 0;
    if (t->dtype == DT_F32)
        for (int64_t i = 0; i < n; i++) {
            double v = fabs((double)((const float *)want)[i]);
            if (isfinite(v) && v > norm) norm = v;
        }
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (t->dtype == DT_I32) {
            ok = ((const int32_t *)got)[i] == ((const int32_t *)want)[i];
        } else {
            ok = f32_close(((const float *)got)[i], ((const float *)want)[i],
                           t->dtype == DT_F32 ? tl : (tolerance){T_EXACT, 0}, norm);
        }
        if (ok) continue;
        if (bad < 0) bad = i;
        n_bad++;
    }
    if (bad < 0) return 0;
    if (t->dtype == DT_I32) {
        g = ((const int32_t *)got)[bad], w = ((const int32_t *)want)[bad];
    } else {
        g = ((const float *)got)[bad], w = ((const float *)want)[bad];
    }
    char buf[320];
    print_error("%s: %s: %s differs in %lld of %lld elements; first at %lld: got %.9g, cpu %.9g "
                "(max |cpu| %.3g)\n",
                the->name, opr_str(r, buf, sizeof buf), what, (long long)n_bad, (long long)n,
                (long long)bad, g, w, norm);
    return 1;
}

/* The scale a sum's rounding error grows with, when the sum cancels (a
 * whole-tensor sum of mixed signs can come out near 0, far below its
 * terms): each output's k terms summed in another order differ by about
 * eps * sqrt(k) * their typical size, so the floor is sqrt(k) times the mean
 * |term| (divided by k for a mean).  Missing or doubling one term still
 * fails: it moves the sum by a term's size, sqrt(k) * 1e4 times more than
 * the 1e-4 tolerance allows.  0 for other ops. */
static double sum_floor(const op_run *r)
{
    if ((r->c->op != OP_SUM && r->c->op != OP_MEAN) || r->in_t[0]->dtype != DT_F32) return 0;
    int64_t n = ir_numel(r->in_t[0]), outs = ir_numel(&r->n->type);
    if (n == 0 || outs == 0) return 0;
    double mass = 0, k = (double)n / (double)outs;
    for (int64_t i = 0; i < n; i++) mass += fabs((double)((const float *)r->h_in[0])[i]);
    double floor = mass / (double)n * sqrt(k);
    return r->c->op == OP_MEAN ? floor / k : floor;
}

/* Inputs that are variables may be written (by updates): they are compared
 * within the op's tolerance; every other input must be unchanged. */
static int opr_compare(const op_run *r)
{
    tolerance tl = op_tolerance(r->c->op);
    int bad = r->out_bytes
                  ? compare(r, "output", &r->n->type, r->back_out, r->h_out, tl, sum_floor(r))
                  : 0;
    for (int j = 0; j < r->n_in; j++) {
        char what[24];
        snprintf(what, sizeof what, "input %d", j);
        int is_var = r->g->nodes[r->n->in[j]].op == OP_VARIABLE;
        bad += compare(r, what, r->in_t[j], r->back_in[j], r->h_in[j],
                       is_var ? tl : (tolerance){T_EXACT, 0}, 0);
    }
    return bad;
}

/* Runs case c once (the letters as drawn); 0 when the device agrees. */
static int run_case(const dev_case *c)
{
    op_run r;
    char buf[320];
    opr_build(&r, c);
    opr_fill(&r);
    opr_upload(&r);
    if (opr_cpu(&r) != 0)
        fail_msg("cpu: %s faulted: %s", opr_str(&r, buf, sizeof buf), r.h_fault.msg);
    opr_launch(&r);
    const kern_args *failed = dev->vt->queue_sync(dev, queue);
    int bad = 0;
    if (failed) {
        print_error("%s: %s faulted: %s\n", the->name, opr_str(&r, buf, sizeof buf),
                    failed->fault->msg);
        bad = 1;
    } else {
        opr_download(&r);
        bad = opr_compare(&r) > 0;
    }
    opr_free(&r);
    return bad;
}

static void draw_letters(void)
{
    for (int k = 0; k < 8; k++)
        sym[k] = letter_sizes[rnd() % (sizeof letter_sizes / sizeof *letter_sizes)];
}

/* ---- the tests ---- */

/* Every op with a kernel on the device has a case, and every case agrees
 * with the CPU.  All cases run before the test fails, so one run on a GPU
 * names every op that is wrong; a line per op goes out first, so a kernel
 * that crashes the process is named by the last line printed. */
static void test_every_op_matches_the_cpu(void **state)
{
    (void)state;
    int bad_cases = 0, bad_ops = 0, n_cases = 0, missing = 0, absent = 0;
    const size_t n_table = sizeof cases / sizeof *cases;
    for (int op = 0; op < OP_COUNT; op++) {
        if (ops_has(op, OPF_SOURCE)) continue;
        if (!dev->vt->kernels[op]) {
            printf("  %-18s no kernel on %s: not tested\n", ops_name(op), the->name);
            absent++;
            continue;
        }
        printf("  %-18s ", ops_name(op));
        fflush(stdout);
        int ran = 0, bad = 0;
        for (size_t k = 0; k < n_table; k++) {
            if (cases[k].op != (op_kind)op) continue;
            int reps = has_letters(&cases[k]) ? REPS : 1;
            for (int rep = 0; rep < reps; rep++, ran++) {
                draw_letters();
                bad += run_case(&cases[k]);
            }
        }
        if (ran == 0) {
            printf("NO CASE: add one to the table of tests/test_devices.c\n");
            missing++;
            continue;
        }
        printf(bad ? "%d of %d runs differ\n" : "%d runs ok\n", bad ? bad : ran, ran);
        n_cases += ran;
        bad_cases += bad;
        bad_ops += bad > 0;
    }
    printf("%s: %d runs, %d ops differ from the cpu, %d without a case, %d without a kernel\n",
           the->name, n_cases, bad_ops, missing, absent);
    assert_int_equal(missing, 0);
    assert_int_equal(bad_cases, 0);
}

/* --stale-lr (kern_args.lr_scale): every update with a learning rate,
 * scaled by 0.375 on the device, agrees with the CPU scaled alike. */
static void test_updates_scale_their_lr_as_the_cpu(void **state)
{
    (void)state;
    int bad = 0, ran = 0;
    lr_factor = 0.375f;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (!ops_has_lr(cases[k].op) || !dev->vt->kernels[cases[k].op]) continue;
        draw_letters();
        bad += run_case(&cases[k]);
        ran++;
    }
    lr_factor = 0;
    printf("%s: %d scaled updates, %d differ from the cpu\n", the->name, ran, bad);
    assert_true(ran > 0);
    assert_int_equal(bad, 0);
}

/* The CPU's update of case c scaled by f leaves exactly what the update
 * with its learning rate multiplied by f leaves (an input, or
 * apply_sgd_matmul's attribute). */
static void check_scaled_is_smaller_lr(const dev_case *c, float f)
{
    op_run r;
    opr_build(&r, c);
    opr_fill(&r);
    r.h_scratch = xmalloc0(r.scratch_bytes);
    void *want[MAX_IN];
    for (int j = 0; j < r.n_in; j++) {
        want[j] = xmalloc0(r.in_bytes[j]);
        memcpy(want[j], r.h_in[j], r.in_bytes[j]);
    }
    ir_node small = *r.n;
    if (c->op == OP_APPLY_SGD_MATMUL)
        small.attr.f[ATTR_SGDMM_LR] *= f;
    else
        ((float *)want[r.n_in - 2])[0] *= f;
    kern_args a = opr_args(&r, NULL, want, r.h_scratch, &r.h_fault);
    a.node = &small;
    assert_int_equal(dev_kern_run(cpu_kernels[c->op], &a), 0);
    r.ha = opr_args(&r, NULL, r.h_in, r.h_scratch, &r.h_fault);
    r.ha.lr_scale = &f;
    assert_int_equal(dev_kern_run(cpu_kernels[c->op], &r.ha), 0);
    ((float *)want[r.n_in - 2])[0] = ((float *)r.h_in[r.n_in - 2])[0]; /* the lr itself */
    for (int j = 0; j < r.n_in; j++) {
        assert_memory_equal(r.h_in[j], want[j], r.in_bytes[j]);
        free(want[j]);
    }
    opr_free(&r);
}

static void test_a_scaled_update_is_one_with_a_smaller_lr(void **state)
{
    (void)state;
    if (strcmp(the->name, "sim") != 0) skip(); /* the CPU's kernels: once is enough */
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        if (ops_has_lr(cases[k].op) && cases[k].op != OP_APPLY_SGD_ALLREDUCE) {
            draw_letters();
            check_scaled_is_smaller_lr(&cases[k], 0.375f);
        }
}

/* clip_scale over more gradients than one launch of its CUDA chunk kernel
 * takes, some of more than one chunk. */
static void test_clip_scale_of_many_gradients_matches_the_cpu(void **state)
{
    (void)state;
    dev_case c = {.op = OP_CLIP_SCALE, .f = {0.5}};
    for (int k = 0; k < MAX_IN; k++) c.in[k] = k % 3 ? "f32[a,b]" : "f32[20000]";
    draw_letters();
    assert_int_equal(run_case(&c), 0);
}

/* ---- the harness catches a wrong kernel ---- */

static kernel_fn bad_table[OP_COUNT];

/* add is wrong in its last element. */
static int bad_add(const kern_args *a)
{
    int r = cpu_kernels[OP_ADD](a);
    ((float *)a->out)[ir_numel(a->out_t) - 1] += 0.5f;
    return r;
}

/* relu writes nothing. */
static int bad_relu(const kern_args *a)
{
    (void)a;
    return 0;
}

/* exp is right but scribbles on its input. */
static int bad_exp(const kern_args *a)
{
    int r = cpu_kernels[OP_EXP](a);
    ((float *)a->in[0])[0] = 42.0f;
    return r;
}

/* tanh is 2e-6 off (within its tolerance). */
static int near_tanh(const kern_args *a)
{
    int r = cpu_kernels[OP_TANH](a);
    for (int64_t i = 0; i < ir_numel(a->out_t); i++) ((float *)a->out)[i] *= 1.000002f;
    return r;
}

/* sum counts its largest term twice: the smallest bug a sum can have. */
static int far_sum(const kern_args *a)
{
    int r = cpu_kernels[OP_SUM](a);
    const float *x = a->in[0];
    float big = 0;
    for (int64_t i = 0; i < ir_numel(a->in_t[0]); i++)
        if (fabsf(x[i]) > fabsf(big)) big = x[i];
    ((float *)a->out)[0] += big;
    return r;
}

/* The simulated GPU with the wrong kernels above runs the table's cases:
 * each wrong one is reported, the close one is not.  (The comparison of a
 * device that runs the CPU's own kernels could pass by accident.) */
static void test_the_harness_catches_wrong_kernels(void **state)
{
    (void)state;
    if (strcmp(the->name, "sim") != 0) skip(); /* a check of this file, not of the device */
    memcpy(bad_table, cpu_kernels, sizeof bad_table);
    bad_table[OP_ADD] = bad_add, bad_table[OP_RELU] = bad_relu, bad_table[OP_EXP] = bad_exp;
    bad_table[OP_TANH] = near_tanh, bad_table[OP_SUM] = far_sum;
    table = bad_table;
    static const dev_case add = {.op = OP_ADD, {"f32[5,7]", "f32[7]"}};
    static const dev_case relu = {.op = OP_RELU, {"f32[5,7]"}};
    static const dev_case exp_ = {.op = OP_EXP, {"f32[5,7]"}};
    static const dev_case tanh_ = {.op = OP_TANH, {"f32[301,1031]"}};
    static const dev_case sum = {.op = OP_SUM, {"f32[513,1031]"}, {ALL, 0}};
    printf("  (the harness's own check: four differences are expected below)\n");
    int caught = run_case(&add) + run_case(&relu) + run_case(&exp_) + run_case(&sum);
    int passed = !run_case(&tanh_);
    table = NULL;
    assert_int_equal(caught, 4);
    assert_true(passed);
}

/* A case whose ids input gets one id out of range. */
typedef struct fault_case {
    dev_case c;
    int ids_in;    /* which input holds the ids */
    int64_t index; /* where the bad one goes, flat */
    int32_t value; /* the bad id */
} fault_case;

static const fault_case faults[] = {
    {{.op = OP_GATHER, {"f32[3,2]", "i32[2,2]"}, .fills = {ANY, IDS}}, 1, 2, 3},
    {{.op = OP_GATHER_GRAD, {"f32[2,2,2]", "i32[2,2]"}, .list = "3,2", .fills = {ANY, IDS}},
     1,
     3,
     -1},
    {{.op = OP_APPLY_SGD_ROWS,
      {"var:f32[3,2]", "f32[2,2,2]", "i32[2,2]", "f32[]", "f32[]"},
      .fills = {ANY, ANY, IDS, LR, POS}},
     2,
     1,
     7},
    {{.op = OP_APPLY_MOMENTUM_ROWS,
      {"var:f32[3,2]", "f32[2,2,2]", "i32[2,2]", "var:f32[3,2]", "f32[]", "f32[]"},
      {0, 0, 0},
      {0, 0.9},
      .fills = {ANY, ANY, IDS, ANY, LR, POS}},
     2,
     3,
     3},
    {{.op = OP_APPLY_ADAM_ROWS,
      {"var:f32[3,2]", "f32[2,2]", "i32[2]", "var:f32[3,2]", "var:f32[3,2]", "var:f32[]", "f32[]",
       "f32[]"},
      .f = {0, 0.9, 0.999, 1e-8},
      .fills = {ANY, ANY, IDS, ANY, POS, STEP, LR, POS}},
     2,
     0,
     -2},
    {{.op = OP_APPLY_ADAGRAD_ROWS,
      {"var:f32[3,2]", "f32[2,2,2]", "i32[2,2]", "var:f32[3,2]", "f32[]", "f32[]"},
      .f = {0, 0, 0, 1e-10},
      .fills = {ANY, ANY, IDS, POS, LR, POS}},
     2,
     1,
     3},
    {{.op = OP_APPLY_RMSPROP_ROWS,
      {"var:f32[3,2]", "f32[2,2]", "i32[2]", "var:f32[3,2]", "f32[]", "f32[]"},
      .f = {0, 0.99, 0, 1e-8},
      .fills = {ANY, ANY, IDS, POS, LR, POS}},
     2,
     0,
     -1},
    {{.op = OP_APPLY_ADADELTA_ROWS,
      {"var:f32[3,2]", "f32[2,2]", "i32[2]", "var:f32[3,2]", "var:f32[3,2]", "f32[]", "f32[]"},
      .f = {0, 0.9, 0, 1e-6},
      .fills = {ANY, ANY, IDS, POS, POS, LR, POS}},
     2,
     1,
     5},
    {{.op = OP_ONE_HOT, {"i32[2,2]"}, {3}, .fills = {IDS}}, 0, 2, 3},
    {{.op = OP_SOFTMAX_XENT, {"f32[2,3]", "i32[2]"}, .fills = {ANY, IDS}}, 1, 1, -1},
    {{.op = OP_XENT_GRAD, {"f32[2,3]", "i32[2]", "f32[2]"}, .fills = {ANY, IDS, ANY}}, 1, 0, 3},
};

static void opr_fault_ready(op_run *r, const fault_case *fc)
{
    opr_build(r, &fc->c);
    opr_fill(r);
    ((int32_t *)r->h_in[fc->ids_in])[fc->index] = fc->value;
    opr_upload(r);
}

/* The message names the bad value and the bound. */
static void check_fault_msg(const op_run *r, const fault_case *fc, const char *msg)
{
    char want[64];
    snprintf(want, sizeof want, "%d at ", fc->value);
    if (!strstr(msg, want))
        fail_msg("%s: %s fault '%s' lacks '%s'", the->name, ops_name(fc->c.op), msg, want);
    snprintf(want, sizeof want, "outside [0, %lld)", (long long)ids_limit(r));
    if (!strstr(msg, want))
        fail_msg("%s: %s fault '%s' lacks '%s'", the->name, ops_name(fc->c.op), msg, want);
}

/* Each op that reads ids faults on one out of range, on the CPU and on the
 * device, where queue_sync returns the failing call with its message. */
static void test_ids_out_of_range_come_back_from_queue_sync(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof faults / sizeof *faults; k++) {
        const fault_case *fc = &faults[k];
        if (!dev->vt->kernels[fc->c.op]) continue;
        op_run r;
        opr_fault_ready(&r, fc);
        assert_int_equal(opr_cpu(&r), -1);
        check_fault_msg(&r, fc, r.h_fault.msg);
        opr_launch(&r);
        const kern_args *failed = dev->vt->queue_sync(dev, queue);
        if (failed != &r.da)
            fail_msg("%s: %s with id %d out of range: queue_sync returned %s", the->name,
                     ops_name(fc->c.op), fc->value, failed ? "another call" : "no failure");
        check_fault_msg(&r, fc, failed->fault->msg);
        opr_free(&r);
    }
}

/* Among several calls on one queue, the failing one is returned, and the
 * queue works again after the sync: the next sync reports nothing. */
static void test_the_failing_call_of_several_is_named(void **state)
{
    (void)state;
    static const dev_case add = {.op = OP_ADD, {"f32[5,7]", "f32[7]"}};
    const fault_case *gather = &faults[0];
    if (!dev->vt->kernels[OP_ADD] || !dev->vt->kernels[OP_GATHER]) skip();
    op_run a, b, c;
    opr_build(&a, &add);
    opr_fill(&a);
    opr_upload(&a);
    opr_fault_ready(&b, gather);
    opr_build(&c, &add);
    opr_fill(&c);
    opr_upload(&c);
    opr_launch(&a);
    opr_launch(&b);
    opr_launch(&c);
    const kern_args *failed = dev->vt->queue_sync(dev, queue);
    assert_ptr_equal(failed, &b.da);
    check_fault_msg(&b, gather, failed->fault->msg);
    opr_launch(&a);
    assert_null(dev->vt->queue_sync(dev, queue));
    assert_int_equal(opr_cpu(&a), 0);
    opr_download(&a);
    assert_int_equal(opr_compare(&a), 0);
    opr_free(&a);
    opr_free(&b);
    opr_free(&c);
}

/* ---- gradients on gpu:0, through the public API ---- */

/* y = expr of variables x0..x2 placed @gpu:0; loss = sum(y^2)/2 trained
 * with sgd(1.0), so one step moves each variable by its gradient. */
typedef struct grad_case {
    const char *vars;
    const char *expr;
    int spaced[3]; /* a grid 0.05 apart, no kink or tie within EPS */
} grad_case;

static const grad_case grad_cases[] = {
    {.vars = "var x0 = zeros([3, 4])\n  var x1 = zeros([4, 5])", "matmul(x0, x1)"},
    {.vars = "var x0 = zeros([4, 3])\n  var x1 = zeros([5, 4])",
     "matmul(x0, x1, transpose_a=true, transpose_b=true)"},
    {.vars = "var x0 = zeros([3, 4])\n  var x1 = zeros([4])", "exp(x0) / (x1 * x1 + 1) - x0"},
    {.vars = "var x0 = zeros([3, 5])", "tanh(x0) * sigmoid(x0)"},
    {.vars = "var x0 = zeros([3, 5])", "relu(x0)", {1}},
    {.vars = "var x0 = zeros([3, 5])", "softmax(x0)"},
    {.vars = "var x0 = zeros([3, 5])", "log_softmax(x0)"},
    {.vars = "var x0 = zeros([4, 5])\n  lab = cast([1, 0, 4, 2], dtype=\"i32\")",
     "softmax_xent(x0, lab)"},
    {.vars = "var x0 = zeros([3, 4])\n  var x1 = zeros([3, 4])", "mse(x0, x1)"},
    {.vars = "var x0 = zeros([2, 3, 4])", "mean(x0, axis=-1) + 0.5"},
    {.vars = "var x0 = zeros([3, 4])", "sum(x0, axis=0)"},
    {.vars = "var x0 = zeros([3, 4])", "max(x0, axis=1)", {1}},
    {.vars = "var x0 = zeros([2, 3])\n  var x1 = zeros([2, 2])",
     "slice(concat([x0, x1], axis=1), axis=1, begin=1, end=4)"},
    {.vars = "var x0 = zeros([2, 3, 4])", "transpose(x0, perm=[2, 0, 1])"},
    {.vars = "var x0 = zeros([6, 3])\n  ids = cast([0, 5, 2, 2], dtype=\"i32\")",
     "gather(x0, ids)"},
    {.vars = "var x0 = zeros([2, 2, 5, 5])\n  var x1 = zeros([3, 2, 3, 3])",
     "conv2d(x0, x1, stride=1, padding=1)"},
    {.vars = "var x0 = zeros([1, 2, 6, 6])\n  var x1 = zeros([2, 2, 3, 3])",
     "conv2d(x0, x1, stride=2, padding=0)"},
    {.vars = "var x0 = zeros([1, 2, 4, 4])", "maxpool2d(x0, size=2)", {1}},
    {.vars = "var x0 = zeros([1, 2, 4, 4])", "avgpool2d(x0, size=2, stride=1)"},
    {.vars = "var x0 = zeros([1, 2, 5, 5])", "maxpool2d(x0, size=2, padding=\"same\")", {1}},
    {.vars = "var x0 = zeros([1, 2, 5, 4])", "avgpool2d(x0, size=3, stride=2, padding=1)"},
    {.vars = "var x0 = zeros([2, 3, 4])\n  var x1 = zeros([4, 5])", "x0 @ x1"},
    {.vars = "var x0 = zeros([2, 1, 3, 4])\n  var x1 = zeros([3, 5, 4])",
     "matmul(x0, x1, transpose_b=true)"},
    {.vars = "var x0 = zeros([2, 4, 4])", "softmax(x0, mask=\"causal\")"},
    {.vars = "var x0 = zeros([3, 8])\n  var x1 = zeros([8])\n  var x2 = zeros([8])",
     "layernorm(x0, x1 + 1, x2)"},
    {.vars = "var x0 = zeros([3, 5])", "gelu(x0)"},
    {.vars = "var x0 = zeros([2, 5, 2, 3])", "lrn(x0, depth_radius=1, alpha=0.5, beta=0.75)"},
    {.vars = "var x0 = zeros([2, 2, 3, 4])", "rope(x0, base=10.0) + x0"},
    {.vars = "var x0 = zeros([2, 3])\n  var x1 = zeros([8])\n  var x2 = zeros([2, 4])",
     "lstm(x0, lstm(x0 * 0.5, x2, zeros([5, 8]) + 0.3, x1), zeros([5, 8]) - 0.2, x1)"},
    {.vars = "var x0 = zeros([2, 3])\n  var x1 = zeros([6])\n  var x2 = zeros([2, 2])",
     "gru(x0, gru(x0 * 0.5, x2, zeros([3, 6]) + 0.3, ones([2, 6]) - 1.5, x1, x1 * 0.5), "
     "zeros([3, 6]) - 0.2, ones([2, 6]) * 0.7, x1, x1)"},
    {.vars = "var x0 = zeros([2, 4, 3, 2])\n  var x1 = zeros([4])\n  var x2 = zeros([4])",
     "groupnorm(x0, x1 + 1.0, x2, groups=2)"},
    /* the sequence forms: 3 steps of x0 [B, T, X], slices' gradients concatenated */
    {.vars = "var x0 = zeros([2, 3, 3])\n  var x1 = zeros([8])\n  var x2 = zeros([2, 4])",
     "lstm_seq(x0, x2, zeros([5, 8]) + 0.3, x1)[0]"},
    {.vars = "var x0 = zeros([2, 3, 3])\n  var x1 = zeros([6])\n  var x2 = zeros([2, 2])",
     "gru_seq(x0, x2, zeros([3, 6]) + 0.3, ones([2, 6]) - 1.5, x1, x1 * 0.5)[1]"},
};

#define GC_EPS   1e-2
#define GC_TOL   1e-3 /* finite differences of an f32 program, as test_gradcheck */
#define GC_MATCH 1e-4 /* the device's gradient against the CPU's: sums in another order */
#define GC_MAX   256

typedef struct gc_side {
    gr_program *p;
    gr_session *s;
    gr_status *st;
} gc_side;

#define gc_ok(call, side)                                                                          \
    do {                                                                                           \
        if ((call) != GR_OK) fail_msg("%s: %s", #call, gr_status_message((side)->st));             \
    } while (0)

static void gc_open(gc_side *side, const grad_case *c, const char *device, const char *devices)
{
    char text[1024];
    snprintf(text, sizeof text,
             "scope dev @%s {\n  %s\n  y = %s\n}\nloss = sum(y * y) / 2 @%s\n"
             "train = sgd(1.0).minimize(loss)\n",
             device, c->vars, c->expr, device);
    gr_compile_options o = {.devices = devices};
    side->st = gr_status_new();
    gc_ok(gr_compile_string("gradcheck.graph", text, strlen(text), &o, &side->p, side->st), side);
    gc_ok(gr_session_new(side->p, NULL, &side->s, side->st), side);
}

static void gc_close(gc_side *side)
{
    gr_session_free(side->s);
    gr_program_free(side->p);
    gr_status_free(side->st);
}

static int gc_n_vars(const grad_case *c)
{
    int n = 0;
    while (n < 3) {
        char name[24];
        snprintf(name, sizeof name, "var x%d", n);
        if (!strstr(c->vars, name)) break;
        n++;
    }
    return n;
}

static size_t gc_var_bytes(gc_side *side, const char *name)
{
    gr_tensor *t = NULL;
    gc_ok(gr_variable_get(side->s, name, &t, side->st), side);
    size_t b = gr_tensor_bytes(t);
    gr_tensor_free(t);
    assert_true(b <= GC_MAX * sizeof(float));
    return b;
}

static void gc_fill(float *x, int n, int spaced)
{
    for (int i = 0; i < n; i++) x[i] = spaced ? (float)(0.05 * (i - n / 2) + 0.025) : frand(-1, 1);
    for (int i = n - 1; spaced && i > 0; i--) {
        int k = (int)(rnd() % (uint32_t)(i + 1));
        float t = x[i];
        x[i] = x[k], x[k] = t;
    }
}

/* One sgd(1.0) step from x: the gradient is x - x_after, per variable. */
static void gc_gradient(gc_side *side, int n_vars, float x[][GC_MAX], const size_t *bytes,
                        float g[][GC_MAX])
{
    char name[24];
    for (int v = 0; v < n_vars; v++) {
        snprintf(name, sizeof name, "dev/x%d", v);
        gc_ok(gr_variable_write(side->s, name, x[v], bytes[v], side->st), side);
    }
    gc_ok(gr_run(side->s, "train", NULL, 0, NULL, 0, side->st), side);
    for (int v = 0; v < n_vars; v++) {
        snprintf(name, sizeof name, "dev/x%d", v);
        gc_ok(gr_variable_read(side->s, name, g[v], bytes[v], side->st), side);
        for (size_t i = 0; i < bytes[v] / 4; i++) g[v][i] = x[v][i] - g[v][i];
        gc_ok(gr_variable_write(side->s, name, x[v], bytes[v], side->st), side);
    }
}

/* L = sum(y^2)/2 in double on the host, with variable v's element i set. */
static double gc_loss(gc_side *side, int v, float *x, size_t bytes)
{
    char name[16];
    float y[GC_MAX * 4];
    snprintf(name, sizeof name, "dev/x%d", v);
    gc_ok(gr_variable_write(side->s, name, x, bytes, side->st), side);
    gr_fetch f = {"y", y, 0, NULL};
    gr_tensor *yt = NULL;
    gc_ok(gr_program_tensor(side->p, "y", &yt, side->st), side);
    f.bytes = gr_tensor_bytes(yt);
    gr_tensor_free(yt);
    assert_true(f.bytes <= sizeof y);
    gc_ok(gr_run(side->s, "y", NULL, 0, &f, 1, side->st), side);
    double l = 0;
    for (size_t i = 0; i < f.bytes / 4; i++) l += 0.5 * (double)y[i] * y[i];
    return l;
}

/* max |a - b| / max |b| over n elements. */
static double rel_err(const float *a, const double *b, size_t n)
{
    double e = 0, m = 1e-6;
    for (size_t i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        if (fabs(a[i] - b[i]) > e) e = fabs(a[i] - b[i]);
    }
    return e / m;
}

static int gc_case(const grad_case *c)
{
    static float x[3][GC_MAX], g_dev[3][GC_MAX], g_cpu[3][GC_MAX];
    size_t bytes[3] = {0};
    int n_vars = gc_n_vars(c), bad = 0;
    gc_side d, h;
    gc_open(&d, c, "gpu:0", the->devices);
    gc_open(&h, c, "cpu:0", "cpu:0");
    for (int v = 0; v < n_vars; v++) {
        char name[24];
        snprintf(name, sizeof name, "dev/x%d", v);
        bytes[v] = gc_var_bytes(&d, name);
        gc_fill(x[v], (int)(bytes[v] / 4), c->spaced[v]);
    }
    gc_gradient(&d, n_vars, x, bytes, g_dev);
    gc_gradient(&h, n_vars, x, bytes, g_cpu);
    for (int v = 0; v < n_vars; v++) {
        size_t n = bytes[v] / 4;
        double num[GC_MAX], cpu[GC_MAX];
        for (size_t i = 0; i < n; i++) {
            float save = x[v][i];
            x[v][i] = (float)(save + GC_EPS);
            double lp = gc_loss(&d, v, x[v], bytes[v]);
            x[v][i] = (float)(save - GC_EPS);
            double lm = gc_loss(&d, v, x[v], bytes[v]);
            x[v][i] = save;
            num[i] = (lp - lm) / (2 * GC_EPS);
            cpu[i] = g_cpu[v][i];
        }
        gc_loss(&d, v, x[v], bytes[v]); /* x restored */
        double e_num = rel_err(g_dev[v], num, n), e_cpu = rel_err(g_dev[v], cpu, n);
        if (e_num >= GC_TOL || e_cpu >= GC_MATCH) {
            print_error("%s: y = %s: d/dx%d relative error %.2e against finite differences, "
                        "%.2e against the cpu\n",
                        the->name, c->expr, v, e_num, e_cpu);
            bad++;
        }
    }
    gc_close(&d);
    gc_close(&h);
    return bad;
}

static void test_gradients_on_gpu0_match_finite_differences(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof grad_cases / sizeof *grad_cases; k++)
        bad += gc_case(&grad_cases[k]);
    assert_int_equal(bad, 0);
}

/* ---- main ---- */

static int setup(void **state)
{
    (void)state;
    cpu_blas_init();
    static const char text[] = "x = test_devices(case)\n";
    src = src_from_string("test_devices.graph", text, sizeof text - 1);
    dev = the->open();
    if (!dev || !src) return -1;
    queue = dev->vt->queue_new(dev);
    return queue ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dev->vt->queue_free(dev, queue);
    dev->vt->close(dev);
    src_free(src);
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "sim", *seed = getenv("GR_TEST_SEED");
    if (strcmp(which, "--gpu") == 0 || strcmp(which, "cuda") == 0) {
        const char *why = no_gpu_reason();
        if (why) return no_gpu(why);
        if (strcmp(which, "--gpu") == 0) return 0;
    }
    for (size_t k = 0; k < sizeof duts / sizeof *duts; k++)
        if (strcmp(duts[k].name, which) == 0) the = &duts[k];
    if (!the) {
        fprintf(stderr, "usage: test_devices [sim|cuda|--gpu]\n");
        return 2;
    }
    if (seed && *seed) {
        rng = strtoull(seed, NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
        printf("test_devices: GR_TEST_SEED=%s\n", seed);
    }
    /* e.g. GR_TEST_SKIP='*gradients*' under compute-sanitizer (gpu-check.sh) */
    if (getenv("GR_TEST_FILTER")) cmocka_set_test_filter(getenv("GR_TEST_FILTER"));
    if (getenv("GR_TEST_SKIP")) cmocka_set_skip_filter(getenv("GR_TEST_SKIP"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_matches_the_cpu),
        cmocka_unit_test(test_clip_scale_of_many_gradients_matches_the_cpu),
        cmocka_unit_test(test_updates_scale_their_lr_as_the_cpu),
        cmocka_unit_test(test_a_scaled_update_is_one_with_a_smaller_lr),
        cmocka_unit_test(test_the_harness_catches_wrong_kernels),
        cmocka_unit_test(test_ids_out_of_range_come_back_from_queue_sync),
        cmocka_unit_test(test_the_failing_call_of_several_is_named),
        cmocka_unit_test(test_gradients_on_gpu0_match_finite_differences),
    };
    return cmocka_run_group_tests_name(the->name, tests, setup, teardown);
}
