/* test_soak.c - a soak test: one session, two training targets on two
 * devices sharing their variables, several Hogwild! threads per target,
 * while a checkpointer saves (distinct files and one path overwritten, each
 * overwrite restored at once into a second session) and an evaluator runs
 * gr_eval.  Nothing may hang or fail, every checkpoint must load into a
 * fresh session with finite variables and a step that matches the runs done
 * around its save, and the model must learn.
 *
 * The CTest run stops after a fixed amount of work (SOAK_SAVES saves,
 * SOAK_EVALS evaluations, SOAK_MIN_STEPS steps per thread), never after a
 * time.  SOAK_SECONDS=N runs the same scenario for at least N seconds
 * instead (tests/soak.sh), verifying and deleting old distinct checkpoints
 * as it goes so the folder stays small.  A watchdog aborts with each
 * thread's state when a thread stays inside one call for
 * SOAK_STALL_SECONDS (default 120): a deadlock fails the test with a
 * message instead of hanging CTest.
 *
 * Other knobs: SOAK_THREADS (per target, default 3), SOAK_CKPT_EVERY and
 * SOAK_EVAL_EVERY (training steps between saves / evaluations),
 * SOAK_DATA=fashion (Fashion-MNIST instead of the synthetic teacher task),
 * SOAK_KEEP (distinct checkpoints kept on disk; 0 = all). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

/* ---- the model ---- */

/* Synthetic: 4 classes, the label is the argmax of x @ teacher (chance is
 * 0.25).  The data sections define prep, train_labels(t) and test_y for
 * the shared body. */
static const char gauss_data[] =
    "param lr = 0.02\n"
    "param hidden = 32\n"
    "param classes = 4\n"
    "data train = gaussian(n=65536, dims=[8], batch=32, seed=1, shuffle=true)\n"
    "data test  = gaussian(n=1024, dims=[8], batch=256, seed=2)\n"
    "teacher = [[1.0, -0.5, 0.2, 0.0], [0.3, 1.0, -0.7, 0.1], [-0.8, 0.2, 1.0, 0.4],\n"
    "           [0.1, -0.3, 0.5, 1.0], [0.6, 0.4, -0.2, -0.9], [-0.2, 0.8, 0.3, -0.4],\n"
    "           [0.5, -0.6, -0.4, 0.7], [-0.4, 0.1, 0.9, -0.3]]\n"
    "fn prep(x) { return x }\n"
    "fn train_labels(t) { return argmax(shard(train.x, t, 2) @ teacher) }\n"
    "test_y = argmax(test.x @ teacher)\n";

/* Fashion-MNIST: 10 classes (chance is 0.1). */
static const char fashion_data[] =
    "param lr = 0.02\n"
    "param hidden = 128\n"
    "param classes = 10\n"
    "data train = idx(\"fashion-mnist/train-images-idx3-ubyte.gz\",\n"
    "                 \"fashion-mnist/train-labels-idx1-ubyte.gz\", batch=64, shuffle=true)\n"
    "data test  = idx(\"fashion-mnist/t10k-images-idx3-ubyte.gz\",\n"
    "                 \"fashion-mnist/t10k-labels-idx1-ubyte.gz\", batch=500)\n"
    "fn prep(x) { return x / 255 }\n"
    "fn train_labels(t) { return shard(train.y, t, 2) }\n"
    "test_y = test.y\n";

/* Tower t runs on cpu:t and both share the variables (made on cpu:0), so
 * train_1 and the evaluation (on cpu:1) are two partitions with transfers
 * both ways.  Each target has its own momentum slots. */
static const char body[] =
    "fn dense(x, units, act=relu) {\n"
    "  var w = glorot([cols(x), units])\n"
    "  var b = zeros([units])\n"
    "  return act(x @ w + b)\n"
    "}\n"
    "fn net(x) {\n"
    "  h = dense(prep(x), hidden) as fc1\n"
    "  return dense(h, classes, act=none) as out\n"
    "}\n"
    "for t in 0..2 {\n"
    "  scope tower @cpu:t {\n"
    "    scope model reuse(t > 0) {\n"
    "      l[t] = mean(softmax_xent(net(shard(train.x, t, 2)), train_labels(t)))\n"
    "    }\n"
    "  }\n"
    "}\n"
    "scope tower @cpu:1 { scope model reuse { test_logits = net(test.x) } }\n"
    "test_loss = mean(softmax_xent(test_logits, test_y))\n"
    "accuracy  = mean(argmax(test_logits) == test_y)\n"
    "train_0   = momentum(lr, 0.9).minimize(l[0]) @cpu:0\n"
    "train_1   = momentum(lr, 0.9).minimize(l[1]) @cpu:1\n";

