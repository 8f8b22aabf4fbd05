/* eval.c - gr_eval and gr_eval_check: the mean of a scalar target (or of
 * a group's value, its first member) over one pass of the data it reads,
 * every example counted once (a tail batch too, where the target allows),
 * with the cursors put back afterwards.  The variables the target's
 * updates write (a group's assigns: a recurrent state carried from batch
 * to batch) are the pass's own: they start at their initial values and
 * get back afterwards the values they had. */
#include <stdlib.h>

#include "runtime/eval_rows.h"
#include "runtime/dist/dist.h"
#include "session_int.h"

/* One pass over the data an evaluation reads: its full batches, then, when
 * the data is not a multiple of batch * shards, the tail batch (data.h,
 * data_seek_tail), of which only the real examples are counted. */
typedef struct eval_pass {
    const ir_data *d;  /* the first source read (NULL: none) */
    int64_t batches;   /* full batches */
    int64_t shards;    /* processes that split the source */
    int tail;          /* the data leaves a tail (on some process) */
    eval_rows rows;    /* tail: the tensors the target sums, fetched from it */
    int64_t tail_rows; /* the real examples in this process's tail batch */
} eval_pass;

static int64_t eval_shards(const gr_session *s, int di)
{
    return dist_data_shards(s->dist, di);
}

/* The largest batch up to d's whose multiples of shards divide its size
 * (0: none does), for messages. */
static int64_t eval_divisor(const ir_data *d, int64_t shards)
{
    for (int64_t b = d->batch; b > 0; b--)
        if (d->n % (b * shards) == 0) return b;
    return 0;
}

/* Two sources whose batches do not pair up over one pass. */
static gr_code eval_mismatch(const char *target, const ir_data *a, const ir_data *b, gr_status *st)
{
    return rt_fail(st, GR_ERR_ARG,
                   "gr_eval: '%s' reads data sources '%s' (%lld examples, batch %lld) and '%s' "
                   "(%lld examples, batch %lld), which one pass cannot read in step; evaluate "
                   "a target that reads one source, or give them the same size and batch\n",
                   target, a->name, (long long)a->n, (long long)a->batch, b->name, (long long)b->n,
                   (long long)b->batch);
}

/* A tail that the target's value cannot count exactly. */
static gr_code eval_no_tail(const char *target, const eval_pass *ep, const char *why, gr_status *st)
{
    const ir_data *d = ep->d;
    int64_t per = d->batch * ep->shards, div = eval_divisor(d, ep->shards);
    char hint[96] = "";
    if (div) snprintf(hint, sizeof hint, ", such as %lld", (long long)div);
    return rt_fail(st, GR_ERR_ARG,
                   "gr_eval: '%s' cannot cover all %lld examples of '%s' in batches of %lld: "
                   "the last batch would hold %lld of them, but %s: only a mean over the batch "
                   "of a value per example (as mean(softmax_xent(...)) or mean(argmax(...) == "
                   "y)) can count those alone; use a batch that divides %lld%s%s\n",
                   target, (long long)d->n, d->name, (long long)per, (long long)(d->n % per), why,
                   (long long)d->n, ep->shards > 1 ? " (times the processes)" : "", hint);
}

/* The pass over the sources plan p reads, for target's value (node id),
 * checked. */
static gr_code eval_pass_of(const gr_session *s, const plan_graph *p, const char *target, int id,
                            eval_pass *ep, gr_status *st)
{
    *ep = (eval_pass){.batches = 1, .shards = 1};
    for (int k = 0; k < p->n_data_used; k++) {
        const ir_data *d = &s->g->data[p->data_used[k]];
        int64_t shards = eval_shards(s, p->data_used[k]), per = d->batch * shards;
        int tail = d->n % per != 0;
        if (k == 0) {
            *ep = (eval_pass){.d = d, .batches = d->n / per, .shards = shards, .tail = tail};
            continue;
        }
        int same = d->n == ep->d->n && d->batch == ep->d->batch && shards == ep->shards;
        if (!same && (tail || ep->tail || d->n / per != ep->batches))
            return eval_mismatch(target, ep->d, d, st);
    }
    char why[256];
    if (ep->tail && eval_rows_find(s->g, id, ep->d->batch, &ep->rows, why, sizeof why) < 0)
        return eval_no_tail(target, ep, why, st);
    if (ep->tail) ep->tail_rows = data_tail_rows(s->readers[p->data_used[0]]);
    return GR_OK;
}

