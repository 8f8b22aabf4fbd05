/* cpu_winograd.c - stride-1 3x3 and 5x5 convolutions and their two
 * gradients by Winograd's minimal filtering F(2x2, kxk) (conv_algo.h says
 * which layers).
 *
 * In one dimension, two outputs of a k-tap correlation of a (k+1)-sample
 * input d with a filter g are y = AT [(G g) . (BT d)]; in two, a 2x2 output
 * tile is Y = AT [(G g G^T) . (BT d B)] A.  Over channels the elementwise
 * product becomes, for each of the (k+1)^2 positions p of the tile, a GEMM
 * M_p[cout x tiles] = U_p[cout x cin] V_p[cin x tiles].  The matrices are
 * Toom-Cook's at the points 0, 1, -1 (and 2, -2 for k = 5) and infinity;
 * test_kernels checks all three kernels against the direct convolution.
 *
 *  - input gradient: the forward pass of dy with each filter turned by 180
 *    degrees and its channels swapped, padded by k - 1 - pad;
 *  - filter gradient: its transform's adjoint, dU_p = sum over tiles of
 *    (A dY AT)_p V_p, then dg = G^T dU G.
 *
 * Tasks take chunks of images in turn, as im2col takes images; each task's
 * scratch slice holds its transformed chunk (conv_wino_plan).  The
 * transformed filters live in slice 0, made before the chunks by all tasks
 * together; the filter gradient's partial sums are per task, added in task
 * order.  The transforms' coefficients (up to 5, and 1/24) cost accuracy:
 * on LeNet's conv2 (5x5) the largest error is about 7e-6 of the largest
 * output, where im2col's is 1e-7; 3x3 stays near 2e-7 (test_kernels). */
#include <cblas.h>

#include "../../compiler/conv_algo.h"
#include "cpu_impl.h"

/* The rows of a small image are short: GCC must not turn their copy loops
 * into calls of memmove (40 cycles for a row of 28 floats here). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

typedef struct wino_mats {
    const float *at, *g, *bt; /* [2][a], [a][k], [a][a] */
} wino_mats;

/* Derived for the points above: the unique BT that makes the identity
 * hold once AT and G are fixed by them. */
// clang-format off
static const float at3[2 * 4] = {1, 1, 1, 0,
                                 0, 1, -1, 1};
static const float g3[4 * 3] = {-1, 0, 0,
                                .5f, .5f, .5f,
                                .5f, -.5f, .5f,
                                0, 0, 1};
static const float bt3[4 * 4] = {-1, 0, 1, 0,
                                 0, 1, 1, 0,
                                 0, -1, 1, 0,
                                 0, -1, 0, 1};
static const float at5[2 * 6] = {1, 1, 1, 1, 1, 0,
                                 0, 1, -1, 2, -2, 1};
static const float g5[6 * 5] = {1 / 4.f, 0, 0, 0, 0,
                                -1 / 6.f, -1 / 6.f, -1 / 6.f, -1 / 6.f, -1 / 6.f,
                                -1 / 6.f, 1 / 6.f, -1 / 6.f, 1 / 6.f, -1 / 6.f,
                                1 / 24.f, 1 / 12.f, 1 / 6.f, 1 / 3.f, 2 / 3.f,
                                1 / 24.f, -1 / 12.f, 1 / 6.f, -1 / 3.f, 2 / 3.f,
                                0, 0, 0, 0, 1};
static const float bt5[6 * 6] = {4, 0, -5, 0, 1, 0,
                                 0, -4, -4, 1, 1, 0,
                                 0, 4, -4, -1, 1, 0,
                                 0, -2, -1, 2, 1, 0,
                                 0, 2, -1, -2, 1, 0,
                                 0, 4, 0, -5, 0, 1};
// clang-format on

