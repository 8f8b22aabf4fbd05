/* test_api_options.c - the option structs of the C API are range-checked
 * (issue 23): gr_session_new refuses threads, executors, sync_every,
 * bounded and max_staleness outside their ranges, gr_compile_file and
 * gr_compile_string refuse a negative n_params, params NULL with n_params > 0 and a param without a
 * name or value; each with GR_ERR_ARG and a message naming the function
 * and the field, before anything is made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

static const char prog[] = "param n = 2\n"
                           "var w = zeros([n])\n"
                           "train = sgd(0.1).minimize(sum(w * w))\n";

static void expect_arg_error(gr_code c, const gr_status *st, const char *fn, const char *field)
{
    const char *msg = gr_status_message(st);
    if (c != GR_ERR_ARG) fail_msg("%s: %s, not GR_ERR_ARG: %s", field, gr_code_name(c), msg);
    if (!strstr(msg, fn) || !strstr(msg, field))
        fail_msg("the message does not name %s and %s: %s", fn, field, msg);
}

static void test_session_options_out_of_range_are_refused(void **state)
{
    (void)state;
    static const struct {
        gr_session_options o;
        const char *field;
    } bad[] = {{{.threads = -1}, "options.threads"},
               {{.threads = 1025}, "options.threads"},
               {{.threads = INT32_MIN}, "options.threads"},
               {{.executors = -1}, "options.executors"},
               {{.executors = 1 << 20}, "options.executors"},
               {{.sync_every = -1}, "options.sync_every"},
               {{.bounded = 2}, "options.bounded"},
               {{.max_staleness = -1}, "options.max_staleness"}};
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("o.graph", prog, strlen(prog), NULL, &p, st), st);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gr_session *s = (gr_session *)1;
        expect_arg_error(gr_session_new(p, &bad[i].o, &s, st), st, "gr_session_new", bad[i].field);
        assert_null(s);
    }
    gr_session_options edge = {.threads = 1024, .executors = 1024, .sync_every = INT32_MAX};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &edge, &s, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_compile_options_bad_params_are_refused(void **state)
{
    (void)state;
    static const gr_param no_name[] = {{NULL, "3"}}, no_value[] = {{"n", NULL}};
    static const struct {
        gr_compile_options o;
        const char *field;
    } bad[] = {{{.n_params = -1}, "options.n_params"},
               {{.params = NULL, .n_params = 3}, "options.params"},
               {{.params = no_name, .n_params = 1}, "options.params[0].name"},
               {{.params = no_value, .n_params = 1}, "options.params[0].value"},
               {{.distributed = (gr_distributed)7}, "options.distributed"}};
    gr_status *st = gr_status_new();
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gr_program *p = (gr_program *)1;
        expect_arg_error(gr_compile_string("o.graph", prog, strlen(prog), &bad[i].o, &p, st), st,
                         "gr_compile_string", bad[i].field);
        assert_null(p);
        p = (gr_program *)1;
        expect_arg_error(gr_compile_file("/nonexistent/o.graph", &bad[i].o, &p, st), st,
                         "gr_compile_file", bad[i].field);
        assert_null(p);
    }
    gr_compile_options none = {.params = NULL, .n_params = 0};
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("o.graph", prog, strlen(prog), &none, &p, st), st);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_options_out_of_range_are_refused),
        cmocka_unit_test(test_compile_options_bad_params_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
