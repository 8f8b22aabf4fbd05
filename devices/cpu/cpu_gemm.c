/* cpu_gemm.c - MATMUL and MATMUL_BIAS on OpenBLAS.
 *
 * The BLAS runs single-threaded (cpu_blas_init); a big GEMM is split here
 * into blocks of output rows (or columns when there are few rows), one
 * cblas_sgemm per pool task.  Row-major throughout: a is [M,K] ([K,M] when
 * trans_a), b is [K,N] ([N,K] when trans_b), c is [M,N]. */
#include <cblas.h>

#include "cpu_impl.h"

/* Below this many multiply-adds one thread is faster than waking others. */
#define GEMM_PAR_MIN 1000000

typedef struct gemm_ctx {
    const cpu_gemm_args *g;
    int ntasks;
    int split_rows;
} gemm_ctx;

/* C[m0:m1, n0:n1] = bias (when given) and beta = 1, so the bias add costs no
 * extra pass; relu runs on the block right after, while it is in cache.
 * With accumulate, beta = 1 adds alpha * a@b to what C holds. */
static void gemm_block(const cpu_gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    int64_t M = g->m, N = g->n, K = g->k, bm = m1 - m0, bn = n1 - n0;
    if (bm <= 0 || bn <= 0) return;
    float *c = g->c + m0 * N + n0;
    if (g->bias) {
        for (int64_t i = 0; i < bm; i++) {
            float *restrict row = c + i * N;
            const float *restrict bias = g->bias + n0;
            for (int64_t j = 0; j < bn; j++) row[j] = bias[j];
        }
    }
    const float *a = g->trans_a ? g->a + m0 : g->a + m0 * K;
    const float *b = g->trans_b ? g->b + n0 * K : g->b + n0;
    int lda = (int)(g->trans_a ? M : K), ldb = (int)(g->trans_b ? K : N);
    if (K == 0) {
        if (!g->bias && !g->accumulate)
            for (int64_t i = 0; i < bm; i++) cpu_fill_f32(c + i * N, 0.0f, bn);
    } else {
        cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                    g->trans_b ? CblasTrans : CblasNoTrans, (int)bm, (int)bn, (int)K,
                    g->accumulate ? g->alpha : 1.0f, a, lda, b, ldb,
                    g->bias || g->accumulate ? 1.0f : 0.0f, c, (int)N);
    }
    if (g->relu) {
        for (int64_t i = 0; i < bm; i++) {
            float *restrict row = c + i * N;
            for (int64_t j = 0; j < bn; j++) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
        }
    }
}

static void gemm_task(void *arg, int t)
{
    const gemm_ctx *x = arg;
    const cpu_gemm_args *g = x->g;
    if (x->split_rows) {
        gemm_block(g, g->m * t / x->ntasks, g->m * (t + 1) / x->ntasks, 0, g->n);
    } else {
        gemm_block(g, 0, g->m, g->n * t / x->ntasks, g->n * (t + 1) / x->ntasks);
    }
}

void cpu_matmul(cpu_pool *p, const cpu_gemm_args *g)
{
    int64_t work = g->m * g->n * g->k;
    int nt = work >= GEMM_PAR_MIN ? pool_size(p) : 1;
    gemm_ctx x = {g, nt, 1};
    /* Split the larger output side so every task keeps a decent block. */
    x.split_rows = g->m >= g->n;
    int64_t side = x.split_rows ? g->m : g->n;
    if (side < nt) x.ntasks = nt = side > 0 ? (int)side : 1;
    if (nt == 1) {
        gemm_block(g, 0, g->m, 0, g->n);
        return;
    }
    pool_for(p, nt, gemm_task, &x);
}
