/* test_checkpoint.c - checkpoints through the public API: save/restore
 * round trips bit for bit, a resumed run equals an uninterrupted one, every
 * kind of corrupt or mismatched file is refused with a message naming the
 * file and the tensor, and a refused restore leaves the session untouched. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"
#include "runtime/ckpt/safetensors.h" /* the codec, to read metadata back */
#include "runtime/ckpt/sha256.h"

#define EX      GR_SOURCE_DIR "/examples/"
#define FASHION "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

/* Shuffled data that wraps around many epochs in 100 steps, dropout (which
 * draws from the run counter) and an optimizer with slots: everything a
 * resume must put back. */
static const char prog_fmt[] =
    "data d = gaussian(n=200, dims=[8], batch=16, seed=3, shuffle=true)\n"
    "var w = glorot([8, 4])\n"
    "var b = zeros([4])\n"
    "var v = glorot([4, 1])\n"
    "h = dropout(relu(d.x @ w + b), 0.3)\n"
    "loss = mse(h @ v, d.x @ ones([8, 1]))\n"
    "train = %s.minimize(loss)\n";

typedef struct var_spec {
    const char *name;
    size_t n; /* floats */
} var_spec;

static const var_spec base_vars[] = {{"w", 32}, {"b", 4}, {"v", 4}};

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gr_ckpt_test_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name)
{
    static char buf[4][320];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static gr_program *compile_opt(const char *optimizer, gr_status *st)
{
    char text[1024];
    snprintf(text, sizeof text, prog_fmt, optimizer);
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("inline.graph", text, strlen(text), gr_test_options(), &p, st),
                 st);
    return p;
}

static gr_session *new_session(const gr_program *p, gr_status *st)
{
    gr_session_options o = {.threads = 1, .seed = 7};
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, &o, &s, st), st);
    return s;
}

static void train(gr_session *s, int steps, gr_status *st)
{
    for (int i = 0; i < steps; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, NULL, 0, st), st);
}

/* All variables of the inline program for `optimizer`, concatenated. */
static size_t all_vars(gr_session *s, const char *optimizer, float *out, gr_status *st)
{
    static const char *adam[] = {"adam_m", "adam_v"}, *mom[] = {"momentum"};
    const char **slots = strncmp(optimizer, "adam", 4) == 0 ? adam : mom;
    int n_slots = strncmp(optimizer, "adam", 4) == 0 ? 2 : strncmp(optimizer, "momentum", 8) == 0;
    size_t used = 0;
    char name[64];
    for (int i = 0; i < 3; i++) {
        const var_spec *v = &base_vars[i];
        assert_gr_ok(gr_variable_read(s, v->name, out + used, v->n * 4, st), st);
        used += v->n;
        for (int k = 0; k < n_slots; k++) {
            snprintf(name, sizeof name, "%s/%s", v->name, slots[k]);
            assert_gr_ok(gr_variable_read(s, name, out + used, v->n * 4, st), st);
            used += v->n;
        }
    }
    if (n_slots == 2) {
        assert_gr_ok(gr_variable_read(s, "global_step", out + used, 4, st), st);
        used++;
    }
    return used;
}

static void check_round_trip(const char *optimizer)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile_opt(optimizer, st);
    gr_session *a = new_session(p, st), *b = new_session(p, st);
    float va[256], vb[256];
    train(a, 37, st);
    assert_gr_ok(gr_session_save(a, tpath("rt.safetensors"), st), st);
    train(b, 3, st); /* b differs from a before the restore */
    assert_gr_ok(gr_session_restore(b, tpath("rt.safetensors"), NULL, st), st);
    size_t n = all_vars(a, optimizer, va, st);
    assert_int_equal(all_vars(b, optimizer, vb, st), n);
    assert_memory_equal(va, vb, n * sizeof(float));
    assert_int_equal(gr_session_step(b), 37);
    gr_session_free(a);
    gr_session_free(b);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_round_trip_is_bit_identical_sgd(void **state)
{
    (void)state;
    check_round_trip("sgd(0.05)");
}

static void test_round_trip_is_bit_identical_with_momentum_slots(void **state)
{
    (void)state;
    check_round_trip("momentum(0.01, 0.9)");
}

static void test_round_trip_is_bit_identical_with_adam_slots(void **state)
{
    (void)state;
    check_round_trip("adam(0.01)");
}

