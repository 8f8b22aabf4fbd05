/* cpu_rnn.c - LSTM_CELL and LSTM_CELL_GRAD, GRU_CELL and GRU_CELL_GRAD.
 *
 * LSTM_CELL and LSTM_CELL_GRAD: PyTorch's nn.LSTMCell after its
 * GEMM.  Row r of z [B, 4H] holds the gates' pre-activations i, f, g, o
 * (H each), row r of the state s [B, 2H] holds h, then c; unit j gives
 *   c' = sigmoid(f_j) c_j + sigmoid(i_j) tanh(g_j),   h' = sigmoid(o_j) tanh(c'),
 * out [B, 2H] = (h', c').  The gradient, from dy [B, 2H] = (dh', dc'), makes
 * the gates again from z and s (elementwise: cheaper than keeping them) and
 * writes [B, 6H] = (dz, ds), ds's h half 0.  The scalar math is act.h's, as
 * devices/cuda/k_norm.cu's, with the CPU's vectorising e^x and tanh: each
 * loop over a row's units is one of vectors.
 *
 * GRU_CELL and GRU_CELL_GRAD: PyTorch's nn.GRUCell after its two GEMMs,
 * gx = x @ w_ih + b_ih and gh = h @ w_hh + b_hh, each [B, 3H] (r, z, n: n's
 * h part is gated by r, so it cannot be summed into one GEMM with x's);
 * out [B, H] = h', the gradient [B, 7H] = (dgx, dgh, dh). */
/* No floating-point exception flags are read: the clamps and selects of
 * the vectorised sigmoid and tanh (cpu_impl.h) stay branch-free. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "cpu_impl.h"

/* A row's loop over units is one of vectors only in a function of its own
 * with restrict parameters: GCC honours restrict there, not on locals, nor
 * once the function is inlined into its caller. */
#define RNN_ROW __attribute__((noinline)) static

/* One row's units: act_lstm_cell by arrays. */
RNN_ROW void lstm_row(int64_t h, const float *restrict zi, const float *restrict zf,
                      const float *restrict zg, const float *restrict zo, const float *restrict c,
                      float *restrict ho, float *restrict co)
{
    for (int64_t j = 0; j < h; j++) {
        float cn = act_lstm_c(zi[j], zf[j], zg[j], c[j]);
        co[j] = cn;
        ho[j] = act_lstm_h(zo[j], cn);
    }
}

static void lstm_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lstm_args *l = vctx;
    int64_t h = l->h;
    for (int64_t r = lo; r < hi; r++) {
        const float *z = l->z + r * 4 * h;
        float *out = l->out + r * 2 * h;
        lstm_row(h, z, z + h, z + 2 * h, z + 3 * h, l->s + r * 2 * h + h, out, out + h);
    }
}

/* One row's units of act_lstm_cell_grad: the four gates' dz and ds (its
 * h half 0); every array its own parameter, as lstm_row's. */
RNN_ROW void lstm_grad_row(int64_t h, const float *restrict zi, const float *restrict zf,
                           const float *restrict zg, const float *restrict zo,
                           const float *restrict c, const float *restrict dh,
                           const float *restrict dc, float *restrict di, float *restrict df,
                           float *restrict dg, float *restrict dout, float *restrict dsh,
                           float *restrict dsc)
{
    for (int64_t j = 0; j < h; j++) {
        act_lstm_unit_grad(zi[j], zf[j], zg[j], zo[j], c[j], dh[j], dc[j], &di[j], &df[j], &dg[j],
                           &dout[j], &dsc[j]);
        dsh[j] = 0.0f;
    }
}

static void lstm_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_lstm_args *l = vctx;
    int64_t h = l->h;
    for (int64_t r = lo; r < hi; r++) {
        const float *z = l->z + r * 4 * h, *dy = l->dy + r * 2 * h;
        float *dz = l->out + r * 6 * h;
        lstm_grad_row(h, z, z + h, z + 2 * h, z + 3 * h, l->s + r * 2 * h + h, dy, dy + h, dz,
                      dz + h, dz + 2 * h, dz + 3 * h, dz + 4 * h, dz + 5 * h);
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

RNN_ROW void gru_row(int64_t h, const float *restrict gx, const float *restrict gh,
                     const float *restrict hold, float *restrict out)
{
    for (int64_t j = 0; j < h; j++) {
        float x3[3] = {gx[j], gx[h + j], gx[2 * h + j]}, h3[3] = {gh[j], gh[h + j], gh[2 * h + j]};
        out[j] = act_gru_cell(x3, h3, hold[j]);
    }
}

static void gru_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_gru_args *g = vctx;
    int64_t h = g->hh;
    for (int64_t r = lo; r < hi; r++)
        gru_row(h, g->gx + r * 3 * h, g->gh + r * 3 * h, g->h + r * h, g->out + r * h);
}

/* One row's dgx (r, z, n), dgh (r, z, n) and dh, each its own parameter. */
RNN_ROW void gru_grad_row(int64_t h, const float *restrict xr, const float *restrict xz,
                          const float *restrict xn, const float *restrict hr,
                          const float *restrict hz, const float *restrict hn,
                          const float *restrict hold, const float *restrict dy, float *restrict dxr,
                          float *restrict dxz, float *restrict dxn, float *restrict dhr,
                          float *restrict dhz, float *restrict dhn, float *restrict dh)
{
    for (int64_t j = 0; j < h; j++) {
        act_gru_unit_grad(xr[j], xz[j], xn[j], hr[j], hz[j], hn[j], hold[j], dy[j], &dxr[j],
                          &dxz[j], &dxn[j], &dhn[j], &dh[j]);
        dhr[j] = dxr[j];
        dhz[j] = dxz[j];
    }
}

static void gru_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_gru_args *g = vctx;
    int64_t h = g->hh;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = g->gx + r * 3 * h, *hh = g->gh + r * 3 * h;
        float *d = g->out + r * 7 * h;
        gru_grad_row(h, x, x + h, x + 2 * h, hh, hh + h, hh + 2 * h, g->h + r * h, g->dy + r * h, d,
                     d + h, d + 2 * h, d + 3 * h, d + 4 * h, d + 5 * h, d + 6 * h);
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
