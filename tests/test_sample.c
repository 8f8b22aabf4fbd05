/* test_sample.c - bernoulli(), categorical() and sample(): draws that
 * follow their distributions (frequencies within a few standard errors),
 * never an id of weight 0, the same bits for the same seed (threads,
 * executors, the simulated GPU, a restore), fresh bits each run, and clear
 * compile errors for bad arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

typedef struct run {
    gr_status *st;
    gr_program *p;
    gr_session *s;
} run;

static void run_open_with(run *r, const char *text, const gr_compile_options *co,
                          const gr_session_options *so)
{
    r->st = gr_status_new();
    r->p = NULL;
    r->s = NULL;
    assert_gr_ok(gr_compile_string("inline.graph", text, strlen(text), co, &r->p, r->st), r->st);
    assert_gr_ok(gr_session_new(r->p, so, &r->s, r->st), r->st);
}

static void run_open(run *r, const char *text)
{
    gr_session_options so = {.seed = 5};
    run_open_with(r, text, gr_test_options(), &so);
}

static void run_close(run *r)
{
    gr_session_free(r->s);
    gr_program_free(r->p);
    gr_status_free(r->st);
}

/* One run of target `name`, its values into out (bytes of them). */
static void fetch(run *r, const char *name, void *out, size_t bytes, const gr_feed *feed)
{
    gr_fetch f = {name, out, bytes, NULL};
    assert_gr_ok(gr_run(r->s, name, feed, feed ? 1 : 0, &f, 1, r->st), r->st);
}

/* |count/n - p| within 5 standard errors (a correct kernel fails about
 * once in 3.5 million checks). */
static void check_freq(const char *what, int64_t count, int64_t n, double p)
{
    double f = (double)count / (double)n, se = sqrt(p * (1 - p) / (double)n);
    if (fabs(f - p) > 5 * se + 1e-12)
        fail_msg("%s: frequency %.5f, want %.5f (5 standard errors: %.5f)", what, f, p, 5 * se);
}

/* text does not compile: an error at inline.graph:1, saying want, with
 * the line quoted and a caret under the argument or call. */
static void draw_fails(const char *text, const char *want)
{
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_code c = gr_compile_string("inline.graph", text, strlen(text), NULL, &p, st);
    const char *msg = gr_status_message(st);
    if (c != GR_ERR_COMPILE || !strstr(msg, want) || strncmp(msg, "inline.graph:1:", 15) ||
        !strstr(msg, text) || !strchr(msg, '^'))
        fail_msg("compiling %s: got %s '%s', want '%s' with a caret", text, gr_code_name(c), msg,
                 want);
    gr_status_free(st);
}

enum { NB = 40000 };

/* bernoulli(0.3, ...) is 1 three times in ten; a tensor p broadcasts over
 * the shape, p = 0 never and p = 1 always. */
static void test_bernoulli_draws_ones_with_probability_p(void **state)
{
    (void)state;
    run r;
    run_open(&r, "b = bernoulli(0.3, [40000])\nc = bernoulli([0.0, 1.0, 0.8], shape=[10000, 3])\n");
    static float b[NB], c[30000];
    fetch(&r, "b", b, sizeof b, NULL);
    fetch(&r, "c", c, sizeof c, NULL);
    int64_t ones = 0, col[3] = {0};
    for (int i = 0; i < NB; i++) {
        assert_true(b[i] == 0.0f || b[i] == 1.0f);
        ones += b[i] == 1.0f;
    }
    check_freq("bernoulli(0.3)", ones, NB, 0.3);
    for (int i = 0; i < 30000; i++) col[i % 3] += c[i] == 1.0f;
    assert_int_equal(col[0], 0);
    assert_int_equal(col[1], 10000);
    check_freq("bernoulli([.., 0.8])", col[2], 10000, 0.8);
    run_close(&r);
}

/* A draw bound to a name at the top level is fetchable by that name, and
 * every expression reading the name reads the same draw (one per run),
 * while the name still initialises a var. */
