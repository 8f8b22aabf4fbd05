/* cpu_rope.c - ROPE and ROPE_GRAD: rotary position embeddings of
 * [R, T, D] (R the axes before T), the pairs (i, i + D/2) of HF's Llama
 * (rotate_half): at position t, with a = t * base^(-2i/D) in double,
 *   y_i = x_i cos a - x_{i+D/2} sin a,   y_{i+D/2} = x_{i+D/2} cos a + x_i sin a,
 * and the gradient the inverse rotation (sin a negated).  The angles are
 * made as devices/cuda/k_norm.cu makes them, so every device rotates by
 * the same cos and sin. */
#include "cpu_impl.h"

enum { ROPE_BLOCK = 64 }; /* pairs whose cos and sin are made at once */

/* Positions [lo, hi): each block of pairs' cos and sin once, then every row. */
static void rope_range(void *vctx, int64_t lo, int64_t hi)
{
    const cpu_rope_args *r = vctx;
    int64_t d = r->d, h = d / 2;
    float cs[ROPE_BLOCK], sn[ROPE_BLOCK];
    for (int64_t t = lo; t < hi; t++)
        for (int64_t i0 = 0; i0 < h; i0 += ROPE_BLOCK) {
            int64_t nb = h - i0 < ROPE_BLOCK ? h - i0 : ROPE_BLOCK;
            for (int64_t i = 0; i < nb; i++) {
                double a = (double)t * pow(r->base, -2.0 * (double)(i0 + i) / (double)d);
                cs[i] = (float)cos(a);
                sn[i] = r->inverse ? -(float)sin(a) : (float)sin(a);
            }
            for (int64_t row = 0; row < r->rows; row++) {
                const float *restrict x = r->x + (row * r->t + t) * d + i0;
                float *restrict y = r->out + (row * r->t + t) * d + i0;
                for (int64_t i = 0; i < nb; i++) {
                    float x0 = x[i], x1 = x[i + h];
                    y[i] = x0 * cs[i] - x1 * sn[i];
                    y[i + h] = x1 * cs[i] + x0 * sn[i];
                }
            }
        }
}

void cpu_rope(cpu_pool *p, const cpu_rope_args *r)
{
    int64_t per = r->rows * r->d;
    if (per > 0) cpu_par_range(p, r->t, CPU_PAR_MIN / per + 1, rope_range, (void *)r);
}
