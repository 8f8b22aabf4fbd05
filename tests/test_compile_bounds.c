/* test_compile_bounds.c - compiling is bounded in time, memory and stack
 * whatever the program: small sources that once took minutes, gigabytes or
 * a stack overflow (quadratic passes and plans, folding big constants,
 * lists grown one item at a time, recursion through deep expressions) now
 * compile, or fail with their limit's error, within seconds, on a thread
 * with a 4 MiB stack.  The limits themselves are in compiler/limits.h and
 * their messages in tests/compile/limit_*. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"

/* Generous for sanitizer builds: a release build takes well under 1 s. */
#define CASE_SECONDS 30

typedef struct bound_case {
    const char *name;
    char *text;          /* the program */
    const char *error;   /* a substring of the expected error, or NULL */
    const char *plan;    /* a target to lay out when it compiles, or NULL */
    long long max_bytes; /* compiler memory it may take, 0 = any */
    gr_code code;        /* filled by the thread */
    char msg[256];
    long long mem_bytes;
    double seconds;
} bound_case;

static bound_case mk(const char *name, char *text, const char *error, const char *plan)
{
    return (bound_case){.name = name, .text = text, .error = error, .plan = plan};
}

static char *text_of(const char *head, const char *repeat, int n, const char *tail)
{
    size_t len = strlen(head) + strlen(repeat) * (size_t)n + strlen(tail) + 1;
    char *s = malloc(len), *p = s;
    p += sprintf(p, "%s", head);
    for (int i = 0; i < n; i++) p += sprintf(p, "%s", repeat);
    sprintf(p, "%s", tail);
    return s;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *compile_case(void *arg)
{
    bound_case *c = arg;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    double t0 = now();
    c->code = gr_compile_string(c->name, c->text, strlen(c->text), NULL, &p, st);
    if (c->code == GR_OK && c->plan) {
        FILE *sink = fopen("/dev/null", "w");
        c->code = gr_program_emit(p, "plan", c->plan, sink, st);
        fclose(sink);
    }
    c->seconds = now() - t0;
    c->mem_bytes = p ? p->g->mem_bytes : 0;
    snprintf(c->msg, sizeof c->msg, "%s", gr_status_message(st));
    gr_program_free(p);
    gr_status_free(st);
    return NULL;
}

static void run_case(bound_case *c)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 4u << 20);
    assert_int_equal(pthread_create(&t, &a, compile_case, c), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
    if (c->seconds > CASE_SECONDS) fail_msg("%s took %.1f s", c->name, c->seconds);
    if (c->error && (c->code == GR_OK || !strstr(c->msg, c->error)))
        fail_msg("%s: wanted an error with '%s', got: %s", c->name, c->error, c->msg);
    if (!c->error && c->code != GR_OK) fail_msg("%s failed: %s", c->name, c->msg);
    if (c->max_bytes && c->mem_bytes > c->max_bytes)
        fail_msg("%s took %lld bytes of compiler memory", c->name, c->mem_bytes);
    free(c->text);
}

/* CSE over 60000 constants that differ only in value (they shared one hash
 * bucket), and the plan of the chain they feed. */
static void test_many_distinct_constants(void **state)
{
    (void)state;
    bound_case c =
        mk("consts.graph", strdup("input x: f32[4, 4]\nh = x\nfor i in 0..60000 { h = h + i }\n"),
           NULL, "h");
    run_case(&c);
}

/* 15000 layers trained with sgd: fusing each update used to scan the graph. */
static void test_many_fused_updates(void **state)
{
    (void)state;
    bound_case c = mk("layers.graph",
                      strdup("input x: f32[4, 128]\n"
                             "fn d(x) {\n var w = zeros([128, 128])\n return x @ w\n}\n"
                             "h = x\nfor i in 0..15000 { h = d(h) }\n"
                             "train = sgd(0.1).minimize(mean(h))\n"),
                      NULL, "train");
    run_case(&c);
}

