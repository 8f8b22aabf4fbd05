/* train.h - private to tools/cmd_train.c and tools/train_async.c: the
 * training options and the reporting both training loops share. */
#ifndef GR_TRAIN_H
#define GR_TRAIN_H

#include <stdio.h>

#include "cli.h"

#define MAX_EVALS 16

#define MAX_TARGETS 16

typedef struct train_opts {
    const char *file, *target, *log_path;
    const char *targets[MAX_TARGETS]; /* --target, repeatable; target = targets[0] */
    const char *losses[MAX_TARGETS];  /* each target's loss name, or NULL */
    int64_t batch;                    /* examples per run of the first target */
    int n_targets;
    int executors; /* --executors: concurrent runs per target */
    const char *ckpt_path, *restore_path, *init_path;
    const char *evals[MAX_EVALS];
    int n_evals;
    cli_params params;
    long steps, eval_every, ckpt_every;
    long start; /* the step training starts after: 0, or the restored step */
    gr_restore_options restore;
    gr_session_options sess;
    gr_compile_options comp;
    int quiet;
} train_opts;

typedef struct progress {
    double t0, last_print;
    int tty;
    FILE *log;
} progress;

double now(void);
void report(const train_opts *o, progress *pg, long step, float loss, int64_t batch, int final);
int run_evals(const train_opts *o, gr_session *s, double *vals, gr_status *st);
void print_evals(const train_opts *o, const double *vals, long step);
int save_checkpoint(const train_opts *o, gr_session *s, gr_status *st);

/* train_async.c: --executors K and/or several --target: K threads per
 * target call gr_run on the one session with no coordination (Hogwild!),
 * sharing the step budget; this thread reports, evaluates and saves. */
int train_async(const train_opts *o, gr_session *s, double *secs, float *last_loss, progress *pg,
                gr_status *st);

#endif