static void test_a_named_draw_is_one_draw(void **state)
{
    (void)state;
    run r;
    run_open(&r, "noise = normal([2, 3], std=0.5)\n"
                 "var w = noise\n"
                 "both = concat([noise, noise * 2 - noise], axis=0)\n"
                 "u = uniform([4], low=2, high=3)\n");
    float a[6], b[6], both[12], u[4];
    fetch(&r, "noise", a, sizeof a, NULL);
    fetch(&r, "noise", b, sizeof b, NULL);
    assert_true(memcmp(a, b, sizeof a) != 0); /* fresh each run */
    fetch(&r, "both", both, sizeof both, NULL);
    for (int i = 0; i < 6; i++) assert_float_equal(both[i], both[6 + i], 1e-6f);
    fetch(&r, "u", u, sizeof u, NULL);
    for (int i = 0; i < 4; i++) assert_true(u[i] >= 2.0f && u[i] < 3.0f);
    fetch(&r, "w", a, sizeof a, NULL); /* a variable, initialised by the spec */
    fetch(&r, "w", b, sizeof b, NULL);
    assert_memory_equal(a, b, sizeof a);
    run_close(&r);
}

/* categorical on logits log(1), log(2), log(3) draws 1:2:3; a row of equal
 * logits draws uniformly; a logit 100 below the others is never drawn. */
static void test_categorical_draws_softmax_of_each_row(void **state)
{
    (void)state;
    run r;
    run_open(&r, "l = [[0.0, 0.69314718, 1.09861229, -100.0], [5.0, 5.0, 5.0, 5.0]]\n"
                 "y = categorical(l, 20000)\n");
    static int32_t y[2 * 20000];
    fetch(&r, "y", y, sizeof y, NULL);
    int64_t n[2][4] = {{0}};
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 20000; j++) {
            int32_t id = y[b * 20000 + j];
            assert_true(id >= 0 && id < 4);
            n[b][id]++;
        }
    assert_int_equal(n[0][3], 0);
    for (int k = 0; k < 3; k++) check_freq("categorical row 0", n[0][k], 20000, (k + 1) / 6.0);
    for (int k = 0; k < 4; k++) check_freq("categorical row 1", n[1][k], 20000, 0.25);
    run_close(&r);
}

/* sample() on weights 0, 1, 0, 3, 6, 0 draws 1, 3 and 4 one, three and six
 * times in ten, never a zero; the shape may be a list. */
static void test_sample_follows_weights_and_never_draws_a_zero(void **state)
{
    (void)state;
    run r;
    run_open(&r, "w = [0.0, 1.0, 0.0, 3.0, 6.0, 0.0]\nids = sample(w, [100, 300])\n");
    static int32_t ids[30000];
    fetch(&r, "ids", ids, sizeof ids, NULL);
    int64_t n[6] = {0};
    for (int i = 0; i < 30000; i++) {
        assert_true(ids[i] >= 0 && ids[i] < 6);
        n[ids[i]]++;
    }
    assert_true(n[0] == 0 && n[2] == 0 && n[5] == 0);
    check_freq("sample id 1", n[1], 30000, 0.1);
    check_freq("sample id 3", n[3], 30000, 0.3);
    check_freq("sample id 4", n[4], 30000, 0.6);
    run_close(&r);
}

enum { V = 50000, NS = 2560 };

/* Negative sampling over a fed table of counts^0.75 (word2vec's) with
 * every odd id at 0: only even ids, in proportion; and the time per step
 * of sample(weights[50000], 2560). */
