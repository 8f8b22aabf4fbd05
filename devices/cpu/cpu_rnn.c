/* cpu_rnn.c - LSTM_CELL and LSTM_CELL_GRAD, GRU_CELL and GRU_CELL_GRAD.
 *
 * LSTM_CELL and LSTM_CELL_GRAD: PyTorch's nn.LSTMCell after its
 * GEMM.  Row r of z [B, 4H] holds the gates' pre-activations i, f, g, o
 * (H each), row r of the state s [B, 2H] holds h, then c; unit j gives
 *   c' = sigmoid(f_j) c_j + sigmoid(i_j) tanh(g_j),   h' = sigmoid(o_j) tanh(c'),
 * out [B, 2H] = (h', c').  The gradient, from dy [B, 2H] = (dh', dc'), makes
 * the gates again from z and s (elementwise: cheaper than keeping them) and
 * writes [B, 6H] = (dz, ds), ds's h half 0.  The scalar math is act.h's, as
 * devices/cuda/k_norm.cu's.
 *
 * GRU_CELL and GRU_CELL_GRAD: PyTorch's nn.GRUCell after its two GEMMs,
 * gx = x @ w_ih + b_ih and gh = h @ w_hh + b_hh, each [B, 3H] (r, z, n: n's
 * h part is gated by r, so it cannot be summed into one GEMM with x's);
 * out [B, H] = h', the gradient [B, 7H] = (dgx, dgh, dh). */
#include "cpu_impl.h"

static void lstm_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lstm_args *l = vctx;
    int64_t h = l->h;
    for (int64_t r = lo; r < hi; r++) {
        const float *z = l->z + r * 4 * h, *c = l->s + r * 2 * h + h;
        float *out = l->out + r * 2 * h;
        for (int64_t j = 0; j < h; j++) {
            float zj[4] = {z[j], z[h + j], z[2 * h + j], z[3 * h + j]};
            act_lstm_cell(zj, c[j], &out[j], &out[h + j]);
        }
    }
}

static void lstm_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lstm_args *l = vctx;
    int64_t h = l->h;
    for (int64_t r = lo; r < hi; r++) {
        const float *z = l->z + r * 4 * h, *c = l->s + r * 2 * h + h, *dy = l->dy + r * 2 * h;
        float *dz = l->out + r * 6 * h, *ds = dz + 4 * h;
        for (int64_t j = 0; j < h; j++) {
            float zj[4] = {z[j], z[h + j], z[2 * h + j], z[3 * h + j]}, d[4];
            act_lstm_cell_grad(zj, c[j], dy[j], dy[h + j], d, &ds[h + j]);
            ds[j] = 0.0f;
            for (int k = 0; k < 4; k++) dz[k * h + j] = d[k];
        }
    }
}

void cpu_lstm_cell(cpu_pool *p, const cpu_lstm_args *l)
{
    if (l->h > 0) cpu_par_range(p, l->b, CPU_PAR_MIN / (8 * l->h) + 1, lstm_range, (void *)l);
}

void cpu_lstm_cell_grad(cpu_pool *p, const cpu_lstm_args *l)
{
    if (l->h > 0) cpu_par_range(p, l->b, CPU_PAR_MIN / (12 * l->h) + 1, lstm_grad_range, (void *)l);
}

static void gru_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_gru_args *g = vctx;
    int64_t h = g->hh;
    for (int64_t r = lo; r < hi; r++) {
        const float *gx = g->gx + r * 3 * h, *gh = g->gh + r * 3 * h, *hr = g->h + r * h;
        float *out = g->out + r * h;
        for (int64_t j = 0; j < h; j++) {
            float x3[3] = {gx[j], gx[h + j], gx[2 * h + j]};
            float h3[3] = {gh[j], gh[h + j], gh[2 * h + j]};
            out[j] = act_gru_cell(x3, h3, hr[j]);
        }
    }
}

static void gru_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_gru_args *g = vctx;
    int64_t h = g->hh;
    for (int64_t r = lo; r < hi; r++) {
        const float *gx = g->gx + r * 3 * h, *gh = g->gh + r * 3 * h, *hr = g->h + r * h;
        const float *dy = g->dy + r * h;
        float *dgx = g->out + r * 7 * h, *dgh = dgx + 3 * h, *dh = dgx + 6 * h;
        for (int64_t j = 0; j < h; j++) {
            float x3[3] = {gx[j], gx[h + j], gx[2 * h + j]};
            float h3[3] = {gh[j], gh[h + j], gh[2 * h + j]}, dx3[3], dh3[3];
            act_gru_cell_grad(x3, h3, hr[j], dy[j], dx3, dh3, &dh[j]);
            for (int k = 0; k < 3; k++) dgx[k * h + j] = dx3[k], dgh[k * h + j] = dh3[k];
        }
    }
}

void cpu_gru_cell(cpu_pool *p, const cpu_gru_args *g)
{
    if (g->hh > 0) cpu_par_range(p, g->b, CPU_PAR_MIN / (8 * g->hh) + 1, gru_range, (void *)g);
}

void cpu_gru_cell_grad(cpu_pool *p, const cpu_gru_args *g)
{
    if (g->hh > 0)
        cpu_par_range(p, g->b, CPU_PAR_MIN / (12 * g->hh) + 1, gru_grad_range, (void *)g);
}
