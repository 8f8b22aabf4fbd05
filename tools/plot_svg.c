/* plot_svg.c - the chart `graphrun plot` writes: one self-contained SVG
 * (no scripts, fonts or links), a loss panel and, when the logs have
 * evaluations, an eval panel below it on the same step axis, then a legend.
 * Elements carry classes (loss, raw, eval, tick-x, tick-y) that
 * tests/plot_check.py reads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

#define W         760
#define LEFT      72 /* room for the y tick labels */
#define RIGHT     24
#define PANEL_H   300
#define EVAL_H    200
#define GAP       64 /* between panels: x tick labels and the next title */
#define TOP       34
#define ROW       18 /* a legend row */
#define MAX_TICKS 32

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};
static const char *const dashes[] = {"none", "6 3", "2 3", "9 3 2 3"};
#define N_COLORS (int)(sizeof colors / sizeof *colors)
#define N_DASHES (int)(sizeof dashes / sizeof *dashes)

/* One axis: its range (the outer ticks), scale and ticks. */
typedef struct axis {
    double ticks[MAX_TICKS];
    int n, log;
} axis;

/* A panel's plot area in pixels, and its two axes. */
typedef struct panel {
    double x, y, w, h;
    const axis *ax, *ay;
} panel;

/* ---- ticks ---- */

/* The 1, 2, 5 or 10 times a power of ten nearest x (round) or above it. */
static double nice_num(double x, int round)
{
    double e = floor(log10(x)), f = x / pow(10, e), nf;
    if (round)
        nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else
        nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return e < 0 ? nf / pow(10, -e) : nf * pow(10, e);
}

static int linear_ticks(double lo, double hi, int want, double *t, int max)
{
    double step = nice_num(nice_num(hi - lo, 0) / (want - 1), 1);
    double k0 = floor(lo / step), k1 = ceil(hi / step);
    int n = 0;
    for (double k = k0; k <= k1 && n < max; k++) t[n++] = k * step + 0.0; /* no -0 */
    return n;
}

/* Powers of ten (every `every` decades), with their 2x and 5x when the
 * range is short, from the largest at or below lo to the smallest at or
 * above hi. */
static int log_ticks(double lo, double hi, int want, double *t, int max)
{
    int e0 = (int)floor(log10(lo)), e1 = (int)ceil(log10(hi)), n = 0;
    int every = (e1 - e0 + want - 1) / want, fine = e1 - e0 <= 2;
    for (int e = e0; e < e1 + every && n < max; e += every)
        for (int m = 1; m <= (fine ? 5 : 1) && n < max; m += m == 1 ? 1 : 3) {
            double v = m * pow(10, e);
            if (v > lo && n > 0 && t[n - 1] >= hi) return n;
            if (v <= lo) n = 0; /* a tick at or below lo: the axis starts there */
            t[n++] = v;
        }
    return n;
}

int plot_ticks(double lo, double hi, int want, int log, double *ticks, int max)
{
    if (!(hi > lo)) { /* one value: a range around it */
        double d = log ? lo * 0.5 : (lo != 0 ? fabs(lo) * 0.1 : 1);
        lo -= d;
        hi += log ? 2 * d : d;
    }
    return log ? log_ticks(lo, hi, want, ticks, max) : linear_ticks(lo, hi, want, ticks, max);
}

/* ---- mapping and drawing ---- */

static double frac(const axis *a, double v)
{
    double lo = a->ticks[0], hi = a->ticks[a->n - 1];
    if (a->log) return (log10(v) - log10(lo)) / (log10(hi) - log10(lo));
    return (v - lo) / (hi - lo);
}

static double px(const panel *p, double x)
{
    return p->x + frac(p->ax, x) * p->w;
}

static double py(const panel *p, double y)
{
    return p->y + p->h - frac(p->ay, y) * p->h;
}

static void put_escaped(const char *s, FILE *out)
{
    for (; *s; s++) {
        const char *e = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (e)
            fputs(e, out);
        else
            fputc(*s, out);
    }
}

static void text(FILE *out, double x, double y, const char *anchor, const char *cls, const char *s)
{
    fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", cls, x, y, anchor);
    put_escaped(s, out);
    fputs("</text>\n", out);
}

/* A tick label with as many decimals as the step between ticks needs. */
static void tick_label(const axis *a, double v, char *buf, size_t n)
{
    if (a->log) {
        snprintf(buf, n, "%g", v);
        return;
    }
    double step = a->ticks[1] - a->ticks[0];
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    snprintf(buf, n, "%.*f", dec, v);
}

