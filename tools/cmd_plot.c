/* cmd_plot.c - `graphrun plot RUN.jsonl... [-o OUT.svg]`: reads the
 * records and evaluations of --log files (docs/curves.md) and charts them
 * (plot_svg.c).  A line that is not what graphrun writes is an error naming
 * the file and the line. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "plot.h"

enum { O_LOG_Y = 256, O_SMOOTH, O_TIME };

static const cli_opt plot_table[] = {
    {"output", 'o', "OUT.svg", "write the SVG here (default: standard output)", CLI_V_FILE, NULL},
    {"log-y", O_LOG_Y, NULL, "the loss on a logarithmic scale", CLI_V_NONE, NULL},
    {"smooth", O_SMOOTH, "S", "smoothing weight of the loss, 0 (none) to 0.99 (default 0.6)",
     CLI_V_NONE, NULL},
    {"time", O_TIME, NULL, "against the seconds of training instead of the step", CLI_V_NONE, NULL},
};

const cli_spec cli_plot_spec = {
    "plot",
    "plot RUN.jsonl... [-o OUT.svg] [--log-y] [--smooth S] [--time]",
    "chart the curves of --log files",
    "Charts the training loss (smoothed, raw values faint) and the --eval metrics of\n"
    "graphrun --log files against the step (or, with --time, the seconds of training),\n"
    "one colour per file, as one SVG.\n",
    plot_table,
    sizeof plot_table / sizeof *plot_table,
    "*.jsonl",
    NULL,
};

/* Where a line is read, for messages. */
typedef struct plot_src {
    const char *path;
    long line;
    long nulls; /* values that were NaN or infinite when logged */
} plot_src;

static int plot_err(const plot_src *src, const char *msg, const char *key)
{
    fprintf(stderr, "%s:%ld: error: %s%s%s\n", src->path, src->line, msg, key ? " " : "",
            key ? key : "");
    return CLI_FAILED;
}

static void series_add(plot_series *s, double x, double y)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->x = realloc(s->x, sizeof *s->x * (size_t)s->cap);
        s->y = realloc(s->y, sizeof *s->y * (size_t)s->cap);
        if (!s->x || !s->y) {
            fputs("graphrun plot: out of memory\n", stderr);
            exit(CLI_FAILED);
        }
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
}

static plot_series *eval_series(plot_run *r, const char *name)
{
    for (int i = 0; i < r->n_evals; i++)
        if (strcmp(r->evals[i].name, name) == 0) return &r->evals[i];
    r->evals = realloc(r->evals, sizeof *r->evals * (size_t)(r->n_evals + 1));
    if (!r->evals) exit(CLI_FAILED);
    r->evals[r->n_evals] = (plot_series){.name = strdup(name)};
    return &r->evals[r->n_evals++];
}

/* {"NAME": value or null, ...} at step. */
static int read_evals(plot_run *r, const cJSON *ev, double step, plot_src *src)
{
    if (!cJSON_IsObject(ev)) return plot_err(src, "\"eval\" is not an object", NULL);
    for (const cJSON *e = ev->child; e; e = e->next) {
        if (cJSON_IsNull(e)) { /* NaN or Inf when it was written */
            src->nulls++;
            continue;
        }
        if (!cJSON_IsNumber(e)) return plot_err(src, "eval value is not a number:", e->string);
        series_add(eval_series(r, e->string), step, e->valuedouble);
    }
    return 0;
}

static int read_loss(plot_run *r, const cJSON *loss, double step, const plot_opts *o, plot_src *src)
{
    if (cJSON_IsNull(loss)) {
        src->nulls++;
        return 0;
    }
    if (!cJSON_IsNumber(loss)) return plot_err(src, "\"loss\" is not a number", NULL);
    if (o->log_y && !(loss->valuedouble > 0))
        return plot_err(src, "--log-y: the loss is not positive here", NULL);
    series_add(&r->loss, step, loss->valuedouble);
    return 0;
}

/* One line: a record ("step", "loss", ...), evaluations ("step", "eval"),
 * or the final summary ("event": "done", "step", "eval"). */
static int read_line(plot_run *r, const char *text, const plot_opts *o, plot_src *src)
{
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return plot_err(src, "not a JSON object (is this a graphrun --log file?)", NULL);
    }
    const char *xkey = o->time ? "elapsed_s" : "step";
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, xkey),
                *ev = cJSON_GetObjectItemCaseSensitive(j, "eval"),
                *loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
    int is_event = cJSON_HasObjectItem(j, "event"), rc = 0;
    if (is_event && o->time && !cJSON_IsNumber(step))
        ev = NULL; /* an older log's summary: its final values have no time */
    if (!cJSON_IsNumber(step) && (ev || (loss && !is_event)))
        rc = plot_err(src,
                      o->time ? "\"elapsed_s\" is missing or not a number"
                              : "\"step\" is missing or not a number",
                      NULL);
    else if (ev)
        rc = read_evals(r, ev, step->valuedouble, src);
    else if (loss && !is_event)
        rc = read_loss(r, loss, step->valuedouble, o, src);
    cJSON_Delete(j);
    return rc;
}

static int blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == 0;
}

