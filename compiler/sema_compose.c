/* sema_compose.c - what the language offers as compositions of registry
 * ops, lowered here, so that each needs no kernel of its own:
 *
 *   sum/mean/max(x, axis=[...])   one-axis reductions over a reshaped x
 *   global_avgpool(x)             mean over H and W, one pass
 *   clip(x, lo, hi)               minimum(maximum(x, lo), hi)
 *   leaky_relu(x, alpha=)         maximum(x, alpha x)
 *   sigmoid_xent(logits, z)       softplus(x) - x z
 *   nll(logp, labels)             -sum(logp * one_hot(labels)) per row
 *   softmax_xent(..., label_smoothing=)
 *   where(cond, a, b)             its operands broadcast for the op
 *   groupnorm(x, gain, bias, groups=)  layernorm of x as [N, groups, rest],
 *                                 then gain and bias per channel
 *   lstm(x, s, w, b)              lstm_cell(concat([x, lstm_h(s)], 1) @ w + b, s)
 *   lstm_h(s), lstm_c(s)          the halves of an LSTM state [B, 2H]
 *   gru(x, h, w_ih, w_hh, b_ih, b_hh)  gru_cell(x @ w_ih + b_ih, h @ w_hh + b_hh, h)
 *   lstm_seq(xs, s, w, b), gru_seq(xs, h, ...)  the cells over the T steps
 *                                 of xs [B, T, X]: [the h's [B, T, H], the
 *                                 last state]
 *
 * Gradients come from the ops they are built of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema_int.h"

/* ---- reductions over several axes: sum(x, axis=[0, 2, 3]) ----
 *
 * Lowered to the one-axis ops: runs of adjacent axes become one axis of a
 * reshaped x (axis=[2, 3] of [N, C, H, W] is one pass over [N, C, H*W]),
 * then each is reduced in turn, from the last, with keepdims; a final
 * reshape drops the reduced axes unless keepdims=true.  A mean of means
 * over whole axes is the mean. */

static int axes_arg(sema *S, const ast_node *at, value v, const ir_type *t, int *red)
{
    for (int i = 0; i < t->rank; i++) red[i] = 0;
    for (int i = 0; i < v.n_items; i++) {
        int64_t a;
        value item = v.items[i];
        item.arg_fn = v.arg_fn, item.arg_name = v.arg_name, item.arg_at = at;
        if (sema_int_arg(S, at, item, &a) < 0) return -1;
        if (a < -t->rank || a >= t->rank || red[a < 0 ? a + t->rank : a]) {
            char tb[160];
            sema_err(S, at, "%s(): axis %lld is %s for %s", v.arg_fn, (long long)a,
                     a < -t->rank || a >= t->rank ? "out of range" : "given twice",
                     ir_type_str(t, tb, sizeof tb));
            return -1;
        }
        red[a < 0 ? a + t->rank : a] = 1;
    }
    return 0;
}

static int reshape_to(sema *S, const ast_node *call, int x, const int64_t *dims, int rank)
{
    ir_attrs a = {.n_list = rank};
    for (int i = 0; i < rank; i++) a.list[i] = dims[i];
    return ir_add(S->g, OP_RESHAPE, &x, 1, &a, S->src, call->span);
}

static value reduce_axes(sema *S, int op, const sema_args *args, int x, value axes, int keep)
{
    const ast_node *call = args->call;
    const ir_type t = S->g->nodes[x].type;
    int red[IR_MAX_DIMS], rank = 0, merged_red[IR_MAX_DIMS];
    int64_t merged[IR_MAX_DIMS], out[IR_MAX_DIMS];
    if (axes_arg(S, sema_arg_at(&axes, call), axes, &t, red) < 0) return sema_value_err();
    for (int i = 0; i < t.rank; i++) {
        if (i > 0 && red[i] && red[i - 1]) {
            merged[rank - 1] *= t.dim[i];
            continue;
        }
        merged_red[rank] = red[i];
        merged[rank++] = t.dim[i];
    }
    int y = rank == t.rank ? x : reshape_to(S, call, x, merged, rank);
    for (int i = rank - 1; i >= 0 && y >= 0; i--)
        if (merged_red[i]) {
            ir_attrs a = {0};
            a.i[ATTR_AXIS] = i;
            a.i[ATTR_KEEPDIMS] = 1;
            y = ir_add(S->g, (op_kind)op, &y, 1, &a, S->src, call->span);
        }
    int n = 0;
    for (int i = 0; i < t.rank; i++)
        if (!red[i] || keep) out[n++] = red[i] ? 1 : t.dim[i];
    return sema_value_tensor(y < 0 ? -1 : reshape_to(S, call, y, out, n));
}

/* sum, mean or max with a list for its axis: 1, with the axes and
 * keepdims; 0 otherwise; -1 after an error. */
