/* test_text.c - the text data source, text(...): windows and their
 * shifted labels, the vocabulary, the split, directories, seeded shuffles
 * and resuming from a cursor, contiguous streams (streams=true), every
 * error; then through the public API: the vocabulary of a program and of
 * its checkpoints, a model that trains on tests/text/tiny.txt and resumes
 * to the same weights, and an LSTM that carries its state across batches
 * of streams, in training and in evaluation (a state of the pass's own,
 * which leaves training's alone, from one thread or several).  Fixture
 * files are written into a mkdtemp folder. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"
#include "runtime/data/data.h"

#define TINY GR_TEST_DIR "/text/tiny.txt"

static char g_dir[256];

static const char *fixture(const char *name, const char *text, size_t len)
{
    static char paths[16][320];
    static int n;
    char *p = paths[n++ % 16];
    snprintf(p, sizeof paths[0], "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return p;
}

static const char *fixture_str(const char *name, const char *text)
{
    return fixture(name, text, strlen(text));
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/gr_text_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static data_spec spec_of(const char **paths, int n, int64_t block, int64_t batch)
{
    return (data_spec){.kind = DATA_KIND_TEXT,
                       .path = {paths[0], NULL},
                       .paths = paths,
                       .n_paths = n,
                       .batch = batch,
                       .block = block,
                       .stride = 1,
                       .split = 1.0};
}

static data_reader *open_ok(const data_spec *s)
{
    char err[512] = "";
    data_reader *r = data_open(s, err, sizeof err);
    if (!r) fail_msg("data_open: %s", err);
    return r;
}

/* The message of a refused probe and open (they must agree). */
static const char *refusal(const data_spec *s)
{
    static char err[512];
    data_info info;
    char err2[512];
    assert_int_equal(data_probe(s, &info, err, sizeof err), -1);
    assert_null(data_open(s, err2, sizeof err2));
    assert_string_equal(err, err2);
    return err;
}

/* x is a window of block ids, y the same window one id later, every
 * stride ids; the ids of a lower-case alphabet are its letters' order. */
static void test_windows_and_shifted_labels(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("abc.txt", "abcdefghijklmnopqrstuvwxyz")};
    data_spec s = spec_of(paths, 1, 5, 3);
    s.stride = 2;
    data_info info;
    char err[512];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, (26 - 5 - 1) / 2 + 1); /* starts 0, 2, ..., 20 */
    assert_int_equal(info.vocab, 26);
    assert_int_equal(info.x_i32, 1);
    assert_int_equal(info.y_per, 5);
    data_reader *r = open_ok(&s);
    int32_t x[15], y[15];
    for (int b = 0; b < 2; b++) {
        assert_int_equal(data_next(r, (float *)x, y), 0);
        for (int i = 0; i < 3; i++)
            for (int t = 0; t < 5; t++) {
                int start = 2 * (3 * b + i);
                assert_int_equal(x[i * 5 + t], start + t);
                assert_int_equal(y[i * 5 + t], start + t + 1);
            }
    }
    data_close(r);
}

/* The characters present, in code-point order, as UTF-8; bytes: none. */
static void test_vocabulary_is_the_characters_present(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("v.txt", "b\xc3\xa9"
                                                "a\xe2\x82\xac"
                                                "b\n\xf0\x9f\x98\x80"
                                                "a")};
    data_spec s = spec_of(paths, 1, 2, 1);
    char *chars = NULL, err[512];
    assert_int_equal(data_text_vocab(&s, &chars, err, sizeof err), 0);
    assert_string_equal(chars, "\nab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    free(chars);
    data_info info;
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.vocab, 6);
    assert_int_equal(info.n, 8 - 2);
    s.byte_vocab = 1;
    assert_int_equal(data_text_vocab(&s, &chars, err, sizeof err), 0);
    assert_null(chars);
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.vocab, 256);
    assert_int_equal(info.n, 14 - 2);
}

/* vocab="words": lowercased runs of letters, digits and apostrophes (and
 * UTF-8), punctuation dropped; id 0 is <unk>, then the most frequent words,
 * ties in byte order, vocab_size in all; the rest are <unk>. */