static int read_run(plot_run *r, const char *path, const plot_opts *o)
{
    const char *why;
    FILE *f = cli_open_regular(path, &why);
    if (!f) return fprintf(stderr, "graphrun plot: %s: %s\n", path, why), CLI_USAGE;
    plot_src src = {path, 0, 0};
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        src.line++;
        if (!blank(line)) rc = read_line(r, line, o, &src);
    }
    free(line);
    fclose(f);
    if (rc == 0 && r->loss.n == 0 && r->n_evals == 0) {
        fprintf(stderr,
                src.nulls ? "graphrun plot: %s: every loss and eval value is null (NaN or "
                            "infinite when logged): nothing to chart\n"
                          : "graphrun plot: %s: no loss or eval records (written by --log?)\n",
                path);
        rc = CLI_FAILED;
    }
    return rc;
}

/* The legend's names: file names without ".jsonl", or whole paths when
 * two files share a name. */
static void label_runs(plot_run *runs, int n, char **paths)
{
    int clash = 0;
    for (int i = 0; i < n; i++) {
        const char *base = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        size_t len = strlen(base);
        if (len > 6 && strcmp(base + len - 6, ".jsonl") == 0) len -= 6;
        runs[i].label = strndup(base, len);
        for (int k = 0; k < i; k++) clash |= strcmp(runs[k].label, runs[i].label) == 0;
    }
    for (int i = 0; clash && i < n; i++) {
        free(runs[i].label);
        runs[i].label = strdup(paths[i]);
    }
}

static void free_runs(plot_run *runs, int n)
{
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < runs[i].n_evals; k++) {
            free(runs[i].evals[k].name);
            free(runs[i].evals[k].x);
            free(runs[i].evals[k].y);
        }
        free(runs[i].evals);
        free(runs[i].loss.x);
        free(runs[i].loss.y);
        free(runs[i].label);
    }
    free(runs);
}

/* A decimal number in [0, 1): no sign, space, hex, inf or nan, nothing
 * after it, and not so small that it underflows. */
static int parse_smooth(const char *arg, double *out)
{
    char *end;
    errno = 0;
    int digit = (arg[0] >= '0' && arg[0] <= '9') || arg[0] == '.';
    *out = digit && !strpbrk(arg, "xXpP") ? strtod(arg, &end) : -1;
    if (*out >= 0 && *out < 1 && !*end && errno == 0) return 0;
    fprintf(stderr, "graphrun plot: bad --smooth %s (a number from 0 to below 1, e.g. 0.6)\n", arg);
    return -1;
}

/* Returns CLI_OK, CLI_USAGE, or -1 after --help. */
static int parse_plot_opts(int argc, char **argv, plot_opts *o)
{
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_plot_spec)) != CLI_OPT_END) {
        if (c == CLI_OPT_HELP) return -1;
        if (c == CLI_OPT_BAD) return CLI_USAGE;
        if (c == 'o')
            o->out = optarg;
        else if (c == O_LOG_Y)
            o->log_y = 1;
        else if (c == O_TIME)
            o->time = 1;
        else if (c == O_SMOOTH && parse_smooth(optarg, &o->smooth) < 0)
            return CLI_USAGE;
    }
    if (optind >= argc) return cli_usage_error(&cli_plot_spec, "no input file");
    return CLI_OK;
}

/* Standard output (a write error there fails the command: main.c), or -o
 * through a gr_output: the old chart stays until the new one is complete. */
static int write_chart(const plot_run *runs, int n, const plot_opts *o)
{
    if (!o->out) {
        plot_svg(runs, n, o, stdout); /* main checks that it was written */
        return 0;
    }
    gr_status *st = gr_status_new();
    gr_output *out;
    int rc = gr_output_open(o->out, &out, st) == GR_OK ? 0 : -1;
    if (rc == 0) {
        plot_svg(runs, n, o, gr_output_file(out));
        rc = gr_output_commit(out, st) == GR_OK ? 0 : -1;
    }
    if (rc) cli_print_status(st);
    gr_status_free(st);
    return rc;
}

/* -o must not be one of the logs read. */
static int check_out(const plot_opts *o, char **paths, int n)
{
    const cli_file out = {o->out, "-o"};
    cli_file *ins = calloc((size_t)n, sizeof *ins);
    if (!ins) return fputs("graphrun: error: out of memory\n", stderr), -1;
    for (int i = 0; i < n; i++) ins[i] = (cli_file){paths[i], "the log"};
    int rc = cli_check_outputs(&out, 1, ins, n);
    free(ins);
    return rc;
}

int cmd_plot(int argc, char **argv)
{
    plot_opts o = {.smooth = 0.6};
    int rc = parse_plot_opts(argc, argv, &o);
    if (rc < 0) return CLI_OK;
    if (rc != CLI_OK) return rc;
    int n = argc - optind;
    if (check_out(&o, argv + optind, n) < 0) return CLI_USAGE;
    plot_run *runs = calloc((size_t)n, sizeof *runs);
    label_runs(runs, n, argv + optind);
    for (int i = 0; i < n && rc == 0; i++) rc = read_run(&runs[i], argv[optind + i], &o);
    if (rc == 0 && write_chart(runs, n, &o) < 0) rc = CLI_FAILED;
    free_runs(runs, n);
    return rc;
}
