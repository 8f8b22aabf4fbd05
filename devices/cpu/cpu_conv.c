/* cpu_conv.c - CONV2D (im2col + GEMM) with its two gradients, and max/avg
 * pooling with theirs.  NCHW images, [OC, C, KH, KW] filters.
 *
 * Convolutions split the batch over pool tasks, a chunk of images at a
 * time per task, one GEMM a chunk (conv_algo.h); each task owns one slice
 * of the node's scratch for its im2col buffer (and, for the filter
 * gradient, its partial dW, summed at the end so no two tasks ever write
 * the same memory). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* No floating-point exception flags are read: the pooling loops' selects
 * can be vector blends instead of branches. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "../../compiler/conv_algo.h"
#include "cpu_impl.h"

static int64_t conv_ckk(const cpu_conv_shape *s)
{
    return s->c * s->kh * s->kw;
}
static int64_t conv_ohw(const cpu_conv_shape *s)
{
    return s->oh * s->ow;
}

/* A 1x1, stride 1, unpadded convolution's im2col is the image itself. */
static int conv_is_pointwise(const cpu_conv_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->stride == 1 && s->pad == 0;
}

/* col[(c*KH+kh)*KW+kw, b*OH*OW + oh*OW+ow] = x_b[c, oh*s-p+kh, ow*s-p+kw],
 * 0 outside: the column matrix of a chunk of images, its rows `ld` apart,
 * image b's columns from b * OH*OW on (conv_algo.h). */
/* Output columns [lo, hi) of a kernel column kw read inside the image row
 * (0 <= ow * stride - pad + kw < w); the rest read padding. */
static void valid_cols(const cpu_conv_shape *s, int64_t kw, int64_t *lo, int64_t *hi)
{
    int64_t st = s->stride, off = kw - s->pad;
    *lo = off >= 0 ? 0 : (-off + st - 1) / st;
    *hi = s->w - off <= 0 ? 0 : (s->w - off + st - 1) / st;
    if (*lo > s->ow) *lo = s->ow;
    if (*hi > s->ow) *hi = s->ow;
    if (*hi < *lo) *hi = *lo;
}

/* One output row of one (c, kh, kw) column-matrix row: columns [lo, hi)
 * (valid_cols) read the image row src, the rest are padding.  Inlined, so
 * that the short rows of small images pay no call. */
static inline void im2col_row(const cpu_conv_shape *s, const float *restrict src, int64_t off,
                              int64_t lo, int64_t hi, float *restrict dst)
{
    for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
    if (s->stride == 1) /* a shifted copy */
        for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow + off];
    else if (s->stride == 2) /* a constant stride, which the compiler vectorises */
        for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[2 * ow + off];
    else
        for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * s->stride + off];
    for (int64_t ow = hi; ow < s->ow; ow++) dst[ow] = 0.0f;
}

/* Stride 1 with the output as wide as the input ("same" padding): the rows
 * of one (c, kh, kw) row of the column matrix and the image rows they read
 * have the same pitch, so all their valid parts are one block of each, and
 * between two rows the block holds `gap` padding columns, where the column
 * matrix is 0.  One copy per (c, kh, kw) instead of one per output row. */
static int conv_same_rows(const cpu_conv_shape *s)
{
    return s->stride == 1 && s->ow == s->w;
}

/* The block of (c = 0, kh, kw): col offset, x offset, length, its rows;
 * channel c's is col_step * c and x_step * c further. */
typedef struct conv_block {
    int64_t col, x, len, rows, gap, col_step, x_step;
} conv_block;

static int conv_block_of(const cpu_conv_shape *s, int64_t kh, int64_t kw, int64_t ld, conv_block *b)
{
    int64_t oh0 = s->pad - kh > 0 ? s->pad - kh : 0;
    int64_t oh1 = s->h + s->pad - kh < s->oh ? s->h + s->pad - kh : s->oh, lo, hi;
    valid_cols(s, kw, &lo, &hi);
    if (oh1 <= oh0 || hi <= lo) return 0;
    b->rows = oh1 - oh0;
    b->gap = s->ow - (hi - lo);
    b->col = (kh * s->kw + kw) * ld + oh0 * s->ow + lo;
    b->x = (oh0 - s->pad + kh) * s->w + lo - s->pad + kw;
    b->len = (b->rows - 1) * s->ow + hi - lo;
    b->col_step = s->kh * s->kw * ld;
    b->x_step = s->h * s->w;
    return 1;
}

