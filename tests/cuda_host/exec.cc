// exec.cc - the stand-in's blocks: each block's threads run as fibers on
// the stream's thread (fiber.h), scheduled without preemption.
//
// The order is chosen to expose missing barriers.  Threads start lowest
// first, and each runs until it waits, so warp 0 runs ahead of the rest: a
// read of shared memory that the other warps have not written yet (a
// missing __syncthreads() before it) reads what was there before.  When a
// warp's lanes all reach a shuffle they go on first, in lane order.  When a
// block barrier opens, the threads go on highest first after odd openings
// and lowest first after even ones, so a write that should have waited for
// a barrier (reuse of shared memory) lands before the reads of the round
// before it.  A thread that finishes without waiting hands its fiber to
// the next thread: a kernel without barriers costs one fiber per block.  A
// fiber with nothing left to run parks in its loop (fiber_body) and is
// resumed for the next thread to start, so its stack (and TSan's record of
// it) never grows; only one abandoned after an error starts afresh.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <deque>
#include <vector>

#include "fiber.h"
#include "host.h"

namespace cuda_host
{
thread_local const block_ctx *cur_block;
thread_local uint3 cur_thread;

namespace
{
enum state : unsigned char { T_UNSTARTED, T_READY, T_RUNNING, T_WAIT_WARP, T_WAIT_BLOCK, T_DONE };

struct thread_rec {
    state st;
    unsigned char gen; // warp calls made: the parity picks the exchange slots
    unsigned mask;     // the warp call it waits in
    const char *what;
    fiber *f;
};

struct warp_rec {
    unsigned arrived;
    uint64_t slot[2][WARP];
};

struct block_run {
    block_ctx ctx;
    kernel_call *call;
    int n, next_unstarted, done, openings;
    thread_rec th[MAX_BLOCK_THREADS];
    warp_rec warp[MAX_BLOCK_THREADS / WARP];
    std::deque<int> ready;
    bool failed;
    char why[400];
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
const size_t STACK_BYTES = 512 << 10;
#else
const size_t STACK_BYTES = 128 << 10;
#endif

// One per stream thread: its own context, the fibers it made, the block
// it runs.
struct worker {
    fiber main;
    std::vector<fiber *> parked, fresh, all; // parked: in fiber_body's loop; fresh: to reset
    fiber *gone_idle;                        // set by a fiber just before it parks
    int cur;                                 // the thread running
    int start_tid;                           // the thread a fresh fiber starts with
    block_run B;
    worker() : gone_idle(NULL), cur(0), start_tid(0) { fiber_main_init(&main); }
    ~worker()
    {
        for (fiber *f : all) {
            fiber_free(f);
            delete f;
        }
    }
};
thread_local worker *W;

// Frees the stream thread's worker when it ends.
struct worker_reaper {
    ~worker_reaper() { delete W; }
};
thread_local worker_reaper reaper;

worker *worker_get()
{
    (void)&reaper; // a thread_local is made on first use: this one frees W
    if (!W) W = new worker;
    return W;
}

uint3 index_of(const block_run &B, int t)
{
    unsigned bx = B.ctx.block_dim.x, by = B.ctx.block_dim.y;
    return uint3{t % bx, (t / bx) % by, t / (bx * by)};
}

void switch_to(worker *w, fiber *f)
{
    fiber_switch(&w->main, f);
    if (w->gone_idle) {
        w->parked.push_back(w->gone_idle);
        w->gone_idle = NULL;
    }
}

// Called on a fiber: stops the block.  The fiber is abandoned (reset when
// it is next used).
[[noreturn]] void fail_here(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail_here(const char *fmt, ...)
{
    worker *w = W;
    block_run &B = w->B;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(B.why, sizeof B.why, fmt, ap);
    va_end(ap);
    B.failed = true;
    fiber_switch(B.th[w->cur].f, &w->main);
    __builtin_unreachable();
}

void run_thread(worker *w, int t, fiber *f)
{
    block_run &B = w->B;
    w->cur = t;
    B.th[t].st = T_RUNNING;
    B.th[t].f = f;
    cur_thread = index_of(B, t);
    B.call->run();
    B.th[t].st = T_DONE;
    B.done++;
}

void fiber_body(void *arg)
{
    fiber *f = (fiber *)arg;
    worker *w = W;
    block_run &B = w->B;
    for (;;) {
        int t = w->start_tid;
        for (;;) {
            run_thread(w, t, f);
            if (B.failed || !B.ready.empty() || B.next_unstarted >= B.n) break;
            t = B.next_unstarted++;
        }
        w->gone_idle = f;
        fiber_switch(f, &w->main); // parked until the next start
    }
}

// Suspends the running thread in state st until the scheduler resumes it.
void wait_as(state st)
{
    worker *w = W;
    thread_rec &r = w->B.th[w->cur];
    if (r.st == T_RUNNING) r.st = st; // the last lane of a warp call is ready already
    fiber_switch(r.f, &w->main);
}

void resume(worker *w, int t)
{
    block_run &B = w->B;
    w->cur = t;
    B.th[t].st = T_RUNNING;
    cur_thread = index_of(B, t);
    switch_to(w, B.th[t].f);
}

// A fiber that starts w->start_tid when switched to.
fiber *fiber_get(worker *w)
{
    fiber *f;
    if (!w->parked.empty()) {
        f = w->parked.back();
        w->parked.pop_back();
        return f;
    }
    if (!w->fresh.empty()) {
        f = w->fresh.back();
        w->fresh.pop_back();
    } else {
        f = new fiber;
        if (!fiber_new(f, STACK_BYTES)) {
            delete f;
            return NULL;
        }
        w->all.push_back(f);
    }
    fiber_reset(f, fiber_body, f);
    return f;
}

void fail_block(block_run &B, const char *msg)
{
    snprintf(B.why, sizeof B.why, "%s", msg);
    B.failed = true;
}

// Nothing can run: a barrier opens, or the block is stuck.
void settle(block_run &B)
{
    int at_block = 0, at_warp = -1;
    for (int t = 0; t < B.n; t++) {
        if (B.th[t].st == T_WAIT_BLOCK) at_block++;
        if (B.th[t].st == T_WAIT_WARP && at_warp < 0) at_warp = t;
    }
    if (at_warp >= 0) {
        const thread_rec &r = B.th[at_warp];
        snprintf(B.why, sizeof B.why,
                 "%s with mask 0x%08x in warp %d: lanes of the mask never came (they "
                 "finished, or wait in __syncthreads)",
                 r.what, r.mask, at_warp / WARP);
        B.failed = true;
        return;
    }
    if (B.done > 0) {
        snprintf(B.why, sizeof B.why,
                 "__syncthreads() reached by %d of the block's %d threads (%d had finished)",
                 at_block, B.n, B.done);
        B.failed = true;
        return;
    }
    B.openings++;
    for (int i = 0; i < B.n; i++) {
        int t = B.openings % 2 ? B.n - 1 - i : i;
        B.th[t].st = T_READY;
        B.ready.push_back(t);
    }
}

void run_block(worker *w)
{
    block_run &B = w->B;
    B.next_unstarted = B.done = B.openings = 0;
    B.ready.clear();
    for (int t = 0; t < B.n; t++) B.th[t] = thread_rec{T_UNSTARTED, 0, 0, NULL, NULL};
    for (warp_rec &wr : B.warp) wr.arrived = 0;
    while (!B.failed && B.done < B.n) {
        if (!B.ready.empty()) {
            int t = B.ready.front();
            B.ready.pop_front();
            resume(w, t);
        } else if (B.next_unstarted < B.n) {
            w->start_tid = B.next_unstarted++;
            fiber *f = fiber_get(w);
            if (!f) return fail_block(B, "cannot map a fiber's stack");
            switch_to(w, f);
        } else {
            settle(B);
        }
    }
    if (!B.failed) return;
    // The fibers of threads left waiting are abandoned: reset on reuse.
    for (int t = 0; t < B.n; t++)
        if (B.th[t].st != T_DONE && B.th[t].st != T_UNSTARTED && B.th[t].f)
            w->fresh.push_back(B.th[t].f);
}
} // namespace

unsigned warp_lane(void)
{
    return (unsigned)W->cur % WARP;
}

// Arrival at a warp call: when the mask is complete its lanes go on first,
// in lane order.  Every lane waits, the last one too.
static void warp_arrive(unsigned mask, const char *what)
{
    worker *w = W;
    block_run &B = w->B;
    int t = w->cur, lane = t % WARP, base = t - lane;
    int lanes = B.n - base < WARP ? B.n - base : WARP;
    unsigned valid = lanes == WARP ? ~0u : (1u << lanes) - 1;
    if (mask & ~valid)
        fail_here("%s with mask 0x%08x in warp %d, which has only %d threads", what, mask, t / WARP,
                  lanes);
    if (!(mask & (1u << lane)))
        fail_here("%s from lane %d, which its mask 0x%08x leaves out", what, lane, mask);
    warp_rec &wr = B.warp[t / WARP];
    thread_rec &r = B.th[t];
    r.mask = mask;
    r.what = what;
    wr.arrived |= 1u << lane;
    if ((wr.arrived & mask) == mask) {
        wr.arrived &= ~mask;
        for (int l = WARP - 1; l >= 0; l--)
            if (mask & (1u << l)) {
                B.th[base + l].st = T_READY;
                B.ready.push_front(base + l);
            }
    }
    wait_as(T_WAIT_WARP);
}

uint64_t warp_exchange(unsigned mask, uint64_t mine, unsigned from, const char *what)
{
    worker *w = W;
    block_run &B = w->B;
    int t = w->cur;
    if (from >= WARP || !(mask & (1u << from)))
        fail_here("%s reads lane %u, which its mask 0x%08x leaves out", what, from, mask);
    warp_rec &wr = B.warp[t / WARP];
    int g = B.th[t].gen++ & 1;
    wr.slot[g][t % WARP] = mine;
    warp_arrive(mask, what);
    return wr.slot[g][from];
}

unsigned warp_vote(unsigned mask, int bit, const char *what)
{
    worker *w = W;
    block_run &B = w->B;
    int t = w->cur;
    warp_rec &wr = B.warp[t / WARP];
    int g = B.th[t].gen++ & 1;
    wr.slot[g][t % WARP] = (uint64_t)bit;
    warp_arrive(mask, what);
    unsigned out = 0;
    for (int l = 0; l < WARP; l++)
        if ((mask & (1u << l)) && wr.slot[g][l]) out |= 1u << l;
    return out;
}

void syncthreads(void)
{
    wait_as(T_WAIT_BLOCK);
}

bool run_kernel(const launch_geom &g, kernel_call *c, char *why, size_t n)
{
    worker *w = worker_get();
    block_run &B = w->B;
    B.call = c;
    B.failed = false;
    B.ctx.block_dim = g.block;
    B.ctx.grid_dim = g.grid;
    B.n = (int)(g.block.x * g.block.y * g.block.z);
    cur_block = &B.ctx;
    for (unsigned z = 0; z < g.grid.z; z++)
        for (unsigned y = 0; y < g.grid.y; y++)
            for (unsigned x = 0; x < g.grid.x; x++) {
                B.ctx.block_idx = uint3{x, y, z};
                run_block(w);
                if (B.failed) {
                    snprintf(why, n, "kernel %s, block (%u, %u, %u) of %u x %u x %u threads: %s",
                             c->name, x, y, z, g.block.x, g.block.y, g.block.z, B.why);
                    return false;
                }
            }
    return true;
}
} // namespace cuda_host