/* One pass: the forward convolution, or the input gradient as one. */
typedef struct wino_job {
    wino_mats t;
    conv_wino pl;
    int64_t n, k, cin, cout, ih, iw, oh, ow, pad;
    const float *x, *w, *dy; /* dy: the filter gradient's */
    float *y;                /* out: y, dx or dw */
    const float *bias;       /* forward: per output channel, or NULL */
    int relu, flip;          /* flip: the input gradient's filters */
    cpu_tasks tasks;
    int64_t n_chunks;
} wino_job;

static float *task_u(const wino_job *j, int t)
{
    return cpu_task_slice(&j->tasks, t);
}

/* The work regions of task t's slice, after its u. */
static void task_regions(const wino_job *j, int t, float **v, float **m, float **plane)
{
    *v = task_u(j, t) + j->pl.u;
    *m = *v + j->pl.v;
    *plane = *m + j->pl.m;
}

/* Output channels [lo, hi) of task t of nt. */
static void task_range(int64_t n, int t, int nt, int64_t *lo, int64_t *hi)
{
    *lo = n * t / nt, *hi = n * (t + 1) / nt;
}

/* ---- filter transform: U_p[co][ci] = (G g G^T)_p ---- */

static void filter_tile(const wino_job *j, const float *g, float *u, int64_t stride)
{
    int64_t a = j->pl.a, k = j->k;
    float gg[6 * 5];
    for (int64_t i = 0; i < a; i++)
        for (int64_t c = 0; c < k; c++) {
            float s = 0;
            for (int64_t r = 0; r < k; r++) s += j->t.g[i * k + r] * g[r * k + c];
            gg[i * k + c] = s;
        }
    for (int64_t i = 0; i < a; i++)
        for (int64_t l = 0; l < a; l++) {
            float s = 0;
            for (int64_t c = 0; c < k; c++) s += gg[i * k + c] * j->t.g[l * k + c];
            u[(i * a + l) * stride] = s;
        }
}

static void filter_task(void *arg, int t)
{
    const wino_job *j = arg;
    int64_t lo, hi, kk = j->k * j->k, stride = j->cout * j->cin;
    task_range(j->cout, t, j->tasks.n, &lo, &hi);
    float turned[25];
    for (int64_t co = lo; co < hi; co++)
        for (int64_t ci = 0; ci < j->cin; ci++) {
            /* the input gradient's filter [ci][co] is w[co][ci] turned */
            const float *g =
                j->flip ? j->w + (ci * j->cout + co) * kk : j->w + (co * j->cin + ci) * kk;
            if (j->flip)
                for (int64_t i = 0; i < kk; i++) turned[i] = g[kk - 1 - i];
            filter_tile(j, j->flip ? turned : g, task_u(j, 0) + co * j->cin + ci, stride);
        }
}

/* ---- the tile transforms, WL tiles of a row side by side ----
 * Each element of a tile is a vector of WL lanes, one per tile.  The
 * transforms are inlined for each tile size, so that the matrices are
 * constants: their zeros cost nothing and the loops unroll. */

#define WL CONV_WINO_LANES
_Static_assert(WL == 8, "load_pairs shuffles 8 lanes");
#define WINO_INLINE static inline __attribute__((always_inline))
/* WL floats, one per tile: GCC's and clang's vector extension, so the
 * lanes are one register whatever the loops become. */
typedef float wl_vec __attribute__((vector_size(WL * sizeof(float))));

/* out[r][c] = sum_i m[r][i] in[i][c] (transpose_in: in[c][i]) */
WINO_INLINE void lanes_mul(int rows, int inner, int cols, const float *m, const wl_vec *in,
                           int transpose_in, wl_vec *out)
{
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 6
        for (int c = 0; c < cols; c++) {
            wl_vec o = {0};
#pragma GCC unroll 6
            for (int i = 0; i < inner; i++) {
                float f = m[r * inner + i];
                if (f != 0.0f) o += f * (transpose_in ? in[c * inner + i] : in[i * cols + c]);
            }
            out[r * cols + c] = o;
        }
}