/* Zeroes the padding columns between a block's rows. */
static void block_zero_gaps(const conv_block *b, int64_t ow, float *restrict blk)
{
    for (int64_t r = 0; r + 1 < b->rows; r++)
        for (int64_t k = 0; k < b->gap; k++) blk[r * ow + ow - b->gap + k] = 0.0f;
}

/* im2col by blocks (conv_same_rows), kernel position by kernel position. */
static void im2col_blocks(const cpu_conv_shape *s, const float *x, float *col, int64_t ld)
{
    conv_block b;
    for (int64_t kh = 0; kh < s->kh; kh++)
        for (int64_t kw = 0; kw < s->kw; kw++) {
            if (!conv_block_of(s, kh, kw, ld, &b)) continue;
            for (int64_t c = 0; c < s->c; c++) {
                float *dst = col + b.col + c * b.col_step;
                memcpy(dst, x + b.x + c * b.x_step, sizeof(float) * (size_t)b.len);
                block_zero_gaps(&b, s->ow, dst);
            }
        }
}

/* im2col of an image into its columns of col, which im2col_start prepared. */
static void im2col(const cpu_conv_shape *s, const float *x, float *col, int64_t ld)
{
    if (conv_same_rows(s)) {
        im2col_blocks(s, x, col, ld);
        return;
    }
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t kh = 0; kh < s->kh; kh++)
            for (int64_t kw = 0; kw < s->kw; kw++) {
                float *row = col + ((c * s->kh + kh) * s->kw + kw) * ld;
                int64_t lo, hi;
                valid_cols(s, kw, &lo, &hi);
                for (int64_t oh = 0; oh < s->oh; oh++) {
                    int64_t ih = oh * s->stride - s->pad + kh;
                    float *dst = row + oh * s->ow;
                    if (ih < 0 || ih >= s->h)
                        cpu_fill_f32(dst, 0.0f, s->ow);
                    else
                        im2col_row(s, x + (c * s->h + ih) * s->w, kw - s->pad, lo, hi, dst);
                }
            }
}

/* Before a task's first im2col of a call: the blocks never write the rows
 * and edges that read padding, which are the same for every image. */
static void im2col_start(const cpu_conv_shape *s, float *col, int64_t ld)
{
    if (conv_same_rows(s)) cpu_fill_f32(col, 0.0f, conv_ckk(s) * ld);
}

/* The adjoint of im2col_row: dst[ow * stride + off] += src[ow] over [lo, hi). */
static inline void col2im_row(const cpu_conv_shape *s, const float *restrict src, int64_t off,
                              int64_t lo, int64_t hi, float *restrict dst)
{
    if (s->stride == 1)
        for (int64_t ow = lo; ow < hi; ow++) dst[ow + off] += src[ow];
    else if (s->stride == 2)
        for (int64_t ow = lo; ow < hi; ow++) dst[2 * ow + off] += src[ow];
    else
        for (int64_t ow = lo; ow < hi; ow++) dst[ow * s->stride + off] += src[ow];
}

/* col2im by blocks: col's padding columns are zeroed first, so one add
 * over a block leaves those parts of dx as they were.  Each dx element of
 * channel c gets its kernel positions' terms in (kh, kw) order, as below. */
static void col2im_blocks(const cpu_conv_shape *s, float *col, int64_t ld, float *dx)
{
    conv_block b;
    for (int64_t kh = 0; kh < s->kh; kh++)
        for (int64_t kw = 0; kw < s->kw; kw++) {
            if (!conv_block_of(s, kh, kw, ld, &b)) continue;
            for (int64_t c = 0; c < s->c; c++) {
                float *restrict src = col + b.col + c * b.col_step;
                float *restrict dst = dx + b.x + c * b.x_step;
                block_zero_gaps(&b, s->ow, src);
                for (int64_t i = 0; i < b.len; i++) dst[i] += src[i];
            }
        }
}

/* The adjoint of im2col: dx (already zeroed) += an image's columns of col
 * scattered back, in (c, kh, kw) order. */
static void col2im(const cpu_conv_shape *s, float *col, int64_t ld, float *dx)
{
    if (conv_same_rows(s)) {
        col2im_blocks(s, col, ld, dx);
        return;
    }
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t kh = 0; kh < s->kh; kh++)
            for (int64_t kw = 0; kw < s->kw; kw++) {
                const float *row = col + ((c * s->kh + kh) * s->kw + kw) * ld;
                int64_t lo, hi;
                valid_cols(s, kw, &lo, &hi);
                for (int64_t oh = 0; oh < s->oh; oh++) {
                    int64_t ih = oh * s->stride - s->pad + kh;
                    if (ih >= 0 && ih < s->h)
                        col2im_row(s, row + oh * s->ow, kw - s->pad, lo, hi,
                                   dx + (c * s->h + ih) * s->w);
                }
            }
}

