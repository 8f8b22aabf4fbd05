/* train_report.c - what both training loops (cmd_train.c's serial one and
 * train_async.c's watcher) do between steps: progress lines, records (the
 * JSON log and the TensorBoard scalars), --eval and --eval-every,
 * checkpoint saves, Ctrl-C.  It calls neither loop.
 *
 * A record's values are rounded to the 6 significant digits the log
 * prints before either sink gets them, so the log and the event file hold
 * the same numbers. */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train.h"

typedef struct trep_scalar {
    const char *key; /* the log's key; "train/KEY" in TensorBoard */
    float value;
} trep_scalar;

static atomic_int interrupted; /* lock-free: safe to set in a handler */

static void on_interrupt(int sig)
{
    (void)sig;
    atomic_store(&interrupted, 1);
}

void trep_catch_interrupt(void)
{
    struct sigaction sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESETHAND | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

int trep_interrupted(void)
{
    return atomic_load(&interrupted);
}

double trep_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float round6(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return isfinite(v) ? strtof(b, NULL) : (float)v;
}

/* A JSON number, or null for NaN and infinities (JSON has none). */
static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static int tb_scalar(trep_progress *pg, const char *group, const char *key, long step, float v)
{
    char tag[256];
    snprintf(tag, sizeof tag, "%s/%s", group, key);
    gr_status *st = gr_status_new();
    int rc = gr_session_scalar(pg->tb, tag, step, v, st) == GR_OK ? 0 : -1;
    if (rc) cli_print_status(st);
    gr_status_free(st);
    return rc;
}

static int record(trep_progress *pg, long step, const trep_scalar *v, int n, double elapsed)
{
    if (pg->log) {
        fprintf(pg->log, "{\"step\":%ld", step);
        for (int i = 0; i < n; i++) {
            fprintf(pg->log, ",\"%s\":", v[i].key);
            json_number(pg->log, v[i].value);
        }
        fprintf(pg->log, ",\"elapsed_s\":%.3f}\n", elapsed);
    }
    for (int i = 0; pg->tb && i < n; i++)
        if (tb_scalar(pg, "train", v[i].key, step, v[i].value) < 0) return -1;
    return 0;
}

static long log_every(const train_opts *o)
{
    return o->log_every ? o->log_every : o->steps / 1000 + 1;
}

static void progress_line(const train_opts *o, const trep_progress *pg, long step, float loss,
                          double sps, int final)
{
    double eta = sps > 0 ? (double)(o->steps - step) / sps : 0;
    if (pg->tty)
        fprintf(stderr, "\rstep %ld/%ld  loss %.4f  %.0f steps/s  ETA %.0fs   %s", step, o->steps,
                (double)loss, sps, eta, final ? "\n" : "");
    else
        fprintf(stderr, "step %ld/%ld loss %.4f %.0f steps/s\n", step, o->steps, (double)loss, sps);
}

int trep_report(const train_opts *o, trep_progress *pg, long step, float loss, float lr, int final)
{
    double now = trep_now(), el = now - pg->t0;
    double sps = el > 0 ? (double)(step - o->start) / el : 0;
    if (!o->quiet && (final || now - pg->last_print > (pg->tty ? 0.2 : 2.0))) {
        progress_line(o, pg, step, loss, sps, final);
        pg->last_print = now;
    }
    long k = log_every(o);
    if ((!pg->log && !pg->tb) || step <= pg->last_record || step <= 0 ||
        !(final || step / k > pg->last_record / k))
        return 0;
    pg->last_record = step;
    trep_scalar v[] = {{"loss", round6(loss)},
                       {"steps_per_s", round6(sps)},
                       {"examples_per_s", round6(sps * (double)o->batch)},
                       {"lr", round6(lr)}};
    int n = sizeof v / sizeof *v;
    return record(pg, step, v, isnan(lr) ? n - 1 : n, el); /* NaN: the target has no rate */
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

void trep_eval_json(const train_opts *o, const double *vals, FILE *log)
{
    fputc('{', log);
    for (int i = 0; i < o->n_evals; i++) {
        fprintf(log, "%s\"%s\":", i ? "," : "", o->evals[i]);
        json_number(log, round6(vals[i]));
    }
    fputc('}', log);
}

int trep_evals_done(const train_opts *o, trep_progress *pg, const double *vals, long step,
                    int final)
{
    if (pg->tty && !o->quiet && !final) fputc('\n', stderr); /* below the progress line */
    for (int i = 0; !o->quiet && !final && i < o->n_evals; i++)
        fprintf(stderr, "eval %s = %.4f (step %ld)\n", o->evals[i], vals[i], step);
    for (int i = 0; pg->tb && i < o->n_evals; i++)
        if (tb_scalar(pg, "eval", o->evals[i], step, round6(vals[i])) < 0) return -1;
    if (!pg->log || final) return 0; /* the final values go in the "done" line */
    fprintf(pg->log, "{\"step\":%ld,\"eval\":", step);
    trep_eval_json(o, vals, pg->log);
    fputs("}\n", pg->log);
    return 0;
}

void trep_start(const train_opts *o, trep_progress *pg)
{
    pg->t0 = pg->last_print = trep_now();
    pg->last_record = o->start;
}

int trep_save_checkpoint(const train_opts *o, gr_session *s, gr_status *st)
{
    if (gr_session_save(s, o->ckpt_path, st) == GR_OK) return 0;
    cli_print_status(st);
    return -1;
}

/* One row of the --profile table. */
static void profile_row(const gr_profile_row *r, long steps, double total)
{
    double ms = r->seconds * 1e3 / (double)steps;
    fprintf(stderr, "  %8.2f %6.1f%% %6.2f  %-18s %-18s %-6s %4d: %.40s\n", ms,
            total > 0 ? 100.0 * r->seconds / total : 0.0, (double)r->calls / (double)steps, r->op,
            r->type, r->device, r->line, r->source);
}

/* The rows' time summed per op, costliest first, on one line. */
static void profile_by_op(gr_profile_row *rows, int n, long steps, double total)
{
    for (int i = 0; i < n; i++) /* fold each op's rows into its first */
        for (int j = i + 1; rows[i].calls && j < n; j++)
            if (rows[j].calls && !strcmp(rows[j].op, rows[i].op)) {
                rows[i].seconds += rows[j].seconds;
                rows[j].calls = 0;
            }
    fputs("  by op:", stderr);
    for (int shown = 0; shown < TREP_PROFILE_OPS; shown++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (rows[i].calls && (best < 0 || rows[i].seconds > rows[best].seconds)) best = i;
        if (best < 0) break;
        fprintf(stderr, "%s %s %.2f ms (%.0f%%)", shown ? "," : "", rows[best].op,
                rows[best].seconds * 1e3 / (double)steps,
                total > 0 ? 100.0 * rows[best].seconds / total : 0.0);
        rows[best].calls = 0;
    }
    fputc('\n', stderr);
}

/* s as a JSON string: quotes, backslashes and control bytes escaped. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The log's profile line: every node that ran, costliest first. */
static void profile_json(const gr_profile_row *rows, int n, long steps, FILE *log)
{
    fprintf(log, "{\"event\":\"profile\",\"steps\":%ld,\"nodes\":[", steps);
    for (int i = 0; i < n; i++) {
        const gr_profile_row *r = &rows[i];
        fprintf(log, "%s{\"op\":\"%s\",\"type\":", i ? "," : "", r->op);
        json_string(log, r->type);
        fputs(",\"device\":", log);
        json_string(log, r->device);
        fputs(",\"file\":", log);
        if (r->file)
            json_string(log, r->file);
        else
            fputs("null", log);
        fprintf(log, ",\"line\":%d,\"calls\":%llu,\"seconds\":%.6g}", r->line,
                (unsigned long long)r->calls, r->seconds);
    }
    fputs("]}\n", log);
}

void trep_profile(gr_session *s, long steps, double secs, FILE *log)
{
    int n = gr_session_profile(s, NULL, 0);
    if (n == 0 || steps <= 0) return;
    gr_profile_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return;
    n = gr_session_profile(s, rows, n);
    if (log) profile_json(rows, n, steps, log);
    double total = 0, rest = 0;
    for (int i = 0; i < n; i++) total += rows[i].seconds;
    fflush(stdout); /* after the summary */
    fprintf(stderr,
            "profile: where the kernels' time went, per training step (%d nodes ran; "
            "evaluations count too)\n"
            "   ms/step   share  calls  op                 output             device line\n",
            n);
    for (int i = 0; i < n; i++) {
        if (i < TREP_PROFILE_ROWS)
            profile_row(&rows[i], steps, total);
        else
            rest += rows[i].seconds;
    }
    if (n > TREP_PROFILE_ROWS)
        fprintf(stderr, "  (%d more nodes: %.2f ms/step)\n", n - TREP_PROFILE_ROWS,
                rest * 1e3 / (double)steps);
    fprintf(stderr,
            "  %.2f ms/step in kernels; a step took %.2f ms of wall time (kernels of one level "
            "run at once on the intra-op threads)\n",
            total * 1e3 / (double)steps, secs * 1e3 / (double)steps);
    profile_by_op(rows, n, steps, total);
    free(rows);
}
