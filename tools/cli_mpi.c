/* cli_mpi.c - the CLI's side of --distributed (docs/distributed.md): MPI's
 * start and end, and the note for a process that mpirun started without
 * it.  The library never starts or ends MPI; a program embedding it does,
 * as this file does for the CLI. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

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
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
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