/* 100 steps, save, restore into a new session, 100 more == 200 at once. */
static void check_resume(const char *optimizer)
{
    gr_status *st = gr_status_new();
    gr_program *p = compile_opt(optimizer, st);
    gr_session *first = new_session(p, st), *resumed = new_session(p, st);
    gr_session *straight = new_session(p, st);
    float vr[256], vs[256];
    train(first, 100, st);
    assert_gr_ok(gr_session_save(first, tpath("resume.safetensors"), st), st);
    gr_session_free(first);
    assert_gr_ok(gr_session_restore(resumed, tpath("resume.safetensors"), NULL, st), st);
    assert_int_equal(gr_session_step(resumed), 100);
    train(resumed, 100, st);
    train(straight, 200, st);
    size_t n = all_vars(resumed, optimizer, vr, st);
    all_vars(straight, optimizer, vs, st);
    assert_memory_equal(vr, vs, n * sizeof(float));
    for (size_t i = 0; i < n; i++) assert_true(isfinite(vr[i])); /* NaN == NaN proves nothing */
    assert_int_equal(gr_session_step(resumed), 200);
    gr_session_free(resumed);
    gr_session_free(straight);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_resume_equals_uninterrupted_adam_dropout_shuffle(void **state)
{
    (void)state;
    check_resume("adam(0.01)");
}

static void test_resume_equals_uninterrupted_momentum(void **state)
{
    (void)state;
    check_resume("momentum(0.01, 0.9)");
}

static void read_mlp(gr_session *s, float *w1, float *w3, gr_status *st)
{
    assert_gr_ok(gr_variable_read(s, "model/fc1/w", w1, 784 * 512 * 4, st), st);
    assert_gr_ok(gr_variable_read(s, "model/out/w", w3, 256 * 10 * 4, st), st);
}

static void test_resume_equals_uninterrupted_fashion_mlp(void **state)
{
    (void)state;
    if (access(FASHION, R_OK) != 0) skip();
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_file(EX "fashion_mlp.graph", gr_test_options(), &p, st), st);
    gr_session *a = new_session(p, st), *b = new_session(p, st), *c = new_session(p, st);
    float *w1a = malloc(784 * 512 * 4), *w1c = malloc(784 * 512 * 4), w3a[2560], w3c[2560];
    train(a, 100, st);
    assert_gr_ok(gr_session_save(a, tpath("mlp.safetensors"), st), st);
    gr_session_free(a);
    assert_gr_ok(gr_session_restore(b, tpath("mlp.safetensors"), NULL, st), st);
    train(b, 100, st);
    train(c, 200, st);
    read_mlp(b, w1a, w3a, st);
    read_mlp(c, w1c, w3c, st);
    assert_memory_equal(w1a, w1c, 784 * 512 * 4);
    assert_memory_equal(w3a, w3c, sizeof w3a);
    free(w1a);
    free(w1c);
    gr_session_free(b);
    gr_session_free(c);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_weights_only_keeps_slots_and_step_at_init(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile_opt("momentum(0.01, 0.9)", st);
    gr_session *a = new_session(p, st), *b = new_session(p, st);
    float wa[32], wb[32], mb[32], zero[32] = {0};
    train(a, 20, st);
    assert_gr_ok(gr_session_save(a, tpath("w.safetensors"), st), st);
    gr_restore_options o = {.weights_only = 1};
    assert_gr_ok(gr_session_restore(b, tpath("w.safetensors"), &o, st), st);
    assert_gr_ok(gr_variable_read(a, "w", wa, sizeof wa, st), st);
    assert_gr_ok(gr_variable_read(b, "w", wb, sizeof wb, st), st);
    assert_gr_ok(gr_variable_read(b, "w/momentum", mb, sizeof mb, st), st);
    assert_memory_equal(wa, wb, sizeof wa);
    assert_memory_equal(mb, zero, sizeof mb);
    assert_int_equal(gr_session_step(b), 0);
    gr_session_free(a);
    gr_session_free(b);
    gr_program_free(p);
    gr_status_free(st);
}

/* A momentum checkpoint seeds an Adam run with --init-from; a full restore
 * of it is refused because the momentum slots are not in the program. */
static void test_weights_only_skips_another_optimizers_state(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *pm = compile_opt("momentum(0.01, 0.9)", st), *pa = compile_opt("adam(0.01)", st);
    gr_session *m = new_session(pm, st), *a = new_session(pa, st);
    float wm[32], wa[32];
    train(m, 10, st);
    assert_gr_ok(gr_session_save(m, tpath("mom.safetensors"), st), st);
    assert_int_equal(gr_session_restore(a, tpath("mom.safetensors"), NULL, st), GR_ERR_DATA);
    assert_non_null(strstr(gr_status_message(st), "tensor 'w/momentum': unexpected"));
    gr_restore_options o = {.weights_only = 1};
    assert_gr_ok(gr_session_restore(a, tpath("mom.safetensors"), &o, st), st);
    assert_gr_ok(gr_variable_read(m, "w", wm, sizeof wm, st), st);
    assert_gr_ok(gr_variable_read(a, "w", wa, sizeof wa, st), st);
    assert_memory_equal(wm, wa, sizeof wm);
    gr_session_free(m);
    gr_session_free(a);
    gr_program_free(pm);
    gr_program_free(pa);
    gr_status_free(st);
}

/* ---- corrupt and mismatched files (program: sgd, no slots) ---- */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*len + 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spill(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
}

/* A safetensors file with header `json` and `data_len` bytes of data. */
static void write_st(const char *path, const char *json, size_t data_len)
{
    size_t n = strlen(json);
    uint8_t *b = calloc(1, 8 + n + data_len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    spill(path, b, 8 + n + data_len);
    free(b);
}

typedef struct fixture {
    gr_status *st;
    gr_program *p;
    gr_session *s;
    float before[64];
    size_t n;
} fixture;

static void fixture_init(fixture *fx)
{
    fx->st = gr_status_new();
    fx->p = compile_opt("sgd(0.05)", fx->st);
    fx->s = new_session(fx->p, fx->st);
    train(fx->s, 5, fx->st);
    fx->n = all_vars(fx->s, "sgd", fx->before, fx->st);
}

static void fixture_free(fixture *fx)
{
    gr_session_free(fx->s);
    gr_program_free(fx->p);
    gr_status_free(fx->st);
}

/* The restore must fail with a message holding every `want` string, the
 * file's name among them, and leave the session exactly as it was. */
static void expect_refused(fixture *fx, const char *path, const gr_restore_options *o, ...)
{
    gr_code c = gr_session_restore(fx->s, path, o, fx->st);
    const char *msg = gr_status_message(fx->st);
    if (c == GR_OK) fail_msg("restore of %s succeeded", path);
    if (!strstr(msg, path)) fail_msg("message does not name the file: %s", msg);
    va_list ap;
    va_start(ap, o);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(msg, w)) fail_msg("message lacks '%s': %s", w, msg);
    va_end(ap);
    float after[64];
    assert_int_equal(all_vars(fx->s, "sgd", after, fx->st), fx->n);
    assert_memory_equal(fx->before, after, fx->n * sizeof(float));
    assert_int_equal(gr_session_step(fx->s), 5);
}

#define W_OK_ "\"w\":{\"dtype\":\"F32\",\"shape\":[8,4],\"data_offsets\":[0,128]}"
#define B_OK_ "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[128,144]}"
#define V_OK_ "\"v\":{\"dtype\":\"F32\",\"shape\":[4,1],\"data_offsets\":[144,160]}"

static void test_truncated_files_are_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    gr_session *other = new_session(fx.p, fx.st);
    train(other, 9, fx.st);
    assert_gr_ok(gr_session_save(other, tpath("good.safetensors"), fx.st), fx.st);
    size_t len;
    uint8_t *b = slurp(tpath("good.safetensors"), &len);
    size_t hdr = 8 + (size_t)b[0] + ((size_t)b[1] << 8);
    struct {
        size_t cut;
        const char *want;
    } cuts[] = {{0, "too short"},
                {5, "too short"},
                {8, "exceeds the file size"},
                {hdr / 2, "exceeds the file size"},
                {hdr - 1, "exceeds the file size"},
                {hdr, "past the end of the data"},
                {hdr + 100, "past the end of the data"},
                {len - 1, "past the end of the data"}};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        spill(tpath("cut.safetensors"), b, cuts[i].cut);
        expect_refused(&fx, tpath("cut.safetensors"), NULL, cuts[i].want, NULL);
    }
    free(b);
    gr_session_free(other);
    fixture_free(&fx);
}