#define FASHION_TEST "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

enum { SEED = 1, TARGETS = 2, MAX_PER_TARGET = 16, MAX_WORKERS = TARGETS * MAX_PER_TARGET };

/* ---- configuration ---- */

typedef struct soak_cfg {
    double seconds;      /* 0: stop after the fixed amount of work below */
    int per_target;      /* threads calling gr_run on each target */
    long ckpt_every;     /* training steps between saves */
    long eval_every;     /* training steps between evaluations */
    long min_saves;      /* saves done by the checkpointer before stopping */
    long min_evals;      /* evaluations done by the evaluator before stopping */
    long min_steps;      /* steps each worker does before stopping */
    long keep;           /* distinct checkpoints kept on disk; 0 = all */
    int stall_seconds;   /* the watchdog's limit */
    int fashion;         /* Fashion-MNIST instead of the synthetic task */
    double min_accuracy; /* what the final model must reach */
} soak_cfg;

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static soak_cfg cfg_from_env(void)
{
    soak_cfg c = {.seconds = (double)env_long("SOAK_SECONDS", 0)};
    int long_run = c.seconds > 0;
    c.per_target = (int)env_long("SOAK_THREADS", 3);
    if (c.per_target < 1) c.per_target = 1;
    if (c.per_target > MAX_PER_TARGET) c.per_target = MAX_PER_TARGET;
    c.ckpt_every = env_long("SOAK_CKPT_EVERY", long_run ? 2000 : 200);
    c.eval_every = env_long("SOAK_EVAL_EVERY", long_run ? 1000 : 300);
    c.min_saves = env_long("SOAK_SAVES", 40);
    c.min_evals = env_long("SOAK_EVALS", 20);
    c.min_steps = env_long("SOAK_MIN_STEPS", 1000);
    c.keep = env_long("SOAK_KEEP", long_run ? 16 : 0);
    c.stall_seconds = (int)env_long("SOAK_STALL_SECONDS", 120);
    if (c.stall_seconds < 1) c.stall_seconds = 1;
    const char *data = getenv("SOAK_DATA");
    c.fashion = data && strcmp(data, "fashion") == 0;
    c.min_accuracy = c.fashion ? 0.6 : 0.5; /* chance: 0.1 and 0.25 */
    if (c.ckpt_every < 1) c.ckpt_every = 1;
    if (c.eval_every < 1) c.eval_every = 1;
    return c;
}

/* ---- shared state ---- */

/* What a thread is doing, for the watchdog's report. */
typedef enum phase {
    PH_IDLE,
    PH_RUN,
    PH_SAVE,
    PH_RESTORE,
    PH_EVAL,
    PH_VERIFY,
    PH_WAIT,
    PH_DONE
} phase;
static const char *const phase_name[] = {"idle",
                                         "in gr_run",
                                         "in gr_session_save",
                                         "restoring",
                                         "in gr_eval",
                                         "verifying",
                                         "waiting for the other threads",
                                         "finished"};

/* A thread as the watchdog sees it: what it is doing, and a count of the
 * operations it finished. */
typedef struct role {
    atomic_int phase;
    atomic_long beats;
} role;

/* One distinct checkpoint and the bounds its step must lie in. */
typedef struct ckpt_rec {
    char path[320];
    long lo, hi;
} ckpt_rec;

typedef struct soak soak;

typedef struct worker {
    soak *sk;
    const char *target, *loss;
    int view; /* fetch the loss zero-copy */
    role r;   /* beats: runs done */
    gr_status *st;
    pthread_t th;
} worker;

struct soak {
    soak_cfg cfg;
    gr_program *p;
    gr_session *s;
    char dir[64];
    atomic_long steps; /* training runs finished, all workers */
    atomic_int stop;
    atomic_int failed;
    pthread_mutex_t mu; /* err, recs, verified, last_* */
    char err[1024];
    worker w[MAX_WORKERS];
    int n_workers;
    /* checkpointer */
    ckpt_rec *recs; /* distinct files on disk, oldest first */
    int n_recs, cap_recs;
    long saves, distinct, overwrites, verified, last_verified_step;
    atomic_long n_saves;
    role ckpt;
    /* evaluator */
    atomic_long n_evals;
    role eval;
    double last_acc, last_loss;
    /* watchdog */
    role main;
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    int wd_done;
};

/* The first failure wins; every thread stops. */
static void soak_fail(soak *sk, const char *fmt, ...)
{
    pthread_mutex_lock(&sk->mu);
    if (!atomic_load(&sk->failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sk->err, sizeof sk->err, fmt, ap);
        va_end(ap);
        atomic_store(&sk->failed, 1);
    }
    pthread_mutex_unlock(&sk->mu);
    atomic_store(&sk->stop, 1);
}

