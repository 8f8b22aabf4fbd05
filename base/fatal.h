/* fatal.h - the one way out for internal bugs and exhausted memory.
 *
 * Bugs assert, errors return: a .graph file, a data file or a caller's
 * argument that is wrong gets an error status, never one of these.  What is
 * left is a broken invariant (GR_ASSERT) or a small internal allocation that
 * failed (base_x*alloc), where no caller could do better than stop.  Both format
 * a message and call the embedder's abort hook (gr_set_abort_hook in the
 * API, fatal_set_hook here), then abort() if the hook returns.  Big buffers
 * whose size comes from the model (arenas, variables) are not allocated
 * through these: their failure is an error the caller sees. */
#ifndef GR_FATAL_H
#define GR_FATAL_H

#include <setjmp.h>
#include <stddef.h>

typedef void (*fatal_hook)(const char *msg);
/* NULL restores the default: print "graphrun: internal error: MSG" to
 * stderr. */
void fatal_set_hook(fatal_hook hook);

void fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Checked in every build type: keep them off hot loops. */
#define GR_ASSERT(cond)                                                                            \
    ((cond) ? (void)0 : fatal("%s:%d: assertion failed: %s", __FILE__, __LINE__, #cond))

/* Out of memory, recoverably.  While a thread has a catch point (set by
 * fatal_catch_push(&jb) after setjmp(jb) returned 0, ended by
 * fatal_catch_pop with what push returned), a failed base_x*alloc on that
 * thread longjmps to it instead of calling the hook.  Set one only around
 * work that holds no lock and starts no thread, whose partial results can
 * be dropped (compiling, planning, formatting): what it had allocated is
 * lost, not freed.  runtime/status.c: rt_catch_oom. */
jmp_buf *fatal_catch_push(jmp_buf *jb);
void fatal_catch_pop(jmp_buf *prev);
/* Tests: the n-th base_x*alloc from now on this thread fails (n >= 1), as if
 * memory had run out; 0 turns it off.  Returns how many base_x*alloc calls were
 * made on this thread since the last call. */
long fatal_fail_alloc_after(long n);

/* Never return NULL.  base_xcalloc and base_xreallocarray check n * size. */
void *base_xmalloc(size_t n);
void *base_xcalloc(size_t n, size_t size);
void *base_xrealloc(void *p, size_t n);
void *base_xreallocarray(void *p, size_t n, size_t size);
char *base_xstrdup(const char *s);

#endif
