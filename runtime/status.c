/* status.c - gr_status: the code, message and location of the last error. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

gr_status *gr_status_new(void)
{
    return calloc(1, sizeof(gr_status));
}

static void status_clear(gr_status *st)
{
    free(st->msg);
    free(st->file);
    memset(st, 0, sizeof *st);
}

void gr_status_free(gr_status *st)
{
    if (!st) return;
    status_clear(st);
    free(st);
}

gr_code gr_status_code(const gr_status *st)
{
    return st ? st->code : GR_OK;
}

const char *gr_status_message(const gr_status *st)
{
    return st && st->msg ? st->msg : "";
}

int gr_status_location(const gr_status *st, const char **file, int *line, int *col)
{
    if (!st || !st->file) return 0;
    if (file) *file = st->file;
    if (line) *line = st->line;
    if (col) *col = st->col;
    return 1;
}

const char *gr_code_name(gr_code c)
{
    static const char *names[] = {
        "ok",           "syntax error",  "compile error", "I/O error",      "data error",
        "bad argument", "numeric error", "out of memory", "internal error", "cancelled"};
    return (unsigned)c < sizeof names / sizeof *names ? names[c] : "unknown error";
}

void rt_ok(gr_status *st)
{
    if (st) status_clear(st);
}

gr_code rt_fail(gr_status *st, gr_code code, const char *fmt, ...)
{
    if (!st) return code;
    status_clear(st);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&st->msg, fmt, ap) < 0) st->msg = NULL;
    va_end(ap);
    st->code = code;
    return code;
}

gr_code rt_null(gr_status *st, const char *fn, const char *arg)
{
    return rt_fail(st, GR_ERR_ARG, "%s: %s is NULL\n", fn, arg);
}

gr_code rt_source_too_long(gr_status *st, const char *fn, size_t len)
{
    return rt_fail(st, GR_ERR_ARG, "%s: len is %zu, above the limit of %lld MiB for a source\n", fn,
                   len, LIM_SOURCE_BYTES >> 20);
}

gr_code rt_catch_oom(gr_code (*fn)(void *arg), void *arg, const char *what, gr_status *st)
{
    jmp_buf jb;
    jmp_buf *volatile prev = NULL;
    if (setjmp(jb)) {
        fatal_catch_pop(prev);
        return rt_fail(st, GR_ERR_NOMEM, "%s: out of memory\n", what);
    }
    prev = fatal_catch_push(&jb);
    gr_code c = fn(arg);
    fatal_catch_pop(prev);
    return c;
}

typedef struct plan_job {
    const ir_graph *g;
    const int *roots;
    int n_roots;
    plan_graph *plan;
} plan_job;

static gr_code plan_job_run(void *arg)
{
    plan_job *j = arg;
    j->plan = plan_build(j->g, j->roots, j->n_roots);
    return GR_OK;
}

plan_graph *rt_plan_build(const ir_graph *g, const int *roots, int n_roots, gr_status *st)
{
    plan_job j = {g, roots, n_roots, NULL};
    return rt_catch_oom(plan_job_run, &j, "planning", st) == GR_OK ? j.plan : NULL;
}

gr_code rt_fail_at(gr_status *st, gr_code code, const ir_node *n, const char *fmt, ...)
{
    if (!st) return code;
    status_clear(st);
    st->code = code;
    diag_entry e = {.sev = DIAG_ERROR, .src = n->src, .span = n->span};
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&e.msg, fmt, ap) < 0) e.msg = NULL;
    va_end(ap);
    size_t len = 0;
    FILE *f = open_memstream(&st->msg, &len);
    if (f && e.msg) {
        diag_print_one(&e, f);
        fclose(f);
    } else if (f)
        fclose(f);
    free(e.msg);
    if (n->src) {
        st->file = strdup(n->src->name);
        src_linecol(n->src, n->span.begin, &st->line, &st->col);
    }
    return code;
}

const char *rt_human_bytes(size_t n, char *buf, size_t len)
{
    static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024 && u < 6) x /= 1024, u++;
    if (u == 0)
        snprintf(buf, len, "%zu bytes", n);
    else
        snprintf(buf, len, "%.1f %s", x, units[u]);
    return buf;
}

gr_code rt_status_copy(gr_status *dst, const gr_status *src)
{
    if (!dst) return src->code;
    status_clear(dst);
    dst->code = src->code;
    dst->msg = src->msg ? strdup(src->msg) : NULL;
    dst->file = src->file ? strdup(src->file) : NULL;
    dst->line = src->line;
    dst->col = src->col;
    return dst->code;
}

gr_code rt_fail_diags(gr_status *st, gr_code code, const diag_list *d)
{
    if (!st) return code;
    status_clear(st);
    st->code = code;
    size_t len = 0;
    FILE *f = open_memstream(&st->msg, &len);
    if (f) {
        diag_print(d, f);
        fclose(f);
    }
    for (int i = 0; i < d->n; i++) {
        const diag_entry *e = &d->v[i];
        if (e->sev != DIAG_ERROR || !e->src) continue;
        st->file = strdup(e->src->name);
        src_linecol(e->src, e->span.begin, &st->line, &st->col);
        break;
    }
    return code;
}

void gr_set_abort_hook(gr_abort_hook hook)
{
    fatal_set_hook(hook);
}
