/* cpu_update.c - optimizer updates, written IN PLACE into a variable.
 *
 * HOGWILD! RACES ARE INTENDED HERE, AND ONLY HERE.
 * In async training (DESIGN.md, "Async (Hogwild!)") several executors run
 * the same update on the same variable at once, without locks, as
 * TensorFlow's use_locking=False does.  Each element is read, modified and
 * written by plain float loads and stores; two threads may interleave and
 * lose an update, which SGD tolerates.  Nothing else in devices/cpu reads or
 * writes memory another thread writes concurrently, so these loops are the
 * only entries in the ThreadSanitizer suppression file.  Within one call the
 * pool splits the element range into disjoint chunks, so a single update
 * never races with itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../optim.h"
#include "cpu_impl.h"

typedef struct upd_ctx {
    float *var, *s1, *s2;
    const float *grad;
    float *s3;
    float lr, m, gs; /* gs: the gradient's scale (global-norm clipping, else 1) */
    float wd;        /* sgd, momentum: L2 weight decay, g' = gs * g + wd * var */
    int nesterov;
    int kind; /* adaptive_range: an optim_kind */
    const optim_hp *ohp;
    const cpu_adam_hp *hp;
    float c1, c2; /* Adam bias corrections 1-b1^t, 1-b2^t */
} upd_ctx;

static void sgd_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *restrict var = c->var;
    const float *restrict g = c->grad;
    float lr = c->lr;
    for (int64_t i = lo; i < hi; i++) var[i] -= lr * g[i];
}

/* With a weight decay: var -= lr * (gs * g + wd * var). */
static void sgd_wd_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *restrict var = c->var;
    const float *restrict g = c->grad;
    float lr = c->lr, gs = c->gs, wd = c->wd;
    for (int64_t i = lo; i < hi; i++) var[i] -= lr * (gs * g[i] + wd * var[i]);
}

/* lr * gs is one rounding: with gs = 1 the step is exactly lr * g. */
void cpu_apply_sgd(cpu_pool *p, float *var, const float *grad, int64_t n, float lr, float gs,
                   float wd)
{
    upd_ctx c = {.var = var, .grad = grad, .lr = wd != 0 ? lr : lr * gs, .gs = gs, .wd = wd};
    cpu_par_range(p, n, CPU_PAR_MIN, wd != 0 ? sgd_wd_range : sgd_range, &c);
}

/* SGD of a weight gradient a@b that is never stored: the GEMM accumulates
 * -lr * a@b into the variable (beta = 1).  Under Hogwild! the racing loads
 * and stores are the BLAS kernel's own; the pool splits the output into
 * disjoint blocks, so one update never races with itself. */
void cpu_apply_sgd_matmul(cpu_pool *p, cpu_gemm_args *g, float lr)
{
    g->accumulate = 1;
    g->alpha = -lr;
    cpu_matmul(p, g);
}

static void rows_apply(upd_ctx *c, void (*range)(void *, int64_t, int64_t), const float *rows,
                       const int32_t *ids, int64_t n, int64_t D, cpu_rows_scratch *sc);

/* Sparse SGD for gather's gradient: only the rows that were looked up move.
 * Racy like the others under Hogwild!: two executors may update one row.
 * A weight decay reads the row, so a repeated id's rows are summed first
 * and the row steps once (lazy: rows not looked up are not decayed). */
void cpu_apply_sgd_rows(float *var, const float *rows, const int32_t *ids, int64_t n, int64_t D,
                        float lr, float gs, float wd, cpu_rows_scratch *sc)
{
    if (wd != 0) {
        upd_ctx c = {.var = var, .lr = lr, .gs = gs, .wd = wd};
        rows_apply(&c, sgd_wd_range, rows, ids, n, D, sc);
        return;
    }
    lr *= gs;
    for (int64_t i = 0; i < n; i++) {
        float *restrict row = var + (int64_t)ids[i] * D;
        const float *restrict g = rows + i * D;
        for (int64_t j = 0; j < D; j++) row[j] -= lr * g[j];
    }
}