static void test_long_relu_chain(void **state)
{
    (void)state;
    bound_case c = mk("relu.graph",
                      strdup("input x: f32[4, 128]\nvar w = zeros([128, 128])\nvar b = "
                             "zeros([128])\nh = x\nfor i in 0..30000 { h = relu(h @ w + b) }\n"),
                      NULL, "h");
    run_case(&c);
}

/* 4095 tensors live across 20 chains: first-fit used to scan them all for
 * each of 170000 buffers; filling l[i] one by one copied the list each
 * time (1.6 GB). */
static void test_many_live_tensors(void **state)
{
    (void)state;
    bound_case c = mk("live.graph",
                      strdup("input x: f32[4, 4]\nfor i in 0..4095 { l[i] = x + i }\nt = x\n"
                             "for j in 0..20 {\n s = x + j\n for i in 0..4095 { s = s + l[i] }\n"
                             " t = t + s\n}\n"),
                      NULL, "t");
    c.max_bytes = 128 << 20;
    run_case(&c);
}

/* A scalar out of a 400 MB constant: folding filled the constant first. */
static void test_folding_a_huge_constant(void **state)
{
    (void)state;
    bound_case c = mk("fold.graph", strdup("x = sum(zeros([100000000]))\n"), NULL, "x");
    c.max_bytes = 16 << 20;
    run_case(&c);
}

/* Recursion through an expression 900 deep overflowed any thread's stack. */
static void test_recursion_through_a_deep_expression(void **state)
{
    (void)state;
    bound_case c = mk("deep.graph", text_of("fn f(n) { return f(n)", " + 1", 900, " }\ny = f(1)\n"),
                      "nested deeper than 1200", NULL);
    run_case(&c);
}

/* f(g(g(...g(n)...))) and [[...[f(n)]...]]: 190 brackets (the parser
 * allows 200) at each level of recursion; and a 990-deep unary minus. */
static void test_recursion_through_nested_calls_and_lists(void **state)
{
    (void)state;
    char *open = text_of("fn g(x) { return x }\nfn f(n) { return f(", "g(", 190, "n");
    bound_case calls =
        mk("calls.graph", text_of(open, ")", 190, ") }\ny = f(1)\n"), "nested deeper", NULL);
    free(open);
    run_case(&calls);
    open = text_of("fn f(n) { return ", "[", 190, "f(n)");
    bound_case lists =
        mk("lists.graph", text_of(open, "]", 190, " }\ny = f(1)\n"), "nested deeper", NULL);
    free(open);
    run_case(&lists);
    bound_case neg = mk("neg.graph", text_of("fn f(n) { return ", "-", 990, "f(n) }\ny = f(1)\n"),
                        "nested deeper", NULL);
    run_case(&neg);
}

/* Name lookups scanned every global name; empty scopes evaluated no
 * expression, so no step was counted. */
static void test_loops_over_many_names_and_scopes(void **state)
{
    (void)state;
    char *names = malloc(300 * 16 + 200), *p = names;
    for (int i = 0; i < 300; i++) p += sprintf(p, "a%d = %d\n", i, i);
    sprintf(p, "for i in 0..1000 { for j in 0..1000 { x = a0 + a0 + a0 + a0 } }\n");
    bound_case c = mk("names.graph", names, "more than 2000000 steps", NULL);
    run_case(&c);
    bound_case sc =
        mk("scopes.graph",
           text_of("for i in 0..1000 { for j in 0..1000 {", " scope s {};", 300, " } }\n"),
           "more than 2000000 steps", NULL);
    run_case(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_distinct_constants),
        cmocka_unit_test(test_many_fused_updates),
        cmocka_unit_test(test_long_relu_chain),
        cmocka_unit_test(test_many_live_tensors),
        cmocka_unit_test(test_folding_a_huge_constant),
        cmocka_unit_test(test_recursion_through_a_deep_expression),
        cmocka_unit_test(test_recursion_through_nested_calls_and_lists),
        cmocka_unit_test(test_loops_over_many_names_and_scopes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
