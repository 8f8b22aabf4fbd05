/* bcast.c - numpy broadcasting plans (bcast.h). */
#include "bcast.h"

/* t's strides along out's axes when t is broadcast to out (numpy aligns
 * the trailing axes): 0 on an axis t has as 1 or lacks. */
static void bcast_strides(const ir_type *out, const ir_type *t, int64_t *s)
{
    int off = out->rank - t->rank;
    int64_t st = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t dim = d - off >= 0 ? t->dim[d - off] : 1;
        s[d] = dim == 1 ? 0 : st;
        st *= dim;
    }
}

/* Whether axis d folds into the kept axis k: every operand walks them as one. */
static int bcast_mergeable(const bcast_axes *bc, int k, const int64_t *sa, const int64_t *sb, int d,
                           int64_t dim)
{
    int ok_a = (bc->sa[k] == sa[d] * dim) || (bc->sa[k] == 0 && sa[d] == 0);
    int ok_b = (bc->sb[k] == sb[d] * dim) || (bc->sb[k] == 0 && sb[d] == 0);
    return ok_a && ok_b;
}

void bcast_plan(bcast_axes *bc, const ir_type *out, const ir_type *a, const ir_type *b)
{
    int64_t sa[IR_MAX_DIMS], sb[IR_MAX_DIMS] = {0};
    bcast_strides(out, a, sa);
    if (b) bcast_strides(out, b, sb);
    bc->nd = 0;
    for (int d = 0; d < out->rank; d++) {
        int64_t dim = out->dim[d];
        if (dim == 1) continue;
        int k = bc->nd - 1;
        if (k >= 0 && bcast_mergeable(bc, k, sa, sb, d, dim)) {
            bc->dim[k] *= dim;
        } else {
            k = bc->nd++;
            bc->dim[k] = dim;
        }
        bc->sa[k] = sa[d];
        bc->sb[k] = sb[d];
    }
    if (bc->nd == 0) {
        bc->nd = 1;
        bc->dim[0] = 1;
        bc->sa[0] = bc->sb[0] = 0;
    }
}