static void momentum_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *restrict var = c->var, *restrict acc = c->s1;
    const float *restrict g = c->grad;
    float lr = c->lr, m = c->m, gs = c->gs, wd = c->wd;
    if (wd != 0) {
        for (int64_t i = lo; i < hi; i++) {
            float gi = gs * g[i] + wd * var[i], a = m * acc[i] + gi;
            acc[i] = a;
            var[i] -= lr * (c->nesterov ? gi + m * a : a);
        }
    } else if (c->nesterov) {
        for (int64_t i = lo; i < hi; i++) {
            float gi = gs * g[i], a = m * acc[i] + gi;
            acc[i] = a;
            var[i] -= lr * (gi + m * a);
        }
    } else {
        for (int64_t i = lo; i < hi; i++) {
            float a = m * acc[i] + gs * g[i];
            acc[i] = a;
            var[i] -= lr * a;
        }
    }
}

void cpu_apply_momentum(cpu_pool *p, float *var, const float *grad, float *accum, int64_t n,
                        float lr, float m, int nesterov, float gs, float wd)
{
    upd_ctx c = {.var = var,
                 .grad = grad,
                 .s1 = accum,
                 .lr = lr,
                 .m = m,
                 .gs = gs,
                 .wd = wd,
                 .nesterov = nesterov};
    cpu_par_range(p, n, CPU_PAR_MIN, momentum_range, &c);
}

static void adam_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *restrict var = c->var, *restrict m = c->s1, *restrict v = c->s2;
    const float *restrict g = c->grad;
    float b1 = c->hp->b1, b2 = c->hp->b2, eps = c->hp->eps, gs = c->hp->gs;
    float lr1 = c->hp->lr / c->c1, inv2 = 1.0f / c->c2;
    float keep = 1.0f - c->hp->lr * c->hp->wd; /* decoupled weight decay (AdamW); 1 for Adam */
    for (int64_t i = lo; i < hi; i++) {
        float gi = gs * g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        var[i] = var[i] * keep - lr1 * mi / (sqrtf(vi * inv2) + eps);
    }
}

/* The bias corrections of hp's step in c; 0 when there is no defined step
 * (b1 or b2 >= 1).  In double: b^t for t in the millions underflows
 * gracefully. */
static int adam_ready(upd_ctx *c, const cpu_adam_hp *hp)
{
    double t = hp->t < 1.0f ? 1.0 : (double)hp->t;
    c->hp = hp;
    c->c1 = (float)(1.0 - pow((double)hp->b1, t));
    c->c2 = (float)(1.0 - pow((double)hp->b2, t));
    return c->c1 > 0.0f && c->c2 > 0.0f;
}

void cpu_apply_adam(cpu_pool *p, float *var, const float *grad, float *m, float *v, int64_t n,
                    const cpu_adam_hp *hp)
{
    upd_ctx c = {.var = var, .grad = grad, .s1 = m, .s2 = v};
    if (adam_ready(&c, hp)) cpu_par_range(p, n, CPU_PAR_MIN, adam_range, &c);
}

/* ---- row updates: each id once, its rows summed in batch order first ---- */

static int by_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* keys[i] = (ids[i], i) sorted: each id's places together, in batch order. */
static void rows_group(uint64_t *keys, const int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++) keys[i] = (uint64_t)(uint32_t)ids[i] << 32 | (uint64_t)i;
    qsort(keys, (size_t)n, sizeof(*keys), by_key);
}

/* Sums the rows of the group at keys[s] into sum (D floats); returns where
 * the next group starts.  0 + x is x, so the sum is the dense gradient's
 * row (gather_grad adds in batch order too). */
static int64_t rows_sum_group(const uint64_t *keys, int64_t s, int64_t n, const float *rows,
                              int64_t D, float *sum)
{
    uint64_t id = keys[s] >> 32;
    memcpy(sum, rows + (int64_t)(keys[s] & 0xffffffffu) * D, sizeof(float) * (size_t)D);
    int64_t e = s + 1;
    for (; e < n && keys[e] >> 32 == id; e++) {
        const float *g = rows + (int64_t)(keys[e] & 0xffffffffu) * D;
        for (int64_t j = 0; j < D; j++) sum[j] += g[j];
    }
    return e;
}