static void test_word_vocabulary_by_frequency_with_unk(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("w.txt", "The cat sat. The dog sat!\nA cat, a DOG; "
                                                "the end. Don't caf\xc3\xa9")};
    data_spec s = spec_of(paths, 1, 2, 1);
    s.word_vocab = 5;
    char *words = NULL, err[512];
    assert_int_equal(data_text_vocab(&s, &words, err, sizeof err), 0);
    /* the 3, then a, cat, dog, sat 2 each: sat is the fifth, so <unk> */
    assert_string_equal(words, "<unk>\nthe\na\ncat\ndog");
    free(words);
    data_info info;
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.vocab, 5);
    assert_int_equal(info.n, 14 - 2); /* 14 words, windows of 3 */
    s.batch = 12;
    s.shuffle = 0;
    data_reader *r = open_ok(&s);
    int32_t x[24], y[24];
    assert_int_equal(data_next(r, (float *)x, y), 0);
    /* the cat sat the dog sat a cat a dog the end don't café */
    static const int32_t ids[] = {1, 3, 0, 1, 4, 0, 2, 3, 2, 4, 1, 0, 0, 0};
    for (int i = 0; i < 12; i++) {
        assert_int_equal(x[2 * i], ids[i]);
        assert_int_equal(x[2 * i + 1], ids[i + 1]);
        assert_int_equal(y[2 * i + 1], ids[i + 2]);
    }
    data_close(r);
    s.word_vocab = 100; /* more room than words: all 8 and <unk> */
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.vocab, 9);
}

/* split=0.75 of 20 characters: training windows in the first 15, the
 * validation ones in the last 5, both with the whole text's ids. */
static void test_split_holds_out_the_end(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("s.txt", "aaaaaaaaaaaaaaabcdez")};
    data_spec s = spec_of(paths, 1, 2, 1);
    s.split = 0.75;
    data_info info;
    char err[512];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 15 - 2);
    assert_int_equal(info.vocab, 6);
    s.val_part = 1;
    s.stride = 2;
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 2); /* "bcdez": windows at b and d */
    data_reader *r = open_ok(&s);
    int32_t x[2], y[2];
    assert_int_equal(data_next(r, (float *)x, y), 0);
    assert_true(x[0] == 1 && x[1] == 2 && y[0] == 2 && y[1] == 3); /* b c -> c d */
    assert_int_equal(data_next(r, (float *)x, y), 0);
    assert_true(x[0] == 3 && x[1] == 4 && y[1] == 5); /* d e -> e z */
    data_close(r);
}

/* A directory: its files in name order, without NAME.dat, NAME.u8 beside
 * NAME or hidden files; a list of paths is read in its order. */
static void test_directory_and_list_of_files(void **state)
{
    (void)state;
    char sub[300], cmd[1024];
    snprintf(sub, sizeof sub, "%s/corpus", g_dir);
    snprintf(cmd, sizeof cmd,
             "mkdir %s && cd %s && printf bb > b && printf aa > a && "
             "printf zz > a.dat && ln -s a a.u8 && printf yy > .hidden && printf xx > c.u8",
             sub, sub);
    assert_int_equal(system(cmd), 0);
    const char *paths[] = {sub};
    data_spec s = spec_of(paths, 1, 1, 1);
    char *chars, err[512];
    assert_int_equal(data_text_vocab(&s, &chars, err, sizeof err), 0);
    assert_string_equal(chars, "abx"); /* c.u8 has no c beside it */
    free(chars);
    data_reader *r = open_ok(&s);
    int32_t x, y, want[5] = {0, 0, 1, 1, 2}; /* a a b b x x */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(data_next(r, (float *)&x, &y), 0);
        assert_int_equal(x, want[i]);
    }
    data_close(r);
    const char *two[] = {fixture_str("l1.txt", "zz"), fixture_str("l2.txt", "aa")};
    s = spec_of(two, 2, 3, 1);
    data_info info;
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 1);
    r = open_ok(&s);
    int32_t x3[3], y3[3];
    assert_int_equal(data_next(r, (float *)x3, y3), 0); /* z z a -> z a a: in the list's order */
    assert_true(x3[0] == 1 && x3[1] == 1 && x3[2] == 0 && y3[2] == 0);
    data_close(r);
}

