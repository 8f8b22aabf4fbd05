/* ckpt_io.c - files on disk: whole reads, and every file the library
 * writes (gr_output: a temporary next to the resolved target, renamed over
 * it; ckio_replace is its whole-buffer case), with the sweep of killed
 * writers' temporaries (see ckpt_io.h). */
#include "ckpt_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* mkstemp replaces XXXXXX with six characters of [A-Za-z0-9]. */
#define CKIO_RAND_LEN 6

/* Every byte of the n at fd into buf; how many were read. */
static size_t ckio_read_all(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

gr_code ckio_read(const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block the open */
    if (fd < 0)
        return rt_fail(st, GR_ERR_IO, "%s: cannot open checkpoint: %s\n", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rt_fail(st, GR_ERR_IO, "%s: not a regular file\n", path);
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        close(fd);
        return rt_fail(st, GR_ERR_NOMEM, "%s: no memory to read %zu bytes\n", path, *len);
    }
    size_t got = ckio_read_all(fd, *buf, *len);
    close(fd);
    if (got != *len) {
        free(*buf);
        *buf = NULL;
        return rt_fail(st, GR_ERR_IO, "%s: read %zu of %zu bytes\n", path, got, *len);
    }
    return GR_OK;
}

/* ---- stale temporaries ---- */

/* The folder to scan and the name prefix, split where the temporary's name
 * is made (PATH + ".tmp..."): "ck" -> ".", "ck"; "/d/ck" -> "/d", "ck". */
static char *ckio_split(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return base_xstrdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = memcpy(base_xmalloc(n + 1), path, n);
    dir[n] = 0;
    return dir;
}

static int ckio_is_rand(const char *s)
{
    for (int i = 0; i < CKIO_RAND_LEN; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return s[CKIO_RAND_LEN] == 0;
}

/* A decimal pid without sign or leading zero, as "%ld" prints it; 0 when
 * there is none.  *end is the first character after the digits. */
static pid_t ckio_parse_pid(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9' && v <= INT_MAX / 10) v = v * 10 + (*p++ - '0');
    *end = p;
    return p == s || *s == '0' || v > INT_MAX ? 0 : (pid_t)v;
}

/* The writer's pid if name is exactly BASE.tmp.<pid>.<6 of [A-Za-z0-9]>,
 * the name gr_output_open gives its temporary; else 0. */
static pid_t ckio_tmp_pid(const char *base, const char *name)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0) return 0;
    const char *end;
    pid_t pid = ckio_parse_pid(name + n + 5, &end);
    return pid > 0 && *end == '.' && ckio_is_rand(end + 1) ? pid : 0;
}

/* kill(pid, 0) fails with ESRCH only when no such process exists; EPERM
 * means it runs as another user.  This process may be saving the same path
 * on another thread, so its own pid always counts as running. */
static int ckio_pid_gone(pid_t pid)
{
    return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

/* Unlinks a regular file nobody holds a flock on.  The lock is the second
 * witness: a writer in another pid namespace (a container sharing the
 * folder) has a pid that looks dead from here, but it holds its lock. */
static int ckio_unlink_unlocked(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat sb;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
             unlinkat(dfd, name, 0) == 0;
    close(fd);
    return ok;
}

/* Removes path's stale temporaries (gr_output_open does this first); returns
 * how many.  Best effort: errors only mean a file is kept. */
static int ckio_sweep_stale(const char *path)
{
    const char *base;
    char *dir = ckio_split(path, &base);
    DIR *d = *base ? opendir(dir) : NULL;
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        pid_t pid = ckio_tmp_pid(base, e->d_name);
        if (pid > 0 && ckio_pid_gone(pid)) n += ckio_unlink_unlocked(dirfd(d), e->d_name);
    }
    if (d) closedir(d);
    free(dir);
    return n;
}

/* ---- the target ---- */

static const char *ckio_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "a special file";
}

/* An existing target must be a regular file... */
static gr_code ckio_check_kind(const char *path, const struct stat *sb, gr_status *st)
{
    if (S_ISREG(sb->st_mode)) return GR_OK;
    return rt_fail(st, GR_ERR_IO, "%s: not a regular file (%s); not replaced\n", path,
                   ckio_kind(sb->st_mode));
}