static int is_axes_call(sema *S, int op, const sema_args *args, value *axes, int *keep)
{
    if (op != OP_SUM && op != OP_MEAN && op != OP_MAX) return 0;
    static const argspec spec[] = {{"axis", 0}, {"keepdims", 0}};
    value v[2] = {{.k = V_NONE}, {.k = V_NONE}};
    int is_list = args->n_pos >= 2 && args->pos[1].k == V_LIST;
    for (int k = 0; k < args->n_kw; k++)
        is_list |= strcmp(args->kw_at[k]->name, "axis") == 0 && args->kw[k].k == V_LIST;
    if (!is_list || sema_bind_args(S, ops_name(op), spec, 2, args, 1, v) < 0)
        return is_list ? -1 : 0;
    if (sema_bool_arg(S, args->call, v[1], 0, keep) < 0) return -1;
    *axes = v[0];
    return 1;
}

/* where(cond, a, b) broadcasts its three operands (numpy's rules) before
 * the op, which then walks one shape; cond becomes f32. */
static int broadcast_where(sema *S, const ast_node *call, int *in)
{
    ir_type o = S->g->nodes[in[0]].type;
    char ta[160], tb[160];
    for (int k = 1; k < 3; k++) {
        const ir_type *t = &S->g->nodes[in[k]].type;
        int r = o.rank > t->rank ? o.rank : t->rank;
        ir_type n = {.dtype = t->dtype, .rank = r};
        for (int d = 0; d < r; d++) {
            int64_t x = d - (r - o.rank) >= 0 ? o.dim[d - (r - o.rank)] : 1;
            int64_t y = d - (r - t->rank) >= 0 ? t->dim[d - (r - t->rank)] : 1;
            if (x != y && x != 1 && y != 1) {
                sema_err(S, call, "where(): cannot broadcast %s with %s",
                         ir_type_str(&o, ta, sizeof ta), ir_type_str(t, tb, sizeof tb));
                return -1;
            }
            n.dim[d] = x == 1 ? y : x;
        }
        o = n;
    }
    if (S->g->nodes[in[0]].type.dtype != DT_F32) {
        ir_attrs c = {0};
        c.i[ATTR_CAST_DTYPE] = DT_F32;
        in[0] = ir_add(S->g, OP_CAST, &in[0], 1, &c, S->src, call->span);
    }
    for (int k = 0; k < 3 && in[k] >= 0; k++) {
        const ir_type *t = &S->g->nodes[in[k]].type;
        ir_type want = o;
        want.dtype = t->dtype;
        if (ir_type_eq(t, &want)) continue;
        ir_attrs a = {.n_list = o.rank};
        for (int d = 0; d < o.rank; d++) a.list[d] = o.dim[d];
        in[k] = ir_add(S->g, OP_BROADCAST, &in[k], 1, &a, S->src, call->span);
    }
    return in[0] < 0 || in[1] < 0 || in[2] < 0 ? -1 : 0;
}

/* global_avgpool(x, keepdims=false): the mean of each [N, C, H, W] plane,
 * one pass over x as [N, C, H*W] (reduce_axes). */
static value call_global_avgpool(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"x", 1}, {"keepdims", 0}};
    value v[2];
    int keep;
    if (sema_bind_args(S, "global_avgpool", spec, 2, args, 0, v) < 0 ||
        sema_bool_arg(S, args->call, v[1], 0, &keep) < 0)
        return sema_value_err();
    int x = sema_to_tensor(S, sema_arg_at(&v[0], args->call), v[0], DT_F32);
    if (x < 0) return sema_value_err();
    const ir_type *t = &S->g->nodes[x].type;
    if (t->rank != 4) {
        char tb[160];
        sema_err(S, sema_arg_at(&v[0], args->call),
                 "global_avgpool(): x must be rank 4 [N, C, H, W], got %s",
                 ir_type_str(t, tb, sizeof tb));
        return sema_value_err();
    }
    value hw[2] = {sema_value_num(2, 1), sema_value_num(3, 1)};
    value axes = {.k = V_LIST, .items = hw, .n_items = 2, .arg_fn = "global_avgpool"};
    return reduce_axes(S, OP_MEAN, args, x, axes, keep);
}

static int binary_node(sema *S, const ast_node *call, op_kind op, int a, int b)
{
    int in[2] = {a, b};
    if (a < 0 || b < 0) return -1;
    return ir_add(S->g, op, in, 2, &(ir_attrs){0}, S->src, call->span);
}

/* clip(x, lo, hi) = minimum(maximum(x, lo), hi) (lo and hi numbers or
 * tensors that broadcast); leaky_relu(x, alpha=0.01) = maximum(x, alpha x)
 * for alpha in [0, 1].  Gradients are maximum's and minimum's. */
