/* IDX files (the MNIST format), plain or gzipped. zlib's gzread reads both
 * transparently, so the gzip magic is detected for us.  The header says
 * exactly how many bytes of data follow it, and a file must hold exactly
 * those: a plain file is measured at probe, a gzipped one as it is read
 * (no more than the header's count plus one byte is ever decompressed, and
 * that count is at most DATA_BIN_MAX_BYTES, so a gzip bomb costs no more). */
#include "data_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_DIMS     5                  /* n plus at most 4 per-example dims */
#define IDX_FIRST_CHUNK  (INT64_C(1) << 20) /* a body is read in growing chunks from here */

typedef struct idx_header {
    uint32_t magic;
    data_elem elem;
    int ndims;
    int64_t dims[IDX_MAX_DIMS];
    int64_t ex_elems; /* prod(dims[1..]) */
    int64_t bytes;    /* of the data after the header */
    int64_t file;     /* bytes of the file as it is stored (compressed or not) */
} idx_header;

/* data_open_file first: a missing file reports errno, not zlib's guess,
 * and a FIFO or device is refused before zlib reads from it. */
static gzFile idx_open(const char *path, int64_t *size, char *err, size_t errlen)
{
    int fd = data_open_file(path, DATA_BIN_MAX_BYTES, "an IDX file", size, err, errlen);
    if (fd < 0) return NULL;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        data_err(err, errlen, "%s: cannot open: out of memory", path);
        return NULL;
    }
    gzbuffer(gz, 1u << 17);
    return gz;
}

