/* ckpt_io.h - private to runtime/: files on disk, whole (checkpoints, and
 * the .graph files `graphrun fmt -w` rewrites).
 *
 * ckio_replace puts new contents at a path so that the path always holds
 * either the old file or the new one, complete, even if the process is
 * killed: it writes PATH.tmp.<pid>.XXXXXX (mkstemp, same folder), fsyncs
 * it, renames it over PATH and fsyncs the folder.
 *
 * A writer killed mid-write leaves its temporary behind.  Before writing,
 * ckio_replace removes the stale temporaries of PATH: names of exactly that
 * pattern whose <pid> is not a running process (kill(pid, 0) fails with
 * ESRCH), which no process holds flock()ed, and which are regular files.
 * Anything else is kept: other files, other paths' temporaries, and the
 * temporaries of live writers (this process included).  See
 * docs/checkpoints.md, "Stale temporaries". */
#ifndef GR_RUNTIME_CKPT_IO_H
#define GR_RUNTIME_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "../include/graphrun.h"

/* Reads the regular file at path into a malloc'd buffer (*buf, *len).
 * GR_ERR_IO or GR_ERR_NOMEM with a message naming the file. */
gr_code ckio_read(const char *path, uint8_t **buf, size_t *len, gr_status *st);

/* Replaces path with head followed by body (see above), with permission
 * bits mode.  On error the file at path is untouched and this call's
 * temporary is removed. */
gr_code ckio_replace(const char *path, unsigned mode, const uint8_t *head, size_t head_n,
                     const uint8_t *body, size_t body_n, gr_status *st);

#endif
