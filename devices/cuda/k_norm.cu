// k_norm.cu - LAYERNORM and its two gradients, RMSNORM and its dx, along
// the last axis (rows of
// length c), and the batch normalisation ops per channel (BN_STATS,
// BATCHNORM, BN_GRAD_PARAMS, BN_GRAD), computing what
// devices/cpu/cpu_norm.c computes:
// y = (x - mean) * rstd * gain + bias, rstd = 1 / sqrt(var + eps) with the
// biased variance; the gradients recompute each row's mean and rstd from
// x, as the CPU does.  Rows are split over groups of threads
// (cu_rows.cuh); dgain and dbias, sums over rows, are summed per column in
// a fixed order, so every result is deterministic.  LRN and its gradient
// (across the channels, devices/cpu/cpu_lrn.c's) take a thread per element,
// and so do ROPE and its gradient (devices/cpu/cpu_rope.c's rotation).
// LSTM_CELL, GRU_CELL and their gradients take a thread per unit of a row
// (devices/cpu/cpu_rnn.c's), the math act.h's, as the CPU's.
#include "../act.h"
#include "cu_rows.cuh"

#define IN_F(k) ((const float *)a->in[k])
#define OUT_F   ((float *)a->out)

// Row xr's mean and rstd (c >= 1), on every thread of the group.
// rms (rmsnorm): the mean is taken as 0, so v is the mean of the squares.
template <int G>
__device__ static void ln_stats(const float *xr, int64_t c, float eps, float *mean, float *rstd,
                                int rms = 0)
{
    float m = rms ? 0.0f : row_sum<G>(c, [=](int64_t i) { return xr[i]; }) / (float)c;
    float v = row_sum<G>(c, [=](int64_t i) { return (xr[i] - m) * (xr[i] - m); }) / (float)c;
    *mean = m;
    *rstd = 1.0f / sqrtf(v + eps);
}

template <int G>
__device__ static void ln_row(float *y, const float *x, const float *gain, const float *bias,
                              int64_t c, float eps, int rms)
{
    float m, rs;
    ln_stats<G>(x, c, eps, &m, &rs, rms);
    for (int64_t i = group_lane<G>(); i < c; i += G)
        y[i] = rms ? x[i] * rs * gain[i] : (x[i] - m) * rs * gain[i] + bias[i];
}

// With xhat = (x - mean) * rstd and d = gain * dy:
// dx = rstd * (d - mean(d) - xhat * mean(d * xhat)).
// rms: without mean(d), as x is not centred.
template <int G>
__device__ static void ln_grad_row(float *dx, const float *dy, const float *x, const float *gain,
                                   int64_t c, float eps, int rms)
{
    float m, rs;
    ln_stats<G>(x, c, eps, &m, &rs, rms);
    float d1 = rms ? 0.0f : row_sum<G>(c, [=](int64_t i) { return gain[i] * dy[i]; }) / (float)c;
    float d2 =
        row_sum<G>(c, [=](int64_t i) { return gain[i] * dy[i] * (x[i] - m) * rs; }) / (float)c;
    for (int64_t i = group_lane<G>(); i < c; i += G)
        dx[i] = rs * (gain[i] * dy[i] - d1 - (x[i] - m) * rs * d2);
}

// layernorm (in: x, gain, bias) or, with grad, its dx (in: dy, x, gain),
// row by row of the output.
template <int G>
__global__ static void layernorm_kernel(float *out, const float *in0, const float *in1,
                                        const float *in2, int64_t rows, int64_t c, float eps,
                                        int grad, int rms)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        if (grad)
            ln_grad_row<G>(out + r * c, in0 + r * c, in1 + r * c, in2, c, eps, rms);
        else
            ln_row<G>(out + r * c, in0 + r * c, in1, in2, c, eps, rms);
    }
}

// stats[2r] and stats[2r + 1]: row r's mean and rstd.
template <int G>
__global__ static void layernorm_stats_kernel(float *stats, const float *x, int64_t rows, int64_t c,
                                              float eps)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        float m, rs;
        ln_stats<G>(x + r * c, c, eps, &m, &rs);
        if (group_lane<G>() == 0) stats[2 * r] = m, stats[2 * r + 1] = rs;
    }
}

