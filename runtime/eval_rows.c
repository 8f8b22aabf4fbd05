/* eval_rows.c - the proof behind an exact last partial batch (eval_rows.h).
 *
 * Every node upstream of the target gets a label:
 *  - NB: it does not depend on the data;
 *  - rows (g, off): axis 0 holds rows of the batch's examples, row r of
 *    example (r + off) / g and depending on that example alone;
 *  - LIN: a linear form of row sums of such tensors (rows_term), the value
 *    of a scalar or the sum of a short vector (towers' losses stacked);
 *  - MIXED: anything else.
 * A node's label follows from its inputs' by a rule per op; an op without
 * a rule, or with the data along an axis it mixes, is MIXED.  A data-free
 * input that lines up with axis 0 must not vary along it (its size there
 * 1, or the same in every slice: rows_same): the padded batch puts real
 * examples in other rows than a batch of another size would. */
#include "runtime/eval_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS_NB = 0, ROWS_MIXED = -1, ROWS_LIN = -2 };

typedef struct rows_lbl {
    int64_t g, off; /* g >= 1: rows; else ROWS_NB, ROWS_MIXED or ROWS_LIN */
} rows_lbl;

/* A LIN node's form: its value (each element's, for a vector: only full
 * reductions end a form, so which element a term is of does not matter)
 * is the sum of its terms. */
typedef struct rows_term {
    int m, t; /* node ids: m's rows (t >= 0: (m - t)^2) */
    double coef;
} rows_term;

typedef struct rows_lin {
    rows_term *term;
    int n;
} rows_lin;

typedef struct rows_ctx {
    const ir_graph *g;
    int64_t batch;
    rows_lbl *lbl;    /* per node id */
    rows_lin *lin;    /* per node id: the form of a LIN node */
    char *same;       /* per node id: an NB node the same in every slice of axis 0 */
    int culprit;      /* the first MIXED node whose inputs were not */
    int culprit_form; /* it had a LIN input */
} rows_ctx;

static const rows_lbl rows_mixed = {ROWS_MIXED, 0}, rows_nb = {ROWS_NB, 0};

static int rows_is(rows_lbl a, rows_lbl b)
{
    return a.g == b.g && a.off == b.off;
}

static rows_lbl rows_in(const rows_ctx *c, const ir_node *n, int j)
{
    return c->lbl[n->in[j]];
}

/* ---- rows ---- */

/* Whether a data-free input t broadcasts along axis 0 of a result of
 * rank r: it has fewer axes, or size 1 there. */
static int rows_flat(const ir_type *t, int r)
{
    return t->rank < r || t->dim[0] == 1;
}

/* Inputs of node n: the rows they share, each data one of rank r (NB ones
 * broadcast, see rows_flat); MIXED otherwise. */
static rows_lbl rows_aligned(const rows_ctx *c, const ir_node *n, int r)
{
    rows_lbl l = rows_nb;
    for (int j = 0; j < n->n_in; j++) {
        const ir_type *t = &c->g->nodes[n->in[j]].type;
        rows_lbl lj = rows_in(c, n, j);
        if (lj.g == ROWS_NB && (rows_flat(t, r) || c->same[n->in[j]])) continue;
        if (lj.g < 1 || t->rank != r || (l.g != ROWS_NB && !rows_is(l, lj))) return rows_mixed;
        l = lj;
    }
    return l;
}

/* Input 0 carries the rows and every other input is data-free. */
static rows_lbl rows_first_only(const rows_ctx *c, const ir_node *n)
{
    for (int j = 1; j < n->n_in; j++)
        if (rows_in(c, n, j).g != ROWS_NB) return rows_mixed;
    return rows_in(c, n, 0).g >= 1 ? rows_in(c, n, 0) : rows_mixed;
}

