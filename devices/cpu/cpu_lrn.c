/* cpu_lrn.c - LRN and LRN_GRAD, local response normalisation across the
 * channels (axis 1) of [N, C, S...], s the positions of a channel: at
 * channel k, with the channels j in [k - r, k + r] inside [0, C),
 *   s_k = bias + alpha * sum_j x_j^2,   y_k = x_k * s_k^-beta
 * (TF's local_response_normalization, across C instead of the last axis),
 * and its gradient
 *   dx_k = dy_k s_k^-beta - 2 alpha beta x_k sum_j dy_j x_j s_j^-beta / s_j.
 * Sums run over j upwards, as devices/cuda/k_norm.cu's.  Every loop runs
 * over a block of OP_LRN_CHUNK contiguous positions and vectorises,
 * s^-beta included (lrn_pow): libm's powf, a call per element, took half
 * of the time. */
#include <float.h>

/* No floating-point exception flags are read: cpu_exp_vec's clamps can be
 * vector blends instead of branches. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "cpu_impl.h"

/* The channels [*j0, *j1] of channel k's window. */
static void lrn_window(const cpu_lrn_args *l, int64_t k, int64_t *j0, int64_t *j1)
{
    *j0 = k - l->r > 0 ? k - l->r : 0;
    *j1 = k + l->r < l->c - 1 ? k + l->r : l->c - 1;
}

/* For a normal positive s, s = 2^E m with m in [sqrt(1/2), sqrt(2)):
 * returns E and sets *lnm = ln m = 2 atanh(u), u = (m - 1) / (m + 1),
 * |u| < 0.172, by its odd series to u^9 (truncation below 1e-9); straight-
 * line code that vectorises. */
static inline float lrn_split(float s, float *lnm)
{
    uint32_t bits, mbits; /* unsigned: no overflow for other s (unused then) */
    memcpy(&bits, &s, sizeof bits);
    int32_t e = (int32_t)(bits - 0x3f3504f3u) >> 23; /* 0x3f3504f3: sqrt(1/2) */
    mbits = bits - (uint32_t)e * (1u << 23);
    float m, u, u2, p = 1.0f / 9;
    memcpy(&m, &mbits, sizeof m);
    u = (m - 1.0f) / (m + 1.0f), u2 = u * u;
    p = p * u2 + 1.0f / 7;
    p = p * u2 + 1.0f / 5;
    p = p * u2 + 1.0f / 3;
    p = p * u2 + 1.0f;
    *lnm = 2.0f * u * p;
    return (float)e;
}

/* e[q] = s^-beta, s = bias + alpha * sum[q], for q < n, as
 * 2^-beta E e^-beta ln m (lrn_split), with -beta E = N + f, N an integer,
 * |f| <= 1/2, and the product's rounding error kept (an fma): the exponent
 * left for cpu_exp_vec is small, so the result is within 2e-7 of s^-beta
 * relative whatever s is (e^(-beta ln s) in floats lost ulps in proportion
 * to |ln s|).  When an s is not a normal float (0, denormal, inf, NaN) or
 * 2^N or the exponent is out of range, the whole block is powf's. */
static void lrn_pow(const cpu_lrn_args *l, float *restrict e, const float *restrict sum, int64_t n)
{
    int bad = 0;
    for (int64_t q = 0; q < n; q++) {
        float s = l->bias + l->alpha * sum[q], lnm, ex = lrn_split(s, &lnm);
        float pw = -l->beta * ex, pw_lo = fmaf(-l->beta, ex, -pw);
        float whole = (pw + 0x1.8p23f) - 0x1.8p23f; /* round to nearest */
        float a = (pw - whole + pw_lo) * 0.693147180559945309f - l->beta * lnm;
        float in = whole <= 127.0f ? whole : 127.0f; /* 2^in a normal float */
        in = in >= -126.0f ? in : -126.0f;
        bad |= !(s >= FLT_MIN && s <= FLT_MAX && in == whole && a >= -87.0f && a <= 80.0f);
        int32_t bits = ((int32_t)in + 127) << 23;
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        e[q] = cpu_exp_vec(a) * scale;
    }
    if (bad)
        for (int64_t q = 0; q < n; q++) e[q] = powf(l->bias + l->alpha * sum[q], -l->beta);
}

/* acc[q] = the sum of v_j[q]^2 over the channels j in [j0, j1], v_j = v +
 * j * s, for q < n. */
static void lrn_sum_sq(float *restrict acc, const float *v, int64_t j0, int64_t j1, int64_t s,
                       int64_t n)
{
    for (int64_t q = 0; q < n; q++) acc[q] = 0.0f;
    for (int64_t j = j0; j <= j1; j++) {
        const float *restrict vj = v + j * s;
        for (int64_t q = 0; q < n; q++) acc[q] += vj[q] * vj[q];
    }
}

/* Planes (image, channel) [lo, hi) of y = x * s^-beta, OP_LRN_CHUNK
 * positions at a time. */