/* A pass over the batch in chunks of `imgs` images, one GEMM a chunk. */
typedef struct conv_job {
    const cpu_conv_shape *s;
    float *out;
    const float *x, *w, *dy;
    const float *bias; /* forward: per output channel, or NULL */
    int relu;          /* forward: max(y, 0) after the bias */
    int64_t imgs, ld;  /* images per chunk, the GEMM's columns (imgs * OH*OW) */
    int64_t n_chunks;
    cpu_tasks tasks;
} conv_job;

/* Task t's scratch: the column matrix, then (several images a chunk) the
 * chunk's output or dy, [OC] rows of ld, then the filter gradient's
 * partial sums. */
static float *conv_col(const conv_job *j, int t)
{
    return cpu_task_slice(&j->tasks, t);
}
/* The column matrix's floats: none for a pointwise convolution, whose
 * GEMM reads the images themselves. */
static int64_t conv_col_floats(const conv_job *j)
{
    return conv_is_pointwise(j->s) ? 0 : conv_ckk(j->s) * j->ld;
}
static float *conv_rows(const conv_job *j, int t)
{
    return conv_col(j, t) + conv_col_floats(j);
}
static float *conv_gw_partial(const conv_job *j, int t)
{
    return conv_rows(j, t) + (j->imgs > 1 ? j->s->oc * j->ld : 0);
}

/* Images [*n0, *n0 + return) of chunk k. */
static int64_t conv_chunk(const conv_job *j, int64_t k, int64_t *n0)
{
    *n0 = k * j->imgs;
    return j->s->n - *n0 < j->imgs ? j->s->n - *n0 : j->imgs;
}

/* The GEMM's columns of the chunk's images: the images themselves for a
 * pointwise convolution (one a chunk), else col, filled by im2col. */
static const float *conv_cols_of(const conv_job *j, int64_t n0, int64_t nb, float *col)
{
    const cpu_conv_shape *s = j->s;
    const float *x = j->x + n0 * s->c * s->h * s->w;
    if (conv_is_pointwise(s)) return x;
    for (int64_t b = 0; b < nb; b++)
        im2col(s, x + b * s->c * s->h * s->w, col + b * conv_ohw(s), j->ld);
    return col;
}

/* The chunk's dy as [OC] rows of its images side by side: dy itself for
 * one image, else gathered into rows. */
static const float *conv_dy_of(const conv_job *j, int64_t n0, int64_t nb, float *rows)
{
    const cpu_conv_shape *s = j->s;
    int64_t ohw = conv_ohw(s);
    const float *dy = j->dy + n0 * s->oc * ohw;
    if (j->imgs == 1) return dy;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t oc = 0; oc < s->oc; oc++)
            memcpy(rows + oc * j->ld + b * ohw, dy + (b * s->oc + oc) * ohw,
                   sizeof(float) * (size_t)ohw);
    return rows;
}

/* y of the chunk's images from the GEMM's rows (in place for one image),
 * plus the bias, then the relu. */
static void conv_finish(const conv_job *j, const float *rows, int64_t nb, float *y)
{
    const cpu_conv_shape *s = j->s;
    int64_t ohw = conv_ohw(s);
    if (rows == y && !j->bias && !j->relu) return;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t oc = 0; oc < s->oc; oc++) {
            const float *in = rows + oc * j->ld + b * ohw;
            float *o = y + (b * s->oc + oc) * ohw, bias = j->bias ? j->bias[oc] : 0.0f;
            for (int64_t i = 0; i < ohw; i++) {
                float v = in[i] + bias;
                o[i] = j->relu && !(v > 0.0f) ? 0.0f : v; /* NaN -> 0, as relu */
            }
        }
}

/* c = a b (+ c when add), both row-major, transposed as asked: our AVX-512
 * GEMM for a 1x1 layer's (the ResNet's projections: six passes 1.37 ->
 * 1.06 ms), where it is wanted, else the BLAS.  Only for 1x1: under
 * AddressSanitizer our kernels are instrumented where the BLAS is not, and
 * the larger GEMMs of im2col then take twice as long. */
static void conv_gemm(const cpu_conv_shape *s, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const float *a, int64_t lda, const float *b, int64_t ldb, int add, float *c,
                      int64_t ldc)
{
    if (s->kh == 1 && s->kw == 1 && cpu_sgemm_wanted(m, n, k) &&
        cpu_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, add, c, ldc) == 0)
        return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, add ? 1.0f : 0.0f, c,
                (int)ldc);
}

