/* sema.c - AST -> IR.  Evaluates the program once at compile time:
 * params (with --set overrides), functions (inlined), variable scopes with
 * TensorFlow's reuse rules, compile-time loops, indexed names and device
 * annotations.  Builtins (ops, initializers, data, optimizers) are in
 * sema_builtins.c, values and their conversions in sema_value.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fatal.h"
#include "sema_int.h"

static value sema_eval(sema *S, env *e, const ast_node *n);

/* Each kind of expression is evaluated in a frame of its own: inlined
 * into sema_eval, every level of a deep expression would take the stack
 * of the largest (a call binding its locals), and LIM_EVAL_DEPTH levels
 * must fit in a thread's stack. */
#define EVAL_FRAME __attribute__((noinline))

/* ---- environments ---- */

static uint64_t env_hash(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Past ENV_INLINE names an environment is indexed by hash: a program with
 * hundreds of top-level names looks each one up in O(1), not by a scan
 * per evaluation step. */
static void env_index_put(env *e, int i)
{
    size_t mask = (size_t)e->index_cap - 1, k = env_hash(e->v[i].name) & mask;
    while (IR_WORK(1), e->index[k] >= 0) k = (k + 1) & mask;
    e->index[k] = i;
}

static void env_index_add(env *e, int i)
{
    if (e->n <= ENV_INLINE) return;
    if (2 * e->n > e->index_cap) {
        free(e->index);
        e->index_cap = 64;
        while (e->index_cap < 4 * e->n) e->index_cap *= 2;
        e->index = base_xmalloc(sizeof(int) * (size_t)e->index_cap);
        memset(e->index, -1, sizeof(int) * (size_t)e->index_cap);
        for (int j = 0; j < e->n; j++) env_index_put(e, j);
        return;
    }
    env_index_put(e, i);
}

static void env_free(env *e)
{
    if (e->v != e->small) free(e->v);
    free(e->index);
}

static binding *env_find_local(env *e, const char *name)
{
    if (e->index) {
        size_t mask = (size_t)e->index_cap - 1;
        for (size_t k = env_hash(name) & mask; IR_WORK(1), e->index[k] >= 0; k = (k + 1) & mask)
            if (strcmp(e->v[e->index[k]].name, name) == 0) return &e->v[e->index[k]];
        return NULL;
    }
    IR_WORK(e->n);
    for (int i = e->n - 1; i >= 0; i--)
        if (e->v[i].name[0] == name[0] && strcmp(e->v[i].name, name) == 0) return &e->v[i];
    return NULL;
}

static binding *env_find(env *e, const char *name)
{
    for (; e; e = e->parent) {
        binding *b = env_find_local(e, name);
        if (b) return b;
    }
    return NULL;
}

static binding *env_set(env *e, const char *name, value v)
{
    binding *b = env_find_local(e, name);
    if (b) {
        b->v = v;
        return b;
    }
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        binding *grown =
            base_xreallocarray(e->v == e->small ? NULL : e->v, (size_t)cap, sizeof *grown);
        if (e->v == e->small) memcpy(grown, e->small, sizeof e->small);
        e->v = grown;
        e->cap = cap;
    }
    e->v[e->n] = (binding){.name = name, .v = v};
    e->n++;
    env_index_add(e, e->n - 1);
    return &e->v[e->n - 1];
}

/* Whether declaration st (param, input, data, fn, var) repeats a name
 * that another declaration in e holds, reported.  It would silently hide
 * the first (and two inputs would take one feed, two data sources one
 * checkpoint key).  The same statement run again (in a loop, or a fn
 * called twice) declares the same thing.  Two vars are stmt_var's to judge:
 * scopes and reuse decide. */
static int env_redeclared(sema *S, env *e, const ast_node *st)
{
    binding *b = env_find_local(e, st->name);
    if (!b || !b->decl || b->decl == st || (b->decl->kind == AST_VAR && st->kind == AST_VAR))
        return 0;
    sema_err(S, st, "'%s' is already declared", st->name);
    sema_note(S, b->decl, "'%s' was first declared here", st->name);
    return 1;
}

static void env_declare(env *e, const ast_node *st, value v)
{
    env_set(e, st->name, v)->decl = st;
}

/* ---- variable scopes ---- */

/* Enters variable scope `name` (under the current one), kept in v (the
 * caller's, on its stack: scopes cost no allocation); -1 after reporting
 * at `at` when its full path would be longer than LIM_NAME. */
static int scope_push(sema *S, vscope *v, const ast_node *at, const char *name, int reuse)
{
    const char *pp = S->scope->path;
    size_t n = strlen(pp) + strlen(name) + 2;
    if (n - 1 > LIM_NAME) {
        sema_err(S, at, "scope name '%.40s...' is longer than %d bytes, the limit", pp, LIM_NAME);
        return -1;
    }
    char *path = ir_alloc(S->g, n);
    *v = (vscope){0};
    size_t lp = strlen(pp); /* not snprintf: a loop may enter a scope a million times */
    memcpy(path, pp, lp);
    if (lp) path[lp++] = '/';
    memcpy(path + lp, name, strlen(name) + 1);
    v->path = path;
    v->reuse = reuse;
    v->parent = S->scope;
    S->scope = v;
    return 0;
}

static void scope_counters_free(vscope *v)
{
    if (v->counters) env_free(v->counters);
    free(v->counters);
}

static void scope_pop(sema *S)
{
    vscope *v = S->scope;
    S->scope = v->parent;
    scope_counters_free(v);
}

/* Next number for an unnamed call of `fn` in the current scope entry; the
 * counters are an environment, so a scope calling thousands of different
 * functions finds each by hash. */
static int scope_count(vscope *v, const char *fn)
{
    if (!v->counters) v->counters = base_xcalloc(1, sizeof *v->counters);
    binding *b = env_find_local(v->counters, fn);
    if (b) return (int)b->v.num++;
    env_set(v->counters, fn, (value){.k = V_NUM, .is_int = 1, .num = 1});
    return 0;
}

/* ---- devices ---- */

static int eval_device(sema *S, env *e, const ast_node *spec)
{
    int64_t idx;
    if (sema_int_arg(S, spec->a, sema_eval(S, e, spec->a), &idx) < 0) return -1;
    if (idx < 0 || idx >= LIM_DEVICES) {
        sema_err(S, spec->a, "device index %lld is out of range: devices are numbered 0 to %d",
                 (long long)idx, LIM_DEVICES - 1);
        return -1;
    }
    return IR_DEV(strcmp(spec->name, "gpu") == 0 ? DEV_GPU : DEV_CPU, (int)idx);
}

/* The site of annotation `spec`: one per place in the source, however
 * often a loop or calls evaluate it, numbered by the first request made
 * from it (the unused-annotation warning counts by site).  Sites are found
 * by their offset in the source, through an environment of their own. */
static int annot_site(sema *S, const ast_node *spec)
{
    char key[24];
    snprintf(key, sizeof key, "@%u", (unsigned)spec->span.begin);
    binding *b = env_find_local(&S->annot_env, key);
    if (b) return (int)b->v.num;
    env_set(&S->annot_env, ir_strdup(S->g, key), sema_value_num(S->g->n_place_reqs, 1));
    return S->g->n_place_reqs;
}

/* Evaluates annotation `spec` and opens it: nodes made from now on until
 * place_close take it as their innermost request.  Returns the request,
 * or -1 on error.  Sema records; the placement pass (place.c) decides. */
static int place_open(sema *S, env *e, const ast_node *spec)
{
    int dev = eval_device(S, e, spec);
    if (dev < 0) return -1;
    ir_place_req r = {.dev = dev,
                      .site = annot_site(S, spec),
                      .up = S->g->place_cur,
                      .src = S->src,
                      .span = spec->span};
    return S->g->place_cur = ir_add_place_req(S->g, &r);
}