void cpu_rows_sum(float *out, const float *rows, const int32_t *ids, int64_t n, int64_t D,
                  cpu_rows_scratch *sc)
{
    memset(out, 0, sizeof(float) * (size_t)(n * D));
    rows_group(sc->keys, ids, n);
    for (int64_t s = 0; s < n; s++)
        s = rows_sum_group(sc->keys, s, n, rows, D,
                           out + (int64_t)(sc->keys[s] & 0xffffffffu) * D) -
            1;
}

/* Runs range (momentum_range or adam_range) on the row of each id with its
 * summed gradient: the dense update of that row. */
static void rows_apply(upd_ctx *c, void (*range)(void *, int64_t, int64_t), const float *rows,
                       const int32_t *ids, int64_t n, int64_t D, cpu_rows_scratch *sc)
{
    float *var = c->var, *s1 = c->s1, *s2 = c->s2, *s3 = c->s3;
    rows_group(sc->keys, ids, n);
    c->grad = sc->sum;
    for (int64_t s = 0; s < n;) {
        int64_t off = (int64_t)(sc->keys[s] >> 32) * D;
        s = rows_sum_group(sc->keys, s, n, rows, D, sc->sum);
        c->var = var + off;
        c->s1 = s1 ? s1 + off : NULL;
        c->s2 = s2 ? s2 + off : NULL;
        c->s3 = s3 ? s3 + off : NULL;
        range(c, 0, D);
    }
}

void cpu_apply_momentum_rows(float *var, const float *rows, const int32_t *ids, float *accum,
                             int64_t n, int64_t D, const cpu_momentum_hp *hp, cpu_rows_scratch *sc)
{
    upd_ctx c = {.var = var,
                 .s1 = accum,
                 .lr = hp->lr,
                 .m = hp->m,
                 .gs = hp->gs,
                 .wd = hp->wd,
                 .nesterov = hp->nesterov};
    rows_apply(&c, momentum_range, rows, ids, n, D, sc);
}

void cpu_apply_adam_rows(float *var, const float *rows, const int32_t *ids, float *m, float *v,
                         int64_t n, int64_t D, const cpu_adam_hp *hp, cpu_rows_scratch *sc)
{
    upd_ctx c = {.var = var, .s1 = m, .s2 = v};
    if (adam_ready(&c, hp)) rows_apply(&c, adam_range, rows, ids, n, D, sc);
}

/* ---- rmsprop, adagrad, adadelta: optim_step (devices/optim.h) per element ---- */

static void adaptive_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *var = c->var, *s1 = c->s1, *s2 = c->s2, *s3 = c->s3;
    const float *g = c->grad;
    for (int64_t i = lo; i < hi; i++)
        optim_step(c->kind, &var[i], &s1[i], s2 ? &s2[i] : NULL, s3 ? &s3[i] : NULL, g[i], c->ohp);
}

void cpu_apply_adaptive(cpu_pool *p, int kind, float *var, const float *grad, float *const *slots,
                        int64_t n, const optim_hp *hp)
{
    upd_ctx c = {.var = var,
                 .grad = grad,
                 .s1 = slots[0],
                 .s2 = slots[1],
                 .s3 = slots[2],
                 .kind = kind,
                 .ohp = hp};
    cpu_par_range(p, n, CPU_PAR_MIN, adaptive_range, &c);
}

void cpu_apply_adaptive_rows(int kind, float *var, const float *rows, const int32_t *ids,
                             float *const *slots, int64_t n, int64_t D, const optim_hp *hp,
                             cpu_rows_scratch *sc)
{
    upd_ctx c = {
        .var = var, .s1 = slots[0], .s2 = slots[1], .s3 = slots[2], .kind = kind, .ohp = hp};
    rows_apply(&c, adaptive_range, rows, ids, n, D, sc);
}

