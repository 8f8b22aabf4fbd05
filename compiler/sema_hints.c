/* sema_hints.c - what an unknown name or argument most likely meant.
 *
 * Messages that teach the language: a name close to a known one gets a
 * "did you mean", a name from TensorFlow, PyTorch or Python gets the
 * graphrun way to say it, and an unknown argument lists the arguments
 * that exist.  Only errors that are shown pay for the scans
 * (diag_full). */
#include <string.h>

#include "graphrun.h"
#include "sema_int.h"

/* Names users bring from elsewhere, and what to write instead. */
static const struct {
    const char *name, *hint;
} foreign[] = {
    {"print", "a .graph file describes a graph, it does not run it: name the value (l = ...) and "
              "fetch it, `graphrun FILE --eval l` prints it and --log records each step's loss"},
    {"range", "compile-time loops are written `for i in 0..n { ... }`"},
    {"len", "cols(x) and rows(x) give a tensor's last and first sizes"},
    {"reduce_mean", "write mean(x, axis=...)"},
    {"reduce_sum", "write sum(x, axis=...)"},
    {"reduce_max", "write max(x, axis=...)"},
    {"matmul", "matrix products are written x @ w"},
    {"Variable", "variables are declared `var w = glorot([784, 10])`"},
    {"get_variable", "variables are declared `var w = glorot([784, 10])` (inside `scope s reuse` "
                     "to share one)"},
    {"placeholder", "inputs are declared `input x: f32[batch, 784]`"},
    {"random_normal", "write normal(shape, std=)"},
    {"truncated_normal", "write normal(shape, std=)"},
    {"randn", "write normal(shape)"},
    {"random_uniform", "write uniform(shape, low=, high=)"},
    {"rand", "write uniform(shape, low=0, high=1)"},
    {"softmax_cross_entropy_with_logits", "write softmax_xent(logits, labels)"},
    {"sparse_softmax_cross_entropy_with_logits", "write softmax_xent(logits, labels)"},
    {"cross_entropy", "write softmax_xent(logits, labels)"},
    {"CrossEntropyLoss", "write mean(softmax_xent(logits, labels))"},
    {"max_pool", "write maxpool2d(x, size=, stride=, padding=)"},
    {"max_pool2d", "write maxpool2d(x, size=, stride=, padding=)"},
    {"avg_pool", "write avgpool2d(x, size=, stride=, padding=)"},
    {"xavier", "write glorot(shape)"},
    {"glorot_uniform", "write glorot(shape)"},
    {"xavier_uniform", "write glorot(shape)"},
    {"kaiming_normal", "write he(shape)"},
    {"he_normal", "write he(shape)"},
    {"dense", "write a layer as a function: fn dense(x, units) { var w = glorot([cols(x), units]); "
              "var b = zeros([units]); return x @ w + b }"},
    {"Linear", "write a layer as a function: fn dense(x, units) { var w = glorot([cols(x), "
               "units]); var b = zeros([units]); return x @ w + b }"},
    {"batch_normalization", "write batchnorm(x, gain, bias, axis=1)"},
    {"BatchNorm2d", "write batchnorm(x, gain, bias, axis=1)"},
    {"GroupNorm", "write groupnorm(x, gain, bias, groups=, eps=)"},
    {"group_norm", "write groupnorm(x, gain, bias, groups=, eps=)"},
    {"GroupNormalization", "write groupnorm(x, gain, bias, groups=, eps=)"},
    {"local_response_normalization", "write lrn(x, depth_radius=, bias=, alpha=, beta=) (across "
                                     "the channels, axis 1 of NCHW)"},
    {"apply_rotary_pos_emb", "write rope(q, base=) (and rope(k, base=)) on [B, H, T, D]"},
    {"rotary_embedding", "write rope(x, base=) on [B, H, T, D]"},
    {"LocalResponseNorm", "write lrn(x, depth_radius=(size - 1) / 2, alpha=alpha / size, beta=, "
                          "bias=k)"},
    {"LSTMCell", "write s = lstm(x, s, w, b) in a for loop: the state s is [B, 2H] = [h, c], "
                 "w [X + H, 4H] (gates i, f, g, o); h is lstm_h(s)"},
    {"LSTM", "write out = lstm_seq(xs, s, w, b) on xs [B, T, X]: out[0] the h's [B, T, H], "
             "out[1] the last state [B, 2H]"},
    {"dynamic_rnn", "write out = lstm_seq(xs, s, w, b) (or gru_seq) on xs [B, T, X]: out[0] the "
                    "h's [B, T, H], out[1] the last state"},
    {"GRUCell", "write h = gru(x, h, w_ih, w_hh, b_ih, b_hh) in a for loop: w_ih [X, 3H], w_hh "
                "[H, 3H] (gates r, z, n)"},
    {"GRU", "write out = gru_seq(xs, h, w_ih, w_hh, b_ih, b_hh) on xs [B, T, X]: out[0] the "
            "h's [B, T, H], out[1] the last h"},
    {"view", "write reshape(x, [...])"},
    {"flatten", "write reshape(x, [rows(x), -1])"},
    {"permute", "write transpose(x, perm=[...])"},
    {"cat", "write concat([a, b], axis=)"},
    {"equal", "write a == b"},
    {"True", "booleans are written true and false"},
    {"False", "booleans are written true and false"},
    {"None", "there is no None: an activation argument takes none (the identity, act=none), and "
             "a size is a number or a param (param batch = 64)"},
    {"zeros_like", "write zeros(shape) with x's shape spelled out (rows(x), cols(x) and params "
                   "give its sizes)"},
    {"ones_like", "write ones(shape) with x's shape spelled out (rows(x), cols(x) and params give "
                  "its sizes)"},
    {"tensor", "a constant tensor is a list, [[1.0, 2.0]], or constant(value, shape)"},
    {"clamp", "write clip(x, lo, hi)"},
    {"clip_by_value", "write clip(x, lo, hi)"},
    {"clip_by_global_norm", "global-norm clipping is an optimizer's option: adam(lr, clip=1.0)"},
    {"clip_grad_norm_", "global-norm clipping is an optimizer's option: adam(lr, clip=1.0)"},
    {"nll_loss", "write mean(nll(log_softmax(logits), labels))"},
    {"mse_loss", "write mse(pred, target) (the mean over every element)"},
    {"mean_squared_error", "write mse(pred, target) (the mean over every element)"},
    {"binary_cross_entropy_with_logits", "write mean(sigmoid_xent(logits, targets))"},
    {"sigmoid_cross_entropy_with_logits", "write mean(sigmoid_xent(logits, targets))"},
    {"BCEWithLogitsLoss", "write mean(sigmoid_xent(logits, targets))"},
    {"unsqueeze", "write reshape(x, [...]) with the new axis of size 1"},
    {"expand_dims", "write reshape(x, [...]) with the new axis of size 1"},
    {"squeeze", "write reshape(x, [...]) without the axes of size 1"},
    {"stack", "write concat([reshape(a, [1, ...]), reshape(b, [1, ...])], axis=0)"},
    {"Embedding", "an embedding is a table read by ids: var emb = normal([vocab, dim]); "
                  "gather(emb, ids)"},
    {"embedding_lookup", "write gather(table, ids)"},
    {"Session", "graphrun runs the graph itself: graphrun FILE --steps N trains, and --eval NAME "
                "evaluates"},
    {"global_variables_initializer", "variables start from their var statements' initializers "
                                     "when the session starts"},
    {"Sequential", "a model is a function: fn net(x) { h = dense(x, 128) as fc1; return dense(h, "
                   "10, act=none) as fc2 }, with dense a function of yours"},
    {"Module", "a model is a function: fn net(x) { ... return ... }, and its variables live in "
               "the scope of its call (net(x) as model)"},
    {"no_grad", "only minimize() and gradients() differentiate, so an evaluation computes no "
                "gradients; stop_gradient(x) cuts one path"},
};

