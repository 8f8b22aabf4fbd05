/* ops_impl.h - private to compiler/ops*.c: the shape, gradient and scratch
 * rules that the registry table in ops.c points at, and their helpers. */
#ifndef GR_OPS_IMPL_H
#define GR_OPS_IMPL_H

#include "ir.h"

/* A type printed into a value, so messages can format two types at once:
 * ops_ts(t).s lives until the end of the full expression. */
typedef struct ops_tstr {
    char s[160];
} ops_tstr;
ops_tstr ops_ts(const ir_type *t);
/* "[64,700]" for an int list. */
ops_tstr ops_list_str(const int64_t *v, int n);

/* Reports an error at node id's span; returns -1. */
int ops_error(ir_graph *g, int id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const ir_type *ops_in_type(const ir_graph *g, int id, int k);

/* ---- shape rules (ops_shape.c) ---- */
int ops_shape_data(ir_graph *g, int id);
int ops_shape_matmul(ir_graph *g, int id);
int ops_shape_binary(ir_graph *g, int id);
int ops_shape_binary_f32(ir_graph *g, int id);
int ops_shape_where(ir_graph *g, int id);
int ops_shape_compare(ir_graph *g, int id);
int ops_shape_unary_f32(ir_graph *g, int id);
int ops_shape_unary_any(ir_graph *g, int id);
int ops_shape_softmax(ir_graph *g, int id);
int ops_shape_xent(ir_graph *g, int id);
int ops_shape_mse(ir_graph *g, int id);
int ops_shape_reduce(ir_graph *g, int id);
int ops_shape_argmax(ir_graph *g, int id);
int ops_shape_reshape(ir_graph *g, int id);
int ops_shape_transpose(ir_graph *g, int id);
int ops_shape_concat(ir_graph *g, int id);
int ops_shape_slice(ir_graph *g, int id);
int ops_shape_gather(ir_graph *g, int id);
int ops_shape_cast(ir_graph *g, int id);
int ops_shape_one_hot(ir_graph *g, int id);
int ops_shape_broadcast(ir_graph *g, int id);
int ops_shape_sum_to(ir_graph *g, int id);
int ops_shape_conv2d(ir_graph *g, int id);
int ops_shape_conv2d_bias(ir_graph *g, int id);
int ops_shape_pool(ir_graph *g, int id);
int ops_shape_dropout(ir_graph *g, int id);
int ops_shape_random(ir_graph *g, int id);
int ops_shape_categorical(ir_graph *g, int id);
int ops_shape_layernorm(ir_graph *g, int id);
int ops_shape_layernorm_grad(ir_graph *g, int id);
int ops_shape_lrn(ir_graph *g, int id);
int ops_shape_lstm_cell(ir_graph *g, int id);
int ops_shape_gru_cell(ir_graph *g, int id);
int ops_shape_rope(ir_graph *g, int id);
int ops_shape_bn_stats(ir_graph *g, int id);
int ops_shape_batchnorm(ir_graph *g, int id);
int ops_shape_bn_grad(ir_graph *g, int id);
int ops_shape_grad_pair(ir_graph *g, int id);
int ops_shape_xent_grad(ir_graph *g, int id);
int ops_shape_like_in1(ir_graph *g, int id);
int ops_shape_from_list(ir_graph *g, int id);
int ops_shape_like_in0(ir_graph *g, int id);
int ops_shape_update(ir_graph *g, int id);
int ops_shape_allreduce(ir_graph *g, int id);
int ops_shape_update_matmul(ir_graph *g, int id);
int ops_shape_assign(ir_graph *g, int id);
int ops_shape_update_rows(ir_graph *g, int id);
int ops_shape_token(ir_graph *g, int id);
int ops_shape_matmul_bias(ir_graph *g, int id);
int ops_shape_lr_schedule(ir_graph *g, int id);
int ops_shape_clip_scale(ir_graph *g, int id);
int ops_shape_rows_sum(ir_graph *g, int id);

/* ---- cost rules (ops.c) ---- */
double ops_cost_matmul(const ir_graph *g, int id);
double ops_cost_conv(const ir_graph *g, int id);

/* ---- gradient rules (ops_grad.c) ---- */
int ops_grad_none(ir_graph *g, int id, int dy, int *dx);
int ops_grad_identity(ir_graph *g, int id, int dy, int *dx);
int ops_grad_cast(ir_graph *g, int id, int dy, int *dx);
int ops_grad_matmul(ir_graph *g, int id, int dy, int *dx);
int ops_grad_add(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sub(ir_graph *g, int id, int dy, int *dx);
int ops_grad_mul(ir_graph *g, int id, int dy, int *dx);
int ops_grad_div(ir_graph *g, int id, int dy, int *dx);
int ops_grad_neg(ir_graph *g, int id, int dy, int *dx);
int ops_grad_exp(ir_graph *g, int id, int dy, int *dx);
int ops_grad_log(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sqrt(ir_graph *g, int id, int dy, int *dx);
int ops_grad_relu(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sigmoid(ir_graph *g, int id, int dy, int *dx);
int ops_grad_tanh(ir_graph *g, int id, int dy, int *dx);
int ops_grad_act(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sin(ir_graph *g, int id, int dy, int *dx);
int ops_grad_cos(ir_graph *g, int id, int dy, int *dx);
int ops_grad_minmax(ir_graph *g, int id, int dy, int *dx);
int ops_grad_pow(ir_graph *g, int id, int dy, int *dx);
int ops_grad_where(ir_graph *g, int id, int dy, int *dx);
int ops_grad_rmsnorm(ir_graph *g, int id, int dy, int *dx);
int ops_grad_lrn(ir_graph *g, int id, int dy, int *dx);
int ops_grad_lstm_cell(ir_graph *g, int id, int dy, int *dx);
int ops_grad_gru_cell(ir_graph *g, int id, int dy, int *dx);
int ops_grad_rope(ir_graph *g, int id, int dy, int *dx);
int ops_grad_softmax(ir_graph *g, int id, int dy, int *dx);
int ops_grad_log_softmax(ir_graph *g, int id, int dy, int *dx);
int ops_grad_xent(ir_graph *g, int id, int dy, int *dx);
int ops_grad_mse(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sum_mean(ir_graph *g, int id, int dy, int *dx);
int ops_grad_max(ir_graph *g, int id, int dy, int *dx);
int ops_grad_reshape(ir_graph *g, int id, int dy, int *dx);
int ops_grad_transpose(ir_graph *g, int id, int dy, int *dx);
int ops_grad_concat(ir_graph *g, int id, int dy, int *dx);
int ops_grad_slice(ir_graph *g, int id, int dy, int *dx);
int ops_grad_gather(ir_graph *g, int id, int dy, int *dx);
int ops_grad_broadcast(ir_graph *g, int id, int dy, int *dx);
int ops_grad_sum_to(ir_graph *g, int id, int dy, int *dx);
int ops_grad_conv2d(ir_graph *g, int id, int dy, int *dx);
int ops_grad_maxpool(ir_graph *g, int id, int dy, int *dx);
int ops_grad_avgpool(ir_graph *g, int id, int dy, int *dx);
int ops_grad_dropout(ir_graph *g, int id, int dy, int *dx);
int ops_grad_layernorm(ir_graph *g, int id, int dy, int *dx);
int ops_grad_batchnorm(ir_graph *g, int id, int dy, int *dx);
int ops_grad_gelu(ir_graph *g, int id, int dy, int *dx);

/* ---- scratch rules (ops.c) ---- */
size_t ops_scratch_conv2d(const ir_graph *g, int id);
size_t ops_scratch_conv2d_grad_w(const ir_graph *g, int id);
size_t ops_scratch_layernorm_grad_params(const ir_graph *g, int id);
size_t ops_scratch_clip_scale(const ir_graph *g, int id);
size_t ops_scratch_lrn_grad(const ir_graph *g, int id);
size_t ops_scratch_categorical(const ir_graph *g, int id);
size_t ops_scratch_rows(const ir_graph *g, int id);

#endif
