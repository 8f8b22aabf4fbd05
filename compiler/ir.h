/* ir.h - the IR graph: one node per op, edges are tensors.
 *
 * Built by compiler/sema.c from the AST, extended by autodiff, placed by
 * place.c (the one pass that sets devices), rewritten by passes, then
 * lowered to a plan.  Node ids are indices into g->nodes and are
 * stable; passes mark nodes dead instead of compacting. */
#ifndef GR_IR_H
#define GR_IR_H

#include <stdint.h>

#include "../lang/diag.h"
#include "base/fatal.h"
#include "limits.h"
#include "ops.h"

#define IR_MAX_DIMS  6
#define IR_MAX_ATTRS 6

typedef enum ir_dtype { DT_F32, DT_I32, DT_COUNT } ir_dtype;

typedef struct ir_type {
    ir_dtype dtype;
    int rank; /* 0 = scalar */
    int64_t dim[IR_MAX_DIMS];
} ir_type;

/* Attributes, by slot.  Slot j of an op holds its j-th attribute in the
 * registry (ops.c) in i[j] (ints and bools) or f[j] (floats). An int-list
 * attribute (a shape, a permutation) lives in list[]. */
typedef struct ir_attrs {
    int64_t i[IR_MAX_ATTRS];
    double f[IR_MAX_ATTRS];
    int n_list;
    int64_t list[IR_MAX_DIMS];
} ir_attrs;

/* Device encoding: IR_DEV(kind, index); -1 means not yet placed. */
enum { DEV_CPU = 0, DEV_GPU = 1 };
#define IR_DEV(kind, idx) (((kind) << 16) | (idx))
#define IR_DEV_KIND(d)    ((d) >> 16)
#define IR_DEV_INDEX(d)   ((d)&0xffff)

typedef struct ir_node {
    op_kind op;
    int n_in;
    int *in; /* input node ids */
    int n_ctrl;
    int *ctrl; /* control dependencies: run after these */
    ir_attrs attr;
    ir_type type;
    int device;          /* decided by placement (place.c); -1 before it */
    int place_req;       /* the innermost annotation open when it was made (g->place_reqs), or -1 */
    int coloc;           /* the node whose device it takes (autodiff, ir_add_like), or -1 */
    const src_file *src; /* where in the .graph file it came from */
    src_span span;
    const char *name;  /* user-visible name, if any (may be NULL) */
    int var;           /* OP_VARIABLE, updates: index into g->vars */
    int data;          /* OP_DATA: index into g->data; OP_INPUT: into g->inputs */
    const void *cdata; /* OP_CONST with a literal tensor: values, row-major */
    int alt;           /* the node's training version (compiler/modes.c), or -1 */
    int dead;          /* removed by a pass */
} ir_node;

typedef enum ir_init {
    INIT_ZEROS,
    INIT_ONES,
    INIT_CONSTANT,
    INIT_UNIFORM,
    INIT_NORMAL,
    INIT_GLOROT,
    INIT_HE
} ir_init;

typedef struct ir_var {
    const char *name; /* full scoped name, e.g. model/fc1/w */
    ir_type type;
    ir_init init;
    double a, b; /* constant: a; uniform: [a,b); normal: mean a, std b */
    int device;  /* its node's, decided by placement (place.c); -1 before it */
    int node;    /* its OP_VARIABLE node */
    int slot_of; /* optimizer slot: the variable it belongs to, else -1 */
    int trainable;
    int opt_state;         /* an optimizer's own (slot, step counter): not a weight (--init-from) */
    const char *seed_name; /* its initializer draws as for this name (ema's average: its
                              variable's); NULL: its own */
    const src_file *src;
    src_span span;
} ir_var;

typedef enum ir_data_kind { DATA_IDX, DATA_CSV, DATA_RAW, DATA_GAUSSIAN, DATA_TEXT } ir_data_kind;

typedef struct ir_data {
    const char *name; /* the `data NAME = ...` name */
    ir_data_kind kind;
    const char *path[2]; /* resolved: images/x and labels/y (may be NULL) */
    int64_t batch;
    int shuffle;
    int64_t n; /* examples in the file (from its header) */
    uint64_t seed;
    ir_type x, y;  /* per-batch types; y.rank < 0 when absent */
    int label_col; /* csv: column that holds the label (-1 last) */
    int x_rank;    /* raw/gaussian: per-example shape as declared */
    int64_t x_dims[4];
    int64_t gen_n;     /* gaussian: examples to generate */
    int64_t n_classes; /* label range check, 0 = none */
    int nonfinite;     /* csv, raw, idx: nan and infinities are values (else an error) */
    float x_scale;     /* the reader multiplies x by it (pass_data_scale); 0 = none */
    /* text: every path (path[0] is the first), windows of block + 1 ids every stride of
       the first `split` of the text or (val_part) the rest; the vocabulary */
    const char **paths;
    int n_paths;
    int64_t block, stride;
    double split;
    int val_part;
    int byte_vocab;          /* ids are bytes */
    int streams;             /* batch contiguous streams, read in order (data_spec.streams) */
    int64_t word_vocab;      /* > 0: ids are words, this many at most (<unk> included) */
    int64_t vocab;           /* ids are in [0, vocab) */
    const char *vocab_chars; /* chars: the characters in id order, UTF-8 (words: the words,
                                one a line); NULL: bytes */
    const src_file *src;
    src_span span;
} ir_data;

