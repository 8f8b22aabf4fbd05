/* cpu_elementwise.c - broadcasting binaries, unaries, activation gradients,
 * casts, fills and dropout.  Inner loops are plain counted loops over
 * restrict pointers so GCC vectorises them at -O3. */
#include <math.h>

/* We never read errno, and with it sqrtf cannot be vectorised by GCC. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno")
#endif
#include <string.h>

#include "cpu_impl.h"

/* ---- the broadcasting iterator ---- */

static void bc_strides(const ir_type *out, const ir_type *t, int64_t *s)
{
    int r = out->rank, off = r - t->rank;
    int64_t st = 1;
    for (int d = r - 1; d >= 0; d--) {
        int td = d - off;
        int64_t dim = td >= 0 ? t->dim[td] : 1;
        s[d] = (dim == 1) ? 0 : st;
        st *= dim;
    }
}

/* Merges axis d into the kept axis k when every operand walks them as one. */
static int bc_mergeable(const cpu_bcast *bc, int k, const int64_t *sa, const int64_t *sb, int d,
                        int64_t dim)
{
    int ok_a = (bc->sa[k] == sa[d] * dim) || (bc->sa[k] == 0 && sa[d] == 0);
    int ok_b = (bc->sb[k] == sb[d] * dim) || (bc->sb[k] == 0 && sb[d] == 0);
    return ok_a && ok_b;
}