static void test_sample_from_a_fed_table_of_50000(void **state)
{
    (void)state;
    run r;
    run_open(&r, "input c: f32[50000]\nids = sample(exp(0.75 * log(c + 1e-30)), 2560)\n");
    static float c[V];
    static int32_t ids[NS];
    double total = 0, hot = 0;
    for (int i = 0; i < V; i++) {
        c[i] = i % 2 ? 0.0f : (float)(1 + (i % 97));
        double w = i % 2 ? 0 : pow(c[i], 0.75);
        total += w, hot += i < 1000 ? w : 0;
    }
    gr_feed feed = {"c", c, sizeof c};
    int64_t low = 0, draws = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int step = 0; step < 40; step++) {
        fetch(&r, "ids", ids, sizeof ids, &feed);
        for (int i = 0; i < NS; i++) {
            assert_true(ids[i] >= 0 && ids[i] < V && ids[i] % 2 == 0);
            low += ids[i] < 1000, draws++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    check_freq("ids below 1000", low, draws, hot / total);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3);
    printf("sample(weights[50000], 2560), weights computed from a feed: %.0f us per step\n",
           us / 40);
    run_close(&r);
    gr_session_options so = {.seed = 5, .profile = 1};
    gr_compile_options co = {.devices = "cpu:0"};
    run_open_with(&r, "var t = uniform([50000], low=0, high=1)\nids = sample(t, 2560)\n", &co, &so);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int step = 0; step < 200; step++) fetch(&r, "ids", ids, sizeof ids, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3);
    gr_profile_row rows[8];
    int n = gr_session_profile(r.s, rows, 8);
    for (int i = 0; i < n && i < 8; i++)
        if (strcmp(rows[i].op, "categorical") == 0)
            printf("sample(weights[50000], 2560) on the CPU, its kernel: %.0f us a call\n",
                   rows[i].seconds / rows[i].calls * 1e6);
    printf("sample(weights[50000], 2560), weights a variable: %.0f us per step\n", us / 200);
    run_close(&r);
}

#define DRAWS                                                                                      \
    "var w = zeros([1])\ninput x: f32[4]\nb = bernoulli(0.5, [64]) + sum(x)\ny = "                 \
    "categorical([[0.0, 1.0, 2.0], [1.0, "                                                         \
    "1.0, 0.0]], 64)\nz = sample([1.0, 2.0, 3.0, 0.5, 0.25], 64)\n"

/* The k-th run's b, y and z (64 each) of a session seeded `seed`. */
static void draws_at(const gr_compile_options *co, const gr_session_options *so, int k,
                     int32_t *out)
{
    run r;
    run_open_with(&r, DRAWS, co, so);
    static float x[4];
    float b[64];
    gr_feed feed = {"x", x, sizeof x};
    for (int i = 0; i <= k; i++) {
        gr_fetch f[3] = {{"b", b, sizeof b, NULL},
                         {"y", out + 64, 128 * sizeof *out, NULL},
                         {"z", out + 192, 64 * sizeof *out, NULL}};
        assert_gr_ok(gr_run(r.s, "b", &feed, 1, f, 3, r.st), r.st);
    }
    for (int i = 0; i < 64; i++) out[i] = (int32_t)b[i];
    run_close(&r);
}

/* The same seed draws the same bits with 1 or 4 threads, 1 or 2
 * executors, on the CPU or the simulated GPU; another run or another seed
 * draws others. */
static void test_draws_are_seeded_fresh_and_the_same_everywhere(void **state)
{
    (void)state;
    static int32_t a[256], b[256], c[256], d[256], e[256];
    gr_compile_options cpu = {.devices = "cpu:0"},
                       sim = {.devices = "cpu:0,sim:0", .cpu_as_gpu = 1};
    gr_session_options one = {.seed = 9, .threads = 1},
                       two = {.seed = 9, .threads = 4, .executors = 2};
    draws_at(&cpu, &one, 2, a);
    draws_at(&cpu, &two, 2, b);
    draws_at(&sim, &one, 2, c);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(a, c, sizeof a);
    draws_at(&cpu, &one, 3, d);
    gr_session_options other = {.seed = 10, .threads = 1};
    draws_at(&cpu, &other, 2, e);
    for (int part = 0; part < 4; part++) { /* b, y's two rows, z: each differs */
        assert_memory_not_equal(a + 64 * part, d + 64 * part, 64 * sizeof *a);
        assert_memory_not_equal(a + 64 * part, e + 64 * part, 64 * sizeof *a);
    }
}