/* Windows in a seeded order: the same seed gives the same batches, and a
 * reader that seeks to a cursor gives what the first gave from there; so
 * does a streams reader, across its wrap (checkpoints store the cursor). */
static void read_batches(data_reader *r, int n, int32_t *out, int per)
{
    int32_t y[64];
    for (int b = 0; b < n; b++) assert_int_equal(data_next(r, (float *)(out + b * per), y), 0);
}

/* A reader of s read for an epoch and 5 batches more, and another that
 * stops after 7, is reopened, seeks to its cursor and reads on: the same
 * batches.  The first batch into first0. */
static void check_resume(const data_spec *s, int32_t *first0)
{
    data_reader *a = open_ok(s), *b = open_ok(s);
    data_info info;
    data_reader_info(a, &info);
    int per = (int)(s->batch * s->block), steps = (int)(info.n / s->batch) + 5;
    int32_t *first = calloc((size_t)(steps * per), 4), *again = calloc((size_t)(steps * per), 4);
    read_batches(a, steps, first, per);
    read_batches(b, 7, again, per);
    uint64_t e, p;
    data_cursor(b, &e, &p);
    data_close(b);
    b = open_ok(s);
    assert_int_equal(data_seek(b, e, p), 0);
    read_batches(b, steps - 7, again + 7 * per, per);
    assert_memory_equal(first, again, (size_t)(steps * per) * 4);
    memcpy(first0, first, (size_t)per * 4);
    data_close(a);
    data_close(b);
    free(first);
    free(again);
}

static void test_shuffled_windows_and_streams_resume_from_a_cursor(void **state)
{
    (void)state;
    const char *paths[] = {TINY};
    data_spec s = spec_of(paths, 1, 8, 4);
    s.shuffle = 1;
    s.seed = 11;
    int32_t first[32], other[32];
    check_resume(&s, first);
    s.seed = 12;
    data_reader *b = open_ok(&s);
    read_batches(b, 1, other, 32);
    assert_true(memcmp(first, other, sizeof first) != 0);
    data_close(b);
    s = spec_of(paths, 1, 8, 4); /* across the streams' wrap too */
    s.stride = 8;
    s.streams = 1;
    check_resume(&s, first);
}

/* streams=true: 26 letters in batch 2 streams of 13 (a..m, n..z), block
 * 3, so 4 windows a stream: batch k's row b is stream b's window k, x one
 * id before y, and row b of batch k + 1 starts where row b of batch k's y
 * ends; after 4 batches (an epoch, no tail) every stream starts again. */
static void test_streams_rows_continue_and_wrap(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("streams.txt", "abcdefghijklmnopqrstuvwxyz")};
    data_spec s = spec_of(paths, 1, 3, 2);
    s.stride = 3;
    s.streams = 1;
    data_info info;
    char err[512];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 2 * 4);
    data_reader *r = open_ok(&s);
    int32_t x[6], y[6], last[2] = {-1, -1};
    for (int k = 0; k < 6; k++) {
        assert_int_equal(data_next(r, (float *)x, y), 0);
        for (int b = 0; b < 2; b++) {
            for (int t = 0; t < 3; t++) {
                assert_int_equal(x[b * 3 + t], 13 * b + 3 * (k % 4) + t);
                assert_int_equal(y[b * 3 + t], x[b * 3 + t] + 1);
            }
            if (k % 4) assert_int_equal(x[b * 3], last[b]); /* continues row b */
            last[b] = y[b * 3 + 2];
        }
    }
    uint64_t e, p;
    data_cursor(r, &e, &p);
    assert_true(e == 1 && p == 2);
    data_close(r);
}

/* s is refused with the message fmt names, its %s the first path. */
static void assert_refused(const data_spec *s, const char *fmt)
{
    char want[1024];
    snprintf(want, sizeof want, fmt, s->path[0]);
    assert_string_equal(refusal(s), want);
}

