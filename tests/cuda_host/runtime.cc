// runtime.cc - the stand-in's CUDA runtime: devices, memory, streams (one
// thread each), events, copies, stream capture and graphs.
//
// Device memory is a sim_region (devices/sim/sim_mem.c): cudaMalloc hands
// out addresses of its PROT_NONE view, so host code that touches them
// faults, and the stand-in's own code (copies, kernels, cuBLAS) works on
// the read-write alias of the same pages.  Each allocation is followed by
// a red zone of RED bytes, poisoned as fresh memory is; a kernel or GEMM
// that wrote into it is an error naming the call.  Kernel arguments are
// mapped to the alias when each launch runs (cuda_runtime.h, map_arg), so
// a step graph that replays a launch whose memory was freed is an error.
//
// A call that fails after it was enqueued (a kernel that broke a rule, a
// copy of freed memory) makes the error sticky, as a fault on a GPU does:
// the message goes to stderr at once and every later call returns it.
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "cuda_host.h"
#include "host.h"
#include "host_abi.h"

extern "C" {
#include "devices/sim/sim_mem.h"
}

namespace cuda_host
{
namespace
{
const size_t RED = 64;
const unsigned char POISON = 0xff; // sim_mem.c's SIM_POISON
const int MAX_DEVICES = 8;

// ---- errors ----

thread_local cudaError_t last_error = cudaSuccess;
std::atomic<int> sticky{0};

cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t fail(cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda_host: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    last_error = e;
    return e;
}

// A failure of enqueued work: sticky, as a fault on a GPU is.
void fail_sticky(cudaError_t e, const char *why)
{
    fprintf(stderr, "cuda_host: %s\n", why);
    int none = 0;
    sticky.compare_exchange_strong(none, (int)e);
}

cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

#define CHECK_STICKY()                                                                             \
    do {                                                                                           \
        if (int s_ = sticky.load()) return ret((cudaError_t)s_);                                   \
    } while (0)

// ---- devices ----

thread_local int cur_device = 0;

int device_count()
{
    static int n = -1;
    static std::once_flag once;
    std::call_once(once, [] {
        const char *e = getenv("CUDA_HOST_DEVICES");
        n = e && *e ? atoi(e) : 2;
        if (n < 0) n = 0;
        if (n > MAX_DEVICES) n = MAX_DEVICES;
    });
    return n;
}

// ---- memory ----

struct alloc {
    char *base; // the handle address cudaMalloc returned (or the host address)
    size_t bytes;
    char *alias; // where the stand-in reads it (== base for pinned memory)
    int device;  // -1: pinned host memory
};

sim_region region;
std::once_flag region_once;
bool region_ok;
std::shared_mutex mem_lock;
std::map<uintptr_t, alloc> allocs; // by base: device and pinned

void region_init()
{
    std::call_once(region_once, [] {
        const char *e = getenv("CUDA_HOST_MEMORY_MB");
        size_t mb = e && *e ? (size_t)atol(e) : 16384;
        region_ok = sim_region_init(&region, mb << 20) == 0;
    });
}

bool in_region(const void *p)
{
    uintptr_t a = (uintptr_t)p, h = (uintptr_t)region.handle;
    return region_ok && a >= h && a < h + region.size;
}

// The allocation [p, p + n) lies in (a pointer just past its end for
// n == 0), or NULL.  Under mem_lock.
const alloc *find_locked(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return NULL;
    --it;
    const alloc &b = it->second;
    size_t at = a - (uintptr_t)b.base;
    return at <= b.bytes && n <= b.bytes - at ? &b : NULL;
}

// The address the stand-in reads [p, p + n) at, or NULL when it is not in
// one live allocation.
void *span(const void *p, size_t n, bool want_device)
{
    std::shared_lock<std::shared_mutex> l(mem_lock);
    const alloc *a = find_locked(p, n);
    if (!a || (a->device >= 0) != want_device) return NULL;
    return a->alias + ((const char *)p - a->base);
}

bool red_zone_ok(const alloc &a)
{
    const unsigned char *z = (const unsigned char *)a.alias + a.bytes;
    for (size_t i = 0; i < RED; i++)
        if (z[i] != POISON) return false;
    return true;
}

// The allocations the kernel or GEMM running on this thread named: their
// red zones are checked after it.
thread_local std::vector<alloc> touched;

bool red_zones_after(const char *what, char *why, size_t n)
{
    for (const alloc &a : touched)
        if (!red_zone_ok(a)) {
            snprintf(why, n,
                     "%s wrote past the end of the %zu-byte device allocation at %p (into "
                     "the stand-in's red zone)",
                     what, a.bytes, (void *)a.base);
            touched.clear();
            return false;
        }
    touched.clear();
    return true;
}

// ---- events ----

struct event_st {
    std::mutex m;
    std::condition_variable cv;
    uint64_t recorded = 0, completed = 0;
    uint64_t next()
    {
        std::lock_guard<std::mutex> l(m);
        return ++recorded;
    }
    uint64_t last()
    {
        std::lock_guard<std::mutex> l(m);
        return recorded;
    }
    void complete(uint64_t gen)
    {
        std::lock_guard<std::mutex> l(m);
        if (gen > completed) completed = gen;
        cv.notify_all();
    }
    // Returns early when an error went sticky (the record may never run).
    void wait(uint64_t gen)
    {
        std::unique_lock<std::mutex> l(m);
        while (completed < gen && !sticky.load()) cv.wait_for(l, std::chrono::milliseconds(20));
    }
};

// ---- work a stream runs ----

struct op {
    virtual ~op() {}
    virtual bool run(char *why, size_t n) = 0;
    // A fresh copy for a graph launch: events resolve at cudaGraphLaunch.
    virtual op *for_launch() const = 0;
    // Runs even after an error went sticky (an event record, so that no
    // waiter hangs).
    virtual bool always() const { return false; }
};

struct kernel_op : op {
    launch_geom g;
    std::shared_ptr<kernel_call> c;
    bool run(char *why, size_t n) override
    {
        touched.clear();
        if (!c->prepare(why, n)) return false;
        if (!run_kernel(g, c.get(), why, n)) return false;
        char what[300];
        snprintf(what, sizeof what, "kernel %s", c->name);
        return red_zones_after(what, why, n);
    }
    op *for_launch() const override { return new kernel_op(*this); }
};

// One side of a copy: device memory, pinned memory, or pageable memory
// (staged at the call for host-to-device copies).
struct copy_op : op {
    void *dst;
    const void *src;
    size_t n;
    cudaMemcpyKind kind;
    std::vector<char> staged; // pageable source, copied at the call
    bool pinned;              // the host side was cudaMallocHost memory at the call
    bool run(char *why, size_t len) override
    {
        const void *host = kind == cudaMemcpyHostToDevice ? src : dst;
        if (pinned && !span(host, n, false)) {
            snprintf(why, len,
                     "cudaMemcpyAsync of %zu bytes: its host side %p was cudaMallocHost "
                     "memory at the call but is not when the copy runs (freed?)",
                     n, host);
            return false;
        }
        bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        void *d = dd ? span(dst, n, true) : dst;
        const void *s = !staged.empty() ? staged.data() : sd ? span(src, n, true) : src;
        if (!d || !s) {
            snprintf(why, len,
                     "cudaMemcpyAsync of %zu bytes from %p to %p: the %s is not inside one "
                     "live device allocation when the copy runs",
                     n, src, dst, !d ? "destination" : "source");
            return false;
        }
        memcpy(d, s, n);
        return true;
    }
    op *for_launch() const override { return new copy_op(*this); }
};

// height rows of width bytes, pitch apart (cudaMemset: one row).
struct set_op : op {
    void *dst;
    int value;
    size_t width, pitch, height;
    bool run(char *why, size_t len) override
    {
        size_t n = height ? (height - 1) * pitch + width : 0;
        char *d = (char *)span(dst, n, true);
        if (!d && n) {
            snprintf(why, len,
                     "cudaMemset of %zu bytes at %p: not inside one live device "
                     "allocation when it runs",
                     n, dst);
            return false;
        }
        for (size_t r = 0; r < height; r++) memset(d + r * pitch, value, width);
        return true;
    }
    op *for_launch() const override { return new set_op(*this); }
};

struct record_op : op {
    event_st *e;
    uint64_t gen;
    bool run(char *, size_t) override
    {
        e->complete(gen);
        return true;
    }
    bool always() const override { return true; }
    op *for_launch() const override
    {
        record_op *r = new record_op(*this);
        r->gen = e->next();
        return r;
    }
};

struct wait_op : op {
    event_st *e;
    uint64_t gen;
    bool run(char *, size_t) override
    {
        e->wait(gen);
        return true;
    }
    op *for_launch() const override
    {
        wait_op *w = new wait_op(*this);
        w->gen = e->last();
        return w;
    }
};

struct work_op : op {
    host_work w;
    explicit work_op(const host_work &hw) : w(hw) {}
    ~work_op() override { w.free(w.ctx); }
    bool run(char *why, size_t n) override
    {
        touched.clear();
        if (!w.run(w.ctx, why, n)) return false;
        return red_zones_after(w.name, why, n);
    }
    op *for_launch() const override
    {
        host_work c = w;
        c.ctx = w.clone(w.ctx);
        return new work_op(c);
    }
};
} // namespace
} // namespace cuda_host

