/* The in-memory data set shared by all formats: helpers, element
 * conversion and the PRNG used for shuffling and synthetic data. */
#include "data_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void data_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- files ---- */

int data_open_file(const char *path, int64_t limit, const char *what, int64_t *size, char *err,
                   size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        data_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        data_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((int64_t)st.st_size > limit) {
        data_err(err, errlen, "%s: the file is %lld bytes, above the limit of %lld bytes for %s",
                 path, (long long)st.st_size, (long long)limit, what);
        close(fd);
        return -1;
    }
    *size = (int64_t)st.st_size;
    return fd;
}

int data_read_exact(int fd, const char *path, void *buf, int64_t len, char *err, size_t errlen)
{
    int64_t got = 0;
    while (got < len) {
        size_t chunk = len - got > (INT64_C(1) << 30) ? (size_t)1 << 30 : (size_t)(len - got);
        ssize_t r = read(fd, (char *)buf + got, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            data_err(err, errlen, "%s: read error: %s", path, strerror(errno));
            return -1;
        }
        if (r == 0) break;
        got += r;
    }
    if (got == len) return 0;
    data_err(err, errlen, "%s: short read (%lld of %lld bytes); did the file change?", path,
             (long long)got, (long long)len);
    return -1;
}

int data_read_whole(const char *path, int64_t limit, const char *what, char **buf, int64_t *len,
                    char *err, size_t errlen)
{
    int fd = data_open_file(path, limit, what, len, err, errlen);
    if (fd < 0) return -1;
    *buf = malloc((size_t)*len + 1);
    int rc = *buf ? data_read_exact(fd, path, *buf, *len, err, errlen) : -1;
    close(fd);
    if (!*buf) data_err(err, errlen, "%s: out of memory for %lld bytes", path, (long long)*len);
    if (rc == 0) {
        (*buf)[*len] = '\0';
        return 0;
    }
    free(*buf);
    *buf = NULL;
    return -1;
}

int data_check_finite(const data_set *ds, int64_t count, int allow, char *err, size_t errlen)
{
    for (int64_t k = 0; k < count; k++) {
        double v =
            ds->elem == DATA_ELEM_F64 ? ((const double *)ds->x)[k] : ((const float *)ds->x)[k];
        if (isfinite((float)v) || (allow && !isfinite(v))) continue;
        if (isfinite(v))
            data_err(err, errlen, "%s: value %lld (example %lld) is %g, beyond the range of f32",
                     ds->x_path, (long long)k, (long long)(k / ds->ex_elems), v);
        else
            data_err(err, errlen,
                     "%s: value %lld (example %lld) is %s, not a finite number; nonfinite=true "
                     "reads nan and inf as they are",
                     ds->x_path, (long long)k, (long long)(k / ds->ex_elems),
                     isnan(v) ? "nan"
                     : v < 0  ? "-inf"
                              : "inf");
        return -1;
    }
    return 0;
}

size_t data_elem_size(data_elem e)
{
    switch (e) {
    case DATA_ELEM_U8:
    case DATA_ELEM_I8:
        return 1;
    case DATA_ELEM_I16:
        return 2;
    case DATA_ELEM_I32:
    case DATA_ELEM_F32:
        return 4;
    case DATA_ELEM_F64:
        return 8;
    case DATA_ELEM_GAUSS:
        return 0;
    case DATA_ELEM_TEXT:
        return 4;
    }
    return 0;
}

int data_mul_ok(int64_t a, int64_t b, int64_t limit, int64_t *out)
{
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > limit / a) return 0;
    *out = a * b;
    return 1;
}

int data_spec_dims(const data_spec *s, const char *what, int64_t *prod, char *err, size_t errlen)
{
    if (s->x_rank < 0 || s->x_rank > 4) {
        data_err(err, errlen, "%s: example rank %d is not in 0..4", what, s->x_rank);
        return -1;
    }
    int64_t p = 1;
    for (int d = 0; d < s->x_rank; d++) {
        if (s->x_dims[d] < 1 || !data_mul_ok(p, s->x_dims[d], INT64_C(1) << 40, &p)) {
            data_err(err, errlen, "%s: example dimension %d is %lld; it must be >= 1 (and small)",
                     what, d, (long long)s->x_dims[d]);
            return -1;
        }
    }
    *prod = p;
    return 0;
}