static void test_flipped_header_length_is_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    assert_gr_ok(gr_session_save(fx.s, tpath("good.safetensors"), fx.st), fx.st);
    size_t len;
    uint8_t *b = slurp(tpath("good.safetensors"), &len);
    for (int byte = 0; byte < 8; byte++) {
        b[byte] ^= 0xa5;
        spill(tpath("flip.safetensors"), b, len);
        b[byte] ^= 0xa5;
        /* longer than the file, or the JSON cut or run into the data */
        expect_refused(&fx, tpath("flip.safetensors"), NULL, NULL);
    }
    b[7] ^= 0x80;
    spill(tpath("flip.safetensors"), b, len);
    expect_refused(&fx, tpath("flip.safetensors"), NULL, "exceeds the file size", NULL);
    free(b);
    fixture_free(&fx);
}

static void test_non_json_header_is_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("bad.safetensors"), "{\"w\": {dtype: F32}}", 160);
    expect_refused(&fx, tpath("bad.safetensors"), NULL, "not valid JSON", NULL);
    write_st(tpath("bad.safetensors"), "[1, 2, 3]", 160);
    expect_refused(&fx, tpath("bad.safetensors"), NULL, "not a JSON object", NULL);
    write_st(tpath("bad.safetensors"),
             "{\"w\": {\"dtype\": \"F32\", \"shape\": \"8x4\", "
             "\"data_offsets\": [0, 128]}}",
             160);
    expect_refused(&fx, tpath("bad.safetensors"), NULL, "tensor 'w'", "shape", NULL);
    fixture_free(&fx);
}

