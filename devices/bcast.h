/* bcast.h - numpy broadcasting as the kernels walk it, one plan for every
 * device: how out's elements read the operands broadcast to it.  The CPU's
 * elementwise, reduction and batched-GEMM kernels (devices/cpu) and the
 * CUDA ones (k_elementwise.cu, k_gemm.cu) plan with it, so they agree on
 * which element reads which.  Included by devices/ only; C, and C++ for
 * nvcc. */
#ifndef GR_BCAST_H
#define GR_BCAST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* bcast.c and the compiler are C */
#endif

#include "../compiler/ir.h"

/* How out's elements read a and b (b may be NULL) when they are broadcast
 * to it: per axis of out, its size and each operand's stride (0 where
 * broadcast).  Axes of size 1 are dropped and neighbours every operand walks
 * as one are merged, so the usual cases (same shape, a scalar, a bias row)
 * are one axis; nd >= 1. */
typedef struct bcast_axes {
    int nd;
    int64_t dim[IR_MAX_DIMS];
    int64_t sa[IR_MAX_DIMS], sb[IR_MAX_DIMS];
} bcast_axes;
void bcast_plan(bcast_axes *bc, const ir_type *out, const ir_type *a, const ir_type *b);

#ifdef __cplusplus
}
#endif

#endif
