/* cpu_reduce.c - SUM/MEAN/MAX/ARGMAX over one axis or all, MAX_GRAD,
 * SUM_TO and BROADCAST.
 *
 * An axis reduction sees x as [outer, n, inner].  With inner > 1 the loop
 * adds whole rows of length inner (vectorises as is); with inner == 1 it is
 * a dot-like row reduction, written with 16 independent partial results so
 * that GCC can vectorise it without -ffast-math reassociation. */
#include <string.h>

#include "cpu_impl.h"

#define RED_LANES 16

void cpu_reduce_dims(const ir_type *t, int64_t axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    *n = 1;
    if (axis == OP_AXIS_ALL) {
        *n = cpu_numel(t);
        return;
    }
    for (int d = 0; d < t->rank; d++) {
        if (d < axis)
            *outer *= t->dim[d];
        else if (d == axis)
            *n = t->dim[d];
        else
            *inner *= t->dim[d];
    }
}

static float row_sum(const float *restrict x, int64_t n)
{
    float acc[RED_LANES] = {0};
    int64_t i = 0;
    for (; i + RED_LANES <= n; i += RED_LANES)
        for (int j = 0; j < RED_LANES; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < RED_LANES; j++) s += acc[j];
    return s;
}

static float row_max(const float *restrict x, int64_t n)
{
    float acc[RED_LANES];
    for (int j = 0; j < RED_LANES; j++) acc[j] = x[0];
    int64_t i = 0;
    for (; i + RED_LANES <= n; i += RED_LANES)
        for (int j = 0; j < RED_LANES; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    float m = x[0];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int j = 0; j < RED_LANES; j++) m = acc[j] > m ? acc[j] : m;
    return m;
}

static void cols_add(float *restrict o, const float *restrict x, int64_t n)
{
    for (int64_t j = 0; j < n; j++) o[j] += x[j];
}

static void cols_max(float *restrict o, const float *restrict x, int64_t n)
{
    for (int64_t j = 0; j < n; j++) o[j] = x[j] > o[j] ? x[j] : o[j];
}

static void cols_scale(float *restrict o, float s, int64_t n)
{
    for (int64_t j = 0; j < n; j++) o[j] *= s;
}

typedef struct red_ctx {
    float *out;
    const float *x;
    int64_t outer, n, inner;
    int kind; /* 0 sum, 1 mean, 2 max */
} red_ctx;

/* Reduces outer rows [o_lo, o_hi) and columns [j_lo, j_hi) of each. */
static void red_block(const red_ctx *c, int64_t o_lo, int64_t o_hi, int64_t j_lo, int64_t j_hi)
{
    float scale = c->kind == 1 ? 1.0f / (float)c->n : 1.0f;
    for (int64_t o = o_lo; o < o_hi; o++) {
        const float *x = c->x + o * c->n * c->inner;
        if (c->inner == 1) {
            c->out[o] = c->kind == 2 ? row_max(x, c->n) : row_sum(x, c->n) * scale;
            continue;
        }
        float *dst = c->out + o * c->inner + j_lo;
        int64_t w = j_hi - j_lo;
        memcpy(dst, x + j_lo, (size_t)w * sizeof *dst);
        for (int64_t k = 1; k < c->n; k++) {
            if (c->kind == 2)
                cols_max(dst, x + k * c->inner + j_lo, w);
            else
                cols_add(dst, x + k * c->inner + j_lo, w);
        }
        if (c->kind == 1) cols_scale(dst, scale, w);
    }
}

static void red_range(void *vctx, int64_t lo, int64_t hi)
{
    const red_ctx *c = vctx;
    if (c->outer > 1)
        red_block(c, lo, hi, 0, c->inner);
    else
        red_block(c, 0, 1, lo, hi);
}

static void reduce(cpu_pool *p, red_ctx *c)
{
    if (c->n == 0) { /* empty axis: sums are 0; max of nothing is left 0 too */
        memset(c->out, 0, (size_t)(c->outer * c->inner) * sizeof(float));
        return;
    }
    int64_t total = c->outer * c->n * c->inner;
    if (total < CPU_PAR_MIN || (c->outer == 1 && c->inner == 1)) {
        red_block(c, 0, c->outer, 0, c->inner);
        return;
    }
    int64_t units = c->outer > 1 ? c->outer : c->inner;
    cpu_par_range(p, units, units * CPU_PAR_MIN / total + 1, red_range, c);
}

