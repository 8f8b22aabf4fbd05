/* ckpt_io.h - private to runtime/: files on disk, whole (checkpoints, and
 * the .graph files `graphrun fmt -w` rewrites), and the one way the
 * library writes a file (gr_output, include/graphrun.h).
 *
 * An output path is resolved before anything is written: a path that
 * exists must be a regular file that may be written, or a symbolic link
 * whose final target is one (the link stays; the target is replaced); a
 * dangling link, a FIFO, a device, a directory or a socket is an error, and
 * nothing is opened before that is known, so a FIFO never blocks.  The new
 * contents go to TARGET.tmp.<pid>.XXXXXX (O_EXCL, same folder), which is
 * fsynced, renamed over TARGET, and the folder fsynced, so TARGET always
 * holds either the old file or the new one, complete, even if the process
 * is killed.  Any error on the way (a short write, ENOSPC, EIO, fsync,
 * close, rename) fails the commit with the path and strerror, removes the
 * temporary and leaves TARGET as it was.
 *
 * A writer killed mid-write leaves its temporary behind.  Before writing,
 * gr_output_open removes the stale temporaries of TARGET: names of exactly
 * that pattern whose <pid> is not a running process (kill(pid, 0) fails
 * with ESRCH), which no process holds flock()ed, and which are regular
 * files.  Anything else is kept: other files, other paths' temporaries, and
 * the temporaries of live writers (this process included).  See
 * docs/checkpoints.md, "Stale temporaries". */
#ifndef GR_RUNTIME_CKPT_IO_H
#define GR_RUNTIME_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "include/graphrun.h"

/* Reads the regular file at path into a malloc'd buffer (*buf, *len).
 * GR_ERR_IO or GR_ERR_NOMEM with a message naming the file. */
gr_code ckio_read(const char *path, uint8_t **buf, size_t *len, gr_status *st);

/* Whether path is new, a regular file or a link to one: what an output
 * may replace (above; read-only files pass), checked without opening it. */
gr_code ckio_check_target(const char *path, gr_status *st);

/* Replaces path with head followed by body: gr_output_open, the bytes,
 * gr_output_commit.  On error the file at path is untouched and this
 * call's temporary is removed. */
gr_code ckio_replace(const char *path, const uint8_t *head, size_t head_n, const uint8_t *body,
                     size_t body_n, gr_status *st);

#endif
