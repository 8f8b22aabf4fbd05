/* test_staleness.c - gr_session_staleness (issue 29): one executor's
 * updates are never stale, Hogwild! executors racing on the same variables
 * count the updates that landed under them, and gr_staleness_between reads
 * an interval's mean, 99th percentile and maximum. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

/* Two trained variables and a step light enough for threads to overlap. */
static const char MODEL[] = "data d = gaussian(n=256, dims=[8], batch=16, seed=1, shuffle=true)\n"
                            "var w = glorot([8, 4])\n"
                            "var b = zeros([4])\n"
                            "loss = mean((d.x @ w + b) * (d.x @ w + b))\n"
                            "train = sgd(0.01).minimize(loss)\n";

static gr_session *open_session(gr_program **p, int executors, gr_status *st)
{
    gr_session *s;
    gr_session_options so = {.threads = executors, .executors = executors, .seed = 1};
    assert_gr_ok(gr_compile_string("stale.graph", MODEL, strlen(MODEL), gr_test_options(), p, st),
                 st);
    assert_gr_ok(gr_session_new(*p, &so, &s, st), st);
    return s;
}

static void test_one_executor_is_never_stale(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p;
    gr_session *s = open_session(&p, 1, st);
    for (int i = 0; i < 40; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, NULL, 0, st), st);
    gr_staleness now, zero = {0};
    gr_session_staleness(s, &now);
    assert_int_equal(now.updates, 80); /* 40 steps, 2 variables */
    assert_int_equal(now.count[0], 80);
    assert_int_equal(now.sum, 0);
    double mean = -1;
    uint64_t p99 = 9, max = 9;
    gr_staleness_between(&now, &zero, &mean, &p99, &max);
    assert_true(mean == 0.0);
    assert_int_equal(p99, 0);
    assert_int_equal(max, 0);
    /* evaluating updates nothing */
    float l;
    gr_fetch f = {"loss", &l, sizeof l, NULL};
    assert_gr_ok(gr_run(s, "loss", NULL, 0, &f, 1, st), st);
    gr_staleness after;
    gr_session_staleness(s, &after);
    assert_int_equal(after.updates, 80);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

typedef struct racer {
    gr_session *s;
    pthread_barrier_t *go;
    int steps, failures;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    gr_status *st = gr_status_new();
    pthread_barrier_wait(r->go);
    for (int i = 0; i < r->steps; i++)
        if (gr_run(r->s, "train", NULL, 0, NULL, 0, st) != GR_OK) r->failures++;
    gr_status_free(st);
    return NULL;
}

/* Two threads on two executors, started together: every update is
 * counted, and some were stale.  The threads overlap unless one finishes
 * its round within a scheduler slice (a loaded machine, one free core), so
 * each round runs twice as many steps as the one before until they do. */
