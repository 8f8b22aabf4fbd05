/* dist_shm.c - the one-node allreduce (dist_shm.h).
 *
 * Each process owns a slot (its barrier counter, and its call's length and
 * collective number) and two segments of max_n floats in the window
 * (double buffering: call k uses segment k % 2).  A call:
 *   1. copies in into its segment, but for its own part;
 *   2. barrier: every segment holds what the others need of its vector;
 *      every process checks that the others' calls are its own;
 *   3. process r sums part r of the vector, the others' values from their
 *      segments and its own from in, in rank order, scales it by 1/P and
 *      writes it into out and over part r of its own segment (only it
 *      touches that part of its segment in this phase);
 *   4. barrier: every part holds its mean;
 *   5. everyone copies part q from process q's segment into out, q != r.
 * shm_reduce_sgd is the same call whose phases 3 and 5 subtract step times
 * the mean from a variable instead of storing it in out.
 * Phase 5 of call k still reads segments that call k + 1 does not write
 * (the other buffer), and call k + 2's phase 1 comes after call k + 1's
 * first barrier, which every process reaches only after its phase 5 of
 * call k: two barriers a call suffice.
 *
 * A barrier: the process stores its count of barriers reached (release),
 * then spins until every other one's count is as high (acquire), so what
 * each wrote before its barrier is seen by the others after theirs.  The
 * counters are lock-free atomics, which work across processes sharing the
 * memory. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dist_shm.h"
#include <time.h>
#include "base/fatal.h"
#include "devices/cpu/cpu.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "barrier counters shared between processes");

typedef struct shm_slot {
    atomic_ullong arrived; /* barriers this process has reached */
    uint64_t n, seq;       /* its call's length and collective number */
} shm_slot;

#define SLOT_BYTES 64 /* a cache line: the segments that follow stay aligned */
_Static_assert(sizeof(shm_slot) <= SLOT_BYTES, "a slot fits its line");

struct shm_reduce {
    MPI_Comm node;
    MPI_Win win;
    int rank, size;
    size_t max_n;
    shm_slot **slot; /* per process: its slot */
    float **seg;     /* per process: its two segments, back to back */
    unsigned calls;
    unsigned long long barriers; /* this process has reached */
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Parts start on 16-float boundaries (64 bytes: a cache line each). */
static size_t part_start(size_t n, int q, int parts)
{
    size_t lines = (n + 15) / 16;
    size_t at = lines * (size_t)q / (size_t)parts * 16;
    return at < n ? at : n;
}

int shm_one_node(MPI_Comm comm, int wanted, MPI_Comm *node)
{
    int size, node_size;
    MPI_Comm_size(comm, &size);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node);
    MPI_Comm_size(*node, &node_size);
    int all_here = node_size == size && wanted, everywhere = 0;
    MPI_Allreduce(&all_here, &everywhere, 1, MPI_INT, MPI_LAND, comm);
    if (everywhere && size > 1) return 1;
    MPI_Comm_free(node);
    return 0;
}

shm_reduce *shm_reduce_open(MPI_Comm comm, size_t max_n, int wanted)
{
    MPI_Comm node;
    int size;
    MPI_Comm_size(comm, &size);
    if (!shm_one_node(comm, wanted && max_n > 0, &node)) return NULL;
    shm_reduce *r = base_xcalloc(1, sizeof *r);
    r->node = node, r->size = size, r->max_n = max_n;
    MPI_Comm_rank(node, &r->rank);
    char *mine;
    size_t bytes =
        SLOT_BYTES + (2 * max_n * sizeof(float) + SLOT_BYTES - 1) / SLOT_BYTES * SLOT_BYTES;
    MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, node, &mine, &r->win);
    r->slot = base_xcalloc((size_t)size, sizeof *r->slot);
    r->seg = base_xcalloc((size_t)size, sizeof *r->seg);
    for (int q = 0; q < size; q++) {
        MPI_Aint got;
        int unit;
        char *base;
        MPI_Win_shared_query(r->win, q, &got, &unit, &base);
        r->slot[q] = (shm_slot *)base;
        r->seg[q] = (float *)(base + SLOT_BYTES);
    }
    atomic_init(&r->slot[r->rank]->arrived, 0);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, r->win);
    MPI_Win_sync(r->win); /* every counter is 0 before anyone's first barrier */
    MPI_Barrier(node);
    MPI_Win_sync(r->win);
    return r;
}

/* Spins until process q has reached barrier b, polling w every 64 spins. */
static int wait_for(shm_reduce *r, int q, unsigned long long b, shm_wait *w)
{
    atomic_ullong *a = &r->slot[q]->arrived;
    double t0 = 0;
    for (unsigned spins = 1; atomic_load_explicit(a, memory_order_acquire) < b; spins++) {
        cpu_relax();
        if (spins % 64) continue;
        double t = now();
        if (t0 == 0) t0 = t;
        if (w->poll(w, q, t - t0)) return SHM_STOPPED;
    }
    return SHM_OK;
}