enum { LN_COLS = 32, LN_WARPS = CUDA_BLOCK / 32 };

// out[j] = sum over rows of dy * xhat, out[c + j] = sum of dy.  A block
// takes 32 columns; each of its warps sums every LN_WARPS-th row (coalesced
// along the columns), then the warps' sums are added in warp order.
__global__ static void layernorm_params_kernel(float *out, const float *dy, const float *x,
                                               const float *stats, int64_t rows, int64_t c)
{
    __shared__ float part[2][LN_WARPS][LN_COLS];
    int lane = threadIdx.x % LN_COLS, w = threadIdx.x / LN_COLS;
    int64_t j = (int64_t)blockIdx.x * LN_COLS + lane;
    float g = 0.0f, b = 0.0f;
    for (int64_t r = w; j < c && r < rows; r += LN_WARPS) {
        float d = dy[r * c + j];
        g += d * (x[r * c + j] - stats[2 * r]) * stats[2 * r + 1];
        b += d;
    }
    part[0][w][lane] = g;
    part[1][w][lane] = b;
    __syncthreads();
    if (w > 1 || j >= c) return;
    float s = 0.0f;
    for (int k = 0; k < LN_WARPS; k++) s += part[w][k][lane];
    out[w * c + j] = s;
}

static int64_t last_dim(const ir_type *t)
{
    return t->dim[t->rank - 1];
}

static float eps_of(const kern_args *a)
{
    return (float)a->node->attr.f[ATTR_NORM_EPS];
}

// rmsnorm's forward pass has no third input (bias).
static int layernorm_rows(const kern_args *a, int grad, int rms = 0)
{
    int64_t c = last_dim(a->out_t), n = ir_numel(a->out_t);
    if (c <= 0 || n == 0) return 0;
    const float *in2 = rms && !grad ? NULL : IN_F(2);
    ROW_LAUNCH(a, n / c, c, layernorm_kernel, OUT_F, IN_F(0), IN_F(1), in2, n / c, c, eps_of(a),
               grad, rms);
    return 0;
}

// rmsnorm (in: x, gain) and rmsnorm_grad (in: dy, x, gain): layernorm's
// kernels without the mean or the bias.
static int k_rmsnorm(const kern_args *a)
{
    return layernorm_rows(a, a->node->op == OP_RMSNORM_GRAD, 1);
}

// in: x, gain, bias
static int k_layernorm(const kern_args *a)
{
    return layernorm_rows(a, 0);
}

// in: dy, x, gain
static int k_layernorm_grad(const kern_args *a)
{
    return layernorm_rows(a, 1);
}

// in: dy, x; out [2c].  The rows' stats go to the node's scratch
// (ops_scratch_layernorm_grad_params sizes it), then one pass sums columns.
static int k_layernorm_grad_params(const kern_args *a)
{
    int64_t c = last_dim(a->in_t[1]), n = ir_numel(a->in_t[1]), rows = c ? n / c : 0;
    if (c <= 0) return 0;
    float *stats = (float *)a->scratch;
    GR_ASSERT(stats && a->scratch_task_bytes >= (size_t)(2 * rows) * sizeof(float));
    if (rows) ROW_LAUNCH(a, rows, c, layernorm_stats_kernel, stats, IN_F(1), rows, c, eps_of(a));
    CUDA_LAUNCH((unsigned)((c + LN_COLS - 1) / LN_COLS), CUDA_BLOCK, 0, cuda_stream(a),
                layernorm_params_kernel)
    (OUT_F, IN_F(0), IN_F(1), stats, rows, c);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- batch normalisation: x as [n, c, s] (s = H*W, 1 for [N,C]) ----
// A block sums one channel (two passes for the variance, as the CPU); the
// forward and dx are elementwise over x, with the channel's constants.

struct bn_dims {
    int64_t n, c, s;
    // Element e of channel ch: sample e / s, offset e % s in its run.
    __device__ int64_t at(int64_t ch, int64_t e) const
    {
        int64_t i = e / s;
        return (i * c + ch) * s + (e - i * s);
    }
    __device__ float count() const { return n * s > 0 ? (float)(n * s) : 1.0f; }
};

// out [2, c]: each channel's mean and biased variance.
__global__ static void bn_stats_kernel(float *out, const float *x, bn_dims d)
{
    int64_t m_el = d.n * d.s;
    for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
        float m = row_sum<CUDA_BLOCK>(m_el, [=](int64_t e) { return x[d.at(ch, e)]; }) / d.count();
        auto sq = [=](int64_t e) {
            float u = x[d.at(ch, e)] - m;
            return u * u;
        };
        float v = row_sum<CUDA_BLOCK>(m_el, sq) / d.count();
        if (threadIdx.x == 0) out[ch] = m, out[d.c + ch] = v;
    }
}