static void conv_fwd_task(void *arg, int t)
{
    const conv_job *j = arg;
    const cpu_conv_shape *s = j->s;
    int64_t ckk = conv_ckk(s), ohw = conv_ohw(s), n0;
    if (!conv_is_pointwise(s)) im2col_start(s, conv_col(j, t), j->ld);
    for (int64_t k = t; k < j->n_chunks; k += j->tasks.n) {
        int64_t nb = conv_chunk(j, k, &n0);
        const float *col = conv_cols_of(j, n0, nb, conv_col(j, t));
        float *y = j->out + n0 * s->oc * ohw, *rows = j->imgs == 1 ? y : conv_rows(j, t);
        conv_gemm(s, 0, 0, s->oc, nb * ohw, ckk, j->w, ckk, col, j->ld, 0, rows, j->ld);
        conv_finish(j, rows, nb, y); /* while it is in cache */
    }
}

static void conv_gx_task(void *arg, int t)
{
    const conv_job *j = arg;
    const cpu_conv_shape *s = j->s;
    int64_t ckk = conv_ckk(s), ohw = conv_ohw(s), img = s->c * s->h * s->w, n0;
    for (int64_t k = t; k < j->n_chunks; k += j->tasks.n) {
        int64_t nb = conv_chunk(j, k, &n0);
        float *dx = j->out + n0 * img, *col = conv_is_pointwise(s) ? dx : conv_col(j, t);
        conv_gemm(s, 1, 0, ckk, nb * ohw, s->oc, j->w, ckk, conv_dy_of(j, n0, nb, conv_rows(j, t)),
                  j->ld, 0, col, j->ld);
        if (conv_is_pointwise(s)) continue;
        memset(dx, 0, (size_t)(nb * img) * sizeof *dx);
        for (int64_t b = 0; b < nb; b++) col2im(s, col + b * ohw, j->ld, dx + b * img);
    }
}

static void conv_gw_task(void *arg, int t)
{
    const conv_job *j = arg;
    const cpu_conv_shape *s = j->s;
    int64_t ckk = conv_ckk(s), ohw = conv_ohw(s), n0;
    if (!conv_is_pointwise(s)) im2col_start(s, conv_col(j, t), j->ld);
    for (int64_t k = t; k < j->n_chunks; k += j->tasks.n) {
        int64_t nb = conv_chunk(j, k, &n0);
        const float *col = conv_cols_of(j, n0, nb, conv_col(j, t));
        conv_gemm(s, 0, 1, s->oc, ckk, nb * ohw, conv_dy_of(j, n0, nb, conv_rows(j, t)), j->ld, col,
                  j->ld, k != t, conv_gw_partial(j, t), ckk);
    }
}

/* Chunks the batch for the tasks the context runs (each gets a share of
 * the images, when there are enough) and opens them with the scratch they
 * need, plus `extra` floats each; 0, or -1 when memory ran out. */
static int conv_open(const cpu_conv_ctx *cx, conv_job *j, int64_t extra)
{
    const cpu_conv_shape *s = j->s;
    int64_t ohw = conv_ohw(s), nt = cpu_tasks_count(cx, s->n);
    j->imgs = conv_is_pointwise(s) ? 1 : conv_im2col_imgs((s->n + nt - 1) / nt, conv_ckk(s), ohw);
    j->ld = j->imgs * ohw;
    j->n_chunks = (s->n + j->imgs - 1) / j->imgs;
    int64_t rows = j->imgs > 1 ? s->oc * j->ld : 0;
    return cpu_tasks_open(cx, j->n_chunks, (size_t)(conv_col_floats(j) + rows + extra) * 4,
                          &j->tasks);
}

static void conv_run(const cpu_conv_ctx *cx, conv_job *j, void (*fn)(void *, int))
{
    if (conv_open(cx, j, 0) == 0) cpu_pool_for(cx->pool, j->tasks.n, fn, j);
    cpu_tasks_close(&j->tasks);
}

/* The layer runs by Winograd (conv_algo.h). */
static int conv_is_wino(const cpu_conv_shape *s)
{
    return s->n > 0 && conv_wino_ok(s->c, s->oc, s->kh, s->kw, s->stride, s->pad);
}

void cpu_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                const float *w, const float *bias, int relu)
{
    if (cpu_direct_ok(s, 0)) {
        cpu_direct_conv2d(cx, s, out, x, w, bias, relu);
        return;
    }
    if (conv_is_wino(s)) {
        cpu_wino_conv2d(cx, s, out, x, w, bias, relu);
        return;
    }
    conv_job j = {.s = s, .out = out, .x = x, .w = w, .bias = bias, .relu = relu};
    conv_run(cx, &j, conv_fwd_task);
}