static value call_clip_leaky(sema *S, const char *name, const sema_args *args)
{
    static const argspec clip[] = {{"x", 1}, {"lo", 1}, {"hi", 1}};
    static const argspec leaky[] = {{"x", 1}, {"alpha", 0}};
    const ast_node *call = args->call;
    int is_clip = strcmp(name, "clip") == 0;
    value v[3];
    if (sema_bind_args(S, name, is_clip ? clip : leaky, is_clip ? 3 : 2, args, 0, v) < 0)
        return sema_value_err();
    int x = sema_to_tensor(S, sema_arg_at(&v[0], call), v[0], DT_F32);
    if (is_clip) {
        if (v[1].k == V_NUM && v[2].k == V_NUM && v[1].num > v[2].num) {
            sema_err(S, call, "clip(): lo (%g) is above hi (%g)", v[1].num, v[2].num);
            return sema_value_err();
        }
        int lo = sema_to_tensor(S, sema_arg_at(&v[1], call), v[1], DT_F32);
        int hi = sema_to_tensor(S, sema_arg_at(&v[2], call), v[2], DT_F32);
        return sema_value_tensor(
            binary_node(S, call, OP_MINIMUM, binary_node(S, call, OP_MAXIMUM, x, lo), hi));
    }
    double alpha;
    if (sema_num_arg(S, call, v[1], 0.01, &alpha) < 0) return sema_value_err();
    if (!(alpha >= 0 && alpha <= 1)) {
        sema_err(S, sema_arg_at(&v[1], call), "leaky_relu(): 'alpha' must be in [0, 1], got %g",
                 alpha);
        return sema_value_err();
    }
    value av = sema_value_num(alpha, 0);
    int a = sema_to_tensor(S, call, av, DT_F32);
    return sema_value_tensor(
        binary_node(S, call, OP_MAXIMUM, x, binary_node(S, call, OP_MUL, x, a)));
}

static int unary_node(sema *S, const ast_node *call, op_kind op, int x, const ir_attrs *a)
{
    if (x < 0) return -1;
    return ir_add(S->g, op, &x, 1, a ? a : &(ir_attrs){0}, S->src, call->span);
}

static int scalar_node(sema *S, const ast_node *call, double v)
{
    return sema_to_tensor(S, call, sema_value_num(v, 0), DT_F32);
}

/* The sum (or mean) over the last axis of x. */
static int last_axis(sema *S, const ast_node *call, op_kind op, int x)
{
    ir_attrs a = {0};
    a.i[ATTR_AXIS] = x < 0 ? 0 : S->g->nodes[x].type.rank - 1;
    return unary_node(S, call, op, x, &a);
}

/* sigmoid_xent(logits, targets): per element, softplus(x) - x z, TF's
 * sigmoid_cross_entropy_with_logits, stable at any x.  nll(logp, labels):
 * per row, -logp[label] (PyTorch's nll_loss without its mean), as
 * -sum(logp * one_hot(labels)) over the last axis. */
static value call_loss(sema *S, const char *name, const sema_args *args)
{
    static const argspec sx[] = {{"logits", 1}, {"targets", 1}};
    static const argspec nl[] = {{"logp", 1}, {"labels", 1}};
    const ast_node *call = args->call;
    value v[2];
    int is_nll = strcmp(name, "nll") == 0;
    if (sema_bind_args(S, name, is_nll ? nl : sx, 2, args, 0, v) < 0) return sema_value_err();
    int x = sema_to_tensor(S, sema_arg_at(&v[0], call), v[0], DT_F32);
    if (!is_nll) {
        int z = sema_to_tensor(S, sema_arg_at(&v[1], call), v[1], DT_F32);
        int sp = unary_node(S, call, OP_SOFTPLUS, x, NULL);
        return sema_value_tensor(
            binary_node(S, call, OP_SUB, sp, binary_node(S, call, OP_MUL, x, z)));
    }
    int y = sema_to_tensor(S, sema_arg_at(&v[1], call), v[1], DT_I32);
    if (x < 0 || y < 0) return sema_value_err();
    const ir_type *t = &S->g->nodes[x].type;
    if (t->rank < 1 || S->g->nodes[y].type.dtype != DT_I32 ||
        S->g->nodes[y].type.rank != t->rank - 1) {
        char tb[160], yb[160];
        sema_err(S, call,
                 "nll(): log-probabilities [..., C] and i32 labels [...] expected, got %s and %s",
                 ir_type_str(t, tb, sizeof tb), ir_type_str(&S->g->nodes[y].type, yb, sizeof yb));
        return sema_value_err();
    }
    ir_attrs oh = {0};
    oh.i[ATTR_DEPTH] = t->dim[t->rank - 1];
    int picked = binary_node(S, call, OP_MUL, x, unary_node(S, call, OP_ONE_HOT, y, &oh));
    return sema_value_tensor(unary_node(S, call, OP_NEG, last_axis(S, call, OP_SUM, picked), NULL));
}

/* softmax_xent(logits, labels, label_smoothing=e): the cross-entropy with
 * a target of 1 - e on the label and e spread evenly over the C classes,
 * (1 - e) xent - e mean(log_softmax(logits)), as PyTorch's
 * CrossEntropyLoss(label_smoothing=e). */
