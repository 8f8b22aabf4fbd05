/* cpu_direct.c - 3x3 convolutions computed directly with AVX-512, for the
 * layers conv_direct_ok takes on a CPU that has it (cpu_direct_ok).
 *
 * (A layer of stride 1 and padding 1 whose output is as large as its
 * input skips the source below and reads x itself: "implicit" tiles.)
 *
 * Each image is copied once into a zero-padded "source": per channel,
 * stride^2 phase planes, plane (a, b) holding the padded image's rows
 * i * stride + a and columns j * stride + b.  Output position (oh, ow),
 * numbered q = oh * WQ + ow over a grid as wide as a plane (WQ; the columns
 * past OW are junk, dropped), reads tap (kh, kw) at
 *     source + plane(kh % s, kw % s) + (kh / s) * WQ + kw / s + q,
 * so every tap of 16 consecutive outputs is one contiguous load whatever
 * the stride, and a convolution is, per output channel o,
 *     y[o][q] = sum over c, taps t of w[o][c][t] * source[c][off[t] + q].
 * The forward pass keeps a tile of 8 channels x 16 J outputs in
 * registers (J = 1-3 vectors); the input gradient of a stride-1 layer is
 * the same pass over dy with the filters turned by 180 degrees and their
 * channels swapped, padded by k - 1 - pad, a stride-2 layer's four passes
 * over dy, one a parity of dx's rows and columns (phase_taps); the filter
 * gradient is
 *     dw[o][c][t] = sum over images, valid q of dy[o][q] * source[c][off[t] + q],
 * 16 output channels a vector (dy transposed) x the 9 taps of 3 source
 * channels in registers across a chunk of images.
 *
 * Against Winograd and im2col + GEMM this skips every transform and column
 * matrix, and it runs at AVX-512's width where OpenBLAS may have been told
 * to use AVX2 (OPENBLAS_CORETYPE).  Sums run in another order than the
 * GEMMs': test_kernels checks all three kernels against the reference. */
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/conv_algo.h"
#include "cpu_avx512.h"
#include "cpu_impl.h"

/* GCC's predictive commoning would keep the filter gradient's broadcasts
 * of one column for the next (spilled: 27 accumulators fill the registers)
 * instead of loading each again, 10% slower. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-predictive-commoning")
#endif

#define DR CONV_DIRECT_OC
#define DV AVX512_W
_Static_assert(DR == AVX512_ROWS, "a forward tile is avx512_tile's rows");

int cpu_has_avx512(void)
{
    static atomic_int has = -1; /* racing threads store the same answer */
    int v = atomic_load_explicit(&has, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && !getenv("GR_NO_AVX512");
        atomic_store_explicit(&has, v, memory_order_relaxed);
    }
    return v;
}

int cpu_direct_ok(const cpu_conv_shape *s, int grad)
{
    if (s->n <= 0 || !cpu_has_avx512()) return 0;
    return grad == 1 ? conv_direct_gx_ok(s->c, s->oc, s->kh, s->kw, s->stride, s->pad)
                     : conv_direct_ok(s->c, s->oc, s->kh, s->kw, s->stride, s->pad);
}

/* One pass: `cin` channels of h x w in, `cout` of oh x ow out, at stride;
 * flip: the filters' channels swapped (an input gradient's). */
typedef struct direct_job {
    conv_direct g;
    int64_t n, cin, cout, h, w, oh, ow, stride, pad;
    int64_t dh, dw, dpad; /* a strided layer's input gradient: dx's size, the padding */
    const float *x, *filt, *bias;
    const float *dy; /* the filter gradient's */
    float *y;
    int relu, flip;
    cpu_tasks tasks;
} direct_job;

/* A pass's taps: where output 0 reads each in a source channel, and which
 * of the filter's k*k it is. */
typedef struct direct_taps {
    int n;
    int32_t off[CONV_DIRECT_TAPS];
    int f[CONV_DIRECT_TAPS];
} direct_taps;

/* The next image's (or chunk's) reads, a few cache lines at a time
 * between this one's tiles: a step's activations are far larger than the
 * caches, and a source copied from memory that no one asked for in time
 * waits on each line (on the ResNet at 1 thread, 1.5 ms of the 24 ms a
 * step spent in convolutions, most of it in the filter gradients). */
