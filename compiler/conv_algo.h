/* conv_algo.h - which algorithm the CPU runs a convolution with, and the
 * scratch it needs per task.  The compiler plans the scratch from these
 * (ops.c's scratch rules) and the CPU device runs what they describe
 * (devices/cpu/cpu_conv.c, cpu_winograd.c), so the two cannot disagree.
 *
 * The compiler owns it because it needs it first: a plan's scratch is
 * sized at compile time, before any device runs, and compiler/ may not
 * include devices/ (a layer above it).  Included by compiler/ops.c, the
 * CPU's convolution kernels and tests/test_kernels.c; header only.
 *
 *  - im2col + GEMM, any convolution: one column matrix of a chunk of images
 *    per task (CONV_GEMM_COLS).
 *  - Winograd F(2x2, kxk), stride 1 with 3x3 or 5x5 filters between layers
 *    of at least CONV_WINO_MIN_CH channels: 2x2 outputs per tile of
 *    (k+1)x(k+1) inputs, so (k+1)^2 multiplies per 4 outputs instead of
 *    4 k^2 (2.8x fewer for 5x5, 2.25x for 3x3), as (k+1)^2 GEMMs over a
 *    chunk of about CONV_WINO_TILES tiles.
 *  - direct 3x3, stride 1 or 2 (conv_direct_ok), on CPUs with AVX-512
 *    (devices/cpu/cpu_direct.c decides at run time, so a plan reserves the
 *    most that any of the three needs: conv_task_bytes). */
#ifndef GR_CONV_ALGO_H
#define GR_CONV_ALGO_H

#include <stddef.h>
#include <stdint.h>

/* Fewer channels make the GEMMs too thin for the transforms to pay. */
#define CONV_WINO_MIN_CH 8
/* Tiles per GEMM: about where OpenBLAS's rate peaks on these shapes. */
#define CONV_WINO_TILES 128
/* Tiles a transform takes at once, side by side in one row of tiles: one
 * AVX register of floats per element of the tile. */
#define CONV_WINO_LANES 8

/* im2col + GEMM puts the output positions of several images side by side
 * in one GEMM of about CONV_GEMM_COLS columns: one image of a 7x7 or 14x14
 * layer is too narrow a GEMM for OpenBLAS (49 or 196 columns). */
#define CONV_GEMM_COLS 512

/* ... and a chunk's column matrix stays under 4 MiB, unless one image's is larger. */
#define CONV_GEMM_FLOATS (1 << 20)

/* Images per GEMM, for a batch of n (or a task's share of it) of images
 * whose column matrices are ckk x ohw. */
static inline int64_t conv_im2col_imgs(int64_t n, int64_t ckk, int64_t ohw)
{
    int64_t imgs = ohw > 0 ? (CONV_GEMM_COLS + ohw - 1) / ohw : 1;
    if (ckk > 0 && ohw > 0 && imgs > CONV_GEMM_FLOATS / (ckk * ohw))
        imgs = CONV_GEMM_FLOATS / (ckk * ohw);
    if (imgs > n) imgs = n;
    return imgs > 1 ? imgs : 1;
}

/* Floats per task: the column matrix of a chunk of images ([C*KH*KW] rows
 * of imgs * OH*OW) and, for more than one image, the chunk's output (or
 * output gradient) gathered the same way ([OC] rows). */
static inline size_t conv_im2col_bytes(int64_t n, int64_t c, int64_t kh, int64_t kw, int64_t oc,
                                       int64_t oh, int64_t ow)
{
    int64_t imgs = conv_im2col_imgs(n, c * kh * kw, oh * ow);
    return (size_t)((c * kh * kw + (imgs > 1 ? oc : 0)) * imgs * oh * ow) * 4;
}

/* The layer (x: C channels, y: OC) runs all three of its kernels by
 * Winograd.  A padding of k or more would put whole tiles outside. */
static inline int conv_wino_ok(int64_t c, int64_t oc, int64_t kh, int64_t kw, int64_t stride,
                               int64_t pad)
{
    return stride == 1 && kh == kw && (kh == 3 || kh == 5) && pad >= 0 && pad < kh &&
           c >= CONV_WINO_MIN_CH && oc >= CONV_WINO_MIN_CH;
}

