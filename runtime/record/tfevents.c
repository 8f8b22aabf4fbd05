/* tfevents.c - TensorBoard event files: TFRecord framing, scalar events
 * encoded with protobuf-c, buffered whole-record writes (see tfevents.h). */
#include "tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fatal.h"
#include "tensorboard.pb-c.h"

struct tfev_writer {
    int fd;
    char *path;
    uint8_t *buf; /* whole records not yet written */
    size_t n, cap;
    double last_flush; /* monotonic seconds */
};

static int tfev_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int tfev_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static double tfev_clock(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

uint32_t tfev_crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return ~c;
}

uint32_t tfev_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends ev to the buffer as one framed record. */
static void tfev_append(tfev_writer *w, const Tb__Event *ev)
{
    size_t n = tb__event__get_packed_size(ev), need = w->n + TFEV_HEADER + n + TFEV_FOOTER;
    if (need > w->cap) {
        w->cap = need > 2 * w->cap ? need : 2 * w->cap;
        w->buf = base_xrealloc(w->buf, w->cap);
    }
    uint8_t *r = w->buf + w->n;
    put_le(r, n, 8);
    put_le(r + 8, tfev_mask(tfev_crc32c(r, 8)), 4);
    tb__event__pack(ev, r + TFEV_HEADER);
    put_le(r + TFEV_HEADER + n, tfev_mask(tfev_crc32c(r + TFEV_HEADER, n)), 4);
    w->n = need;
}

int tfev_flush(tfev_writer *w, char *err, size_t errlen)
{
    size_t done = 0;
    while (done < w->n) {
        ssize_t k = write(w->fd, w->buf + done, w->n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return tfev_err(err, errlen, "%s: cannot write: %s", w->path, strerror(errno));
        done += (size_t)k;
    }
    w->n = 0;
    w->last_flush = tfev_clock(CLOCK_MONOTONIC);
    return 0;
}

/* One folder of make_dirs: made, or there already.  The last one must be a
 * folder (or a link to one): a file of that name is an error here, where
 * the mkdir of a folder below it reports one higher up. */
static int make_dir(const char *p, int last, char *err, size_t errlen)
{
    struct stat sb;
    if (mkdir(p, 0777) == 0 || (errno == EEXIST && !last)) return 0;
    if (errno != EEXIST)
        return tfev_err(err, errlen, "%s: cannot make the folder: %s", p, strerror(errno));
    if (stat(p, &sb) != 0)
        return tfev_err(err, errlen, "%s: cannot use the folder: %s", p, strerror(errno));
    return S_ISDIR(sb.st_mode) ? 0 : tfev_err(err, errlen, "%s: not a directory", p);
}

/* mkdir -p: every missing folder of path. */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char *p = base_xstrdup(path);
    int rc = 0;
    for (char *s = p;; s++) {
        char c = *s;
        if ((c != '/' || s == p) && c != 0) continue; /* a leading '/' is the root */
        *s = 0;
        rc = make_dir(p, c == 0, err, errlen);
        *s = c;
        if (rc || !c) break;
    }
    free(p);
    return rc;
}

static char *event_file_name(const char *dir)
{
    static atomic_int seq;
    char host[256] = "localhost", *path;
    gethostname(host, sizeof host - 1);
    if (asprintf(&path, "%s/events.out.tfevents.%lld.%s.%ld.%d", dir, (long long)time(NULL), host,
                 (long)getpid(), atomic_fetch_add(&seq, 1)) < 0)
        fatal("out of memory naming an event file in %s", dir);
    return path;
}

tfev_writer *tfev_open(const char *dir, char *err, size_t errlen)
{
    if (make_dirs(dir, err, errlen) < 0) return NULL;
    tfev_writer *w = base_xcalloc(1, sizeof *w);
    w->path = event_file_name(dir);
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        tfev_err(err, errlen, "%s: cannot create: %s", w->path, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    Tb__Event ev = TB__EVENT__INIT;
    ev.wall_time = tfev_clock(CLOCK_REALTIME);
    ev.what_case = TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    tfev_append(w, &ev);
    if (tfev_flush(w, err, errlen) < 0) {
        tfev_close(w, NULL, 0);
        return NULL;
    }
    return w;
}

const char *tfev_path(const tfev_writer *w)
{
    return w->path;
}

int tfev_scalar(tfev_writer *w, const char *tag, int64_t step, float value, char *err,
                size_t errlen)
{
    Tb__Summary__Value v = TB__SUMMARY__VALUE__INIT, *vp = &v;
    v.tag = (char *)tag;
    v.value_case = TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = value;
    Tb__Summary sum = TB__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = &vp;
    Tb__Event ev = TB__EVENT__INIT;
    ev.wall_time = tfev_clock(CLOCK_REALTIME);
    ev.step = step;
    ev.what_case = TB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    tfev_append(w, &ev);
    if (w->n < TFEV_FLUSH_BYTES && tfev_clock(CLOCK_MONOTONIC) - w->last_flush < TFEV_FLUSH_SECS)
        return 0;
    return tfev_flush(w, err, errlen);
}

int tfev_sync(tfev_writer *w, char *err, size_t errlen)
{
    if (tfev_flush(w, err, errlen) < 0) return -1;
    if (fsync(w->fd) == 0) return 0;
    return tfev_err(err, errlen, "%s: cannot write: %s", w->path, strerror(errno));
}

int tfev_close(tfev_writer *w, char *err, size_t errlen)
{
    if (!w) return 0;
    int rc = tfev_sync(w, err, errlen);
    if (close(w->fd) != 0 && rc == 0)
        rc = tfev_err(err, errlen, "%s: cannot close: %s", w->path, strerror(errno));
    free(w->buf);
    free(w->path);
    free(w);
    return rc;
}
