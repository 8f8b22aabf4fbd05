/* CSV: decimal numbers separated by commas, one optional label column and
 * an optional header row.  The rules (docs/language.md, "Data sources"):
 *  - a UTF-8 byte order mark is skipped; lines end in LF or CRLF; blank
 *    lines are skipped;
 *  - a field may be quoted ("1.5", "a, b" with "" for a quote inside), so
 *    a header name can hold a comma; a quote cannot span lines;
 *  - the first non-blank row is a header when none of its fields reads as
 *    a number and at least one is not empty, so an empty field or a BOM
 *    never turns a data row into a header;
 *  - every later row has the first row's number of fields, each a decimal
 *    number that is a finite f32 (nan and inf only with nonfinite=true).
 * Each error is "FILE:LINE:COL: ...", COL counting characters from 1. */
#include "data_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CSV_SHOW_MAX 64 /* characters of a bad field quoted in a message */

typedef struct csv_text {
    char *buf;               /* the file, NUL-terminated */
    const char *start, *end; /* the text after any BOM */
} csv_text;

/* One field of a line: its text [s, e), blanks trimmed and quotes removed. */
typedef struct csv_field {
    const char *s, *e;
    const char *at; /* where it starts on the line (for COL) */
    int quoted;
} csv_field;

/* One line, and the file it is in (for messages). */
typedef struct csv_line {
    const char *path;
    const char *s, *e; /* without its line ending */
    int64_t no;        /* 1-based */
} csv_line;

typedef struct csv_cursor {
    const char *p, *end;
    int64_t line; /* number of the line last returned */
} csv_cursor;

/* What a first pass learns: enough for probe, and the sizes for load. */
typedef struct csv_shape {
    int ncols;
    int header;   /* the first non-blank line is a header */
    int label;    /* resolved label column, or -1 for none */
    int64_t rows; /* data rows */
} csv_shape;

static int csv_read_file(const char *path, csv_text *t, char *err, size_t errlen)
{
    int64_t len;
    if (data_read_whole(path, DATA_CSV_MAX_BYTES, "a CSV file", &t->buf, &len, err, errlen))
        return -1;
    t->start = t->buf;
    t->end = t->buf + len;
    if (len >= 3 && memcmp(t->buf, "\xEF\xBB\xBF", 3) == 0) t->start += 3;
    return 0;
}

static int csv_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static int csv_blank(const char *s, const char *e)
{
    for (; s < e; s++)
        if (!csv_is_blank(*s)) return 0;
    return 1;
}

/* The next non-blank line into *l, without its LF or CRLF; 0 at the end. */
static int csv_next_line(csv_cursor *c, const char *path, csv_line *l)
{
    while (c->p < c->end) {
        const char *s = c->p, *nl = memchr(s, '\n', (size_t)(c->end - s));
        const char *e = nl ? nl : c->end;
        c->p = nl ? nl + 1 : c->end;
        c->line++;
        if (e > s && e[-1] == '\r') e--;
        if (!csv_blank(s, e)) {
            *l = (csv_line){path, s, e, c->line};
            return 1;
        }
    }
    return 0;
}

/* Column (characters, 1-based) of p on line l. */
static int csv_col(const csv_line *l, const char *p)
{
    int col = 1;
    for (const char *q = l->s; q < p; q++) col += ((unsigned char)*q & 0xC0) != 0x80;
    return col;
}

/* "FILE:LINE:COL: " then the message. */
static int csv_err_at(const csv_line *l, const char *p, char *err, size_t errlen, const char *what,
                      const char *detail)
{
    data_err(err, errlen, "%s:%lld:%d: %s%s", l->path, (long long)l->no, csv_col(l, p), what,
             detail);
    return -1;
}

/* A quoted field from q (its opening quote): *f gets the text between the
 * quotes, *next what follows the closing one. */