/* What the tail batch needs: a plan for the target and the tensors it
 * sums, an executor, and host buffers for the fetches. */
typedef struct eval_tail {
    plan_graph *plan;
    rt_exec *e;
    gr_fetch *f; /* one per ep->rows.fetch */
    const void **vals;
} eval_tail;

static void eval_tail_free(eval_tail *t, eval_rows *rows)
{
    if (t->e) exec_free(t->e);
    if (t->plan) plan_free(t->plan);
    for (int k = 0; t->f && k < rows->n_fetch; k++) free(t->f[k].data);
    free(t->f);
    free(t->vals);
}

static gr_code eval_tail_open(gr_session *s, const char *target, int id, const eval_pass *ep,
                              eval_tail *t, gr_status *st)
{
    int n = ep->rows.n_fetch, *roots = base_xcalloc((size_t)n + 1, sizeof *roots);
    t->f = base_xcalloc((size_t)n, sizeof *t->f);
    t->vals = base_xcalloc((size_t)n, sizeof *t->vals);
    roots[0] = id;
    for (int k = 0; k < n; k++) {
        roots[k + 1] = ep->rows.fetch[k].node;
        size_t bytes = ir_nbytes(&s->g->nodes[roots[k + 1]].type);
        t->f[k] = (gr_fetch){target, base_xmalloc(bytes ? bytes : 1), bytes, NULL};
        t->vals[k] = t->f[k].data;
    }
    t->plan = rt_plan_build(s->g, roots, n + 1, st);
    free(roots);
    if (!t->plan) return GR_ERR_NOMEM;
    gr_code c = sess_readers_open(s, t->plan, st);
    return c == GR_OK ? exec_new(&s->env, t->plan, &t->e, st) : c;
}

static gr_code eval_cancelled(gr_status *st, int64_t done, const eval_pass *ep)
{
    return rt_fail(st, GR_ERR_CANCELLED,
                   "gr_eval: cancelled (gr_eval_cancel) after %lld of %lld batches\n",
                   (long long)done, (long long)(ep->batches + (ep->tail_rows > 0)));
}

void gr_eval_cancel(gr_session *s)
{
    if (s) atomic_store(&s->eval_cancelled, 1);
}

/* Under the pause lock, the cursors at the start: the full batches (the
 * sum of their values into *sum), then the tail (what its real examples
 * add, times the batch, into *tail_sum). */
static gr_code eval_run_pass(gr_session *s, const plan_graph *p, rt_exec *e, gr_fetch *f,
                             const eval_pass *ep, eval_tail *t, double *sum, double *tail_sum,
                             gr_status *st)
{
    gr_code c = GR_OK;
    int views = 0;
    for (int64_t b = 0; b < ep->batches && c == GR_OK; b++) {
        if (atomic_load_explicit(&s->eval_cancelled, memory_order_relaxed))
            return eval_cancelled(st, b, ep);
        c = exec_run(e, NULL, 0, f, 1, &views, st);
        *sum += *(const float *)f->data;
    }
    if (c != GR_OK || ep->tail_rows == 0) return c;
    if (atomic_load_explicit(&s->eval_cancelled, memory_order_relaxed))
        return eval_cancelled(st, ep->batches, ep);
    for (int k = 0; k < p->n_data_used; k++) data_seek_tail(s->readers[p->data_used[k]], 0);
    c = exec_run(t->e, NULL, 0, t->f, ep->rows.n_fetch, &views, st);
    if (c == GR_OK)
        *tail_sum = eval_rows_sum(s->g, &ep->rows, ep->d->batch, t->vals, ep->tail_rows);
    return c;
}

/* Whether the processes each evaluate a share of the data (so the mean is
 * theirs together), not all of it. */
