/* cpu_norm.c - LAYERNORM and its two gradients, and RMSNORM and its dx,
 * along the last axis (rows of
 * length c): y = (x - mean) * rstd * gain + bias with rstd = 1 / sqrt(var +
 * eps) and var the biased variance, as GPT-2 and PyTorch.  The gradients
 * recompute each row's mean and rstd from x (compiler/ops_grad.c says why).
 * Sums over a row keep 8 partial sums so they vectorise. */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

/* One row's mean and rstd; c >= 1.  rms: the mean is taken as 0, so v is
 * the mean of the squares (rmsnorm). */
static void ln_stats(const float *restrict x, int64_t c, float eps, int rms, float *mean,
                     float *rstd)
{
    float m = rms ? 0.0f : cpu_row_sum(x, c) / (float)c, acc[8] = {0}, v = 0.0f;
    int64_t i = 0;
    for (; i + 8 <= c; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (x[i + j] - m) * (x[i + j] - m);
    for (; i < c; i++) v += (x[i] - m) * (x[i] - m);
    for (int j = 0; j < 8; j++) v += acc[j];
    *mean = m;
    *rstd = 1.0f / sqrtf(v / (float)c + eps);
}

static void ln_row(const cpu_norm_args *n, int64_t r)
{
    const float *restrict x = n->x + r * n->c, *restrict g = n->gain, *restrict b = n->bias;
    float *restrict y = n->out + r * n->c, m, rs;
    ln_stats(x, n->c, n->eps, n->rms, &m, &rs);
    if (n->rms)
        for (int64_t i = 0; i < n->c; i++) y[i] = x[i] * rs * g[i];
    else
        for (int64_t i = 0; i < n->c; i++) y[i] = (x[i] - m) * rs * g[i] + b[i];
}

/* With xhat = (x - mean) * rstd and d = gain * dy:
 * dx = rstd * (d - mean(d) - xhat * mean(d * xhat)); rms: without mean(d)
 * (x is not centred, so nothing of it is subtracted). */
static void ln_grad_row(const cpu_norm_args *n, int64_t r)
{
    int64_t c = n->c, i = 0;
    const float *restrict x = n->x + r * c, *restrict dy = n->dy + r * c, *restrict g = n->gain;
    float *restrict dx = n->out + r * c, m, rs, s1[8] = {0}, s2[8] = {0}, d1 = 0.0f, d2 = 0.0f;
    ln_stats(x, c, n->eps, n->rms, &m, &rs);
    for (; i + 8 <= c; i += 8)
        for (int j = 0; j < 8; j++) {
            float d = g[i + j] * dy[i + j];
            s1[j] += d;
            s2[j] += d * (x[i + j] - m) * rs;
        }
    for (; i < c; i++) {
        d1 += g[i] * dy[i];
        d2 += g[i] * dy[i] * (x[i] - m) * rs;
    }
    for (int j = 0; j < 8; j++) d1 += s1[j], d2 += s2[j];
    d1 = n->rms ? 0.0f : d1 / (float)c;
    d2 /= (float)c;
    for (i = 0; i < c; i++) dx[i] = rs * (g[i] * dy[i] - d1 - (x[i] - m) * rs * d2);
}

static void ln_range(void *vctx, int64_t lo, int64_t hi)
{
    for (int64_t r = lo; r < hi; r++) ln_row(vctx, r);
}

static void ln_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    for (int64_t r = lo; r < hi; r++) ln_grad_row(vctx, r);
}

void cpu_layernorm(cpu_pool *p, const cpu_norm_args *n)
{
    if (n->c > 0) cpu_par_range(p, n->rows, CPU_PAR_MIN / n->c + 1, ln_range, (void *)n);
}

void cpu_layernorm_grad(cpu_pool *p, const cpu_norm_args *n)
{
    if (n->c > 0) cpu_par_range(p, n->rows, CPU_PAR_MIN / n->c + 1, ln_grad_range, (void *)n);
}

/* ---- dgain and dbias: sums over rows, a partial sum per task ---- */

typedef struct ln_params_ctx {
    const cpu_norm_args *n;
    int ntasks;
} ln_params_ctx;

/* Task t sums its rows into out (t = 0) or its scratch slice. */
static float *ln_part(const cpu_norm_args *n, int t)
{
    return t ? (float *)((char *)n->scratch + (size_t)t * n->task_bytes) : n->out;
}