/* Lane l of *even and *odd: row[2 l] and row[2 l + 1], the columns c and
 * c + 1 of WL tiles side by side (a tile starts every second column). */
WINO_INLINE void load_pairs(const float *row, wl_vec *even, wl_vec *odd)
{
    wl_vec lo, hi;
    memcpy(&lo, row, sizeof lo);
    memcpy(&hi, row + WL, sizeof hi);
    *even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
    *odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
}

/* WL tiles from x0 of the row of tiles whose plane rows start at rows:
 * their BT d B into v's columns x0.. (the p-th element p * vstride on). */
WINO_INLINE void in_lanes(int a, const float *bt, const float *rows, int64_t pw, int64_t x0,
                          float *v, int64_t vstride)
{
    wl_vec d[36], t[36];
#pragma GCC unroll 6
    for (int i = 0; i < a; i++)
#pragma GCC unroll 3
        for (int c = 0; c < a; c += 2)
            load_pairs(rows + i * pw + 2 * x0 + c, &d[i * a + c], &d[i * a + c + 1]);
    lanes_mul(a, a, a, bt, d, 0, t); /* BT d */
    lanes_mul(a, a, a, bt, t, 1, d); /* (BT d) B, transposed: d[c][r] */
#pragma GCC unroll 6
    for (int r = 0; r < a; r++)
#pragma GCC unroll 6
        for (int c = 0; c < a; c++)
            memcpy(v + (r * a + c) * vstride + x0, &d[c * a + r], sizeof(wl_vec));
}

/* A row of tiles of one channel plane: lanes past its last tile spill into
 * the next row's (written after) or past the chunk (ld leaves room). */
static void in_tile_row(const wino_job *j, const float *rows, float *v, int64_t vstride)
{
    for (int64_t x0 = 0; x0 < j->pl.tw; x0 += WL)
        if (j->pl.a == 6)
            in_lanes(6, bt5, rows, j->pl.pw, x0, v, vstride);
        else
            in_lanes(4, bt3, rows, j->pl.pw, x0, v, vstride);
}

/* dst[0, n) = src[0, n) by vectors, the last one overlapping the one
 * before. */
static inline void copy_short(float *restrict dst, const float *restrict src, int64_t n)
{
    if (n < WL) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    wl_vec v;
    for (int64_t c = 0; c + WL < n; c += WL) {
        memcpy(&v, src + c, sizeof v);
        memcpy(dst + c, &v, sizeof v);
    }
    memcpy(&v, src + n - WL, sizeof v);
    memcpy(dst + n - WL, &v, sizeof v);
}

/* Plane x (h x w, its top left corner at (pad, pad)) into the zero-padded
 * plane of the tile grid: each row's padding is written, not the whole
 * plane first. */
static void pad_plane(const wino_job *j, const float *x, int64_t h, int64_t w, int64_t pad,
                      float *restrict plane)
{
    int64_t pw = j->pl.pw, rows = h < j->pl.ph - pad ? h : j->pl.ph - pad;
    int64_t cols = w < pw - pad ? w : pw - pad;
    for (int64_t r = 0; r < j->pl.ph; r++) {
        float *restrict o = plane + r * pw;
        if (r < pad || r >= pad + rows) {
            cpu_fill_f32(o, 0.0f, pw);
            continue;
        }
        for (int64_t c = 0; c < pad; c++) o[c] = 0.0f;
        copy_short(o + pad, x + (r - pad) * w, cols);
        for (int64_t c = pad + cols; c < pw; c++) o[c] = 0.0f;
    }
}

/* Image x (cin planes) into v's columns [t0, t0 + tiles). */
static void in_image(const wino_job *j, const float *x, float *v, int64_t t0, float *plane)
{
    int64_t vstride = j->cin * j->pl.ld;
    for (int64_t ci = 0; ci < j->cin; ci++) {
        pad_plane(j, x + ci * j->ih * j->iw, j->ih, j->iw, j->pad, plane);
        for (int64_t ty = 0; ty < j->pl.th; ty++)
            in_tile_row(j, plane + 2 * ty * j->pl.pw, v + ci * j->pl.ld + t0 + ty * j->pl.tw,
                        vstride);
    }
}

