/* test_sim_device.c - the simulated GPU (devices/sim): its memory cannot be
 * touched by the host, its queues run later on their own threads, and a
 * missing sync or event shows as a wrong value (and, under TSan, as a
 * reported race).  Kernel calls are built by hand, as in test_kernels.c. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/cpu/cpu.h"
#include "devices/sim/sim.h"
#include "devices/sim/sim_mem.h" /* SIM_POISON */

/* The tests that plant a missing sync or event on purpose: in a plain or
 * ASan build the host must read a stale value; under TSan the race must be
 * reported, in a child so that the report ends only the child.  66 is TSan's
 * exit status once it has reported (its `exitcode` option). */
#if defined(__SANITIZE_THREAD__)
#define SIM_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_TEST_TSAN 1
#endif
#endif
#ifndef SIM_TEST_TSAN
#define SIM_TEST_TSAN 0
#endif
#define TSAN_EXIT_CODE 66

/* Long enough that the host, which looks microseconds after enqueueing,
 * certainly looks first. */
#define SLOW_US 200000u

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static device_obj *sim_open(size_t region)
{
    device_obj *d = region ? sim_device_new_sized(IR_DEV(DEV_GPU, 0), region)
                           : sim_device_new(IR_DEV(DEV_GPU, 0));
    assert_non_null(d);
    sim_set_delay_us(d, 0); /* whatever GR_SIM_DELAY_US says: each test sets its own */
    return d;
}

/* A device buffer of n floats holding v[]. */
static float *dev_floats(device_obj *d, const float *v, size_t n)
{
    float *p = d->vt->alloc(d, n * sizeof *p);
    assert_non_null(p);
    d->vt->to_device(d, p, v, n * sizeof *p);
    return p;
}

/* A kernel call on device buffers; lives until the queue is synced. */
#define KC_MAX 160
typedef struct kcall {
    ir_node node;
    ir_type out_t;
    ir_type in_types[KC_MAX];
    void *in[KC_MAX];
    const ir_type *in_t[KC_MAX];
    kern_fault fault;
    kern_args a;
} kcall;

static void kc_init(kcall *c, op_kind op, ir_type out_t, void *out)
{
    memset(c, 0, sizeof *c);
    c->node.op = op;
    c->out_t = out_t;
    c->a = (kern_args){.node = &c->node,
                       .out = out,
                       .out_t = &c->out_t,
                       .in = c->in,
                       .in_t = c->in_t,
                       .max_tasks = 1,
                       .fault = &c->fault};
}

static void kc_in(kcall *c, void *buf, ir_type t)
{
    int k = c->a.n_in++;
    assert_true(k < KC_MAX);
    c->in[k] = buf;
    c->in_types[k] = t;
    c->in_t[k] = &c->in_types[k];
    c->node.n_in = c->a.n_in;
}

static ir_type vec(ir_dtype dt, int64_t n)
{
    return (ir_type){.dtype = dt, .rank = 1, .dim = {n}};
}

/* out = x + y on n floats, launched on q. */
static void launch_add(device_obj *d, dev_queue *q, kcall *c, float *out, float *x, float *y,
                       int64_t n)
{
    kc_init(c, OP_ADD, vec(DT_F32, n), out);
    kc_in(c, x, vec(DT_F32, n));
    kc_in(c, y, vec(DT_F32, n));
    d->vt->launch(d, q, cpu_kernels[OP_ADD], &c->a);
}

static void sync_ok(device_obj *d, dev_queue *q)
{
    const kern_args *failed = d->vt->queue_sync(d, q);
    if (failed) fail_msg("a kernel failed: %s", failed->fault->msg);
}

/* Runs fn(arg) in a child process; returns how it ended (waitpid status).
 * The child gets the default SIGSEGV action, so that a sanitizer's handler
 * does not turn the crash into an exit, and no core file. */
