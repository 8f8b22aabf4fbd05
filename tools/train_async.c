/* train_async.c - concurrent executors from the command line.
 *
 * `--executors K` starts K threads per target; each calls gr_run(target) on
 * the one session until the shared step budget is spent.  Nothing
 * coordinates them: variables are read and updated in place (Hogwild!), or
 * under per-variable locks with --locking.  Several `--target`s run side by
 * side the same way (one executor each by default: the async-towers
 * pattern).  This thread only watches: progress, records, --eval-every,
 * --checkpoint-every (a save is a consistent snapshot taken between runs).
 *
 * --max-staleness S bounds them (stale synchronous parallel): a worker
 * starts a step only while it is at most S steps ahead of the slowest
 * worker still running.  The slowest never waits, and a worker that leaves
 * (the budget spent, a failure, Ctrl-C) stops counting, so a wait always
 * ends.  With two workers an update then has a staleness of at most
 * 2S + 1.  --slow W:F makes worker W a straggler for experiments. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train.h"

/* What --max-staleness shares: each worker's steps done, and whether it
 * still runs, under one lock. */
typedef struct bound {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long s; /* -1: unbounded */
    long *done;
    char *running;
    int n;
} bound;

typedef struct worker {
    int id;
    bound *b;
    double slow; /* 1, or --slow's factor for this worker */
    gr_session *s;
    const char *target, *loss_name, *lr_name;
    atomic_long *next;     /* steps handed out so far */
    atomic_long *finished; /* steps done so far, by all workers */
    long end;
    _Atomic float loss, lr;
    atomic_int done;
    int failed;
    gr_status *st;
    pthread_t th;
} worker;