void cpu_bcast_init(cpu_bcast *bc, const ir_type *out, const ir_type *a, const ir_type *b)
{
    int64_t sa[IR_MAX_DIMS], sb[IR_MAX_DIMS] = {0};
    bc_strides(out, a, sa);
    if (b) bc_strides(out, b, sb);
    bc->nd = 0;
    for (int d = 0; d < out->rank; d++) {
        int64_t dim = out->dim[d];
        if (dim == 1) continue;
        int k = bc->nd - 1;
        if (k >= 0 && bc_mergeable(bc, k, sa, sb, d, dim)) {
            bc->dim[k] *= dim;
            bc->sa[k] = sa[d];
            bc->sb[k] = sb[d];
            continue;
        }
        bc->dim[bc->nd] = dim;
        bc->sa[bc->nd] = sa[d];
        bc->sb[bc->nd] = sb[d];
        bc->nd++;
    }
    if (bc->nd == 0) {
        bc->nd = 1;
        bc->dim[0] = 1;
        bc->sa[0] = bc->sb[0] = 0;
    }
}

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
    static void NAME(TO *restrict o, const TI *restrict a, int va, const TI *restrict b, int vb,   \
                     int64_t n)                                                                    \
    {                                                                                              \
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

/* i32 division: x/0 and INT_MIN/-1 trap on x86, so define them as 0 / wrap. */
static inline int32_t div_i32(int32_t x, int32_t y)
{
    if (y == 0) return 0;
    if (y == -1) return (int32_t)(0u - (uint32_t)x);
    return x / y;
}

BIN_FN(add_f32, float, float, x + y)
BIN_FN(sub_f32, float, float, x - y)
BIN_FN(mul_f32, float, float, x *y)
BIN_FN(div_f32, float, float, x / y)
BIN_FN(add_i32, int32_t, int32_t, (int32_t)((uint32_t)x + (uint32_t)y))
BIN_FN(sub_i32, int32_t, int32_t, (int32_t)((uint32_t)x - (uint32_t)y))
BIN_FN(mul_i32, int32_t, int32_t, (int32_t)((uint32_t)x *(uint32_t)y))
BIN_FN(div_i32s, int32_t, int32_t, div_i32(x, y))
BIN_FN(eq_f32, float, float, x == y)
BIN_FN(ne_f32, float, float, x != y)
BIN_FN(lt_f32, float, float, x < y)
BIN_FN(gt_f32, float, float, x > y)
BIN_FN(le_f32, float, float, x <= y)
BIN_FN(ge_f32, float, float, x >= y)
BIN_FN(eq_i32, int32_t, float, x == y)
BIN_FN(ne_i32, int32_t, float, x != y)
BIN_FN(lt_i32, int32_t, float, x < y)
BIN_FN(gt_i32, int32_t, float, x > y)
BIN_FN(le_i32, int32_t, float, x <= y)
BIN_FN(ge_i32, int32_t, float, x >= y)

typedef void (*bin_f32_fn)(float *restrict, const float *restrict, int, const float *restrict, int,
                           int64_t);
typedef void (*cmp_i32_fn)(float *restrict, const int32_t *restrict, int, const int32_t *restrict,
                           int, int64_t);
typedef void (*bin_i32_fn)(int32_t *restrict, const int32_t *restrict, int, const int32_t *restrict,
                           int, int64_t);

typedef struct bin_ctx {
    cpu_bcast bc;
    op_kind op;
    ir_dtype dt;
    void *out;
    const void *a, *b;
} bin_ctx;

static bin_f32_fn bin_pick_f32(op_kind op)
{
    switch (op) {
    case OP_ADD:
        return add_f32;
    case OP_SUB:
        return sub_f32;
    case OP_MUL:
        return mul_f32;
    case OP_DIV:
        return div_f32;
    case OP_EQ:
        return eq_f32;
    case OP_NE:
        return ne_f32;
    case OP_LT:
        return lt_f32;
    case OP_GT:
        return gt_f32;
    case OP_LE:
        return le_f32;
    default:
        return ge_f32;
    }
}

static cmp_i32_fn cmp_pick_i32(op_kind op)
{
    switch (op) {
    case OP_EQ:
        return eq_i32;
    case OP_NE:
        return ne_i32;
    case OP_LT:
        return lt_i32;
    case OP_GT:
        return gt_i32;
    case OP_LE:
        return le_i32;
    default:
        return ge_i32;
    }
}

static bin_i32_fn bin_pick_i32(op_kind op)
{
    switch (op) {
    case OP_ADD:
        return add_i32;
    case OP_SUB:
        return sub_i32;
    case OP_MUL:
        return mul_i32;
    default:
        return div_i32s;
    }
}

static void bin_row(void *vctx, int64_t o, int64_t ia, int64_t ib, int64_t len)
{
    const bin_ctx *c = vctx;
    int nd = c->bc.nd, va = c->bc.sa[nd - 1] != 0, vb = c->bc.sb[nd - 1] != 0;
    if (c->dt == DT_F32) {
        bin_pick_f32(c->op)((float *)c->out + o, (const float *)c->a + ia, va,
                            (const float *)c->b + ib, vb, len);
    } else if (c->op >= OP_EQ && c->op <= OP_GE) {
        cmp_pick_i32(c->op)((float *)c->out + o, (const int32_t *)c->a + ia, va,
                            (const int32_t *)c->b + ib, vb, len);
    } else {
        bin_pick_i32(c->op)((int32_t *)c->out + o, (const int32_t *)c->a + ia, va,
                            (const int32_t *)c->b + ib, vb, len);
    }
}

static void bin_range(void *vctx, int64_t lo, int64_t hi)
{
    bin_ctx *c = vctx;
    cpu_bcast_walk(&c->bc, lo, hi, bin_row, c);
}

void cpu_binary(cpu_pool *p, op_kind op, void *out, const ir_type *ot, const void *a,
                const ir_type *at, const void *b, const ir_type *bt)
{
    bin_ctx c = {.op = op, .dt = at->dtype, .out = out, .a = a, .b = b};
    cpu_bcast_init(&c.bc, ot, at, bt);
    cpu_par_range(p, cpu_numel(ot), CPU_PAR_MIN, bin_range, &c);
}

/* ---- unary ops ---- */

typedef struct un_ctx {
    op_kind op;
    float *out;
    const float *x, *y; /* y: second operand of the activation gradients */
} un_ctx;

static void unary_loop(op_kind op, float *restrict o, const float *restrict x, int64_t n)
{
    switch (op) {
    case OP_NEG:
        for (int64_t i = 0; i < n; i++) o[i] = -x[i];
        break;
    case OP_EXP:
        for (int64_t i = 0; i < n; i++) o[i] = expf(x[i]);
        break;
    case OP_LOG:
        for (int64_t i = 0; i < n; i++) o[i] = logf(x[i]);
        break;
    case OP_SQRT:
        for (int64_t i = 0; i < n; i++) o[i] = sqrtf(x[i]);
        break;
    case OP_RELU:
        for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case OP_SIGMOID:
        for (int64_t i = 0; i < n; i++) o[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case OP_TANH:
        for (int64_t i = 0; i < n; i++) o[i] = tanhf(x[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++) o[i] = x[i];
        break;
    }
}

static void unary_range(void *vctx, int64_t lo, int64_t hi)
{
    const un_ctx *c = vctx;
    unary_loop(c->op, c->out + lo, c->x + lo, hi - lo);
}

void cpu_unary(cpu_pool *p, op_kind op, float *out, const float *x, int64_t n)
{
    un_ctx c = {op, out, x, NULL};
    cpu_par_range(p, n, CPU_PAR_MIN, unary_range, &c);
}

static void act_grad_loop(op_kind op, float *restrict o, const float *restrict dy,
                          const float *restrict v, int64_t n)
{
    switch (op) {
    case OP_RELU_GRAD:
        for (int64_t i = 0; i < n; i++) o[i] = v[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case OP_SIGMOID_GRAD:
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * v[i] * (1.0f - v[i]);
        break;
    default: /* OP_TANH_GRAD */
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * (1.0f - v[i] * v[i]);
        break;
    }
}

static void act_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const un_ctx *c = vctx;
    act_grad_loop(c->op, c->out + lo, c->x + lo, c->y + lo, hi - lo);
}

void cpu_act_grad(cpu_pool *p, op_kind op, float *out, const float *dy, const float *v, int64_t n)
{
    un_ctx c = {op, out, dy, v};
    cpu_par_range(p, n, CPU_PAR_MIN, act_grad_range, &c);
}

/* ---- copies, fills, casts ---- */

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

void cpu_fill_i32(int32_t *restrict out, int32_t v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = v;
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

static inline uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counter-based: element i's uniform in [0,1) from (seed, step, i) alone. */
static inline float dropout_u(uint64_t key, int64_t i)
{
    return (float)(splitmix64(key ^ (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
}

static inline uint64_t dropout_key(uint64_t seed, uint64_t step)
{
    return splitmix64(seed ^ (step * 0xd1b54a32d192ed03ull));
}

int cpu_dropout_keep(uint64_t seed, uint64_t step, int64_t i, float rate)
{
    return dropout_u(dropout_key(seed, step), i) >= rate;
}

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
    for (int64_t i = lo; i < hi; i++)
        o[i] = dropout_u(c->key, i) >= c->rate ? x[i] * c->scale : 0.0f;
}

void cpu_dropout(cpu_pool *p, float *out, const float *x, int64_t n, float rate, uint64_t seed,
                 uint64_t step)
{
    /* rate >= 1 drops everything; the 1/(1-rate) scale would be infinite. */
    drop_ctx c = {out, x, dropout_key(seed, step), rate, rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f};
    cpu_par_range(p, n, CPU_PAR_MIN / 4, dropout_range, &c);
}
