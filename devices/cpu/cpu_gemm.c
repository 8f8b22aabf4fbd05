/* cpu_gemm.c - MATMUL (batched too) and MATMUL_BIAS on OpenBLAS.
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
    } else if (!cpu_sgemm_wanted(bm, bn, K) ||
               cpu_sgemm(g->trans_a, g->trans_b, bm, bn, K, g->accumulate ? g->alpha : 1.0f, a, lda,
                         b, ldb, g->bias || g->accumulate, c, N) != 0) {
        cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                    g->trans_b ? CblasTrans : CblasNoTrans, (int)bm, (int)bn, (int)K,
                    g->accumulate ? g->alpha : 1.0f, a, lda, b, ldb,
                    g->bias || g->accumulate ? 1.0f : 0.0f, c, (int)N);
    }
    if (g->relu)
        for (int64_t i = 0; i < bm; i++) cpu_relu_inplace(c + i * N, bn);
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
    int nt = work >= GEMM_PAR_MIN ? cpu_pool_size(p) : 1;
    gemm_ctx x = {g, nt, 1};
    /* Split the larger output side so every task keeps a decent block. */
    x.split_rows = g->m >= g->n;
    int64_t side = x.split_rows ? g->m : g->n;
    if (side < nt) x.ntasks = nt = side > 0 ? (int)side : 1;
    if (nt == 1) {
        gemm_block(g, 0, g->m, 0, g->n);
        return;
    }
    cpu_pool_for(p, nt, gemm_task, &x);
}

/* ---- batched products: [..., M, K] @ [..., K, N] ---- */

typedef struct bmm_ctx {
    cpu_gemm_args g;     /* the first batch's product */
    const cpu_bcast *bc; /* the batch axes; strides count matrices */
    cpu_pool *pool;      /* each product's split; NULL inside a split over batches */
} bmm_ctx;

/* Output batches o .. o+len-1, reading a's batch ia + i*va and b's
 * ib + i*vb (va, vb: 0 or 1).  A run over which b stays put and a moves
 * with the output is one product of len*M rows, when a is not transposed:
 * its matrices' rows follow each other, as the output's do
 * ([B, T, C] @ [C, N] is one GEMM). */
static void bmm_run(void *vctx, int64_t o, int64_t ia, int64_t ib, int64_t len)
{
    const bmm_ctx *x = vctx;
    const cpu_gemm_args *g0 = &x->g;
    int64_t va = x->bc->sa[x->bc->nd - 1], vb = x->bc->sb[x->bc->nd - 1];
    int64_t sa = g0->m * g0->k, sb = g0->k * g0->n, sc = g0->m * g0->n;
    cpu_gemm_args g = *g0;
    if (va == 1 && vb == 0 && !g.trans_a && g.m * len <= INT32_MAX) {
        g.m *= len;
        len = 1;
    }
    for (int64_t i = 0; i < len; i++) {
        g.a = g0->a + (ia + i * va) * sa;
        g.b = g0->b + (ib + i * vb) * sb;
        g.c = g0->c + (o + i) * sc;
        cpu_matmul(x->pool, &g);
    }
}

static void bmm_range(void *vctx, int64_t lo, int64_t hi)
{
    const bmm_ctx *x = vctx;
    cpu_bcast_walk(x->bc, lo, hi, bmm_run, vctx);
}

/* Products big enough to split run one after the other, each split over
 * the pool; small ones are spread over the pool whole, a range of batches
 * per task. */
void cpu_matmul_batched(cpu_pool *p, const cpu_gemm_args *g, const cpu_bcast *bc, int64_t batches)
{
    int64_t work = g->m * g->n * g->k;
    bmm_ctx x = {*g, bc, p};
    if (batches == 0) return;
    if (work >= GEMM_PAR_MIN) {
        bmm_range(&x, 0, batches);
        return;
    }
    x.pool = NULL;
    cpu_par_range(p, batches, GEMM_PAR_MIN / (work + 1) + 1, bmm_range, &x);
}
