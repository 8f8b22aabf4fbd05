/* test_api_args.c - the C API refuses bad calls (issue 23): every pointer
 * argument that may not be NULL, a negative count, an array NULL with a
 * count above 0, a NULL name inside a feed or fetch, and a feed given twice
 * get GR_ERR_ARG and a message that names the function and the argument,
 * and change nothing (a session still trains after them all).  Each case is
 * one line: the call, the function and the argument the message must name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

static const char prog[] = "input z: f32[2]\n"
                           "var w = zeros([2])\n"
                           "y = w * z\n"
                           "loss = sum(y * y) + sum(w * w)\n"
                           "train = sgd(0.1).minimize(loss)\n";

typedef struct fixture {
    gr_program *p;
    gr_session *s;
    gr_status *st;
    float z[2], w[2];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->st = gr_status_new();
    f->z[0] = f->z[1] = 1;
    if (gr_compile_string("args.graph", prog, strlen(prog), NULL, &f->p, f->st) != GR_OK ||
        gr_session_new(f->p, NULL, &f->s, f->st) != GR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gr_session_free(f->s);
    gr_program_free(f->p);
    gr_status_free(f->st);
    free(f);
    return 0;
}

static void expect_refused(gr_code c, const gr_status *st, const char *call, const char *fn,
                           const char *arg)
{
    const char *msg = gr_status_message(st);
    if (c != GR_ERR_ARG) fail_msg("%s -> %s, not GR_ERR_ARG: %s", call, gr_code_name(c), msg);
    if (!strstr(msg, fn) || !strstr(msg, arg))
        fail_msg("%s: the message does not name %s and %s: %s", call, fn, arg, msg);
}

#define REFUSED(call, fn, arg) expect_refused((call), f->st, #call, fn, arg)

static void test_programs_refuse_null_arguments(void **state)
{
    fixture *f = *state;
    gr_program *p = NULL;
    gr_tensor *t = NULL;
    gr_target_info ti;
    REFUSED(gr_compile_file(NULL, NULL, &p, f->st), "gr_compile_file", "path");
    REFUSED(gr_compile_file("x.graph", NULL, NULL, f->st), "gr_compile_file", "out");
    REFUSED(gr_compile_string("a", prog, strlen(prog), NULL, NULL, f->st), "gr_compile_string",
            "out");
    REFUSED(gr_compile_string(NULL, prog, 3, NULL, &p, f->st), "gr_compile_string", "name");
    REFUSED(gr_compile_string("a", NULL, 3, NULL, &p, f->st), "gr_compile_string", "text");
    /* a length past the source limit is refused before any byte is read
       (SIZE_MAX used to crash) */
    REFUSED(gr_compile_string("a", prog, SIZE_MAX, NULL, &p, f->st), "gr_compile_string", "len");
    REFUSED(gr_compile_string("a", prog, (64 << 20) + 1, NULL, &p, f->st), "gr_compile_string",
            "above the limit of 64 MiB");
    REFUSED(gr_format_string("a", prog, SIZE_MAX, stdout, f->st), "gr_format_string", "len");
    REFUSED(gr_program_emit(f->p, "ir", NULL, NULL, f->st), "gr_program_emit", "out");
    REFUSED(gr_program_emit(f->p, NULL, NULL, stdout, f->st), "gr_program_emit", "what");
    REFUSED(gr_program_emit(NULL, "ir", NULL, stdout, f->st), "gr_program_emit", "program");
    REFUSED(gr_target_info_get(f->p, "train", NULL, f->st), "gr_target_info_get", "info");
    REFUSED(gr_target_info_get(NULL, "train", &ti, f->st), "gr_target_info_get", "program");
    REFUSED(gr_target_info_get(f->p, NULL, &ti, f->st), "gr_target_info_get", "target");
    REFUSED(gr_program_tensor(f->p, "w", NULL, f->st), "gr_program_tensor", "out");
    REFUSED(gr_program_tensor(f->p, NULL, &t, f->st), "gr_program_tensor", "name");
    REFUSED(gr_program_tensor(NULL, "w", &t, f->st), "gr_program_tensor", "program");
    REFUSED(gr_program_vocab(NULL, NULL, NULL, NULL, f->st), "gr_program_vocab", "program");
    REFUSED(gr_format_file(NULL, stdout, f->st), "gr_format_file", "path");
    REFUSED(gr_format_file("x.graph", NULL, f->st), "gr_format_file", "out");
    REFUSED(gr_format_string("a", prog, strlen(prog), NULL, f->st), "gr_format_string", "out");
    REFUSED(gr_format_string("a", NULL, 3, stdout, f->st), "gr_format_string", "text");
    REFUSED(gr_format_in_place(NULL, NULL, f->st), "gr_format_in_place", "path");
    assert_null(p);
    assert_null(t);
}