/* reshape: each new row must lie within one example's values. */
static rows_lbl rows_reshape(const rows_ctx *c, const ir_node *n)
{
    const ir_type *in = &c->g->nodes[n->in[0]].type, *out = &n->type;
    rows_lbl l = rows_in(c, n, 0);
    int64_t numel = ir_numel(out);
    if (l.g < 1 || out->rank < 1 || out->dim[0] == 0 || in->dim[0] == 0) return rows_mixed;
    int64_t in_row = numel / in->dim[0], row = numel / out->dim[0];
    int64_t per = l.g * in_row, skip = l.off * in_row; /* in elements */
    if (row == 0 || per % row || skip % row) return rows_mixed;
    return (rows_lbl){per / row, skip / row};
}

/* slice: along axis 0 it moves the rows' first example. */
static rows_lbl rows_slice(const rows_ctx *c, const ir_node *n)
{
    rows_lbl l = rows_first_only(c, n);
    if (l.g >= 1 && n->attr.i[ATTR_AXIS] == 0) l.off += n->attr.i[ATTR_SLICE_BEGIN];
    return l;
}

/* matmul: batch axes pair rows up; a plain [M, K] @ [K, N] keeps a's rows. */
static rows_lbl rows_matmul(const rows_ctx *c, const ir_node *n)
{
    int r = n->type.rank;
    if (r >= 3) return rows_aligned(c, n, r); /* a bias has rank 1 */
    int plain = r == 2 && c->g->nodes[n->in[0]].type.rank == 2 && !n->attr.i[ATTR_TRANS_A];
    return plain ? rows_first_only(c, n) : rows_mixed;
}

/* softmax_xent: logits [N, C] and labels [N], their rows paired. */
static rows_lbl rows_xent(const rows_ctx *c, const ir_node *n)
{
    rows_lbl l = rows_in(c, n, 0);
    return l.g >= 1 && rows_is(rows_in(c, n, 1), l) ? l : rows_mixed;
}

/* Ops along axis attr0: rows survive when that axis is not 0. */
static rows_lbl rows_off_axis0(const rows_ctx *c, const ir_node *n)
{
    return n->attr.i[ATTR_AXIS] != 0 && n->attr.i[ATTR_AXIS] != OP_AXIS_ALL ? rows_first_only(c, n)
                                                                            : rows_mixed;
}

static rows_lbl rows_transpose(const rows_ctx *c, const ir_node *n)
{
    return n->attr.n_list > 0 && n->attr.list[0] == 0 ? rows_first_only(c, n) : rows_mixed;
}

/* softmax over the last axis (rank 2 up); a causal mask also uses the
 * second-last axis, so that one must not be axis 0 either. */
static rows_lbl rows_softmax(const rows_ctx *c, const ir_node *n)
{
    int causal = n->op == OP_SOFTMAX && n->attr.i[ATTR_MASK] == OP_MASK_CAUSAL;
    return n->type.rank >= 2 + causal ? rows_first_only(c, n) : rows_mixed;
}

/* broadcast, sum_to: axis 0 neither grows nor shrinks. */
static rows_lbl rows_same_shape(const rows_ctx *c, const ir_node *n)
{
    const ir_type *t = &c->g->nodes[n->in[0]].type;
    int same = t->rank == n->type.rank && t->dim[0] == n->type.dim[0];
    return same ? rows_first_only(c, n) : rows_mixed;
}

/* concat along another axis than 0: the inputs' rows pair up. */
static rows_lbl rows_concat(const rows_ctx *c, const ir_node *n)
{
    return n->attr.i[ATTR_AXIS] != 0 ? rows_aligned(c, n, n->type.rank) : rows_mixed;
}

/* The rows of node n from its inputs' (none MIXED or LIN, one not NB).  An
 * elementwise op (OPF_ELEMENTWISE in the registry) keeps its rows, so a new
 * one needs no case here. */
