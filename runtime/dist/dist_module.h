/* dist_module.h - between the core and libgraphrun-mpi.so, the MPI
 * transport, which the core opens when a distributed session is first made
 * (runtime/modules.c).  The module sees nothing of the session: what it
 * reads and writes of it comes in a dist_host, handed to it at open, and a
 * checkpoint's reader and writer come with the calls that use them.  So the
 * module depends only on what is below the session (the graph, the kernel
 * interface, base/), and its exported surface is one entry function that
 * returns the vtable below.  dist.h says what each call does. */
#ifndef GR_RUNTIME_DIST_MODULE_H
#define GR_RUNTIME_DIST_MODULE_H

#include <stdint.h>

#include "devices/core_calls.h"
#include "devices/device.h"
#include "include/graphrun.h"

typedef struct rt_dist rt_dist;

/* What the module reads and writes of its session (ctx). */
typedef struct dist_host {
    void *ctx;
    const ir_graph *g;                              /* the program's graph */
    gr_distributed mode;                            /* the program's mode */
    const gr_session_options *opt;                  /* the session's options (mpi_comm, seed...) */
    uint64_t (*step)(void *ctx);                    /* gr_session_step */
    void (*var_read)(void *ctx, int vi, void *dst); /* variable vi's bytes */
    void (*var_write)(void *ctx, int vi, const void *src);
    void (*set_step)(void *ctx, uint64_t step); /* backup workers: rank 0's step taken */
} dist_host;

/* A checkpoint's bytes (rank 0 reads them: ckio_read), and its writer. */
typedef gr_code (*dist_reader)(const char *path, uint8_t **buf, size_t *len, gr_status *st);
typedef gr_code (*dist_saver)(void *ctx, const char *path, gr_status *st);

typedef struct dist_module {
    gr_code (*open)(const dist_host *h, rt_dist **out, gr_status *st);
    void (*close)(rt_dist *d);
    gr_code (*agree)(rt_dist *d, const char *what, const char *value, gr_status *st);
    int (*rank)(const rt_dist *d);
    int (*size)(const rt_dist *d);
    int (*data_shards)(const rt_dist *d, int di);
    kern_comm *(*kern_comm)(rt_dist *d);
    double (*comm_seconds)(const rt_dist *d);
    int (*staleness)(rt_dist *d, gr_staleness *out);
    gr_code (*step_begin)(rt_dist *d, gr_status *st);
    gr_code (*step_end)(rt_dist *d, int ran, gr_status *st);
    gr_code (*refresh)(rt_dist *d, gr_status *st);
    gr_code (*read_file)(rt_dist *d, const char *path, dist_reader read, uint8_t **buf, size_t *len,
                         gr_status *st);
    gr_code (*restored)(rt_dist *d, gr_status *st);
    gr_code (*save)(rt_dist *d, const char *path, dist_saver save, void *ctx, gr_status *st);
    gr_code (*eval_total)(rt_dist *d, double *sum, int64_t *batches, gr_status *st);
    gr_code (*mpi_init)(int *argc, char ***argv, int *rank, int *size, gr_status *st);
    void (*mpi_finalize)(int abort_code);
} dist_module;

/* NULL when abi or version is not the module's own (another build). */
const dist_module *grmod_mpi_entry(const core_calls *core, int abi, const char *version);

#endif