static int csv_quoted(const csv_line *l, const char *q, csv_field *f, const char **next, char *err,
                      size_t errlen)
{
    const char *p = q + 1;
    for (; p < l->e; p++) {
        if (*p != '"') continue;
        if (p + 1 < l->e && p[1] == '"') {
            p++; /* "" is a quote inside the field */
            continue;
        }
        *f = (csv_field){q + 1, p, q, 1};
        *next = p + 1;
        return 0;
    }
    return csv_err_at(l, q, err, errlen, "this quoted field does not end on its line",
                      " (a line break inside quotes is not supported)");
}

/* Splits the field at *p off the line: its text, blanks trimmed and any
 * quotes removed, into *f; *p moves past its comma, or to NULL after the
 * last field of the line. */
static int csv_split(const csv_line *l, const char **p, csv_field *f, char *err, size_t errlen)
{
    const char *s = *p, *e = NULL;
    while (s < l->e && csv_is_blank(*s)) s++;
    if (s < l->e && *s == '"') {
        if (csv_quoted(l, s, f, &e, err, errlen)) return -1;
        while (e < l->e && csv_is_blank(*e)) e++;
        if (e < l->e && *e != ',')
            return csv_err_at(l, e, err, errlen, "text after a closing quote",
                              " (write a quote inside a quoted field as \"\")");
    } else {
        e = memchr(s, ',', (size_t)(l->e - s));
        if (!e) e = l->e;
        const char *te = e;
        while (te > s && csv_is_blank(te[-1])) te--;
        *f = (csv_field){s, te, s, 0};
    }
    *p = e < l->e ? e + 1 : NULL;
    return 0;
}

/* Fields of line l into *n; -1 on a bad quote. */
static int csv_count_fields(const csv_line *l, int *n, char *err, size_t errlen)
{
    csv_field f;
    *n = 0;
    for (const char *p = l->s; p; (*n)++)
        if (csv_split(l, &p, &f, err, errlen)) return -1;
    return 0;
}

/* A decimal number as people write one: [+-] digits [. digits] [e [+-]
 * digits], digits on at least one side of the point. */
static int csv_decimal(const char *s, const char *e)
{
    if (s < e && (*s == '+' || *s == '-')) s++;
    const char *d = s;
    while (s < e && *s >= '0' && *s <= '9') s++;
    int digits = s > d;
    if (s < e && *s == '.') {
        const char *f = ++s;
        while (s < e && *s >= '0' && *s <= '9') s++;
        digits |= s > f;
    }
    if (!digits) return 0;
    if (s < e && (*s == 'e' || *s == 'E')) {
        if (++s < e && (*s == '+' || *s == '-')) s++;
        const char *x = s;
        while (s < e && *s >= '0' && *s <= '9') s++;
        if (s == x) return 0;
    }
    return s == e;
}

/* nan, inf or infinity, any case, with an optional sign: its value. */
static int csv_nonfinite_word(csv_field f, double *v)
{
    const char *s = f.s;
    int neg = s < f.e && *s == '-';
    if (s < f.e && (*s == '-' || *s == '+')) s++;
    size_t n = (size_t)(f.e - s);
    if (n == 3 && strncasecmp(s, "nan", 3) == 0) {
        *v = neg ? -NAN : NAN;
        return 1;
    }
    if ((n == 3 && strncasecmp(s, "inf", 3) == 0) ||
        (n == 8 && strncasecmp(s, "infinity", 8) == 0)) {
        *v = neg ? -INFINITY : INFINITY;
        return 1;
    }
    return 0;
}

/* Whether strtod takes the whole field as a number in any of its forms
 * (hex, nan, inf too): such a field is never a header name.  strtod stops
 * inside the buffer: a field ends at a comma, quote, blank or line end. */
static int csv_looks_numeric(csv_field f)
{
    char *end;
    if (f.s == f.e) return 0;
    (void)strtod(f.s, &end);
    return end == f.e;
}

/* The header rule: no field reads as a number, and not every one is empty. */
static int csv_is_header(const csv_line *l, char *err, size_t errlen, int *header)
{
    csv_field f;
    int named = 0;
    for (const char *p = l->s; p;) {
        if (csv_split(l, &p, &f, err, errlen)) return -1;
        if (csv_looks_numeric(f)) {
            *header = 0;
            return 0;
        }
        named |= f.e > f.s;
    }
    *header = named;
    return 0;
}