static void test_sessions_refuse_null_arguments(void **state)
{
    fixture *f = *state;
    gr_session *s = NULL;
    gr_tensor *t = NULL;
    double v;
    REFUSED(gr_session_new(f->p, NULL, NULL, f->st), "gr_session_new", "out");
    REFUSED(gr_session_new(NULL, NULL, &s, f->st), "gr_session_new", "program");
    REFUSED(gr_run(f->s, NULL, NULL, 0, NULL, 0, f->st), "gr_run", "target");
    REFUSED(gr_prepare(f->s, NULL, NULL, 0, f->st), "gr_prepare", "target");
    REFUSED(gr_eval(f->s, "loss", NULL, f->st), "gr_eval", "value");
    REFUSED(gr_eval(f->s, NULL, &v, f->st), "gr_eval", "target");
    REFUSED(gr_eval_check(f->s, NULL, f->st), "gr_eval_check", "target");
    REFUSED(gr_eval_check(NULL, "loss", f->st), "gr_eval_check", "session");
    REFUSED(gr_variable_read(f->s, "w", NULL, sizeof f->w, f->st), "gr_variable_read", "data");
    REFUSED(gr_variable_read(f->s, NULL, f->w, sizeof f->w, f->st), "gr_variable_read", "name");
    REFUSED(gr_variable_write(f->s, "w", NULL, sizeof f->w, f->st), "gr_variable_write", "data");
    REFUSED(gr_variable_write(f->s, NULL, f->w, sizeof f->w, f->st), "gr_variable_write", "name");
    REFUSED(gr_variable_get(f->s, "w", NULL, f->st), "gr_variable_get", "out");
    REFUSED(gr_variable_get(f->s, NULL, &t, f->st), "gr_variable_get", "name");
    REFUSED(gr_variable_get(NULL, "w", &t, f->st), "gr_variable_get", "session");
    REFUSED(gr_session_save(f->s, NULL, f->st), "gr_session_save", "path");
    REFUSED(gr_session_save(NULL, "x.st", f->st), "gr_session_save", "session");
    REFUSED(gr_session_restore(f->s, NULL, NULL, f->st), "gr_session_restore", "path");
    REFUSED(gr_session_restore(NULL, "x.st", NULL, f->st), "gr_session_restore", "session");
    REFUSED(gr_session_scalar(f->s, NULL, 0, 1.0, f->st), "gr_session_scalar", "tag");
    REFUSED(gr_session_scalar(NULL, "a", 0, 1.0, f->st), "gr_session_scalar", "session");
    REFUSED(gr_session_dist_agree(NULL, "--steps", "1", f->st), "gr_session_dist_agree", "session");
    REFUSED(gr_session_dist_agree(f->s, NULL, "1", f->st), "gr_session_dist_agree", "what");
    REFUSED(gr_session_dist_agree(f->s, "--steps", NULL, f->st), "gr_session_dist_agree", "value");
    int rank = -1, size = -1;
    REFUSED(gr_mpi_init(NULL, NULL, NULL, &size, f->st), "gr_mpi_init", "rank");
    REFUSED(gr_mpi_init(NULL, NULL, &rank, NULL, f->st), "gr_mpi_init", "size");
    assert_null(s);
    assert_null(t);
}

static void test_checkpoints_and_outputs_refuse_null_arguments(void **state)
{
    fixture *f = *state;
    gr_checkpoint *c = NULL;
    gr_output *o = NULL;
    gr_tensor *t = NULL;
    REFUSED(gr_checkpoint_open(NULL, &c, f->st), "gr_checkpoint_open", "path");
    REFUSED(gr_checkpoint_open("x.st", NULL, f->st), "gr_checkpoint_open", "out");
    REFUSED(gr_checkpoint_tensor(NULL, 0, &t, f->st), "gr_checkpoint_tensor", "checkpoint");
    REFUSED(gr_output_open(NULL, &o, f->st), "gr_output_open", "path");
    REFUSED(gr_output_open("x.out", NULL, f->st), "gr_output_open", "out");
    REFUSED(gr_output_commit(NULL, f->st), "gr_output_commit", "output");
    assert_null(c);
    assert_null(o);
    assert_null(t);
}

