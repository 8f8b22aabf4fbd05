// device.cu - the CUDA device object and its vtable: memory, pinned host
// memory, copies, queues (a stream and a cuBLAS handle each), events, and
// the fault check that queue_sync reads back.  Every call first makes the
// device's GPU current on the calling thread (cudaSetDevice is cheap and
// thread-local), since executors and partitions run on threads of their own.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.cuh"

struct dev_event {
    int device;
    cudaEvent_t ev;
};

static int gpu_of(const device_obj *d)
{
    return IR_DEV_INDEX(d->id);
}

static void where(const kern_args *a, char *buf, size_t n)
{
    buf[0] = 0;
    if (!a || !a->node) return;
    int line = 0, col = 0;
    if (a->node->src) src_linecol(a->node->src, a->node->span.begin, &line, &col);
    snprintf(buf, n, " (%s at %s:%d:%d)", ops_name(a->node->op),
             a->node->src ? a->node->src->name : "?", line, col);
}

void cuda_check_rt(cudaError_t e, const char *call, const char *file, int line, const kern_args *a)
{
    if (e == cudaSuccess) return;
    char w[256];
    where(a, w, sizeof w);
    fatal("%s:%d: %s failed: %s%s", file, line, call, cudaGetErrorString(e), w);
}

void cuda_check_blas(cublasStatus_t e, const char *call, const char *file, int line,
                     const kern_args *a)
{
    if (e == CUBLAS_STATUS_SUCCESS) return;
    char w[256];
    where(a, w, sizeof w);
    fatal("%s:%d: %s failed: cuBLAS status %d%s", file, line, call, (int)e, w);
}

// ---- memory and synchronous copies ----

static void *cu_alloc(device_obj *d, size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        cudaGetLastError(); // out of memory is an answer, not a sticky error
        return NULL;
    }
    return p;
}

static void cu_free(device_obj *d, void *p)
{
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    CUDA_CHECK(cudaFree(p), NULL);
}

static void *cu_host_alloc(device_obj *d, size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    if (cudaMallocHost(&p, bytes ? bytes : 64) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cu_host_free(device_obj *d, void *p)
{
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    CUDA_CHECK(cudaFreeHost(p), NULL);
}

static void cu_to_device(device_obj *d, void *dst, const void *src, size_t n)
{
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), NULL);
}

static void cu_to_host(device_obj *d, void *dst, const void *src, size_t n)
{
    CUDA_CHECK(cudaSetDevice(gpu_of(d)), NULL);
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost), NULL);
}

// ---- queues ----

static dev_queue *cu_queue_new(device_obj *d)
{
    dev_queue *q = (dev_queue *)base_xcalloc(1, sizeof *q);
    q->device = gpu_of(d);
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking), NULL);
    CUBLAS_CHECK(cuda_blas.create(&q->blas), NULL);
    CUBLAS_CHECK(cuda_blas.set_stream(q->blas, q->stream), NULL);
    // cuBLAS's workspace given once, so no GEMM allocates (nor may, inside a
    // step graph's capture).
    CUDA_CHECK(cudaMalloc(&q->blas_ws, CUDA_BLAS_WORKSPACE), NULL);
    CUBLAS_CHECK(cuda_blas.set_workspace(q->blas, q->blas_ws, CUDA_BLAS_WORKSPACE), NULL);
    CUDA_CHECK(cudaMalloc(&q->fault, sizeof *q->fault), NULL);
    CUDA_CHECK(cudaMemset(q->fault, 0, sizeof *q->fault), NULL);
    CUDA_CHECK(cudaMallocHost(&q->fault_host, sizeof *q->fault_host), NULL);
    const float one = 1.0f;
    CUDA_CHECK(cudaMalloc(&q->one, sizeof *q->one), NULL);
    CUDA_CHECK(cudaMemcpy(q->one, &one, sizeof one, cudaMemcpyHostToDevice), NULL);
    return q;
}

static void cu_queue_free(device_obj *d, dev_queue *q)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaStreamSynchronize(q->stream), NULL);
    CUBLAS_CHECK(cuda_blas.destroy(q->blas), NULL);
    CUDA_CHECK(cudaFree(q->fault), NULL);
    CUDA_CHECK(cudaFree(q->blas_ws), NULL);
    CUDA_CHECK(cudaFree(q->one), NULL);
    CUDA_CHECK(cudaFreeHost(q->fault_host), NULL);
    CUDA_CHECK(cudaStreamDestroy(q->stream), NULL);
    free(q->launched);
    free(q);
}