static int shm_barrier(shm_reduce *r, shm_wait *w)
{
    unsigned long long b = ++r->barriers;
    atomic_store_explicit(&r->slot[r->rank]->arrived, b, memory_order_release);
    for (int q = 0; q < r->size; q++)
        if (q != r->rank && wait_for(r, q, b, w) != SHM_OK) return SHM_STOPPED;
    return SHM_OK;
}

/* After the first barrier: every process makes the same call (each one
 * compares all, so all of them find a difference). */
static int same_call(const shm_reduce *r, size_t n, shm_wait *w)
{
    for (int q = 0; q < r->size; q++) {
        const shm_slot *o = r->slot[q];
        if (q == r->rank || (o->n == n && o->seq == w->seq)) continue;
        w->odd_rank = q, w->odd_n = o->n, w->odd_seq = o->seq;
        return SHM_MISMATCH;
    }
    return SHM_OK;
}

/* Where a call's mean goes: into out, or (sgd) out -= step * mean, out
 * being the variable an apply_sgd_allreduce updates. */
typedef struct shm_dest {
    float *out;
    float step;
    int sgd;
} shm_dest;

/* d's elements [i, i + m) from the mean's src[0..m). */
static inline void put_mean(const shm_dest *d, size_t i, const float *src, size_t m)
{
    float *restrict out = d->out + i;
    if (!d->sgd) {
        memcpy(out, src, m * sizeof *out);
        return;
    }
    for (size_t k = 0; k < m; k++) out[k] -= d->step * src[k];
}

/* Block [i, i + m) of the mean, m <= 16: the other processes' values from
 * their segments, this one's from its own in, summed in rank order; over
 * this process's segment (at offset buf), for the others, and into d. */
static inline void sum_block(shm_reduce *r, size_t buf, const float *in, const shm_dest *d,
                             size_t i, size_t m, float scale)
{
    float acc[16] = {0};
    for (int q = 0; q < r->size; q++) {
        const float *src = q == r->rank ? in + i : r->seg[q] + buf + i;
        for (size_t k = 0; k < m; k++) acc[k] += src[k];
    }
    float *mine = r->seg[r->rank] + buf + i;
    for (size_t k = 0; k < m; k++) mine[k] = acc[k] * scale;
    put_mean(d, i, mine, m);
}

/* This process's part [lo, hi) of the mean; lo is a multiple of 16. */
static void sum_part(shm_reduce *r, size_t buf, const float *in, const shm_dest *d, size_t lo,
                     size_t hi)
{
    float scale = 1.0f / (float)r->size;
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) sum_block(r, buf, in, d, i, 16, scale); /* vectorised */
    if (i < hi) sum_block(r, buf, in, d, i, hi - i, scale);
}

/* Copies what the other processes sum from this one: all but its own part. */
static void copy_in(shm_reduce *r, size_t buf, const float *in, size_t n)
{
    for (int q = 0; q < r->size; q++) {
        if (q == r->rank) continue;
        size_t lo = part_start(n, q, r->size), hi = part_start(n, q + 1, r->size);
        memcpy(r->seg[r->rank] + buf + lo, in + lo, (hi - lo) * sizeof *in);
    }
}

/* The parts of the mean the others summed, from their segments into d. */
static void copy_out(shm_reduce *r, size_t buf, const shm_dest *d, size_t n)
{
    for (int q = 0; q < r->size; q++) {
        if (q == r->rank) continue;
        size_t lo = part_start(n, q, r->size), hi = part_start(n, q + 1, r->size);
        put_mean(d, lo, r->seg[q] + buf + lo, hi - lo);
    }
}

static int reduce(shm_reduce *r, const float *in, const shm_dest *d, size_t n, shm_wait *w)
{
    GR_ASSERT(n <= r->max_n);
    size_t buf = (r->calls++ & 1) * r->max_n;
    shm_slot *me = r->slot[r->rank];
    me->n = n, me->seq = w->seq;
    copy_in(r, buf, in, n);
    int rc = shm_barrier(r, w);
    if (rc == SHM_OK) rc = same_call(r, n, w);
    if (rc != SHM_OK) return rc;
    /* in == out: this part of in is read before it is written, block by block */
    sum_part(r, buf, in, d, part_start(n, r->rank, r->size), part_start(n, r->rank + 1, r->size));
    if ((rc = shm_barrier(r, w)) != SHM_OK) return rc;
    copy_out(r, buf, d, n);
    return SHM_OK;
}

int shm_reduce_mean(shm_reduce *r, const float *in, float *out, size_t n, shm_wait *w)
{
    shm_dest d = {.out = out};
    return reduce(r, in, &d, n, w);
}

int shm_reduce_sgd(shm_reduce *r, const float *in, float *var, size_t n, float step, shm_wait *w)
{
    shm_dest d = {.out = var, .step = step, .sgd = 1};
    return reduce(r, in, &d, n, w);
}

void shm_reduce_close(shm_reduce *r)
{
    if (!r) return;
    MPI_Win_unlock_all(r->win);
    MPI_Win_free(&r->win);
    MPI_Comm_free(&r->node);
    shm_reduce_abandon(r);
}

void shm_reduce_abandon(shm_reduce *r)
{
    if (!r) return;
    free(r->slot);
    free(r->seg);
    free(r);
}
