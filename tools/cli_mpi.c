/* cli_mpi.c - the CLI's side of --distributed (docs/distributed.md): MPI's
 * start and end, the check that every rank runs the same schedule, and the
 * note for a process that mpirun started without it.  A program embedding
 * the library starts and ends MPI itself; the CLI, which does not link MPI,
 * asks the library to (gr_mpi_init, gr_mpi_finalize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "train.h"

/* Set when every process failed the same way (cli_mpi_agree): each one
 * then ends by itself, after printing why, instead of aborting the job. */
static int failed_together;

/* MPI itself is started and ended through the library (gr_mpi_init), so
 * that this program does not link it: libgraphrun-mpi.so, opened only for
 * --distributed, does. */
int cli_mpi_start(int *argc, char ***argv, int *rank, int *size)
{
    gr_status *st = gr_status_new();
    gr_code c = gr_mpi_init(argc, argv, rank, size, st);
    if (c != GR_OK) fprintf(stderr, "graphrun: error: --distributed: %s", gr_status_message(st));
    gr_status_free(st);
    return c == GR_OK ? 0 : -1;
}

/* A failed process ends the whole job at once: the others would otherwise
 * wait for it in their next collective. */
int cli_mpi_end(int rc)
{
    gr_mpi_finalize(rc != 0 && !failed_together ? rc : 0);
    return rc;
}

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

/* Each (what, value) compared across the ranks, in order; -1 after
 * printing the first difference or failure. */
static int agree_all(gr_session *s, const char *(*pairs)[2], size_t n, gr_status *st)
{
    for (size_t i = 0; i < n; i++) {
        if (gr_session_dist_agree(s, pairs[i][0], pairs[i][1], st) == GR_OK) continue;
        cli_print_status(st);
        failed_together = gr_status_code(st) == GR_ERR_ARG;
        return -1;
    }
    return 0;
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
    return agree_all(s, pairs, sizeof pairs / sizeof *pairs, st);
}

int cli_mpi_done(const train_opts *o, gr_session *s, gr_status *st)
{
    char step[24];
    snprintf(step, sizeof step, "%llu", (unsigned long long)gr_session_step(s));
    const char *pairs[][2] = {{"the last step", step}};
    if (!o->sess.backup || trep_interrupted()) return 0;
    return agree_all(s, pairs, 1, st);
}

int cli_mpi_check(const train_opts *o, int size)
{
    if (o->sess.backup < size && o->slow_worker < size) return 0;
    failed_together = 1;
    if (o->silent) return CLI_USAGE;
    if (o->sess.backup >= size)
        return cli_usage_error(&cli_train_spec,
                               "--backup %d with %d processes: B must be below the number of "
                               "processes (each step averages P - B gradients)",
                               o->sess.backup, size);
    return cli_usage_error(&cli_train_spec, "--slow %d:...: there are %d ranks, numbered 0 to %d",
                           o->slow_worker, size, size - 1);
}

double cli_mpi_busy(const gr_session *s)
{
    int rank, size;
    double comm = 0;
    gr_session_dist_info(s, &rank, &size, &comm);
    return trep_now() - comm;
}

void cli_mpi_slow(const train_opts *o, const gr_session *s, double busy0)
{
    int rank = 0, size;
    double comm;
    gr_session_dist_info(s, &rank, &size, &comm);
    if (rank == o->slow_worker) train_nap((cli_mpi_busy(s) - busy0) * (o->slow_factor - 1));
}