typedef struct ir_input {
    const char *name;
    ir_type type;
    int node;
} ir_input;

typedef struct ir_name {
    const char *name; /* a top-level (or scoped) assignment name */
    int node;
    int is_train; /* produced by .minimize() */
    int every;    /* minimize(accumulate=k): k; the session runs <name>/accumulate on the
                     other runs (runtime/session/plans.c) */
} ir_name;

/* Names to indices (vars, names): open addressing, -1 = empty. */
typedef struct ir_index {
    int *slot;
    int cap; /* a power of two, or 0 */
} ir_index;

/* A device annotation, one per evaluation of `@gpu:0` on an expression or
 * a scope: what the program asks for.  Sema records them (and stamps each
 * node made while one is open with the innermost, g->place_cur); the
 * placement pass (place.c) decides the devices. */
typedef struct ir_place_req {
    int dev;  /* IR_DEV(kind, index) as written */
    int site; /* the annotation in the source (one per place, however often evaluated) */
    int up;   /* the request it is nested in, or -1 */
    const src_file *src;
    src_span span; /* the annotation: the unused-annotation warning points here */
} ir_place_req;

/* Which ops one device implements, as the placement pass found them: fusion
 * makes only ops the device of the fused node has (place_implements). */
typedef struct ir_dev_ops {
    int dev;
    unsigned char has[OP_COUNT];
} ir_dev_ops;

/* A state update that training makes on the side (compiler/modes.c):
 * batchnorm's running statistics, ema(). */
typedef struct ir_side {
    int anchor;    /* the node whose training run makes it */
    int update;    /* the update, built on the evaluation graph */
    int after_var; /* a variable: it waits for the target's update of it, or -1 */
    int n_used;    /* training targets it joined */
    int warn;      /* reported when no target ever runs it (ema(); batchnorm's are not) */
} ir_side;

typedef struct ir_graph {
    ir_node *nodes;
    int n_nodes, cap_nodes;
    ir_var *vars;
    int n_vars, cap_vars;
    ir_data *data;
    int n_data, cap_data;
    ir_input *inputs;
    int n_inputs, cap_inputs;
    ir_name *names;
    int n_names, cap_names;
    int default_target; /* index into names of the last minimize, or -1 */
    diag_list *diags;   /* where errors go */
    void *arena;        /* private: node input arrays, strings, cdata */
    ir_index var_index, name_index;
    int *walk_stamp, *walk_val; /* see ir_walk_begin */
    int walk_cap, walk_now;
    long long mem_bytes; /* arena plus arrays: checked against LIM_COMPILE_BYTES */
    int over_budget;     /* a budget error was reported: later ones stay quiet */
    ir_place_req *place_reqs;
    int n_place_reqs, cap_place_reqs;
    int place_cur;       /* the innermost open request (new nodes take it), or -1 */
    ir_dev_ops *dev_ops; /* [n_dev_ops], malloc'd: placement's record for fusion */
    int n_dev_ops;       /* 0: no record (every device runs every op) */
    ir_side *sides;
    int n_sides, cap_sides;
} ir_graph;

ir_graph *ir_new(diag_list *d);
void ir_free(ir_graph *g);
/* Arena helpers: memory lives until ir_free.  ir_alloc always succeeds
 * (the abort hook on exhausted memory); what it hands out counts towards
 * LIM_COMPILE_BYTES, which ir_budget enforces. */
void *ir_alloc(ir_graph *g, size_t n);
const char *ir_strdup(ir_graph *g, const char *s);

/* Whether the graph is still within LIM_NODES and LIM_COMPILE_BYTES (with
 * `more` bytes about to be added); if not, reports once at (src, span),
 * naming the limit, and returns -1 from then on. */
int ir_budget(ir_graph *g, long long more, const src_file *src, src_span span);

/* Adds a node, runs the op's shape rule (ops.c), then checks the result's
 * size (ir_type_problem).  On a shape/dtype/size error, or past the budget,
 * it reports at (src, span) and returns -1.  Inputs must be >= 0. */
int ir_add(ir_graph *g, op_kind op, const int *in, int n_in, const ir_attrs *attr,
           const src_file *src, src_span span);
/* Convenience for nodes built by the compiler itself (autodiff, passes): the
 * span and device are copied from node `like`, and the node colocates with
 * it (placement gives it like's device). Returns -1 on error. */