static void ln_params_task(void *vctx, int t)
{
    const ln_params_ctx *x = vctx;
    const cpu_norm_args *n = x->n;
    int64_t c = n->c, lo = n->rows * t / x->ntasks, hi = n->rows * (t + 1) / x->ntasks;
    float *restrict dg = ln_part(n, t), *restrict db = dg + c;
    cpu_fill_f32(dg, 0.0f, 2 * c);
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict xr = n->x + r * c, *restrict dy = n->dy + r * c;
        float m, rs;
        ln_stats(xr, c, n->eps, 0, &m, &rs);
        for (int64_t i = 0; i < c; i++) {
            dg[i] += dy[i] * (xr[i] - m) * rs;
            db[i] += dy[i];
        }
    }
}

void cpu_layernorm_grad_params(cpu_pool *p, const cpu_norm_args *n)
{
    int64_t c = n->c, nt = n->rows * c / CPU_PAR_MIN;
    if (c <= 0) return;
    if (nt > n->max_tasks) nt = n->max_tasks;
    if (nt > cpu_pool_size(p)) nt = cpu_pool_size(p);
    if (nt < 1 || !n->scratch) nt = 1;
    ln_params_ctx x = {n, (int)nt};
    cpu_pool_for(p, (int)nt, ln_params_task, &x);
    for (int t = 1; t < nt; t++) {
        const float *restrict part = ln_part(n, t);
        for (int64_t i = 0; i < 2 * c; i++) n->out[i] += part[i];
    }
}

/* ---- batch normalisation: x as [n, c, s], statistics per channel ----
 * Channel ch is n runs of s contiguous floats (s = H*W, or 1 for [N,C]).
 * Tasks take ranges of channels and walk them in blocks of BN_BLOCK: with
 * s = 1 a row's block is contiguous and its loop vectorises across the
 * channels; otherwise each run is summed with 8 float partials.  The runs'
 * sums are added in double, and the variance is a second pass about the
 * mean, so neither a large mean nor a large batch loses the variance. */
enum { BN_BLOCK = 64 };

enum bn_sum_kind { BN_SUM, BN_SQDEV, BN_PARAMS };

typedef struct bn_block {
    int64_t lo, nc;                              /* channels [lo, lo + nc) */
    double s0[BN_BLOCK], s1[BN_BLOCK];           /* the sums of the pass */
    float m[BN_BLOCK], rs[BN_BLOCK];             /* mean, 1 / sqrt(var + eps) */
    float p[BN_BLOCK], q[BN_BLOCK], r[BN_BLOCK]; /* out = p (x - m) + q dy + r */
} bn_block;

