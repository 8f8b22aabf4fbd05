/* summary.c - a session's TensorBoard event file
 * (gr_session_options.tensorboard_dir) and gr_session_scalar: one writer
 * per session behind a mutex, so runs on any number of threads may report,
 * and one curve per tag whose steps only increase. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tfevents.h"

typedef struct summary_tag {
    char *tag;
    int64_t step; /* the last step written */
} summary_tag;

struct rt_summary {
    pthread_mutex_t mu;
    tfev_writer *w;
    summary_tag *tags;
    int n_tags;
};

gr_code rt_summary_open(const char *dir, rt_summary **out, gr_status *st)
{
    char err[512];
    tfev_writer *w = tfev_open(dir, err, sizeof err);
    if (!w) return rt_fail(st, GR_ERR_IO, "tensorboard: %s\n", err);
    rt_summary *m = *out = base_xcalloc(1, sizeof *m);
    m->w = w;
    pthread_mutex_init(&m->mu, NULL);
    return GR_OK;
}

void rt_summary_close(rt_summary *m)
{
    if (!m) return;
    tfev_close(m->w, NULL, 0); /* best effort: gr_session_scalar_flush reports errors */
    for (int i = 0; i < m->n_tags; i++) free(m->tags[i].tag);
    free(m->tags);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* Whether step extends tag's curve; records it when it does. */
static int summary_advance(rt_summary *m, const char *tag, int64_t step)
{
    for (int i = 0; i < m->n_tags; i++) {
        if (strcmp(m->tags[i].tag, tag) != 0) continue;
        if (step <= m->tags[i].step) return 0;
        m->tags[i].step = step;
        return 1;
    }
    m->tags = base_xreallocarray(m->tags, (size_t)m->n_tags + 1, sizeof *m->tags);
    m->tags[m->n_tags++] = (summary_tag){base_xstrdup(tag), step};
    return 1;
}

gr_code gr_session_scalar_flush(gr_session *s, gr_status *st)
{
    if (!s) return rt_null(st, "gr_session_scalar_flush", "session");
    rt_summary *m = rt_session_summary(s);
    char err[512];
    int rc = 0;
    if (m) {
        pthread_mutex_lock(&m->mu);
        rc = tfev_sync(m->w, err, sizeof err);
        pthread_mutex_unlock(&m->mu);
    }
    if (rc < 0) return rt_fail(st, GR_ERR_IO, "tensorboard: %s\n", err);
    rt_ok(st);
    return GR_OK;
}

gr_code gr_session_scalar(gr_session *s, const char *tag, int64_t step, double value, gr_status *st)
{
    if (!s || !tag) return rt_null(st, "gr_session_scalar", s ? "tag" : "session");
    if (!*tag) return rt_fail(st, GR_ERR_ARG, "gr_session_scalar: tag is empty\n");
    rt_summary *m = rt_session_summary(s);
    if (!m)
        return rt_fail(st, GR_ERR_ARG,
                       "gr_session_scalar: the session has no tensorboard_dir (an option of "
                       "gr_session_new)\n");
    if (step < 0) step = (int64_t)gr_session_step(s);
    char err[512];
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    if (summary_advance(m, tag, step))
        rc = tfev_scalar(m->w, tag, step, (float)value, err, sizeof err);
    pthread_mutex_unlock(&m->mu);
    if (rc < 0) return rt_fail(st, GR_ERR_IO, "tensorboard: %s\n", err);
    rt_ok(st);
    return GR_OK;
}
