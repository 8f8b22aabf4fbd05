/* core_calls.c - linked into each module (libgraphrun-cuda.so,
 * libgraphrun-mpi.so) and nowhere else: the core's functions that a
 * module's files call by name, each a call through the table the core
 * handed the module's entry (core_calls.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fatal.h"
#include "core_calls.h"
#include "lang/diag.h"

static const core_calls *core;

void core_calls_bind(const core_calls *c)
{
    core = c;
}

/* The forwarders, made by macros: namesakes of the core's functions, which
 * tools that index the tree need not take for the core's (nothing in the
 * core calls them, the module alone).  fatal formats the message here and
 * hands it on; before the entry ran (a module's constructors), it prints
 * it and aborts. */
#define FORWARD_FATAL(name)                                                                        \
    void name(const char *fmt, ...)                                                                \
    {                                                                                              \
        char msg[1024];                                                                            \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        vsnprintf(msg, sizeof msg, fmt, ap);                                                       \
        va_end(ap);                                                                                \
        if (core) core->fatal("%s", msg);                                                          \
        fprintf(stderr, "graphrun: internal error: %s\n", msg);                                    \
        abort();                                                                                   \
    }
/* name(params) is core->field(args). */
#define FORWARD(ret, name, field, params, args)                                                    \
    ret name params                                                                                \
    {                                                                                              \
        if (!core) fatal("a module called " #name " before its entry");                            \
        return core->field args;                                                                   \
    }
#define FORWARD_VOID(name, field, params, args)                                                    \
    void name params                                                                               \
    {                                                                                              \
        if (!core) fatal("a module called " #name " before its entry");                            \
        core->field args;                                                                          \
    }

FORWARD_FATAL(fatal)
FORWARD(void *, base_xmalloc, xmalloc, (size_t n), (n))
FORWARD(void *, base_xcalloc, xcalloc, (size_t n, size_t size), (n, size))
FORWARD(void *, base_xreallocarray, xreallocarray, (void *p, size_t n, size_t size), (p, n, size))
FORWARD(int64_t, ir_numel, ir_numel, (const ir_type *t), (t))
FORWARD(size_t, ir_nbytes, ir_nbytes, (const ir_type *t), (t))
FORWARD_VOID(ir_row_strides, ir_row_strides, (const ir_type *t, int64_t *st), (t, st))
FORWARD(const char *, ops_name, ops_name, (op_kind op), (op))
FORWARD_VOID(src_linecol, src_linecol, (const src_file *s, uint32_t off, int *line, int *col),
             (s, off, line, col))
