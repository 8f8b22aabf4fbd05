/* compiler.h - what compiler/ offers the runtime and the CLI.
 *
 *   sema_compile:  AST -> IR (params, functions, scopes/reuse, loops, data)
 *   ad_minimize:   appends the backward pass and the optimizer updates
 *   place_run:     decides every node's device (the one placement pass)
 *   passes:        prune per target, CSE, constant folding, fusion
 *   plan_build:    schedule + static memory plan for one target */
#ifndef GR_COMPILER_H
#define GR_COMPILER_H

#include "../lang/ast.h"
#include "ir.h"

/* ---- sema ---- */
typedef struct sema_param {
    const char *name;
    const char *value; /* text from --set name=value */
} sema_param;

/* What sema needs to know of a data source to type its x and y. */
typedef struct sema_data_shape {
    int64_t n; /* examples */
    int x_rank;
    int64_t x_dims[4]; /* per example */
    int has_y;         /* labels present */
    int x_i32;         /* text: x and y are i32 ids, y_per (the block) per example */
    int64_t y_per;
    int64_t vocab;     /* text: ids are in [0, vocab) */
    char *vocab_chars; /* text: the characters in id order (NULL: bytes); malloc'd by the
                          probe, freed by sema */
} sema_data_shape;

/* Reads the headers of the data source that d declares (kind, resolved
 * paths and options are set; its x and y types are not yet).  Returns 0, or
 * -1 with a one-line message in err, which sema reports at the data call.
 * The compiler reads no data files itself: the runtime passes its readers'
 * probe (runtime/compile.c). */
typedef int (*sema_data_probe)(void *ctx, const ir_data *d, sema_data_shape *out, char *err,
                               size_t errlen);

typedef struct sema_options {
    const sema_param *params;
    int n_params;
    int allreduce;              /* distributed sync: every minimize averages its gradients
                                   over the processes (OP_ALLREDUCE) */
    sema_data_probe probe_data; /* NULL: every data source is an error */
    void *probe_ctx;
} sema_options;

/* Builds the IR for a parsed program, autodiff included. Errors go to
 * g->diags; returns 0 on success, -1 if any error was reported.  Devices
 * are not decided yet: each node records what the program asks for
 * (ir_node.place_req, ir_node.coloc) and place_run decides. */
int sema_compile(ir_graph *g, const ast_tree *t, const sema_options *opt);
/* The target, named tensor or variable of g that name most likely meant
 * (sema_hints.c: an edit or two away, or the one name starts with), or
 * NULL: "did you mean" for a name the runtime does not find. */
const char *ir_near_name(const ir_graph *g, const char *name);

/* ---- autodiff ---- */
typedef enum ad_kind { AD_SGD, AD_MOMENTUM, AD_ADAM, AD_RMSPROP, AD_ADAGRAD, AD_ADADELTA } ad_kind;
/* A learning-rate schedule driven by the step counter (lr_schedule,
 * devices/optim.h); the optimizer's lr is its peak. */
typedef struct ad_schedule {
    int on; /* 0: the learning rate is the constant lr */
    op_lr_kind kind;
    double min;
    double factor; /* step_decay, exponential: per period (steps) */
    int64_t warmup, steps;
} ad_schedule;
typedef struct ad_optimizer {
    ad_kind kind;
    double lr, m, b1, b2, eps; /* m: momentum's, and rmsprop's momentum (0: none) */
    double rho;                /* rmsprop, adadelta: the mean squares' decay */
    double initial;            /* adagrad: its sums of squares start here */
    int centered;              /* rmsprop: divide by the centered mean square */
    int nesterov;
    int locking;         /* each update holds its variable's lock (one lock a call) */
    double weight_decay; /* adam: decoupled weight decay (AdamW); the others: L2, g += wd * w;
                            0 for none */
    int decay_all;       /* decay every variable, not only those of rank >= 2 */
    double clip;         /* > 0: scale the gradients to this global norm at most */
    ad_schedule sched;
    int allreduce;  /* distributed sync: average the gradients over the processes first */
    int accumulate; /* > 1: update once every this many runs, with their mean gradient */
} ad_optimizer;

/* Differentiates the scalar `loss` w.r.t. every trainable variable it
 * depends on (with only, [n_vars] flags, those of them only flags), adds
 * slot variables (<var>/momentum, <var>/adam_m, ...) and update ops, and
 * returns an OP_GROUP node that depends on all updates (the train target),
 * or -1 on error (reported at span).  With opt->accumulate = k > 1 that
 * target updates with the mean gradient of k runs, and *partial is the
 * group the other k - 1 runs run: each adds its gradients up. */
int ad_minimize(ir_graph *g, int loss, const ad_optimizer *opt, const unsigned char *only,
                const src_file *src, src_span span, int *partial);
/* opt.gradients(loss): the backward pass alone.  Writes the trained
 * variables (indices) and their gradient nodes into vars and grads (room
 * for g->n_vars each) and returns how many, or -1 on error. */
int ad_gradients(ir_graph *g, int loss, const unsigned char *only, const src_file *src,
                 src_span span, int *vars, int *grads);
/* opt.apply(pairs): the updates of variables vars[i] (indices) by
 * gradients grads[i], as minimize makes them; returns their group, or -1. */
int ad_apply(ir_graph *g, const int *vars, const int *grads, int n, const ad_optimizer *opt,
             const src_file *src, src_span span);
/* The learning-rate node (f32[]) the updates of train target `train` (what
 * ad_minimize returned) read: a constant or the schedule. */
