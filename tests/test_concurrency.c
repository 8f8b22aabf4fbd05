/* test_concurrency.c - many threads calling gr_run on one session: Hogwild!
 * updates without locks, exact sums with locking=true, distinct batches for
 * concurrent executors, and training that still converges. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"
#include "runtime/session/session_int.h" /* the readers' lock, for the slow-open test */

typedef struct worker {
    gr_session *s;
    const char *target;
    const char *fetch;
    int steps;
    float *out; /* steps * fetch_elems values, or NULL */
    int fetch_elems;
    int failures;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    gr_status *st = gr_status_new();
    for (int i = 0; i < w->steps; i++) {
        float *dst = w->out ? w->out + (size_t)i * (size_t)w->fetch_elems : NULL;
        gr_fetch f = {w->fetch, dst, sizeof(float) * (size_t)w->fetch_elems, NULL};
        if (gr_run(w->s, w->target, NULL, 0, &f, dst ? 1 : 0, st) != GR_OK) w->failures++;
    }
    gr_status_free(st);
    return NULL;
}

/* Runs `target` from k threads, `steps` each; returns total failures. */
static int run_threads(gr_session *s, const char *target, int k, int steps, const char *fetch,
                       int fetch_elems, float **outs)
{
    pthread_t th[64];
    worker w[64];
    int failures = 0;
    for (int i = 0; i < k; i++) {
        w[i] = (worker){s, target, fetch, steps, outs ? outs[i] : NULL, fetch_elems, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    return failures;
}

static gr_session *session_for(const char *text, gr_program **p, gr_status *st, int locking)
{
    gr_session *s = NULL;
    gr_session_options so = {.threads = 1, .locking = locking};
    assert_gr_ok(gr_compile_string("c.graph", text, strlen(text), gr_test_options(), p, st), st);
    assert_gr_ok(gr_session_new(*p, &so, &s, st), st);
    return s;
}

/* d(-c)/dc = -1, so each sgd(1.0) step adds exactly 1 to c. */
static float count_to(int threads, int steps, const char *opt, int session_locking)
{
    char text[256];
    snprintf(text, sizeof text,
             "var c = zeros([1])\nloss = sum(c) * -1.0\ntrain = %s.minimize(loss)\n", opt);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for(text, &p, st, session_locking);
    assert_int_equal(run_threads(s, "train", threads, steps, NULL, 0, NULL), 0);
    float c = 0;
    assert_gr_ok(gr_variable_read(s, "c", &c, sizeof c, st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    return c;
}

static void test_locked_updates_sum_exactly(void **state)
{
    (void)state;
    assert_true(count_to(8, 2000, "sgd(1.0, locking=true)", 0) == 16000.0f);
    assert_true(count_to(8, 2000, "sgd(1.0)", 1) == 16000.0f); /* session-wide --locking */
}

/* Without locks, concurrent read-modify-write of c may lose increments:
 * that is Hogwild!, and the test only documents it. */
static void test_unlocked_updates_may_be_lost(void **state)
{
    (void)state;
    float c = count_to(8, 2000, "sgd(1.0)", 0);
    assert_true(c > 0.0f && c <= 16000.0f);
    print_message("hogwild counter: %.0f of 16000 increments kept (%.0f lost)\n", (double)c,
                  16000.0 - (double)c);
}

static void test_many_threads_train_and_converge(void **state)
{
    (void)state;
    const char *text = "data d = gaussian(n=2048, dims=[4], batch=16, seed=5)\n"
                       "w_true = [[1.0], [-2.0], [0.5], [3.0]]\n"
                       "var w = zeros([4, 1])\nvar b = zeros([1])\n"
                       "loss = mse(d.x @ w + b, d.x @ w_true - 1.0)\n"
                       "train = sgd(0.05).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for(text, &p, st, 0);
    float first = 0, last = 0;
    gr_fetch f = {"train/loss", &first, sizeof first, NULL};
    assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
    /* 16 threads on a 2-core machine: more threads than cores */
    assert_int_equal(run_threads(s, "train", 16, 200, NULL, 0, NULL), 0);
    f.data = &last;
    assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
    if (!(last < first / 100)) fail_msg("loss %g -> %g", (double)first, (double)last);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Row i of the CSV holds the value i: fetching the batch tells which
 * examples a run took. */
static void test_concurrent_executors_never_share_a_batch(void **state)
{
    (void)state;
    enum { N = 240, B = 8, K = 6, EPOCHS = 3, PER = N / B * EPOCHS / K };
    char dir[] = "/tmp/gr_conc_XXXXXX", path[64], text[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    FILE *fp = fopen(path, "w");
    for (int i = 0; i < N; i++) fprintf(fp, "%d,%d\n", i, i % 3);
    fclose(fp);
    snprintf(text, sizeof text, "data d = csv(\"%s\", batch=%d, shuffle=true)\nxs = d.x * 1.0\n",
             path, B);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for(text, &p, st, 0);
    float *outs[K];
    for (int k = 0; k < K; k++) outs[k] = calloc(PER * B, sizeof(float));
    assert_int_equal(run_threads(s, "xs", K, PER, "xs", B, outs), 0);
    int seen[N] = {0};
    for (int k = 0; k < K; k++)
        for (int i = 0; i < PER * B; i++) seen[(int)outs[k][i]]++;
    for (int i = 0; i < N; i++)
        if (seen[i] != EPOCHS)
            fail_msg("example %d taken %d times in %d epochs", i, seen[i], EPOCHS);
    for (int k = 0; k < K; k++) free(outs[k]);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    unlink(path);
    rmdir(dir);
}

/* gr_variable_read/write beside gr_run see and set whole steps: with
 * locked updates every element of c moves together, so a copy that
 * caught an update halfway would hold two values. */
enum { SNAP_N = 1 << 16 };

typedef struct snapper {
    gr_session *s;
    atomic_int stop;
    int torn, reads;
} snapper;

static int all_equal(const float *v, int n)
{
    for (int i = 1; i < n; i++)
        if (v[i] != v[0]) return 0;
    return 1;
}

static void *snap(void *arg)
{
    snapper *sn = arg;
    float *v = malloc(sizeof(float) * SNAP_N);
    gr_status *st = gr_status_new();
    for (int k = 0; !atomic_load(&sn->stop); k++) {
        if (gr_variable_read(sn->s, "c", v, sizeof(float) * SNAP_N, st) != GR_OK) break;
        sn->torn += !all_equal(v, SNAP_N);
        sn->reads++;
        if (k % 8 == 0) { /* and writes land whole too */
            for (int i = 0; i < SNAP_N; i++) v[i] = (float)(1000 * k);
            if (gr_variable_write(sn->s, "c", v, sizeof(float) * SNAP_N, st) != GR_OK) break;
        }
    }
    gr_status_free(st);
    free(v);
    return NULL;
}

static void test_variable_access_beside_runs_sees_whole_steps(void **state)
{
    (void)state;
    char text[256];
    snprintf(text, sizeof text,
             "var c = zeros([%d])\nloss = sum(c) * -1.0\ntrain = sgd(1.0, "
             "locking=true).minimize(loss)\n",
             SNAP_N);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for(text, &p, st, 0);
    snapper sn = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, snap, &sn), 0);
    assert_int_equal(run_threads(s, "train", 2, 1500, NULL, 0, NULL), 0);
    atomic_store(&sn.stop, 1);
    pthread_join(t, NULL);
    assert_true(sn.reads > 0);
    assert_int_equal(sn.torn, 0);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A thread holding a zero-copy view of a session another thread frees:
 * the view ends with the session, and its slot is free again (it once
 * stayed taken, and the ninth such session refused views). */
static void *free_session(void *arg)
{
    gr_session_free(arg);
    return NULL;
}

static void test_views_end_when_another_thread_frees_the_session(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for("var c = ones([4])\ny = c * 2.0\n", &p, st, 0);
    gr_session_free(s);
    for (int i = 0; i < 20; i++) {
        gr_session_options so = {.threads = 1};
        assert_gr_ok(gr_session_new(p, &so, &s, st), st);
        gr_fetch f = {"y", NULL, 0, NULL}; /* zero-copy: the view stays with this thread */
        assert_gr_ok(gr_run(s, "y", NULL, 0, &f, 1, st), st);
        assert_true(((const float *)f.view)[3] == 2.0f);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, free_session, s), 0);
        pthread_join(t, NULL);
    }
    gr_program_free(p);
    gr_status_free(st);
}

/* Opening a data source (which may load a data set for seconds) happens
 * outside the session's lock: runs of a plan that is ready go on meanwhile.
 * The source here is a FIFO that nobody writes yet, so opening it blocks
 * until the test says so. */
typedef struct opener {
    gr_session *s;
    gr_code code;
} opener;

static void *open_slow_source(void *arg)
{
    opener *o = arg;
    o->code = gr_prepare(o->s, "slow", NULL, 0, NULL);
    return NULL;
}

/* Loading a source can take seconds: the opener holds only the readers'
 * lock meanwhile, so runs of ready plans go on.  Holding that lock here
 * stands for a slow load (data files must be regular files, so a FIFO
 * that blocks the open can no longer play it). */
static void test_opening_a_source_does_not_stall_other_runs(void **state)
{
    (void)state;
    char dir[] = "/tmp/gr_slow_XXXXXX", path[64], text[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("1,0\n2,1\n", f);
    fclose(f);
    snprintf(text, sizeof text,
             "data d = csv(\"%s\", batch=2)\nslow = sum(d.x)\nvar c = ones([2])\nfast = sum(c)\n",
             path);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session_for(text, &p, st, 0);
    pthread_mutex_lock(&s->readers_mu); /* the open now waits as a slow load would */
    opener o = {s, GR_ERR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_slow_source, &o), 0);
    usleep(100 * 1000); /* let it reach the open */
    float v = 0;
    gr_fetch fe = {"fast", &v, sizeof v, NULL};
    for (int i = 0; i < 100; i++) assert_gr_ok(gr_run(s, "fast", NULL, 0, &fe, 1, st), st);
    assert_true(v == 2.0f);
    pthread_mutex_unlock(&s->readers_mu); /* release the opener */
    pthread_join(t, NULL);
    assert_int_equal(o.code, GR_OK);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locked_updates_sum_exactly),
        cmocka_unit_test(test_unlocked_updates_may_be_lost),
        cmocka_unit_test(test_many_threads_train_and_converge),
        cmocka_unit_test(test_concurrent_executors_never_share_a_batch),
        cmocka_unit_test(test_variable_access_beside_runs_sees_whole_steps),
        cmocka_unit_test(test_views_end_when_another_thread_frees_the_session),
        cmocka_unit_test(test_opening_a_source_does_not_stall_other_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
