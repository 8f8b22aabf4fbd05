/* eval_rows.h - whether an evaluation target is a sum over the examples
 * of its batch, so that a last, partial batch can be counted exactly.
 *
 * gr_eval reads a data set whose size is not a multiple of the batch with
 * one more batch at the end, padded with examples from the start of the
 * pass (data_seek_tail).  The target's value over that batch would count
 * the padding, so gr_eval fetches the tensors the target sums or averages
 * instead, and adds up only the rows of the real examples.  That is exact
 * when the target is a linear form of such tensors (a mean, a sum, mse,
 * towers' means of slices of the batch averaged, scaled by constants),
 * each tensor's rows depend on one example of the batch each, whatever
 * the other rows hold, and every position of the batch has the same
 * weight.  eval_rows_find proves it from the IR, op by op (matmuls,
 * convolutions, pooling, elementwise ops, reductions over other axes,
 * slices and reshapes that keep each example's rows together, ...), or
 * says which node stands in the way. */
#ifndef GR_RUNTIME_EVAL_ROWS_H
#define GR_RUNTIME_EVAL_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "compiler/ir.h"

/* coef * the sum of fetch[m]'s values, or with t >= 0 of the squares of
 * fetch[m] - fetch[t] (mse), over the rows of the examples counted. */
typedef struct eval_term {
    int m, t;
    double coef;
} eval_term;

/* Rows of a fetched tensor: row r holds values of example (r + off) / g. */
typedef struct eval_fetch {
    int node;
    int64_t g, off;
} eval_fetch;

typedef struct eval_rows {
    eval_term *term;
    int n_term;
    eval_fetch *fetch; /* the tensors to fetch, each once */
    int n_fetch;
} eval_rows;

/* 0 and *out (free it with eval_rows_free) when target, a scalar, is a
 * sum over the batch positions of one weight times a value per example,
 * for a batch of batch rows; else -1 and why (one clause, no newline). */
int eval_rows_find(const ir_graph *g, int target, int64_t batch, eval_rows *out, char *why,
                   size_t whylen);
void eval_rows_free(eval_rows *er);

/* What the first rows examples of a batch add to the target's mean over
 * examples, times batch (the target's value is batch times such a mean):
 * values[k] holds fetch k, of the fetched node's dtype. */
double eval_rows_sum(const ir_graph *g, const eval_rows *er, int64_t batch,
                     const void *const *values, int64_t rows);

#endif