/* ...that someone may write. */
static gr_code ckio_check_writable(const char *path, const char *target, const struct stat *sb,
                                   gr_status *st)
{
    if (!sb->st_mode || ((sb->st_mode & 0222) && access(target, W_OK) == 0)) return GR_OK;
    return rt_fail(st, GR_ERR_IO, "%s: the file is read-only; not rewritten\n", path);
}

/* A symbolic link's final target, which must exist. */
static gr_code ckio_follow(const char *path, char **target, struct stat *sb, gr_status *st)
{
    *target = realpath(path, NULL);
    if (!*target && errno == ENOENT)
        return rt_fail(st, GR_ERR_IO, "%s: a symbolic link to nothing (dangling); not followed\n",
                       path);
    if (!*target || stat(*target, sb) != 0)
        return rt_fail(st, GR_ERR_IO, "%s: cannot follow the symbolic link: %s\n", path,
                       strerror(errno));
    return GR_OK;
}

/* The file a write to path replaces, malloc'd into *target: path itself,
 * or where its symbolic link leads; sb->st_mode is 0 when it does not
 * exist yet.  Nothing is opened, so a FIFO never blocks. */
static gr_code ckio_resolve(const char *path, char **target, struct stat *sb, gr_status *st)
{
    *target = NULL;
    memset(sb, 0, sizeof *sb);
    gr_code c = GR_OK;
    if (lstat(path, sb) != 0) {
        memset(sb, 0, sizeof *sb);
        if (errno != ENOENT)
            return rt_fail(st, GR_ERR_IO, "%s: cannot write there: %s\n", path, strerror(errno));
        *target = base_xstrdup(path);
        return GR_OK;
    }
    if (S_ISLNK(sb->st_mode))
        c = ckio_follow(path, target, sb, st);
    else
        *target = base_xstrdup(path);
    if (c == GR_OK) c = ckio_check_kind(path, sb, st);
    if (c != GR_OK) {
        free(*target);
        *target = NULL;
    }
    return c;
}

gr_code ckio_check_target(const char *path, gr_status *st)
{
    char *target;
    struct stat sb;
    gr_code c = ckio_resolve(path, &target, &sb, st);
    free(target);
    return c;
}

/* ---- gr_output ---- */

struct gr_output {
    char *path;   /* as the caller gave it: messages name it */
    char *target; /* what the rename replaces: path, or where its link leads */
    char *tmp;    /* target.tmp.<pid>.XXXXXX */
    int fd;       /* the temporary, or -1 */
    FILE *f;      /* writes to fd through ckio_cookie_write */
    int err;      /* the first write error (an errno); 0 while there is none */
};

/* 0, or the errno of the write that failed. */
static int ckio_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* stdio's writes: the first error is kept, with its errno, for the
 * message; every later write fails too. */
static ssize_t ckio_cookie_write(void *cookie, const char *buf, size_t n)
{
    gr_output *o = cookie;
    if (!o->err) o->err = ckio_write_all(o->fd, buf, n);
    return o->err ? 0 : (ssize_t)n;
}

/* Six characters of [A-Za-z0-9] into s: the tail of a temporary's name.
 * They need not be secret: O_EXCL makes each name this writer's own. */
static void ckio_rand_name(char *s)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_ullong counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t x = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^
                 (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    for (int i = 0; i < CKIO_RAND_LEN; i++, x /= 62) s[i] = alnum[x % 62];
    s[CKIO_RAND_LEN] = 0;
}

/* Creates target.tmp.<pid>.XXXXXX with mode (less the umask), locked until
 * it is closed (see ckio_unlink_unlocked); -1 with errno set on failure. */
static int ckio_create_tmp(const char *target, mode_t mode, char **tmp)
{
    size_t n = strlen(target) + 40;
    *tmp = base_xmalloc(n);
    int k = snprintf(*tmp, n, "%s.tmp.%ld.", target, (long)getpid()), fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        ckio_rand_name(*tmp + k);
        fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0) flock(fd, LOCK_EX | LOCK_NB); /* a fresh file: no one else has it */
    return fd;
}

static void ckio_output_free(gr_output *o)
{
    if (!o->err) o->err = ECANCELED; /* a discarded buffer is not written out */
    if (o->f) fclose(o->f);
    if (o->fd >= 0) {
        close(o->fd);
        unlink(o->tmp);
    }
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o);
}