static rows_lbl rows_rule(const rows_ctx *c, const ir_node *n)
{
    if (ops_has(n->op, OPF_ELEMENTWISE))
        return n->type.rank >= 1 ? rows_aligned(c, n, n->type.rank) : rows_mixed;
    switch (n->op) {
    case OP_WHERE:
    case OP_IDENTITY:
    case OP_STOP_GRADIENT:
    case OP_CAST:
    case OP_DROPOUT:
    case OP_LSTM_CELL: /* z [B, 4H] and s [B, 2H]: row b's units from row b alone */
    case OP_GRU_CELL:  /* gx, gh [B, 3H] and h [B, H], as lstm_cell */
        return n->type.rank >= 1 ? rows_aligned(c, n, n->type.rank) : rows_mixed;
    case OP_SOFTMAX_XENT:
        return rows_xent(c, n);
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
        return rows_softmax(c, n);
    case OP_SUM:
    case OP_MEAN:
    case OP_MAX:
    case OP_ARGMAX:
    case OP_LAYERNORM:
    case OP_RMSNORM:
        return rows_off_axis0(c, n);
    case OP_SLICE:
        return rows_slice(c, n);
    case OP_CONCAT:
        return rows_concat(c, n);
    case OP_RESHAPE:
        return rows_reshape(c, n);
    case OP_TRANSPOSE:
        return rows_transpose(c, n);
    case OP_GATHER: /* table data-free, ids carry the rows */
        return rows_in(c, n, 0).g == ROWS_NB && rows_in(c, n, 1).g >= 1 ? rows_in(c, n, 1)
                                                                        : rows_mixed;
    case OP_BROADCAST:
    case OP_SUM_TO:
        return rows_same_shape(c, n);
    case OP_ROPE: /* [B, ..., T, D]: axis 0 is not the positions it turns by */
        return n->type.rank >= 3 ? rows_first_only(c, n) : rows_mixed;
    case OP_BATCHNORM: /* per sample with fixed statistics (batchnorm_stats is MIXED) */
    case OP_LRN:       /* across the channels of one sample */
    case OP_ONE_HOT:
    case OP_CONV2D:
    case OP_CONV2D_BIAS:
    case OP_MAXPOOL2D:
    case OP_AVGPOOL2D:
        return rows_first_only(c, n);
    case OP_MATMUL:
    case OP_MATMUL_BIAS:
        return rows_matmul(c, n);
    default:
        return rows_mixed;
    }
}

/* ---- linear forms ---- */

static void lin_add(rows_lin *l, int m, int t, double coef)
{
    rows_term *nt = realloc(l->term, (size_t)(l->n + 1) * sizeof *nt);
    GR_ASSERT(nt);
    l->term = nt;
    l->term[l->n++] = (rows_term){m, t, coef};
}

/* Appends src's terms to dst, their coefficients times scale. */
static void lin_copy(rows_lin *dst, const rows_lin *src, double scale)
{
    for (int k = 0; k < src->n; k++)
        lin_add(dst, src->term[k].m, src->term[k].t, src->term[k].coef * scale);
}

/* A reduction of every element: mean or sum of rows, or of a form. */
static int lin_reduce(rows_ctx *c, const ir_node *n, rows_lin *out)
{
    const ir_node *in = &c->g->nodes[n->in[0]];
    int all =
        n->attr.i[ATTR_AXIS] == OP_AXIS_ALL || (in->type.rank == 1 && n->attr.i[ATTR_AXIS] == 0);
    double scale = n->op == OP_MEAN ? 1.0 / (double)ir_numel(&in->type) : 1.0;
    if (!all || (n->op != OP_MEAN && n->op != OP_SUM)) return -1;
    if (c->lbl[n->in[0]].g >= 1)
        lin_add(out, n->in[0], -1, scale);
    else
        lin_copy(out, &c->lin[n->in[0]], scale);
    return 0;
}

/* The value of a data-free f32 scalar constant, or NAN. */
static double lin_const(const rows_ctx *c, int id)
{
    const ir_node *n = &c->g->nodes[id];
    float v;
    if (n->op != OP_CONST || ir_numel(&n->type) != 1 || n->type.dtype != DT_F32) return NAN;
    ir_const_fill(n, &v);
    return v;
}