/* Reads up to len bytes; returns the count read, or -1 on a zlib error. */
static int64_t idx_read(gzFile gz, void *buf, int64_t len)
{
    int64_t got = 0;
    while (got < len) {
        int64_t chunk = len - got > (1 << 30) ? (1 << 30) : len - got;
        int r = gzread(gz, (char *)buf + got, (unsigned)chunk);
        if (r < 0) return -1;
        if (r == 0) break;
        got += r;
    }
    return got;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int idx_elem(unsigned type, data_elem *e)
{
    switch (type) {
    case 0x08:
        *e = DATA_ELEM_U8;
        return 1;
    case 0x09:
        *e = DATA_ELEM_I8;
        return 1;
    case 0x0B:
        *e = DATA_ELEM_I16;
        return 1;
    case 0x0C:
        *e = DATA_ELEM_I32;
        return 1;
    case 0x0D:
        *e = DATA_ELEM_F32;
        return 1;
    case 0x0E:
        *e = DATA_ELEM_F64;
        return 1;
    }
    return 0;
}

static int idx_check_magic(const char *path, uint32_t magic, int labels, idx_header *h, char *err,
                           size_t errlen)
{
    int nd = (int)(magic & 0xFF);
    int ok = labels ? magic == IDX_MAGIC_LABELS
                    : (magic >> 16) == 0 && idx_elem((magic >> 8) & 0xFF, &h->elem) && nd >= 2 &&
                          nd <= IDX_MAX_DIMS;
    if (!ok) {
        data_err(err, errlen, "%s: bad magic number 0x%08x, expected 0x%08x (IDX %s)", path,
                 (unsigned)magic, labels ? IDX_MAGIC_LABELS : IDX_MAGIC_IMAGES,
                 labels ? "labels" : "images");
        return -1;
    }
    if (labels) h->elem = DATA_ELEM_U8;
    h->magic = magic;
    h->ndims = nd;
    return 0;
}

static int idx_sizes(const char *path, idx_header *h, char *err, size_t errlen)
{
    int64_t ex = 1, total;
    for (int d = 1; d < h->ndims; d++) {
        /* Empty examples would let a header of a few bytes declare
         * billions of them, each costing a shuffle slot but no data. */
        if (h->dims[d] == 0) {
            data_err(err, errlen, "%s: IDX dimension %d is 0; examples must not be empty", path, d);
            return -1;
        }
        if (!data_mul_ok(ex, h->dims[d], DATA_BIN_MAX_BYTES, &ex)) goto too_big;
    }
    if (!data_mul_ok(ex, h->dims[0], DATA_BIN_MAX_BYTES, &total) ||
        !data_mul_ok(total, (int64_t)data_elem_size(h->elem), DATA_BIN_MAX_BYTES, &total))
        goto too_big;
    h->ex_elems = ex;
    h->bytes = total;
    return 0;
too_big:
    data_err(err, errlen,
             "%s: the IDX header's dimensions make more than %lld bytes of data, the limit", path,
             (long long)DATA_BIN_MAX_BYTES);
    return -1;
}

/* "N bytes (K examples)": what the header declares, for messages. */
static void idx_promise(const idx_header *h, char *buf, size_t n)
{
    snprintf(buf, n, "%lld bytes (%lld examples)", (long long)h->bytes, (long long)h->dims[0]);
}

/* The data's bytes against the header's: a file must hold exactly what its
 * header declares, no fewer and no more examples. */
static int idx_check_length(const char *path, const idx_header *h, int64_t got, char *err,
                            size_t errlen)
{
    char promise[96];
    idx_promise(h, promise, sizeof promise);
    if (got < h->bytes)
        data_err(err, errlen, "%s: truncated: header promises %lld bytes of data, file has %lld",
                 path, (long long)h->bytes, (long long)got);
    else if (got > h->bytes)
        data_err(err, errlen,
                 "%s: the file holds more data than its header declares, %s; the header's "
                 "counts must match the file",
                 path, promise);
    return got == h->bytes ? 0 : -1;
}

/* gzerror's text, without the "<fd:N>: " that gzdopen streams put first. */
static const char *idx_gzmsg(gzFile gz)
{
    int code;
    const char *m = gzerror(gz, &code);
    const char *sep = strncmp(m, "<fd:", 4) == 0 ? strstr(m, ": ") : NULL;
    return sep ? sep + 2 : m;
}

/* A short header read: a zlib or I/O error (got < 0) or a truncated file. */
static void idx_short(gzFile gz, const char *path, int64_t got, const char *what, char *err,
                      size_t errlen)
{
    if (got < 0)
        data_err(err, errlen, "%s: read error: %s", path, idx_gzmsg(gz));
    else
        data_err(err, errlen, "%s: truncated: %s", path, what);
}

static int idx_read_header(gzFile gz, const char *path, int labels, idx_header *h, char *err,
                           size_t errlen)
{
    unsigned char buf[4 * IDX_MAX_DIMS];
    int64_t got = idx_read(gz, buf, 4);
    if (got != 4) {
        idx_short(gz, path, got, "too short for an IDX header", err, errlen);
        return -1;
    }
    if (idx_check_magic(path, be32(buf), labels, h, err, errlen)) return -1;
    got = idx_read(gz, buf, 4 * h->ndims);
    if (got != 4 * h->ndims) {
        idx_short(gz, path, got, "the IDX header ends inside its dimensions", err, errlen);
        return -1;
    }
    for (int d = 0; d < h->ndims; d++) h->dims[d] = be32(buf + 4 * d);
    if (idx_sizes(path, h, err, errlen)) return -1;
    /* a plain file is measured now; a gzipped one as its data is read */
    int64_t after = h->file - 4 - 4 * (int64_t)h->ndims;
    return gzdirect(gz) ? idx_check_length(path, h, after, err, errlen) : 0;
}

/* Opens path, reads its header, and leaves gz positioned at the data. */
static gzFile idx_open_header(const char *path, int labels, idx_header *h, char *err, size_t errlen)
{
    gzFile gz = idx_open(path, &h->file, err, errlen);
    if (gz && idx_read_header(gz, path, labels, h, err, errlen)) {
        gzclose(gz);
        return NULL;
    }
    return gz;
}

static int idx_count_match(const data_spec *s, const idx_header *img, const idx_header *lab,
                           char *err, size_t errlen)
{
    if (img->dims[0] == lab->dims[0]) return 0;
    data_err(err, errlen, "%s: %lld labels, but %s has %lld images", s->path[1],
             (long long)lab->dims[0], s->path[0], (long long)img->dims[0]);
    return -1;
}

static void idx_fill_info(const idx_header *h, int has_y, data_info *info)
{
    memset(info, 0, sizeof *info);
    info->n = h->dims[0];
    info->x_rank = h->ndims - 1;
    for (int d = 1; d < h->ndims; d++) info->x_dims[d - 1] = h->dims[d];
    info->has_y = has_y;
}

int data_idx_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    idx_header img, lab;
    gzFile gz = idx_open_header(s->path[0], 0, &img, err, errlen);
    if (!gz) return -1;
    gzclose(gz);
    if (s->path[1]) {
        gz = idx_open_header(s->path[1], 1, &lab, err, errlen);
        if (!gz) return -1;
        gzclose(gz);
        if (idx_count_match(s, &img, &lab, err, errlen)) return -1;
    }
    idx_fill_info(&img, s->path[1] != NULL, info);
    return 0;
}