static void place_close(sema *S, int req)
{
    S->g->place_cur = S->g->place_reqs[req].up;
}

/* ---- expressions ---- */

/* The closest name bound in e, or callable (ops, builtins). */
static const char *suggest_name(env *e, const char *name)
{
    const char *best = NULL;
    int bd = 4;
    for (; e; e = e->parent)
        for (int i = 0; i < e->n; i++) sema_closer(name, e->v[i].name, &best, &bd);
    for (int i = 0; sema_callable_name(i); i++)
        sema_closer(name, sema_callable_name(i), &best, &bd);
    return best;
}

/* An unknown name: its graphrun spelling when it comes from TF, PyTorch or
 * Python, else a "did you mean" (only for errors that are shown: the
 * hint costs a scan of every name). */
static void unknown_name(sema *S, env *e, const ast_node *n)
{
    int shown = !diag_full(S->g->diags);
    char buf[256];
    const char *hint = shown ? sema_foreign_hint(n->name, buf, sizeof buf) : NULL;
    const char *near = shown && !hint ? suggest_name(e, n->name) : NULL;
    if (hint)
        sema_err(S, n, "unknown name '%s': %s", n->name, hint);
    else if (near)
        sema_err(S, n, "unknown name '%s'; did you mean '%s'?", n->name, near);
    else
        sema_err(S, n, "unknown name '%s'", n->name);
}

static EVAL_FRAME value eval_name(sema *S, env *e, const ast_node *n)
{
    binding *b = env_find(e, n->name);
    if (b) return b->v;
    int op = ops_lookup(n->name);
    if (op >= 0) return (value){.k = V_OP, .id = op};
    int bi = sema_builtin_lookup(n->name);
    if (bi < 0) bi = sema_state_lookup(n->name);
    if (bi < 0 && strcmp(n->name, "gradients") == 0) bi = SEMA_GRADIENTS;
    if (bi >= 0) return (value){.k = V_BUILTIN, .id = bi};
    unknown_name(S, e, n);
    return sema_value_err();
}

static EVAL_FRAME value eval_list(sema *S, env *e, const ast_node *n)
{
    value v = {.k = V_LIST, .n_items = n->n_items, .cap_items = n->n_items};
    v.items = ir_alloc(S->g, sizeof(value) * (size_t)(n->n_items + 1));
    for (int i = 0; i < n->n_items; i++) {
        v.items[i] = sema_eval(S, e, n->items[i]);
        if (v.items[i].k == V_ERR) return sema_value_err();
    }
    return v;
}

/* Integer + - * /: computed in int64 from the exact operands (at most
 * LIM_INT each), so the range check sees the true result, not a rounded
 * double; *exact is 0 when a division leaves a remainder. */
static int int_arith(ast_op op, double a, double b, int64_t *r, int *exact)
{
    int64_t x = (int64_t)a, y = (int64_t)b;
    *exact = 1;
    switch (op) {
    case AOP_ADD:
        return ir_checked_add(x, y, r);
    case AOP_SUB:
        return ir_checked_add(x, -y, r);
    case AOP_MUL:
        return ir_checked_mul(x, y, r);
    default: /* AOP_DIV, y != 0 */
        *exact = x % y == 0;
        *r = x / y;
        return 0;
    }
}

static value fold_ints(sema *S, const ast_node *n, double a, double b)
{
    int64_t r;
    int exact;
    if (int_arith(n->op, a, b, &r, &exact) == 0 && (!exact || (r <= LIM_INT && r >= -LIM_INT)))
        return exact ? sema_value_num((double)r, 1) : sema_value_num(a / b, 0);
    sema_err(S, n,
             "integer result of '%.17g %s %.17g' is out of range (at most 2^53 = %lld in "
             "magnitude)",
             a, ast_op_text(n->op), b, LIM_INT);
    return sema_value_err();
}

static value fold_numbers(sema *S, const ast_node *n, value x, value y)
{
    double a = x.num, b = y.num;
    int arith = n->op == AOP_ADD || n->op == AOP_SUB || n->op == AOP_MUL || n->op == AOP_DIV;
    if (n->op == AOP_DIV && b == 0) {
        sema_err(S, n, "division by zero in a compile-time expression");
        return sema_value_err();
    }
    if (arith && x.is_int && y.is_int) return fold_ints(S, n, a, b);
    switch (n->op) {
    case AOP_ADD:
        return sema_value_num(a + b, 0);
    case AOP_SUB:
        return sema_value_num(a - b, 0);
    case AOP_MUL:
        return sema_value_num(a * b, 0);
    case AOP_DIV:
        return sema_value_num(a / b, 0);
    case AOP_EQ:
        return (value){.k = V_BOOL, .num = a == b};
    case AOP_NE:
        return (value){.k = V_BOOL, .num = a != b};
    case AOP_LT:
        return (value){.k = V_BOOL, .num = a < b};
    case AOP_GT:
        return (value){.k = V_BOOL, .num = a > b};
    case AOP_LE:
        return (value){.k = V_BOOL, .num = a <= b};
    case AOP_GE:
        return (value){.k = V_BOOL, .num = a >= b};
    default:
        sema_err(S, n, "'%s' needs tensors, got two numbers", ast_op_text(n->op));
        return sema_value_err();
    }
}

static const op_kind binop_to_ir[] = {
    [AOP_MATMUL] = OP_MATMUL, [AOP_ADD] = OP_ADD, [AOP_SUB] = OP_SUB, [AOP_MUL] = OP_MUL,
    [AOP_DIV] = OP_DIV,       [AOP_EQ] = OP_EQ,   [AOP_NE] = OP_NE,   [AOP_LT] = OP_LT,
    [AOP_GT] = OP_GT,         [AOP_LE] = OP_LE,   [AOP_GE] = OP_GE,
};

static ir_dtype value_dtype(sema *S, value v)
{
    return v.k == V_TENSOR ? S->g->nodes[v.node].type.dtype : DT_F32;
}

static EVAL_FRAME value eval_binary(sema *S, env *e, const ast_node *n)
{
    value x = sema_eval(S, e, n->a), y = sema_eval(S, e, n->b);
    if (x.k == V_ERR || y.k == V_ERR) return sema_value_err();
    if ((x.k == V_NUM || x.k == V_BOOL) && (y.k == V_NUM || y.k == V_BOOL))
        return fold_numbers(S, n, x, y);
    ir_dtype like = x.k == V_TENSOR ? value_dtype(S, x) : value_dtype(S, y);
    int in[2] = {sema_to_tensor(S, n->a, x, like), sema_to_tensor(S, n->b, y, like)};
    if (in[0] < 0 || in[1] < 0) return sema_value_err();
    return sema_value_tensor(ir_add(S->g, binop_to_ir[n->op], in, 2, NULL, S->src, n->span));
}

static EVAL_FRAME value eval_unary(sema *S, env *e, const ast_node *n)
{
    value x = sema_eval(S, e, n->a);
    if (x.k == V_ERR) return x;
    if (x.k == V_NUM) return sema_value_num(-x.num, x.is_int);
    int in = sema_to_tensor(S, n->a, x, DT_F32);
    if (in < 0) return sema_value_err();
    return sema_value_tensor(ir_add(S->g, OP_NEG, &in, 1, NULL, S->src, n->span));
}

static EVAL_FRAME value eval_index(sema *S, env *e, const ast_node *n)
{
    value x = sema_eval(S, e, n->a), i = sema_eval(S, e, n->b);
    int64_t k;
    if (x.k == V_ERR || sema_int_arg(S, n->b, i, &k) < 0) return sema_value_err();
    if (x.k != V_LIST) {
        sema_err(S, n->a, "cannot index %s; use slice() or gather() on tensors",
                 sema_value_kind(&x));
        return sema_value_err();
    }
    if (k < 0 || k >= x.n_items || x.items[k].k == V_NONE) {
        sema_err(S, n->b, "index %lld is not set (the list has %d elements)", (long long)k,
                 x.n_items);
        return sema_value_err();
    }
    return x.items[k];
}