/* A form times, or over, a constant scalar. */
static int lin_scale(rows_ctx *c, const ir_node *n, rows_lin *out)
{
    int form = c->lbl[n->in[0]].g == ROWS_LIN ? 0 : 1;
    double k = lin_const(c, n->in[1 - form]);
    if (n->op == OP_DIV) k = form == 0 ? 1.0 / k : NAN;
    if (!isfinite(k) || ir_numel(&n->type) != ir_numel(&c->g->nodes[n->in[form]].type)) return -1;
    lin_copy(out, &c->lin[n->in[form]], k);
    return 0;
}

/* The sum or difference of two forms of the node's shape. */
static int lin_add_forms(rows_ctx *c, const ir_node *n, rows_lin *out)
{
    for (int j = 0; j < 2; j++) {
        const ir_type *t = &c->g->nodes[n->in[j]].type;
        if (c->lbl[n->in[j]].g != ROWS_LIN || ir_numel(t) != ir_numel(&n->type)) return -1;
        lin_copy(out, &c->lin[n->in[j]], j == 1 && n->op == OP_SUB ? -1 : 1);
    }
    return 0;
}

/* Forms of rank 0 or 1 joined end to end (towers' losses stacked). */
static int lin_concat(rows_ctx *c, const ir_node *n, rows_lin *out)
{
    for (int j = 0; j < n->n_in; j++) {
        if (c->lbl[n->in[j]].g != ROWS_LIN || c->g->nodes[n->in[j]].type.rank > 1) return -1;
        lin_copy(out, &c->lin[n->in[j]], 1);
    }
    return 0;
}

/* The form of node n, from its inputs' rows and forms; -1: none. */
static int lin_rule(rows_ctx *c, const ir_node *n, rows_lin *out)
{
    switch (n->op) {
    case OP_MEAN:
    case OP_SUM:
        return lin_reduce(c, n, out);
    case OP_MSE:
        if (c->lbl[n->in[0]].g < 1 || !rows_is(c->lbl[n->in[0]], c->lbl[n->in[1]])) return -1;
        lin_add(out, n->in[0], n->in[1], 1.0 / (double)ir_numel(&c->g->nodes[n->in[0]].type));
        return 0;
    case OP_MUL:
    case OP_DIV:
        return lin_scale(c, n, out);
    case OP_ADD:
    case OP_SUB:
        return lin_add_forms(c, n, out);
    case OP_NEG:
    case OP_IDENTITY:
    case OP_STOP_GRADIENT:
        lin_copy(out, &c->lin[n->in[0]], n->op == OP_NEG ? -1 : 1);
        return 0;
    case OP_RESHAPE: /* a form stays a scalar or a vector */
        if (n->type.rank > 1) return -1;
        lin_copy(out, &c->lin[n->in[0]], 1);
        return 0;
    case OP_CONCAT:
        return lin_concat(c, n, out);
    default:
        return -1;
    }
}

/* ---- labelling ---- */

/* mean or sum of every element, or mse: the reductions forms start at. */
static int rows_full(const rows_ctx *c, const ir_node *n)
{
    if (n->op == OP_MSE) return 1;
    if (n->op != OP_MEAN && n->op != OP_SUM) return 0;
    const ir_type *in = &c->g->nodes[n->in[0]].type;
    return n->attr.i[ATTR_AXIS] == OP_AXIS_ALL || (in->rank == 1 && n->attr.i[ATTR_AXIS] == 0);
}

/* Whether a constant's slices along axis 0 are all equal (one value, or
 * equal rows of a literal). */