typedef struct direct_ahead {
    const char *p, *end;
    int64_t lines; /* a call's */
    int write;
} direct_ahead;

/* `floats` from p (none for NULL) over `calls` calls of ahead_some; write:
 * lines that will be stored to. */
static direct_ahead ahead_of(const float *p, int64_t floats, int64_t calls, int write)
{
    int64_t lines = p ? (floats * (int64_t)sizeof *p + 63) / 64 : 0;
    return (direct_ahead){(const char *)p, (const char *)p + lines * 64,
                          calls > 0 ? (lines + calls - 1) / calls : lines, write};
}

static inline void ahead_some(direct_ahead *a)
{
    for (int64_t i = 0; i < a->lines && a->p < a->end; i++, a->p += 64)
        if (a->write)
            __builtin_prefetch(a->p, 1);
        else
            __builtin_prefetch(a->p);
}

/* Lanes of the vector at column k of a row n wide. */
static inline __mmask16 lanes_of(int64_t k, int64_t n)
{
    return k + DV <= n ? (__mmask16)0xffff : (__mmask16)((1u << (n - k)) - 1);
}

/* The lanes whose columns k + lane lie in [0, n). */
static inline AVX512 __mmask16 inside(int64_t k, int64_t n)
{
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i col = _mm512_add_epi32(_mm512_set1_epi32((int)k), lane);
    return _mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()) &
           _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32((int)n));
}

/* The source of one image: channels `cs` apart, their phase planes `ps`
 * apart, every float of them written (the padding and each channel's tail
 * past its planes are zeros).  Column k of plane (a, b)'s row i is the
 * image's row i s + a - pad, column k s + b - pad; a vector of 16 columns
 * at a time, through the same masks in every row and channel.  Masked
 * lanes are never read, so a load may start before its row or end past it. */
static AVX512 void source_image(const direct_job *j, const float *x, float *src, int64_t cs,
                                int64_t ps)
{
    const conv_direct *g = &j->g;
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    int64_t s = j->stride, w = j->w;
    for (int64_t a = 0; a < s; a++)
        for (int64_t b = 0; b < s; b++)
            for (int64_t k = 0; k < g->wq; k += DV) {
                int64_t e = k * s + b - j->pad; /* the image's column at lane 0 */
                __mmask16 in0 = inside(e, w), in1 = s == 2 ? inside(e + DV, w) : 0;
                __mmask16 out = lanes_of(k, g->wq);
                for (int64_t c = 0; c < j->cin; c++) {
                    float *dst = src + c * cs + (a * s + b) * ps + k;
                    const float *img = x + c * j->h * w + e;
                    for (int64_t i = 0; i < g->hq; i++, dst += g->wq) {
                        int64_t r = i * s + a - j->pad;
                        __m512 v = _mm512_setzero_ps();
                        if (r >= 0 && r < j->h) {
                            v = _mm512_maskz_loadu_ps(in0, img + r * w);
                            if (s == 2)
                                v = _mm512_permutex2var_ps(
                                    v, even, _mm512_maskz_loadu_ps(in1, img + r * w + DV));
                        }
                        _mm512_mask_storeu_ps(dst, out, v);
                    }
                }
            }
    for (int64_t c = 0; c < j->cin; c++)
        memset(src + c * cs + s * s * ps, 0, (size_t)(cs - s * s * ps) * sizeof *src);
}

/* The k*k taps of a source channel whose phase planes are `ps` apart;
 * flip: the filter turned by 180 degrees (a stride-1 input gradient). */
static void all_taps(const direct_job *j, int64_t ps, direct_taps *tp)
{
    const conv_direct *g = &j->g;
    int64_t k = g->k, s = j->stride;
    tp->n = (int)(k * k);
    for (int64_t kh = 0; kh < k; kh++)
        for (int64_t kw = 0; kw < k; kw++) {
            int64_t t = kh * k + kw;
            tp->off[t] = (int32_t)(((kh % s) * s + kw % s) * ps + (kh / s) * g->wq + kw / s);
            tp->f[t] = (int)(j->flip ? k * k - 1 - t : t);
        }
}