static int eval_sharded(const gr_session *s, const plan_graph *p)
{
    for (int k = 0; k < p->n_data_used; k++)
        if (dist_data_shards(s->dist, p->data_used[k]) > 1) return 1;
    return 0;
}

/* An evaluation reads its sources from the start, then puts each cursor
 * back, so evaluating on the training source does not disturb training. */
static void eval_cursors(gr_session *s, const plan_graph *p, uint64_t (*saved)[2], int restore)
{
    for (int k = 0; k < p->n_data_used; k++) {
        data_reader *r = s->readers[p->data_used[k]];
        if (restore) {
            data_seek(r, saved[k][0], saved[k][1]);
            continue;
        }
        data_cursor(r, &saved[k][0], &saved[k][1]);
        data_seek(r, 0, 0);
    }
}

/* The variables plan p's updates write (a group's assigns), each once. */
typedef struct eval_state {
    int *var, n;
    void **saved; /* the first n_saved's values before the pass, on the host */
    int n_saved;
} eval_state;

static void eval_state_find(const plan_graph *p, eval_state *es)
{
    const ir_graph *g = p->g;
    es->var = base_xcalloc((size_t)p->n + 1, sizeof *es->var);
    for (int i = 0; i < p->n; i++) {
        const ir_node *n = &g->nodes[p->order[i]];
        if (!ops_has(n->op, OPF_UPDATE)) continue;
        int v = g->nodes[n->in[0]].var, k = 0;
        while (k < es->n && es->var[k] != v) k++;
        if (k == es->n) es->var[es->n++] = v;
    }
    es->saved = base_xcalloc((size_t)es->n + 1, sizeof *es->saved);
}

/* The pass's own state: each variable saved, then set to its initial
 * value, so every pass starts alike whatever ran before it. */
static gr_code eval_state_begin(gr_session *s, eval_state *es, gr_status *st)
{
    for (int k = 0; k < es->n; k++) {
        int v = es->var[k];
        size_t bytes = ir_nbytes(&s->g->vars[v].type);
        if (!(es->saved[k] = malloc(bytes ? bytes : 1)))
            return rt_fail(st, GR_ERR_NOMEM, "gr_eval: cannot save variable '%s' (%zu bytes)\n",
                           s->g->vars[v].name, bytes);
        rt_var_read(s, v, es->saved[k]);
        es->n_saved = k + 1;
        gr_code c = sess_var_reset(s, v, st);
        if (c != GR_OK) return c;
    }
    return GR_OK;
}

/* The saved values back, whatever the pass did. */
static void eval_state_end(gr_session *s, eval_state *es)
{
    for (int k = 0; k < es->n_saved; k++) {
        rt_var_write(s, es->var[k], es->saved[k]);
        free(es->saved[k]);
    }
    free(es->saved);
    free(es->var);
}

/* The pass itself: the pause lock held throughout, so no run takes a batch
 * from a cursor the pass has moved (training beside it once re-read the
 * epoch's first batches) or sees the pass's state, and the pass sees one
 * set of weights.  The run counter is given back too: the runs after the
 * pass draw (dropout's masks) what they would have drawn without it. */
static gr_code eval_locked(gr_session *s, const plan_graph *p, rt_exec *e, gr_fetch *f,
                           const eval_pass *ep, eval_tail *t, double *sum, double *tail_sum,
                           gr_status *st)
{
    uint64_t(*saved)[2] = base_xcalloc((size_t)p->n_data_used + 1, sizeof *saved);
    eval_state es = {0};
    eval_state_find(p, &es);
    uint64_t train_steps, runs;
    rt_session_pause(s);
    rt_session_counters(s, &train_steps, &runs);
    eval_cursors(s, p, saved, 0);
    gr_code c = eval_state_begin(s, &es, st);
    if (c == GR_OK) c = eval_run_pass(s, p, e, f, ep, t, sum, tail_sum, st);
    eval_state_end(s, &es);
    eval_cursors(s, p, saved, 1);
    rt_session_set_runs(s, runs);
    rt_session_resume(s);
    free(saved);
    return c;
}