static int in_child(void (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigaction(SIGSEGV, &sa, NULL);
        fn(arg);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void assert_died_of(int status, int sig)
{
    if (!WIFSIGNALED(status))
        fail_msg("the child exited with %d instead of dying of signal %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, sig);
    assert_int_equal(WTERMSIG(status), sig);
}

/* ---- the device object ---- */

static void test_vtable_is_async_and_runs_the_cpu_kernels(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    assert_ptr_equal(d->vt, &sim_vtable);
    assert_string_equal(d->vt->name, "sim");
    assert_int_equal(d->vt->async, 1);
    assert_ptr_equal(d->vt->kernels, cpu_kernels);
    assert_int_equal(d->id, IR_DEV(DEV_GPU, 0));
    assert_true(device_implements(d->vt, OP_MATMUL));
    d->vt->close(d);
}

/* ---- memory ---- */

static void test_round_trip_is_bit_identical(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    size_t sizes[] = {0, 1, 63, 64, 1000, (1u << 20) + 3};
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *dev[N], *host[N];
    for (int i = 0; i < N; i++) {
        dev[i] = d->vt->alloc(d, sizes[i]);
        assert_non_null(dev[i]);
        assert_int_equal((uintptr_t)dev[i] % 64, 0);
        host[i] = malloc(sizes[i] + 1);
        for (size_t k = 0; k < sizes[i]; k++) host[i][k] = (unsigned char)rnd();
    }
    /* Fresh memory is poison, not zeros. */
    unsigned char first[64];
    d->vt->to_host(d, first, dev[5], sizeof first);
    for (size_t k = 0; k < sizeof first; k++) assert_int_equal(first[k], SIM_POISON);
    /* All written before any is read back: no buffer overlaps another. */
    for (int i = 0; i < N; i++) d->vt->to_device(d, dev[i], host[i], sizes[i]);
    for (int i = 0; i < N; i++) {
        unsigned char *back = malloc(sizes[i] + 1);
        d->vt->to_host(d, back, dev[i], sizes[i]);
        assert_memory_equal(back, host[i], sizes[i]);
        free(back);
    }
    for (int i = 0; i < N; i++) {
        d->vt->free(d, dev[i]);
        free(host[i]);
    }
    unsigned char *pinned = d->vt->host_alloc(d, 100);
    assert_non_null(pinned);
    assert_int_equal((uintptr_t)pinned % 64, 0);
    pinned[99] = 1; /* host memory: the host may touch it */
    d->vt->host_free(d, pinned);
    d->vt->close(d);
}

static void read_float(void *p)
{
    volatile float *v = p;
    printf("read %g: device memory was readable from the host\n", (double)*v);
}

static void write_float(void *p)
{
    volatile float *v = p;
    *v = 1.0f;
    printf("device memory was writable from the host\n");
}

static void test_host_dereference_of_device_memory_crashes(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float one = 1.0f;
    float *p = dev_floats(d, &one, 1);
    assert_died_of(in_child(read_float, p), SIGSEGV);
    assert_died_of(in_child(write_float, p), SIGSEGV);
    /* The same pointer through the device is fine, and the children's
     * attempts changed nothing. */
    float back = 0;
    d->vt->to_host(d, &back, p, sizeof back);
    assert_true(back == 1.0f);
    d->vt->free(d, p);
    d->vt->close(d);
}

typedef struct bad_copy {
    device_obj *d;
    const void *src;
    size_t n;
} bad_copy;

static void copy_to_host(void *arg)
{
    bad_copy *b = arg;
    char buf[256];
    b->d->vt->to_host(b->d, buf, b->src, b->n);
}

/* A kernel whose buffers' types say 8 floats, on 4-float buffers. */
static void launch_past_the_end(void *arg)
{
    device_obj *d = arg;
    float *p = d->vt->alloc(d, 4 * sizeof(float));
    dev_queue *q = d->vt->queue_new(d);
    kcall c;
    launch_add(d, q, &c, p, p, p, 8);
    d->vt->queue_sync(d, q);
}

static void test_pointer_outside_allocations_is_fatal(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    char *p = d->vt->alloc(d, 64);
    char host[64] = {0};
    /* Past the end of an allocation, a freed block, a host pointer. */
    bad_copy past = {d, p + 32, 64}, host_ptr = {d, host, 8};
    assert_died_of(in_child(copy_to_host, &past), SIGABRT);
    assert_died_of(in_child(copy_to_host, &host_ptr), SIGABRT);
    char *q = d->vt->alloc(d, 128);
    d->vt->free(d, q);
    bad_copy freed = {d, q, 8};
    assert_died_of(in_child(copy_to_host, &freed), SIGABRT);
    assert_died_of(in_child(launch_past_the_end, d), SIGABRT);
    bad_copy fine = {d, p + 32, 32};
    int status = in_child(copy_to_host, &fine);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    d->vt->free(d, p);
    d->vt->close(d);
}

static void test_alloc_beyond_the_region_returns_null(void **state)
{
    (void)state;
    size_t region = 1u << 20;
    device_obj *d = sim_open(region);
    assert_null(d->vt->alloc(d, region + 1));
    assert_null(d->vt->alloc(d, SIZE_MAX));
    assert_null(d->vt->alloc(d, SIZE_MAX - 10)); /* rounding up must not wrap */
    void *all = d->vt->alloc(d, region);
    assert_non_null(all);
    assert_null(d->vt->alloc(d, 1));
    d->vt->free(d, all);
    void *one = d->vt->alloc(d, 1);
    assert_non_null(one);
    assert_ptr_equal(one, all); /* first fit reuses the bottom */
    d->vt->free(d, one);
    d->vt->close(d);
}

/* A live block in the fragmentation test: where, how long, what it holds. */
typedef struct live {
    unsigned char *p;
    size_t n;
    unsigned char fill;
} live;

static void check_live(device_obj *d, const live *b, int n)
{
    static unsigned char back[1 << 16];
    for (int i = 0; i < n; i++) {
        d->vt->to_host(d, back, b[i].p, b[i].n);
        for (size_t k = 0; k < b[i].n; k++)
            if (back[k] != b[i].fill)
                fail_msg("block %d byte %zu is %d, not %d", i, k, back[k], b[i].fill);
        for (int j = 0; j < n; j++)
            if (i != j && b[i].p < b[j].p + b[j].n && b[j].p < b[i].p + b[i].n)
                fail_msg("blocks %d and %d overlap", i, j);
    }
}

static void test_many_allocations_and_frees_stay_correct(void **state)
{
    (void)state;
    size_t region = 4u << 20;
    device_obj *d = sim_open(region);
    enum { MAX_LIVE = 128 };
    live b[MAX_LIVE];
    int n = 0, nulls = 0;
    static unsigned char src[1 << 16];
    for (int it = 0; it < 3000; it++) {
        if (n == MAX_LIVE || (n > 0 && rnd() % 5 < 2)) {
            int k = (int)(rnd() % (uint32_t)n);
            d->vt->free(d, b[k].p);
            b[k] = b[--n];
            continue;
        }
        size_t sz = 1 + rnd() % (1 << 16);
        unsigned char *p = d->vt->alloc(d, sz);
        if (!p) {
            nulls++; /* full for now: must be able to tell */
            continue;
        }
        assert_int_equal((uintptr_t)p % 64, 0);
        b[n] = (live){p, sz, (unsigned char)(it % 251)};
        memset(src, b[n].fill, sz);
        d->vt->to_device(d, p, src, sz);
        n++;
        if (it % 100 == 0) check_live(d, b, n);
    }
    check_live(d, b, n);
    while (n > 0) d->vt->free(d, b[--n].p);
    (void)nulls;
    /* Everything freed coalesces back into one block. */
    void *all = d->vt->alloc(d, region);
    assert_non_null(all);
    d->vt->free(d, all);
    d->vt->close(d);
}

/* ---- queues ---- */

static void test_kernel_on_the_queue_is_right_after_sync(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    enum { N = 1000 };
    float x[N], y[N], out[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f, y[i] = (float)(N - i);
    float *dx = dev_floats(d, x, N), *dy = dev_floats(d, y, N);
    float *dout = d->vt->alloc(d, sizeof out);
    dev_queue *q = d->vt->queue_new(d);
    kcall c;
    launch_add(d, q, &c, dout, dx, dy, N);
    sync_ok(d, q);
    d->vt->to_host(d, out, dout, sizeof out);
    for (int i = 0; i < N; i++) assert_true(out[i] == x[i] + y[i]);
    d->vt->queue_free(d, q);
    d->vt->free(d, dx);
    d->vt->free(d, dy);
    d->vt->free(d, dout);
    d->vt->close(d);
}

/* Whether every element of out[] is v. */
static int all_equal(const float *out, int n, float v)
{
    for (int i = 0; i < n; i++)
        if (out[i] != v) return 0;
    return 1;
}

/* The planted bug: to_host right after a launch, without queue_sync, and
 * after the host has done other work for a while (20 ms, far more than the
 * worker needs without a delay).  The delay comes from GR_SIM_DELAY_US.
 * Returns 1 when the host read the stale value and a sync then gave the
 * right one.  No cmocka asserts: it may run in a child. */
static int planted_missing_sync(void)
{
    char us[16];
    snprintf(us, sizeof us, "%u", SLOW_US);
    setenv("GR_SIM_DELAY_US", us, 1);
    device_obj *d = sim_device_new(IR_DEV(DEV_GPU, 0));
    unsetenv("GR_SIM_DELAY_US");
    if (!d) return 0;
    float x[4] = {1, 2, 3, 4}, zero[4] = {0}, out[4];
    float *dx = dev_floats(d, x, 4), *dout = dev_floats(d, zero, 4);
    dev_queue *q = d->vt->queue_new(d);
    kcall c;
    launch_add(d, q, &c, dout, dx, dx, 4);
    usleep(20000);
    d->vt->to_host(d, out, dout, sizeof out); /* no queue_sync */
    int stale = all_equal(out, 4, 0.0f);
    int fresh = d->vt->queue_sync(d, q) == NULL;
    d->vt->to_host(d, out, dout, sizeof out);
    for (int i = 0; i < 4; i++) fresh = fresh && out[i] == 2 * x[i];
    d->vt->close(d); /* closes q too */
    return stale && fresh;
}

static void planted_child(void *arg)
{
    int (*planted)(void) = (int (*)(void))(uintptr_t)arg;
    _exit(planted() ? 0 : 1);
}

/* A plain build must see the planted bug as a wrong value, TSan as a race. */
static void expect_planted_bug_caught(int (*planted)(void))
{
    if (!SIM_TEST_TSAN) {
        assert_int_equal(planted(), 1);
        return;
    }
    int status = in_child(planted_child, (void *)(uintptr_t)planted);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != TSAN_EXIT_CODE)
        fail_msg("TSan did not report the planted race (wait status %#x)", status);
}

static void test_missing_sync_reads_a_stale_value(void **state)
{
    (void)state;
    expect_planted_bug_caught(planted_missing_sync);
}

/* The planted bug with work queued before and after the stale read, so
 * that the worker takes the kernel only after the host has enqueued more:
 * what the host did after an enqueue must not count as ordered before the
 * kernel (under TSan, the queue's own locks must not say so).  Returns 1
 * when the host read the stale value.  No cmocka asserts. */
static int planted_missing_sync_between_launches(void)
{
    device_obj *d = sim_device_new(IR_DEV(DEV_GPU, 0));
    if (!d) return 0;
    sim_set_delay_us(d, SLOW_US / 2);
    float x[4] = {1, 2, 3, 4}, zero[4] = {0}, out[4];
    float *dx = dev_floats(d, x, 4), *dout = dev_floats(d, zero, 4);
    float *other = d->vt->alloc(d, sizeof x);
    dev_queue *q = d->vt->queue_new(d);
    kcall c0, c1, c2;
    launch_add(d, q, &c0, other, dx, dx, 4);
    launch_add(d, q, &c1, dout, dx, dx, 4);
    d->vt->to_host(d, out, dout, sizeof out); /* no queue_sync */
    int stale = all_equal(out, 4, 0.0f);
    launch_add(d, q, &c2, other, dx, dx, 4);
    int ok = d->vt->queue_sync(d, q) == NULL;
    d->vt->close(d);
    return stale && ok;
}

static void test_missing_sync_between_launches_reads_a_stale_value(void **state)
{
    (void)state;
    expect_planted_bug_caught(planted_missing_sync_between_launches);
}

static void test_async_copies_run_in_order_on_the_queue(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    enum { N = 333 };
    float *a = d->vt->host_alloc(d, N * sizeof(float));
    float *h = d->vt->host_alloc(d, N * sizeof(float));
    for (int i = 0; i < N; i++) a[i] = (float)i - 100.0f, h[i] = -1.0f;
    float *x = d->vt->alloc(d, N * sizeof(float)), *y = d->vt->alloc(d, N * sizeof(float));
    float *z = d->vt->alloc(d, N * sizeof(float));
    dev_queue *q = d->vt->queue_new(d);
    sim_set_delay_us(d, 2000);
    kcall c;
    d->vt->copy_async(d, q, x, a, N * sizeof(float), DEV_H2D);
    d->vt->copy_async(d, q, y, x, N * sizeof(float), DEV_D2D);
    launch_add(d, q, &c, z, y, y, N);
    d->vt->copy_async(d, q, h, z, N * sizeof(float), DEV_D2H);
    sync_ok(d, q);
    for (int i = 0; i < N; i++) assert_true(h[i] == 2 * a[i]);
    d->vt->queue_free(d, q);
    d->vt->host_free(d, a);
    d->vt->host_free(d, h);
    d->vt->close(d);
}

/* concat's n_in has no bound: the queue keeps its own copy of every input
 * pointer, translated. */
static void test_launch_with_many_inputs(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    enum { K = 150 };
    static kcall c;
    float *bufs[K];
    kc_init(&c, OP_CONCAT, vec(DT_F32, 2 * K), d->vt->alloc(d, 2 * K * sizeof(float)));
    for (int k = 0; k < K; k++) {
        float v[2] = {(float)k, (float)-k};
        bufs[k] = dev_floats(d, v, 2);
        kc_in(&c, bufs[k], vec(DT_F32, 2));
    }
    c.node.attr.i[ATTR_AXIS] = 0;
    dev_queue *q = d->vt->queue_new(d);
    d->vt->launch(d, q, cpu_kernels[OP_CONCAT], &c.a);
    sync_ok(d, q);
    float out[2 * K];
    d->vt->to_host(d, out, c.a.out, sizeof out);
    for (int k = 0; k < K; k++) assert_true(out[2 * k] == (float)k && out[2 * k + 1] == (float)-k);
    d->vt->queue_free(d, q);
    d->vt->close(d);
}

static void test_failing_kernel_is_returned_by_sync_and_later_launches_skipped(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float table[3 * 2] = {1, 2, 3, 4, 5, 6}, z0[4] = {7, 7, 7, 7}, out[4];
    int32_t ids[4] = {0, 2, 3, 1};
    float *dt = dev_floats(d, table, 6), *dz = dev_floats(d, z0, 4);
    float *dout = d->vt->alloc(d, 4 * 2 * sizeof(float));
    int32_t *dids = d->vt->alloc(d, sizeof ids);
    d->vt->to_device(d, dids, ids, sizeof ids);
    dev_queue *q = d->vt->queue_new(d);
    kcall g, add;
    kc_init(&g, OP_GATHER, (ir_type){DT_F32, 3, {2, 2, 2}}, dout);
    kc_in(&g, dt, (ir_type){DT_F32, 2, {3, 2}});
    kc_in(&g, dids, (ir_type){DT_I32, 2, {2, 2}});
    d->vt->launch(d, q, cpu_kernels[OP_GATHER], &g.a);
    launch_add(d, q, &add, dz, dt, dt, 4); /* after the fault: skipped */
    assert_ptr_equal(d->vt->queue_sync(d, q), &g.a);
    assert_string_equal(g.fault.msg, "id 3 at [1,0] is outside [0, 3)");
    d->vt->to_host(d, out, dz, sizeof out);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 7.0f);
    assert_null(d->vt->queue_sync(d, q)); /* the sync cleared it */
    launch_add(d, q, &add, dz, dt, dt, 4);
    sync_ok(d, q);
    d->vt->to_host(d, out, dz, sizeof out);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 2 * table[i]);
    d->vt->queue_free(d, q);
    d->vt->close(d);
}

static void test_close_drains_open_queues(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float x[3] = {1, 2, 3}, h[3] = {0};
    float *dx = dev_floats(d, x, 3);
    dev_queue *q = d->vt->queue_new(d);
    sim_set_delay_us(d, 20000);
    d->vt->copy_async(d, q, h, dx, sizeof h, DEV_D2H);
    d->vt->close(d); /* no queue_free, no sync: close runs what is queued */
    for (int i = 0; i < 3; i++) assert_true(h[i] == x[i]);
}

/* ---- events ---- */

/* Queue a of d gets `backlog` slow entries (so its work lands late), then
 * c = x + x, then a record of e. */
static void late_producer(device_obj *d, dev_queue *a, kcall *k, float *c, float *x, int n,
                          dev_event *e, int backlog)
{
    for (int i = 0; i < backlog; i++) d->vt->copy_async(d, a, x, x, 0, DEV_D2D);
    launch_add(d, a, k, c, x, x, n);
    d->vt->event_record(d, e, a);
}

static void test_event_orders_two_queues(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float x[5] = {1, 2, 3, 4, 5}, out[5];
    float *dx = dev_floats(d, x, 5), *dc = d->vt->alloc(d, sizeof x);
    float *dd = d->vt->alloc(d, sizeof x);
    dev_queue *a = d->vt->queue_new(d), *b = d->vt->queue_new(d);
    dev_event *e = d->vt->event_new(d);
    sim_set_delay_us(d, 20000);
    kcall k1, k2;
    late_producer(d, a, &k1, dc, dx, 5, e, 3);
    d->vt->event_wait(d, b, e);
    launch_add(d, b, &k2, dd, dc, dc, 5); /* reads a's output */
    sync_ok(d, b);                        /* b only: the event ordered a's kernel first */
    d->vt->to_host(d, out, dd, sizeof out);
    for (int i = 0; i < 5; i++) assert_true(out[i] == 4 * x[i]);
    sync_ok(d, a);
    d->vt->event_free(d, e);
    d->vt->close(d);
}

/* The planted bug: queue b reads a's output without waiting for a's event.
 * Returns 1 when b read the stale value.  No cmocka asserts. */
static int planted_missing_event_wait(void)
{
    device_obj *d = sim_device_new(IR_DEV(DEV_GPU, 0));
    if (!d) return 0;
    sim_set_delay_us(d, SLOW_US / 2);
    float x[5] = {1, 2, 3, 4, 5}, zero[5] = {0}, out[5];
    float *dx = dev_floats(d, x, 5), *dc = dev_floats(d, zero, 5);
    float *dd = d->vt->alloc(d, sizeof x);
    dev_queue *a = d->vt->queue_new(d), *b = d->vt->queue_new(d);
    dev_event *e = d->vt->event_new(d);
    kcall k1, k2;
    late_producer(d, a, &k1, dc, dx, 5, e, 3);
    launch_add(d, b, &k2, dd, dc, dc, 5); /* no event_wait */
    int ok = d->vt->queue_sync(d, b) == NULL;
    d->vt->to_host(d, out, dd, sizeof out);
    int stale = all_equal(out, 5, 0.0f);
    ok = ok && d->vt->queue_sync(d, a) == NULL;
    d->vt->event_free(d, e);
    d->vt->close(d);
    return stale && ok;
}

static void test_missing_event_wait_reads_a_stale_value(void **state)
{
    (void)state;
    expect_planted_bug_caught(planted_missing_event_wait);
}

/* A transfer between partitions on two devices: a D2H copy and a record on
 * the producer's queue, a wait and an H2D copy on the consumer's. */
static void test_event_orders_queues_of_two_devices(void **state)
{
    (void)state;
    device_obj *d1 = sim_open(0), *d2 = sim_device_new(IR_DEV(DEV_GPU, 1));
    assert_non_null(d2);
    sim_set_delay_us(d1, 20000);
    sim_set_delay_us(d2, 0);
    enum { N = 64 };
    float x[N], out[N];
    for (int i = 0; i < N; i++) x[i] = (float)i / 3.0f;
    float *dx = dev_floats(d1, x, N), *dc = d1->vt->alloc(d1, sizeof x);
    float *staging = d1->vt->host_alloc(d1, sizeof x);
    float *dc2 = d2->vt->alloc(d2, sizeof x), *dd = d2->vt->alloc(d2, sizeof x);
    dev_queue *a = d1->vt->queue_new(d1), *b = d2->vt->queue_new(d2);
    dev_event *e = d1->vt->event_new(d1);
    kcall k1, k2;
    launch_add(d1, a, &k1, dc, dx, dx, N);
    d1->vt->copy_async(d1, a, staging, dc, sizeof x, DEV_D2H);
    d1->vt->event_record(d1, e, a);
    d2->vt->event_wait(d2, b, e);
    d2->vt->copy_async(d2, b, dc2, staging, sizeof x, DEV_H2D);
    launch_add(d2, b, &k2, dd, dc2, dc2, N);
    sync_ok(d2, b);
    d2->vt->to_host(d2, out, dd, sizeof out);
    for (int i = 0; i < N; i++) assert_true(out[i] == 4 * x[i]);
    sync_ok(d1, a);
    d1->vt->event_free(d1, e);
    d1->vt->host_free(d1, staging);
    d1->vt->close(d1);
    d2->vt->close(d2);
}

static void test_event_sync_waits_for_the_recorded_work(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float x[3] = {1, 2, 3}, out[3];
    float *dx = dev_floats(d, x, 3), *dc = d->vt->alloc(d, sizeof x);
    dev_queue *q = d->vt->queue_new(d);
    dev_event *never = d->vt->event_new(d), *e = d->vt->event_new(d);
    d->vt->event_sync(d, never); /* never recorded: fired */
    d->vt->event_wait(d, q, never);
    sim_set_delay_us(d, 20000);
    kcall k;
    late_producer(d, q, &k, dc, dx, 3, e, 2);
    d->vt->event_sync(d, e); /* instead of queue_sync */
    d->vt->to_host(d, out, dc, sizeof out);
    for (int i = 0; i < 3; i++) assert_true(out[i] == 2 * x[i]);
    sync_ok(d, q);
    d->vt->event_free(d, never);
    d->vt->event_free(d, e);
    d->vt->queue_free(d, q);
    d->vt->close(d);
}

/* ---- step graphs ---- */

/* A recording runs nothing; each launch of it runs the recorded calls
 * (a kernel and a copy) again, in order, with the recorded arguments. */
static void test_a_recording_runs_only_when_launched(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    float x[4] = {1, 2, 3, 4}, zero[4] = {0}, out[4];
    float *dx = dev_floats(d, x, 4), *dout = dev_floats(d, zero, 4);
    dev_queue *q = d->vt->queue_new(d);
    kcall c;
    d->vt->capture_begin(d, q);
    launch_add(d, q, &c, dout, dx, dx, 4);                /* out = 2x */
    d->vt->copy_async(d, q, dx, dout, sizeof x, DEV_D2D); /* x = out */
    dev_graph *g = d->vt->capture_end(d, q);
    assert_non_null(g);
    sync_ok(d, q);
    d->vt->to_host(d, out, dout, sizeof out);
    assert_true(all_equal(out, 4, 0.0f)); /* recorded, not run */
    for (int k = 0; k < 3; k++) d->vt->graph_launch(d, q, g);
    sync_ok(d, q);
    d->vt->to_host(d, out, dout, sizeof out);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 8 * x[i]);
    assert_int_equal(sim_graph_launches(d), 3);
    d->vt->graph_free(d, g);
    d->vt->queue_free(d, q);
    d->vt->close(d);
}

