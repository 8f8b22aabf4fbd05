/* test_fatal.c - bugs assert, errors return: the abort hook an embedder
 * installs with gr_set_abort_hook really fires, for a broken invariant
 * (GR_ASSERT) and for an internal allocation that cannot be satisfied,
 * with a message that says which. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graphrun.h"
#include "base/fatal.h"

static jmp_buf back;
static char seen[512];
static int fired;

static void hook(const char *msg)
{
    fired++;
    snprintf(seen, sizeof seen, "%s", msg);
    longjmp(back, 1);
}

static void assert_fires(void)
{
    fired = 0;
    seen[0] = 0;
    gr_set_abort_hook(hook);
}

static void test_assert_calls_the_hook(void **state)
{
    (void)state;
    volatile int x = 1;
    assert_fires();
    if (setjmp(back) == 0) GR_ASSERT(x == 2);
    gr_set_abort_hook(NULL);
    assert_int_equal(fired, 1);
    assert_non_null(strstr(seen, "assertion failed: x == 2"));
    assert_non_null(strstr(seen, "test_fatal.c:"));
}

static void test_allocation_overflow_calls_the_hook(void **state)
{
    (void)state;
    assert_fires();
    if (setjmp(back) == 0) (void)base_xreallocarray(NULL, SIZE_MAX / 2, 4);
    gr_set_abort_hook(NULL);
    assert_int_equal(fired, 1);
    assert_non_null(strstr(seen, "out of memory"));
}

static void test_checked_allocations_succeed_quietly(void **state)
{
    (void)state;
    assert_fires();
    char *s = base_xstrdup("abc");
    int *v = base_xcalloc(4, sizeof *v);
    v = base_xreallocarray(v, 8, sizeof *v);
    gr_set_abort_hook(NULL);
    assert_string_equal(s, "abc");
    assert_int_equal(v[3], 0);
    assert_int_equal(fired, 0);
    free(s);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assert_calls_the_hook),
        cmocka_unit_test(test_allocation_overflow_calls_the_hook),
        cmocka_unit_test(test_checked_allocations_succeed_quietly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