static int smoothed_xent(sema *S, const sema_args *args, const int *in, value *out)
{
    static const argspec spec = {"label_smoothing", 0};
    if (args->n_kw == 0) return 0;
    int k = 0;
    while (k < args->n_kw && strcmp(args->kw_at[k]->name, spec.name) != 0) k++;
    if (k == args->n_kw || args->n_kw > 1) { /* the one argument it takes by name */
        sema_unknown_arg(S, args->kw_at[k == 0 && args->n_kw > 1], "softmax_xent", &spec, 1);
        *out = sema_value_err();
        return 1;
    }
    const ast_node *call = args->call, *at = args->kw_at[k];
    double e;
    if (sema_num_arg(S, at, args->kw[k], 0, &e) < 0 || !(e >= 0 && e < 1)) {
        if (args->kw[k].k == V_NUM)
            sema_err(S, at, "'label_smoothing' must be in [0, 1), got %g", e);
        *out = sema_value_err();
        return 1;
    }
    int xent = ir_add(S->g, OP_SOFTMAX_XENT, in, 2, &(ir_attrs){0}, S->src, call->span);
    int uni = last_axis(S, call, OP_MEAN, unary_node(S, call, OP_LOG_SOFTMAX, in[0], NULL));
    int a = binary_node(S, call, OP_MUL, xent, scalar_node(S, call, 1 - e));
    *out = sema_value_tensor(binary_node(
        S, call, OP_SUB, a, binary_node(S, call, OP_MUL, uni, scalar_node(S, call, e))));
    return 1;
}

/* The tensor argument v of groupnorm(), f32 of the channels' shape [C]. */
static int channel_param(sema *S, const ast_node *call, value v, const char *what, int64_t c,
                         const ir_type *xt)
{
    const ast_node *at = sema_arg_at(&v, call);
    int p = sema_to_tensor(S, at, v, DT_F32);
    if (p < 0) return -1;
    const ir_type *t = &S->g->nodes[p].type;
    if (t->dtype == DT_F32 && t->rank == 1 && t->dim[0] == c) return p;
    char tb[160], xb[160];
    sema_err(S, at, "groupnorm(): %s must be f32[%lld] (the channels, axis 1 of x %s), got %s",
             what, (long long)c, ir_type_str(xt, xb, sizeof xb), ir_type_str(t, tb, sizeof tb));
    return -1;
}

/* groupnorm(x, gain, bias, groups=, eps=1e-5): x [N, C, ...] with C a
 * multiple of groups; each example's group of C / groups channels, at
 * every position, is normalised together, (x - mean) / sqrt(var + eps)
 * with the biased variance, then times gain and plus bias ([C]) per
 * channel: PyTorch's nn.GroupNorm.  It is layernorm of x as [N, groups,
 * C / groups * positions] with a unit gain and a zero bias (constants, so
 * nothing differentiates them), reshaped back, then the affine; the
 * gradients are those ops'. */
static value call_groupnorm(sema *S, const sema_args *args)
{
    static const argspec spec[] = {{"x", 1}, {"gain", 1}, {"bias", 1}, {"groups", 1}, {"eps", 0}};
    const ast_node *call = args->call;
    value v[5];
    int64_t groups;
    double eps;
    if (sema_bind_args(S, "groupnorm", spec, 5, args, 0, v) < 0) return sema_value_err();
    int x = sema_to_tensor(S, sema_arg_at(&v[0], call), v[0], DT_F32);
    if (x < 0 || sema_int_arg(S, call, v[3], &groups) < 0 ||
        sema_num_arg(S, call, v[4], 1e-5, &eps) < 0)
        return sema_value_err();
    const ir_type xt = S->g->nodes[x].type;
    char tb[160];
    if (xt.dtype != DT_F32 || xt.rank < 2) {
        sema_err(S, sema_arg_at(&v[0], call),
                 "groupnorm(): x must be f32 [N, C, ...] (channels on axis 1), got %s",
                 ir_type_str(&xt, tb, sizeof tb));
        return sema_value_err();
    }
    int64_t n = xt.dim[0], c = xt.dim[1];
    if (groups < 1 || groups > c || c % groups) {
        sema_err(S, sema_arg_at(&v[3], call),
                 "groupnorm(): 'groups' must divide the %lld channels of x %s, got %lld",
                 (long long)c, ir_type_str(&xt, tb, sizeof tb), (long long)groups);
        return sema_value_err();
    }
    if (!(eps > 0)) {
        sema_err(S, sema_arg_at(&v[4], call), "groupnorm(): 'eps' must be > 0, got %g", eps);
        return sema_value_err();
    }
    int gain = channel_param(S, call, v[1], "gain", c, &xt);
    int bias = gain < 0 ? -1 : channel_param(S, call, v[2], "bias", c, &xt);
    if (bias < 0) return sema_value_err();
    int64_t rest = n != 0 ? ir_numel(&xt) / (n * groups) : 0, rows[3] = {n, groups, rest};
    ir_type pt = {.dtype = DT_F32, .rank = 1, .dim = {rest}};
    int in[3] = {reshape_to(S, call, x, rows, 3), ir_add_const(S->g, 1.0, &pt, S->src, call->span),
                 ir_add_const(S->g, 0.0, &pt, S->src, call->span)};
    if (in[0] < 0 || in[1] < 0 || in[2] < 0) return sema_value_err();
    ir_attrs a = {0};
    a.i[ATTR_AXIS] = -1;
    a.f[ATTR_NORM_EPS] = eps;
    int ln = ir_add(S->g, OP_LAYERNORM, in, 3, &a, S->src, call->span);
    if (ln < 0) return sema_value_err();
    int y = reshape_to(S, call, ln, xt.dim, xt.rank);
    int64_t per[IR_MAX_DIMS];
    for (int d = 0; d < xt.rank; d++) per[d] = d == 1 ? c : 1;
    int g4 = reshape_to(S, call, gain, per, xt.rank), b4 = reshape_to(S, call, bias, per, xt.rank);
    return sema_value_tensor(binary_node(S, call, OP_ADD, binary_node(S, call, OP_MUL, y, g4), b4));
}

