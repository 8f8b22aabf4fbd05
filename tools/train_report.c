/* train_report.c - what both training loops (cmd_train.c's serial one and
 * train_async.c's watcher) do between steps: progress lines, records (the
 * JSON log and the TensorBoard scalars), --eval and --eval-every,
 * checkpoint saves, Ctrl-C and SIGTERM.  It calls neither loop.
 *
 * A record's values are rounded to the 6 significant digits the log
 * prints before either sink gets them, so the log and the event file hold
 * the same numbers.  Every log line is a cJSON object printed whole, with
 * null for NaN and infinities, then flushed: a write error stops the run. */
#include <cjson/cJSON.h>
#include <math.h>
#include <sched.h>
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

static atomic_int interrupted; /* the first signal; lock-free: safe to set in a handler */

/* The first SIGINT or SIGTERM asks training to stop; a second one of
 * either, a second or more after it, takes its default action, at once.
 * One that comes sooner is the same request delivered twice: timeout(1)
 * sends the signal it gets to its command and then to the command's
 * process group, a terminal's Ctrl-C goes to every process of the
 * foreground group, and a run killed by the copy would lose its
 * checkpoint and leave its log a temporary. */
#define REPEAT_NS 1000000000LL
static gr_session *_Atomic cancel_target; /* trep_cancel_evals_of */
static atomic_int in_handler;             /* handlers that may be using cancel_target */
static atomic_llong first_ns;             /* when the first signal came */

static long long now_ns(void) /* clock_gettime is async-signal-safe */
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void on_interrupt(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&interrupted, &none, sig)) {
        atomic_store(&first_ns, now_ns());
        atomic_fetch_add(&in_handler, 1);
        gr_session *s = atomic_load(&cancel_target);
        if (s) gr_eval_cancel(s); /* sets a flag: safe in a handler */
        atomic_fetch_sub(&in_handler, 1);
        return;
    }
    long long first = atomic_load(&first_ns); /* 0: the first is still being taken */
    if (first == 0 || now_ns() - first < REPEAT_NS) return;
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when this handler returns */
}

void trep_cancel_evals_of(gr_session *s)
{
    atomic_store(&cancel_target, s);
    /* a handler on another thread that read the old session is done with it */
    while (atomic_load(&in_handler)) sched_yield();
}

void trep_catch_interrupt(void)
{
    struct sigaction sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
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

/* v rounded to prec significant digits (fixed: decimals) as a JSON number,
 * through text and strtod so that cJSON prints "0.1", not
 * 0.10000000149011612; null for NaN and infinities (JSON has neither). */
static void json_add(cJSON *j, const char *key, double v, int prec, int fixed)
{
    char b[64];
    if (!isfinite(v)) {
        cJSON_AddNullToObject(j, key);
        return;
    }
    snprintf(b, sizeof b, fixed ? "%.*f" : "%.*g", prec, v);
    cJSON_AddNumberToObject(j, key, strtod(b, NULL));
}

/* The log's "eval" object: {"NAME":VALUE,...}, added to j. */
static void json_add_evals(cJSON *j, const train_opts *o, const double *vals)
{
    cJSON *ev = cJSON_AddObjectToObject(j, "eval");
    for (int i = 0; i < o->n_evals; i++) json_add(ev, o->evals[i], vals[i], 6, 0);
}

/* Pushes the log's lines to its file; after the first failure (printed)
 * always -1. */
static int log_flush(trep_progress *pg)
{
    if (pg->log_failed) return -1;
    gr_status *st = gr_status_new();
    pg->log_failed = gr_output_flush(pg->log, st) != GR_OK;
    if (pg->log_failed) cli_print_status(st);
    gr_status_free(st);
    return pg->log_failed ? -1 : 0;
}

/* Writes j as one line of the log and frees it; -1 when the log cannot
 * be written (printed). */
static int log_line(trep_progress *pg, cJSON *j)
{
    char *text = pg->log_failed ? NULL : cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (text) {
        FILE *f = gr_output_file(pg->log);
        fputs(text, f);
        fputc('\n', f);
        free(text);
    } else if (!pg->log_failed) {
        fputs("graphrun: error: out of memory for a line of the log\n", stderr);
        pg->log_failed = 1;
    }
    return log_flush(pg);
}

int trep_log_open(const train_opts *o, trep_progress *pg)
{
    gr_status *st = gr_status_new();
    int rc = o->log_path && gr_output_open(o->log_path, &pg->log, st) != GR_OK ? -1 : 0;
    if (rc) cli_print_status(st);
    gr_status_free(st);
    return rc;
}

int trep_log_close(trep_progress *pg)
{
    if (!pg->log) return 0;
    gr_output *log = pg->log;
    pg->log = NULL;
    if (pg->log_failed) { /* printed already */
        gr_output_discard(log);
        return -1;
    }
    gr_status *st = gr_status_new();
    int rc = gr_output_commit(log, st) == GR_OK ? 0 : -1;
    if (rc) cli_print_status(st);
    gr_status_free(st);
    return rc;
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
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)step);
        for (int i = 0; i < n; i++) json_add(j, v[i].key, v[i].value, 6, 0);
        json_add(j, "elapsed_s", elapsed, 3, 1);
        if (log_line(pg, j) < 0) return -1;
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
    char rate[32];
    cli_rate(sps, rate, sizeof rate);
    if (pg->tty)
        fprintf(stderr, "\rstep %ld/%ld  loss %.4f  %s  ETA %.0fs   %s", step, o->steps,
                (double)loss, rate, eta, final ? "\n" : "");
    else
        fprintf(stderr, "step %ld/%ld loss %.4f %s\n", step, o->steps, (double)loss, rate);
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
    gr_staleness at;
    double mean;
    uint64_t p99, max;
    gr_session_staleness(pg->sess, &at); /* of the updates since the last record */
    gr_staleness_between(&at, &pg->stale_at, &mean, &p99, &max);
    pg->stale_at = at;
    trep_scalar v[] = {{"loss", round6(loss)},
                       {"steps_per_s", round6(sps)},
                       {"examples_per_s", round6(sps * (double)o->batch)},
                       {"staleness_mean", round6(mean)},
                       {"staleness_p99", (double)p99},
                       {"staleness_max", (double)max},
                       {"lr", round6(lr)}};
    int n = sizeof v / sizeof *v;
    return record(pg, step, v, isnan(lr) ? n - 1 : n, el); /* NaN: the target has no rate */
}