static void test_offsets_out_of_bounds_or_overlapping_are_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("oob.safetensors"),
             "{" W_OK_ "," B_OK_ ",\"v\":{\"dtype\":\"F32\",\"shape\":[4,1],"
             "\"data_offsets\":[144,1000]}}",
             160);
    expect_refused(&fx, tpath("oob.safetensors"), NULL, "tensor 'v'", "past the end", NULL);
    write_st(tpath("rev.safetensors"),
             "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[144,128]}," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("rev.safetensors"), NULL, "tensor 'b'", "begin > end", NULL);
    write_st(tpath("ovl.safetensors"),
             "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[64,80]}," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("ovl.safetensors"), NULL, "'w' and 'b'", "overlap", NULL);
    fixture_free(&fx);
}

static void test_wrong_dtype_and_shape_are_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("dt.safetensors"),
             "{\"w\":{\"dtype\":\"I32\",\"shape\":[8,4],\"data_offsets\":[0,128]}," B_OK_ "," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("dt.safetensors"), NULL,
                   "tensor 'w': dtype I32 does not match the variable's F32", NULL);
    write_st(tpath("dt.safetensors"),
             "{\"w\":{\"dtype\":\"F16\",\"shape\":[8,4],\"data_offsets\":[0,128]}," B_OK_ "," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("dt.safetensors"), NULL, "tensor 'w'", "F16", NULL);
    write_st(tpath("sh.safetensors"),
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,128]}," B_OK_ "," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("sh.safetensors"), NULL,
                   "tensor 'w': shape [4,8] does not match the variable's [8,4]", NULL);
    write_st(tpath("sz.safetensors"),
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,4],\"data_offsets\":[0,124]}," B_OK_ "," V_OK_
             "}",
             160);
    expect_refused(&fx, tpath("sz.safetensors"), NULL, "tensor 'w'", "needs 128 bytes", NULL);
    fixture_free(&fx);
}

static void test_missing_tensor_is_refused_unless_allowed(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("miss.safetensors"), "{" W_OK_ "," B_OK_ "}", 144);
    expect_refused(&fx, tpath("miss.safetensors"), NULL, "tensor 'v': missing", NULL);
    gr_restore_options o = {.allow_missing = 1};
    assert_gr_ok(gr_session_restore(fx.s, tpath("miss.safetensors"), &o, fx.st), fx.st);
    float w[32], zero[32] = {0}, v[4];
    assert_gr_ok(gr_variable_read(fx.s, "w", w, sizeof w, fx.st), fx.st);
    assert_gr_ok(gr_variable_read(fx.s, "v", v, sizeof v, fx.st), fx.st);
    assert_memory_equal(w, zero, sizeof w);           /* loaded from the file */
    assert_memory_equal(v, fx.before + 36, sizeof v); /* kept */
    fixture_free(&fx);
}

static void test_unexpected_tensor_is_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("extra.safetensors"),
             "{" W_OK_ "," B_OK_ "," V_OK_
             ",\"model/zz\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[160,164]}}",
             164);
    expect_refused(&fx, tpath("extra.safetensors"), NULL, "tensor 'model/zz': unexpected", NULL);
    write_st(tpath("dup.safetensors"), "{" W_OK_ "," W_OK_ "," B_OK_ "," V_OK_ "}", 160);
    expect_refused(&fx, tpath("dup.safetensors"), NULL, "'w' appears twice", NULL);
    fixture_free(&fx);
}