/* ---- LSTM: the state s is f32[B, 2H], h then c (lstm_cell, ops.h) ---- */

/* Tensor v of call fname as an LSTM state: f32[B, 2H]; -1 after reporting. */
static int lstm_state(sema *S, const ast_node *call, const char *fname, value v)
{
    const ast_node *at = sema_arg_at(&v, call);
    int s = sema_to_tensor(S, at, v, DT_F32);
    if (s < 0) return -1;
    const ir_type *t = &S->g->nodes[s].type;
    if (t->dtype == DT_F32 && t->rank == 2 && t->dim[1] % 2 == 0 && t->dim[1] > 0) return s;
    char tb[160];
    sema_err(S, at, "%s(): the state must be f32[B, 2H] (h, then c: lstm()'s value), got %s", fname,
             ir_type_str(t, tb, sizeof tb));
    return -1;
}

/* Columns [k H, (k + 1) H) of the state s [B, 2H]: h (k 0) or c (k 1). */
static int lstm_half(sema *S, const ast_node *call, int s, int k)
{
    int64_t h = S->g->nodes[s].type.dim[1] / 2;
    ir_attrs a = {
        .i = {[ATTR_AXIS] = 1, [ATTR_SLICE_BEGIN] = k * h, [ATTR_SLICE_END] = (k + 1) * h}};
    return ir_add(S->g, OP_SLICE, &s, 1, &a, S->src, call->span);
}

/* lstm_h(s), lstm_c(s) */
static value call_lstm_half(sema *S, const char *name, const sema_args *args)
{
    static const argspec spec[] = {{"s", 1}};
    value v;
    if (sema_bind_args(S, name, spec, 1, args, 0, &v) < 0) return sema_value_err();
    int s = lstm_state(S, args->call, name, v);
    if (s < 0) return sema_value_err();
    return sema_value_tensor(lstm_half(S, args->call, s, strcmp(name, "lstm_c") == 0));
}

/* The list [hs, last] that lstm_seq() and gru_seq() return: the h of each
 * step, hs[t] [B, 1, H] side by side on axis 1 ([B, T, H]), and the last
 * state, as PyTorch's nn.LSTM returns (output, (h_n, c_n)) and TF's
 * dynamic_rnn (outputs, state). */
static value seq_result(sema *S, const ast_node *call, const int *hs, int64_t steps, int last)
{
    ir_attrs cat = {.i = {[ATTR_AXIS] = 1}};
    int all = ir_add(S->g, OP_CONCAT, hs, (int)steps, &cat, S->src, call->span);
    if (all < 0) return sema_value_err();
    value *items = ir_alloc(S->g, 2 * sizeof(value));
    items[0] = sema_value_tensor(all);
    items[1] = sema_value_tensor(last);
    return (value){.k = V_LIST, .items = items, .n_items = 2, .cap_items = 2};
}

/* Step t of xz [B, T, N], as [B, N]. */
static int time_step(sema *S, const ast_node *call, int xz, int64_t t)
{
    const ir_type *xt = &S->g->nodes[xz].type;
    int64_t bn[2] = {xt->dim[0], xt->dim[2]};
    ir_attrs a = {.i = {[ATTR_AXIS] = 1, [ATTR_SLICE_BEGIN] = t, [ATTR_SLICE_END] = t + 1}};
    int sl = ir_add(S->g, OP_SLICE, &xz, 1, &a, S->src, call->span);
    return sl < 0 ? -1 : reshape_to(S, call, sl, bn, 2);
}

/* h [B, H] as [B, 1, H], a step of seq_result's hs. */
static int as_step(sema *S, const ast_node *call, int h)
{
    if (h < 0) return -1;
    const ir_type *t = &S->g->nodes[h].type;
    int64_t b1h[3] = {t->dim[0], 1, t->dim[1]};
    return reshape_to(S, call, h, b1h, 3);
}

