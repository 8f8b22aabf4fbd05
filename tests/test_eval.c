/* test_eval.c - gr_eval covers every example: a data set whose size is not
 * a multiple of the batch gives the value a batch that divides it gives
 * (the last, partial batch is read padded and only its real examples are
 * counted), and a target whose value over a padded batch cannot be split
 * by example is refused with the reason and a batch that works.  A group
 * is evaluated by its first member, its assigns carrying a state of the
 * pass's own from batch to batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

#define N_CSV 10

static char g_dir[256], g_csv[300], g_text[300];

/* 10 examples of 4 features and a label in 0..2; a text of 43 characters. */
static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/gr_test_eval_XXXXXX", base);
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_csv, sizeof g_csv, "%s/test.csv", g_dir);
    snprintf(g_text, sizeof g_text, "%s/text.txt", g_dir);
    FILE *f = fopen(g_csv, "w");
    if (!f) return -1;
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < N_CSV; i++)
        fprintf(f, "%g,%g,%g,%g,%d\n", (i * 7 % 5) * 0.5 - 1, (i * 3 % 4) * 0.25, i * 0.1 - 0.4,
                (i % 3) - 1.0, i * 5 % 3);
    fclose(f);
    f = fopen(g_text, "w");
    if (!f) return -1;
    fputs("the cat sat on the mat; the dog sat on a log", f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_csv);
    unlink(g_text);
    return rmdir(g_dir);
}

/* An MLP-sized model on the CSV test set, in batches of batch, and the
 * lines extra. */
static gr_program *csv_model(int batch, int shuffle, const char *extra, gr_status *st)
{
    char text[4096];
    snprintf(text, sizeof text,
             "data test = csv(\"%s\", batch=%d, shuffle=%s, seed=7)\n"
             "var w = normal([4, 3], std=1)\n"
             "var b = normal([3], std=0.5)\n"
             "logits = relu(test.x @ w + b) - test.x @ w * 0.5\n"
             "accuracy = mean(argmax(logits, 1) == test.y)\n"
             "xent = mean(softmax_xent(logits, test.y))\n"
             "err = mse(logits, one_hot(test.y, depth=3))\n"
             "feature = mean(test.x)\n"
             "twice = accuracy * 2 - xent / 4\n"
             "centered = mean(test.x - mean(test.x, axis=0, keepdims=true))\n"
             "not_linear = 1 - accuracy\n"
             "%s",
             g_csv, batch, shuffle ? "true" : "false", extra);
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("eval.graph", text, strlen(text), NULL, &p, st), st);
    return p;
}

/* Two towers, each on half of the batch (docs/api.md, two_towers.graph),
 * their means averaged; and one tower alone. */
static const char towers[] =
    "for t in 0..2 {\n"
    "  l[t] = mean(softmax_xent(shard(logits, t, 2), shard(test.y, t, 2)))\n"
    "}\n"
    "towers = mean(l)\n"
    "half = l[0]\n";

static double eval_one(gr_program *p, const char *target, gr_status *st)
{
    gr_session *s = NULL;
    gr_session_options so = {.seed = 5, .threads = 1};
    double v = NAN;
    assert_gr_ok(gr_session_new(p, &so, &s, st), st);
    assert_gr_ok(gr_eval(s, target, &v, st), st);
    gr_session_free(s);
    return v;
}

static double eval_csv_with(int batch, int shuffle, const char *extra, const char *target)
{
    gr_status *st = gr_status_new();
    gr_program *p = csv_model(batch, shuffle, extra, st);
    double v = eval_one(p, target, st);
    gr_program_free(p);
    gr_status_free(st);
    return v;
}

static double eval_csv(int batch, int shuffle, const char *target)
{
    return eval_csv_with(batch, shuffle, "", target);
}

static void assert_close(double got, double want, const char *what, int batch)
{
    if (!(fabs(got - want) <= 1e-6 * (1 + fabs(want))))
        fail_msg("%s with batch %d: %.9g, but %.9g over every example", what, batch, got, want);
}

/* Batches of 3, 4 and 7 leave 1, 2 and 3 of the 10 examples to a last
 * batch; the values must be those of batches that divide 10. */
static void test_partial_last_batch_counts_every_example(void **state)
{
    (void)state;
    static const char *targets[] = {"accuracy", "xent", "err", "feature", "twice"};
    static const int batches[] = {2, 3, 4, 5, 7, 10};
    for (int t = 0; t < 5; t++) {
        double want = eval_csv(1, 0, targets[t]);
        for (int k = 0; k < 6; k++)
            assert_close(eval_csv(batches[k], 0, targets[t]), want, targets[t], batches[k]);
        assert_close(eval_csv(3, 1, targets[t]), want, targets[t], 3); /* shuffled order */
    }
    /* accuracy over 10 examples is a multiple of 1/10 */
    double acc = eval_csv(3, 0, "accuracy");
    assert_close(acc * N_CSV, round(acc * N_CSV), "accuracy * 10", 3);
    assert_close(eval_csv(3, 0, "twice"), 2 * acc - eval_csv(5, 0, "xent") / 4, "twice", 3);
}

