/* core_calls.h - what a module calls in the core library.
 *
 * The CUDA device (libgraphrun-cuda.so) and the MPI transport
 * (libgraphrun-mpi.so) are modules the core opens with dlopen when a
 * program first needs them (runtime/modules.c).  A module exports one entry
 * function, and the core's own functions stay hidden (cmake/graphrun.map),
 * so the core hands the module the few of them it calls, in this table,
 * when it opens it.  devices/core_calls.c, linked into each module and
 * nowhere else, defines each name below as a call through the table: the
 * device's files call base_xcalloc or ops_name as every other file does.
 * Where a module is linked into the library itself (the test library,
 * the CUDA stand-in), the names are the core's own and core_calls_bind
 * does nothing. */
#ifndef GR_DEVICES_CORE_CALLS_H
#define GR_DEVICES_CORE_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "../compiler/ir.h"
#include "../include/graphrun.h"

/* Bumped with any change to this table or to a module's vtable; the entry
 * also compares GR_VERSION_STRING, so a module of another build is refused. */
#define CORE_CALLS_ABI 1

typedef struct core_calls {
    int abi;
    void *(*xmalloc)(size_t n);
    void *(*xcalloc)(size_t n, size_t size);
    void *(*xreallocarray)(void *p, size_t n, size_t size);
    void (*fatal)(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
    int64_t (*ir_numel)(const ir_type *t);
    size_t (*ir_nbytes)(const ir_type *t);
    void (*ir_row_strides)(const ir_type *t, int64_t *st);
    const char *(*ops_name)(op_kind op);
    void (*src_linecol)(const src_file *s, uint32_t off, int *line, int *col);
    /* rt_fail and rt_ok (runtime/runtime.h): a status the caller reads */
    gr_code (*fail)(gr_status *st, gr_code code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    void (*ok)(gr_status *st);
} core_calls;

#ifdef __cplusplus
extern "C" {
#endif

/* A module's entry calls this first: the names above go to c from now on.
 * (What runs while the module loads, before its entry, has none: a
 * failure there prints and aborts.) */
void core_calls_bind(const core_calls *c);

#ifdef __cplusplus
}
#endif

#endif