/* Feeds and fetches: the arrays, their counts and the names in them. */
static void test_runs_refuse_bad_feeds_and_fetches(void **state)
{
    fixture *f = *state;
    float loss;
    gr_feed ok = {"z", f->z, sizeof f->z}, twice[2] = {ok, ok}, noname = {NULL, f->z, sizeof f->z};
    gr_feed nodata = {"z", NULL, sizeof f->z};
    gr_fetch fetch = {"loss", &loss, sizeof loss, NULL}, nofetch = {NULL, &loss, sizeof loss, NULL};
    REFUSED(gr_run(f->s, "train", NULL, 1, NULL, 0, f->st), "gr_run", "feeds");
    REFUSED(gr_run(f->s, "train", &ok, -1, NULL, 0, f->st), "gr_run", "n_feeds");
    REFUSED(gr_run(f->s, "train", &ok, 1, NULL, 1, f->st), "gr_run", "fetches");
    REFUSED(gr_run(f->s, "train", &ok, 1, &fetch, -2, f->st), "gr_run", "n_fetches");
    REFUSED(gr_run(f->s, "train", &noname, 1, NULL, 0, f->st), "gr_run", "feeds[0].name");
    REFUSED(gr_run(f->s, "train", &nodata, 1, NULL, 0, f->st), "gr_run", "feeds[0].data");
    REFUSED(gr_run(f->s, "train", twice, 2, NULL, 0, f->st), "gr_run", "feeds[1]");
    REFUSED(gr_run(f->s, "train", &ok, 1, &nofetch, 1, f->st), "gr_run", "fetches[0].name");
    REFUSED(gr_prepare(f->s, "train", NULL, 1, f->st), "gr_prepare", "fetches");
    REFUSED(gr_prepare(f->s, "train", &fetch, -1, f->st), "gr_prepare", "n_fetches");
    REFUSED(gr_prepare(f->s, "train", &nofetch, 1, f->st), "gr_prepare", "fetches[0].name");
    assert_int_equal(gr_session_profile(f->s, NULL, 3), 0); /* rows NULL: only the count */
    assert_int_equal(gr_session_profile(f->s, NULL, -1), 0);
    assert_int_equal(gr_session_step(f->s), 0); /* none of them ran a step */
    assert_gr_ok(gr_run(f->s, "train", &ok, 1, &fetch, 1, f->st), f->st);
    assert_int_equal(gr_session_step(f->s), 1);
}

/* Lookups with a NULL object or a NULL name answer nothing, never crash. */
static void test_accessors_take_null(void **state)
{
    (void)state;
    const char *v = "x";
    assert_int_equal(gr_program_variable_count(NULL), 0);
    assert_null(gr_program_variable_name(NULL, 0));
    assert_null(gr_program_default_target(NULL));
    assert_string_equal(gr_program_warnings(NULL), "");
    assert_int_equal(gr_program_file_count(NULL), 0);
    assert_int_equal(gr_session_step(NULL), 0);
    assert_int_equal(gr_checkpoint_tensor_count(NULL), 0);
    assert_null(gr_checkpoint_meta(NULL, 0, &v));
    assert_null(gr_tensor_new(GR_F32, 2, NULL));
    assert_null(gr_tensor_new(GR_F32, -1, NULL));
    gr_session_dist_info(NULL, NULL, NULL, NULL);
    gr_mpi_finalize(0); /* MPI not started by gr_mpi_init: nothing */
    gr_session_free(NULL);
    gr_program_free(NULL);
    gr_checkpoint_free(NULL);
    gr_output_discard(NULL);
}

/* The header's version macros are one version, the library's (gr_version). */
static void test_version_macros_match_the_library(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", GR_VERSION_MAJOR, GR_VERSION_MINOR, GR_VERSION_PATCH);
    assert_string_equal(GR_VERSION_STRING, want);
    assert_string_equal(gr_version(), want);
    assert_int_equal(GR_VERSION_NUMBER,
                     GR_VERSION_MAJOR * 10000 + GR_VERSION_MINOR * 100 + GR_VERSION_PATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_programs_refuse_null_arguments),
        cmocka_unit_test(test_sessions_refuse_null_arguments),
        cmocka_unit_test(test_checkpoints_and_outputs_refuse_null_arguments),
        cmocka_unit_test(test_runs_refuse_bad_feeds_and_fetches),
        cmocka_unit_test(test_accessors_take_null),
        cmocka_unit_test(test_version_macros_match_the_library),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