// The kernel runs on this thread and enqueues its work on q's stream; its
// launch number (q->seq) names it in a fault report.
static void cu_launch(device_obj *d, dev_queue *q, kernel_fn fn, const kern_args *a)
{
    (void)d;
    if (++q->seq >= q->cap_launched) {
        q->cap_launched = q->cap_launched ? 2 * q->cap_launched : 256;
        q->launched = (const kern_args **)base_xreallocarray(q->launched, (size_t)q->cap_launched,
                                                             sizeof *q->launched);
    }
    q->launched[q->seq] = a;
    CUDA_CHECK(cudaSetDevice(q->device), a);
    dev_kern_run(fn,
                 a); // a failure the host sees (shapes) would be a bug: faults come from the GPU
}

static void cu_copy_async(device_obj *d, dev_queue *q, void *dst, const void *src, size_t n,
                          dev_copy_kind kind)
{
    (void)d;
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    if (n) CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kinds[kind], q->stream), NULL);
}

// In the CPU's words (dev_fault_id), where the id sits in its input.
static void fault_message(const cuda_fault *f, const kern_args *a)
{
    dev_fault_id(a->fault, f->what == CUDA_FAULT_LABEL ? "label" : "id", f->value,
                 a->in_t[f->input], f->index, f->limit);
}

static const kern_args *cu_queue_sync(device_obj *d, dev_queue *q)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaMemcpyAsync(q->fault_host, q->fault, sizeof *q->fault, cudaMemcpyDeviceToHost,
                               q->stream),
               NULL);
    CUDA_CHECK(cudaStreamSynchronize(q->stream), NULL);
    const kern_args *failed = NULL;
    if (q->fault_host->seq > 0 && q->fault_host->seq <= q->seq) {
        failed = q->launched[q->fault_host->seq];
        fault_message(q->fault_host, failed);
        CUDA_CHECK(cudaMemsetAsync(q->fault, 0, sizeof *q->fault, q->stream), NULL);
        CUDA_CHECK(cudaStreamSynchronize(q->stream), NULL);
    }
    q->seq = 0;
    return failed;
}

// ---- events ----

static dev_event *cu_event_new(device_obj *d)
{
    dev_event *e = (dev_event *)base_xcalloc(1, sizeof *e);
    e->device = gpu_of(d);
    CUDA_CHECK(cudaSetDevice(e->device), NULL);
    CUDA_CHECK(cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming), NULL);
    return e;
}

static void cu_event_free(device_obj *d, dev_event *e)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(e->device), NULL);
    CUDA_CHECK(cudaEventDestroy(e->ev), NULL);
    free(e);
}

// External: inside a step graph's capture, a record or wait becomes a node
// that records or waits for the event each time the graph runs (the other
// side is outside the graph); outside a capture the flags change nothing.
static void cu_event_record(device_obj *d, dev_event *e, dev_queue *q)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaEventRecordWithFlags(e->ev, q->stream, cudaEventRecordExternal), NULL);
}

static void cu_event_wait(device_obj *d, dev_queue *q, dev_event *e)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaStreamWaitEvent(q->stream, e->ev, cudaEventWaitExternal), NULL);
}

static void cu_event_sync(device_obj *d, dev_event *e)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(e->device), NULL);
    CUDA_CHECK(cudaEventSynchronize(e->ev), NULL);
}

// ---- step graphs: stream capture ----

// A captured stretch of a queue: the launches it holds were numbers
// seq_begin + 1 .. seq_end after a sync, and their kernels report faults
// under those numbers, so a launch puts the same calls back there.
struct dev_graph {
    dev_queue *q;
    cudaGraphExec_t exec;
    int seq_begin, seq_end;
    const kern_args **launched; // [seq_end - seq_begin]
};

static void cu_capture_begin(device_obj *d, dev_queue *q)
{
    (void)d;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    q->capture_seq = q->seq;
    CUDA_CHECK(cudaStreamBeginCapture(q->stream, cudaStreamCaptureModeThreadLocal), NULL);
}

