/* sema_int.h - private to compiler/sema*.c: compile-time values and the
 * evaluation context.  The .graph program is evaluated once at compile time;
 * tensor-valued expressions add IR nodes, everything else (numbers, lists,
 * functions, optimizers) is folded away.
 *
 * Calls run one way: sema.c (statements, expressions, user fns) ->
 * sema_builtins.c (ops, initializers, data, optimizers) -> sema_value.c
 * (values, errors, conversions). */
#ifndef GR_SEMA_INT_H
#define GR_SEMA_INT_H

#include "compiler.h"

typedef enum vkind {
    V_ERR,  /* an error was already reported: stay quiet */
    V_NONE, /* `none`: the identity activation; also list holes */
    V_NUM,
    V_BOOL,
    V_STR,
    V_LIST,
    V_TENSOR,
    V_FN,      /* a user fn */
    V_OP,      /* a registry op used as a value (act=relu) */
    V_BUILTIN, /* initializers, data sources, optimizers, helpers */
    V_DATA,
    V_OPT,
    V_INIT, /* an initializer spec, for `var` */
    V_SCHED /* a learning-rate schedule (cosine(...)): opt.lr and opt.sched */
} vkind;

typedef struct value value;
struct value {
    vkind k;
    int is_int;         /* V_NUM */
    double num;         /* V_NUM, V_BOOL */
    const char *str;    /* V_STR */
    int node;           /* V_TENSOR */
    int is_train;       /* V_TENSOR made by minimize */
    int every, partial; /* ...(accumulate=k): k, and the group of the other runs */
    int id;             /* V_OP: op; V_BUILTIN: builtin; V_DATA: data index; V_FN: 1 when
                           its body declares a var (each call then opens a scope) */
    const ast_node *fn; /* V_FN */
    value *items;       /* V_LIST */
    int n_items;
    int cap_items;    /* V_LIST: items allocated; `l[i] = x` doubles it */
    ad_optimizer opt; /* V_OPT, V_SCHED */
    ir_init init;     /* V_INIT */
    double ia, ib;    /* V_INIT parameters */
    ir_type itype;    /* V_INIT shape */
    int init_annot;   /* V_INIT: the annotation on it (request + 1 into g->place_reqs), 0 none */
    int init_frozen;  /* V_INIT: trainable=false */
    int drawn;        /* V_INIT uniform/normal bound to a global name: 1 + the node of
                         its draw, which every expression reading the name shares */
    /* An argument bound by sema_bind_args: where it was written and what it is
     * (function and parameter names), so that a message about its value
     * underlines it and names it (sema_arg_at, sema_arg_label). */
    const ast_node *arg_at;
    const char *arg_fn, *arg_name;
};

/* One call's arguments, evaluated: positional ones in order, then keyword
 * ones with their AST_KWARG nodes (names and spans for messages). */
typedef struct sema_args {
    const ast_node *call;
    value *pos;
    const ast_node **pos_at; /* each positional argument's expression */
    int n_pos;
    value *kw;
    const ast_node **kw_at;
    int n_kw;
    int64_t as_index; /* `f(x) as NAME[i]`: i, evaluated where the call is */
} sema_args;

typedef struct binding {
    const char *name;
    value v;
    const ast_node *decl; /* the param/input/data/fn/var statement, or NULL */
} binding;

enum { ENV_INLINE = 8 };
typedef struct env {
    binding *v; /* small, or heap once more names are bound */
    int n, cap;
    struct env *parent;
    int *index; /* past ENV_INLINE names: hash slots into v, -1 empty */
    int index_cap;
    binding small[ENV_INLINE]; /* a function's locals, without an allocation */
} env;

/* A variable scope: TensorFlow's tf.variable_scope. */
typedef struct vscope {
    const char *path; /* "" at the top, else "model/fc1" */
    int reuse;
    env *counters; /* numbering of unnamed calls by function name (dense_0,
                      dense_1): NULL until the first */
    struct vscope *parent;
} vscope;

typedef struct args_buf args_buf;

typedef struct sema {
    ir_graph *g;
    const src_file *src;
    const sema_options *opt;
    env *global;
    vscope *scope;
    env annot_env; /* annotation sites by offset in the source (sema.c, annot_site) */
    int depth;     /* user fn call depth */
    int in_fn;
    value ret;
    int *data_x, *data_y; /* node per data source, -1 until used */
    int n_data_cache;
    unsigned char *param_used; /* per --set: 0 until its param is declared (sema.c) */
    /* Budgets (compiler/limits.h).  Past one, `stop` is set: every
     * evaluation then returns an error value and every block ends, so the
     * error at the limit is the last one. */
    long long steps, loop_total;
    int n_minimize;
    int eval_depth; /* sema_eval calls in progress */
    int stop;
    args_buf **argbufs; /* per call nesting depth, reused (sema.c) */
    int n_calls, cap_argbufs;
    /* per minimize(): its group and its loss's training copy (modes.c) */
    int *train_group, *train_partial, *train_loss;
    mode_copy *train_copy;
    int n_trains;
} sema;