static void test_bad_metadata_is_refused(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_st(tpath("meta.safetensors"),
             "{\"__metadata__\":{\"step\":\"-3\"}," W_OK_ "," B_OK_ "," V_OK_ "}", 160);
    expect_refused(&fx, tpath("meta.safetensors"), NULL, "metadata 'step'", NULL);
    write_st(tpath("meta.safetensors"),
             "{\"__metadata__\":{\"data.d.epoch\":\"1\",\"data.d.position\":\"99\"}," W_OK_
             "," B_OK_ "," V_OK_ "}",
             160);
    expect_refused(&fx, tpath("meta.safetensors"), NULL, "data.d.position", "12 batches", NULL);
    write_st(tpath("meta.safetensors"),
             "{\"__metadata__\":{\"data.nope.epoch\":\"1\"}," W_OK_ "," B_OK_ "," V_OK_ "}", 160);
    expect_refused(&fx, tpath("meta.safetensors"), NULL, "no data source 'nope'", NULL);
    write_st(tpath("meta.safetensors"),
             "{\"__metadata__\":{\"step\":3}," W_OK_ "," B_OK_ "," V_OK_ "}", 160);
    expect_refused(&fx, tpath("meta.safetensors"), NULL, "not a string", NULL);
    fixture_free(&fx);
}

/* ---- numbers and names in the header (issue 23) ---- */

/* A header with metadata `meta` (JSON members) and the three variables. */
static void write_meta(const char *path, const char *meta)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"__metadata__\":{%s}," W_OK_ "," B_OK_ "," V_OK_ "}", meta);
    write_st(path, json, 160);
}

/* Every number in the metadata is decimal digits in [min, 2^53]: a step of
 * 2^63 - 1 would hang the training loop, 2^64 - 1 resume from step -1. */
static void test_metadata_numbers_are_strict_and_at_most_2_53(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"step", "9223372036854775807"},
        {"step", "18446744073709551615"},
        {"step", "99999999999999999999999"},
        {"step", "9007199254740993"},
        {"step", "+5"},
        {"step", " 5"},
        {"step", "5 "},
        {"step", "0x10"},
        {"step", ""},
        {"run_counter", "9007199254740993"},
        {"processes", "0"},
        {"data.d.epoch", "18446744073709551615"},
        {"data.d.batch", "0"},
        {"data.d.batch", "-16"},
    };
    fixture fx;
    fixture_init(&fx);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char meta[256], key[64];
        const char *pos = strncmp(bad[i][0], "data.", 5) == 0 ? ",\"data.d.position\":\"1\"" : "";
        const char *ep = strcmp(bad[i][0], "data.d.batch") == 0 ? ",\"data.d.epoch\":\"0\"" : "";
        snprintf(meta, sizeof meta, "\"%s\":\"%s\"%s%s", bad[i][0], bad[i][1], pos, ep);
        write_meta(tpath("num.safetensors"), meta);
        snprintf(key, sizeof key, "metadata '%s'", bad[i][0]);
        expect_refused(&fx, tpath("num.safetensors"), NULL, key, bad[i][1], "2^53", NULL);
    }
    fixture_free(&fx);
}

/* At GR_MAX_STEPS a checkpoint restores, and the next training step is
 * refused rather than counted past it. */
static void test_step_2_53_restores_then_refuses_to_train(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    write_meta(tpath("max.safetensors"), "\"step\":\"9007199254740992\"");
    assert_gr_ok(gr_session_restore(fx.s, tpath("max.safetensors"), NULL, fx.st), fx.st);
    assert_true(gr_session_step(fx.s) == GR_MAX_STEPS);
    assert_int_equal(gr_run(fx.s, "train", NULL, 0, NULL, 0, fx.st), GR_ERR_ARG);
    assert_non_null(strstr(gr_status_message(fx.st), "GR_MAX_STEPS"));
    assert_true(gr_session_step(fx.s) == GR_MAX_STEPS);
    fixture_free(&fx);
}

/* A name is what it reads as: "w\u0000junk" must not restore into w, and a
 * control or invisible character, bad UTF-8 or an empty name is refused. */
static void test_names_with_nul_or_hidden_characters_are_refused(void **state)
{
    (void)state;
    static const struct {
        const char *name, *want;
    } bad[] = {{"w\\u0000junk", "NUL"},    {"w\\u0000", "NUL"},
               {"w\\u001b[2J", "control"}, {"w\\n", "control"},
               {"w\\u0085", "control"},    {"w\\u202e", "invisible"},
               {"w\\u200b", "invisible"},  {"w\xff", "UTF-8"},
               {"w\xc0\xb7", "UTF-8"},     {"", "empty"}};
    fixture fx;
    fixture_init(&fx);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"%s\":{\"dtype\":\"F32\",\"shape\":[8,4],\"data_offsets\":[0,128]}," B_OK_
                 "," V_OK_ "}",
                 bad[i].name);
        write_st(tpath("name.safetensors"), json, 160);
        expect_refused(&fx, tpath("name.safetensors"), NULL, bad[i].want, NULL);
    }
    write_meta(tpath("name.safetensors"), "\"step\\u0000junk\":\"3\"");
    expect_refused(&fx, tpath("name.safetensors"), NULL, "NUL", NULL);
    write_meta(tpath("name.safetensors"), "\"step\":\"3\\u0000junk\"");
    expect_refused(&fx, tpath("name.safetensors"), NULL, "NUL", NULL);
    write_meta(tpath("name.safetensors"), "\"st\\u001bep\":\"3\"");
    expect_refused(&fx, tpath("name.safetensors"), NULL, "metadata key", "control", NULL);
    fixture_free(&fx);
}