/* ---- output transform: Y = AT M A, with bias and relu ---- */

/* WL tiles from x0 of a row of tiles (m's columns): their 2x2 outputs into
 * rows y (and y + ow, unless `rows` is 1), up to column ow. */
WINO_INLINE void out_lanes(const wino_job *j, int a, const float *at, const float *m,
                           int64_t mstride, int64_t x0, float *y, int rows, float bias)
{
    wl_vec d[36], t[12], o[4];
#pragma GCC unroll 36
    for (int p = 0; p < a * a; p++) memcpy(&d[p], m + p * mstride + x0, sizeof(wl_vec));
    lanes_mul(2, a, a, at, d, 0, t); /* AT M */
    lanes_mul(2, a, 2, at, t, 1, o); /* (AT M) A, transposed: o[e][i] */
    int64_t cols = j->ow - 2 * x0 < 2 * WL ? j->ow - 2 * x0 : 2 * WL;
    for (int i = 0; i < rows; i++) {
        float row[2 * WL];
        for (int l = 0; l < WL; l++)
            for (int e = 0; e < 2; e++) {
                float s = o[e * 2 + i][l] + bias;
                row[2 * l + e] = j->relu && !(s > 0.0f) ? 0.0f : s;
            }
        if (cols == 2 * WL) /* a constant size: stores, not a call */
            memcpy(y + i * j->ow + 2 * x0, row, sizeof row);
        else
            for (int64_t c = 0; c < cols; c++) y[i * j->ow + 2 * x0 + c] = row[c];
    }
}

static void out_image(const wino_job *j, const float *m, int64_t t0, float *y)
{
    int64_t mstride = j->cout * j->pl.ld;
    for (int64_t co = 0; co < j->cout; co++)
        for (int64_t ty = 0; ty < j->pl.th; ty++) {
            const float *mt = m + co * j->pl.ld + t0 + ty * j->pl.tw;
            float *yt = y + (co * j->oh + 2 * ty) * j->ow, bias = j->bias ? j->bias[co] : 0.0f;
            int rows = 2 * ty + 1 < j->oh ? 2 : 1;
            for (int64_t x0 = 0; x0 < j->pl.tw; x0 += WL)
                if (j->pl.a == 6)
                    out_lanes(j, 6, at5, mt, mstride, x0, yt, rows, bias);
                else
                    out_lanes(j, 4, at3, mt, mstride, x0, yt, rows, bias);
        }
}

/* ---- the passes ---- */

/* Images [*n0, *n1) of chunk c, and their tiles. */
static int64_t chunk_images(const wino_job *j, int64_t c, int64_t *n0, int64_t *n1)
{
    *n0 = c * j->pl.imgs;
    *n1 = *n0 + j->pl.imgs < j->n ? *n0 + j->pl.imgs : j->n;
    return (*n1 - *n0) * j->pl.tiles;
}

static void in_chunk(const wino_job *j, int64_t n0, int64_t n1, float *v, float *plane)
{
    for (int64_t n = n0; n < n1; n++)
        in_image(j, j->x + n * j->cin * j->ih * j->iw, v, (n - n0) * j->pl.tiles, plane);
}

static void fwd_task(void *arg, int t)
{
    const wino_job *j = arg;
    float *v, *m, *plane;
    task_regions(j, t, &v, &m, &plane);
    const float *u = task_u(j, 0);
    int64_t aa = j->pl.a * j->pl.a, ld = j->pl.ld, n0, n1;
    for (int64_t c = t; c < j->n_chunks; c += j->tasks.n) {
        int64_t cols = chunk_images(j, c, &n0, &n1);
        in_chunk(j, n0, n1, v, plane);
        for (int64_t p = 0; p < aa; p++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->cout, (int)cols,
                        (int)j->cin, 1.0f, u + p * j->cout * j->cin, (int)j->cin,
                        v + p * j->cin * ld, (int)ld, 0.0f, m + p * j->cout * ld, (int)ld);
        for (int64_t n = n0; n < n1; n++)
            out_image(j, m, (n - n0) * j->pl.tiles, j->y + n * j->cout * j->oh * j->ow);
    }
}