int ad_lr_of(const ir_graph *g, int train);

/* ---- training and evaluation (modes.c) ----
 * One copy per training target: each node it reached, with its training
 * version (a hash map; zero-initialise it). */
typedef struct mode_copy {
    int *key, *val;
    int cap, n;
} mode_copy;
/* node's training version (node itself when nothing it reads trains
 * differently); -1 on error. */
int mode_train_copy(ir_graph *g, mode_copy *c, int node);
int mode_reached(const mode_copy *c, int node);
/* Adds to the training target `group` (minimize's OP_GROUP) the side
 * updates (g->sides) whose anchors its copy reached; -1 on error. */
int mode_attach_sides(ir_graph *g, mode_copy *c, int group);
void mode_copy_free(mode_copy *c);

/* ---- placement (place.c): the one pass that decides devices ---- */
typedef struct place_options {
    int n_cpu, n_gpu;   /* devices the machine has */
    int soft_placement; /* a missing device or kernel: cpu:0 and a warning, not an error */
    int cpu_as_gpu;     /* cpu:N runs on gpu:(N mod n_gpu), data sources excepted */
    /* Whether device dev has a kernel for op (sources need none); NULL:
     * every device runs every op. */
    int (*implements)(void *ctx, op_kind op, int dev);
    void *ctx;
    /* Why the machine has no GPU when it is not for want of one (the CUDA
     * module could not be opened), added to the error; NULL: none. */
    const char *no_gpu_why;
} place_options;

/* Runs after sema_compile and before the passes: sets every node's and
 * variable's device by the rules listed in place.c, records what each
 * used device implements (place_implements), reports at the nodes; returns
 * 0, or -1 when it reported an error. */
int place_run(ir_graph *g, const place_options *opt);
/* The device place_run's rules 1-4 will ask for node i, known before it
 * runs (autodiff asks whether two nodes will share a device): equal for
 * two nodes means one device. */
int place_requested(const ir_graph *g, int i);
/* Whether device dev implements op, as place_run recorded it (a graph it
 * has not run on: every device runs every op).  Fusion asks this. */
int place_implements(const ir_graph *g, op_kind op, int dev);

/* ---- passes (passes.c): each is IR -> IR and can be switched off ---- */
enum { PASS_CSE = 1, PASS_FOLD = 2, PASS_FUSE = 4 };

/* How constant folding computes a node at compile time; the runtime passes
 * the CPU kernels (compiler/ links no device).  can_eval says whether eval
 * handles an op; eval writes node `node` of g into out (ir_nbytes of its
 * type) from in[j], the values of its inputs (at most PASS_EVAL_MAX_IN).
 * Constants without a literal are filled by the compiler (ir_const_fill). */
#define PASS_EVAL_MAX_IN (IR_MAX_DIMS * 4)
typedef struct pass_evaluator {
    int (*can_eval)(void *ctx, op_kind op);
    /* 0, or -1 with why in err (an id outside its table): then folding
     * reports it at the node as a compile error */
    int (*eval)(void *ctx, const ir_graph *g, int node, void *out, void *const *in, char *err,
                size_t errlen);
    void *ctx;
} pass_evaluator;

/* Without an evaluator (ev NULL) folding only rewrites x / c as x * (1/c). */
void pass_run_all(ir_graph *g, unsigned off, const pass_evaluator *ev);
/* pass_data.c: a data source's x that is only ever multiplied by one
 * scalar constant is scaled by its reader instead (part of PASS_FUSE). */
void pass_data_scale(ir_graph *g);

/* ---- plan (plan.c): schedule + static memory plan for some targets ---- */
#define PLAN_NONE ((size_t)-1)

/* A crossing edge: src's value (or, with bytes 0, only its completion)
 * sent from src's partition to dst_part, into a receive buffer there. */
typedef struct plan_xfer {
    int src;
    int dst_part;
    size_t offset; /* the receive buffer in the arena; PLAN_NONE when bytes is 0 */
    size_t bytes;
} plan_xfer;

typedef struct plan_graph {
    const ir_graph *g;
    int *order; /* node ids in execution order (by level) */
    int n;
    int *level; /* per node id: its level (see plan.c) */
    int n_levels;
    size_t *offset;            /* per node id: arena offset, or PLAN_NONE */
    size_t arena_bytes;        /* activations, constants, data batches, inputs */
    size_t scratch_task_bytes; /* the largest per-task kernel scratch */
    int *roots;                /* the nodes asked for */
    int n_roots;
    int *data_used; /* data sources read by this plan */
    int n_data_used;
    /* One partition per device the plan uses, each with its own region of
     * the arena; crossing edges become transfers (see plan.c). */
    int n_parts;
    int *part_dev;                  /* [n_parts]: the device of each partition */
    size_t *part_base, *part_bytes; /* [n_parts]: each partition's region of the
                                       arena (its device allocates it apart) */
    int *part;                      /* per node id: its partition, -1 outside the plan */
    plan_xfer *xfers;               /* sorted by src */
    int n_xfers;
} plan_graph;
/* The transfer carrying src to partition dst_part, or -1. */
int plan_xfer_find(const plan_graph *p, int src, int dst_part);

plan_graph *plan_build(const ir_graph *g, const int *roots, int n_roots);
void plan_free(plan_graph *p);
void plan_dump(const plan_graph *p, FILE *out);

/* Graphviz, one cluster per device (dot.c). */
void ir_dot(const ir_graph *g, FILE *out);

#endif
