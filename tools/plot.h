/* plot.h - private to `graphrun plot`: the curves read from --log files
 * (cmd_plot.c) and their SVG chart (plot_svg.c). */
#ifndef GR_PLOT_H
#define GR_PLOT_H

#include <stdio.h>

/* One curve: points in file order (steps increase in a graphrun log). */
typedef struct plot_series {
    char *name; /* the metric: "loss", or an --eval name */
    double *x, *y;
    int n, cap;
} plot_series;

/* One log file. */
typedef struct plot_run {
    char *label;        /* the legend's name for it */
    plot_series loss;   /* training loss at each record */
    plot_series *evals; /* one per --eval metric, in order of appearance */
    int n_evals;
} plot_run;

typedef struct plot_opts {
    const char *out; /* -o: the SVG file; NULL: stdout */
    int log_y;       /* --log-y: the loss on a log scale */
    double smooth;   /* --smooth: exponential moving average weight, in [0, 1) */
    int time;        /* --time: against the seconds of training ("elapsed_s"), not the step */
} plot_opts;

/* Writes the chart of n runs: training loss (smoothed, raw faint) above,
 * eval metrics below when there are any, and a legend. */
void plot_svg(const plot_run *runs, int n, const plot_opts *o, FILE *out);

/* Nice axis ticks: about `want` values covering [lo, hi], each a multiple
 * of a step that is 1, 2 or 5 times a power of ten (log: powers of ten,
 * and their 2x and 5x over a short range).  Returns the count, at most
 * max; ticks[0] and ticks[count - 1] bracket [lo, hi]. */
int plot_ticks(double lo, double hi, int want, int log, double *ticks, int max);

#endif