// Nothing captured has run: q's launch count goes back to where the
// capture began.  A capture the driver refused leaves no graph (the caller
// then enqueues the same calls one by one).
static dev_graph *cu_capture_end(device_obj *d, dev_queue *q)
{
    (void)d;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int begin = q->capture_seq, end = q->seq;
    q->seq = begin;
    if (cudaStreamEndCapture(q->stream, &graph) != cudaSuccess || !graph ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        cudaGetLastError(); // the refusal is not an error of a later call
        if (graph) cudaGraphDestroy(graph);
        return NULL;
    }
    CUDA_CHECK(cudaGraphDestroy(graph), NULL);
    dev_graph *g = (dev_graph *)base_xcalloc(1, sizeof *g);
    *g = dev_graph{q, exec, begin, end, NULL};
    g->launched = (const kern_args **)base_xreallocarray(NULL, (size_t)(end - begin) + 1,
                                                         sizeof *g->launched);
    memcpy(g->launched, q->launched + begin + 1, sizeof *g->launched * (size_t)(end - begin));
    return g;
}

static void cu_graph_launch(device_obj *d, dev_queue *q, dev_graph *g)
{
    (void)d;
    GR_ASSERT(g->q == q && q->seq == g->seq_begin);
    while (g->seq_end >= q->cap_launched) {
        q->cap_launched = q->cap_launched ? 2 * q->cap_launched : 256;
        q->launched = (const kern_args **)base_xreallocarray(q->launched, (size_t)q->cap_launched,
                                                             sizeof *q->launched);
    }
    memcpy(q->launched + g->seq_begin + 1, g->launched,
           sizeof *g->launched * (size_t)(g->seq_end - g->seq_begin));
    q->seq = g->seq_end;
    CUDA_CHECK(cudaSetDevice(q->device), NULL);
    CUDA_CHECK(cudaGraphLaunch(g->exec, q->stream), NULL);
}

static void cu_graph_free(device_obj *d, dev_graph *g)
{
    (void)d;
    if (!g) return;
    CUDA_CHECK(cudaSetDevice(g->q->device), NULL);
    CUDA_CHECK(cudaGraphExecDestroy(g->exec), NULL);
    free(g->launched);
    free(g);
}

static void cu_close(device_obj *d)
{
    free(d);
}

extern "C" const device_vtable cuda_vtable = {
    "cuda",
    1,
    1, // enqueues
    cu_alloc,
    cu_free,
    cu_host_alloc,
    cu_host_free,
    cu_to_device,
    cu_to_host,
    cu_queue_new,
    cu_queue_free,
    cu_launch,
    cu_copy_async,
    cu_queue_sync,
    cu_event_new,
    cu_event_free,
    cu_event_record,
    cu_event_wait,
    cu_event_sync,
    cu_capture_begin,
    cu_capture_end,
    cu_graph_launch,
    cu_graph_free,
    cu_close,
    cuda_kernels,
};

// ---- ids checked on the GPU ----

__global__ static void check_ids_kernel(const int32_t *ids, int64_t n, int64_t limit, cuda_fault *f,
                                        int seq, int what, int input)
{
    CUDA_FOR(i, n)
    if (ids[i] < 0 || ids[i] >= limit) cuda_fault_report(f, seq, what, input, ids[i], i, limit);
}

void cuda_check_ids(const kern_args *a, const int32_t *ids, int64_t n, int64_t limit, int what)
{
    if (n <= 0) return;
    int input = 0;
    while (input + 1 < a->n_in && a->in[input] != (const void *)ids) input++;
    GR_ASSERT(a->in[input] == (const void *)ids);
    CUDA_LAUNCH(cuda_blocks(n), CUDA_BLOCK, 0, cuda_stream(a), check_ids_kernel)
    (ids, n, limit, a->queue->fault, a->queue->seq, what, input);
    CUDA_LAUNCHED(a);
}

// ---- devices ----

extern "C" int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" device_obj *cuda_device_new(int id)
{
    if (IR_DEV_INDEX(id) >= cuda_device_count()) return NULL;
    const char *why = cuda_blas_load();
    if (why) fatal("the CUDA device needs cuBLAS: %s", why);
    device_obj *d = (device_obj *)base_xcalloc(1, sizeof *d);
    d->vt = &cuda_vtable;
    d->id = id;
    return d;
}
