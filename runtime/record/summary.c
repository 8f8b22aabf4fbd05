/* summary.c - a session's TensorBoard event file
 * (gr_session_options.tensorboard_dir), written for gr_session_scalar
 * (runtime/session/session.c): one writer per session behind a mutex, so
 * runs on any number of threads may report, and one curve per tag whose
 * steps only increase.  It knows no session. */
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

int rt_summary_sync(rt_summary *m, char *err, size_t errlen)
{
    pthread_mutex_lock(&m->mu);
    int rc = tfev_sync(m->w, err, errlen);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int rt_summary_scalar(rt_summary *m, const char *tag, int64_t step, double value, char *err,
                      size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    if (summary_advance(m, tag, step)) rc = tfev_scalar(m->w, tag, step, (float)value, err, errlen);
    pthread_mutex_unlock(&m->mu);
    return rc;
}