static void test_hogwild_executors_count_stale_updates(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p;
    gr_session *s = open_session(&p, 2, st);
    gr_staleness now = {0};
    uint64_t steps = 0;
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    for (int n = 200; n <= 200 << 9 && now.sum == 0; n *= 2) {
        racer r[2] = {{s, &go, n, 0}, {s, &go, n, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        assert_int_equal(r[0].failures + r[1].failures, 0);
        steps += 2 * (uint64_t)n;
        gr_session_staleness(s, &now);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(now.updates, 2 * steps); /* 2 variables a step */
    assert_true(now.sum > 0);
    uint64_t total = 0, sum = 0;
    for (int k = 0; k < GR_STALENESS_BUCKETS; k++)
        total += now.count[k], sum += (uint64_t)k * now.count[k];
    assert_int_equal(total, now.updates);
    if (now.count[GR_STALENESS_BUCKETS - 1] == 0) assert_int_equal(sum, now.sum);
    gr_staleness zero = {0};
    double mean;
    uint64_t max;
    gr_staleness_between(&now, &zero, &mean, NULL, &max);
    assert_true(mean > 0.0);
    assert_true(max >= 1);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* --stale-lr (gr_session_options.stale_lr): every update of w steps it by
 * exactly lr / 4 = 2^-10 per element times its factor 1 / max(1, s), and v
 * makes the step long enough for two executors to overlap.  Updates take
 * their variable's lock, so none is lost to a race: w moves by exactly the
 * sum of its updates' factors times 2^-10 (a sum of 1s is exact). */
static const char STEP_MODEL[] = "data d = gaussian(n=256, dims=[64], batch=32, seed=1)\n"
                                 "var w = zeros([4])\n"
                                 "var v = glorot([64, 64])\n"
                                 "loss = mean(w) + mean((d.x @ v) * (d.x @ v))\n"
                                 "train = sgd(0.00390625).minimize(loss)\n";
#define W_STEP (1.0 / 1024)

static gr_session *open_stepper(gr_program **p, int executors, int stale_lr, gr_status *st)
{
    gr_session *s;
    gr_session_options so = {.threads = executors,
                             .executors = executors,
                             .seed = 1,
                             .locking = 1,
                             .stale_lr = stale_lr};
    assert_gr_ok(
        gr_compile_string("step.graph", STEP_MODEL, strlen(STEP_MODEL), gr_test_options(), p, st),
        st);
    assert_gr_ok(gr_session_new(*p, &so, &s, st), st);
    return s;
}

/* One round: w set to 0, n steps on each of `threads` threads at once;
 * returns how far w[0] moved, and the round's largest staleness in *max. */
static double round_moves(gr_session *s, int threads, int n, uint64_t *max)
{
    gr_status *st = gr_status_new();
    float w[4] = {0};
    assert_gr_ok(gr_variable_write(s, "w", w, sizeof w, st), st);
    gr_staleness before, now;
    gr_session_staleness(s, &before);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    racer r[2] = {{s, &go, n, 0}, {s, &go, n, 0}};
    pthread_t t[2];
    for (int i = 0; i < threads; i++) assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    assert_int_equal(r[0].failures + r[1].failures, 0);
    gr_session_staleness(s, &now);
    gr_staleness_between(&now, &before, NULL, NULL, max);
    assert_gr_ok(gr_variable_read(s, "w", w, sizeof w, st), st);
    gr_status_free(st);
    return -(double)w[0];
}

/* With --stale-lr, rounds of two racing executors until one had an update
 * of staleness 2 or more: then w moved less than one unscaled step per
 * update, and never less than each update scaled by the round's largest
 * staleness.  Without the scaling w moves exactly 2n steps every round. */
static void test_stale_lr_scales_stale_updates(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p;
    gr_session *s = open_stepper(&p, 2, 1, st);
    const int n = 100;
    double moved = 2 * n * W_STEP;
    for (int round = 0; round < 200 && moved > (2 * n - 0.25) * W_STEP; round++) {
        uint64_t max = 0;
        moved = round_moves(s, 2, n, &max);
        assert_true(moved <= 2 * n * W_STEP * (1 + 1e-5));
        assert_true(moved >= 2 * n * W_STEP / (double)(max > 1 ? max : 1) * (1 - 1e-5));
    }
    assert_true(moved <= (2 * n - 0.25) * W_STEP);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Off by default: racing executors with stale updates still move w by
 * exactly one step per update.  On, one executor (never stale: a
 * synchronous run) moves it as much, and trains v to the same bits. */
static void test_stale_lr_is_off_by_default_and_a_no_op_when_sync(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p[3];
    gr_session *off = open_stepper(&p[0], 2, 0, st);
    uint64_t max = 0;
    for (int round = 0; round < 200 && max < 2; round++)
        assert_true(round_moves(off, 2, 100, &max) == 200 * W_STEP);
    assert_true(max >= 2);
    gr_session *one[2] = {open_stepper(&p[1], 1, 0, st), open_stepper(&p[2], 1, 1, st)};
    float v[2][64 * 64];
    for (int k = 0; k < 2; k++) {
        assert_true(round_moves(one[k], 1, 100, &max) == 100 * W_STEP);
        assert_int_equal(max, 0);
        assert_gr_ok(gr_variable_read(one[k], "v", v[k], sizeof v[k], st), st);
    }
    assert_memory_equal(v[0], v[1], sizeof v[0]);
    for (int k = 0; k < 3; k++) {
        gr_session_free(k ? one[k - 1] : off);
        gr_program_free(p[k]);
    }
    gr_status_free(st);
}

/* An interval of known counts: 100 updates, 90 at 0, 9 at 1, 1 at 7. */
static void test_between_reads_an_interval(void **state)
{
    (void)state;
    gr_staleness before = {0}, now = {0};
    before.count[0] = 5, before.count[3] = 2, before.updates = 7, before.sum = 6;
    now = before;
    now.count[0] += 90, now.count[1] += 9, now.count[7] += 1;
    now.updates += 100, now.sum += 9 + 7;
    double mean;
    uint64_t p99, max;
    gr_staleness_between(&now, &before, &mean, &p99, &max);
    assert_true(mean > 0.1599 && mean < 0.1601);
    assert_int_equal(p99, 1); /* 99 of the 100 are at 1 or below */
    assert_int_equal(max, 7);
    now.count[0] += 900, now.updates += 900; /* 1000: the 99th percentile is 0 */
    gr_staleness_between(&now, &before, NULL, &p99, NULL);
    assert_int_equal(p99, 0);
    gr_staleness_between(&before, &before, &mean, &p99, &max);
    assert_true(mean == 0.0);
    assert_int_equal(p99 + max, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_executor_is_never_stale),
        cmocka_unit_test(test_hogwild_executors_count_stale_updates),
        cmocka_unit_test(test_between_reads_an_interval),
        cmocka_unit_test(test_stale_lr_scales_stale_updates),
        cmocka_unit_test(test_stale_lr_is_off_by_default_and_a_no_op_when_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
