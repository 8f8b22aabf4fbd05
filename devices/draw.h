/* draw.h - categorical's draws (compiler/ops.h), one set of functions for
 * every device, so the CPU, the simulated GPU and CUDA draw the same ids.
 *
 * Each row of weights (a 1-D table, or softmax of a row of logits) becomes
 * a cumulative sum in doubles, added in a fixed order: OP_CDF_CHUNK
 * elements one after another within a chunk (local), and the chunks'
 * totals one after another (off, each chunk's offset).  The running sum at
 * k is off[k / C] + local[k], non-decreasing in k, and equal at k and k-1
 * when weight k is 0: a draw t = u * total in [0, total) takes the first k
 * whose sum passes t, so a weight of 0 is never drawn.  u has 48 random
 * bits (two of dropout's uniforms), the draw i of a node on a step the
 * pair 2i, 2i+1 of its key (random_key). */
#ifndef GR_DRAW_H
#define GR_DRAW_H

#include "dropout.h"

/* A uniform double in [0, 1) with 48 random bits. */
DROPOUT_FN double draw_u(uint64_t key, int64_t i)
{
    return (double)dropout_u(key, 2 * i) + (double)dropout_u(key, 2 * i + 1) * (1.0 / 16777216.0);
}

/* The weight of x: exp(x - max) for logits, else x itself; negative and
 * NaN weights weigh 0. */
DROPOUT_FN double draw_weight(float x, double max, int logits)
{
    double w = logits ? exp((double)x - max) : (double)x;
    return w > 0 ? w : 0.0;
}

/* Chunk c of a row of k: its running sums into local (the row's), and
 * their total. */
DROPOUT_FN double draw_chunk(const float *x, int64_t k, int64_t c, double max, int logits,
                             double *local)
{
    int64_t lo = c * OP_CDF_CHUNK, hi = lo + OP_CDF_CHUNK < k ? lo + OP_CDF_CHUNK : k;
    double s = 0;
    for (int64_t j = lo; j < hi; j++) local[j] = s += draw_weight(x[j], max, logits);
    return s;
}

/* The chunks' totals of a row (n of them) into their offsets, in place;
 * returns the row's total. */
DROPOUT_FN double draw_offsets(double *off, int64_t n)
{
    double s = 0;
    for (int64_t c = 0; c < n; c++) {
        double t = off[c];
        off[c] = s;
        s += t;
    }
    return s;
}

/* The id whose running sum first passes t (k - 1 when none does: a row of
 * no weight).  A binary search without branches (the answer is in
 * [base, base + n]; a select, not a jump, moves base), as a draw's path is
 * random. */
DROPOUT_FN int32_t draw_search(const double *local, const double *off, int64_t k, double t)
{
    int64_t base = 0, n = k;
    while (n > 1) {
        int64_t half = n / 2, mid = base + half - 1;
        base += off[mid / OP_CDF_CHUNK] + local[mid] > t ? 0 : half;
        n -= half;
    }
    base += off[base / OP_CDF_CHUNK] + local[base] > t ? 0 : 1;
    return (int32_t)(base < k - 1 ? base : k - 1);
}

/* The number of chunks of a row of k. */
DROPOUT_FN int64_t draw_chunks(int64_t k)
{
    return (k + OP_CDF_CHUNK - 1) / OP_CDF_CHUNK;
}

#endif