int ir_add_like(ir_graph *g, int like, op_kind op, const int *in, int n_in, const ir_attrs *attr);
int ir_add_const(ir_graph *g, double value, const ir_type *t, const src_file *src, src_span sp);
/* A constant built by the compiler: src, span and device copied from `like`,
 * colocated with it as ir_add_like's nodes are. */
int ir_add_const_like(ir_graph *g, int like, double value, const ir_type *t);
/* Writes a constant's value (its literal, or attr f0 in every element) into
 * dst, host memory of ir_nbytes(&n->type) bytes. */
void ir_const_fill(const ir_node *n, void *dst);
/* The value of node id when it is a scalar f32 constant, else NaN. */
double ir_const_scalar(const ir_graph *g, int id);
int ir_add_var(ir_graph *g, const ir_var *v); /* returns var index; creates its node */
/* Appends a placement request; returns its index. */
int ir_add_place_req(ir_graph *g, const ir_place_req *r);
int ir_add_data(ir_graph *g, const ir_data *d); /* returns data index */
int ir_add_input(ir_graph *g, const char *name, const ir_type *t, const src_file *src, src_span sp);
int ir_set_name(ir_graph *g, const char *name, int node, int is_train);
int ir_find_name(const ir_graph *g, const char *name); /* index into names or -1 */
int ir_find_var(const ir_graph *g, const char *name);  /* index into vars or -1 */
void ir_add_ctrl(ir_graph *g, int node, int dep);
/* One more input of an OP_GROUP node. */
void ir_group_append(ir_graph *g, int group, int node);
/* The node that node's value is: a group's first member's, in turn
 * (group(loss, assign(...)): the loss), any other node itself.  A fetch of
 * node reads it; gr_eval averages it. */
int ir_value_node(const ir_graph *g, int node);
/* A side update of training (ir_side); returns its index. */
int ir_add_side(ir_graph *g, const ir_side *s);
/* ir_add_ctrl for a caller that knows dep is not there yet (it keeps its
 * own set): no scan of the node's control deps. */
void ir_append_ctrl(ir_graph *g, int node, int dep);

/* Work done on this thread by the compiler, plans and executor set-up:
 * one per node a sweep visits and per probe of a lookup (IR_WORK where
 * each loop over the graph starts and in each search loop).
 * tests/test_compile_linear.c checks that it grows as nodes + edges do,
 * without a clock: a sweep per node, or a lookup by a scan, makes it grow
 * with their product.  Counting is one add per loop or probe. */
#ifndef __cplusplus /* C11's thread-local: the CUDA device (C++) counts nothing */
extern _Thread_local unsigned long long ir_work;
#define IR_WORK(n) (ir_work += (unsigned long long)(n))
#endif

/* A walk over part of the graph keeps one int per node it reaches (a
 * visit mark, an index of its own): ir_walk_get is -1 for a node this walk
 * has not set.  Beginning a walk costs O(1) (the slots of earlier walks
 * are told apart by a stamp), so a walk costs what it visits, not the
 * graph's size: autodiff walks the ancestors of each loss.  One walk at a
 * time; it covers the nodes that exist when it begins. */
void ir_walk_begin(ir_graph *g);
int ir_walk_get(const ir_graph *g, int node);
void ir_walk_set(ir_graph *g, int node, int v);

/* "cpu:0", "gpu:1" into buf; returns buf. */
const char *ir_dev_str(int dev, char *buf, size_t n);

/* Types.  Every type in a graph is valid: each dimension is in
 * [0, LIM_DIM] and the bytes are at most LIM_TENSOR_BYTES, checked when the
 * type is made (ir_add, and sema for types it builds); so ir_numel and
 * ir_nbytes cannot overflow, and assert that. */
int64_t ir_numel(const ir_type *t);
size_t ir_nbytes(const ir_type *t);
/* Row-major strides of t, in elements: st[d] = the product of t's dims
 * after d. */
void ir_row_strides(const ir_type *t, int64_t *st);
/* Elements of dims[0..rank), or -1 when a dimension is negative or above
 * LIM_DIM or the elements are more than LIM_TENSOR_BYTES / 4: the one
 * checked size computation every rule uses. */
int64_t ir_dims_numel(const int64_t *dims, int rank);
/* NULL when t is valid, else why not, written into buf: "dimension 1 is
 * 4294967296, above the limit of 2147483647" or "4398046511104 bytes, above
 * the limit of ...". */
const char *ir_type_problem(const ir_type *t, char *buf, size_t n);
/* a * b and a + b into *out, or -1 when they overflow int64. */
int ir_checked_mul(int64_t a, int64_t b, int64_t *out);
int ir_checked_add(int64_t a, int64_t b, int64_t *out);
int ir_type_eq(const ir_type *a, const ir_type *b);
/* "f32[64,784]" into buf; returns buf. */
const char *ir_type_str(const ir_type *t, char *buf, size_t n);
const char *ir_dtype_name(ir_dtype dt);

/* Text dump of the IR (graphrun check --emit ir). */
void ir_dump(const ir_graph *g, FILE *out);

#endif