/* lstm(x, s, w, b) and lstm_seq(xs, s, w, b): binds and checks x (f32[B,
 * X], or xs f32[B, T, X]) against the state s [B, 2H], then w [X + H, 4H]
 * and b [4H]; in[] gets their nodes.  -1 after reporting. */
static int lstm_args(sema *S, const char *name, const sema_args *args, int *in)
{
    static const argspec step[] = {{"x", 1}, {"s", 1}, {"w", 1}, {"b", 1}};
    static const argspec seq[] = {{"xs", 1}, {"s", 1}, {"w", 1}, {"b", 1}};
    const ast_node *call = args->call;
    int is_seq = strcmp(name, "lstm_seq") == 0, rank = is_seq ? 3 : 2;
    const char *xn = is_seq ? "xs" : "x";
    value v[4];
    char xb[160], sb[160], tb[160];
    if (sema_bind_args(S, name, is_seq ? seq : step, 4, args, 0, v) < 0) return -1;
    int x = in[0] = sema_to_tensor(S, sema_arg_at(&v[0], call), v[0], DT_F32);
    int s = in[1] = x < 0 ? -1 : lstm_state(S, call, name, v[1]);
    if (s < 0) return -1;
    ir_type xt = S->g->nodes[x].type, st = S->g->nodes[s].type;
    if (xt.dtype != DT_F32 || xt.rank != rank || xt.dim[0] != st.dim[0] || xt.dim[rank - 2] < 1) {
        sema_err(S, sema_arg_at(&v[0], call),
                 "%s(): %s must be f32%s with the state's B (state %s), got %s", name, xn,
                 is_seq ? "[B, T, X] (batch, steps, features)" : "[B, X]",
                 ir_type_str(&st, sb, sizeof sb), ir_type_str(&xt, xb, sizeof xb));
        return -1;
    }
    int64_t h = st.dim[1] / 2, want_w[2] = {xt.dim[rank - 1] + h, 4 * h};
    int w = in[2] = sema_to_tensor(S, sema_arg_at(&v[2], call), v[2], DT_F32);
    if (w < 0) return -1;
    const ir_type *wt = &S->g->nodes[w].type;
    if (wt->dtype != DT_F32 || wt->rank != 2 || wt->dim[0] != want_w[0] ||
        wt->dim[1] != want_w[1]) {
        sema_err(S, sema_arg_at(&v[2], call),
                 "%s(): w must be f32[X + H, 4H] = [%lld, %lld] for %s %s and state %s "
                 "(rows: x's, then h's; columns: the gates i, f, g, o), got %s",
                 name, (long long)want_w[0], (long long)want_w[1], xn,
                 ir_type_str(&xt, xb, sizeof xb), ir_type_str(&st, sb, sizeof sb),
                 ir_type_str(wt, tb, sizeof tb));
        return -1;
    }
    int b = in[3] = sema_to_tensor(S, sema_arg_at(&v[3], call), v[3], DT_F32);
    if (b < 0) return -1;
    const ir_type *bt = &S->g->nodes[b].type;
    if (bt->dtype != DT_F32 || bt->rank != 1 || bt->dim[0] != 4 * h) {
        sema_err(S, sema_arg_at(&v[3], call), "%s(): b must be f32[4H] = [%lld], got %s", name,
                 (long long)(4 * h), ir_type_str(bt, tb, sizeof tb));
        return -1;
    }
    return 0;
}

/* Rows [begin, end) of w. */
static int rows_of(sema *S, const ast_node *call, int w, int64_t begin, int64_t end)
{
    ir_attrs a = {.i = {[ATTR_AXIS] = 0, [ATTR_SLICE_BEGIN] = begin, [ATTR_SLICE_END] = end}};
    return ir_add(S->g, OP_SLICE, &w, 1, &a, S->src, call->span);
}

/* h @ w at one step of lstm_seq or gru_seq: autodiff gives w one gradient
 * GEMM over every step's rows (merge_weight_grads), whatever the placement. */
static int step_matmul(sema *S, const ast_node *call, int h, int w)
{
    int in[2] = {h, w};
    if (h < 0 || w < 0) return -1;
    return ir_add(S->g, OP_MATMUL, in, 2, &(ir_attrs){.i = {[ATTR_MM_STEP] = 1}}, S->src,
                  call->span);
}

/* lstm_seq(xs, s, w, b): lstm() over the T steps of xs [B, T, X], the x
 * rows of w applied to every step in one GEMM first (xs @ w[:X] + b, [B,
 * T, 4H], as cuDNN does), then per step the h rows, h @ w[X:], and the
 * fused cell.  [hs, last state] (seq_result). */