/* n is MODULE.name or MODULE.sub.name (torch.relu, tf.nn.relu) with an
 * unbound module of TF, PyTorch or numpy: one error, at all of it. */
static int foreign_module(sema *S, env *e, const ast_node *n)
{
    const ast_node *root = n->a;
    while (root->kind == AST_FIELD) root = root->a;
    if (root->kind != AST_NAME || env_find(e, root->name) || !sema_is_module(root->name)) return 0;
    char buf[256];
    const src_span *a = &n->a->span;
    sema_err(S, n, "'%s' is not a module: everything is built in (for %.*s.%s, %s)", root->name,
             (int)(a->end - a->begin), S->src->text + a->begin, n->name,
             sema_module_hint(n->name, buf, sizeof buf));
    return 1;
}

/* x.name that x does not have, with what to write instead on a tensor. */
static value no_member(sema *S, const ast_node *n, const value *x, const char *what)
{
    char buf[256];
    int tensor = x->k == V_TENSOR || x->k == V_INIT;
    const char *hint =
        tensor || x->k == V_OPT ? sema_member_hint(n->name, tensor, buf, sizeof buf) : NULL;
    if (hint)
        sema_err(S, n, "%s has no %s '%s': %s", sema_value_kind(x), what, n->name, hint);
    else
        sema_err(S, n, "%s has no %s '%s'", sema_value_kind(x), what, n->name);
    return sema_value_err();
}

static EVAL_FRAME value eval_field(sema *S, env *e, const ast_node *n)
{
    if (foreign_module(S, e, n)) return sema_value_err();
    value x = sema_eval(S, e, n->a);
    if (x.k == V_ERR) return x;
    if (x.k == V_DATA) return sema_data_field(S, n, x.id, n->name);
    return no_member(S, n, &x, "field");
}

/* A variable of vars= (the list form): trainable, not an optimizer's slot. */
static int minimize_var(sema *S, const ast_node *at, const value *v, unsigned char *only)
{
    const ir_graph *g = S->g;
    int vi = v->k == V_TENSOR && g->nodes[v->node].op == OP_VARIABLE ? g->nodes[v->node].var : -1;
    if (vi < 0) {
        sema_err(S, at, "minimize: vars= lists variables; this is %s", sema_value_kind(v));
        return -1;
    }
    if (!g->vars[vi].trainable || g->vars[vi].slot_of >= 0) {
        sema_err(S, at, "minimize: vars= lists '%s', which is not trainable", g->vars[vi].name);
        return -1;
    }
    only[vi] = 1;
    return 0;
}

/* minimize's vars=: a scope (the variables whose full names are it or
 * start with it and '/'), or a variable or a list of them; fills only
 * [n_vars].  -1 on error. */
static int minimize_vars(sema *S, const ast_node *at, const value *v, unsigned char *only)
{
    const ir_graph *g = S->g;
    if (v->k == V_STR) {
        size_t n = strlen(v->str);
        int any = 0;
        for (int vi = 0; vi < g->n_vars; vi++) {
            const char *name = g->vars[vi].name;
            if (g->vars[vi].trainable && g->vars[vi].slot_of < 0 && strncmp(name, v->str, n) == 0 &&
                (name[n] == 0 || name[n] == '/'))
                only[vi] = any = 1;
        }
        if (!any)
            sema_err(S, at,
                     "minimize: vars=\"%s\" names no trainable variable (a scope, or a "
                     "variable's full name)",
                     v->str);
        return any ? 0 : -1;
    }
    if (v->k != V_LIST) return minimize_var(S, at, v, only);
    for (int k = 0; k < v->n_items; k++)
        if (minimize_var(S, at, &v->items[k], only) < 0) return -1;
    return 0;
}

/* accumulate=k: an integer in [1, LIM_ACCUMULATE]; not with allreduce. */
static int accumulate_arg(sema *S, env *e, const ast_node *at, int *k)
{
    int64_t n;
    value v = sema_eval(S, e, at->a);
    if (v.k == V_ERR || sema_int_in(S, at, "accumulate", v, 1, 1, LIM_ACCUMULATE, &n) < 0)
        return -1;
    if (n > 1 && S->opt->allreduce) {
        sema_err(S, at, "minimize: accumulate= is not supported with distributed sync training");
        return -1;
    }
    *k = (int)n;
    return 0;
}

/* minimize(loss), with optional vars= (the loss's node and *only, NULL
 * without) and accumulate= (*k, else 1).  -1 on error. */
static int minimize_args(sema *S, env *e, const ast_node *n, unsigned char **only, int *k)
{
    const ast_node *loss_at = NULL, *vars_at = NULL, *acc_at = NULL;
    int bad = 0;
    *only = NULL;
    *k = 1;
    for (int i = 0; i < n->n_items; i++) {
        const ast_node *it = n->items[i];
        if (it->kind != AST_KWARG)
            bad |= loss_at != NULL, loss_at = it;
        else if (strcmp(it->name, "vars") == 0)
            bad |= vars_at != NULL, vars_at = it;
        else
            bad |= acc_at != NULL || strcmp(it->name, "accumulate") != 0, acc_at = it;
    }
    if (bad || !loss_at) {
        sema_err(S, n,
                 "%s() takes the loss and, optionally, vars= (a scope name, or a list "
                 "of variables)%s",
                 n->kind == AST_CALL ? "gradients" : n->name,
                 n->kind == AST_METHOD && strcmp(n->name, "minimize") == 0
                     ? " and accumulate= (runs per update)"
                     : "");
        return -1;
    }
    value loss = sema_eval(S, e, loss_at);
    int l = loss.k == V_ERR ? -1 : sema_to_tensor(S, loss_at, loss, DT_F32);
    if (l < 0 || (acc_at && accumulate_arg(S, e, acc_at, k) < 0)) return -1;
    if (!vars_at) return l;
    value vars = sema_eval(S, e, vars_at->a);
    if (vars.k == V_ERR) return -1;
    *only = base_xcalloc((size_t)S->g->n_vars + 1, 1);
    if (minimize_vars(S, vars_at, &vars, *only) == 0) return l;
    free(*only);
    *only = NULL;
    return -1;
}

static mode_copy *train_record(sema *S);

/* The training value of group `grp` (-1: error) of record r. */
static value train_value(sema *S, int r, int grp, int every, int partial)
{
    value v = sema_value_tensor(grp);
    S->train_group[r] = v.k == V_TENSOR ? v.node : -1;
    S->train_partial[r] = partial;
    v.is_train = 1;
    v.id = S->train_loss[r];
    v.every = every;
    v.partial = partial;
    return v;
}

/* opt.minimize(loss, vars=, accumulate=) and opt.gradients(loss, vars=):
 * the loss's node, its training copy (record *r), *only; -1 on error. */
static int loss_args(sema *S, env *e, const ast_node *n, ad_optimizer *opt, unsigned char **only,
                     int *r)
{
    int l = minimize_args(S, e, n, only, &opt->accumulate);
    if (l < 0) return -1;
    if (++S->n_minimize > LIM_MINIMIZE) {
        sema_stop(S, n, "more than %d calls of minimize(), the limit", LIM_MINIMIZE);
        l = -1;
    }
    opt->allreduce = S->opt->allreduce;
    mode_copy *c = l < 0 ? NULL : train_record(S);
    int lt = c ? mode_train_copy(S->g, c, l) : -1;
    if (c) *r = S->n_trains - 1, S->train_loss[*r] = lt;
    if (lt >= 0) return lt;
    free(*only);
    *only = NULL;
    return -1;
}

