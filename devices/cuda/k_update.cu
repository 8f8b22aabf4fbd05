// k_update.cu - CUDA kernels of the update family (rows for kernels.cu):
// optimizer steps written IN PLACE into the variable, in[0], as
// devices/cpu/cpu_update.c does.  Every product and sum is rounded on its
// own (cua_mul, cua_add, cua_sub), as the CPU rounds them, so sgd, momentum
// and assign_add are bit-identical to the CPU's, and adam is too unless
// CUDA's double pow rounds its bias correction to another float than glibc's.
//
// Hogwild!: executors racing on one variable (DESIGN.md) race on the GPU
// too, through plain loads and stores, like the CPU's loops.  Within one
// call every element has one thread, except apply_sgd_rows on a repeated
// id, whose rows are added atomically (momentum's and adam's rows sum a
// repeated id's rows first, in one block).
//
// An optimizer update's last two inputs, its learning rate and its
// gradient scale (global-norm clipping, else 1), are device scalars read
// by the kernel each run: a recorded step graph replays the same pointers
// while the schedule moves the values.
#include "../optim.h"
#include "cu_a_args.cuh"

// --stale-lr: the update's lr times its staleness factor, into the
// factor's word (which the runtime sets on the stream before each update).
__global__ static void lr_scale_kernel(float *scale, const float *lr)
{
    *scale = cua_mul(*lr, *scale);
}

// The learning rate and the gradient scale of update a (device pointers).
// Under --stale-lr (a->lr_scale) the lr is scaled on the stream first: call
// upd_lr before CUDA_LAUNCH, not inside the launch's arguments (cua_launch's
// are evaluated before it launches).
static const float *upd_lr(const kern_args *a)
{
    const float *lr = (const float *)a->in[a->n_in - 2];
    if (!a->lr_scale) return lr;
    CUDA_LAUNCH(1, 1, 0, cuda_stream(a), lr_scale_kernel)(a->lr_scale, lr);
    CUDA_LAUNCHED(a);
    return a->lr_scale;
}
static const float *upd_gs(const kern_args *a)
{
    return (const float *)a->in[a->n_in - 1];
}

// ---- sgd ----

// With a weight decay wd (L2): var -= lr * (gs * g + wd * var), as the CPU.
__device__ static void sgd_wd_elem(float *var, float g, float lr, float gs, float wd)
{
    float gi = cua_add(cua_mul(gs, g), cua_mul(wd, *var));
    *var = cua_sub(*var, cua_mul(lr, gi));
}

__global__ static void sgd_kernel(float *var, const float *g, int64_t n, const float *lr,
                                  const float *gs, float wd)
{
    if (wd != 0.0f) {
        float l = *lr, s = *gs;
        CUDA_FOR(i, n) sgd_wd_elem(&var[i], g[i], l, s, wd);
        return;
    }
    float l = cua_mul(*lr, *gs);
    CUDA_FOR(i, n) var[i] = cua_sub(var[i], cua_mul(l, g[i]));
}

static int k_apply_sgd(const kern_args *a)
{
    int64_t n = cua_in_numel(a, 0);
    cua_launch(a, n, sgd_kernel, (float *)a->in[0], (const float *)a->in[1], n, upd_lr(a),
               upd_gs(a), cua_attr_f(a, ATTR_WD));
    return 0;
}

// One block per row of the batch (rows[r] goes to var[ids[r]]), its threads
// across the row.  A repeated id adds its rows atomically: the sum is right
// but its rounding depends on the order the adds land in (the CPU adds them
// in batch order).  atom.add.f32 also flushes subnormals to zero, which the
// CPU does not.  When this call's id check failed (the first fault of the
// queue is this launch's), nothing is written, as on the CPU; otherwise a bad
// id is skipped, never written out of bounds.
__global__ static void sgd_rows_kernel(float *var, const float *rows, const int32_t *ids, int64_t n,
                                       int64_t d, int64_t limit, const float *lr, const float *gs,
                                       const cuda_fault *f, int seq)
{
    if (f->seq == seq) return;
    float l = cua_mul(*lr, *gs);
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        int32_t id = ids[r];
        if (id < 0 || id >= limit) continue;
        float *row = var + (int64_t)id * d;
        const float *g = rows + r * d;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) atomicAdd(&row[j], -cua_mul(l, g[j]));
    }
}

