/* fuzz_data_common.c - option bytes, in-memory files and the reader
 * exercise shared by the data reader fuzz targets (see fuzz_data.h). */
#include "tests/fuzz/fuzz_data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* ---- input and files ---- */

uint8_t fz_take(fz_in *in)
{
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}

unsigned fz_take16(fz_in *in)
{
    unsigned lo = fz_take(in);
    return lo | (unsigned)fz_take(in) << 8;
}

void fz_common(fz_in *in, data_spec *s, fz_plan *plan)
{
    uint8_t b = fz_take(in), flags = fz_take(in), nc = fz_take(in), pull = fz_take(in),
            seed = fz_take(in);
    s->batch = b == 0xff ? INT64_C(1) << 40 : b == 0xfe ? 0 : (int64_t)b + 1;
    s->shuffle = flags & 1;
    s->n_classes = (int8_t)nc;
    s->seed = seed * UINT64_C(0x9E3779B97F4A7C15);
    plan->flags = flags;
    plan->pulls = pull & 15;
    plan->seek = pull >> 4;
    plan->epoch = seed & 7;
}

void fz_split(fz_in *in, unsigned sel, fz_in *a, fz_in *b)
{
    size_t at = sel % (in->n + 1);
    *a = (fz_in){in->p, at};
    *b = (fz_in){in->p + at, in->n - at};
}

void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* memfds rather than files in a folder: nothing to clean up, and the same
 * two paths serve every run. */
static int g_fd[2] = {-1, -1};
static char g_path[2][32];

const char *fz_file(int k, const uint8_t *data, size_t len)
{
    if (g_fd[k] < 0) {
        g_fd[k] = memfd_create(k ? "fuzz-data-1" : "fuzz-data-0", 0);
        if (g_fd[k] < 0) fz_fail("memfd_create failed");
        snprintf(g_path[k], sizeof g_path[k], "/proc/self/fd/%d", g_fd[k]);
    }
    if (ftruncate(g_fd[k], 0) != 0 || (len && pwrite(g_fd[k], data, len, 0) != (ssize_t)len))
        fz_fail("cannot write the in-memory file");
    return g_path[k];
}

const char *fz_missing(void)
{
    return "/nonexistent/fuzz-data-missing";
}

