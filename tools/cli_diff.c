/* cli_diff.c - cli_diff: a unified diff of two texts, by lines, with three
 * lines of context (what `graphrun fmt --check` prints). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { DIFF_CONTEXT = 3 };
/* Beyond this many cells the middle is shown as one change, unaligned. */
#define DIFF_MAX_CELLS (16u << 20)

typedef struct diff_line {
    const char *s;
    size_t n; /* with its '\n', when it has one */
} diff_line;

typedef struct diff_text {
    diff_line *v;
    size_t n;
} diff_text;

typedef struct diff_ops {
    char *op;           /* ' ' both, '-' only in a, '+' only in b */
    size_t *ai, *bi, n; /* before op k: ai[k] lines of a and bi[k] of b are done */
} diff_ops;

static diff_text diff_split(const char *s, size_t len)
{
    diff_text t = {malloc((len + 1) * sizeof *t.v), 0};
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(s + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (s + i)) + 1 : len - i;
        t.v[t.n++] = (diff_line){s + i, n};
        i += n;
    }
    return t;
}

static int diff_eq(diff_line x, diff_line y)
{
    return x.n == y.n && memcmp(x.s, y.s, x.n) == 0;
}

static void diff_push(diff_ops *d, char op, size_t ai, size_t bi)
{
    d->op[d->n] = op;
    d->ai[d->n] = ai;
    d->bi[d->n++] = bi;
}

/* lcs[i][j]: the longest common subsequence of a[lo+i..hi_a) and b[lo+j..hi_b). */
static unsigned *diff_lcs(const diff_text *a, const diff_text *b, size_t lo, size_t na, size_t nb)
{
    size_t w = nb + 1;
    unsigned *l = calloc((na + 1) * w, sizeof *l);
    for (size_t i = na; i-- > 0;)
        for (size_t j = nb; j-- > 0;)
            l[i * w + j] = diff_eq(a->v[lo + i], b->v[lo + j])
                               ? l[(i + 1) * w + j + 1] + 1
                               : (l[(i + 1) * w + j] > l[i * w + j + 1] ? l[(i + 1) * w + j]
                                                                        : l[i * w + j + 1]);
    return l;
}

/* The middle, between the common first and last lines: aligned by an LCS
 * when small enough, else all of a removed and all of b added. */
static void diff_middle(diff_ops *d, const diff_text *a, const diff_text *b, size_t lo, size_t na,
                        size_t nb)
{
    size_t i = 0, j = 0, w = nb + 1;
    unsigned *l = (na + 1) * w <= DIFF_MAX_CELLS ? diff_lcs(a, b, lo, na, nb) : NULL;
    while (i < na || j < nb) {
        if (l && i < na && j < nb && diff_eq(a->v[lo + i], b->v[lo + j]))
            diff_push(d, ' ', lo + i++, lo + j++);
        else if (i < na && (j == nb || !l || l[(i + 1) * w + j] >= l[i * w + j + 1]))
            diff_push(d, '-', lo + i++, lo + j);
        else
            diff_push(d, '+', lo + i, lo + j++);
    }
    free(l);
}

static diff_ops diff_build(const diff_text *a, const diff_text *b)
{
    size_t cap = a->n + b->n + 1, lo = 0, tail = 0;
    diff_ops d = {malloc(cap), malloc(cap * sizeof(size_t)), malloc(cap * sizeof(size_t)), 0};
    while (lo < a->n && lo < b->n && diff_eq(a->v[lo], b->v[lo])) diff_push(&d, ' ', lo, lo), lo++;
    while (tail < a->n - lo && tail < b->n - lo &&
           diff_eq(a->v[a->n - 1 - tail], b->v[b->n - 1 - tail]))
        tail++;
    diff_middle(&d, a, b, lo, a->n - lo - tail, b->n - lo - tail);
    for (size_t k = tail; k > 0; k--) diff_push(&d, ' ', a->n - k, b->n - k);
    diff_push(&d, 0, a->n, b->n); /* the end: ai, bi count every line */
    d.n--;
    return d;
}

static void diff_print_line(char op, diff_line l, FILE *out)
{
    fputc(op, out);
    fwrite(l.s, 1, l.n, out);
    if (l.n == 0 || l.s[l.n - 1] != '\n') fputs("\n\\ No newline at end of file\n", out);
}

/* Ops [from, to) as one hunk. */
static void diff_hunk(const diff_ops *d, const diff_text *a, const diff_text *b, size_t from,
                      size_t to, FILE *out)
{
    size_t na = d->ai[to] - d->ai[from], nb = d->bi[to] - d->bi[from];
    fprintf(out, "@@ -%zu,%zu +%zu,%zu @@\n", d->ai[from] + (na > 0), na, d->bi[from] + (nb > 0),
            nb);
    for (size_t k = from; k < to; k++)
        diff_print_line(d->op[k], d->op[k] == '+' ? b->v[d->bi[k]] : a->v[d->ai[k]], out);
}

/* The end of the hunk that starts with the change at k: changes closer
 * than twice the context join it. */
static size_t diff_hunk_end(const diff_ops *d, size_t k)
{
    size_t last = k;
    for (size_t i = k; i < d->n && i <= last + 2 * DIFF_CONTEXT + 1; i++)
        if (d->op[i] != ' ') last = i;
    size_t end = last + 1 + DIFF_CONTEXT;
    return end < d->n ? end : d->n;
}

void cli_diff(const char *name, const char *a, size_t alen, const char *b, size_t blen, FILE *out)
{
    diff_text ta = diff_split(a, alen), tb = diff_split(b, blen);
    diff_ops d = diff_build(&ta, &tb);
    fprintf(out, "--- a/%s\n+++ b/%s\n", name, name);
    for (size_t k = 0; k < d.n; k++) {
        if (d.op[k] == ' ') continue;
        size_t end = diff_hunk_end(&d, k);
        diff_hunk(&d, &ta, &tb, k > DIFF_CONTEXT ? k - DIFF_CONTEXT : 0, end, out);
        k = end - 1;
    }
    free(d.op);
    free(d.ai);
    free(d.bi);
    free(ta.v);
    free(tb.v);
}