static int k_apply_sgd_rows_wd(const kern_args *a);

static int k_apply_sgd_rows(const kern_args *a)
{
    if (cua_attr_f(a, ATTR_WD) != 0.0f) return k_apply_sgd_rows_wd(a);
    const ir_type *v = a->in_t[0];
    const int32_t *ids = (const int32_t *)a->in[2];
    int64_t n = cua_in_numel(a, 2), d = v->dim[1];
    cuda_check_ids(a, ids, n, v->dim[0], CUDA_FAULT_ID);
    if (n <= 0 || d <= 0) return 0;
    unsigned threads = d >= CUDA_BLOCK ? (unsigned)CUDA_BLOCK : (unsigned)((d + 31) / 32 * 32);
    unsigned blocks = n > 65535 * 8 ? 65535 * 8 : (unsigned)n;
    const float *lr = upd_lr(a);
    CUDA_LAUNCH(blocks, threads, 0, cuda_stream(a), sgd_rows_kernel)
    ((float *)a->in[0], (const float *)a->in[1], ids, n, d, v->dim[0], lr, upd_gs(a),
     a->queue->fault, a->queue->seq);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- momentum ----

// One element of the momentum step, with gradient g (before gs).
__device__ static void momentum_elem(float *var, float *acc, float g, float lr, float gs, float m,
                                     int nesterov, float wd)
{
    float gi = cua_mul(gs, g);
    if (wd != 0.0f) gi = cua_add(gi, cua_mul(wd, *var));
    float ai = cua_add(cua_mul(m, *acc), gi);
    *acc = ai;
    float step = nesterov ? cua_add(gi, cua_mul(m, ai)) : ai;
    *var = cua_sub(*var, cua_mul(lr, step));
}

__global__ static void momentum_kernel(float *var, const float *g, float *acc, int64_t n,
                                       const float *lrp, const float *gsp, float m, int nesterov,
                                       float wd)
{
    float lr = *lrp, gs = *gsp;
    CUDA_FOR(i, n) momentum_elem(&var[i], &acc[i], g[i], lr, gs, m, nesterov, wd);
}

static int k_apply_momentum(const kern_args *a)
{
    int64_t n = cua_in_numel(a, 0);
    cua_launch(a, n, momentum_kernel, (float *)a->in[0], (const float *)a->in[1], (float *)a->in[2],
               n, upd_lr(a), upd_gs(a), cua_attr_f(a, ATTR_MOMENTUM_M),
               cua_attr_i(a, ATTR_NESTEROV) != 0, cua_attr_f(a, ATTR_WD));
    return 0;
}

// ---- adam ----

typedef struct adam_hp {
    float b1, b2, eps, wd; // wd: AdamW's decoupled weight decay (0: Adam)
} adam_hp;

// The bias corrections 1-b1^t, 1-b2^t of step t (clamped to >= 1), in
// double as the CPU computes them: b^t for t in the millions underflows
// gracefully.
__device__ static void adam_corrections(const adam_hp *hp, float step, float *c)
{
    double t = step < 1.0f ? 1.0 : (double)step;
    c[0] = (float)(1.0 - pow((double)hp->b1, t));
    c[1] = (float)(1.0 - pow((double)hp->b2, t));
}

// The step's constants: lr / c1, 1 / c2, 1 - b1, 1 - b2, the decay's
// factor 1 - lr * wd (exactly 1 for Adam), and gs.
typedef struct adam_k {
    float lr1, inv2, k1, k2, keep, gs;
} adam_k;

// Thread 0 of each block works out the corrections of the step counter (a
// device scalar, read on the GPU after the assign_add that advanced it);
// 0 when there is no defined step (b1 or b2 >= 1, as the CPU).
__device__ static int adam_begin(const adam_hp *hp, const float *step, const float *lrp,
                                 const float *gsp, adam_k *k)
{
    __shared__ float c[2];
    if (threadIdx.x == 0) adam_corrections(hp, *step, c);
    __syncthreads();
    if (c[0] <= 0.0f || c[1] <= 0.0f) return 0;
    float lr = *lrp;
    *k = {lr / c[0], 1.0f / c[1], 1.0f - hp->b1, 1.0f - hp->b2, cua_sub(1.0f, cua_mul(lr, hp->wd)),
          *gsp};
    return 1;
}

// One element of the Adam step: the decay multiplies the variable by
// 1 - lr * wd before the step, as the CPU does.
__device__ static void adam_elem(float *var, float *m, float *v, float g, const adam_hp *hp,
                                 const adam_k *k)
{
    float gi = cua_mul(k->gs, g);
    float mi = cua_add(cua_mul(hp->b1, *m), cua_mul(k->k1, gi));
    float vi = cua_add(cua_mul(hp->b2, *v), cua_mul(cua_mul(k->k2, gi), gi));
    *m = mi;
    *v = vi;
    *var = cua_sub(cua_mul(*var, k->keep),
                   cua_mul(k->lr1, mi) / (sqrtf(cua_mul(vi, k->inv2)) + hp->eps));
}

__global__ static void adam_kernel(float *var, const float *g, float *m, float *v, int64_t n,
                                   const float *step, const float *lrp, const float *gsp,
                                   adam_hp hp)
{
    adam_k k;
    if (!adam_begin(&hp, step, lrp, gsp, &k)) return;
    CUDA_FOR(i, n) adam_elem(&var[i], &m[i], &v[i], g[i], &hp, &k);
}

static int k_apply_adam(const kern_args *a)
{
    adam_hp hp = {cua_attr_f(a, ATTR_ADAM_B1), cua_attr_f(a, ATTR_ADAM_B2),
                  cua_attr_f(a, ATTR_ADAM_EPS), cua_attr_f(a, ATTR_ADAM_WD)};
    int64_t n = cua_in_numel(a, 0);
    cua_launch(a, n, adam_kernel, (float *)a->in[0], (const float *)a->in[1], (float *)a->in[2],
               (float *)a->in[3], n, (const float *)a->in[4], upd_lr(a), upd_gs(a), hp);
    return 0;
}

// ---- row updates of momentum and adam, and rows_sum ----
//
// One block per place r of the batch (grid-stride), its threads across the
// row.  The block of an id's first place sums the id's rows in batch order,
// as the CPU does, and applies the dense step to that row once; the blocks
// of its repeats do nothing.  Finding them scans the ids: O(n) per place,
// fine for batches of thousands of ids.

// Whether ids[r] appears before r; every thread of the block gets the answer.
__device__ static int seen_before(const int32_t *ids, int64_t r)
{
    __shared__ int hit;
    if (threadIdx.x == 0) hit = 0;
    __syncthreads();
    int32_t id = ids[r];
    for (int64_t q = threadIdx.x; q < r; q += blockDim.x)
        if (ids[q] == id) {
            hit = 1;
            break;
        }
    __syncthreads();
    int seen = hit;
    __syncthreads(); // read before the next place resets it
    return seen;
}

// Column j of the sum of the rows of ids[r] at places r and after.
__device__ static float column_sum(const float *rows, const int32_t *ids, int64_t r, int64_t n,
                                   int64_t d, int64_t j)
{
    int32_t id = ids[r];
    float s = rows[r * d + j];
    for (int64_t q = r + 1; q < n; q++)
        if (ids[q] == id) s = cua_add(s, rows[q * d + j]);
    return s;
}

// The place r is an id's first, in range; skipped when this launch's id
// check failed (nothing is written, as on the CPU).
__device__ static int first_place(const int32_t *ids, int64_t r, int64_t limit)
{
    int seen = seen_before(ids, r);
    return !seen && ids[r] >= 0 && ids[r] < limit;
}

typedef struct rows_args {
    float *var, *s1, *s2;
    const float *rows;
    const int32_t *ids;
    int64_t n, d, limit;
    const cuda_fault *f;
    int seq;
    float *s3; // rmsprop's mean gradient (centered), else NULL
} rows_args;

__global__ static void momentum_rows_kernel(rows_args r, const float *lrp, const float *gsp,
                                            float m, int nesterov, float wd)
{
    if (r.f->seq == r.seq) return;
    float lr = *lrp, gs = *gsp;
    for (int64_t p = blockIdx.x; p < r.n; p += gridDim.x) {
        if (!first_place(r.ids, p, r.limit)) continue;
        int64_t off = (int64_t)r.ids[p] * r.d;
        for (int64_t j = threadIdx.x; j < r.d; j += blockDim.x)
            momentum_elem(&r.var[off + j], &r.s1[off + j],
                          column_sum(r.rows, r.ids, p, r.n, r.d, j), lr, gs, m, nesterov, wd);
    }
}

__global__ static void adam_rows_kernel(rows_args r, const float *step, const float *lrp,
                                        const float *gsp, adam_hp hp)
{
    if (r.f->seq == r.seq) return;
    adam_k k;
    if (!adam_begin(&hp, step, lrp, gsp, &k)) return;
    for (int64_t p = blockIdx.x; p < r.n; p += gridDim.x) {
        if (!first_place(r.ids, p, r.limit)) continue;
        int64_t off = (int64_t)r.ids[p] * r.d;
        for (int64_t j = threadIdx.x; j < r.d; j += blockDim.x)
            adam_elem(&r.var[off + j], &r.s1[off + j], &r.s2[off + j],
                      column_sum(r.rows, r.ids, p, r.n, r.d, j), &hp, &k);
    }
}

// rows_sum: place p's row of the output is its id's sum, or 0 at a repeat.
__global__ static void rows_sum_kernel(float *out, const float *rows, const int32_t *ids, int64_t n,
                                       int64_t d)
{
    for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
        int seen = seen_before(ids, p);
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
            out[p * d + j] = seen ? 0.0f : column_sum(rows, ids, p, n, d, j);
    }
}