void train_nap(double secs)
{
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The fewest steps done by a running worker (the caller runs). */
static long slowest(const bound *b)
{
    long m = LONG_MAX;
    for (int i = 0; i < b->n; i++)
        if (b->running[i] && b->done[i] < m) m = b->done[i];
    return m;
}

/* --max-staleness: waits while this worker is more than S steps ahead. */
static void bound_wait(worker *w)
{
    bound *b = w->b;
    if (b->s < 0) return;
    pthread_mutex_lock(&b->mu);
    while (b->done[w->id] - slowest(b) > b->s && atomic_load(w->next) < w->end)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

/* A step done (left: the worker stops running), and the waiters told. */
static void bound_step(worker *w, int left)
{
    bound *b = w->b;
    pthread_mutex_lock(&b->mu);
    b->done[w->id] += !left;
    if (left) b->running[w->id] = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    float loss = 0, lr = NAN;
    gr_fetch f[2] = {{w->loss_name, &loss, sizeof loss, NULL}, {w->lr_name, &lr, sizeof lr, NULL}};
    int nf = w->loss_name ? w->lr_name ? 2 : 1 : 0;
    for (;;) {
        bound_wait(w);
        if (atomic_fetch_add(w->next, 1) >= w->end) break;
        double t0 = trep_now();
        if (gr_run(w->s, w->target, NULL, 0, f, nf, w->st) != GR_OK) {
            w->failed = 1;
            atomic_store(w->next, w->end); /* stops the others too */
            break;
        }
        if (w->slow > 1) train_nap((trep_now() - t0) * (w->slow - 1));
        atomic_store(&w->loss, loss);
        atomic_store(&w->lr, lr);
        atomic_fetch_add(w->finished, 1);
        bound_step(w, 0);
    }
    bound_step(w, 1);
    atomic_store(&w->done, 1);
    return NULL;
}

static int all_done(worker *w, int n)
{
    for (int i = 0; i < n; i++)
        if (!atomic_load(&w[i].done)) return 0;
    return 1;
}

/* Progress, records, --eval-every and --checkpoint-every at the step count
 * the workers have reached (it only grows), until they finish; Ctrl-C stops
 * them after their steps in flight. */
static int watch(const train_opts *o, gr_session *s, worker *w, int n, trep_progress *pg,
                 gr_status *st)
{
    long next_eval = o->eval_every ? (o->start / o->eval_every + 1) * o->eval_every : 0;
    long next_ckpt = o->ckpt_every ? (o->start / o->ckpt_every + 1) * o->ckpt_every : 0;
    double vals[MAX_EVALS];
    while (!all_done(w, n)) {
        train_nap(pg->tty ? 0.2 : 0.05);
        if (trep_interrupted()) atomic_store(w[0].next, o->steps);
        long step = o->start + atomic_load(w[0].finished);
        if (step >= o->steps) continue; /* the final report follows */
        if (trep_report(o, pg, step, atomic_load(&w[0].loss), atomic_load(&w[0].lr), 0) < 0)
            return -1;
        if (next_eval && step >= next_eval) {
            int ev = trep_run_evals(o, s, vals, st); /* 1: cancelled by a signal */
            if (ev < 0 || (ev == 0 && trep_evals_done(o, pg, vals, step, 0) < 0)) return -1;
            next_eval = (step / o->eval_every + 1) * o->eval_every;
        }
        if (next_ckpt && step >= next_ckpt) {
            if (trep_save_checkpoint(o, s, st) < 0) return -1;
            next_ckpt = (step / o->ckpt_every + 1) * o->ckpt_every;
        }
    }
    return 0;
}

/* Builds each target's plan and opens its data before the clock starts, as
 * the serial loop does, so the first steps do not pay for loading data. */
static int prepare_targets(const train_opts *o, gr_session *s, gr_status *st)
{
    for (int t = 0; t < o->n_targets; t++) {
        gr_fetch f[2] = {{o->losses[t], NULL, 0, NULL}, {o->lrs[t], NULL, 0, NULL}};
        if (gr_prepare(s, o->targets[t], f, o->losses[t] ? o->lrs[t] ? 2 : 1 : 0, st) != GR_OK) {
            cli_print_status(st);
            return -1;
        }
    }
    return 0;
}

int train_async(const train_opts *o, gr_session *s, double *secs, float *last_loss,
                trep_progress *pg, gr_status *st)
{
    int n = o->executors * o->n_targets, rc = 0;
    if (prepare_targets(o, s, st) < 0) return -1;
    worker *w = calloc((size_t)n, sizeof *w);
    bound b = {.s = o->max_staleness,
               .n = n,
               .done = calloc((size_t)n, sizeof(long)),
               .running = calloc((size_t)n, 1)};
    if (!w || !b.done || !b.running) {
        fprintf(stderr, "graphrun: error: out of memory for %d workers\n", n);
        free(w), free(b.done), free(b.running);
        return -1;
    }
    memset(b.running, 1, (size_t)n);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    atomic_long next = o->start, finished = 0;
    trep_start(o, pg);
    for (int i = 0; i < n; i++) {
        int t = i % o->n_targets;
        w[i] = (worker){.id = i,
                        .b = &b,
                        .slow = i == o->slow_worker ? o->slow_factor : 1,
                        .s = s,
                        .target = o->targets[t],
                        .loss_name = o->losses[t],
                        .lr_name = o->lrs[t],
                        .lr = NAN,
                        .next = &next,
                        .finished = &finished,
                        .end = o->steps,
                        .st = gr_status_new()};
        pthread_create(&w[i].th, NULL, worker_main, &w[i]);
    }
    rc = watch(o, s, w, n, pg, st);
    if (rc) atomic_store(&next, o->steps);
    pthread_mutex_lock(&b.mu); /* waiters see the budget spent */
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        if (w[i].failed && !rc) {
            cli_print_status(w[i].st);
            rc = -1;
        }
        gr_status_free(w[i].st);
    }
    *secs = trep_now() - pg->t0;
    *last_loss = atomic_load(&w[0].loss);
    if (!rc && trep_report(o, pg, o->start + atomic_load(&finished), *last_loss,
                           atomic_load(&w[0].lr), 1) < 0)
        rc = -1;
    free(w);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    free(b.done), free(b.running);
    return rc;
}
