/* dist.c - dist.h in the core: each call goes to libgraphrun-mpi.so
 * (dist_module.h), opened by the first dist_open.  Without the module,
 * dist_open is an error, so no session has an rt_dist and the calls that
 * need one are never made. */
#include <pthread.h>

#include "dist.h"
#include "runtime/modules.h"
#include "runtime/runtime.h"

/* The module's vtable, or NULL with why: opened once (modules.h), or, linked
 * in (the test library, GR_LINK_MPI), its entry called once here.  Every
 * rt_dist is the module's, so the calls on one read mod without a check. */
static const dist_module *mod;
static const char *mod_why;
static pthread_once_t mod_once = PTHREAD_ONCE_INIT;

static void mod_open(void)
{
#ifdef GR_LINK_MPI
    mod_why = "the linked MPI module is not from this build";
    mod = grmod_mpi_entry(rt_core_calls(), CORE_CALLS_ABI, GR_VERSION_STRING);
#else
    mod = rt_mpi_module(&mod_why);
#endif
}

static const dist_module *mpi_module(const char **why)
{
    pthread_once(&mod_once, mod_open);
    *why = mod_why;
    return mod;
}

gr_code dist_open(const dist_host *h, rt_dist **out, gr_status *st)
{
    const char *why = NULL;
    const dist_module *m = mpi_module(&why);
    *out = NULL;
    if (!m) return rt_fail(st, GR_ERR_ARG, "distributed: %s\n", why);
    return m->open(h, out, st);
}

void dist_close(rt_dist *d)
{
    if (d) mod->close(d);
}

gr_code dist_agree(rt_dist *d, const char *what, const char *value, gr_status *st)
{
    return mod->agree(d, what, value, st);
}

int dist_rank(const rt_dist *d)
{
    return d ? mod->rank(d) : 0;
}

int dist_size(const rt_dist *d)
{
    return d ? mod->size(d) : 1;
}

int dist_data_shards(const rt_dist *d, int di)
{
    return d ? mod->data_shards(d, di) : 1;
}

kern_comm *dist_kern_comm(rt_dist *d)
{
    return d ? mod->kern_comm(d) : NULL;
}

double dist_comm_seconds(const rt_dist *d)
{
    return d ? mod->comm_seconds(d) : 0;
}

int dist_staleness(rt_dist *d, gr_staleness *out)
{
    return d ? mod->staleness(d, out) : 0;
}

gr_code dist_step_begin(rt_dist *d, gr_status *st)
{
    return mod->step_begin(d, st);
}

gr_code dist_step_end(rt_dist *d, int ran, gr_status *st)
{
    return mod->step_end(d, ran, st);
}

gr_code dist_refresh(rt_dist *d, gr_status *st)
{
    return mod->refresh(d, st);
}

gr_code dist_read_file(rt_dist *d, const char *path, dist_reader read, uint8_t **buf, size_t *len,
                       gr_status *st)
{
    return mod->read_file(d, path, read, buf, len, st);
}

gr_code dist_restored(rt_dist *d, gr_status *st)
{
    return mod->restored(d, st);
}

gr_code dist_save(rt_dist *d, const char *path, dist_saver save, void *ctx, gr_status *st)
{
    return mod->save(d, path, save, ctx, st);
}

gr_code dist_eval_total(rt_dist *d, double *sum, int64_t *batches, gr_status *st)
{
    return mod->eval_total(d, sum, batches, st);
}

/* ---- the API for programs that leave MPI to graphrun (the CLI) ---- */

static int started; /* gr_mpi_init started MPI: gr_mpi_finalize ends it */

gr_code gr_mpi_init(int *argc, char ***argv, int *rank, int *size, gr_status *st)
{
    if (!rank) return rt_null(st, "gr_mpi_init", "rank");
    if (!size) return rt_null(st, "gr_mpi_init", "size");
    const char *why = NULL;
    const dist_module *m = mpi_module(&why);
    if (!m) return rt_fail(st, GR_ERR_ARG, "%s\n", why);
    gr_code c = m->mpi_init(argc, argv, rank, size, st);
    started = c == GR_OK || c == GR_ERR_IO; /* IO: started, at too low a thread level */
    return c;
}

void gr_mpi_finalize(int abort_code)
{
    if (!started) return;
    started = 0;
    mod->mpi_finalize(abort_code);
}