/* Streams shorter than a window, and streams split among processes. */
static void test_streams_errors(void **state)
{
    (void)state;
    const char *paths[] = {fixture_str("short_streams.txt", "abcdefghij")};
    data_spec s = spec_of(paths, 1, 3, 4);
    s.streams = 1;
    assert_refused(&s, "%s: streams=true cuts the text's training part (10 characters) into "
                       "batch 4 streams of 2, shorter than a window (block + 1 = 4)");
    s = spec_of(paths, 1, 2, 1);
    s.streams = 1;
    s.shards = 2;
    assert_refused(&s, "%s: streams=true cannot be split among 2 processes (each row must "
                       "continue its own stream)");
}

static void test_errors_name_the_file_and_why(void **state)
{
    (void)state;
    char want[1024];
    const char *missing[] = {"/nonexistent/corpus.txt"};
    data_spec s = spec_of(missing, 1, 4, 1);
    assert_string_equal(refusal(&s),
                        "/nonexistent/corpus.txt: cannot open: No such file or directory");
    const char *empty[] = {fixture_str("empty.txt", "")};
    s = spec_of(empty, 1, 4, 1);
    snprintf(want, sizeof want, "%s: the file is empty", empty[0]);
    assert_string_equal(refusal(&s), want);
    const char *bad[] = {fixture_str("ok.txt", "fine"), fixture_str("bad.txt", "ab\xff"
                                                                               "cd")};
    s = spec_of(bad, 2, 2, 1);
    snprintf(want, sizeof want, "%s: invalid UTF-8 at byte 2; read it with vocab=\"bytes\"",
             bad[1]);
    assert_string_equal(refusal(&s), want);
    s.byte_vocab = 1; /* any bytes */
    data_info info;
    char err[512];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    const char *nul[] = {fixture("nul.txt", "ab\0cd", 5)};
    s = spec_of(nul, 1, 2, 1);
    snprintf(want, sizeof want, "%s: a NUL character at byte 2; read it with vocab=\"bytes\"",
             nul[0]);
    assert_string_equal(refusal(&s), want);
    const char *shrt[] = {fixture_str("short.txt", "abcde")};
    s = spec_of(shrt, 1, 5, 1);
    snprintf(want, sizeof want,
             "%s: block 5 is longer than the text's training part (5 characters; a window "
             "needs block + 1)",
             shrt[0]);
    assert_string_equal(refusal(&s), want);
    s = spec_of(shrt, 1, 2, 4);
    snprintf(want, sizeof want,
             "%s: batch 4 is larger than the 3 windows of the text's training part (block 2, "
             "stride 1)",
             shrt[0]);
    assert_string_equal(refusal(&s), want);
    s = spec_of(shrt, 1, 2, 1);
    s.val_part = 1;
    snprintf(want, sizeof want, "%s: split=1 leaves nothing for the validation part", shrt[0]);
    assert_string_equal(refusal(&s), want);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/nothing", g_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *none[] = {dir};
    s = spec_of(none, 1, 2, 1);
    snprintf(want, sizeof want,
             "%s: no text files in the directory (names starting with '.' or ending in .dat, "
             "and NAME.u8 beside NAME, are skipped)",
             dir);
    assert_string_equal(refusal(&s), want);
}

/* ---- through the public API ---- */

static const char *model = "param steps = 40\n"
                           "data train = text(\"" TINY "\", block=16, batch=4, split=0.8, seed=3)\n"
                           "data val = text(\"" TINY "\", block=16, batch=4, split=0.8, "
                           "part=\"val\")\n"
                           "var emb = normal([train.vocab, 24], std=0.1)\n"
                           "var w = normal([24, train.vocab], std=0.1)\n"
                           "fn logits(x) { return reshape(gather(emb, x), [-1, 24]) @ w }\n"
                           "loss = mean(softmax_xent(logits(train.x), reshape(train.y, [-1])))\n"
                           "val_loss = mean(softmax_xent(logits(val.x), reshape(val.y, [-1])))\n"
                           "train = adamw(cosine(0.05, warmup=5, steps=steps), clip=1.0)"
                           ".minimize(loss)\n";

