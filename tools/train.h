/* train.h - private to the training command: the options train_opts.c
 * parses, the reporting both training loops share (train_report.c) and the
 * concurrent loop (train_async.c).  Calls run one way: cmd_train.c ->
 * train_opts.c, cmd_train.c -> train_async.c -> train_report.c, and
 * cmd_train.c -> train_report.c. */
#ifndef GR_TRAIN_H
#define GR_TRAIN_H

#include <stdio.h>

#include "cli.h"

#define MAX_EVALS 16

#define MAX_TARGETS 16

typedef struct train_opts {
    const char *file, *target, *log_path;
    const char *tb_dir, *run_name;    /* --tensorboard DIR, --run-name NAME */
    long log_every;                   /* --log-every K (0: steps / 1000 + 1) */
    const char *targets[MAX_TARGETS]; /* --target, repeatable; target = targets[0] */
    const char *losses[MAX_TARGETS];  /* each target's loss name, or NULL */
    const char *lrs[MAX_TARGETS];     /* each target's learning rate name, or NULL */
    int64_t batch;                    /* examples per run of the first target */
    int n_targets;
    int executors;      /* --executors: concurrent runs per target */
    long max_staleness; /* --max-staleness S: no worker more than S steps ahead; -1 none */
    int slow_worker;    /* --slow W:F: worker or rank W (-1 none) sleeps (F - 1) x its step */
    double slow_factor;
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
    int silent; /* --distributed, ranks other than 0: errors only */
} train_opts;

/* train_opts.c: parses argv into *o (zeroed by the caller); 0 when ready to
 * train, -1 after printing --help, 2 after printing a usage error. */
int parse_train_opts(int argc, char **argv, train_opts *o);

/* train_report.c: progress lines, records (the JSON log and the TensorBoard
 * scalars, the same values), evaluations, checkpoints, Ctrl-C and SIGTERM. */
typedef struct trep_progress {
    double t0, last_print; /* trep_now() at the first step and the last progress line */
    int tty;               /* stderr is a terminal: redraw one line */
    gr_output *log;        /* --log, or NULL: renamed into place by trep_log_close */
    int log_failed;        /* a write to the log failed (printed): the run stops */
    gr_session *tb;        /* the session, when --tensorboard writes its scalars */
    long last_record;      /* the step of the last record: records only move forward */
    gr_session *sess;      /* the session trained: its updates' staleness */
    gr_staleness stale_at; /* gr_session_staleness at the last record */
} trep_progress;

/* Seconds on a monotonic clock. */
double trep_now(void);
/* Starts the clocks and the records, just before the first step. */
void trep_start(const train_opts *o, trep_progress *pg);
/* Called after each step (serial loop) or each look (train_async.c), and
 * once with final set: a progress line on stderr when one is due (unless
 * --quiet), and a record when step reaches the next multiple of
 * --log-every, or is final; lr (NaN when the target has none) is recorded
 * too.  -1 when writing the log or the TensorBoard file failed (printed). */
int trep_report(const train_opts *o, trep_progress *pg, long step, float loss, float lr, int final);
/* Each --eval into vals: 0; 1 when a signal cancelled one (vals are not
 * all set: see trep_cancel_evals_of); on failure prints the status and
 * returns -1. */
int trep_run_evals(const train_opts *o, gr_session *s, double *vals, gr_status *st);
/* Records the --eval values at step, and prints them unless final (the
 * summary does); -1 when writing the log or the TensorBoard file failed
 * (printed). */
int trep_evals_done(const train_opts *o, trep_progress *pg, const double *vals, long step,
                    int final);
/* --log: opens it (trep_log_close commits it: the file appears at the
 * path, complete); -1 when it cannot be written there (printed). */
int trep_log_open(const train_opts *o, trep_progress *pg);
int trep_log_close(trep_progress *pg);
/* The staleness of the updates since the session began (docs/api.md):
 * ", staleness mean M p99 P max X" into buf. */
void trep_staleness(const trep_progress *pg, char *buf, size_t n);
/* The log's last line: {"event":"done",...}; -1 when the write failed. */
int trep_log_done(const train_opts *o, trep_progress *pg, long done, long step, double sps,
                  float loss, const double *vals);
/* Ctrl-C (SIGINT) or SIGTERM: the first one asks training to stop after
 * the step in flight (the caller then saves, completes and closes the
 * logs); a second one takes the signal's default action at once.
 * trep_interrupted: the first signal's number, 0 while none came. */
void trep_catch_interrupt(void);
int trep_interrupted(void);
/* The session whose evaluations the first signal cancels (gr_eval_cancel),
 * so a long --eval pass does not hold the run up; NULL: none (before the
 * session is freed, and with --distributed, whose processes evaluate
 * together). */
void trep_cancel_evals_of(gr_session *s);
/* --profile: the costliest nodes' kernel time per step, then per op, on
 * stderr; every node in the log (when there is one) as a "profile" line;
 * -1 when writing the log failed (printed). */
#define TREP_PROFILE_ROWS 15
#define TREP_PROFILE_OPS  8 /* and the total time of the costliest ops */
int trep_profile(gr_session *s, long steps, double secs, trep_progress *pg);
/* Saves to --checkpoint; on failure prints the status and returns -1. */
int trep_save_checkpoint(const train_opts *o, gr_session *s, gr_status *st);

/* train_async.c: --executors K and/or several --target: K threads per
 * target call gr_run on the one session with no coordination (Hogwild!),
 * sharing the step budget; this thread reports, evaluates and saves. */
int train_async(const train_opts *o, gr_session *s, double *secs, float *last_loss,
                trep_progress *pg, gr_status *st);
/* Sleeps secs (a straggler's, --slow). */
void train_nap(double secs);

#endif