/* One Winograd pass: cin channels of ih x iw in, cout of oh x ow out
 * (for the input gradient, the roles of x and y swap).  Floats per task:
 * u the transformed filters (their gradient's partial sums, for the filter
 * gradient), v and m the transformed inputs and outputs of a chunk of
 * `imgs` images, their rows `ld` apart (a transform may write a row of
 * tiles' lanes past its last tile), and p one zero-padded input plane,
 * as wide as the lanes of a row of tiles read (two columns a lane, and
 * the tile's overlap). */
typedef struct conv_wino {
    int64_t a;             /* tile side: k + 1 */
    int64_t th, tw, tiles; /* tiles per image: rows, columns, all */
    int64_t imgs, chunk;   /* images per chunk, their tiles */
    int64_t ld;            /* the rows of v and m */
    int64_t ph, pw;        /* the padded plane */
    int64_t u, v, m, p;    /* floats of each region */
} conv_wino;

/* Fills *w and returns the bytes per task. */
static inline size_t conv_wino_plan(conv_wino *w, int64_t n, int64_t cin, int64_t cout, int64_t k,
                                    int64_t oh, int64_t ow)
{
    const int64_t lanes = CONV_WINO_LANES;
    w->a = k + 1;
    w->th = (oh + 1) / 2, w->tw = (ow + 1) / 2;
    w->tiles = w->th * w->tw;
    w->imgs = w->tiles > 0 && CONV_WINO_TILES / w->tiles > 1 ? CONV_WINO_TILES / w->tiles : 1;
    if (w->imgs > n) w->imgs = n > 0 ? n : 1;
    w->chunk = w->imgs * w->tiles;
    w->ld = w->chunk + lanes;
    w->ph = 2 * w->th + k - 1, w->pw = 2 * ((w->tw + lanes - 1) / lanes * lanes + k / 2 + 1);
    int64_t aa = w->a * w->a;
    w->u = aa * cin * cout, w->v = aa * cin * w->ld, w->m = aa * cout * w->ld;
    w->p = w->ph * w->pw;
    return (size_t)(w->u + w->v + w->m + w->p) * 4;
}

/* ---- direct 3x3 convolutions (devices/cpu/cpu_direct.c), on CPUs with
 * AVX-512: each image copied into stride^2 zero-padded phase planes per
 * channel, outputs computed on a grid as wide as a plane ---- */
#define CONV_DIRECT_TAPS 9
#define CONV_DIRECT_OC   8 /* output channels a forward tile */
/* Floats of the images a filter-gradient chunk holds (sources and dy). */
#define CONV_DIRECT_GW_FLOATS (1 << 17)

static inline int conv_direct_ok(int64_t c, int64_t oc, int64_t kh, int64_t kw, int64_t stride,
                                 int64_t pad)
{
    return kh == 3 && kw == 3 && (stride == 1 || stride == 2) && pad >= 0 && pad <= 2 && c > 0 &&
           oc > 0;
}

/* ... and its input gradient, into enough channels to fill a tile. */
static inline int conv_direct_gx_ok(int64_t c, int64_t oc, int64_t kh, int64_t kw, int64_t stride,
                                    int64_t pad)
{
    return conv_direct_ok(c, oc, kh, kw, stride, pad) && c >= CONV_DIRECT_OC;
}