using namespace cuda_host;

// ---- streams and graphs ----

struct CUgraph_st {
    std::vector<std::shared_ptr<op>> nodes;
};
struct CUgraphExec_st {
    std::vector<std::shared_ptr<op>> nodes;
};
struct CUevent_st : event_st {
};

struct CUstream_st : stream_head {
    int device;
    std::mutex m;
    std::condition_variable work, idle;
    std::deque<op *> q;
    uint64_t enqueued = 0, finished = 0;
    bool stop = false;
    // capture
    bool capturing = false, invalidated = false;
    std::thread::id capture_thread;
    CUgraph_st *graph = NULL;
    std::thread th;

    void loop()
    {
        char why[1024];
        std::unique_lock<std::mutex> l(m);
        for (;;) {
            work.wait(l, [this] { return stop || !q.empty(); });
            if (q.empty()) return;
            op *o = q.front();
            l.unlock();
            if (!sticky.load() || o->always()) {
                why[0] = 0;
                if (!o->run(why, sizeof why)) fail_sticky(cudaErrorLaunchFailure, why);
            }
            delete o;
            l.lock();
            q.pop_front();
            finished++;
            idle.notify_all();
        }
    }
    void push(op *o)
    {
        std::lock_guard<std::mutex> l(m);
        q.push_back(o);
        enqueued++;
        work.notify_one();
    }
    void wait_for(uint64_t seq)
    {
        std::unique_lock<std::mutex> l(m);
        idle.wait(l, [&] { return finished >= seq; });
    }
    uint64_t seq()
    {
        std::lock_guard<std::mutex> l(m);
        return enqueued;
    }
};

