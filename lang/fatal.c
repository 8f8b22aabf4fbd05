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

static void *checked(void *p, size_t n)
{
    if (!p) fatal("out of memory (allocating %zu bytes)", n);
    return p;
}

void *xmalloc(size_t n)
{
    return checked(malloc(n ? n : 1), n);
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) fatal("out of memory (allocating %zu x %zu bytes)", n, size);
    return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) fatal("out of memory (allocating %zu x %zu bytes)", n, size);
    return xrealloc(p, n * size);
}

void *xrealloc(void *p, size_t n)
{
    return checked(realloc(p, n ? n : 1), n);
}

char *xstrdup(const char *s)
{
    return s ? checked(strdup(s), strlen(s) + 1) : NULL;
}