static void grid_and_ticks(const panel *p, FILE *out)
{
    char b[64];
    for (int i = 0; i < p->ay->n; i++) {
        double y = py(p, p->ay->ticks[i]);
        fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                p->x, y, p->x + p->w, y);
        tick_label(p->ay, p->ay->ticks[i], b, sizeof b);
        text(out, p->x - 6, y + 4, "end", "tick-y", b);
    }
    for (int i = 0; i < p->ax->n; i++) {
        double x = px(p, p->ax->ticks[i]);
        fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x,
                p->y, x, p->y + p->h);
        tick_label(p->ax, p->ax->ticks[i], b, sizeof b);
        text(out, x, p->y + p->h + 16, "middle", "tick-x", b);
    }
}

static void frame(const panel *p, const char *title, const char *xlabel, FILE *out)
{
    fprintf(out, "<g class=\"panel\">\n");
    grid_and_ticks(p, out);
    fprintf(out, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            p->x, p->y, p->w, p->h);
    text(out, p->x, p->y - 10, "start", "title", title);
    text(out, p->x + p->w, p->y + p->h + 34, "end", "label", xlabel);
}

/* A polyline through the points; per pixel column only the lowest and the
 * highest point are kept (the line looks the same, spikes included, and a
 * million steps do not make a million-point path). */
static void path(const panel *p, const double *x, const double *y, int n, const char *attrs,
                 FILE *out)
{
    fprintf(out, "<path %s d=\"", attrs);
    for (int i = 0; i < n;) {
        int col = (int)px(p, x[i]), lo = i, hi = i, j = i;
        for (; j < n && (int)px(p, x[j]) == col; j++) {
            lo = y[j] < y[lo] ? j : lo;
            hi = y[j] > y[hi] ? j : hi;
        }
        int a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
        fprintf(out, "%s%.1f %.1f", i ? " L" : "M", px(p, x[a]), py(p, y[a]));
        if (b != a) fprintf(out, " L%.1f %.1f", px(p, x[b]), py(p, y[b]));
        i = j;
    }
    fputs("\"/>\n", out);
}

/* TensorBoard's smoothing: an exponential moving average, debiased so the
 * first values are not pulled towards zero. */
static void smooth(const double *y, int n, double w, double *out)
{
    double last = 0, wk = 1;
    for (int i = 0; i < n; i++) {
        last = last * w + (1 - w) * y[i];
        wk *= w;
        out[i] = last / (1 - wk);
    }
}

/* ---- the panels ---- */

typedef struct extent {
    double lo, hi;
} extent;

static void grow(extent *e, const double *v, int n)
{
    for (int i = 0; i < n; i++) {
        e->lo = v[i] < e->lo ? v[i] : e->lo;
        e->hi = v[i] > e->hi ? v[i] : e->hi;
    }
}

static void make_axis(axis *a, extent e, int want, int log)
{
    a->log = log;
    a->n = plot_ticks(e.lo, e.hi, want, log, a->ticks, MAX_TICKS);
}

static void loss_panel(const plot_run *runs, int n, const plot_opts *o, const panel *p, FILE *out)
{
    char title[96];
    snprintf(title, sizeof title, "training loss (smoothing %g%s)", o->smooth,
             o->log_y ? ", log scale" : "");
    frame(p, title, o->time ? "seconds" : "step", out);
    for (int r = 0; r < n; r++) {
        const plot_series *s = &runs[r].loss;
        char attrs[200];
        double *sm = malloc(sizeof *sm * (size_t)(s->n + 1));
        smooth(s->y, s->n, o->smooth, sm);
        snprintf(attrs, sizeof attrs,
                 "class=\"raw\" data-run=\"%d\" stroke=\"%s\" stroke-opacity=\"0.25\"", r,
                 colors[r % N_COLORS]);
        path(p, s->x, s->y, s->n, attrs, out);
        snprintf(attrs, sizeof attrs, "class=\"loss\" data-run=\"%d\" stroke=\"%s\"", r,
                 colors[r % N_COLORS]);
        path(p, s->x, sm, s->n, attrs, out);
        free(sm);
    }
    fputs("</g>\n", out);
}

/* The distinct eval metric names, in order of first appearance. */
static int metric_names(const plot_run *runs, int n, const char **names, int max)
{
    int m = 0;
    for (int r = 0; r < n; r++)
        for (int k = 0; k < runs[r].n_evals; k++) {
            int seen = 0;
            for (int i = 0; i < m; i++) seen |= strcmp(names[i], runs[r].evals[k].name) == 0;
            if (!seen && m < max) names[m++] = runs[r].evals[k].name;
        }
    return m;
}

