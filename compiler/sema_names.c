/* sema_names.c - the names a program can call (every public op, builtin
 * and state function: sema_callable_name) and the hints made from that
 * list: a callable in another case (ReLU), an optimizer graphrun lacks, a
 * near miss after "torch.", a member of a PyTorch tensor (x.mean()).  Above the tables it reads
 * (ops.c, sema_builtins.c, sema_state.c) and sema_hints.c's string matching; only sema.c calls it.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sema_int.h"

/* TensorFlow and PyTorch optimizers graphrun does not have. */
static const char *const other_optimizers[] = {
    "ftrl",          "nadam",
    "adamax",        "lamb",
    "lars",          "lbfgs",
    "adafactor",     "GradientDescentOptimizer",
    "AdamOptimizer", "MomentumOptimizer",
    "SGD",           "Adam",
};

const char *sema_callable_name(int i)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (ops_has(op, OPF_PUBLIC) && i-- == 0) return ops_name(op);
    for (int k = 0; sema_builtin_name(k); k++)
        if (i-- == 0) return sema_builtin_name(k);
    for (int k = 0; sema_state_name(k); k++)
        if (i-- == 0) return sema_state_name(k);
    return i == 0 ? "gradients" : NULL;
}

/* The callable spelled name in another case (ReLU, Conv2d), or NULL. */
static const char *callable_any_case(const char *name)
{
    for (int i = 0; sema_callable_name(i); i++)
        if (strcasecmp(sema_callable_name(i), name) == 0) return sema_callable_name(i);
    return NULL;
}

const char *sema_foreign_hint(const char *name, char *buf, size_t n)
{
    const char *same = sema_foreign_name(name);
    if (same) return same;
    same = callable_any_case(name);
    if (same) {
        snprintf(buf, n, "write %s(...) (ops are functions, called by name)", same);
        return buf;
    }
    for (size_t i = 0; i < sizeof other_optimizers / sizeof *other_optimizers; i++)
        if (strcmp(other_optimizers[i], name) == 0) {
            char names[160];
            snprintf(buf, n, "graphrun's optimizers are %s (docs/language.md, Optimizers)",
                     sema_optimizer_names(names, sizeof names));
            return buf;
        }
    return NULL;
}

/* name as a callable, a foreign name or a near miss, after "torch.": what
 * to write. */
const char *sema_module_hint(const char *name, char *buf, size_t n)
{
    const char *near = NULL;
    int bd = 99;
    for (int i = 0; sema_callable_name(i); i++) {
        if (strcmp(sema_callable_name(i), name) == 0) {
            snprintf(buf, n, "write %s(...)", name);
            return buf;
        }
        sema_closer(name, sema_callable_name(i), &near, &bd);
    }
    const char *hint = sema_foreign_hint(name, buf, n);
    if (hint) return hint;
    if (near) snprintf(buf, n, "did you mean %s(...)?", near);
    return near ? buf : "docs/language.md, Builtins, lists what there is";
}

#define SHAPES                                                                                     \
    "shapes are fixed when the graph is built: rows(x) and cols(x) give the first and last "       \
    "sizes, and params name the others"
#define TRAINING                                                                                   \
    "training is a target: train = adam(lr).minimize(loss) makes the backward pass and the "       \
    "update, and graphrun FILE --steps N runs it"
#define DEVICES "devices are annotations: x @gpu:0, or scope s @gpu:0 { ... }"

/* Members of PyTorch's and TensorFlow's tensors and optimizers. */
static const struct {
    const char *name, *hint;
} members[] = {
    {"shape", SHAPES},
    {"size", SHAPES},
    {"T", "write transpose(x) (its axes reversed)"},
    {"t", "write transpose(x) (its axes reversed)"},
    {"detach", "write stop_gradient(x)"},
    {"backward", TRAINING},
    {"step", TRAINING},
    {"zero_grad", TRAINING},
    {"compute_gradients", "write opt.gradients(loss) (a list of [gradient, variable] pairs)"},
    {"apply_gradients", "write opt.apply(pairs)"},
    {"cuda", DEVICES},
    {"cpu", DEVICES},
    {"to", DEVICES},
    {"float", "write cast(x, dtype=\"f32\")"},
    {"int", "write cast(x, dtype=\"i32\")"},
    {"long", "write cast(x, dtype=\"i32\")"},
};

const char *sema_member_hint(const char *name, int tensor, char *buf, size_t n)
{
    for (size_t i = 0; i < sizeof members / sizeof *members; i++)
        if (strcmp(members[i].name, name) == 0) return members[i].hint;
    const char *same = tensor ? callable_any_case(name) : NULL;
    if (same) {
        snprintf(buf, n, "ops are functions: write %s(x, ...)", same);
        return buf;
    }
    return tensor ? sema_foreign_hint(name, buf, n) : NULL;
}