static gr_session *session(gr_program **p, const char *text, gr_status *st)
{
    gr_session *s = NULL;
    gr_compile_options co = {.cpu_as_gpu = gr_test_on_gpu()};
    assert_gr_ok(gr_compile_string("inline.graph", text, strlen(text), &co, p, st), st);
    gr_session_options so = {.seed = 9, .threads = 1};
    assert_gr_ok(gr_session_new(*p, &so, &s, st), st);
    return s;
}

static void train(gr_session *s, int steps, float *loss, gr_status *st)
{
    gr_fetch f = {"train/loss", loss, sizeof *loss, NULL};
    for (int i = 0; i < steps; i++) assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
}

/* The vocabulary the program reads, as sampling decodes with it. */
static void test_program_tells_its_vocabulary(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session(&p, model, st);
    const char *chars = NULL, *paths[] = {TINY};
    int64_t size = 0;
    assert_gr_ok(gr_program_vocab(p, "val", &chars, &size, st), st);
    data_spec sp = spec_of(paths, 1, 1, 1);
    char *want, err[512];
    assert_int_equal(data_text_vocab(&sp, &want, err, sizeof err), 0);
    assert_string_equal(chars, want);
    free(want);
    int64_t n = 0;
    for (const char *c = chars; *c; c++) n += ((unsigned char)*c & 0xC0) != 0x80;
    assert_int_equal(size, n);
    assert_int_equal(gr_program_vocab(p, "nope", &chars, &size, st), GR_ERR_ARG);
    assert_string_equal(gr_status_message(st), "no text data source named 'nope'\n");
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A session of program text trained 17 steps, saved, restored into a new
 * one and trained 23 more: variable var's values then, which an
 * uninterrupted run of 40 steps must give (the data cursor, the step
 * counter and every variable restored). */
static gr_tensor *resumed_var(const char *text, const char *var, gr_status *st)
{
    char path[300];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    gr_program *p = NULL;
    gr_session *s = session(&p, text, st);
    float last;
    gr_tensor *t;
    train(s, 17, &last, st);
    assert_gr_ok(gr_session_save(s, path, st), st);
    gr_session_free(s);
    gr_program_free(p);
    s = session(&p, text, st);
    assert_gr_ok(gr_session_restore(s, path, NULL, st), st);
    train(s, 23, &last, st);
    assert_gr_ok(gr_variable_get(s, var, &t, st), st);
    gr_session_free(s);
    gr_program_free(p);
    return t;
}

/* The loss falls on the training part and is measured on the other; a
 * resumed run (the data cursor and step counter restored) ends with the
 * weights of an uninterrupted one. */
static void test_model_trains_and_resumes_to_the_same_weights(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session(&p, model, st);
    float first, last;
    gr_tensor *w1, *w2;
    train(s, 1, &first, st);
    train(s, 39, &last, st);
    assert_true(last < first * 0.8f);
    double v;
    assert_gr_ok(gr_eval(s, "val_loss", &v, st), st);
    assert_true(v > 0 && v < first);
    assert_gr_ok(gr_variable_get(s, "emb", &w1, st), st);
    gr_session_free(s);
    gr_program_free(p);
    w2 = resumed_var(model, "emb", st);
    assert_memory_equal(gr_tensor_data(w1), gr_tensor_data(w2), gr_tensor_bytes(w1));
    gr_tensor_free(w1);
    gr_tensor_free(w2);
    gr_status_free(st);
}

/* Truncated BPTT: an LSTM on streams whose last state each step assigns
 * to `carry`, the next step's first state. */
static const char *stream_model =
    "data train = text(\"" TINY "\", block=8, batch=4, streams=true)\n"
    "var emb = normal([train.vocab, 8], std=0.5)\n"
    "var w = glorot([16, 32])\n"
    "var b = zeros([32])\n"
    "var w_out = glorot([8, train.vocab])\n"
    "var carry = zeros([4, 16], trainable=false)\n"
    "out = lstm_seq(gather(emb, train.x), carry, w, b)\n"
    "last = out[1]\n"
    "loss = mean(softmax_xent(reshape(out[0] @ w_out, [-1, train.vocab]), "
    "reshape(train.y, [-1])))\n"
    "train = group(adam(0.01).minimize(loss), assign(carry, last))\n";

/* One step of stream_model: its last state, and carry afterwards. */
static void stream_step(gr_session *s, float *last, float *carry, gr_status *st)
{
    gr_fetch f = {"last", last, 64 * sizeof *last, NULL};
    gr_tensor *t;
    assert_gr_ok(gr_run(s, "train", NULL, 0, &f, 1, st), st);
    assert_gr_ok(gr_variable_get(s, "carry", &t, st), st);
    memcpy(carry, gr_tensor_data(t), 64 * sizeof *carry);
    gr_tensor_free(t);
}

/* Each step leaves its last state in carry (non-zero, and another each
 * step); a run resumed from a checkpoint, which keeps carry and the
 * streams' cursor, ends with the weights and state of an uninterrupted
 * one (a resumed carry of zeros would change both). */
static void test_lstm_state_carries_across_batches_and_resumes(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session(&p, stream_model, st);
    float last[2][64], carry[2][64];
    stream_step(s, last[0], carry[0], st);
    stream_step(s, last[1], carry[1], st);
    assert_memory_equal(last[0], carry[0], sizeof last[0]);
    assert_memory_equal(last[1], carry[1], sizeof last[1]);
    int nonzero = 0;
    for (int i = 0; i < 64; i++) nonzero += carry[0][i] != 0 && carry[1][i] != carry[0][i];
    assert_true(nonzero > 32);
    train(s, 38, &(float){0}, st);
    gr_tensor *w1, *c1, *w2, *c2;
    assert_gr_ok(gr_variable_get(s, "w", &w1, st), st);
    assert_gr_ok(gr_variable_get(s, "carry", &c1, st), st);
    gr_session_free(s);
    gr_program_free(p);
    w2 = resumed_var(stream_model, "w", st);
    c2 = resumed_var(stream_model, "carry", st);
    assert_memory_equal(gr_tensor_data(w1), gr_tensor_data(w2), gr_tensor_bytes(w1));
    assert_memory_equal(gr_tensor_data(c1), gr_tensor_data(c2), gr_tensor_bytes(c1));
    gr_tensor_free(w1);
    gr_tensor_free(c1);
    gr_tensor_free(w2);
    gr_tensor_free(c2);
    gr_status_free(st);
}

/* stream_model with validation streams: val_loss carries the state of its
 * own, val_carry, from window to window (6 of them), val_zero starts each
 * window from zeros, and probe carries training's `carry` itself through
 * the validation windows. */
static const char *eval_stream_model =
    "data train = text(\"" TINY "\", block=8, batch=4, split=0.75, streams=true)\n"
    "data val = text(\"" TINY "\", block=8, batch=4, split=0.75, part=\"val\", streams=true)\n"
    "var emb = normal([train.vocab, 8], std=0.5)\n"
    "var w = glorot([16, 32])\n"
    "var b = zeros([32])\n"
    "var w_out = glorot([8, train.vocab])\n"
    "var carry = zeros([4, 16], trainable=false)\n"
    "var val_carry = zeros([4, 16], trainable=false)\n"
    "fn cell(ids, first) { return lstm_seq(gather(emb, ids), first, w, b) }\n"
    "fn xent(h, y) {\n"
    "  return mean(softmax_xent(reshape(h @ w_out, [-1, train.vocab]), reshape(y, [-1])))\n"
    "}\n"
    "out = cell(train.x, carry)\n"
    "loss = xent(out[0], train.y)\n"
    "v = cell(val.x, val_carry)\n"
    "val_loss = group(xent(v[0], val.y), assign(val_carry, v[1]))\n"
    "z = cell(val.x, zeros([4, 16]))\n"
    "val_zero = xent(z[0], val.y)\n"
    "p = cell(val.x, carry)\n"
    "probe = group(xent(p[0], val.y), assign(carry, p[1]))\n"
    "train = group(adam(0.01).minimize(loss), assign(carry, out[1]))\n";
#define VAL_WINDOWS 6

static double eval_of(gr_session *s, const char *target, gr_status *st)
{
    double v = NAN;
    assert_gr_ok(gr_eval(s, target, &v, st), st);
    return v;
}

/* gr_eval of val_loss is the mean of its value over the 6 windows run one
 * after the other with the state carried from zeros (gr_run of the group,
 * whose fetch is its first member), not the loss from zero states; each
 * pass starts from val_carry's initial zeros and leaves val_carry as it
 * found it. */
static void test_evaluation_carries_a_state_of_its_own(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session(&p, eval_stream_model, st);
    train(s, 5, &(float){0}, st);
    double carried = eval_of(s, "val_loss", st), zeroed = eval_of(s, "val_zero", st);
    assert_true(fabs(carried - zeroed) > 1e-3);
    assert_true(fabs(eval_of(s, "probe", st) - carried) <= 1e-6); /* carry starts at zeros too */
    double sum = 0;
    float x;
    gr_fetch f = {"val_loss", &x, sizeof x, NULL};
    for (int k = 0; k < VAL_WINDOWS; k++) {
        assert_gr_ok(gr_run(s, "val_loss", NULL, 0, &f, 1, st), st);
        sum += x;
    }
    assert_true(fabs(sum / VAL_WINDOWS - carried) <= 1e-6);
    gr_tensor *before, *after;
    assert_gr_ok(gr_variable_get(s, "val_carry", &before, st), st);
    assert_true(eval_of(s, "val_loss", st) == carried);
    assert_gr_ok(gr_variable_get(s, "val_carry", &after, st), st);
    assert_true(((const float *)gr_tensor_data(before))[0] != 0);
    assert_memory_equal(gr_tensor_data(before), gr_tensor_data(after), gr_tensor_bytes(after));
    gr_tensor_free(before);
    gr_tensor_free(after);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Variables a and b of two sessions hold the same bytes. */
static void assert_same_var(gr_session *a, gr_session *b, const char *var, gr_status *st)
{
    gr_tensor *x, *y;
    assert_gr_ok(gr_variable_get(a, var, &x, st), st);
    assert_gr_ok(gr_variable_get(b, var, &y, st), st);
    assert_memory_equal(gr_tensor_data(x), gr_tensor_data(y), gr_tensor_bytes(x));
    gr_tensor_free(x);
    gr_tensor_free(y);
}

/* Losses of 6 training steps of eval_stream_model, alone. */
static void reference_losses(float *loss, gr_status *st)
{
    gr_program *p = NULL;
    gr_session *s = session(&p, eval_stream_model, st);
    for (int k = 0; k < 6; k++) train(s, 1, &loss[k], st);
    gr_session_free(s);
    gr_program_free(p);
}

/* Training after evaluations (probe's assigns write training's own
 * `carry`) gives the losses, state and weights of training without them. */
static void test_evaluation_leaves_the_training_state_alone(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL, *q = NULL;
    gr_session *s = session(&p, eval_stream_model, st), *alone = session(&q, eval_stream_model, st);
    float with[6], without[6];
    for (int k = 0; k < 6; k++) {
        train(s, 1, &with[k], st);
        train(alone, 1, &without[k], st);
        if (k != 2) continue;
        eval_of(s, "val_loss", st);
        eval_of(s, "probe", st);
    }
    assert_memory_equal(with, without, sizeof with);
    assert_same_var(s, alone, "carry", st);
    assert_same_var(s, alone, "w", st);
    gr_session_free(s);
    gr_session_free(alone);
    gr_program_free(p);
    gr_program_free(q);
    gr_status_free(st);
}

typedef struct eval_worker {
    gr_session *s;
    const char *target; /* evaluated 3 times; NULL: 6 training steps */
    double value[3];
    float loss[6];
    int failures;
} eval_worker;

static void *eval_work(void *arg)
{
    eval_worker *w = arg;
    gr_status *st = gr_status_new();
    gr_fetch f = {"train/loss", NULL, sizeof(float), NULL};
    for (int k = 0; k < (w->target ? 3 : 6); k++) {
        f.data = &w->loss[k];
        gr_code c = w->target ? gr_eval(w->s, w->target, &w->value[k], st)
                              : gr_run(w->s, "train", NULL, 0, &f, 1, st);
        w->failures += c != GR_OK;
    }
    gr_status_free(st);
    return NULL;
}

/* Runs the workers w[0..n) on threads of their own, to the end. */
static void run_workers(eval_worker *w, int n)
{
    pthread_t th[3];
    for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&th[i], NULL, eval_work, &w[i]), 0);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
}