/* Shuffled examples, batch as a param, and each step's batch fetchable. */
static const char batch_prog[] =
    "param batch = 4\n"
    "data d = gaussian(n=64, dims=[2], batch=batch, seed=3, shuffle=true)\n"
    "var w = zeros([2, 1])\n"
    "x = d.x\n"
    "train = sgd(0.1).minimize(mean(d.x @ w))\n";

static gr_session *batch_session(int batch, gr_program **p, gr_status *st)
{
    char b[16];
    snprintf(b, sizeof b, "%d", batch);
    gr_param ps[] = {{"batch", b}};
    gr_compile_options o = {.params = ps, .n_params = 1, .cpu_as_gpu = gr_test_on_gpu()};
    assert_gr_ok(gr_compile_string("batch.graph", batch_prog, strlen(batch_prog), &o, p, st), st);
    return new_session(*p, st);
}

/* The examples of the next step (batch * 2 floats) into x. */
static void next_examples(gr_session *s, float *x, size_t n, gr_status *st)
{
    gr_fetch f = {"x", x, n * sizeof *x, NULL};
    assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
}

/* The cursor counts batches: saved after 3 batches of 4 (12 examples), a
 * program with batch 6 resumes at example 12, batch 2 of its epoch; 5
 * batches of 4 (20 examples) are no whole number of batches of 6. */
static void test_restore_with_another_batch_resumes_at_the_same_example(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p4, *p6, *q6;
    gr_session *s4 = batch_session(4, &p4, st), *s6 = batch_session(6, &p6, st);
    gr_session *fresh = batch_session(6, &q6, st);
    float x[12], want[12];
    train(s4, 3, st);
    assert_gr_ok(gr_session_save(s4, tpath("b4.safetensors"), st), st);
    assert_gr_ok(gr_session_restore(s6, tpath("b4.safetensors"), NULL, st), st);
    train(fresh, 2, st);
    next_examples(fresh, want, 12, st);
    next_examples(s6, x, 12, st);
    assert_memory_equal(x, want, sizeof x);
    train(s4, 2, st);
    assert_gr_ok(gr_session_save(s4, tpath("b4.safetensors"), st), st);
    assert_int_not_equal(gr_session_restore(s6, tpath("b4.safetensors"), NULL, st), GR_OK);
    const char *msg = gr_status_message(st);
    if (!strstr(msg, "20 examples") || !strstr(msg, "batches of 6")) fail_msg("message: %s", msg);
    gr_session_free(s4);
    gr_session_free(s6);
    gr_session_free(fresh);
    gr_program_free(p4);
    gr_program_free(p6);
    gr_program_free(q6);
    gr_status_free(st);
}

static void test_missing_file_and_bad_save_path_fail_cleanly(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    expect_refused(&fx, tpath("does-not-exist.safetensors"), NULL, "cannot open", NULL);
    assert_int_equal(gr_session_save(fx.s, tpath("no/such/dir/x.safetensors"), fx.st), GR_ERR_IO);
    assert_non_null(strstr(gr_status_message(fx.st), "no/such/dir/x.safetensors"));
    assert_int_equal(gr_session_save(NULL, "x", fx.st), GR_ERR_ARG);
    assert_int_equal(gr_session_restore(fx.s, NULL, NULL, fx.st), GR_ERR_ARG);
    fixture_free(&fx);
}

/* Saving over an existing checkpoint leaves no temp file behind. */
static void test_save_replaces_atomically(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    assert_gr_ok(gr_session_save(fx.s, tpath("atomic.safetensors"), fx.st), fx.st);
    train(fx.s, 1, fx.st);
    assert_gr_ok(gr_session_save(fx.s, tpath("atomic.safetensors"), fx.st), fx.st);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q 'atomic.safetensors.tmp'", tmpdir);
    assert_int_not_equal(system(cmd), 0);
    gr_session *b = new_session(fx.p, fx.st);
    assert_gr_ok(gr_session_restore(b, tpath("atomic.safetensors"), NULL, fx.st), fx.st);
    assert_int_equal(gr_session_step(b), 6);
    gr_session_free(b);
    fixture_free(&fx);
}

/* ---- temporaries left by killed writers ---- */

