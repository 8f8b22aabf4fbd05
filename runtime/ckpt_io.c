/* ckpt_io.c - whole files on disk: read, replace atomically,
 * sweep the temporaries of killed writers (see ckpt_io.h). */
#include "ckpt_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

/* mkstemp replaces XXXXXX with six characters of [A-Za-z0-9]. */
#define CKIO_RAND_LEN 6

gr_code ckio_read(const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return rt_fail(st, GR_ERR_IO, "%s: cannot open checkpoint: %s\n", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rt_fail(st, GR_ERR_IO, "%s: not a regular file\n", path);
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        fclose(f);
        return rt_fail(st, GR_ERR_NOMEM, "%s: no memory to read %zu bytes\n", path, *len);
    }
    size_t got = fread(*buf, 1, *len, f);
    fclose(f);
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
    if (!slash) return xstrdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = memcpy(xmalloc(n + 1), path, n);
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
 * the name ckio_replace gives its temporary; else 0. */
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

/* Removes path's stale temporaries (ckio_replace does this first); returns
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

/* ---- atomic replace ---- */

static int ckio_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Everything the temporary needs before the rename; 0 or an errno. */
static int ckio_fill(int fd, unsigned mode, const uint8_t *head, size_t head_n, const uint8_t *body,
                     size_t body_n)
{
    errno = 0;
    if (fchmod(fd, (mode_t)mode) == 0 && ckio_write_all(fd, head, head_n) == 0 &&
        ckio_write_all(fd, body, body_n) == 0 && fsync(fd) == 0)
        return 0;
    return errno ? errno : EIO;
}

/* Makes the rename durable: the directory entry must reach the disk too. */
static int ckio_fsync_dir(const char *path)
{
    char *copy = xstrdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Creates PATH.tmp.<pid>.XXXXXX, locked until it is closed (see
 * ckio_unlink_unlocked); -1 with errno set on failure. */
static int ckio_create_tmp(const char *path, char **tmp)
{
    size_t n = strlen(path) + 32;
    *tmp = xmalloc(n);
    snprintf(*tmp, n, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkstemp(*tmp);
    if (fd >= 0) flock(fd, LOCK_EX | LOCK_NB); /* a fresh file: no one else has it */
    return fd;
}

gr_code ckio_replace(const char *path, unsigned mode, const uint8_t *head, size_t head_n,
                     const uint8_t *body, size_t body_n, gr_status *st)
{
    ckio_sweep_stale(path); /* first: a full disk may be full of them */
    char *tmp;
    int fd = ckio_create_tmp(path, &tmp);
    int err = fd < 0 ? errno : ckio_fill(fd, mode, head, head_n, body, body_n);
    if (fd < 0) {
        free(tmp);
        return rt_fail(st, GR_ERR_IO, "%s: cannot create a temporary file next to it: %s\n", path,
                       strerror(err));
    }
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
    free(tmp);
    if (err) return rt_fail(st, GR_ERR_IO, "%s: cannot write: %s\n", path, strerror(err));
    if (ckio_fsync_dir(path) != 0)
        return rt_fail(st, GR_ERR_IO, "%s: written, but its folder could not be synced: %s\n", path,
                       strerror(errno));
    return GR_OK;
}
