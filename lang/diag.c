/* diag.c - source files, line tables and diagnostic printing. */
#include "diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIAG_DEFAULT_CAP 20

static int has_bom(const char *t, size_t len)
{
    return len >= 3 && (unsigned char)t[0] == 0xEF && (unsigned char)t[1] == 0xBB &&
           (unsigned char)t[2] == 0xBF;
}

/* Line 1 starts after a BOM so that columns read as if it were absent. */
static int build_lines(src_file *s)
{
    size_t n = 1;
    for (size_t i = 0; i < s->len; i++) n += s->text[i] == '\n';
    s->lines = malloc(n * sizeof *s->lines);
    if (!s->lines) return -1;
    s->n_lines = 0;
    s->lines[s->n_lines++] = has_bom(s->text, s->len) ? 3 : 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->text[i] == '\n') s->lines[s->n_lines++] = (uint32_t)(i + 1);
    return 0;
}

src_file *src_from_string(const char *name, const char *text, size_t len)
{
    if (len > UINT32_MAX - 1) return NULL;
    src_file *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->name = strdup(name ? name : "<string>");
    s->text = malloc(len + 1);
    s->len = len;
    if (!s->name || !s->text) {
        src_free(s);
        return NULL;
    }
    if (len) memcpy(s->text, text, len);
    s->text[len] = '\0';
    if (build_lines(s) != 0) {
        src_free(s);
        return NULL;
    }
    return s;
}

/* Reads the len bytes of fd into a new buffer; NULL on a read error, or
 * when the file has shrunk (errno EIO then). */
static char *read_all(int fd, size_t len)
{
    char *buf = malloc(len + 1);
    size_t n = 0;
    while (buf && n < len) {
        ssize_t r = read(fd, buf + n, len - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            free(buf);
            return NULL;
        }
        n += (size_t)r;
    }
    return buf;
}

/* Opens path to read it: a regular file (a FIFO is never waited for) of at
 * most LIM_SOURCE_BYTES, its size into *len; -1 with the message in err. */
static int open_source(const char *path, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > LIM_SOURCE_BYTES) {
        if (!S_ISREG(st.st_mode))
            snprintf(err, errlen, "%s: not a regular file", path);
        else
            snprintf(err, errlen,
                     "%s: the file is %lld bytes, above the limit of %lld MiB for a source", path,
                     (long long)st.st_size, LIM_SOURCE_BYTES >> 20);
        close(fd);
        return -1;
    }
    *len = (size_t)st.st_size;
    return fd;
}

src_file *src_load(const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    int fd = open_source(path, &len, err, errlen);
    if (fd < 0) return NULL;
    char *buf = read_all(fd, len);
    if (!buf) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    close(fd);
    src_file *s = src_from_string(path, buf, len);
    free(buf);
    if (!s) snprintf(err, errlen, "%s: out of memory", path);
    return s;
}

void src_free(src_file *s)
{
    if (!s) return;
    free(s->name);
    free(s->text);
    free(s->lines);
    free(s);
}

static size_t line_index(const src_file *s, uint32_t off)
{
    size_t lo = 0, hi = s->n_lines;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->lines[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* A UTF-8 continuation byte does not start a new column. */
static int is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

static int count_cols(const char *t, uint32_t from, uint32_t to)
{
    int n = 0;
    for (uint32_t i = from; i < to; i++) n += !is_cont((unsigned char)t[i]);
    return n;
}

void src_linecol(const src_file *s, uint32_t off, int *line, int *col)
{
    if (off > s->len) off = (uint32_t)s->len;
    size_t li = line_index(s, off);
    uint32_t start = s->lines[li];
    *line = (int)li + 1;
    *col = 1 + (off > start ? count_cols(s->text, start, off) : 0);
}

void diag_init(diag_list *d)
{
    memset(d, 0, sizeof *d);
}

void diag_free(diag_list *d)
{
    for (int i = 0; i < d->n; i++) free(d->v[i].msg);
    free(d->v);
    diag_init(d);
}

static int diag_cap(const diag_list *d)
{
    return d->max_errors > 0 ? d->max_errors : DIAG_DEFAULT_CAP;
}

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

int diag_full(const diag_list *d)
{
    return d->n_errors >= diag_cap(d);
}

void diag_vadd(diag_list *d, diag_severity sev, const src_file *src, src_span sp, const char *fmt,
               va_list ap)
{
    if (sev == DIAG_ERROR) d->n_errors++;
    /* Past the cap errors are only counted; their notes are dropped too. */
    if (d->n_errors > diag_cap(d)) return;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        diag_entry *v = realloc(d->v, (size_t)cap * sizeof *v);
        if (!v) return;
        d->v = v;
        d->cap = cap;
    }
    diag_entry *e = &d->v[d->n];
    e->sev = sev;
    e->src = src;
    e->span = sp;
    e->msg = vformat(fmt, ap);
    if (e->msg) d->n++;
}

void diag_add(diag_list *d, diag_severity sev, const src_file *src, src_span sp, const char *fmt,
              ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(d, sev, src, sp, fmt, ap);
    va_end(ap);
}

static const char *sev_name(diag_severity s)
{
    switch (s) {
    case DIAG_ERROR:
        return "error";
    case DIAG_WARNING:
        return "warning";
    case DIAG_NOTE:
        return "note";
    }
    return "error";
}

/* End of the line holding byte `start`, excluding "\n" or "\r\n". */
static uint32_t line_end(const src_file *s, uint32_t start)
{
    uint32_t e = start;
    while (e < s->len && s->text[e] != '\n') e++;
    if (e > start && s->text[e - 1] == '\r') e--;
    return e;
}

static void print_caret(const src_file *s, uint32_t start, uint32_t eol, src_span sp, FILE *out)
{
    uint32_t b = sp.begin > eol ? eol : sp.begin;
    for (uint32_t i = start; i < b; i++) {
        unsigned char c = (unsigned char)s->text[i];
        if (c == '\t')
            fputc('\t', out);
        else if (!is_cont(c))
            fputc(' ', out);
    }
    fputc('^', out);
    uint32_t e = sp.end > eol ? eol : sp.end;
    for (int n = e > b + 1 ? count_cols(s->text, b + 1, e) : 0; n > 0; n--) fputc('~', out);
    fputc('\n', out);
}

void diag_print_one(const diag_entry *e, FILE *out)
{
    const src_file *s = e->src;
    if (!s) {
        fprintf(out, "graphrun: %s: %s\n", sev_name(e->sev), e->msg);
        return;
    }
    int line, col;
    src_linecol(s, e->span.begin, &line, &col);
    fprintf(out, "%s:%d:%d: %s: %s\n", s->name, line, col, sev_name(e->sev), e->msg);
    uint32_t start = s->lines[line - 1];
    uint32_t eol = line_end(s, start);
    for (uint32_t i = start; i < eol; i++) { /* control bytes (a NUL...) show as '?' */
        unsigned char c = (unsigned char)s->text[i];
        fputc(c < 0x20 && c != '\t' ? '?' : c, out);
    }
    fputc('\n', out);
    print_caret(s, start, eol, e->span, out);
}

void diag_print(const diag_list *d, FILE *out)
{
    const char *name = NULL;
    for (int i = 0; i < d->n; i++) {
        diag_print_one(&d->v[i], out);
        if (d->v[i].src) name = d->v[i].src->name;
    }
    int hidden = d->n_errors - diag_cap(d);
    if (hidden > 0)
        fprintf(out, "%s: %d more error%s not shown\n", name ? name : "graphrun", hidden,
                hidden == 1 ? "" : "s");
}
