/* dist_backup.c - backup workers' shared-memory window (dist_backup.h).
 *
 * Each process's segment: rank 0's state header (the newest step and each
 * buffer's step), then its gradient calls' headers (tag, length), its
 * gradients, and (rank 0 only) two state buffers.  Tags and steps are
 * lock-free atomics, stored with release after what they describe and
 * loaded with acquire before it is read. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fatal.h"
#include "devices/cpu/cpu.h"
#include "dist_backup.h"
#include "dist_shm.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "tags shared between processes");

#define LINE 64
#define BUSY UINT64_MAX /* a state buffer being written */

typedef struct bk_head {
    atomic_ullong latest;  /* the step of the newest state published */
    atomic_ullong step[2]; /* each buffer's step, BUSY while written */
} bk_head;

typedef struct bk_call {
    atomic_ullong tag; /* the step the gradient was computed from, plus 1 */
    uint64_t n;
} bk_call;

struct bk_window {
    MPI_Comm node;
    MPI_Win win;
    int rank, size, need; /* need: the others rank 0 averages with */
    int calls, call;      /* gradient calls a step at most; the next one */
    size_t *off;          /* per call of this step: its first float */
    bk_head *head;        /* rank 0's */
    bk_call **call_of;    /* per process: its calls' headers */
    float **grad;         /* per process: its gradients */
    char *state[2];       /* rank 0's state buffers */
    size_t state_bytes;
    int *chosen; /* this step's others, in rank order */
    float *acc;  /* rank 0: the sum */
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t lines(size_t bytes)
{
    return (bytes + LINE - 1) / LINE * LINE;
}

/* Each process's calls, gradients and (rank 0) state, from the window. */
static void map_segments(bk_window *w, size_t floats)
{
    size_t calls_at = lines(sizeof(bk_head)),
           grads_at = calls_at + lines(sizeof(bk_call) * (size_t)w->calls),
           state_at = grads_at + lines(floats * sizeof(float));
    for (int q = 0; q < w->size; q++) {
        MPI_Aint got;
        int unit;
        char *base;
        MPI_Win_shared_query(w->win, q, &got, &unit, &base);
        if (q == 0) w->head = (bk_head *)base;
        w->call_of[q] = (bk_call *)(base + calls_at);
        w->grad[q] = (float *)(base + grads_at);
        if (q == 0) w->state[0] = base + state_at;
    }
    w->state[1] = w->state[0] + lines(w->state_bytes);
}

bk_window *bk_open(MPI_Comm comm, int backup, int calls, size_t floats, size_t state_bytes)
{
    MPI_Comm node;
    if (!shm_one_node(comm, 1, &node)) return NULL;
    bk_window *w = base_xcalloc(1, sizeof *w);
    w->node = node, w->calls = calls, w->state_bytes = state_bytes;
    MPI_Comm_rank(node, &w->rank);
    MPI_Comm_size(node, &w->size);
    w->need = w->size - backup - 1;
    w->off = base_xcalloc((size_t)calls + 1, sizeof *w->off);
    w->call_of = base_xcalloc((size_t)w->size, sizeof *w->call_of);
    w->grad = base_xcalloc((size_t)w->size, sizeof *w->grad);
    w->chosen = base_xcalloc((size_t)w->size, sizeof *w->chosen);
    if (w->rank == 0) w->acc = base_xcalloc(floats + 1, sizeof *w->acc);
    size_t bytes = lines(sizeof(bk_head)) + lines(sizeof(bk_call) * (size_t)calls) +
                   lines(floats * sizeof(float)) + (w->rank == 0 ? 2 * lines(state_bytes) : 0);
    char *mine;
    MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, node, &mine, &w->win);
    memset(mine, 0, bytes); /* no tag, no state */
    map_segments(w, floats);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
    MPI_Win_sync(w->win); /* every tag is 0 before anyone posts */
    MPI_Barrier(node);
    MPI_Win_sync(w->win);
    return w;
}

void bk_step_begin(bk_window *w)
{
    w->call = 0;
}

/* Spins until ready(w, arg), polling wt every 64 spins (who: the rank
 * waited for, -1 any).  0, or -1 when the poll stopped it. */
static int spin(bk_window *w, int (*ready)(bk_window *, void *), void *arg, int who, bk_wait *wt)
{
    double t0 = 0;
    for (unsigned spins = 1; !ready(w, arg); spins++) {
        cpu_relax();
        if (spins % 64) continue;
        double t = now();
        if (t0 == 0) t0 = t;
        if (wt->poll(wt, who, t - t0)) return -1;
    }
    return 0;
}

/* Rank 0, the first call of a step: the first `need` others whose first
 * call carries *tag (when several came meanwhile, the lowest ranks). */
static int chose(bk_window *w, void *tag)
{
    int got = 0;
    for (int q = 1; q < w->size && got < w->need; q++)
        if (atomic_load_explicit(&w->call_of[q][0].tag, memory_order_acquire) == *(uint64_t *)tag)
            w->chosen[got++] = q;
    return got == w->need;
}