void cpu_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx, const float *dy,
                       const float *w)
{
    if (cpu_direct_ok(s, 1)) {
        cpu_direct_conv2d_grad_x(cx, s, dx, dy, w);
        return;
    }
    if (conv_is_wino(s)) {
        cpu_wino_conv2d_grad_x(cx, s, dx, dy, w);
        return;
    }
    conv_job j = {.s = s, .out = dx, .w = w, .dy = dy};
    conv_run(cx, &j, conv_gx_task);
}

void cpu_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw, const float *dy,
                       const float *x)
{
    int64_t wn = s->oc * conv_ckk(s);
    if (s->n == 0) {
        cpu_fill_f32(dw, 0.0f, wn);
        return;
    }
    if (cpu_direct_ok(s, 2)) {
        cpu_direct_conv2d_grad_w(cx, s, dw, dy, x);
        return;
    }
    if (conv_is_wino(s)) {
        cpu_wino_conv2d_grad_w(cx, s, dw, dy, x);
        return;
    }
    conv_job j = {.s = s, .x = x, .dy = dy};
    if (conv_open(cx, &j, wn) == 0) {
        cpu_pool_for(cx->pool, j.tasks.n, conv_gw_task, &j);
        memcpy(dw, conv_gw_partial(&j, 0), (size_t)wn * sizeof *dw);
        for (int t = 1; t < j.tasks.n; t++) {
            const float *restrict part = conv_gw_partial(&j, t);
            for (int64_t i = 0; i < wn; i++) dw[i] += part[i];
        }
    }
    cpu_tasks_close(&j.tasks);
}

/* ---- pooling: a window is its cells inside the input (padding is never
 * read; an average divides by the count of those cells) ---- */

typedef struct pool_job {
    const cpu_pool_shape *s;
    float *out;
    const float *x;
    int avg;
} pool_job;

/* Every window inside the input, as without padding: the fast paths. */
static int pool_fits(const cpu_pool_shape *s)
{
    return s->pad_h == 0 && s->pad_w == 0 && (s->oh - 1) * s->stride + s->size <= s->h &&
           (s->ow - 1) * s->stride + s->size <= s->w;
}

/* Window (oh, ow): rows [r[0], r[1]) and columns [r[2], r[3]) of the input,
 * never empty (the shape rule's padding leaves a cell in each). */
static void pool_window(const cpu_pool_shape *s, int64_t oh, int64_t ow, int64_t r[4])
{
    int64_t h0 = oh * s->stride - s->pad_h, w0 = ow * s->stride - s->pad_w;
    r[0] = h0 > 0 ? h0 : 0;
    r[1] = h0 + s->size < s->h ? h0 + s->size : s->h;
    r[2] = w0 > 0 ? w0 : 0;
    r[3] = w0 + s->size < s->w ? w0 + s->size : s->w;
}

static void pool_plane(const cpu_pool_shape *s, float *out, const float *x, int avg)
{
    for (int64_t oh = 0; oh < s->oh; oh++)
        for (int64_t ow = 0; ow < s->ow; ow++) {
            int64_t r[4];
            pool_window(s, oh, ow, r);
            float acc = avg ? 0.0f : x[r[0] * s->w + r[2]];
            for (int64_t i = r[0]; i < r[1]; i++)
                for (int64_t k = r[2]; k < r[3]; k++) {
                    float v = x[i * s->w + k];
                    acc = avg ? acc + v : (v > acc ? v : acc);
                }
            out[oh * s->ow + ow] =
                avg ? acc * (1.0f / (float)((r[1] - r[0]) * (r[3] - r[2]))) : acc;
        }
}

/* 2x2 windows, stride 2, inside the input: the common case, without the
 * generic loops. */
static int pool_is_2x2(const cpu_pool_shape *s)
{
    return s->size == 2 && s->stride == 2 && pool_fits(s);
}

static void maxpool2_plane(const cpu_pool_shape *s, float *restrict out, const float *x)
{
    for (int64_t oh = 0; oh < s->oh; oh++) {
        const float *r0 = x + 2 * oh * s->w, *r1 = r0 + s->w;
        float *o = out + oh * s->ow;
        for (int64_t ow = 0; ow < s->ow; ow++) {
            float m = r0[2 * ow];
            m = r0[2 * ow + 1] > m ? r0[2 * ow + 1] : m;
            m = r1[2 * ow] > m ? r1[2 * ow] : m;
            o[ow] = r1[2 * ow + 1] > m ? r1[2 * ow + 1] : m;
        }
    }
}

