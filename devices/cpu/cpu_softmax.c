/* cpu_softmax.c - softmax (causally masked or not), log-softmax,
 * cross-entropy and their gradients, all along the last axis (rows of
 * length c).  Every row subtracts its max before exponentiating, so logits
 * of 1e4 give finite results.  The exp loops use sm_exp, straight-line
 * code that vectorises (libm's expf, a call per element, made the char
 * GPT's softmax take 6.1 ms a step instead of 3.3); the max, sum and
 * scale loops vectorise too.
 * A causal mask shortens each row to the entries it keeps: masked scores
 * cost nothing. */
#include <math.h>

/* No floating-point exception flags are read: the selects of sm_exp can be
 * vector blends instead of branches. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno", "no-trapping-math")
#endif

#include "cpu_impl.h"

/* e^d for d = x - max <= 0: cpu_exp_vec (within 1e-7 relative), 0 below
 * -87 (e^-87 is near the smallest normal float), and a NaN stays NaN. */
static inline float sm_exp(float d)
{
    float e = cpu_exp_vec(d);
    e = d < -87.0f ? 0.0f : e;
    return d == d ? e : d;
}

static float sm_row_max(const float *restrict x, int64_t c)
{
    float acc[8];
    for (int j = 0; j < 8; j++) acc[j] = x[0];
    int64_t i = 0;
    for (; i + 8 <= c; i += 8)
        for (int j = 0; j < 8; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    float m = x[0];
    for (; i < c; i++) m = x[i] > m ? x[i] : m;
    for (int j = 0; j < 8; j++) m = acc[j] > m ? acc[j] : m;
    return m;
}

/* o = exp(x - m); returns the sum. */
static float sm_row_exp(float *restrict o, const float *restrict x, float m, int64_t c)
{
    for (int64_t i = 0; i < c; i++) o[i] = sm_exp(x[i] - m);
    return cpu_row_sum(o, c);
}

static void sm_row(float *restrict o, const float *restrict x, int64_t c, int log)
{
    float m = sm_row_max(x, c);
    float s = sm_row_exp(o, x, m, c);
    if (log) {
        /* (x - m) - log(s), not x - (m + log(s)): at |m| = 1e4 the sum
         * would round log(s) to m's ulp, 1e-3 */
        float ls = logf(s);
        for (int64_t i = 0; i < c; i++) o[i] = (x[i] - m) - ls;
    } else {
        float inv = 1.0f / s;
        for (int64_t i = 0; i < c; i++) o[i] *= inv;
    }
}

/* softmax: y*(dy - <dy,y>); log-softmax: dy - exp(y)*sum(dy). */
static void sm_grad_row(float *restrict o, const float *restrict dy, const float *restrict y,
                        int64_t c, int log)
{
    if (log) {
        float s = cpu_row_sum(dy, c);
        for (int64_t i = 0; i < c; i++) o[i] = sm_exp(y[i]);
        for (int64_t i = 0; i < c; i++) o[i] = dy[i] - o[i] * s;
    } else {
        float d = cpu_row_dot(dy, y, c);
        for (int64_t i = 0; i < c; i++) o[i] = y[i] * (dy[i] - d);
    }
}

typedef struct sm_ctx {
    float *out;
    const float *x, *y, *dy;
    const int32_t *labels;
    int64_t c;
    int log;
} sm_ctx;

static void sm_range(void *vctx, int64_t lo, int64_t hi)
{
    const sm_ctx *s = vctx;
    for (int64_t r = lo; r < hi; r++) sm_row(s->out + r * s->c, s->x + r * s->c, s->c, s->log);
}

static void sm_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const sm_ctx *s = vctx;
    for (int64_t r = lo; r < hi; r++)
        sm_grad_row(s->out + r * s->c, s->dy + r * s->c, s->y + r * s->c, s->c, s->log);
}

/* Causal: row r of a [c, c] block keeps its first r % c + 1 entries; the
 * others are 0 in the output and in its gradient. */
