/* tensor.c - gr_tensor, the public dtype + shape + bytes handle, and the
 * program lookups that hand one out shaped like a named tensor. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

struct gr_tensor {
    gr_dtype dtype;
    int rank;
    int64_t dim[GR_MAX_RANK];
    size_t bytes;
    void *data;
};

_Static_assert(GR_MAX_RANK >= IR_MAX_DIMS, "a gr_tensor must hold any program tensor");
_Static_assert((int)GR_F32 == (int)DT_F32 && (int)GR_I32 == (int)DT_I32,
               "gr_dtype mirrors ir_dtype");

/* Tensors over 2^40 bytes are refused rather than overflow size_t maths. */
#define TENSOR_MAX_BYTES (INT64_C(1) << 40)

gr_tensor *gr_tensor_new(gr_dtype dtype, int rank, const int64_t *dims)
{
    if ((dtype != GR_F32 && dtype != GR_I32) || rank < 0 || rank > GR_MAX_RANK ||
        (rank > 0 && !dims))
        return NULL;
    int64_t n = 4;
    for (int k = 0; k < rank; k++) {
        if (dims[k] < 0 || (dims[k] > 0 && n > TENSOR_MAX_BYTES / dims[k])) return NULL;
        n *= dims[k];
    }
    gr_tensor *t = calloc(1, sizeof *t);
    if (!t || !(t->data = calloc(n ? (size_t)n : 1, 1))) {
        free(t);
        return NULL;
    }
    t->dtype = dtype;
    t->rank = rank;
    if (rank) memcpy(t->dim, dims, sizeof(int64_t) * (size_t)rank);
    t->bytes = (size_t)n;
    return t;
}

void gr_tensor_free(gr_tensor *t)
{
    if (!t) return;
    free(t->data);
    free(t);
}

/* The accessors take NULL (a failed gr_tensor_new) and answer 0 or NULL. */
gr_dtype gr_tensor_dtype(const gr_tensor *t)
{
    return t ? t->dtype : GR_F32;
}

int gr_tensor_rank(const gr_tensor *t)
{
    return t ? t->rank : 0;
}

int64_t gr_tensor_dim(const gr_tensor *t, int axis)
{
    return t && axis >= 0 && axis < t->rank ? t->dim[axis] : 0;
}

int64_t gr_tensor_numel(const gr_tensor *t)
{
    return t ? (int64_t)(t->bytes / 4) : 0; /* both dtypes are 4 bytes */
}

size_t gr_tensor_bytes(const gr_tensor *t)
{
    return t ? t->bytes : 0;
}

void *gr_tensor_data(gr_tensor *t)
{
    return t ? t->data : NULL;
}

gr_code rt_tensor_like(const ir_type *ty, gr_tensor **out, gr_status *st)
{
    *out = gr_tensor_new((gr_dtype)ty->dtype, ty->rank, ty->dim);
    if (*out) return GR_OK;
    return rt_fail(st, GR_ERR_NOMEM, "cannot allocate a %zu-byte tensor\n", ir_nbytes(ty));
}

/* The type of an input, a variable or a named tensor (a group's value's),
 * or NULL. */
static const ir_type *named_type(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (strcmp(g->inputs[i].name, name) == 0) return &g->inputs[i].type;
    int v = ir_find_var(g, name);
    if (v >= 0) return &g->vars[v].type;
    int k = ir_find_name(g, name);
    return k >= 0 ? &g->nodes[ir_value_node(g, g->names[k].node)].type : NULL;
}

gr_code gr_program_tensor(const gr_program *p, const char *name, gr_tensor **out, gr_status *st)
{
    if (!out) return rt_null(st, "gr_program_tensor", "out");
    *out = NULL;
    if (!p || !name) return rt_null(st, "gr_program_tensor", p ? "name" : "program");
    const ir_type *ty = named_type(p->g, name);
    if (!ty) return rt_fail(st, GR_ERR_ARG, "no input, variable or tensor named '%s'\n", name);
    gr_code c = rt_tensor_like(ty, out, st);
    if (c == GR_OK) rt_ok(st);
    return c;
}

int gr_program_variable_count(const gr_program *p)
{
    return p ? p->g->n_vars : 0;
}

const char *gr_program_variable_name(const gr_program *p, int k)
{
    return p && k >= 0 && k < p->g->n_vars ? p->g->vars[k].name : NULL;
}
