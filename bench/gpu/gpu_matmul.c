/* gpu_matmul.c - graphrun's CUDA matmul kernel, launched through the
 * device's vtable as the executor does, against cublasSgemm alone on the
 * same buffers, for square sizes and the MLP's shapes.
 *
 *   gpu_matmul [REPS]     prints a markdown table on stdout
 *
 * Both sides are timed the same way: REPS calls enqueued back to back on
 * one stream after a warm-up, then one sync, on the host's monotonic clock,
 * so launch costs count on both.  Exit 0, 1 when the kernel is missing or a
 * result differs from cuBLAS's, 77 without a GPU.  Built by
 * tests/cuda.cmake; run by scripts/gpu-check.sh. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler/ir.h"
#include "devices/cuda/cuda.h"

typedef struct shape {
    int64_t m, n, k;
    const char *what;
} shape;

static const shape shapes[] = {
    {64, 512, 784, "MLP fc1, batch 64"}, {64, 256, 512, "MLP fc2"},    {64, 10, 256, "MLP out"},
    {512, 512, 512, "square"},           {1024, 1024, 1024, "square"}, {2048, 2048, 2048, "square"},
    {4096, 4096, 4096, "square"},
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *dev_random(device_obj *d, int64_t n)
{
    float *h = malloc((size_t)n * sizeof *h), *p = d->vt->alloc(d, (size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) h[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
    d->vt->to_device(d, p, h, (size_t)n * sizeof *h);
    free(h);
    return p;
}

/* Seconds per call of graphrun's kernel; the result is left in c. */
static double time_graphrun(device_obj *d, dev_queue *q, const shape *s, void *a, void *b, void *c,
                            int reps)
{
    diag_list diags;
    diag_init(&diags);
    ir_graph *g = ir_new(&diags);
    src_file *src = src_from_string("gpu_matmul", "x", 1);
    ir_type at = {.dtype = DT_F32, .rank = 2, .dim = {s->m, s->k}};
    ir_type bt = {.dtype = DT_F32, .rank = 2, .dim = {s->k, s->n}};
    int in[2] = {ir_add_input(g, "a", &at, src, (src_span){0, 1}),
                 ir_add_input(g, "b", &bt, src, (src_span){0, 1})};
    ir_attrs attrs = {.n_list = 0};
    int id = ir_add(g, OP_MATMUL, in, 2, &attrs, src, (src_span){0, 1});
    void *ins[2] = {a, b};
    const ir_type *in_t[2] = {&g->nodes[in[0]].type, &g->nodes[in[1]].type};
    kern_fault fault = {{0}};
    kern_args args = {.g = g,
                      .node = &g->nodes[id],
                      .out = c,
                      .out_t = &g->nodes[id].type,
                      .n_in = 2,
                      .in = ins,
                      .in_t = in_t,
                      .max_tasks = 1,
                      .fault = &fault,
                      .queue = q};
    for (int i = 0; i < 3; i++) d->vt->launch(d, q, cuda_kernels[OP_MATMUL], &args);
    d->vt->queue_sync(d, q);
    double t0 = now_s();
    for (int i = 0; i < reps; i++) d->vt->launch(d, q, cuda_kernels[OP_MATMUL], &args);
    d->vt->queue_sync(d, q);
    double t = (now_s() - t0) / reps;
    ir_free(g);
    src_free(src);
    diag_free(&diags);
    return t;
}

/* Seconds per cublasSgemm of row-major C = A B (C^T = B^T A^T). */
static double time_cublas(const shape *s, const float *a, const float *b, float *c, int reps)
{
    cublasHandle_t h;
    cudaStream_t st;
    const float one = 1.0f, zero = 0.0f;
    int m = (int)s->m, n = (int)s->n, k = (int)s->k;
    cudaStreamCreate(&st);
    cublasCreate(&h);
    cublasSetStream(h, st);
    for (int i = 0; i < 3; i++)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
    cudaStreamSynchronize(st);
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
    cudaStreamSynchronize(st);
    double t = (now_s() - t0) / reps;
    cublasDestroy(h);
    cudaStreamDestroy(st);
    return t;
}

/* max |x - y| / max |y| over n elements of two device buffers. */
static double rel_diff(device_obj *d, const float *x, const float *y, int64_t n)
{
    float *hx = malloc((size_t)n * 4), *hy = malloc((size_t)n * 4);
    d->vt->to_host(d, hx, x, (size_t)n * 4);
    d->vt->to_host(d, hy, y, (size_t)n * 4);
    double e = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(hy[i]) > m) m = fabs(hy[i]);
        if (!(fabs(hx[i] - hy[i]) <= e)) e = fabs(hx[i] - hy[i]);
    }
    free(hx);
    free(hy);
    return e / m;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 50, bad = 0;
    if (cuda_device_count() < 1) {
        printf("gpu_matmul: no usable CUDA GPU: skipped\n");
        return 77;
    }
    if (!cuda_kernels[OP_MATMUL]) {
        printf("gpu_matmul: the CUDA device has no matmul kernel\n");
        return 1;
    }
    device_obj *d = cuda_device_new(IR_DEV(DEV_GPU, 0));
    dev_queue *q = d->vt->queue_new(d);
    printf(
        "| matmul m x n x k | what | graphrun µs | cuBLAS µs | graphrun TFLOP/s | cuBLAS "
        "TFLOP/s | cuBLAS / graphrun time | max rel diff |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        float *a = dev_random(d, s->m * s->k), *b = dev_random(d, s->k * s->n);
        float *c1 = d->vt->alloc(d, (size_t)(s->m * s->n) * 4),
              *c2 = d->vt->alloc(d, (size_t)(s->m * s->n) * 4);
        int r = s->m * s->n * s->k > (int64_t)1 << 30 ? reps / 5 + 1 : reps;
        double tg = time_graphrun(d, q, s, a, b, c1, r), tc = time_cublas(s, a, b, c2, r);
        double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k,
               e = rel_diff(d, c1, c2, s->m * s->n);
        bad += !(e < 1e-4);
        printf("| %lld x %lld x %lld | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.1e |\n",
               (long long)s->m, (long long)s->n, (long long)s->k, s->what, tg * 1e6, tc * 1e6,
               flop / tg / 1e12, flop / tc / 1e12, tc / tg, e);
        d->vt->free(d, a), d->vt->free(d, b), d->vt->free(d, c1), d->vt->free(d, c2);
    }
    d->vt->queue_free(d, q);
    d->vt->close(d);
    return bad ? 1 : 0;
}