static value lstm_unroll(sema *S, const ast_node *call, const int *in)
{
    int s = in[1];
    const ir_type xt = S->g->nodes[in[0]].type;
    int64_t nx = xt.dim[2], nh = S->g->nodes[s].type.dim[1] / 2, steps = xt.dim[1];
    int xw = binary_node(S, call, OP_MATMUL, in[0], rows_of(S, call, in[2], 0, nx));
    int xz = binary_node(S, call, OP_ADD, xw, in[3]);
    int wh = rows_of(S, call, in[2], nx, nx + nh);
    int *hs = base_xcalloc((size_t)steps, sizeof *hs);
    for (int64_t t = 0; t < steps && s >= 0 && xz >= 0 && wh >= 0; t++) {
        int hw = step_matmul(S, call, lstm_half(S, call, s, 0), wh);
        s = binary_node(S, call, OP_LSTM_CELL,
                        binary_node(S, call, OP_ADD, time_step(S, call, xz, t), hw), s);
        if (s >= 0 && (hs[t] = as_step(S, call, lstm_half(S, call, s, 0))) < 0) s = -1;
    }
    value r = s < 0 || xz < 0 || wh < 0 ? sema_value_err() : seq_result(S, call, hs, steps, s);
    free(hs);
    return r;
}

/* lstm(x, s, w, b): one step of PyTorch's nn.LSTMCell on x f32[B, X] and
 * the state s [B, 2H], the gates' pre-activations from one GEMM,
 * z = concat([x, h], 1) @ w + b with w [X + H, 4H] and b [4H] (gates i, f,
 * g, o), then the fused cell lstm_cell(z, s): the new state [B, 2H]. */
static value call_lstm(sema *S, const char *name, const sema_args *args)
{
    const ast_node *call = args->call;
    int in[4];
    if (lstm_args(S, name, args, in) < 0) return sema_value_err();
    if (strcmp(name, "lstm_seq") == 0) return lstm_unroll(S, call, in);
    int parts[2] = {in[0], lstm_half(S, call, in[1], 0)};
    ir_attrs cat = {.i = {[ATTR_AXIS] = 1}};
    int xh = parts[1] < 0 ? -1 : ir_add(S->g, OP_CONCAT, parts, 2, &cat, S->src, call->span);
    int z = binary_node(S, call, OP_ADD, binary_node(S, call, OP_MATMUL, xh, in[2]), in[3]);
    return sema_value_tensor(binary_node(S, call, OP_LSTM_CELL, z, in[1]));
}

/* Argument v of gru() or gru_seq() (fname), as an f32 tensor of rank 2
 * [d0, d1] (rank 1 [d1] when d0 < 0); -1 after reporting. */
static int gru_param(sema *S, const ast_node *call, const char *fname, value v, const char *what,
                     int64_t d0, int64_t d1, const char *how)
{
    const ast_node *at = sema_arg_at(&v, call);
    int p = sema_to_tensor(S, at, v, DT_F32);
    if (p < 0) return -1;
    const ir_type *t = &S->g->nodes[p].type;
    int rank = d0 < 0 ? 1 : 2;
    if (t->dtype == DT_F32 && t->rank == rank && t->dim[rank - 1] == d1 &&
        (rank == 1 || t->dim[0] == d0))
        return p;
    char tb[160], want[64];
    if (rank == 1)
        snprintf(want, sizeof want, "[%lld]", (long long)d1);
    else
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
    sema_err(S, at, "%s(): %s must be f32%s = %s, got %s", fname, what, how, want,
             ir_type_str(t, tb, sizeof tb));
    return -1;
}

/* gru(x, h, w_ih, w_hh, b_ih, b_hh) and gru_seq(xs, h, ...): binds and
 * checks x (f32[B, X], or xs f32[B, T, X]), h [B, H], w_ih [X, 3H], w_hh
 * [H, 3H], b_ih and b_hh [3H]; in[] gets their nodes.  -1 after
 * reporting. */
static int gru_args(sema *S, const char *name, const sema_args *args, int *in)
{
    static const argspec step[] = {{"x", 1},    {"h", 1},    {"w_ih", 1},
                                   {"w_hh", 1}, {"b_ih", 1}, {"b_hh", 1}};
    static const argspec seq[] = {{"xs", 1},   {"h", 1},    {"w_ih", 1},
                                  {"w_hh", 1}, {"b_ih", 1}, {"b_hh", 1}};
    const ast_node *call = args->call;
    int is_seq = strcmp(name, "gru_seq") == 0, rank = is_seq ? 3 : 2;
    value v[6];
    char xb[160], hb[160];
    if (sema_bind_args(S, name, is_seq ? seq : step, 6, args, 0, v) < 0) return -1;
    int x = in[0] = sema_to_tensor(S, sema_arg_at(&v[0], call), v[0], DT_F32);
    int h = in[1] = x < 0 ? -1 : sema_to_tensor(S, sema_arg_at(&v[1], call), v[1], DT_F32);
    if (h < 0) return -1;
    ir_type xt = S->g->nodes[x].type, ht = S->g->nodes[h].type;
    if (ht.dtype != DT_F32 || ht.rank != 2 || ht.dim[1] < 1) {
        sema_err(S, sema_arg_at(&v[1], call), "%s(): h must be f32[B, H], got %s", name,
                 ir_type_str(&ht, hb, sizeof hb));
        return -1;
    }
    if (xt.dtype != DT_F32 || xt.rank != rank || xt.dim[0] != ht.dim[0] || xt.dim[rank - 2] < 1) {
        sema_err(S, sema_arg_at(&v[0], call), "%s(): %s must be f32%s with h's B (h %s), got %s",
                 name, is_seq ? "xs" : "x",
                 is_seq ? "[B, T, X] (batch, steps, features)" : "[B, X]",
                 ir_type_str(&ht, hb, sizeof hb), ir_type_str(&xt, xb, sizeof xb));
        return -1;
    }
    int64_t n = ht.dim[1], three = 3 * n;
    in[2] = gru_param(S, call, name, v[2], "w_ih", xt.dim[rank - 1], three, "[X, 3H]");
    in[3] = in[2] < 0 ? -1 : gru_param(S, call, name, v[3], "w_hh", n, three, "[H, 3H]");
    in[4] = in[3] < 0 ? -1 : gru_param(S, call, name, v[4], "b_ih", -1, three, "[3H]");
    in[5] = in[4] < 0 ? -1 : gru_param(S, call, name, v[5], "b_hh", -1, three, "[3H]");
    return in[5] < 0 ? -1 : 0;
}

