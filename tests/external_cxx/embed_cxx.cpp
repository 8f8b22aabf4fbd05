// embed_cxx.cpp - graphrun from C++: compiles a model, trains it a few
// steps and checks that the loss fell (tests/embed.cmake).
#include <cstdio>
#include <cstring>

#include <graphrun.h>

static const char model[] = "data d = gaussian(n=64, dims=[2], batch=16, seed=1)\n"
                            "var w = zeros([2, 1])\n"
                            "loss  = mse(d.x @ w, d.x @ [[1.0], [-2.0]])\n"
                            "train = sgd(0.1).minimize(loss)\n";

int main()
{
    gr_status *st = gr_status_new();
    gr_program *prog = nullptr;
    gr_session *s = nullptr;
    double before = 0, after = 0;
    bool ok =
        gr_compile_string("model.graph", model, std::strlen(model), nullptr, &prog, st) == GR_OK &&
        gr_session_new(prog, nullptr, &s, st) == GR_OK && gr_eval(s, "loss", &before, st) == GR_OK;
    for (int i = 0; ok && i < 50; i++) ok = gr_run(s, "train", nullptr, 0, nullptr, 0, st) == GR_OK;
    ok = ok && gr_eval(s, "loss", &after, st) == GR_OK;
    if (!ok) std::fprintf(stderr, "embed_cxx: %s", gr_status_message(st));
    gr_session_free(s);
    gr_program_free(prog);
    gr_status_free(st);
    std::printf("loss %.6f -> %.6f\n", before, after);
    return ok && after < before / 10 ? 0 : 1;
}