static inline int64_t conv_round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* One pass: cin channels of h x w in, cout of oh x ow out.  Floats: wp the
 * packed filters, cs a source channel (the forward pass's, its reads of a
 * grid's last tile inside), fwd per task.  The filter gradient's chunk of
 * imgs images: their sources, then dy transposed ([OH*OW][ocp], ocp = cout
 * rounded up to a vector); dw its transposed partial sums, gw per task. */
typedef struct conv_direct {
    int64_t k, hq, wq, plane; /* a phase plane: hq x wq */
    int64_t nq, jv, nqp;      /* grid outputs, vectors a tile, outputs rounded to tiles */
    int64_t cs, wp, fwd;
    int64_t ocp, imgs, dw, gw;
} conv_direct;

static inline void conv_direct_plan(conv_direct *g, int64_t n, int64_t cin, int64_t cout, int64_t h,
                                    int64_t w, int64_t s, int64_t pad, int64_t oh, int64_t ow)
{
    int64_t k = 3, best = -1;
    g->k = k;
    g->hq = (h + 2 * pad + s - 1) / s, g->wq = (w + 2 * pad + s - 1) / s;
    g->plane = g->hq * g->wq;
    g->nq = oh * g->wq;
    /* tiles of 3 or 2 vectors, whichever leaves fewer junk outputs (one
     * vector a tile is ~12% slower: 8 broadcasts feed only 8 FMAs) */
    for (int64_t jv = g->nq > 16 ? 3 : 1; jv >= (g->nq > 16 ? 2 : 1); jv--)
        if (best < 0 || conv_round_up(g->nq, 16 * jv) < best)
            best = conv_round_up(g->nq, 16 * jv), g->jv = jv;
    g->nqp = best;
    int64_t tail = ((k - 1) / s) * (g->wq + 1), ph = ((k - 1) % s) * s + (k - 1) % s;
    int64_t last = ph * g->plane + tail; /* the last tap's offset */
    g->cs = conv_round_up(last + g->nqp > s * s * g->plane ? last + g->nqp : s * s * g->plane, 16);
    int64_t oc8 = conv_round_up(cout, CONV_DIRECT_OC);
    g->wp = oc8 * cin * CONV_DIRECT_TAPS;
    g->fwd = g->wp + cin * g->cs + oc8 * g->nqp;
    g->ocp = conv_round_up(cout, 16);
    int64_t img = cin * g->cs + oh * ow * g->ocp;
    g->imgs = CONV_DIRECT_GW_FLOATS / img;
    if (g->imgs > n) g->imgs = n;
    if (g->imgs < 1) g->imgs = 1;
    g->dw = cin * CONV_DIRECT_TAPS * g->ocp;
    g->gw = g->dw + g->imgs * img;
}

/* Bytes per task of a layer's direct pass, 0 for none: the forward pass
 * (grad 0), the input gradient's (1) or the filter gradient's (2). */
static inline size_t conv_direct_bytes(int grad, int64_t n, int64_t c, int64_t h, int64_t w,
                                       int64_t oc, int64_t k, int64_t stride, int64_t pad,
                                       int64_t oh, int64_t ow)
{
    conv_direct g;
    if (grad == 1) {
        if (!conv_direct_gx_ok(c, oc, k, k, stride, pad)) return 0;
        if (stride == 1)
            conv_direct_plan(&g, n, oc, c, oh, ow, 1, k - 1 - pad, h, w);
        else /* dy padded by 1, a grid a row and a column larger (cpu_direct.c) */
            conv_direct_plan(&g, n, oc, c, oh, ow, 1, 1, oh + 1, ow + 1);
        return (size_t)g.fwd * 4;
    }
    if (!conv_direct_ok(c, oc, k, k, stride, pad)) return 0;
    conv_direct_plan(&g, n, c, oc, h, w, stride, pad, oh, ow);
    return (size_t)(grad ? g.gw : g.fwd) * 4;
}

/* Bytes per task of a layer's pass (grad: 0 the forward pass, 1 the input
 * gradient, 2 the filter gradient): the most that any algorithm the CPU
 * may pick for it needs, which is what a plan gives (compiler/ops.c). */
static inline size_t conv_task_bytes(int grad, int64_t n, int64_t c, int64_t h, int64_t w,
                                     int64_t oc, int64_t kh, int64_t kw, int64_t stride,
                                     int64_t pad, int64_t oh, int64_t ow)
{
    size_t bytes = conv_im2col_bytes(n, c, kh, kw, oc, oh, ow), alt = 0;
    if (grad == 2) bytes += (size_t)(oc * c * kh * kw) * 4; /* the partial sums */
    conv_wino p;
    if (conv_wino_ok(c, oc, kh, kw, stride, pad)) /* in x and out y swap for dx */
        alt = grad == 1 ? conv_wino_plan(&p, n, oc, c, kh, h, w)
                        : conv_wino_plan(&p, n, c, oc, kh, oh, ow);
    if (alt > bytes) bytes = alt; /* the CUDA device's im2col plans with the same rule */
    alt = kh == kw ? conv_direct_bytes(grad, n, c, h, w, oc, kh, stride, pad, oh, ow) : 0;
    return alt > bytes ? alt : bytes;
}

#endif
