/* train_report.c - what both training loops (cmd_train.c's serial one and
 * train_async.c's watcher) do between steps: progress lines and the JSON
 * log, --eval and --eval-every, checkpoint saves.  It calls neither loop. */
#include <time.h>

#include "train.h"

double trep_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void trep_report(const train_opts *o, trep_progress *pg, long step, float loss, float lr,
                 int64_t batch, int final)
{
    double el = trep_now() - pg->t0, sps = el > 0 ? (double)(step - o->start) / el : 0;
    if (pg->log && step > 0) {
        fprintf(pg->log, "{\"step\":%ld,\"loss\":%.6g,", step, (double)loss);
        if (lr == lr) fprintf(pg->log, "\"lr\":%.6g,", (double)lr);
        fprintf(pg->log, "\"examples_per_s\":%.1f,\"elapsed_s\":%.3f}\n", sps * (double)batch, el);
    }
    if (o->quiet) return;
    double eta = sps > 0 ? (double)(o->steps - step) / sps : 0;
    if (pg->tty)
        fprintf(stderr, "\rstep %ld/%ld  loss %.4f  %.0f steps/s  ETA %.0fs   %s", step, o->steps,
                (double)loss, sps, eta, final ? "\n" : "");
    else
        fprintf(stderr, "step %ld/%ld loss %.4f %.0f steps/s\n", step, o->steps, (double)loss, sps);
}

int trep_run_evals(const train_opts *o, gr_session *s, double *vals, gr_status *st)
{
    for (int i = 0; i < o->n_evals; i++)
        if (gr_eval(s, o->evals[i], &vals[i], st) != GR_OK) {
            cli_print_status(st);
            return -1;
        }
    return 0;
}

void trep_print_evals(const train_opts *o, const double *vals, long step)
{
    if (o->quiet) return;
    for (int i = 0; i < o->n_evals; i++)
        fprintf(stderr, "eval %s = %.4f (step %ld)\n", o->evals[i], vals[i], step);
}

int trep_save_checkpoint(const train_opts *o, gr_session *s, gr_status *st)
{
    if (gr_session_save(s, o->ckpt_path, st) == GR_OK) return 0;
    cli_print_status(st);
    return -1;
}