namespace cuda_host
{
namespace
{
std::mutex streams_lock;
std::vector<CUstream_st *> streams;

// Streams capturing on this thread (thread-local mode): the calls that
// would synchronise or allocate are refused here, and invalidate them.
thread_local std::vector<CUstream_st *> capturing_here;

cudaError_t refuse_in_capture(const char *call)
{
    if (capturing_here.empty()) return cudaSuccess;
    for (CUstream_st *s : capturing_here) s->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported,
                "%s while this thread captures a stream (thread-local mode): refused, and the "
                "capture is invalidated",
                call);
}

// Every stream's work enqueued before the call has run (cudaFree and
// cudaDeviceSynchronize synchronise the device).
void all_streams_drain()
{
    std::vector<std::pair<CUstream_st *, uint64_t>> at;
    {
        std::lock_guard<std::mutex> l(streams_lock);
        for (CUstream_st *s : streams) at.push_back({s, s->seq()});
    }
    for (auto &p : at) p.first->wait_for(p.second);
}

// Runs o on the legacy default stream (NULL): on the calling thread.
cudaError_t run_now(op *o)
{
    char why[1024];
    bool ok = o->run(why, sizeof why);
    delete o;
    if (!ok) {
        fail_sticky(cudaErrorLaunchFailure, why);
        return ret(cudaErrorLaunchFailure);
    }
    return cudaSuccess;
}

cudaError_t enqueue(cudaStream_t s, op *o)
{
    if (int e = sticky.load()) {
        delete o;
        return ret((cudaError_t)e);
    }
    if (!s) return run_now(o);
    if (s->capturing) {
        s->graph->nodes.emplace_back(o);
        return cudaSuccess;
    }
    s->push(o);
    return cudaSuccess;
}

cudaError_t enqueue_work(cudaStream_t s, const host_work *w)
{
    if (!s) {
        w->free(w->ctx);
        return fail(cudaErrorInvalidResourceHandle,
                    "%s on the legacy default stream: the stand-in's cuBLAS needs a stream "
                    "(cublasSetStream)",
                    w->name);
    }
    return enqueue(s, new work_op(*w));
}

void *abi_span(const void *p, size_t n)
{
    void *at = span(p, n, true);
    if (at) {
        std::shared_lock<std::shared_mutex> l(mem_lock);
        touched.push_back(*find_locked(p, n));
    }
    return at;
}

bool abi_is_device(const void *p)
{
    return in_region(p);
}

const abi the_abi = {ABI_VERSION, enqueue_work, abi_span, abi_is_device};

// Which side of a copy is device memory, checked against its kind.
cudaError_t copy_kind(const char *call, void *dst, const void *src, cudaMemcpyKind *kind)
{
    bool dd = in_region(dst), sd = in_region(src);
    cudaMemcpyKind k = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                          : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (*kind != cudaMemcpyDefault && *kind != k) {
        static const char *names[] = {"host to host", "host to device", "device to host",
                                      "device to device", "default"};
        return fail(cudaErrorInvalidValue, "%s(%p, %p): asked for a %s copy, but it is %s", call,
                    dst, src, names[*kind], names[k]);
    }
    if (k == cudaMemcpyHostToHost)
        return fail(cudaErrorInvalidValue, "%s(%p, %p): neither side is device memory", call, dst,
                    src);
    *kind = k;
    return cudaSuccess;
}

op *new_set(void *dst, int value, size_t width, size_t pitch, size_t height)
{
    set_op *o = new set_op;
    o->dst = dst;
    o->value = value;
    o->width = width;
    o->pitch = pitch;
    o->height = height;
    return o;
}

bool is_pinned(const void *p, size_t n)
{
    return span(p, n, false) != NULL;
}
} // namespace