/* ---- max pooling by bands of rows: each row's windows across its
 * columns first (their maximum and its first column, the leftmost), then
 * down each window's rows (the first row with the maximum, the topmost):
 * the first maximum in row-major order, pool_plane's, in loops over whole
 * bands that vectorise. ---- */

/* Along-the-row maxima a band holds (on the stack, with their columns). */
#define POOL_BAND 4096

/* Output rows a band holds, or 0 where this path does not apply: the
 * windows of a row must tile it (w == stride * ow, so a band's rows run as
 * one loop) and one output row's input rows must fit. */
static int64_t pool_band_rows(const cpu_pool_shape *s)
{
    if (s->ow <= 0 || s->w != s->stride * s->ow) return 0;
    int64_t rows = POOL_BAND / s->ow;
    return rows >= s->size ? (rows - s->size) / s->stride + 1 : 0;
}

/* The windows [*lo, *hi) of a row inside its columns (none padded). */
static void pool_inner_cols(const cpu_pool_shape *s, int64_t *lo, int64_t *hi)
{
    int64_t a = (s->pad_w + s->stride - 1) / s->stride, room = s->w + s->pad_w - s->size;
    int64_t b = room >= 0 ? room / s->stride + 1 : 0;
    *lo = a < s->ow ? a : s->ow;
    *hi = b < s->ow ? b : s->ow;
    if (*hi < *lo) *hi = *lo;
}

/* hm[f], hk[f] for f < n: the maximum of x[stride f + k] over k < size and
 * its first k.  stride is a constant where inlined, so the loads
 * vectorise. */
static inline void pool_hmax_at(const float *x, int64_t n, int64_t size, int64_t stride,
                                float *restrict hm, int32_t *restrict hk)
{
    for (int64_t f = 0; f < n; f++) hm[f] = x[stride * f], hk[f] = 0;
    for (int64_t k = 1; k < size; k++)
        for (int64_t f = 0; f < n; f++) {
            float v = x[stride * f + k];
            hk[f] = v > hm[f] ? (int32_t)k : hk[f];
            hm[f] = v > hm[f] ? v : hm[f];
        }
}

/* Windows [o0, o1) of row xi: hm[o], hk[o] the maximum of the window's
 * columns inside the row and its first, from the window's first column. */
static void pool_hmax_edge(const cpu_pool_shape *s, const float *xi, int64_t o0, int64_t o1,
                           float *hm, int32_t *hk)
{
    for (int64_t o = o0; o < o1; o++) {
        int64_t c0 = o * s->stride - s->pad_w, a = c0 > 0 ? c0 : 0;
        int64_t b = c0 + s->size < s->w ? c0 + s->size : s->w, best = a;
        for (int64_t c = a + 1; c < b; c++) best = xi[c] > xi[best] ? c : best;
        hm[o] = xi[best], hk[o] = (int32_t)(best - c0);
    }
}

/* Rows [r0, r1) of plane x across the columns: hm[(i - r0) ow + o], hk
 * likewise, row i's window o (pool_hmax_at over the band's windows inside
 * the plane as one run, pool_hmax_edge at the padded edges). */
static void pool_hmax(const cpu_pool_shape *s, const float *x, int64_t r0, int64_t r1,
                      float *restrict hm, int32_t *restrict hk)
{
    int64_t n = (r1 - r0) * s->ow, start = r0 * s->w - s->pad_w, lo, hi;
    int64_t f0 = start >= 0 ? 0 : (s->stride - 1 - start) / s->stride;
    int64_t room = s->h * s->w - s->size - start, f1 = room >= 0 ? room / s->stride + 1 : 0;
    f1 = f1 < n ? f1 : n;
    if (f1 > f0 && s->stride == 2)
        pool_hmax_at(x + start + 2 * f0, f1 - f0, s->size, 2, hm + f0, hk + f0);
    else if (f1 > f0)
        pool_hmax_at(x + start + s->stride * f0, f1 - f0, s->size, s->stride, hm + f0, hk + f0);
    pool_inner_cols(s, &lo, &hi);
    for (int64_t i = r0; i < r1; i++) {
        float *hmi = hm + (i - r0) * s->ow;
        int32_t *hki = hk + (i - r0) * s->ow;
        pool_hmax_edge(s, x + i * s->w, 0, lo, hmi, hki);
        pool_hmax_edge(s, x + i * s->w, hi, s->ow, hmi, hki);
    }
}