/* The pid of a process that has exited and been reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* A process that runs until it is killed: a writer still at work.  It dies
 * with this test even if a failed assert skips end_live, and holds none of
 * the output pipes ctest waits on. */
static pid_t live_pid(void)
{
    pid_t parent = getpid(), pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
    for (;;) pause();
}

static void end_live(pid_t pid)
{
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
}

typedef char path_buf[320];

/* out = tmpdir/dir/NAME, NAME formatted with one pid. */
static const char *tmp_name(path_buf out, const char *dir, const char *fmt, pid_t pid)
{
    char name[200];
    snprintf(name, sizeof name, fmt, (long)pid);
    int n = snprintf(out, sizeof(path_buf), "%s/%s/%s", tmpdir, dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(path_buf));
    return out;
}

static void touch(const char *path)
{
    spill(path, "partial", 7);
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Names a save must keep next to sweep/sw.safetensors although the writer
 * in each (if any) is dead: they are not of the pattern, or belong to
 * another checkpoint (one in the parent folder has the same base name). */
static const char *const keep_fmt[] = {
    "sw.safetensors.tmp.%ld.Ab3dE9.bak", "sw.safetensors.tmp.%ld",
    "sw.safetensors.tmp.0%ld.Ab3dE9",    "sw.safetensors.tmp.%ld.Ab-dE9",
    "sw.safetensors.tmp.%ld.Ab3dE",      "sw.safetensors.tmp.-%ld.Ab3dE9",
    "sw.safetensors.tmp.Ab3dE9",         "sw.safetensors.notes.%ld",
    "sw.safetensorsX.tmp.%ld.Ab3dE9",    "other.safetensors.tmp.%ld.Ab3dE9",
    "../sw.safetensors.tmp.%ld.Ab3dE9",
};
#define N_KEEP (sizeof keep_fmt / sizeof *keep_fmt)

static void test_save_removes_stale_temporaries_of_its_path_only(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    assert_int_equal(mkdir(tpath("sweep"), 0755), 0);
    pid_t dead = dead_pid(), live = live_pid();
    path_buf stale[2], keep[N_KEEP], live_tmp, own_tmp;
    tmp_name(stale[0], "sweep", "sw.safetensors.tmp.%ld.Ab3dE9", dead);
    tmp_name(stale[1], "sweep", "sw.safetensors.tmp.%ld.zzzzzz", dead);
    tmp_name(live_tmp, "sweep", "sw.safetensors.tmp.%ld.Ab3dE9", live);
    tmp_name(own_tmp, "sweep", "sw.safetensors.tmp.%ld.Ab3dE9", getpid());
    for (size_t i = 0; i < N_KEEP; i++) touch(tmp_name(keep[i], "sweep", keep_fmt[i], dead));
    for (int i = 0; i < 2; i++) touch(stale[i]);
    touch(live_tmp);
    touch(own_tmp); /* another thread of this process, saving the same path */
    assert_gr_ok(gr_session_save(fx.s, tpath("sweep/sw.safetensors"), fx.st), fx.st);
    for (int i = 0; i < 2; i++)
        if (exists(stale[i])) fail_msg("stale temporary kept: %s", stale[i]);
    for (size_t i = 0; i < N_KEEP; i++)
        if (!exists(keep[i])) fail_msg("removed a file that is not a stale temporary: %s", keep[i]);
    assert_true(exists(live_tmp));
    assert_true(exists(own_tmp));
    end_live(live); /* the writer dies: its temporary is stale now */
    assert_gr_ok(gr_session_save(fx.s, tpath("sweep/sw.safetensors"), fx.st), fx.st);
    assert_false(exists(live_tmp));
    assert_true(exists(own_tmp));
    fixture_free(&fx);
}

/* A writer in another pid namespace has a pid that looks dead from here;
 * its lock on the temporary keeps it.  A folder of that name is kept too. */
static void test_save_keeps_locked_or_non_file_temporaries(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    pid_t dead = dead_pid();
    path_buf locked, folder;
    touch(tmp_name(locked, ".", "lk.safetensors.tmp.%ld.Ab3dE9", dead));
    assert_int_equal(mkdir(tmp_name(folder, ".", "lk.safetensors.tmp.%ld.zzzzzz", dead), 0755), 0);
    int fd = open(locked, O_RDONLY);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_gr_ok(gr_session_save(fx.s, tpath("lk.safetensors"), fx.st), fx.st);
    assert_true(exists(locked));
    assert_true(exists(folder));
    close(fd);
    assert_gr_ok(gr_session_save(fx.s, tpath("lk.safetensors"), fx.st), fx.st);
    assert_false(exists(locked));
    assert_true(exists(folder));
    fixture_free(&fx);
}

/* ---- saving while other threads train ---- */

typedef struct trainer {
    gr_session *s;
    int steps;
} trainer;

static void *train_thread(void *arg)
{
    trainer *t = arg;
    gr_status *st = gr_status_new();
    for (int i = 0; i < t->steps; i++)
        if (gr_run(t->s, "train", NULL, 0, NULL, 0, st) != GR_OK) break;
    gr_status_free(st);
    return NULL;
}

static uint64_t meta_u64(const safet_file *f, const char *key)
{
    const char *v = safet_meta_get(f, key);
    if (!v) fail_msg("metadata '%s' missing", key);
    return strtoull(v, NULL, 10);
}

/* The saved step, the run counter and the data cursor all count the same
 * runs: a snapshot taken in the middle of a run would break that. */
static void test_save_during_concurrent_runs_is_consistent(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = compile_opt("adam(0.01)", st);
    gr_session_options so = {.threads = 2, .seed = 1};
    gr_session *s = NULL, *chk = new_session(p, st);
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    assert_gr_ok(gr_prepare(s, "train", NULL, 0, st), st);
    trainer t = {s, 3000};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, train_thread, &t);
    for (int k = 0; k < 20; k++) {
        assert_gr_ok(gr_session_save(s, tpath("conc.safetensors"), st), st);
        assert_gr_ok(gr_session_restore(chk, tpath("conc.safetensors"), NULL, st), st);
        size_t len;
        uint8_t *b = slurp(tpath("conc.safetensors"), &len);
        safet_file f;
        char err[512];
        assert_int_equal(safet_parse(b, len, "conc", &f, err, sizeof err), 0);
        uint64_t step = meta_u64(&f, "step");
        assert_int_equal(step, gr_session_step(chk));
        assert_int_equal(meta_u64(&f, "run_counter"), step);
        assert_int_equal(meta_u64(&f, "data.d.epoch") * 12 + meta_u64(&f, "data.d.position"), step);
        safet_file_free(&f);
        free(b);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_int_equal(gr_session_step(s), 6000);
    gr_session_free(s);
    gr_session_free(chk);
    gr_program_free(p);
    gr_status_free(st);
}

/* FIPS 180-4 test vectors, plus one tail that needs a second padding
 * block (56 bytes) and one of several full blocks. */
static void test_sha256_matches_known_vectors(void **state)
{
    (void)state;
    static const char two_blocks[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char hex[65], *million = malloc(1000000);
    sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex(two_blocks, strlen(two_blocks), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(million, 'a', 1000000);
    sha256_hex(million, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_is_bit_identical_sgd),
        cmocka_unit_test(test_round_trip_is_bit_identical_with_momentum_slots),
        cmocka_unit_test(test_round_trip_is_bit_identical_with_adam_slots),
        cmocka_unit_test(test_resume_equals_uninterrupted_adam_dropout_shuffle),
        cmocka_unit_test(test_resume_equals_uninterrupted_momentum),
        cmocka_unit_test(test_resume_equals_uninterrupted_fashion_mlp),
        cmocka_unit_test(test_weights_only_keeps_slots_and_step_at_init),
        cmocka_unit_test(test_weights_only_skips_another_optimizers_state),
        cmocka_unit_test(test_truncated_files_are_refused),
        cmocka_unit_test(test_flipped_header_length_is_refused),
        cmocka_unit_test(test_non_json_header_is_refused),
        cmocka_unit_test(test_offsets_out_of_bounds_or_overlapping_are_refused),
        cmocka_unit_test(test_wrong_dtype_and_shape_are_refused),
        cmocka_unit_test(test_missing_tensor_is_refused_unless_allowed),
        cmocka_unit_test(test_unexpected_tensor_is_refused),
        cmocka_unit_test(test_bad_metadata_is_refused),
        cmocka_unit_test(test_metadata_numbers_are_strict_and_at_most_2_53),
        cmocka_unit_test(test_step_2_53_restores_then_refuses_to_train),
        cmocka_unit_test(test_names_with_nul_or_hidden_characters_are_refused),
        cmocka_unit_test(test_restore_with_another_batch_resumes_at_the_same_example),
        cmocka_unit_test(test_missing_file_and_bad_save_path_fail_cleanly),
        cmocka_unit_test(test_save_replaces_atomically),
        cmocka_unit_test(test_save_removes_stale_temporaries_of_its_path_only),
        cmocka_unit_test(test_save_keeps_locked_or_non_file_temporaries),
        cmocka_unit_test(test_save_during_concurrent_runs_is_consistent),
        cmocka_unit_test(test_sha256_matches_known_vectors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
