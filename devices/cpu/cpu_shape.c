/* cpu_shape.c - data movement: TRANSPOSE, CONCAT, SLICE(_GRAD), GATHER(_GRAD)
 * and ONE_HOT.  Elements are 4 bytes whatever the dtype, so these move
 * int32_t words. */
#include <string.h>

#include "cpu_impl.h"

/* out[i0..ir] = in[perm-mapped]: walks the output in order with an odometer
 * over its coordinates; the innermost output axis is one strided read loop. */
void cpu_transpose(void *vout, const void *vin, const ir_type *it, const int64_t *perm)
{
    int r = it->rank;
    int32_t *restrict out = vout;
    const int32_t *restrict in = vin;
    if (r == 0) {
        out[0] = in[0];
        return;
    }
    int64_t istr[IR_MAX_DIMS] = {0}, odim[IR_MAX_DIMS] = {0}, ostr[IR_MAX_DIMS] = {0};
    int64_t c[IR_MAX_DIMS] = {0};
    int64_t st = 1;
    for (int d = r - 1; d >= 0; d--) {
        istr[d] = st;
        st *= it->dim[d];
    }
    for (int d = 0; d < r; d++) {
        odim[d] = it->dim[perm[d]];
        ostr[d] = istr[perm[d]]; /* input stride of output axis d */
    }
    int64_t total = cpu_numel(it), inner = odim[r - 1], s = ostr[r - 1];
    if (total == 0) return;
    for (int64_t o = 0; o < total; o += inner) {
        int64_t base = 0;
        for (int d = 0; d < r - 1; d++) base += c[d] * ostr[d];
        for (int64_t i = 0; i < inner; i++) out[o + i] = in[base + i * s];
        for (int d = r - 2; d >= 0; d--) {
            if (++c[d] < odim[d]) break;
            c[d] = 0;
        }
    }
}

static void outer_inner(const ir_type *t, int64_t axis, int64_t *outer, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < t->rank; d++) {
        if (d < axis) *outer *= t->dim[d];
        if (d > axis) *inner *= t->dim[d];
    }
}

void cpu_concat(void *vout, const ir_type *ot, int n, const void *const *in,
                const ir_type *const *it, int64_t axis)
{
    int64_t outer, inner;
    outer_inner(ot, axis, &outer, &inner);
    int32_t *out = vout;
    for (int64_t o = 0; o < outer; o++) {
        for (int k = 0; k < n; k++) {
            int64_t len = it[k]->dim[axis] * inner;
            memcpy(out, (const int32_t *)in[k] + o * len, (size_t)len * 4);
            out += len;
        }
    }
}

void cpu_slice(void *out, const void *in, const ir_type *it, int64_t axis, int64_t begin,
               int64_t len)
{
    int64_t outer, inner, n = it->dim[axis];
    outer_inner(it, axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        memcpy((int32_t *)out + o * len * inner, (const int32_t *)in + (o * n + begin) * inner,
               (size_t)(len * inner) * 4);
}

void cpu_slice_grad(float *dx, const ir_type *xt, const float *dy, int64_t axis, int64_t begin,
                    int64_t len)
{
    int64_t outer, inner, n = xt->dim[axis];
    outer_inner(xt, axis, &outer, &inner);
    memset(dx, 0, (size_t)cpu_numel(xt) * sizeof *dx);
    for (int64_t o = 0; o < outer; o++)
        memcpy(dx + (o * n + begin) * inner, dy + o * len * inner, (size_t)(len * inner) * 4);
}

void cpu_gather(float *out, const float *table, int64_t d, const int32_t *ids, int64_t n_ids)
{
    for (int64_t r = 0; r < n_ids; r++) memcpy(out + r * d, table + ids[r] * d, (size_t)d * 4);
}

void cpu_gather_grad(float *out, int64_t v, int64_t d, const float *dy, const int32_t *ids,
                     int64_t n_ids)
{
    memset(out, 0, (size_t)(v * d) * sizeof *out);
    for (int64_t r = 0; r < n_ids; r++) {
        float *restrict row = out + ids[r] * d;
        const float *restrict g = dy + r * d;
        for (int64_t j = 0; j < d; j++) row[j] += g[j];
    }
}

void cpu_one_hot(float *out, const int32_t *ids, int64_t n_ids, int64_t depth)
{
    memset(out, 0, (size_t)(n_ids * depth) * sizeof *out);
    for (int64_t r = 0; r < n_ids; r++) out[r * depth + ids[r]] = 1.0f;
}