static void sm_causal_range(void *vctx, int64_t lo, int64_t hi)
{
    const sm_ctx *s = vctx;
    for (int64_t r = lo; r < hi; r++) {
        float *o = s->out + r * s->c;
        int64_t kept = r % s->c + 1;
        sm_row(o, s->x + r * s->c, kept, 0);
        cpu_fill_f32(o + kept, 0.0f, s->c - kept);
    }
}

static void sm_causal_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const sm_ctx *s = vctx;
    for (int64_t r = lo; r < hi; r++) {
        float *o = s->out + r * s->c;
        int64_t kept = r % s->c + 1;
        sm_grad_row(o, s->dy + r * s->c, s->y + r * s->c, kept, 0);
        cpu_fill_f32(o + kept, 0.0f, s->c - kept);
    }
}

static int64_t sm_grain(int64_t c)
{
    return CPU_PAR_MIN / (c > 0 ? c : 1) + 1;
}

void cpu_softmax(cpu_pool *p, float *out, const float *x, int64_t rows, int64_t c, int log,
                 int causal)
{
    if (c <= 0) return;
    sm_ctx s = {.out = out, .x = x, .c = c, .log = log};
    cpu_par_range(p, rows, sm_grain(c), causal ? sm_causal_range : sm_range, &s);
}

void cpu_softmax_grad(cpu_pool *p, float *out, const float *dy, const float *y, int64_t rows,
                      int64_t c, int log, int causal)
{
    if (c <= 0) return;
    sm_ctx s = {.out = out, .dy = dy, .y = y, .c = c, .log = log};
    cpu_par_range(p, rows, sm_grain(c), causal ? sm_causal_grad_range : sm_grad_range, &s);
}

/* A label outside [0, c) contributes the plain log-sum-exp (no target term),
 * rather than reading out of bounds. */
static int label_ok(int32_t l, int64_t c)
{
    return l >= 0 && l < c;
}

void cpu_xent(float *out, const float *logits, const int32_t *labels, int64_t rows, int64_t c)
{
    float tmp[256];
    for (int64_t r = 0; r < rows; r++) {
        const float *x = logits + r * c;
        float m = sm_row_max(x, c), s = 0.0f;
        if (c <= 256) {
            s = sm_row_exp(tmp, x, m, c);
        } else { /* too long for the stack buffer: plain two-pass loop */
            for (int64_t i = 0; i < c; i++) s += sm_exp(x[i] - m);
        }
        /* (m - x[label]) + log(s): m + log(s) would round log(s) to m's ulp */
        out[r] = (label_ok(labels[r], c) ? m - x[labels[r]] : m) + logf(s);
    }
}

static void xent_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const sm_ctx *s = vctx;
    for (int64_t r = lo; r < hi; r++) {
        float *o = s->out + r * s->c;
        sm_row(o, s->x + r * s->c, s->c, 0);
        float g = s->dy[r];
        if (label_ok(s->labels[r], s->c)) o[s->labels[r]] -= 1.0f;
        for (int64_t i = 0; i < s->c; i++) o[i] *= g;
    }
}

void cpu_xent_grad(cpu_pool *p, float *out, const float *logits, const int32_t *labels,
                   const float *dy, int64_t rows, int64_t c)
{
    if (c <= 0) return;
    sm_ctx s = {.out = out, .x = logits, .dy = dy, .labels = labels, .c = c};
    cpu_par_range(p, rows, sm_grain(c), xent_grad_range, &s);
}

float cpu_mse(const float *restrict pred, const float *restrict target, int64_t n)
{
    if (n <= 0) return 0.0f;
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float d = pred[i + j] - target[i + j];
            acc[j] += d * d;
        }
    float s = 0.0f;
    for (; i < n; i++) s += (pred[i] - target[i]) * (pred[i] - target[i]);
    for (int j = 0; j < 8; j++) s += acc[j];
    return s / (float)n;
}
