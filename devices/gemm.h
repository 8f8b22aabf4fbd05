/* gemm.h - how a GEMM node reads as a matrix product, one decoding for
 * every device: which inputs are the operands, which attributes transpose
 * them, m, n and k from their types, and the batch axes.  Included by the
 * devices' kernels (devices/cpu/kernels.c, devices/cuda/k_gemm.cu), so it
 * compiles as C11 and as nvcc C++; host code only.
 *
 * The ops (compiler/ops.h): matmul and matmul_bias multiply in[0] @ in[1],
 * transposed as ATTR_TRANS_A/_B say; apply_sgd_matmul multiplies in[1] @
 * in[2] into its variable in[0], transposed as ATTR_SGDMM_TRANS_A/_B say.
 * op(A) is [m, k] and op(B) [k, n], of the last two axes of each. */
#ifndef GR_GEMM_H
#define GR_GEMM_H

#include "device.h"

typedef struct gemm_dims {
    int a, b;   /* the operands' inputs */
    int ta, tb; /* A (B) is stored transposed */
    int64_t m, n, k;
} gemm_dims;

static inline gemm_dims gemm_dims_of(const kern_args *a)
{
    const ir_node *nd = a->node;
    int upd = nd->op == OP_APPLY_SGD_MATMUL;
    gemm_dims g;
    g.a = upd;
    g.b = upd + 1;
    g.ta = nd->attr.i[upd ? ATTR_SGDMM_TRANS_A : ATTR_TRANS_A] != 0;
    g.tb = nd->attr.i[upd ? ATTR_SGDMM_TRANS_B : ATTR_TRANS_B] != 0;
    const ir_type *at = a->in_t[g.a], *bt = a->in_t[g.b];
    const int64_t *ad = at->dim + at->rank - 2, *bd = bt->dim + bt->rank - 2;
    g.m = g.ta ? ad[1] : ad[0];
    g.k = g.ta ? ad[0] : ad[1];
    g.n = g.tb ? bd[0] : bd[1];
    /* matmul_bias: [..., M, K] @ [K, N] is one GEMM of all the rows (the
       shape rule allows no other batch) */
    if (nd->op == OP_MATMUL_BIAS && g.n) g.m = ir_numel(a->out_t) / g.n;
    return g;
}

/* t without its last two axes: a batched matmul's batch shape. */
static inline ir_type gemm_batch_type(const ir_type *t)
{
    ir_type b = *t;
    b.rank -= 2;
    return b;
}

#endif