/* A stride-2 layer's input gradient at the dx positions of parity (a, b)
 * (of row + pad, column + pad): dx at (2U + a - pad, 2V + b - pad) takes
 * dy at (U - m, V - n) through filter tap (a + 2m, b + 2n), read from dy
 * padded by one row and column before. */
static void phase_taps(const direct_job *j, int64_t a, int64_t b, direct_taps *tp)
{
    int64_t k = j->g.k;
    tp->n = 0;
    for (int64_t m = 0; a + 2 * m < k; m++)
        for (int64_t n = 0; b + 2 * n < k; n++, tp->n++) {
            tp->off[tp->n] = (int32_t)((1 - m) * j->g.wq + 1 - n);
            tp->f[tp->n] = (int)((a + 2 * m) * k + b + 2 * n);
        }
}

/* wp[ob][c][t][r] = filter (ob * DR + r, c, tap t), 0 past cout;
 * wp[ob][t][c][r] when taps_outer. */
static void pack_filter(const direct_job *j, const direct_taps *tp, float *wp, int taps_outer)
{
    int64_t kk = j->g.k * j->g.k, blocks = (j->cout + DR - 1) / DR;
    for (int64_t ob = 0; ob < blocks; ob++)
        for (int64_t a = 0; a < (taps_outer ? tp->n : j->cin); a++)
            for (int64_t b = 0; b < (taps_outer ? j->cin : tp->n); b++)
                for (int64_t r = 0; r < DR; r++) {
                    int64_t o = ob * DR + r, c = taps_outer ? b : a;
                    int f = tp->f[taps_outer ? a : b];
                    float v = 0.0f;
                    if (o < j->cout)
                        v = j->flip ? j->filt[(c * j->cout + o) * kk + f]
                                    : j->filt[(o * j->cin + c) * kk + f];
                    *wp++ = v;
                }
}

#define FWD_TILES(J)                                                                               \
    static AVX512 __attribute__((noinline)) void fwd_tiles##J(                                     \
        const direct_job *j, const float *src, const direct_taps *tp, const float *wp, float *dst, \
        direct_ahead *next)                                                                        \
    {                                                                                              \
        const conv_direct *g = &j->g;                                                              \
        int64_t blocks = (j->cout + DR - 1) / DR;                                                  \
        for (int64_t q = 0; q < g->nqp; q += J * DV) {                                             \
            ahead_some(&next[0]), ahead_some(&next[1]);                                            \
            for (int64_t ob = 0; ob < blocks; ob++)                                                \
                avx512_tile(src + q, g->cs, j->cin, tp->off, tp->n, wp + ob * j->cin * tp->n * DR, \
                            dst + ob * DR * g->nqp + q, g->nqp, J, 1.0f, 0);                       \
        }                                                                                          \
    }
FWD_TILES(1)
FWD_TILES(2)
FWD_TILES(3)

/* The grid's valid columns into y, with the bias and the relu (a NaN
 * becomes 0, as cpu_relu makes it). */
static AVX512 void store_image(const direct_job *j, const float *dst, float *y)
{
    const conv_direct *g = &j->g;
    for (int64_t o = 0; o < j->cout; o++) {
        __m512 b = _mm512_set1_ps(j->bias ? j->bias[o] : 0.0f);
        for (int64_t i = 0; i < j->oh; i++) {
            const float *d = dst + o * g->nqp + i * g->wq;
            float *out = y + (o * j->oh + i) * j->ow;
            for (int64_t k = 0; k < j->ow; k += DV) {
                __mmask16 m = lanes_of(k, j->ow);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + k), b);
                if (j->relu) v = _mm512_max_ps(v, _mm512_setzero_ps()); /* max(NaN, 0) is 0 */
                _mm512_mask_storeu_ps(out + k, m, v);
            }
        }
    }
}

/* Phase (a, b)'s grid into the dx positions of that parity (phase_taps):
 * 8 of a row's grid values spread over the even lanes of a vector, stored
 * at their columns 2v + b - dpad, through the same mask in every row. */