static value method_minimize(sema *S, env *e, const ast_node *n, ad_optimizer *opt)
{
    unsigned char *only;
    int r, lt = loss_args(S, e, n, opt, &only, &r), partial = -1;
    if (lt < 0) return sema_value_err();
    int grp = ad_minimize(S->g, lt, opt, only, S->src, n->span, &partial);
    free(only);
    return train_value(S, r, grp, opt->accumulate, partial);
}

/* opt.gradients(loss, vars=): [[gradient, variable], ...], as TF's
 * compute_gradients; the list remembers its record (id) for opt.apply. */
static value method_gradients(sema *S, env *e, const ast_node *n, ad_optimizer *opt)
{
    unsigned char *only;
    int r, lt = loss_args(S, e, n, opt, &only, &r);
    if (lt < 0) return sema_value_err();
    int *vars = base_xmalloc(sizeof(int) * 2 * (size_t)(S->g->n_vars + 1)),
        *grads = vars + S->g->n_vars + 1;
    int k = opt->accumulate > 1 ? -1 : ad_gradients(S->g, lt, only, S->src, n->span, vars, grads);
    if (opt->accumulate > 1) sema_err(S, n, "gradients() takes no accumulate=");
    free(only);
    value v = {.k = V_LIST, .n_items = k, .cap_items = k, .id = r + 1};
    v.items = k < 0 ? NULL : ir_alloc(S->g, sizeof(value) * (size_t)(k + 1));
    for (int i = 0; i < k; i++) {
        value *pair = ir_alloc(S->g, sizeof(value) * 2);
        pair[0] = sema_value_tensor(grads[i]);
        pair[1] = sema_value_tensor(S->g->vars[vars[i]].node);
        v.items[i] = (value){.k = V_LIST, .items = pair, .n_items = 2, .cap_items = 2};
    }
    free(vars);
    return k < 0 ? sema_value_err() : v;
}

/* Pair i of opt.apply's list: its variable's index and gradient's node. */
static int apply_pair(sema *S, const ast_node *at, const value *p, int *var, int *grad)
{
    const ir_node *vn = p->k == V_LIST && p->n_items == 2 && p->items[1].k == V_TENSOR
                            ? &S->g->nodes[p->items[1].node]
                            : NULL;
    if (!vn || vn->op != OP_VARIABLE) {
        sema_err(S, at,
                 "apply() takes a list of [gradient, variable] pairs, as gradients() "
                 "returns");
        return -1;
    }
    *var = vn->var;
    if ((*grad = sema_to_tensor(S, at, p->items[0], DT_F32)) < 0) return -1;
    const ir_type *gt = &S->g->nodes[*grad].type;
    if (ir_type_eq(gt, &vn->type)) return 0;
    char a[96], b[96];
    sema_err(S, at, "apply(): the gradient of '%s' is %s, but the variable is %s",
             S->g->vars[*var].name, ir_type_str(gt, a, sizeof a),
             ir_type_str(&vn->type, b, sizeof b));
    return -1;
}

/* The record a list from gradients() came from, else the newest one no
 * apply() has taken yet. */
static int apply_record(sema *S, const value *list)
{
    if (list->id > 0 && list->id <= S->n_trains && S->train_group[list->id - 1] < 0)
        return list->id - 1;
    for (int r = S->n_trains - 1; r >= 0; r--)
        if (S->train_group[r] < 0) return r;
    return -1;
}

/* opt.apply(pairs): TF's apply_gradients. */
static value method_apply(sema *S, env *e, const ast_node *n, ad_optimizer *opt)
{
    if (n->n_items != 1 || n->items[0]->kind == AST_KWARG) {
        sema_err(S, n, "apply() takes one list of [gradient, variable] pairs");
        return sema_value_err();
    }
    value list = sema_eval(S, e, n->items[0]);
    if (list.k == V_ERR) return list;
    int r = list.k == V_LIST ? apply_record(S, &list) : -1;
    if (r < 0) {
        sema_err(S, n->items[0], "apply() takes the list that a gradients() call returned");
        return sema_value_err();
    }
    int *vars = base_xmalloc(sizeof(int) * 2 * (size_t)(list.n_items + 1)),
        *grads = vars + list.n_items + 1, ok = 1;
    unsigned char *seen = base_xcalloc((size_t)S->g->n_vars + 1, 1);
    for (int i = 0; ok && i < list.n_items; i++) {
        ok = apply_pair(S, n->items[0], &list.items[i], &vars[i], &grads[i]) == 0;
        if (ok && seen[vars[i]]++) {
            sema_err(S, n->items[0], "apply(): variable '%s' is in the list twice",
                     S->g->vars[vars[i]].name);
            ok = 0;
        }
    }
    opt->allreduce = S->opt->allreduce;
    int grp = ok ? ad_apply(S->g, vars, grads, list.n_items, opt, S->src, n->span) : -1;
    free(vars);
    free(seen);
    return train_value(S, r, grp, 1, -1);
}

static EVAL_FRAME value eval_method(sema *S, env *e, const ast_node *n)
{
    if (foreign_module(S, e, n)) return sema_value_err();
    value obj = sema_eval(S, e, n->a);
    if (obj.k == V_ERR) return obj;
    if (obj.k == V_OPT && strcmp(n->name, "minimize") == 0)
        return method_minimize(S, e, n, &obj.opt);
    if (obj.k == V_OPT && strcmp(n->name, "gradients") == 0)
        return method_gradients(S, e, n, &obj.opt);
    if (obj.k == V_OPT && strcmp(n->name, "apply") == 0) return method_apply(S, e, n, &obj.opt);
    return no_member(S, n, &obj, "method");
}

/* A new training target's record: the copy of its loss (compiler/modes.c)
 * and, once made, its group. */
static mode_copy *train_record(sema *S)
{
    int n = S->n_trains++;
    S->train_group = base_xreallocarray(S->train_group, (size_t)n + 1, sizeof(int));
    S->train_partial = base_xreallocarray(S->train_partial, (size_t)n + 1, sizeof(int));
    S->train_loss = base_xreallocarray(S->train_loss, (size_t)n + 1, sizeof(int));
    S->train_partial[n] = S->train_loss[n] = -1;
    S->train_copy = base_xreallocarray(S->train_copy, (size_t)n + 1, sizeof(mode_copy));
    S->train_group[n] = -1;
    S->train_copy[n] = (mode_copy){0};
    return &S->train_copy[n];
}

/* After the program: each training target runs the side updates its loss
 * reached (batchnorm's statistics, ema()); an ema() no target runs is
 * reported. */
static void attach_sides(sema *S)
{
    for (int i = 0; i < S->n_trains; i++) {
        for (int k = 0; k < 2 && !S->stop; k++) { /* the target, and its accumulate runs */
            int grp = k ? S->train_partial[i] : S->train_group[i];
            if (grp >= 0) mode_attach_sides(S->g, &S->train_copy[i], grp);
        }
        mode_copy_free(&S->train_copy[i]);
    }
    for (int i = 0; i < S->g->n_sides; i++) {
        const ir_side *s = &S->g->sides[i];
        const ir_node *u = &S->g->nodes[s->update];
        if (s->warn && !s->n_used && S->g->diags->n_errors == 0)
            diag_add(S->g->diags, DIAG_WARNING, u->src, u->span,
                     "ema(): no training target computes its input, so the average never moves");
    }
    free(S->train_group);
    free(S->train_partial);
    free(S->train_loss);
    free(S->train_copy);
}

/* ---- user functions ---- */

static int declares_vars(const ast_node *n)
{
    if (!n || n->kind == AST_FN) return 0;
    if (n->kind == AST_VAR) return 1;
    for (int i = 0; i < n->n_items; i++)
        if (declares_vars(n->items[i])) return 1;
    return declares_vars(n->a) || declares_vars(n->b) || declares_vars(n->c);
}

