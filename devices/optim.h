/* optim.h - the scalar math of the optimizer helpers, one function for
 * every device, so the CPU and a GPU compute the same learning rate and
 * clipping scale (compiler/ops.h: lr_schedule, clip_scale). */
#ifndef GR_OPTIM_H
#define GR_OPTIM_H

#include <math.h>
#include <stdint.h>

#include "../compiler/ops.h"

#ifdef __CUDACC__
#define OPTIM_FN __host__ __device__ static inline
#else
#define OPTIM_FN static inline
#endif

/* The learning rate at step t (1 on the first run: the counter after its
 * increment).  For t <= warmup it rises linearly, lr * t / warmup; after
 * that it stays at lr (OP_LR_WARMUP) or falls from lr at t = warmup to min
 * at t = steps, along a line or half a cosine, and stays at min.  The two
 * decays by a factor count the runs past the warmup, d = t - 1 - warmup,
 * in periods of `steps`: OP_LR_STEP is lr * factor^floor(d / steps)
 * (PyTorch's StepLR), OP_LR_EXP lr * factor^(d / steps) (TF's
 * exponential_decay). */
OPTIM_FN float optim_lr_at(int kind, double lr, double min, double warmup, double steps,
                           double factor, double t)
{
    if (t < warmup) return (float)(lr * t / warmup);
    if (kind == OP_LR_WARMUP) return (float)lr;
    if (kind == OP_LR_STEP || kind == OP_LR_EXP) {
        double d = t - 1.0 - warmup;
        d = d > 0.0 ? d / steps : 0.0;
        return (float)(lr * pow(factor, kind == OP_LR_STEP ? floor(d) : d));
    }
    double p = steps > warmup ? (t - warmup) / (steps - warmup) : 1.0;
    p = p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p;
    if (kind == OP_LR_LINEAR) return (float)(lr + (min - lr) * p);
    return (float)(min + 0.5 * (lr - min) * (1.0 + cos(3.14159265358979323846 * p)));
}

/* min(1, clip / sqrt(sumsq)): the factor global-norm clipping scales every
 * gradient by.  A NaN norm gives NaN (so --check-numerics names
 * clip_scale), an infinite one 0. */
OPTIM_FN float optim_clip_scale(double sumsq, double clip)
{
    double norm = sqrt(sumsq);
    if (norm != norm) return (float)norm;
    return norm > clip ? (float)(clip / norm) : 1.0f;
}

/* ---- the adaptive optimizers' step of one element (PyTorch's formulas),
 * shared by the CPU's loops and the CUDA kernels ---- */

typedef enum optim_kind { OPTIM_RMSPROP, OPTIM_ADAGRAD, OPTIM_ADADELTA } optim_kind;

/* lr and gs (the gradient's scale) are read on the device each run; wd is
 * the L2 weight decay, g' = gs * g + wd * w, as PyTorch's weight_decay. */
typedef struct optim_hp {
    float lr, gs, wd, rho, m, eps;
} optim_hp;

/* w, and its slots: rmsprop s1 = v (the mean square), s2 = the momentum
 * buffer or NULL (m = 0), s3 = the mean gradient or NULL (not centered);
 * adagrad s1 = the sum of squares; adadelta s1 = v, s2 = u (the mean
 * square of the steps).
 *   rmsprop:  v = rho v + (1-rho) g²; (centered: mg = rho mg + (1-rho) g,
 *             v - mg² for v); d = g / (sqrt(v) + eps); with m: b = m b + d,
 *             d = b; w -= lr d
 *   adagrad:  s += g²; w -= lr g / (sqrt(s) + eps)
 *   adadelta: v = rho v + (1-rho) g²; d = sqrt(u + eps) / sqrt(v + eps) g;
 *             u = rho u + (1-rho) d²; w -= lr d */
OPTIM_FN void optim_step(int kind, float *w, float *s1, float *s2, float *s3, float g,
                         const optim_hp *h)
{
    float gi = h->gs * g;
    if (h->wd != 0.0f) gi += h->wd * *w;
    float d;
    if (kind == OPTIM_ADAGRAD) {
        float s = *s1 + gi * gi;
        *s1 = s;
        d = gi / (sqrtf(s) + h->eps);
    } else {
        float k = 1.0f - h->rho, v = h->rho * *s1 + k * gi * gi;
        *s1 = v;
        if (kind == OPTIM_ADADELTA) {
            d = sqrtf(*s2 + h->eps) / sqrtf(v + h->eps) * gi;
            *s2 = h->rho * *s2 + k * d * d;
        } else {
            if (s3) {
                float a = h->rho * *s3 + k * gi;
                *s3 = a;
                v -= a * a;
            }
            d = gi / (sqrtf(v) + h->eps);
            if (s2) d = *s2 = h->m * *s2 + d;
        }
    }
    *w -= h->lr * d;
}

#endif