void cpu_assign_add(cpu_pool *p, void *var, ir_dtype dt, const void *x, int64_t n, int64_t x_n)
{
    (void)p; /* step counters and tests: small, never worth the pool */
    int vx = x_n != 1;
    if (dt == DT_I32) {
        int32_t *restrict v = var;
        const int32_t *restrict a = x;
        for (int64_t i = 0; i < n; i++) v[i] = (int32_t)((uint32_t)v[i] + (uint32_t)a[vx ? i : 0]);
    } else {
        float *restrict v = var;
        const float *restrict a = x;
        for (int64_t i = 0; i < n; i++) v[i] += a[vx ? i : 0];
    }
}

static void ema_range(void *vctx, int64_t lo, int64_t hi)
{
    const upd_ctx *c = vctx;
    float *restrict v = c->var;
    const float *restrict x = c->grad;
    float k = c->m;
    for (int64_t i = lo; i < hi; i++) v[i] -= k * (v[i] - x[i]);
}

/* var = x (decay 0: the bits of x, any dtype of elt bytes), else the
 * moving average var -= (1 - decay) * (var - x), as TF's
 * ExponentialMovingAverage. */
void cpu_assign(cpu_pool *p, void *var, const void *x, int64_t n, size_t elt, double decay)
{
    if (decay == 0) {
        memcpy(var, x, (size_t)n * elt);
        return;
    }
    upd_ctx c = {.var = var, .grad = x, .m = (float)(1 - decay)};
    cpu_par_range(p, n, CPU_PAR_MIN, ema_range, &c);
}

/* ---- global-norm clipping: min(1, clip / sqrt(sum of every gradient's squares)) ---- */

typedef struct clip_ctx {
    void *const *g;
    const ir_type *const *t;
    int n;
    double *part; /* a sum per chunk */
} clip_ctx;

static int64_t clip_chunks(const ir_type *t)
{
    return (cpu_numel(t) + OP_CLIP_CHUNK - 1) / OP_CLIP_CHUNK;
}

/* Eight running float sums vectorise; a chunk is short enough for them. */
static double chunk_sumsq(const float *x, int64_t n)
{
    float a[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += x[i + k] * x[i + k];
    double s = 0;
    for (; i < n; i++) s += (double)x[i] * x[i];
    for (int k = 0; k < 8; k++) s += a[k];
    return s;
}

static void clip_range(void *vctx, int64_t lo, int64_t hi)
{
    const clip_ctx *c = vctx;
    int k = 0;
    int64_t first = 0; /* the chunk index where gradient k starts */
    for (int64_t ch = lo; ch < hi; ch++) {
        while (ch >= first + clip_chunks(c->t[k])) first += clip_chunks(c->t[k++]);
        int64_t off = (ch - first) * OP_CLIP_CHUNK, n = cpu_numel(c->t[k]) - off;
        c->part[ch] =
            chunk_sumsq((const float *)c->g[k] + off, n < OP_CLIP_CHUNK ? n : OP_CLIP_CHUNK);
    }
}

void cpu_clip_scale(cpu_pool *p, float *out, void *const *grads, const ir_type *const *types, int n,
                    float clip, double *part)
{
    clip_ctx c = {grads, types, n, part};
    int64_t chunks = 0;
    for (int k = 0; k < n; k++) chunks += clip_chunks(types[k]);
    cpu_par_range(p, chunks, 1, clip_range, &c);
    double sum = 0;
    for (int64_t ch = 0; ch < chunks; ch++) sum += part[ch];
    *out = optim_clip_scale(sum, clip);
}

void cpu_lr_schedule(float *out, const ir_attrs *a, float t)
{
    *out = optim_lr_at((int)a->i[ATTR_LR_KIND], a->f[ATTR_LR_LR], a->f[ATTR_LR_MIN],
                       (double)a->i[ATTR_LR_WARMUP], (double)a->i[ATTR_LR_STEPS],
                       a->f[ATTR_LR_FACTOR], t);
}