static AVX512 void scatter_phase(const direct_job *j, const float *dst, int64_t a, int64_t b,
                                 float *dx)
{
    const conv_direct *g = &j->g;
    const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    for (int64_t v = 0; v < j->ow; v += DV / 2) {
        int64_t col = 2 * v + b - j->dpad, n = j->ow - v < DV / 2 ? j->ow - v : DV / 2;
        __mmask16 in = lanes_of(0, n);
        __mmask16 m = inside(col, j->dw) & (__mmask16)0x5555 & (__mmask16)((1u << (2 * n)) - 1);
        for (int64_t c = 0; c < j->cout; c++)
            for (int64_t u = 0; u < j->oh; u++) {
                int64_t i = 2 * u + a - j->dpad;
                if (i < 0 || i >= j->dh) continue;
                __m512 e = _mm512_maskz_loadu_ps(in, dst + c * g->nqp + u * g->wq + v);
                _mm512_mask_storeu_ps(dx + (c * j->dh + i) * j->dw + col, m,
                                      _mm512_permutexvar_ps(twice, e));
            }
    }
}

static void tiles(const direct_job *j, const float *src, const direct_taps *tp, const float *wp,
                  float *dst, direct_ahead *next)
{
    if (j->g.jv == 3)
        fwd_tiles3(j, src, tp, wp, dst, next);
    else if (j->g.jv == 2)
        fwd_tiles2(j, src, tp, wp, dst, next);
    else
        fwd_tiles1(j, src, tp, wp, dst, next);
}

/* ---- stride 1, padding 1, y as large as x: no source ----
 * Output q = row * W + column reads tap (kh, kw) at x + q + (kh - 1) W +
 * kw - 1 of each channel: one load of 16 consecutive outputs' inputs,
 * across rows, but for the lanes whose input lies in the padding (first
 * or last row or column), masked to zero.  The outputs are y itself: no
 * source copied in, no grid copied out, no junk lane but the last
 * vector's tail.  Taps outermost, so one tap's J masks are live at a time
 * (the forward pass and input gradient of the ResNet's stride-1 3x3
 * layers: 8-22% faster a pass than through a source, and its stem 40%). */
#define IMPLICIT_MAX 4096 /* outputs of an image: the masks live on the stack */

static int implicit_ok(const direct_job *j)
{
    return j->stride == 1 && j->pad == 1 && !j->dh && j->h == j->oh && j->w == j->ow &&
           j->oh * j->ow <= IMPLICIT_MAX;
}

/* mk[v * 9 + t]: the lanes of output vector v whose tap t lies inside the
 * image (none past the last output). */
static void implicit_masks(const direct_job *j, __mmask16 *mk)
{
    int64_t ohw = j->oh * j->ow, nv = (ohw + DV - 1) / DV;
    memset(mk, 0, (size_t)(nv * CONV_DIRECT_TAPS) * sizeof *mk);
    for (int64_t q = 0; q < ohw; q++) {
        int64_t r = q / j->ow, c = q % j->ow;
        for (int t = 0; t < CONV_DIRECT_TAPS; t++) {
            int kh = t / 3, kw = t % 3;
            if ((kh == 0 && r == 0) || (kh == 2 && r == j->oh - 1) || (kw == 0 && c == 0) ||
                (kw == 2 && c == j->ow - 1))
                continue;
            mk[q / DV * CONV_DIRECT_TAPS + t] |= (__mmask16)(1u << (q % DV));
        }
    }
}

/* 8 output channels x J vectors from q (x and y at q), the taps' weights
 * wp[t][c][8]; rows: the output channels that exist. */
