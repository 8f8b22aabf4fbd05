/* ir.c - the IR graph: growable node/var/data/input/name arrays, an arena,
 * node construction (which runs the op's shape rule), types and the dump. */
#include "ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Thread_local unsigned long long ir_work;

/* ---- arena ---- */

typedef struct ir_block {
    struct ir_block *next;
    size_t size, used;
    max_align_t data[];
} ir_block;

enum { IR_BLOCK_MIN = 16384 };

void *ir_alloc(ir_graph *g, size_t n)
{
    ir_block *b = g->arena;
    size_t al = sizeof(max_align_t);
    n = (n + al - 1) / al * al;
    if (n == 0) n = al;
    if (!b || b->size - b->used < n) {
        size_t size = n > IR_BLOCK_MIN ? n : IR_BLOCK_MIN;
        GR_ASSERT(size < SIZE_MAX - sizeof(ir_block));
        ir_block *nb = base_xmalloc(sizeof(ir_block) + size);
        g->mem_bytes += (long long)size;
        nb->next = b;
        nb->size = size;
        nb->used = 0;
        g->arena = b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

const char *ir_strdup(ir_graph *g, const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = ir_alloc(g, n);
    if (p) memcpy(p, s, n);
    return p;
}

ir_graph *ir_new(diag_list *d)
{
    ir_graph *g = base_xcalloc(1, sizeof(*g));
    g->diags = d;
    g->default_target = -1;
    g->place_cur = -1;
    return g;
}

void ir_free(ir_graph *g)
{
    if (!g) return;
    ir_block *b = g->arena;
    while (b) {
        ir_block *next = b->next;
        free(b);
        b = next;
    }
    free(g->nodes);
    free(g->vars);
    free(g->data);
    free(g->inputs);
    free(g->names);
    free(g->var_index.slot);
    free(g->name_index.slot);
    free(g->walk_stamp);
    free(g->walk_val);
    free(g->place_reqs);
    free(g->dev_ops);
    free(g->sides);
    free(g);
}

int ir_budget(ir_graph *g, long long more, const src_file *src, src_span span)
{
    if (g->over_budget) return -1;
    if (g->n_nodes < LIM_NODES && g->mem_bytes + more <= LIM_COMPILE_BYTES) return 0;
    g->over_budget = 1;
    if (g->n_nodes >= LIM_NODES)
        diag_error(g->diags, src, span, "the graph has more than %d nodes, the limit", LIM_NODES);
    else
        diag_error(g->diags, src, span,
                   "the compile needs more than %lld MiB of memory, the limit (large tensor "
                   "literals, lists or loops?)",
                   LIM_COMPILE_BYTES >> 20);
    return -1;
}

/* Grows *v (elements of size sz) so that one more fits.  Out of memory goes
 * to the abort hook: a library must not return a half-built graph. */
static void grow(ir_graph *g, void **v, int n, int *cap, size_t sz)
{
    if (n < *cap) return;
    GR_ASSERT(*cap < INT32_MAX / 2);
    int nc = *cap ? *cap * 2 : 64;
    *v = base_xreallocarray(*v, (size_t)nc, sz);
    g->mem_bytes += (long long)((size_t)(nc - *cap) * sz);
    *cap = nc;
}

/* ---- name indices: vars and names by name in O(1) ---- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

typedef const char *(*name_of_fn)(const ir_graph *g, int i);

static const char *var_name_of(const ir_graph *g, int i)
{
    return g->vars[i].name;
}

static const char *name_name_of(const ir_graph *g, int i)
{
    return g->names[i].name;
}

static int index_find(const ir_graph *g, const ir_index *x, name_of_fn name_of, const char *name)
{
    if (!x->cap) return -1;
    size_t mask = (size_t)x->cap - 1;
    for (size_t k = name_hash(name) & mask; IR_WORK(1), x->slot[k] >= 0; k = (k + 1) & mask)
        if (strcmp(name_of(g, x->slot[k]), name) == 0) return x->slot[k];
    return -1;
}

static void index_put(ir_index *x, const char *name, int i)
{
    size_t mask = (size_t)x->cap - 1, k = name_hash(name) & mask;
    while (IR_WORK(1), x->slot[k] >= 0) k = (k + 1) & mask;
    x->slot[k] = i;
}

/* Adds entry i (of n, all of them indexed but i) to x, rebuilt at twice
 * the entries so that it stays at most half full. */
static void index_add(ir_graph *g, ir_index *x, name_of_fn name_of, int i, int n)
{
    if (2 * n > x->cap) {
        int cap = 64;
        while (cap < 4 * n) cap *= 2;
        free(x->slot);
        x->slot = base_xmalloc(sizeof(int) * (size_t)cap);
        g->mem_bytes += (long long)(sizeof(int) * (size_t)(cap - x->cap));
        x->cap = cap;
        memset(x->slot, -1, sizeof(int) * (size_t)cap);
        for (int j = 0; j < n; j++)
            if (j != i) index_put(x, name_of(g, j), j);
    }
    index_put(x, name_of(g, i), i);
}

/* ---- walks ---- */

void ir_walk_begin(ir_graph *g)
{
    if (g->walk_cap < g->cap_nodes) { /* grown with the nodes: O(1) amortised */
        int cap = g->cap_nodes;
        g->walk_stamp = base_xreallocarray(g->walk_stamp, (size_t)cap, sizeof(int));
        g->walk_val = base_xreallocarray(g->walk_val, (size_t)cap, sizeof(int));
        memset(g->walk_stamp + g->walk_cap, 0, sizeof(int) * (size_t)(cap - g->walk_cap));
        g->mem_bytes += (long long)(2 * sizeof(int) * (size_t)(cap - g->walk_cap));
        g->walk_cap = cap;
    }
    GR_ASSERT(g->walk_now < INT32_MAX);
    g->walk_now++;
}

int ir_walk_get(const ir_graph *g, int node)
{
    GR_ASSERT(node >= 0 && node < g->walk_cap);
    return g->walk_stamp[node] == g->walk_now ? g->walk_val[node] : -1;
}

void ir_walk_set(ir_graph *g, int node, int v)
{
    GR_ASSERT(node >= 0 && node < g->walk_cap);
    g->walk_stamp[node] = g->walk_now;
    g->walk_val[node] = v;
}

/* ---- nodes ---- */

static int new_node(ir_graph *g, op_kind op, const src_file *src, src_span span)
{
    grow(g, (void **)&g->nodes, g->n_nodes, &g->cap_nodes, sizeof(ir_node));
    int id = g->n_nodes++;
    ir_node *n = &g->nodes[id];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->device = -1;
    n->place_req = g->place_cur;
    n->coloc = -1;
    n->var = -1;
    n->data = -1;
    n->alt = -1;
    n->src = src;
    n->span = span;
    return id;
}

/* Attribute defaults from the registry, used when the caller passes none. */
static void default_attrs(op_kind op, ir_attrs *a)
{
    memset(a, 0, sizeof(*a));
    for (int j = 0; j < IR_MAX_ATTRS; j++) {
        const op_attr *oa = &ops_table[op].attrs[j];
        if (!oa->name || oa->def != oa->def) continue; /* none, or required (NAN) */
        if (oa->kind == ATTR_FLOAT)
            a->f[j] = oa->def;
        else if (oa->kind != ATTR_LIST)
            a->i[j] = (int64_t)oa->def;
    }
}

static int check_inputs(ir_graph *g, op_kind op, const int *in, int n_in, const src_file *src,
                        src_span span)
{
    int ar = ops_table[op].arity;
    if (ar >= 0 && n_in != ar) {
        diag_error(g->diags, src, span, "%s: expects %d input%s, got %d", ops_name(op), ar,
                   ar == 1 ? "" : "s", n_in);
        return -1;
    }
    if (n_in > 0 && !in) {
        diag_error(g->diags, src, span, "%s: no inputs given", ops_name(op));
        return -1;
    }
    for (int k = 0; k < n_in; k++) {
        if (in[k] < 0 || in[k] >= g->n_nodes || g->nodes[in[k]].dead) {
            diag_error(g->diags, src, span, "%s: input %d is not a valid node (%d)", ops_name(op),
                       k, in[k]);
            return -1;
        }
    }
    return 0;
}

/* "f32[2,3]", "f32[2,3] and f32[3]", "f32[1], f32[2], f32[3] and 5 more". */
static void inputs_str(const ir_graph *g, const ir_node *n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < n->n_in && k < 3 && at < len; k++) {
        char tb[160];
        const char *sep = k == 0 ? "" : k + 1 == n->n_in ? " and " : ", ";
        ir_type_str(&g->nodes[n->in[k]].type, tb, sizeof tb);
        at += (size_t)snprintf(buf + at, len - at, "%s%s", sep, tb);
    }
    if (n->n_in > 3 && at < len) snprintf(buf + at, len - at, " and %d more", n->n_in - 3);
}

/* The one size check after every shape rule: a result too big to hold
 * (or whose size would overflow) is the user's error, reported with the
 * op and its operands. */
static int check_size(ir_graph *g, int id)
{
    const ir_node *n = &g->nodes[id];
    char why[160], ins[600], out[160];
    if (!ir_type_problem(&n->type, why, sizeof why)) return 0;
    ir_type_str(&n->type, out, sizeof out);
    if (n->n_in == 0) {
        diag_error(g->diags, n->src, n->span, "%s: result %s is too large: %s", ops_name(n->op),
                   out, why);
        return -1;
    }
    inputs_str(g, n, ins, sizeof ins);
    diag_error(g->diags, n->src, n->span, "%s: %s give%s %s, too large: %s", ops_name(n->op), ins,
               n->n_in == 1 ? "s" : "", out, why);
    return -1;
}

int ir_add(ir_graph *g, op_kind op, const int *in, int n_in, const ir_attrs *attr,
           const src_file *src, src_span span)
{
    if ((unsigned)op >= OP_COUNT || n_in < 0) {
        diag_error(g->diags, src, span, "internal error: bad op %d", (int)op);
        return -1;
    }
    IR_WORK(1 + n_in);
    if (check_inputs(g, op, in, n_in, src, span)) return -1;
    if (ir_budget(g, 0, src, span) < 0) return -1;
    int *copy = NULL;
    if (n_in > 0) {
        copy = ir_alloc(g, (size_t)n_in * sizeof(int));
        if (!copy) return -1;
        memcpy(copy, in, (size_t)n_in * sizeof(int));
    }
    int id = new_node(g, op, src, span);
    ir_node *n = &g->nodes[id];
    n->in = copy;
    n->n_in = n_in;
    if (attr)
        n->attr = *attr;
    else
        default_attrs(op, &n->attr);
    if ((ops_table[op].shape && ops_table[op].shape(g, id) < 0) || check_size(g, id) < 0) {
        g->nodes[id].dead = 1;
        return -1;
    }
    return id;
}

int ir_add_like(ir_graph *g, int like, op_kind op, const int *in, int n_in, const ir_attrs *attr)
{
    const ir_node *l = &g->nodes[like];
    int dev = l->device;
    int id = ir_add(g, op, in, n_in, attr, l->src, l->span);
    if (id >= 0) g->nodes[id].device = dev, g->nodes[id].coloc = like;
    return id;
}

int ir_add_const(ir_graph *g, double value, const ir_type *t, const src_file *src, src_span sp)
{
    ir_attrs a;
    memset(&a, 0, sizeof(a));
    a.f[ATTR_CONST_VALUE] = value;
    /* t may point into g->nodes (a gradient seed shaped like its loss),
     * which adding the node can move: copy it first */
    ir_type type = t ? *t : (ir_type){0};
    GR_ASSERT(!ir_type_problem(&type, NULL, 0)); /* its maker checked it */
    int id = ir_add(g, OP_CONST, NULL, 0, &a, src, sp);
    if (id >= 0) g->nodes[id].type = type;
    return id;
}

int ir_add_const_like(ir_graph *g, int like, double value, const ir_type *t)
{
    const ir_node *l = &g->nodes[like];
    int dev = l->device;
    int id = ir_add_const(g, value, t, l->src, l->span);
    if (id >= 0) g->nodes[id].device = dev, g->nodes[id].coloc = like;
    return id;
}

double ir_const_scalar(const ir_graph *g, int id)
{
    const ir_node *c = &g->nodes[id];
    if (c->op != OP_CONST || c->type.dtype != DT_F32 || c->type.rank != 0) return NAN;
    return c->cdata ? (double)*(const float *)c->cdata : (double)(float)c->attr.f[ATTR_CONST_VALUE];
}

void ir_const_fill(const ir_node *n, void *dst)
{
    GR_ASSERT(n->op == OP_CONST);
    int64_t count = ir_numel(&n->type);
    if (n->cdata) {
        memcpy(dst, n->cdata, ir_nbytes(&n->type));
    } else if (n->type.dtype == DT_I32) {
        int32_t *d = dst, v = (int32_t)n->attr.f[ATTR_CONST_VALUE];
        for (int64_t i = 0; i < count; i++) d[i] = v;
    } else {
        float *d = dst, v = (float)n->attr.f[ATTR_CONST_VALUE];
        for (int64_t i = 0; i < count; i++) d[i] = v;
    }
}

int ir_add_var(ir_graph *g, const ir_var *v)
{
    GR_ASSERT(!ir_type_problem(&v->type, NULL, 0)); /* its maker checked it */
    grow(g, (void **)&g->vars, g->n_vars, &g->cap_vars, sizeof(ir_var));
    int vi = g->n_vars++;
    ir_var *nv = &g->vars[vi];
    *nv = *v;
    nv->name = ir_strdup(g, v->name);
    index_add(g, &g->var_index, var_name_of, vi, g->n_vars);
    int id = new_node(g, OP_VARIABLE, v->src, v->span);
    ir_node *n = &g->nodes[id];
    n->type = v->type;
    n->name = nv->name;
    n->var = vi;
    n->device = v->device;
    nv->node = id;
    return vi;
}

int ir_add_data(ir_graph *g, const ir_data *d)
{
    grow(g, (void **)&g->data, g->n_data, &g->cap_data, sizeof(ir_data));
    int di = g->n_data++;
    ir_data *nd = &g->data[di];
    *nd = *d;
    nd->name = ir_strdup(g, d->name);
    for (int k = 0; k < 2; k++) nd->path[k] = ir_strdup(g, d->path[k]);
    return di;
}

int ir_add_place_req(ir_graph *g, const ir_place_req *r)
{
    grow(g, (void **)&g->place_reqs, g->n_place_reqs, &g->cap_place_reqs, sizeof *r);
    g->place_reqs[g->n_place_reqs] = *r;
    return g->n_place_reqs++;
}

int ir_add_input(ir_graph *g, const char *name, const ir_type *t, const src_file *src, src_span sp)
{
    GR_ASSERT(!ir_type_problem(t, NULL, 0)); /* its maker checked it */
    grow(g, (void **)&g->inputs, g->n_inputs, &g->cap_inputs, sizeof(ir_input));
    int ii = g->n_inputs++;
    ir_input *in = &g->inputs[ii];
    in->name = ir_strdup(g, name);
    in->type = *t;
    int id = new_node(g, OP_INPUT, src, sp);
    g->nodes[id].type = *t;
    g->nodes[id].name = in->name;
    g->nodes[id].data = ii;
    in->node = id;
    return id;
}

int ir_set_name(ir_graph *g, const char *name, int node, int is_train)
{
    int i = ir_find_name(g, name);
    if (i < 0) {
        grow(g, (void **)&g->names, g->n_names, &g->cap_names, sizeof(ir_name));
        i = g->n_names++;
        g->names[i].name = ir_strdup(g, name);
        index_add(g, &g->name_index, name_name_of, i, g->n_names);
    }
    g->names[i].node = node;
    g->names[i].is_train = is_train;
    g->names[i].every = 0;
    if (is_train) g->default_target = i;
    if (node >= 0 && node < g->n_nodes && !g->nodes[node].name)
        g->nodes[node].name = g->names[i].name;
    return i;
}

int ir_find_name(const ir_graph *g, const char *name)
{
    return index_find(g, &g->name_index, name_name_of, name);
}

int ir_find_var(const ir_graph *g, const char *name)
{
    return index_find(g, &g->var_index, var_name_of, name);
}

void ir_add_ctrl(ir_graph *g, int node, int dep)
{
    ir_node *n = &g->nodes[node];
    IR_WORK(n->n_ctrl);
    for (int k = 0; k < n->n_ctrl; k++)
        if (n->ctrl[k] == dep) return;
    ir_append_ctrl(g, node, dep);
}

void ir_group_append(ir_graph *g, int group, int node)
{
    ir_node *grp = &g->nodes[group];
    int *in = ir_alloc(g, sizeof(int) * (size_t)(grp->n_in + 1));
    memcpy(in, grp->in, sizeof(int) * (size_t)grp->n_in);
    in[grp->n_in] = node;
    grp->in = in;
    grp->n_in++;
}

int ir_value_node(const ir_graph *g, int node)
{
    while (g->nodes[node].op == OP_GROUP && g->nodes[node].n_in > 0) node = g->nodes[node].in[0];
    return node;
}

int ir_add_side(ir_graph *g, const ir_side *s)
{
    grow(g, (void **)&g->sides, g->n_sides, &g->cap_sides, sizeof(ir_side));
    g->sides[g->n_sides] = *s;
    return g->n_sides++;
}

void ir_append_ctrl(ir_graph *g, int node, int dep)
{
    ir_node *n = &g->nodes[node];
    int cnt = n->n_ctrl;
    if ((cnt & (cnt - 1)) == 0) { /* 0, 1, 2, 4, ...: full, so double */
        int *c = ir_alloc(g, (size_t)(cnt ? 2 * cnt : 1) * sizeof(int));
        if (cnt) memcpy(c, n->ctrl, (size_t)cnt * sizeof(int));
        n->ctrl = c;
    }
    n->ctrl[n->n_ctrl++] = dep;
}

/* ---- types ---- */

int ir_checked_mul(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int ir_checked_add(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

int64_t ir_dims_numel(const int64_t *dims, int rank)
{
    int64_t n = 1;
    if (rank < 0 || rank > IR_MAX_DIMS) return -1;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0 || dims[i] > LIM_DIM || ir_checked_mul(n, dims[i], &n) < 0 ||
            n > LIM_TENSOR_BYTES / 4)
            return -1;
    return n;
}

const char *ir_type_problem(const ir_type *t, char *buf, size_t n)
{
    if (t->rank >= 0 && ir_dims_numel(t->dim, t->rank) >= 0) return NULL;
    if (!buf) return "invalid type";
    if (t->rank < 0 || t->rank > IR_MAX_DIMS) {
        snprintf(buf, n, "rank %d is above the limit of %d", t->rank, IR_MAX_DIMS);
        return buf;
    }
    for (int i = 0; i < t->rank; i++)
        if (t->dim[i] < 0 || t->dim[i] > LIM_DIM) {
            if (t->dim[i] < 0)
                snprintf(buf, n, "dimension %d is %" PRId64 ", below 0", i, t->dim[i]);
            else
                snprintf(buf, n, "dimension %d is %" PRId64 ", above the limit of %lld", i,
                         t->dim[i], LIM_DIM);
            return buf;
        }
    int64_t elems = 1;
    int exact = 1;
    for (int i = 0; i < t->rank && exact; i++)
        exact = ir_checked_mul(elems, t->dim[i], &elems) == 0;
    exact = exact && elems <= INT64_MAX / 4;
    if (exact)
        snprintf(buf, n, "%" PRId64 " bytes, above the limit of %lld bytes (1 TiB) per tensor",
                 elems * 4, LIM_TENSOR_BYTES);
    else
        snprintf(buf, n, "more than 2^63 bytes, above the limit of %lld bytes (1 TiB) per tensor",
                 LIM_TENSOR_BYTES);
    return buf;
}

int64_t ir_numel(const ir_type *t)
{
    int64_t n = ir_dims_numel(t->dim, t->rank);
    GR_ASSERT(n >= 0); /* types are checked where they are made */
    return n;
}

void ir_row_strides(const ir_type *t, int64_t *st)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->dim[d];
    }
}

