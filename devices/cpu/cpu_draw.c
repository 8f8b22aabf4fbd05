/* cpu_draw.c - categorical's draws on the CPU: the running sums of each
 * row in chunks, then a binary search per draw, each phase over the pool
 * (devices/draw.h holds the arithmetic every device shares). */
#include "../draw.h"
#include "cpu_impl.h"

typedef struct draw_ctx {
    int32_t *out;
    const float *x;
    cpu_draw_shape s;
    int64_t chunks;
    uint64_t key;
    double *local, *off, *max, *total; /* in the scratch */
} draw_ctx;

static void max_range(void *vctx, int64_t lo, int64_t hi)
{
    const draw_ctx *c = vctx;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = c->x + r * c->s.k;
        float m = -INFINITY;
        for (int64_t j = 0; j < c->s.k; j++) m = x[j] > m ? x[j] : m;
        c->max[r] = m;
    }
}

static void chunk_range(void *vctx, int64_t lo, int64_t hi)
{
    const draw_ctx *c = vctx;
    for (int64_t q = lo; q < hi; q++) {
        int64_t r = q / c->chunks, k = c->s.k;
        c->off[q] = draw_chunk(c->x + r * k, k, q % c->chunks, c->s.logits ? c->max[r] : 0,
                               c->s.logits, c->local + r * k);
    }
}

/* Draws i .. i + DRAW_LANES - 1 at once: draw_search's steps, one lane a
 * draw, in lockstep (its halving depends on k alone), so that the lanes'
 * loads overlap instead of each probe waiting for the one before (a probe
 * is a cache miss in a table of tens of thousands).  Each lane computes
 * exactly what draw_search does, so every device still draws the same
 * ids.  Word2vec's negatives, sample(weights[10000], 5120): 0.22 -> 0.09
 * ms a call; test_sample's sample(weights[50000], 2560): 365 -> 207 us. */
enum { DRAW_LANES = 8 };

static void search_lanes(const draw_ctx *c, int64_t i)
{
    const double *local[DRAW_LANES], *off[DRAW_LANES];
    double t[DRAW_LANES];
    int64_t base[DRAW_LANES], k = c->s.k;
    for (int l = 0; l < DRAW_LANES; l++) {
        int64_t r = (i + l) / c->s.per;
        local[l] = c->local + r * k;
        off[l] = c->off + r * c->chunks;
        t[l] = draw_u(c->key, i + l) * c->total[r];
        base[l] = 0;
    }
    for (int64_t n = k; n > 1;) {
        int64_t half = n / 2;
        for (int l = 0; l < DRAW_LANES; l++) {
            int64_t mid = base[l] + half - 1;
            base[l] += off[l][mid / OP_CDF_CHUNK] + local[l][mid] > t[l] ? 0 : half;
        }
        n -= half;
    }
    for (int l = 0; l < DRAW_LANES; l++) {
        int64_t b = base[l] + (off[l][base[l] / OP_CDF_CHUNK] + local[l][base[l]] > t[l] ? 0 : 1);
        c->out[i + l] = (int32_t)(b < k - 1 ? b : k - 1);
    }
}

static void search_range(void *vctx, int64_t lo, int64_t hi)
{
    const draw_ctx *c = vctx;
    for (; lo + DRAW_LANES <= hi; lo += DRAW_LANES) search_lanes(c, lo);
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = i / c->s.per;
        double t = draw_u(c->key, i) * c->total[r];
        c->out[i] = draw_search(c->local + r * c->s.k, c->off + r * c->chunks, c->s.k, t);
    }
}

void cpu_categorical(cpu_pool *p, int32_t *out, const float *x, const cpu_draw_shape *s,
                     uint64_t key, double *scratch)
{
    draw_ctx c = {out, x, *s, draw_chunks(s->k), key, scratch, NULL, NULL, NULL};
    c.off = c.local + s->rows * s->k;
    c.max = c.off + s->rows * c.chunks;
    c.total = c.max + s->rows * c.chunks;
    int64_t row_grain = CPU_PAR_MIN / s->k + 1;
    if (s->logits) cpu_par_range(p, s->rows, row_grain, max_range, &c);
    cpu_par_range(p, s->rows * c.chunks, CPU_PAR_MIN / OP_CDF_CHUNK, chunk_range, &c);
    for (int64_t r = 0; r < s->rows; r++) c.total[r] = draw_offsets(c.off + r * c.chunks, c.chunks);
    cpu_par_range(p, s->rows * s->per, CPU_PAR_MIN / 64, search_range, &c);
}
