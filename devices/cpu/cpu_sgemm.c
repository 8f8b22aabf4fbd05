/* cpu_sgemm.c - single-precision GEMM with AVX-512 for cpu_gemm.c's
 * blocks, on a CPU that has AVX-512 while the BLAS runs narrower kernels
 * (OpenBLAS told OPENBLAS_CORETYPE=Haswell, or built without them): there
 * it is faster than the BLAS, which stays in charge everywhere else.
 *
 * B is packed a panel of up to KC rows x NC columns at a time (op(B)'s
 * rows, columns padded with zeros to a vector), A eight rows at a time
 * ([k][8], rows past M zero), and avx512_tile (cpu_avx512.h) computes 8
 * rows x 48 columns of C per call, adding into C after the first panel of
 * rows.  Tiles that would cross C's edge go through a small buffer.
 *
 * Like the BLAS it stands in for, its loads and stores of A, B and C are
 * not instrumented by ThreadSanitizer (NO_TSAN): a Hogwild! update adds
 * into the shared variable through it (apply_sgd_matmul), the intended
 * race that devices/cpu/tsan.supp suppresses in the update kernels, and
 * reporting it on every vector (each report suppressed, but unwound and
 * symbolized first) made a TSan run of two Hogwild! threads take minutes
 * a step. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_avx512.h"
#include "cpu_impl.h"

#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define NO_TSAN __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef NO_TSAN
#define NO_TSAN
#endif

#define KC 256 /* depth a packed panel of B */
#define NC 768 /* columns a packed panel of B: 16 tiles */
#define TW (3 * AVX512_W)

/* The BLAS's kernels are AVX-512 ones (OpenBLAS's names for them). */
static int blas_has_avx512(void)
{
    static const char *wide[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    const char *core = cpu_blas_core();
    for (size_t i = 0; core && i < sizeof wide / sizeof wide[0]; i++)
        if (strcmp(core, wide[i]) == 0) return 1;
    return 0;
}

int cpu_sgemm_wanted(int64_t m, int64_t n, int64_t k)
{
    static atomic_int want = -1; /* racing threads store the same answer */
    int v = atomic_load_explicit(&want, memory_order_relaxed);
    if (v < 0) {
        v = cpu_has_avx512() && !blas_has_avx512();
        atomic_store_explicit(&want, v, memory_order_relaxed);
    }
    return v && m >= AVX512_ROWS && n >= 2 * AVX512_W && k >= 16;
}

typedef struct sgemm {
    int ta, tb, add;
    int64_t m, n, k, lda, ldb, ldc;
    float alpha;
    const float *a, *b;
    float *c;
} sgemm;

/* A row of B: not memcpy, whose TSan interceptor would check it. */
static inline AVX512 NO_TSAN void copy_row(float *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + AVX512_W <= n; i += AVX512_W) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, tail, _mm512_maskz_loadu_ps(tail, src + i));
}

/* bp[kk][j] = op(B)[k0 + kk][n0 + j] for j < nb, 0 up to ldp. */
static AVX512 NO_TSAN void pack_b(const sgemm *g, int64_t k0, int64_t kb, int64_t n0, int64_t nb,
                                  float *bp, int64_t ldp)
{
    for (int64_t kk = 0; kk < kb; kk++) {
        float *restrict row = bp + kk * ldp;
        if (!g->tb) copy_row(row, g->b + (k0 + kk) * g->ldb + n0, nb);
        for (int64_t j = nb; j < ldp; j++) row[j] = 0.0f;
    }
    /* B^T: 16 of its rows at a time, so that each cache line read serves
     * 16 rows of the panel */
    for (int64_t j0 = 0; g->tb && j0 < nb; j0 += AVX512_W) {
        int64_t jn = nb - j0 < AVX512_W ? nb - j0 : AVX512_W;
        const float *src = g->b + (n0 + j0) * g->ldb + k0;
        for (int64_t kk = 0; kk < kb; kk++)
            for (int64_t j = 0; j < jn; j++) bp[kk * ldp + j0 + j] = src[j * g->ldb + kk];
    }
}

/* ap[kk][r] = op(A)[m0 + r][k0 + kk] for r < mb, 0 for the other rows. */
static NO_TSAN void pack_a(const sgemm *g, int64_t m0, int64_t mb, int64_t k0, int64_t kb,
                           float *ap)
{
    for (int64_t kk = 0; kk < kb; kk++)
        for (int64_t r = 0; r < AVX512_ROWS; r++)
            ap[kk * AVX512_ROWS + r] = r >= mb ? 0.0f
                                       : g->ta ? g->a[(k0 + kk) * g->lda + m0 + r]
                                               : g->a[(m0 + r) * g->lda + k0 + kk];
}

