/* gr_run.h - a session over a program given as text, for the cmocka
 * tests of training (test_optim.c, test_state.c).  Include it after
 * <cmocka.h>. */
#ifndef GR_RUN_H
#define GR_RUN_H

#include <string.h>

#include "gr_test.h"

typedef struct run {
    gr_status *st;
    gr_program *p;
    gr_session *s;
} run;

static inline void run_open(run *r, const char *text)
{
    r->st = gr_status_new();
    assert_gr_ok(
        gr_compile_string("inline.graph", text, strlen(text), gr_test_options(), &r->p, r->st),
        r->st);
    gr_session_options so = {.seed = 5, .threads = 2};
    assert_gr_ok(gr_session_new(r->p, &so, &r->s, r->st), r->st);
}

static inline void run_close(run *r)
{
    gr_session_free(r->s);
    gr_program_free(r->p);
    gr_status_free(r->st);
}

static inline void read_var(run *r, const char *name, float *v, size_t n)
{
    assert_gr_ok(gr_variable_read(r->s, name, v, n * sizeof *v, r->st), r->st);
}

/* text does not compile, with an error saying want. */
static inline void compile_fails(const char *text, const char *want)
{
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_int_equal(gr_compile_string("inline.graph", text, strlen(text), NULL, &p, st),
                     GR_ERR_COMPILE);
    if (!strstr(gr_status_message(st), want))
        fail_msg("'%s' lacks '%s'", gr_status_message(st), want);
    gr_status_free(st);
}

#endif
