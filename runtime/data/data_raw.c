/* Raw little-endian files (f32 examples, optional i32 labels) and the
 * synthetic Gaussian source. */
#include "data_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The size of a raw file, checked as data_open_file does. */
static int raw_size(const char *path, int64_t *size, char *err, size_t errlen)
{
    int fd = data_open_file(path, DATA_BIN_MAX_BYTES, "a raw file", size, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static void raw_fill_info(const data_spec *s, int64_t n, data_info *info)
{
    memset(info, 0, sizeof *info);
    info->n = n;
    info->x_rank = s->x_rank;
    for (int d = 0; d < s->x_rank; d++) info->x_dims[d] = s->x_dims[d];
    info->has_y = s->path[1] != NULL;
}

static int raw_check_y(const data_spec *s, int64_t n, char *err, size_t errlen)
{
    int64_t ysize;
    if (raw_size(s->path[1], &ysize, err, errlen)) return -1;
    if (ysize != n * 4) {
        data_err(
            err, errlen,
            "%s: size %lld bytes, expected %lld (one i32 label for each of %lld examples in %s)",
            s->path[1], (long long)ysize, (long long)(n * 4), (long long)n, s->path[0]);
        return -1;
    }
    return 0;
}

int data_raw_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    int64_t ex, xsize;
    if (data_spec_dims(s, s->path[0], &ex, err, errlen)) return -1;
    if (raw_size(s->path[0], &xsize, err, errlen)) return -1;
    if (xsize % (ex * 4) != 0) {
        data_err(err, errlen,
                 "%s: size %lld bytes is not a multiple of %lld (one example of %lld f32 values)",
                 s->path[0], (long long)xsize, (long long)(ex * 4), (long long)ex);
        return -1;
    }
    int64_t n = xsize / (ex * 4);
    if (s->path[1] && raw_check_y(s, n, err, errlen)) return -1;
    raw_fill_info(s, n, info);
    return 0;
}

/* Reads the len bytes of path, which must still have exactly that size. */
static int raw_read_all(const char *path, void *buf, int64_t len, char *err, size_t errlen)
{
    int64_t size;
    int fd = data_open_file(path, DATA_BIN_MAX_BYTES, "a raw file", &size, err, errlen);
    if (fd < 0) return -1;
    int rc = size == len ? data_read_exact(fd, path, buf, len, err, errlen) : -1;
    close(fd);
    if (size != len)
        data_err(err, errlen, "%s: the file is %lld bytes now, %lld when it was probed", path,
                 (long long)size, (long long)len);
    return rc;
}

/* The files are little-endian; swap in place on a big-endian host. */
static void raw_le_to_host(void *data, int64_t words)
{
    const uint16_t one = 1;
    if (*(const unsigned char *)&one == 1) return;
    unsigned char *p = data;
    for (int64_t i = 0; i < words; i++, p += 4) {
        unsigned char t0 = p[0], t1 = p[1];
        p[0] = p[3];
        p[1] = p[2];
        p[2] = t1;
        p[3] = t0;
    }
}

int data_raw_load(const data_spec *s, data_set *ds, char *err, size_t errlen)
{
    if (data_raw_probe(s, &ds->info, err, errlen)) return -1;
    int64_t n = ds->info.n;
    ds->elem = DATA_ELEM_F32;
    data_spec_dims(s, s->path[0], &ds->ex_elems, err, errlen);
    ds->x_path = s->path[0];
    ds->y_path = s->path[1];
    ds->x = malloc((size_t)(n * ds->ex_elems) * 4 + 1); /* +1: never malloc(0) */
    ds->y = s->path[1] ? malloc(n ? (size_t)n * 4 : 1) : NULL;
    if (!ds->x || (s->path[1] && !ds->y)) {
        data_err(err, errlen, "%s: out of memory", s->path[0]);
        return -1;
    }
    if (raw_read_all(s->path[0], ds->x, n * ds->ex_elems * 4, err, errlen)) return -1;
    raw_le_to_host(ds->x, n * ds->ex_elems);
    if (data_check_finite(ds, n * ds->ex_elems, s->nonfinite, err, errlen)) return -1;
    if (ds->y) {
        if (raw_read_all(s->path[1], ds->y, n * 4, err, errlen)) return -1;
        raw_le_to_host(ds->y, n);
    }
    return 0;
}

/* ---- gaussian ---- */

int data_gauss_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    int64_t ex;
    if (data_spec_dims(s, "gaussian", &ex, err, errlen)) return -1;
    if (s->n < 1) {
        data_err(err, errlen, "gaussian: n = %lld, it must be >= 1", (long long)s->n);
        return -1;
    }
    memset(info, 0, sizeof *info);
    info->n = s->n;
    info->x_rank = s->x_rank;
    for (int d = 0; d < s->x_rank; d++) info->x_dims[d] = s->x_dims[d];
    return 0;
}

/* Nothing is stored: example i is regenerated from (seed, i) on demand, so
 * a large synthetic set costs no memory and is the same in every epoch. */
int data_gauss_load(const data_spec *s, data_set *ds, char *err, size_t errlen)
{
    if (data_gauss_probe(s, &ds->info, err, errlen)) return -1;
    ds->elem = DATA_ELEM_GAUSS;
    data_spec_dims(s, "gaussian", &ds->ex_elems, err, errlen);
    ds->seed = s->seed;
    ds->x_path = "gaussian";
    return 0;
}