static int stmt_block(sema *S, env *e, const ast_node *blk);

static int bind_params(sema *S, env *local, const ast_node *fn, const sema_args *args)
{
    int np = fn->n_items, ok = 1;
    if (args->n_pos > np) {
        sema_err(S, args->call, "%s() takes %d argument%s, got %d", fn->name, np,
                 np == 1 ? "" : "s", args->n_pos);
        return -1;
    }
    for (int i = 0; i < args->n_pos; i++) env_set(local, fn->items[i]->name, args->pos[i]);
    for (int k = 0; k < args->n_kw; k++) {
        const ast_node *kw = args->kw_at[k];
        int i = 0;
        while (i < np && strcmp(fn->items[i]->name, kw->name) != 0) i++;
        if (i == np) {
            sema_err(S, kw, "%s() has no parameter named '%s'", fn->name, kw->name);
            ok = 0;
        } else if (i < args->n_pos) {
            sema_err(S, kw, "%s() got two values for parameter '%s'", fn->name, kw->name);
            sema_note(S, args->pos_at[i], "'%s' was first given here, by position", kw->name);
            ok = 0;
        } else
            env_set(local, kw->name, args->kw[k]);
    }
    for (int i = 0; i < np; i++) {
        const ast_node *p = fn->items[i];
        if (env_find_local(local, p->name)) continue;
        if (!p->a) {
            sema_err(S, args->call, "%s() is missing argument '%s'", fn->name, p->name);
            ok = 0;
            continue;
        }
        env_set(local, p->name, sema_eval(S, S->global, p->a));
    }
    return ok ? 0 : -1;
}

/* Opens the scope of a call to fn (see docs/architecture.md, "Call
 * scopes"): returns 1 when one was opened, 0 when the call needs none, -1
 * after an error. */
static int call_scope(sema *S, vscope *v, const ast_node *fn, int fn_vars, const sema_args *args)
{
    const ast_node *call = args->call;
    if (!call->as_name && !fn_vars) return 0;
    const char *nm = call->as_name;
    char buf[LIM_NAME + 32]; /* a longer name fails in scope_push anyway */
    if (!nm)
        snprintf(buf, sizeof buf, "%s_%d", fn->name, scope_count(S->scope, fn->name));
    else if (call->as_index)
        snprintf(buf, sizeof buf, "%.*s_%lld", LIM_NAME, nm, (long long)args->as_index);
    if (!nm || call->as_index) nm = ir_strdup(S->g, buf);
    return scope_push(S, v, call, nm, S->scope->reuse) < 0 ? -1 : 1;
}

static EVAL_FRAME value call_fn(sema *S, const ast_node *fn, int fn_vars, const sema_args *args)
{
    const ast_node *call = args->call;
    if (S->depth >= LIM_CALL_DEPTH) {
        sema_stop(S, call, "function calls nested deeper than %d (recursion?)", LIM_CALL_DEPTH);
        return sema_value_err();
    }
    env local = {.parent = S->global};
    local.v = local.small;
    local.cap = ENV_INLINE;
    value result = sema_value_err();
    int scoped = -1;
    vscope scope;
    if (bind_params(S, &local, fn, args) == 0 &&
        (scoped = call_scope(S, &scope, fn, fn_vars, args)) >= 0) {
        S->depth++;
        int saved_in_fn = S->in_fn;
        S->in_fn = 1;
        S->ret = (value){.k = V_NONE};
        int r = stmt_block(S, &local, fn->b);
        result = S->stop ? sema_value_err() : r == 1 ? S->ret : (value){.k = V_NONE};
        S->in_fn = saved_in_fn;
        S->depth--;
        if (scoped) scope_pop(S);
    }
    env_free(&local);
    return result;
}

/* f(a=1, a=2), whatever f is. */
static int check_kwargs(sema *S, const sema_args *args)
{
    int r = 0;
    for (int k = 1; k < args->n_kw; k++)
        for (int j = 0; j < k; j++) {
            const ast_node *kw = args->kw_at[k], *first = args->kw_at[j];
            if (strcmp(kw->name, first->name) != 0) continue;
            sema_err(S, kw, "argument '%s' is given twice", kw->name);
            sema_note(S, first, "'%s' was first given here", kw->name);
            r = -1;
            break;
        }
    return r;
}

/* Room for the arguments of most calls, reused (call_buf): a call then
 * costs no allocation, which matters when loops run a function a million
 * times. */
enum { ARGS_INLINE = 8 };
struct args_buf {
    value pos[ARGS_INLINE], kw[ARGS_INLINE];
    const ast_node *pos_at[ARGS_INLINE], *kw_at[ARGS_INLINE];
};

/* `f(x) as NAME[i]`: i, a non-negative integer known at compile time. */
static int as_index(sema *S, env *e, const ast_node *n, int64_t *out)
{
    value v = sema_eval(S, e, n->as_index);
    if (v.k == V_ERR || sema_int_arg(S, n->as_index, v, out) < 0) return -1;
    if (*out >= 0) return 0;
    sema_err(S, n->as_index, "the index of a call's scope must be >= 0, got %lld", (long long)*out);
    return -1;
}

/* Evaluates n's arguments into args (in buf when they fit, else arrays
 * that args_free frees); returns -1 when one of them is an error. */
static int eval_args(sema *S, env *e, const ast_node *n, sema_args *args, args_buf *buf)
{
    size_t cap = (size_t)n->n_items + 1;
    int bad = 0, small = n->n_items <= ARGS_INLINE;
    *args = (sema_args){.call = n,
                        .pos = small ? buf->pos : base_xcalloc(cap, sizeof(value)),
                        .pos_at = small ? buf->pos_at : base_xcalloc(cap, sizeof(ast_node *)),
                        .kw = small ? buf->kw : base_xcalloc(cap, sizeof(value)),
                        .kw_at = small ? buf->kw_at : base_xcalloc(cap, sizeof(ast_node *))};
    for (int i = 0; i < n->n_items; i++) {
        const ast_node *it = n->items[i];
        value v = sema_eval(S, e, it->kind == AST_KWARG ? it->a : it);
        bad |= v.k == V_ERR;
        if (it->kind == AST_KWARG)
            args->kw_at[args->n_kw] = it, args->kw[args->n_kw++] = v;
        else
            args->pos_at[args->n_pos] = it, args->pos[args->n_pos++] = v;
    }
    if (!bad && n->as_index) bad = as_index(S, e, n, &args->as_index) < 0;
    return bad ? -1 : 0;
}

static void args_free(sema_args *args, args_buf *buf)
{
    if (args->pos == buf->pos) return;
    free(args->pos);
    free(args->pos_at);
    free(args->kw);
    free(args->kw_at);
}

/* The argument buffer of the call nested `depth` calls deep: kept for the
 * next call at that depth, so calls neither allocate nor put kilobytes on
 * the native stack, which nested calls would multiply. */
static args_buf *call_buf(sema *S, int depth)
{
    if (depth == S->cap_argbufs) {
        S->cap_argbufs = S->cap_argbufs ? 2 * S->cap_argbufs : 16;
        S->argbufs = base_xreallocarray(S->argbufs, (size_t)S->cap_argbufs, sizeof *S->argbufs);
        memset(S->argbufs + depth, 0, sizeof *S->argbufs * (size_t)(S->cap_argbufs - depth));
    }
    if (!S->argbufs[depth]) S->argbufs[depth] = base_xmalloc(sizeof(args_buf));
    return S->argbufs[depth];
}

