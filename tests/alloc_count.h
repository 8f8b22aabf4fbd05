/* alloc_count.h - malloc and friends replaced by counting wrappers, for the
 * tests that count allocations (test_no_malloc.c, test_compile_linear.c).
 * glibc lets an executable interpose them for every library, so they see
 * every allocation, in every thread, while alloc_counting is set: the
 * calls in alloc_calls, the bytes asked for in alloc_bytes.  Include this
 * in one file of a test program.  A sanitizer owns malloc: there
 * GR_SANITIZED is 1 and nothing is counted.
 *
 * The first allocation counted leaves its backtrace, its size and whether
 * the counting thread made it; alloc_count_report() prints them, so a test
 * that fails (say on a loaded CI machine only) names the allocator.  The
 * backtrace is glibc's: backtrace() is called once before counting starts,
 * since its first call loads libgcc_s (which allocates), and
 * backtrace_symbols_fd() writes without allocating.  Frames of the test
 * program (static functions, no -rdynamic) come as program(+0xOFFSET),
 * so the report names each frame by addr2line too, when it is installed. */
#ifndef GR_ALLOC_COUNT_H
#define GR_ALLOC_COUNT_H

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

static atomic_long alloc_calls, alloc_bytes;
static atomic_int alloc_counting;

#define ALLOC_BT_MAX 64
static struct {
    atomic_int taken, ready; /* a thread is recording it; it is recorded */
    void *frames[ALLOC_BT_MAX];
    int depth;
    size_t bytes;
    int other_thread; /* not the thread that called alloc_count_start */
} alloc_first;
static pthread_t alloc_counter_thread;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GR_SANITIZED 1
#else
#define GR_SANITIZED 0
static _Thread_local int alloc_in_backtrace; /* backtrace() allocating: not recorded */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

static void alloc_count(size_t bytes)
{
    if (!atomic_load_explicit(&alloc_counting, memory_order_relaxed)) return;
    atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&alloc_bytes, (long)bytes, memory_order_relaxed);
    if (alloc_in_backtrace || atomic_load_explicit(&alloc_first.taken, memory_order_relaxed) ||
        atomic_exchange(&alloc_first.taken, 1))
        return;
    alloc_in_backtrace = 1;
    alloc_first.bytes = bytes;
    alloc_first.other_thread = !pthread_equal(pthread_self(), alloc_counter_thread);
    alloc_first.depth = backtrace(alloc_first.frames, ALLOC_BT_MAX);
    alloc_in_backtrace = 0;
    atomic_store_explicit(&alloc_first.ready, 1, memory_order_release);
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
    void *prime[2];
    (void)backtrace(prime, 2); /* its first call allocates: not while counting */
    atomic_store(&alloc_first.ready, 0);
    atomic_store(&alloc_first.taken, 0);
    alloc_counter_thread = pthread_self();
    atomic_store(&alloc_calls, 0);
    atomic_store(&alloc_bytes, 0);
    atomic_store(&alloc_counting, 1);
}

static inline void alloc_count_stop(void)
{
    atomic_store(&alloc_counting, 0);
}

/* After alloc_count_stop: the allocations counted and, if there were any,
 * the first one's size, thread and backtrace, on stderr. */
static inline void alloc_count_report(const char *what)
{
    long calls = atomic_load(&alloc_calls);
    fprintf(stderr, "alloc_count: %s: %ld allocations, %ld bytes\n", what, calls,
            atomic_load(&alloc_bytes));
    if (!calls || GR_SANITIZED) return;
    if (!atomic_load_explicit(&alloc_first.ready, memory_order_acquire)) {
        fprintf(stderr, "alloc_count: the first one's backtrace was not recorded\n");
        return;
    }
    fprintf(stderr, "alloc_count: the first one, %zu bytes, by %s thread, from:\n",
            alloc_first.bytes, alloc_first.other_thread ? "another" : "the counting");
    fflush(stderr);
    backtrace_symbols_fd(alloc_first.frames, alloc_first.depth, 2);
    /* Static functions have no name above: addr2line's, where it is installed. */
    fprintf(stderr, "alloc_count: the same, by addr2line:\n");
    for (int i = 0; i < alloc_first.depth; i++) {
        Dl_info in;
        char cmd[1024];
        uintptr_t at = (uintptr_t)alloc_first.frames[i] - (i > 0); /* in the call, not after */
        if (!dladdr((void *)at, &in) || !in.dli_fname) continue;
        snprintf(cmd, sizeof cmd, "addr2line -f -C -i -p -e '%s' %#lx 2>/dev/null", in.dli_fname,
                 (unsigned long)(at - (uintptr_t)in.dli_fbase));
        FILE *f = popen(cmd, "r");
        for (int c; f && (c = fgetc(f)) != EOF;) fputc(c, stderr);
        if (f) pclose(f);
    }
}

#endif
