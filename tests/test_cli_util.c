/* test_cli_util.c - the CLI's own helpers (tools/cli_util.c, built into
 * this test by tests/cli.cmake): the progress line's rate, which below 1
 * step/s shows seconds per step instead of "0 steps/s", and the names a
 * usage error suggests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

static const char *rate(double sps)
{
    static char buf[32];
    return cli_rate(sps, buf, sizeof buf);
}

static void test_rate(void **state)
{
    (void)state;
    assert_string_equal(rate(523.4), "523 steps/s");
    assert_string_equal(rate(1.0), "1 steps/s");
    assert_string_equal(rate(0.5), "2.00 s/step");
    assert_string_equal(rate(0.3), "3.33 s/step");
    assert_string_equal(rate(0.04), "25.0 s/step");
    assert_string_equal(rate(0), "0 steps/s"); /* nothing timed yet */
    for (double s = 0.999; s > 1e-4; s /= 3) assert_null(strstr(rate(s), "steps/s"));
}

static void test_suggest(void **state)
{
    (void)state;
    const char *opts[] = {"steps", "log", "log-every", "locking", "eval"}, *near[3];
    assert_int_equal(cli_suggest("step", opts, 5, near, 3), 1);
    assert_string_equal(near[0], "steps");
    assert_int_equal(cli_suggest("stepss", opts, 5, near, 3), 1); /* one too many */
    assert_string_equal(near[0], "steps");
    assert_int_equal(cli_suggest("lo", opts, 5, near, 3), 3);
    assert_string_equal(near[2], "locking");
    assert_int_equal(cli_suggest("lo", opts, 5, near, 1), 1);    /* at most max */
    assert_int_equal(cli_suggest("steps", opts, 5, near, 3), 0); /* itself: nothing */
    assert_int_equal(cli_suggest("", opts, 5, near, 3), 0);
    assert_int_equal(cli_suggest("bogus", opts, 5, near, 3), 0);
    assert_int_equal(cli_suggest("stpes", opts, 5, near, 3), 1); /* edit distance */
    assert_string_equal(near[0], "steps");
    assert_int_equal(cli_suggest("evla", opts, 5, near, 3), 1);
    assert_string_equal(near[0], "eval");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rate), cmocka_unit_test(test_suggest)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