/* IDX is big-endian; stored elements are converted to host order once. */
static void idx_to_host(void *data, int64_t count, size_t size)
{
    unsigned char *p = data;
    for (int64_t i = 0; i < count; i++, p += size) {
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
}

static int idx_host_is_little(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* The next buffer size while reading a body of want bytes: doubling from
 * IDX_FIRST_CHUNK, never past want. */
static int64_t idx_grow(int64_t cap, int64_t want)
{
    int64_t next = cap < IDX_FIRST_CHUNK ? IDX_FIRST_CHUNK : cap * 2;
    return next < want ? next : want;
}

enum { IDX_READ_OK, IDX_READ_ERROR, IDX_READ_NOMEM };

/* Reads up to want bytes into a new buffer (*out), growing it as the bytes
 * arrive: the header's promise is not trusted with memory, so a short file
 * that claims terabytes costs no more than its real contents.  *got is the
 * count read.  On failure nothing is left allocated. */
static int idx_read_grow(gzFile gz, int64_t want, unsigned char **out, int64_t *got)
{
    unsigned char *buf = NULL;
    int64_t cap = 0;
    int rc = IDX_READ_NOMEM;
    *got = 0;
    for (;;) {
        int64_t next = idx_grow(cap, want);
        unsigned char *nb = realloc(buf, next ? (size_t)next : 1);
        if (!nb) break;
        buf = nb;
        int64_t r = idx_read(gz, buf + cap, next - cap);
        if (r < 0) {
            rc = IDX_READ_ERROR;
            break;
        }
        *got += r;
        if (*got < next || next == want) {
            *out = buf;
            return IDX_READ_OK;
        }
        cap = next;
    }
    free(buf);
    return rc;
}

/* Reads the data after the header into a new buffer (*out). */
static int idx_read_body(gzFile gz, const char *path, const idx_header *h, void **out, char *err,
                         size_t errlen)
{
    unsigned char *buf = NULL;
    int64_t got = 0;
    int rc = idx_read_grow(gz, h->bytes, &buf, &got);
    if (rc == IDX_READ_NOMEM) {
        data_err(err, errlen, "%s: out of memory for %lld bytes", path, (long long)h->bytes);
        return -1;
    }
    if (rc == IDX_READ_ERROR) {
        data_err(err, errlen, "%s: read error: %s", path, idx_gzmsg(gz));
        return -1;
    }
    unsigned char extra;
    int64_t more = got == h->bytes ? idx_read(gz, &extra, 1) : 0; /* one byte past: too long */
    if (more < 0) {
        data_err(err, errlen, "%s: read error: %s", path, idx_gzmsg(gz));
        free(buf);
        return -1;
    }
    if (idx_check_length(path, h, got + more, err, errlen)) {
        free(buf);
        return -1;
    }
    size_t es = data_elem_size(h->elem);
    if (es > 1 && idx_host_is_little()) idx_to_host(buf, h->bytes / (int64_t)es, es);
    *out = buf;
    return 0;
}

static int idx_load_file(const char *path, int labels, idx_header *h, void **out, char *err,
                         size_t errlen)
{
    gzFile gz = idx_open_header(path, labels, h, err, errlen);
    if (!gz) return -1;
    int rc = idx_read_body(gz, path, h, out, err, errlen);
    gzclose(gz);
    return rc;
}

static int idx_load_labels(const data_spec *s, const idx_header *img, data_set *ds, char *err,
                           size_t errlen)
{
    idx_header lab;
    void *raw = NULL;
    if (idx_load_file(s->path[1], 1, &lab, &raw, err, errlen)) return -1;
    if (idx_count_match(s, img, &lab, err, errlen)) {
        free(raw);
        return -1;
    }
    ds->y = malloc((size_t)(lab.dims[0] ? lab.dims[0] : 1) * sizeof(int32_t));
    if (!ds->y) {
        free(raw);
        data_err(err, errlen, "%s: out of memory", s->path[1]);
        return -1;
    }
    const uint8_t *u = raw;
    for (int64_t i = 0; i < lab.dims[0]; i++) ds->y[i] = u[i];
    free(raw);
    return 0;
}

int data_idx_load(const data_spec *s, data_set *ds, char *err, size_t errlen)
{
    idx_header img;
    if (idx_load_file(s->path[0], 0, &img, &ds->x, err, errlen)) return -1;
    idx_fill_info(&img, s->path[1] != NULL, &ds->info);
    ds->elem = img.elem;
    ds->ex_elems = img.ex_elems;
    ds->x_path = s->path[0];
    ds->y_path = s->path[1];
    if ((img.elem == DATA_ELEM_F32 || img.elem == DATA_ELEM_F64) &&
        data_check_finite(ds, img.dims[0] * img.ex_elems, s->nonfinite, err, errlen))
        return -1;
    if (s->path[1] && idx_load_labels(s, &img, ds, err, errlen)) return -1;
    return 0;
}
