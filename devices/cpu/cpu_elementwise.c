/* cpu_elementwise.c - broadcasting binaries, unaries, activation gradients,
 * copies, fills, casts and dropout.  Inner loops are plain counted loops over
 * restrict pointers so GCC vectorises them at -O3. */
#include <math.h>

/* We never read errno, and with it sqrtf cannot be vectorised by GCC; nor
 * floating-point exception flags, and with them the clamps of cpu_exp_vec
 * (gelu) are branches, which keep GCC from vectorising the loop. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno", "no-trapping-math")
#endif
#include <string.h>

#include "../dropout.h"
#include "cpu_impl.h"

/* ---- the broadcasting iterator ---- */

void cpu_bcast_walk(const cpu_bcast *bc, int64_t lo, int64_t hi, cpu_row_fn fn, void *ctx)
{
    int nd = bc->nd;
    int64_t inner = bc->dim[nd - 1], c[IR_MAX_DIMS] = {0};
    int64_t rem = lo / inner, col = lo % inner;
    for (int d = nd - 2; d >= 0; d--) {
        c[d] = rem % bc->dim[d];
        rem /= bc->dim[d];
    }
    for (int64_t idx = lo; idx < hi;) {
        int64_t ia = col * bc->sa[nd - 1], ib = col * bc->sb[nd - 1];
        for (int d = 0; d < nd - 1; d++) {
            ia += c[d] * bc->sa[d];
            ib += c[d] * bc->sb[d];
        }
        int64_t len = inner - col < hi - idx ? inner - col : hi - idx;
        fn(ctx, idx, ia, ib, len);
        idx += len;
        col = 0;
        for (int d = nd - 2; d >= 0; d--) {
            if (++c[d] < bc->dim[d]) break;
            c[d] = 0;
        }
    }
}

/* ---- binary ops ----
 * One function per (op, dtype) with four loops: vector-vector, vector-scalar,
 * scalar-vector and scalar-scalar, chosen by the inner strides (0 or 1). */