// dy[k], or 0 where a fused relu_grad's y[k] is not > 0 (y NULL: none), as
// relu_grad.
__device__ static float bn_dy(const float *dy, const float *y, int64_t k)
{
    return y && !(y[k] > 0.0f) ? 0.0f : dy[k];
}

// out [2, c]: dgain = sum dy * xhat, dbias = sum dy per channel (dy by bn_dy).
__global__ static void bn_params_kernel(float *out, const float *dy, const float *x, const float *y,
                                        const float *stats, bn_dims d, float eps)
{
    int64_t m_el = d.n * d.s;
    for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
        float m = stats[ch], rs = 1.0f / sqrtf(stats[d.c + ch] + eps);
        float g = row_sum<CUDA_BLOCK>(m_el, [=](int64_t e) {
            int64_t k = d.at(ch, e);
            return bn_dy(dy, y, k) * (x[k] - m);
        });
        float b = row_sum<CUDA_BLOCK>(m_el, [=](int64_t e) { return bn_dy(dy, y, d.at(ch, e)); });
        if (threadIdx.x == 0) out[ch] = g * rs, out[d.c + ch] = b;
    }
}

// batchnorm_apply (dy NULL: y = gain rstd (x - m) + bias, then max(y, 0)
// with relu, as the CPU's) or batchnorm_grad (dx = gain rstd (dy - dbias / M
// - xhat dgain / M), batch; gain rstd dy; dy by bn_dy).
__global__ static void bn_affine_kernel(float *out, const float *x, const float *dy, const float *y,
                                        const float *gain, const float *bias, const float *stats,
                                        const float *params, bn_dims d, float eps, int batch,
                                        int relu)
{
    int64_t total = d.n * d.c * d.s;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t ch = e / d.s % d.c;
        float m = stats[ch], rs = 1.0f / sqrtf(stats[d.c + ch] + eps), k = gain[ch] * rs;
        if (!dy) {
            float v = k * (x[e] - m) + bias[ch];
            out[e] = relu && !(v > 0.0f) ? 0.0f : v;
        } else if (batch) {
            float inv = 1.0f / d.count();
            out[e] = k * bn_dy(dy, y, e) - k * params[d.c + ch] * inv -
                     k * rs * params[ch] * inv * (x[e] - m);
        } else {
            out[e] = k * bn_dy(dy, y, e);
        }
    }
}

static bn_dims bn_dims_of(const ir_type *x)
{
    return bn_dims{x->dim[0], x->dim[1], x->rank == 4 ? x->dim[2] * x->dim[3] : 1};
}

// A block per channel (CUDA_BLOCK threads each).
static unsigned bn_channel_blocks(const bn_dims &d)
{
    return cuda_blocks(d.c * CUDA_BLOCK);
}

// in: x; out [2, c]
static int k_bn_stats(const kern_args *a)
{
    bn_dims d = bn_dims_of(a->in_t[0]);
    if (d.c <= 0) return 0;
    CUDA_LAUNCH(bn_channel_blocks(d), CUDA_BLOCK, 0, cuda_stream(a), bn_stats_kernel)
    (OUT_F, IN_F(0), d);
    CUDA_LAUNCHED(a);
    return 0;
}

// The grads' fused relu_grad's y, their last input (ATTR_BN_RELU), or NULL.
static const float *bn_relu_y(const kern_args *a)
{
    return a->node->attr.i[ATTR_BN_RELU] ? IN_F(a->node->n_in - 1) : NULL;
}