static unsigned rows_threads(int64_t d)
{
    return d >= CUDA_BLOCK ? (unsigned)CUDA_BLOCK : (unsigned)((d + 31) / 32 * 32);
}

static unsigned rows_blocks(int64_t n)
{
    return n > 65535 * 8 ? 65535 * 8 : (unsigned)n;
}

// The ids checked, then the launch's arguments (var, dy, ids, slots from in[3]).
static rows_args rows_begin(const kern_args *a, int n_slots)
{
    const ir_type *v = a->in_t[0];
    rows_args r = {(float *)a->in[0],
                   (float *)a->in[3],
                   n_slots > 1 ? (float *)a->in[4] : NULL,
                   (const float *)a->in[1],
                   (const int32_t *)a->in[2],
                   cua_in_numel(a, 2),
                   v->dim[1],
                   v->dim[0],
                   a->queue->fault,
                   0,
                   NULL};
    cuda_check_ids(a, r.ids, r.n, v->dim[0], CUDA_FAULT_ID);
    r.seq = a->queue->seq;
    return r;
}

static int k_apply_momentum_rows(const kern_args *a)
{
    rows_args r = rows_begin(a, 1);
    if (r.n <= 0 || r.d <= 0) return 0;
    const float *lr = upd_lr(a);
    CUDA_LAUNCH(rows_blocks(r.n), rows_threads(r.d), 0, cuda_stream(a), momentum_rows_kernel)
    (r, lr, upd_gs(a), cua_attr_f(a, ATTR_MOMENTUM_M), cua_attr_i(a, ATTR_NESTEROV) != 0,
     cua_attr_f(a, ATTR_WD));
    CUDA_LAUNCHED(a);
    return 0;
}