/* sema_value.c: values, errors and conversions (calls nothing else in sema) */
void sema_err(sema *S, const ast_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A note after an error, e.g. at the first of two things with one name. */
void sema_note(sema *S, const ast_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
value sema_value_num(double x, int is_int);
value sema_value_tensor(int node); /* V_ERR when node < 0 */
value sema_value_err(void);
const char *sema_value_kind(const value *v); /* "an integer", "a list", ... */
/* Where argument v was written, else at. */
const ast_node *sema_arg_at(const value *v, const ast_node *at);
/* "mean(): 'axis'" for an argument bound by sema_bind_args, else NULL (buf holds it). */
const char *sema_arg_label(const value *v, char *buf, size_t n);
/* An integer (at most LIM_INT in magnitude), else reports at `at`. */
int sema_int_arg(sema *S, const ast_node *at, value v, int64_t *out);
/* An integer in [lo, hi] for argument `what`, or def when v is V_NONE. */
int sema_int_in(sema *S, const ast_node *at, const char *what, value v, int64_t def, int64_t lo,
                int64_t hi, int64_t *out);
/* Reports at `at` that budget `what` is spent and stops evaluation. */
void sema_stop(sema *S, const ast_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 0 while the graph is within its budget (ir_budget), with `more` bytes
 * about to be added; else stops evaluation and returns -1. */
int sema_budget(sema *S, const ast_node *at, long long more);
/* t's size checked (ir_type_problem): else reports "WHAT: TYPE is too
 * large: WHY" at `at`. */
int sema_check_type(sema *S, const ast_node *at, const char *what, const ir_type *t);
/* The tensor node for v: numbers and lists become constants, a list of
 * tensors is stacked; -1 after reporting at `at`. */
int sema_to_tensor(sema *S, const ast_node *at, value v, ir_dtype like);

/* sema_args.c: a call's arguments bound to what the callee takes */
typedef struct argspec {
    const char *name;
    int required;
} argspec;
/* Binds args (the positional ones from `skip` on, then the keyword ones) to
 * spec slots in out[] (V_NONE when absent). */
int sema_bind_args(sema *S, const char *fname, const argspec *spec, int n_spec,
                   const sema_args *args, int skip, value *out);
/* A number, or def when v is V_NONE. */
int sema_num_arg(sema *S, const ast_node *at, value v, double def, double *out);
/* true, false or an integer (nonzero is true), or def when v is V_NONE. */
int sema_bool_arg(sema *S, const ast_node *at, value v, int def, int *out);
/* kw names no argument of fname: the error lists spec's, with a "did you
 * mean" when one is close. */
void sema_unknown_arg(sema *S, const ast_node *kw, const char *fname, const argspec *spec,
                      int n_spec);

/* sema_builtins.c: data sources, initializers, optimizers, helpers */
int sema_builtin_lookup(const char *name);
const char *sema_builtin_name(int i); /* NULL past the last */
/* "sgd, momentum, ... and adadelta", into buf. */
const char *sema_optimizer_names(char *buf, size_t n);
value sema_call_builtin(sema *S, int builtin, const sema_args *args);
value sema_call_op(sema *S, int op, const sema_args *args);
value sema_data_field(sema *S, const ast_node *at, int data, const char *field);
int sema_data_stmt(sema *S, const ast_node *stmt, value v);

/* sema_state.c: assign, assign_add, ema, group, batchnorm.  Their builtin
 * ids start at SEMA_STATE_BASE. */
enum { SEMA_STATE_BASE = 1000 };
/* gradients(loss, vars=): the builtin evaluated by sema.c itself (it reads
 * its arguments as minimize() does, unevaluated). */
enum { SEMA_GRADIENTS = 2000 };
int sema_state_lookup(const char *name);
const char *sema_state_name(int i); /* NULL past the last */

/* sema_compose.c: builtins and op arguments lowered to other registry ops.
 * sema_compose_call: global_avgpool, clip, leaky_relu, sigmoid_xent, nll,
 * groupnorm, lstm, lstm_h, lstm_c, gru, lstm_seq, gru_seq.
 * sema_compose_op: 1 with *out when op's call is one it lowers (reductions
 * over several axes, label smoothing), else 0 (where's operands, in[],
 * are broadcast on the way). */
value sema_compose_call(sema *S, const char *name, const sema_args *args);
int sema_compose_op(sema *S, int op, const sema_args *args, int *in, value *out);

/* sema_hints.c: messages that teach (did you mean, names from TF, PyTorch
 * and Python, the arguments a call takes). */
int sema_edit_distance(const char *a, const char *b);
/* Keeps cand in *best when it is closer to name than *bd edits (and close
 * at all: at most a third of the name, one edit allowed). */
void sema_closer(const char *name, const char *cand, const char **best, int *bd);
/* What to write instead of a TensorFlow, PyTorch or Python name in the
 * table of those, or NULL. */
const char *sema_foreign_name(const char *name);
/* The argument of spec that TF's or PyTorch's name stands for (dim: axis),
 * or that name begins (pad: padding); NULL if none. */
const char *sema_arg_alias(const char *name, const argspec *spec, int n_spec);
/* Whether name is a module of TensorFlow, PyTorch or numpy (tf, torch). */
int sema_is_module(const char *name);

/* sema_names.c: the names a program can call, and the hints made from
 * them (for sema.c). */
/* The i-th name a program can call besides its own fns (the public ops,
 * the builtins, the state builtins, gradients); NULL past the last. */
const char *sema_callable_name(int i);
/* What to write instead of a TensorFlow, PyTorch or Python name, or NULL
 * (the text may be in buf): sema_foreign_name's, a callable in another
 * case, an optimizer graphrun lacks. */
const char *sema_foreign_hint(const char *name, char *buf, size_t n);
/* What to write instead of MODULE.name. */
const char *sema_module_hint(const char *name, char *buf, size_t n);
/* What to write instead of x.name, a member x lacks (of a tensor when
 * tensor, else of an optimizer), or NULL. */
const char *sema_member_hint(const char *name, int tensor, char *buf, size_t n);
value sema_call_state(sema *S, int which, const sema_args *args);

#endif
