/* schedule.c - mpi_schedule, the embedding side of tests/mpi/run.sh's
 * schedule cases: two ranks train tests/mpi/tiny.graph through the public
 * API, and one of them leaves the collective schedule
 * (docs/distributed.md, "Failure").
 *
 *   mpi_schedule MODEL CASE [MODE]
 *   CASE  together  both ranks: 10 steps, an evaluation, a save, a restore
 *         leave     rank 1 frees its session after 3 steps; rank 0 goes on to 10
 *         stop      rank 1 stops calling after 3 steps (sleeps for a minute)
 *         eval      rank 1 evaluates after 3 steps while rank 0 trains
 *         target    rank 1 trains another target (other lengths to average)
 *         agree     rank 1 gives gr_session_dist_agree another value
 *   MODE  sync (default), async, or every (async with sync_every 2)
 *
 * A failed call prints "rank R: MESSAGE" and ends the job (MPI_Abort), as
 * the header asks.  A gr_session_dist_agree difference, which every rank
 * finds, is printed by each and ends each cleanly with exit status 3. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun.h"

static int rank;

static void die(const gr_status *st)
{
    fprintf(stderr, "rank %d: %s", rank, gr_status_message(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static const char *target = "train";

static void train(gr_session *s, int steps, gr_status *st)
{
    for (int i = 0; i < steps; i++)
        if (gr_run(s, target, NULL, 0, NULL, 0, st) != GR_OK) die(st);
}

/* Both ranks: the same calls, every kind of collective. */
static void together(gr_session *s, gr_status *st)
{
    double loss = 0;
    train(s, 10, st);
    if (gr_eval(s, "loss", &loss, st) != GR_OK || gr_session_save(s, "together.st", st) != GR_OK ||
        gr_session_restore(s, "together.st", NULL, st) != GR_OK)
        die(st);
    train(s, 2, st);
}

static int run_case(gr_session *s, const char *what, gr_status *st)
{
    double loss = 0;
    if (strcmp(what, "together") == 0) {
        together(s, st);
        return 0;
    }
    if (strcmp(what, "agree") == 0) {
        if (gr_session_dist_agree(s, "--colour", rank ? "blue" : "red", st) == GR_OK) return 0;
        fprintf(stderr, "rank %d: %s", rank, gr_status_message(st));
        return 3;
    }
    if (rank == 1 && strcmp(what, "target") == 0) target = "train_b";
    train(s, rank == 1 && strcmp(what, "target") != 0 ? 3 : 10, st);
    if (rank == 1 && strcmp(what, "stop") == 0) sleep(60);
    if (rank == 1 && strcmp(what, "eval") == 0 && gr_eval(s, "loss", &loss, st) != GR_OK) die(st);
    return 0;
}

int main(int argc, char **argv)
{
    int level = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_schedule MODEL CASE [sync|async|every]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argc > 3 ? argv[3] : "sync";
    gr_compile_options co = {.distributed = strcmp(mode, "sync") ? GR_DIST_ASYNC : GR_DIST_SYNC};
    gr_session_options so = {.threads = 1, .sync_every = strcmp(mode, "every") ? 0 : 2};
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    if (gr_compile_file(argv[1], &co, &p, st) != GR_OK || gr_session_new(p, &so, &s, st) != GR_OK)
        die(st);
    int rc = run_case(s, argv[2], st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    MPI_Finalize();
    return rc;
}