static int k_apply_adam_rows(const kern_args *a)
{
    adam_hp hp = {cua_attr_f(a, ATTR_ADAM_B1), cua_attr_f(a, ATTR_ADAM_B2),
                  cua_attr_f(a, ATTR_ADAM_EPS), cua_attr_f(a, ATTR_ADAM_WD)};
    rows_args r = rows_begin(a, 2);
    if (r.n <= 0 || r.d <= 0) return 0;
    const float *lr = upd_lr(a);
    CUDA_LAUNCH(rows_blocks(r.n), rows_threads(r.d), 0, cuda_stream(a), adam_rows_kernel)
    (r, (const float *)a->in[5], lr, upd_gs(a), hp);
    CUDA_LAUNCHED(a);
    return 0;
}

// sgd's rows with a weight decay: each id's rows summed, its row stepped
// once (the decay reads the row), as the CPU.
__global__ static void sgd_rows_wd_kernel(rows_args r, const float *lrp, const float *gsp, float wd)
{
    if (r.f->seq == r.seq) return;
    float lr = *lrp, gs = *gsp;
    for (int64_t p = blockIdx.x; p < r.n; p += gridDim.x) {
        if (!first_place(r.ids, p, r.limit)) continue;
        int64_t off = (int64_t)r.ids[p] * r.d;
        for (int64_t j = threadIdx.x; j < r.d; j += blockDim.x)
            sgd_wd_elem(&r.var[off + j], column_sum(r.rows, r.ids, p, r.n, r.d, j), lr, gs, wd);
    }
}