// ---- launches ----

bool map_pointer(void **p, int arg, const char *name, char *why, size_t n)
{
    if (!*p) return true;
    if (in_region(*p)) {
        std::shared_lock<std::shared_mutex> l(mem_lock);
        const alloc *a = find_locked(*p, 0);
        if (!a || a->device < 0) {
            snprintf(why, n,
                     "kernel %s: argument %d (%p) points into device memory that is not "
                     "allocated (freed before the launch ran?)",
                     name, arg, *p);
            return false;
        }
        touched.push_back(*a);
        *p = a->alias + ((char *)*p - a->base);
        return true;
    }
    if (is_pinned(*p, 0)) return true;
    snprintf(why, n,
             "kernel %s: argument %d (%p) is host memory that is neither cudaMalloc'd nor "
             "cudaMallocHost'd: a GPU cannot read it",
             name, arg, *p);
    return false;
}

void map_words(void *bytes, size_t size)
{
    for (size_t at = 0; at + sizeof(void *) <= size; at += sizeof(void *)) {
        char *p;
        memcpy(&p, (char *)bytes + at, sizeof p);
        if (!in_region(p)) continue;
        std::shared_lock<std::shared_mutex> l(mem_lock);
        const alloc *a = find_locked(p, 0);
        if (!a || a->device < 0) continue;
        touched.push_back(*a);
        p = a->alias + (p - a->base);
        memcpy((char *)bytes + at, &p, sizeof p);
    }
}

// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) per kernel.
static std::mutex opt_in_lock;
static std::map<const void *, int> opt_in;

