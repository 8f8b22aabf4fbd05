/* test_oom.c - running out of memory is GR_ERR_NOMEM, not the abort hook
 * (issue 23).  base/fatal.h's test switch makes the k-th internal
 * allocation fail, for every k up to the number a call makes: compiling
 * and planning a target (gr_target_info_get, gr_program_emit "plan") must
 * each return GR_ERR_NOMEM with a message, never call the hook, and work
 * again at once.
 * A call that ran out of memory may leave what it had allocated (fatal.h),
 * so LeakSanitizer looks away during the failing calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"
#include "base/fatal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LSAN_OFF() __lsan_disable()
#define LSAN_ON()  __lsan_enable()
#else
#define LSAN_OFF() (void)0
#define LSAN_ON()  (void)0
#endif

static const char prog[] = "param batch = 4\n"
                           "input x: f32[batch, 3]\n"
                           "fn dense(x, units, act=relu) {\n"
                           "  var w = glorot([cols(x), units])\n"
                           "  var b = zeros([units])\n"
                           "  return act(x @ w + b)\n"
                           "}\n"
                           "scope net { y = dense(dense(x, 8) as h, 1, act=none) as out }\n"
                           "loss = mean(y * y)\n"
                           "train = adam(0.01).minimize(loss)\n";

static void hook_must_not_run(const char *msg)
{
    fail_msg("the abort hook ran: %s", msg);
}

typedef gr_code (*oom_call)(void *ctx, gr_status *st);

/* Fails allocation k = 1, 2, ... of call until one run makes fewer than k
 * allocations; returns how many runs failed with GR_ERR_NOMEM. */
static int fail_each_allocation(oom_call call, void *ctx, const char *name)
{
    gr_status *st = gr_status_new();
    int nomem = 0;
    for (long k = 1;; k++) {
        LSAN_OFF();
        fatal_fail_alloc_after(k);
        gr_code c = call(ctx, st);
        long made = fatal_fail_alloc_after(0);
        LSAN_ON();
        if (c == GR_OK && made < k) break;
        if (c != GR_ERR_NOMEM)
            fail_msg("%s, allocation %ld failing: %s: %s", name, k, gr_code_name(c),
                     gr_status_message(st));
        if (!strstr(gr_status_message(st), "out of memory"))
            fail_msg("%s: the message does not say so: %s", name, gr_status_message(st));
        nomem++;
        assert_gr_ok(call(ctx, st), st); /* nothing was left broken */
    }
    gr_status_free(st);
    return nomem;
}

static gr_code compile_call(void *ctx, gr_status *st)
{
    (void)ctx;
    gr_program *p = NULL;
    gr_code c = gr_compile_string("oom.graph", prog, strlen(prog), NULL, &p, st);
    if (c != GR_OK) assert_null(p);
    gr_program_free(p);
    return c;
}

static gr_code info_call(void *ctx, gr_status *st)
{
    gr_target_info ti;
    return gr_target_info_get(ctx, "train", &ti, st);
}

static gr_code emit_call(void *ctx, gr_status *st)
{
    FILE *f = fopen("/dev/null", "w");
    gr_code c = gr_program_emit(ctx, "plan", "train", f, st);
    fclose(f);
    return c;
}

static void test_compiling_out_of_memory_is_nomem(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(compile_call, NULL, "gr_compile_string") > 50);
}

static void test_planning_out_of_memory_is_nomem(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("oom.graph", prog, strlen(prog), NULL, &p, st), st);
    assert_true(fail_each_allocation(info_call, p, "gr_target_info_get") > 10);
    assert_true(fail_each_allocation(emit_call, p, "gr_program_emit") > 10);
    gr_program_free(p);
    gr_status_free(st);
}

/* Without a catch point the hook still runs: out of memory elsewhere is
 * not silently ignored. */
static jmp_buf hook_jb;
static void hook_escapes(const char *msg)
{
    assert_non_null(strstr(msg, "out of memory"));
    longjmp(hook_jb, 1);
}

static void test_uncaught_out_of_memory_calls_the_hook(void **state)
{
    (void)state;
    gr_set_abort_hook(hook_escapes);
    int ran = 0;
    LSAN_OFF();
    if (setjmp(hook_jb) == 0) {
        fatal_fail_alloc_after(1);
        free(base_xmalloc(16));
    } else
        ran = 1;
    fatal_fail_alloc_after(0);
    LSAN_ON();
    gr_set_abort_hook(hook_must_not_run);
    assert_true(ran);
}

int main(void)
{
    gr_set_abort_hook(hook_must_not_run);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiling_out_of_memory_is_nomem),
        cmocka_unit_test(test_planning_out_of_memory_is_nomem),
        cmocka_unit_test(test_uncaught_out_of_memory_calls_the_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