static void role_set(role *r, phase ph)
{
    atomic_store(&r->phase, ph);
}

static void role_beat(role *r)
{
    atomic_fetch_add(&r->beats, 1);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- training threads ---- */

static void *worker_main(void *arg)
{
    worker *w = arg;
    soak *sk = w->sk;
    float loss = 0;
    gr_fetch f = {w->loss, w->view ? NULL : &loss, sizeof loss, NULL};
    while (!atomic_load(&sk->stop)) {
        role_set(&w->r, PH_RUN);
        gr_code c = gr_run(sk->s, w->target, NULL, 0, &f, 1, w->st);
        role_set(&w->r, PH_IDLE);
        if (c != GR_OK) {
            soak_fail(sk, "gr_run(%s): %s", w->target, gr_status_message(w->st));
            break;
        }
        float l = w->view ? *(const float *)f.view : loss;
        if (!isfinite(l)) {
            soak_fail(sk, "gr_run(%s): loss %g at run %ld", w->target, (double)l,
                      atomic_load(&w->r.beats));
            break;
        }
        atomic_fetch_add(&sk->steps, 1);
        role_beat(&w->r);
    }
    role_set(&w->r, PH_DONE);
    return NULL;
}

/* ---- checking a checkpoint ---- */

/* Every variable of s is finite; 0, or -1 with the first bad one in msg. */
static int vars_finite(gr_session *s, const gr_program *p, char *msg, size_t n)
{
    gr_status *st = gr_status_new();
    int bad = 0;
    for (int k = 0; k < gr_program_variable_count(p) && !bad; k++) {
        const char *name = gr_program_variable_name(p, k);
        gr_tensor *t = NULL;
        if (gr_variable_get(s, name, &t, st) != GR_OK) {
            snprintf(msg, n, "variable %s: %s", name, gr_status_message(st));
            bad = 1;
            break;
        }
        const float *v = gr_tensor_data(t);
        int64_t n_f32 = gr_tensor_dtype(t) == GR_F32 ? gr_tensor_numel(t) : 0;
        for (int64_t i = 0; i < n_f32 && !bad; i++)
            if (!isfinite(v[i])) {
                snprintf(msg, n, "variable %s[%lld] = %g", name, (long long)i, (double)v[i]);
                bad = 1;
            }
        gr_tensor_free(t);
    }
    gr_status_free(st);
    return bad ? -1 : 0;
}

/* Restores path into s and checks it: the step in [lo, hi], variables
 * finite.  0, or -1 with the reason in msg. */
static int check_restore(gr_session *s, const gr_program *p, const char *path, long lo, long hi,
                         long *step, char *msg, size_t n)
{
    gr_status *st = gr_status_new();
    gr_code c = gr_session_restore(s, path, NULL, st);
    if (c != GR_OK) snprintf(msg, n, "restore %s: %s", path, gr_status_message(st));
    gr_status_free(st);
    if (c != GR_OK) return -1;
    *step = (long)gr_session_step(s);
    if (*step < lo || *step > hi) {
        snprintf(msg, n, "%s holds step %ld; the runs done around its save say [%ld, %ld]", path,
                 *step, lo, hi);
        return -1;
    }
    char why[512];
    if (vars_finite(s, p, why, sizeof why) < 0) {
        snprintf(msg, n, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

/* A fresh session of the same program loads the file; the steps of
 * distinct files must not go down in save order.  The caller holds no
 * lock. */
static int verify_file(soak *sk, role *who, const ckpt_rec *r, char *msg, size_t n)
{
    gr_session_options so = {.threads = 1, .seed = 4242};
    gr_session *fresh = NULL;
    gr_status *st = gr_status_new();
    int rc = -1;
    long step = 0;
    if (gr_session_new(sk->p, &so, &fresh, st) != GR_OK)
        snprintf(msg, n, "fresh session: %s", gr_status_message(st));
    else if (check_restore(fresh, sk->p, r->path, r->lo, r->hi, &step, msg, n) == 0) {
        pthread_mutex_lock(&sk->mu);
        if (step < sk->last_verified_step)
            snprintf(msg, n, "%s holds step %ld, an earlier save held %ld", r->path, step,
                     sk->last_verified_step);
        else {
            sk->last_verified_step = step;
            sk->verified++;
            rc = 0;
        }
        pthread_mutex_unlock(&sk->mu);
    }
    gr_session_free(fresh);
    gr_status_free(st);
    role_beat(who);
    return rc;
}

/* ---- checkpointer ---- */

/* Finished runs before a save and after it (plus those in flight, which
 * may have counted their step already) bound the step it records. */
static long steps_after(soak *sk)
{
    return atomic_load(&sk->steps) + sk->n_workers;
}

static int save_distinct(soak *sk, gr_status *st)
{
    ckpt_rec r;
    snprintf(r.path, sizeof r.path, "%s/ckpt_%06ld.safetensors", sk->dir, sk->distinct);
    r.lo = atomic_load(&sk->steps);
    if (gr_session_save(sk->s, r.path, st) != GR_OK) {
        soak_fail(sk, "save %s: %s", r.path, gr_status_message(st));
        return -1;
    }
    r.hi = steps_after(sk);
    pthread_mutex_lock(&sk->mu);
    if (sk->n_recs == sk->cap_recs) {
        int cap = sk->cap_recs ? 2 * sk->cap_recs : 64;
        ckpt_rec *more = realloc(sk->recs, sizeof *more * (size_t)cap);
        if (!more) {
            pthread_mutex_unlock(&sk->mu);
            soak_fail(sk, "out of memory for %d checkpoint records", cap);
            return -1;
        }
        sk->recs = more;
        sk->cap_recs = cap;
    }
    sk->recs[sk->n_recs++] = r;
    pthread_mutex_unlock(&sk->mu);
    sk->distinct++;
    return 0;
}

/* Long runs: the oldest distinct files are checked now and deleted. */
static int trim_distinct(soak *sk)
{
    while (sk->cfg.keep > 0 && sk->n_recs > sk->cfg.keep) {
        char msg[1024];
        if (verify_file(sk, &sk->ckpt, &sk->recs[0], msg, sizeof msg) < 0) {
            soak_fail(sk, "%s", msg);
            return -1;
        }
        unlink(sk->recs[0].path);
        pthread_mutex_lock(&sk->mu);
        sk->n_recs--;
        memmove(sk->recs, sk->recs + 1, sizeof *sk->recs * (size_t)sk->n_recs);
        pthread_mutex_unlock(&sk->mu);
    }
    return 0;
}

/* Overwrites one path, then loads it into the mirror session at once,
 * while the workers keep training the first. */
static int save_overwrite(soak *sk, gr_session *mirror, gr_status *st)
{
    char path[320], msg[1024];
    snprintf(path, sizeof path, "%s/latest.safetensors", sk->dir);
    long lo = atomic_load(&sk->steps), step = 0;
    if (gr_session_save(sk->s, path, st) != GR_OK) {
        soak_fail(sk, "save %s: %s", path, gr_status_message(st));
        return -1;
    }
    long hi = steps_after(sk);
    role_set(&sk->ckpt, PH_RESTORE);
    if (check_restore(mirror, sk->p, path, lo, hi, &step, msg, sizeof msg) < 0) {
        soak_fail(sk, "%s", msg);
        return -1;
    }
    sk->overwrites++;
    return 0;
}

static void *ckpt_main(void *arg)
{
    soak *sk = arg;
    gr_status *st = gr_status_new();
    gr_session *mirror = NULL;
    gr_session_options so = {.threads = 1, .seed = 99};
    if (gr_session_new(sk->p, &so, &mirror, st) != GR_OK)
        soak_fail(sk, "mirror session: %s", gr_status_message(st));
    long next = sk->cfg.ckpt_every;
    while (!atomic_load(&sk->stop)) {
        long done = atomic_load(&sk->steps);
        if (done < next) {
            nap_ms(1);
            continue;
        }
        next = (done / sk->cfg.ckpt_every + 1) * sk->cfg.ckpt_every;
        role_set(&sk->ckpt, PH_SAVE);
        int rc = sk->saves % 2 ? save_overwrite(sk, mirror, st) : save_distinct(sk, st);
        role_beat(&sk->ckpt);
        role_set(&sk->ckpt, PH_VERIFY);
        if (rc == 0) rc = trim_distinct(sk);
        role_set(&sk->ckpt, PH_IDLE);
        if (rc < 0) break;
        sk->saves++;
        atomic_store(&sk->n_saves, sk->saves);
    }
    role_set(&sk->ckpt, PH_DONE);
    gr_session_free(mirror);
    gr_status_free(st);
    return NULL;
}

/* ---- evaluator ---- */

static int eval_once(soak *sk, const char *target, double *value, gr_status *st)
{
    role_set(&sk->eval, PH_EVAL);
    gr_code c = gr_eval(sk->s, target, value, st);
    role_set(&sk->eval, PH_IDLE);
    role_beat(&sk->eval);
    if (c != GR_OK) {
        soak_fail(sk, "gr_eval(%s): %s", target, gr_status_message(st));
        return -1;
    }
    int is_acc = strcmp(target, "accuracy") == 0;
    if (!isfinite(*value) || (is_acc && (*value < 0 || *value > 1))) {
        soak_fail(sk, "gr_eval(%s) = %g", target, *value);
        return -1;
    }
    return 0;
}

static void *eval_main(void *arg)
{
    soak *sk = arg;
    gr_status *st = gr_status_new();
    long next = sk->cfg.eval_every, k = 0;
    while (!atomic_load(&sk->stop)) {
        long done = atomic_load(&sk->steps);
        if (done < next) {
            nap_ms(1);
            continue;
        }
        next = (done / sk->cfg.eval_every + 1) * sk->cfg.eval_every;
        double v = 0;
        const char *target = k % 2 ? "test_loss" : "accuracy";
        if (eval_once(sk, target, &v, st) < 0) break;
        pthread_mutex_lock(&sk->mu);
        *(k % 2 ? &sk->last_loss : &sk->last_acc) = v;
        pthread_mutex_unlock(&sk->mu);
        atomic_store(&sk->n_evals, ++k);
    }
    role_set(&sk->eval, PH_DONE);
    gr_status_free(st);
    return NULL;
}

/* ---- watchdog ---- */

static void role_print(const char *who, const role *r)
{
    fprintf(stderr, "  %s: %ld done, %s\n", who, atomic_load(&r->beats),
            phase_name[atomic_load(&r->phase)]);
}

static void watchdog_report(soak *sk, const char *who, int idle_s)
{
    fprintf(stderr,
            "test_soak: WATCHDOG: %s has been stuck for %d s (deadlock?): %ld steps, %ld saves, "
            "%ld evals\n",
            who, idle_s, atomic_load(&sk->steps), atomic_load(&sk->n_saves),
            atomic_load(&sk->n_evals));
    for (int i = 0; i < sk->n_workers; i++) {
        char name[64];
        snprintf(name, sizeof name, "worker %d (%s)", i, sk->w[i].target);
        role_print(name, &sk->w[i].r);
    }
    role_print("checkpointer", &sk->ckpt);
    role_print("evaluator", &sk->eval);
    role_print("main", &sk->main);
}

static int busy(phase ph)
{
    return ph != PH_IDLE && ph != PH_WAIT && ph != PH_DONE;
}

/* Roles 0..n_workers-1 are the workers, then the other threads. */
static role *role_at(soak *sk, int k, const char **who)
{
    role *others[] = {&sk->ckpt, &sk->eval, &sk->main};
    static const char *const names[] = {"the checkpointer", "the evaluator", "the main thread"};
    *who = k < sk->n_workers ? "a worker" : names[k - sk->n_workers];
    return k < sk->n_workers ? &sk->w[k].r : others[k - sk->n_workers];
}

/* Wakes every second; aborts the test when a thread has been inside one
 * library call (or one verification) for stall_seconds. */
static void *watchdog_main(void *arg)
{
    soak *sk = arg;
    enum { ROLES = MAX_WORKERS + 3 };
    long last[ROLES];
    int idle[ROLES] = {0};
    for (int k = 0; k < ROLES; k++) last[k] = -1;
    pthread_mutex_lock(&sk->wd_mu);
    while (!sk->wd_done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        int rc = pthread_cond_timedwait(&sk->wd_cv, &sk->wd_mu, &ts);
        if (sk->wd_done || rc != ETIMEDOUT) continue;
        for (int k = 0; k < sk->n_workers + 3; k++) {
            const char *who;
            role *r = role_at(sk, k, &who);
            long b = atomic_load(&r->beats);
            idle[k] = b == last[k] && busy(atomic_load(&r->phase)) ? idle[k] + 1 : 0;
            last[k] = b;
            if (idle[k] < sk->cfg.stall_seconds) continue;
            watchdog_report(sk, who, idle[k]);
            abort();
        }
    }
    pthread_mutex_unlock(&sk->wd_mu);
    return NULL;
}

static void watchdog_start(soak *sk, pthread_t *th)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sk->wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&sk->wd_mu, NULL);
    assert_int_equal(pthread_create(th, NULL, watchdog_main, sk), 0);
}

static void watchdog_stop(soak *sk, pthread_t th)
{
    pthread_mutex_lock(&sk->wd_mu);
    sk->wd_done = 1;
    pthread_cond_signal(&sk->wd_cv);
    pthread_mutex_unlock(&sk->wd_mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&sk->wd_cv);
    pthread_mutex_destroy(&sk->wd_mu);
}

/* ---- the scenario ---- */

static void soak_init(soak *sk, gr_status *st)
{
    memset(sk, 0, sizeof *sk);
    sk->cfg = cfg_from_env();
    if (sk->cfg.fashion && access(FASHION_TEST, R_OK) != 0) skip();
    pthread_mutex_init(&sk->mu, NULL);
    snprintf(sk->dir, sizeof sk->dir, "/tmp/gr_soak_XXXXXX");
    assert_non_null(mkdtemp(sk->dir));
    const char *data = sk->cfg.fashion ? fashion_data : gauss_data;
    size_t n = strlen(data) + strlen(body);
    char *text = malloc(n + 1);
    snprintf(text, n + 1, "%s%s", data, body);
    assert_gr_ok(gr_compile_string("soak.graph", text, n, gr_test_options(), &sk->p, st), st);
    free(text);
    sk->n_workers = TARGETS * sk->cfg.per_target;
    gr_session_options so = {.threads = 2, .seed = SEED, .executors = sk->n_workers};
    assert_gr_ok(gr_session_new(sk->p, &so, &sk->s, st), st);
}

static void workers_start(soak *sk, gr_status *st)
{
    static const char *const targets[TARGETS] = {"train_0", "train_1"};
    for (int i = 0; i < sk->n_workers; i++) {
        worker *w = &sk->w[i];
        gr_target_info info;
        w->sk = sk;
        w->target = targets[i % TARGETS];
        assert_gr_ok(gr_target_info_get(sk->p, w->target, &info, st), st);
        assert_non_null(info.loss);
        w->loss = info.loss;
        w->view = (i / TARGETS) % 2;
        w->st = gr_status_new();
        assert_int_equal(pthread_create(&w->th, NULL, worker_main, w), 0);
    }
}

static int enough_work(soak *sk, double t0)
{
    if (atomic_load(&sk->n_saves) < sk->cfg.min_saves) return 0;
    if (atomic_load(&sk->n_evals) < sk->cfg.min_evals) return 0;
    for (int i = 0; i < sk->n_workers; i++)
        if (atomic_load(&sk->w[i].r.beats) < sk->cfg.min_steps) return 0;
    return now_s() - t0 >= sk->cfg.seconds;
}

/* Long runs print a line every minute. */
static void report_progress(soak *sk, double t0, double *last)
{
    if (sk->cfg.seconds <= 0 || now_s() - *last < 60) return;
    *last = now_s();
    pthread_mutex_lock(&sk->mu);
    printf("soak: %4.0f s: %ld steps, %ld saves, %ld checkpoints verified, %ld evals, "
           "accuracy %.4f, test loss %.4f\n",
           *last - t0, atomic_load(&sk->steps), atomic_load(&sk->n_saves), sk->verified,
           atomic_load(&sk->n_evals), sk->last_acc, sk->last_loss);
    pthread_mutex_unlock(&sk->mu);
    fflush(stdout);
}

/* Runs until enough work is done (or a failure), then stops and joins
 * every thread. */
static void soak_run(soak *sk, gr_status *st)
{
    pthread_t ck, ev;
    double t0 = now_s(), last = t0;
    role_set(&sk->main, PH_WAIT);
    workers_start(sk, st);
    assert_int_equal(pthread_create(&ck, NULL, ckpt_main, sk), 0);
    assert_int_equal(pthread_create(&ev, NULL, eval_main, sk), 0);
    while (!atomic_load(&sk->stop) && !enough_work(sk, t0)) {
        nap_ms(10);
        report_progress(sk, t0, &last);
    }
    atomic_store(&sk->stop, 1);
    for (int i = 0; i < sk->n_workers; i++) pthread_join(sk->w[i].th, NULL);
    pthread_join(ck, NULL);
    pthread_join(ev, NULL);
    if (atomic_load(&sk->failed)) fail_msg("%s", sk->err);
}

/* Every variable of a equals b's, bit for bit. */
static void assert_same_vars(gr_session *a, gr_session *b, const gr_program *p, gr_status *st)
{
    for (int k = 0; k < gr_program_variable_count(p); k++) {
        const char *name = gr_program_variable_name(p, k);
        gr_tensor *ta = NULL, *tb = NULL;
        assert_gr_ok(gr_variable_get(a, name, &ta, st), st);
        assert_gr_ok(gr_variable_get(b, name, &tb, st), st);
        if (memcmp(gr_tensor_data(ta), gr_tensor_data(tb), gr_tensor_bytes(ta)) != 0)
            fail_msg("variable %s differs after the final restore", name);
        gr_tensor_free(ta);
        gr_tensor_free(tb);
    }
}

/* The final save, once training stopped, restores to the same variables
 * and evaluates to the same accuracy.  Same seed as the trained session:
 * the synthetic test set is drawn from the data seed mixed with the
 * session's. */
static void check_final_checkpoint(soak *sk, double acc, gr_status *st)
{
    char path[320], msg[1024];
    snprintf(path, sizeof path, "%s/latest.safetensors", sk->dir);
    role_set(&sk->main, PH_SAVE);
    assert_gr_ok(gr_session_save(sk->s, path, st), st);
    if (save_distinct(sk, st) < 0) fail_msg("%s", sk->err);
    role_beat(&sk->main);
    role_set(&sk->main, PH_VERIFY);
    gr_session_options so = {.threads = 1, .seed = SEED};
    gr_session *fresh = NULL;
    long step = 0, total = atomic_load(&sk->steps);
    double acc2 = 0;
    assert_gr_ok(gr_session_new(sk->p, &so, &fresh, st), st);
    if (check_restore(fresh, sk->p, path, total, total, &step, msg, sizeof msg) < 0)
        fail_msg("%s", msg);
    assert_same_vars(sk->s, fresh, sk->p, st);
    role_beat(&sk->main);
    assert_gr_ok(gr_eval(fresh, "accuracy", &acc2, st), st);
    role_beat(&sk->main);
    if (fabs(acc2 - acc) > 1e-6) fail_msg("accuracy %g after the restore, %g before", acc2, acc);
    gr_session_free(fresh);
}

/* Every distinct checkpoint still on disk loads into a fresh session. */
static void verify_all(soak *sk)
{
    char msg[1024];
    for (int i = 0; i < sk->n_recs; i++) {
        if (verify_file(sk, &sk->main, &sk->recs[i], msg, sizeof msg) < 0) fail_msg("%s", msg);
        unlink(sk->recs[i].path);
    }
}

static void soak_free(soak *sk)
{
    char path[320];
    snprintf(path, sizeof path, "%s/latest.safetensors", sk->dir);
    unlink(path);
    rmdir(sk->dir);
    for (int i = 0; i < sk->n_workers; i++) gr_status_free(sk->w[i].st);
    free(sk->recs);
    gr_session_free(sk->s);
    gr_program_free(sk->p);
    pthread_mutex_destroy(&sk->mu);
}

/* Accuracy and test loss, evaluated by the main thread. */
static void eval_both(soak *sk, double *acc, double *loss, gr_status *st)
{
    role_set(&sk->main, PH_EVAL);
    assert_gr_ok(gr_eval(sk->s, "accuracy", acc, st), st);
    role_beat(&sk->main);
    assert_gr_ok(gr_eval(sk->s, "test_loss", loss, st), st);
    role_beat(&sk->main);
    role_set(&sk->main, PH_VERIFY);
}

static void print_summary(soak *sk, double t0, const double before[2], const double after[2])
{
    long runs[TARGETS] = {0};
    for (int i = 0; i < sk->n_workers; i++) runs[i % TARGETS] += atomic_load(&sk->w[i].r.beats);
    print_message("soak: %d threads x 2 targets, %ld steps (train_0 %ld, train_1 %ld) in %.1f s; "
                  "%ld saves (%ld distinct, %ld overwritten and restored at once), "
                  "%ld checkpoints verified in fresh sessions; %ld evals; "
                  "accuracy %.4f -> %.4f, test loss %.4f -> %.4f\n",
                  sk->cfg.per_target, atomic_load(&sk->steps), runs[0], runs[1], now_s() - t0,
                  sk->saves + 2, sk->distinct, sk->overwrites + 1, sk->verified,
                  atomic_load(&sk->n_evals), before[0], after[0], before[1], after[1]);
}

static void test_two_targets_train_through_saves_and_evals(void **state)
{
    (void)state;
    static soak sk;
    gr_status *st = gr_status_new();
    double before[2], after[2], t0 = now_s(); /* accuracy, test loss */
    pthread_t wd;
    soak_init(&sk, st);
    watchdog_start(&sk, &wd);
    eval_both(&sk, &before[0], &before[1], st);
    soak_run(&sk, st);
    assert_int_equal(gr_session_step(sk.s), atomic_load(&sk.steps));
    eval_both(&sk, &after[0], &after[1], st);
    check_final_checkpoint(&sk, after[0], st);
    verify_all(&sk);
    role_set(&sk.main, PH_DONE);
    watchdog_stop(&sk, wd);
    print_summary(&sk, t0, before, after);
    if (!(after[0] > sk.cfg.min_accuracy))
        fail_msg("accuracy %g, not above %g", after[0], sk.cfg.min_accuracy);
    if (!(after[1] < before[1]))
        fail_msg("test loss %g, was %g before training", after[1], before[1]);
    soak_free(&sk);
    gr_status_free(st);
}

/* ---- gr_eval beside gr_run on one data source ----
 *
 * gr_eval moves the reader of every source it reads to the start, runs one
 * pass and moves it back.  Runs on the same source must neither take
 * batches from the evaluation's cursor (they once did: training re-read the
 * epoch's first batches, which the seek back handed out again, and the
 * evaluation missed the batches they took) nor see the cursor move.
 *
 * Row i of the CSV holds i, so the batches a run fetches tell which
 * examples it took: over exactly EPOCHS epochs each example must be taken
 * EPOCHS times, and every evaluation must average each row once.  A pass
 * must overlap training runs to matter, so the test tries ROUNDS fresh
 * sessions. */
enum { RN = 240, RB = 8, RK = 2, REPOCHS = 3, RPER = RN / RB * REPOCHS / RK, ROUNDS = 50 };

typedef struct repro {
    gr_session *s;
    float out[RK][RPER * RB];
    atomic_int stop;
    atomic_int failures;
    long evals, wrong; /* the evaluating thread's */
    double bad_value;
} repro;

typedef struct repro_arg {
    repro *r;
    int k;
} repro_arg;

static void *repro_train(void *arg)
{
    repro_arg *a = arg;
    for (int i = 0; i < RPER; i++) {
        gr_fetch f = {"xs", a->r->out[a->k] + i * RB, sizeof(float) * RB, NULL};
        if (gr_run(a->r->s, "xs", NULL, 0, &f, 1, NULL) != GR_OK)
            atomic_fetch_add(&a->r->failures, 1);
    }
    return NULL;
}

/* The mean of rows 0..RN-1 is exact in binary. */
static void *repro_eval(void *arg)
{
    repro *r = arg;
    while (!atomic_load(&r->stop)) {
        double v = 0;
        if (gr_eval(r->s, "m", &v, NULL) != GR_OK) atomic_fetch_add(&r->failures, 1);
        r->evals++;
        if (v != (RN - 1) / 2.0) r->wrong++, r->bad_value = v;
    }
    return NULL;
}

/* One session: RK threads run xs for REPOCHS epochs while one evaluates
 * m on the same source.  Returns 0, or -1 with what went wrong in msg. */
static int repro_round(const gr_program *p, repro *r, char *msg, size_t n)
{
    gr_session_options so = {.threads = 2, .seed = 1, .executors = RK + 1};
    pthread_t th[RK], ev;
    repro_arg args[RK];
    memset(r, 0, sizeof *r);
    assert_gr_ok(gr_session_new(p, &so, &r->s, NULL), NULL);
    assert_int_equal(pthread_create(&ev, NULL, repro_eval, r), 0);
    for (int k = 0; k < RK; k++) {
        args[k] = (repro_arg){r, k};
        assert_int_equal(pthread_create(&th[k], NULL, repro_train, &args[k]), 0);
    }
    for (int k = 0; k < RK; k++) pthread_join(th[k], NULL);
    atomic_store(&r->stop, 1);
    pthread_join(ev, NULL);
    gr_session_free(r->s);
    assert_int_equal(atomic_load(&r->failures), 0);
    int seen[RN] = {0};
    for (int k = 0; k < RK; k++)
        for (int i = 0; i < RPER * RB; i++) seen[(int)r->out[k][i]]++;
    for (int i = 0; i < RN; i++)
        if (seen[i] != REPOCHS) {
            snprintf(msg, n,
                     "example %d taken %d times in %d epochs while gr_eval ran on its source "
                     "(%ld of %ld evaluations wrong)",
                     i, seen[i], REPOCHS, r->wrong, r->evals);
            return -1;
        }
    if (r->wrong == 0) return 0;
    snprintf(msg, n, "%ld of %ld evaluations wrong, e.g. %g instead of %g", r->wrong, r->evals,
             r->bad_value, (RN - 1) / 2.0);
    return -1;
}

static void test_eval_beside_training_keeps_its_cursor(void **state)
{
    (void)state;
    static repro r;
    char dir[] = "/tmp/gr_soak_repro_XXXXXX", path[64], text[256], msg[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    for (int i = 0; i < RN; i++) fprintf(fp, "%d,%d\n", i, i % 3);
    fclose(fp);
    snprintf(text, sizeof text, "data d = csv(\"%s\", batch=%d)\nxs = d.x * 1.0\nm = mean(xs)\n",
             path, RB);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("repro.graph", text, strlen(text), gr_test_options(), &p, st),
                 st);
    int bad = 0, round = 0;
    for (; round < ROUNDS && !bad; round++) bad = repro_round(p, &r, msg, sizeof msg) < 0;
    gr_program_free(p);
    gr_status_free(st);
    unlink(path);
    rmdir(dir);
    if (bad) fail_msg("round %d: %s", round, msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_targets_train_through_saves_and_evals),
        cmocka_unit_test(test_eval_beside_training_keeps_its_cursor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