// in: dy, x, stats[, y]; out [2, c]
static int k_bn_grad_params(const kern_args *a)
{
    bn_dims d = bn_dims_of(a->in_t[1]);
    if (d.c <= 0) return 0;
    CUDA_LAUNCH(bn_channel_blocks(d), CUDA_BLOCK, 0, cuda_stream(a), bn_params_kernel)
    (OUT_F, IN_F(0), IN_F(1), bn_relu_y(a), IN_F(2), d, eps_of(a));
    CUDA_LAUNCHED(a);
    return 0;
}

static int bn_affine(const kern_args *a, const bn_dims &d, const float *x, const float *dy,
                     const float *gain, const float *bias, const float *stats, const float *params)
{
    int64_t n = d.n * d.c * d.s;
    const ir_attrs &at = a->node->attr;
    if (n == 0) return 0;
    CUDA_LAUNCH(cuda_blocks(n), CUDA_BLOCK, 0, cuda_stream(a), bn_affine_kernel)
    (OUT_F, x, dy, dy ? bn_relu_y(a) : NULL, gain, bias, stats, params, d, eps_of(a),
     (int)at.i[ATTR_BN_BATCH], at.i[ATTR_BN_RELU] != 0);
    CUDA_LAUNCHED(a);
    return 0;
}

// in: x, gain, bias, stats; relu: max(y, 0)
static int k_batchnorm(const kern_args *a)
{
    return bn_affine(a, bn_dims_of(a->in_t[0]), IN_F(0), NULL, IN_F(1), IN_F(2), IN_F(3), NULL);
}

// in: dy, x, gain, stats, params[, y]
static int k_bn_grad(const kern_args *a)
{
    return bn_affine(a, bn_dims_of(a->in_t[1]), IN_F(1), IN_F(0), IN_F(2), NULL, IN_F(3), IN_F(4));
}

// ---- LRN across the channels (axis 1) of [N, C, S], as cpu_lrn.c: a
// thread per element, every sum over the channels j upwards ----

struct lrn_shape {
    int64_t n, c, s, r;
    float bias, alpha, beta;
};

// bias + alpha * the sum of x_j^2 over the channels j in [k - r, k + r]
// inside [0, c), xp at one position of channel 0 (channels s apart).
__device__ static inline float lrn_scale(const float *xp, int64_t k, const lrn_shape &l)
{
    int64_t j0 = k - l.r > 0 ? k - l.r : 0, j1 = k + l.r < l.c - 1 ? k + l.r : l.c - 1;
    float acc = 0.0f;
    for (int64_t j = j0; j <= j1; j++) acc = __fadd_rn(acc, __fmul_rn(xp[j * l.s], xp[j * l.s]));
    return __fadd_rn(l.bias, __fmul_rn(l.alpha, acc));
}

// y_k = x_k s_k^-beta; GRAD: dx_k = dy_k s_k^-beta - 2 alpha beta x_k
// sum_j dy_j x_j s_j^-beta / s_j, each s_j made again (2r + 1 channels).
template <int GRAD>
__global__ static void lrn_kernel(float *out, const float *dy, const float *x,
                                  const __grid_constant__ lrn_shape l)
{
    int64_t total = l.n * l.c * l.s;
    CUDA_FOR(i, total)
    {
        int64_t p = i % l.s, k = i / l.s % l.c, base = i / (l.s * l.c) * l.c * l.s + p;
        const float *xp = x + base;
        float sk = lrn_scale(xp, k, l), ek = powf(sk, -l.beta);
        if (!GRAD) {
            out[i] = __fmul_rn(xp[k * l.s], ek);
        } else {
            const float *gp = dy + base;
            int64_t j0 = k - l.r > 0 ? k - l.r : 0, j1 = k + l.r < l.c - 1 ? k + l.r : l.c - 1;
            float acc = 0.0f, k2 = __fmul_rn(__fmul_rn(2.0f, l.alpha), l.beta);
            for (int64_t j = j0; j <= j1; j++) {
                float sj = lrn_scale(xp, j, l), ej = powf(sj, -l.beta);
                acc = __fadd_rn(acc,
                                __fdiv_rn(__fmul_rn(__fmul_rn(gp[j * l.s], xp[j * l.s]), ej), sj));
            }
            out[i] =
                __fsub_rn(__fmul_rn(gp[k * l.s], ek), __fmul_rn(__fmul_rn(k2, xp[k * l.s]), acc));
        }
    }
}