/* Sets up tasks and scratch for a pass over j->n images; 0, or -1 when
 * memory ran out. */
static int wino_open(const cpu_conv_ctx *cx, wino_job *j)
{
    j->t = j->k == 3 ? (wino_mats){at3, g3, bt3} : (wino_mats){at5, g5, bt5};
    size_t need = conv_wino_plan(&j->pl, j->n, j->cin, j->cout, j->k, j->oh, j->ow);
    j->n_chunks = (j->n + j->pl.imgs - 1) / j->pl.imgs;
    return cpu_tasks_open(cx, j->n_chunks, need, &j->tasks);
}

static void wino_pass(const cpu_conv_ctx *cx, wino_job *j)
{
    if (wino_open(cx, j) == 0) {
        cpu_pool_for(cx->pool, j->tasks.n, filter_task, j);
        cpu_pool_for(cx->pool, j->tasks.n, fwd_task, j);
    }
    cpu_tasks_close(&j->tasks);
}

/* The forward pass's roles: x in, y out. */
static wino_job forward_job(const cpu_conv_shape *s)
{
    return (wino_job){.n = s->n,
                      .k = s->kh,
                      .cin = s->c,
                      .cout = s->oc,
                      .ih = s->h,
                      .iw = s->w,
                      .oh = s->oh,
                      .ow = s->ow,
                      .pad = s->pad};
}

void cpu_wino_conv2d(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *out, const float *x,
                     const float *w, const float *bias, int relu)
{
    wino_job j = forward_job(s);
    j.x = x, j.w = w, j.y = out, j.bias = bias, j.relu = relu;
    wino_pass(cx, &j);
}

void cpu_wino_conv2d_grad_x(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dx,
                            const float *dy, const float *w)
{
    wino_job j = {.n = s->n,
                  .k = s->kh,
                  .cin = s->oc,
                  .cout = s->c,
                  .ih = s->oh,
                  .iw = s->ow,
                  .oh = s->h,
                  .ow = s->w,
                  .pad = s->kh - 1 - s->pad,
                  .x = dy,
                  .w = w,
                  .y = dx,
                  .flip = 1};
    wino_pass(cx, &j);
}

/* ---- the filter gradient ---- */

/* WL tiles from x0 of a row of dy's tiles (rows of the padded plane):
 * their A dY AT into m's columns x0.. */
WINO_INLINE void dy_lanes(int a, const float *at, const float *rows, int64_t pw, int64_t x0,
                          float *m, int64_t mstride)
{
    wl_vec d[4], t[12], o[36];
    for (int i = 0; i < 2; i++) load_pairs(rows + i * pw + 2 * x0, &d[i * 2], &d[i * 2 + 1]);
    float a_t[12]; /* A = AT transposed: [a][2] */
    for (int r = 0; r < a; r++)
        for (int i = 0; i < 2; i++) a_t[r * 2 + i] = at[i * a + r];
    lanes_mul(a, 2, 2, a_t, d, 0, t); /* t[r][e] = sum_i A[r][i] dY[i][e] */
    lanes_mul(a, 2, a, a_t, t, 1, o); /* o[c][r] = sum_e A[c][e] t[r][e] */
#pragma GCC unroll 6
    for (int r = 0; r < a; r++)
#pragma GCC unroll 6
        for (int c = 0; c < a; c++)
            memcpy(m + (r * a + c) * mstride + x0, &o[c * a + r], sizeof(wl_vec));
}