/* The whole run's: since the session began. */
static void run_staleness(const trep_progress *pg, double *mean, uint64_t *p99, uint64_t *max)
{
    static const gr_staleness zero;
    gr_staleness now;
    gr_session_staleness(pg->sess, &now);
    gr_staleness_between(&now, &zero, mean, p99, max);
}

void trep_staleness(const trep_progress *pg, char *buf, size_t n)
{
    double mean;
    uint64_t p99, max;
    run_staleness(pg, &mean, &p99, &max);
    snprintf(buf, n, ", staleness mean %.2f p99 %llu max %llu", mean, (unsigned long long)p99,
             (unsigned long long)max);
}

int trep_run_evals(const train_opts *o, gr_session *s, double *vals, gr_status *st)
{
    for (int i = 0; i < o->n_evals; i++) {
        gr_code c = gr_eval(s, o->evals[i], &vals[i], st);
        if (c == GR_ERR_CANCELLED && trep_interrupted()) return 1;
        if (c != GR_OK) {
            cli_print_status(st);
            return -1;
        }
    }
    return 0;
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
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", (double)step);
    json_add_evals(j, o, vals);
    json_add(j, "elapsed_s", trep_now() - pg->t0, 3, 1); /* time to an accuracy */
    return log_line(pg, j);
}

int trep_log_done(const train_opts *o, trep_progress *pg, long done, long step, double sps,
                  float loss, const double *vals)
{
    if (!pg->log) return 0;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "event", "done");
    cJSON_AddNumberToObject(j, "steps", (double)done);
    cJSON_AddNumberToObject(j, "step", (double)step);
    json_add(j, "steps_per_s", sps, 2, 1);
    json_add(j, "loss", loss, 6, 0);
    double mean;
    uint64_t p99, max;
    run_staleness(pg, &mean, &p99, &max);
    json_add(j, "staleness_mean", mean, 6, 0);
    cJSON_AddNumberToObject(j, "staleness_p99", (double)p99);
    cJSON_AddNumberToObject(j, "staleness_max", (double)max);
    json_add_evals(j, o, vals);
    json_add(j, "elapsed_s", trep_now() - pg->t0, 3, 1);
    return log_line(pg, j);
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

/* One node of the log's profile line. */
static cJSON *profile_node(const gr_profile_row *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", r->op);
    cJSON_AddStringToObject(j, "type", r->type);
    cJSON_AddStringToObject(j, "device", r->device);
    if (r->file)
        cJSON_AddStringToObject(j, "file", r->file);
    else
        cJSON_AddNullToObject(j, "file");
    cJSON_AddNumberToObject(j, "line", r->line);
    cJSON_AddNumberToObject(j, "calls", (double)r->calls);
    json_add(j, "seconds", r->seconds, 6, 0);
    return j;
}

/* The log's profile line: every node that ran, costliest first. */
static int profile_json(trep_progress *pg, const gr_profile_row *rows, int n, long steps)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "event", "profile");
    cJSON_AddNumberToObject(j, "steps", (double)steps);
    cJSON *nodes = cJSON_AddArrayToObject(j, "nodes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(nodes, profile_node(&rows[i]));
    return log_line(pg, j);
}

int trep_profile(gr_session *s, long steps, double secs, trep_progress *pg)
{
    int n = gr_session_profile(s, NULL, 0);
    if (n == 0 || steps <= 0) return 0;
    gr_profile_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return 0;
    n = gr_session_profile(s, rows, n);
    if (pg->log && profile_json(pg, rows, n, steps) < 0) {
        free(rows);
        return -1;
    }
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
    return 0;
}
