/* dist_none.c - dist.h in a build without MPI: opening a distributed
 * session is an error, so no session has an rt_dist and the calls that
 * need one are never made. */
#include "dist.h"
#include "runtime/runtime.h"

gr_code dist_open(gr_session *s, rt_dist **slot, gr_status *st)
{
    (void)s, (void)slot;
    return rt_fail(st, GR_ERR_ARG,
                   "distributed: this graphrun was built without MPI (install libopenmpi-dev "
                   "and configure with -DGR_MPI=ON)\n");
}

void dist_close(rt_dist *d)
{
    (void)d;
}

int dist_rank(const rt_dist *d)
{
    (void)d;
    return 0;
}

int dist_size(const rt_dist *d)
{
    (void)d;
    return 1;
}

int dist_data_shards(const rt_dist *d, int di)
{
    (void)d, (void)di;
    return 1;
}

kern_comm *dist_kern_comm(rt_dist *d)
{
    (void)d;
    return NULL;
}

double dist_comm_seconds(const rt_dist *d)
{
    (void)d;
    return 0;
}

#define NO_SESSION fatal("%s: no distributed session in a build without MPI", __func__)

gr_code dist_step_begin(gr_session *s, gr_status *st)
{
    (void)s, (void)st;
    NO_SESSION;
}

gr_code dist_step_end(gr_session *s, int ran, gr_status *st)
{
    (void)s, (void)ran, (void)st;
    NO_SESSION;
}

gr_code dist_refresh(gr_session *s, gr_status *st)
{
    (void)s, (void)st;
    NO_SESSION;
}

gr_code dist_read_file(gr_session *s, const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    (void)s, (void)path, (void)buf, (void)len, (void)st;
    NO_SESSION;
}

gr_code dist_restored(gr_session *s, gr_status *st)
{
    (void)s, (void)st;
    NO_SESSION;
}

gr_code dist_save(gr_session *s, const char *path,
                  gr_code (*save)(gr_session *s, const char *path, gr_status *st), gr_status *st)
{
    (void)s, (void)path, (void)save, (void)st;
    NO_SESSION;
}

gr_code dist_agree(gr_session *s, const char *what, const char *value, gr_status *st)
{
    (void)s, (void)what, (void)value, (void)st;
    NO_SESSION;
}

gr_code dist_eval_total(gr_session *s, double *sum, int64_t *batches, gr_status *st)
{
    (void)s, (void)sum, (void)batches, (void)st;
    NO_SESSION;
}