static int k_apply_sgd_rows_wd(const kern_args *a)
{
    rows_args r = rows_begin(a, 0);
    r.s1 = NULL;
    if (r.n <= 0 || r.d <= 0) return 0;
    const float *lr = upd_lr(a);
    CUDA_LAUNCH(rows_blocks(r.n), rows_threads(r.d), 0, cuda_stream(a), sgd_rows_wd_kernel)
    (r, lr, upd_gs(a), cua_attr_f(a, ATTR_WD));
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- rmsprop, adagrad, adadelta: optim_step (devices/optim.h), the CPU's
// function, per element; their rows as momentum's ----

// The op's optim_kind, hyperparameters (lr and gs filled in on the device)
// and slots from input `first` (rmsprop's mom and mg only when it has them).
static int adaptive_args(const kern_args *a, int first, optim_hp *hp, float **slots)
{
    op_kind op = a->node->op;
    int kind = op == OP_APPLY_RMSPROP || op == OP_APPLY_RMSPROP_ROWS   ? OPTIM_RMSPROP
               : op == OP_APPLY_ADAGRAD || op == OP_APPLY_ADAGRAD_ROWS ? OPTIM_ADAGRAD
                                                                       : OPTIM_ADADELTA;
    *hp = {0.0f,
           0.0f,
           cua_attr_f(a, ATTR_WD),
           cua_attr_f(a, ATTR_RHO),
           cua_attr_f(a, ATTR_RMS_M),
           cua_attr_f(a, ATTR_EPS)};
    int k = first;
    slots[0] = (float *)a->in[k++];
    slots[1] = slots[2] = NULL;
    if (kind == OPTIM_ADADELTA) slots[1] = (float *)a->in[k++];
    if (kind == OPTIM_RMSPROP && a->node->attr.f[ATTR_RMS_M] != 0) slots[1] = (float *)a->in[k++];
    if (kind == OPTIM_RMSPROP && cua_attr_i(a, ATTR_RMS_CENTERED)) slots[2] = (float *)a->in[k++];
    return kind;
}

__global__ static void adaptive_kernel(int kind, float *var, const float *g, float *s1, float *s2,
                                       float *s3, int64_t n, const float *lrp, const float *gsp,
                                       optim_hp hp)
{
    hp.lr = *lrp;
    hp.gs = *gsp;
    CUDA_FOR(i, n)
    optim_step(kind, &var[i], &s1[i], s2 ? &s2[i] : NULL, s3 ? &s3[i] : NULL, g[i], &hp);
}

static int k_apply_adaptive(const kern_args *a)
{
    optim_hp hp;
    float *s[3];
    int kind = adaptive_args(a, 2, &hp, s);
    int64_t n = cua_in_numel(a, 0);
    cua_launch(a, n, adaptive_kernel, kind, (float *)a->in[0], (const float *)a->in[1], s[0], s[1],
               s[2], n, upd_lr(a), upd_gs(a), hp);
    return 0;
}

__global__ static void adaptive_rows_kernel(int kind, rows_args r, const float *lrp,
                                            const float *gsp, optim_hp hp)
{
    if (r.f->seq == r.seq) return;
    hp.lr = *lrp;
    hp.gs = *gsp;
    for (int64_t p = blockIdx.x; p < r.n; p += gridDim.x) {
        if (!first_place(r.ids, p, r.limit)) continue;
        int64_t off = (int64_t)r.ids[p] * r.d;
        for (int64_t j = threadIdx.x; j < r.d; j += blockDim.x)
            optim_step(kind, &r.var[off + j], &r.s1[off + j], r.s2 ? &r.s2[off + j] : NULL,
                       r.s3 ? &r.s3[off + j] : NULL, column_sum(r.rows, r.ids, p, r.n, r.d, j),
                       &hp);
    }
}

static int k_apply_adaptive_rows(const kern_args *a)
{
    optim_hp hp;
    float *s[3];
    int kind = adaptive_args(a, 3, &hp, s);
    rows_args r = rows_begin(a, 1);
    r.s1 = s[0], r.s2 = s[1], r.s3 = s[2];
    if (r.n <= 0 || r.d <= 0) return 0;
    const float *lr = upd_lr(a);
    CUDA_LAUNCH(rows_blocks(r.n), rows_threads(r.d), 0, cuda_stream(a), adaptive_rows_kernel)
    (kind, r, lr, upd_gs(a), hp);
    CUDA_LAUNCHED(a);
    return 0;
}

static int k_rows_sum(const kern_args *a)
{
    int64_t n = cua_in_numel(a, 1), d = a->out_t->dim[1];
    if (n <= 0 || d <= 0) return 0;
    CUDA_LAUNCH(rows_blocks(n), rows_threads(d), 0, cuda_stream(a), rows_sum_kernel)
    ((float *)a->out, (const float *)a->in[0], (const int32_t *)a->in[1], n, d);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- assign_add ----

__device__ static inline float add_wrap(float x, float y)
{
    return x + y;
}
__device__ static inline int32_t add_wrap(int32_t x, int32_t y)
{
    return (int32_t)((uint32_t)x + (uint32_t)y);
}

// x_vec == 0: x is a scalar, added to every element.
template <typename T>
__global__ static void assign_add_kernel(T *var, const T *x, int64_t n, int x_vec)
{
    CUDA_FOR(i, n) var[i] = add_wrap(var[i], x[x_vec ? i : 0]);
}

template <typename T> static void assign_add(const kern_args *a, int64_t n, int x_vec)
{
    cua_launch(a, n, assign_add_kernel<T>, (T *)a->in[0], (const T *)a->in[1], n, x_vec);
}

static int k_assign_add(const kern_args *a)
{
    int64_t n = cua_in_numel(a, 0);
    int x_vec = cua_in_numel(a, 1) != 1;
    if (a->in_t[0]->dtype == DT_I32)
        assign_add<int32_t>(a, n, x_vec);
    else
        assign_add<float>(a, n, x_vec);
    return 0;
}

// ---- assign: a copy, or the moving average var -= (1 - decay) * (var - x) ----

__global__ static void ema_kernel(float *var, const float *x, int64_t n, float k)
{
    CUDA_FOR(i, n) var[i] -= k * (var[i] - x[i]);
}

static int k_assign(const kern_args *a)
{
    int64_t n = cua_in_numel(a, 0);
    double decay = a->node->attr.f[ATTR_ASSIGN_DECAY];
    if (decay == 0) {
        CUDA_CHECK(cudaMemcpyAsync(a->in[0], a->in[1], (size_t)n * 4, cudaMemcpyDeviceToDevice,
                                   cuda_stream(a)),
                   a);
        return 0;
    }
    cua_launch(a, n, ema_kernel, (float *)a->in[0], (const float *)a->in[1], n, (float)(1 - decay));
    return 0;
}

// ---- lr_schedule: one thread, the CPU's function (devices/optim.h) ----

__global__ static void lr_schedule_kernel(float *out, const float *step, int kind, double lr,
                                          double min, double warmup, double steps, double factor)
{
    *out = optim_lr_at(kind, lr, min, warmup, steps, factor, *step);
}

static int k_lr_schedule(const kern_args *a)
{
    const ir_attrs *at = &a->node->attr;
    CUDA_LAUNCH(1, 1, 0, cuda_stream(a), lr_schedule_kernel)
    ((float *)a->out, (const float *)a->in[0], (int)at->i[ATTR_LR_KIND], at->f[ATTR_LR_LR],
     at->f[ATTR_LR_MIN], (double)at->i[ATTR_LR_WARMUP], (double)at->i[ATTR_LR_STEPS],
     at->f[ATTR_LR_FACTOR]);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- clip_scale: squares summed per chunk of OP_CLIP_CHUNK elements (a
// block each, into the scratch), then the chunks in order by one block:
// no atomics, the same bits every run (the CPU adds in another order). ----

enum { CLIP_BATCH = 32 }; // gradients per launch of the chunk kernel

struct clip_batch {
    const float *g[CLIP_BATCH];
    int64_t n[CLIP_BATCH];
    int64_t first[CLIP_BATCH + 1]; // chunk index where each gradient starts
    int count;
};

// Thread 0 gets the block's sum (CUDA_BLOCK threads).
__device__ static double block_sum(double x)
{
    __shared__ double part[CUDA_BLOCK / 32];
    for (int off = 16; off > 0; off /= 2) x += __shfl_down_sync(0xffffffffu, x, off);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = x;
    __syncthreads();
    x = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < CUDA_BLOCK / 32; w++) x += part[w];
    return x;
}

__global__ static void clip_chunks_kernel(double *part, const __grid_constant__ clip_batch b)
{
    int64_t ch = b.first[0] + blockIdx.x;
    int k = 0;
    while (ch >= b.first[k + 1]) k++;
    int64_t off = (ch - b.first[k]) * OP_CLIP_CHUNK, end = b.n[k] - off;
    end = end < OP_CLIP_CHUNK ? end : OP_CLIP_CHUNK;
    double s = 0;
    for (int64_t i = threadIdx.x; i < end; i += CUDA_BLOCK) {
        float x = b.g[k][off + i];
        s += (double)cua_mul(x, x);
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[ch] = s;
}

__global__ static void clip_total_kernel(float *out, const double *part, int64_t chunks,
                                         double clip)
{
    double s = 0;
    for (int64_t i = threadIdx.x; i < chunks; i += CUDA_BLOCK) s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = optim_clip_scale(s, clip);
}

static int k_clip_scale(const kern_args *a)
{
    double *part = (double *)a->scratch;
    clip_batch b = {};
    int64_t chunks = 0;
    for (int k = 0; k < a->n_in; k++) {
        int64_t n = cua_in_numel(a, k);
        b.g[b.count] = (const float *)a->in[k];
        b.n[b.count] = n;
        b.first[b.count++] = chunks;
        chunks += (n + OP_CLIP_CHUNK - 1) / OP_CLIP_CHUNK;
        b.first[b.count] = chunks;
        if (b.count < CLIP_BATCH && k + 1 < a->n_in) continue;
        if (chunks > b.first[0]) {
            CUDA_LAUNCH((unsigned)(chunks - b.first[0]), CUDA_BLOCK, 0, cuda_stream(a),
                        clip_chunks_kernel)
            (part, b);
            CUDA_LAUNCHED(a);
        }
        b.count = 0;
        b.first[0] = chunks;
    }
    CUDA_LAUNCH(1, CUDA_BLOCK, 0, cuda_stream(a), clip_total_kernel)
    ((float *)a->out, part, chunks, a->node->attr.f[ATTR_CLIP]);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- group: a barrier, no work ----

static int k_group(const kern_args *a)
{
    (void)a;
    return 0;
}

extern "C" const cuda_row cuda_rows_update[] = {
    {OP_APPLY_SGD, k_apply_sgd},
    {OP_APPLY_SGD_ROWS, k_apply_sgd_rows},
    {OP_APPLY_MOMENTUM, k_apply_momentum},
    {OP_APPLY_MOMENTUM_ROWS, k_apply_momentum_rows},
    {OP_APPLY_ADAM, k_apply_adam},
    {OP_APPLY_ADAM_ROWS, k_apply_adam_rows},
    {OP_APPLY_RMSPROP, k_apply_adaptive},
    {OP_APPLY_RMSPROP_ROWS, k_apply_adaptive_rows},
    {OP_APPLY_ADAGRAD, k_apply_adaptive},
    {OP_APPLY_ADAGRAD_ROWS, k_apply_adaptive_rows},
    {OP_APPLY_ADADELTA, k_apply_adaptive},
    {OP_APPLY_ADADELTA_ROWS, k_apply_adaptive_rows},
    {OP_ASSIGN_ADD, k_assign_add},
    {OP_GROUP, k_group},
    {OP_ASSIGN, k_assign},
    {OP_LR_SCHEDULE, k_lr_schedule},
    {OP_CLIP_SCALE, k_clip_scale},
    {OP_ROWS_SUM, k_rows_sum},
    {OP_COUNT, NULL},
};