/* Elementwise ops the registry flags (abs, sin, maximum, pow, ...) and
 * where keep each example's rows: a last partial batch through them counts
 * every example, as through relu. */
static void test_partial_last_batch_through_newer_elementwise_ops(void **state)
{
    (void)state;
    const char *extra = "h = where(test.x > 0, abs(sin(test.x)), maximum(softplus(test.x), "
                        "pow(abs(test.x) + 1, 0.5)))\n"
                        "through = mean(silu(h @ w + b) - elu(log_sigmoid(h @ w)))\n";
    double want = eval_csv_with(1, 0, extra, "through");
    static const int batches[] = {3, 4, 7};
    for (int k = 0; k < 3; k++)
        assert_close(eval_csv_with(batches[k], 0, extra, "through"), want, "through", batches[k]);
}

/* lrn works within one example's channels, and rope turns each example's
 * [.., T, D] by its own positions: a partial last batch through them
 * counts every example. */
static void test_partial_last_batch_through_lrn_and_rope(void **state)
{
    (void)state;
    const char *extra = "q = reshape(lrn(reshape(test.x, [-1, 4, 1]), depth_radius=1), [-1, 4])\n"
                        "r = reshape(rope(reshape(test.x, [-1, 1, 2, 2])), [-1, 4])\n"
                        "turned = mean(q @ w + r @ w)\n";
    double want = eval_csv_with(1, 0, extra, "turned");
    static const int batches[] = {3, 4, 7};
    for (int k = 0; k < 3; k++)
        assert_close(eval_csv_with(batches[k], 0, extra, "turned"), want, "turned", batches[k]);
}

/* Towers' means over slices of the batch, averaged, weigh every example
 * alike: batches of 4 and 6 (2 and 4 examples left) give xent's value. */
static void test_partial_last_batch_split_between_towers(void **state)
{
    (void)state;
    double want = eval_csv(1, 0, "xent");
    assert_close(eval_csv_with(4, 0, towers, "towers"), want, "towers", 4);
    assert_close(eval_csv_with(6, 0, towers, "towers"), want, "towers", 6);
}