static inline __attribute__((always_inline)) AVX512 void
implicit_tile(const direct_job *j, const float *x, const __mmask16 *mk, const float *wp, float *y,
              int64_t q, const float *bias, int64_t rows, int J)
{
    int64_t plane = j->h * j->w, ohw = j->oh * j->ow;
    __m512 acc[DR][3];
#pragma GCC unroll 8
    for (int r = 0; r < DR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < J; v++) acc[r][v] = _mm512_setzero_ps();
    for (int t = 0; t < CONV_DIRECT_TAPS; t++) {
        const float *p = x + (t / 3 - 1) * j->w + (t % 3 - 1);
        __mmask16 m0 = mk[t], m1 = J > 1 ? mk[CONV_DIRECT_TAPS + t] : 0;
        __mmask16 m2 = J > 2 ? mk[2 * CONV_DIRECT_TAPS + t] : 0;
        for (int64_t c = 0; c < j->cin; c++, p += plane, wp += DR) {
            __m512 x0 = _mm512_maskz_loadu_ps(m0, p);
            __m512 x1 = J > 1 ? _mm512_maskz_loadu_ps(m1, p + DV) : x0;
            __m512 x2 = J > 2 ? _mm512_maskz_loadu_ps(m2, p + 2 * DV) : x0;
#pragma GCC unroll 8
            for (int r = 0; r < DR; r++) {
                __m512 wv = _mm512_set1_ps(wp[r]);
                acc[r][0] = _mm512_fmadd_ps(x0, wv, acc[r][0]);
                if (J > 1) acc[r][1] = _mm512_fmadd_ps(x1, wv, acc[r][1]);
                if (J > 2) acc[r][2] = _mm512_fmadd_ps(x2, wv, acc[r][2]);
            }
        }
    }
#pragma GCC unroll 8 /* a constant r, so the accumulators stay in registers */
    for (int r = 0; r < DR; r++) {
        if (r >= rows) break;
        __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.0f);
#pragma GCC unroll 3
        for (int v = 0; v < J; v++) {
            __m512 o = _mm512_add_ps(acc[r][v], b);
            if (j->relu) o = _mm512_max_ps(o, _mm512_setzero_ps()); /* max(NaN, 0) is 0 */
            _mm512_mask_storeu_ps(y + r * ohw + v * DV, lanes_of(q + v * DV, ohw), o);
        }
    }
}

#define IMPLICIT_TILES(J)                                                                          \
    static AVX512 __attribute__((noinline)) void implicit_tiles##J(                                \
        const direct_job *j, const float *x, const __mmask16 *mk, const float *wp, float *y,       \
        int64_t q)                                                                                 \
    {                                                                                              \
        int64_t blocks = (j->cout + DR - 1) / DR, ohw = j->oh * j->ow;                             \
        for (int64_t ob = 0; ob < blocks; ob++) {                                                  \
            int64_t rows = j->cout - ob * DR < DR ? j->cout - ob * DR : DR;                        \
            implicit_tile(j, x + q, mk, wp + ob * CONV_DIRECT_TAPS * j->cin * DR,                  \
                          y + ob * DR * ohw + q, q, j->bias ? j->bias + ob * DR : NULL, rows, J);  \
        }                                                                                          \
    }
IMPLICIT_TILES(1)
IMPLICIT_TILES(2)
IMPLICIT_TILES(3)

/* The task's slice: the packed filters. */
static void implicit_task(const direct_job *j, int t)
{
    float *wp = cpu_task_slice(&j->tasks, t);
    direct_taps tp;
    all_taps(j, 0, &tp);
    pack_filter(j, &tp, wp, 1);
    __mmask16 mk[IMPLICIT_MAX / DV * CONV_DIRECT_TAPS];
    implicit_masks(j, mk);
    int64_t ohw = j->oh * j->ow, nv = (ohw + DV - 1) / DV, img = j->cin * j->h * j->w;
    for (int64_t n = t; n < j->n; n += j->tasks.n) {
        int64_t m = n + j->tasks.n, calls = (nv + 2) / 3;
        direct_ahead next[2] = {
            ahead_of(m < j->n ? j->x + m * img : NULL, img, calls, 0),
            ahead_of(m < j->n ? j->y + m * j->cout * ohw : NULL, j->cout * ohw, calls, 1)};
        const float *x = j->x + n * img;
        float *y = j->y + n * j->cout * ohw;
        for (int64_t v = 0, jv; v < nv; v += jv) { /* 4 left: 2 + 2, not 3 + 1 */
            int64_t left = nv - v;
            jv = left == 4 || left == 2 ? 2 : left >= 3 ? 3 : 1;
            ahead_some(&next[0]), ahead_some(&next[1]);
            const __mmask16 *mv = mk + v * CONV_DIRECT_TAPS;
            if (jv == 3)
                implicit_tiles3(j, x, mv, wp, y, v * DV);
            else if (jv == 2)
                implicit_tiles2(j, x, mv, wp, y, v * DV);
            else
                implicit_tiles1(j, x, mv, wp, y, v * DV);
        }
    }
}