static int csv_resolve_label(const data_spec *s, csv_shape *sh, char *err, size_t errlen)
{
    int lc = s->label_col;
    if (lc == -2) {
        sh->label = -1;
    } else if (lc == -1 || (lc >= 0 && lc < sh->ncols)) {
        sh->label = lc == -1 ? sh->ncols - 1 : lc;
    } else {
        data_err(err, errlen, "%s: label column %d is out of range (the file has %d columns)",
                 s->path[0], lc, sh->ncols);
        return -1;
    }
    if (sh->ncols - (sh->label >= 0) < 1) {
        data_err(err, errlen, "%s: no feature columns besides the label", s->path[0]);
        return -1;
    }
    return 0;
}

static int csv_scan(const data_spec *s, const csv_text *t, csv_shape *sh, char *err, size_t errlen)
{
    csv_cursor c = {t->start, t->end, 0};
    csv_line l;
    memset(sh, 0, sizeof *sh);
    if (!csv_next_line(&c, s->path[0], &l)) {
        data_err(err, errlen, "%s: no data rows", s->path[0]);
        return -1;
    }
    if (csv_count_fields(&l, &sh->ncols, err, errlen) ||
        csv_is_header(&l, err, errlen, &sh->header))
        return -1;
    sh->rows = !sh->header;
    while (csv_next_line(&c, s->path[0], &l)) sh->rows++;
    if (sh->rows == 0) {
        data_err(err, errlen, "%s: no data rows", s->path[0]);
        return -1;
    }
    return csv_resolve_label(s, sh, err, errlen);
}

static void csv_fill_info(const csv_shape *sh, data_info *info)
{
    memset(info, 0, sizeof *info);
    info->n = sh->rows;
    info->x_rank = 1;
    info->x_dims[0] = sh->ncols - (sh->label >= 0);
    info->has_y = sh->label >= 0;
}

int data_csv_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    csv_text t;
    csv_shape sh;
    if (csv_read_file(s->path[0], &t, err, errlen)) return -1;
    int rc = csv_scan(s, &t, &sh, err, errlen);
    free(t.buf);
    if (rc == 0) csv_fill_info(&sh, info);
    return rc;
}

/* How much of a field a message quotes. */
static int csv_show(csv_field f)
{
    return f.e - f.s < CSV_SHOW_MAX ? (int)(f.e - f.s) : CSV_SHOW_MAX;
}

/* Why field f of line l (CSV column col, 1-based) is not a value. */
static int csv_bad_field(const csv_line *l, csv_field f, int col, const char *why, int first,
                         char *err, size_t errlen)
{
    char what[160];
    if (f.s == f.e)
        snprintf(what, sizeof what, "column %d is empty", col);
    else
        snprintf(what, sizeof what, "column %d: '%.*s' %s", col, csv_show(f), f.s, why);
    return csv_err_at(l, f.at, err, errlen, what,
                      first ? " (the first row is a header only when none of its fields is a "
                              "number)"
                            : "");
}

/* Field f's value: a decimal number that is a finite f32, or with
 * nonfinite a nan or an infinity. */
static int csv_value(const data_spec *s, const csv_line *l, csv_field f, int col, int first,
                     double *v, char *err, size_t errlen)
{
    if (csv_nonfinite_word(f, v)) {
        if (s->nonfinite) return 0;
        return csv_bad_field(l, f, col,
                             "is not a finite number; csv(..., nonfinite=true) reads "
                             "nan and inf",
                             first, err, errlen);
    }
    if (!csv_decimal(f.s, f.e))
        return csv_bad_field(l, f, col,
                             csv_looks_numeric(f) ? "is not a decimal number (as -1.5e3)"
                                                  : "is not a number",
                             first, err, errlen);
    char *end;
    *v = strtod(f.s, &end);
    if (end != f.e)
        return csv_bad_field(l, f, col, "is not a number in this locale", first, err, errlen);
    if (isinf((float)*v))
        return csv_bad_field(l, f, col, "is beyond the range of f32", first, err, errlen);
    return 0;
}