// lrn (in: x) and lrn_grad (in: dy, x) of [N, C, ...]
static int k_lrn(const kern_args *a)
{
    int grad = a->node->op == OP_LRN_GRAD;
    const ir_type *xt = a->in_t[grad];
    const ir_attrs *at = &a->node->attr;
    int64_t n = xt->dim[0], c = xt->dim[1], total = ir_numel(xt);
    if (total <= 0) return 0;
    lrn_shape l = {n,
                   c,
                   total / (n * c),
                   at->i[ATTR_LRN_RADIUS],
                   (float)at->f[ATTR_LRN_BIAS],
                   (float)at->f[ATTR_LRN_ALPHA],
                   (float)at->f[ATTR_LRN_BETA]};
    if (grad) {
        CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), lrn_kernel<1>)
        (OUT_F, IN_F(0), IN_F(1), l);
    } else {
        CUDA_LAUNCH(cuda_blocks(total), CUDA_BLOCK, 0, cuda_stream(a), lrn_kernel<0>)
        (OUT_F, (const float *)NULL, IN_F(0), l);
    }
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- ROPE: rotary position embeddings of [R, T, D], as cpu_rope.c ----

// A thread per (row, position, pair (i, i + D/2)); the angle in double, as
// the CPU makes it: t * base^(-2i/D).  inverse: rope_grad, sin negated.
__global__ static void rope_kernel(float *out, const float *x, int64_t rows, int64_t t, int64_t d,
                                   double base, int inverse)
{
    int64_t h = d / 2, total = rows * t * h;
    CUDA_FOR(k, total)
    {
        int64_t i = k % h, rt = k / h, pos = rt % t;
        double ang = (double)pos * pow(base, -2.0 * (double)i / (double)d);
        float c = (float)cos(ang), s = inverse ? -(float)sin(ang) : (float)sin(ang);
        const float *xr = x + rt * d;
        float *yr = out + rt * d, x0 = xr[i], x1 = xr[i + h];
        yr[i] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
        yr[i + h] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
    }
}