static int metric_index(const char **names, int m, const char *name)
{
    for (int i = 0; i < m; i++)
        if (strcmp(names[i], name) == 0) return i;
    return 0;
}

static void eval_series(const plot_series *s, int r, int dash, const panel *p, FILE *out)
{
    char attrs[240];
    snprintf(attrs, sizeof attrs,
             "class=\"eval\" data-run=\"%d\" data-metric=\"%d\" stroke=\"%s\" "
             "stroke-dasharray=\"%s\"",
             r, dash, colors[r % N_COLORS], dashes[dash % N_DASHES]);
    path(p, s->x, s->y, s->n, attrs, out);
    for (int i = 0; s->n <= 60 && i < s->n; i++)
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px(p, s->x[i]),
                py(p, s->y[i]), colors[r % N_COLORS]);
}

static void eval_panel(const plot_run *runs, int n, const char **names, int m, const plot_opts *o,
                       const panel *p, FILE *out)
{
    char title[160];
    snprintf(title, sizeof title, m == 1 ? "eval: %s" : "evaluation", names[0]);
    frame(p, title, o->time ? "seconds" : "step", out);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < runs[r].n_evals; k++)
            eval_series(&runs[r].evals[k], r, metric_index(names, m, runs[r].evals[k].name), p,
                        out);
    fputs("</g>\n", out);
}

/* Runs by colour, then (with evaluations) metrics by dash pattern. */
static void legend(const plot_run *runs, int n, const char **names, int m, double y, FILE *out)
{
    fputs("<g class=\"legend\">\n", out);
    for (int i = 0; i < n + m; i++, y += ROW) {
        const char *color = i < n ? colors[i % N_COLORS] : "#444";
        const char *dash = i < n ? "none" : dashes[(i - n) % N_DASHES];
        fprintf(out,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\" stroke-dasharray=\"%s\"/>\n",
                LEFT, y - 4, LEFT + 28, y - 4, color, dash);
        text(out, LEFT + 36, y, "start", i < n ? "run" : "metric",
             i < n ? runs[i].label : names[i - n]);
    }
    fputs("</g>\n", out);
}

static void header(double h, FILE *out)
{
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
            "viewBox=\"0 0 %d %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n"
            "<style>\n"
            "  .grid { stroke: #e4e4e4; stroke-width: 1 }\n"
            "  .frame { fill: none; stroke: #888; stroke-width: 1 }\n"
            "  .title { font-size: 14px; font-weight: bold; fill: #222 }\n"
            "  .tick-x, .tick-y, .label { fill: #555 }\n"
            "  path { fill: none; stroke-width: 1.8; stroke-linejoin: round }\n"
            "  path.raw { stroke-width: 1 }\n"
            "</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, h, W, h);
}

void plot_svg(const plot_run *runs, int n, const plot_opts *o, FILE *out)
{
    extent ex = {INFINITY, -INFINITY}, ey = ex, ee = ex;
    const char *names[16];
    for (int r = 0; r < n; r++) {
        grow(&ex, runs[r].loss.x, runs[r].loss.n);
        grow(&ey, runs[r].loss.y, runs[r].loss.n);
        for (int k = 0; k < runs[r].n_evals; k++) {
            grow(&ex, runs[r].evals[k].x, runs[r].evals[k].n);
            grow(&ee, runs[r].evals[k].y, runs[r].evals[k].n);
        }
    }
    int m = metric_names(runs, n, names, 16), has_loss = ey.lo <= ey.hi;
    axis ax, ay, ae;
    make_axis(&ax, ex, 8, 0);
    panel lp = {LEFT, TOP, W - LEFT - RIGHT, has_loss ? PANEL_H : 0, &ax, &ay};
    panel ep = {LEFT, lp.y + lp.h + (has_loss ? GAP : 0), lp.w, m ? EVAL_H : 0, &ax, &ae};
    double legend_y = ep.y + ep.h + 56;
    header(legend_y + ROW * (n + (m > 1 ? m : 0)), out);
    if (has_loss) {
        make_axis(&ay, ey, 6, o->log_y);
        loss_panel(runs, n, o, &lp, out);
    }
    if (m) {
        make_axis(&ae, ee, 5, 0);
        eval_panel(runs, n, names, m, o, &ep, out);
    }
    legend(runs, n, names, m > 1 ? m : 0, legend_y, out);
    fputs("</svg>\n", out);
}