/* The task's slice: the packed filters (of each phase, for a strided
 * input gradient), the source, the output grid. */
static void fwd_task(void *arg, int t)
{
    const direct_job *j = arg;
    const conv_direct *g = &j->g;
    if (implicit_ok(j)) {
        implicit_task(j, t);
        return;
    }
    float *wp = cpu_task_slice(&j->tasks, t), *src = wp + g->wp, *dst = src + j->cin * g->cs;
    int phases = j->dh ? 4 : 1;
    direct_taps tp[4];
    const float *wph[4];
    for (int p = 0; p < phases; p++) {
        if (j->dh)
            phase_taps(j, p / 2, p % 2, &tp[p]);
        else
            all_taps(j, g->plane, &tp[p]);
        pack_filter(j, &tp[p], wp, 0);
        wph[p] = wp;
        wp += conv_round_up(j->cout, DR) * j->cin * tp[p].n;
    }
    int64_t out = j->dh ? j->dh * j->dw : j->oh * j->ow, img = j->cin * j->h * j->w;
    int64_t calls = phases * ((g->nqp + g->jv * DV - 1) / (g->jv * DV));
    for (int64_t n = t; n < j->n; n += j->tasks.n) {
        source_image(j, j->x + n * img, src, g->cs, g->plane);
        int64_t m = n + j->tasks.n;
        direct_ahead next[2] = {
            ahead_of(m < j->n ? j->x + m * img : NULL, img, calls, 0),
            ahead_of(m < j->n ? j->y + m * j->cout * out : NULL, j->cout * out, calls, 1)};
        for (int p = 0; p < phases; p++) {
            tiles(j, src, &tp[p], wph[p], dst, next);
            if (j->dh)
                scatter_phase(j, dst, p / 2, p % 2, j->y + n * j->cout * out);
            else
                store_image(j, dst, j->y + n * j->cout * out);
        }
    }
}

static void direct_plan(direct_job *j)
{
    conv_direct_plan(&j->g, j->n, j->cin, j->cout, j->h, j->w, j->stride, j->pad, j->oh, j->ow);
}

static void direct_fwd(const cpu_conv_ctx *cx, direct_job *j)
{
    direct_plan(j);
    if (cpu_tasks_open(cx, j->n, (size_t)j->g.fwd * 4, &j->tasks) == 0)
        cpu_pool_for(cx->pool, j->tasks.n, fwd_task, j);
    cpu_tasks_close(&j->tasks);
}

/* The layer's forward pass over x, as its filter gradient reads it too. */
static direct_job layer_job(const cpu_conv_shape *s, const float *x)
{
    return (direct_job){.n = s->n,
                        .cin = s->c,
                        .cout = s->oc,
                        .h = s->h,
                        .w = s->w,
                        .oh = s->oh,
                        .ow = s->ow,
                        .stride = s->stride,
                        .pad = s->pad,
                        .x = x};
}

void cpu_direct_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                       const float *w, const float *bias, int relu)
{
    direct_job j = layer_job(s, x);
    j.filt = w, j.bias = bias, j.y = out, j.relu = relu;
    direct_fwd(cx, &j);
}

/* The layers conv_direct_gx_ok takes: a stride-1 layer's is the forward
 * pass of dy with the filters turned, a stride-2 layer's four passes over
 * dy, one a parity of dx's rows and columns (phase_taps), each on a grid
 * of (OH + 1) x (OW + 1). */
void cpu_direct_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx,
                              const float *dy, const float *w)
{
    direct_job j = {.n = s->n,
                    .cin = s->oc,
                    .cout = s->c,
                    .h = s->oh,
                    .w = s->ow,
                    .oh = s->h,
                    .ow = s->w,
                    .stride = 1,
                    .pad = s->kh - 1 - s->pad,
                    .x = dy,
                    .filt = w,
                    .y = dx,
                    .flip = 1};
    if (s->stride == 2)
        j.oh = s->oh + 1, j.ow = s->ow + 1, j.pad = 1, j.dh = s->h, j.dw = s->w, j.dpad = s->pad;
    direct_fwd(cx, &j);
}