typedef struct tag_at {
    atomic_ullong *tag;
    uint64_t want;
} tag_at;

static int tagged(bk_window *w, void *arg)
{
    (void)w;
    tag_at *t = arg;
    return atomic_load_explicit(t->tag, memory_order_acquire) == t->want;
}

/* Rank 0: out (or the variable, sgd) from in and the chosen ones' call
 * at `at`, summed in rank order. */
static void average(bk_window *w, size_t at, const float *in, float *out, size_t n,
                    const float *sgd)
{
    float scale = 1.0f / (float)(w->need + 1);
    memcpy(w->acc, in, n * sizeof *in);
    for (int k = 0; k < w->need; k++) {
        const float *g = w->grad[w->chosen[k]] + at;
        for (size_t i = 0; i < n; i++) w->acc[i] += g[i];
    }
    if (sgd)
        for (size_t i = 0; i < n; i++) out[i] -= *sgd * (w->acc[i] * scale);
    else
        for (size_t i = 0; i < n; i++) out[i] = w->acc[i] * scale;
}

/* Rank 0: waits for every chosen one's call j; a length other than n
 * is reported. */
static int gather(bk_window *w, int j, uint64_t tag, size_t n, bk_wait *wt, int *odd_rank,
                  uint64_t *odd_n)
{
    for (int k = 0; k < w->need; k++) {
        bk_call *c = &w->call_of[w->chosen[k]][j];
        tag_at t = {&c->tag, tag};
        if (spin(w, tagged, &t, w->chosen[k], wt)) return -1;
        if (c->n == n) continue;
        *odd_rank = w->chosen[k], *odd_n = c->n;
        return -1;
    }
    return 0;
}

int bk_gradient(bk_window *w, uint64_t step, const float *in, float *out, size_t n,
                const float *sgd, bk_wait *wt, int *odd_rank, uint64_t *odd_n)
{
    GR_ASSERT(w->call < w->calls);
    int j = w->call++;
    size_t at = w->off[j];
    w->off[j + 1] = at + n;
    uint64_t tag = step + 1;
    if (w->rank != 0) { /* rank 0 reads it only once this step's tag is stored */
        bk_call *c = &w->call_of[w->rank][j];
        memcpy(w->grad[w->rank] + at, in, n * sizeof *in);
        c->n = n;
        atomic_store_explicit(&c->tag, tag, memory_order_release);
        if (!sgd && out != in) memcpy(out, in, n * sizeof *in);
        return 0;
    }
    if (j == 0 && spin(w, chose, &tag, -1, wt)) return -1;
    if (gather(w, j, tag, n, wt, odd_rank, odd_n)) return -1;
    average(w, at, in, out, n, sgd);
    return 0;
}

void bk_forget(bk_window *w)
{
    for (int j = 0; j < w->calls; j++)
        atomic_store_explicit(&w->call_of[w->rank][j].tag, 0, memory_order_release);
}

void *bk_state_buffer(bk_window *w, uint64_t step)
{
    atomic_store_explicit(&w->head->step[step & 1], BUSY, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* BUSY is seen before any new byte */
    return w->state[step & 1];
}

void bk_publish(bk_window *w, uint64_t step)
{
    atomic_store_explicit(&w->head->step[step & 1], step, memory_order_release);
    atomic_store_explicit(&w->head->latest, step, memory_order_release);
}

typedef struct take {
    uint64_t after, step;
    void *dst;
} take;

/* One try: the newest state into t->dst, if of a step after t->after and
 * not rewritten meanwhile.  1 when taken. */
static int took(bk_window *w, void *arg)
{
    take *t = arg;
    uint64_t v = atomic_load_explicit(&w->head->latest, memory_order_acquire);
    if (v <= t->after) return 0;
    atomic_ullong *at = &w->head->step[v & 1];
    if (atomic_load_explicit(at, memory_order_acquire) != v) return 0;
    memcpy(t->dst, w->state[v & 1], w->state_bytes);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(at, memory_order_relaxed) != v) return 0;
    t->step = v;
    return 1;
}

int bk_take(bk_window *w, uint64_t after, void *dst, uint64_t *step, bk_wait *wt)
{
    take t = {.after = after, .dst = dst};
    if (spin(w, took, &t, 0, wt)) return -1;
    *step = t.step;
    return 0;
}

void bk_close(bk_window *w)
{
    if (!w) return;
    MPI_Win_unlock_all(w->win);
    MPI_Win_free(&w->win);
    MPI_Comm_free(&w->node);
    bk_abandon(w);
}

void bk_abandon(bk_window *w)
{
    if (!w) return;
    free(w->off);
    free(w->call_of);
    free(w->grad);
    free(w->chosen);
    free(w->acc);
    free(w);
}
