/* towers_async.c - asynchronous data-parallel training with one thread per
 * tower, as in TensorFlow's multi-device async recipe.
 *
 * examples/two_towers.graph builds the model twice (tower 0 on cpu:0,
 * tower 1 on cpu:1) with shared variables, and has one train target per
 * tower: train_0 minimizes l[0] on cpu:0, train_1 minimizes l[1] on cpu:1
 * (plus `train`, the synchronous version over both).  Here thread t loops
 * on train_t, so the towers update the shared weights without waiting for
 * each other.
 *
 *     towers_async [GRAPH] [STEPS_PER_TOWER] [--cpu-as-gpu]
 *
 * Prints each tower's steps and last loss and the mean training loss over
 * one pass of the data before and after; exits non-zero on any error or
 * when the loss did not go down. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun.h"

#ifndef GR_EXAMPLES_DIR
#define GR_EXAMPLES_DIR "examples"
#endif

enum { TOWERS = 2 };

typedef struct tower {
    pthread_t tid;
    gr_session *s;
    char target[24];
    const char *loss_name; /* the target's loss, from gr_target_info_get */
    int steps, done;
    float loss;
    gr_status *st;
} tower;

static void *tower_loop(void *arg)
{
    tower *t = arg;
    gr_fetch fetch = {t->loss_name, &t->loss, sizeof t->loss, NULL};
    for (t->done = 0; t->done < t->steps; t->done++)
        if (gr_run(t->s, t->target, NULL, 0, &fetch, 1, t->st) != GR_OK) break;
    return NULL;
}

/* Fills in tower t's target and loss name; 0 on success. */
static int tower_init(tower *t, int i, const gr_program *p, gr_session *s, int steps)
{
    gr_target_info info;
    *t = (tower){.s = s, .steps = steps, .st = gr_status_new()};
    snprintf(t->target, sizeof t->target, "train_%d", i);
    if (gr_target_info_get(p, t->target, &info, t->st) != GR_OK) return 1;
    t->loss_name = info.loss;
    return 0;
}

/* Runs one thread per tower target and reports; 0 when all succeeded. */
static int run_towers(const gr_program *p, gr_session *s, int steps)
{
    tower t[TOWERS];
    int started = 0, failed = 0;
    for (int i = 0; i < TOWERS; i++) {
        if (tower_init(&t[i], i, p, s, steps) != 0) continue;
        if (pthread_create(&t[i].tid, NULL, tower_loop, &t[i]) == 0) started |= 1 << i;
    }
    for (int i = 0; i < TOWERS; i++) {
        if (started & 1 << i) pthread_join(t[i].tid, NULL);
        if (gr_status_code(t[i].st) != GR_OK || !(started & 1 << i)) {
            fprintf(stderr, "tower %d: %s\n", i, gr_status_message(t[i].st));
            failed = 1;
        } else {
            printf("tower %d (%s): %d steps, last %s %.4f\n", i, t[i].target, t[i].done,
                   t[i].loss_name, (double)t[i].loss);
        }
        gr_status_free(t[i].st);
    }
    return failed;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : GR_EXAMPLES_DIR "/two_towers.graph";
    int steps = argc > 2 ? atoi(argv[2]) : 1000;
    /* --cpu-as-gpu: what the program places on cpu:N runs on a GPU (CI's GPU runs) */
    gr_compile_options co = {.cpu_as_gpu = argc > 3 && strcmp(argv[3], "--cpu-as-gpu") == 0};
    if (steps < 1 || argc > 3 + co.cpu_as_gpu) {
        fprintf(stderr, "usage: towers_async [GRAPH] [STEPS_PER_TOWER>=1] [--cpu-as-gpu]\n");
        return 2;
    }
    gr_status *st = gr_status_new();
    gr_session_options so = {.executors = TOWERS};
    gr_program *prog = NULL;
    gr_session *s = NULL;
    double before = 0, after = 0;
    int rc = 1;
    if (gr_compile_file(path, &co, &prog, st) == GR_OK &&
        gr_session_new(prog, &so, &s, st) == GR_OK && gr_eval(s, "loss", &before, st) == GR_OK &&
        run_towers(prog, s, steps) == 0 && gr_eval(s, "loss", &after, st) == GR_OK) {
        printf("training loss %.4f -> %.4f\n", before, after);
        rc = after < before ? 0 : (fprintf(stderr, "towers_async: loss did not go down\n"), 1);
    } else if (gr_status_code(st) != GR_OK) {
        fprintf(stderr, "%s\n", gr_status_message(st));
    }
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
    return rc;
}