size_t ir_nbytes(const ir_type *t)
{
    return (size_t)ir_numel(t) * 4; /* f32 and i32 are both 4 bytes */
}

int ir_type_eq(const ir_type *a, const ir_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}

const char *ir_dtype_name(ir_dtype dt)
{
    switch (dt) {
    case DT_F32:
        return "f32";
    case DT_I32:
        return "i32";
    default:
        return "?";
    }
}

const char *ir_type_str(const ir_type *t, char *buf, size_t n)
{
    if (!buf || n == 0) return buf;
    size_t len = (size_t)snprintf(buf, n, "%s[", ir_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? "," : "", t->dim[i]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}

const char *ir_dev_str(int dev, char *buf, size_t n)
{
    if (dev < 0)
        snprintf(buf, n, "?");
    else
        snprintf(buf, n, "%s:%d", IR_DEV_KIND(dev) == DEV_GPU ? "gpu" : "cpu", IR_DEV_INDEX(dev));
    return buf;
}

/* ---- dump ---- */

static void dump_device(int dev, FILE *out)
{
    char b[32];
    fprintf(out, " @%s", ir_dev_str(dev, b, sizeof b));
}

static void dump_where(const char *name, const src_file *src, src_span sp, FILE *out)
{
    if (!name && !src) return;
    fputs("  ;", out);
    if (name) fprintf(out, " %s", name);
    if (src) {
        int line = 0, col = 0;
        src_linecol(src, sp.begin, &line, &col);
        fprintf(out, " line %d", line);
    }
}

/* One attribute as "name=value"; returns 0 when it holds its default. */
static int dump_attr(const ir_node *n, int j, const char *sep, FILE *out)
{
    const op_attr *a = &ops_table[n->op].attrs[j];
    int required = a->def != a->def; /* NAN */
    if (a->kind == ATTR_LIST) {
        if (n->attr.n_list == 0 && !required) return 0;
        fprintf(out, "%s%s=[", sep, a->name);
        for (int k = 0; k < n->attr.n_list; k++)
            fprintf(out, "%s%" PRId64, k ? "," : "", n->attr.list[k]);
        fputc(']', out);
    } else if (a->kind == ATTR_FLOAT) {
        if (!required && n->attr.f[j] == a->def) return 0;
        fprintf(out, "%s%s=%g", sep, a->name, n->attr.f[j]);
    } else if (a->kind == ATTR_DTYPE) {
        fprintf(out, "%s%s=%s", sep, a->name, ir_dtype_name((ir_dtype)n->attr.i[j]));
    } else if (a->kind == ATTR_PAD && n->attr.i[j] == OP_PAD_SAME) {
        fprintf(out, "%s%s=same", sep, a->name);
    } else if (a->kind == ATTR_CHOICE) {
        if (!required && n->attr.i[j] == (int64_t)a->def) return 0;
        fprintf(out, "%s%s=%s", sep, a->name, a->choices[n->attr.i[j]]);
    } else {
        if (!required && n->attr.i[j] == (int64_t)a->def) return 0;
        fprintf(out, "%s%s=%" PRId64, sep, a->name, n->attr.i[j]);
    }
    return 1;
}

/* Attributes that differ from their defaults, as " {axis=1, keepdims=1}". */
static void dump_attrs(const ir_node *n, FILE *out)
{
    int shown = 0;
    if (n->op == OP_CONST) return; /* its value is printed as its operand */
    for (int j = 0; j < IR_MAX_ATTRS; j++)
        if (ops_table[n->op].attrs[j].name) shown += dump_attr(n, j, shown ? ", " : " {", out);
    if (shown) fputc('}', out);
}

static void dump_node(const ir_graph *g, int id, FILE *out)
{
    const ir_node *n = &g->nodes[id];
    char tb[160];
    fprintf(out, "%%%d = %s(", id, ops_name(n->op));
    if (n->op == OP_CONST && !n->cdata) fprintf(out, "%g", n->attr.f[ATTR_CONST_VALUE]);
    for (int k = 0; k < n->n_in; k++) fprintf(out, "%s%%%d", k ? ", " : "", n->in[k]);
    for (int k = 0; k < n->n_ctrl; k++)
        fprintf(out, "%s^%%%d", (k || n->n_in) ? ", " : "", n->ctrl[k]);
    fputc(')', out);
    dump_attrs(n, out);
    fprintf(out, " %s", ir_type_str(&n->type, tb, sizeof(tb)));
    dump_device(n->device, out);
    dump_where(n->name, n->src, n->span, out);
    fputc('\n', out);
}

static const char *init_name(ir_init i)
{
    static const char *names[] = {"zeros", "ones", "constant", "uniform", "normal", "glorot", "he"};
    return (unsigned)i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

static void dump_vars(const ir_graph *g, FILE *out)
{
    char tb[160];
    for (int i = 0; i < g->n_vars; i++) {
        const ir_var *v = &g->vars[i];
        fprintf(out, "var %s %s %s(%g, %g)", v->name, ir_type_str(&v->type, tb, sizeof(tb)),
                init_name(v->init), v->a, v->b);
        dump_device(v->device, out);
        if (v->slot_of >= 0) fprintf(out, " slot_of=%s", g->vars[v->slot_of].name);
        if (!v->trainable) fputs(" untrainable", out);
        fputc('\n', out);
    }
}

static void dump_data(const ir_graph *g, FILE *out)
{
    static const char *kinds[] = {"idx", "csv", "raw", "gaussian"};
    char tb[160], tb2[160];
    for (int i = 0; i < g->n_data; i++) {
        const ir_data *d = &g->data[i];
        fprintf(out, "data %s %s batch=%" PRId64 " x=%s", d->name,
                (unsigned)d->kind < 4 ? kinds[d->kind] : "?", d->batch,
                ir_type_str(&d->x, tb, sizeof(tb)));
        if (d->y.rank >= 0) fprintf(out, " y=%s", ir_type_str(&d->y, tb2, sizeof(tb2)));
        for (int k = 0; k < 2; k++)
            if (d->path[k]) fprintf(out, " \"%s\"", d->path[k]);
        fputc('\n', out);
    }
}

void ir_dump(const ir_graph *g, FILE *out)
{
    for (int id = 0; id < g->n_nodes; id++)
        if (!g->nodes[id].dead) dump_node(g, id, out);
    dump_vars(g, out);
    dump_data(g, out);
}