static int rows_const_same(const ir_node *n)
{
    if (!n->cdata) return 1;
    size_t row = (size_t)(ir_numel(&n->type) / n->type.dim[0]) * 4; /* f32 and i32 */
    const char *v = n->cdata;
    for (int64_t r = 1; r < n->type.dim[0]; r++)
        if (memcmp(v, v + (size_t)r * row, row) != 0) return 0;
    return 1;
}

/* Whether the NB node id is the same in every slice of axis 0, so that it
 * may line up with the batch's rows (rows_aligned) as a size 1 would: a
 * constant of equal slices, a broadcast of such, or an op that keeps rows
 * apart (rows_rule gives one row per example) whose inputs along axis 0
 * are such; e.g. an LSTM's zero first state through its slices and the h
 * GEMM. */
static int rows_same(rows_ctx *c, int id)
{
    const ir_node *n = &c->g->nodes[id];
    if (n->type.rank < 1 || n->type.dim[0] <= 1) return 1;
    if (n->op == OP_CONST) return rows_const_same(n);
    if (n->op == OP_BROADCAST) return c->same[n->in[0]];
    int any = 0;
    for (int j = 0; j < n->n_in; j++) {
        const ir_type *t = &c->g->nodes[n->in[j]].type;
        if (c->same[n->in[j]] && t->rank >= 1 && t->dim[0] > 1) {
            c->lbl[n->in[j]] = (rows_lbl){1, 0}; /* as the rows of one batch */
            any = 1;
        }
    }
    rows_lbl l = any ? rows_rule(c, n) : rows_mixed;
    for (int j = 0; j < n->n_in; j++) c->lbl[n->in[j]] = rows_nb;
    return l.g == 1;
}

static rows_lbl rows_label(rows_ctx *c, int id)
{
    const ir_node *n = &c->g->nodes[id];
    int data = n->op == OP_DATA, mixed = 0, form = 0, rows = 0;
    for (int j = 0; j < n->n_in; j++) {
        mixed |= c->lbl[n->in[j]].g == ROWS_MIXED;
        form |= c->lbl[n->in[j]].g == ROWS_LIN;
        rows |= c->lbl[n->in[j]].g >= 1;
        data |= c->lbl[n->in[j]].g != ROWS_NB;
    }
    if (mixed) return rows_mixed;
    if (!data) {
        c->same[id] = (char)rows_same(c, id);
        return rows_nb;
    }
    rows_lbl l = rows_mixed;
    if (n->op == OP_DATA)
        l = n->type.rank >= 1 && n->type.dim[0] == c->batch ? (rows_lbl){1, 0} : rows_mixed;
    else if (form || rows_full(c, n))
        l = lin_rule(c, n, &c->lin[id]) == 0 ? (rows_lbl){ROWS_LIN, 0} : rows_mixed;
    else
        l = rows_rule(c, n);
    if (l.g == ROWS_MIXED && c->culprit < 0) {
        c->culprit = id;
        c->culprit_form = form && !rows; /* e.g. 1 - mean(...), not x - mean(x) */
    }
    return l;
}

/* Labels every node upstream of root (post-order, with an explicit stack:
 * node ids are not in topological order after fusion).  A node is pushed
 * at most once per edge into it. */
static void rows_walk(rows_ctx *c, int root)
{
    const ir_graph *g = c->g;
    size_t cap = 1;
    for (int i = 0; i < g->n_nodes; i++) cap += (size_t)g->nodes[i].n_in;
    char *state = calloc((size_t)g->n_nodes + 1, 1); /* 0 new, 1 inputs pushed, 2 done */
    int *stack = malloc(cap * sizeof *stack), top = 0;
    GR_ASSERT(state && stack);
    stack[top++] = root;
    while (top > 0) {
        int id = stack[top - 1];
        if (state[id] == 0) {
            state[id] = 1;
            for (int j = 0; j < g->nodes[id].n_in; j++)
                if (state[g->nodes[id].in[j]] == 0) stack[top++] = g->nodes[id].in[j];
            continue;
        }
        top--;
        if (state[id] == 1) c->lbl[id] = rows_label(c, id);
        state[id] = 2;
    }
    free(stack);
    free(state);
}