/* The mean: of the batch means when the batches cover the data exactly
 * (as before tails were counted), else over examples, each batch weighted
 * by the examples it holds; summed over the processes that split it. */
static gr_code eval_mean(gr_session *s, const plan_graph *p, const eval_pass *ep, double sum,
                         double tail_sum, double *value, gr_status *st)
{
    int64_t count = ep->batches;
    if (ep->tail) {
        sum = sum * (double)ep->d->batch + tail_sum;
        count = ep->batches * ep->d->batch + ep->tail_rows;
    }
    gr_code c = eval_sharded(s, p) ? dist_eval_total(s->dist, &sum, &count, st) : GR_OK;
    *value = sum / (double)count;
    return c;
}

/* An evaluation under way: its fetch, an executor of its plan and its
 * pass over the data. */
typedef struct eval_call {
    float x;
    gr_fetch f;
    int id, value, pi; /* the target's node, its value's (ir_value_node), its plan */
    rt_exec *e;
    eval_pass ep;
} eval_call;

/* What gr_eval and gr_eval_check start with: the target, whose value is a
 * scalar, an executor fetching it, and a pass over its data it can count
 * (eval_end ends it). */
static gr_code eval_begin(gr_session *s, const char *fn, const char *target, eval_call *ec,
                          gr_status *st)
{
    gr_code bad = sess_check(s, fn, st);
    if (bad != GR_OK) return bad;
    sess_drop_held(s);
    if (!target) return rt_null(st, fn, "target");
    if ((ec->id = sess_find_tensor(s, target, st)) < 0) return GR_ERR_ARG;
    ec->value = ir_value_node(s->g, ec->id);
    const ir_type *t = &s->g->nodes[ec->value].type;
    if (ir_numel(t) != 1 || t->dtype != DT_F32) {
        char b[96];
        return rt_fail(st, GR_ERR_ARG, "%s: '%s' is %s%s, not a scalar\n", fn, target,
                       ec->value != ec->id ? "a group whose first member is " : "",
                       ir_type_str(t, b, sizeof b));
    }
    int is_train;
    ec->f = (gr_fetch){target, &ec->x, sizeof ec->x, NULL};
    gr_code c = sess_acquire(s, target, &ec->f, 1, &ec->e, &ec->pi, &is_train, st);
    if (c != GR_OK) return c;
    c = eval_pass_of(s, exec_plan(ec->e), target, ec->value, &ec->ep, st);
    if (c != GR_OK) sess_release(s, ec->pi, ec->e);
    return c;
}

static void eval_end(gr_session *s, eval_call *ec)
{
    eval_rows_free(&ec->ep.rows);
    sess_release(s, ec->pi, ec->e);
}

gr_code gr_eval(gr_session *s, const char *target, double *value, gr_status *st)
{
    if (!value) return rt_null(st, "gr_eval", "value");
    eval_call ec;
    gr_code c = eval_begin(s, "gr_eval", target, &ec, st);
    if (c != GR_OK) return c;
    const plan_graph *plan = exec_plan(ec.e); /* s->plans may move: not read unlocked */
    eval_tail tail = {0};
    double sum = 0, tail_sum = 0;
    if (ec.ep.tail_rows > 0) c = eval_tail_open(s, target, ec.id, &ec.ep, &tail, st);
    if (c == GR_OK && s->dist) c = dist_refresh(s->dist, st);
    if (c == GR_OK) c = eval_locked(s, plan, ec.e, &ec.f, &ec.ep, &tail, &sum, &tail_sum, st);
    eval_tail_free(&tail, &ec.ep.rows);
    eval_end(s, &ec);
    if (c == GR_OK) c = eval_mean(s, plan, &ec.ep, sum, tail_sum, value, st);
    if (c == GR_OK) rt_ok(st);
    return c;
}

gr_code gr_eval_check(gr_session *s, const char *target, gr_status *st)
{
    eval_call ec;
    gr_code c = eval_begin(s, "gr_eval_check", target, &ec, st);
    if (c != GR_OK) return c;
    eval_end(s, &ec);
    rt_ok(st);
    return GR_OK;
}