#define BIN_FN(NAME, TI, TO, EXPR)                                                                 \
    static void NAME(void *restrict vo, const void *restrict vx, int va, const void *restrict vy,  \
                     int vb, int64_t n)                                                            \
    {                                                                                              \
        TO *restrict o = vo;                                                                       \
        const TI *restrict a = vx, *restrict b = vy;                                               \
        if (va && vb) {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI x = a[i], y = b[i];                                                             \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (va) {                                                                           \
            TI y = b[0];                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI x = a[i];                                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (vb) {                                                                           \
            TI x = a[0];                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI y = b[i];                                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            TI x = a[0], y = b[0];                                                                 \
            TO v = (TO)(EXPR);                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        }                                                                                          \
    }

#define ARITH_FNS(op, ef, ei)                                                                      \
    BIN_FN(op##_f32, float, float, ef)                                                             \
    BIN_FN(op##_i32, int32_t, int32_t, ei)
#define COMPARE_FNS(op, e)                                                                         \
    BIN_FN(op##_f32, float, float, e)                                                              \
    BIN_FN(op##_i32, int32_t, float, e)
#define ARITH_F32_FNS(op, ef) BIN_FN(op##_f32, float, float, ef)
CPU_ARITH(ARITH_FNS)
CPU_ARITH_F32(ARITH_F32_FNS)
CPU_COMPARE(COMPARE_FNS)

/* One row loop per (op, dtype); i32 arithmetic writes i32, the rest f32. */
typedef void (*bin_fn)(void *restrict, const void *restrict, int, const void *restrict, int,
                       int64_t);
typedef struct bin_fns {
    bin_fn f32, i32;
} bin_fns;

#define BIN_ROW(op, ...)     [OP_##op] = {op##_f32, op##_i32},
#define BIN_ROW_F32(op, ...) [OP_##op] = {op##_f32, NULL},
static const bin_fns binary_fns[OP_COUNT] = {CPU_ARITH(BIN_ROW) CPU_ARITH_F32(BIN_ROW_F32)
                                                 CPU_COMPARE(BIN_ROW)};

typedef struct bin_ctx {
    cpu_bcast bc;
    bin_fn fn;
    char *out; /* every element type is 4 bytes */
    const char *a, *b;
} bin_ctx;

static void bin_row(void *vctx, int64_t o, int64_t ia, int64_t ib, int64_t len)
{
    const bin_ctx *c = vctx;
    int nd = c->bc.nd, va = c->bc.sa[nd - 1] != 0, vb = c->bc.sb[nd - 1] != 0;
    c->fn(c->out + o * 4, c->a + ia * 4, va, c->b + ib * 4, vb, len);
}

static void bin_range(void *vctx, int64_t lo, int64_t hi)
{
    bin_ctx *c = vctx;
    cpu_bcast_walk(&c->bc, lo, hi, bin_row, c);
}

void cpu_binary(cpu_pool *p, op_kind op, void *out, const ir_type *ot, const void *a,
                const ir_type *at, const void *b, const ir_type *bt)
{
    const bin_fns *f = &binary_fns[op];
    bin_ctx c = {.fn = at->dtype == DT_I32 ? f->i32 : f->f32, .out = out, .a = a, .b = b};
    GR_ASSERT(c.fn); /* kernels.c maps only these tables' ops here (f32-only ones f32) */
    bcast_plan(&c.bc, ot, at, bt);
    cpu_par_range(p, cpu_numel(ot), CPU_PAR_MIN, bin_range, &c);
}

/* ---- unary ops and activation gradients ---- */

typedef void (*un_fn)(void *restrict o, const void *restrict x, const float *restrict y, int64_t n);

#define UNARY_FN(op, e)                                                                            \
    static void op##_f32(void *restrict vo, const void *restrict vx, const float *restrict unused, \
                         int64_t n)                                                                \
    {                                                                                              \
        float *restrict o = vo;                                                                    \
        const float *restrict xs = vx;                                                             \
        (void)unused;                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float x = xs[i];                                                                       \
            o[i] = e;                                                                              \
        }                                                                                          \
    }
#define ACT_GRAD_FN(op, e)                                                                         \
    static void op##_f32(void *restrict vo, const void *restrict vdy, const float *restrict vs,    \
                         int64_t n)                                                                \
    {                                                                                              \
        float *restrict o = vo;                                                                    \
        const float *restrict dys = vdy;                                                           \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float dy = dys[i], v = vs[i];                                                          \
            o[i] = e;                                                                              \
        }                                                                                          \
    }
CPU_UNARY(UNARY_FN)
CPU_ACT_GRAD(ACT_GRAD_FN)

/* neg is the one unary defined on i32 too (wrapping, as i32 arithmetic). */
static void neg_i32(void *restrict vo, const void *restrict vx, const float *restrict unused,
                    int64_t n)
{
    int32_t *restrict o = vo;
    const int32_t *restrict x = vx;
    (void)unused;
    for (int64_t i = 0; i < n; i++) o[i] = (int32_t)(0u - (uint32_t)x[i]);
}

#define UN_ROW(op, ...) [OP_##op] = op##_f32,
static const un_fn unary_fns[OP_COUNT] = {CPU_UNARY(UN_ROW) CPU_ACT_GRAD(UN_ROW)};

typedef struct un_ctx {
    un_fn fn;
    char *out;
    const char *x;
    const float *y; /* the activation gradients' v */
} un_ctx;

static void unary_range(void *vctx, int64_t lo, int64_t hi)
{
    const un_ctx *c = vctx;
    c->fn(c->out + lo * 4, c->x + lo * 4, c->y ? c->y + lo : NULL, hi - lo);
}

void cpu_unary(cpu_pool *p, op_kind op, ir_dtype dt, void *out, const void *x, int64_t n)
{
    un_ctx c = {dt == DT_I32 ? (op == OP_NEG ? neg_i32 : NULL) : unary_fns[op], out, x, NULL};
    GR_ASSERT(c.fn); /* kernels.c maps only CPU_UNARY ops here; shapes allow i32 for neg only */
    cpu_par_range(p, n, CPU_PAR_MIN, unary_range, &c);
}

void cpu_act_grad(cpu_pool *p, op_kind op, float *out, const float *dy, const float *v, int64_t n)
{
    un_ctx c = {unary_fns[op], (char *)out, (const char *)dy, v};
    GR_ASSERT(c.fn); /* kernels.c maps only CPU_ACT_GRAD ops here */
    cpu_par_range(p, n, CPU_PAR_MIN, unary_range, &c);
}

/* ---- where: out = cond != 0 ? a : b, 4-byte elements of either dtype ---- */

typedef struct where_ctx {
    uint32_t *out;
    const float *c;
    const uint32_t *a, *b;
} where_ctx;

static void where_range(void *vctx, int64_t lo, int64_t hi)
{
    const where_ctx *w = vctx;
    for (int64_t i = lo; i < hi; i++) w->out[i] = w->c[i] != 0.0f ? w->a[i] : w->b[i];
}

void cpu_where(cpu_pool *p, void *out, const float *c, const void *a, const void *b, int64_t n)
{
    where_ctx w = {out, c, a, b};
    cpu_par_range(p, n, CPU_PAR_MIN, where_range, &w);
}

/* ---- copies, fills and casts ---- */

typedef struct copy_ctx {
    char *out;
    const char *in;
} copy_ctx;

static void copy_range(void *vctx, int64_t lo, int64_t hi)
{
    const copy_ctx *c = vctx;
    memcpy(c->out + lo * 4, c->in + lo * 4, (size_t)(hi - lo) * 4);
}

void cpu_copy(cpu_pool *p, void *out, const void *in, int64_t n)
{
    if (out == in || n <= 0) return;
    copy_ctx c = {out, in};
    cpu_par_range(p, n, 4 * CPU_PAR_MIN, copy_range, &c);
}

void cpu_fill_f32(float *restrict out, float v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = v;
}

void cpu_relu_inplace(float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* Truncates toward zero like C, but saturates out-of-range values and maps
 * NaN to 0 instead of invoking undefined behaviour. */
void cpu_cast_f32_i32(int32_t *restrict out, const float *restrict in, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        x = x >= 2147483520.0f ? 2147483520.0f : x;
        x = x <= -2147483648.0f ? -2147483648.0f : x;
        out[i] = x == x ? (int32_t)x : 0;
    }
}

void cpu_cast_i32_f32(float *restrict out, const int32_t *restrict in, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = (float)in[i];
}

/* ---- dropout ---- */

typedef struct drop_ctx {
    float *out;
    const float *x;
    uint64_t key;
    float rate, scale;
} drop_ctx;

static void dropout_range(void *vctx, int64_t lo, int64_t hi)
{
    const drop_ctx *c = vctx;
    float *restrict o = c->out;
    const float *restrict x = c->x;
    for (int64_t i = lo; i < hi; i++) { /* a multiply by the mask: this form vectorises */
        float keep = dropout_u(c->key, i) >= c->rate ? c->scale : 0.0f;
        o[i] = x[i] * keep;
    }
}

typedef struct random_ctx {
    float *out;
    uint64_t key;
    int kind;
    float a, b;
} random_ctx;

static void random_range(void *vctx, int64_t lo, int64_t hi)
{
    const random_ctx *c = vctx;
    for (int64_t i = lo; i < hi; i++) c->out[i] = random_at(c->key, i, c->kind, c->a, c->b);
}

void cpu_random(cpu_pool *p, float *out, int64_t n, uint64_t key, int kind, float a, float b)
{
    random_ctx c = {out, key, kind, a, b};
    cpu_par_range(p, n, CPU_PAR_MIN / 4, random_range, &c);
}

void cpu_dropout(cpu_pool *p, float *out, const float *x, int64_t n, float rate, uint64_t seed,
                 uint64_t step)
{
    /* rate >= 1 drops everything; the 1/(1-rate) scale would be infinite. */
    drop_ctx c = {out, x, dropout_key(seed, step), rate, dropout_scale(rate)};
    cpu_par_range(p, n, CPU_PAR_MIN / 4, dropout_range, &c);
}