/* gru_cell(gx, h @ w_hh + b_hh, h): one step on gx [B, 3H], of gru_seq
 * when seq. */
static int gru_step(sema *S, const ast_node *call, int gx, int h, const int *in, int seq)
{
    int hw = seq ? step_matmul(S, call, h, in[3]) : binary_node(S, call, OP_MATMUL, h, in[3]);
    int gh = binary_node(S, call, OP_ADD, hw, in[5]);
    int cell[3] = {gx, gh, h};
    if (gx < 0 || gh < 0) return -1;
    return ir_add(S->g, OP_GRU_CELL, cell, 3, &(ir_attrs){0}, S->src, call->span);
}

/* gru(x, h, w_ih, w_hh, b_ih, b_hh): one step of PyTorch's nn.GRUCell on x
 * f32[B, X] and h f32[B, H]: gx = x @ w_ih + b_ih and gh = h @ w_hh + b_hh
 * (w_ih [X, 3H], w_hh [H, 3H], the gates r, z, n), two GEMMs since n's h
 * part is gated by r, then the fused cell gru_cell(gx, gh, h): h'.
 * gru_seq(xs, h, ...) runs it over the T steps of xs [B, T, X], gx of
 * every step from one GEMM first: [hs, last h] (seq_result). */
static value call_gru(sema *S, const char *name, const sema_args *args)
{
    const ast_node *call = args->call;
    int in[6];
    if (gru_args(S, name, args, in) < 0) return sema_value_err();
    int h = in[1];
    int gx = binary_node(S, call, OP_ADD, binary_node(S, call, OP_MATMUL, in[0], in[2]), in[4]);
    if (strcmp(name, "gru_seq") != 0) return sema_value_tensor(gru_step(S, call, gx, h, in, 0));
    int64_t steps = S->g->nodes[in[0]].type.dim[1];
    int *hs = base_xcalloc((size_t)steps, sizeof *hs);
    for (int64_t t = 0; t < steps && h >= 0 && gx >= 0; t++) {
        h = gru_step(S, call, time_step(S, call, gx, t), h, in, 1);
        if ((hs[t] = as_step(S, call, h)) < 0) h = -1;
    }
    value r = h < 0 || gx < 0 ? sema_value_err() : seq_result(S, call, hs, steps, h);
    free(hs);
    return r;
}

value sema_compose_call(sema *S, const char *name, const sema_args *args)
{
    if (strcmp(name, "gru") == 0 || strcmp(name, "gru_seq") == 0) return call_gru(S, name, args);
    if (strcmp(name, "lstm") == 0 || strcmp(name, "lstm_seq") == 0) return call_lstm(S, name, args);
    if (strcmp(name, "lstm_h") == 0 || strcmp(name, "lstm_c") == 0)
        return call_lstm_half(S, name, args);
    if (strcmp(name, "groupnorm") == 0) return call_groupnorm(S, args);
    if (strcmp(name, "global_avgpool") == 0) return call_global_avgpool(S, args);
    if (strcmp(name, "clip") == 0 || strcmp(name, "leaky_relu") == 0)
        return call_clip_leaky(S, name, args);
    return call_loss(S, name, args);
}

int sema_compose_op(sema *S, int op, const sema_args *args, int *in, value *out)
{
    value axes;
    int keep, multi = is_axes_call(S, op, args, &axes, &keep);
    if (multi) {
        *out = multi < 0 ? sema_value_err() : reduce_axes(S, op, args, in[0], axes, keep);
        return 1;
    }
    if (op == OP_SOFTMAX_XENT) return smoothed_xent(S, args, in, out);
    if (op == OP_WHERE && broadcast_where(S, args->call, in) < 0) {
        *out = sema_value_err();
        return 1;
    }
    return 0;
}