/* One loop per stored type keeps the per-element switch out of the hot path;
 * a scale is applied as the mul it replaces would (f32 times f32). */
#define DATA_CONVERT(T)                                                                            \
    do {                                                                                           \
        const T *src = (const T *)ds->x + off;                                                     \
        float c = ds->scale;                                                                       \
        if (c)                                                                                     \
            for (int64_t k = 0; k < m; k++) out[k] = (float)src[k] * c;                            \
        else                                                                                       \
            for (int64_t k = 0; k < m; k++) out[k] = (float)src[k];                                \
    } while (0)

int64_t data_text_at(const data_set *ds, int64_t i)
{
    if (!ds->streams) return i * ds->stride;
    return i % ds->streams * ds->stream_len + i / ds->streams * ds->ex_elems;
}

void data_set_prefetch(const data_set *ds, int64_t i)
{
    if (ds->elem == DATA_ELEM_GAUSS) return;
    size_t bytes = (size_t)ds->ex_elems * data_elem_size(ds->elem);
    const char *p = ds->elem == DATA_ELEM_TEXT
                        ? (const char *)ds->x + (size_t)data_text_at(ds, i) * 4
                        : (const char *)ds->x + (size_t)i * bytes;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
}

void data_set_example(const data_set *ds, int64_t i, float *out)
{
    int64_t m = ds->ex_elems, off = i * m;
    switch (ds->elem) {
    case DATA_ELEM_U8:
        DATA_CONVERT(uint8_t);
        break;
    case DATA_ELEM_I8:
        DATA_CONVERT(int8_t);
        break;
    case DATA_ELEM_I16:
        DATA_CONVERT(int16_t);
        break;
    case DATA_ELEM_I32:
        DATA_CONVERT(int32_t);
        break;
    case DATA_ELEM_F32:
        if (ds->scale)
            DATA_CONVERT(float);
        else
            memcpy(out, (const float *)ds->x + off, (size_t)m * sizeof(float));
        break;
    case DATA_ELEM_F64:
        DATA_CONVERT(double);
        break;
    case DATA_ELEM_GAUSS: {
        data_rng g;
        data_rng_seed(&g, data_mix(ds->seed, (uint64_t)i));
        data_rng_normal(&g, out, m);
        for (int64_t k = 0; ds->scale && k < m; k++) out[k] *= ds->scale;
        break;
    }
    case DATA_ELEM_TEXT:
        memcpy(out, (const int32_t *)ds->x + data_text_at(ds, i), (size_t)m * sizeof(int32_t));
        break;
    }
}

void data_set_labels(const data_set *ds, int64_t i, int32_t *y)
{
    if (ds->elem == DATA_ELEM_TEXT) /* the window's next characters */
        memcpy(y, (const int32_t *)ds->x + data_text_at(ds, i) + 1, (size_t)ds->info.y_per * 4);
    else
        y[0] = ds->y ? ds->y[i] : 0;
}

void data_set_free(data_set *ds)
{
    free(ds->x);
    free(ds->y);
    ds->x = NULL;
    ds->y = NULL;
}

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t data_mix(uint64_t a, uint64_t b)
{
    uint64_t st = a;
    uint64_t h = splitmix64(&st);
    st = h ^ b;
    return splitmix64(&st);
}

void data_rng_seed(data_rng *g, uint64_t seed)
{
    uint64_t st = seed;
    for (int k = 0; k < 4; k++) g->s[k] = splitmix64(&st);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t data_rng_next(data_rng *g)
{
    uint64_t *s = g->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t data_rng_below(data_rng *g, uint64_t bound)
{
    /* Reject the top sliver that would make some residues more likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t v;
    do v = data_rng_next(g);
    while (v >= limit);
    return v % bound;
}

/* (0, 1]: never 0, so log() below stays finite. */
static double rng_unit(data_rng *g)
{
    return ((data_rng_next(g) >> 11) + 1) * 0x1.0p-53;
}

void data_rng_normal(data_rng *g, float *out, int64_t count)
{
    const double two_pi = 6.283185307179586476925;
    for (int64_t k = 0; k < count; k += 2) {
        double r = sqrt(-2.0 * log(rng_unit(g)));
        double a = two_pi * rng_unit(g);
        out[k] = (float)(r * cos(a));
        if (k + 1 < count) out[k + 1] = (float)(r * sin(a));
    }
}