static int csv_store_label(const csv_line *l, csv_field f, int col, double v, int32_t *y, char *err,
                           size_t errlen)
{
    if (!(v >= 0 && v <= INT32_MAX && v == floor(v))) {
        char what[160];
        snprintf(what, sizeof what, "label '%.*s' in column %d is not a non-negative integer",
                 csv_show(f), f.s, col);
        return csv_err_at(l, f.at, err, errlen, what, "");
    }
    *y = (int32_t)v;
    return 0;
}

/* A row of n fields where the first row has sh->ncols: the error points
 * at the first field too many, or at the end of the line. */
static int csv_ragged(const csv_line *l, const csv_shape *sh, int n, char *err, size_t errlen)
{
    csv_field f;
    const char *p = l->s;
    for (int k = 0; k < sh->ncols && n > sh->ncols; k++) csv_split(l, &p, &f, err, errlen);
    char what[96];
    snprintf(what, sizeof what, "expected %d columns, found %d", sh->ncols, n);
    return csv_err_at(l, n > sh->ncols ? p : l->e, err, errlen, what, "");
}

/* Parses one data row into x (features) and y (label, if any). */
static int csv_parse_row(const data_spec *s, const csv_shape *sh, const csv_line *l, int first,
                         float *x, int32_t *y, char *err, size_t errlen)
{
    csv_field f;
    double v = 0;
    int n;
    if (csv_count_fields(l, &n, err, errlen)) return -1;
    if (n != sh->ncols) return csv_ragged(l, sh, n, err, errlen);
    const char *p = l->s;
    for (int col = 0; col < sh->ncols; col++) {
        csv_split(l, &p, &f, err, errlen); /* counted above: no quote errors left */
        if (csv_value(s, l, f, col + 1, first, &v, err, errlen)) return -1;
        if (col == sh->label) {
            if (csv_store_label(l, f, col + 1, v, y, err, errlen)) return -1;
        } else {
            *x++ = (float)v;
        }
    }
    return 0;
}

static int csv_parse_all(const data_spec *s, const csv_text *t, const csv_shape *sh, data_set *ds,
                         char *err, size_t errlen)
{
    csv_cursor c = {t->start, t->end, 0};
    csv_line l;
    int64_t nx = ds->ex_elems;
    if (sh->header) csv_next_line(&c, s->path[0], &l);
    for (int64_t i = 0; csv_next_line(&c, s->path[0], &l); i++) {
        float *x = (float *)ds->x + i * nx;
        int32_t *y = ds->y ? ds->y + i : NULL;
        if (csv_parse_row(s, sh, &l, i == 0 && !sh->header, x, y, err, errlen)) return -1;
    }
    return 0;
}

int data_csv_load(const data_spec *s, data_set *ds, char *err, size_t errlen)
{
    csv_text t;
    csv_shape sh;
    if (csv_read_file(s->path[0], &t, err, errlen)) return -1;
    int rc = csv_scan(s, &t, &sh, err, errlen);
    if (rc == 0) {
        csv_fill_info(&sh, &ds->info);
        ds->elem = DATA_ELEM_F32;
        ds->ex_elems = ds->info.x_dims[0];
        ds->x_path = ds->y_path = s->path[0];
        ds->x = malloc((size_t)(sh.rows * ds->ex_elems) * sizeof(float));
        ds->y = sh.label >= 0 ? malloc((size_t)sh.rows * sizeof(int32_t)) : NULL;
        if (!ds->x || (sh.label >= 0 && !ds->y)) {
            data_err(err, errlen, "%s: out of memory", s->path[0]);
            rc = -1;
        }
    }
    if (rc == 0) rc = csv_parse_all(s, &t, &sh, ds, err, errlen);
    free(t.buf);
    return rc;
}
