/* cli_mpi.c - the CLI's side of --distributed (docs/distributed.md): MPI's
 * start and end, the check that every rank runs the same schedule, and the
 * note for a process that mpirun started without it.  The library never
 * starts or ends MPI; a program embedding it does, as this file does for
 * the CLI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* Set when every process failed the same way (cli_mpi_agree): each one
 * then ends by itself, after printing why, instead of aborting the job. */
static int failed_together;

#ifdef GR_HAVE_MPI
#include <mpi.h>

static int started;

int cli_mpi_start(int *argc, char ***argv, int *rank, int *size)
{
    int level = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level) != MPI_SUCCESS) {
        fprintf(stderr, "graphrun: error: --distributed: MPI_Init_thread failed\n");
        return -1;
    }
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (level >= MPI_THREAD_SERIALIZED) return 0;
    fprintf(stderr,
            "graphrun: error: rank %d: this MPI gives thread level %d, below "
            "MPI_THREAD_SERIALIZED\n",
            *rank, level);
    return -1;
}

/* A failed process ends the whole job at once: the others would otherwise
 * wait for it in their next collective. */
int cli_mpi_end(int rc)
{
    if (!started) return rc;
    if (rc != 0 && !failed_together) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
    return rc;
}
#else
int cli_mpi_start(int *argc, char ***argv, int *rank, int *size)
{
    (void)argc, (void)argv, (void)rank, (void)size;
    fprintf(stderr, "graphrun: error: --distributed: this graphrun was built without MPI "
                    "(install libopenmpi-dev and configure with -DGR_MPI=ON)\n");
    return -1;
}

int cli_mpi_end(int rc)
{
    return rc;
}
#endif

void cli_mpi_note(void)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!size || atoi(size) < 2 || !rank || atoi(rank) != 0) return;
    fprintf(stderr,
            "graphrun: note: started by mpirun as %s processes, but without "
            "--distributed: each trains alone (add --distributed sync or async)\n",
            size);
}

/* "a,b", or "(none)". */
static const char *join_evals(const train_opts *o, char *buf, size_t len)
{
    size_t used = 0;
    snprintf(buf, len, "(none)");
    for (int i = 0; i < o->n_evals && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", o->evals[i]);
    return buf;
}

static const char *given(const char *path)
{
    return path ? "(given)" : "(none)";
}

/* What decides the collectives a rank makes, beyond the session's own
 * options (gr_session_new compares those): the checkpoint and restore
 * paths may differ, rank 0's are the ones used. */
void cli_mpi_session_failed(const gr_status *st)
{
    static const char together[] = "distributed: rank ";
    if (gr_status_code(st) == GR_ERR_ARG &&
        strncmp(gr_status_message(st), together, sizeof together - 1) == 0)
        failed_together = 1;
}

int cli_mpi_agree(const train_opts *o, gr_session *s, gr_status *st)
{
    char steps[24], every[24], ckpt_every[24], evals[1024];
    snprintf(steps, sizeof steps, "%ld", o->steps);
    snprintf(every, sizeof every, "%ld", o->eval_every);
    snprintf(ckpt_every, sizeof ckpt_every, "%ld", o->ckpt_every);
    const char *pairs[][2] = {{"--target", o->target},
                              {"--steps", steps},
                              {"--eval", join_evals(o, evals, sizeof evals)},
                              {"--eval-every", every},
                              {"--checkpoint", given(o->ckpt_path)},
                              {"--checkpoint-every", ckpt_every},
                              {"--restore", given(o->restore_path)},
                              {"--init-from", given(o->init_path)},
                              {"--allow-missing", o->restore.allow_missing ? "on" : "off"}};
    if (!o->comp.distributed) return 0;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        if (gr_session_dist_agree(s, pairs[i][0], pairs[i][1], st) == GR_OK) continue;
        cli_print_status(st);
        failed_together = gr_status_code(st) == GR_ERR_ARG;
        return -1;
    }
    return 0;
}