/* A fresh session of the same seed, restored from a checkpoint saved
 * after three runs, draws on its next run what the original draws on its
 * fourth. */
static void test_draws_continue_after_a_restore(void **state)
{
    (void)state;
    char path[] = "/tmp/gr_sample_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    gr_session_options so = {.seed = 9, .threads = 1};
    static int32_t want[256], got[256];
    draws_at(gr_test_options(), &so, 3, want);
    run r, q;
    run_open_with(&r, DRAWS, gr_test_options(), &so);
    static float x[4];
    gr_feed feed = {"x", x, sizeof x};
    float b[64];
    for (int i = 0; i < 3; i++) fetch(&r, "b", b, sizeof b, &feed);
    assert_gr_ok(gr_session_save(r.s, path, r.st), r.st);
    run_close(&r);
    run_open_with(&q, DRAWS, gr_test_options(), &so);
    assert_gr_ok(gr_session_restore(q.s, path, NULL, q.st), q.st);
    gr_fetch f[3] = {{"b", b, sizeof b, NULL},
                     {"y", got + 64, 128 * sizeof *got, NULL},
                     {"z", got + 192, 64 * sizeof *got, NULL}};
    assert_gr_ok(gr_run(q.s, "b", &feed, 1, f, 3, q.st), q.st);
    for (int i = 0; i < 64; i++) got[i] = (int32_t)b[i];
    assert_memory_equal(want, got, sizeof want);
    run_close(&q);
    unlink(path);
}

static void test_bad_arguments_are_compile_errors(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"b = bernoulli(1.5, [4])", "inline.graph:1:15: error: 'p' must be in [0, 1], got 1.5"},
        {"b = bernoulli(-0.1, [4])", "'p' must be in [0, 1], got -0.1"},
        {"b = bernoulli(0.5, [0])", "dimension 0 of the shape is 0"},
        {"b = bernoulli([0.5, 0.1], [3])",
         "'p' of type f32[2] does not broadcast to the shape f32[3]"},
        {"b = bernoulli(\"x\", [3])", "'p' must be a number in [0, 1] or a tensor, got"},
        {"y = categorical([[1.0, 2.0]], 0)", "'n' must be a positive number of draws, got 0"},
        {"y = categorical([1.0, 2.0], 3)",
         "'logits' must be f32[B, K], a row of logits per draw, got f32[2]"},
        {"y = categorical([[1.0, 2.0]], 2.5)", "categorical(): 'n' must be an integer"},
        {"y = sample([[1.0, 2.0]], 3)",
         "'weights' must be f32[V], a table of weights, got f32[1,2]"},
        {"y = sample([1.0, 2.0], -3)", "'n' must be a positive number of draws, got -3"},
        {"y = sample([1.0, -2.0], 3)", "'weights' must not be negative, got -2 at [1]"},
        {"y = sample(zeros([5]), 3)", "'weights' are all zero: no id can be drawn"},
        {"y = sample([1.0, 2.0])", "sample() is missing argument 'n'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) draw_fails(bad[k][0], bad[k][1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bernoulli_draws_ones_with_probability_p),
        cmocka_unit_test(test_a_named_draw_is_one_draw),
        cmocka_unit_test(test_categorical_draws_softmax_of_each_row),
        cmocka_unit_test(test_sample_follows_weights_and_never_draws_a_zero),
        cmocka_unit_test(test_sample_from_a_fed_table_of_50000),
        cmocka_unit_test(test_draws_are_seeded_fresh_and_the_same_everywhere),
        cmocka_unit_test(test_draws_continue_after_a_restore),
        cmocka_unit_test(test_bad_arguments_are_compile_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
