// k_softmax.cu - softmax, log-softmax, cross-entropy and their gradients
// along the last axis (rows of length c), computing what
// devices/cpu/cpu_softmax.c computes: every row subtracts its max before
// exponentiating, softmax is exp(x - m) * (1 / sum), log-softmax is
// (x - m) - log(sum), a label outside [0, c) contributes no target term
// (and is reported through cuda_check_ids, as the CPU faults on it).  A
// causal mask keeps the first i + 1 entries of row i of each [c, c] block
// (the rest are 0, in softmax and its gradient).
//
// Rows are split over groups of threads (cu_rows.cuh); the float sums are
// ordered differently from the CPU's.  Each thread writes only the
// elements it read (or, past the mask, none), after the row's reductions,
// so out may alias an input.
#include "cu_rows.cuh"

template <int G> __device__ static float row_sum_exp(const float *x, float m, int64_t c)
{
    return row_sum<G>(c, [=](int64_t i) { return expf(x[i] - m); });
}

// The entries of row r the mask keeps: all c, or up to the diagonal.
__device__ static int64_t kept(int64_t r, int64_t c, int causal)
{
    return causal ? r % c + 1 : c;
}

template <int G>
__global__ static void softmax_kernel(float *out, const float *x, int64_t rows, int64_t c,
                                      int is_log, int causal)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float *o = out + r * c;
        int64_t k = kept(r, c, causal);
        float m = row_max<G>(xr, k);
        float s = row_sum_exp<G>(xr, m, k);
        if (is_log) {
            float ls = logf(s);
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = (xr[i] - m) - ls;
        } else {
            float inv = 1.0f / s;
            for (int64_t i = group_lane<G>(); i < c; i += G)
                o[i] = i < k ? expf(xr[i] - m) * inv : 0.0f;
        }
    }
}

// softmax: y * (dy - <dy, y>); log-softmax: dy - exp(y) * sum(dy).
template <int G>
__global__ static void softmax_grad_kernel(float *out, const float *dy, const float *y,
                                           int64_t rows, int64_t c, int is_log, int causal)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *dr = dy + r * c, *yr = y + r * c;
        float *o = out + r * c;
        int64_t k = kept(r, c, causal);
        if (is_log) {
            float s = row_sum<G>(c, [=](int64_t i) { return dr[i]; });
            for (int64_t i = group_lane<G>(); i < c; i += G) o[i] = dr[i] - expf(yr[i]) * s;
        } else {
            float d = row_sum<G>(k, [=](int64_t i) { return dr[i] * yr[i]; });
            for (int64_t i = group_lane<G>(); i < c; i += G)
                o[i] = i < k ? yr[i] * (dr[i] - d) : 0.0f;
        }
    }
}

__device__ static int label_ok(int32_t l, int64_t c)
{
    return l >= 0 && l < c;
}

// out[r] = logsumexp(row) - row[label], as (m - row[label]) + log(sum).
template <int G>
__global__ static void xent_kernel(float *out, const float *x, const int32_t *labels, int64_t rows,
                                   int64_t c)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float m = row_max<G>(xr, c);
        float ls = logf(row_sum_exp<G>(xr, m, c));
        int32_t l = labels[r];
        if (group_lane<G>() == 0) out[r] = (label_ok(l, c) ? m - xr[l] : m) + ls;
    }
}

// out = (softmax(row) - onehot(label)) * dy[r], rounded as the CPU does:
// p = exp(x - m) * (1 / sum), then p - 1 at the label, then times dy[r].
template <int G>
__global__ static void xent_grad_kernel(float *out, const float *x, const int32_t *labels,
                                        const float *dy, int64_t rows, int64_t c)
{
    for (int64_t r = group_row<G>(); r < rows; r += group_rows_stride<G>()) {
        const float *xr = x + r * c;
        float *o = out + r * c;
        float m = row_max<G>(xr, c);
        float inv = 1.0f / row_sum_exp<G>(xr, m, c);
        int32_t l = labels[r];
        int64_t at = label_ok(l, c) ? l : -1;
        float g = dy[r];
        for (int64_t i = group_lane<G>(); i < c; i += G) {
            float p = expf(xr[i] - m) * inv;
            if (i == at) p -= 1.0f;
            o[i] = p * g;
        }
    }
}