#define SGEMM_TILE(J)                                                                              \
    static AVX512 NO_TSAN __attribute__((noinline)) void tile##J(                                  \
        const float *bp, int64_t ldp, int64_t kb, const float *ap, float *c, int64_t ldc,          \
        float alpha, int add)                                                                      \
    {                                                                                              \
        static const int32_t zero[1] = {0};                                                        \
        avx512_tile(bp, ldp, kb, zero, 1, ap, c, ldc, J, alpha, add);                              \
    }
SGEMM_TILE(1)
SGEMM_TILE(2)
SGEMM_TILE(3)

static void tile(int J, const float *bp, int64_t ldp, int64_t kb, const float *ap, float *c,
                 int64_t ldc, float alpha, int add)
{
    if (J == 3)
        tile3(bp, ldp, kb, ap, c, ldc, alpha, add);
    else if (J == 2)
        tile2(bp, ldp, kb, ap, c, ldc, alpha, add);
    else
        tile1(bp, ldp, kb, ap, c, ldc, alpha, add);
}

/* Rows [m0, m0 + mb) of C against a packed panel: columns [n0, n0 + nb). */
static NO_TSAN void rows_panel(const sgemm *g, const float *ap, int64_t mb, int64_t m0,
                               const float *bp, int64_t ldp, int64_t kb, int64_t n0, int64_t nb,
                               int add)
{
    float tmp[AVX512_ROWS * TW];
    for (int64_t j = 0; j < nb; j += TW) {
        int64_t w = nb - j < TW ? nb - j : TW;
        int J = (int)((w + AVX512_W - 1) / AVX512_W);
        float *c = g->c + m0 * g->ldc + n0 + j;
        if (mb == AVX512_ROWS && w == J * AVX512_W) {
            tile(J, bp + j, ldp, kb, ap, c, g->ldc, g->alpha, add);
            continue;
        }
        tile(J, bp + j, ldp, kb, ap, tmp, TW, g->alpha, 0);
        for (int64_t r = 0; r < mb; r++)
            for (int64_t q = 0; q < w; q++)
                c[r * g->ldc + q] = add ? c[r * g->ldc + q] + tmp[r * TW + q] : tmp[r * TW + q];
    }
}

/* Floats of the packing buffer: a panel of B and 8 rows of A. */
#define BUF_FLOATS (KC * (NC + AVX512_W) + KC * AVX512_ROWS)

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static void buf_key_make(void)
{
    if (pthread_key_create(&buf_key, free) != 0) abort(); /* PTHREAD_KEYS_MAX reached */
}

/* This thread's packing buffer, made on its first product as large as any
 * needs, so that a step in steady state allocates nothing (test_no_malloc);
 * freed when the thread ends.  NULL when memory ran out. */
static float *thread_buf(void)
{
    pthread_once(&buf_once, buf_key_make);
    float *b = pthread_getspecific(buf_key);
    if (!b && (b = malloc(BUF_FLOATS * sizeof *b)) && pthread_setspecific(buf_key, b) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

int cpu_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
              int64_t lda, const float *b, int64_t ldb, int add, float *c, int64_t ldc)
{
    sgemm g = {ta, tb, add, m, n, k, lda, ldb, ldc, alpha, a, b, c};
    float *bp = thread_buf();
    if (!bp) return -1;
    float *ap = bp + KC * (NC + AVX512_W);
    for (int64_t n0 = 0; n0 < n; n0 += NC) {
        int64_t nb = n - n0 < NC ? n - n0 : NC, ldp = (nb + AVX512_W - 1) / AVX512_W * AVX512_W;
        for (int64_t k0 = 0; k0 < k; k0 += KC) {
            int64_t kb = k - k0 < KC ? k - k0 : KC;
            pack_b(&g, k0, kb, n0, nb, bp, ldp);
            for (int64_t m0 = 0; m0 < m; m0 += AVX512_ROWS) {
                int64_t mb = m - m0 < AVX512_ROWS ? m - m0 : AVX512_ROWS;
                pack_a(&g, m0, mb, k0, kb, ap);
                rows_panel(&g, ap, mb, m0, bp, ldp, kb, n0, nb, add || k0 > 0);
            }
        }
    }
    return 0;
}