// rope (in: x) and rope_grad (in: dy) of [..., T, D]
static int k_rope(const kern_args *a)
{
    const ir_type *xt = a->in_t[0];
    int64_t d = xt->dim[xt->rank - 1], t = xt->dim[xt->rank - 2], total = ir_numel(xt);
    if (total <= 0 || d < 2) return 0;
    CUDA_LAUNCH(cuda_blocks(total / 2), CUDA_BLOCK, 0, cuda_stream(a), rope_kernel)
    (OUT_F, IN_F(0), total / (t * d), t, d, a->node->attr.f[ATTR_ROPE_BASE],
     a->node->op == OP_ROPE_GRAD);
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- LSTM cell: z [B, 4H] (i, f, g, o), s [B, 2H] (h, c); a thread per
// unit (row r, unit j) ----

template <int GRAD>
__global__ static void lstm_kernel(float *out, const float *dy, const float *z, const float *s,
                                   int64_t b, int64_t h)
{
    CUDA_FOR(i, b * h)
    {
        int64_t r = i / h, j = i % h;
        const float *zr = z + r * 4 * h;
        float zj[4] = {zr[j], zr[h + j], zr[2 * h + j], zr[3 * h + j]}, c = s[r * 2 * h + h + j];
        if (!GRAD) {
            act_lstm_cell(zj, c, &out[r * 2 * h + j], &out[r * 2 * h + h + j]);
        } else {
            float d[4], *dz = out + r * 6 * h;
            act_lstm_cell_grad(zj, c, dy[r * 2 * h + j], dy[r * 2 * h + h + j], d, &dz[5 * h + j]);
            dz[4 * h + j] = 0.0f;
            for (int k = 0; k < 4; k++) dz[k * h + j] = d[k];
        }
    }
}

// lstm_cell (in: z, s) and lstm_cell_grad (in: dy, z, s)
static int k_lstm_cell(const kern_args *a)
{
    int grad = a->node->op == OP_LSTM_CELL_GRAD;
    const ir_type *zt = a->in_t[grad];
    int64_t b = zt->dim[0], h = zt->dim[1] / 4;
    if (b * h <= 0) return 0;
    if (grad) {
        CUDA_LAUNCH(cuda_blocks(b * h), CUDA_BLOCK, 0, cuda_stream(a), lstm_kernel<1>)
        (OUT_F, IN_F(0), IN_F(1), IN_F(2), b, h);
    } else {
        CUDA_LAUNCH(cuda_blocks(b * h), CUDA_BLOCK, 0, cuda_stream(a), lstm_kernel<0>)
        (OUT_F, (const float *)NULL, IN_F(0), IN_F(1), b, h);
    }
    CUDA_LAUNCHED(a);
    return 0;
}

// ---- GRU cell: gx, gh [B, 3H] (r, z, n), h [B, H]; a thread per unit ----

template <int GRAD>
__global__ static void gru_kernel(float *out, const float *dy, const float *gx, const float *gh,
                                  const float *hp, int64_t b, int64_t h)
{
    CUDA_FOR(i, b * h)
    {
        int64_t r = i / h, j = i % h;
        const float *xr = gx + r * 3 * h, *hr = gh + r * 3 * h;
        float x3[3] = {xr[j], xr[h + j], xr[2 * h + j]}, h3[3] = {hr[j], hr[h + j], hr[2 * h + j]};
        if (!GRAD) {
            out[i] = act_gru_cell(x3, h3, hp[i]);
        } else {
            float dx3[3], dh3[3], *o = out + r * 7 * h;
            act_gru_cell_grad(x3, h3, hp[i], dy[i], dx3, dh3, &o[6 * h + j]);
            for (int k = 0; k < 3; k++) o[k * h + j] = dx3[k], o[3 * h + k * h + j] = dh3[k];
        }
    }
}

// gru_cell (in: gx, gh, h) and gru_cell_grad (in: dy, gx, gh, h)
static int k_gru_cell(const kern_args *a)
{
    int grad = a->node->op == OP_GRU_CELL_GRAD;
    const ir_type *ht = a->in_t[grad + 2];
    int64_t b = ht->dim[0], h = ht->dim[1];
    if (b * h <= 0) return 0;
    if (grad) {
        CUDA_LAUNCH(cuda_blocks(b * h), CUDA_BLOCK, 0, cuda_stream(a), gru_kernel<1>)
        (OUT_F, IN_F(0), IN_F(1), IN_F(2), IN_F(3), b, h);
    } else {
        CUDA_LAUNCH(cuda_blocks(b * h), CUDA_BLOCK, 0, cuda_stream(a), gru_kernel<0>)
        (OUT_F, (const float *)NULL, IN_F(0), IN_F(1), IN_F(2), b, h);
    }
    CUDA_LAUNCHED(a);
    return 0;
}

extern "C" const cuda_row cuda_rows_norm[] = {
    {OP_LAYERNORM, k_layernorm},
    {OP_LAYERNORM_GRAD, k_layernorm_grad},
    {OP_LAYERNORM_GRAD_PARAMS, k_layernorm_grad_params},
    {OP_RMSNORM, k_rmsnorm},
    {OP_RMSNORM_GRAD, k_rmsnorm},
    {OP_LRN, k_lrn},
    {OP_LRN_GRAD, k_lrn},
    {OP_ROPE, k_rope},
    {OP_ROPE_GRAD, k_rope},
    {OP_LSTM_CELL, k_lstm_cell},
    {OP_LSTM_CELL_GRAD, k_lstm_cell},
    {OP_GRU_CELL, k_gru_cell},
    {OP_GRU_CELL_GRAD, k_gru_cell},
    {OP_BN_STATS, k_bn_stats},
    {OP_BATCHNORM, k_batchnorm},
    {OP_BN_GRAD_PARAMS, k_bn_grad_params},
    {OP_BN_GRAD, k_bn_grad},
    {OP_COUNT, NULL},
};