/* The planted bug: the caller moves a recorded call's output and expects
 * the replay to follow.  A GPU would write the old buffer; the sim stops. */
static void replay_changed_args(void *arg)
{
    device_obj *d = arg;
    float *a = d->vt->alloc(d, 16), *b = d->vt->alloc(d, 16);
    dev_queue *q = d->vt->queue_new(d);
    kcall c;
    d->vt->capture_begin(d, q);
    launch_add(d, q, &c, a, a, a, 4);
    dev_graph *g = d->vt->capture_end(d, q);
    c.a.out = b;
    d->vt->graph_launch(d, q, g);
    d->vt->queue_sync(d, q);
}

static void test_replay_with_changed_arguments_is_fatal(void **state)
{
    (void)state;
    device_obj *d = sim_open(0);
    assert_died_of(in_child(replay_changed_args, d), SIGABRT);
    d->vt->close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vtable_is_async_and_runs_the_cpu_kernels),
        cmocka_unit_test(test_round_trip_is_bit_identical),
        cmocka_unit_test(test_host_dereference_of_device_memory_crashes),
        cmocka_unit_test(test_pointer_outside_allocations_is_fatal),
        cmocka_unit_test(test_alloc_beyond_the_region_returns_null),
        cmocka_unit_test(test_many_allocations_and_frees_stay_correct),
        cmocka_unit_test(test_kernel_on_the_queue_is_right_after_sync),
        cmocka_unit_test(test_missing_sync_reads_a_stale_value),
        cmocka_unit_test(test_missing_sync_between_launches_reads_a_stale_value),
        cmocka_unit_test(test_async_copies_run_in_order_on_the_queue),
        cmocka_unit_test(test_launch_with_many_inputs),
        cmocka_unit_test(test_failing_kernel_is_returned_by_sync_and_later_launches_skipped),
        cmocka_unit_test(test_close_drains_open_queues),
        cmocka_unit_test(test_event_orders_two_queues),
        cmocka_unit_test(test_missing_event_wait_reads_a_stale_value),
        cmocka_unit_test(test_event_orders_queues_of_two_devices),
        cmocka_unit_test(test_event_sync_waits_for_the_recorded_work),
        cmocka_unit_test(test_a_recording_runs_only_when_launched),
        cmocka_unit_test(test_replay_with_changed_arguments_is_fatal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
