/* alloc_count.h - malloc and friends replaced by counting wrappers, for the
 * tests that count allocations (test_no_malloc.c, test_compile_linear.c).
 * glibc lets an executable interpose them for every library, so they see
 * every allocation, in every thread, while alloc_counting is set: the
 * calls in alloc_calls, the bytes asked for in alloc_bytes.  Include this
 * in one file of a test program.  A sanitizer owns malloc: there
 * GR_SANITIZED is 1 and nothing is counted. */
#ifndef GR_ALLOC_COUNT_H
#define GR_ALLOC_COUNT_H

#include <stdatomic.h>
#include <stddef.h>

static atomic_long alloc_calls, alloc_bytes;
static atomic_int alloc_counting;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GR_SANITIZED 1
#else
#define GR_SANITIZED 0
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

static void alloc_count(size_t bytes)
{
    if (!atomic_load_explicit(&alloc_counting, memory_order_relaxed)) return;
    atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&alloc_bytes, (long)bytes, memory_order_relaxed);
}

void *malloc(size_t n)
{
    alloc_count(n);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    alloc_count(n * m);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    alloc_count(n);
    return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    alloc_count(n);
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12; /* ENOMEM */
}

void *aligned_alloc(size_t align, size_t n)
{
    alloc_count(n);
    return __libc_memalign(align, n);
}
#endif

/* Starts counting from zero. */
static inline void alloc_count_start(void)
{
    atomic_store(&alloc_calls, 0);
    atomic_store(&alloc_bytes, 0);
    atomic_store(&alloc_counting, 1);
}

static inline void alloc_count_stop(void)
{
    atomic_store(&alloc_counting, 0);
}

#endif