/* The temporary and its stream; 0 or an errno.  A new file gets 0666 less
 * the umask, as fopen gives; a replaced one keeps its permission bits. */
static int ckio_output_start(gr_output *o, const struct stat *old)
{
    static const cookie_io_functions_t io = {.write = ckio_cookie_write};
    o->fd = ckio_create_tmp(o->target, old->st_mode ? 0600 : 0666, &o->tmp);
    if (o->fd < 0) return errno;
    if (old->st_mode && fchmod(o->fd, old->st_mode & 07777) != 0) return errno;
    o->f = fopencookie(o, "w", io);
    return o->f ? 0 : ENOMEM;
}

gr_code gr_output_open(const char *path, gr_output **out, gr_status *st)
{
    if (!out) return rt_null(st, "gr_output_open", "out");
    *out = NULL;
    if (!path) return rt_null(st, "gr_output_open", "path");
    if (!*path) return rt_fail(st, GR_ERR_ARG, "gr_output_open: path is empty\n");
    struct stat old;
    char *target;
    gr_code c = ckio_resolve(path, &target, &old, st);
    if (c == GR_OK) c = ckio_check_writable(path, target, &old, st);
    if (c != GR_OK) {
        free(target);
        return c;
    }
    ckio_sweep_stale(target); /* first: a full disk may be full of them */
    gr_output *o = base_xcalloc(1, sizeof *o);
    *o = (gr_output){.path = base_xstrdup(path), .target = target, .fd = -1};
    int err = ckio_output_start(o, &old);
    if (err) {
        ckio_output_free(o);
        return rt_fail(st, GR_ERR_IO, "%s: cannot create a temporary file next to it: %s\n", path,
                       strerror(err));
    }
    *out = o;
    rt_ok(st);
    return GR_OK;
}

FILE *gr_output_file(gr_output *o)
{
    return o ? o->f : NULL;
}

/* Pushes stdio's buffer to the file; the first error of any write so far. */
static int ckio_output_push(gr_output *o)
{
    if (fflush(o->f) != 0 && !o->err) o->err = errno ? errno : EIO;
    if (ferror(o->f) && !o->err) o->err = EIO;
    return o->err;
}

gr_code gr_output_flush(gr_output *o, gr_status *st)
{
    if (!o) return rt_null(st, "gr_output_flush", "output");
    if (ckio_output_push(o))
        return rt_fail(st, GR_ERR_IO, "%s: cannot write: %s\n", o->path, strerror(o->err));
    rt_ok(st);
    return GR_OK;
}

/* Everything up to and including the rename; 0 or an errno. */
static int ckio_output_finish(gr_output *o)
{
    int err = ckio_output_push(o);
    if (!err && fsync(o->fd) != 0) err = errno;
    fclose(o->f);
    o->f = NULL;
    if (close(o->fd) != 0 && !err) err = errno;
    o->fd = -1;
    if (!err && rename(o->tmp, o->target) != 0) err = errno;
    if (err) unlink(o->tmp);
    return err;
}

/* Makes the rename durable: the directory entry must reach the disk too. */
static int ckio_fsync_dir(const char *path)
{
    char *copy = base_xstrdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

gr_code gr_output_commit(gr_output *o, gr_status *st)
{
    if (!o) return rt_null(st, "gr_output_commit", "output");
    int err = ckio_output_finish(o);
    gr_code c = GR_OK;
    if (err)
        c = rt_fail(st, GR_ERR_IO, "%s: cannot write: %s\n", o->path, strerror(err));
    else if (ckio_fsync_dir(o->target) != 0)
        c = rt_fail(st, GR_ERR_IO, "%s: written, but its folder could not be synced: %s\n", o->path,
                    strerror(errno));
    else
        rt_ok(st);
    ckio_output_free(o);
    return c;
}

void gr_output_discard(gr_output *o)
{
    if (o) ckio_output_free(o);
}

gr_code ckio_replace(const char *path, const uint8_t *head, size_t head_n, const uint8_t *body,
                     size_t body_n, gr_status *st)
{
    gr_output *o;
    gr_code c = gr_output_open(path, &o, st);
    if (c != GR_OK) return c;
    if (head_n) fwrite(head, 1, head_n, o->f); /* an error stays in o: the commit reports it */
    if (body_n) fwrite(body, 1, body_n, o->f);
    return gr_output_commit(o, st);
}