/* ---- the filter gradient ----
 * Across the output channels: for 16 of them in a vector, each output
 * position's dy (transposed, [OH*OW][OCP]) times the source at each tap of
 * CT channels, broadcast: dwT[c][t][o] += dy[o][q] * source[c][off[t] + q]
 * over the valid positions q of a chunk of images.  No lane is junk and
 * no sum crosses lanes; the transposed partial sums are turned at the end. */

#define GW_CT 3 /* source channels a tile: 27 accumulators */

/* r[i][k] becomes r[k][i]: pairs, then quads within 128-bit blocks, then
 * the blocks. */
static inline __attribute__((always_inline)) AVX512 void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* r[4i + k], block b: rows 4i..4i+3 at column 4b + k */
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        __m512 u1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        __m512 u3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
        t[k] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[8 + k] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[4 + k] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* dy of one image transposed, 16 x 16 at a time: dt[(oh * OW + ow) * ocp
 * + o], 0 past cout. */
static AVX512 void transpose_dy(const direct_job *j, const float *dy, float *dt)
{
    int64_t ohw = j->oh * j->ow, ocp = j->g.ocp;
    for (int64_t q = 0; q < ohw; q += DV) {
        __mmask16 m = lanes_of(q, ohw);
        int64_t nq = ohw - q < DV ? ohw - q : DV;
        for (int64_t o = 0; o < ocp; o += DV) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = o + i < j->cout ? _mm512_maskz_loadu_ps(m, dy + (o + i) * ohw + q)
                                       : _mm512_setzero_ps();
            transpose16(r);
            for (int64_t i = 0; i < nq; i++) _mm512_storeu_ps(dt + (q + i) * ocp + o, r[i]);
        }
    }
}

/* 16 output channels x the taps of CT source channels over a chunk's imgs
 * images: added to partT[(c * 9 + t) * ocp]. */
static inline __attribute__((always_inline)) AVX512 void
gw_tile(const direct_job *j, const float *src, const float *dt, int64_t imgs, const int32_t *off,
        float *part, direct_ahead *next, int CT, int S1)
{
    const conv_direct *g = &j->g;
    int64_t ohw = j->oh * j->ow, ocp = g->ocp;
    __m512 acc[GW_CT * CONV_DIRECT_TAPS];
#pragma GCC unroll 27
    for (int p = 0; p < CT * CONV_DIRECT_TAPS; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < imgs; i++, src += j->cin * g->cs, dt += ohw * ocp)
        for (int64_t oh = 0; oh < j->oh; oh++) {
            ahead_some(&next[0]), ahead_some(&next[1]);
            const float *sq = src + oh * g->wq, *dq = dt + oh * j->ow * ocp;
            if (S1) { /* taps kh * wq + kw: 3 rows a channel, read at ow + kw */
                const float *r[GW_CT * 3];
#pragma GCC unroll 9
                for (int k = 0; k < CT * 3; k++) r[k] = sq + (k / 3) * g->cs + (k % 3) * g->wq;
                for (int64_t ow = 0; ow < j->ow; ow++, dq += ocp) {
                    __m512 dv = _mm512_loadu_ps(dq);
#pragma GCC unroll 27
                    for (int p = 0; p < CT * 9; p++)
                        acc[p] = _mm512_fmadd_ps(dv, _mm512_set1_ps(r[p / 3][ow + p % 3]), acc[p]);
                }
                continue;
            }
            for (int64_t ow = 0; ow < j->ow; ow++, sq++, dq += ocp) {
                __m512 dv = _mm512_loadu_ps(dq);
#pragma GCC unroll 3
                for (int ct = 0; ct < CT; ct++)
#pragma GCC unroll 9
                    for (int t = 0; t < CONV_DIRECT_TAPS; t++)
                        acc[ct * 9 + t] = _mm512_fmadd_ps(
                            dv, _mm512_set1_ps(sq[ct * g->cs + off[t]]), acc[ct * 9 + t]);
            }
        }
#pragma GCC unroll 27
    for (int p = 0; p < CT * CONV_DIRECT_TAPS; p++)
        _mm512_storeu_ps(part + p * ocp, _mm512_add_ps(_mm512_loadu_ps(part + p * ocp), acc[p]));
}

