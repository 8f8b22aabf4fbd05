/* test_tensorboard.c - TensorBoard event files, read back by a reader of
 * our own (below: TFRecord framing, both CRCs, the protobuf): what the
 * writer frames, what gr_session_scalar keeps (monotone per tag, from many
 * threads), and what `graphrun --tensorboard` writes, which must be the
 * --log's values at the log's steps, for serial and Hogwild! runs, a run
 * stopped by Ctrl-C and a run killed with SIGKILL (whose file may end in a
 * record cut short, as a kill in the middle of a write(2) leaves). */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"
#include "runtime/record/tfevents.h"
#include "tensorboard.pb-c.h"

#define MODEL GR_SOURCE_DIR "/tests/models/tiny_cnn.graph"

/* ---- the reader ---- */

typedef struct tb_point {
    char tag[64];
    int64_t step;
    float value;
} tb_point;

typedef struct tb_file {
    tb_point *p;
    int n;
    size_t tail; /* bytes of a last record cut short (a write a kill interrupted) */
    char err[256];
} tb_file;

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int tb_fail(tb_file *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* One event: the first must be the file version, the others scalars. */
static int tb_event(tb_file *f, const uint8_t *data, size_t n, size_t at, int first)
{
    Tb__Event *ev = tb__event__unpack(NULL, n, data);
    if (!ev) return tb_fail(f, "offset %zu: not an Event", at);
    int rc = 0;
    if (first)
        rc = ev->what_case == TB__EVENT__WHAT_FILE_VERSION &&
                     strcmp(ev->file_version, "brain.Event:2") == 0
                 ? 0
                 : tb_fail(f, "the first record is not file_version brain.Event:2");
    else if (ev->what_case != TB__EVENT__WHAT_SUMMARY || ev->summary->n_value != 1 ||
             ev->summary->value[0]->value_case != TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE)
        rc = tb_fail(f, "offset %zu: not one scalar", at);
    else if (ev->wall_time < 1e9)
        rc = tb_fail(f, "offset %zu: wall_time %f is not a Unix time", at, ev->wall_time);
    else {
        tb_point *p = &f->p[f->n++];
        snprintf(p->tag, sizeof p->tag, "%s", ev->summary->value[0]->tag);
        p->step = ev->step;
        p->value = ev->summary->value[0]->simple_value;
    }
    tb__event__free_unpacked(ev, NULL);
    return rc;
}

/* Reads every record of buf, checking the framing and both CRCs.  A last
 * record cut short is not an error (TensorBoard stops there too): it is
 * what a process killed in the middle of a write leaves; f->tail says. */
static int tb_parse(tb_file *f, const uint8_t *buf, size_t len)
{
    f->p = calloc(len / TFEV_HEADER + 1, sizeof *f->p);
    size_t at = 0;
    while (at < len && len - at >= TFEV_HEADER) {
        uint64_t n = get_le(buf + at, 8);
        if (get_le(buf + at + 8, 4) != tfev_mask(tfev_crc32c(buf + at, 8)))
            return tb_fail(f, "offset %zu: length CRC mismatch", at);
        if (n > len - at - TFEV_HEADER || len - at - TFEV_HEADER - n < TFEV_FOOTER) break;
        const uint8_t *d = buf + at + TFEV_HEADER;
        if (get_le(d + n, 4) != tfev_mask(tfev_crc32c(d, n)))
            return tb_fail(f, "offset %zu: data CRC mismatch", at);
        if (tb_event(f, d, n, at, at == 0) < 0) return -1;
        at += TFEV_HEADER + n + TFEV_FOOTER;
    }
    f->tail = len - at;
    return at ? 0 : tb_fail(f, "no whole record");
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    rewind(fp);
    uint8_t *buf = malloc(*len + 1);
    assert_int_equal(fread(buf, 1, *len, fp), *len);
    fclose(fp);
    return buf;
}

/* The one event file in dir, read; fails the test on any error, and on a
 * record cut short unless tail_ok. */
static tb_file tb_read_dir(const char *dir, int tail_ok)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    char path[1024] = "";
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0 && ++files)
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_int_equal(files, 1);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    tb_file f = {0};
    if (tb_parse(&f, buf, len) < 0) fail_msg("%s: %s", path, f.err);
    if (f.tail && !tail_ok) fail_msg("%s: the last %zu bytes are a record cut short", path, f.tail);
    free(buf);
    return f;
}