static EVAL_FRAME value eval_call(sema *S, env *e, const ast_node *n)
{
    value f = sema_eval(S, e, n->a);
    if (f.k == V_ERR) return f;
    if (f.k == V_BUILTIN && f.id == SEMA_GRADIENTS) { /* tf.gradients: no optimizer's options */
        ad_optimizer none = {.kind = AD_SGD};
        return method_gradients(S, e, n, &none);
    }
    sema_args args;
    args_buf *buf = call_buf(S, S->n_calls++);
    value r = sema_value_err();
    if (eval_args(S, e, n, &args, buf) < 0 || check_kwargs(S, &args) < 0) {
    } else if (f.k == V_FN)
        r = call_fn(S, f.fn, f.id, &args);
    else if (f.k == V_OP)
        r = sema_call_op(S, f.id, &args);
    else if (f.k == V_BUILTIN && f.id >= SEMA_STATE_BASE)
        r = sema_call_state(S, f.id, &args);
    else if (f.k == V_BUILTIN)
        r = sema_call_builtin(S, f.id, &args);
    else
        sema_err(S, n->a, "%s is not callable", sema_value_kind(&f));
    args_free(&args, buf);
    S->n_calls--;
    return r;
}

/* An annotated initializer keeps its annotation: the var it initializes
 * takes that device (stmt_var). */
static EVAL_FRAME value eval_device_expr(sema *S, env *e, const ast_node *n)
{
    int req = place_open(S, e, n->b);
    if (req < 0) return sema_value_err();
    value v = sema_eval(S, e, n->a);
    place_close(S, req);
    if (v.k == V_INIT && !v.init_annot) v.init_annot = req + 1;
    return v;
}

/* One evaluation step: counted against LIM_EVAL_STEPS, and the graph's
 * budget is checked, so that whatever the program does, the first
 * expression evaluated past a limit reports it. */
static int eval_step(sema *S, const ast_node *n)
{
    if (S->stop || sema_budget(S, n, 0) < 0) return -1;
    /* Like a C compiler, stop once the errors shown are full: in a loop,
     * one mistake would otherwise be evaluated (and counted) a million
     * times. */
    if (diag_full(S->g->diags)) {
        S->stop = 1;
        return -1;
    }
    IR_WORK(1);
    if (++S->steps <= LIM_EVAL_STEPS) return 0;
    sema_stop(S, n,
              "compile-time evaluation takes more than %d steps, the limit (loops or recursion "
              "that multiply?)",
              LIM_EVAL_STEPS);
    return -1;
}

static value eval_kind(sema *S, env *e, const ast_node *n)
{
    switch (n->kind) {
    case AST_NUM:
        return sema_value_num(n->num, n->flag);
    case AST_STR:
        return (value){.k = V_STR, .str = n->name};
    case AST_BOOL:
        return (value){.k = V_BOOL, .num = n->flag};
    case AST_NAME:
        return eval_name(S, e, n);
    case AST_LIST:
        return eval_list(S, e, n);
    case AST_CALL:
        return eval_call(S, e, n);
    case AST_METHOD:
        return eval_method(S, e, n);
    case AST_FIELD:
        return eval_field(S, e, n);
    case AST_INDEX:
        return eval_index(S, e, n);
    case AST_BINARY:
        return eval_binary(S, e, n);
    case AST_UNARY:
        return eval_unary(S, e, n);
    case AST_DEVICE:
        return eval_device_expr(S, e, n);
    default:
        sema_err(S, n, "expected an expression");
        return sema_value_err();
    }
}

/* Evaluation recurses natively, once per level of expression and again
 * through each call: LIM_EVAL_DEPTH bounds the stack it takes, however
 * recursion and deep expressions combine. */
static value sema_eval(sema *S, env *e, const ast_node *n)
{
    if (eval_step(S, n) < 0) return sema_value_err();
    if (S->eval_depth >= LIM_EVAL_DEPTH) {
        sema_stop(S, n, "expressions and calls nested deeper than %d (recursion?)", LIM_EVAL_DEPTH);
        return sema_value_err();
    }
    S->eval_depth++;
    value v = eval_kind(S, e, n);
    S->eval_depth--;
    return v;
}

/* ---- statements ---- */

/* What a --set did (sema.param_used): its param was declared; QUIET: no
 * reassignment warning is due (given already, or the override failed). */
enum { PARAM_SET = 1, PARAM_QUIET = 2 };

/* An override's number as the language writes one, with an optional '-':
 * "-?[0-9]+" for an integer param, and for a number param also
 * "-?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)?".  No spaces, '+', hex, inf or nan. */
static int override_syntax(const char *s, int is_int)
{
    static const char digits[] = "0123456789";
    size_t n = strspn(s += *s == '-', digits);
    if (n == 0) return 0;
    s += n;
    if (!is_int && *s == '.') {
        if (!(n = strspn(++s, digits))) return 0;
        s += n;
    }
    if (!is_int && (*s == 'e' || *s == 'E')) {
        s += 1 + (s[1] == '+' || s[1] == '-');
        if (!(n = strspn(s, digits))) return 0;
        s += n;
    }
    return *s == 0;
}

/* Integers are exact: parsed as integers, refused past 2^53, never rounded
 * through a double.  Numbers must be finite doubles (an underflow rounds, as
 * a literal's does). */
static int override_num(sema *S, const ast_node *st, const char *text, int is_int, value *out)
{
    if (!override_syntax(text, is_int)) {
        sema_err(S, st, "--set %s=%s: expected %s like the default", st->name, text,
                 is_int ? "an integer" : "a number");
        return -1;
    }
    errno = 0;
    long long i = is_int ? strtoll(text, NULL, 10) : 0;
    double x = is_int ? (double)i : strtod(text, NULL);
    if (is_int && (errno == ERANGE || i > LIM_INT || i < -LIM_INT)) {
        sema_err(S, st,
                 "--set %s=%s: out of range: param %s is an integer, in [-%lld, %lld] (2^53)",
                 st->name, text, st->name, LIM_INT, LIM_INT);
        return -1;
    }
    if (isinf(x)) {
        sema_err(S, st, "--set %s=%s: out of range: param %s is a number, a finite double",
                 st->name, text, st->name);
        return -1;
    }
    *out = sema_value_num(x, is_int);
    return 0;
}

static int parse_override(sema *S, const ast_node *st, const char *text, value def, value *out)
{
    if (def.k == V_NUM) return override_num(S, st, text, def.is_int, out);
    if (def.k == V_BOOL) {
        if (strcmp(text, "true") && strcmp(text, "false")) {
            sema_err(S, st, "--set %s=%s: expected true or false", st->name, text);
            return -1;
        }
        *out = (value){.k = V_BOOL, .num = strcmp(text, "true") == 0};
    } else if (def.k == V_STR) {
        *out = (value){.k = V_STR, .str = ir_strdup(S->g, text)};
    } else {
        sema_err(S, st, "param %s cannot be overridden: its value is %s", st->name,
                 sema_value_kind(&def));
        return -1;
    }
    return 0;
}

/* `NAME = ...` or `for NAME in ...` at the top level rebinds NAME from that
 * statement on.  When NAME is a param that --set gave its value, the rest
 * of the file no longer sees that value: a warning says so, once per param. */
static void param_rebound(sema *S, env *e, const ast_node *st, const char *name)
{
    binding *b = e == S->global ? env_find_local(e, name) : NULL;
    if (!b || !b->decl || b->decl->kind != AST_PARAM) return;
    int last = -1;
    for (int i = 0; i < S->opt->n_params; i++)
        if (S->param_used[i] && strcmp(S->opt->params[i].name, name) == 0) last = i;
    if (last < 0 || S->param_used[last] == PARAM_QUIET) return;
    for (int i = 0; i < S->opt->n_params; i++)
        if (strcmp(S->opt->params[i].name, name) == 0) S->param_used[i] = PARAM_QUIET;
    diag_add(S->g->diags, DIAG_WARNING, S->src, st->span,
             "param '%s' is assigned again: from here on it no longer has the value --set "
             "%s=%s gave it",
             name, name, S->opt->params[last].value);
    sema_note(S, b->decl, "'%s' is declared here", name);
}