static int shared_opt_in(const void *fn)
{
    std::lock_guard<std::mutex> l(opt_in_lock);
    auto it = opt_in.find(fn);
    return it == opt_in.end() ? 0 : it->second;
}

cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value)
{
    if (!fn) return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute of no kernel");
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d is not simulated",
                    (int)attr);
    if (value < 0 || value > (int)MAX_SHARED_BYTES)
        return fail(cudaErrorInvalidValue,
                    "cudaFuncSetAttribute: %d bytes of dynamic shared memory: the H200 has at "
                    "most %d",
                    value, (int)MAX_SHARED_BYTES);
    std::lock_guard<std::mutex> l(opt_in_lock);
    opt_in[fn] = value;
    return cudaSuccess;
}

void launch(const launch_geom &g, kernel_call *c)
{
    std::unique_ptr<kernel_call> own(c);
    if (sticky.load()) {
        last_error = (cudaError_t)sticky.load();
        return;
    }
    unsigned long long threads = (unsigned long long)g.block.x * g.block.y * g.block.z;
    if (!g.grid.x || !g.grid.y || !g.grid.z || !threads || g.block.x > MAX_BLOCK_X ||
        g.block.y > MAX_BLOCK_Y || g.block.z > MAX_BLOCK_Z || threads > MAX_BLOCK_THREADS ||
        g.grid.y > MAX_GRID_YZ || g.grid.z > MAX_GRID_YZ || g.grid.x > 0x7fffffffu) {
        fail(cudaErrorInvalidConfiguration,
             "launch of %s with grid %u x %u x %u and block %u x %u x %u: outside the H200's "
             "limits (block <= 1024 threads: x, y <= 1024, z <= 64; grid x < 2^31, y, z <= "
             "65535)",
             g.name, g.grid.x, g.grid.y, g.grid.z, g.block.x, g.block.y, g.block.z);
        return;
    }
    if (g.smem > MAX_SHARED_BYTES) {
        fail(cudaErrorInvalidValue,
             "launch of %s with %zu bytes of dynamic shared memory: the H200 has at most %d",
             g.name, g.smem, (int)MAX_SHARED_BYTES);
        return;
    }
    if (g.smem > DEFAULT_SHARED_BYTES && g.smem > (size_t)shared_opt_in(g.fn)) {
        fail(cudaErrorInvalidValue,
             "launch of %s with %zu bytes of dynamic shared memory: over the %d a kernel gets "
             "unless cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) raised "
             "it (to at most %d on the H200)",
             g.name, g.smem, (int)DEFAULT_SHARED_BYTES, (int)MAX_SHARED_BYTES);
        return;
    }
    kernel_op *o = new kernel_op;
    o->g = g;
    o->c.reset(own.release());
    cudaError_t e = enqueue(g.stream, o);
    if (e != cudaSuccess) last_error = e;
}
} // namespace cuda_host

// ---- the runtime API ----

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorIllegalAddress:
        return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureWrongThread:
        return "attempt to terminate a thread-local capture sequence from another thread";
    default:
        return "unknown error";
    }
}

cudaError_t cudaGetLastError(void)
{
    if (int s = sticky.load()) return (cudaError_t)s;
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    if (int s = sticky.load()) return (cudaError_t)s;
    return last_error;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = device_count();
    return *n ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return ret(cudaErrorInvalidDevice);
    cur_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = cur_device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (cudaError_t e = refuse_in_capture("cudaDeviceSynchronize")) return e;
    all_streams_drain();
    CHECK_STICKY();
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    CHECK_STICKY();
    if (cudaError_t e = refuse_in_capture("cudaMalloc")) return e;
    *p = NULL;
    if (!device_count()) return ret(cudaErrorNoDevice);
    region_init();
    if (!region_ok || bytes > region.size) return ret(cudaErrorMemoryAllocation);
    char *h = (char *)sim_region_alloc(&region, bytes + RED);
    if (!h) return ret(cudaErrorMemoryAllocation);
    alloc a = {h, bytes, region.alias + (h - region.handle), cur_device};
    std::unique_lock<std::shared_mutex> l(mem_lock);
    allocs[(uintptr_t)h] = a;
    *p = h;
    return cudaSuccess;
}