/* Argument names of TensorFlow and PyTorch, and graphrun's. */
static const struct {
    const char *theirs, *ours;
} arg_aliases[] = {
    {"dim", "axis"},
    {"axes", "axis"},
    {"keepdim", "keepdims"},
    {"keep_dims", "keepdims"},
    {"learning_rate", "lr"},
    {"momentum", "m"},
    {"beta1", "b1"},
    {"beta2", "b2"},
    {"betas", "b1"},
    {"epsilon", "eps"},
    {"strides", "stride"},
    {"kernel_size", "size"},
    {"ksize", "size"},
    {"pool_size", "size"},
    {"p", "rate"},
    {"alpha", "rho"},
    {"decay", "rho"},
    {"negative_slope", "alpha"},
    {"stddev", "std"},
    {"minval", "low"},
    {"maxval", "high"},
    {"num_classes", "depth"},
    {"initial_accumulator_value", "initial"},
    {"var_list", "vars"},
    {"num_groups", "groups"},
};

const char *sema_arg_alias(const char *name, const argspec *spec, int n_spec)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof arg_aliases / sizeof *arg_aliases; i++)
        for (int k = 0; k < n_spec && strcmp(arg_aliases[i].theirs, name) == 0; k++)
            if (strcmp(arg_aliases[i].ours, spec[k].name) == 0) return spec[k].name;
    for (int k = 0; n >= 2 && k < n_spec; k++) /* pad: padding */
        if (strncmp(spec[k].name, name, n) == 0) return spec[k].name;
    return NULL;
}

/* Modules of TensorFlow, PyTorch and numpy: here everything is built in. */
static const char *const modules[] = {"tf",     "torch",  "nn",        "F",    "np",
                                      "numpy",  "math",   "keras",     "init", "optim",
                                      "layers", "losses", "functional"};

int sema_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int x = d[i - 1][j] + 1, y = d[i][j - 1] + 1;
            d[i][j] = c < x ? (c < y ? c : y) : (x < y ? x : y);
        }
    return d[la][lb];
}

void sema_closer(const char *name, const char *cand, const char **best, int *bd)
{
    if (!cand) return;
    int d = sema_edit_distance(name, cand);
    int most = (int)strlen(name) / 3 + 1;
    if (d < *bd && d <= most && d > 0) *bd = d, *best = cand;
}

const char *gr_suggest(const char *word, const char *const *candidates, int n)
{
    const char *best = NULL;
    int bd = 99;
    if (!word || !candidates) return NULL;
    for (int i = 0; i < n; i++) sema_closer(word, candidates[i], &best, &bd);
    return best;
}

const char *ir_near_name(const ir_graph *g, const char *name)
{
    const char *best = NULL;
    int bd = 99;
    for (int i = 0; name && i < g->n_names; i++) sema_closer(name, g->names[i].name, &best, &bd);
    for (int i = 0; name && i < g->n_vars; i++) sema_closer(name, g->vars[i].name, &best, &bd);
    size_t n = name ? strlen(name) : 0;
    for (int i = 0; !best && n >= 2 && i < g->n_names; i++) /* acc: accuracy */
        if (strncmp(g->names[i].name, name, n) == 0) best = g->names[i].name;
    return best;
}

const char *sema_foreign_name(const char *name)
{
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        if (strcmp(foreign[i].name, name) == 0) return foreign[i].hint;
    return NULL;
}

int sema_is_module(const char *name)
{
    for (size_t i = 0; i < sizeof modules / sizeof *modules; i++)
        if (strcmp(modules[i], name) == 0) return 1;
    return 0;
}
