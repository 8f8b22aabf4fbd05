/* fatal.h - the one way out for internal bugs and exhausted memory.
 *
 * Bugs assert, errors return: a .graph file, a data file or a caller's
 * argument that is wrong gets an error status, never one of these.  What is
 * left is a broken invariant (GR_ASSERT) or a small internal allocation that
 * failed (x*alloc), where no caller could do better than stop.  Both format
 * a message and call the embedder's abort hook (gr_set_abort_hook in the
 * API, fatal_set_hook here), then abort() if the hook returns.  Big buffers
 * whose size comes from the model (arenas, variables) are not allocated
 * through these: their failure is an error the caller sees. */
#ifndef GR_FATAL_H
#define GR_FATAL_H

#include <stddef.h>

typedef void (*fatal_hook)(const char *msg);
/* NULL restores the default: print "graphrun: internal error: MSG" to
 * stderr. */
void fatal_set_hook(fatal_hook hook);

void fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Checked in every build type: keep them off hot loops. */
#define GR_ASSERT(cond)                                                                            \
    ((cond) ? (void)0 : fatal("%s:%d: assertion failed: %s", __FILE__, __LINE__, #cond))

/* Never return NULL.  xcalloc and xreallocarray check n * size. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);

#endif
