/* readers.c - a session's data readers: one slot per data source, opened
 * when a plan (or a restored cursor) first needs it, closed with the
 * session. */
#include <stdlib.h>

#include "runtime/dist/dist.h"
#include "session_int.h"

void sess_readers_alloc(gr_session *s)
{
    s->readers = base_xcalloc((size_t)s->g->n_data + 1, sizeof *s->readers);
}

void sess_readers_close(gr_session *s)
{
    for (int i = 0; s->readers && i < s->g->n_data; i++) data_close(s->readers[i]);
    free((void *)s->readers);
    s->readers = NULL;
}

/* Loading a data set can take seconds: it happens under readers_mu, never
 * s->mu, so runs of plans that are ready go on meanwhile. */
gr_code rt_open_reader(gr_session *s, int di, gr_status *st)
{
    if (s->readers[di]) return GR_OK;
    const ir_data *d = &s->g->data[di];
    data_spec spec;
    char err[512];
    rt_data_spec(d, &spec);
    spec.seed ^= s->opt.seed;
    spec.shards = dist_data_shards(s->dist, di);
    spec.shard = spec.shards > 1 ? dist_rank(s->dist) : 0;
    pthread_mutex_lock(&s->readers_mu);
    data_reader *r = s->readers[di] ? s->readers[di] : data_open(&spec, err, sizeof err);
    if (r) s->readers[di] = r;
    pthread_mutex_unlock(&s->readers_mu);
    if (r) return GR_OK;
    int line = 0, col = 0;
    src_linecol(d->src, d->span.begin, &line, &col);
    return rt_fail(st, GR_ERR_DATA, "%s:%d:%d: error: data '%s': %s\n", d->src->name, line, col,
                   d->name, err);
}

gr_code sess_readers_open(gr_session *s, const plan_graph *p, gr_status *st)
{
    gr_code c = GR_OK;
    for (int k = 0; k < p->n_data_used && c == GR_OK; k++)
        c = rt_open_reader(s, p->data_used[k], st);
    return c;
}

void rt_readers_each(gr_session *s, void (*fn)(data_reader *r, int di, void *ctx), void *ctx)
{
    pthread_mutex_lock(&s->mu);
    for (int d = 0; d < s->g->n_data; d++)
        if (s->readers[d]) fn(s->readers[d], d, ctx);
    pthread_mutex_unlock(&s->mu);
}