static cudaError_t free_alloc(void *p, bool device, const char *call)
{
    if (!p) return cudaSuccess;
    if (cudaError_t e = refuse_in_capture(call)) return e;
    all_streams_drain(); // both synchronise the device
    alloc a;
    {
        std::unique_lock<std::shared_mutex> l(mem_lock);
        auto it = allocs.find((uintptr_t)p);
        if (it == allocs.end() || (it->second.device >= 0) != device)
            return fail(cudaErrorInvalidValue, "%s(%p): not a live allocation of %s", call, p,
                        device ? "cudaMalloc" : "cudaMallocHost");
        a = it->second;
        allocs.erase(it);
    }
    if (device) {
        bool red_ok = red_zone_ok(a);
        sim_region_free(&region, p);
        if (!red_ok)
            return fail(cudaErrorIllegalAddress,
                        "cudaFree(%p): something wrote past the end of this %zu-byte allocation", p,
                        a.bytes);
    } else {
        free(p);
    }
    CHECK_STICKY();
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    return free_alloc(p, true, "cudaFree");
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    CHECK_STICKY();
    if (cudaError_t e = refuse_in_capture("cudaMallocHost")) return e;
    *p = NULL;
    void *m = NULL;
    if (posix_memalign(&m, 4096, bytes ? bytes : 1) != 0) return ret(cudaErrorMemoryAllocation);
    alloc a = {(char *)m, bytes, (char *)m, -1};
    std::unique_lock<std::shared_mutex> l(mem_lock);
    allocs[(uintptr_t)m] = a;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    return free_alloc(p, false, "cudaFreeHost");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    CHECK_STICKY();
    if (cudaError_t e = refuse_in_capture("cudaMemcpy")) return e;
    if (cudaError_t e = copy_kind("cudaMemcpy", dst, src, &kind)) return e;
    copy_op *o = new copy_op;
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->kind = kind;
    o->pinned = false;
    return run_now(o);
}

cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    CHECK_STICKY();
    if (cudaError_t e = refuse_in_capture("cudaMemset")) return e;
    return run_now(new_set(dst, value, n, n, 1));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    CHECK_STICKY();
    if (cudaError_t e = copy_kind("cudaMemcpyAsync", dst, src, &kind)) return e;
    copy_op *o = new copy_op;
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->kind = kind;
    bool host_src = kind == cudaMemcpyHostToDevice, host_dst = kind == cudaMemcpyDeviceToHost;
    bool pageable = (host_src && !is_pinned(src, n)) || (host_dst && !is_pinned(dst, n));
    if (pageable && s && s->capturing) {
        delete o;
        s->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported,
                    "cudaMemcpyAsync between device memory and pageable host memory %p while the "
                    "stream captures: a graph cannot replay it (use cudaMallocHost memory)",
                    host_src ? src : (const void *)dst);
    }
    // Pageable memory, as CUDA does it: a source is staged before the call
    // returns; a destination is written before it returns.
    o->pinned = (host_src || host_dst) && !pageable;
    if (pageable && host_src) o->staged.assign((const char *)src, (const char *)src + n);
    if (cudaError_t e = enqueue(s, o)) return e;
    if (pageable && host_dst && s) {
        s->wait_for(s->seq());
        CHECK_STICKY();
    }
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
    CHECK_STICKY();
    return enqueue(s, new_set(dst, value, n, n, 1));
}

cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s)
{
    CHECK_STICKY();
    if (pitch < width && height > 1)
        return fail(cudaErrorInvalidValue, "cudaMemset2DAsync: pitch %zu below width %zu", pitch,
                    width);
    return enqueue(s, new_set(dst, value, width, pitch, height));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    (void)flags; // every stand-in stream is non-blocking: none syncs with the NULL stream
    CHECK_STICKY();
    CUstream_st *s = new CUstream_st;
    s->ops = &the_abi;
    s->device = cur_device;
    s->th = std::thread([s] { s->loop(); });
    {
        std::lock_guard<std::mutex> l(streams_lock);
        streams.push_back(s);
    }
    *out = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> l(streams_lock);
        for (size_t i = 0; i < streams.size(); i++)
            if (streams[i] == s) streams.erase(streams.begin() + (long)i);
    }
    {
        std::lock_guard<std::mutex> l(s->m);
        s->stop = true;
        s->work.notify_one();
    }
    s->th.join(); // after the work enqueued before it, as CUDA finishes it
    delete s->graph;
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && s->capturing) {
        s->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported,
                    "cudaStreamSynchronize on a stream that captures: the capture is invalidated");
    }
    if (cudaError_t e = refuse_in_capture("cudaStreamSynchronize")) return e;
    if (s) s->wait_for(s->seq());
    CHECK_STICKY();
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    CHECK_STICKY();
    *e = new CUevent_st;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

// In a capture, an event record or wait must be external (a node of its
// own): the stand-in captures no joins between streams.
static cudaError_t refuse_join(cudaStream_t s, bool external, const char *call, const char *flag)
{
    if (!s || !s->capturing || external) return cudaSuccess;
    s->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported,
                "%s in a capture without %s: the stand-in captures no joins between streams", call,
                flag);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags)
{
    CHECK_STICKY();
    if (cudaError_t r = refuse_join(s, flags & cudaEventRecordExternal, "cudaEventRecord",
                                    "cudaEventRecordExternal"))
        return r;
    record_op *o = new record_op;
    o->e = e;
    o->gen = s && s->capturing ? 0 : e->next(); // a captured record numbers itself at launch
    return enqueue(s, o);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    return cudaEventRecordWithFlags(e, s, cudaEventRecordDefault);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    CHECK_STICKY();
    if (cudaError_t r = refuse_join(s, flags & cudaEventWaitExternal, "cudaStreamWaitEvent",
                                    "cudaEventWaitExternal"))
        return r;
    wait_op *o = new wait_op;
    o->e = e;
    o->gen = e->last(); // the most recent record at the call (for a capture: at each launch)
    if (!s) {
        e->wait(o->gen);
        delete o;
        return cudaSuccess;
    }
    return enqueue(s, o);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (cudaError_t r = refuse_in_capture("cudaEventSynchronize")) return r;
    e->wait(e->last());
    CHECK_STICKY();
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    CHECK_STICKY();
    if (!s || s->capturing)
        return fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: %s",
                    s ? "the stream captures already" : "the legacy stream cannot be captured");
    s->capturing = true;
    s->invalidated = false;
    s->capture_thread = std::this_thread::get_id();
    s->graph = new CUgraph_st;
    if (mode != cudaStreamCaptureModeRelaxed) capturing_here.push_back(s);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    *g = NULL;
    if (!s || !s->capturing)
        return fail(cudaErrorInvalidValue, "cudaStreamEndCapture: not capturing");
    if (s->capture_thread != std::this_thread::get_id())
        return ret(cudaErrorStreamCaptureWrongThread);
    for (size_t i = 0; i < capturing_here.size(); i++)
        if (capturing_here[i] == s) capturing_here.erase(capturing_here.begin() + (long)i);
    s->capturing = false;
    CUgraph_st *graph = s->graph;
    s->graph = NULL;
    if (s->invalidated) {
        delete graph;
        return ret(cudaErrorStreamCaptureInvalidated);
    }
    *g = graph;
    CHECK_STICKY();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags)
{
    (void)flags;
    CHECK_STICKY();
    *exec = new CUgraphExec_st{g->nodes};
    return cudaSuccess;
}

static std::atomic<uint64_t> graph_launches{0};

uint64_t cuda_host_graph_launches(void)
{
    return graph_launches.load();
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    CHECK_STICKY();
    graph_launches++;
    if (s && s->capturing)
        return fail(cudaErrorStreamCaptureUnsupported,
                    "cudaGraphLaunch into a capture: the stand-in does not nest graphs");
    for (const std::shared_ptr<op> &o : exec->nodes)
        if (cudaError_t e = enqueue(s, o->for_launch())) return e;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}
