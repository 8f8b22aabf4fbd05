/* ir_fixture.h - the fixture of the tests that build IR by hand
 * (test_ir.c, test_shapes.c, test_autodiff.c): a fresh graph per test over a
 * small source text, its diagnostics, and helpers that add typed inputs and
 * variables to it.
 *
 * A test file defines its setup as `return irfx_open(TEXT, AT);` and passes
 * it with irfx_teardown to cmocka_unit_test_setup_teardown.  Everything here
 * is static, so each test program gets its own copy; the helpers are inline
 * so a program that does not use one is not warned about it. */
#ifndef IR_FIXTURE_H
#define IR_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "compiler/ir.h"

/* The graph under test, the text its nodes point into and the diagnostics
 * it reports.  Short names: nearly every line of these tests uses them. */
static ir_graph *g;
static src_file *src;
static diag_list diags;

/* The span the helpers give what they add: a test that checks a line
 * number (autodiff names the op's line) opens the fixture with that line. */
static src_span irfx_at;

/* 0 when the graph and source exist; cmocka fails the test otherwise. */
static inline int irfx_open(const char *text, src_span at)
{
    diag_init(&diags);
    src = src_from_string("t.graph", text, strlen(text));
    g = ir_new(&diags);
    irfx_at = at;
    return g && src ? 0 : -1;
}

static inline int irfx_teardown(void **state)
{
    (void)state;
    ir_free(g);
    src_free(src);
    diag_free(&diags);
    return 0;
}

/* "f32[64,784]" or "i32[]" -> that type: shapes read as they print. */
static inline ir_type irfx_type(const char *s)
{
    ir_type t;
    memset(&t, 0, sizeof(t));
    t.dtype = strncmp(s, "i32", 3) == 0 ? DT_I32 : DT_F32;
    const char *p = strchr(s, '[') + 1;
    while (*p && *p != ']') {
        t.dim[t.rank++] = strtoll(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    return t;
}

static inline int irfx_input(const char *name, const char *type)
{
    ir_type t = irfx_type(type);
    return ir_add_input(g, name, &t, src, irfx_at);
}

/* A glorot-initialised variable; returns its node, the id ops take. */
static inline int irfx_var(const char *name, const char *type, int device, int trainable)
{
    ir_var v;
    memset(&v, 0, sizeof(v));
    v.name = name;
    v.type = irfx_type(type);
    v.init = INIT_GLOROT;
    v.device = device;
    v.slot_of = -1;
    v.trainable = trainable;
    v.src = src;
    v.span = irfx_at;
    int vi = ir_add_var(g, &v); /* before g->vars is read: adding may move it */
    return g->vars[vi].node;
}

#endif