static void stmt_param(sema *S, env *e, const ast_node *st)
{
    if (e != S->global) {
        sema_err(S, st, "param is only allowed at the top level");
        return;
    }
    if (env_redeclared(S, e, st)) return;
    value v = sema_eval(S, e, st->a);
    if (v.k != V_ERR && v.k != V_NUM && v.k != V_BOOL && v.k != V_STR) {
        sema_err(S, st->a, "a param must be a number, boolean or string, got %s",
                 sema_value_kind(&v));
        v = sema_value_err();
    }
    for (int i = 0; i < S->opt->n_params; i++)
        if (strcmp(S->opt->params[i].name, st->name) == 0) {
            S->param_used[i] = PARAM_SET;
            value given = v; /* a bad value is reported; the default then stands, so
                                no error follows from it */
            if (v.k != V_ERR && parse_override(S, st, S->opt->params[i].value, v, &given) < 0)
                S->param_used[i] = PARAM_QUIET;
            else
                v = given;
        }
    env_declare(e, st, v);
}

static void stmt_input(sema *S, env *e, const ast_node *st)
{
    if (env_redeclared(S, e, st)) return;
    env_declare(e, st, sema_value_err()); /* until it succeeds: no cascades */
    const ast_node *ty = st->a;
    ir_type t = {.dtype = strcmp(ty->name, "i32") == 0 ? DT_I32 : DT_F32, .rank = ty->n_items};
    if (strcmp(ty->name, "f32") && strcmp(ty->name, "i32")) {
        sema_err(S, ty, "unknown dtype '%s' (expected f32 or i32)", ty->name);
        return;
    }
    if (t.rank > IR_MAX_DIMS) {
        sema_err(S, ty, "rank %d is above the limit of %d", t.rank, IR_MAX_DIMS);
        return;
    }
    for (int i = 0; i < t.rank; i++) {
        if (sema_int_arg(S, ty->items[i], sema_eval(S, e, ty->items[i]), &t.dim[i]) < 0) return;
        if (t.dim[i] <= 0) {
            sema_err(S, ty->items[i], "dimension must be positive, got %lld", (long long)t.dim[i]);
            return;
        }
    }
    char what[LIM_NAME + 16];
    snprintf(what, sizeof what, "input '%s'", st->name);
    if (sema_check_type(S, ty, what, &t) < 0 || sema_budget(S, st, 0) < 0) return;
    int node = ir_add_input(S->g, st->name, &t, S->src, st->span);
    env_set(e, st->name, sema_value_tensor(node));
}

static void redeclared(sema *S, const ast_node *st, const char *full, int old)
{
    const ir_var *ov = &S->g->vars[old];
    sema_err(S, st, "variable '%s' already exists; declare it in a scope with `reuse` to share it",
             full);
    diag_note(S->g->diags, ov->src, ov->span, "'%s' was first declared here", full);
}

static int reuse_var(sema *S, const ast_node *st, const char *full, int old, const value *init)
{
    const ir_var *ov = &S->g->vars[old];
    if (!ir_type_eq(&ov->type, &init->itype)) {
        char a[96], b[96];
        sema_err(S, st, "variable '%s' is reused with shape %s, but it was declared as %s", full,
                 ir_type_str(&init->itype, a, sizeof a), ir_type_str(&ov->type, b, sizeof b));
        diag_note(S->g->diags, ov->src, ov->span, "'%s' was first declared here", full);
        return -1;
    }
    return ov->node;
}

static void stmt_var(sema *S, env *e, const ast_node *st)
{
    if (env_redeclared(S, e, st)) return;
    env_declare(e, st, sema_value_err()); /* until it succeeds: no cascades */
    value init = sema_eval(S, e, st->a);
    if (init.k == V_ERR) return;
    if (init.k != V_INIT) {
        sema_err(S, st->a,
                 "a var needs an initializer such as zeros([n]) or glorot([a, b]), got %s",
                 sema_value_kind(&init));
        return;
    }
    const char *pp = S->scope->path;
    char full[LIM_NAME + 1];
    if (strlen(pp) + strlen(st->name) + 1 > LIM_NAME) {
        sema_err(S, st, "variable name '%.40s...' is longer than %d bytes, the limit", pp,
                 LIM_NAME);
        return;
    }
    if (sema_budget(S, st, 0) < 0) return;
    snprintf(full, sizeof full, "%s%s%s", pp, *pp ? "/" : "", st->name);
    int old = ir_find_var(S->g, full), node;
    if (S->scope->reuse) {
        if (old < 0) {
            sema_err(S, st, "variable '%s' does not exist, but its scope has `reuse` on", full);
            return;
        }
        node = reuse_var(S, st, full, old, &init);
    } else if (old >= 0) {
        redeclared(S, st, full, old);
        return;
    } else {
        ir_var v = {.name = ir_strdup(S->g, full),
                    .type = init.itype,
                    .init = init.init,
                    .a = init.ia,
                    .b = init.ib,
                    .device = -1,
                    .slot_of = -1,
                    .trainable = !init.init_frozen,
                    .src = S->src,
                    .span = st->span};
        int vi = ir_add_var(S->g, &v);
        node = S->g->vars[vi].node;
        /* its device: the annotation on its initializer, else the innermost
         * around the statement (its node took that one); slots and updates
         * go with it (autodiff) */
        if (init.init_annot) S->g->nodes[node].place_req = init.init_annot - 1;
    }
    if (node >= 0) env_set(e, st->name, sema_value_tensor(node));
}

static void stmt_scope(sema *S, env *e, const ast_node *st)
{
    int reuse = S->scope->reuse;
    if (st->flag == 1) reuse = 1;
    if (st->flag == 2) {
        value r = sema_eval(S, e, st->a);
        if (r.k == V_ERR) return;
        if (r.k != V_BOOL && r.k != V_NUM) {
            sema_err(S, st->a, "reuse() needs a boolean, got %s", sema_value_kind(&r));
            return;
        }
        reuse = r.num != 0;
    }
    int req = st->b ? place_open(S, e, st->b) : -1;
    if (st->b && req < 0) return;
    vscope v;
    if (scope_push(S, &v, st, st->name, reuse) == 0) {
        stmt_block(S, e, st->c);
        scope_pop(S);
    }
    if (st->b) place_close(S, req);
}

static int stmt_for(sema *S, env *e, const ast_node *st)
{
    int64_t lo, hi;
    if (sema_int_arg(S, st->a, sema_eval(S, e, st->a), &lo) < 0 ||
        sema_int_arg(S, st->b, sema_eval(S, e, st->b), &hi) < 0)
        return 0;
    if (hi - lo > LIM_LOOP) {
        sema_err(S, st, "loop runs %lld times; the limit is %d", (long long)(hi - lo), LIM_LOOP);
        return 0;
    }
    if (hi > lo && (S->loop_total += hi - lo) > LIM_LOOP_TOTAL) {
        sema_stop(S, st, "loops run more than %d iterations in all, the limit (nested loops?)",
                  LIM_LOOP_TOTAL);
        return 0;
    }
    if (hi > lo) param_rebound(S, e, st, st->name);
    for (int64_t i = lo; i < hi && !S->stop; i++) {
        env_set(e, st->name, sema_value_num((double)i, 1));
        int r = stmt_block(S, e, st->c);
        if (r) return r;
    }
    return 0;
}

