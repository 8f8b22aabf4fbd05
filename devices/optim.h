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

#endif
