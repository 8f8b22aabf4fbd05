/* cpu_lrn.c - LRN and LRN_GRAD, local response normalisation across the
 * channels (axis 1) of [N, C, S...], s the positions of a channel: at
 * channel k, with the channels j in [k - r, k + r] inside [0, C),
 *   s_k = bias + alpha * sum_j x_j^2,   y_k = x_k * s_k^-beta
 * (TF's local_response_normalization, across C instead of the last axis),
 * and its gradient
 *   dx_k = dy_k s_k^-beta - 2 alpha beta x_k sum_j dy_j x_j s_j^-beta / s_j.
 * Sums run over j upwards, as devices/cuda/k_norm.cu's. */
#include "cpu_impl.h"

/* Plane (image, channel) k of [lo, hi): out = x * s^-beta, with out first
 * holding the sum of squares (a contiguous loop over the positions). */
static void lrn_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lrn_args *l = vctx;
    int64_t c = l->c, s = l->s;
    for (int64_t plane = lo; plane < hi; plane++) {
        int64_t k = plane % c, j0 = k - l->r > 0 ? k - l->r : 0;
        int64_t j1 = k + l->r < c - 1 ? k + l->r : c - 1;
        const float *img = l->x + (plane - k) * s, *restrict xk = l->x + plane * s;
        float *restrict y = l->out + plane * s;
        for (int64_t p = 0; p < s; p++) y[p] = 0.0f;
        for (int64_t j = j0; j <= j1; j++) {
            const float *restrict xj = img + j * s;
            for (int64_t p = 0; p < s; p++) y[p] += xj[p] * xj[p];
        }
        for (int64_t p = 0; p < s; p++) y[p] = xk[p] * powf(l->bias + l->alpha * y[p], -l->beta);
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
    int64_t c = l->c, s = l->s, q;
    const float *x = l->x + img * c * s + p0, *dy = l->dy + img * c * s + p0;
    float *dx = l->out + img * c * s + p0, k2 = 2.0f * l->alpha * l->beta;
    for (int64_t k = 0; k < c; k++) {
        int64_t j0 = k - l->r > 0 ? k - l->r : 0, j1 = k + l->r < c - 1 ? k + l->r : c - 1;
        float *restrict tk = t + k * OP_LRN_CHUNK, *restrict ek = e + k * OP_LRN_CHUNK;
        for (q = 0; q < np; q++) tk[q] = 0.0f;
        for (int64_t j = j0; j <= j1; j++)
            for (q = 0; q < np; q++) tk[q] += x[j * s + q] * x[j * s + q];
        for (q = 0; q < np; q++) {
            float sk = l->bias + l->alpha * tk[q], ep = powf(sk, -l->beta);
            ek[q] = ep;
            tk[q] = dy[k * s + q] * x[k * s + q] * ep / sk;
        }
    }
    for (int64_t k = 0; k < c; k++) {
        int64_t j0 = k - l->r > 0 ? k - l->r : 0, j1 = k + l->r < c - 1 ? k + l->r : c - 1;
        float acc[OP_LRN_CHUNK] = {0};
        for (int64_t j = j0; j <= j1; j++)
            for (q = 0; q < np; q++) acc[q] += t[j * OP_LRN_CHUNK + q];
        for (q = 0; q < np; q++)
            dx[k * s + q] = dy[k * s + q] * e[k * OP_LRN_CHUNK + q] - k2 * x[k * s + q] * acc[q];
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