static void assign_index(sema *S, env *e, const ast_node *st, value v)
{
    const ast_node *t = st->a;
    int64_t k;
    if (t->a->kind != AST_NAME) {
        sema_err(S, t->a, "only a name can be indexed on the left of '='");
        return;
    }
    if (sema_int_arg(S, t->b, sema_eval(S, e, t->b), &k) < 0) return;
    if (k < 0 || k > LIM_LIST_INDEX) {
        sema_err(S, t->b, "index %lld is out of range [0, %d]", (long long)k, LIM_LIST_INDEX);
        return;
    }
    binding *b = env_find_local(e, t->a->name);
    value list = b ? b->v : (value){.k = V_LIST};
    if (list.k != V_LIST) {
        sema_err(S, t->a, "'%s' is %s, not a list", t->a->name, sema_value_kind(&list));
        return;
    }
    if (k >= list.cap_items) { /* doubling: a loop filling l[i] stays linear */
        int cap = list.cap_items * 2 > k + 1 ? list.cap_items * 2 : (int)k + 1;
        if (cap > LIM_LIST_INDEX + 1) cap = LIM_LIST_INDEX + 1;
        value *items = ir_alloc(S->g, sizeof(value) * (size_t)cap);
        if (list.n_items) memcpy(items, list.items, sizeof(value) * (size_t)list.n_items);
        list.items = items;
        list.cap_items = cap;
    }
    for (int64_t i = list.n_items; i <= k; i++) list.items[i] = (value){.k = V_NONE};
    if (k >= list.n_items) list.n_items = (int)k + 1;
    list.items[k] = v;
    env_set(e, t->a->name, list);
}

/* Names node `<target><suffix>`. */
static void name_part(sema *S, const char *target, const char *suffix, int node, int is_train)
{
    size_t n = strlen(target) + strlen(suffix) + 1;
    char *buf = ir_alloc(S->g, n);
    snprintf(buf, n, "%s%s", target, suffix);
    ir_set_name(S->g, buf, node, is_train);
}

/* `noise = normal(...)` at the top level: one draw per run under that name,
 * fetchable, and the same one in every expression that reads it; the value
 * stays an initializer, so `var w = noise` still initialises. */
static int draw_named(sema *S, env *e, const ast_node *st, value *v)
{
    if (e != S->global || v->k != V_INIT || v->drawn ||
        (v->init != INIT_UNIFORM && v->init != INIT_NORMAL))
        return 0;
    int node = sema_to_tensor(S, st->b, *v, DT_F32);
    if (node < 0) return -1;
    v->drawn = node + 1;
    ir_set_name(S->g, st->a->name, node, 0);
    return 0;
}

static void stmt_assign(sema *S, env *e, const ast_node *st)
{
    value v = sema_eval(S, e, st->b);
    if (st->a->kind == AST_INDEX) {
        assign_index(S, e, st, v);
        return;
    }
    param_rebound(S, e, st, st->a->name);
    if (draw_named(S, e, st, &v) < 0) v = sema_value_err();
    env_set(e, st->a->name, v);
    if (e != S->global || v.k != V_TENSOR) return;
    if (v.is_train && v.every > 1) /* first: the target itself stays the default */
        name_part(S, st->a->name, "/accumulate", v.partial, 1);
    int k = ir_set_name(S->g, st->a->name, v.node, v.is_train);
    if (v.is_train) S->g->names[k].every = v.every;
    if (v.is_train) { /* the loss and learning rate are fetchable as <target>/loss, /lr */
        name_part(S, st->a->name, "/loss", v.id, 0);
        name_part(S, st->a->name, "/lr", ad_lr_of(S->g, v.node), 0);
    }
}

/* fn f(x, x): no call could tell the two apart. */
static int check_params(sema *S, const ast_node *fn)
{
    int r = 0;
    for (int i = 1; i < fn->n_items; i++)
        for (int j = 0; j < i; j++) {
            const ast_node *p = fn->items[i], *first = fn->items[j];
            if (strcmp(p->name, first->name) != 0) continue;
            sema_err(S, p, "%s() has two parameters named '%s'", fn->name, p->name);
            sema_note(S, first, "'%s' was first declared here", p->name);
            r = -1;
            break;
        }
    return r;
}

static void stmt_fn(sema *S, env *e, const ast_node *st)
{
    if (e != S->global) {
        sema_err(S, st, "functions can only be defined at the top level");
        return;
    }
    if (env_redeclared(S, e, st)) return;
    int ok = check_params(S, st) == 0;
    /* whether calls open a scope, decided once: a call costs O(1), not a
     * walk of the body */
    value f = {.k = V_FN, .fn = st, .id = declares_vars(st->b)};
    env_declare(e, st, ok ? f : sema_value_err());
}

static void stmt_data(sema *S, env *e, const ast_node *st)
{
    if (env_redeclared(S, e, st)) return;
    value v = sema_eval(S, e, st->a);
    env_declare(e, st, sema_data_stmt(S, st, v) == 0 ? v : sema_value_err());
}

/* Returns 1 after a `return`, else 0. */
static int stmt_stmt(sema *S, env *e, const ast_node *st)
{
    if (eval_step(S, st) < 0) return 0; /* `scope s {}` evaluates no expression */
    switch (st->kind) {
    case AST_PARAM:
        stmt_param(S, e, st);
        break;
    case AST_DATA:
        stmt_data(S, e, st);
        break;
    case AST_INPUT:
        stmt_input(S, e, st);
        break;
    case AST_VAR:
        stmt_var(S, e, st);
        break;
    case AST_FN:
        stmt_fn(S, e, st);
        break;
    case AST_SCOPE:
        stmt_scope(S, e, st);
        break;
    case AST_FOR:
        return stmt_for(S, e, st);
    case AST_ASSIGN:
        stmt_assign(S, e, st);
        break;
    case AST_EXPR_STMT:
        sema_eval(S, e, st->a);
        break;
    case AST_RETURN:
        if (!S->in_fn) {
            sema_err(S, st,
                     "return outside of a function: only a fn returns a value; at the top level, "
                     "name it (y = ...) and fetch it (graphrun FILE --eval y)");
            break;
        }
        S->ret = sema_eval(S, e, st->a);
        return 1;
    default:
        sema_err(S, st, "expected a statement");
        break;
    }
    return 0;
}

static int stmt_block(sema *S, env *e, const ast_node *blk)
{
    for (int i = 0; blk && i < blk->n_items && !S->stop; i++)
        if (stmt_stmt(S, e, blk->items[i])) return 1;
    return 0;
}

static void check_params_used(sema *S)
{
    src_span none = {0, 0};
    for (int i = 0; i < S->opt->n_params; i++) {
        if (S->param_used[i]) continue;
        const char *name = S->opt->params[i].name, *near = NULL;
        int bd = 99;
        for (int k = 0; k < S->global->n; k++) /* the params declared: lrr, lr */
            if (S->global->v[k].decl && S->global->v[k].decl->kind == AST_PARAM)
                sema_closer(name, S->global->v[k].name, &near, &bd);
        if (near)
            diag_error(S->g->diags, NULL, none,
                       "--set %s=%s: there is no param named '%s'; did you mean '%s'?", name,
                       S->opt->params[i].value, name, near);
        else
            diag_error(S->g->diags, NULL, none, "--set %s=%s: there is no param named '%s'", name,
                       S->opt->params[i].value, name);
    }
}

int sema_compile(ir_graph *g, const ast_tree *t, const sema_options *opt)
{
    static const sema_options defaults = {0};
    env global = {0};
    vscope top = {.path = ""};
    sema S = {
        .g = g, .src = t->src, .opt = opt ? opt : &defaults, .global = &global, .scope = &top};
    int errs = g->diags->n_errors;
    S.param_used = base_xcalloc((size_t)S.opt->n_params + 1, 1);
    if (t->root) stmt_block(&S, &global, t->root);
    attach_sides(&S);
    check_params_used(&S);
    env_free(&S.annot_env);
    free(S.param_used);
    for (int i = 0; i < S.cap_argbufs; i++) free(S.argbufs[i]);
    free(S.argbufs);
    free(S.data_x);
    free(S.data_y);
    scope_counters_free(&top);
    env_free(&global);
    return g->diags->n_errors == errs ? 0 : -1;
}
