/* fatal.c - the abort path (see fatal.h). */
#include "fatal.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void default_hook(const char *msg)
{
    fprintf(stderr, "graphrun: internal error: %s\n", msg);
}

static _Atomic(fatal_hook) hook = default_hook;

void fatal_set_hook(fatal_hook h)
{
    atomic_store(&hook, h ? h : default_hook);
}

/* The message is formatted on the stack: memory may be what ran out. */
void fatal(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fatal_hook h = atomic_load(&hook);
    h(msg);
    abort(); /* the hook must not return */
}

static _Thread_local jmp_buf *oom_catch;
static _Thread_local long alloc_calls, fail_at; /* fail_at: the call that fails; 0 none */

jmp_buf *fatal_catch_push(jmp_buf *jb)
{
    jmp_buf *prev = oom_catch;
    oom_catch = jb;
    return prev;
}

void fatal_catch_pop(jmp_buf *prev)
{
    oom_catch = prev;
}

long fatal_fail_alloc_after(long n)
{
    long calls = alloc_calls;
    alloc_calls = 0;
    fail_at = n > 0 ? n : 0;
    return calls;
}

/* Out of memory: the thread's catch point, or the hook. */
static void out_of_memory(size_t n, size_t size)
{
    if (oom_catch) {
        jmp_buf *jb = oom_catch;
        oom_catch = NULL; /* the catcher restores its predecessor */
        longjmp(*jb, 1);
    }
    fatal("out of memory (allocating %zu x %zu bytes)", n, size);
}

/* The test hook's failure, counted per call. */
static int injected(void)
{
    return ++alloc_calls == fail_at;
}

static void *checked(void *p, size_t n)
{
    if (!p) out_of_memory(1, n);
    return p;
}

void *base_xmalloc(size_t n)
{
    if (injected()) out_of_memory(1, n);
    return checked(malloc(n ? n : 1), n);
}

void *base_xcalloc(size_t n, size_t size)
{
    void *p = injected() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n, size);
    return p;
}

void *base_xreallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) out_of_memory(n, size);
    return base_xrealloc(p, n * size);
}

void *base_xrealloc(void *p, size_t n)
{
    if (injected()) out_of_memory(1, n);
    return checked(realloc(p, n ? n : 1), n);
}

char *base_xstrdup(const char *s)
{
    if (s && injected()) out_of_memory(1, strlen(s) + 1);
    return s ? checked(strdup(s), strlen(s) + 1) : NULL;
}
