/* embed_min.c - the minimal embedding program of docs/api.md, built
 * against an installed graphrun (find_package and pkg-config) by
 * tests/embed.cmake.  It compiles a model from a string, trains it, feeds
 * an input, fetches a result, evaluates and frees everything; it exits
 * non-zero when any step fails or the model does not learn. */
#include <stdio.h>
#include <string.h>

#include <graphrun.h>

/* y = 2a - 3b + 0.5c + 1 from synthetic data; `x` is fed by the caller. */
static const char model[] = "data d = gaussian(n=256, dims=[3], batch=32, seed=1)\n"
                            "input x: f32[2, 3]\n"
                            "var w = zeros([3, 1])\n"
                            "var b = zeros([1])\n"
                            "loss  = mse(d.x @ w + b, d.x @ [[2.0], [-3.0], [0.5]] + 1.0)\n"
                            "train = sgd(0.1).minimize(loss)\n"
                            "pred  = x @ w + b\n";

static int fail(const char *what, gr_status *st)
{
    fprintf(stderr, "embed_min: %s: %s %s\n", what, gr_code_name(gr_status_code(st)),
            gr_status_message(st));
    return 1;
}

/* Feeds two rows through `pred` and checks them against w and b read back. */
static int check_pred(gr_session *s, gr_status *st)
{
    float x[2][3] = {{1, 2, 3}, {-1, 0, 4}}, y[2], w[3], b;
    gr_feed feed = {"x", x, sizeof x};
    gr_fetch fetch = {"pred", y, sizeof y, NULL};
    if (gr_run(s, "pred", &feed, 1, &fetch, 1, st) != GR_OK) return fail("run pred", st);
    if (gr_variable_read(s, "w", w, sizeof w, st) != GR_OK ||
        gr_variable_read(s, "b", &b, sizeof b, st) != GR_OK)
        return fail("read variables", st);
    for (int i = 0; i < 2; i++) {
        float want = x[i][0] * w[0] + x[i][1] * w[1] + x[i][2] * w[2] + b;
        float err = y[i] - want;
        if (err > 1e-4f || err < -1e-4f) {
            fprintf(stderr, "embed_min: pred[%d] = %g, expected %g\n", i, y[i], want);
            return 1;
        }
    }
    printf("w = [%.3f %.3f %.3f], b = %.3f\n", w[0], w[1], w[2], b);
    return 0;
}

/* Trains, checking that the evaluated loss falls by 100x at least. */
static int train(gr_session *s, gr_status *st)
{
    double before, after;
    float loss;
    gr_fetch fetch = {"loss", &loss, sizeof loss, NULL};
    if (gr_eval(s, "loss", &before, st) != GR_OK) return fail("eval before", st);
    for (int i = 0; i < 200; i++)
        if (gr_run(s, "train", NULL, 0, &fetch, 1, st) != GR_OK) return fail("run train", st);
    if (gr_eval(s, "loss", &after, st) != GR_OK) return fail("eval after", st);
    printf("loss %.6f -> %.6f (last batch %.6f)\n", before, after, (double)loss);
    if (!(after < before / 100)) {
        fprintf(stderr, "embed_min: loss did not decrease enough\n");
        return 1;
    }
    return 0;
}

int main(void)
{
    gr_status *st = gr_status_new();
    gr_program *prog = NULL;
    gr_session *s = NULL;
    int rc = 1;
    printf("graphrun %s\n", gr_version());
    if (gr_compile_string("model.graph", model, strlen(model), NULL, &prog, st) != GR_OK)
        rc = fail("compile", st);
    else if (gr_session_new(prog, NULL, &s, st) != GR_OK)
        rc = fail("session", st);
    else
        rc = train(s, st) || check_pred(s, st);
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
    if (rc == 0) printf("ok\n");
    return rc;
}