uint8_t *fz_gzip(const uint8_t *data, size_t len, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        fz_fail("deflateInit2 failed");
    size_t cap = deflateBound(&z, (uLong)len);
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (!out || deflate(&z, Z_FINISH) != Z_STREAM_END) fz_fail("deflate failed");
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* ---- checks ---- */

/* data.h: "one line (no trailing newline), starting with the file". */
static void fz_check_err(const data_spec *s, const char *what, const char *err)
{
    int named = 0;
    for (int k = 0; k < 2; k++) {
        size_t n = s->path[k] ? strlen(s->path[k]) : 0;
        if (n && strncmp(err, s->path[k], n) == 0 && err[n] == ':') named = 1;
    }
    if (!named) fz_fail("%s: message does not start with a file name: '%s'", what, err);
    if (strchr(err, '\n')) fz_fail("%s: message is more than one line: '%s'", what, err);
}

static void fz_check_info(const data_info *a, const data_info *b)
{
    int same = a->n == b->n && a->x_rank == b->x_rank && a->has_y == b->has_y &&
               a->y_per == b->y_per && a->y_per >= 1 && a->vocab == b->vocab;
    for (int d = 0; d < a->x_rank && d < 4; d++) same = same && a->x_dims[d] == b->x_dims[d];
    if (!same || a->x_rank < 0 || a->x_rank > 4 || a->n < 1)
        fz_fail("reader info differs from probe (n %lld vs %lld, rank %d vs %d)", (long long)a->n,
                (long long)b->n, a->x_rank, b->x_rank);
}

static int64_t fz_ex_elems(const data_info *info)
{
    int64_t ex = 1;
    for (int d = 0; d < info->x_rank; d++) ex *= info->x_dims[d];
    return ex;
}

static void fz_check_labels(const data_spec *s, const data_info *info, const int32_t *y)
{
    int64_t classes = info->vocab ? info->vocab : s->n_classes;
    for (int64_t i = 0; i < s->batch * info->y_per; i++) {
        if (!info->has_y && y[i] != 0) fz_fail("label %d without a label file", (int)y[i]);
        if (classes > 0 && (y[i] < 0 || y[i] >= classes))
            fz_fail("label %d outside [0, %lld)", (int)y[i], (long long)classes);
    }
}

/* ---- the exercise ---- */

typedef struct fz_reader {
    const data_spec *s;
    data_reader *r;
    data_info info;
    int64_t ex;         /* floats per example */
    uint64_t per_epoch; /* batches per epoch */
    float *x;           /* one batch, sized exactly, so ASan sees any overrun */
    int32_t *y;
    fz_check_fn check;
    void *ctx;
} fz_reader;

/* Takes one batch into f->x / f->y, by copy or in place (alternately, so
 * both paths run), and checks it and the cursor's step. */
static void fz_pull(fz_reader *f, int zero_copy)
{
    uint64_t e0, p0, e1, p1;
    size_t xbytes = (size_t)(f->s->batch * f->ex) * sizeof(float);
    data_cursor(f->r, &e0, &p0);
    if (zero_copy) {
        data_batch b;
        if (data_acquire(f->r, &b) != 0) fz_fail("data_acquire failed on an open reader");
        memcpy(f->x, b.x, xbytes);
        memcpy(f->y, b.y, (size_t)(f->s->batch * f->info.y_per) * sizeof(int32_t));
        data_release(f->r, &b);
    } else if (data_next(f->r, f->x, f->y) != 0) {
        fz_fail("data_next failed on an open reader");
    }
    data_cursor(f->r, &e1, &p1);
    int wrap = p0 + 1 == f->per_epoch;
    if (e1 != e0 + wrap || p1 != (wrap ? 0 : p0 + 1))
        fz_fail("cursor moved from (%llu, %llu) to (%llu, %llu), %llu batches per epoch",
                (unsigned long long)e0, (unsigned long long)p0, (unsigned long long)e1,
                (unsigned long long)p1, (unsigned long long)f->per_epoch);
    fz_check_labels(f->s, &f->info, f->y);
    if (!f->s->shuffle && f->check)
        f->check(f->ctx, (int64_t)p0 * f->s->batch, f->s->batch, f->x, f->y);
}

/* Seeks to (epoch, pos) and checks the answer and the cursor: one past the
 * end of an epoch is the next epoch's start, beyond that is refused. */
static int fz_seek_to(fz_reader *f, uint64_t epoch, uint64_t pos)
{
    uint64_t e, p;
    int rc = data_seek(f->r, epoch, pos);
    if ((rc != 0) != (pos > f->per_epoch))
        fz_fail("data_seek to pos %llu returned %d", (unsigned long long)pos, rc);
    if (rc != 0) return rc;
    data_cursor(f->r, &e, &p);
    int wrap = pos == f->per_epoch;
    if (e != epoch + wrap || p != (wrap ? 0 : pos))
        fz_fail("data_seek: cursor is (%llu, %llu)", (unsigned long long)e, (unsigned long long)p);
    return 0;
}

/* Seeking to the same cursor twice must give the same batch. */
static void fz_seek(fz_reader *f, const fz_plan *plan)
{
    uint64_t epoch = (uint64_t)plan->epoch, pos = (uint64_t)plan->seek % (f->per_epoch + 2);
    if (fz_seek_to(f, epoch, pos) != 0) return;
    size_t xbytes = (size_t)(f->s->batch * f->ex) * sizeof(float);
    size_t ybytes = (size_t)(f->s->batch * f->info.y_per) * sizeof(int32_t);
    float *x0 = malloc(xbytes ? xbytes : 1);
    int32_t *y0 = malloc(ybytes);
    fz_pull(f, 0);
    memcpy(x0, f->x, xbytes);
    memcpy(y0, f->y, ybytes);
    fz_seek_to(f, epoch, pos);
    fz_pull(f, 1);
    if (memcmp(x0, f->x, xbytes) != 0 || memcmp(y0, f->y, ybytes) != 0)
        fz_fail("the same cursor gave two different batches");
    free(x0);
    free(y0);
}

static void fz_use(fz_reader *f, const fz_plan *plan)
{
    f->ex = fz_ex_elems(&f->info);
    f->per_epoch = (uint64_t)(f->info.n / f->s->batch);
    size_t xbytes = (size_t)(f->s->batch * f->ex) * sizeof(float);
    f->x = malloc(xbytes ? xbytes : 1);
    f->y = malloc((size_t)(f->s->batch * f->info.y_per) * sizeof(int32_t));
    if (!f->x || !f->y) fz_fail("out of memory for a batch of %lld", (long long)f->s->batch);
    for (int k = 0; k < plan->pulls; k++) fz_pull(f, k & 1);
    fz_seek(f, plan);
    free(f->x);
    free(f->y);
}

void fz_exercise(const data_spec *s, const fz_plan *plan, fz_check_fn check, void *ctx)
{
    char perr[512] = "", oerr[512] = "";
    data_info pinfo;
    int prc = data_probe(s, &pinfo, perr, sizeof perr);
    if (prc != 0) fz_check_err(s, "data_probe", perr);
    fz_reader f = {.s = s, .check = check, .ctx = ctx};
    f.r = data_open(s, oerr, sizeof oerr);
    if (!f.r) {
        fz_check_err(s, "data_open", oerr);
        return;
    }
    if (prc != 0) fz_fail("data_open accepted what data_probe refused: %s", perr);
    data_reader_info(f.r, &f.info);
    fz_check_info(&f.info, &pinfo);
    fz_use(&f, plan);
    data_close(f.r);
}
