/* cpu_norm.c - LAYERNORM and its two gradients along the last axis (rows of
 * length c): y = (x - mean) * rstd * gain + bias with rstd = 1 / sqrt(var +
 * eps) and var the biased variance, as GPT-2 and PyTorch.  The gradients
 * recompute each row's mean and rstd from x (compiler/ops_grad.c says why).
 * Sums over a row keep 8 partial sums so they vectorise. */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

/* One row's mean and rstd; c >= 1. */
static void ln_stats(const float *restrict x, int64_t c, float eps, float *mean, float *rstd)
{
    float m = cpu_row_sum(x, c) / (float)c, acc[8] = {0}, v = 0.0f;
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
    ln_stats(x, n->c, n->eps, &m, &rs);
    for (int64_t i = 0; i < n->c; i++) y[i] = (x[i] - m) * rs * g[i] + b[i];
}

/* With xhat = (x - mean) * rstd and d = gain * dy:
 * dx = rstd * (d - mean(d) - xhat * mean(d * xhat)). */
static void ln_grad_row(const cpu_norm_args *n, int64_t r)
{
    int64_t c = n->c, i = 0;
    const float *restrict x = n->x + r * c, *restrict dy = n->dy + r * c, *restrict g = n->gain;
    float *restrict dx = n->out + r * c, m, rs, s1[8] = {0}, s2[8] = {0}, d1 = 0.0f, d2 = 0.0f;
    ln_stats(x, c, n->eps, &m, &rs);
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
    d1 /= (float)c;
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
        ln_stats(xr, c, n->eps, &m, &rs);
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
    if (nt > pool_size(p)) nt = pool_size(p);
    if (nt < 1 || !n->scratch) nt = 1;
    ln_params_ctx x = {n, (int)nt};
    cpu_pool_for(p, (int)nt, ln_params_task, &x);
    for (int t = 1; t < nt; t++) {
        const float *restrict part = ln_part(n, t);
        for (int64_t i = 0; i < 2 * c; i++) n->out[i] += part[i];
    }
}