/* ---- the weight of each batch position ---- */

/* A change of weight at example e (a sweep over them finds each one's). */
typedef struct rows_step {
    int64_t e;
    double w;
} rows_step;

static int by_example(const void *a, const void *b)
{
    int64_t x = ((const rows_step *)a)->e, y = ((const rows_step *)b)->e;
    return (x > y) - (x < y);
}

/* Steps of the weight term k gives the examples its rows hold: coef times
 * the values per row, for each row. */
static int rows_steps(const rows_ctx *c, const rows_term *t, rows_step *s)
{
    const ir_type *m = &c->g->nodes[t->m].type;
    rows_lbl l = c->lbl[t->m];
    int64_t rows = m->dim[0], first = l.off / l.g, last = (l.off + rows - 1) / l.g;
    if (rows == 0) return 0;
    double w = t->coef * (double)(ir_numel(m) / rows);
    /* the first and last examples may have fewer than g rows here */
    int64_t head = (first + 1) * l.g - l.off, tail = l.off + rows - last * l.g;
    if (first == last) {
        s[0] = (rows_step){first, w * (double)rows};
        s[1] = (rows_step){first + 1, -w * (double)rows};
        return 2;
    }
    s[0] = (rows_step){first, w * (double)head};
    s[1] = (rows_step){first + 1, w * (double)(l.g - head)};
    s[2] = (rows_step){last, w * (double)(tail - l.g)};
    s[3] = (rows_step){last + 1, -w * (double)tail};
    return 4;
}

/* The weights of the positions of a batch in the form, as segments: the
 * weight from examples seg[k].e to seg[k + 1].e is seg[k].w.  Returns the
 * count (the last segment starts past the batch's examples, or at it). */
static int rows_segments(const rows_ctx *c, const rows_lin *f, rows_step *seg)
{
    rows_step *s = malloc(((size_t)f->n * 4 + 1) * sizeof *s);
    int n = 0, k = 0, out = 0;
    GR_ASSERT(s);
    for (int t = 0; t < f->n; t++) n += rows_steps(c, &f->term[t], s + n);
    s[n++] = (rows_step){0, 0};
    qsort(s, (size_t)n, sizeof *s, by_example);
    for (double w = 0; k < n; k++) {
        w += s[k].w;
        if (k + 1 == n || s[k + 1].e != s[k].e) seg[out++] = (rows_step){s[k].e, w};
    }
    free(s);
    return out;
}

/* Whether every position of the batch has the same weight in the form
 * (else some examples would count more than others). */
static int rows_uniform(const rows_ctx *c, const rows_lin *f)
{
    rows_step *seg = malloc(((size_t)f->n * 4 + 1) * sizeof *seg);
    GR_ASSERT(seg);
    int n = rows_segments(c, f, seg), ok = seg[0].e == 0;
    double mag = 0;
    for (int k = 0; k < n; k++) mag = fmax(mag, fabs(seg[k].w));
    for (int k = 0; k < n && ok; k++) {
        int inside = seg[k].e < c->batch;
        ok = seg[k].e <= c->batch && fabs(seg[k].w - (inside ? seg[0].w : 0)) <= 1e-9 * mag;
    }
    free(seg);
    return ok;
}

/* ---- the answer ---- */

static void rows_why(const rows_ctx *c, int id, const char *what, char *why, size_t whylen)
{
    const ir_node *n = &c->g->nodes[id];
    int line = 0, col = 0;
    if (n->src) src_linecol(n->src, n->span.begin, &line, &col);
    snprintf(why, whylen, "%s (%s at line %d)", what, ops_name(n->op), line);
}