static float run_sqdev(const float *restrict x, int64_t s, float m)
{
    float acc[8] = {0}, v = 0.0f;
    int64_t i = 0;
    for (; i + 8 <= s; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (x[i + j] - m) * (x[i + j] - m);
    for (; i < s; i++) v += (x[i] - m) * (x[i] - m);
    for (int j = 0; j < 8; j++) v += acc[j];
    return v;
}

/* The helpers a fused relu_grad's y reaches are inlined into bn_sum and
 * bn_affine, each built twice, for y NULL and not: no loop tests y. */
#define BN_INLINE static inline __attribute__((always_inline))

/* dy[k], or 0 where a fused relu_grad's y[k] is not > 0 (y NULL: none). */
BN_INLINE float bn_dy(const float *restrict dy, const float *restrict y, int64_t k)
{
    float g = dy[k]; /* read either way: the select needs no branch */
    return y && !(y[k] > 0.0f) ? 0.0f : g;
}

/* A run's sum of dy (x - m), dy by bn_dy. */
BN_INLINE float run_dotdev(const float *restrict dy, const float *restrict y,
                           const float *restrict x, int64_t s, float m)
{
    float acc[8] = {0}, v = 0.0f;
    int64_t i = 0;
    for (; i + 8 <= s; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += bn_dy(dy, y, i + j) * (x[i + j] - m);
    for (; i < s; i++) v += bn_dy(dy, y, i) * (x[i] - m);
    for (int j = 0; j < 8; j++) v += acc[j];
    return v;
}

/* A run's sum of dy by bn_dy, in cpu_row_sum's order. */
BN_INLINE float run_dysum(const float *restrict dy, const float *restrict y, int64_t s)
{
    float acc[8] = {0}, v = 0.0f;
    int64_t i = 0;
    for (; i + 8 <= s; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += bn_dy(dy, y, i + j);
    for (; i < s; i++) v += bn_dy(dy, y, i);
    for (int j = 0; j < 8; j++) v += acc[j];
    return v;
}

/* One row of the block with s = 1: element j is channel lo + j. */
BN_INLINE void bn_sum_row(bn_block *b, int kind, const float *restrict x, const float *restrict dy,
                          const float *restrict y)
{
    double *restrict s0 = b->s0, *restrict s1 = b->s1;
    const float *restrict m = b->m;
    if (kind == BN_SUM)
        for (int64_t j = 0; j < b->nc; j++) s0[j] += x[j];
    else if (kind == BN_SQDEV)
        for (int64_t j = 0; j < b->nc; j++) s0[j] += (x[j] - m[j]) * (x[j] - m[j]);
    else
        for (int64_t j = 0; j < b->nc; j++) {
            float g = bn_dy(dy, y, j);
            s0[j] += g * (x[j] - m[j]);
            s1[j] += g;
        }
}

/* One sample's runs of the block's channels. */
BN_INLINE void bn_sum_runs(bn_block *b, int kind, const float *x, const float *dy, const float *y,
                           int64_t s)
{
    for (int64_t j = 0; j < b->nc; j++) {
        const float *xr = x + j * s;
        if (kind == BN_SUM)
            b->s0[j] += cpu_row_sum(xr, s);
        else if (kind == BN_SQDEV)
            b->s0[j] += run_sqdev(xr, s, b->m[j]);
        else {
            const float *dr = dy + j * s, *yr = y ? y + j * s : NULL;
            b->s0[j] += run_dotdev(dr, yr, xr, s, b->m[j]);
            b->s1[j] += run_dysum(dr, yr, s);
        }
    }
}

/* The sums of the pass into b->s0 (and s1), dy masked by ym (a->y or NULL). */
BN_INLINE void bn_sum_masked(const cpu_bn_args *a, bn_block *b, int kind, const float *ym)
{
    memset(b->s0, 0, sizeof b->s0);
    memset(b->s1, 0, sizeof b->s1);
    for (int64_t i = 0; i < a->n; i++) {
        int64_t off = (i * a->c + b->lo) * a->s;
        const float *dy = a->dy ? a->dy + off : NULL, *y = ym ? ym + off : NULL;
        if (a->s == 1)
            bn_sum_row(b, kind, a->x + off, dy, y);
        else
            bn_sum_runs(b, kind, a->x + off, dy, y, a->s);
    }
}

static void bn_sum(const cpu_bn_args *a, bn_block *b, int kind)
{
    if (a->y)
        bn_sum_masked(a, b, kind, a->y);
    else
        bn_sum_masked(a, b, kind, NULL);
}

/* out = p (x - m) + q dy + r for one sample's channels of the block, element
 * k of channel j at j * s + k (dy NULL: no q term; dy by bn_dy); relu:
 * max(out, 0) after, while the run is in cache. */
BN_INLINE void bn_affine_sample(const bn_block *b, float *restrict o, const float *restrict x,
                                const float *restrict dy, const float *restrict y, int64_t s,
                                int relu)
{
    const float *restrict p = b->p, *restrict q = b->q, *restrict r = b->r, *restrict m = b->m;
    if (s == 1 && dy)
        for (int64_t j = 0; j < b->nc; j++)
            o[j] = p[j] * (x[j] - m[j]) + q[j] * bn_dy(dy, y, j) + r[j];
    else if (s == 1)
        for (int64_t j = 0; j < b->nc; j++) o[j] = p[j] * (x[j] - m[j]) + r[j];
    if (s == 1 && relu) cpu_relu_inplace(o, b->nc);
    for (int64_t j = 0; s > 1 && j < b->nc; j++) {
        const float *restrict xr = x + j * s, *restrict dr = dy ? dy + j * s : NULL;
        const float *restrict yr = y ? y + j * s : NULL;
        float *restrict ow = o + j * s, pj = p[j], qj = q[j], rj = r[j], mj = m[j];
        if (dr)
            for (int64_t k = 0; k < s; k++) ow[k] = pj * (xr[k] - mj) + qj * bn_dy(dr, yr, k) + rj;
        else
            for (int64_t k = 0; k < s; k++) ow[k] = pj * (xr[k] - mj) + rj;
        if (relu) cpu_relu_inplace(ow, s);
    }
}

/* bn_affine_sample over the samples, dy masked by ym (a->y or NULL). */
BN_INLINE void bn_affine_masked(const cpu_bn_args *a, const bn_block *b, const float *ym)
{
    for (int64_t i = 0; i < a->n; i++) {
        int64_t off = (i * a->c + b->lo) * a->s;
        bn_affine_sample(b, a->out + off, a->x + off, a->dy ? a->dy + off : NULL,
                         ym ? ym + off : NULL, a->s, a->relu && !a->dy);
    }
}

static void bn_affine(const cpu_bn_args *a, const bn_block *b)
{
    if (a->y)
        bn_affine_masked(a, b, a->y);
    else
        bn_affine_masked(a, b, NULL);
}

/* The block's mean and rstd from stats [2, c]. */
static void bn_load(const cpu_bn_args *a, bn_block *b)
{
    for (int64_t j = 0; j < b->nc; j++) {
        b->m[j] = a->stats[b->lo + j];
        b->rs[j] = 1.0f / sqrtf(a->stats[a->c + b->lo + j] + a->eps);
    }
}

static double bn_count(const cpu_bn_args *a)
{
    return a->n * a->s > 0 ? (double)(a->n * a->s) : 1.0;
}

/* mean: a pass of sums; the biased variance: a pass about the mean. */
static void bn_stats_block(const cpu_bn_args *a, bn_block *b)
{
    double cnt = bn_count(a);
    bn_sum(a, b, BN_SUM);
    for (int64_t j = 0; j < b->nc; j++) b->m[j] = (float)(b->s0[j] / cnt);
    bn_sum(a, b, BN_SQDEV);
    for (int64_t j = 0; j < b->nc; j++) {
        a->out[b->lo + j] = b->m[j];
        a->out[a->c + b->lo + j] = (float)(b->s0[j] / cnt);
    }
}

/* y = (x - m) * rstd * gain + bias */
static void bn_apply_block(const cpu_bn_args *a, bn_block *b)
{
    bn_load(a, b);
    for (int64_t j = 0; j < b->nc; j++) {
        b->p[j] = a->gain[b->lo + j] * b->rs[j];
        b->r[j] = a->bias[b->lo + j];
    }
    bn_affine(a, b);
}

/* dgain = rstd * sum dy (x - m), dbias = sum dy */
static void bn_params_block(const cpu_bn_args *a, bn_block *b)
{
    bn_load(a, b);
    bn_sum(a, b, BN_PARAMS);
    for (int64_t j = 0; j < b->nc; j++) {
        a->out[b->lo + j] = (float)(b->s0[j] * b->rs[j]);
        a->out[a->c + b->lo + j] = (float)b->s1[j];
    }
}

/* dx = gain rstd (dy - dbias / M - xhat dgain / M) in a training step
 * (batch), gain rstd dy with fixed statistics. */
static void bn_grad_block(const cpu_bn_args *a, bn_block *b)
{
    float inv = (float)(1.0 / bn_count(a));
    bn_load(a, b);
    for (int64_t j = 0; j < b->nc; j++) {
        float k = a->gain[b->lo + j] * b->rs[j], dg = a->params[b->lo + j];
        float db = a->params[a->c + b->lo + j];
        b->q[j] = k;
        b->p[j] = a->batch ? -k * b->rs[j] * dg * inv : 0.0f;
        b->r[j] = a->batch ? -k * db * inv : 0.0f;
    }
    bn_affine(a, b);
}

typedef struct bn_ctx {
    const cpu_bn_args *a;
    void (*block)(const cpu_bn_args *a, bn_block *b);
} bn_ctx;

static void bn_range(void *vctx, int64_t lo, int64_t hi)
{
    const bn_ctx *x = vctx;
    bn_block b;
    for (b.lo = lo; b.lo < hi; b.lo += BN_BLOCK) {
        b.nc = hi - b.lo < BN_BLOCK ? hi - b.lo : BN_BLOCK;
        x->block(x->a, &b);
    }
}

static void bn_run(cpu_pool *p, const cpu_bn_args *a,
                   void (*block)(const cpu_bn_args *, bn_block *))
{
    bn_ctx x = {a, block};
    if (a->c > 0) cpu_par_range(p, a->c, CPU_PAR_MIN / (a->n * a->s + 1) + 1, bn_range, &x);
}

void cpu_bn_stats(cpu_pool *p, const cpu_bn_args *a)
{
    bn_run(p, a, bn_stats_block);
}

void cpu_batchnorm(cpu_pool *p, const cpu_bn_args *a)
{
    bn_run(p, a, bn_apply_block);
}

void cpu_bn_grad_params(cpu_pool *p, const cpu_bn_args *a)
{
    bn_run(p, a, bn_params_block);
}

void cpu_bn_grad(cpu_pool *p, const cpu_bn_args *a)
{
    bn_run(p, a, bn_grad_block);
}