void cpu_sum(cpu_pool *p, float *out, const float *x, int64_t outer, int64_t n, int64_t inner,
             int mean)
{
    red_ctx c = {out, x, outer, n, inner, mean ? 1 : 0};
    reduce(p, &c);
}

void cpu_max(cpu_pool *p, float *out, const float *x, int64_t outer, int64_t n, int64_t inner)
{
    red_ctx c = {out, x, outer, n, inner, 2};
    reduce(p, &c);
}

/* Strict '>' keeps the first maximum. */
void cpu_argmax(int32_t *out, const float *x, int64_t outer, int64_t n, int64_t inner)
{
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            const float *col = x + o * n * inner + j;
            int64_t best = 0;
            for (int64_t k = 1; k < n; k++)
                if (col[k * inner] > col[best * inner]) best = k;
            out[o * inner + j] = (int32_t)best;
        }
    }
}

/* dy and y have the reduced (keepdims) shape [outer, 1, inner]. */
void cpu_max_grad(float *restrict out, const float *restrict dy, const float *restrict x,
                  const float *restrict y, int64_t outer, int64_t n, int64_t inner)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *yo = y + o * inner, *dyo = dy + o * inner;
        for (int64_t k = 0; k < n; k++) {
            const float *xk = x + (o * n + k) * inner;
            float *ok = out + (o * n + k) * inner;
            for (int64_t j = 0; j < inner; j++) ok[j] = xk[j] == yo[j] ? dyo[j] : 0.0f;
        }
    }
}

/* ---- SUM_TO: the adjoint of broadcasting ---- */

typedef struct sumto_ctx {
    cpu_bcast bc;
    float *out;
    const float *x;
} sumto_ctx;

/* Walks x (contiguous, the iterator's "output") and adds into out, whose
 * strides are the iterator's "a" strides. */
static void sumto_row(void *vctx, int64_t o, int64_t ia, int64_t ib, int64_t len)
{
    (void)ib;
    const sumto_ctx *c = vctx;
    const float *restrict x = c->x + o;
    float *restrict dst = c->out + ia;
    if (c->bc.sa[c->bc.nd - 1]) {
        for (int64_t i = 0; i < len; i++) dst[i] += x[i];
    } else {
        dst[0] += row_sum(x, len);
    }
}

void cpu_sum_to(float *out, const ir_type *ot, const float *x, const ir_type *xt)
{
    sumto_ctx c = {.out = out, .x = x};
    memset(out, 0, (size_t)cpu_numel(ot) * sizeof *out);
    bcast_plan(&c.bc, xt, ot, NULL);
    cpu_bcast_walk(&c.bc, 0, cpu_numel(xt), sumto_row, &c);
}

/* ---- BROADCAST ---- */

typedef struct bcopy_ctx {
    cpu_bcast bc;
    int32_t *out;
    const int32_t *x;
} bcopy_ctx;

static void bcopy_row(void *vctx, int64_t o, int64_t ia, int64_t ib, int64_t len)
{
    (void)ib;
    const bcopy_ctx *c = vctx;
    int32_t *restrict dst = c->out + o;
    const int32_t *restrict x = c->x + ia;
    if (c->bc.sa[c->bc.nd - 1]) {
        memcpy(dst, x, (size_t)len * sizeof *dst);
    } else {
        int32_t v = x[0];
        for (int64_t i = 0; i < len; i++) dst[i] = v;
    }
}

static void bcopy_range(void *vctx, int64_t lo, int64_t hi)
{
    bcopy_ctx *c = vctx;
    cpu_bcast_walk(&c->bc, lo, hi, bcopy_row, c);
}

void cpu_broadcast(cpu_pool *p, void *out, const ir_type *ot, const void *x, const ir_type *xt)
{
    bcopy_ctx c = {.out = out, .x = x};
    bcast_plan(&c.bc, ot, xt, NULL);
    cpu_par_range(p, cpu_numel(ot), CPU_PAR_MIN, bcopy_range, &c);
}