static const tb_point *tb_find(const tb_file *f, const char *tag, int64_t step)
{
    for (int i = 0; i < f->n; i++)
        if (f->p[i].step == step && strcmp(f->p[i].tag, tag) == 0) return &f->p[i];
    return NULL;
}

static void assert_monotone(const tb_file *f)
{
    for (int i = 0; i < f->n; i++)
        for (int j = i + 1; j < f->n; j++)
            if (strcmp(f->p[i].tag, f->p[j].tag) == 0 && f->p[j].step <= f->p[i].step)
                fail_msg("%s: step %lld after %lld", f->p[i].tag, (long long)f->p[j].step,
                         (long long)f->p[i].step);
}

/* ---- fixtures ---- */

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/gr_tb_test_XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd);
}

static const char *tpath(const char *name)
{
    static char p[8][512];
    static int k;
    char *s = p[k++ & 7];
    snprintf(s, 512, "%s/%s", tmp, name);
    return s;
}

/* ---- the writer ---- */

static void test_crc32c_matches_known_vectors(void **state)
{
    (void)state;
    uint8_t zeros[32] = {0};
    assert_int_equal(tfev_crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
    assert_int_equal(tfev_crc32c(zeros, sizeof zeros), 0x8a9136aau);
    assert_int_equal(tfev_mask(0), 0xa282ead8u);
}

static void test_writer_frames_what_the_reader_reads(void **state)
{
    (void)state;
    char err[256];
    tfev_writer *w = tfev_open(tpath("a/b"), err, sizeof err); /* parents made too */
    assert_non_null(w);
    assert_int_equal(tfev_scalar(w, "x", 1, 0.5f, err, sizeof err), 0);
    assert_int_equal(tfev_scalar(w, "x", 2, 0.0f, err, sizeof err), 0);
    assert_int_equal(tfev_scalar(w, "yy", 7, -3.25f, err, sizeof err), 0);
    assert_int_equal(tfev_close(w, err, sizeof err), 0);
    tb_file f = tb_read_dir(tpath("a/b"), 0);
    assert_int_equal(f.n, 3);
    assert_true(tb_find(&f, "x", 1)->value == 0.5f);
    assert_true(tb_find(&f, "x", 2)->value == 0.0f);
    assert_true(tb_find(&f, "yy", 7)->value == -3.25f);
    free(f.p);
}

static void test_reader_catches_damage(void **state)
{
    (void)state;
    char err[256];
    tfev_writer *w = tfev_open(tpath("d"), err, sizeof err);
    assert_int_equal(tfev_scalar(w, "loss", 1, 1.0f, err, sizeof err), 0);
    char path[600];
    snprintf(path, sizeof path, "%s", tfev_path(w));
    assert_int_equal(tfev_close(w, err, sizeof err), 0);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    tb_file f = {0};
    assert_int_equal(tb_parse(&f, buf, len - 1), 0); /* cut short: the first record only */
    assert_int_equal(f.n, 0);
    assert_int_equal(f.tail, len - 1 - 40); /* 12 + "brain.Event:2" event + 4 */
    free(f.p);
    memset(&f, 0, sizeof f);
    buf[len - 6] ^= 1; /* a bit of the value */
    assert_int_equal(tb_parse(&f, buf, len), -1);
    assert_non_null(strstr(f.err, "data CRC mismatch"));
    free(f.p);
    memset(&f, 0, sizeof f);
    buf[len - 6] ^= 1;
    buf[1] ^= 1; /* the first length */
    assert_int_equal(tb_parse(&f, buf, len), -1);
    assert_non_null(strstr(f.err, "length CRC mismatch"));
    free(f.p);
    free(buf);
}

static void test_unwritable_folder_is_an_error(void **state)
{
    (void)state;
    char err[256];
    FILE *fp = fopen(tpath("file"), "w");
    fclose(fp);
    assert_null(tfev_open(tpath("file/run"), err, sizeof err));
    assert_non_null(strstr(err, "cannot make the folder"));
    assert_null(tfev_open("", err, sizeof err));
    gr_program *prog;
    gr_session *s;
    gr_status *st = gr_status_new();
    gr_session_options o = {.tensorboard_dir = tpath("file/run")};
    assert_gr_ok(gr_compile_string("t.graph", "loss = sum([1.0])\n", 18, NULL, &prog, st), st);
    assert_int_equal(gr_session_new(prog, &o, &s, st), GR_ERR_IO);
    assert_non_null(strstr(gr_status_message(st), "file/run: cannot make the folder"));
    gr_program_free(prog);
    gr_status_free(st);
}

/* ---- gr_session_scalar ---- */

static gr_session *new_session(gr_program **prog, const char *dir)
{
    static const char src[] = "var w = zeros([1])\nloss = sum(w * w)\ntrain = "
                              "sgd(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_session *s;
    gr_session_options o = {.tensorboard_dir = dir};
    assert_gr_ok(gr_compile_string("t.graph", src, sizeof src - 1, NULL, prog, st), st);
    assert_gr_ok(gr_session_new(*prog, &o, &s, st), st);
    gr_status_free(st);
    return s;
}

typedef struct writer_arg {
    gr_session *s;
    int first;
} writer_arg;

/* Steps first, first + 4, ...: four threads interleave 0..399. */
static void *write_steps(void *p)
{
    writer_arg *a = p;
    for (int k = a->first; k < 400; k += 4)
        if (gr_session_scalar(a->s, "t/step", k, k, NULL) != GR_OK) return p;
    return NULL;
}

static void test_session_scalars_from_threads_are_monotone(void **state)
{
    (void)state;
    gr_program *prog;
    gr_session *s = new_session(&prog, tpath("threads"));
    pthread_t th[4];
    writer_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (writer_arg){s, i};
        pthread_create(&th[i], NULL, write_steps, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    gr_session_free(s);
    gr_program_free(prog);
    tb_file f = tb_read_dir(tpath("threads"), 0);
    assert_true(f.n >= 1 && f.n <= 400);
    assert_monotone(&f);
    for (int i = 0; i < f.n; i++) assert_true(f.p[i].value == (float)f.p[i].step);
    free(f.p);
}

static void test_session_scalar_defaults_to_the_session_step(void **state)
{
    (void)state;
    gr_program *prog;
    gr_session *s = new_session(&prog, tpath("step"));
    gr_status *st = gr_status_new();
    for (int i = 0; i < 3; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, NULL, 0, st), st);
    assert_gr_ok(gr_session_scalar(s, "a", -1, 2.5, st), st);
    assert_gr_ok(gr_session_scalar(s, "a", 2, 9.0, st), st); /* behind: dropped */
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
    tb_file f = tb_read_dir(tpath("step"), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.p[0].step, 3);
    assert_true(f.p[0].value == 2.5f);
    free(f.p);
}

static void test_session_scalar_without_a_folder_is_refused(void **state)
{
    (void)state;
    gr_program *prog;
    gr_session *s = new_session(&prog, NULL);
    gr_status *st = gr_status_new();
    assert_int_equal(gr_session_scalar(s, "a", 1, 1.0, st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(st), "tensorboard_dir"));
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
}

/* ---- the command line ---- */

/* Starts graphrun on MODEL with the log and the events in tmp, then the
 * NULL-terminated args. */
static pid_t start_cli(const char *run, const char *const *args)
{
    char log[600], tb[600];
    snprintf(log, sizeof log, "%s/%s.jsonl", tmp, run);
    snprintf(tb, sizeof tb, "%s/tb", tmp);
    const char *argv[32] = {GR_CLI,          MODEL, "--quiet",    "--log", log,
                            "--tensorboard", tb,    "--run-name", run};
    for (int i = 0; args[i]; i++) argv[9 + i] = args[i];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execv(GR_CLI, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_cli(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static int run_cli(const char *run, const char *const *args)
{
    int status = wait_cli(start_cli(run, args));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void check_value(const tb_file *f, const char *group, const char *key, int64_t step,
                        const cJSON *v, int *n)
{
    char tag[128];
    snprintf(tag, sizeof tag, "%s/%s", group, key);
    const tb_point *p = tb_find(f, tag, step);
    if (!p) fail_msg("%s at step %lld is in the log, not in the event file", tag, (long long)step);
    assert_true(cJSON_IsNumber(v));
    if (p->value != (float)v->valuedouble)
        fail_msg("%s at step %lld: log %.9g, events %.9g", tag, (long long)step, v->valuedouble,
                 (double)p->value);
    ++*n;
}

/* Every value of the log is in the events at its step, equal, and the
 * events hold nothing more; returns the last step of train/loss. */
static int64_t check_same_as_log(const char *run)
{
    char dir[600], line[4096];
    snprintf(dir, sizeof dir, "%s/tb/%s", tmp, run);
    tb_file f = tb_read_dir(dir, 0);
    assert_monotone(&f);
    snprintf(line, sizeof line, "%s/%s.jsonl", tmp, run);
    FILE *log = fopen(line, "r");
    assert_non_null(log);
    int n = 0;
    int64_t last = 0;
    while (fgets(line, sizeof line, log)) {
        cJSON *r = cJSON_Parse(line), *ev = cJSON_GetObjectItem(r, "eval");
        int64_t step = (int64_t)cJSON_GetObjectItem(r, "step")->valuedouble;
        for (cJSON *e = ev ? ev->child : NULL; e; e = e->next)
            check_value(&f, "eval", e->string, step, e, &n);
        for (cJSON *e = ev ? NULL : r->child; e; e = e->next)
            if (strcmp(e->string, "step") != 0 && strcmp(e->string, "elapsed_s") != 0)
                check_value(&f, "train", e->string, step, e, &n);
        if (!ev) last = step;
        cJSON_Delete(r);
    }
    fclose(log);
    assert_int_equal(n, f.n);
    free(f.p);
    return last;
}

static void test_cli_events_equal_the_log(void **state)
{
    (void)state;
    const char *args[] = {"--steps",  "40",           "--log-every", "5", "--eval",
                          "accuracy", "--eval-every", "20",          NULL};
    assert_int_equal(run_cli("serial", args), 0);
    assert_int_equal(check_same_as_log("serial"), 40);
}

static void test_cli_hogwild_events_equal_the_log(void **state)
{
    (void)state;
    const char *args[] = {"--steps",     "400", "--executors", "3",        "--threads",    "2",
                          "--log-every", "1",   "--eval",      "accuracy", "--eval-every", "100",
                          NULL};
    assert_int_equal(run_cli("hogwild", args), 0);
    assert_int_equal(check_same_as_log("hogwild"), 400);
}

/* The size of the one file in dir named events.out.tfevents.*, or 0. */
static off_t events_size(const char *dir)
{
    DIR *d = opendir(dir);
    off_t size = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat sb;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0 && stat(p, &sb) == 0)
            size = sb.st_size;
    }
    if (d) closedir(d);
    return size;
}

/* Starts a long run, waits until its event file holds scalars (a flush
 * happened), sends sig and returns the exit status. */
static int run_until_flushed_then(const char *run, int sig)
{
    const char *args[] = {"--steps", "100000000", "--log-every", "1", NULL};
    pid_t pid = start_cli(run, args);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tb/%s", tmp, run);
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (int i = 0; i < 3000 && events_size(dir) < 200; i++) nanosleep(&nap, NULL);
    kill(pid, sig);
    assert_true(events_size(dir) >= 200);
    return wait_cli(pid);
}

static void test_ctrl_c_stops_and_flushes_everything(void **state)
{
    (void)state;
    int status = run_until_flushed_then("int", SIGINT);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    assert_true(check_same_as_log("int") > 0); /* to the last record */
}

static void test_killed_run_leaves_whole_records(void **state)
{
    (void)state;
    run_until_flushed_then("killed", SIGKILL);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tb/killed", tmp);
    tb_file f = tb_read_dir(dir, 1); /* the kill may cut the write in flight short */
    assert_true(f.n > 0);
    assert_monotone(&f);
    free(f.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_matches_known_vectors),
        cmocka_unit_test(test_writer_frames_what_the_reader_reads),
        cmocka_unit_test(test_reader_catches_damage),
        cmocka_unit_test(test_unwritable_folder_is_an_error),
        cmocka_unit_test(test_session_scalars_from_threads_are_monotone),
        cmocka_unit_test(test_session_scalar_defaults_to_the_session_step),
        cmocka_unit_test(test_session_scalar_without_a_folder_is_refused),
        cmocka_unit_test(test_cli_events_equal_the_log),
        cmocka_unit_test(test_cli_hogwild_events_equal_the_log),
        cmocka_unit_test(test_ctrl_c_stops_and_flushes_everything),
        cmocka_unit_test(test_killed_run_leaves_whole_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