/* Output row oh: the maximum down window oh's rows of hm (rows from rb). */
static void maxpool_vrow(const cpu_pool_shape *s, float *restrict out, const float *hm, int64_t rb,
                         int64_t oh)
{
    int64_t r[4];
    pool_window(s, oh, 0, r);
    const float *h0 = hm + (r[0] - rb) * s->ow;
    for (int64_t o = 0; o < s->ow; o++) out[o] = h0[o];
    for (int64_t i = 1; i < r[1] - r[0]; i++)
        for (int64_t o = 0; o < s->ow; o++)
            out[o] = h0[i * s->ow + o] > out[o] ? h0[i * s->ow + o] : out[o];
}

/* Output row oh's gradient g added into plane dx at each window's first
 * maximum (unless relu and it is not > 0), from hm and hk (rows from rb),
 * window after window as maxpool_grad_range's. */
static void maxpool_grad_vrow(const cpu_pool_shape *s, float *dx, const float *g, const float *hm,
                              const int32_t *hk, int64_t rb, int64_t oh, int relu)
{
    int64_t r[4];
    pool_window(s, oh, 0, r);
    for (int64_t o = 0; o < s->ow; o++) {
        const float *h = hm + (r[0] - rb) * s->ow + o;
        float m = h[0];
        int64_t best = 0; /* the row, from r[0] */
        for (int64_t i = 1; i < r[1] - r[0]; i++) {
            best = h[i * s->ow] > m ? i : best;
            m = h[i * s->ow] > m ? h[i * s->ow] : m;
        }
        int32_t k = hk[(r[0] - rb + best) * s->ow + o];
        if (!relu || m > 0.0f) dx[(r[0] + best) * s->w + o * s->stride - s->pad_w + k] += g[o];
    }
}

/* A plane's max pool (dx NULL) or its gradient into dx (zeroed first), a
 * band of `band` output rows at a time (pool_band_rows). */
static void maxpool_plane_bands(const cpu_pool_shape *s, int64_t band, float *out, float *dx,
                                const float *dy, const float *x, int relu)
{
    float hm[POOL_BAND];
    int32_t hk[POOL_BAND];
    if (dx) memset(dx, 0, (size_t)(s->h * s->w) * sizeof *dx);
    for (int64_t oh0 = 0; oh0 < s->oh; oh0 += band) {
        int64_t oh1 = oh0 + band < s->oh ? oh0 + band : s->oh, first[4], last[4];
        pool_window(s, oh0, 0, first);
        pool_window(s, oh1 - 1, 0, last);
        pool_hmax(s, x, first[0], last[1], hm, hk);
        for (int64_t oh = oh0; oh < oh1; oh++)
            if (dx)
                maxpool_grad_vrow(s, dx, dy + oh * s->ow, hm, hk, first[0], oh, relu);
            else
                maxpool_vrow(s, out + oh * s->ow, hm, first[0], oh);
    }
}

static void pool_range(void *vctx, int64_t lo, int64_t hi)
{
    const pool_job *j = vctx;
    const cpu_pool_shape *s = j->s;
    for (int64_t pl = lo; pl < hi; pl++) {
        float *out = j->out + pl * s->oh * s->ow;
        const float *x = j->x + pl * s->h * s->w;
        int64_t band = j->avg ? 0 : pool_band_rows(s);
        if (!j->avg && pool_is_2x2(s))
            maxpool2_plane(s, out, x);
        else if (band)
            maxpool_plane_bands(s, band, out, NULL, NULL, x, 0);
        else
            pool_plane(s, out, x, j->avg);
    }
}

static void pool_fwd(cpu_pool *p, const cpu_pool_shape *s, float *out, const float *x, int avg)
{
    pool_job j = {s, out, x, avg};
    int64_t per = s->h * s->w > 0 ? s->h * s->w : 1;
    cpu_par_range(p, s->planes, CPU_PAR_MIN / per + 1, pool_range, &j);
}

void cpu_maxpool(cpu_pool *p, const cpu_pool_shape *s, float *out, const float *x)
{
    pool_fwd(p, s, out, x, 0);
}

void cpu_avgpool(cpu_pool *p, const cpu_pool_shape *s, float *out, const float *x)
{
    pool_fwd(p, s, out, x, 1);
}

typedef struct pool_grad_job {
    const cpu_pool_shape *s;
    float *dx;
    const float *dy, *x;
    int relu;
} pool_grad_job;

/* One 2x2/2 plane: every input of a window is written (dy at its first
 * maximum, 0 elsewhere; 0 everywhere under relu when the maximum is not
 * > 0), so only a row or column no window covers (odd sizes) needs
 * clearing. */
/* One output row's windows: selects instead of branches, so it vectorises.
 * The window's first maximum takes g unless relu and the maximum is not
 * > 0; later candidates win only when strictly greater, as in the forward. */