static void lrn_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lrn_args *l = vctx;
    int64_t c = l->c, s = l->s, j0, j1;
    for (int64_t plane = lo; plane < hi; plane++) {
        int64_t k = plane % c;
        const float *img = l->x + (plane - k) * s, *restrict xk = l->x + plane * s;
        float *restrict y = l->out + plane * s;
        lrn_window(l, k, &j0, &j1);
        for (int64_t p0 = 0; p0 < s; p0 += OP_LRN_CHUNK) {
            int64_t np = s - p0 < OP_LRN_CHUNK ? s - p0 : OP_LRN_CHUNK;
            float sum[OP_LRN_CHUNK], e[OP_LRN_CHUNK];
            lrn_sum_sq(sum, img + p0, j0, j1, s, np);
            lrn_pow(l, e, sum, np);
            for (int64_t q = 0; q < np; q++) y[p0 + q] = xk[p0 + q] * e[q];
        }
    }
}

void cpu_lrn(cpu_pool *p, const cpu_lrn_args *l)
{
    int64_t per = l->s * (2 * l->r + 2);
    if (l->s > 0)
        cpu_par_range(p, l->n * l->c, CPU_PAR_MIN / (per > 0 ? per : 1) + 1, lrn_range, (void *)l);
}

typedef struct lrn_grad_ctx {
    const cpu_lrn_args *l;
    int64_t jobs, chunks; /* jobs: images x chunks of OP_LRN_CHUNK positions */
    int ntasks;
} lrn_grad_ctx;

/* One image's positions [p0, p0 + np): e (s^-beta) and t (dy x s^-beta / s)
 * of every channel in the task's scratch, then dx. */
static void lrn_grad_job(const cpu_lrn_args *l, int64_t img, int64_t p0, int64_t np, float *e,
                         float *t)
{
    int64_t c = l->c, s = l->s, q, j0, j1;
    const float *x = l->x + img * c * s + p0, *dy = l->dy + img * c * s + p0;
    float *dx = l->out + img * c * s + p0, k2 = 2.0f * l->alpha * l->beta;
    for (int64_t k = 0; k < c; k++) {
        float *restrict tk = t + k * OP_LRN_CHUNK, *restrict ek = e + k * OP_LRN_CHUNK;
        const float *restrict xk = x + k * s, *restrict dyk = dy + k * s;
        lrn_window(l, k, &j0, &j1);
        lrn_sum_sq(tk, x, j0, j1, s, np);
        lrn_pow(l, ek, tk, np);
        for (q = 0; q < np; q++) tk[q] = dyk[q] * xk[q] * ek[q] / (l->bias + l->alpha * tk[q]);
    }
    for (int64_t k = 0; k < c; k++) {
        const float *restrict xk = x + k * s, *restrict dyk = dy + k * s;
        const float *restrict ek = e + k * OP_LRN_CHUNK;
        float *restrict dxk = dx + k * s, acc[OP_LRN_CHUNK] = {0};
        lrn_window(l, k, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++)
            for (q = 0; q < np; q++) acc[q] += t[j * OP_LRN_CHUNK + q];
        for (q = 0; q < np; q++) dxk[q] = dyk[q] * ek[q] - k2 * xk[q] * acc[q];
    }
}
static void lrn_grad_task(void *vctx, int task)
{
    const lrn_grad_ctx *g = vctx;
    const cpu_lrn_args *l = g->l;
    float *e = (float *)((char *)l->scratch + (size_t)task * l->task_bytes);
    float *t = e + l->c * OP_LRN_CHUNK;
    int64_t lo = g->jobs * task / g->ntasks, hi = g->jobs * (task + 1) / g->ntasks;
    for (int64_t job = lo; job < hi; job++) {
        int64_t img = job / g->chunks, p0 = job % g->chunks * OP_LRN_CHUNK;
        lrn_grad_job(l, img, p0, l->s - p0 < OP_LRN_CHUNK ? l->s - p0 : OP_LRN_CHUNK, e, t);
    }
}

void cpu_lrn_grad(cpu_pool *p, const cpu_lrn_args *l)
{
    int64_t chunks = (l->s + OP_LRN_CHUNK - 1) / OP_LRN_CHUNK, jobs = l->n * chunks;
    int64_t work = jobs * OP_LRN_CHUNK * l->c * (2 * l->r + 2), nt = work / CPU_PAR_MIN + 1;
    if (jobs <= 0 || l->c <= 0) return;
    GR_ASSERT(l->scratch && l->task_bytes >= (size_t)(2 * l->c * OP_LRN_CHUNK) * sizeof(float));
    if (nt > l->max_tasks) nt = l->max_tasks;
    if (nt > cpu_pool_size(p)) nt = cpu_pool_size(p);
    if (nt > jobs) nt = jobs;
    if (nt < 1) nt = 1;
    lrn_grad_ctx g = {l, jobs, chunks, (int)nt};
    cpu_pool_for(p, (int)nt, lrn_grad_task, &g);
}
