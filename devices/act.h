/* act.h - the scalar math of the elementwise ops added for ported models
 * (abs, sin, cos, softplus, log_sigmoid, silu, elu, maximum, minimum, pow)
 * and of their gradient helpers: one function for every device, so the CPU
 * (cpu_impl.h's op tables) and CUDA (k_elementwise.cu's functors) compute
 * the same numbers.  Where a naive form overflows, the stable one is used:
 * softplus(x) = max(x, 0) + log1p(e^-|x|), never log(1 + e^x). */
#ifndef GR_ACT_H
#define GR_ACT_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACT_FN __host__ __device__ static inline
#else
#define ACT_FN static inline
#endif

/* The e^x (of x <= 0) and tanh below: libm's, unless the includer names
 * its own first (the CPU's cpu_impl.h: straight-line code that vectorises,
 * where libm's are a call per element). */
#ifndef ACT_EXPF
#define ACT_EXPF expf
#endif
#ifndef ACT_TANHF
#define ACT_TANHF tanhf
#endif

/* 1 / (1 + e^-x) without overflow on either side. */
ACT_FN float act_sigmoid(float x)
{
    float e = ACT_EXPF(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

ACT_FN float act_softplus(float x)
{
    return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

/* log(sigmoid(x)) = -softplus(-x). */
ACT_FN float act_log_sigmoid(float x)
{
    return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
}

ACT_FN float act_silu(float x)
{
    return x * act_sigmoid(x);
}

/* alpha = 1; expm1 keeps small negative x exact. */
ACT_FN float act_elu(float x)
{
    return x > 0.0f ? x : expm1f(x);
}

/* The gradient helpers: dy times the derivative, at x or (elu) at y. */
ACT_FN float act_abs_grad(float dy, float x)
{
    return x > 0.0f ? dy : x < 0.0f ? -dy : 0.0f;
}

ACT_FN float act_softplus_grad(float dy, float x)
{
    return dy * act_sigmoid(x);
}

ACT_FN float act_log_sigmoid_grad(float dy, float x)
{
    return dy * act_sigmoid(-x);
}

ACT_FN float act_silu_grad(float dy, float x)
{
    float s = act_sigmoid(x);
    return dy * (s + x * s * (1.0f - s));
}

/* y > 0 exactly when x > 0; below, dy/dx = e^x = y + 1. */
ACT_FN float act_elu_grad(float dy, float y)
{
    return y > 0.0f ? dy : dy * (y + 1.0f);
}

/* maximum and minimum pass a NaN on, from either side, as numpy's do. */
ACT_FN float act_maximum(float x, float y)
{
    return x != x || y != y ? x + y : x > y ? x : y;
}

ACT_FN float act_minimum(float x, float y)
{
    return x != x || y != y ? x + y : x < y ? x : y;
}

ACT_FN int32_t act_maximum_i32(int32_t x, int32_t y)
{
    return x > y ? x : y;
}

ACT_FN int32_t act_minimum_i32(int32_t x, int32_t y)
{
    return x < y ? x : y;
}

/* One unit of an LSTM cell, PyTorch's nn.LSTMCell: the gates' pre-activations
 * z = (i, f, g, o) and the old cell c give
 *   c' = sigmoid(f) c + sigmoid(i) tanh(g),   h' = sigmoid(o) tanh(c')
 * (lstm_cell; devices/cpu/cpu_rnn.c and k_norm.cu call these).
 * c' of one unit from its gates' pre-activations i, f, g and its c, and
 * h' from o and c': by scalars (the CPU's loops vectorise over units then),
 * and both by arrays. */
ACT_FN float act_lstm_c(float zi, float zf, float zg, float c)
{
    return act_sigmoid(zf) * c + act_sigmoid(zi) * ACT_TANHF(zg);
}

ACT_FN float act_lstm_h(float zo, float cn)
{
    return act_sigmoid(zo) * ACT_TANHF(cn);
}

ACT_FN void act_lstm_cell(const float z[4], float c, float *h_out, float *c_out)
{
    float cn = act_lstm_c(z[0], z[1], z[2], c);
    *c_out = cn;
    *h_out = act_lstm_h(z[3], cn);
}

/* lstm_cell_grad: from dh' and dc' (and z and c, the forward's inputs), dz
 * of the four gates and dc.  dc' takes in what reaches it through h':
 * dc'' = dc' + dh' sigmoid(o) (1 - tanh(c')^2).  By scalars (the CPU's
 * loops vectorise over units then), and by arrays. */
ACT_FN void act_lstm_unit_grad(float zi, float zf, float zg, float zo, float c, float dh, float dcn,
                               float *di, float *df, float *dg, float *d_o, float *dc)
{
    float i = act_sigmoid(zi), f = act_sigmoid(zf), g = ACT_TANHF(zg), o = act_sigmoid(zo);
    float tc = ACT_TANHF(f * c + i * g);
    float d = dcn + dh * o * (1.0f - tc * tc);
    *di = d * g * i * (1.0f - i);
    *df = d * c * f * (1.0f - f);
    *dg = d * i * (1.0f - g * g);
    *d_o = dh * tc * o * (1.0f - o);
    *dc = d * f;
}

ACT_FN void act_lstm_cell_grad(const float z[4], float c, float dh, float dcn, float dz[4],
                               float *dc)
{
    act_lstm_unit_grad(z[0], z[1], z[2], z[3], c, dh, dcn, &dz[0], &dz[1], &dz[2], &dz[3], dc);
}

/* One unit of a GRU cell, PyTorch's nn.GRUCell: gx = (r, z, n) of x @ w_ih +
 * b_ih, gh the same of h @ w_hh + b_hh, and the old h give
 *   n = tanh(gx_n + sigmoid(gx_r + gh_r) gh_n),
 *   h' = (1 - sigmoid(gx_z + gh_z)) n + sigmoid(gx_z + gh_z) h
 * (gru_cell; devices/cpu/cpu_rnn.c and k_norm.cu call these). */
ACT_FN float act_gru_cell(const float gx[3], const float gh[3], float h)
{
    float r = act_sigmoid(gx[0] + gh[0]), z = act_sigmoid(gx[1] + gh[1]);
    float n = ACT_TANHF(gx[2] + r * gh[2]);
    return (1.0f - z) * n + z * h;
}

/* gru_cell_grad: from dh' (and the forward's inputs), dgx, dgh and dh; by
 * scalars, and by arrays. */
ACT_FN void act_gru_unit_grad(float xr, float xz, float xn, float hr, float hz, float hn, float h,
                              float dy, float *dxr, float *dxz, float *dxn, float *dhn, float *dh)
{
    float r = act_sigmoid(xr + hr), z = act_sigmoid(xz + hz);
    float n = ACT_TANHF(xn + r * hn);
    float dn = dy * (1.0f - z) * (1.0f - n * n);
    *dxr = dn * hn * r * (1.0f - r); /* dgh's r and z are dgx's */
    *dxz = dy * (h - n) * z * (1.0f - z);
    *dxn = dn;
    *dhn = dn * r;
    *dh = dy * z;
}

ACT_FN void act_gru_cell_grad(const float gx[3], const float gh[3], float h, float dy, float dgx[3],
                              float dgh[3], float *dh)
{
    act_gru_unit_grad(gx[0], gx[1], gx[2], gh[0], gh[1], gh[2], h, dy, &dgx[0], &dgx[1], &dgx[2],
                      &dgh[2], dh);
    dgh[0] = dgx[0];
    dgh[1] = dgx[1];
}

#endif