#define GW_TILE(CT, S1)                                                                            \
    static AVX512 __attribute__((noinline)) void gw_tile##CT##_##S1(                               \
        const direct_job *j, const float *src, const float *dt, int64_t imgs, const int32_t *off,  \
        float *part, direct_ahead *next)                                                           \
    {                                                                                              \
        gw_tile(j, src, dt, imgs, off, part, next, CT, S1);                                        \
    }
GW_TILE(1, 0)
GW_TILE(3, 0)
GW_TILE(1, 1)
GW_TILE(3, 1)

/* The task's slice: its partial dwT, then a chunk's sources and dy. */
static void gw_task(void *arg, int t)
{
    const direct_job *j = arg;
    const conv_direct *g = &j->g;
    float *part = cpu_task_slice(&j->tasks, t), *src = part + g->dw;
    float *dt = src + g->imgs * j->cin * g->cs;
    int64_t chunks = (j->n + g->imgs - 1) / g->imgs, ohw = j->oh * j->ow;
    int64_t img = j->cin * j->h * j->w, tiles = j->cin / GW_CT + j->cin % GW_CT;
    direct_taps tp;
    all_taps(j, g->plane, &tp);
    memset(part, 0, (size_t)(g->dw) * sizeof *part);
    for (int64_t ch = t; ch < chunks; ch += j->tasks.n) {
        int64_t n0 = ch * g->imgs, imgs = j->n - n0 < g->imgs ? j->n - n0 : g->imgs;
        for (int64_t i = 0; i < imgs; i++) {
            source_image(j, j->x + (n0 + i) * img, src + i * j->cin * g->cs, g->cs, g->plane);
            transpose_dy(j, j->dy + (n0 + i) * j->cout * ohw, dt + i * ohw * g->ocp);
        }
        /* the next chunk's images and dy, over this one's rows of tiles */
        int64_t m0 = n0 + j->tasks.n * g->imgs, mi = j->n - m0 < g->imgs ? j->n - m0 : g->imgs;
        int64_t rows = g->ocp / DV * tiles * imgs * j->oh;
        direct_ahead next[2] = {
            ahead_of(m0 < j->n ? j->x + m0 * img : NULL, mi * img, rows, 0),
            ahead_of(m0 < j->n ? j->dy + m0 * j->cout * ohw : NULL, mi * j->cout * ohw, rows, 0)};
        for (int64_t o = 0; o < g->ocp; o += DV)
            for (int64_t c = 0; c < j->cin;) {
                float *pc = part + c * CONV_DIRECT_TAPS * g->ocp + o;
                const float *sc = src + c * g->cs;
                int three = j->cin - c >= GW_CT;
                if (j->stride == 1)
                    (three ? gw_tile3_1 : gw_tile1_1)(j, sc, dt + o, imgs, tp.off, pc, next);
                else
                    (three ? gw_tile3_0 : gw_tile1_0)(j, sc, dt + o, imgs, tp.off, pc, next);
                c += three ? GW_CT : 1;
            }
    }
}

void cpu_direct_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw,
                              const float *dy, const float *x)
{
    direct_job j = layer_job(s, x);
    j.dy = dy;
    direct_plan(&j);
    int64_t ocp = j.g.ocp, ct = s->c * CONV_DIRECT_TAPS;
    if (cpu_tasks_open(cx, (j.n + j.g.imgs - 1) / j.g.imgs, (size_t)j.g.gw * 4, &j.tasks) == 0) {
        cpu_pool_for(cx->pool, j.tasks.n, gw_task, &j);
        for (int64_t o = 0; o < s->oc; o++)
            for (int64_t p = 0; p < ct; p++) {
                float sum = 0.0f;
                for (int t = 0; t < j.tasks.n; t++) sum += cpu_task_slice(&j.tasks, t)[p * ocp + o];
                dw[o * ct + p] = sum;
            }
    }
    cpu_tasks_close(&j.tasks);
}