/* The fetch index of node id in er, added when new. */
static int rows_fetch(const rows_ctx *c, eval_rows *er, int id)
{
    for (int k = 0; k < er->n_fetch; k++)
        if (er->fetch[k].node == id) return k;
    er->fetch = realloc(er->fetch, (size_t)(er->n_fetch + 1) * sizeof *er->fetch);
    GR_ASSERT(er->fetch);
    er->fetch[er->n_fetch] = (eval_fetch){id, c->lbl[id].g, c->lbl[id].off};
    return er->n_fetch++;
}

static void rows_answer(const rows_ctx *c, const rows_lin *f, eval_rows *er)
{
    *er = (eval_rows){.term = calloc((size_t)f->n + 1, sizeof *er->term), .n_term = f->n};
    GR_ASSERT(er->term);
    for (int k = 0; k < f->n; k++) {
        const rows_term *t = &f->term[k];
        er->term[k] =
            (eval_term){rows_fetch(c, er, t->m), t->t >= 0 ? rows_fetch(c, er, t->t) : -1, t->coef};
    }
}

int eval_rows_find(const ir_graph *g, int target, int64_t batch, eval_rows *out, char *why,
                   size_t whylen)
{
    rows_ctx c = {g,
                  batch,
                  calloc((size_t)g->n_nodes + 1, sizeof *c.lbl),
                  calloc((size_t)g->n_nodes + 1, sizeof *c.lin),
                  calloc((size_t)g->n_nodes + 1, 1),
                  -1,
                  0};
    GR_ASSERT(c.lbl && c.lin && c.same);
    memset(out, 0, sizeof *out);
    rows_walk(&c, target);
    int rc = -1;
    if (c.lbl[target].g != ROWS_LIN && c.culprit >= 0)
        rows_why(&c, c.culprit,
                 c.culprit_form ? "it is not a sum, mean or multiple of values per example"
                                : "it mixes the examples of a batch",
                 why, whylen);
    else if (c.lbl[target].g != ROWS_LIN)
        rows_why(&c, target, "it is not a sum or mean over the batch", why, whylen);
    else if (!rows_uniform(&c, &c.lin[target]))
        rows_why(&c, target, "it weighs the batch's examples unequally", why, whylen);
    else
        rc = 0;
    if (rc == 0) rows_answer(&c, &c.lin[target], out);
    for (int i = 0; i < g->n_nodes; i++) free(c.lin[i].term);
    free(c.lin);
    free(c.lbl);
    free(c.same);
    return rc;
}

void eval_rows_free(eval_rows *er)
{
    free(er->term);
    free(er->fetch);
    memset(er, 0, sizeof *er);
}

static double rows_value(const ir_type *t, const void *v, int64_t k)
{
    return t->dtype == DT_I32 ? (double)((const int32_t *)v)[k] : (double)((const float *)v)[k];
}

/* Term t's sum over the rows of the first rows examples. */
static double rows_term_sum(const ir_graph *g, const eval_rows *er, const eval_term *t,
                            const void *const *values, int64_t rows)
{
    const eval_fetch *m = &er->fetch[t->m];
    const ir_type *tm = &g->nodes[m->node].type;
    const ir_type *tt = t->t >= 0 ? &g->nodes[er->fetch[t->t].node].type : NULL;
    int64_t per = ir_numel(tm) / tm->dim[0];
    double sum = 0;
    for (int64_t r = 0; r < tm->dim[0] && (r + m->off) / m->g < rows; r++)
        for (int64_t k = r * per; k < (r + 1) * per; k++) {
            double v = rows_value(tm, values[t->m], k);
            double d = tt ? v - rows_value(tt, values[t->t], k) : 0;
            sum += tt ? d * d : v;
        }
    return sum;
}

double eval_rows_sum(const ir_graph *g, const eval_rows *er, int64_t batch,
                     const void *const *values, int64_t rows)
{
    double sum = 0;
    for (int k = 0; k < er->n_term; k++)
        sum += er->term[k].coef * rows_term_sum(g, er, &er->term[k], values, rows);
    return sum * (double)batch;
}