static void expect_refused(int batch, const char *extra, const char *target, const char *why)
{
    gr_status *st = gr_status_new();
    gr_program *p = csv_model(batch, 0, extra, st);
    gr_session *s = NULL;
    double v = 0;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    char head[256];
    snprintf(head, sizeof head,
             "gr_eval: '%s' cannot cover all 10 examples of 'test' in batches of %d: the last "
             "batch would hold %d of them",
             target, batch, N_CSV % batch);
    for (int check = 0; check < 2; check++) { /* gr_eval_check says it before gr_eval does */
        assert_int_equal(check ? gr_eval(s, target, &v, st) : gr_eval_check(s, target, st),
                         GR_ERR_ARG);
        const char *msg = gr_status_message(st);
        if (!strstr(msg, head) || !strstr(msg, why) ||
            !strstr(msg, "use a batch that divides 10, such as 2"))
            fail_msg("unexpected message: %s", msg);
    }
    assert_gr_ok(gr_eval_check(s, "accuracy", st), st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* Not linear in values per example, a mean of values that mix the
 * examples of a batch (the padding would leak into the real rows), or a
 * mean over some examples of the batch only: refused, where a batch that
 * divides the data evaluates them. */
static void test_tail_that_cannot_be_split_by_example_is_refused(void **state)
{
    (void)state;
    expect_refused(3, "", "not_linear",
                   "but it is not a sum, mean or multiple of values per example (sub at line "
                   "11): only");
    expect_refused(4, "", "centered",
                   "but it mixes the examples of a batch (mean at line 10): only");
    expect_refused(4, towers, "half",
                   "but it weighs the batch's examples unequally (mean at line 13): only");
    assert_close(eval_csv(2, 0, "not_linear"), 1 - eval_csv(1, 0, "accuracy"), "not_linear", 2);
    assert_close(eval_csv(5, 0, "centered"), eval_csv(10, 0, "centered"), "centered", 5);
}

/* A char model: embeddings, then model (the lines that make logits [batch,
 * block, vocab] of h [batch, block, 8]), logits reshaped to [batch * block,
 * vocab] (a row per character, block rows per example).  40 windows of 4
 * (stride 1) in batches of 6 and 7 leave 4 and 5. */
static const char causal_attention[] =
    "att = softmax(matmul(h, h, transpose_b=true), mask=\"causal\") @ h\n"
    "logits = (h + att) @ wo\n";

static gr_program *text_program(int batch, const char *model, gr_status *st)
{
    char text[2048];
    snprintf(text, sizeof text,
             "data val = text(\"%s\", block=4, batch=%d, shuffle=false)\n"
             "var wte = normal([val.vocab, 8], std=0.5)\n"
             "var wo = normal([8, val.vocab], std=0.5)\n"
             "h = gather(wte, val.x)\n"
             "%s"
             "loss = mean(softmax_xent(reshape(logits, [-1, val.vocab]), reshape(val.y, [-1])))\n",
             g_text, batch, model);
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("text.graph", text, strlen(text), NULL, &p, st), st);
    return p;
}

static double eval_text(int batch, const char *model)
{
    gr_status *st = gr_status_new();
    gr_program *p = text_program(batch, model, st);
    double v = eval_one(p, "loss", st);
    gr_program_free(p);
    gr_status_free(st);
    return v;
}

static void test_partial_last_batch_of_text_windows(void **state)
{
    (void)state;
    double want = eval_text(1, causal_attention);
    assert_close(eval_text(6, causal_attention), want, "text loss", 6);
    assert_close(eval_text(7, causal_attention), want, "text loss", 7);
}

/* An LSTM over each window from a zero first state, zeros([batch, 16]): a
 * constant the same in every row, so the padded last batch's rows are
 * still each their own example's (refused before: 'add at line 6 mixes
 * the examples'); a first state that differs by row is still refused. */
static void test_partial_last_batch_through_an_lstm_from_a_zero_state(void **state)
{
    (void)state;
    static const char lstm[] = "var w = normal([16, 32], std=0.5)\n"
                               "out = lstm_seq(h, zeros([rows(h), 16]), w, zeros([32]))\n"
                               "logits = out[0] @ wo\n";
    double want = eval_text(1, lstm);
    assert_close(eval_text(6, lstm), want, "lstm loss", 6);
    assert_close(eval_text(7, lstm), want, "lstm loss", 7);
    static const char rows_differ[] = "var w = normal([16, 32], std=0.5)\n"
                                      "var s0 = normal([rows(h), 16])\n"
                                      "out = lstm_seq(h, s0, w, zeros([32]))\n"
                                      "logits = out[0] @ wo\n";
    gr_status *st = gr_status_new();
    gr_program *p = text_program(6, rows_differ, st);
    gr_session *s = NULL;
    double v;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    assert_int_not_equal(gr_eval(s, "loss", &v, st), GR_OK);
    assert_non_null(strstr(gr_status_message(st), "mixes the examples of a batch"));
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* tests/models/attention.graph (layernorm, gelu, heads split by reshape
 * and transpose, an mse target) on 254 examples: batches of 4 leave 2. */
static double eval_attention(int batch)
{
    FILE *f = fopen(GR_SOURCE_DIR "/tests/models/attention.graph", "r");
    assert_non_null(f);
    static char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    char *n = strstr(text, "gaussian(n=256");
    assert_non_null(n);
    memcpy(n, "gaussian(n=254", 14);
    char set[32];
    snprintf(set, sizeof set, "%d", batch);
    gr_param param = {"batch", set};
    gr_compile_options co = {.params = &param, .n_params = 1};
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    assert_gr_ok(gr_compile_string("attention.graph", text, len, &co, &p, st), st);
    double v = eval_one(p, "loss", st);
    gr_program_free(p);
    gr_status_free(st);
    return v;
}

static void test_partial_last_batch_through_a_transformer_block(void **state)
{
    (void)state;
    assert_close(eval_attention(4), eval_attention(2), "attention loss", 4);
}

/* gr_eval_cancel: every later gr_eval fails with GR_ERR_CANCELLED and
 * leaves the cursors as they were; training goes on. */
static void test_cancel_stops_evaluations_only(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = csv_model(3, 0, "", st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    double before, value = -1;
    assert_gr_ok(gr_eval(s, "accuracy", &before, st), st);
    gr_eval_cancel(NULL); /* nothing */
    gr_eval_cancel(s);
    assert_int_equal(gr_eval(s, "accuracy", &value, st), GR_ERR_CANCELLED);
    assert_non_null(
        strstr(gr_status_message(st), "cancelled (gr_eval_cancel) after 0 of 4 batches"));
    assert_true(value == -1);
    assert_string_equal(gr_code_name(GR_ERR_CANCELLED), "cancelled");
    float f;
    gr_fetch fe = {"feature", &f, sizeof f, NULL};
    assert_gr_ok(gr_run(s, "feature", NULL, 0, &fe, 1, st), st);
    assert_int_equal(gr_eval(s, "xent", &value, st), GR_ERR_CANCELLED);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* count = group(feature + sum(c), assign_add(c, 1)) over 5 batches of 2:
 * its value is feature's plus c from before each batch's assign (made
 * first, the assign still runs after the value), which the pass carries
 * from c's initial 0: 0, 1, 2, 3, 4, so 2 more than feature's mean (a
 * state zeroed every batch adds 0, one read after the assign 3, one not
 * reset at the start of a pass 7).  c itself keeps its value: the pass's
 * is its own. */
static void test_group_carries_its_state_across_batches(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = csv_model(2, 0,
                              "var c = zeros([1], trainable=false)\n"
                              "inc = assign_add(c, 1)\n"
                              "count = group(feature + sum(c), inc)\n"
                              "assign_first = group(inc, feature)\n",
                              st);
    gr_session *s = NULL;
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    double feature, count, again;
    assert_gr_ok(gr_eval(s, "feature", &feature, st), st);
    assert_gr_ok(gr_eval(s, "count", &count, st), st);
    assert_close(count, feature + 2, "count", 2);
    float c = 7, f[2];
    assert_gr_ok(gr_variable_write(s, "c", &c, sizeof c, st), st);
    assert_gr_ok(gr_eval(s, "count", &again, st), st);
    assert_true(again == count);
    assert_gr_ok(gr_variable_read(s, "c", &c, sizeof c, st), st);
    assert_true(c == 7);
    gr_fetch fe[2] = {{"count", &f[0], sizeof f[0], NULL}, {"feature", &f[1], sizeof f[1], NULL}};
    assert_gr_ok(gr_run(s, "count", NULL, 0, fe, 2, st), st); /* a fetch of a group: its value */
    assert_float_equal(f[0] - f[1], 7, 1e-5);
    gr_target_info ti;
    assert_gr_ok(gr_target_info_get(p, "count", &ti, st), st);
    assert_true(ti.is_scalar && !ti.is_train);
    assert_int_equal(gr_eval(s, "assign_first", &again, st), GR_ERR_ARG);
    assert_string_equal(gr_status_message(st),
                        "gr_eval: 'assign_first' is a group whose first member is f32[0], not a "
                        "scalar\n");
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

/* One run of `draw` (fresh numbers each run, from the run counter). */
static float draw_once(gr_session *s, gr_status *st)
{
    float v = NAN;
    gr_fetch fe = {"draw", &v, sizeof v, NULL};
    assert_gr_ok(gr_run(s, "draw", NULL, 0, &fe, 1, st), st);
    return v;
}

/* An evaluation leaves the run counter as it found it: the runs after it
 * draw what they would have drawn without it (dropout's masks in
 * training), the pass's own draws come from a counter it gives back. */
static void test_evaluation_leaves_the_draws_of_later_runs(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p = csv_model(3, 0, "draw = mean(uniform([8]))\n", st);
    gr_session *a = NULL, *b = NULL;
    gr_session_options so = {.seed = 9, .threads = 1};
    assert_gr_ok(gr_session_new(p, &so, &a, st), st);
    assert_gr_ok(gr_session_new(p, &so, &b, st), st);
    float first = draw_once(a, st), second = draw_once(a, st);
    double xent;
    assert_true(draw_once(b, st) == first);
    assert_gr_ok(gr_eval(b, "xent", &xent, st), st); /* 4 runs */
    assert_true(draw_once(b, st) == second);
    assert_true(first != second);
    gr_session_free(a);
    gr_session_free(b);
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_last_batch_counts_every_example),
        cmocka_unit_test(test_partial_last_batch_through_newer_elementwise_ops),
        cmocka_unit_test(test_partial_last_batch_through_lrn_and_rope),
        cmocka_unit_test(test_partial_last_batch_split_between_towers),
        cmocka_unit_test(test_tail_that_cannot_be_split_by_example_is_refused),
        cmocka_unit_test(test_partial_last_batch_of_text_windows),
        cmocka_unit_test(test_partial_last_batch_through_an_lstm_from_a_zero_state),
        cmocka_unit_test(test_partial_last_batch_through_a_transformer_block),
        cmocka_unit_test(test_cancel_stops_evaluations_only),
        cmocka_unit_test(test_group_carries_its_state_across_batches),
        cmocka_unit_test(test_evaluation_leaves_the_draws_of_later_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