static void maxpool2_grad_row(int64_t ow, float *restrict d0, float *restrict d1,
                              const float *restrict r0, const float *restrict r1,
                              const float *restrict g, int relu)
{
    for (int64_t o = 0; o < ow; o++) {
        float a = r0[2 * o], b = r0[2 * o + 1], c = r1[2 * o], d = r1[2 * o + 1];
        float m1 = b > a ? b : a, m2 = c > m1 ? c : m1, m = d > m2 ? d : m2;
        float v = relu && !(m > 0.0f) ? 0.0f : g[o];
        float left = d > m2 ? 0.0f : v; /* what d did not take */
        d1[2 * o + 1] = d > m2 ? v : 0.0f;
        d1[2 * o] = c > m1 ? left : 0.0f;
        left = c > m1 ? 0.0f : left;
        d0[2 * o + 1] = b > a ? left : 0.0f;
        d0[2 * o] = b > a ? 0.0f : left;
    }
}

static void maxpool2_grad_plane(const cpu_pool_shape *s, float *dx, const float *dy, const float *x,
                                int relu)
{
    if (s->h > 2 * s->oh) memset(dx + 2 * s->oh * s->w, 0, (size_t)s->w * sizeof *dx);
    for (int64_t oh = 0; oh < s->oh; oh++) {
        const float *r0 = x + 2 * oh * s->w;
        float *d0 = dx + 2 * oh * s->w;
        if (s->w > 2 * s->ow) d0[s->w - 1] = d0[2 * s->w - 1] = 0.0f;
        maxpool2_grad_row(s->ow, d0, d0 + s->w, r0, r0 + s->w, dy + oh * s->ow, relu);
    }
}

/* Planes [lo, hi): each window's gradient goes to its first maximum, like
 * the forward.  Planes are disjoint, so tasks never share an output. */
static void maxpool_grad_range(void *vctx, int64_t lo, int64_t hi)
{
    const pool_grad_job *j = vctx;
    const cpu_pool_shape *s = j->s;
    if (pool_is_2x2(s)) {
        for (int64_t pl = lo; pl < hi; pl++)
            maxpool2_grad_plane(s, j->dx + pl * s->h * s->w, j->dy + pl * s->oh * s->ow,
                                j->x + pl * s->h * s->w, j->relu);
        return;
    }
    int64_t band = pool_band_rows(s);
    for (int64_t pl = lo; band && pl < hi; pl++)
        maxpool_plane_bands(s, band, NULL, j->dx + pl * s->h * s->w, j->dy + pl * s->oh * s->ow,
                            j->x + pl * s->h * s->w, j->relu);
    if (band) return;
    memset(j->dx + lo * s->h * s->w, 0, (size_t)((hi - lo) * s->h * s->w) * sizeof *j->dx);
    for (int64_t pl = lo; pl < hi; pl++) {
        const float *xp = j->x + pl * s->h * s->w;
        float *dxp = j->dx + pl * s->h * s->w;
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t r[4];
                pool_window(s, oh, ow, r);
                int64_t best = r[0] * s->w + r[2];
                float m = xp[best]; /* kept in a register: no reload per compare */
                for (int64_t i = r[0]; i < r[1]; i++)
                    for (int64_t k = r[2]; k < r[3]; k++)
                        if (xp[i * s->w + k] > m) m = xp[i * s->w + k], best = i * s->w + k;
                if (!j->relu || m > 0.0f) dxp[best] += j->dy[(pl * s->oh + oh) * s->ow + ow];
            }
    }
}

void cpu_maxpool_grad(cpu_pool *p, const cpu_pool_shape *s, float *dx, const float *dy,
                      const float *x, int relu)
{
    pool_grad_job j = {s, dx, dy, x, relu};
    int64_t per = s->h * s->w > 0 ? s->h * s->w : 1;
    cpu_par_range(p, s->planes, CPU_PAR_MIN / per + 1, maxpool_grad_range, &j);
}

void cpu_avgpool_grad(const cpu_pool_shape *s, float *dx, const float *dy)
{
    memset(dx, 0, (size_t)(s->planes * s->h * s->w) * sizeof *dx);
    for (int64_t pl = 0; pl < s->planes; pl++) {
        float *dxp = dx + pl * s->h * s->w;
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t r[4];
                pool_window(s, oh, ow, r);
                float inv = 1.0f / (float)((r[1] - r[0]) * (r[3] - r[2]));
                float g = dy[(pl * s->oh + oh) * s->ow + ow] * inv;
                for (int64_t i = r[0]; i < r[1]; i++)
                    for (int64_t k = r[2]; k < r[3]; k++) dxp[i * s->w + k] += g;
            }
    }
}
