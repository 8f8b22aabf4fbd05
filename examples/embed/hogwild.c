/* hogwild.c - asynchronous (Hogwild!) training on one machine.
 *
 * The C version of the classic TensorFlow recipe: build the graph once,
 * open one session, then start N Python threads that each loop on
 * `sess.run(train_op)`.  Every thread runs the same train target on the
 * same session; gr_run is thread-safe, variables are updated in place
 * without locks, and each run takes the next batch from the shared reader.
 *
 *     hogwild [GRAPH] [THREADS] [STEPS_PER_THREAD] [--cpu-as-gpu]
 *
 * The session is told how many executors will run at once, so each run's
 * GEMMs get their share of the thread budget instead of oversubscribing
 * the cores.  Add `.locking = 1` to make every update take its variable's
 * lock instead.
 *
 * GRAPH defaults to examples/fashion_mlp.graph in the source tree.  Prints
 * the total steps/s and the test accuracy (the `accuracy` target); exits
 * non-zero on any error. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graphrun.h"

#ifndef GR_EXAMPLES_DIR
#define GR_EXAMPLES_DIR "examples"
#endif

typedef struct worker {
    pthread_t tid;
    gr_session *s;
    int steps;
    int done;      /* steps that succeeded */
    float loss;    /* loss of the last step */
    gr_status *st; /* each thread its own: a status is not shared */
} worker;

static void *train_loop(void *arg)
{
    worker *w = arg;
    gr_fetch fetch = {"train/loss", &w->loss, sizeof w->loss, NULL};
    for (w->done = 0; w->done < w->steps; w->done++)
        if (gr_run(w->s, "train", NULL, 0, &fetch, 1, w->st) != GR_OK) break;
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts the workers, waits for them and reports; 0 when all succeeded. */
static int run_workers(gr_session *s, int n, int steps)
{
    worker *w = calloc((size_t)n, sizeof *w);
    int started = 0, failed = 0, total = 0;
    double t0 = now();
    for (; w && started < n; started++) {
        w[started] = (worker){.s = s, .steps = steps, .st = gr_status_new()};
        if (pthread_create(&w[started].tid, NULL, train_loop, &w[started]) != 0) break;
    }
    for (int i = 0; i < started; i++) pthread_join(w[i].tid, NULL);
    double secs = now() - t0;
    for (int i = 0; i < started; i++) {
        if (gr_status_code(w[i].st) != GR_OK) {
            fprintf(stderr, "thread %d: %s\n", i, gr_status_message(w[i].st));
            failed = 1;
        }
        printf("thread %d: %d steps, last loss %.4f\n", i, w[i].done, (double)w[i].loss);
        total += w[i].done;
        gr_status_free(w[i].st);
    }
    if (!w || started < n) failed = (fprintf(stderr, "hogwild: cannot start threads\n"), 1);
    printf("%d threads: %d steps in %.2f s, %.0f steps/s\n", started, total, secs, total / secs);
    free(w);
    return failed;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : GR_EXAMPLES_DIR "/fashion_mlp.graph";
    int threads = argc > 2 ? atoi(argv[2]) : 2, steps = argc > 3 ? atoi(argv[3]) : 1000;
    /* --cpu-as-gpu: what the program places on cpu:N runs on a GPU (CI's GPU runs) */
    gr_compile_options co = {.cpu_as_gpu = argc > 4 && strcmp(argv[4], "--cpu-as-gpu") == 0};
    if (threads < 1 || steps < 1 || argc > 4 + co.cpu_as_gpu) {
        fprintf(stderr,
                "usage: hogwild [GRAPH] [THREADS>=1] [STEPS_PER_THREAD>=1] [--cpu-as-gpu]\n");
        return 2;
    }
    gr_status *st = gr_status_new();
    gr_session_options so = {.executors = threads};
    gr_program *prog = NULL;
    gr_session *s = NULL;
    double acc = 0;
    int rc = 1;
    if (gr_compile_file(path, &co, &prog, st) == GR_OK &&
        gr_session_new(prog, &so, &s, st) == GR_OK && run_workers(s, threads, steps) == 0 &&
        gr_eval(s, "accuracy", &acc, st) == GR_OK) {
        printf("accuracy %.4f\n", acc);
        rc = 0;
    } else if (gr_status_code(st) != GR_OK) {
        fprintf(stderr, "%s\n", gr_status_message(st));
    }
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
    return rc;
}