/* dM_p[co][tile] = (A dY AT)_p of one image's dy, 0 beyond the output. */
static void dy_image(const wino_job *j, const float *dy, float *m, int64_t t0, float *plane)
{
    int64_t mstride = j->cout * j->pl.ld, pw = j->pl.pw;
    for (int64_t co = 0; co < j->cout; co++) {
        pad_plane(j, dy + co * j->oh * j->ow, j->oh, j->ow, 0, plane);
        for (int64_t ty = 0; ty < j->pl.th; ty++) {
            float *mt = m + co * j->pl.ld + t0 + ty * j->pl.tw;
            for (int64_t x0 = 0; x0 < j->pl.tw; x0 += WL)
                if (j->pl.a == 6)
                    dy_lanes(6, at5, plane + 2 * ty * pw, pw, x0, mt, mstride);
                else
                    dy_lanes(4, at3, plane + 2 * ty * pw, pw, x0, mt, mstride);
        }
    }
}

static void gw_task(void *arg, int t)
{
    const wino_job *j = arg;
    float *v, *m, *plane, *du = task_u(j, t);
    task_regions(j, t, &v, &m, &plane);
    int64_t aa = j->pl.a * j->pl.a, ld = j->pl.ld, n0, n1;
    float beta = 0.0f;
    for (int64_t c = t; c < j->n_chunks; c += j->tasks.n, beta = 1.0f) {
        int64_t cols = chunk_images(j, c, &n0, &n1);
        in_chunk(j, n0, n1, v, plane);
        for (int64_t n = n0; n < n1; n++)
            dy_image(j, j->dy + n * j->cout * j->oh * j->ow, m, (n - n0) * j->pl.tiles, plane);
        for (int64_t p = 0; p < aa; p++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->cout, (int)j->cin,
                        (int)cols, 1.0f, m + p * j->cout * ld, (int)ld, v + p * j->cin * ld,
                        (int)ld, beta, du + p * j->cout * j->cin, (int)j->cin);
    }
}

/* dw of output channels [lo, hi): the tasks' dU summed in task order, then
 * G^T dU G. */
static void gw_finish_task(void *arg, int t)
{
    const wino_job *j = arg;
    int64_t lo, hi, a = j->pl.a, k = j->k, stride = j->cout * j->cin;
    task_range(j->cout, t, j->tasks.n, &lo, &hi);
    for (int64_t co = lo; co < hi; co++)
        for (int64_t ci = 0; ci < j->cin; ci++) {
            float du[36], h[6 * 5];
            for (int64_t p = 0; p < a * a; p++) {
                du[p] = 0.0f;
                for (int q = 0; q < j->tasks.n; q++)
                    du[p] += task_u(j, q)[p * stride + co * j->cin + ci];
            }
            for (int64_t r = 0; r < a; r++) /* h = dU G */
                for (int64_t c = 0; c < k; c++) {
                    float s = 0;
                    for (int64_t l = 0; l < a; l++) s += du[r * a + l] * j->t.g[l * k + c];
                    h[r * k + c] = s;
                }
            float *dw = j->y + (co * j->cin + ci) * k * k;
            for (int64_t r = 0; r < k; r++) /* dw = G^T h */
                for (int64_t c = 0; c < k; c++) {
                    float s = 0;
                    for (int64_t i = 0; i < a; i++) s += j->t.g[i * k + r] * h[i * k + c];
                    dw[r * k + c] = s;
                }
        }
}

void cpu_wino_conv2d_grad_w(const cpu_conv_ctx *cx, const cpu_conv_shape *s, float *dw,
                            const float *dy, const float *x)
{
    wino_job j = forward_job(s);
    j.x = x, j.dy = dy, j.y = dw;
    if (wino_open(cx, &j) == 0) {
        cpu_pool_for(cx->pool, j.tasks.n, gw_task, &j);
        cpu_pool_for(cx->pool, j.tasks.n, gw_finish_task, &j);
    }
    cpu_tasks_close(&j.tasks);
}