/* gr_eval from two threads at once gives each the value of one thread
 * alone; beside training on a third thread, the training losses are
 * those of training alone. */
static void test_concurrent_evaluations_keep_their_states_apart(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = session(&p, eval_stream_model, st);
    double alone = eval_of(s, "val_loss", st);
    eval_worker w[3] = {{.s = s, .target = "val_loss"}, {.s = s, .target = "probe"}};
    run_workers(w, 2);
    for (int k = 0; k < 3; k++) assert_true(w[0].value[k] == alone && w[1].value[k] == alone);
    float without[6];
    reference_losses(without, st);
    w[2] = (eval_worker){.s = s}; /* trains; w[0] and w[1] evaluate again */
    w[0].failures = w[1].failures = 0;
    run_workers(w, 3);
    assert_memory_equal(w[2].loss, without, sizeof without);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* A checkpoint of a model trained on other text does not load: its ids
 * mean other characters. */
static void test_checkpoint_of_another_vocabulary_is_refused(void **state)
{
    (void)state;
    char path[300], other[1200], want[600];
    snprintf(path, sizeof path, "%s/vocab.safetensors", g_dir);
    const char *f = fixture_str("other.txt", "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                                             "0123456789 .,;:!?'-\n");
    gr_status *st = gr_status_new();
    gr_program *p = NULL, *q = NULL;
    gr_session *s = session(&p, model, st);
    train(s, 2, &(float){0}, st);
    assert_gr_ok(gr_session_save(s, path, st), st);
    gr_session_free(s);
    snprintf(other, sizeof other,
             "data train = text(\"%s\", block=16, batch=4)\n"
             "var emb = normal([train.vocab, 24], std=0.1)\n"
             "var w = normal([24, train.vocab], std=0.1)\n"
             "loss = mean(softmax_xent(reshape(gather(emb, train.x), [-1, 24]) @ w, "
             "reshape(train.y, [-1])))\n"
             "train = adamw(0.01).minimize(loss)\n",
             f);
    s = session(&q, other, st);
    int64_t mine = 0, theirs = 0;
    assert_gr_ok(gr_program_vocab(p, NULL, NULL, &mine, st), st);
    assert_gr_ok(gr_program_vocab(q, NULL, NULL, &theirs, st), st);
    snprintf(want, sizeof want,
             "%s: metadata 'data.train.vocab': data 'train' was trained with another vocabulary "
             "(%lld ids) than the program reads now (%lld ids)\n",
             path, (long long)mine, (long long)theirs);
    gr_restore_options ro = {.weights_only = 1};
    assert_int_equal(gr_session_restore(s, path, &ro, st), GR_ERR_DATA);
    assert_string_equal(gr_status_message(st), want);
    gr_session_free(s);
    gr_program_free(q);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_and_shifted_labels),
        cmocka_unit_test(test_vocabulary_is_the_characters_present),
        cmocka_unit_test(test_word_vocabulary_by_frequency_with_unk),
        cmocka_unit_test(test_split_holds_out_the_end),
        cmocka_unit_test(test_directory_and_list_of_files),
        cmocka_unit_test(test_shuffled_windows_and_streams_resume_from_a_cursor),
        cmocka_unit_test(test_streams_rows_continue_and_wrap),
        cmocka_unit_test(test_streams_errors),
        cmocka_unit_test(test_errors_name_the_file_and_why),
        cmocka_unit_test(test_program_tells_its_vocabulary),
        cmocka_unit_test(test_model_trains_and_resumes_to_the_same_weights),
        cmocka_unit_test(test_lstm_state_carries_across_batches_and_resumes),
        cmocka_unit_test(test_evaluation_carries_a_state_of_its_own),
        cmocka_unit_test(test_evaluation_leaves_the_training_state_alone),
        cmocka_unit_test(test_concurrent_evaluations_keep_their_states_apart),
        cmocka_unit_test(test_checkpoint_of_another_vocabulary_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