#define IN_F(k) ((const float *)a->in[k])
#define IN_I(k) ((const int32_t *)a->in[k])
#define OUT_F   ((float *)a->out)

static int64_t last_dim(const ir_type *t)
{
    return t->rank ? t->dim[t->rank - 1] : 1;
}

// causal: softmax's mask (ATTR_MASK) is OP_MASK_CAUSAL.
static void softmax(const kern_args *a, int is_log, int causal)
{
    int64_t c = last_dim(a->out_t), n = ir_numel(a->out_t);
    if (c <= 0 || n == 0) return;
    ROW_LAUNCH(a, n / c, c, softmax_kernel, OUT_F, IN_F(0), n / c, c, is_log, causal);
}

// in: dy, y (the forward's output).
static void softmax_grad(const kern_args *a, int is_log, int causal)
{
    int64_t c = last_dim(a->out_t), n = ir_numel(a->out_t);
    if (c <= 0 || n == 0) return;
    ROW_LAUNCH(a, n / c, c, softmax_grad_kernel, OUT_F, IN_F(0), IN_F(1), n / c, c, is_log, causal);
}

static int causal(const kern_args *a)
{
    return a->node->attr.i[ATTR_MASK] == OP_MASK_CAUSAL;
}

static int k_softmax(const kern_args *a)
{
    softmax(a, 0, causal(a));
    return 0;
}

static int k_log_softmax(const kern_args *a)
{
    softmax(a, 1, 0);
    return 0;
}

static int k_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 0, causal(a));
    return 0;
}

static int k_log_softmax_grad(const kern_args *a)
{
    softmax_grad(a, 1, 0);
    return 0;
}

// in: logits f32[N,C], labels i32[N]; out f32[N].  With C = 0 every label
// is bad (the step fails): the output is only made defined.
static int k_xent(const kern_args *a)
{
    int64_t rows = a->in_t[0]->dim[0], c = a->in_t[0]->dim[1];
    cuda_check_ids(a, IN_I(1), rows, c, CUDA_FAULT_LABEL);
    if (rows == 0) return 0;
    if (c == 0) {
        CUDA_CHECK(cudaMemsetAsync(a->out, 0, (size_t)rows * sizeof(float), cuda_stream(a)), a);
        return 0;
    }
    ROW_LAUNCH(a, rows, c, xent_kernel, OUT_F, IN_F(0), IN_I(1), rows, c);
    return 0;
}

// in: logits f32[N,C], labels i32[N], dy f32[N]; out f32[N,C].
static int k_xent_grad(const kern_args *a)
{
    int64_t rows = a->in_t[0]->dim[0], c = a->in_t[0]->dim[1];
    cuda_check_ids(a, IN_I(1), rows, c, CUDA_FAULT_LABEL);
    if (rows == 0 || c == 0) return 0;
    ROW_LAUNCH(a, rows, c, xent_grad_kernel, OUT_F, IN_F(0), IN_I(1), IN_F(2), rows, c);
    return 0;
}

extern "C" const cuda_row cuda_rows_softmax[] = {
    {OP_SOFTMAX, k_softmax},
    {OP_LOG_SOFTMAX, k_log_softmax},
    {OP_SOFTMAX_GRAD, k_softmax_grad},
    {OP_LOG_SOFTMAX_GRAD, k_log_softmax_grad},
    {OP_SOFTMAX_XENT, k_xent},
    {OP_XENT_GRAD, k_xent_grad},
    {OP_COUNT, NULL},
};
