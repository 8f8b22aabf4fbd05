/* CSV: numeric fields separated by commas, an optional header row (the first
 * row, when one of its fields is not a number), one optional label column. */
#include "runtime/data_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CSV_SHOW_MAX 64 /* characters of a bad field quoted in a message */

typedef struct csv_text {
    char *buf; /* len bytes, then a NUL that stops strtod at the end of the file */
    size_t len;
} csv_text;

/* One field of a line, blanks around it trimmed. */
typedef struct csv_field {
    const char *s, *e;
} csv_field;

typedef struct csv_cursor {
    const char *p, *end;
    int64_t line; /* 1-based number of the line last returned */
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
    FILE *f = fopen(path, "rb");
    if (!f) {
        data_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        data_err(err, errlen, "%s: %s", path, bad ? "read error" : "out of memory");
        return -1;
    }
    buf[len] = '\0'; /* the loop leaves len < cap */
    t->buf = buf;
    t->len = len;
    return 0;
}

static int csv_blank(const char *s, const char *e)
{
    for (; s < e; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

/* Next non-blank line as [*ls, *le) without its line ending; 0 at the end. */
static int csv_next_line(csv_cursor *c, const char **ls, const char **le)
{
    while (c->p < c->end) {
        const char *s = c->p, *nl = memchr(s, '\n', (size_t)(c->end - s));
        const char *e = nl ? nl : c->end;
        c->p = nl ? nl + 1 : c->end;
        c->line++;
        if (e > s && e[-1] == '\r') e--;
        if (!csv_blank(s, e)) {
            *ls = s;
            *le = e;
            return 1;
        }
    }
    return 0;
}

static int csv_count_fields(const char *s, const char *e)
{
    int n = 1;
    for (; s < e; s++) n += *s == ',';
    return n;
}

static csv_field csv_trim(const char *s, const char *e)
{
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    return (csv_field){s, e};
}

/* How much of a field a message quotes. */
static int csv_show(csv_field f)
{
    return f.e - f.s < CSV_SHOW_MAX ? (int)(f.e - f.s) : CSV_SHOW_MAX;
}

/* strtod reads the file buffer in place, so a field of any length is judged
 * whole (the terminating NUL keeps it inside the buffer), and it must use up
 * exactly the field.  ERANGE fails only on overflow: an underflow still
 * gives a number, 0 or a subnormal. */
static int csv_parse_num(csv_field f, double *v)
{
    char *end;
    if (f.s == f.e) return 0;
    errno = 0;
    *v = strtod(f.s, &end);
    return end == f.e && !(errno == ERANGE && isinf(*v));
}

static int csv_line_numeric(const char *s, const char *e)
{
    double v;
    for (const char *fs = s; fs <= e;) {
        const char *fe = memchr(fs, ',', (size_t)(e - fs));
        if (!fe) fe = e;
        if (!csv_parse_num(csv_trim(fs, fe), &v)) return 0;
        fs = fe + 1;
    }
    return 1;
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
    csv_cursor c = {t->buf, t->buf + t->len, 0};
    const char *ls, *le;
    memset(sh, 0, sizeof *sh);
    if (!csv_next_line(&c, &ls, &le)) {
        data_err(err, errlen, "%s: no data rows", s->path[0]);
        return -1;
    }
    sh->ncols = csv_count_fields(ls, le);
    sh->header = !csv_line_numeric(ls, le);
    sh->rows = !sh->header;
    while (csv_next_line(&c, &ls, &le)) sh->rows++;
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

static int csv_store_label(const char *path, int64_t line, int col, csv_field f, double v,
                           int32_t *y, char *err, size_t errlen)
{
    if (v < 0 || v > INT32_MAX || v != floor(v)) {
        data_err(err, errlen, "%s:%lld: label '%.*s' in column %d is not a non-negative integer",
                 path, (long long)line, csv_show(f), f.s, col + 1);
        return -1;
    }
    *y = (int32_t)v;
    return 0;
}

/* Parses one data row into x (features) and y (label, if any). */
static int csv_parse_row(const char *path, const csv_shape *sh, int64_t line, const char *s,
                         const char *e, float *x, int32_t *y, char *err, size_t errlen)
{
    int nf = csv_count_fields(s, e);
    if (nf != sh->ncols) {
        data_err(err, errlen, "%s:%lld: expected %d columns, found %d", path, (long long)line,
                 sh->ncols, nf);
        return -1;
    }
    double v;
    int col = 0;
    for (const char *fs = s; fs <= e; col++) {
        const char *fe = memchr(fs, ',', (size_t)(e - fs));
        if (!fe) fe = e;
        csv_field f = csv_trim(fs, fe);
        if (!csv_parse_num(f, &v)) {
            data_err(err, errlen, "%s:%lld: column %d: '%.*s' is not a number", path,
                     (long long)line, col + 1, csv_show(f), f.s);
            return -1;
        }
        if (col == sh->label) {
            if (csv_store_label(path, line, col, f, v, y, err, errlen)) return -1;
        } else {
            *x++ = (float)v;
        }
        fs = fe + 1;
    }
    return 0;
}

static int csv_parse_all(const data_spec *s, const csv_text *t, const csv_shape *sh, data_set *ds,
                         char *err, size_t errlen)
{
    csv_cursor c = {t->buf, t->buf + t->len, 0};
    const char *ls, *le;
    int64_t nx = ds->ex_elems;
    if (sh->header) csv_next_line(&c, &ls, &le);
    for (int64_t i = 0; csv_next_line(&c, &ls, &le); i++) {
        float *x = (float *)ds->x + i * nx;
        int32_t *y = ds->y ? ds->y + i : NULL;
        if (csv_parse_row(s->path[0], sh, c.line, ls, le, x, y, err, errlen)) return -1;
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
