/* vars.c - a session's variables: one buffer per variable on its device,
 * with its initial value, and the API that reads and writes them
 * (gr_variable_read / _get / _write) while runs are paused. */
#include <stdlib.h>

#include "session_int.h"

/* Computed on the host (in place where the device's memory is the host's),
 * then copied to the variable's device, so values are the same bit for bit
 * on every device. */
gr_code sess_var_reset(gr_session *s, int i, gr_status *st)
{
    const ir_var *v = &s->g->vars[i];
    device_obj *d = rt_device(s, v->device);
    size_t n = ir_nbytes(&v->type);
    char h[32];
    if (!d->vt->async) {
        rt_init_var(v, s->var[i], s->opt.seed);
        return GR_OK;
    }
    float *host = malloc(n ? n : 1);
    if (!host)
        return rt_fail_at(st, GR_ERR_NOMEM, &s->g->nodes[v->node],
                          "cannot allocate the host copy of variable '%s': %s", v->name,
                          rt_human_bytes(n, h, sizeof h));
    rt_init_var(v, host, s->opt.seed);
    d->vt->to_device(d, s->var[i], host, n);
    free(host);
    return GR_OK;
}

/* Variable i allocated on its device, with its initial value. */
static gr_code init_var(gr_session *s, int i, gr_status *st)
{
    const ir_var *v = &s->g->vars[i];
    device_obj *d = rt_device(s, v->device);
    size_t n = ir_nbytes(&v->type);
    char h[32];
    if (!(s->var[i] = d->vt->alloc(d, n)))
        return rt_fail_at(st, GR_ERR_NOMEM, &s->g->nodes[v->node],
                          "cannot allocate variable '%s' on %s: %s", v->name, d->vt->name,
                          rt_human_bytes(n, h, sizeof h));
    return sess_var_reset(s, i, st);
}

gr_code sess_vars_init(gr_session *s, gr_status *st)
{
    const ir_graph *g = s->g;
    s->var = base_xcalloc((size_t)g->n_vars + 1, sizeof *s->var);
    s->var_lock = base_xcalloc((size_t)g->n_vars + 1, sizeof *s->var_lock);
    for (int i = 0; i < g->n_vars; i++) {
        dev_var_lock *l = &s->var_lock[i];
        pthread_mutex_init(&l->mu, NULL);
        l->dev = rt_device(s, g->vars[i].device);
        if (l->dev->vt->enqueues) l->ev = l->dev->vt->event_new(l->dev);
    }
    gr_code c = GR_OK;
    for (int i = 0; i < g->n_vars && c == GR_OK; i++) c = init_var(s, i, st);
    return c;
}

void sess_vars_free(gr_session *s)
{
    for (int i = 0; s->var && i < s->g->n_vars; i++) {
        device_obj *d = rt_device(s, s->g->vars[i].device);
        if (s->var[i]) d->vt->free(d, s->var[i]);
        dev_var_lock *l = &s->var_lock[i];
        if (l->ev) d->vt->event_free(d, l->ev);
        pthread_mutex_destroy(&l->mu);
    }
    free(s->var);
    free(s->var_lock);
    s->var = NULL;
    s->var_lock = NULL;
}

void rt_var_read(gr_session *s, int vi, void *dst)
{
    device_obj *d = rt_device(s, s->g->vars[vi].device);
    d->vt->to_host(d, dst, s->var[vi], ir_nbytes(&s->g->vars[vi].type));
}

void rt_var_write(gr_session *s, int vi, const void *src)
{
    device_obj *d = rt_device(s, s->g->vars[vi].device);
    d->vt->to_device(d, s->var[vi], src, ir_nbytes(&s->g->vars[vi].type));
}

static gr_code var_find(gr_session *s, const char *fn, const char *name, int *vi, gr_status *st)
{
    gr_code bad = sess_check(s, fn, st);
    if (bad != GR_OK) return bad;
    if (!name) return rt_null(st, fn, "name");
    *vi = ir_find_var(s->g, name);
    if (*vi < 0) return rt_fail(st, GR_ERR_ARG, "%s: no variable named '%s'\n", fn, name);
    return GR_OK;
}

/* gr_variable_read and _write: the variable, and a buffer of its size. */
static gr_code var_lookup(gr_session *s, const char *fn, const char *name, const void *data,
                          size_t bytes, int *vi, gr_status *st)
{
    gr_code c = var_find(s, fn, name, vi, st);
    if (c != GR_OK) return c;
    if (!data) return rt_null(st, fn, "data");
    size_t want = ir_nbytes(&s->g->vars[*vi].type);
    if (bytes != want)
        return rt_fail(st, GR_ERR_ARG, "%s: variable '%s' has %zu bytes, not %zu\n", fn, name, want,
                       bytes);
    return GR_OK;
}

gr_code gr_variable_read(gr_session *s, const char *name, void *data, size_t bytes, gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, "gr_variable_read", name, data, bytes, &vi, st);
    if (c != GR_OK) return c;
    rt_session_pause(s);
    rt_var_read(s, vi, data);
    rt_session_resume(s);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_variable_get(gr_session *s, const char *name, gr_tensor **out, gr_status *st)
{
    if (!out) return rt_null(st, "gr_variable_get", "out");
    *out = NULL;
    int vi = -1;
    gr_code c = var_find(s, "gr_variable_get", name, &vi, st);
    if (c == GR_OK) c = rt_tensor_like(&s->g->vars[vi].type, out, st);
    if (c != GR_OK) return c;
    rt_session_pause(s);
    rt_var_read(s, vi, gr_tensor_data(*out));
    rt_session_resume(s);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_variable_write(gr_session *s, const char *name, const void *data, size_t bytes,
                          gr_status *st)
{
    int vi = -1;
    gr_code c = var_lookup(s, "gr_variable_write", name, data, bytes, &vi, st);
    if (c != GR_OK) return c;
    rt_session_pause(s);
    rt_var_write(s, vi, data);
    rt_session_resume(s);
    rt_ok(st);
    return GR_OK;
}
